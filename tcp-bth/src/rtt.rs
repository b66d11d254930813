//! Retransmission timeout per RFC 6298, fed with RTT samples the caller takes (Karn's rule is the
//! caller's: never sample a retransmitted segment).

use std::time::Duration;

/// SRTT, RTTVAR and the RTO with its backoff (RFC 6298), and the smallest and latest RTT
/// samples.
#[derive(Debug, Clone)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    min_rtt: Option<Duration>,
    latest: Option<Duration>,
    min_rto: Duration,
    max_rto: Duration,
    /// Exponential backoff exponent after timeouts (RFC 6298 §5.5).
    backoff: u32,
}

impl RttEstimator {
    /// RFC 6298 §2.1: before any sample the RTO is 1 s. `min_rto` is configurable because the
    /// RFC's 1 s floor is far above datacenter RTTs (Linux uses 200 ms).
    pub fn new(min_rto: Duration, max_rto: Duration) -> RttEstimator {
        RttEstimator {
            srtt: None,
            rttvar: Duration::ZERO,
            min_rtt: None,
            latest: None,
            min_rto,
            max_rto,
            backoff: 0,
        }
    }

    /// Take an RTT sample (RFC 6298 §2.2/§2.3), and clear the backoff.
    pub fn on_sample(&mut self, rtt: Duration) {
        self.latest = Some(rtt);
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                // beta = 1/4, alpha = 1/8 (§2.3).
                let diff = srtt.abs_diff(rtt);
                self.rttvar = (self.rttvar * 3 + diff) / 4;
                self.srtt = Some((srtt * 7 + rtt) / 8);
            }
        }
        // A new sample after backoff means the path answers again (§5.7 spirit).
        self.backoff = 0;
    }

    /// Smoothed RTT; `None` before the first sample.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// RTT variation (RTTVAR); zero before the first sample.
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }

    /// Smallest sample so far.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// Most recent sample.
    pub fn latest(&self) -> Option<Duration> {
        self.latest
    }

    /// The current RTO including backoff.
    pub fn rto(&self) -> Duration {
        let base = match self.srtt {
            None => Duration::from_secs(1),
            // G (clock granularity) is 1 µs here: negligible against 4*RTTVAR.
            Some(srtt) => srtt + (self.rttvar * 4).max(Duration::from_micros(1)),
        };
        let base = base.clamp(self.min_rto, self.max_rto);
        base.saturating_mul(1u32 << self.backoff.min(16))
            .min(self.max_rto)
    }

    /// The RTO fired: double it (RFC 6298 §5.5), up to 2^16 times and `max_rto`.
    pub fn on_timeout(&mut self) {
        self.backoff = (self.backoff + 1).min(16);
    }

    /// Timeouts since the last sample (the RTO's doubling exponent, at most 16).
    pub fn backoff(&self) -> u32 {
        self.backoff
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est() -> RttEstimator {
        RttEstimator::new(Duration::from_millis(200), Duration::from_secs(60))
    }

    #[test]
    fn first_sample_sets_srtt_and_half_rttvar() {
        let mut e = est();
        assert_eq!(e.rto(), Duration::from_secs(1));
        e.on_sample(Duration::from_millis(100));
        assert_eq!(e.srtt(), Some(Duration::from_millis(100)));
        // 100 + 4*50 = 300 ms
        assert_eq!(e.rto(), Duration::from_millis(300));
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let mut e = est();
        e.on_sample(Duration::from_millis(100));
        e.on_timeout();
        assert_eq!(e.rto(), Duration::from_millis(600));
        for _ in 0..30 {
            e.on_timeout();
        }
        assert_eq!(e.rto(), Duration::from_secs(60));
        e.on_sample(Duration::from_millis(100));
        assert_eq!(e.backoff(), 0);
    }

    #[test]
    fn floor_applies_to_small_rtts() {
        let mut e = est();
        e.on_sample(Duration::from_micros(50));
        assert_eq!(e.rto(), Duration::from_millis(200));
    }
}
