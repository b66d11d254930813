//! CUBIC (RFC 9438).
//!
//! Window state is kept in bytes (`u64`); the cubic function is evaluated in f64 in units of
//! segments and seconds, as the RFC states it (C = 0.4 segments/s³), and every f64 result goes
//! back to bytes through a guard that maps NaN / negative to 0 and +inf to `u64::MAX`.

use core::time::Duration;

use crate::window::{f64_to_bytes, scale, window_getters, Saved, Window};
use crate::CongestionControl;

/// RFC 9438 §5.1: C = 0.4.
pub const C: f64 = 0.4;
/// RFC 9438 §4.6: β_cubic = 0.7 (as a ratio for the integer ssthresh arithmetic).
const BETA_NUM: u64 = 7;
const BETA_DEN: u64 = 10;
/// β_cubic as f64.
pub const BETA: f64 = 0.7;
/// RFC 9438 §4.3: α_cubic = 3 * (1 - β_cubic) / (1 + β_cubic) ≈ 0.529.
pub const ALPHA: f64 = 3.0 * (1.0 - BETA) / (1.0 + BETA);

/// State that a spurious-congestion undo restores (RFC 9438 §4.9 lists these variables).
#[derive(Clone, Copy, Debug)]
struct State {
    /// W_max in bytes: the window just before the last reduction (§4.6, after fast convergence
    /// §4.7).
    w_max: u64,
    /// cwnd_prior (§4.3): cwnd when ssthresh was last set by a reduction.
    cwnd_prior: u64,
    /// The congestion avoidance stage in progress, if it has started.
    epoch: Option<Epoch>,
    /// The next congestion avoidance stage is the first after a timeout: §4.8 uses K = 0 and
    /// W_max = cwnd at its start.
    after_rto: bool,
}

#[derive(Clone, Copy, Debug)]
struct Epoch {
    /// When the stage began (§4.2 `t` is measured from here): the first ACK that grew the
    /// window in congestion avoidance, as in Linux (`bictcp_update` sets `epoch_start` there).
    /// The time spent in recovery, when the window is frozen, is therefore not counted.
    start: Duration,
    /// cwnd_epoch (§4.2).
    cwnd_epoch: u64,
    /// K in seconds (§4.2 Figure 2), finite and >= 0.
    k: f64,
    /// W_est in bytes (§4.3), with the fraction of a byte carried between ACKs.
    w_est: u64,
    w_est_carry: f64,
    /// Fraction of a byte of cwnd growth carried between ACKs: with large windows the per-ACK
    /// increment `(target - cwnd) / cwnd` is well below one byte and would otherwise be lost.
    cwnd_carry: f64,
}

/// CUBIC congestion control (RFC 9438).
///
/// * Slow start and initial window as [`crate::NewReno`] (§4.10 allows standard slow start;
///   HyStart++ is not implemented).
/// * Congestion event (§4.6): `ssthresh = max(FlightSize * 0.7, 2*MSS)`, `cwnd = ssthresh`,
///   FlightSize being the most in flight since the last reduction, at most cwnd
///   (`Window::reduction_base`),
///   `W_max = cwnd` before the reduction, lowered to `cwnd * (1 + 0.7) / 2` by fast
///   convergence (§4.7) when the window had not regained the previous W_max.
/// * Congestion avoidance (§4.2-§4.5): `W_cubic(t) = C*(t-K)^3 + W_max` with
///   `K = cbrt((W_max - cwnd_epoch)/C)`; per ACK, if `W_cubic(t) < W_est` the window follows
///   the Reno-friendly estimate `W_est` (§4.3), else it moves toward
///   `target = clamp(W_cubic(t + SRTT), cwnd, 1.5*cwnd)` by `(target - cwnd)/cwnd` per segment
///   acknowledged (concave §4.4 below W_max, convex §4.5 above it).
/// * Timeout (§4.8): ssthresh as §4.6, cwnd = 1 MSS, and the next congestion avoidance stage
///   uses K = 0, W_max = its starting cwnd.
/// * Spurious congestion (§4.9): the state before the reduction is restored.
#[derive(Clone, Debug)]
pub struct Cubic {
    w: Window,
    s: State,
    fast_convergence: bool,
    /// Smoothed RTT in seconds from the samples `on_ack` receives (RFC 6298 gains), the RTT of
    /// `W_cubic(t + RTT)`. None until the first sample.
    srtt: Option<f64>,
    /// (cwnd, ssthresh, state) before the latest reduction.
    undo: Option<(Saved, State)>,
}

