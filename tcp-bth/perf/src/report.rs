//! What one side of a run measured ([`PerfReport`]), and the figures `bth-perf` derives from
//! it: latency statistics ([`LatencyStats`]) and the peak bandwidth ([`Timeline`]).

use super::counters::{ConnCounters, PeerSummary};
use super::{PathSamples, PerfError};
use std::time::Duration;
use tcp_bth::RecoveryStats;
use tcp_bth::{Connection, State};

/// What a finished run measured on one side.
#[derive(Debug, Clone, Default)]
pub struct PerfReport {
    /// Messages completed on this side: the requester's completions and the responder's
    /// arrivals (both with `-b`).
    pub messages: u64,
    /// Payload bytes of those messages (control messages not counted).
    pub bytes: u64,
    /// From the start of the run (the accept, or the hello at the server) to its last message.
    pub elapsed: Duration,
    /// Post-to-completion latency of each message this side posted, sorted once the run is
    /// over.
    pub latencies: Vec<Duration>,
    /// Messages whose bytes were checked and matched, each on one side only: SENDs and WRITEs
    /// (with or without immediate) at the responder, READs at the requester. Zero without
    /// `verify`.
    pub verified: u64,
    /// What went wrong on this side, in order; empty for a clean run.
    pub errors: Vec<PerfError>,
    /// Requester: when message `i` was posted (`posted[i]`, driver time). For one-way
    /// latencies across the two sides (`bth-compare`); only with
    /// [`super::PerfConfig::trace`].
    pub posted: Vec<Duration>,
    /// Responder: message index and driver time of each message that completed at the
    /// receiver (SEND and WRITE with immediate: a plain WRITE has no completion at the
    /// receiver, so none for [`super::PerfOp::Write`]). Like `posted`, only with
    /// [`super::PerfConfig::trace`].
    pub arrived: Vec<(u64, Duration)>,
    /// This side's connection's loss-recovery counters: what this side sent and how it
    /// repaired it (in a READ the data, and so its retransmissions, are the responder's).
    /// Taken at the end of every turn of the app; whoever drives the connection calls
    /// [`PerfReport::record_recovery`] once more when the driver has stopped, because the
    /// driver still transmits after the app's last turn.
    pub recovery: RecoveryStats,
    /// This side's connection counters (recovery included), taken with `recovery`.
    pub counters: ConnCounters,
    /// The peer's counters and summary as it sent them just before its FIN (`None` if it
    /// sent none: a refused run, a failed connection, or the client of a `--plain` run).
    pub peer: Option<PeerSummary>,
    /// Bytes completed per millisecond, for the peak bandwidth.
    pub timeline: Timeline,
    /// The connection's round trip, window and bytes in flight, sampled during the run.
    pub path: PathSamples,
    /// The connection ran S framing (amendment 3): both hellos asked for it.
    pub seq_framed: bool,
}

impl PerfReport {
    /// Payload throughput over `elapsed`, in Gbit/s (0 when `elapsed` is 0).
    pub fn gbps(&self) -> f64 {
        self.bytes_per_sec() * 8.0 / 1e9
    }

    /// Payload bytes per second over `elapsed` (0 when `elapsed` is 0).
    pub fn bytes_per_sec(&self) -> f64 {
        per_sec(self.bytes, self.elapsed)
    }

    /// Messages per second over `elapsed` (0 when `elapsed` is 0).
    pub fn msgs_per_sec(&self) -> f64 {
        per_sec(self.messages, self.elapsed)
    }

    /// Take `c`'s counters as they are now (see [`PerfReport::recovery`]).
    pub fn record_recovery(&mut self, c: &Connection) {
        self.counters = ConnCounters::of(c);
        self.seq_framed = c.seq_framed();
        self.recovery = self.counters.recovery;
    }

    /// Whether the connection is closed or failed; a failure is recorded as an error.
    pub(crate) fn connection_ended(&mut self, c: &Connection) -> bool {
        if let Some(e) = c.error() {
            self.errors.push(PerfError::Connection(e));
            return true;
        }
        c.state() == State::Closed
    }

    /// What this side tells the peer at its close.
    pub fn summary(&self) -> PeerSummary {
        PeerSummary {
            messages: self.messages,
            bytes: self.bytes,
            verified: self.verified,
            errors: self.errors.len() as u64,
            counters: self.counters,
        }
    }

    /// Latency at quantile `q` in 0..=1.
    pub fn percentile(&self, q: f64) -> Option<Duration> {
        percentile(&self.latencies, q)
    }

    /// Latency statistics of the messages this side posted.
    pub fn latency_stats(&self) -> Option<LatencyStats> {
        LatencyStats::of(&self.latencies)
    }
}

fn per_sec(n: u64, t: Duration) -> f64 {
    let s = t.as_secs_f64();
    if s == 0.0 {
        0.0
    } else {
        n as f64 / s
    }
}

