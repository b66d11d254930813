//! Send-side scoreboard with SACK (RFC 2018/6675 pipe), RACK-TLP loss detection (RFC 8985),
//! D-SACK (RFC 2883) and undo of spurious reductions (RFC 3708, RFC 4015).
//!
//! Loss is inferred from time, not from duplicate-ACK counts: a segment is lost when a segment
//! sent after it has been delivered and more than RTT + reorder window has passed since it was
//! sent. That is what keeps reordering (the normal case on multipath AI fabrics) from causing
//! spurious retransmissions; when some still happen, the peer's D-SACK (or the timestamp it
//! echoes, Eifel) proves it, the reorder window widens (RFC 8985 §6.2 step 4, Linux's
//! `reo_wnd_steps`), and an episode whose every retransmission proved spurious has its
//! congestion window reduction undone.
//!
//! Per-ACK cost does not grow with the window (Linux's shape): segments sit in sequence order
//! and are found by index or binary search; RACK walks a transmission-ordered queue from the
//! oldest and stops at the first segment not yet overdue; segments marked lost wait in their
//! own queue; SACK blocks already processed on the previous ACK are skipped (`sack_cache`).
//! Stale queue entries (acknowledged, SACKed or retransmitted since) are dropped lazily.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Retransmitted ranges remembered for D-SACK matching. Past this many in one episode the
/// oldest are forgotten, and the episode can no longer be proven wholly spurious.
const MAX_RETRANSMITTED: usize = 4096;

/// Recovery episodes a widened reorder window survives without a new D-SACK (RFC 8985 §6.2).
const REO_WND_PERSIST: u32 = 16;

/// Largest measured reorder window: half the usual 200 ms minimum RTO. A segment delivered
/// later than that after being declared lost (a receiver that stalled, not a path that
/// reorders) must not hold loss detection back longer than the RTO would.
const MAX_REO_MEASURED: Duration = Duration::from_millis(100);

/// Largest reorder-window multiplier (the window is also capped at SRTT).
const MAX_REO_WND_MULT: u32 = 16;

/// One transmitted, not yet cumulatively acknowledged range of stream offsets.
#[derive(Debug, Clone)]
pub struct Sent {
    pub start: u64,
    pub end: u64,
    /// Time of the latest (re)transmission.
    pub xmit: Duration,
    /// TSval carried by the latest transmission (for spurious-retransmission detection).
    pub tsval: u32,
    pub retransmitted: bool,
    pub sacked: bool,
    /// Marked lost and not yet retransmitted.
    pub lost: bool,
    /// Marked lost by an RTO, which presumes everything outstanding lost and forgets what was
    /// SACKed: its delivery later says nothing about reordering (it may have arrived long
    /// before the timeout), so it is no false loss.
    pub timed_out: bool,
}

impl Sent {
    fn len(&self) -> u64 {
        self.end - self.start
    }
}

/// What an ACK told the scoreboard.
#[derive(Debug, Default)]
pub struct AckResult {
    pub newly_acked_bytes: u64,
    /// RTT sample from the newest never-retransmitted segment this ACK delivered (Karn).
    pub rtt_sample: Option<Duration>,
    /// Retransmissions this ACK proved spurious: acknowledged by an ACK that echoes a timestamp
    /// older than the retransmission (Eifel), or reported by a D-SACK.
    pub spurious: u32,
    /// Segments RACK marked lost that were delivered before being retransmitted: the "loss"
    /// was reordering. (Segments an RTO presumed lost are not counted: `Sent::timed_out`.)
    pub false_losses: u32,
    /// The episode's losses all proved false (every retransmission spurious, every segment
    /// marked lost delivered): undo its reduction.
    pub undo: bool,
}

/// A loss-recovery episode (from the first loss marked until the recovery point is acked).
#[derive(Debug, Clone, Copy)]
struct Episode {
    /// Retransmissions not (yet) proven spurious.
    unproven: u32,
    retransmissions: u32,
    /// Segments marked lost that arrived without a retransmission.
    false_losses: u32,
    /// False once a retransmission could not be tracked (too many): no undo then.
    complete: bool,
}

