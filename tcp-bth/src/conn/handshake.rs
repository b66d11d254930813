//! Opening and closing: the SYN's state, what the handshake negotiated, our FIN's state, the
//! peer's FIN, close and abort (RFC 9293 §3.5, §3.6).

use super::*;
use crate::config::Framing;
use crate::wire::{Bth, TcpFlags, TcpOptions, TcpRepr, Timestamps};

/// Our SYN (active open) or SYN-ACK (passive open).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Syn {
    /// It must go out: the first time, or again (RTO, simultaneous open).
    Owed { retransmission: bool },
    /// Sent at `at`; a retransmitted SYN gives no RTT sample (Karn).
    Sent { at: Duration, retransmitted: bool },
    /// Acknowledged: the handshake is done.
    Acked,
}

/// Our FIN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fin {
    /// `close()` not called.
    None,
    /// Goes out at stream offset `at`, once everything before it has been sent.
    Queued {
        at: u64,
    },
    /// Sent; `resend` after an RTO found it unacknowledged.
    Sent {
        at: u64,
        resend: bool,
    },
    Acked {
        at: u64,
    },
}

impl Fin {
    /// It has taken its sequence number (sent at least once).
    pub(super) fn sent(&self) -> bool {
        matches!(self, Fin::Sent { .. } | Fin::Acked { .. })
    }

    pub(super) fn acked(&self) -> bool {
        matches!(self, Fin::Acked { .. })
    }
}

/// What the SYN exchange settled besides the mode.
#[derive(Debug, Clone, Copy)]
pub(super) struct Negotiated {
    pub peer_mss: u16,
    /// Shift applied to the peer's window field / to ours (RFC 7323 §2), 0 without scaling.
    pub peer_wscale: u8,
    pub rcv_wscale: u8,
    pub sack_ok: bool,
    /// Plain mode: both sides use the RFC 7323 timestamp option (BTH mode folds them).
    pub ts_ok: bool,
    /// Both hellos carried S: data segments are S-framed (amendment 3), both ways.
    pub seq_framed: bool,
}

impl Default for Negotiated {
    fn default() -> Negotiated {
        Negotiated {
            peer_mss: 536,
            peer_wscale: 0,
            rcv_wscale: 0,
            sack_ok: false,
            ts_ok: false,
            seq_framed: false,
        }
    }
}

/// Option bytes of our SYN with BTH and timestamps (amendment 4): MSS 4 + window scale 3 +
/// SACK-permitted 2 + RFC 7323 timestamps 10 + a hello without timestamps (T=0) 16 = 35, padded
/// to 36. With the timestamps folded into the hello (24) instead of beside it the set takes 33
/// (36 padded); both beside each other would take 43, more than TCP's 40.
pub(super) const SYN_OPTIONS_LEN: usize =
    4 + 3 + 2 + 10 + crate::wire::bth::option_len(false, crate::wire::ExtensionKind::None);
const _: () = assert!(SYN_OPTIONS_LEN == 35 && SYN_OPTIONS_LEN <= crate::wire::MAX_OPTIONS_LEN);