/// Value at quantile `q` of sorted `v`: the element at `round((len - 1) * q)`.
pub fn percentile(v: &[Duration], q: f64) -> Option<Duration> {
    if v.is_empty() {
        return None;
    }
    let i = ((v.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
    Some(v[i])
}

/// perftest's latency columns, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LatencyStats {
    /// Shortest latency.
    pub min_us: f64,
    /// Longest latency.
    pub max_us: f64,
    /// The median.
    pub typical_us: f64,
    /// The mean.
    pub avg_us: f64,
    /// Population standard deviation.
    pub stdev_us: f64,
    /// 99th percentile ([`percentile`]: nearest rank).
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
}

impl LatencyStats {
    /// Of `sorted` (ascending); `None` when empty.
    pub fn of(sorted: &[Duration]) -> Option<LatencyStats> {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let at = |q| percentile(sorted, q).map(us);
        let n = sorted.len() as f64;
        let avg = sorted.iter().map(|&d| us(d)).sum::<f64>() / n;
        let var = sorted.iter().map(|&d| (us(d) - avg).powi(2)).sum::<f64>() / n;
        Some(LatencyStats {
            min_us: us(*sorted.first()?),
            max_us: us(*sorted.last()?),
            typical_us: at(0.5)?,
            avg_us: avg,
            stdev_us: var.sqrt(),
            p99_us: at(0.99)?,
            p999_us: at(0.999)?,
        })
    }
}

/// Width of a [`Timeline`] bucket.
pub const BUCKET: Duration = Duration::from_millis(1);
/// Buckets in the window of the peak bandwidth: the best 10 ms.
pub const PEAK_WINDOW: usize = 10;

/// Bytes moved per [`BUCKET`] since the run started, for the peak bandwidth: the best window
/// of [`PEAK_WINDOW`] consecutive buckets. A message's bytes are spread evenly over the time
/// they moved in ([`Timeline::record_span`]: from the previous message's completion or
/// arrival, or its own post if later, to its own), so one large message completing inside
/// one window does not count as a burst of its whole size in that window.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    origin: Option<Duration>,
    buckets: Vec<u64>,
}

impl Timeline {
    /// The run starts now (the first record starts it otherwise).
    pub fn start(&mut self, now: Duration) {
        self.origin.get_or_insert(now);
    }

    fn bucket(&mut self, at: Duration) -> usize {
        let origin = *self.origin.get_or_insert(at);
        let i = (at.saturating_sub(origin).as_nanos() / BUCKET.as_nanos()) as usize;
        if self.buckets.len() <= i {
            self.buckets.resize(i + 1, 0);
        }
        i
    }

    /// `bytes` moved at `now`.
    pub fn record(&mut self, now: Duration, bytes: u64) {
        let i = self.bucket(now);
        self.buckets[i] += bytes;
    }

    /// `bytes` moved evenly from `from` to `to` (a point when they are equal); the part of
    /// the span before the run started counts at its start.
    pub fn record_span(&mut self, from: Duration, to: Duration, bytes: u64) {
        let from = from.max(self.origin.unwrap_or(from)).min(to);
        let span = (to - from).as_nanos();
        if span == 0 || bytes == 0 {
            self.record(to, bytes);
            return;
        }
        let (first, last) = (self.bucket(from), self.bucket(to));
        let origin = self.origin.unwrap_or(from);
        // Bytes moved by each bucket's end, so the parts add up to `bytes` exactly.
        let by = |t: Duration| {
            let t = t.clamp(from, to);
            (u128::from(bytes) * (t - from).as_nanos() / span) as u64
        };
        for i in first..=last {
            let start = origin + BUCKET * i as u32;
            self.buckets[i] += by(start + BUCKET) - by(start);
        }
    }

    /// Every byte recorded.
    pub fn total(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Bytes per second over the best [`PEAK_WINDOW`]; `None` for a run shorter than that.
    pub fn peak(&self) -> Option<f64> {
        let best = self
            .buckets
            .windows(PEAK_WINDOW)
            .map(|w| w.iter().sum::<u64>())
            .max()?;
        Some(best as f64 / (BUCKET * PEAK_WINDOW as u32).as_secs_f64())
    }

    /// Add `other`'s buckets to ours, aligned on their driver times (connections of one run
    /// share a driver clock).
    pub fn merge(&mut self, other: &Timeline) {
        let Some(theirs) = other.origin else {
            return;
        };
        if let Some(ours) = self.origin.filter(|&o| o > theirs) {
            // Theirs started first: move ours later by whole buckets.
            let shift = ((ours - theirs).as_nanos() / BUCKET.as_nanos()) as usize;
            self.buckets.splice(0..0, std::iter::repeat_n(0, shift));
            self.origin = Some(ours - BUCKET * shift as u32);
        }
        for (i, &b) in other.buckets.iter().enumerate() {
            self.record(theirs + BUCKET * i as u32, b);
        }
    }
}
