//! Building segments to send: handshake, retransmissions first, then new data within
//! min(cwnd, peer window, message credit), then FIN, then pure ACKs.

use super::*;
use crate::wire::{Bth, Extension, SackBlock, TcpFlags, TcpOptions, TcpRepr, Timestamps};
use bth_framer::SegmentDesc;

/// What the data part of a segment is.
enum Body {
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

impl Connection {
    /// The next segment to send, if any (a whole TCP segment: header, options, payload).
    pub fn poll_transmit(&mut self, now: Duration) -> Option<Vec<u8>> {
        let out = self.next_segment(now);
        if out.is_some() {
            self.stats.segments_out += 1;
        }
        out
    }

    fn next_segment(&mut self, now: Duration) -> Option<Vec<u8>> {
        if let Some(seq) = self.rst_pending.take() {
            return Some(self.build(now, TcpFlags::RST, seq, 0, Body::None));
        }
        if let Some((seq, ack)) = self.probe_pending.take() {
            return Some(self.build(now, TcpFlags::ACK, seq, ack, Body::None));
        }
        match self.state {
            State::Closed => return None,
            State::SynSent | State::SynReceived if self.syn_pending => {
                return Some(self.build_syn(now));
            }
            State::SynSent => return None,
            _ => {}
        }
        if self.state.synchronized() {
            if let Some(seg) = self.next_data(now) {
                return Some(seg);
            }
            if let Some(seg) = self.next_fin(now) {
                return Some(seg);
            }
        }
        if self.ack_now {
            self.ack_now = false;
            let seq = self
                .seq_of(self.snd_nxt)
                .wrapping_add(u32::from(self.fin_sent));
            let ack = self.rcv_seq_of(self.rcv_nxt);
            return Some(self.build(now, TcpFlags::ACK, seq, ack, Body::None));
        }
        None
    }

    fn build_syn(&mut self, now: Duration) -> Vec<u8> {
        self.syn_pending = false;
        if self.syn_sent_at.is_some() {
            self.syn_retransmitted = true;
        }
        self.syn_sent_at = Some(now);
        self.timers.set(Timer::Rto, now + self.rtt.rto());
        let passive = self.state == State::SynReceived;
        let mut opts = TcpOptions {
            mss: Some(self.cfg.mss),
            sack_permitted: !passive || self.sack_ok,
            ..Default::default()
        };
        // Window scale: offer on SYN; on SYN-ACK only if the peer offered (RFC 7323 §2.2).
        if !passive || self.rcv_wscale > 0 || self.peer_wscale > 0 {
            opts.window_scale = Some(self.cfg.window_scale.min(14));
        }
        let bth = match self.mode {
            Mode::Bth { .. } => true,
            Mode::Pending => self.cfg.bth && !passive,
            Mode::Plain => false,
        };
        if bth {
            let mut hello = Bth::new(Opcode::Hello);
            hello.msn = self.cfg.first_msn;
            hello.mbo = self.cfg.max_message_len.min(crate::wire::MAX_MESSAGE_LEN);
            hello.timestamps = Some(Timestamps {
                tsval: self.tsval(now),
                tsecr: self.ts_recent.unwrap_or(0),
            });
            hello.seal(&[]);
            opts.bth = Some(hello);
        } else if (!passive && self.cfg.timestamps) || (passive && self.ts_ok) {
            opts.timestamps = Some(Timestamps {
                tsval: self.tsval(now),
                tsecr: self.ts_recent.unwrap_or(0),
            });
        }
        let (flags, ack) = if passive {
            (TcpFlags::SYN | TcpFlags::ACK, self.irs.wrapping_add(1))
        } else {
            (TcpFlags::SYN, 0)
        };
        let window = self.cfg.recv_window.min(65535) as u16;
        self.encode(flags, self.iss, ack, window, opts, &[])
    }

    /// Bytes the peer's window still allows beyond what is in flight.
    fn window_room(&self) -> u64 {
        (self.snd_una + self.snd_wnd).saturating_sub(self.snd_nxt)
    }

