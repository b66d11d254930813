//! Building segments to send: handshake, retransmissions first, then new data within
//! min(cwnd, peer window, peer grant, message credit), then FIN, then pure ACKs.

use super::chrono::Limit;
use super::*;
use crate::wire::{Bth, ChecksumFill, SackBlock, TcpFlags, TcpOptions, TcpRepr, Timestamps};
use bth_framer::SegmentDesc;
use bytes::Bytes;

/// What the data part of a segment is.
pub(super) enum Body {
    None,
    /// BTH mode: bytes of exactly one message, described by the framer.
    Data(SegmentDesc),
    /// Plain mode: `len` stream bytes from `start`, across as many queued `send_bytes` chunks
    /// as they span (a byte stream has no message boundaries to respect).
    Stream {
        start: u64,
        len: u32,
    },
}

/// Where a segment is built: the caller's buffer (a driver's transmit buffer, behind the IP
/// header), how its checksum is filled, and whether the caller gathers data payloads.
pub(crate) struct Out<'a> {
    pub buf: &'a mut [u8],
    pub fill: ChecksumFill,
    pub gather: Option<Gather<'a>>,
}

/// A caller that writes a segment as its header (in `Out::buf`) followed by the payload's
/// slices of the application's buffers (`writev`), so no byte of it is copied in user space.
pub(crate) struct Gather<'a> {
    /// Receives the slices (empty when called).
    pub parts: &'a mut Vec<Bytes>,
    pub limits: GatherLimits,
}

/// Which data payloads a caller of
/// [`Endpoint::poll_transmit_gather`](crate::Endpoint::poll_transmit_gather) takes as slices;
/// the others are copied behind the header as [`Connection::poll_transmit_into`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatherLimits {
    /// Most slices one payload may be in (a segment within one posted buffer is one slice,
    /// across a boundary two).
    pub max_parts: usize,
    /// Shortest payload worth gathering: below it, copying the bytes costs less than the
    /// gathered write's extra work (for the TUN driver, `writev`'s iovecs against one
    /// registered buffer).
    pub min_payload: usize,
    /// Most payload bytes one gathered packet may carry as a segmentation-offload
    /// super-segment (a TUN device with a virtio-net header: the kernel, or the receiving
    /// device, cuts it into segments of the connection's payload MSS, `Transmit::gso_size`).
    /// Used by S-framed connections only (amendment 3: their option is right for every
    /// segment cut from it); 0 sends one segment per packet.
    pub gso_payload: u32,
}

impl<'a> Out<'a> {
    /// Header and payload both in `buf`.
    pub(crate) fn new(buf: &'a mut [u8], fill: ChecksumFill) -> Out<'a> {
        Out {
            buf,
            fill,
            gather: None,
        }
    }
}

impl Out<'_> {
    /// Whether this caller takes `d`'s payload as slices: within its limits, and long enough
    /// to be worth it, or staged (our own copy made at post: copying it again would be its
    /// second copy).
    fn gathers(&self, d: &SegmentDesc) -> bool {
        let len = d.payload_len();
        self.gather.as_ref().is_some_and(|g| {
            let l = g.limits;
            let long_enough = len >= l.min_payload.max(1) || (d.staged && len > 0);
            long_enough && d.payload.len() <= l.max_parts
        })
    }
}

impl Body {
    fn payload_len(&self) -> usize {
        match self {
            Body::Data(d) => d.payload_len(),
            Body::Stream { len, .. } => *len as usize,
            Body::None => 0,
        }
    }
}

impl Connection {
    /// The next segment to send, if any (a whole TCP segment: header, options, payload), in a
    /// vector of its own. Drivers use [`poll_transmit_into`](Self::poll_transmit_into).
    pub fn poll_transmit(&mut self, now: Duration) -> Option<Vec<u8>> {
        let mut v = vec![0u8; self.max_segment_len()];
        let n = self.poll_transmit_into(now, &mut v, ChecksumFill::Full)?;
        v.truncate(n);
        Some(v)
    }

