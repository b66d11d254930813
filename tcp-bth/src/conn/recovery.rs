//! Send-side scoreboard with SACK (RFC 2018/6675 pipe) and RACK-TLP loss detection (RFC 8985).
//!
//! Loss is inferred from time, not from duplicate-ACK counts: a segment is lost when a segment
//! sent after it has been delivered and more than RTT + reorder window has passed since it was
//! sent. That is what keeps reordering (the normal case on multipath AI fabrics) from causing
//! spurious retransmissions.

use std::collections::VecDeque;
use std::time::Duration;

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
    /// A retransmitted segment was acknowledged by an ACK that echoes a timestamp older than
    /// the retransmission: the original arrived, the retransmission was spurious (Eifel).
    pub spurious: u32,
}

#[derive(Debug)]
pub struct Recovery {
    sent: VecDeque<Sent>,
    /// RACK state: the most recently sent segment known delivered.
    rack_xmit: Option<Duration>,
    rack_end: u64,
    rack_rtt: Duration,
    reo_wnd_mult: u32,
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
}

impl Recovery {
    pub fn new() -> Recovery {
        Recovery {
            sent: VecDeque::new(),
            rack_xmit: None,
            rack_end: 0,
            rack_rtt: Duration::ZERO,
            reo_wnd_mult: 1,
            pipe: 0,
            stats: RecoveryStats::default(),
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

    /// Record a first transmission of `[start, end)`.
    pub fn on_send(&mut self, start: u64, end: u64, now: Duration, tsval: u32) {
        self.stats.segments_sent += 1;
        self.pipe += end - start;
        self.sent.push_back(Sent {
            start,
            end,
            xmit: now,
            tsval,
            retransmitted: false,
            sacked: false,
            lost: false,
        });
    }

    /// The first segment marked lost, to retransmit.
    pub fn next_lost(&self) -> Option<(u64, u64)> {
        self.sent
            .iter()
            .find(|s| s.lost && !s.sacked)
            .map(|s| (s.start, s.end))
    }

    /// The last segment sent (the tail loss probe retransmits it when there is no new data).
    pub fn last(&self) -> Option<(u64, u64)> {
        self.sent
            .iter()
            .rev()
            .find(|s| !s.sacked)
            .map(|s| (s.start, s.end))
    }

    fn find(&mut self, start: u64) -> Option<&mut Sent> {
        let i = self.sent.partition_point(|s| s.start < start);
        self.sent.get_mut(i).filter(|s| s.start == start)
    }

    /// Record a retransmission of the segment starting at `start`.
    pub fn on_retransmit(&mut self, start: u64, now: Duration, tsval: u32) {
        let mut add = 0;
        if let Some(s) = self.find(start) {
            if s.lost {
                add = s.len();
            }
            s.lost = false;
            s.retransmitted = true;
            s.xmit = now;
            s.tsval = tsval;
        }
        self.pipe += add;
        self.stats.retransmits += 1;
        self.stats.segments_sent += 1;
    }

    fn update_rack(&mut self, s: &Sent, now: Duration, min_rtt: Option<Duration>) {
        let rtt = now.saturating_sub(s.xmit);
        // RFC 8985 §6.2 step 2: a retransmitted segment's ACK may be for the original; skip
        // samples shorter than the minimum RTT.
        if s.retransmitted && min_rtt.is_some_and(|m| rtt < m) {
            return;
        }
        self.rack_rtt = rtt;
        let newer = match self.rack_xmit {
            None => true,
            Some(x) => s.xmit > x || (s.xmit == x && s.end > self.rack_end),
        };
        if newer {
            self.rack_xmit = Some(s.xmit);
            self.rack_end = s.end;
        }
    }

    /// Process a cumulative ACK up to `acked` and SACK blocks (stream offsets).
    pub fn on_ack(
        &mut self,
        acked: u64,
        sacks: &[(u64, u64)],
        tsecr: Option<u32>,
        now: Duration,
        min_rtt: Option<Duration>,
    ) -> AckResult {
        let mut r = AckResult::default();
        while let Some(front) = self.sent.front() {
            if front.end > acked {
                break;
            }
            let s = self.sent.pop_front().expect("front exists");
            r.newly_acked_bytes += s.len();
            if !s.sacked && !s.lost {
                self.pipe -= s.len();
            }
            if !s.sacked {
                self.update_rack(&s, now, min_rtt);
                if !s.retransmitted {
                    r.rtt_sample = Some(now.saturating_sub(s.xmit));
                }
            }
            if s.retransmitted && tsecr.is_some_and(|e| tsval_before(e, s.tsval)) {
                r.spurious += 1;
            }
        }
        for &(l, rgt) in sacks {
            let from = self.sent.partition_point(|s| s.end <= l);
            for i in from..self.sent.len() {
                let s = &self.sent[i];
                if s.start >= rgt {
                    break;
                }
                if s.sacked || s.start < l || s.end > rgt {
                    continue;
                }
                let s = s.clone();
                if !s.lost {
                    self.pipe -= s.len();
                }
                self.sent[i].sacked = true;
                self.sent[i].lost = false;
                self.update_rack(&s, now, min_rtt);
                if !s.retransmitted {
                    r.rtt_sample = Some(now.saturating_sub(s.xmit));
                }
            }
        }
        if r.spurious > 0 {
            self.stats.spurious_retransmits += u64::from(r.spurious);
            // RFC 8985 §6.2 step 4 adapts on DSACK; a timestamp-detected spurious
            // retransmission is the same signal: widen the reorder window.
            self.reo_wnd_mult = (self.reo_wnd_mult + 1).min(16);
        }
        r
    }

    fn reo_wnd(&self, min_rtt: Option<Duration>, srtt: Option<Duration>) -> Duration {
        let base = min_rtt.unwrap_or(Duration::ZERO) / 4 * self.reo_wnd_mult;
        match srtt {
            Some(s) => base.min(s),
            None => base,
        }
    }

    /// RACK loss detection. Returns newly lost bytes and, if some segments are not yet overdue,
    /// when to check again.
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
        let mut timer: Option<Duration> = None;
        for s in self.sent.iter_mut() {
            if s.sacked || s.lost {
                continue;
            }
            let sent_before = s.xmit < rack_xmit || (s.xmit == rack_xmit && s.end < self.rack_end);
            if !sent_before {
                continue;
            }
            let deadline = s.xmit + self.rack_rtt + reo;
            if now >= deadline {
                s.lost = true;
                lost += s.end - s.start;
            } else {
                timer = Some(timer.map_or(deadline, |t| t.min(deadline)));
            }
        }
        self.pipe -= lost;
        self.stats.rack_losses += u64::from(lost > 0);
        (lost, timer)
    }

    /// RTO: everything outstanding is presumed lost (RFC 8985 §6.3 / RFC 6298 §5.4).
    pub fn on_rto(&mut self) {
        for s in self.sent.iter_mut() {
            // RFC 2018 §8 / RFC 6675 §5.1: after a timeout, forget SACK information. A receiver
            // may renege, and a forged SACK block must not pin a segment as "delivered" forever
            // (it would never be retransmitted: the connection would stall until it timed out).
            s.sacked = false;
            s.lost = true;
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

    #[test]
    fn reordering_within_window_is_not_loss() {
        let mut r = Recovery::new();
        for i in 0..4u64 {
            r.on_send(i * 100, (i + 1) * 100, ms(i), i as u32);
        }
        // Segment 0 delayed; 1 SACKed at t=10 (RTT 9 ms).
        r.on_ack(0, &[(100, 200)], None, ms(10), Some(ms(9)));
        let (lost, timer) = r.detect_losses(ms(10), Some(ms(9)), Some(ms(9)));
        assert_eq!(lost, 0);
        // Deadline: xmit 0 + rack_rtt 9 + reo 9/4.
        assert_eq!(timer, Some(ms(9) + ms(9) / 4));
        // It arrives before the deadline: nothing retransmitted.
        let a = r.on_ack(200, &[], None, ms(11), Some(ms(9)));
        assert_eq!(a.newly_acked_bytes, 200);
        assert_eq!(r.stats.retransmits, 0);
    }

    #[test]
    fn overdue_segment_is_lost_and_pipe_accounts() {
        let mut r = Recovery::new();
        r.on_send(0, 100, ms(0), 0);
        r.on_send(100, 200, ms(1), 1);
        assert_eq!(r.pipe(), 200);
        r.on_ack(0, &[(100, 200)], None, ms(10), Some(ms(9)));
        assert_eq!(r.pipe(), 100);
        let (lost, _) = r.detect_losses(ms(20), Some(ms(9)), Some(ms(9)));
        assert_eq!(lost, 100);
        assert_eq!(r.pipe(), 0);
        assert_eq!(r.next_lost(), Some((0, 100)));
        r.on_retransmit(0, ms(20), 20);
        assert_eq!(r.pipe(), 100);
        // ACK echoing the original's timestamp: the retransmission was spurious.
        let a = r.on_ack(200, &[], Some(0), ms(21), Some(ms(9)));
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
        r.on_ack(0, &[(100, 200)], None, ms(1), None);
        r.on_rto();
        let mut resent = Vec::new();
        while let Some((s, _)) = r.next_lost() {
            r.on_retransmit(s, ms(300), 300);
            resent.push(s);
        }
        assert_eq!(resent, vec![0, 100, 200]);
        assert_eq!(r.pipe(), 300);
    }
}
