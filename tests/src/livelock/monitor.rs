//! The progress monitor: pure bookkeeping over [`Sample`]s (no connection in sight), so that
//! its rules can be tested on synthetic sequences (`tests/tests/livelock.rs`) as well as used
//! by the driver.

use std::time::Duration;

/// What the monitor tolerates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Segments (both ends together) that may be sent between two instants of progress.
    pub quiet_segments: u64,
    /// Virtual time that outstanding work may go without progress while nothing is held back.
    pub stall_after: Duration,
}

/// One observation of the pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub now: Duration,
    /// Segments both ends have sent so far (`Stats::segments_out`, summed).
    pub segments: u64,
    /// A measure that grows exactly when the transfer progresses: a sum of monotone counters
    /// (bytes acknowledged, bytes newly at a receiver, completions, bytes read). It must never
    /// decrease, and it is bounded by the work posted, so no livelock can keep it growing.
    pub progress: u64,
    /// Work is outstanding: something posted is not yet delivered, completed or acknowledged.
    pub pending: bool,
    /// The workload itself holds something back right now (a paused reader, a receive it
    /// posts late): quiet time then is not a stall.
    pub held: bool,
}

/// Why the monitor stopped a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alarm {
    /// `segments` were sent since the last progress, at `since`.
    Livelock { segments: u64, since: Duration },
    /// Work outstanding and nothing held back since `since`, without progress, for `quiet`.
    Stall { quiet: Duration, since: Duration },
}

impl std::fmt::Display for Alarm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Alarm::Livelock { segments, since } => write!(
                f,
                "livelock: {segments} segments sent without progress since {since:?}"
            ),
            Alarm::Stall { quiet, since } => write!(
                f,
                "stall: work outstanding, nothing held back, no progress for {quiet:?} \
                 (since {since:?})"
            ),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Monitor {
    limits: Limits,
    progress: u64,
    /// `segments` and time of the last sample that showed progress.
    segments_at_progress: u64,
    progress_at: Duration,
    /// Start of the current quiet time that counts towards a stall: the last progress, or the
    /// first sample with work pending and nothing held after one without, whichever is later.
    quiet_since: Duration,
    /// The last sample had work pending and nothing held: the time since it counts.
    counting: bool,
    /// Highest segments-without-progress seen: how close healthy runs come to the bound.
    pub max_quiet_segments: u64,
    /// Longest quiet time that counted towards a stall.
    pub max_quiet_time: Duration,
}

impl Monitor {
    /// A monitor whose quiet time and segment count start at `first`.
    pub fn new(limits: Limits, first: &Sample) -> Monitor {
        Monitor {
            limits,
            progress: first.progress,
            segments_at_progress: first.segments,
            progress_at: first.now,
            quiet_since: first.now,
            counting: first.pending && !first.held,
            max_quiet_segments: 0,
            max_quiet_time: Duration::ZERO,
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Take the next sample (times and counters never go back); Err when a limit is passed.
    /// The quiet segments and quiet time that end at a sample with progress count too: a
    /// livelock that lets a byte through now and then is still a livelock.
    pub fn observe(&mut self, s: &Sample) -> Result<(), Alarm> {
        assert!(
            s.progress >= self.progress && s.segments >= self.segments_at_progress,
            "harness bug: a monotone counter went back ({s:?} after progress {} at {} segments)",
            self.progress,
            self.segments_at_progress
        );
        // Segments count from the last progress whatever else happens: an exchange that goes
        // on with nothing pending (after the work is done, during an idle) or while the
        // workload holds something back is a livelock too.
        let quiet_segments = s.segments - self.segments_at_progress;
        self.max_quiet_segments = self.max_quiet_segments.max(quiet_segments);
        if quiet_segments > self.limits.quiet_segments {
            return Err(Alarm::Livelock {
                segments: quiet_segments,
                since: self.progress_at,
            });
        }
        // Time counts towards a stall only from a sample with work pending and nothing held.
        if !self.counting {
            self.quiet_since = s.now;
        }
        let quiet = s.now.saturating_sub(self.quiet_since);
        self.max_quiet_time = self.max_quiet_time.max(quiet);
        if quiet > self.limits.stall_after {
            return Err(Alarm::Stall {
                quiet,
                since: self.quiet_since,
            });
        }
        if s.progress > self.progress {
            self.progress = s.progress;
            self.segments_at_progress = s.segments;
            self.progress_at = s.now;
            self.quiet_since = s.now;
        }
        self.counting = s.pending && !s.held;
        Ok(())
    }
}
