//! SEGMENT ARRIVES (RFC 9293 §3.10.7), with RFC 5961 defences, PAWS (RFC 7323 §5) and, in BTH
//! mode, direct placement of each data segment at its message offset.

use super::handshake::Fin;
use super::*;

use crate::wire::{Bth, TcpRepr, Timestamps};

/// A range of stream offsets, `[start, end)`.
type Range = (u64, u64);

/// Least time between two ACKs that answer segments we dropped without data to report:
/// out-of-window segments without payload, PAWS drops and RFC 5961 challenges share it, as
/// Linux's `tcp_oow_rate_limited` shares `tcp_invalid_ratelimit` (500 ms). Two ends that each
/// take the other's ACKs for out-of-window would otherwise answer each other without end.
const OOW_ACK_INTERVAL: Duration = Duration::from_millis(500);

/// Least time between two RSTs resent to a peer that keeps sending after ours.
const RST_RESEND_INTERVAL: Duration = Duration::from_millis(1);

/// Rate limiter for answers: true (and `last` moves to `now`) when `interval` has passed since
/// the last answer allowed.
fn allow(last: &mut Option<Duration>, now: Duration, interval: Duration) -> bool {
    if last.is_some_and(|t| now.saturating_sub(t) < interval) {
        return false;
    }
    *last = Some(now);
    true
}

impl Connection {
    /// Process one received TCP segment (header + payload, no IP header).
    pub fn handle_segment(&mut self, now: Duration, bytes: &[u8]) {
        self.handle_segment_checked(now, bytes, false)
    }

    /// [`handle_segment`](Self::handle_segment) for a segment whose TCP checksum the data
    /// path has already vouched for (checksum offload): the checksum pass is skipped.
    pub fn handle_verified_segment(&mut self, now: Duration, bytes: &[u8]) {
        self.handle_segment_checked(now, bytes, true)
    }

    /// One of the two above, as `verified` says (the endpoint passes on what its driver told
    /// it).
    pub(crate) fn handle_segment_checked(&mut self, now: Duration, bytes: &[u8], verified: bool) {
        self.on_segment(now, bytes, verified);
        self.arm_keepalive();
        self.note_events();
    }

    fn on_segment(&mut self, now: Duration, bytes: &[u8], verified: bool) {
        self.stats.segments_in += 1;
        let ip = (!verified).then_some(self.cfg.ip.reversed());
        let seg = match TcpRepr::parse(bytes, ip) {
            Ok(s) => s,
            Err(_) => {
                self.stats.malformed += 1;
                return;
            }
        };
        if seg.dst_port != self.cfg.local_port || seg.src_port != self.cfg.remote_port {
            self.stats.malformed += 1;
            return;
        }
        // The ICRC covers what placement trusts; check it before anything else reads the BTH.
        // An S-framed data segment has none (its TCP checksum is the check, amendment 3).
        if let Some(b) = &seg.options.bth {
            if b.carries_icrc() && !b.icrc_ok(seg.payload) {
                self.stats.icrc_errors += 1;
                return;
            }
        }
        match self.state {
            State::Closed => self.on_closed(now, &seg),
            State::SynSent => self.on_syn_sent(now, &seg),
            _ => self.on_synchronized(now, &seg),
        }
    }

    /// A reordered duplicate ACK that PAWS would drop but that cannot be a replay (Linux's
    /// `tcp_disordered_ack`): a pure ACK at RCV.NXT acknowledging exactly SND.UNA, changing no
    /// window, with a TSval less than an RTO older than `ts_recent`. Under reordering such ACKs
    /// are common (they carry SACK blocks the sender needs), and dropping each one drew another
    /// ACK in answer.
    fn disordered_ack(&self, seg: &TcpRepr<'_>, seg_off: i64, tsval: u32, recent: u32) -> bool {
        let pure = pure_ack(seg);
        let dup = self.snd.off_of(seg.ack) == self.snd.una() as i64;
        let wnd = u64::from(seg.window) << self.neg.peer_wscale;
        let updates_window = self
            .snd
            .would_take_window(seg_off, wnd, |s| self.rcv.off_of(s));
        pure && seg_off == self.rcv.nxt as i64
            && dup
            && !updates_window
            && self.within_replay_window(tsval, recent)
    }

