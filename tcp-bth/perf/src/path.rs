//! The path as one side's connection saw it during a run: smoothed round trip, congestion
//! window and bytes in flight (RFC 6675's pipe: sent, neither acknowledged nor SACKed, nor
//! marked lost; what the window bounds), sampled at most once per millisecond of driver time
//! while the side had data in flight, each sample weighted by the time until the next. iperf3
//! prints the window and the RTT per interval for the same reason: a run moves what it has in
//! flight per round trip, so one that moved less had less in flight (the window, the peer's
//! credit, the application) or a longer round trip (a queue on the path), and these say which.
//!
//! A side samples at the start of its application's turn, after the turn's ACKs were taken
//! and before its new segments leave: the low point of each turn's flight, by at most what one
//! turn acknowledges.

use crate::units::{bytes, micros};
use serde::Serialize;
use std::time::Duration;
use tcp_bth::{Connection, SendLimits};

/// Least driver time between two samples.
pub const EVERY: Duration = Duration::from_millis(1);
/// Fewest samples [`PathSamples::line`] prints.
pub const MIN_SAMPLES: u64 = 3;

/// What the JSON outputs carry ([`PathSamples::summary`]): the means the `path:` line prints,
/// the maxima, and what they are over. Times in µs, sizes in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PathSummary {
    /// Connections the figures are per (`-q`: means and maxima per connection).
    pub connections: u64,
    /// Samples taken (each with data in flight), over all connections.
    pub samples: u64,
    /// Driver time with data in flight the means are over.
    pub covered_us: u64,
    /// Time-weighted mean smoothed RTT; `None` before the first RTT estimate.
    pub srtt_mean_us: Option<u64>,
    /// Largest smoothed RTT sampled (0 before the first estimate).
    pub srtt_max_us: u64,
    /// Smallest RTT measured; `None` if none was.
    pub min_rtt_us: Option<u64>,
    /// Bytes in flight: RFC 6675's pipe, time-weighted mean; `None` with no time covered.
    pub in_flight_mean_bytes: Option<u64>,
    /// Largest pipe sampled.
    pub in_flight_max_bytes: u64,
    /// Time-weighted mean congestion window; `None` with no time covered.
    pub cwnd_mean_bytes: Option<u64>,
    /// Largest congestion window sampled.
    pub cwnd_max_bytes: u64,
    /// What held the sender back, summed over the connections (`Connection::send_limits`).
    pub limits: LimitsSummary,
}

/// [`SendLimits`] in µs, for the JSON outputs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LimitsSummary {
    /// Time with data to send or in flight: the sum of the rest.
    pub busy_us: u64,
    /// A segment went out, or the data path was full (the driver did not ask).
    pub sending_us: u64,
    /// Held by the congestion window.
    pub cwnd_us: u64,
    /// Held by the peer's TCP window.
    pub peer_window_us: u64,
    /// Held for the peer's message credit: no receive posted for the next SEND (RNR).
    pub credit_us: u64,
    /// Held by the peer's byte grant (receiver-driven admission).
    pub grant_us: u64,
    /// Data in flight and nothing more posted to send.
    pub nothing_to_send_us: u64,
}

impl LimitsSummary {
    /// What [`shares`](Self::shares) are of, in its order.
    pub const STATES: [&'static str; 6] = [
        "sending or data path full",
        "congestion window",
        "peer's window",
        "credit",
        "grant",
        "nothing more to send",
    ];

    /// Each state's share of the busy time ([`STATES`](Self::STATES)); None if never busy.
    pub fn shares(&self) -> Option<[f64; 6]> {
        let busy = self.busy_us as f64;
        let parts = [
            self.sending_us,
            self.cwnd_us,
            self.peer_window_us,
            self.credit_us,
            self.grant_us,
            self.nothing_to_send_us,
        ];
        (self.busy_us > 0).then(|| parts.map(|p| p as f64 / busy))
    }

    fn of(l: &SendLimits) -> LimitsSummary {
        let us = |d: Duration| d.as_micros() as u64;
        LimitsSummary {
            busy_us: us(l.busy()),
            sending_us: us(l.sending),
            cwnd_us: us(l.cwnd),
            peer_window_us: us(l.peer_window),
            credit_us: us(l.credit),
            grant_us: us(l.grant),
            nothing_to_send_us: us(l.nothing_to_send),
        }
    }
}

