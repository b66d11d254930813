//! What held the sender back, over time: Linux's send-side chronographs (`tcp_chrono_start`,
//! `busy`, `rwnd_limited`, `sndbuf_limited` in `ss -i`), with the limits of this stack.
//!
//! Every time the connection is asked for its next data segment it says what it found: it
//! sent one, or something held the data back (the congestion window, the peer's window, the
//! peer's message credit, its byte grant), or it had nothing more to send while data was in
//! flight. The time until the next such answer is charged to that state. A
//! connection with nothing in flight and nothing to send is idle and charges nothing.
//!
//! "Sending" also covers the time the data path was full: a driver whose transmit buffers are
//! all in flight does not ask, so the last answer (a segment sent) stands. An endpoint with
//! several connections asks them in turn, so one that was not asked because another filled
//! the data path keeps its last answer, which may be a hold. A closed connection's clock stops
//! at its last answer.
//!
//! A throughput measurement reads these to tell which bound it met: mostly "cwnd" is the
//! congestion controller, mostly "peer window" or "grant" the receiver, mostly "nothing more
//! to send" the workload (the application had not posted more) or the last round trips,
//! mostly "sending" the machine (CPU, the data path). A hold in front of a long queue (a
//! smoothed RTT far above the minimum) sets the queue's length, not the rate.

use std::time::Duration;

/// The states time is charged to, in [`SendLimits`]' order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Limit {
    /// A segment went out (or the data path was full and nothing was asked).
    Sending,
    /// The congestion window was full.
    Cwnd,
    /// The peer's TCP window was full.
    PeerWindow,
    /// The peer had no receive posted for the next SEND (its R=1 message credit).
    Credit,
    /// The peer's byte grant (receiver-driven admission) was used up.
    Grant,
    /// Data in flight and nothing more to send: the application had not posted more. The
    /// wait for the last ACKs of a transfer counts here, a tail loss probe's or RTO's wait
    /// included.
    NothingToSend,
}

/// Time the sender spent in each state since the connection was established (see the module
/// documentation). Their sum is the time the connection had data to send or in flight.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendLimits {
    /// Segments going out, or the data path full (Linux's `busy`).
    pub sending: Duration,
    /// Held by the congestion window.
    pub cwnd: Duration,
    /// Held by the peer's TCP window (Linux's `rwnd_limited`).
    pub peer_window: Duration,
    /// Held for the peer's message credit: no receive posted for the next SEND (RNR).
    pub credit: Duration,
    /// Held by the peer's byte grant (receiver-driven admission).
    pub grant: Duration,
    /// Data in flight and nothing more posted (Linux's `sndbuf_limited` comes closest).
    pub nothing_to_send: Duration,
}

impl SendLimits {
    /// Time with data to send or in flight.
    pub fn busy(&self) -> Duration {
        self.sending
            + self.cwnd
            + self.peer_window
            + self.credit
            + self.grant
            + self.nothing_to_send
    }

    fn slot(&mut self, l: Limit) -> &mut Duration {
        match l {
            Limit::Sending => &mut self.sending,
            Limit::Cwnd => &mut self.cwnd,
            Limit::PeerWindow => &mut self.peer_window,
            Limit::Credit => &mut self.credit,
            Limit::Grant => &mut self.grant,
            Limit::NothingToSend => &mut self.nothing_to_send,
        }
    }
}

/// Adds time state by state: the limits of several connections together.
impl std::ops::AddAssign for SendLimits {
    fn add_assign(&mut self, o: SendLimits) {
        self.sending += o.sending;
        self.cwnd += o.cwnd;
        self.peer_window += o.peer_window;
        self.credit += o.credit;
        self.grant += o.grant;
        self.nothing_to_send += o.nothing_to_send;
    }
}

/// The running chronograph: the state now and since when.
#[derive(Debug, Default)]
pub(super) struct Chrono {
    current: Option<(Limit, Duration)>,
    totals: SendLimits,
    /// When the sender last said what it found: a closed connection is read up to here, so
    /// its last state does not keep counting after the connection ended.
    last: Duration,
}

impl Chrono {
    /// The sender is in `state` from `now` on (None: idle).
    pub fn enter(&mut self, now: Duration, state: Option<Limit>) {
        self.last = self.last.max(now);
        if self.current.map(|(l, _)| l) == state {
            return;
        }
        self.stop(now);
        self.current = state.map(|l| (l, now));
    }

    /// Charge the running state up to `now` and stop.
    fn stop(&mut self, now: Duration) {
        if let Some((l, since)) = self.current.take() {
            *self.totals.slot(l) += now.saturating_sub(since);
        }
    }

    /// When the sender last said what it found.
    pub fn last(&self) -> Duration {
        self.last
    }

    /// The totals, with the running state charged up to `now`.
    pub fn read(&self, now: Duration) -> SendLimits {
        let mut t = self.totals;
        if let Some((l, since)) = self.current {
            *t.slot(l) += now.saturating_sub(since);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn time_goes_to_the_state_until_the_next_one_and_idle_charges_nothing() {
        let mut c = Chrono::default();
        c.enter(MS, Some(Limit::Sending));
        c.enter(3 * MS, Some(Limit::Sending)); // the same state: no restart
        c.enter(4 * MS, Some(Limit::Cwnd));
        c.enter(6 * MS, None);
        c.enter(10 * MS, Some(Limit::PeerWindow));
        let t = c.read(11 * MS);
        assert_eq!(t.sending, 3 * MS);
        assert_eq!(t.cwnd, 2 * MS);
        assert_eq!(
            t.peer_window, MS,
            "the running state counts up to the reading"
        );
        assert_eq!(t.busy(), 6 * MS, "the idle 4 ms are nobody's");
        // Reading does not stop the clock.
        assert_eq!(c.read(12 * MS).peer_window, 2 * MS);
    }
}
