//! Congestion control for tcp-bth: NewReno, CUBIC and receiver-driven admission.
//!
//! Sans-IO like the rest of tcp-bth: no sockets, clocks or threads. Each algorithm is a state
//! machine behind the [`CongestionControl`] trait; the connection feeds it events and reads back
//! a congestion window in bytes. Nothing here panics on any input (zero or huge byte counts,
//! zero RTT, zero MSS, time standing still or going backwards); every arithmetic step saturates
//! and every f64 result is checked before it becomes a byte count.
//!
//! # Time
//!
//! Time is a [`Duration`] since an arbitrary epoch chosen by the caller (the connection's
//! virtual clock, e.g. the simulated link's), not [`std::time::Instant`]: a simulation can drive
//! it deterministically and tests can name instants. Only differences of `now` values are used
//! (CUBIC's `t`); a `now` earlier than a previous one is treated as no time having passed.
//!
//! # How the stack drives it
//!
//! Choose the algorithm per connection: `let cc = Algorithm::Cubic.build(mss)` (or parse
//! `"newreno"` / `"cubic"` with [`std::str::FromStr`]). Then:
//!
//! | when | call |
//! |---|---|
//! | the cumulative ACK advances | [`on_ack`](CongestionControl::on_ack)`(now, newly_acked_bytes, rtt_sample, bytes_in_flight_after)` |
//! | loss detected by fast retransmit / SACK / RACK, first loss of an episode | [`on_congestion_event`](CongestionControl::on_congestion_event)`(now, flight_size)` |
//! | the cumulative ACK passes the recovery point (`snd_nxt` when the episode began) | [`on_recovery_end`](CongestionControl::on_recovery_end)`(now)` |
//! | the retransmission timer expires with data outstanding | [`on_rto`](CongestionControl::on_rto)`(now)` |
//! | the last reduction proves spurious (Eifel / DSACK / F-RTO) | [`on_spurious_congestion`](CongestionControl::on_spurious_congestion)`()` |
//! | before sending | [`cwnd`](CongestionControl::cwnd)`()` |
//!
//! **Recovery episodes.** A window of data is one congestion event however many of its
//! segments are lost (RFC 6582 §3.2, RFC 9438 §4.6). The stack owns the sequence space, so it
//! owns the episode marker: it records `recover = snd_nxt` when it calls `on_congestion_event`,
//! does not call it again until the cumulative ACK passes `recover`, and then calls
//! `on_recovery_end`. The algorithms also guard themselves: a congestion event while an episode
//! is in progress (including the one a timeout starts) is ignored, and if `on_recovery_end`
//! never comes the episode ends by itself once as many bytes as were in flight at its start
//! have been acknowledged (never later than the stack's own marker would end it). During a
//! fast-recovery episode cwnd is frozen at the reduced value (RFC 6675 §5 / RFC 6937 do the
//! sending against `pipe`); after a timeout it slow-starts from one segment.
//!
//! **`bytes_in_flight`.** For `on_congestion_event` it is RFC 5681's FlightSize, the data sent
//! and not yet cumulatively acknowledged (`snd_nxt - snd_una`), sampled before the lost
//! segments are taken out of `pipe`. The reduction is `FlightSize * β` (β = 1/2 NewReno, 0.7
//! CUBIC) with FlightSize the most in flight since the last reduction: the larger of this
//! figure and what was in flight before each ACK since, at most cwnd (the ACK that reveals a
//! loss has often just acknowledged most of the flight). For `on_ack` it is
//! the data in flight after the ACK (RFC 6675 `pipe` is fine): the window only grows while at
//! least half of it was in use before some ACK of the current or the previous round (one
//! flight acknowledged; RFC 7661), so an application-, rwnd- or admission-limited sender does
//! not inflate a window it never tested, and the later ACKs of a batch taken before the
//! sender refills still count. `on_rto` has no flight
//! argument; cwnd stands in for FlightSize there (as in Linux).
//!
//! **Sending.** The sender's effective window is `min(cwnd, peer rwnd, admission window)`; the
//! stack takes that minimum (this crate sees only cwnd and the admission grant, not rwnd) and
//! sends while `bytes_in_flight` is below it. [`ReceiverAdmission`] tracks the admission grant
//! on the sender and computes it on the receiver.
//!
//! # Algorithms
//!
//! * [`NewReno`]: RFC 5681 + RFC 6582 window behaviour, RFC 6928 initial window, RFC 3465
//!   appropriate byte counting (L = 2 in slow start, one MSS per cwnd of bytes in congestion
//!   avoidance).
//! * [`Cubic`]: RFC 9438 (C = 0.4, β = 0.7, Reno-friendly region, fast convergence, timeout
//!   handling, spurious-congestion undo), same slow start and initial window as NewReno.
//!
//! # Invariants
//!
//! `cwnd() >= mss()` always (1 MSS is RFC 5681's loss window after a timeout; a congestion event
//! leaves at least 2 MSS, RFC 9438 §4.6), `ssthresh() >= 2 * mss()` always, and an ACK never
//! shrinks cwnd. These hold for arbitrary event sequences (see the property tests).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod admission;
mod cubic;
mod newreno;
mod window;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod test_util;

