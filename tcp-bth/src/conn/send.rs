//! The send side: sequence space, the peer's window, message credit and byte grant, the framer's queue of
//! unacknowledged messages, loss recovery, RTT and congestion control, our FIN, and the
//! requester's view of its work requests (READs outstanding, completions on ACK or failure).

use super::handshake::Fin;
use super::recovery::Recovery;
use super::*;
use crate::rtt::RttEstimator;
use crate::wire::NakCode;
use bth_cc::CongestionControl;
use bth_framer::{Framer, FramerConfig};

/// A tail loss probe due (RFC 8985 §7.3): a retransmission of the last segment sent, or one
/// segment of new data where the peer's window, grant and credit allow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TlpProbe {
    /// Resend stream offsets `[start, end)`.
    Resend(u64, u64),
    NewData,
}

/// The send side's state. The sequence-space fields are private: they change only through
/// the methods below, which keep SND.UNA ≤ SND.NXT ≤ SND.MAX (see `on_ack_advance` for the
/// one caller that does not bound SND.UNA), the window and its SND.WL1 / SND.WL2 together,
/// and the FIN, recovery episode, probe, credit and grant state consistent with them. The parts with invariants of their own (framer, scoreboard, RTT, congestion
/// control, admission, chrono) are reached directly.
pub(super) struct SendState {
    iss: u32,
    /// Stream offsets: 0 is the first data byte (sequence ISS + 1).
    una: u64,
    nxt: u64,
    /// The peer's window, scaled, and the largest seen (RFC 5961 ACK range check).
    wnd: u64,
    max_wnd: u64,
    wl1: u32,
    wl2: u32,
    fin: Fin,
    pub framer: Framer,
    pub rec: Recovery,
    pub rtt: RttEstimator,
    pub cc: Box<dyn CongestionControl>,
    /// SND.NXT when the current loss episode began; the episode ends when SND.UNA reaches it.
    recovery_point: Option<u64>,
    /// The tail loss probe to send, if one is due: it goes out whatever cwnd says (RFC 8985
    /// §7.3).
    tlp: Option<TlpProbe>,
    /// The last SEND MSN the peer has a receive posted for (its R=1 credit).
    peer_credit: Option<u16>,
    /// New credit arrived: echo it with A=1 on the next segment.
    credit_news: bool,
    /// Since when the SEND at `nxt` has waited for credit (RNR), if it is waiting.
    rnr_since: Option<Duration>,
    /// The peer's latest byte grant (receiver-driven admission, `conn/admission.rs`) and the
    /// stream offset its segment acknowledged, from which the grant counts.
    pub admission: bth_cc::ReceiverAdmission,
    grant_ack: u64,
    /// Since when new data has been held back by the grant alone, if it is.
    grant_held_since: Option<Duration>,
    /// What held the sender back, over time (`chrono.rs`).
    pub chrono: super::chrono::Chrono,
}

impl SendState {
    pub fn new(cfg: &Config, iss: u32) -> SendState {
        SendState {
            iss,
            una: 0,
            nxt: 0,
            wnd: 0,
            max_wnd: 0,
            wl1: 0,
            wl2: 0,
            fin: Fin::None,
            framer: Framer::new(FramerConfig {
                mss: u32::from(cfg.mss),
                first_msn: cfg.first_msn,
                max_message_len: cfg.max_message_len,
            }),
            rec: Recovery::new(),
            rtt: RttEstimator::new(cfg.min_rto, cfg.max_rto),
            cc: cfg.congestion.build(u32::from(cfg.mss)),
            recovery_point: None,
            tlp: None,
            peer_credit: None,
            credit_news: false,
            rnr_since: None,
            admission: bth_cc::ReceiverAdmission::new(),
            grant_ack: 0,
            grant_held_since: None,
            chrono: Default::default(),
        }
    }

    /// Our initial sequence number (ISS): fixed at construction, so read-only.
    pub fn iss(&self) -> u32 {
        self.iss
    }

    /// SND.UNA as a stream offset. Read-only: it moves only with an acknowledgement
    /// ([`on_ack_advance`](Self::on_ack_advance)).
    pub fn una(&self) -> u64 {
        self.una
    }