    /// A TSval older than `ts_recent` by less than an RTO: reordering, not a replay of an old
    /// segment (which PAWS exists to refuse).
    fn within_replay_window(&self, tsval: u32, recent: u32) -> bool {
        let replay_window = self
            .snd
            .rtt
            .rto()
            .as_micros()
            .min(u128::from(u32::MAX >> 1)) as u32;
        recent.wrapping_sub(tsval) <= replay_window
    }

    /// A pure ACK the peer sent before data of its own that overtook it on the way: it sits
    /// below RCV.NXT, where RFC 9293's test for a segment without data refuses it. Data
    /// segments carry no SACK blocks (no room beside the BTH option; in plain mode they ride on
    /// pure ACKs only), so such an ACK may hold the only report of what the peer has received
    /// out of order, and under reordering in both directions thousands of them were dropped a
    /// run, each drawing another ACK in answer. It is taken for what it says about our data
    /// (SACK and D-SACK blocks, credit and grant) and nothing else: it acknowledges nothing
    /// new (SEG.ACK =< SND.UNA: the data that overtook it acknowledged as much), it lies within
    /// a receive window of RCV.NXT, and it moves neither the send window (`on_ack`) nor
    /// `ts_recent`. Its TSval is checked like a disordered ACK's (`on_synchronized`). One
    /// exactly one below RCV.NXT is no late ACK but a probe (the keep-alive form the persist timer sends, RFC 9293 §3.8.4): it is
    /// refused and answered, as the probe asks.
    fn late_pure_ack(&self, seg: &TcpRepr<'_>, seg_off: i64) -> bool {
        let pure = pure_ack(seg);
        let nxt = self.rcv.nxt as i64;
        // Not before the handshake is done: nothing of the peer's can have overtaken it.
        pure && self.state.synchronized()
            && seg_off < nxt - 1
            && seg_off >= nxt - i64::from(self.cfg.recv_window)
            && self.snd.off_of(seg.ack) <= self.snd.una() as i64
    }

    /// CLOSED after a failure we reported with RST: a peer that keeps sending (our RST was lost,
    /// or it was outside the peer's window and drew a challenge ACK) gets the RST again, at the
    /// sequence number it acknowledges (RFC 9293 §3.10.7.1), with the NAK if there was one.
    /// Rate-limited like challenge ACKs.
    fn on_closed(&mut self, now: Duration, seg: &TcpRepr<'_>) {
        let we_reset = self.error.as_ref().is_some_and(ConnectionError::sent_rst);
        if we_reset
            && !seg.flags.rst()
            && seg.flags.ack()
            && allow(&mut self.last_rst_resend, now, RST_RESEND_INTERVAL)
        {
            self.owed.rst = Some(seg.ack);
        }
    }

    /// Timestamps of a segment: folded into the BTH, or the RFC 7323 option in plain mode.
    fn seg_timestamps(&self, seg: &TcpRepr<'_>) -> Option<Timestamps> {
        match self.mode {
            Mode::Bth { .. } => match seg.options.bth {
                Some(b) => b.timestamps,
                // Amendment 1's plain-form pure ACK: the same TSval clock, in the RFC 7323
                // option.
                None => seg.options.timestamps,
            },
            _ if self.neg.ts_ok => seg.options.timestamps,
            _ => None,
        }
    }

    fn acceptable(&self, seg_off: i64, seg_len: u64) -> bool {
        let nxt = self.rcv.nxt as i64;
        let wnd = self.rcv_window() as i64;
        let in_wnd = |o: i64| o >= nxt && o < nxt + wnd;
        match (seg_len, wnd) {
            (0, 0) => seg_off == nxt,
            (0, _) => in_wnd(seg_off),
            (_, 0) => false,
            (l, _) => in_wnd(seg_off) || in_wnd(seg_off + l as i64 - 1),
        }
    }

    /// RFC 5961 §5: challenge ACKs, rate-limited so they cannot be used to amplify.
    fn challenge_ack(&mut self, now: Duration) {
        if self.oow_ack(now) {
            self.stats.challenge_acks += 1;
        }
    }

