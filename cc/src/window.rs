//! Window state and rules shared by [`crate::NewReno`] and [`crate::Cubic`]: initial window,
//! slow start with appropriate byte counting, the recovery-episode marker, the cwnd-limited
//! test and the loss window after a retransmission timeout.
//!
//! Everything is in bytes and saturating: no input (zero or huge byte counts, zero MSS) can
//! overflow, underflow or divide by zero here.

/// RFC 3465 §2.2: in slow start cwnd grows by at most `L * SMSS` per ACK; RFC 3465 recommends
/// L = 2 (one delayed ACK covering two segments may grow cwnd by two segments, a stretch ACK no
/// more).
pub(crate) const ABC_L: u64 = 2;

/// RFC 6928 §2: `IW = min(10*MSS, max(2*MSS, 14600))`.
///
/// With the common 1460-byte MSS this is 10 segments; with jumbo MSS values it falls back to two
/// segments, the RFC 5681 floor.
pub(crate) fn initial_window(mss: u64) -> u64 {
    mss.saturating_mul(10)
        .min(mss.saturating_mul(2).max(14_600))
}

/// Multiply by `num/den` without overflow (`den > 0`), rounding down.
pub(crate) fn scale(x: u64, num: u64, den: u64) -> u64 {
    let r = u128::from(x) * u128::from(num) / u128::from(den.max(1));
    u64::try_from(r).unwrap_or(u64::MAX)
}

/// An f64 window (bytes) back to `u64`: NaN and negatives become 0, +inf and anything too
/// large saturate. (`as` does the same since Rust 1.45; the explicit form documents the intent.)
pub(crate) fn f64_to_bytes(x: f64) -> u64 {
    if x.is_nan() || x <= 0.0 {
        0
    } else if x >= u64::MAX as f64 {
        u64::MAX
    } else {
        x as u64
    }
}

/// What started the recovery episode in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EpisodeKind {
    /// Loss found by fast retransmit / SACK / RACK: cwnd is frozen until the episode ends
    /// (RFC 6582 §3.2, RFC 6675 §5: the window is not opened during recovery; the end state is
    /// cwnd = ssthresh, which we set at once).
    FastRecovery,
    /// Retransmission timeout: cwnd restarts from the loss window and slow-starts, but further
    /// losses of data sent before the timeout are the same congestion event (RFC 5681 §3.1,
    /// RFC 6582 §3.2 step 1's "recover" after a timeout).
    Timeout,
}

/// One congestion episode: congestion events while it lasts are not new reductions.
///
/// The caller normally ends it with `on_recovery_end` (it knows the sequence space: the episode
/// ends when the cumulative ACK passes the highest sequence sent when it began, RFC 6582 §3.2).
/// As a fallback the algorithm ends it by itself once as many bytes have been acknowledged as
/// were in flight when it began: by then every byte outstanding at the start has been
/// delivered, so this never ends later than the caller's marker would, and a caller that never
/// calls `on_recovery_end` does not freeze the window.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Episode {
    pub kind: EpisodeKind,
    pub flight: u64,
    pub acked: u64,
}

#[derive(Clone, Debug)]
pub(crate) struct Window {
    /// Sender MSS in bytes, at least 1 (a zero MSS would make every per-segment rule divide by
    /// zero or stall).
    pub mss: u64,
    pub cwnd: u64,
    pub ssthresh: u64,
    pub episode: Option<Episode>,
    /// A retransmission timeout fired and no new data has been acknowledged since: a further
    /// timeout is a retransmission of the same data, and RFC 5681 §3.1 holds ssthresh constant.
    pub rto_repeat: bool,
    /// The in-flight figure of the latest `on_ack` / `on_congestion_event`, used to size the
    /// episode a timeout starts.
    pub last_flight: u64,
    /// The most data seen in flight since the last reduction: before each ACK (what it
    /// acknowledged plus what stayed in flight) and at the congestion event itself. What a
    /// loss reduces, with cwnd as its cap ([`reduction_base`](Self::reduction_base)).
    pub peak_flight: u64,
    /// Whether the window was used ([`window_used`](Self::window_used)): the most in flight
    /// before any ACK of the current round and of the one before.
    round_peak: u64,
    prev_round_peak: u64,
    /// Bytes acknowledged in the current round.
    round_acked: u64,
    /// The round ends once this many bytes are acknowledged: what was in flight before its
    /// first ACK, so that it ends when that flight has been acknowledged (Linux's
    /// `cwnd_usage_seq`), about a round trip whatever the sender's rate or cwnd.
    round_len: u64,
}