#[derive(Debug)]
pub struct Recovery {
    /// In sequence order; `sent[i]` has index `base + i` for the whole of its life.
    sent: VecDeque<Sent>,
    base: u64,
    /// (index, transmission time) in transmission order, for RACK.
    by_time: VecDeque<(u64, Duration)>,
    /// Indexes marked lost, in the order marked.
    lost_q: VecDeque<u64>,
    /// SACK blocks of the previous ACK: the parts already processed.
    sack_cache: Vec<(u64, u64)>,
    /// Ranges retransmitted in the current episode (or as a probe), until proven spurious.
    /// By start: (end, how many times retransmitted and not yet proven spurious). A map, so a
    /// D-SACK or an Eifel proof finds its entry without walking them all.
    retransmitted: BTreeMap<u64, (u64, u32)>,
    /// Entries in `retransmitted`, counting each retransmission.
    retransmitted_count: usize,
    episode: Option<Episode>,
    /// RACK state: the most recently sent segment known delivered.
    rack_xmit: Option<Duration>,
    rack_end: u64,
    rack_rtt: Duration,
    reo_wnd_mult: u32,
    reo_wnd_persist: u32,
    /// The lateness of segments declared lost that were delivered anyway (`measure_reordering`).
    reo_measured: Duration,
    /// The reorder window grows at most once per round trip: not again until the cumulative
    /// ACK passes this point (`highest_end` when it last grew).
    reo_round_end: Option<u64>,
    /// Bytes in flight per RFC 6675 pipe: sent, not sacked, not marked lost.
    pipe: u64,
    pub stats: RecoveryStats,
}

#[derive(Debug, Default, Clone, Copy)]
pub struct RecoveryStats {
    pub segments_sent: u64,
    pub retransmits: u64,
    pub spurious_retransmits: u64,
    pub rack_losses: u64,
    pub rto_losses: u64,
    pub tlp_probes: u64,
    /// D-SACK blocks that named one of our retransmissions.
    pub dsack_spurious: u64,
    /// Scoreboard entries examined by ACK processing and loss detection: the per-ACK cost.
    pub scoreboard_visits: u64,
    /// The reorder window's multiplier of min_rtt/4 now (1 until a D-SACK widened it).
    pub reo_wnd_mult: u32,
    /// Segments RACK declared lost that were delivered before their retransmission
    /// (reordering deeper than the reorder window); not those an RTO presumed lost.
    pub false_losses: u64,
    /// How late the latest of those was beyond the RACK RTT (plus a quarter): a floor of the
    /// reorder window until it decays.
    pub reo_measured: Duration,
}

impl Recovery {
    pub fn new() -> Recovery {
        Recovery {
            sent: VecDeque::new(),
            base: 0,
            by_time: VecDeque::new(),
            lost_q: VecDeque::new(),
            sack_cache: Vec::new(),
            retransmitted: BTreeMap::new(),
            retransmitted_count: 0,
            episode: None,
            rack_xmit: None,
            rack_end: 0,
            rack_rtt: Duration::ZERO,
            reo_wnd_mult: 1,
            reo_wnd_persist: 0,
            reo_measured: Duration::ZERO,
            reo_round_end: None,
            pipe: 0,
            stats: RecoveryStats {
                reo_wnd_mult: 1,
                ..RecoveryStats::default()
            },
        }
    }

    pub fn pipe(&self) -> u64 {
        self.pipe
    }

    pub fn is_empty(&self) -> bool {
        self.sent.is_empty()
    }

    pub fn highest_end(&self) -> Option<u64> {
        self.sent.back().map(|s| s.end)
    }

    fn get(&self, idx: u64) -> Option<&Sent> {
        let i = idx.checked_sub(self.base)?;
        self.sent.get(usize::try_from(i).ok()?)
    }

    fn index_of(&self, start: u64) -> Option<u64> {
        let i = self.sent.partition_point(|s| s.start < start);
        (self.sent.get(i)?.start == start).then_some(self.base + i as u64)
    }

