//! Noticing a peer that vanished: keepalive (RFC 9293 §3.8.4, RFC 1122 §4.2.3.6) for a
//! connection with nothing outstanding, and the user timeout (RFC 5482) for one whose data
//! goes unacknowledged. Both off by default (`Config::keepalive`, `Config::user_timeout`);
//! without them a peer killed mid-run went unnoticed until the application's own timeout, and
//! a silent connection forever. Shaped after Linux's `tcp_keepalive_timer` and
//! `TCP_USER_TIMEOUT`.

use super::handshake::Fin;
use super::*;

impl Connection {
    /// Start the keepalive clock once the connection is synchronized (called after every
    /// input; a no-op once armed or when keepalive is off). The clock is not moved by each
    /// segment: its expiry looks at when the peer was last heard (`RecvState::heard`) and
    /// sleeps again for the rest, as Linux does, so the per-segment cost is one store.
    pub(super) fn arm_keepalive(&mut self) {
        let Some(ka) = self.cfg.keepalive else { return };
        if self.state.synchronized() && !self.timers.is_set(Timer::Keepalive) {
            self.timers.set(Timer::Keepalive, self.rcv.heard + ka.idle);
        }
    }

    /// The peer was heard: an acceptable segment arrived (so it was no forgery outside the
    /// window), which answers any probe.
    pub(super) fn heard(&mut self, now: Duration) {
        self.rcv.heard = now;
        self.keepalive_probes = 0;
    }

    pub(super) fn on_keepalive(&mut self, now: Duration) {
        let Some(ka) = self.cfg.keepalive else { return };
        if !matches!(self.state, State::Established | State::CloseWait) {
            // Closing has timers of its own (RTO for our FIN, TIME-WAIT).
            return;
        }
        let busy = !self.snd.rec.is_empty() || self.snd.nxt() < self.snd.framer.stream_end();
        let silent = now.saturating_sub(self.rcv.heard);
        let next = if busy {
            // Data outstanding or waiting: the RTO, the persist timer and the user timeout
            // watch the peer then.
            now + ka.idle
        } else if silent < ka.idle {
            self.rcv.heard + ka.idle
        } else if self.keepalive_probes >= ka.probes {
            self.owed.rst = Some(self.snd.seq_of(self.snd.nxt()));
            self.fail(ConnectionError::KeepaliveTimedOut {
                probes: self.keepalive_probes,
                icmp: self.soft_error,
            });
            return;
        } else {
            // A segment one below SND.UNA without data: outside the peer's window, so it
            // answers with an ACK (RFC 9293 §3.8.4), as the persist probe does.
            let seq = self.snd.seq_of(self.snd.una()).wrapping_sub(1);
            self.owed.probe = Some((seq, self.rcv.seq_of(self.rcv.nxt)));
            self.keepalive_probes += 1;
            self.stats.keepalive_probes += 1;
            now + ka.interval
        };
        self.timers.set(Timer::Keepalive, next);
    }

    /// Data or our FIN went out: start the user timeout unless it runs already (it measures
    /// from the oldest unacknowledged transmission, restarted by each ACK that moves SND.UNA).
    pub(super) fn arm_user_timeout(&mut self, now: Duration) {
        if let Some(t) = self.cfg.user_timeout {
            if !self.timers.is_set(Timer::UserTimeout) {
                self.timers.set(Timer::UserTimeout, now + t);
            }
        }
    }

    /// An ACK moved SND.UNA: the clock restarts for what is still outstanding, or stops.
    pub(super) fn rearm_user_timeout(&mut self, now: Duration, outstanding: bool) {
        match self.cfg.user_timeout {
            Some(t) if outstanding => self.timers.set(Timer::UserTimeout, now + t),
            _ => self.timers.stop(Timer::UserTimeout),
        }
    }

    pub(super) fn on_user_timeout(&mut self) {
        let Some(after) = self.cfg.user_timeout else {
            return;
        };
        let outstanding = !self.snd.rec.is_empty() || matches!(self.snd.fin(), Fin::Sent { .. });
        if outstanding && self.state.synchronized() {
            self.owed.rst = Some(self.snd.seq_of(self.snd.nxt()));
            self.fail(ConnectionError::UserTimeout {
                after,
                icmp: self.soft_error,
            });
        }
    }
}