use core::fmt;
use core::str::FromStr;
use core::time::Duration;

pub use admission::{ReceiverAdmission, GRANT_UNIT, MAX_GRANT_UNITS};
pub use cubic::Cubic;
pub use newreno::NewReno;

/// A congestion control algorithm: a window in bytes driven by ACK, loss and timeout events.
///
/// All times are [`Duration`]s since a caller-chosen epoch (see the crate docs); all sizes are
/// bytes. No method panics on any input.
pub trait CongestionControl: Send + fmt::Debug {
    /// The cumulative ACK advanced.
    ///
    /// * `acked_bytes`: bytes the cumulative ACK newly covers (0 is a no-op). `tcp-bth`
    ///   passes these only: bytes SACKed earlier count here, once, when the cumulative ACK
    ///   passes them, not when their SACK arrives (Linux counts them at the SACK). The total
    ///   is the same; under reordering the growth comes later, and the ACK that ends a
    ///   fast-recovery episode, which covers what was SACKed during it, grows nothing.
    /// * `rtt`: an RTT sample taken from this ACK, if any (CUBIC keeps its own smoothed RTT
    ///   from these for `W_cubic(t + RTT)`); zero is accepted.
    /// * `bytes_in_flight`: bytes still in flight after this ACK (`pipe`).
    ///
    /// Grows cwnd in slow start / congestion avoidance unless a fast-recovery episode is in
    /// progress or the sender was not using the window. Never shrinks cwnd.
    fn on_ack(
        &mut self,
        now: Duration,
        acked_bytes: u64,
        rtt: Option<Duration>,
        bytes_in_flight: u64,
    );

    /// Loss detected by fast retransmit / SACK / RACK: the multiplicative decrease
    /// (RFC 5681 §3.1 / RFC 9438 §4.6) and the start of a recovery episode.
    ///
    /// `bytes_in_flight` is FlightSize when the loss is detected; the reduction applies to the
    /// larger of it and the most in flight before any ACK since the last reduction, at most
    /// cwnd. Call once per episode; calls while an episode is in progress are ignored.
    fn on_congestion_event(&mut self, now: Duration, bytes_in_flight: u64);

    /// The recovery episode is over: the cumulative ACK passed the highest sequence sent when
    /// it began (RFC 6582 §3.2 step 3). Window growth resumes and the next congestion event is
    /// a new one. A no-op outside an episode.
    fn on_recovery_end(&mut self, now: Duration);

    /// The retransmission timer expired: cwnd = 1 MSS (the loss window, RFC 5681 §3.1);
    /// ssthresh = max(cwnd * β, 2 MSS) (RFC 5681 §3.1 / RFC 9438 §4.8), except that it is held
    /// on a repeated timeout of the same data and when the episode in progress already reduced
    /// it. Starts an episode: losses found afterwards in data sent before the timeout are not a
    /// new congestion event.
    fn on_rto(&mut self, now: Duration);

    /// The latest reduction (congestion event or timeout) was spurious: restore the state from
    /// before it if cwnd has not already grown past it (RFC 9438 §4.9, RFC 4015). Ends the
    /// episode. Optional; the default does nothing.
    fn on_spurious_congestion(&mut self) {}

    /// Congestion window in bytes, at least [`mss`](CongestionControl::mss).
    fn cwnd(&self) -> u64;

    /// Slow-start threshold in bytes, at least 2 * MSS (`u64::MAX` until the first reduction).
    fn ssthresh(&self) -> u64;

    /// `cwnd < ssthresh` (RFC 5681 §3.1).
    fn in_slow_start(&self) -> bool;

    /// A recovery episode (after a congestion event or a timeout) is in progress.
    fn in_recovery(&self) -> bool;

    /// The sender MSS the window is counted in (the MSS given at construction, at least 1).
    fn mss(&self) -> u64;

    /// Algorithm name as [`Algorithm`] parses it (`"newreno"`, `"cubic"`).
    fn name(&self) -> &'static str;
}

/// The congestion control algorithm for a connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// [`NewReno`].
    NewReno,
    /// [`Cubic`] (the default, as in Linux).
    #[default]
    Cubic,
}

impl Algorithm {
    /// Every algorithm, for tools and tests that iterate over them.
    pub const ALL: [Algorithm; 2] = [Algorithm::NewReno, Algorithm::Cubic];