    /// An ACK answering a segment we dropped, at most one per [`OOW_ACK_INTERVAL`]; true if
    /// one is owed now. Those refused are counted.
    fn oow_ack(&mut self, now: Duration) -> bool {
        if allow(&mut self.last_oow_ack, now, OOW_ACK_INTERVAL) {
            self.owed.ack = true;
            return true;
        }
        self.stats.oow_acks_limited += 1;
        false
    }

    fn on_synchronized(&mut self, now: Duration, seg: &TcpRepr<'_>) {
        let f = seg.flags;
        if self.state == State::SynReceived
            && f.syn()
            && f.ack()
            && !f.rst()
            && seg.seq == self.rcv.irs
        {
            // Simultaneous open (RFC 9293 §3.5, figure 7): the peer's SYN-ACK repeats its SYN
            // (so it sits below RCV.NXT) and acknowledges ours.
            if seg.ack == self.snd.iss().wrapping_add(1) {
                self.on_syn_acked(now);
                self.state = State::Established;
                // Window fields in SYN segments are never scaled (RFC 7323 §2.2).
                self.snd
                    .take_window(u64::from(seg.window), seg.seq, seg.ack);
                self.owed.ack = true;
            }
            return;
        }
        if matches!(self.mode, Mode::Bth { .. }) && seg.options.bth.is_none() && !f.rst() {
            // Every segment of a BTH connection carries the option, except amendment 1's
            // plain-form pure ACK (timestamps and SACK blocks instead).
            if !pure_ack(seg) {
                self.stats.bad_bth += 1;
                return;
            }
        }
        let seg_off = self.rcv.off_of(seg.seq);
        let seg_len = seg.payload.len() as u64 + u64::from(f.syn()) + u64::from(f.fin());
        let late = self.late_pure_ack(seg, seg_off);
        if !late && !self.acceptable(seg_off, seg_len) {
            self.stats.out_of_window += 1;
            let end = seg_off + seg.payload.len() as i64;
            if !f.rst()
                && !f.syn()
                && !seg.payload.is_empty()
                && seg_off >= 0
                && end <= self.rcv.nxt as i64
            {
                // Data we already have (a spurious retransmission, or a copy the network
                // made): say so with a D-SACK, so the sender can undo and widen its reordering
                // window. It misses no credit, so this ACK repeats none.
                self.note_duplicate(seg_off as u64, end as u64);
                self.ack_now(now);
                return;
            }
            if !f.rst() {
                // A credit update overtaken by the peer's later data sits below RCV.NXT by the
                // time it arrives; its credit is kept (see `keep_late_credit`). In
                // request/response through reordering this was a 200 ms persist wait.
                self.keep_late_credit(seg, seg_off);
                // Data beyond the window is answered at once (it cannot be one side of an ACK
                // loop, as Linux reasons); anything else through the rate limit. The answer to
                // a persist or keepalive probe (one byte below the window) goes that way too:
                // the sender may be waiting for credit it never received, so it repeats it.
                if !seg.payload.is_empty() || self.oow_ack(now) {
                    self.owed.ack = true;
                    self.owed.credit = true;
                }
            }
            return;
        }
        let ts = self.seg_timestamps(seg);
        if let (Some(ts), Some(recent)) = (ts, self.rcv.ts_recent_valid(now)) {
            let old = recovery::tsval_before(ts.tsval, recent);
            if old && self.disordered_ack(seg, seg_off, ts.tsval, recent) {
                self.stats.paws_disordered_acks += 1;
            } else if old && late && self.within_replay_window(ts.tsval, recent) {
                // Counted below with the late ACKs.
            } else if !f.rst() && old {
                self.stats.paws_drops += 1;
                let overtaken = pure_ack(seg)
                    && seg_off == self.rcv.nxt as i64
                    && self.snd.off_of(seg.ack) < self.snd.una() as i64
                    && self.within_replay_window(ts.tsval, recent);
                self.stats.paws_overtaken_acks += u64::from(overtaken);
                // A credit update overtaken by the peer's later ACKs (see `keep_late_credit`);
                // the rest of the segment is dropped as RFC 7323 says.
                self.keep_late_credit(seg, seg_off);
                // RFC 7323 §5.3 answers a PAWS drop with an ACK; rate-limited, because if the
                // peer drops our ACK the same way the two would ping-pong without end.
                self.oow_ack(now);
                return;
            }
        }
        // In the window and past PAWS: the peer is alive (an RST or a SYN, checked below,
        // says so too).
        self.heard(now);
        if let Some(b) = seg
            .options
            .bth
            .filter(|b| b.seq_framed != self.neg.seq_framed)
        {
            // An option in the other framing (amendment 3): a retransmission would repeat the
            // fault, so the connection fails, with a NAK naming the segment. Only once the
            // segment is in the window, so a blind attacker must guess it as for an RST.
            if !f.rst() && b.opcode != Opcode::Hello {
                self.stats.bad_bth += 1;
                self.stats.framing_mismatch += 1;
                let nak = Nak {
                    code: crate::wire::NakCode::InvalidRequest,
                    opcode: b.opcode,
                    msn: b.msn,
                };
                self.fail_with_nak(nak, ConnectionError::FramingMismatch);
                return;
            }
        }
        if f.rst() {
            if seg_off == self.rcv.nxt as i64 {
                let nak = seg.options.bth.as_ref().and_then(Nak::from_bth);
                self.stats.naks_received += u64::from(nak.is_some());
                self.fail(match nak {
                    // The responder refused one of our requests: that work request completes
                    // with the error IB RC gives it, the rest flushed.
                    Some(nak) => ConnectionError::PeerNak(nak),
                    None if self.state == State::SynReceived => ConnectionError::Refused,
                    None => ConnectionError::Reset,
                });
            } else {
                self.challenge_ack(now);
            }
            return;
        }
        if f.syn() {
            // RFC 5961 §4: any SYN in a synchronized state gets a challenge ACK.
            self.challenge_ack(now);
            return;
        }
        if !f.ack() {
            return;
        }
        if self.state == State::SynReceived {
            if seg.ack != self.snd.iss().wrapping_add(1) {
                self.owed.rst = Some(seg.ack);
                return;
            }
            self.on_syn_acked(now);
            self.state = if self.snd.fin() != Fin::None {
                State::FinWait1
            } else {
                State::Established
            };
            let wnd = u64::from(seg.window) << self.neg.peer_wscale;
            self.snd.take_window(wnd, seg.seq, seg.ack);
            // Our first grant (R=1, owed since the hello) goes out now: the peer's data is
            // unlimited by admission until it has one (conn/admission.rs).
            self.owed.ack |= self.owed.credit;
        }
        if let Some(b) = seg.options.bth {
            self.on_bth_control(&b, seg.ack);
        }
        if !self.on_ack(now, seg, ts.map(|t| t.tsecr), !late) {
            return;
        }
        if late {
            self.stats.late_acks += 1;
            // Its credit, if newer than ours, was taken above (`on_bth_control`).
            let credit = seg.options.bth.is_some_and(|b| b.rtr);
            self.stats.late_credit_kept += u64::from(credit);
            return;
        }
        // RFC 7323 §4.3: ts_recent follows the segment at the left edge of the window. Only
        // once its ACK proved acceptable (as Linux: FLAG_UPDATE_TS_RECENT): an in-window
        // segment with a forged ACK must not move ts_recent ahead of the real peer's clock,
        // or PAWS would drop everything the peer sends afterwards.
        if let Some(ts) = ts {
            // Never backwards: a disordered ACK let through above carries an older TSval.
            let older = self
                .rcv
                .ts_recent
                .is_some_and(|r| recovery::tsval_before(ts.tsval, r));
            if seg_off <= self.rcv.nxt as i64 && !older {
                self.rcv.set_ts_recent(now, Some(ts.tsval));
            }
        }
        if !seg.payload.is_empty() && self.state.receives_data() {
            self.on_data(now, seg, seg_off);
        }
        if f.fin() {
            let fin_off = seg_off + seg.payload.len() as i64;
            // Once the peer's FIN has been consumed (RCV.NXT is past it), a FIN elsewhere is
            // bogus: it must not move RCV.NXT over sequence space the peer never sent.
            let consumed = self.rcv.peer_fin.is_some_and(|p| self.rcv.nxt > p);
            if fin_off >= self.rcv.nxt as i64 && !consumed {
                self.rcv.peer_fin = Some(fin_off as u64);
            }
            self.owed.ack = true;
        }
        self.check_peer_fin(now);
    }