    /// Record a first transmission of `[start, end)`.
    pub fn on_send(&mut self, start: u64, end: u64, now: Duration, tsval: u32) {
        self.stats.segments_sent += 1;
        self.pipe += end - start;
        self.by_time
            .push_back((self.base + self.sent.len() as u64, now));
        self.sent.push_back(Sent {
            start,
            end,
            xmit: now,
            tsval,
            retransmitted: false,
            sacked: false,
            lost: false,
            timed_out: false,
        });
    }

    /// The first segment marked lost (in the order marked), to retransmit.
    pub fn next_lost(&mut self) -> Option<(u64, u64)> {
        while let Some(&idx) = self.lost_q.front() {
            match self.get(idx) {
                Some(s) if s.lost && !s.sacked => return Some((s.start, s.end)),
                _ => {
                    self.lost_q.pop_front();
                }
            }
        }
        None
    }

    /// The last segment sent (the tail loss probe retransmits it when there is no new data).
    pub fn last(&self) -> Option<(u64, u64)> {
        self.sent
            .iter()
            .rev()
            .find(|s| !s.sacked)
            .map(|s| (s.start, s.end))
    }

    /// Record a retransmission of the segment starting at `start`.
    pub fn on_retransmit(&mut self, start: u64, now: Duration, tsval: u32) {
        self.stats.retransmits += 1;
        self.stats.segments_sent += 1;
        let Some(idx) = self.index_of(start) else {
            return;
        };
        let i = (idx - self.base) as usize;
        let s = &mut self.sent[i];
        if s.lost {
            self.pipe += s.len();
        }
        s.lost = false;
        s.timed_out = false;
        s.retransmitted = true;
        s.xmit = now;
        s.tsval = tsval;
        let range = (s.start, s.end);
        self.by_time.push_back((idx, now));
        if self.retransmitted_count >= MAX_RETRANSMITTED {
            // Forget the lowest (oldest in sequence): the episode can no longer be proven
            // wholly spurious.
            if let Some(mut first) = self.retransmitted.first_entry() {
                first.get_mut().1 -= 1;
                if first.get().1 == 0 {
                    first.remove();
                }
                self.retransmitted_count -= 1;
            }
            if let Some(e) = self.episode.as_mut() {
                e.complete = false;
            }
        }
        self.retransmitted.entry(range.0).or_insert((range.1, 0)).1 += 1;
        self.retransmitted_count += 1;
        if let Some(e) = self.episode.as_mut() {
            e.unproven += 1;
            e.retransmissions += 1;
        }
    }

    /// A loss episode starts (the caller reduced cwnd): count its retransmissions from here.
    pub fn start_episode(&mut self) {
        self.episode = Some(Episode {
            unproven: 0,
            retransmissions: 0,
            false_losses: 0,
            complete: true,
        });
        self.retransmitted.clear();
        self.retransmitted_count = 0;
    }

    /// The episode's recovery ended (its recovery point was acknowledged). Its record of
    /// retransmissions stays until the next episode: the D-SACK that proves the last of them
    /// spurious typically arrives just after (the late original filled the hole and ended
    /// recovery; the retransmission arrives next, as a duplicate).
    pub fn end_episode(&mut self) {
        // RFC 8985 §6.2 step 4: a widened window decays after 16 episodes without D-SACK.
        if self.reo_wnd_mult > 1 || !self.reo_measured.is_zero() {
            self.reo_wnd_persist = self.reo_wnd_persist.saturating_sub(1);
            if self.reo_wnd_persist == 0 {
                self.reo_wnd_mult = 1;
                self.stats.reo_wnd_mult = 1;
                self.reo_measured = Duration::ZERO;
                self.stats.reo_measured = Duration::ZERO;
            }
        }
    }

