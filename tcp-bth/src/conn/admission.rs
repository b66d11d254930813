//! Receiver-driven admission: the byte grant an R=1 segment carries (spec, "Special forms":
//! with R=1 the 24-bit offset field is a grant in 4 KiB units), computed by the data receiver
//! from what it has posted and enforced by the data sender, as a collective library's
//! clear-to-send does (`docs/stack.md`, "Receiver-driven admission").
//!
//! **What a grant means.** It counts from the ACK number of the segment that carries it: the
//! receiver admits stream bytes up to `ACK + grant` (its *edge*), as a TCP window counts from
//! its segment's ACK. So a grant needs no update when bytes arrive that it was computed for:
//! a SEND byte that fills a posted receive moves RCV.NXT up and the unfilled bytes down, and the
//! edge stays. Posting (receives, READ sinks) moves the edge forward, and so do bytes that the
//! allowance admits (WRITE, READ requests), since the allowance slides with RCV.NXT.
//!
//! **Receiver.** The grant is the unfilled bytes of the posted receives and READ sinks
//! (placement keeps them) plus `Config::admission_allowance`, at most `Config::admission_cap`,
//! rounded up to whole units (rounded down, a receive under 4 KiB would admit nothing). An R=1
//! is owed when the credit MSN changes (`post_recv`); when the peer knows of less than half the
//! room we would admit now (`note_grant_growth`, after in-order arrivals and READ posts: the
//! receiver side of silly-window avoidance, RFC 9293 §3.8.6.2.2, so a WRITE stream draws an R=1
//! per half grant, not per ACK); once after the handshake (`negotiate` owes it, the passive
//! opener sends it when established); and in answer to any segment outside our window, a
//! persist probe included: that is how a lost update is repeated.
//!
//! **Sender.** Keeps `SND.NXT` within the edge of the newest grant (`admission_room`), besides
//! cwnd and the peer's window; retransmissions are not limited (their bytes were admitted when
//! first sent). Before the first grant nothing is limited: a peer that never sends one (plain
//! TCP, another implementation of the option) still works. New data held by the grant alone
//! with nothing in flight arms the persist probe at twice the smoothed RTT (not the RTO): its
//! answer repeats the grant, so a lost update costs a few round trips and a zero grant waits,
//! probing with backoff, until the receiver posts.

use super::*;
use bth_cc::ReceiverAdmission;

/// What our latest R=1 segment granted the peer, in our receive stream offsets.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Advertised {
    /// The edge it admitted bytes up to (its ACK plus its grant); None before the first.
    edge: Option<u64>,
}

/// Shortest wait before a probe for a grant (the persist timer's minimum otherwise is the RTO).
const MIN_GRANT_PROBE: Duration = Duration::from_micros(200);

impl Connection {
    /// Receiver: bytes we admit beyond RCV.NXT right now.
    fn admissible(&self) -> u64 {
        let RxPath::Bth(rx) = &self.rx else {
            return 0;
        };
        let p = &rx.placement;
        let room = p
            .unfilled_recv_bytes()
            .saturating_add(p.unfilled_read_bytes())
            .saturating_add(u64::from(self.cfg.admission_allowance));
        match self.cfg.admission_cap {
            Some(cap) => room.min(u64::from(cap).max(bth_cc::GRANT_UNIT)),
            None => room,
        }
    }

    /// Receiver: the grant (units) for the R=1 segment being built, remembered as advertised.
    pub(super) fn advertise_grant(&mut self) -> u32 {
        let units = ReceiverAdmission::grant_covering(self.admissible());
        let nxt = self.rcv.nxt;
        if let RxPath::Bth(rx) = &mut self.rx {
            let edge = nxt.saturating_add(ReceiverAdmission::units_to_bytes(units));
            rx.advertised.edge = Some(edge);
        }
        self.stats.grants_sent += 1;
        units
    }

    /// Receiver: after in-order arrivals or a READ posted, owe an R=1 when the peer knows of
    /// less than half the room we would admit now: the room left under our last grant
    /// (`advertised edge - RCV.NXT`) is less than the growth since (`edge now - advertised
    /// edge`). For a stream of WRITE bytes that is one R=1 per half grant; for a READ sink
    /// posted while the peer has used up its grant, at once.
    pub(super) fn note_grant_growth(&mut self) {
        let RxPath::Bth(rx) = &self.rx else {
            return;
        };
        let edge = self.rcv.nxt.saturating_add(self.admissible());
        let owed = match rx.advertised.edge {
            None => true,
            Some(advertised) => {
                let known = advertised.saturating_sub(self.rcv.nxt);
                edge.saturating_sub(advertised) > known
            }
        };
        if owed {
            self.owed.credit = true;
            self.owed.ack = true;
        }
    }

    /// Sender: new bytes the peer's grant admits now; unlimited with admission off, in plain
    /// mode, or before the first grant.
    pub(super) fn admission_room(&self) -> u64 {
        if !self.cfg.admission || !matches!(self.mode, Mode::Bth { .. }) {
            return u64::MAX;
        }
        self.snd.grant_room()
    }

    /// Sender: new data is held by the grant alone (cwnd, window and credit would let it go).
    /// Counts the hold once, and arms the probe that draws a fresh grant if nothing is in flight.
    pub(super) fn note_grant_hold(&mut self, now: Duration) {
        if self.snd.start_grant_hold(now) {
            self.stats.grant_holds += 1;
        }
        if !self.snd.rec.is_empty() || self.snd.fin().sent() {
            // ACKs of what is in flight come first; the probe is for an idle sender.
            return;
        }
        let srtt = self.snd.rtt.srtt().unwrap_or_else(|| self.snd.rtt.rto());
        let backoff = 1u32 << self.persist_backoff.min(10);
        let wait = (srtt * 2)
            .max(MIN_GRANT_PROBE)
            .saturating_mul(backoff)
            .min(self.cfg.max_rto);
        let at = now + wait;
        let sooner = self.timers.get(Timer::Persist).is_none_or(|t| at < t);
        if sooner {
            self.timers.set(Timer::Persist, at);
        }
    }

    /// Sender: the grant no longer holds new data back; the hold's time is counted.
    pub(super) fn end_grant_hold(&mut self, now: Duration) {
        if let Some(held) = self.snd.end_grant_hold(now) {
            self.stats.grant_held += held;
        }
    }
}
