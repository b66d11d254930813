//! The BTH receive path: every data segment goes straight to placement at its message offset,
//! in whatever order it arrives; READ requests are answered from registered memory; a request
//! that cannot be served ends the QP with a NAK naming it.

use super::*;
use crate::wire::{Inbound, NakCode, TcpRepr};
use bth_placement::{PlaceOutcome, Placement, PlacementConfig, PlacementLimits};
use bytes::Bytes;
use std::collections::HashMap;

pub(super) struct BthRx {
    pub placement: Placement,
    /// Stream offset one past the last byte seen of each message that has not completed yet:
    /// its completion waits until the cumulative point passes it, which orders completions
    /// across classes (placement orders them within a class).
    msg_end: HashMap<(MsgClass, u16), u64>,
    /// A request we must refuse, found beyond a hole. IB RC's responder meets requests in
    /// order, so everything before the bad one completes: the QP fails (and the NAK goes
    /// out) only once the cumulative point reaches it. Nothing at or beyond it is taken.
    refusal: Option<Refusal>,
    /// What our latest R=1 granted the peer (`conn/admission.rs`).
    pub advertised: super::admission::Advertised,
    /// S framing (amendment 3): what the first accepted segment of each message not yet
    /// wholly below the cumulative point said of it; every later segment must agree.
    s_msgs: HashMap<(MsgClass, u16), SMessage>,
}

/// An S-framed message as its first accepted segment described it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SMessage {
    /// Stream offset of its first byte (the segment's stream offset less its placement
    /// offset).
    start: u64,
    len: u32,
    opcode: crate::wire::Opcode,
    ext: crate::wire::Extension,
}

impl SMessage {
    /// One past its last stream byte (a zero-length message has its pad byte).
    fn end(&self) -> u64 {
        self.start + u64::from(self.len.max(1))
    }
}

#[derive(Debug, Clone)]
struct Refusal {
    /// Stream offset of the refused segment.
    at: u64,
    nak: Nak,
    err: ConnectionError,
}

impl BthRx {
    pub fn new(cfg: &Config, iss: u32) -> BthRx {
        let limits = PlacementLimits {
            // rkeys must not be predictable: seed their key bytes from the host secret.
            rkey_seed: u64::from_le_bytes(cfg.isn_key.0[..8].try_into().expect("8 bytes"))
                ^ u64::from(iss),
            ..PlacementLimits::default()
        };
        // The peer's first MSN is not known until its hello: `anchor` sets it then, once.
        let placement = Placement::with_limits(
            PlacementConfig {
                first_msn: 0,
                max_posted_recvs: cfg.max_posted_recvs,
                max_message_len: cfg.max_message_len,
            },
            limits,
        );
        BthRx {
            placement,
            msg_end: HashMap::new(),
            refusal: None,
            advertised: Default::default(),
            s_msgs: HashMap::new(),
        }
    }

    /// Number the peer's messages from the first MSN of its hello.
    pub fn anchor(&mut self, peer_first_msn: u16) {
        let anchored = self.placement.anchor_peer_msn(peer_first_msn);
        debug_assert!(anchored, "the hello comes before any data segment");
    }

    /// Move placement's completions to the queue, each held until the cumulative point passes
    /// the end of its message (`default_end` when that is unknown: flushed work requests).
    pub fn drain(&mut self, cq: &mut CompletionQueue, default_end: u64) {
        while let Some(c) = self.placement.poll_completion() {
            let end = self
                .msg_end
                .remove(&(c.class, c.msn))
                .unwrap_or(default_end);
            cq.hold(end, c);
        }
    }
}