/// Time-weighted sums and maxima of the samples, so that the samples of several connections
/// (`-q`) merge into one set ([`PathSamples::merge`]): means are then per connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathSamples {
    /// Connections whose samples these are.
    pub connections: u64,
    /// Samples taken (data in flight at each).
    pub samples: u64,
    /// Driver time the samples stand for, in µs: from each sample to the next while data
    /// stayed in flight. The means are over it.
    pub covered_us: u64,
    /// Of it, the time with an RTT estimate (the first ACK of data gives one).
    pub srtt_covered_us: u64,
    /// Smoothed RTT (µs) × time covered (µs), summed: over `srtt_covered_us`, the mean.
    pub srtt_us_x_us: u128,
    /// Largest smoothed RTT sampled, in µs (0 before the first estimate).
    pub srtt_max_us: u64,
    /// Smallest RTT measured over the connection's life (at the last sample).
    pub min_rtt_us: Option<u64>,
    /// Congestion window (bytes) × time covered (µs), summed.
    pub cwnd_x_us: u128,
    /// Largest congestion window sampled, in bytes.
    pub cwnd_max: u64,
    /// Bytes in flight (RFC 6675's pipe) × time covered (µs), summed.
    pub pipe_x_us: u128,
    /// Largest pipe sampled, in bytes.
    pub pipe_max: u64,
    /// The last sample, not yet weighted: its time, smoothed RTT (µs), window, pipe.
    last: Option<(Duration, Option<u64>, u64, u64)>,
    /// What held the sender back (cumulative: the latest reading of each connection, summed
    /// over merged ones).
    pub limits: SendLimits,
}

impl PathSamples {
    /// Sample `c` if [`EVERY`] has passed since the last sample (the previous sample is
    /// weighted by the time since); a side with nothing in flight closes its interval.
    pub fn sample(&mut self, c: &Connection, now: Duration) {
        // Cumulative in the connection: the latest reading is the run's.
        self.limits = c.send_limits(now);
        if let Some((at, ..)) = self.last {
            if now < at + EVERY {
                return;
            }
        }
        self.connections = 1;
        self.close(now);
        let pipe = c.pipe();
        if pipe == 0 {
            return;
        }
        let srtt = c.srtt().map(|s| s.as_micros() as u64);
        let cwnd = c.cwnd();
        self.samples += 1;
        self.srtt_max_us = self.srtt_max_us.max(srtt.unwrap_or(0));
        self.cwnd_max = self.cwnd_max.max(cwnd);
        self.pipe_max = self.pipe_max.max(pipe);
        if let Some(m) = c.min_rtt() {
            self.min_rtt_us = Some(m.as_micros() as u64);
        }
        self.last = Some((now, srtt, cwnd, pipe));
    }

    /// Weight the last sample by the time from it to `now`.
    fn close(&mut self, now: Duration) {
        let Some((at, srtt, cwnd, pipe)) = self.last.take() else {
            return;
        };
        let dt = now.saturating_sub(at).as_micros() as u64;
        self.covered_us += dt;
        self.cwnd_x_us += u128::from(cwnd) * u128::from(dt);
        self.pipe_x_us += u128::from(pipe) * u128::from(dt);
        if let Some(s) = srtt {
            self.srtt_covered_us += dt;
            self.srtt_us_x_us += u128::from(s) * u128::from(dt);
        }
    }

    /// Take `o`'s samples in too (another connection of the same run).
    pub fn merge(&mut self, o: &PathSamples) {
        self.connections += o.connections;
        self.samples += o.samples;
        self.covered_us += o.covered_us;
        self.srtt_covered_us += o.srtt_covered_us;
        self.srtt_us_x_us += o.srtt_us_x_us;
        self.srtt_max_us = self.srtt_max_us.max(o.srtt_max_us);
        self.min_rtt_us = match (self.min_rtt_us, o.min_rtt_us) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.cwnd_x_us += o.cwnd_x_us;
        self.cwnd_max = self.cwnd_max.max(o.cwnd_max);
        self.pipe_x_us += o.pipe_x_us;
        self.pipe_max = self.pipe_max.max(o.pipe_max);
        self.limits += o.limits;
    }

    /// Under [`MIN_SAMPLES`] per connection: a side that sent only a run's control messages
    /// (with `-q`, a few per connection) has samples that say nothing about the path.
    fn too_few_samples(&self) -> bool {
        self.samples < MIN_SAMPLES * self.connections.max(1)
    }

    /// Time-weighted mean smoothed RTT.
    pub fn srtt_mean(&self) -> Option<Duration> {
        let t = u128::from(self.srtt_covered_us);
        (t > 0).then(|| Duration::from_micros((self.srtt_us_x_us / t) as u64))
    }

    /// Time-weighted mean bytes in flight; `None` with no time covered.
    pub fn pipe_mean(&self) -> Option<u64> {
        let t = u128::from(self.covered_us);
        (t > 0).then(|| (self.pipe_x_us / t) as u64)
    }