    /// Write the next segment to send, if any, into `buf` (at least
    /// [`max_segment_len`](Self::max_segment_len) bytes, else nothing is built,
    /// `Stats::tx_buffer_short` counts it and the connection ends with
    /// [`ConnectionError::TransmitBufferShort`]: a buffer that short would never carry its
    /// segments) and return its length. The payload is copied
    /// once, from the application's buffer straight into `buf` (`Stats::tx_payload_copied`).
    pub fn poll_transmit_into(
        &mut self,
        now: Duration,
        buf: &mut [u8],
        fill: ChecksumFill,
    ) -> Option<usize> {
        if buf.len() < self.max_segment_len() {
            self.stats.tx_buffer_short += 1;
            if self.error.is_none() {
                self.fail(ConnectionError::TransmitBufferShort {
                    needed: self.max_segment_len(),
                    buffer: buf.len(),
                });
            }
            return None;
        }
        self.transmit(now, Out::new(buf, fill))
    }

    /// [`poll_transmit_into`](Self::poll_transmit_into) into `out`, which may gather
    /// (`Endpoint::poll_transmit_gather`): then a data payload within its limits is appended
    /// to its `parts` as slices of the application's posted buffers, not copied
    /// (`Stats::tx_payload_gathered`), and the return is the bytes written into its buffer,
    /// the header alone; the segment is those followed by the parts. The slices keep the
    /// application's buffer alive until the caller drops them, once the write is done.
    pub(crate) fn poll_transmit_out(&mut self, now: Duration, mut out: Out<'_>) -> Option<usize> {
        if let Some(g) = out.gather.as_mut() {
            g.parts.clear();
        }
        if out.buf.len() < self.max_segment_len() {
            // Short for a copied payload; the check and its error are the same.
            return self.poll_transmit_into(now, out.buf, out.fill);
        }
        self.transmit(now, out)
    }

    fn transmit(&mut self, now: Duration, mut out: Out<'_>) -> Option<usize> {
        let n = self.next_segment(now, &mut out);
        if n.is_some() {
            self.stats.segments_out += 1;
        }
        n
    }

    /// The longest segment this connection builds: a full header (60 bytes) and a full
    /// payload.
    pub fn max_segment_len(&self) -> usize {
        crate::wire::TCP_HEADER_MAX + self.payload_mss() as usize
    }

    fn next_segment(&mut self, now: Duration, out: &mut Out<'_>) -> Option<usize> {
        if let Some((seq, ack)) = self.owed.ack_before_rst.take() {
            return Some(self.build(now, TcpFlags::ACK, seq, ack, Body::None, out));
        }
        if let Some(seq) = self.owed.rst.take() {
            return Some(self.build(now, TcpFlags::RST, seq, 0, Body::None, out));
        }
        if let Some((seq, ack)) = self.owed.probe.take() {
            return Some(self.build(now, TcpFlags::ACK, seq, ack, Body::None, out));
        }
        match self.state {
            State::Closed => return None,
            State::SynSent | State::SynReceived if matches!(self.syn, Syn::Owed { .. }) => {
                return Some(self.build_syn(now, out));
            }
            State::SynSent => return None,
            _ => {}
        }
        // ACKs built when they fell due (ack.rs) go before new data.
        if let Some(ack) = self.ack.take_pending() {
            // Counted as it leaves, so this never exceeds the segments sent.
            self.stats.acks_immediate += 1;
            let seg = &mut out.buf[..ack.len()];
            seg.copy_from_slice(&ack);
            if out.fill == ChecksumFill::Partial {
                // Built with a full checksum when it fell due; the device finishes this one.
                crate::wire::checksum::fill(self.cfg.ip, seg, out.fill)
                    .expect("a built ACK is a whole segment");
            }
            return Some(ack.len());
        }
        if self.state.synchronized() {
            if let Some(n) = self.next_data(now, out) {
                return Some(n);
            }
            if let Some(n) = self.next_fin(now, out) {
                return Some(n);
            }
        }
        if self.owed.ack {
            self.owed.ack = false;
            return Some(self.pure_ack(now, out));
        }
        None
    }

