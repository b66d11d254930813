//! Timers: RTO (RFC 6298), RACK reorder timer and tail loss probe (RFC 8985), persist (zero
//! window or no message credit), TIME-WAIT. All are deadlines on the caller's clock.

use super::*;

impl Connection {
    /// The earliest deadline at which [`handle_timeout`](Self::handle_timeout) must be called.
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.timers.next()
    }

    /// Handle every timer that has expired at `now`, in [`Timer::VALUES`] order.
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
                Timer::Rack => self.detect_losses(now),
                Timer::Tlp => self.on_tlp(now),
                Timer::Persist => self.on_persist(now),
                Timer::Rto => self.on_rto(now),
            }
        }
    }

    pub(super) fn arm_rto(&mut self, now: Duration) {
        if !self.timers.is_set(Timer::Rto) {
            self.timers.set(Timer::Rto, now + self.rtt.rto());
        }
    }

    /// RFC 8985 §7.2: probe after 2*SRTT when the flight's tail might have been lost.
    pub(super) fn arm_tlp(&mut self, now: Duration) {
        if self.recovery_point.is_some() || self.rec.is_empty() {
            self.timers.stop(Timer::Tlp);
            return;
        }
        let Some(srtt) = self.rtt.srtt() else { return };
        let pto = (srtt * 2).max(Duration::from_micros(100));
        let rto_at = self.timers.get(Timer::Rto).unwrap_or(now + self.rtt.rto());
        self.timers.set(Timer::Tlp, (now + pto).min(rto_at));
    }

    /// Nothing in flight but data waits on window or credit: probe so a lost window update
    /// cannot deadlock the connection (RFC 9293 §3.8.6.1).
    pub(super) fn arm_persist(&mut self, now: Duration) {
        if !self.timers.is_set(Timer::Persist) && self.rec.is_empty() && !self.fin_sent {
            let backoff = 1u32 << self.persist_backoff.min(10);
            let wait = self.rtt.rto().saturating_mul(backoff).min(self.cfg.max_rto);
            self.timers.set(Timer::Persist, now + wait);
        }
    }

    pub(super) fn rearm_after_ack(&mut self, now: Duration, progressed: bool) {
        let outstanding = !self.rec.is_empty() || (self.fin_sent && !self.fin_acked);
        if !outstanding {
            self.timers.stop(Timer::Rto);
            self.timers.stop(Timer::Tlp);
        } else if progressed {
            // RFC 6298 §5.3: restart the timer when new data is acknowledged.
            self.timers.set(Timer::Rto, now + self.rtt.rto());
            self.arm_tlp(now);
        }
        if progressed {
            self.timers.stop(Timer::Persist);
        }
    }

    fn on_tlp(&mut self, now: Duration) {
        if self.rec.is_empty() {
            return;
        }
        self.rec.stats.tlp_probes += 1;
        // New data is the better probe when the window allows it; otherwise resend the tail.
        if self.snd_nxt >= self.framer.stream_end() {
            self.tlp_probe = self.rec.last();
        }
        let _ = now;
    }

    fn on_persist(&mut self, now: Duration) {
        if self.snd_nxt >= self.framer.stream_end() || !self.rec.is_empty() {
            return;
        }
        self.persist_backoff += 1;
        // A segment one below snd_una is outside the peer's window: it answers with an ACK
        // carrying its current window and credit (the keep-alive trick, RFC 9293 §3.8.4).
        let seq = self.seq_of(self.snd_una).wrapping_sub(1);
        let ack = self.rcv_seq_of(self.rcv_nxt);
        self.probe_pending = Some((seq, ack));
        self.arm_persist(now);
    }

    fn on_rto(&mut self, now: Duration) {
        self.retries += 1;
        if self.retries > self.cfg.max_retries {
            self.rst_pending = Some(self.seq_of(self.snd_nxt));
            self.fail(ConnectionError::TimedOut {
                retries: self.retries - 1,
            });
            return;
        }
        self.rtt.on_timeout();
        match self.state {
            State::SynSent | State::SynReceived => {
                self.syn_pending = true;
            }
            _ => {
                if !self.rec.is_empty() {
                    self.rec.on_rto();
                    self.cc.on_rto(now);
                    self.recovery_point = Some(self.snd_nxt);
                }
                if self.fin_sent && !self.fin_acked && self.rec.is_empty() {
                    self.fin_resend = true;
                }
                self.timers.stop(Timer::Tlp);
                self.timers.set(Timer::Rto, now + self.rtt.rto());
            }
        }
    }
}
