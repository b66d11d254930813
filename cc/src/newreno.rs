//! NewReno window behaviour: RFC 5681 slow start and congestion avoidance, RFC 3465 appropriate
//! byte counting, RFC 6928 initial window, one reduction per recovery episode (RFC 6582).

use core::time::Duration;

use crate::window::{window_getters, Saved, Window};
use crate::CongestionControl;

/// NewReno (RFC 5681 / RFC 6582 window rules).
///
/// * Initial window: RFC 6928, `min(10*MSS, max(2*MSS, 14600))`.
/// * Slow start (`cwnd < ssthresh`): cwnd += acknowledged bytes, at most 2*MSS per ACK
///   (RFC 3465 §2.2, L = 2): cwnd doubles per round trip.
/// * Congestion avoidance: byte counting (RFC 3465 §2.1): once a full cwnd of bytes has been
///   acknowledged, cwnd += MSS, i.e. one MSS per round trip (RFC 5681 §3.1 equation (3)).
/// * Congestion event: `ssthresh = max(FlightSize/2, 2*MSS)` (RFC 5681 §3.1 equation (4)),
///   FlightSize being the most in flight since the last reduction, at most cwnd
///   (`Window::reduction_base`),
///   cwnd = ssthresh, once per episode. RFC 6582's window inflation and deflation are not
///   modelled: the stack sends against the RFC 6675 `pipe`, which plays that role, and the
///   state at the end of recovery is RFC 6582 §3.2 step 3's cwnd = ssthresh.
/// * Timeout: same ssthresh rule, cwnd = 1 MSS (RFC 5681 §3.1, loss window).
#[derive(Clone, Debug)]
pub struct NewReno {
    w: Window,
    /// RFC 3465 `bytes_acked` in congestion avoidance.
    ca_acked: u64,
    /// (cwnd, ssthresh) before the latest reduction, for [`CongestionControl::on_spurious_congestion`].
    undo: Option<Saved>,
}

impl NewReno {
    /// A NewReno window for a connection with sender MSS `mss` bytes (a zero MSS is treated
    /// as 1 so that no rule divides by zero).
    pub fn new(mss: u32) -> NewReno {
        NewReno {
            w: Window::new(mss),
            ca_acked: 0,
            undo: None,
        }
    }

    /// RFC 5681 §3.1 equation (4), from the window a reduction applies to
    /// (`Window::reduction_base`, or cwnd after a timeout).
    fn loss_ssthresh(&self, base: u64) -> u64 {
        (base / 2).max(self.w.min_ssthresh())
    }
}

impl CongestionControl for NewReno {
    fn on_ack(
        &mut self,
        _now: Duration,
        acked_bytes: u64,
        _rtt: Option<Duration>,
        bytes_in_flight: u64,
    ) {
        let grow = self.w.on_ack(acked_bytes, bytes_in_flight);
        if grow == 0 {
            return;
        }
        let left = self.w.slow_start(grow);
        if left == 0 || self.w.in_slow_start() {
            return;
        }
        // RFC 3465 §2.1: bytes_acked += acked; each full cwnd of it is one SMSS of growth.
        // The division handles a stretch ACK covering several windows (as Linux's
        // tcp_cong_avoid_ai does); cwnd >= 1 MSS >= 1, so the division is defined.
        let cwnd = self.w.cwnd.max(1);
        self.ca_acked = self.ca_acked.saturating_add(left);
        if self.ca_acked >= cwnd {
            let n = self.ca_acked / cwnd;
            self.ca_acked -= n * cwnd; // n*cwnd <= ca_acked
            self.w.cwnd = self.w.cwnd.saturating_add(n.saturating_mul(self.w.mss));
        }
    }

    fn on_congestion_event(&mut self, _now: Duration, bytes_in_flight: u64) {
        self.w.last_flight = bytes_in_flight;
        if self.w.in_recovery() {
            // Same episode: RFC 6582 §3.2 reduces once per window of data.
            return;
        }
        self.undo = Some(self.w.save());
        let flight = self.w.flight_size(bytes_in_flight);
        // RFC 5681 §3.1 halves FlightSize: the most in flight since the last reduction
        // (`Window::reduction_base`).
        let base = self.w.reduction_base(bytes_in_flight);
        self.w.ssthresh = self.loss_ssthresh(base);
        self.w.cwnd = self.w.ssthresh;
        self.ca_acked = 0;
        self.w.enter_fast_recovery(flight);
    }