    /// A pure ACK of this moment: our next sequence number (past our FIN once sent) and
    /// RCV.NXT.
    pub(super) fn pure_ack(&mut self, now: Duration, out: &mut Out<'_>) -> usize {
        let seq = self
            .snd
            .seq_of(self.snd.nxt())
            .wrapping_add(u32::from(self.snd.fin().sent()));
        let ack = self.rcv.seq_of(self.rcv.nxt);
        self.build(now, TcpFlags::ACK, seq, ack, Body::None, out)
    }

    fn next_data(&mut self, now: Duration, out: &mut Out<'_>) -> Option<usize> {
        let cwnd = self.snd.cc.cwnd();
        let mss = u64::from(self.payload_mss());
        // 1. A tail loss probe (not held by cwnd), 2. segments marked lost, in order.
        let probe = self.snd.take_resend_probe();
        let resend = probe.or_else(|| self.snd.rec.next_lost());
        let mut resend_held = false;
        if let Some((start, end)) = resend {
            let pipe = self.snd.rec.pipe();
            if probe.is_some() || pipe + (end - start) <= cwnd.max(mss) || pipe == 0 {
                if let Some(body) = self.data_body(start, (end - start) as u32) {
                    self.stats.bytes_retransmitted += body.payload_len() as u64;
                    let tsval = self.rcv.tsval(now);
                    self.snd.rec.on_retransmit(start, now, tsval);
                    self.arm_rto(now);
                    self.snd.chrono.enter(now, Some(Limit::Sending));
                    return Some(self.build_data(now, start, body, out));
                }
            } else {
                resend_held = true;
            }
        }
        // 3. New data. A probe of new data is one segment, whatever cwnd says.
        // (A probe of new data waits here while lost segments go first.)
        let probe_new = self.snd.take_new_data_probe();
        let end = self.snd.framer.stream_end();
        if self.snd.nxt() >= end {
            // Nothing new: lost segments waiting for cwnd, or the application's turn (idle
            // when nothing is in flight either).
            let state = match (resend_held, self.snd.rec.is_empty()) {
                (true, _) => Some(Limit::Cwnd),
                (false, false) => Some(Limit::NothingToSend),
                (false, true) => None,
            };
            self.snd.chrono.enter(now, state);
            return None;
        }
        let room_cwnd = if probe_new {
            mss
        } else {
            cwnd.saturating_sub(self.snd.rec.pipe())
        };
        let room_wnd = self.snd.window_room();
        // An S connection whose caller takes super-segments sends up to that many bytes of
        // one message in one packet, in whole segments (the last of a message may be short).
        let gso = match &out.gather {
            Some(g) if self.neg.seq_framed && !probe_new => {
                u64::from(g.limits.gso_payload) / mss * mss
            }
            _ => 0,
        };
        let mut room = room_cwnd.min(room_wnd).min(mss.max(gso));
        if room > mss {
            // Whole segments: a runt inside the message would cost a packet of its own.
            room -= room % mss;
        }
        // What binds when the data is held: the smaller of the two windows (cwnd on a tie,
        // and while lost segments wait for it).
        let binding = if resend_held || room_cwnd <= room_wnd {
            Limit::Cwnd
        } else {
            Limit::PeerWindow
        };
        // Wait for a full segment's room rather than sending runts (Nagle-like).
        let (pipe, unsent) = (self.snd.rec.pipe(), end - self.snd.nxt());
        let held = |r: u64| r == 0 || (r < mss && r < unsent && pipe > 0);
        if held(room) {
            self.arm_persist(now);
            self.snd.chrono.enter(now, Some(binding));
            return None;
        }
        if matches!(self.mode, Mode::Bth { .. }) && !self.snd.credit_allows(self.snd.nxt()) {
            self.arm_persist(now);
            self.note_rnr_wait(now);
            self.snd.chrono.enter(now, Some(Limit::Credit));
            return None;
        }
        self.clear_rnr_wait();
        // Last the peer's grant, so a hold is counted only when nothing else holds the data.
        let granted = room.min(self.admission_room());
        if held(granted) {
            self.note_grant_hold(now);
            self.snd.chrono.enter(now, Some(Limit::Grant));
            return None;
        }
        self.end_grant_hold(now);
        let start = self.snd.nxt();
        // A super-segment needs its payload gathered (its bytes would not fit the caller's
        // buffer behind the header): one whose slices the caller cannot take is one segment.
        let mut body = self.data_body(start, granted as u32);
        if let Some(Body::Data(d)) = &body {
            if u64::from(d.len) > mss && !out.gathers(d) {
                body = self.data_body(start, mss as u32);
            }
        }
        let Some(body) = body else {
            // A READ request is one indivisible 16-byte segment: wait for that much room.
            self.arm_persist(now);
            let by = if granted < room {
                Limit::Grant
            } else {
                binding
            };
            self.snd.chrono.enter(now, Some(by));
            return None;
        };
        let len = body.payload_len() as u32;
        let tsval = self.rcv.tsval(now);
        let seg_end = start + u64::from(len);
        // The scoreboard holds what the peer will see: one entry per segment the super-
        // segment is cut into, so SACK, RACK and retransmissions work per segment.
        self.snd.on_new_data_sent(seg_end, mss, now, tsval);
        if u64::from(len) > mss {
            self.stats.gso_sent += 1;
            self.stats.gso_segments += u64::from(len).div_ceil(mss);
        }
        self.stats.bytes_sent += u64::from(len);
        self.arm_rto(now);
        self.arm_tlp(now);
        self.snd.chrono.enter(now, Some(Limit::Sending));
        Some(self.build_data(now, start, body, out))
    }