/// cwnd and ssthresh as they were before a reduction, kept for an undo should it prove
/// spurious (RFC 4015 §3.2, RFC 9438 §4.9).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Saved {
    cwnd: u64,
    ssthresh: u64,
}

/// The [`CongestionControl`](crate::CongestionControl) methods every algorithm answers from
/// its [`Window`] (a field named `w`) alone, and its name. Written once: the algorithms differ
/// in how the window moves, not in how it is read.
macro_rules! window_getters {
    ($name:literal) => {
        fn cwnd(&self) -> u64 {
            self.w.cwnd
        }

        fn ssthresh(&self) -> u64 {
            self.w.ssthresh
        }

        fn in_slow_start(&self) -> bool {
            self.w.in_slow_start()
        }

        fn in_recovery(&self) -> bool {
            self.w.in_recovery()
        }

        fn mss(&self) -> u64 {
            self.w.mss
        }

        fn name(&self) -> &'static str {
            $name
        }
    };
}
pub(crate) use window_getters;

impl Window {
    pub fn new(mss: u32) -> Window {
        let mss = u64::from(mss.max(1));
        Window {
            mss,
            cwnd: initial_window(mss),
            // RFC 5681 §3.1: "The initial value of ssthresh SHOULD be set arbitrarily high".
            ssthresh: u64::MAX,
            episode: None,
            rto_repeat: false,
            last_flight: 0,
            peak_flight: 0,
            round_peak: 0,
            prev_round_peak: 0,
            round_acked: 0,
            round_len: 0,
        }
    }

    /// RFC 5681 §3.1 equation (4) and RFC 9438 §4.6: ssthresh is never below 2*SMSS.
    pub fn min_ssthresh(&self) -> u64 {
        self.mss.saturating_mul(2)
    }

    /// cwnd and ssthresh now, before a reduction.
    pub fn save(&self) -> Saved {
        Saved {
            cwnd: self.cwnd,
            ssthresh: self.ssthresh,
        }
    }

    /// The reduction `saved` was taken before proved spurious: restore cwnd and ssthresh
    /// unless cwnd has since grown past them anyway, and end the episode. True when restored
    /// (the algorithm then restores its own state of that moment too).
    pub fn undo(&mut self, saved: Option<Saved>) -> bool {
        let restore = saved.filter(|s| self.cwnd < s.cwnd);
        if let Some(s) = restore {
            self.cwnd = s.cwnd;
            self.ssthresh = s.ssthresh;
        }
        self.episode = None;
        self.rto_repeat = false;
        restore.is_some()
    }

    /// RFC 5681: slow start while `cwnd < ssthresh`.
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    pub fn in_recovery(&self) -> bool {
        self.episode.is_some()
    }

    /// FlightSize for the episode's own end (`enter_fast_recovery`): data in flight beyond
    /// cwnd (possible right after a reduction) is capped at cwnd.
    pub fn flight_size(&self, bytes_in_flight: u64) -> u64 {
        bytes_in_flight.min(self.cwnd)
    }

    /// What a loss reduces (takes and resets the peak): the most data in flight since the last
    /// reduction, at most cwnd. Not the bytes in flight when the loss is detected: RACK
    /// declares a loss on an ACK that has just acknowledged most of the flight, before the
    /// sender has refilled it. On the relay at MTU 9000 and 1 % loss a window of 7 segments
    /// was in flight and 3 left when the loss was found, so each loss cut the window to 2
    /// segments, not 4.9, and a lost retransmission then had nothing sent after it to reveal
    /// it: a 200 ms RTO. Not cwnd alone either, as Linux takes it (`tcp_reno_ssthresh`,
    /// `bictcp_recalc_ssthresh`): Linux grows cwnd in congestion avoidance only while the
    /// sender is cwnd-limited, where [`on_ack`](Self::on_ack) lets it grow to about twice
    /// the flight, so a sender held back by the peer's window, its grant or the application
    /// would not slow down for a loss at all (RFC 9438 §4.6 allows cwnd only with such a
    /// guard).
    pub fn reduction_base(&mut self, bytes_in_flight: u64) -> u64 {
        let base = self.peak_flight.max(bytes_in_flight).min(self.cwnd);
        self.peak_flight = 0;
        base
    }