    /// `"newreno"` or `"cubic"`.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::NewReno => "newreno",
            Algorithm::Cubic => "cubic",
        }
    }

    /// A fresh instance for a connection whose sender MSS is `mss` bytes.
    pub fn build(self, mss: u32) -> Box<dyn CongestionControl> {
        match self {
            Algorithm::NewReno => Box::new(NewReno::new(mss)),
            Algorithm::Cubic => Box::new(Cubic::new(mss)),
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is none of [`Algorithm::ALL`]'s. Its message lists the names accepted:
/// `unknown congestion control algorithm "bbr" (expected "newreno" or "cubic")`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown congestion control algorithm {input:?} (expected {})",
    names_accepted()
)]
pub struct ParseAlgorithmError {
    input: String,
}

impl ParseAlgorithmError {
    /// The string that was not an algorithm name.
    pub fn input(&self) -> &str {
        &self.input
    }
}

/// `"a" or "b"`, `"a", "b" or "c"`: every name [`Algorithm`] parses, quoted.
fn names_accepted() -> String {
    let names: Vec<String> = Algorithm::ALL
        .iter()
        .map(|a| format!("{:?}", a.name()))
        .collect();
    match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

impl FromStr for Algorithm {
    type Err = ParseAlgorithmError;

    /// `"newreno"` or `"cubic"`, ASCII case-insensitive.
    fn from_str(s: &str) -> Result<Algorithm, ParseAlgorithmError> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| ParseAlgorithmError {
                input: s.to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_build() {
        assert_eq!("newreno".parse::<Algorithm>(), Ok(Algorithm::NewReno));
        assert_eq!("CUBIC".parse::<Algorithm>(), Ok(Algorithm::Cubic));
        let e = "bbr".parse::<Algorithm>().unwrap_err();
        assert_eq!(e.input(), "bbr");
        assert_eq!(
            e.to_string(),
            r#"unknown congestion control algorithm "bbr" (expected "newreno" or "cubic")"#
        );
        assert!("".parse::<Algorithm>().is_err());
        for a in Algorithm::ALL {
            assert_eq!(a.to_string().parse::<Algorithm>(), Ok(a));
            let cc = a.build(1448);
            assert_eq!(cc.name(), a.name());
            assert_eq!(cc.cwnd(), 14_480);
            assert_eq!(cc.mss(), 1448);
        }
        assert_eq!(Algorithm::default(), Algorithm::Cubic);
    }

    #[test]
    fn trait_objects_are_send() {
        fn is_send<T: Send>(_: &T) {}
        let cc = Algorithm::Cubic.build(1460);
        is_send(&cc);
        assert!(format!("{cc:?}").contains("Cubic"));
    }
}

/// A sender that stops filling its window, under driver turns (every ACK of a flight taken
/// before the refill): the window-used test must stop its growth within about two flights.
#[cfg(test)]
mod window_used_tests {
    use crate::test_util::driver_turns;
    use crate::*;
    use core::time::Duration;
    const MSS: u64 = 1000;

    fn turns(
        cc: &mut dyn CongestionControl,
        now: &mut Duration,
        app: u64,
        n: usize,
        rtt: Duration,
    ) {
        driver_turns(cc, now, MSS, app, n, rtt);
    }

    /// After a timeout, a sender with 3 segments in flight slow-starts no further than about
    /// twice that, whatever it had in flight before the timeout.
    #[test]
    fn after_a_timeout_an_app_limited_sender_does_not_regrow_to_ssthresh() {
        for alg in Algorithm::ALL {
            let mut cc = alg.build(MSS as u32);
            let mut now = Duration::ZERO;
            turns(cc.as_mut(), &mut now, u64::MAX, 4, Duration::from_millis(1));
            cc.on_rto(now);
            turns(cc.as_mut(), &mut now, 3, 50, Duration::from_millis(1));
            assert!(
                cc.cwnd() <= 8 * MSS,
                "{alg}: cwnd {} segs with 3 in flight",
                cc.cwnd() / MSS
            );
        }
    }

    /// A CUBIC sender that drops to 4 segments in flight stops growing within a couple of
    /// round trips, not a couple of cwnds of data (here ~100 round trips).
    #[test]
    fn cubic_stops_growing_soon_after_the_sender_stops_filling_the_window() {
        let rtt = Duration::from_millis(50);
        let mut cc = Cubic::new(MSS as u32);
        let mut now = Duration::ZERO;
        turns(&mut cc, &mut now, u64::MAX, 6, rtt);
        cc.on_congestion_event(now, cc.cwnd());
        cc.on_recovery_end(now);
        turns(&mut cc, &mut now, u64::MAX, 5, rtt);
        turns(&mut cc, &mut now, 4, 2, rtt);
        let w = cc.cwnd();
        turns(&mut cc, &mut now, 4, 200, rtt);
        assert!(
            cc.cwnd() <= w + 2 * MSS,
            "{} -> {} segs with 4 in flight",
            w / MSS,
            cc.cwnd() / MSS
        );
    }
}