    /// Time-weighted mean congestion window, in bytes; `None` with no time covered.
    pub fn cwnd_mean(&self) -> Option<u64> {
        let t = u128::from(self.covered_us);
        (t > 0).then(|| (self.cwnd_x_us / t) as u64)
    }

    /// The figures for the JSON outputs.
    pub fn summary(&self) -> PathSummary {
        PathSummary {
            connections: self.connections,
            samples: self.samples,
            covered_us: self.covered_us,
            srtt_mean_us: self.srtt_mean().map(|d| d.as_micros() as u64),
            srtt_max_us: self.srtt_max_us,
            min_rtt_us: self.min_rtt_us,
            in_flight_mean_bytes: self.pipe_mean(),
            in_flight_max_bytes: self.pipe_max,
            cwnd_mean_bytes: self.cwnd_mean(),
            cwnd_max_bytes: self.cwnd_max,
            limits: LimitsSummary::of(&self.limits),
        }
    }

    /// One line for `bth-perf`'s output, or `None` with fewer than [`MIN_SAMPLES`] per
    /// connection: a side that sent only the run's control messages (the responder of a SEND
    /// run) has a sample or two, which say nothing about the path.
    pub fn line(&self) -> Option<String> {
        if self.too_few_samples() {
            return None;
        }
        let (pipe, cwnd) = (self.pipe_mean()?, self.cwnd_mean()?);
        let srtt = match self.srtt_mean() {
            Some(m) => format!(
                "smoothed RTT mean {} (max {})",
                micros(m.as_micros() as f64),
                micros(self.srtt_max_us as f64)
            ),
            None => "no RTT measured".into(),
        };
        let min = self
            .min_rtt_us
            .map_or(String::new(), |m| format!(", min RTT {}", micros(m as f64)));
        let per = match self.connections {
            0 | 1 => String::new(),
            n => format!(" (per connection, {n} connections)"),
        };
        Some(format!(
            "path{per}: {srtt}{min}; in flight mean {} (max {}), congestion window mean {} (max \
             {}); over {} with data in flight, {} samples",
            bytes(pipe),
            bytes(self.pipe_max),
            bytes(cwnd),
            bytes(self.cwnd_max),
            // Per connection, like the means: summed it would exceed the run.
            micros(self.covered_us as f64 / self.connections.max(1) as f64),
            self.samples
        ))
    }

