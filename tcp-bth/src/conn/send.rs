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
pub(super) enum TlpProbe {
    /// Resend stream offsets `[start, end)`.
    Resend(u64, u64),
    NewData,
}

pub(super) struct SendState {
    pub iss: u32,
    /// Stream offsets: 0 is the first data byte (sequence ISS + 1).
    pub una: u64,
    pub nxt: u64,
    /// The peer's window, scaled, and the largest seen (RFC 5961 ACK range check).
    pub wnd: u64,
    pub max_wnd: u64,
    pub wl1: u32,
    pub wl2: u32,
    pub fin: Fin,
    pub framer: Framer,
    pub rec: Recovery,
    pub rtt: RttEstimator,
    pub cc: Box<dyn CongestionControl>,
    pub recovery_point: Option<u64>,
    /// The tail loss probe to send, if one is due: it goes out whatever cwnd says (RFC 8985
    /// §7.3).
    pub tlp: Option<TlpProbe>,
    /// The last SEND MSN the peer has a receive posted for (its R=1 credit).
    pub peer_credit: Option<u16>,
    /// New credit arrived: echo it with A=1 on the next segment.
    pub credit_news: bool,
    /// Since when the SEND at `nxt` has waited for credit (RNR), if it is waiting.
    pub rnr_since: Option<Duration>,
    /// The peer's latest byte grant (receiver-driven admission, `conn/admission.rs`) and the
    /// stream offset its segment acknowledged, from which the grant counts.
    pub admission: bth_cc::ReceiverAdmission,
    pub grant_ack: u64,
    /// Since when new data has been held back by the grant alone, if it is.
    pub grant_held_since: Option<Duration>,
    /// What held the sender back, over time (`chrono.rs`).
    pub chrono: super::chrono::Chrono,
}

impl SendState {
    /// The peer's window from a segment that may update it (RFC 9293 §3.10.7.4): SND.WND
    /// (`wnd`, in bytes, already scaled), SND.WL1 and SND.WL2 from its sequence and
    /// acknowledgement numbers, and the largest window seen (RFC 5961's ACK range check).
    pub fn take_window(&mut self, wnd: u64, seq: u32, ack: u32) {
        self.wnd = wnd;
        self.max_wnd = self.max_wnd.max(wnd);
        self.wl1 = seq;
        self.wl2 = ack;
    }

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

    /// Messages the peer has acknowledged whole: SEND and WRITE complete (READ requests
    /// complete on their response; plain-mode chunks have no work request).
    pub fn acked_completions(&mut self, bth: bool) -> Vec<Completion> {
        let released = self.framer.release(self.una);
        if !bth {
            return Vec::new();
        }
        released
            .into_iter()
            .filter_map(|r| requester_completion(r, WcStatus::Success))
            .collect()
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