impl Connection {
    pub(super) fn on_bth_data(&mut self, seg: &TcpRepr<'_>, seg_off: i64) {
        let Some(bth) = seg.options.bth else { return };
        let RxPath::Bth(rx) = &mut self.rx else {
            return;
        };
        let start = seg_off;
        let mut payload = seg.payload;
        let mut end = seg_off + payload.len() as i64;
        if end <= self.rcv.nxt as i64 {
            // Entirely old: a duplicate; the ACK we send covers it.
            return;
        }
        let edge = (self.rcv.nxt + u64::from(self.cfg.recv_window)) as i64;
        if end > edge {
            if !bth.seq_framed || start >= edge {
                // A per-segment BTH segment cannot be trimmed to the window: its offset
                // fields describe it whole.
                self.stats.out_of_window += 1;
                return;
            }
            // An S segment's offsets come from its sequence number: trimmed to the window as
            // RFC 9293 trims any segment (amendment 3), its bytes in the window are placed.
            payload = &payload[..(edge - start) as usize];
            end = edge;
        }
        let (start, end) = (start.max(0) as u64, end as u64);
        if rx.refusal.as_ref().is_some_and(|r| start >= r.at) {
            // At or past a request we will refuse: the QP fails there, so nothing later is
            // placed or acknowledged (IB: the responder takes nothing after a NAK).
            self.stats.behind_refused_request += 1;
            return;
        }
        let parsed = if bth.seq_framed {
            // The placement offset comes from the sequence number (amendment 3).
            Inbound::from_seq(&bth, payload, start)
        } else {
            Inbound::from_bth(&bth, payload)
        };
        let inbound = match parsed {
            Ok(i) => i,
            Err(_) => {
                self.stats.bad_bth += 1;
                self.stats.s_inconsistent += u64::from(bth.seq_framed);
                return;
            }
        };
        if bth.seq_framed {
            let Some(msg_start) = start.checked_sub(u64::from(inbound.offset)) else {
                // An anchor that puts the message's start before the stream's.
                self.stats.bad_bth += 1;
                self.stats.s_inconsistent += 1;
                return;
            };
            let said = SMessage {
                start: msg_start,
                len: bth.icrc,
                opcode: bth.opcode,
                ext: bth.ext,
            };
            let first = *rx
                .s_msgs
                .entry((inbound.class, inbound.msn))
                .or_insert(said);
            if first != said {
                // Another start (an anchor 2^24 or more away included), length, opcode or
                // extension than the message's first segment said: nothing is placed.
                self.stats.bad_bth += 1;
                self.stats.s_inconsistent += 1;
                return;
            }
        }
        if self.rcv.table_full(start, end, self.cfg.max_ooo_ranges) {
            self.stats.ooo_table_full += 1;
            return;
        }
        let nak = |code| Nak {
            code,
            opcode: inbound.opcode,
            msn: inbound.msn,
        };
        match rx.placement.place(&inbound) {
            PlaceOutcome::ReceiverNotReady => {
                self.stats.receiver_not_ready += 1;
                return;
            }
            PlaceOutcome::AccessError(_) => {
                // RDMA rule: a remote access violation moves the QP to the error state; nothing
                // was written and other messages stay as they are. The requester learns which
                // work request failed from the NAK.
                let n = nak(NakCode::RemoteAccess);
                self.refuse(start, n, ConnectionError::RemoteAccess);
                return;
            }
            PlaceOutcome::LengthError => {
                // A SEND longer than its receive buffer: the receive completes with a local
                // length error, the SEND with a remote invalid request (IB RC). Its bytes are
                // not acknowledged, so the requester cannot complete it as a success first.
                let n = nak(NakCode::InvalidRequest);
                self.refuse(start, n, ConnectionError::LocalLength);
                return;
            }
            PlaceOutcome::ReadRequested(req) if !self.answer_read(inbound.msn, req) => {
                self.stats.read_responses_refused += 1;
                let n = nak(NakCode::InvalidRequest);
                self.refuse(start, n, ConnectionError::RemoteInvalidRequest);
                return;
            }
            other if !other.accepted() => {
                // Out of placement's window, too fragmented, or flushed: not taken, so not
                // acknowledged; the sender will retransmit it.
                self.stats.placement_refused += 1;
                return;
            }
            _ => {}
        }
        let RxPath::Bth(rx) = &mut self.rx else {
            return;
        };
        if start > self.rcv.nxt {
            self.stats.ooo_placed += 1;
        }
        self.stats.bytes_received += inbound.payload.len() as u64;
        let before = self.rcv.nxt;
        self.rcv.mark(start, end);
        // Only a segment that ends beyond the cumulative point needs its message's end recorded
        // (the usual in-order segment is spared a hash and an insert and removal). One the
        // cumulative point has passed either completes its message, whose every byte then lies
        // below that point, so the completion is released in this call and its default end (this
        // segment's) orders it as its message's end would: after every earlier message's end,
        // before every later one's; or it does not, and what it would record (its own end, at most
        // the cumulative point) is forgotten below in this same call. Messages' ends are distinct
        // (a zero-length message has a pad byte).
        if end > self.rcv.nxt {
            let e = rx
                .msg_end
                .entry((inbound.class, inbound.msn))
                .or_insert(end);
            *e = (*e).max(end);
        }
        rx.drain(&mut self.cq, end);
        if self.rcv.nxt > before && !rx.msg_end.is_empty() {
            // Messages wholly below the cumulative point have produced their completion (if
            // they have one: plain WRITEs and READ requests never do), so forget their ends.
            let nxt = self.rcv.nxt;
            rx.msg_end.retain(|_, e| *e > nxt);
        }
        if self.rcv.nxt > before && !rx.s_msgs.is_empty() {
            // Nothing of those can arrive again but duplicates, which are not placed.
            let nxt = self.rcv.nxt;
            rx.s_msgs.retain(|_, m| m.end() > nxt);
        }
        self.cq.release(self.rcv.nxt);
        if self.rcv.nxt > before {
            // Bytes the allowance admitted (WRITE, READ requests) slide our grant's edge.
            self.note_grant_growth();
        }
        self.refuse_when_reached();
    }

    /// Refuse the request whose segment starts at stream offset `at`: now, if everything
    /// before it has arrived; otherwise once it has (the earliest refusal wins).
    fn refuse(&mut self, at: u64, nak: Nak, err: ConnectionError) {
        let RxPath::Bth(rx) = &mut self.rx else {
            return;
        };
        if rx.refusal.as_ref().is_none_or(|r| at < r.at) {
            rx.refusal = Some(Refusal { at, nak, err });
        }
        self.refuse_when_reached();
    }

    fn refuse_when_reached(&mut self) {
        let RxPath::Bth(rx) = &mut self.rx else {
            return;
        };
        if rx.refusal.as_ref().is_some_and(|r| self.rcv.nxt >= r.at) {
            let r = rx.refusal.take().expect("checked");
            self.fail_with_nak(r.nak, r.err);
        }
    }

    /// Queue the response to an RDMA READ from our registered memory (placement already
    /// checked rights and bounds). False when it cannot be sent: longer than the requester
    /// accepts, or the region gone. Never dropped silently: the caller fails the QP.
    fn answer_read(&mut self, request_msn: u16, req: crate::wire::ReadRequest) -> bool {
        let RxPath::Bth(rx) = &self.rx else {
            return false;
        };
        match rx.placement.regions().read(req.rkey, req.addr, req.len) {
            Ok(d) => {
                // The response's one user-space copy on send: a snapshot of the region (a
                // WRITE may change it before every segment has left, or been retransmitted),
                // sent from without another copy where the driver gathers.
                let data = Bytes::copy_from_slice(d);
                self.stats.tx_payload_staged += data.len() as u64;
                self.snd
                    .framer
                    .post_read_response(request_msn, vec![data], true)
                    .is_ok()
            }
            Err(_) => false,
        }
    }
}
