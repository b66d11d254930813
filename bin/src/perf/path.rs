//! The path as one side's connection saw it during a run: smoothed round trip, congestion
//! window and outstanding bytes (SND.NXT − SND.UNA: sent and not yet cumulatively
//! acknowledged, SACKed bytes above a hole included), sampled once per millisecond of driver
//! time while data was outstanding. iperf3 prints the window and the RTT per interval for the
//! same reason: a run moves what it has in flight per round trip, so one that moved less had
//! less in flight (the window, the peer's credit, the application) or a longer round trip (a
//! queue on the path), and these say which.

use crate::compare::sizes::{bytes, micros};
use serde::Serialize;
use std::time::Duration;
use tcp_bth::Connection;

/// How often a side samples its connection (driver time).
pub const EVERY: Duration = Duration::from_millis(1);

/// Sums, maxima and counts of the samples, so that the samples of several connections (`-q`)
/// merge into one set ([`PathSamples::merge`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PathSamples {
    /// Samples taken (data outstanding at each).
    pub samples: u64,
    /// Of them with an RTT estimate (the first ACK of data gives one).
    pub srtt_samples: u64,
    pub srtt_sum_us: u64,
    pub srtt_max_us: u64,
    /// Smallest RTT measured over the connection's life (at the last sample).
    pub min_rtt_us: Option<u64>,
    pub cwnd_sum: u64,
    pub cwnd_max: u64,
    pub outstanding_sum: u64,
    pub outstanding_max: u64,
    /// Driver time of the next sample.
    #[serde(skip)]
    next_at: Duration,
}

impl PathSamples {
    /// Sample `c` if [`EVERY`] has passed since the last sample and data is outstanding.
    pub fn sample(&mut self, c: &Connection, now: Duration) {
        if now < self.next_at {
            return;
        }
        self.next_at = now + EVERY;
        let (una, nxt, _) = c.seq_state();
        let outstanding = u64::from(nxt.wrapping_sub(una));
        if outstanding == 0 {
            return;
        }
        self.samples += 1;
        self.outstanding_sum += outstanding;
        self.outstanding_max = self.outstanding_max.max(outstanding);
        let cwnd = c.cwnd();
        self.cwnd_sum += cwnd;
        self.cwnd_max = self.cwnd_max.max(cwnd);
        if let Some(srtt) = c.srtt() {
            let us = srtt.as_micros() as u64;
            self.srtt_samples += 1;
            self.srtt_sum_us += us;
            self.srtt_max_us = self.srtt_max_us.max(us);
        }
        if let Some(m) = c.min_rtt() {
            self.min_rtt_us = Some(m.as_micros() as u64);
        }
    }

    /// Take `o`'s samples in too (another connection of the same run).
    pub fn merge(&mut self, o: &PathSamples) {
        self.samples += o.samples;
        self.srtt_samples += o.srtt_samples;
        self.srtt_sum_us += o.srtt_sum_us;
        self.srtt_max_us = self.srtt_max_us.max(o.srtt_max_us);
        self.min_rtt_us = match (self.min_rtt_us, o.min_rtt_us) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.cwnd_sum += o.cwnd_sum;
        self.cwnd_max = self.cwnd_max.max(o.cwnd_max);
        self.outstanding_sum += o.outstanding_sum;
        self.outstanding_max = self.outstanding_max.max(o.outstanding_max);
    }

    /// Mean smoothed RTT over the samples that had one.
    pub fn srtt_mean(&self) -> Option<Duration> {
        (self.srtt_samples > 0).then(|| Duration::from_micros(self.srtt_sum_us / self.srtt_samples))
    }

    /// Mean outstanding bytes and mean congestion window, over the samples.
    pub fn outstanding_mean(&self) -> Option<u64> {
        (self.samples > 0).then(|| self.outstanding_sum / self.samples)
    }