    /// An acceptable data segment: to the receive path, then the ACK policy (ack.rs).
    fn on_data(&mut self, now: Duration, seg: &TcpRepr<'_>, seg_off: i64) {
        self.stats.super_segments_in += u64::from(seg.payload.len() > usize::from(self.cfg.mss));
        self.rcv.note_packet(seg.payload.len());
        let nxt_before = self.rcv.nxt;
        let hole_before = self.rcv.hole_open();
        let start = seg_off.max(0) as u64;
        let end = (seg_off + seg.payload.len() as i64).max(0) as u64;
        // RFC 2883: the part of the segment that had already arrived.
        let duplicate = if start < nxt_before {
            Some((start, end.min(nxt_before)))
        } else if self.rcv.ooo.contains(start, end) {
            Some((start, end))
        } else {
            None
        };
        match self.rx {
            RxPath::Bth(_) => self.on_bth_data(seg, seg_off),
            RxPath::Plain(_) => self.on_plain_data(seg_off, seg.payload),
        }
        if let Some((s, e)) = duplicate {
            self.note_duplicate(s, e);
        }
        let message_end = seg.options.bth.is_some_and(|b| !b.opcode.position().more());
        self.on_data_arrival(
            now,
            ack::Arrival {
                nxt_before,
                hole_before,
                start,
                end,
                message_end,
            },
        );
    }