impl Connection {
    /// Settle options from the peer's SYN or SYN-ACK, and with them the receive path.
    pub(super) fn negotiate(&mut self, now: Duration, opts: &TcpOptions, we_offered_ts: bool) {
        self.neg.peer_mss = opts.mss.unwrap_or(536).max(64);
        if let Some(ws) = opts.window_scale {
            self.neg.peer_wscale = ws.min(14);
            self.neg.rcv_wscale = self.cfg.window_scale.min(14);
        }
        self.neg.sack_ok = opts.sack_permitted;
        let hello = opts.bth.filter(|b| b.opcode == Opcode::Hello);
        self.peer_hello = hello.is_some();
        match hello {
            Some(h) if self.cfg.bth => {
                self.mode = Mode::Bth {
                    peer_first_msn: h.msn,
                    peer_max_message: h.mbo,
                };
                // We may not send messages larger than the peer accepts.
                self.snd.framer.set_max_message_len(h.mbo);
                // S framing when the peer's hello offers it and we want it: for the passive
                // side its SYN's offer, for the active side the SYN-ACK's acceptance of ours.
                self.neg.seq_framed = h.seq_framed && self.cfg.framing == Framing::Seq;
                self.snd.framer.set_seq_framed(self.neg.seq_framed);
                if let RxPath::Bth(b) = &mut self.rx {
                    b.anchor(h.msn);
                }
                // The peer's TSval: folded into its hello (T=1, a SYN-ACK's or an old-style
                // SYN's), or in the RFC 7323 option beside a T=0 hello (a SYN's, amendment 4).
                let ts = h.timestamps.or(opts.timestamps);
                self.rcv.set_ts_recent(now, ts.map(|t| t.tsval));
                // Our first pure ACK carries our grant (R=1): the active opener's is the
                // handshake's ACK, before the peer's first flight grows past it.
                self.owed.credit = true;
            }
            _ => {
                self.mode = Mode::Plain;
                if let RxPath::Bth(b) = &mut self.rx {
                    // Receives posted before we knew the peer speaks plain TCP come back.
                    b.placement.flush();
                    b.drain(&mut self.cq, u64::MAX);
                    self.cq.release_all();
                }
                self.rx = RxPath::Plain(PlainRx::default());
                self.neg.ts_ok = we_offered_ts && opts.timestamps.is_some();
                if self.neg.ts_ok {
                    self.rcv
                        .set_ts_recent(now, opts.timestamps.map(|t| t.tsval));
                }
            }
        }
        // Segment indexes count in units of the payload size actually sent.
        self.snd.framer.set_mss(self.payload_mss());
    }

