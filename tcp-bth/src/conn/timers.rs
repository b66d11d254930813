//! Timers: RTO (RFC 6298), RACK reorder timer and tail loss probe (RFC 8985), persist (zero
//! window or no message credit), TIME-WAIT. All are deadlines on the caller's clock.

use super::handshake::Fin;
use super::*;

impl Connection {
    /// The earliest deadline at which [`handle_timeout`](Self::handle_timeout) must be called.
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.timers.next()
    }

    /// Handle every timer that has expired at `now`, in `Timer::VALUES` order.
    pub fn handle_timeout(&mut self, now: Duration) {
        self.fire_timers(now);
        self.note_events();
    }

    fn fire_timers(&mut self, now: Duration) {
        for t in Timer::VALUES {
            if !self.timers.take_expired(t, now) {
                continue;
            }
            match t {
                Timer::TimeWait => {
                    self.state = State::Closed;
                    return;
                }
                Timer::AckDelay => self.on_ack_delay(),
                Timer::Rack => self.detect_losses(now),
                Timer::Tlp => self.on_tlp(now),
                Timer::Persist => self.on_persist(now),
                Timer::Rto => self.on_rto(now),
                Timer::Rnr => self.on_rnr(),
                Timer::Keepalive => self.on_keepalive(now),
                Timer::UserTimeout => self.on_user_timeout(),
            }
        }
    }

    /// Data or our FIN went out: the RTO runs (and the user timeout, if set).
    pub(super) fn arm_rto(&mut self, now: Duration) {
        if !self.timers.is_set(Timer::Rto) {
            self.timers.set(Timer::Rto, now + self.snd.rtt.rto());
        }
        self.arm_user_timeout(now);
    }

    /// RFC 8985 §7.2: probe after 2*SRTT when the flight's tail might have been lost.
    pub(super) fn arm_tlp(&mut self, now: Duration) {
        if self.snd.in_recovery() || self.snd.rec.is_empty() {
            self.timers.stop(Timer::Tlp);
            return;
        }
        let Some(srtt) = self.snd.rtt.srtt() else {
            return;
        };
        // RFC 8985 §7.2 takes 2·SRTT; a path whose RTT jitters (a relay, a busy driver) needs
        // room for its variance too, as QUIC's PTO gives it (RFC 9002 §6.2.1), and the peer
        // may hold its ACK for up to its delayed-ACK bound (assumed equal to ours).
        let var = srtt + self.snd.rtt.rttvar() * 4;
        let pto = (srtt * 2).max(var) + self.cfg.ack_delay;
        let rto_at = self
            .timers
            .get(Timer::Rto)
            .unwrap_or(now + self.snd.rtt.rto());
        self.timers.set(Timer::Tlp, (now + pto).min(rto_at));
    }

    /// Nothing in flight but data waits on window or credit: probe so a lost window update
    /// cannot deadlock the connection (RFC 9293 §3.8.6.1).
    pub(super) fn arm_persist(&mut self, now: Duration) {
        if !self.timers.is_set(Timer::Persist) && self.snd.rec.is_empty() && !self.snd.fin().sent()
        {
            let backoff = 1u32 << self.persist_backoff.min(10);
            let wait = self
                .snd
                .rtt
                .rto()
                .saturating_mul(backoff)
                .min(self.cfg.max_rto);
            self.timers.set(Timer::Persist, now + wait);
        }
    }

    pub(super) fn rearm_after_ack(&mut self, now: Duration, progressed: bool) {
        let outstanding = !self.snd.rec.is_empty() || matches!(self.snd.fin(), Fin::Sent { .. });
        if !outstanding {
            self.timers.stop(Timer::Rto);
            self.timers.stop(Timer::Tlp);
        } else if progressed {
            // RFC 6298 §5.3: restart the timer when new data is acknowledged.
            self.timers.set(Timer::Rto, now + self.snd.rtt.rto());
            self.arm_tlp(now);
        }
        if progressed {
            self.timers.stop(Timer::Persist);
            self.rearm_user_timeout(now, outstanding);
        }
    }

    fn on_tlp(&mut self, now: Duration) {
        if self.snd.rec.is_empty() {
            return;
        }
        // RFC 8985 §7.3: new data is the better probe when there is some and the peer's window,
        // its grant (and, for a SEND, its credit) allow it; otherwise resend the tail. Either way the
        // probe goes out even when cwnd is full: a sender limited by cwnd whose flight's ACK
        // was lost is exactly the case the probe exists for (it used to wait for the RTO).
        let bth = matches!(self.mode, Mode::Bth { .. });
        let new_data = self.snd.nxt() < self.snd.framer.stream_end()
            && self.snd.window_room() > 0
            && self.admission_room() > 0
            && (!bth || self.snd.credit_allows(self.snd.nxt()));
        self.snd.on_tlp(new_data);
        let _ = now;
    }

    fn on_persist(&mut self, now: Duration) {
        if self.snd.nxt() >= self.snd.framer.stream_end() || !self.snd.rec.is_empty() {
            return;
        }
        self.persist_backoff += 1;
        // A segment one below snd_una is outside the peer's window: it answers with an ACK
        // carrying its current window and credit (the keep-alive trick, RFC 9293 §3.8.4).
        let seq = self.snd.seq_of(self.snd.una()).wrapping_sub(1);
        let ack = self.rcv.seq_of(self.rcv.nxt);
        self.owed.probe = Some((seq, ack));
        self.arm_persist(now);
    }

    /// The SEND at `snd.nxt` is blocked on credit: start (or keep) the RNR clock. Called by
    /// output whenever credit, and nothing else, holds data back.
    pub(super) fn note_rnr_wait(&mut self, now: Duration) {
        let Some(limit) = self.cfg.rnr_timeout else {
            return;
        };
        let since = self.snd.rnr_wait(now);
        self.timers.set(Timer::Rnr, since + limit);
    }

    /// Credit arrived (or nothing waits for it): the RNR clock stops.
    pub(super) fn clear_rnr_wait(&mut self) {
        self.snd.end_rnr_wait();
        self.timers.stop(Timer::Rnr);
    }

    /// IB: a requester that keeps getting RNR NAKs past its retry count completes the SEND
    /// with "RNR retry exceeded" and the QP goes to the error state. Here the wait is for
    /// message credit; the peer learns of the failure from our RST.
    fn on_rnr(&mut self) {
        let waiting = self.snd.rnr_waiting() && !self.snd.credit_allows(self.snd.nxt());
        let msn = self.snd.framer.message_at(self.snd.nxt()).map(|m| m.msn);
        match msn {
            Some(msn) if waiting => {
                self.owed.rst = Some(self.snd.seq_of(self.snd.nxt()));
                self.fail(ConnectionError::RnrRetryExceeded { msn });
            }
            _ => self.clear_rnr_wait(),
        }
    }

    fn on_rto(&mut self, now: Duration) {
        self.retries += 1;
        let opening = matches!(self.state, State::SynSent | State::SynReceived);
        if opening && self.retries > self.cfg.syn_retries {
            // An unanswered SYN has its own, shorter budget (Linux's tcp_syn_retries): a
            // connect to nobody should fail in seconds, not after 15 backed-off RTOs.
            if self.state == State::SynReceived {
                self.owed.rst = Some(self.snd.seq_of(self.snd.nxt()));
            }
            self.fail(ConnectionError::HandshakeTimedOut { syns: self.retries });
            return;
        }
        if self.retries > self.cfg.max_retries {
            self.owed.rst = Some(self.snd.seq_of(self.snd.nxt()));
            self.fail(ConnectionError::TimedOut {
                retries: self.retries - 1,
                icmp: self.soft_error,
            });
            return;
        }
        self.snd.rtt.on_timeout();
        match self.state {
            State::SynSent | State::SynReceived => {
                self.syn = Syn::Owed {
                    retransmission: true,
                };
            }
            _ => {
                self.snd.on_rto(now);
                self.timers.stop(Timer::Tlp);
                self.timers.set(Timer::Rto, now + self.snd.rtt.rto());
            }
        }
    }
}
