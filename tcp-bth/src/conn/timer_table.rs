//! The connection's timers: one table of deadlines indexed by [`Timer`] (quinn-proto's shape),
//! so there is one place to find the next deadline, one expiry loop and one way to stop all.

use std::time::Duration;

/// Every timer a connection runs. The order of [`Timer::VALUES`] is the order in which
/// expired timers are handled in one `handle_timeout` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// 2*MSL in TIME-WAIT; its expiry closes the connection and nothing else runs.
    TimeWait,
    /// Delayed ACK bound (RFC 1122 §4.2.3.2): `Config::ack_delay` after unacknowledged data.
    AckDelay,
    /// RACK reordering window (RFC 8985 §6.2).
    Rack,
    /// Tail loss probe (RFC 8985 §7).
    Tlp,
    /// Zero window, no message credit or no byte grant (RFC 9293 §3.8.6.1).
    Persist,
    /// Retransmission timeout (RFC 6298), also for SYN and FIN.
    Rto,
    /// A SEND has waited for message credit as long as `Config::rnr_timeout` allows.
    Rnr,
    /// Keepalive (`Config::keepalive`): time to look at how long the peer has been silent.
    Keepalive,
    /// Sent data has gone unacknowledged as long as `Config::user_timeout` allows.
    UserTimeout,
}

impl Timer {
    pub const VALUES: [Timer; 9] = [
        Timer::TimeWait,
        Timer::AckDelay,
        Timer::Rack,
        Timer::Tlp,
        Timer::Persist,
        Timer::Rto,
        Timer::Rnr,
        Timer::Keepalive,
        Timer::UserTimeout,
    ];
}

/// Deadlines on the caller's clock, one slot per [`Timer`].
#[derive(Debug, Default, Clone)]
pub(crate) struct TimerTable {
    at: [Option<Duration>; Timer::VALUES.len()],
}

impl TimerTable {
    pub fn set(&mut self, t: Timer, at: Duration) {
        self.at[t as usize] = Some(at);
    }

    pub fn set_opt(&mut self, t: Timer, at: Option<Duration>) {
        self.at[t as usize] = at;
    }

    pub fn get(&self, t: Timer) -> Option<Duration> {
        self.at[t as usize]
    }

    pub fn is_set(&self, t: Timer) -> bool {
        self.at[t as usize].is_some()
    }

    pub fn stop(&mut self, t: Timer) {
        self.at[t as usize] = None;
    }

    pub fn stop_all(&mut self) {
        self.at = Default::default();
    }

    /// The earliest deadline of all.
    pub fn next(&self) -> Option<Duration> {
        self.at.iter().flatten().min().copied()
    }

    /// If `t` has expired at `now`, stop it and say so.
    pub fn take_expired(&mut self, t: Timer, now: Duration) -> bool {
        let expired = self.at[t as usize].is_some_and(|at| now >= at);
        if expired {
            self.stop(t);
        }
        expired
    }
}