    /// The payload mss of this connection's data segments, which a super-segment is cut into
    /// (`Transmit::gso_size`).
    pub(crate) fn gso_size(&self) -> u32 {
        self.payload_mss()
    }

    /// The data segment starting at stream offset `start` with at most `max` payload bytes.
    fn data_body(&self, start: u64, max: u32) -> Option<Body> {
        match self.mode {
            Mode::Bth { .. } => self.snd.framer.segment_at(start, max).map(Body::Data),
            _ => {
                let len = (self.snd.framer.stream_end().saturating_sub(start)).min(u64::from(max));
                (len > 0).then_some(Body::Stream {
                    start,
                    len: len as u32,
                })
            }
        }
    }

    /// Plain mode: the queued stream bytes from `start` into `out`, gathered across chunks.
    fn stream_payload(&self, start: u64, out: &mut [u8]) {
        let mut at = 0usize;
        while at < out.len() {
            let Some(d) = self
                .snd
                .framer
                .segment_at(start + at as u64, (out.len() - at) as u32)
            else {
                break;
            };
            at += d.copy_payload_to(&mut out[at..]);
        }
        debug_assert_eq!(at, out.len(), "stream bytes below stream_end are queued");
    }

    fn build_data(&mut self, now: Duration, start: u64, body: Body, out: &mut Out<'_>) -> usize {
        let seq = self.snd.seq_of(start);
        let ack = self.rcv.seq_of(self.rcv.nxt);
        // A data segment carries the ACK too, but not our receive credit: if credit is owed, the
        // pure ACK still goes out after the data.
        self.owed.ack = self.owed.credit;
        self.build(now, TcpFlags::ACK | TcpFlags::PSH, seq, ack, body, out)
    }