    /// `[start, end)` arrived twice. If it is one of our tracked retransmissions, that one
    /// was spurious (true); false if it is not one (a copy the network made, or proven
    /// already).
    fn prove_spurious(&mut self, start: u64, end: u64) -> bool {
        // The retransmission covering [start, end): the last one starting at or before it.
        let Some((&s, &(e, n))) = self.retransmitted.range(..=start).next_back() else {
            return false;
        };
        if end > e {
            return false;
        }
        if n > 1 {
            self.retransmitted.insert(s, (e, n - 1));
        } else {
            self.retransmitted.remove(&s);
        }
        self.retransmitted_count -= 1;
        self.stats.spurious_retransmits += 1;
        if let Some(e) = self.episode.as_mut() {
            e.unproven = e.unproven.saturating_sub(1);
        }
        true
    }

    /// Linux's `tcp_may_undo`: the episode's reduction was not needed once every segment it
    /// declared lost has arrived on its own — every retransmission proven spurious, none
    /// still waiting to be retransmitted, and at least one proof. Then the episode ends.
    fn try_undo(&mut self) -> bool {
        let Some(e) = self.episode else {
            return false;
        };
        let proven = e.complete && e.unproven == 0 && (e.retransmissions > 0 || e.false_losses > 0);
        if !proven || self.next_lost().is_some() {
            return false;
        }
        self.episode = None;
        true
    }

    /// Reordering (or a duplicate) was proven: widen the reorder window, at most once per
    /// round trip.
    fn widen_reo_wnd(&mut self, cum_ack: u64) {
        if self.reo_round_end.is_some_and(|e| cum_ack < e) {
            return;
        }
        self.reo_wnd_mult = (self.reo_wnd_mult + 1).min(MAX_REO_WND_MULT);
        self.stats.reo_wnd_mult = self.reo_wnd_mult;
        self.reo_wnd_persist = REO_WND_PERSIST;
        self.reo_round_end = Some(self.highest_end().unwrap_or(cum_ack));
    }