    /// A credit update (R=1 pure ACK) overtaken by the peer's later segments: it carries an
    /// older TSval (PAWS drops it, and it is no duplicate ACK Linux would exempt: it
    /// acknowledges less than SND.UNA by now), or it sits below RCV.NXT after the peer's later
    /// data (not acceptable). Dropping its credit left the sender waiting for the persist probe
    /// (200 ms) under reordering. The credit is monotonic (only a newer MSN is taken, and a
    /// grant acknowledging less than the one held is ignored) and the ICRC passed, so an old
    /// copy changes nothing.
    fn keep_late_credit(&mut self, seg: &TcpRepr<'_>, seg_off: i64) {
        let pure = pure_ack(seg);
        // Only from near the window and with an ACK we could have been sent (RFC 5961 §5.2's
        // range): a segment from anywhere in sequence space must not move our credit.
        let (nxt, w) = (self.rcv.nxt as i64, i64::from(self.cfg.recv_window));
        let ack_off = self.snd.off_of(seg.ack);
        let plausible = seg_off >= nxt - w
            && seg_off < nxt + w
            && ack_off <= self.snd.max() as i64
            && ack_off >= self.snd.oldest_acceptable_ack();
        if !plausible {
            return;
        }
        if let (Some(b), true, Mode::Bth { .. }) = (seg.options.bth, pure, self.mode) {
            if b.rtr {
                self.stats.late_credit_kept += 1;
                self.on_bth_control(&b, seg.ack);
            }
        }
    }

    /// rtr credit and byte grant carried by a segment (ACK field `ack`) from the data receiver.
    fn on_bth_control(&mut self, b: &Bth, ack: u32) {
        if b.rtr {
            let Mode::Bth { .. } = self.mode else { return };
            if self.snd.take_credit(b.msn) {
                self.snd.on_peer_grant(b.mbo, ack);
            }
        }
    }

    /// The segment's SACK blocks in stream offsets, those within what we sent, and the D-SACK
    /// block (RFC 2883 §4: the first block, when it lies below the cumulative ACK or inside
    /// the second block). Anything else is ignored: blocks come from the wire.
    fn sack_blocks(&self, seg: &TcpRepr<'_>, ack_off: i64) -> (Vec<Range>, Option<Range>) {
        let offs: Vec<(i64, i64)> = seg
            .options
            .sack
            .iter()
            .map(|b| (self.snd.off_of(b.left), self.snd.off_of(b.right)))
            .collect();
        let sent = |(l, r): (i64, i64)| l >= 0 && l < r && r <= self.snd.nxt() as i64;
        let dsack = offs.first().copied().filter(|&(l, r)| {
            let below = r <= ack_off;
            let inside = offs.get(1).is_some_and(|&(l2, r2)| l2 <= l && r <= r2);
            sent((l, r)) && (below || inside)
        });
        let skip = usize::from(dsack.is_some());
        let sacks = offs
            .into_iter()
            .skip(skip)
            .filter(|&(l, r)| sent((l, r)) && l >= self.snd.una() as i64)
            .map(|(l, r)| (l as u64, r as u64))
            .collect();
        (sacks, dsack.map(|(l, r)| (l as u64, r as u64)))
    }