    pub fn cwnd_mean(&self) -> Option<u64> {
        (self.samples > 0).then(|| self.cwnd_sum / self.samples)
    }

    /// One line for `bth-perf`'s output, or `None` if this side never had data outstanding at
    /// a sample (it sent none: the responder of a SEND run).
    pub fn line(&self) -> Option<String> {
        let (outstanding, cwnd) = (self.outstanding_mean()?, self.cwnd_mean()?);
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
        Some(format!(
            "path: {srtt}{min}; outstanding (SND.NXT − SND.UNA) mean {} (max {}), congestion window mean {} (max {}); \
             {} samples, one per {} ms with data outstanding",
            bytes(outstanding),
            bytes(self.outstanding_max),
            bytes(cwnd),
            bytes(self.cwnd_max),
            self.samples,
            EVERY.as_millis()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::tests::{cfg, run_sim};
    use crate::perf::PerfOp;
    use tcp_bth_io::sim::LinkConfig;

    /// A SEND run over the simulated link at two delays: the sender's samples follow the
    /// path (its minimum RTT at least the link's round trip, a longer link a longer smoothed
    /// RTT), its means lie within its maxima, and the receiver, which sent only the run's
    /// control messages, has little outstanding.
    #[test]
    fn the_sender_samples_the_path_and_the_receiver_little() {
        let mut srtt = Vec::new();
        for one_way in [Duration::from_micros(50), Duration::from_micros(500)] {
            let link = LinkConfig::default().with_delay(one_way);
            let (c, s) = run_sim(cfg(PerfOp::Send), cfg(PerfOp::Send), link);
            let p = c.path;
            assert!(p.samples > 0 && p.srtt_samples > 0, "{p:?}");
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
            let (o, w) = (p.outstanding_mean().unwrap(), p.cwnd_mean().unwrap());
            assert!(o > 0 && o <= p.outstanding_max, "{p:?}");
            assert!(w > 0 && w <= p.cwnd_max, "{p:?}");
            let line = p.line().expect("a line");
            assert!(line.starts_with("path: smoothed RTT mean"), "{line}");
            // The receiver sends only the run's control messages (hello, statistics).
            assert!(s.path.outstanding_max < 4096, "{:?}", s.path);
            assert!(s.path.samples < p.samples, "{:?}", s.path);
            srtt.push(mean);
        }
        assert!(srtt[1] > srtt[0] + Duration::from_micros(500), "{srtt:?}");
    }

    #[test]
    fn merged_samples_are_one_set() {
        let a = PathSamples {
            samples: 2,
            srtt_samples: 2,
            srtt_sum_us: 200,
            srtt_max_us: 150,
            min_rtt_us: Some(40),
            cwnd_sum: 20_000,
            cwnd_max: 12_000,
            outstanding_sum: 10_000,
            outstanding_max: 6_000,
            ..PathSamples::default()
        };
        let b = PathSamples {
            samples: 1,
            srtt_samples: 0,
            min_rtt_us: None,
            cwnd_sum: 4_000,
            cwnd_max: 4_000,
            outstanding_sum: 2_000,
            outstanding_max: 2_000,
            ..PathSamples::default()
        };
        let mut m = a;
        m.merge(&b);
        assert_eq!(m.samples, 3);
        assert_eq!(m.srtt_mean(), Some(Duration::from_micros(100)));
        assert_eq!((m.srtt_max_us, m.min_rtt_us), (150, Some(40)));
        assert_eq!((m.cwnd_mean(), m.cwnd_max), (Some(8_000), 12_000));
        assert_eq!(
            (m.outstanding_mean(), m.outstanding_max),
            (Some(4_000), 6_000)
        );
        assert_eq!(PathSamples::default().line(), None);
        let line = m.line().unwrap();
        assert!(
            line.contains("mean 100 µs (max 150 µs), min RTT 40 µs"),
            "{line}"
        );
        assert!(line.contains("3 samples"), "{line}");
    }
}