    /// SND.NXT as a stream offset. Read-only: it moves only when new data goes out
    /// ([`on_new_data_sent`](Self::on_new_data_sent)).
    pub fn nxt(&self) -> u64 {
        self.nxt
    }

    /// SND.WND: the peer's window in bytes, scaled. Read-only: it changes only with SND.WL1
    /// and SND.WL2 ([`take_window`](Self::take_window)).
    pub fn wnd(&self) -> u64 {
        self.wnd
    }

    /// Our FIN's state. Read-only: its transitions are tied to SND.NXT and SND.MAX
    /// ([`queue_fin`](Self::queue_fin), [`send_fin`](Self::send_fin),
    /// [`on_fin_ack`](Self::on_fin_ack), [`on_rto`](Self::on_rto)).
    pub fn fin(&self) -> Fin {
        self.fin
    }

    /// A loss episode is running (its recovery point not yet acknowledged).
    pub fn in_recovery(&self) -> bool {
        self.recovery_point.is_some()
    }

    /// The peer's window from a segment that may update it (RFC 9293 §3.10.7.4): SND.WND
    /// (`wnd`, in bytes, already scaled), SND.WL1 and SND.WL2 from its sequence and
    /// acknowledgement numbers, and the largest window seen (RFC 5961's ACK range check).
    /// One method for all four, so they never disagree.
    pub fn take_window(&mut self, wnd: u64, seq: u32, ack: u32) {
        self.wnd = wnd;
        self.max_wnd = self.max_wnd.max(wnd);
        self.wl1 = seq;
        self.wl2 = ack;
    }

    /// A connection rebuilt from a SYN cookie, which does not keep the SYN's window: SND.WL1
    /// is the peer's ISN, so the ACK that completes the handshake (later in sequence) sets
    /// the window. Here rather than a field write, so SND.WL1 changes only in this file.
    pub fn on_cookie_syn(&mut self, irs: u32) {
        self.wl1 = irs;
    }

    /// The window of an acceptable ACK (stream offset `ack_off`, fields `seq` and `ack`),
    /// taken by RFC 9293 §3.10.7.4's rule (SND.WL1 < SEG.SEQ, or SND.WL1 = SEG.SEQ and
    /// SND.WL2 =< SEG.ACK), or because the ACK moved SND.UNA (`progressed`), as Linux's
    /// `tcp_may_update_window` takes it: a retransmission of the peer's carries an older
    /// sequence number with a newer ACK and window, and keeping the old window counted from
    /// the new SND.UNA moved our idea of the peer's right edge past the one it advertised.
    /// `peer_off` maps the peer's sequence numbers to our receive stream offsets. Kept here
    /// so the window update rule lives beside the fields it guards.
    pub fn on_ack_window(
        &mut self,
        wnd: u64,
        seq: u32,
        ack: u32,
        ack_off: i64,
        progressed: bool,
        peer_off: impl Fn(u32) -> i64,
    ) {
        let wl1_off = peer_off(self.wl1);
        let seq_off = peer_off(seq);
        let newer = progressed
            || wl1_off < seq_off
            || (wl1_off == seq_off && self.off_of(self.wl2) <= ack_off);
        if newer {
            self.take_window(wnd, seq, ack);
        }
    }

    /// Whether a segment at receive stream offset `seq_off` advertising `wnd` (scaled) would
    /// change the window: later in sequence than SND.WL1, or at it with a larger window
    /// (Linux's `tcp_disordered_ack` test). Reads SND.WL1 and SND.WND where they are kept.
    pub fn would_take_window(&self, seq_off: i64, wnd: u64, peer_off: impl Fn(u32) -> i64) -> bool {
        let wl1 = peer_off(self.wl1);
        seq_off > wl1 || (seq_off == wl1 && wnd > self.wnd)
    }

    /// The oldest ACK (stream offset) still taken as real: SND.UNA less the largest window
    /// the peer ever advertised, at least one byte (RFC 5961 §5.2's ACK range check).
    pub fn oldest_acceptable_ack(&self) -> i64 {
        self.una as i64 - self.max_wnd.max(1) as i64
    }