    /// Bookkeeping every ACK does. Returns the acknowledged bytes that may open the window
    /// (0 if it must not grow on this ACK).
    pub fn on_ack(&mut self, acked: u64, bytes_in_flight: u64) -> u64 {
        self.last_flight = bytes_in_flight;
        if acked == 0 {
            return 0;
        }
        let flight_before = bytes_in_flight.saturating_add(acked);
        self.peak_flight = self.peak_flight.max(flight_before);
        let used = self.window_used(flight_before, acked);
        // New data acknowledged: a later timeout is a new event, not a repeat.
        self.rto_repeat = false;
        if let Some(ep) = &mut self.episode {
            ep.acked = ep.acked.saturating_add(acked);
            let kind = ep.kind;
            if ep.acked >= ep.flight {
                self.episode = None;
            }
            if kind == EpisodeKind::FastRecovery {
                return 0;
            }
        }
        // Grow only while the window is actually used (RFC 7661 §4.3; RFC 9438 §4.6 requires
        // it of implementations that, like ours after a timeout, derive ssthresh from cwnd).
        // An application-, receiver- or admission-limited sender therefore does not inflate a
        // window it never tested.
        if !used {
            return 0;
        }
        acked
    }

    /// Whether the sender used the window: at least half of it was in flight before some ACK
    /// of the current round or of the one before, a round ending when the data in flight at
    /// its start has been acknowledged. This is the slow-start form of Linux's `tcp_is_cwnd_limited`
    /// (cwnd at most twice the most in flight) in every state, which is looser than Linux in
    /// congestion avoidance (Linux then asks that cwnd itself blocked the sender), and it is
    /// measured on ACKs, where Linux samples at send time after each refill.
    ///
    /// Asked per ACK, as before, the test failed for most ACKs of a driver turn, which takes
    /// all its ACKs before the sender refills the window: the fourth ACK of a turn over a
    /// 10-segment window saw 4 segments in flight, and its growth was lost. At 1 % loss
    /// through the relay the window grew about 0.33 segments per round trip between
    /// reductions where CUBIC's Reno-friendly 0.53 was due, and averaged 15 KiB; 19 KiB with
    /// the test per round (`docs/stack.md`). The round is one flight, not a cwnd of data: a
    /// cwnd of data takes cwnd ÷ flight round trips for a sender that stopped filling the
    /// window, and never completes in slow start, where cwnd grows as fast as it is acked.
    fn window_used(&mut self, flight_before: u64, acked: u64) -> bool {
        if self.round_acked == 0 {
            self.round_len = flight_before;
        }
        self.round_peak = self.round_peak.max(flight_before);
        self.round_acked = self.round_acked.saturating_add(acked);
        let used = self.round_peak.max(self.prev_round_peak) >= self.cwnd / 2;
        if self.round_acked >= self.round_len {
            self.prev_round_peak = self.round_peak;
            self.round_peak = 0;
            self.round_acked = 0;
        }
        used
    }

    /// Slow start with appropriate byte counting (RFC 3465 §2.2, L = 2): cwnd grows by the
    /// acknowledged bytes, at most `L*SMSS` per ACK, and stops at ssthresh. Returns the bytes
    /// left over once ssthresh is reached, for congestion avoidance to count (as Linux does).
    pub fn slow_start(&mut self, acked: u64) -> u64 {
        if !self.in_slow_start() {
            return acked;
        }
        let inc = acked.min(self.mss.saturating_mul(ABC_L));
        let room = self.ssthresh - self.cwnd; // cwnd < ssthresh: no underflow
        if inc < room {
            self.cwnd += inc;
            0
        } else {
            self.cwnd = self.ssthresh;
            inc - room
        }
    }