impl Cubic {
    /// A CUBIC window for a connection with sender MSS `mss` bytes (a zero MSS is treated as 1),
    /// fast convergence on.
    pub fn new(mss: u32) -> Cubic {
        let w = Window::new(mss);
        let cwnd = w.cwnd;
        Cubic {
            w,
            s: State {
                w_max: cwnd,
                cwnd_prior: cwnd,
                epoch: None,
                after_rto: false,
            },
            fast_convergence: true,
            srtt: None,
            undo: None,
        }
    }

    /// Turn fast convergence (RFC 9438 §4.7, a SHOULD) on or off.
    pub fn with_fast_convergence(mut self, on: bool) -> Cubic {
        self.fast_convergence = on;
        self
    }

    /// W_max in bytes.
    pub fn w_max(&self) -> u64 {
        self.s.w_max
    }

    /// K in seconds: of the congestion avoidance stage in progress, or, before it starts, the
    /// value it will have if it starts at the current cwnd (RFC 9438 §4.2 Figure 2).
    pub fn k(&self) -> f64 {
        match self.s.epoch {
            Some(e) => e.k,
            None => self.k_for(self.w.cwnd),
        }
    }

    /// cwnd_epoch in bytes (the window when the congestion avoidance stage in progress
    /// began), while one is in progress.
    pub fn cwnd_epoch(&self) -> Option<u64> {
        self.s.epoch.map(|e| e.cwnd_epoch)
    }

    /// W_est in bytes, while a congestion avoidance stage is in progress.
    pub fn w_est(&self) -> Option<u64> {
        self.s.epoch.map(|e| e.w_est)
    }

    /// `W_cubic(t)` in bytes for `t` since the start of the current congestion avoidance stage
    /// (RFC 9438 §4.2 Figure 1), clamped to `[0, u64::MAX]`.
    pub fn w_cubic(&self, t: Duration) -> u64 {
        f64_to_bytes(self.w_cubic_f(t.as_secs_f64(), self.k()))
    }

    /// RFC 9438 §4.2 Figure 2: `K = cbrt((W_max - cwnd_epoch) / C)`, segments and seconds.
    /// 0 when cwnd_epoch >= W_max (the curve then starts at its inflection point, convex).
    fn k_for(&self, cwnd_epoch: u64) -> f64 {
        if self.s.w_max <= cwnd_epoch {
            return 0.0;
        }
        let segs = (self.s.w_max - cwnd_epoch) as f64 / self.w.mss as f64;
        let k = (segs / C).cbrt();
        if k.is_finite() && k > 0.0 {
            k
        } else {
            0.0
        }
    }

    /// Figure 1 in bytes: `MSS * C * (t - K)^3 + W_max`. Finite for all finite inputs
    /// (at most ~1e67 for t = Duration::MAX and a 4 GB MSS).
    fn w_cubic_f(&self, t: f64, k: f64) -> f64 {
        let d = t - k;
        C * d * d * d * self.w.mss as f64 + self.s.w_max as f64
    }

    fn update_srtt(&mut self, rtt: Duration) {
        let r = rtt.as_secs_f64();
        self.srtt = Some(match self.srtt {
            // RFC 6298 §2.3 with alpha = 1/8.
            Some(s) => s + (r - s) / 8.0,
            None => r,
        });
    }

    /// §4.6 ssthresh from the window a reduction applies to (`Window::reduction_base`, or
    /// cwnd after a timeout).
    fn loss_ssthresh(&self, base: u64) -> u64 {
        scale(base, BETA_NUM, BETA_DEN).max(self.w.min_ssthresh())
    }