    fn update_rack(
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

    /// Process a cumulative ACK up to `acked`, SACK blocks and a D-SACK block (stream offsets;
    /// the caller has checked them against the send window).
    pub fn on_ack(
        &mut self,
        acked: u64,
        sacks: &[(u64, u64)],
        dsack: Option<(u64, u64)>,
        tsecr: Option<u32>,
        now: Duration,
        min_rtt: Option<Duration>,
    ) -> AckResult {
        let mut r = AckResult::default();
        while let Some(front) = self.sent.front() {
            if front.end > acked {
                break;
            }
            self.stats.scoreboard_visits += 1;
            let s = self.sent.pop_front().expect("front exists");
            self.base += 1;
            r.newly_acked_bytes += s.len();
            if !s.sacked && !s.lost {
                self.pipe -= s.len();
            }
            if s.lost && !s.sacked && !s.timed_out {
                r.false_losses += 1;
                self.measure_reordering(now.saturating_sub(s.xmit));
            }
            if !s.sacked {
                self.update_rack(s.xmit, s.end, s.retransmitted, now, min_rtt);
                if !s.retransmitted {
                    r.rtt_sample = Some(now.saturating_sub(s.xmit));
                }
            }
            if s.retransmitted && tsecr.is_some_and(|e| tsval_before(e, s.tsval)) {
                // Eifel (RFC 3522): the ACK echoes the original's timestamp.
                r.spurious += 1;
                if !self.prove_spurious(s.start, s.end) {
                    self.stats.spurious_retransmits += 1;
                }
            }
        }
        self.on_sack_blocks(sacks, now, min_rtt, &mut r);
        if let Some((l, rt)) = dsack {
            if self.prove_spurious(l, rt) {
                self.stats.dsack_spurious += 1;
                r.spurious += 1;
            }
        }
        if r.false_losses > 0 {
            self.stats.false_losses += u64::from(r.false_losses);
            if let Some(e) = self.episode.as_mut() {
                e.false_losses += r.false_losses;
            }
        }
        // RFC 8985 §6.2 step 4: any D-SACK (and an Eifel proof, or a segment declared lost
        // arriving by itself: the same signal) means the reorder window was too small.
        if r.spurious > 0 || r.false_losses > 0 || dsack.is_some() {
            self.widen_reo_wnd(acked);
            r.undo = self.try_undo();
        }
        r
    }

    fn on_sack_blocks(
        &mut self,
        sacks: &[(u64, u64)],
        now: Duration,
        min_rtt: Option<Duration>,
        r: &mut AckResult,
    ) {
        for &(l, rgt) in sacks {
            // Skip what the previous ACK's blocks already covered: a block repeated by every
            // ACK of a long episode is processed once, not once per ACK.
            let mut l = l;
            for &(cl, cr) in &self.sack_cache {
                if cl <= l && l < cr {
                    l = cr;
                }
            }
            if l >= rgt {
                continue;
            }
            let from = self.sent.partition_point(|s| s.end <= l);
            for i in from..self.sent.len() {
                self.stats.scoreboard_visits += 1;
                let s = &self.sent[i];
                if s.start >= rgt {
                    break;
                }
                if s.sacked || s.start < l || s.end > rgt {
                    continue;
                }
                let (xmit, end, retransmitted, lost, timed_out, len) =
                    (s.xmit, s.end, s.retransmitted, s.lost, s.timed_out, s.len());
                if !lost {
                    self.pipe -= len;
                }
                if lost && !timed_out {
                    r.false_losses += 1;
                    self.measure_reordering(now.saturating_sub(xmit));
                }
                self.sent[i].sacked = true;
                self.sent[i].lost = false;
                self.sent[i].timed_out = false;
                self.update_rack(xmit, end, retransmitted, now, min_rtt);
                if !retransmitted {
                    r.rtt_sample = Some(now.saturating_sub(xmit));
                }
            }
        }
        self.sack_cache.clear();
        self.sack_cache.extend_from_slice(sacks);
    }

    /// A segment declared lost was delivered anyway, `rtt` after it was sent: it was late by
    /// about `rtt - rack_rtt`, so the reorder window must be at least that (with a quarter
    /// more for margin). RFC 8985 grows the window in steps of min_rtt/4, one per round trip;
    /// on a sprayed path whose delay spread is several of those steps, each step short of it
    /// cost another round of spurious retransmissions.
    fn measure_reordering(&mut self, rtt: Duration) {
        let late = rtt.saturating_sub(self.rack_rtt);
        self.reo_measured = self.reo_measured.max(late + late / 4).min(MAX_REO_MEASURED);
        self.reo_wnd_persist = REO_WND_PERSIST;
        self.stats.reo_measured = self.reo_measured;
    }

    fn reo_wnd(&self, min_rtt: Option<Duration>, srtt: Option<Duration>) -> Duration {
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

    /// RTO: everything outstanding is presumed lost (RFC 8985 §6.3 / RFC 6298 §5.4).
    pub fn on_rto(&mut self) {
        self.lost_q.clear();
        self.by_time.clear();
        self.sack_cache.clear();
        for (i, s) in self.sent.iter_mut().enumerate() {
            // RFC 2018 §8 / RFC 6675 §5.1: after a timeout, forget SACK information. A receiver
            // may renege, and a forged SACK block must not pin a segment as "delivered" forever
            // (it would never be retransmitted: the connection would stall until it timed out).
            s.sacked = false;
            s.lost = true;
            s.timed_out = true;
            self.lost_q.push_back(self.base + i as u64);
        }
        self.pipe = 0;
        self.stats.rto_losses += 1;
    }
}

impl Default for Recovery {
    fn default() -> Self {
        Recovery::new()
    }
}

/// RFC 7323 timestamp ordering (mod 2^32).
pub fn tsval_before(a: u32, b: u32) -> bool {
    a != b && b.wrapping_sub(a) < 0x8000_0000
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// A scoreboard with `n` segments of 100 bytes from offset 0, all sent at `at`.
    fn sent_at(n: u64, at: Duration) -> Recovery {
        let mut r = Recovery::new();
        for i in 0..n {
            r.on_send(i * 100, (i + 1) * 100, at, 0);
        }
        r
    }

    #[test]
    fn reordering_within_window_is_not_loss() {
        let mut r = Recovery::new();
        for i in 0..4u64 {
            r.on_send(i * 100, (i + 1) * 100, ms(i), i as u32);
        }
        // Segment 0 delayed; 1 SACKed at t=10 (RTT 9 ms).
        r.on_ack(0, &[(100, 200)], None, None, ms(10), Some(ms(9)));
        let (lost, timer) = r.detect_losses(ms(10), Some(ms(9)), Some(ms(9)));
        assert_eq!(lost, 0);
        // Deadline: xmit 0 + rack_rtt 9 + reo 9/4.
        assert_eq!(timer, Some(ms(9) + ms(9) / 4));
        // It arrives before the deadline: nothing retransmitted.
        let a = r.on_ack(200, &[], None, None, ms(11), Some(ms(9)));
        assert_eq!(a.newly_acked_bytes, 200);
        assert_eq!(r.stats.retransmits, 0);
    }

    /// A segment declared lost and then delivered, unretransmitted, 4 ms late on a path with a
    /// 1 ms SRTT: the window grows past SRTT to what was measured, so the next segment held
    /// back as long is not declared lost (RFC 8985's cap at SRTT would declare it lost at
    /// 12 ms). A lateness past 100 ms is a stall, not reordering: the window stops there.
    #[test]
    fn measured_reordering_longer_than_srtt_widens_the_window_past_it() {
        let mut r = Recovery::new();
        let srtt = Some(ms(1));
        r.on_send(0, 100, ms(0), 0);
        r.on_send(100, 200, ms(0), 0);
        r.on_ack(0, &[(100, 200)], None, None, ms(1), Some(ms(1)));
        assert_eq!(r.detect_losses(ms(2), Some(ms(1)), srtt).0, 100);
        r.on_ack(200, &[], None, None, ms(5), Some(ms(1)));
        assert_eq!(r.stats.false_losses, 1);
        assert_eq!(r.stats.reo_measured, ms(5), "4 ms late, and a quarter more");
        r.on_send(200, 300, ms(10), 10);
        r.on_send(300, 400, ms(10), 10);
        r.on_ack(200, &[(300, 400)], None, None, ms(11), Some(ms(1)));
        let (lost, timer) = r.detect_losses(ms(14), Some(ms(1)), srtt);
        assert_eq!(lost, 0);
        assert_eq!(timer, Some(ms(10) + ms(1) + ms(5)));
        // A segment delivered a second after it was declared lost.
        r.on_send(400, 500, ms(20), 20);
        r.on_send(500, 600, ms(20), 20);
        r.on_ack(300, &[(500, 600)], None, None, ms(21), Some(ms(1)));
        assert_eq!(r.detect_losses(ms(30), Some(ms(1)), srtt).0, 100);
        r.on_ack(600, &[], None, None, ms(1020), Some(ms(1)));
        assert_eq!(r.stats.reo_measured, MAX_REO_MEASURED);
    }

    #[test]
    fn overdue_segment_is_lost_and_pipe_accounts() {
        let mut r = Recovery::new();
        r.on_send(0, 100, ms(0), 0);
        r.on_send(100, 200, ms(1), 1);
        assert_eq!(r.pipe(), 200);
        r.on_ack(0, &[(100, 200)], None, None, ms(10), Some(ms(9)));
        assert_eq!(r.pipe(), 100);
        let (lost, _) = r.detect_losses(ms(20), Some(ms(9)), Some(ms(9)));
        assert_eq!(lost, 100);
        assert_eq!(r.pipe(), 0);
        assert_eq!(r.next_lost(), Some((0, 100)));
        r.on_retransmit(0, ms(20), 20);
        assert_eq!(r.pipe(), 100);
        // ACK echoing the original's timestamp: the retransmission was spurious.
        let a = r.on_ack(200, &[], None, Some(0), ms(21), Some(ms(9)));
        assert_eq!(a.spurious, 1);
        assert_eq!(r.pipe(), 0);
        assert!(r.is_empty());
    }

    #[test]
    fn rto_forgets_sack_so_reneged_or_forged_blocks_are_retransmitted() {
        let mut r = Recovery::new();
        r.on_send(0, 100, ms(0), 0);
        r.on_send(100, 200, ms(0), 0);
        r.on_send(200, 300, ms(0), 0);
        // A SACK for [100, 200) that the receiver never really kept (reneged or forged).
        r.on_ack(0, &[(100, 200)], None, None, ms(1), None);
        r.on_rto();
        let mut resent = Vec::new();
        while let Some((s, _)) = r.next_lost() {
            r.on_retransmit(s, ms(300), 300);
            resent.push(s);
        }
        assert_eq!(resent, vec![0, 100, 200]);
        assert_eq!(r.pipe(), 300);
    }

    /// After an RTO the segments it presumed lost are delivered (they arrived long before; the
    /// timeout forgot their SACKs). That is not reordering: the reorder window stays as it
    /// was, and the next loss is declared a round trip after it, as before the timeout. It
    /// used to count each of them as a segment 200 ms late, so the window went to 100 ms for
    /// the next 16 episodes (on the relay at 1 % loss, 16 stalls of about 90 ms after each
    /// RTO), and RACK's RTT became their age.
    #[test]
    fn segments_an_rto_presumed_lost_are_no_reordering_when_they_turn_out_delivered() {
        let mut r = sent_at(10, ms(0));
        let rtt = Some(ms(1));
        // [0, 100) lost, the rest SACKed; then the RTO (its retransmission lost too).
        r.on_ack(0, &[(100, 1000)], None, None, ms(1), rtt);
        r.on_rto();
        r.start_episode();
        let (s, _) = r.next_lost().expect("everything is presumed lost");
        assert_eq!(s, 0);
        r.on_retransmit(0, ms(200), 200);
        // The receiver still had [100, 1000): one cumulative ACK covers it all.
        let a = r.on_ack(1000, &[], None, Some(200), ms(201), rtt);
        assert_eq!(a.false_losses, 0, "{a:?}");
        assert!(!a.undo, "{a:?}");
        assert_eq!(r.stats.false_losses, 0);
        assert_eq!(r.stats.reo_measured, Duration::ZERO);
        assert!(r.is_empty());
        // The next loss: [1000, 1100) lost, a later segment SACKed 1 ms after they were sent.
        r.on_send(1000, 1100, ms(210), 210);
        r.on_send(1100, 1200, ms(210), 210);
        r.on_ack(1000, &[(1100, 1200)], None, None, ms(211), rtt);
        let (lost, _) = r.detect_losses(ms(213), rtt, rtt);
        assert_eq!(
            lost, 100,
            "declared after RTT + min_rtt/4, not 100 ms later"
        );
    }

    /// RACK's RTT is that of the most recently sent segment delivered (RFC 8985 §6.2 step 2,
    /// which takes them in transmission order): a cumulative ACK that also covers an old
    /// segment, whose own ACK was lost, does not make it the old segment's age.
    #[test]
    fn rack_rtt_follows_the_newest_segment_delivered_not_the_oldest() {
        let mut r = sent_at(3, ms(0));
        let rtt = Some(ms(1));
        r.on_send(300, 400, ms(49), 49);
        // [0, 100) is retransmitted at 50 ms; one ACK at 51 ms covers the retransmission and
        // [100, 200), whose own ACK was lost (sent at 0: 51 ms old).
        r.on_retransmit(0, ms(50), 50);
        r.on_ack(200, &[], None, None, ms(51), rtt);
        // RACK RTT 1 ms: [200, 300) (sent at 0) and [300, 400) (sent at 49, before the
        // delivered retransmission) are overdue. With RACK RTT 51 ms neither would be.
        assert_eq!(r.detect_losses(ms(51), rtt, rtt), (200, None));
    }

    /// Per-ACK cost does not grow with the window: 20,000 segments in flight, the first one
    /// lost, and every later ACK repeating a growing SACK block (as a receiver does for each
    /// arrival behind one hole). Scanning the scoreboard from the front on each ACK cost about
    /// 10,000 entries per ACK here; the transmission-ordered queue and the SACK cache make it
    /// a few.
    #[test]
    fn per_ack_work_does_not_grow_with_the_window() {
        let mut r = Recovery::new();
        let n = 20_000u64;
        for i in 0..n {
            r.on_send(i * 100, (i + 1) * 100, Duration::from_micros(i), 0);
        }
        let rtt = Some(ms(1));
        let before = r.stats.scoreboard_visits;
        for k in 1..n {
            let now = ms(1) + Duration::from_micros(k);
            r.on_ack(0, &[(100, (k + 1) * 100)], None, None, now, rtt);
            r.detect_losses(now, rtt, rtt);
        }
        let per_ack = (r.stats.scoreboard_visits - before) as f64 / (n - 1) as f64;
        assert!(per_ack < 8.0, "{per_ack} entries per ACK");
        assert_eq!(r.next_lost(), Some((0, 100)), "the hole is found lost");
        assert_eq!(r.pipe(), 0);
    }

    /// D-SACK of a retransmission proves it spurious; when every retransmission of the
    /// episode is proven, the caller is told to undo (also after recovery ended: the proof
    /// typically arrives just after the late original ended it).
    #[test]
    fn dsack_of_every_retransmission_undoes_the_episode() {
        let mut r = Recovery::new();
        for i in 0..4u64 {
            r.on_send(i * 100, (i + 1) * 100, ms(0), 0);
        }
        r.on_ack(0, &[(200, 400)], None, None, ms(10), Some(ms(9)));
        let (lost, _) = r.detect_losses(ms(20), Some(ms(9)), Some(ms(9)));
        assert_eq!(lost, 200);
        r.start_episode();
        while let Some((s, _)) = r.next_lost() {
            r.on_retransmit(s, ms(20), 20);
        }
        // The originals arrive: cumulative ACK, recovery over; no undo yet.
        let a = r.on_ack(400, &[], None, None, ms(21), Some(ms(9)));
        assert!(!a.undo);
        r.end_episode();
        let a = r.on_ack(400, &[], Some((0, 100)), None, ms(22), Some(ms(9)));
        assert!(!a.undo && a.spurious == 1, "{a:?}");
        let a = r.on_ack(400, &[], Some((100, 200)), None, ms(23), Some(ms(9)));
        assert!(a.undo, "{a:?}");
        assert_eq!(r.stats.dsack_spurious, 2);
        // A D-SACK of something never retransmitted proves nothing.
        let a = r.on_ack(400, &[], Some((200, 300)), None, ms(24), Some(ms(9)));
        assert!(!a.undo && a.spurious == 0);
    }

    /// Reordering deeper than the reorder window: a segment is declared lost (the caller
    /// reduces cwnd) and then arrives before its retransmission went out. The episode's only
    /// "loss" was false: undo, and widen the window; a second, real loss is not undone.
    #[test]
    fn a_segment_declared_lost_that_arrives_by_itself_undoes_the_episode() {
        let mut r = Recovery::new();
        for i in 0..4u64 {
            r.on_send(i * 100, (i + 1) * 100, ms(i), 0);
        }
        r.on_ack(0, &[(100, 400)], None, None, ms(10), Some(ms(9)));
        let (lost, _) = r.detect_losses(ms(20), Some(ms(9)), Some(ms(9)));
        assert_eq!(lost, 100);
        r.start_episode();
        let a = r.on_ack(400, &[], None, None, ms(21), Some(ms(9)));
        assert_eq!(a.false_losses, 1);
        assert!(a.undo, "{a:?}");
        assert_eq!(r.stats.reo_wnd_mult, 2);

        // Two segments declared lost, one arrives, the other does not: no undo.
        for i in 4..8u64 {
            r.on_send(i * 100, (i + 1) * 100, ms(30 + i), 0);
        }
        r.on_ack(400, &[(600, 800)], None, None, ms(50), Some(ms(9)));
        let (lost, _) = r.detect_losses(ms(80), Some(ms(9)), Some(ms(9)));
        assert_eq!(lost, 200);
        r.start_episode();
        let a = r.on_ack(500, &[(600, 800)], None, None, ms(81), Some(ms(9)));
        assert_eq!(a.false_losses, 1);
        assert!(!a.undo, "[500, 600) is still lost: {a:?}");
    }
}