    fn on_recovery_end(&mut self, _now: Duration) {
        self.w.episode = None;
    }

    fn on_rto(&mut self, _now: Duration) {
        if !self.w.rto_holds_ssthresh() {
            self.undo = Some(self.w.save());
            // FlightSize at the timeout is not passed in; cwnd stands for it (Linux does the
            // same). The window-used test (`Window::window_used`: half of cwnd in flight
            // within the last two flights) keeps cwnd within about twice the data actually
            // sent, so cwnd/2 does not overstate FlightSize/2 by much.
            self.w.ssthresh = self.loss_ssthresh(self.w.cwnd);
        }
        // RFC 3465 §2.1: bytes_acked is reset on a timeout.
        self.ca_acked = 0;
        self.w.timeout();
    }

    fn on_spurious_congestion(&mut self) {
        // RFC 4015 §3.2 style undo: restore the window from before the spurious reduction,
        // unless it has since grown past it anyway.
        if self.w.undo(self.undo.take()) {
            self.ca_acked = 0;
        }
    }

    window_getters!("newreno");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::*;

    const MSS: u64 = 1460;

    #[test]
    fn starts_with_iw() {
        let cc = NewReno::new(MSS as u32);
        assert_eq!(cc.cwnd(), 10 * MSS);
        assert_eq!(cc.ssthresh(), u64::MAX);
        assert!(cc.in_slow_start());
        assert!(!cc.in_recovery());
    }

    #[test]
    fn slow_start_doubles_per_rtt() {
        let mut cc = NewReno::new(MSS as u32);
        let rtt = ms(100);
        let mut now = Duration::ZERO;
        let mut expect = 10 * MSS;
        for _ in 0..6 {
            assert_eq!(cc.cwnd(), expect);
            now = round_trip(&mut cc, now, rtt, MSS);
            expect *= 2;
        }
        assert_eq!(cc.cwnd(), 640 * MSS);
    }

    #[test]
    fn slow_start_with_delayed_acks_still_doubles() {
        let mut cc = NewReno::new(MSS as u32);
        let rtt = ms(100);
        let mut now = Duration::ZERO;
        for _ in 0..3 {
            now = round_trip(&mut cc, now, rtt, 2 * MSS);
        }
        assert_eq!(cc.cwnd(), 80 * MSS);
    }

    #[test]
    fn abc_limits_stretch_acks() {
        let mut cc = NewReno::new(MSS as u32);
        // One ACK for the whole initial window: at most L = 2 segments of growth.
        cc.on_ack(ms(1), 10 * MSS, Some(ms(1)), 0);
        assert_eq!(cc.cwnd(), 12 * MSS);
    }

    #[test]
    fn congestion_event_halves_the_most_in_flight() {
        let mut cc = NewReno::new(MSS as u32);
        let mut now = Duration::ZERO;
        for _ in 0..3 {
            now = round_trip(&mut cc, now, ms(50), MSS);
        }
        assert_eq!(cc.cwnd(), 80 * MSS);
        // `round_trip` keeps the window full: 79 segments were in flight before its last ACK.
        // 60 are still in flight when the loss is found; the peak is what halves.
        assert_eq!(cc.w.peak_flight, 79 * MSS);
        cc.on_congestion_event(now, 60 * MSS);
        assert_eq!(cc.ssthresh(), 79 * MSS / 2);
        assert_eq!(cc.cwnd(), 79 * MSS / 2);
        assert!(cc.in_recovery());
        assert!(!cc.in_slow_start());
        // A second loss in the same episode is no new reduction.
        cc.on_congestion_event(now, 30 * MSS);
        assert_eq!(cc.ssthresh(), 79 * MSS / 2);
        // No growth during recovery.
        cc.on_ack(now, 10 * MSS, Some(ms(50)), 30 * MSS);
        assert_eq!(cc.cwnd(), 79 * MSS / 2);
        cc.on_recovery_end(now);
        assert!(!cc.in_recovery());
        // A new episode reduces again: 40 segments were in flight before that ACK, capped at
        // cwnd.
        cc.on_congestion_event(now, 30 * MSS);
        assert_eq!(cc.ssthresh(), 79 * MSS / 4);
    }