    /// The peer acknowledged stream bytes up to `to`, beyond SND.UNA: SND.UNA moves there and
    /// the messages it now passes whole complete, SEND and WRITE (in BTH mode: `bth`; READ
    /// requests complete on their response, plain-mode chunks have no work request). One
    /// method, so SND.UNA never moves without the framer releasing what it passed. From an
    /// ACK `to` is at most SND.NXT; `fail.rs` passes the start of the message the peer's NAK
    /// names, only when every byte before it has been sent (a forged NAK naming a message
    /// never sent must not complete the messages before it).
    pub fn on_ack_advance(&mut self, to: u64, bth: bool) -> Vec<Completion> {
        self.una = to;
        let released = self.framer.release(self.una);
        if !bth {
            return Vec::new();
        }
        released
            .into_iter()
            .filter_map(|r| requester_completion(r, WcStatus::Success))
            .collect()
    }

    /// New data `[SND.NXT, end)` went out at `now` with `tsval`, as one segment or a
    /// super-segment cut into segments of `mss` bytes: the scoreboard holds what the peer
    /// will see (one entry per segment, so SACK, RACK and retransmissions work per segment),
    /// and SND.NXT moves to `end`. Together here, so SND.NXT and the scoreboard's end agree.
    pub fn on_new_data_sent(&mut self, end: u64, mss: u64, now: Duration, tsval: u32) {
        let mut at = self.nxt;
        while at < end {
            let seg_end = (at + mss).min(end);
            self.rec.on_send(at, seg_end, now, tsval);
            at = seg_end;
        }
        self.nxt = end;
    }

    /// `close()`: our FIN is queued behind everything posted so far (it goes out once all of
    /// it has been sent, `send_fin`).
    pub fn queue_fin(&mut self) {
        self.fin = Fin::Queued {
            at: self.framer.stream_end(),
        };
    }

    /// Our FIN, if it is due now (queued, or found unacknowledged by an RTO, and everything
    /// before it sent): marked sent, so SND.MAX counts its sequence number, and its stream
    /// offset returned.
    pub fn send_fin(&mut self) -> Option<u64> {
        let at = match self.fin {
            Fin::Queued { at } | Fin::Sent { at, resend: true } => at,
            _ => return None,
        };
        if self.nxt < at {
            return None;
        }
        self.fin = Fin::Sent { at, resend: false };
        Some(at)
    }

    /// An acceptable ACK at stream offset `ack_off`: with our FIN sent, an ACK of SND.MAX
    /// acknowledges it.
    pub fn on_fin_ack(&mut self, ack_off: i64) {
        if let Fin::Sent { at, .. } = self.fin {
            if ack_off == self.max() as i64 {
                self.fin = Fin::Acked { at };
            }
        }
    }

    /// The RTO fired on a synchronized connection: everything outstanding is presumed lost
    /// and a loss episode begins at SND.NXT (RFC 6298 §5.4, RFC 8985 §6.3); a FIN sent with
    /// nothing else outstanding is resent. The scoreboard, the recovery point and the FIN
    /// change together here.
    pub fn on_rto(&mut self, now: Duration) {
        if !self.rec.is_empty() {
            self.rec.on_rto();
            self.rec.start_episode();
            self.cc.on_rto(now);
            self.recovery_point = Some(self.nxt);
        }
        if let Fin::Sent { resend, .. } = &mut self.fin {
            if self.rec.is_empty() {
                *resend = true;
            }
        }
    }

    /// RACK (RFC 8985): marks what is overdue lost; anything newly lost starts at most one
    /// congestion response per round trip (an episode ending at SND.NXT, reduced from the
    /// FlightSize of RFC 5681, not the pipe that just lost the marked segments: the
    /// algorithm reduces the most it saw in flight since its last reduction). Returns when
    /// RACK's reorder timer must fire. Here, because the episode is bounded by SND.NXT.
    pub fn detect_losses(&mut self, now: Duration) -> Option<Duration> {
        let (lost, timer) = self
            .rec
            .detect_losses(now, self.rtt.min_rtt(), self.rtt.srtt());
        if lost > 0 && self.recovery_point.is_none() {
            self.recovery_point = Some(self.nxt);
            self.rec.start_episode();
            self.cc.on_congestion_event(now, self.nxt - self.una);
        }
        timer
    }

