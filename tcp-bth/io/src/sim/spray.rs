//! Multipath spraying for the [simulated link](super::link): the configuration of the paths a
//! [`SimLink`](super::SimLink) sprays packets over, and their counters.
//!
//! AI training fabrics do not pin a flow to one path as ECMP does: Ultra Ethernet's packet
//! spraying, AWS SRD and adaptive routing in InfiniBand and Ethernet switches send consecutive
//! packets of one flow over different paths. Paths differ in length and in queueing, so packets
//! arrive out of order by about the difference in path delay (the *spread*), on every packet
//! rather than on a random few. That is the reordering `tcp_bth` direct placement is meant to
//! absorb, and it is modelled here as fixed extra delays per path: a packet is overtaken only by
//! packets that left the bottleneck less than the spread after it, so the reordering depth
//! follows the spread. How the link applies a [`Spray`] (after the shared bottleneck, which
//! random values it draws) is in the [link's module docs](super::link).

use super::link::LinkConfigError;
use std::time::Duration;

/// Most paths a [`Spray`] may have. Spraying switches pick among a handful of uplinks; sixteen
/// covers the fabrics we model and keeps a path count typed by mistake (say 1000) an error
/// rather than a silent, very different experiment.
pub const MAX_PATHS: usize = 16;

/// One path of a [`Spray`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathConfig {
    /// Delay of this path on top of the link's [`delay`](super::LinkConfig::delay).
    pub extra_delay: Duration,
    /// Probability in `[0, 1]` that a packet sent on this path is lost on it (on top of the
    /// link-wide [`loss`](super::LinkConfig::loss)): a failing or flapping link.
    pub loss: f64,
}

/// How a [`Spray`] picks the path of each packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SprayMode {
    /// The *n*-th packet sent in a direction takes path `n mod paths` (what a switch spraying
    /// per packet over equal-cost uplinks does): the arrival order is fully predictable.
    RoundRobin,
    /// Each packet takes a path drawn uniformly at random (oblivious spraying, as with
    /// per-packet entropy values).
    Random,
}

/// Packets of each direction sprayed over several paths with different delays.
#[derive(Debug, Clone, PartialEq)]
pub struct Spray {
    /// 2 to [`MAX_PATHS`] paths.
    pub paths: Vec<PathConfig>,
    /// How each packet's path is picked.
    pub mode: SprayMode,
}

/// Counters of one path of one direction of a [`SimLink`](super::SimLink).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathStats {
    /// Packets put on this path (past the bottleneck queue and the link-wide loss).
    pub sent: u64,
    /// Of those, packets lost on this path (also counted in
    /// [`LinkStats::dropped_loss`](super::LinkStats::dropped_loss)).
    pub dropped_loss: u64,
}

impl Spray {
    /// `n` lossless paths whose extra delays are spread evenly from 0 to `spread` (path 0 the
    /// fastest, path `n - 1` the slowest), or [`LinkConfigError::PathCount`] unless `n` is 2 to
    /// [`MAX_PATHS`].
    pub fn even(n: usize, spread: Duration, mode: SprayMode) -> Result<Spray, LinkConfigError> {
        check_count(n)?;
        let last = n as u128 - 1;
        let paths = (0..n as u128)
            .map(|i| {
                // spread * i / (n - 1), in nanoseconds: exact at both ends.
                let nanos = spread.as_nanos() * i / last;
                PathConfig {
                    extra_delay: Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX)),
                    loss: 0.0,
                }
            })
            .collect();
        Ok(Spray { paths, mode })
    }

    /// The same paths, each losing packets with probability `loss`.
    pub fn with_path_loss(mut self, loss: f64) -> Spray {
        for p in &mut self.paths {
            p.loss = loss;
        }
        self
    }

    /// Difference between the slowest and the fastest path's extra delay: the most by which a
    /// packet can be overtaken by packets that left the bottleneck after it.
    pub fn spread(&self) -> Duration {
        let delays = self.paths.iter().map(|p| p.extra_delay);
        match (delays.clone().min(), delays.max()) {
            (Some(min), Some(max)) => max - min,
            _ => Duration::ZERO,
        }
    }

    /// Check the path count (2 to [`MAX_PATHS`]) and every path's loss probability.
    pub fn validate(&self) -> Result<(), LinkConfigError> {
        check_count(self.paths.len())?;
        for (path, p) in self.paths.iter().enumerate() {
            // `contains` is false for NaN.
            if !(0.0..=1.0).contains(&p.loss) {
                return Err(LinkConfigError::PathLoss {
                    path,
                    value: p.loss,
                });
            }
        }
        Ok(())
    }

    /// The path of the `n`-th packet of a direction, given that packet's path draw. Within
    /// `0..paths.len()` for any non-empty, validated spray.
    pub(crate) fn choose(&self, n: u64, draw: u64) -> usize {
        let count = self.paths.len() as u64;
        if count == 0 {
            return 0;
        }
        let i = match self.mode {
            SprayMode::RoundRobin => n % count,
            SprayMode::Random => super::link::scale(draw, count),
        };
        i as usize
    }
}

fn check_count(paths: usize) -> Result<(), LinkConfigError> {
    if (2..=MAX_PATHS).contains(&paths) {
        Ok(())
    } else {
        Err(LinkConfigError::PathCount { paths })
    }
}

#[cfg(test)]
#[path = "spray_tests.rs"]
mod tests;