    pub(super) fn build(
        &mut self,
        now: Duration,
        flags: TcpFlags,
        seq: u32,
        ack: u32,
        body: Body,
        out: &mut Out<'_>,
    ) -> usize {
        let mut opts = TcpOptions::default();
        let ts = Timestamps {
            tsval: self.rcv.tsval(now),
            tsecr: self.rcv.ts_recent.unwrap_or(0),
        };
        // Amendment 1: a pure ACK with no credit to carry may drop the BTH for the timestamp
        // option and three SACK blocks. We do so when there are blocks to report (a hole or a
        // D-SACK): the BTH form has room for one, and one block per ACK starves recovery.
        let plain_ack = matches!(self.mode, Mode::Bth { .. })
            && matches!(body, Body::None)
            && flags == TcpFlags::ACK
            && !self.owed.credit
            && self.neg.sack_ok
            && (self.ack.dsack.is_some() || self.rcv.hole_open());
        match self.mode {
            Mode::Bth { .. } if plain_ack => {
                self.stats.plain_form_acks += 1;
                opts.timestamps = Some(ts);
            }
            Mode::Bth { .. } => {
                let mut b = match &body {
                    Body::Data(d) => d.bth,
                    Body::None | Body::Stream { .. } => self.control_bth(flags),
                };
                b.timestamps = Some(ts);
                if self.snd.take_credit_news() {
                    b.rtr_ack = true;
                }
                // Sealed below, once the payload is in place.
                opts.bth = Some(b);
            }
            _ => {
                if self.neg.ts_ok {
                    opts.timestamps = Some(ts);
                }
            }
        }
        // Data segments were sized for the options above; in plain mode SACK blocks would push
        // them past the MTU, so only pure ACKs carry them there.
        let sack_fits = matches!(self.mode, Mode::Bth { .. }) || matches!(body, Body::None);
        if self.neg.sack_ok && flags.ack() && !flags.rst() && sack_fits {
            self.add_sack_blocks(&mut opts);
        }
        if flags.ack() && !flags.rst() {
            self.on_ack_carried();
        }
        // The window counts from the segment's ACK field, which is RCV.NXT or (a persist
        // probe or the ACK before a NAK, built earlier) just below it; without ACK the field
        // means nothing, and neither may move the remembered edge.
        let nxt = self.rcv.nxt;
        let ack_off = if flags.ack() {
            self.rcv.off_of(ack).clamp(0, nxt as i64) as u64
        } else {
            nxt
        };
        let window = self.advertise_window(ack_off);
        let hlen = crate::wire::TCP_HEADER_MIN + opts.encoded_len();
        let payload_len = body.payload_len();
        // A caller that gathers takes the payload as the application's own slices: no copy
        // at all on the send side (the kernel's copy out of them is the only one).
        if let Body::Data(d) = &body {
            if out.gathers(d) {
                let g = out.gather.as_mut().expect("gathers");
                g.parts.extend(d.payload.iter().cloned());
                self.stats.tx_payload_gathered += payload_len as u64;
                if let Some(b) = opts.bth.as_mut() {
                    b.seal_parts(g.parts);
                }
                let repr = self.repr(flags, seq, ack, window, opts);
                repr.emit_header_parts(self.cfg.ip, &mut out.buf[..hlen], g.parts, out.fill)
                    .expect("connection builds segments within the TCP limits");
                return hlen;
            }
        }
        // Otherwise the payload goes straight to its place behind the header: the one copy
        // of each byte on the send side (from the application's buffer, which the framer
        // holds).
        let total = hlen + payload_len;
        let payload = &mut out.buf[hlen..total];
        match &body {
            Body::Data(d) => {
                d.copy_payload_to(payload);
                if d.staged {
                    self.stats.tx_payload_staged_copied += payload_len as u64;
                }
            }
            Body::Stream { start, .. } => self.stream_payload(*start, payload),
            Body::None => {}
        }
        self.stats.tx_payload_copied += payload_len as u64;
        if let Some(b) = opts.bth.as_mut() {
            b.seal(payload);
        }
        let repr = self.repr(flags, seq, ack, window, opts);
        self.encode(repr, Out::new(&mut out.buf[..total], out.fill))
    }