    /// Every retransmission of the episode proved spurious (RFC 3708 / RFC 4015): the losses
    /// were reordering, so the reduction they caused is undone and the episode ends.
    pub fn undo_reduction(&mut self) {
        self.cc.on_spurious_congestion();
        self.recovery_point = None;
    }

    /// After an ACK: once SND.UNA has reached the recovery point, the loss episode ends.
    pub fn end_recovery_if_acked(&mut self, now: Duration) {
        if self.recovery_point.is_some_and(|p| self.una >= p) {
            self.recovery_point = None;
            self.rec.end_episode();
            self.cc.on_recovery_end(now);
        }
    }

    /// The tail loss probe timer fired with data in flight (RFC 8985 §7.3): the probe is new
    /// data when the caller found some that the peer's window, grant and credit allow
    /// (`new_data`), else the last segment sent again. It is counted here.
    pub fn on_tlp(&mut self, new_data: bool) {
        self.rec.stats.tlp_probes += 1;
        self.tlp = if new_data {
            Some(TlpProbe::NewData)
        } else {
            self.rec.last().map(|(s, e)| TlpProbe::Resend(s, e))
        };
    }

    /// A due probe that resends `[start, end)`, taken: it goes out once.
    pub fn take_resend_probe(&mut self) -> Option<(u64, u64)> {
        match self.tlp {
            Some(TlpProbe::Resend(start, end)) => {
                self.tlp = None;
                Some((start, end))
            }
            _ => None,
        }
    }

    /// Whether a probe of new data is due, taken: it goes out once (one segment, whatever
    /// cwnd says).
    pub fn take_new_data_probe(&mut self) -> bool {
        let due = self.tlp == Some(TlpProbe::NewData);
        if due {
            self.tlp = None;
        }
        due
    }

    /// The peer's R=1 credit: the last SEND MSN it has a receive posted for. Taken unless
    /// older than the credit held (a reordered update must not take credit back); a change
    /// is news, echoed with A=1 on our next segment. True when taken (its grant goes with
    /// it).
    pub fn take_credit(&mut self, msn: u16) -> bool {
        let newer = self
            .peer_credit
            .is_none_or(|c| !crate::wire::msn_lt(msn, c));
        if newer {
            if self.peer_credit != Some(msn) {
                self.credit_news = true;
            }
            self.peer_credit = Some(msn);
        }
        newer
    }

    /// Whether the segment being built echoes new credit (A=1); the news is then told.
    pub fn take_credit_news(&mut self) -> bool {
        std::mem::take(&mut self.credit_news)
    }

    /// The SEND at SND.NXT waits for credit: when the wait began (now, if it begins now).
    pub fn rnr_wait(&mut self, now: Duration) -> Duration {
        *self.rnr_since.get_or_insert(now)
    }

    /// Credit arrived, or nothing waits for it: no RNR wait.
    pub fn end_rnr_wait(&mut self) {
        self.rnr_since = None;
    }

    /// An RNR wait is running.
    pub fn rnr_waiting(&self) -> bool {
        self.rnr_since.is_some()
    }

    /// The grant (`units` of 4 KiB) of an R=1 segment whose ACK field is `ack`. A grant
    /// acknowledging less than the one we hold is older (reordered) and ignored; so is one
    /// acknowledging data never sent (that segment is dropped by the ACK checks anyway).
    /// Here, because it counts from a point between SND.UNA and SND.MAX.
    pub fn on_peer_grant(&mut self, units: u32, ack: u32) {
        let off = self.off_of(ack);
        if off < self.grant_ack as i64 || off > self.max() as i64 {
            return;
        }
        self.admission.on_grant(units);
        self.grant_ack = off as u64;
    }

    /// New bytes beyond SND.NXT the peer's latest grant admits (unlimited before the first).
    pub fn grant_room(&self) -> u64 {
        let beyond_grant_ack = self.nxt.saturating_sub(self.grant_ack);
        self.admission.allowed(beyond_grant_ack)
    }