    /// What held the sender back, as shares of the time it had data to send or in flight;
    /// `None` when it was never busy, or under the path line's sample threshold (a side that
    /// sent only the run's control messages).
    pub fn limits_line(&self) -> Option<String> {
        let l = &self.limits;
        let busy = l.busy();
        if self.too_few_samples() || busy.is_zero() {
            return None;
        }
        let pct = |d: Duration| 100.0 * d.as_secs_f64() / busy.as_secs_f64();
        // Busy time per connection, like the path line's means: summed over `-q` connections
        // it would exceed the run. The shares are the same either way.
        let n = self.connections.max(1);
        let per = match n {
            1 => String::new(),
            n => format!(" (per connection, {n} connections)"),
        };
        Some(format!(
            "sender{per}: busy {}; sending or data path full {:.0} %, held by the congestion \
             window {:.0} %, the peer's window {:.0} %, its credit {:.0} %, its grant {:.0} %; \
             nothing more to send (the application's turn, or the last ACKs or READ responses \
             awaited) {:.0} %",
            micros(busy.as_micros() as f64 / n as f64),
            pct(l.sending),
            pct(l.cwnd),
            pct(l.peer_window),
            pct(l.credit),
            pct(l.grant),
            pct(l.nothing_to_send),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{cfg, run_sim};
    use crate::PerfOp;
    use bth_io::sim::LinkConfig;

    /// A SEND run over the simulated link at two delays: the sender's samples follow the
    /// path (its minimum RTT at least the link's round trip, a longer link a longer smoothed
    /// RTT), its means lie within its maxima, and the receiver, which sent only the run's
    /// control messages, has little in flight.
    #[test]
    fn the_sender_samples_the_path_and_the_receiver_little() {
        let mut srtt = Vec::new();
        for one_way in [Duration::from_micros(50), Duration::from_micros(500)] {
            let link = LinkConfig::default().with_delay(one_way);
            let (c, s) = run_sim(cfg(PerfOp::Send), cfg(PerfOp::Send), link);
            let p = c.path;
            assert!(p.samples > 1 && p.covered_us > 0, "{p:?}");
            let min = Duration::from_micros(p.min_rtt_us.expect("an RTT was measured"));
            assert!(
                min >= 2 * one_way,
                "min RTT {min:?} over a {one_way:?} link"
            );
            let mean = p.srtt_mean().expect("srtt samples");
            assert!(
                mean >= min && p.srtt_max_us >= mean.as_micros() as u64,
                "{p:?}"
            );
            let (f, w) = (p.pipe_mean().unwrap(), p.cwnd_mean().unwrap());
            assert!(f > 0 && f <= p.pipe_max, "{p:?}");
            assert!(w > 0 && w <= p.cwnd_max, "{p:?}");
            let line = p.line().expect("a line");
            assert!(line.starts_with("path: smoothed RTT mean"), "{line}");
            // The JSON outputs carry the same means.
            let sum = p.summary();
            assert_eq!(sum.srtt_mean_us, Some(mean.as_micros() as u64));
            assert_eq!(
                (sum.in_flight_mean_bytes, sum.cwnd_mean_bytes),
                (Some(f), Some(w))
            );
            // The sender was busy for the run and something accounts for all of it; the
            // receiver sends only the run's control messages (hello, statistics).
            let l = p.limits;
            assert!(l.busy() > Duration::ZERO, "{l:?}");
            assert_eq!(sum.limits.busy_us, l.busy().as_micros() as u64);
            let limits = p.limits_line().expect("a sender line");
            assert!(limits.starts_with("sender: busy "), "{limits}");
            assert!(s.path.pipe_max < 4096, "{:?}", s.path);
            assert!(s.path.limits.busy() < l.busy() / 4, "{l:?} {:?}", s.path);
            srtt.push(mean);
        }
        assert!(srtt[1] > srtt[0] + Duration::from_micros(500), "{srtt:?}");
    }

    /// The sender line gives each state's share of the busy time, and merged connections sum.
    #[test]
    fn the_sender_line_gives_shares_of_the_busy_time() {
        let ms = Duration::from_millis;
        let one = PathSamples {
            connections: 1,
            samples: 3,
            limits: SendLimits {
                sending: ms(1),
                cwnd: ms(2),
                nothing_to_send: ms(1),
                ..SendLimits::default()
            },
            ..PathSamples::default()
        };
        assert_eq!(
            one.limits_line().unwrap(),
            "sender: busy 4.00 ms; sending or data path full 25 %, held by the congestion \
             window 50 %, the peer's window 0 %, its credit 0 %, its grant 0 %; nothing more \
             to send (the application's turn, or the last ACKs or READ responses awaited) 25 %"
        );
        let mut two = one;
        two.merge(&one);
        // Summed inside, printed per connection (the shares are the same).
        assert_eq!(two.limits.busy(), ms(8));
        assert!(two
            .limits_line()
            .unwrap()
            .starts_with("sender (per connection, 2 connections): busy 4.00 ms"));
    }

    /// Means are weighted by time: a value held for 3 ms weighs three times one held for 1 ms,
    /// and merged sets are one set, per connection.
    #[test]
    fn means_are_weighted_by_time_and_merged_sets_are_one_set() {
        let mut a = PathSamples {
            connections: 1,
            samples: 2,
            ..PathSamples::default()
        };
        let ms = Duration::from_millis;
        a.last = Some((ms(0), Some(100), 10_000, 4_000));
        a.close(ms(3));
        a.last = Some((ms(3), Some(500), 20_000, 8_000));
        a.close(ms(4));
        assert_eq!(a.covered_us, 4_000);
        assert_eq!(a.srtt_mean(), Some(Duration::from_micros(200)));
        assert_eq!((a.cwnd_mean(), a.pipe_mean()), (Some(12_500), Some(5_000)));
        let mut b = PathSamples {
            connections: 1,
            samples: 4,
            min_rtt_us: Some(40),
            ..PathSamples::default()
        };
        b.last = Some((ms(0), None, 4_000, 4_000));
        b.close(ms(4));
        let mut m = a;
        m.merge(&b);
        assert_eq!((m.connections, m.covered_us), (2, 8_000));
        assert_eq!(
            m.srtt_mean(),
            Some(Duration::from_micros(200)),
            "b had no RTT"
        );
        assert_eq!((m.cwnd_mean(), m.pipe_mean()), (Some(8_250), Some(4_500)));
        assert_eq!(m.min_rtt_us, Some(40));
        assert_eq!(PathSamples::default().line(), None);
        assert_eq!(a.line(), None, "two samples say nothing");
        let line = m.line().unwrap();
        assert!(
            line.starts_with("path (per connection, 2 connections): "),
            "{line}"
        );
        assert!(line.contains("over 4.00 ms with data in flight"), "{line}");
        // Two connections need twice the samples: three are a few control messages each.
        let few = PathSamples { samples: 5, ..m };
        assert_eq!(few.line(), None);
    }
}