    fn start_epoch(&mut self, now: Duration) -> Epoch {
        let cwnd = self.w.cwnd;
        if self.s.after_rto || self.s.w_max < cwnd {
            // §4.8: first stage after a timeout: K = 0, W_max = cwnd at its start. The same
            // applies whenever the window already exceeds W_max (an undo, or slow start past
            // it): the curve then starts at its plateau and turns convex, as in Linux.
            self.s.w_max = cwnd;
            self.s.after_rto = false;
        }
        let e = Epoch {
            start: now,
            cwnd_epoch: cwnd,
            k: self.k_for(cwnd),
            // §4.3: "W_est is set equal to cwnd_epoch at the start of the congestion
            // avoidance stage."
            w_est: cwnd,
            w_est_carry: 0.0,
            cwnd_carry: 0.0,
        };
        self.s.epoch = Some(e);
        e
    }

    fn congestion_avoidance(&mut self, now: Duration, acked: u64) {
        let mut e = match self.s.epoch {
            Some(e) => e,
            None => self.start_epoch(now),
        };
        let mss = self.w.mss as f64;
        let cwnd = self.w.cwnd.max(1);
        let cw = cwnd as f64;
        let acked_f = acked as f64;
        // Time may stand still or even step back (the caller's clock is virtual): t >= 0.
        let t = now.saturating_sub(e.start).as_secs_f64();
        let rtt = self.srtt.unwrap_or(0.0);

        // §4.3: W_est += α_cubic * segments_acked / cwnd (in segments), α_cubic = 1 once W_est
        // has reached cwnd_prior. In bytes: α * acked * MSS / cwnd.
        let alpha = if e.w_est >= self.s.cwnd_prior {
            1.0
        } else {
            ALPHA
        };
        let (inc, carry) = split(alpha * acked_f * mss / cw + e.w_est_carry);
        e.w_est = e.w_est.saturating_add(inc);
        e.w_est_carry = carry;

        let w_t = self.w_cubic_f(t, e.k);
        if w_t < e.w_est as f64 {
            // Reno-friendly region (§4.3): "cwnd SHOULD be set to W_est". W_est starts at
            // cwnd_epoch and cwnd has never been below it since, so this is an increase; the
            // max only guards against shrinking the window on an ACK.
            self.w.cwnd = self.w.cwnd.max(e.w_est);
        } else {
            // §4.2: target = W_cubic(t + RTT), at least cwnd, at most 1.5 * cwnd.
            let w_next = self.w_cubic_f(t + rtt, e.k);
            let target = if w_next.is_nan() || w_next < cw {
                cw
            } else if w_next > 1.5 * cw {
                1.5 * cw
            } else {
                w_next
            };
            // §4.4/§4.5: cwnd += (target - cwnd) / cwnd per segment acknowledged; per byte
            // acknowledged that is (target - cwnd) * acked / cwnd bytes of window.
            let (inc, carry) = split((target - cw) * acked_f / cw + e.cwnd_carry);
            self.w.cwnd = self.w.cwnd.saturating_add(inc);
            e.cwnd_carry = carry;
        }
        self.s.epoch = Some(e);
    }
}

/// Whole bytes and the fraction left over; non-finite or negative amounts grow nothing.
fn split(x: f64) -> (u64, f64) {
    if !x.is_finite() || x <= 0.0 {
        return (if x == f64::INFINITY { u64::MAX } else { 0 }, 0.0);
    }
    let whole = x.floor();
    (f64_to_bytes(whole), (x - whole).clamp(0.0, 1.0))
}

impl CongestionControl for Cubic {
    fn on_ack(
        &mut self,
        now: Duration,
        acked_bytes: u64,
        rtt: Option<Duration>,
        bytes_in_flight: u64,
    ) {
        if let Some(r) = rtt {
            self.update_srtt(r);
        }
        let grow = self.w.on_ack(acked_bytes, bytes_in_flight);
        if grow == 0 {
            return;
        }
        let left = self.w.slow_start(grow);
        if left == 0 || self.w.in_slow_start() {
            return;
        }
        self.congestion_avoidance(now, left);
    }