    /// New data is held by the grant alone at `now`: true when this starts a hold (one
    /// already running keeps its start).
    pub fn start_grant_hold(&mut self, now: Duration) -> bool {
        let starts = self.grant_held_since.is_none();
        if starts {
            self.grant_held_since = Some(now);
        }
        starts
    }

    /// The grant no longer holds new data back: how long the hold lasted, if one ran.
    pub fn end_grant_hold(&mut self, now: Duration) -> Option<Duration> {
        let since = self.grant_held_since.take()?;
        Some(now.saturating_sub(since))
    }

    /// The sequence number of stream offset `off`.
    pub fn seq_of(&self, off: u64) -> u32 {
        self.iss.wrapping_add(1).wrapping_add(off as u32)
    }

    /// Stream offset of a sequence number near `una`.
    pub fn off_of(&self, seq: u32) -> i64 {
        self.una as i64 + i64::from(seq.wrapping_sub(self.seq_of(self.una)) as i32)
    }

    /// Highest offset we have sent, counting our FIN's sequence number.
    pub fn max(&self) -> u64 {
        self.nxt + u64::from(self.fin.sent())
    }

    /// Bytes the peer's window still allows beyond what is in flight.
    pub fn window_room(&self) -> u64 {
        (self.una + self.wnd).saturating_sub(self.nxt)
    }

    /// May the message data at `offset` go out as far as credit goes? A SEND may start only
    /// when the receiver advertised a buffer for its MSN; later segments of a started SEND,
    /// and other classes, need none.
    pub fn credit_allows(&self, offset: u64) -> bool {
        let Some(m) = self.framer.message_at(offset) else {
            return true;
        };
        if m.class != MsgClass::Send || offset > m.stream_start {
            return true;
        }
        self.peer_credit
            .is_some_and(|c| !crate::wire::msn_lt(c, m.msn))
    }

    /// The QP failed: every work request still queued ends, in posting order. A SEND or
    /// WRITE completes here, `failed` with its own status and the rest flushed; a READ
    /// request is named by its MSN (its completion is placement's, with the sink).
    pub fn fail(&mut self, failed: Option<FailedWr>) -> Vec<QueuedEnd> {
        self.framer
            .release(u64::MAX)
            .into_iter()
            .filter_map(|r| {
                if r.class == MsgClass::ReadRequest {
                    return Some(QueuedEnd::Read(r.msn));
                }
                let status = match failed {
                    Some(f) if f.class == r.class && f.msn == r.msn => f.status,
                    _ => WcStatus::WrFlushError,
                };
                requester_completion(r, status).map(QueuedEnd::Done)
            })
            .collect()
    }
}

/// How a queued work request ends when the QP fails.
pub(super) enum QueuedEnd {
    Done(Completion),
    /// The READ request with this MSN: its completion comes from placement.
    Read(u16),
}

/// The work request whose error ended the QP (the others complete flushed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FailedWr {
    pub class: MsgClass,
    pub msn: u16,
    pub status: WcStatus,
}

impl FailedWr {
    /// The one the peer's NAK names, with IB RC's status for the NAK code.
    pub fn from_nak(nak: Nak) -> Option<FailedWr> {
        Some(FailedWr {
            class: nak.class()?,
            msn: nak.msn,
            status: match nak.code {
                NakCode::InvalidRequest => WcStatus::RemoteInvalidRequest,
                NakCode::RemoteAccess => WcStatus::RemoteAccessError,
                _ => WcStatus::RemoteOperationalError,
            },
        })
    }
}

/// The completion of a SEND or WRITE this side posted.
fn requester_completion(r: bth_framer::Released, status: WcStatus) -> Option<Completion> {
    let op = match r.class {
        MsgClass::Send => WcOp::Send,
        MsgClass::Write => WcOp::RdmaWrite,
        MsgClass::ReadRequest | MsgClass::ReadResponse => return None,
    };
    Some(Completion {
        wr_id: r.wr_id,
        class: r.class,
        msn: r.msn,
        op,
        byte_len: if status == WcStatus::Success {
            r.len
        } else {
            0
        },
        imm: None,
        status,
        buf: None,
    })
}