    /// Start a fast-recovery episode after cwnd and ssthresh have been reduced.
    pub fn enter_fast_recovery(&mut self, flight: u64) {
        self.episode = Some(Episode {
            kind: EpisodeKind::FastRecovery,
            flight,
            acked: 0,
        });
    }

    /// Whether a timeout must leave ssthresh as it is: the timeout repeats one already taken
    /// (RFC 5681 §3.1), or it falls inside an episode whose reduction has already been made
    /// (Linux `tcp_enter_loss` does the same: the window is reduced once per episode).
    pub fn rto_holds_ssthresh(&self) -> bool {
        self.rto_repeat || self.episode.is_some()
    }

    /// The part of a timeout common to both algorithms, after ssthresh has been set:
    /// cwnd = loss window (RFC 5681 §3.1: "cwnd MUST be set to no more than the loss window,
    /// LW, which equals 1 full-sized segment"), and a timeout episode begins.
    pub fn timeout(&mut self) {
        self.cwnd = self.mss;
        self.peak_flight = 0;
        self.rto_repeat = true;
        self.episode = Some(Episode {
            kind: EpisodeKind::Timeout,
            flight: self.last_flight,
            acked: 0,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iw_per_rfc6928() {
        assert_eq!(initial_window(1460), 14_600);
        assert_eq!(initial_window(536), 5360);
        assert_eq!(initial_window(1448), 14_480);
        // 2*MSS floor wins for jumbo segments.
        assert_eq!(initial_window(9000), 18_000);
        // 14600 cap between 2 and 10 segments.
        assert_eq!(initial_window(4000), 14_600);
        assert_eq!(initial_window(u64::MAX), u64::MAX);
    }

    #[test]
    fn f64_guard() {
        assert_eq!(f64_to_bytes(f64::NAN), 0);
        assert_eq!(f64_to_bytes(-1.0), 0);
        assert_eq!(f64_to_bytes(f64::INFINITY), u64::MAX);
        assert_eq!(f64_to_bytes(1e30), u64::MAX);
        assert_eq!(f64_to_bytes(12.9), 12);
    }

    /// A driver turn takes five ACKs of a full 10-segment window before the sender refills
    /// it: every one of them used the window, so all of them may grow it.
    #[test]
    fn a_turns_acks_all_count_when_the_window_was_full() {
        const MSS: u64 = 1000;
        let mut w = Window::new(MSS as u32);
        w.cwnd = 10 * MSS;
        let credited: u64 = (0..5).map(|i| w.on_ack(2 * MSS, (8 - 2 * i) * MSS)).sum();
        assert_eq!(credited, 10 * MSS);
    }

    /// A sender that stops filling the window stops growing it within two rounds (two
    /// flights acknowledged), and one that never filled half of it never grows it.
    #[test]
    fn an_unused_window_stops_growing() {
        const MSS: u64 = 1000;
        let mut w = Window::new(MSS as u32);
        w.cwnd = 10 * MSS;
        assert_eq!(w.on_ack(2 * MSS, 8 * MSS), 2 * MSS);
        // From here on at most 3 segments in flight before each ACK.
        let late: Vec<u64> = (0..20).map(|_| w.on_ack(MSS, 2 * MSS)).collect();
        // The rest of the round that saw 10 in flight (8 more segments acknowledged) and one
        // more round (the 3 in flight at its start) still count; after that, nothing.
        assert!(late[..11].iter().all(|&g| g == MSS), "{late:?}");
        assert!(late[11..].iter().all(|&g| g == 0), "{late:?}");
        let mut idle = Window::new(MSS as u32);
        idle.cwnd = 10 * MSS;
        assert!((0..50).all(|_| idle.on_ack(MSS, 2 * MSS) == 0));
    }

    #[test]
    fn scale_no_overflow() {
        assert_eq!(
            scale(u64::MAX, 7, 10),
            (u128::from(u64::MAX) * 7 / 10) as u64
        );
        assert_eq!(scale(100, 7, 0), 700);
        assert_eq!(scale(u64::MAX, 3, 2), u64::MAX);
    }
}