    fn on_congestion_event(&mut self, _now: Duration, bytes_in_flight: u64) {
        self.w.last_flight = bytes_in_flight;
        if self.w.in_recovery() {
            // One reduction per episode (RFC 9438 §4.6 reacts to a congestion event, and all
            // losses of one window are one event, RFC 6582 §3.2).
            return;
        }
        self.undo = Some((self.w.save(), self.s));
        let cwnd = self.w.cwnd;
        // §4.7 fast convergence: a loss before regaining the previous W_max means another flow
        // needs bandwidth; release some by remembering a lower W_max.
        self.s.w_max = if self.fast_convergence && cwnd < self.s.w_max {
            // cwnd * (1 + β_cubic) / 2
            scale(cwnd, BETA_DEN + BETA_NUM, 2 * BETA_DEN)
        } else {
            cwnd
        };
        self.s.cwnd_prior = cwnd;
        let flight = self.w.flight_size(bytes_in_flight);
        // §4.6: ssthresh = flight_size * β_cubic, with flight_size the most in flight since
        // the last reduction (`Window::reduction_base`), at least 2 SMSS; cwnd = max(ssthresh, 2).
        let base = self.w.reduction_base(bytes_in_flight);
        self.w.ssthresh = self.loss_ssthresh(base);
        self.w.cwnd = self.w.ssthresh;
        self.s.epoch = None;
        self.s.after_rto = false;
        self.w.enter_fast_recovery(flight);
    }

    fn on_recovery_end(&mut self, _now: Duration) {
        self.w.episode = None;
    }

    fn on_rto(&mut self, _now: Duration) {
        if !self.w.rto_holds_ssthresh() {
            self.undo = Some((self.w.save(), self.s));
            self.s.cwnd_prior = self.w.cwnd;
            // §4.8: ssthresh set with β_cubic "same as in Section 4.6". FlightSize is not
            // passed in; cwnd stands for it, as in Linux (see `NewReno::on_rto`).
            self.w.ssthresh = self.loss_ssthresh(self.w.cwnd);
        }
        self.s.epoch = None;
        self.s.after_rto = true;
        self.w.timeout();
    }

    fn on_spurious_congestion(&mut self) {
        // §4.9: "if cwnd < cwnd_prev" restore cwnd, ssthresh, W_max, K, epoch_start, W_est,
        // cwnd_prior as they were before the reduction.
        let (saved, s) = self.undo.take().unzip();
        if let (true, Some(s)) = (self.w.undo(saved), s) {
            self.s = s;
        }
    }

    window_getters!("cubic");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::*;

    const MSS: u64 = 1000;