    /// ACK processing; false if the segment must be dropped.
    fn on_ack(
        &mut self,
        now: Duration,
        seg: &TcpRepr<'_>,
        tsecr: Option<u32>,
        may_update_window: bool,
    ) -> bool {
        let ack_off = self.snd.off_of(seg.ack);
        let snd_max = self.snd.max() as i64;
        if ack_off > snd_max {
            // Acks something never sent (RFC 9293; RFC 5961 §5.2): answered, through the
            // same rate limit as every answer to a dropped segment.
            self.challenge_ack(now);
            return false;
        }
        if ack_off < self.snd.oldest_acceptable_ack() {
            // Too old to be a real ACK: RFC 5961 §5.2 ACK range check.
            self.challenge_ack(now);
            return false;
        }
        let data_acked = (ack_off.max(self.snd.una() as i64) as u64).min(self.snd.nxt());
        let (sacks, dsack) = if self.neg.sack_ok {
            self.sack_blocks(seg, ack_off)
        } else {
            (Vec::new(), None)
        };
        self.stats.dsacks_received += u64::from(dsack.is_some());
        let progressed = data_acked > self.snd.una();
        let res = self.snd.rec.on_ack(
            data_acked,
            &sacks,
            dsack,
            tsecr,
            now,
            self.snd.rtt.min_rtt(),
        );
        if let Some(s) = res.rtt_sample {
            self.snd.rtt.on_sample(s);
        }
        if res.undo {
            // Every retransmission of the episode proved spurious (RFC 3708 / RFC 4015): the
            // losses were reordering, so the reduction they caused is undone and the episode
            // ends.
            self.stats.undos += 1;
            self.snd.undo_reduction();
        }
        if progressed {
            self.retries = 0;
            self.persist_backoff = 0;
            let bth = matches!(self.mode, Mode::Bth { .. });
            for c in self.snd.on_ack_advance(data_acked, bth) {
                self.cq.push(c);
            }
            self.snd.cc.on_ack(
                now,
                res.newly_acked_bytes,
                res.rtt_sample,
                self.snd.rec.pipe(),
            );
        }
        self.snd.on_fin_ack(ack_off);
        // Window update (RFC 9293 §3.10.7.4's SND.WL1/WL2 rule, or any ACK that moves SND.UNA:
        // `SendState::on_ack_window`; found by the livelock detector: we sent beyond the
        // peer's edge). Not from a late pure ACK: one sent just before the data that overtook
        // it has that data's sequence number, and with the same ACK the rule would take its
        // older window.
        if may_update_window {
            let wnd = u64::from(seg.window) << self.neg.peer_wscale;
            let peer_off = |s| self.rcv.off_of(s);
            self.snd
                .on_ack_window(wnd, seg.seq, seg.ack, ack_off, progressed, peer_off);
        }
        self.snd.end_recovery_if_acked(now);
        self.detect_losses(now);
        self.rearm_after_ack(now, progressed);
        match self.state {
            State::FinWait1 if self.snd.fin().acked() => self.state = State::FinWait2,
            State::Closing if self.snd.fin().acked() => self.enter_time_wait(now),
            State::LastAck if self.snd.fin().acked() => {
                self.state = State::Closed;
                return false;
            }
            _ => {}
        }
        true
    }

    /// RACK: anything newly lost starts (at most one) congestion response per round trip.
    pub(super) fn detect_losses(&mut self, now: Duration) {
        let timer = self.snd.detect_losses(now);
        self.timers.set_opt(Timer::Rack, timer);
    }
}

/// An ACK and nothing else: no payload, SYN, FIN or RST.
fn pure_ack(seg: &TcpRepr<'_>) -> bool {
    let f = seg.flags;
    f.ack() && !f.syn() && !f.fin() && !f.rst() && seg.payload.is_empty()
}
