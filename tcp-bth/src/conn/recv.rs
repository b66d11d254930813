//! The receive side's sequence space: what has arrived (the one record of it, in stream
//! offsets, for both receive paths: the cumulative point and the ranges beyond it that SACK
//! reports), the peer's FIN, and timestamps (ours and the peer's, for PAWS and RTTM).

use super::*;
use crate::ranges::RangeSet;
use std::collections::VecDeque;

/// First-reported ranges remembered: the blocks after the first are at most three (two
/// after a D-SACK block), and one more covers a range the next first block repeats.
const REPORTED: usize = 4;

/// How long `ts_recent` stays comparable: 2^31 µs, half the TSval cycle at 1 µs per tick.
const PAWS_IDLE: Duration = Duration::from_micros(1 << 31);

pub(super) struct RecvState {
    pub irs: u32,
    /// Stream offsets: 0 is the peer's first data byte. Everything below `nxt` has arrived.
    pub nxt: u64,
    /// Ranges at or beyond `nxt` that have arrived (placed, or stored in plain mode).
    pub ooo: RangeSet,
    /// Where the most recent out-of-order arrival starts (its range is SACKed first).
    pub latest: Option<u64>,
    /// Starts of the ranges our recent ACKs reported first, most recent first: the SACK
    /// blocks after the first repeat these (RFC 2018 §4), so a range whose first reports were
    /// lost is still reported by the ACKs that follow.
    pub reported: VecDeque<u64>,
    /// Offset of the peer's FIN, once seen.
    pub peer_fin: Option<u64>,
    /// The furthest right edge of the window we advertised (stream offset): later
    /// advertisements never fall short of it (`Connection::advertise_window`).
    pub adv_edge: u64,
    /// When an acceptable segment last arrived (keepalive, `liveness.rs`).
    pub heard: Duration,
    /// Our share of the receiving device's queue, which bounds the window we advertise
    /// (`Connection::set_rx_share`); None: `Config::recv_window` alone.
    pub device: Option<super::RxShare>,
    /// Payload per data packet that arrived, a moving average (7/8 old, 1/8 new): how much
    /// one packet in the receiving device's queue holds when it hands over super-segments
    /// whole, which a relay that cuts them makes far less than 64 KiB.
    pub packet_bytes: u32,
    pub ts_recent: Option<u32>,
    /// When `ts_recent` was last set (RFC 7323 §5.5 idle rule).
    pub ts_recent_at: Duration,
    /// Added to our TSval clock (`isn::ts_offset`).
    pub ts_offset: u32,
}

impl RecvState {
    /// A data packet of `len` payload bytes arrived ([`packet_bytes`](Self::packet_bytes)).
    pub fn note_packet(&mut self, len: usize) {
        let len = len.min(u16::MAX as usize) as u32;
        self.packet_bytes = (self.packet_bytes * 7 + len) / 8;
    }

    pub fn new(ts_offset: u32) -> RecvState {
        RecvState {
            irs: 0,
            nxt: 0,
            ooo: RangeSet::new(),
            latest: None,
            reported: VecDeque::with_capacity(REPORTED + 1),
            peer_fin: None,
            adv_edge: 0,
            heard: Duration::ZERO,
            device: None,
            packet_bytes: u16::MAX as u32,
            ts_recent: None,
            ts_recent_at: Duration::ZERO,
            ts_offset,
        }
    }

    pub fn seq_of(&self, off: u64) -> u32 {
        self.irs.wrapping_add(1).wrapping_add(off as u32)
    }

    /// Stream offset of a received sequence number near `nxt`.
    pub fn off_of(&self, seq: u32) -> i64 {
        self.nxt as i64 + i64::from(seq.wrapping_sub(self.seq_of(self.nxt)) as i32)
    }

    /// The peer's FIN has been consumed.
    pub fn peer_finished(&self) -> bool {
        self.peer_fin.is_some_and(|f| self.nxt > f)
    }