    /// A sender held below cwnd (by the peer's window, its grant or the application) reduces
    /// from what it had in flight, not from a cwnd it never filled; a cwnd-limited one whose
    /// loss is found when most of its flight was just acknowledged reduces from the flight it
    /// had, not from what is left.
    #[test]
    fn the_reduction_is_from_the_most_in_flight_at_most_cwnd() {
        let mut cc = NewReno::new(MSS as u32);
        cc.w.cwnd = 20 * MSS;
        cc.w.ssthresh = 20 * MSS;
        for _ in 0..4 {
            // 8 segments in flight before each ACK, 6 after.
            cc.on_ack(ms(1), 2 * MSS, Some(ms(1)), 6 * MSS);
        }
        assert_eq!(cc.cwnd(), 20 * MSS, "the window is not in use: no growth");
        cc.on_congestion_event(ms(2), 3 * MSS);
        assert_eq!(cc.ssthresh(), 4 * MSS);
        let mut cc = NewReno::new(MSS as u32);
        cc.w.cwnd = 8 * MSS;
        cc.w.ssthresh = 8 * MSS;
        // The whole window in flight, then an ACK for 5 of its 8 segments finds the loss.
        cc.on_ack(ms(1), 5 * MSS, Some(ms(1)), 3 * MSS);
        cc.on_congestion_event(ms(1), 3 * MSS);
        assert_eq!(cc.ssthresh(), 4 * MSS);
    }

    #[test]
    fn ssthresh_floor_two_segments() {
        let mut cc = NewReno::new(MSS as u32);
        cc.w.cwnd = 3 * MSS;
        cc.on_congestion_event(ms(1), MSS);
        assert_eq!(cc.ssthresh(), 2 * MSS);
        assert_eq!(cc.cwnd(), 2 * MSS);
        let mut cc = NewReno::new(MSS as u32);
        cc.w.cwnd = 1;
        cc.on_congestion_event(ms(1), 0);
        assert_eq!(cc.ssthresh(), 2 * MSS);
    }

    #[test]
    fn flight_above_cwnd_is_capped() {
        let mut cc = NewReno::new(MSS as u32);
        cc.on_congestion_event(ms(1), u64::MAX);
        assert_eq!(cc.ssthresh(), 5 * MSS);
        // The episode ends by itself after at most a cwnd's worth of ACKs.
        cc.on_ack(ms(2), 10 * MSS, Some(ms(1)), 0);
        assert!(!cc.in_recovery());
    }

    #[test]
    fn recovery_ends_by_itself_after_a_flight_is_acked() {
        let mut cc = in_recovery_from_ten(NewReno::new(MSS as u32), 5);
        cc.on_ack(ms(2), 6 * MSS, None, 4 * MSS);
        assert!(cc.in_recovery());
        cc.on_ack(ms(3), 4 * MSS, None, 5 * MSS);
        assert!(!cc.in_recovery());
        assert_eq!(cc.cwnd(), 5 * MSS);
        // Grows again (congestion avoidance: one MSS per cwnd of bytes).
        cc.on_ack(ms(4), 5 * MSS, None, 5 * MSS);
        assert_eq!(cc.cwnd(), 6 * MSS);
    }

    #[test]
    fn congestion_avoidance_one_mss_per_rtt() {
        let mut cc = NewReno::new(MSS as u32);
        let mut now = round_trip(&mut cc, ms(0), ms(100), MSS);
        now = round_trip(&mut cc, now, ms(100), MSS);
        assert_eq!(cc.cwnd(), 40 * MSS);
        cc.on_congestion_event(now, 40 * MSS);
        cc.on_recovery_end(now);
        assert_eq!(cc.cwnd(), 20 * MSS);
        for i in 0..20 {
            assert_eq!(cc.cwnd(), (20 + i) * MSS);
            now = round_trip(&mut cc, now, ms(100), MSS);
        }
        assert_eq!(cc.cwnd(), 40 * MSS);
        assert!(!cc.in_slow_start());
    }

