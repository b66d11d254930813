//! SEGMENT ARRIVES (RFC 9293 §3.10.7), with RFC 5961 defences, PAWS (RFC 7323 §5) and, in BTH
//! mode, direct placement of each data segment at its message offset.

use super::*;

use crate::wire::{Bth, Inbound, TcpOptions, TcpRepr, Timestamps};
use bth_placement::PlaceOutcome;

/// How long `ts_recent` stays comparable: 2^31 µs, half the TSval cycle at 1 µs per tick.
const PAWS_IDLE: Duration = Duration::from_micros(1 << 31);

/// Least time between two ACKs that answer dropped segments.
const INVALID_ACK_INTERVAL: Duration = Duration::from_millis(500);

/// Least time between two challenge ACKs (RFC 5961 §7).
const CHALLENGE_ACK_INTERVAL: Duration = Duration::from_millis(1);

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
        self.on_segment(now, bytes);
        self.note_events();
    }

    fn on_segment(&mut self, now: Duration, bytes: &[u8]) {
        self.stats.segments_in += 1;
        let seg = match TcpRepr::parse(bytes, Some(self.cfg.ip.reversed())) {
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
        if let Some(b) = &seg.options.bth {
            if !b.icrc_ok(seg.payload) {
                self.stats.icrc_errors += 1;
                return;
            }
        }
        match self.state {
            State::Closed => {}
            State::SynSent => self.on_syn_sent(now, &seg),
            _ => self.on_synchronized(now, &seg),
        }
    }

    /// Timestamps of a segment: folded into the BTH, or the RFC 7323 option in plain mode.
    fn seg_timestamps(&self, seg: &TcpRepr<'_>) -> Option<Timestamps> {
        match self.mode {
            Mode::Bth { .. } => seg.options.bth.and_then(|b| b.timestamps),
            _ if self.ts_ok => seg.options.timestamps,
            _ => None,
        }
    }

    /// Settle options from the peer's SYN or SYN-ACK.
    pub(super) fn negotiate(&mut self, now: Duration, opts: &TcpOptions, we_offered_ts: bool) {
        self.peer_mss = opts.mss.unwrap_or(536).max(64);
        if let Some(ws) = opts.window_scale {
            self.peer_wscale = ws.min(14);
            self.rcv_wscale = self.cfg.window_scale.min(14);
        }
        self.sack_ok = opts.sack_permitted;
        let hello = opts.bth.filter(|b| b.opcode == Opcode::Hello);
        match hello {
            Some(h) if self.cfg.bth => {
                self.mode = Mode::Bth {
                    peer_first_msn: h.msn,
                    peer_max_message: h.mbo,
                };
                // We may not send messages larger than the peer accepts.
                self.framer.set_max_message_len(h.mbo);
                self.set_ts_recent(now, h.timestamps.map(|t| t.tsval));
            }
            _ => {
                self.mode = Mode::Plain;
                self.ts_ok = we_offered_ts && opts.timestamps.is_some();
                if self.ts_ok {
                    self.set_ts_recent(now, opts.timestamps.map(|t| t.tsval));
                }
            }
        }
        // Segment indexes count in units of the payload size actually sent.
        self.framer.set_mss(self.payload_mss());
    }

    fn on_syn_sent(&mut self, now: Duration, seg: &TcpRepr<'_>) {
        let f = seg.flags;
        if f.ack() && seg.ack != self.iss.wrapping_add(1) {
            if !f.rst() {
                self.rst_pending = Some(seg.ack);
            }
            return;
        }
        if f.rst() {
            if f.ack() {
                self.fail(ConnectionError::Refused);
            }
            return;
        }
        if !f.syn() {
            return;
        }
        self.irs = seg.seq;
        self.negotiate(now, &seg.options, !self.cfg.bth && self.cfg.timestamps);
        self.snd_wnd = u64::from(seg.window);
        self.snd_wl1 = seg.seq;
        self.snd_wl2 = seg.ack;
        if f.ack() {
            self.on_syn_acked(now);
            self.state = State::Established;
            self.ack_now = true;
        } else {
            // Simultaneous open (RFC 9293 §3.5): answer with SYN-ACK.
            self.state = State::SynReceived;
            self.syn_pending = true;
        }
    }

    pub(super) fn on_syn_acked(&mut self, now: Duration) {
        if let (Some(t), false) = (self.syn_sent_at, self.syn_retransmitted) {
            self.rtt.on_sample(now.saturating_sub(t));
        }
        self.syn_pending = false;
        self.timers.stop(Timer::Rto);
        self.retries = 0;
    }

    fn acceptable(&self, seg_off: i64, seg_len: u64) -> bool {
        let nxt = self.rcv_nxt as i64;
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
        if allow(&mut self.last_challenge, now, CHALLENGE_ACK_INTERVAL) {
            self.stats.challenge_acks += 1;
            self.ack_now = true;
        }
    }

    /// An ACK answering a segment we dropped (PAWS), at most one per [`INVALID_ACK_INTERVAL`]
    /// (Linux: `tcp_invalid_ratelimit`, 500 ms).
    fn rate_limited_ack(&mut self, now: Duration) {
        if allow(&mut self.last_invalid_ack, now, INVALID_ACK_INTERVAL) {
            self.ack_now = true;
        }
    }

    fn set_ts_recent(&mut self, now: Duration, tsval: Option<u32>) {
        if let Some(v) = tsval {
            self.ts_recent = Some(v);
            self.ts_recent_at = now;
        }
    }

    /// `ts_recent`, unless it is too old to compare with (RFC 7323 §5.5). Our TSval clock ticks
    /// every microsecond, so a peer's TSval moves by half its 32-bit range in [`PAWS_IDLE`]:
    /// after that long without an update, a fresh TSval may look older than `ts_recent`, and
    /// PAWS would drop every segment of a connection that was merely idle. Linux applies the
    /// same limit to its microsecond timestamps (`TCP_PAWS_WRAP`).
    fn ts_recent_valid(&self, now: Duration) -> Option<u32> {
        self.ts_recent
            .filter(|_| now.saturating_sub(self.ts_recent_at) < PAWS_IDLE)
    }

    fn on_synchronized(&mut self, now: Duration, seg: &TcpRepr<'_>) {
        let f = seg.flags;
        if self.state == State::SynReceived && f.syn() && f.ack() && !f.rst() && seg.seq == self.irs
        {
            // Simultaneous open (RFC 9293 §3.5, figure 7): the peer's SYN-ACK repeats its SYN
            // (so it sits below RCV.NXT) and acknowledges ours.
            if seg.ack == self.iss.wrapping_add(1) {
                self.on_syn_acked(now);
                self.state = State::Established;
                // Window fields in SYN segments are never scaled (RFC 7323 §2.2).
                self.snd_wnd = u64::from(seg.window);
                self.snd_wl1 = seg.seq;
                self.snd_wl2 = seg.ack;
                self.ack_now = true;
            }
            return;
        }
        if matches!(self.mode, Mode::Bth { .. }) && seg.options.bth.is_none() && !f.rst() {
            // Every segment of a BTH connection carries the option.
            self.stats.bad_bth += 1;
            return;
        }
        let seg_off = self.rcv_off(seg.seq);
        let seg_len = seg.payload.len() as u64 + u64::from(f.syn()) + u64::from(f.fin());
        if !self.acceptable(seg_off, seg_len) {
            self.stats.out_of_window += 1;
            if !f.rst() {
                self.ack_now = true;
            }
            return;
        }
        let ts = self.seg_timestamps(seg);
        if let (Some(ts), Some(recent)) = (ts, self.ts_recent_valid(now)) {
            if !f.rst() && recovery::tsval_before(ts.tsval, recent) {
                self.stats.paws_drops += 1;
                // RFC 7323 §5.3 answers a PAWS drop with an ACK; rate-limited, because if the
                // peer drops our ACK the same way the two would ping-pong without end.
                self.rate_limited_ack(now);
                return;
            }
        }
        if f.rst() {
            if seg_off == self.rcv_nxt as i64 {
                self.fail(if self.state == State::SynReceived {
                    ConnectionError::Refused
                } else {
                    ConnectionError::Reset
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
            if seg.ack != self.iss.wrapping_add(1) {
                self.rst_pending = Some(seg.ack);
                return;
            }
            self.on_syn_acked(now);
            self.state = if self.fin_at.is_some() {
                State::FinWait1
            } else {
                State::Established
            };
            self.snd_wnd = u64::from(seg.window) << self.peer_wscale;
            self.snd_wl1 = seg.seq;
            self.snd_wl2 = seg.ack;
        }
        if let Some(b) = seg.options.bth {
            self.on_bth_control(&b);
        }
        if !self.on_ack(now, seg, ts.map(|t| t.tsecr)) {
            return;
        }
        // RFC 7323 §4.3: ts_recent follows the segment at the left edge of the window. Only
        // once its ACK proved acceptable (as Linux: FLAG_UPDATE_TS_RECENT): an in-window
        // segment with a forged ACK must not move ts_recent ahead of the real peer's clock,
        // or PAWS would drop everything the peer sends afterwards.
        if let Some(ts) = ts {
            if seg_off <= self.rcv_nxt as i64 {
                self.set_ts_recent(now, Some(ts.tsval));
            }
        }
        if !seg.payload.is_empty() && self.state.receives_data() {
            match self.mode {
                Mode::Bth { .. } => self.on_bth_data(seg, seg_off),
                _ => self.on_plain_data(seg, seg_off),
            }
            self.ack_now = true;
        }
        if f.fin() {
            let fin_off = seg_off + seg.payload.len() as i64;
            // Once the peer's FIN has been consumed (RCV.NXT is past it), a FIN elsewhere is
            // bogus: it must not move RCV.NXT over sequence space the peer never sent.
            let consumed = self.peer_fin.is_some_and(|p| self.rcv_nxt > p);
            if fin_off >= self.rcv_nxt as i64 && !consumed {
                self.peer_fin = Some(fin_off as u64);
            }
            self.ack_now = true;
        }
        self.check_peer_fin(now);
    }

    /// rtr credit carried by a segment from the data receiver.
    fn on_bth_control(&mut self, b: &Bth) {
        if b.rtr {
            let Mode::Bth { .. } = self.mode else { return };
            let newer = self
                .peer_credit
                .is_none_or(|c| !crate::wire::msn_lt(b.msn, c));
            if newer {
                if self.peer_credit != Some(b.msn) {
                    self.credit_news = true;
                }
                self.peer_credit = Some(b.msn);
                self.peer_grant = b.mbo;
            }
        }
    }

    /// ACK processing; false if the segment must be dropped.
    fn on_ack(&mut self, now: Duration, seg: &TcpRepr<'_>, tsecr: Option<u32>) -> bool {
        let ack_off = self.snd_off(seg.ack);
        let snd_max = self.snd_nxt as i64 + i64::from(self.fin_sent);
        if ack_off > snd_max {
            // Acks something never sent (RFC 9293; RFC 5961 §5.2).
            self.ack_now = true;
            return false;
        }
        if ack_off < self.snd_una as i64 - self.max_snd_wnd.max(1) as i64 {
            // Too old to be a real ACK: RFC 5961 §5.2 ACK range check.
            self.challenge_ack(now);
            return false;
        }
        let data_acked = (ack_off.max(self.snd_una as i64) as u64).min(self.snd_nxt);
        let sacks: Vec<(u64, u64)> = if self.sack_ok {
            seg.options
                .sack
                .iter()
                .filter_map(|b| {
                    let (l, r) = (self.snd_off(b.left), self.snd_off(b.right));
                    (l >= self.snd_una as i64 && l < r && r <= self.snd_nxt as i64)
                        .then_some((l as u64, r as u64))
                })
                .collect()
        } else {
            Vec::new()
        };
        let progressed = data_acked > self.snd_una;
        let res = self
            .rec
            .on_ack(data_acked, &sacks, tsecr, now, self.rtt.min_rtt());
        if let Some(s) = res.rtt_sample {
            self.rtt.on_sample(s);
        }
        if res.spurious > 0 {
            // The original arrived: the reduction it caused was not needed (RFC 4015 spirit).
            self.cc.on_spurious_congestion();
        }
        if progressed {
            self.snd_una = data_acked;
            self.retries = 0;
            self.persist_backoff = 0;
            self.send_completions();
            self.cc
                .on_ack(now, res.newly_acked_bytes, res.rtt_sample, self.rec.pipe());
        }
        if self.fin_sent && ack_off == snd_max {
            self.fin_acked = true;
        }
        // Window update (RFC 9293 §3.10.7.4, SND.WL1/WL2 rule).
        let wl1_off = self.rcv_off(self.snd_wl1);
        let seq_off = self.rcv_off(seg.seq);
        if wl1_off < seq_off || (wl1_off == seq_off && self.snd_off(self.snd_wl2) <= ack_off) {
            self.snd_wnd = u64::from(seg.window) << self.peer_wscale;
            self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
            self.snd_wl1 = seg.seq;
            self.snd_wl2 = seg.ack;
        }
        if self.recovery_point.is_some_and(|p| self.snd_una >= p) {
            self.recovery_point = None;
            self.cc.on_recovery_end(now);
        }
        self.detect_losses(now);
        self.rearm_after_ack(now, progressed);
        match self.state {
            State::FinWait1 if self.fin_acked => self.state = State::FinWait2,
            State::Closing if self.fin_acked => self.enter_time_wait(now),
            State::LastAck if self.fin_acked => {
                self.state = State::Closed;
                return false;
            }
            _ => {}
        }
        true
    }

    /// Released messages become send completions (READ requests complete on their response).
    fn send_completions(&mut self) {
        for r in self.framer.release(self.snd_una) {
            let op = match r.class {
                MsgClass::Send => WcOp::Send,
                MsgClass::Write => WcOp::RdmaWrite,
                MsgClass::ReadRequest | MsgClass::ReadResponse => continue,
            };
            if self.mode == Mode::Plain {
                continue;
            }
            self.completions.push_back(Completion {
                wr_id: r.wr_id,
                op,
                status: WcStatus::Success,
                byte_len: r.len,
                imm: None,
                msn: r.msn,
                buf: None,
            });
        }
    }

    /// RACK: anything newly lost starts (at most one) congestion response per round trip.
    pub(super) fn detect_losses(&mut self, now: Duration) {
        let (lost, timer) = self
            .rec
            .detect_losses(now, self.rtt.min_rtt(), self.rtt.srtt());
        self.timers.set_opt(Timer::Rack, timer);
        if lost > 0 && self.recovery_point.is_none() {
            self.recovery_point = Some(self.snd_nxt);
            // FlightSize (RFC 5681), not the pipe that just lost the marked segments.
            self.cc
                .on_congestion_event(now, self.snd_nxt - self.snd_una);
        }
    }

    fn enter_time_wait(&mut self, now: Duration) {
        self.state = State::TimeWait;
        self.timers.stop_all();
        self.timers.set(Timer::TimeWait, now + self.cfg.time_wait);
    }

    fn check_peer_fin(&mut self, now: Duration) {
        let Some(fin) = self.peer_fin else { return };
        if self.rcv_nxt != fin {
            return;
        }
        self.rcv_nxt = fin + 1;
        self.ack_now = true;
        self.release_held();
        match self.state {
            State::Established | State::SynReceived => self.state = State::CloseWait,
            State::FinWait1 if self.fin_acked => self.enter_time_wait(now),
            State::FinWait1 => self.state = State::Closing,
            State::FinWait2 => self.enter_time_wait(now),
            State::TimeWait => self.timers.set(Timer::TimeWait, now + self.cfg.time_wait),
            _ => {}
        }
    }

    /// Mark `[start, end)` received and advance the cumulative point.
    fn mark_received(&mut self, start: u64, end: u64) {
        let start = start.max(self.rcv_nxt);
        if end <= start {
            return;
        }
        self.rcv_ooo.insert(start, end);
        self.latest_rx = Some(start);
        if let Some(e) = self.rcv_ooo.take_from(self.rcv_nxt) {
            self.rcv_nxt = e;
        }
    }

    /// Placement counts the peer's classes from 0; READ responses echo our own request MSNs,
    /// which placement takes as we registered them.
    fn wire_to_placement_msn(&self, class: MsgClass, msn: u16) -> u16 {
        match (class, self.mode) {
            (MsgClass::ReadResponse, _) => msn,
            (_, Mode::Bth { peer_first_msn, .. }) => msn.wrapping_sub(peer_first_msn),
            _ => msn,
        }
    }

    fn on_bth_data(&mut self, seg: &TcpRepr<'_>, seg_off: i64) {
        let Some(bth) = seg.options.bth else { return };
        let start = seg_off;
        let end = seg_off + seg.payload.len() as i64;
        if end <= self.rcv_nxt as i64 {
            // Entirely old: a duplicate; the ACK we send covers it.
            return;
        }
        if end > (self.rcv_nxt + self.rcv_window()) as i64 {
            // A BTH segment cannot be trimmed to the window: its offset fields describe it whole.
            self.stats.out_of_window += 1;
            return;
        }
        let (start, end) = (start.max(0) as u64, end as u64);
        let inbound = match Inbound::from_bth(&bth, seg.payload) {
            Ok(i) => i,
            Err(_) => {
                self.stats.bad_bth += 1;
                return;
            }
        };
        if self.rcv_ooo.len() >= self.cfg.max_ooo_ranges && self.rcv_ooo.would_fragment(start, end)
        {
            self.stats.ooo_table_full += 1;
            return;
        }
        let mut local = inbound;
        local.msn = self.wire_to_placement_msn(inbound.class, inbound.msn);
        let outcome = self.placement.place(&local);
        match outcome {
            PlaceOutcome::ReceiverNotReady => {
                self.stats.receiver_not_ready += 1;
                return;
            }
            PlaceOutcome::AccessError(_) => {
                // RDMA rule: a remote access violation moves the QP to the error state; nothing
                // was written and other messages stay as they are.
                self.rst_pending = Some(self.seq_of(self.snd_nxt));
                self.fail(ConnectionError::RemoteAccess);
                return;
            }
            PlaceOutcome::ReadRequested(req) => self.answer_read(inbound.msn, req),
            other if !other.accepted() => {
                // Out of placement's window, too fragmented, or flushed: not taken, so not
                // acknowledged; the sender will retransmit it.
                self.stats.placement_refused += 1;
                return;
            }
            _ => {}
        }
        if start > self.rcv_nxt {
            self.stats.ooo_placed += 1;
        }
        self.stats.bytes_received += seg.payload.len() as u64;
        let key = (local.class, local.msn);
        let e = self.msg_end.entry(key).or_insert(end);
        *e = (*e).max(end);
        let before = self.rcv_nxt;
        self.mark_received(start, end);
        self.drain_placement_completions(end);
        if self.rcv_nxt > before {
            // Messages wholly below the cumulative point have produced their completion (if
            // they have one: plain WRITEs and READ requests never do), so forget their ends.
            let nxt = self.rcv_nxt;
            self.msg_end.retain(|_, e| *e > nxt);
        }
        self.release_held();
    }

    /// Serve an RDMA READ from our registered memory (placement already checked rights/bounds).
    /// A response we cannot send (longer than the requester accepts, or the region gone) is
    /// never dropped silently: the requester would wait forever for it. The QP fails instead
    /// (RST), so every outstanding request on both sides completes with an error.
    fn answer_read(&mut self, request_msn: u16, req: crate::wire::ReadRequest) {
        let posted = match self.placement.regions().read(req.rkey, req.addr, req.len) {
            Ok(d) => {
                let data = Bytes::copy_from_slice(d);
                self.framer
                    .post_read_response(request_msn, vec![data])
                    .is_ok()
            }
            Err(_) => false,
        };
        if !posted {
            self.stats.read_responses_refused += 1;
            self.rst_pending = Some(self.seq_of(self.snd_nxt));
            self.fail(ConnectionError::RemoteInvalidRequest);
        }
    }

    fn on_plain_data(&mut self, seg: &TcpRepr<'_>, seg_off: i64) {
        // Trim to [rcv_nxt, rcv_nxt + window): a byte stream can be cut anywhere.
        let wnd_end = (self.rcv_nxt + self.rcv_window()) as i64;
        let start = seg_off.max(self.rcv_nxt as i64);
        let end = (seg_off + seg.payload.len() as i64).min(wnd_end);
        if end <= start {
            return;
        }
        let data = &seg.payload[(start - seg_off) as usize..(end - seg_off) as usize];
        let (start, end) = (start as u64, end as u64);
        if start == self.rcv_nxt {
            self.plain_rx.extend(data);
            self.stats.bytes_received += data.len() as u64;
            self.rcv_nxt = end;
            // Pull in out-of-order chunks that are now contiguous.
            while let Some((&s, _)) = self.plain_ooo.first_key_value() {
                if s > self.rcv_nxt {
                    break;
                }
                let chunk = self.plain_ooo.remove(&s).expect("present");
                self.plain_ooo_bytes -= chunk.len();
                let skip = (self.rcv_nxt - s) as usize;
                if skip < chunk.len() {
                    self.plain_rx.extend(&chunk[skip..]);
                    self.stats.bytes_received += (chunk.len() - skip) as u64;
                    self.rcv_nxt = s + chunk.len() as u64;
                }
            }
            self.rcv_ooo.discard_below(self.rcv_nxt);
        } else {
            if self.rcv_ooo.contains(start, end) {
                return;
            }
            if self.rcv_ooo.len() >= self.cfg.max_ooo_ranges
                && self.rcv_ooo.would_fragment(start, end)
            {
                self.stats.ooo_table_full += 1;
                return;
            }
            self.plain_ooo_bytes += data.len();
            if let Some(old) = self.plain_ooo.insert(start, data.to_vec()) {
                self.plain_ooo_bytes -= old.len();
            }
            self.rcv_ooo.insert(start, end);
            self.latest_rx = Some(start);
        }
    }
}
