//! RACK (RFC 8985): the reorder window (D-SACK steps, Linux's `reo_wnd_steps`, and the measured
//! lateness of segments declared lost that arrived anyway), RACK's round trip, and loss
//! detection by time.

use super::Recovery;
use std::time::Duration;

/// Recovery episodes a widened reorder window survives without a new D-SACK (RFC 8985 §6.2).
const REO_WND_PERSIST: u32 = 16;

/// Largest measured reorder window: half the usual 200 ms minimum RTO. A segment delivered
/// later than that after being declared lost (a receiver that stalled, not a path that
/// reorders) must not hold loss detection back longer than the RTO would.
pub(super) const MAX_REO_MEASURED: Duration = Duration::from_millis(100);

/// Largest reorder-window multiplier (the window is also capped at SRTT).
const MAX_REO_WND_MULT: u32 = 16;

impl Recovery {
    /// Reordering (or a duplicate) was proven: widen the reorder window, at most once per
    /// round trip.
    pub(super) fn widen_reo_wnd(&mut self, cum_ack: u64) {
        if self.reo_round_end.is_some_and(|e| cum_ack < e) {
            return;
        }
        self.reo_wnd_mult = (self.reo_wnd_mult + 1).min(MAX_REO_WND_MULT);
        self.stats.reo_wnd_mult = self.reo_wnd_mult;
        self.reo_wnd_persist = REO_WND_PERSIST;
        self.reo_round_end = Some(self.highest_end().unwrap_or(cum_ack));
    }

    pub(super) fn update_rack(
        &mut self,
        xmit: Duration,
        end: u64,
        retransmitted: bool,
        now: Duration,
        min_rtt: Option<Duration>,
    ) {
        let rtt = now.saturating_sub(xmit);
        // RFC 8985 §6.2 step 2: a retransmitted segment's ACK may be for the original; skip
        // samples shorter than the minimum RTT.
        if retransmitted && min_rtt.is_some_and(|m| rtt < m) {
            return;
        }
        // RACK.rtt is the round trip of the most recently *sent* segment delivered: RFC 8985
        // §6.2 step 2 takes the delivered segments in ascending order of transmission time,
        // so the newest one's RTT is the last written. They come here in sequence order, so
        // only a segment newer than RACK's own sets it (as Linux's `tcp_rack_advance` did
        // until 4.10; it now writes every segment's, in sequence order, but keeps SACKed
        // segments SACKed across an RTO, which this scoreboard forgets). Taken from every
        // delivered segment, a cumulative ACK that also covers old segments (delivered long
        // ago, their ACKs lost, or forgotten by an RTO) set it to their age: 200 ms after a
        // timeout, and every later loss then waited that long to be declared.
        let newer = match self.rack_xmit {
            None => true,
            Some(x) => xmit > x || (xmit == x && end > self.rack_end),
        };
        if newer {
            self.rack_rtt = rtt;
            self.rack_xmit = Some(xmit);
            self.rack_end = end;
        }
    }

    /// A segment declared lost was delivered anyway, `rtt` after it was sent: it was late by
    /// about `rtt - rack_rtt`, so the reorder window must be at least that (with a quarter
    /// more for margin). RFC 8985 grows the window in steps of min_rtt/4, one per round trip;
    /// on a sprayed path whose delay spread is several of those steps, each step short of it
    /// cost another round of spurious retransmissions.
    pub(super) fn measure_reordering(&mut self, rtt: Duration) {
        let late = rtt.saturating_sub(self.rack_rtt);
        self.reo_measured = self.reo_measured.max(late + late / 4).min(MAX_REO_MEASURED);
        self.reo_wnd_persist = REO_WND_PERSIST;
        self.stats.reo_measured = self.reo_measured;
    }

    pub(super) fn reo_wnd(&self, min_rtt: Option<Duration>, srtt: Option<Duration>) -> Duration {
        // RFC 8985 §6.2: the D-SACK-driven steps are a guess and stay within SRTT. A measured
        // lateness is what the path did and may exceed it: on a sprayed or deeply reordering
        // path whose delay spread is longer than the round trip (10 % of packets held up to
        // 1 ms, against a 0.2 ms SRTT), a window held to SRTT declared every late packet lost
        // and retransmitted it, for ever (the simulator: 8,844 retransmissions, 0.56 Gbit/s;
        // with the measured window 184 and 1.44 Gbit/s). Linux caps the same way, but its SRTT
        // there is inflated by the queue it builds, ours is not.
        let steps = min_rtt.unwrap_or(Duration::ZERO) / 4 * self.reo_wnd_mult;
        let steps = match srtt {
            Some(s) => steps.min(s),
            None => steps,
        };
        steps.max(self.reo_measured)
    }

    /// RACK loss detection. Returns newly lost bytes and, if some segments are not yet overdue,
    /// when to check again. Walks segments in transmission order and stops at the first one
    /// sent after the newest delivered segment or not yet overdue: everything behind it was
    /// sent later.
    pub fn detect_losses(
        &mut self,
        now: Duration,
        min_rtt: Option<Duration>,
        srtt: Option<Duration>,
    ) -> (u64, Option<Duration>) {
        let Some(rack_xmit) = self.rack_xmit else {
            return (0, None);
        };
        let reo = self.reo_wnd(min_rtt, srtt);
        let mut lost = 0;
        let mut timer = None;
        while let Some(&(idx, xmit)) = self.by_time.front() {
            self.stats.scoreboard_visits += 1;
            let live = self
                .get(idx)
                .is_some_and(|s| s.xmit == xmit && !s.sacked && !s.lost);
            if !live {
                self.by_time.pop_front();
                continue;
            }
            let end = self.get(idx).map_or(0, |s| s.end);
            let sent_before = xmit < rack_xmit || (xmit == rack_xmit && end < self.rack_end);
            if !sent_before {
                break;
            }
            let deadline = xmit + self.rack_rtt + reo;
            if now < deadline {
                timer = Some(deadline);
                break;
            }
            let i = (idx - self.base) as usize;
            self.sent[i].lost = true;
            lost += self.sent[i].len();
            self.lost_q.push_back(idx);
            self.by_time.pop_front();
        }
        self.pipe -= lost;
        self.stats.rack_losses += u64::from(lost > 0);
        (lost, timer)
    }
}