    fn next_data(&mut self, now: Duration) -> Option<Vec<u8>> {
        let cwnd = self.cc.cwnd();
        let mss = u64::from(self.payload_mss());
        // 1. A tail loss probe, 2. segments marked lost, in order.
        let resend = self.tlp_probe.take().or_else(|| self.rec.next_lost());
        if let Some((start, end)) = resend {
            if self.rec.pipe() + (end - start) <= cwnd.max(mss) || self.rec.pipe() == 0 {
                if let Some(body) = self.data_body(start, (end - start) as u32) {
                    let tsval = self.tsval(now);
                    self.rec.on_retransmit(start, now, tsval);
                    self.arm_rto(now);
                    return Some(self.build_data(now, start, body));
                }
            }
        }
        // 3. New data.
        let end = self.framer.stream_end();
        if self.snd_nxt >= end {
            return None;
        }
        let room_cwnd = cwnd.saturating_sub(self.rec.pipe());
        let room = room_cwnd.min(self.window_room()).min(mss);
        if room == 0 || (room < mss && room < end - self.snd_nxt && self.rec.pipe() > 0) {
            // Wait for a full segment's room rather than sending runts (Nagle-like).
            self.arm_persist(now);
            return None;
        }
        if !self.credit_allows(self.snd_nxt) {
            self.arm_persist(now);
            return None;
        }
        let start = self.snd_nxt;
        let Some(body) = self.data_body(start, room as u32) else {
            // A READ request is one indivisible 16-byte segment: wait for that much room.
            self.arm_persist(now);
            return None;
        };
        let len = match &body {
            Body::Data(d) => d.len,
            Body::Stream { len, .. } => *len,
            Body::None => 0,
        };
        let tsval = self.tsval(now);
        let seg_end = start + u64::from(len);
        self.rec.on_send(start, seg_end, now, tsval);
        self.snd_nxt = seg_end;
        self.stats.bytes_sent += u64::from(len);
        self.arm_rto(now);
        self.arm_tlp(now);
        Some(self.build_data(now, start, body))
    }

    /// The data segment starting at stream offset `start` with at most `max` payload bytes.
    fn data_body(&self, start: u64, max: u32) -> Option<Body> {
        match self.mode {
            Mode::Bth { .. } => self.framer.segment_at(start, max).map(Body::Data),
            _ => {
                let len = (self.framer.stream_end().saturating_sub(start)).min(u64::from(max));
                (len > 0).then_some(Body::Stream {
                    start,
                    len: len as u32,
                })
            }
        }
    }

    /// Plain mode: `len` queued stream bytes from `start`, gathered across chunks.
    fn stream_payload(&self, start: u64, len: u32) -> Vec<u8> {
        let mut out = vec![0u8; len as usize];
        let mut at = 0usize;
        while at < out.len() {
            let Some(d) = self
                .framer
                .segment_at(start + at as u64, (out.len() - at) as u32)
            else {
                break;
            };
            at += d.copy_payload_to(&mut out[at..]);
        }
        debug_assert_eq!(at, out.len(), "stream bytes below stream_end are queued");
        out
    }

    /// A SEND may start only when the receiver advertised a buffer for its MSN.
    fn credit_allows(&self, offset: u64) -> bool {
        let Mode::Bth { .. } = self.mode else {
            return true;
        };
        let Some(m) = self.framer.message_at(offset) else {
            return true;
        };
        if m.class != MsgClass::Send || offset > m.stream_start {
            // Credit gates the start of a message; later segments of a started SEND continue.
            return true;
        }
        self.peer_credit
            .is_some_and(|c| !crate::wire::msn_lt(c, m.msn))
    }

    fn next_fin(&mut self, now: Duration) -> Option<Vec<u8>> {
        let at = self.fin_at?;
        if (self.fin_sent && !self.fin_resend) || self.snd_nxt < at {
            return None;
        }
        self.fin_sent = true;
        self.fin_resend = false;
        self.arm_rto(now);
        let seq = self.seq_of(at);
        let ack = self.rcv_seq_of(self.rcv_nxt);
        Some(self.build(now, TcpFlags::FIN | TcpFlags::ACK, seq, ack, Body::None))
    }