    /// A CUBIC sender that has just lost at a window of `w_max` segments (flight = cwnd) and
    /// finished recovery.
    fn after_loss_at(w_max_segs: u64, now: Duration) -> Cubic {
        let mut cc = Cubic::new(MSS as u32);
        cc.w.cwnd = w_max_segs * MSS;
        cc.s.w_max = cc.w.cwnd;
        cc.on_congestion_event(now, w_max_segs * MSS);
        cc.on_recovery_end(now);
        cc
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1.0)
    }

    #[test]
    fn reduction_is_beta_of_w_max() {
        let cc = after_loss_at(100, ms(0));
        assert_eq!(cc.w_max(), 100 * MSS);
        assert_eq!(cc.cwnd(), 70 * MSS);
        assert_eq!(cc.ssthresh(), 70 * MSS);
        assert!(!cc.in_slow_start());
    }

    #[test]
    fn k_matches_rfc_formula() {
        let cc = after_loss_at(100, ms(0));
        // K = cbrt(W_max * (1 - β) / C) = cbrt(100 * 0.3 / 0.4) = cbrt(75).
        let k = cc.k();
        assert!((k - 75f64.cbrt()).abs() < 1e-9, "K = {k}");
        assert!((k - 4.217_163).abs() < 1e-5);
        // W_cubic(K) = W_max, W_cubic(0) = cwnd_epoch.
        assert!(close(
            cc.w_cubic(Duration::from_secs_f64(k)) as f64,
            100e3,
            1e-6
        ));
        assert!(close(cc.w_cubic(Duration::ZERO) as f64, 70e3, 1e-6));
        // Another data point: W_max = 1000 segments, K = cbrt(750).
        let cc = after_loss_at(1000, ms(0));
        assert!((cc.k() - 9.085_603).abs() < 1e-5);
    }

    #[test]
    fn growth_follows_the_cubic_curve() {
        let w_max = 1000;
        let start = ms(1000);
        let mut cc = after_loss_at(w_max, start);
        let rtt = ms(100);
        let k = cc.k();
        let mut now = start;
        let mut samples = Vec::new(); // (t since epoch, cwnd in segments)
        while now < start + Duration::from_secs(14) {
            now = round_trip(&mut cc, now, rtt, MSS);
            let epoch = cc.s.epoch.expect("in congestion avoidance").start;
            samples.push(((now - epoch).as_secs_f64(), cc.cwnd() as f64 / MSS as f64));
        }
        for &(t, w) in &samples {
            // cwnd aims one RTT ahead: compare with W_cubic at t..t+RTT.
            let lo = C * (t - k).powi(3) + w_max as f64;
            let hi = C * (t + 0.1 - k).powi(3) + w_max as f64;
            assert!(
                w >= lo.min(hi) * 0.98 && w <= lo.max(hi) * 1.02,
                "t={t:.2} cwnd={w:.1} W_cubic in [{lo:.1}, {hi:.1}]"
            );
        }
        // Concave then plateau then convex: per-round growth falls toward K, is ~0 around it,
        // then rises.
        let growth = |t0: f64| {
            let i = samples.iter().position(|&(t, _)| t >= t0).unwrap();
            samples[i + 5].1 - samples[i].1
        };
        assert!(growth(0.5) > growth(3.0));
        assert!(growth(3.0) > growth(k - 0.25));
        assert!(growth(k - 0.25) < 1.0);
        assert!(growth(k + 2.0) > growth(k));
        assert!(growth(k + 4.0) > growth(k + 2.0));
        // Plateau at W_max.
        let at_k = samples.iter().find(|&&(t, _)| t >= k).unwrap().1;
        assert!(close(at_k, w_max as f64, 0.01), "cwnd at K = {at_k}");
    }

    #[test]
    fn target_capped_at_one_and_a_half_per_rtt() {
        let mut cc = after_loss_at(100, ms(0));
        cc.on_ack(ms(1), MSS, Some(ms(1)), 69 * MSS); // starts the epoch
                                                      // Far beyond K the cubic target explodes; growth per round trip is capped at 1.5x.
        let mut now = ms(60_000);
        for _ in 0..5 {
            let before = cc.cwnd();
            now = round_trip(&mut cc, now, ms(100), MSS);
            assert!(cc.cwnd() as f64 <= before as f64 * 1.5 + MSS as f64);
            assert!(cc.cwnd() as f64 >= before as f64 * 1.3);
        }
    }

    #[test]
    fn reno_friendly_region_with_short_rtt() {
        let start = ms(10);
        let mut cc = after_loss_at(10, start);
        let rtt = ms(1);
        let mut now = start;
        for _ in 0..200 {
            now = round_trip(&mut cc, now, rtt, MSS);
        }
        let e = cc.s.epoch.unwrap();
        let t = now - e.start;
        let w_cubic = cc.w_cubic(t);
        let w_est = e.w_est;
        assert!(w_est > w_cubic, "W_est {w_est} W_cubic {w_cubic}");
        assert!(close(cc.cwnd() as f64, w_est as f64, 0.01));
        // W_est: α = 0.529 per RTT up to cwnd_prior (10 segments, ~6 rounds), then 1 per RTT.
        let segs = cc.cwnd() as f64 / MSS as f64;
        assert!(segs > 190.0 && segs < 210.0, "cwnd {segs} segments");
        // The pure cubic curve would still be below W_max.
        assert!(w_cubic < 10 * MSS);
    }

    #[test]
    fn reno_friendly_alpha_before_cwnd_prior() {
        // Short RTT, small window: before W_est reaches cwnd_prior it grows by α_cubic per RTT.
        let mut cc = after_loss_at(10, ms(0));
        let mut now = ms(0);
        now = round_trip(&mut cc, now, ms(1), MSS);
        let w_est0 = cc.w_est().unwrap();
        round_trip(&mut cc, now, ms(1), MSS);
        let d = (cc.w_est().unwrap() - w_est0) as f64 / MSS as f64;
        assert!(
            (d - ALPHA).abs() < 0.05,
            "W_est grew by {d} segments in one RTT"
        );
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let mut cc = after_loss_at(100, ms(0));
        let mut now = ms(0);
        for _ in 0..10 {
            now = round_trip(&mut cc, now, ms(100), MSS);
        }
        let cwnd = cc.cwnd();
        assert!(cwnd < 100 * MSS && cwnd > 70 * MSS);
        cc.on_congestion_event(now, cwnd);
        // W_max = cwnd * (1 + β) / 2 = 0.85 cwnd.
        assert_eq!(cc.w_max(), cwnd * 17 / 20);
        assert_eq!(cc.cwnd(), cwnd * 7 / 10);

        // Without fast convergence W_max is the window at the loss.
        let mut cc = after_loss_at(100, ms(0)).with_fast_convergence(false);
        let mut now = ms(0);
        for _ in 0..10 {
            now = round_trip(&mut cc, now, ms(100), MSS);
        }
        let cwnd = cc.cwnd();
        cc.on_congestion_event(now, cwnd);
        assert_eq!(cc.w_max(), cwnd);
    }

    #[test]
    fn no_fast_convergence_above_w_max() {
        let mut cc = after_loss_at(100, ms(0));
        cc.w.cwnd = 120 * MSS;
        cc.on_congestion_event(ms(5), 120 * MSS);
        assert_eq!(cc.w_max(), 120 * MSS);
        assert_eq!(cc.cwnd(), 84 * MSS);
    }

    #[test]
    fn congestion_event_in_slow_start() {
        let mut cc = Cubic::new(MSS as u32);
        let now = round_trip(&mut cc, ms(0), ms(10), MSS);
        assert_eq!(cc.cwnd(), 20 * MSS);
        assert!(cc.in_slow_start());
        cc.on_congestion_event(now, 20 * MSS);
        assert_eq!(cc.ssthresh(), 14 * MSS);
        assert_eq!(cc.cwnd(), 14 * MSS);
        assert_eq!(cc.w_max(), 20 * MSS);
        assert!(!cc.in_slow_start());
        // Part of the window left in flight when the loss is found (the ACK that revealed it
        // acknowledged the rest of a full window): ssthresh from the flight before that ACK.
        let mut cc = Cubic::new(MSS as u32);
        cc.on_ack(ms(1), 7 * MSS, Some(ms(1)), 3 * MSS);
        cc.on_congestion_event(ms(1), 3 * MSS);
        assert_eq!(cc.ssthresh(), 10 * MSS * 7 / 10);
        // Held below cwnd (peer window, grant, application): from what was in flight.
        let mut cc = Cubic::new(MSS as u32);
        cc.w.cwnd = 20 * MSS;
        cc.on_ack(ms(1), MSS, Some(ms(1)), 9 * MSS);
        cc.on_congestion_event(ms(1), 3 * MSS);
        assert_eq!(cc.ssthresh(), 10 * MSS * 7 / 10);
        // Floor of 2 MSS.
        let mut cc = Cubic::new(MSS as u32);
        cc.w.cwnd = 2 * MSS;
        cc.on_congestion_event(ms(1), MSS);
        assert_eq!(cc.ssthresh(), 2 * MSS);
        assert_eq!(cc.cwnd(), 2 * MSS);
    }

    #[test]
    fn timeout_then_convex_from_new_start() {
        let mut cc = after_loss_at(100, ms(0));
        let mut now = round_trip(&mut cc, ms(0), ms(100), MSS);
        let before = cc.cwnd();
        cc.on_rto(now);
        assert_eq!(cc.cwnd(), MSS);
        assert_eq!(cc.ssthresh(), before * 7 / 10);
        assert!(cc.in_slow_start());
        while cc.in_slow_start() {
            now = round_trip(&mut cc, now, ms(100), MSS);
        }
        now = round_trip(&mut cc, now, ms(100), MSS);
        // §4.8: K = 0 and W_max = cwnd at the start of this stage.
        let e = cc.s.epoch.unwrap();
        assert_eq!(e.k, 0.0);
        assert_eq!(cc.w_max(), e.cwnd_epoch);
        assert!(cc.cwnd() >= e.cwnd_epoch);
        // Convex from there on: once the cubic term takes over from W_est, the growth per
        // round trip keeps rising.
        let mut gains = Vec::new();
        for _ in 0..60 {
            let w = cc.cwnd();
            now = round_trip(&mut cc, now, ms(100), MSS);
            gains.push(cc.cwnd() - w);
        }
        assert!(gains[59] > gains[50] && gains[50] > gains[40], "{gains:?}");
        assert!(gains[59] > 2 * MSS, "{gains:?}");
    }

    #[test]
    fn spurious_undo_restores_state() {
        let mut cc = after_loss_at(100, ms(0));
        let mut now = ms(0);
        for _ in 0..3 {
            now = round_trip(&mut cc, now, ms(100), MSS);
        }
        let (cwnd, w_max, k) = (cc.cwnd(), cc.w_max(), cc.k());
        cc.on_congestion_event(now, cwnd);
        assert!(cc.cwnd() < cwnd);
        cc.on_spurious_congestion();
        assert_eq!(cc.cwnd(), cwnd);
        assert_eq!(cc.w_max(), w_max);
        assert_eq!(cc.k(), k);
        assert!(!cc.in_recovery());
    }

    #[test]
    fn no_growth_during_recovery_and_once_per_episode() {
        let mut cc = in_recovery_from_ten(Cubic::new(MSS as u32), 7);
        cc.on_congestion_event(ms(2), 7 * MSS);
        assert_eq!(cc.cwnd(), 7 * MSS);
        cc.on_ack(ms(3), 5 * MSS, Some(ms(1)), 5 * MSS);
        assert_eq!(cc.cwnd(), 7 * MSS);
        assert!(cc.in_recovery());
        cc.on_ack(ms(4), 5 * MSS, Some(ms(1)), 5 * MSS);
        assert!(!cc.in_recovery());
    }

    #[test]
    fn time_going_backwards_is_harmless() {
        let mut cc = after_loss_at(50, ms(10_000));
        cc.on_ack(ms(10_000), MSS, Some(ms(5)), 35 * MSS);
        let w = cc.cwnd();
        cc.on_ack(ms(1), MSS, Some(Duration::ZERO), 35 * MSS);
        cc.on_ack(Duration::ZERO, MSS, None, 35 * MSS);
        assert!(cc.cwnd() >= w);
        assert!(cc.cwnd() < w + 2 * MSS);
    }

    #[test]
    fn extreme_inputs() {
        for mss in [0u32, 1, 1460, u32::MAX] {
            let mut cc = Cubic::new(mss);
            cc.on_congestion_event(Duration::MAX, u64::MAX);
            cc.on_recovery_end(Duration::MAX);
            cc.on_ack(Duration::ZERO, u64::MAX, Some(Duration::MAX), u64::MAX);
            cc.on_ack(Duration::MAX, u64::MAX, Some(Duration::MAX), u64::MAX);
            cc.on_ack(Duration::MAX, u64::MAX, Some(Duration::ZERO), u64::MAX);
            assert!(cc.cwnd() >= cc.mss());
            cc.on_rto(Duration::ZERO);
            assert_eq!(cc.cwnd(), cc.mss());
            assert!(cc.ssthresh() >= 2 * cc.mss().min(u64::MAX / 2));
        }
    }
}