    pub(super) fn on_syn_sent(&mut self, now: Duration, seg: &TcpRepr<'_>) {
        let f = seg.flags;
        if f.ack() && seg.ack != self.snd.iss().wrapping_add(1) {
            if !f.rst() {
                self.owed.rst = Some(seg.ack);
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
        self.rcv.irs = seg.seq;
        // Our SYN carried the RFC 7323 option whenever `cfg.timestamps` is set, beside a T=0
        // hello too (amendment 4): a SYN-ACK without the hello that echoes it gives plain TCP
        // with timestamps.
        self.negotiate(now, &seg.options, self.cfg.timestamps);
        self.snd
            .take_window(u64::from(seg.window), seg.seq, seg.ack);
        if f.ack() {
            self.on_syn_acked(now);
            self.state = State::Established;
            self.owed.ack = true;
        } else {
            // Simultaneous open (RFC 9293 §3.5): answer with SYN-ACK.
            self.state = State::SynReceived;
            self.syn = Syn::Owed {
                retransmission: true,
            };
        }
    }

    pub(super) fn on_syn_acked(&mut self, now: Duration) {
        if let Syn::Sent {
            at,
            retransmitted: false,
        } = self.syn
        {
            self.snd.rtt.on_sample(now.saturating_sub(at));
        }
        self.syn = Syn::Acked;
        self.heard(now);
        self.timers.stop(Timer::Rto);
        self.retries = 0;
    }

    pub(super) fn build_syn(&mut self, now: Duration, out: &mut output::Out<'_>) -> usize {
        let retransmitted = matches!(
            self.syn,
            Syn::Owed {
                retransmission: true
            }
        );
        self.syn = Syn::Sent {
            at: now,
            retransmitted,
        };
        self.timers.set(Timer::Rto, now + self.snd.rtt.rto());
        let passive = self.state == State::SynReceived;
        let mut opts = TcpOptions {
            mss: Some(self.cfg.mss),
            sack_permitted: !passive || self.neg.sack_ok,
            ..Default::default()
        };
        // Window scale: offer on SYN; on SYN-ACK only if the peer offered (RFC 7323 §2.2).
        if !passive || self.neg.rcv_wscale > 0 || self.neg.peer_wscale > 0 {
            opts.window_scale = Some(self.cfg.window_scale.min(14));
        }
        let bth = match self.mode {
            Mode::Bth { .. } => true,
            Mode::Pending => self.cfg.bth && !passive,
            Mode::Plain => false,
        };
        let ts = Timestamps {
            tsval: self.rcv.tsval(now),
            tsecr: self.rcv.ts_recent.unwrap_or(0),
        };
        if bth {
            let mut hello = Bth::new(Opcode::Hello);
            hello.msn = self.cfg.first_msn;
            // The SYN offers S framing as configured; the SYN-ACK accepts it or not, and a
            // retransmitted SYN repeats the offer unchanged.
            hello.seq_framed = if passive {
                self.neg.seq_framed
            } else {
                self.cfg.framing == Framing::Seq
            };
            hello.mbo = self.cfg.max_message_len.min(crate::wire::MAX_MESSAGE_LEN);
            if !passive && self.cfg.timestamps {
                // Amendment 4: the SYN's hello without timestamps (T=0, 16 bytes) beside the
                // RFC 7323 option (SYN_OPTIONS_LEN), so that a peer without BTH, which
                // ignores the hello, still negotiates timestamps. A SYN-ACK's hello folds
                // them (T=1), as every later BTH option does.
                opts.timestamps = Some(ts);
            } else {
                hello.timestamps = Some(ts);
            }
            hello.seal(&[]);
            opts.bth = Some(hello);
        } else if (!passive && self.cfg.timestamps) || (passive && self.neg.ts_ok) {
            opts.timestamps = Some(ts);
        }
        let (flags, ack) = if passive {
            (TcpFlags::SYN | TcpFlags::ACK, self.rcv.irs.wrapping_add(1))
        } else {
            (TcpFlags::SYN, 0)
        };
        let window = self.cfg.recv_window.min(65535) as u16;
        // Unscaled in a SYN (RFC 7323 §2.2); its edge counts from the first data byte.
        self.rcv.adv_edge = self.rcv.adv_edge.max(u64::from(window));
        let len = crate::wire::TCP_HEADER_MIN + opts.encoded_len();
        let seg = output::Out::new(&mut out.buf[..len], out.fill);
        let repr = self.repr(flags, self.snd.iss(), ack, window, opts);
        self.encode(repr, seg)
    }

    /// Orderly close: FIN after everything queued has been sent.
    pub fn close(&mut self) {
        if self.snd.fin() != Fin::None {
            return;
        }
        match self.state {
            State::Established | State::SynReceived => {
                self.snd.queue_fin();
                self.state = State::FinWait1;
            }
            State::CloseWait => {
                self.snd.queue_fin();
                self.state = State::LastAck;
            }
            State::SynSent => self.state = State::Closed,
            _ => {}
        }
        self.note_events();
    }

    /// Abort: RST now, everything outstanding completes with a flush error.
    pub fn abort(&mut self) {
        if self.state.synchronized() || self.state == State::SynReceived {
            self.owed.rst = Some(self.snd.seq_of(self.snd.nxt()));
        }
        self.fail(ConnectionError::LocallyAborted);
        self.note_events();
    }

    /// The peer's FIN, once every byte before it has arrived, moves the state machine.
    pub(super) fn check_peer_fin(&mut self, now: Duration) {
        let Some(fin) = self.rcv.peer_fin else { return };
        if self.rcv.nxt != fin {
            return;
        }
        self.rcv.nxt = fin + 1;
        self.owed.ack = true;
        self.cq.release(self.rcv.nxt);
        match self.state {
            State::Established | State::SynReceived => self.state = State::CloseWait,
            State::FinWait1 if self.snd.fin().acked() => self.enter_time_wait(now),
            State::FinWait1 => self.state = State::Closing,
            State::FinWait2 => self.enter_time_wait(now),
            State::TimeWait => self.timers.set(Timer::TimeWait, now + self.cfg.time_wait),
            _ => {}
        }
    }

    pub(super) fn enter_time_wait(&mut self, now: Duration) {
        self.state = State::TimeWait;
        self.timers.stop_all();
        self.timers.set(Timer::TimeWait, now + self.cfg.time_wait);
    }

    /// Our FIN, when it is due: first transmission or the RTO's resend.
    pub(super) fn next_fin(&mut self, now: Duration, out: &mut output::Out<'_>) -> Option<usize> {
        let at = self.snd.send_fin()?;
        self.arm_rto(now);
        let seq = self.snd.seq_of(at);
        let ack = self.rcv.seq_of(self.rcv.nxt);
        Some(self.build(
            now,
            TcpFlags::FIN | TcpFlags::ACK,
            seq,
            ack,
            output::Body::None,
            out,
        ))
    }
}