    fn build_data(&mut self, now: Duration, start: u64, body: Body) -> Vec<u8> {
        let seq = self.seq_of(start);
        let ack = self.rcv_seq_of(self.rcv_nxt);
        // A data segment carries the ACK too, but not our receive credit: if credit is owed, the
        // pure ACK still goes out after the data.
        self.ack_now = self.credit_owed;
        self.build(now, TcpFlags::ACK | TcpFlags::PSH, seq, ack, body)
    }

    fn build(&mut self, now: Duration, flags: TcpFlags, seq: u32, ack: u32, body: Body) -> Vec<u8> {
        let mut payload = Vec::new();
        let mut opts = TcpOptions::default();
        let ts = Timestamps {
            tsval: self.tsval(now),
            tsecr: self.ts_recent.unwrap_or(0),
        };
        match self.mode {
            Mode::Bth { .. } => {
                let mut b = match &body {
                    Body::Data(d) => d.bth,
                    Body::None | Body::Stream { .. } => {
                        // Pure ACK / FIN / RST: advertise our receive credit (rtr).
                        let mut a = Bth::new(ACK_OPCODE);
                        a.rtr = true;
                        self.credit_owed = false;
                        a.msn = self.placement_credit_msn();
                        a.mbo = bth_cc::ReceiverAdmission::grant_for(self.rcv_window());
                        a.ext = Extension::None;
                        a
                    }
                };
                b.timestamps = Some(ts);
                if self.credit_news {
                    b.rtr_ack = true;
                    self.credit_news = false;
                }
                if let Body::Data(d) = &body {
                    payload = vec![0u8; d.payload_len()];
                    d.copy_payload_to(&mut payload);
                }
                b.seal(&payload);
                opts.bth = Some(b);
            }
            _ => {
                if self.ts_ok {
                    opts.timestamps = Some(ts);
                }
                if let Body::Stream { start, len } = body {
                    payload = self.stream_payload(start, len);
                }
            }
        }
        // Data segments were sized for the options above; in plain mode SACK blocks would push
        // them past the MTU, so only pure ACKs carry them there.
        let sack_fits = matches!(self.mode, Mode::Bth { .. }) || matches!(body, Body::None);
        if self.sack_ok && flags.ack() && !flags.rst() && sack_fits {
            self.add_sack_blocks(&mut opts);
        }
        let window = (self.rcv_window() >> self.rcv_wscale).min(65535) as u16;
        self.encode(flags, seq, ack, window, opts, &payload)
    }

    /// Most recent out-of-order range first (RFC 2018 §4), as many as the budget allows.
    fn add_sack_blocks(&self, opts: &mut TcpOptions) {
        let room = opts.sack_room();
        if room == 0 || self.rcv_ooo.is_empty() {
            return;
        }
        let first = self
            .latest_rx
            .and_then(|at| self.rcv_ooo.range_containing(at));
        let others = self.rcv_ooo.iter().filter(|r| Some(*r) != first);
        for (s, e) in first.into_iter().chain(others).take(room) {
            if s < self.rcv_nxt {
                continue;
            }
            opts.sack.push(SackBlock {
                left: self.rcv_seq_of(s),
                right: self.rcv_seq_of(e),
            });
        }
    }

    fn placement_credit_msn(&self) -> u16 {
        let base = match self.mode {
            Mode::Bth { peer_first_msn, .. } => peer_first_msn,
            _ => 0,
        };
        self.placement.credit_msn().wrapping_add(base)
    }

    fn encode(
        &self,
        flags: TcpFlags,
        seq: u32,
        ack: u32,
        window: u16,
        options: TcpOptions,
        payload: &[u8],
    ) -> Vec<u8> {
        let repr = TcpRepr {
            src_port: self.cfg.local_port,
            dst_port: self.cfg.remote_port,
            seq,
            ack,
            flags,
            window,
            urgent: 0,
            options,
            payload,
        };
        // Our own options are built within the budget (sack_room) and payloads within the MSS,
        // so encoding cannot fail; a failure here is a bug worth a loud stop in tests.
        repr.to_vec(self.cfg.ip)
            .expect("connection builds segments within the TCP limits")
    }
}
