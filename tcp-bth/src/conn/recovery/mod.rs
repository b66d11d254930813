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
//!
//! The scoreboard is here; RACK's reorder window and loss detection are in `rack.rs`, the
//! loss episode and its undo in `episode.rs`.

mod episode;
use episode::Episode;
mod rack;

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Retransmitted ranges remembered for D-SACK matching. Past this many in one episode the
/// oldest are forgotten, and the episode can no longer be proven wholly spurious.
const MAX_RETRANSMITTED: usize = 4096;

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

/// Loss recovery counters of one connection's send side ([`Connection::recovery_stats`]):
/// counts that are never reset, and two levels of the reorder window (`reo_wnd_mult`,
/// `reo_measured`) that decay.
///
/// [`Connection::recovery_stats`]: crate::Connection::recovery_stats
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RecoveryStats {
    /// Data segments sent, retransmissions included (a super-segment counts as the segments
    /// it stands for; pure ACKs, SYN and FIN not at all).
    pub segments_sent: u64,
    /// Segments sent again: RACK and RTO repairs, tail loss probes that resent the tail, and
    /// segments cut to a lowered path MTU.
    pub retransmits: u64,
    /// Retransmissions proven unneeded: the ACK echoed the original's TSval (Eifel, RFC
    /// 3522) or a D-SACK named them (RFC 2883).
    pub spurious_retransmits: u64,
    /// RACK loss detections that marked at least one segment lost (events, not segments).
    pub rack_losses: u64,
    /// RTOs that fired with data outstanding (each marks everything outstanding lost).
    pub rto_losses: u64,
    /// TLP timer expiries with data in flight (RFC 8985 §7.3), each arming a probe: new data,
    /// or the last segment again (then also in `retransmits`).
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
    #[cfg_attr(
        feature = "serde",
        serde(rename = "reo_measured_us", serialize_with = "serialize_micros")
    )]
    pub reo_measured: Duration,
}

/// A duration as whole microseconds, as every other time in the JSON outputs.
#[cfg(feature = "serde")]
fn serialize_micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// One line: segments sent, retransmitted (spurious), RACK loss detections, RTOs, tail loss
/// probes (what `bth-perf` prints after `recovery:`).
impl std::fmt::Display for RecoveryStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} data segments sent, {} retransmitted ({} spurious); {} RACK loss detections, \
             {} RTOs, {} tail loss probes",
            self.segments_sent,
            self.retransmits,
            self.spurious_retransmits,
            self.rack_losses,
            self.rto_losses,
            self.tlp_probes
        )
    }
}

impl std::ops::AddAssign for RecoveryStats {
    /// Sums the counters (the stats of several connections). `reo_wnd_mult` and
    /// `reo_measured` are levels, not counts: the larger of the two is kept, as a sum of
    /// them would describe no connection. Destructured without `..`, so a field added to
    /// `RecoveryStats` fails to compile here until it is combined too.
    fn add_assign(&mut self, o: RecoveryStats) {
        let RecoveryStats {
            segments_sent,
            retransmits,
            spurious_retransmits,
            rack_losses,
            rto_losses,
            tlp_probes,
            dsack_spurious,
            scoreboard_visits,
            reo_wnd_mult,
            false_losses,
            reo_measured,
        } = o;
        self.segments_sent += segments_sent;
        self.retransmits += retransmits;
        self.spurious_retransmits += spurious_retransmits;
        self.rack_losses += rack_losses;
        self.rto_losses += rto_losses;
        self.tlp_probes += tlp_probes;
        self.dsack_spurious += dsack_spurious;
        self.scoreboard_visits += scoreboard_visits;
        self.reo_wnd_mult = self.reo_wnd_mult.max(reo_wnd_mult);
        self.false_losses += false_losses;
        self.reo_measured = self.reo_measured.max(reo_measured);
    }
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
        // A segment acknowledged in part (a receiver that trimmed it to its window, in plain
        // mode) keeps only its unacknowledged tail, as Linux's `tcp_trim_head` does: kept
        // whole, its retransmission started below SND.UNA, where the send queue holds no
        // bytes any more (found by the livelock detector).
        if let Some(front) = self.sent.front_mut() {
            if front.start < acked {
                let cut = acked - front.start;
                front.start = acked;
                r.newly_acked_bytes += cut;
                if !front.sacked && !front.lost {
                    self.pipe -= cut;
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

    /// The path's MTU fell (ICMP packet too big): every segment not SACKed that is longer than
    /// `max` bytes was dropped for its size. Each is cut into pieces of at most `max`, marked
    /// lost, so the pieces are resent next (Linux's `tcp_simple_retransmit`); nothing here is
    /// a congestion signal. Returns the bytes cut.
    ///
    /// Indexes are positions in `sent` for a segment's whole life, and cutting shifts them, so
    /// the queues that hold indexes are rebuilt: rare (once per MTU drop), and linear in the
    /// segments outstanding.
    pub fn resegment(&mut self, max: u64) -> u64 {
        let too_long = |s: &Sent| !s.sacked && s.len() > max;
        if max == 0 || !self.sent.iter().any(too_long) {
            return 0;
        }
        let mut cut = 0;
        let old = std::mem::take(&mut self.sent);
        for s in old {
            if !too_long(&s) {
                self.sent.push_back(s);
                continue;
            }
            if !s.lost {
                self.pipe -= s.len();
            }
            cut += s.len();
            let mut at = s.start;
            while at < s.end {
                let end = (at + max).min(s.end);
                self.sent.push_back(Sent {
                    start: at,
                    end,
                    lost: true,
                    ..s.clone()
                });
                at = end;
            }
        }
        let base = self.base;
        let mut by_time: Vec<(u64, Duration)> = (self.sent.iter().enumerate())
            .filter(|(_, s)| !s.sacked && !s.lost)
            .map(|(i, s)| (base + i as u64, s.xmit))
            .collect();
        by_time.sort_by_key(|&(idx, xmit)| (xmit, idx));
        self.by_time = by_time.into();
        self.lost_q = (self.sent.iter().enumerate())
            .filter(|(_, s)| s.lost && !s.sacked)
            .map(|(i, _)| base + i as u64)
            .collect();
        self.sack_cache.clear();
        cut
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
mod tests;