    /// Record `[start, end)` as arrived and advance the cumulative point over it.
    pub fn mark(&mut self, start: u64, end: u64) {
        let start = start.max(self.nxt);
        if end <= start {
            return;
        }
        if start == self.nxt && self.ooo.is_empty() {
            // In order with nothing held beyond: the usual segment, without a range set
            // insert and the removal at the cumulative point that would follow it.
            self.nxt = end;
            self.latest = Some(start);
            return;
        }
        self.ooo.insert(start, end);
        self.latest = Some(start);
        if let Some(e) = self.ooo.take_from(self.nxt) {
            self.nxt = e;
        }
    }

    /// Our ACK reported the out-of-order range `[start, end)` first: it moves to the front,
    /// and entries now inside it (the same range reported before, or ranges that merged into
    /// it) go, so each remembered entry is a range of its own.
    pub fn note_reported(&mut self, (start, end): (u64, u64)) {
        self.reported.retain(|&at| at < start || at >= end);
        self.reported.push_front(start);
        self.reported.truncate(REPORTED);
    }

    /// Data beyond a hole is held: `mark` keeps only ranges at or beyond `nxt` (it advances
    /// `nxt` over the one that starts there), so any range left is past a hole.
    pub fn hole_open(&self) -> bool {
        !self.ooo.is_empty()
    }

    /// Would recording `[start, end)` open a new range when the table holds `max` already?
    pub fn table_full(&self, start: u64, end: u64, max: usize) -> bool {
        self.ooo.len() >= max && self.ooo.would_fragment(start, end)
    }

    pub fn tsval(&self, now: Duration) -> u32 {
        // 1 µs ticks (RFC 7323 recommends 1 ms..1 s but only requires that the clock not wrap
        // within an MSL, which 71.6 minutes satisfies): a retransmission and its original get
        // different TSvals even at datacenter RTTs, which Eifel-style spurious-retransmission
        // detection (recovery/rack.rs) needs. The price is a TSval cycle of 71.6 minutes, which the
        // PAWS idle rule (`ts_recent_valid`) accounts for.
        (now.as_micros() as u32).wrapping_add(self.ts_offset)
    }

    pub fn set_ts_recent(&mut self, now: Duration, tsval: Option<u32>) {
        if let Some(v) = tsval {
            self.ts_recent = Some(v);
            self.ts_recent_at = now;
        }
    }

    /// `ts_recent`, unless it is too old to compare with (RFC 7323 §5.5). Our TSval clock ticks
    /// every microsecond, so a peer's TSval moves by half its 32-bit range in [`PAWS_IDLE`]:
    /// after that long without an update, a fresh TSval may look older than `ts_recent`, and
    /// PAWS would drop every segment of a connection that was merely idle. Linux applies the
    /// same limit to its microsecond timestamps (`TCP_PAWS_WRAP`).
    pub fn ts_recent_valid(&self, now: Duration) -> Option<u32> {
        self.ts_recent
            .filter(|_| now.saturating_sub(self.ts_recent_at) < PAWS_IDLE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reported_ranges_are_remembered_once_each_most_recent_first() {
        let mut r = RecvState::new(0);
        // Alternating first blocks keep two entries, not four copies of two.
        for _ in 0..3 {
            r.note_reported((100, 200));
            r.note_reported((300, 400));
        }
        assert_eq!(Vec::from(r.reported.clone()), vec![300, 100]);
        // Ranges that merged into the one reported now are dropped with it.
        r.note_reported((500, 600));
        r.note_reported((90, 450));
        assert_eq!(Vec::from(r.reported.clone()), vec![90, 500]);
        // At most REPORTED entries.
        for k in 0..10 {
            r.note_reported((1000 + 10 * k, 1005 + 10 * k));
        }
        assert_eq!(r.reported.len(), REPORTED);
        assert_eq!(r.reported.front(), Some(&1090));
    }
}