    #[test]
    fn slow_start_stops_at_ssthresh_and_carries_over() {
        let mut cc = NewReno::new(MSS as u32);
        let mut now = round_trip(&mut cc, ms(0), ms(10), MSS);
        now = round_trip(&mut cc, now, ms(10), MSS);
        cc.on_congestion_event(now, 40 * MSS); // ssthresh 20
        cc.on_rto(now + ms(1)); // held ssthresh (same episode), cwnd 1
        assert_eq!(cc.ssthresh(), 20 * MSS);
        assert_eq!(cc.cwnd(), MSS);
        for _ in 0..5 {
            now = round_trip(&mut cc, now, ms(10), MSS);
        }
        // 1, 2, 4, 8, 16, then capped at 20 with the remainder counted for CA.
        assert_eq!(cc.cwnd(), 20 * MSS);
        assert!(!cc.in_slow_start());
    }

    #[test]
    fn rto_sets_loss_window() {
        let mut cc = NewReno::new(MSS as u32);
        let mut now = Duration::ZERO;
        for _ in 0..2 {
            now = round_trip(&mut cc, now, ms(50), MSS);
        }
        assert_eq!(cc.cwnd(), 40 * MSS);
        cc.on_rto(now);
        assert_eq!(cc.cwnd(), MSS);
        assert_eq!(cc.ssthresh(), 20 * MSS);
        assert!(cc.in_slow_start());
        // Backed-off timeout of the same data: ssthresh held (RFC 5681 §3.1).
        cc.on_rto(now + ms(400));
        assert_eq!(cc.cwnd(), MSS);
        assert_eq!(cc.ssthresh(), 20 * MSS);
        // Slow start restarts from one segment.
        cc.on_ack(now + ms(500), MSS, Some(ms(50)), 0);
        assert_eq!(cc.cwnd(), 2 * MSS);
    }

    #[test]
    fn losses_after_timeout_are_same_episode() {
        let mut cc = NewReno::new(MSS as u32);
        cc.on_ack(ms(1), MSS, None, 9 * MSS);
        cc.on_rto(ms(300));
        let ss = cc.ssthresh();
        cc.on_congestion_event(ms(310), MSS);
        assert_eq!(cc.ssthresh(), ss);
        assert_eq!(cc.cwnd(), MSS);
    }

    #[test]
    fn app_limited_does_not_grow() {
        let mut cc = NewReno::new(MSS as u32);
        // Only 2 segments ever in flight out of a 10-segment window.
        for i in 0..50 {
            cc.on_ack(ms(i), MSS, Some(ms(1)), MSS);
        }
        assert_eq!(cc.cwnd(), 10 * MSS);
    }

    #[test]
    fn spurious_undo_restores() {
        let mut cc = NewReno::new(MSS as u32);
        let now = round_trip(&mut cc, Duration::ZERO, ms(10), MSS);
        assert_eq!(cc.cwnd(), 20 * MSS);
        cc.on_congestion_event(now, 20 * MSS);
        assert_eq!(cc.cwnd(), 10 * MSS);
        cc.on_spurious_congestion();
        assert_eq!(cc.cwnd(), 20 * MSS);
        assert_eq!(cc.ssthresh(), u64::MAX);
        assert!(!cc.in_recovery());
        // Nothing to undo twice.
        cc.on_spurious_congestion();
        assert_eq!(cc.cwnd(), 20 * MSS);
    }

    #[test]
    fn zero_mss_does_not_divide_by_zero() {
        let mut cc = NewReno::new(0);
        assert_eq!(cc.mss(), 1);
        cc.on_ack(ms(1), u64::MAX, Some(Duration::ZERO), u64::MAX);
        cc.on_congestion_event(ms(1), u64::MAX);
        cc.on_recovery_end(ms(1));
        cc.on_ack(ms(1), u64::MAX, Some(Duration::ZERO), u64::MAX);
        cc.on_ack(ms(1), u64::MAX, Some(Duration::ZERO), u64::MAX);
        cc.on_rto(ms(0));
        assert!(cc.cwnd() >= 1);
        assert!(cc.ssthresh() >= 2);
    }
}