    /// A D-SACK block first (RFC 2883 §4), then the out-of-order range holding the duplicate
    /// (RFC 2883 §4 again) or else the most recent out-of-order range, then the ranges our
    /// recent ACKs reported first, most recent first (RFC 2018 §4: each range is repeated in
    /// the ACKs after the one that first reported it, so losing that ACK loses nothing; with
    /// the lowest ranges there instead, a range between holes whose first reports were lost
    /// was never reported again, and the sender retransmitted it needlessly), then the
    /// others, as many as the budget allows.
    fn add_sack_blocks(&mut self, opts: &mut TcpOptions) {
        let room = opts.sack_room();
        if room == 0 {
            return;
        }
        let dsack = self.ack.dsack.take();
        if let Some((s, e)) = dsack {
            opts.sack.push(SackBlock {
                left: self.rcv.seq_of(s),
                right: self.rcv.seq_of(e),
            });
        }
        let room = room - opts.sack.len();
        if room == 0 || self.rcv.ooo.is_empty() {
            return;
        }
        let rcv = &self.rcv;
        let first = dsack
            .and_then(|(s, _)| rcv.ooo.range_containing(s))
            .or_else(|| rcv.latest.and_then(|at| rcv.ooo.range_containing(at)));
        let recent = rcv
            .reported
            .iter()
            .filter_map(|&at| rcv.ooo.range_containing(at));
        // At most four blocks fit in any option area (RFC 2018 §3): no allocation per ACK.
        let mut chosen = [(0u64, 0u64); 4];
        let mut n = 0;
        for r in first.into_iter().chain(recent).chain(rcv.ooo.iter()) {
            if n == room.min(chosen.len()) {
                break;
            }
            if r.0 >= rcv.nxt && !chosen[..n].contains(&r) {
                chosen[n] = r;
                n += 1;
            }
        }
        let chosen = &chosen[..n];
        for &(s, e) in chosen {
            opts.sack.push(SackBlock {
                left: self.rcv.seq_of(s),
                right: self.rcv.seq_of(e),
            });
        }
        if let Some(&first) = chosen.first() {
            self.rcv.note_reported(first);
        }
    }

    /// The option of a segment without payload (the spec's "pure ACK, BTH form"): on an RST
    /// that ends the QP because of the peer's request, the NAK naming it; on a pure ACK that
    /// owes the peer our credit, R=1 with the last MSN we have a receive for and the byte
    /// grant; otherwise R=0 with the newest SEND MSN completed in order and syndrome 0 (ACK).
    fn control_bth(&mut self, flags: TcpFlags) -> Bth {
        if flags.rst() {
            if let Some(nak) = self.nak {
                let mut b = nak.to_bth();
                b.seq_framed = self.neg.seq_framed;
                return b;
            }
        }
        let RxPath::Bth(rx) = &self.rx else {
            return Bth::new(ACK_OPCODE);
        };
        let (credit, completed) = (rx.placement.credit_msn(), rx.placement.completed_send_msn());
        let mut a = Bth::new(ACK_OPCODE);
        // Every option of an S connection says so (amendment 3).
        a.seq_framed = self.neg.seq_framed;
        if self.owed.credit && !flags.rst() {
            self.owed.credit = false;
            a.rtr = true;
            a.msn = credit;
            a.mbo = self.advertise_grant();
        } else {
            a.msn = completed;
        }
        a
    }

    pub(super) fn repr(
        &self,
        flags: TcpFlags,
        seq: u32,
        ack: u32,
        window: u16,
        options: TcpOptions,
    ) -> TcpRepr<'static> {
        TcpRepr {
            src_port: self.cfg.local_port,
            dst_port: self.cfg.remote_port,
            seq,
            ack,
            flags,
            window,
            urgent: 0,
            options,
            payload: &[],
        }
    }

    pub(super) fn encode(&self, repr: TcpRepr<'_>, seg: Out<'_>) -> usize {
        // Our own options are built within the budget (sack_room), payloads within the MSS and
        // buffers at least `max_segment_len`, so encoding cannot fail; a failure here is a
        // bug worth a loud stop in tests.
        repr.emit_header(self.cfg.ip, seg.buf, seg.fill)
            .expect("connection builds segments within the TCP limits")
    }
}
