//! Which bytes of one message have arrived: exact to the byte, at the cost of a bit test and a
//! bit set for a segment of the usual size.
//!
//! A sender cuts a message at multiples of one payload size, so its segments fall on a grid.
//! The first segment that can define one (at least [`MIN_UNIT`] bytes, at an offset that is a
//! multiple of its length) fixes the unit, and from then on a bitmap holds the units that have
//! wholly arrived. Bytes that do not fill a unit of their own (the short last segment, a
//! retransmission re-cut at other boundaries, whatever came before the grid was known) go to an
//! exact range set instead, and their unit is marked so that lookups there consult it. Nothing
//! is rounded: a duplicate or an overlap is found to the byte, whatever the segmentation; only
//! its cost depends on it.
//!
//! Insertion reports the sub-ranges that were *not* present before, so the caller copies exactly
//! those bytes and nothing twice. The number of maximal runs of present bytes (the state the
//! fragmentation budget bounds) is kept up to date from the two bytes just outside each insert.

use crate::byte_ranges::ByteRanges;

/// The shortest segment that may fix the grid. It bounds the unit map of the largest message
/// (2^24 bytes, 2^16 units of two bits) to 16 KiB, however a peer places its segments; small
/// enough for the 536-byte minimum MSS to get a grid.
const MIN_UNIT: u32 = 256;

/// Two bitmaps over the grid's units, kept word by word side by side so that one lookup serves
/// both: [`FULL`] (wholly present, none of it in the range set) and [`PART`] (the range set may
/// hold bytes of it). Bits past the end read as clear.
#[derive(Debug, Clone, Default)]
struct UnitMap(Vec<[u64; 2]>);

const FULL: usize = 0;
const PART: usize = 1;

impl UnitMap {
    #[inline]
    fn get(&self, map: usize, i: usize) -> bool {
        self.0
            .get(i / 64)
            .is_some_and(|w| (w[map] >> (i % 64)) & 1 != 0)
    }

    fn set(&mut self, map: usize, i: usize) {
        let w = i / 64;
        if w >= self.0.len() {
            self.0.resize(w + 1, [0; 2]);
        }
        if let Some(word) = self.0.get_mut(w) {
            word[map] |= 1 << (i % 64);
        }
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Coverage {
    /// Bytes a grid unit: unit `i` is `[i * unit, (i + 1) * unit)`. 0 until a segment fixes it.
    unit: u32,
    /// Which units are wholly present, and which have bytes in `rest` (never both).
    units: UnitMap,
    /// The present bytes outside full units: all of them while there is no grid.
    rest: ByteRanges,
    /// Bytes present.
    covered: u64,
    /// Maximal runs of present bytes.
    runs: usize,
    /// One past the highest present byte (0 when none).
    max_end: u32,
}

/// `[start, end)` cut at the boundaries of `unit`-byte units: (unit index, piece start, piece
/// end), in increasing order; nothing when the range is empty.
fn pieces(unit: u32, start: u32, end: u32) -> impl Iterator<Item = (usize, u32, u32)> {
    let (s, e, u) = (u64::from(start), u64::from(end), u64::from(unit.max(1)));
    let last = if s < e { e.div_ceil(u) } else { s / u };
    (s / u..last).map(move |i| {
        (
            i as usize,
            (i * u).max(s) as u32,
            ((i + 1) * u).min(e) as u32,
        )
    })
}

impl Coverage {
    /// Number of maximal runs of present bytes (the state a peer can make grow).
    pub fn range_count(&self) -> usize {
        self.runs
    }

    /// Bytes present.
    pub fn covered(&self) -> u64 {
        self.covered
    }

    /// One past the highest present byte (0 when none).
    pub fn max_end(&self) -> u32 {
        self.max_end
    }

    /// Is the whole message `[0, len)` present (and nothing past it)? Never for `len` 0.
    #[inline(always)]
    pub fn is_complete(&self, len: u32) -> bool {
        len > 0 && self.covered == u64::from(len) && self.max_end == len
    }

    /// Is byte `at`, which lies in unit `i`, present?
    #[inline]
    fn has(&self, i: usize, at: u32) -> bool {
        self.units.0.get(i / 64).is_some_and(|w| {
            let bit = 1 << (i % 64);
            w[FULL] & bit != 0 || (w[PART] & bit != 0 && self.rest_contains(at))
        })
    }

    /// Out of line: only a unit that segments did not fill on their own gets here.
    #[cold]
    fn rest_contains(&self, at: u32) -> bool {
        self.rest.contains(at)
    }

    /// Is byte `at` present?
    fn contains(&self, at: u32) -> bool {
        match self.unit {
            0 => self.rest.contains(at),
            u => self.has((at / u) as usize, at),
        }
    }

    /// Is the byte just before `at` present?
    fn present_before(&self, at: u32) -> bool {
        at.checked_sub(1).is_some_and(|b| self.contains(b))
    }

    /// Are all bytes of `[start, end)` present?
    pub fn covers(&self, start: u32, end: u32) -> bool {
        match self.unit {
            0 => self.rest.covers(start, end),
            u => pieces(u, start, end).all(|(i, a, b)| {
                self.units.get(FULL, i) || (self.units.get(PART, i) && self.rest.covers(a, b))
            }),
        }
    }

    /// Is any byte of `[start, end)` present?
    fn intersects(&self, start: u32, end: u32) -> bool {
        match self.unit {
            0 => self.rest.intersects(start, end),
            u => pieces(u, start, end).any(|(i, a, b)| {
                self.units.get(FULL, i) || (self.units.get(PART, i) && self.rest.intersects(a, b))
            }),
        }
    }

    /// Would inserting `[start, end)` create a new run (rather than extend or merge)?
    pub fn would_add_range(&self, start: u32, end: u32) -> bool {
        start < end
            && !self.present_before(start)
            && !self.contains(end)
            && !self.intersects(start, end)
    }

    /// Add `[start, end)`, calling `new` once for each maximal sub-range that was not present
    /// before, in increasing order. Returns the number of newly present bytes.
    #[inline]
    pub fn insert(&mut self, start: u32, end: u32, mut new: impl FnMut(u32, u32)) -> u32 {
        let n = end.saturating_sub(start);
        if self.insert_unit(start, n, true).is_some() {
            new(start, end);
            return n;
        }
        self.insert_pieces(start, end, new)
    }

    /// The usual segment in one step: if `[start, start + n)` is exactly one unit of the grid,
    /// none of it present, and neither neighbouring unit has bytes in `rest`, mark it present
    /// and return the change in the number of runs (-1, 0 or 1), for the connection's count.
    /// A unit that would start a run of its own is taken only if `new_run_allowed` (the
    /// caller's fragmentation budget) or it starts the message. None with nothing changed for
    /// anything else: [`insert`](Self::insert) handles those exactly. Looking only at the
    /// neighbours' bits keeps this a few loads and one store to the map.
    #[inline(always)]
    pub fn insert_unit(&mut self, start: u32, n: u32, new_run_allowed: bool) -> Option<isize> {
        let u = self.unit;
        let end = start.checked_add(n)?;
        let k = start.checked_div(u).filter(|&k| n == u && k * u == start)? as usize;
        let (wi, b) = (k / 64, k % 64);
        let words = &mut self.units.0;
        let w = *words.get(wi)?;
        // The neighbours' bits, from the same word unless the unit is at a word's edge; none
        // before unit 0.
        let lo = match (b, wi) {
            (0, 0) => [0; 2],
            (0, _) => *words.get(wi - 1)?,
            _ => w,
        };
        let hi = match b {
            63 => words.get(wi + 1).copied().unwrap_or_default(),
            _ => w,
        };
        let (lb, hb) = ((b + 63) % 64, (b + 1) % 64);
        let bit = 1 << b;
        let left = (lo[FULL] >> lb) & 1 != 0;
        let right = (hi[FULL] >> hb) & 1 != 0;
        if (w[FULL] | w[PART]) & bit != 0 || (lo[PART] >> lb) & 1 != 0 || (hi[PART] >> hb) & 1 != 0
        {
            return None;
        }
        // Joining a present neighbour extends its run; joining two merges them.
        let runs = 1 - isize::from(left) - isize::from(right);
        if runs > 0 && start != 0 && !new_run_allowed {
            return None;
        }
        if let Some(w) = words.get_mut(wi) {
            w[FULL] |= bit;
        }
        self.account(end, n, 1, !left, !right);
        Some(runs)
    }

    /// [`insert`](Self::insert) of anything else: unit by unit, whole new units to the bitmap
    /// and the rest to the range set.
    #[inline(never)]
    fn insert_pieces(&mut self, start: u32, end: u32, new: impl FnMut(u32, u32)) -> u32 {
        if start >= end {
            return 0;
        }
        if self.unit == 0 {
            self.try_grid(start, end);
        }
        let u = self.unit;
        let mut fresh = Fresh {
            new,
            pending: None,
            first: 0,
            last: 0,
            count: 0,
            bytes: 0,
        };
        if u == 0 {
            self.rest.insert(start, end, |a, b| fresh.push(a, b));
        } else {
            for (i, a, b) in pieces(u, start, end) {
                if self.units.get(FULL, i) {
                    continue;
                }
                if b - a == u && !self.units.get(PART, i) {
                    self.units.set(FULL, i);
                    fresh.push(a, b);
                } else {
                    self.units.set(PART, i);
                    self.rest.insert(a, b, |x, y| fresh.push(x, y));
                }
            }
        }
        let (first, last, count, bytes) = fresh.finish();
        if count > 0 {
            // A new sub-range that does not start at `start` follows a present byte (the new
            // sub-ranges are maximal), and one that does not end at `end` precedes one: only
            // the two bytes just outside the insert need a look.
            let left_open = first == start && !self.present_before(start);
            let right_open = last == end && !self.contains(end);
            self.account(end, bytes, count, left_open, right_open);
        }
        bytes
    }

    /// Books an insert ending at `end` that made `bytes` bytes present in `count` maximal
    /// sub-ranges; `left_open`/`right_open`: the first starts at `start` with nothing present
    /// before it, the last ends at `end` with nothing present after it. Each sub-range joins
    /// the runs on its two sides, or starts a new run on an open side.
    #[inline(always)]
    fn account(&mut self, end: u32, bytes: u32, count: usize, left_open: bool, right_open: bool) {
        self.covered += u64::from(bytes);
        // Rarely a new maximum once segments arrive in any order: skip the store.
        if end > self.max_end {
            self.max_end = end;
        }
        self.runs =
            (self.runs + usize::from(left_open) + usize::from(right_open)).saturating_sub(count);
    }

    /// Fix the grid on `[start, end)` if it can define one. The bytes already present stay in
    /// `rest`: their units are marked.
    fn try_grid(&mut self, start: u32, end: u32) {
        let n = end - start;
        if n < MIN_UNIT || start.checked_rem(n) != Some(0) {
            return;
        }
        self.unit = n;
        for (a, b) in self.rest.iter() {
            for (i, _, _) in pieces(n, a, b) {
                self.units.set(PART, i);
            }
        }
    }
}

/// The new sub-ranges of one insert, merged where adjacent (a whole unit next to bytes from the
/// range set) so the caller sees each maximal one once.
struct Fresh<F> {
    new: F,
    pending: Option<(u32, u32)>,
    first: u32,
    last: u32,
    count: usize,
    bytes: u32,
}

impl<F: FnMut(u32, u32)> Fresh<F> {
    fn push(&mut self, a: u32, b: u32) {
        self.bytes += b - a;
        self.last = b;
        match &mut self.pending {
            Some((_, e)) if *e == a => *e = b,
            pending => {
                if let Some((x, y)) = pending.replace((a, b)) {
                    (self.new)(x, y);
                } else {
                    self.first = a;
                }
                self.count += 1;
            }
        }
    }

    /// Report the last sub-range; returns (first start, last end, maximal sub-ranges, bytes).
    fn finish(mut self) -> (u32, u32, usize, u32) {
        if let Some((x, y)) = self.pending {
            (self.new)(x, y);
        }
        (self.first, self.last, self.count, self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::byte_ranges::model;
    use proptest::prelude::*;

    fn ins(c: &mut Coverage, s: u32, e: u32) -> Vec<(u32, u32)> {
        let mut v = Vec::new();
        let n = c.insert(s, e, |a, b| v.push((a, b)));
        assert_eq!(n, v.iter().map(|(a, b)| b - a).sum::<u32>());
        v
    }

    const MSS: u32 = 1448;

    #[test]
    fn first_aligned_segment_fixes_the_grid() {
        let mut c = Coverage::default();
        // Too short to define a grid: kept exactly all the same.
        assert_eq!(ins(&mut c, 0, 100), [(0, 100)]);
        assert_eq!(c.unit, 0);
        // Not at a multiple of its length.
        assert_eq!(ins(&mut c, 1000, 2 * MSS), [(1000, 2 * MSS)]);
        assert_eq!(c.unit, 0);
        assert_eq!(c.range_count(), 2);
        // Fixes the grid; what arrived before stays exact, in partly present units.
        assert_eq!(ins(&mut c, 2 * MSS, 3 * MSS), [(2 * MSS, 3 * MSS)]);
        assert_eq!(c.unit, MSS);
        assert!(
            c.units.get(PART, 0)
                && c.units.get(PART, 1)
                && !c.units.get(PART, 2)
                && c.units.get(FULL, 2)
        );
        assert_eq!(c.range_count(), 2, "[1000, 3 MSS) is one run");
        assert_eq!(ins(&mut c, 0, MSS), [(100, 1000)]);
        assert_eq!(c.range_count(), 1);
        assert_eq!(c.covered(), u64::from(3 * MSS));
        assert!(c.covers(0, 3 * MSS) && !c.covers(0, 3 * MSS + 1));
    }

    #[test]
    fn whole_units_in_shuffled_order_with_a_short_last_segment() {
        let len = 10 * MSS + 7;
        let mut c = Coverage::default();
        let order = [3, 10, 0, 9, 5, 1, 2, 8, 4, 6, 7];
        let mut runs_seen = Vec::new();
        for (n, &k) in order.iter().enumerate() {
            let (s, e) = (k * MSS, ((k + 1) * MSS).min(len));
            assert_eq!(ins(&mut c, s, e), [(s, e)]);
            assert!(ins(&mut c, s, e).is_empty(), "a duplicate brings nothing");
            runs_seen.push(c.range_count());
            assert_eq!(c.is_complete(len), n == order.len() - 1);
        }
        // 3 | 3,10 | 0,3,10 | 0,3,9-10 | 0,3,5,9-10 | 0-1,3,5,9-10 | 0-3,5,9-10 | 0-3,5,8-10
        // | 0-5,8-10 | 0-6,8-10 | 0-10
        assert_eq!(runs_seen, [1, 2, 3, 3, 4, 4, 3, 3, 2, 2, 1]);
        assert_eq!(c.unit, MSS);
        assert!(
            c.units.get(PART, 10),
            "the short last segment sits in the range set"
        );
        assert_eq!(c.max_end(), len);
        assert!(c.covers(0, len) && !c.covers(0, len + 1));
    }

    #[test]
    fn overlaps_straddling_units_report_only_the_gaps() {
        let mut c = Coverage::default();
        assert_eq!(ins(&mut c, MSS, 2 * MSS), [(MSS, 2 * MSS)]);
        assert_eq!(ins(&mut c, 3 * MSS, 4 * MSS), [(3 * MSS, 4 * MSS)]);
        // A re-cut retransmission over units 0..=4: new bytes in units 0, 2 and 4, merged
        // across nothing; two full units skipped.
        let (s, e) = (MSS / 2, 4 * MSS + 10);
        assert_eq!(
            ins(&mut c, s, e),
            [(s, MSS), (2 * MSS, 3 * MSS), (4 * MSS, e)]
        );
        assert!(c.units.get(FULL, 2), "a whole new unit goes to the bitmap");
        assert!(c.units.get(PART, 0) && c.units.get(PART, 4));
        assert_eq!(c.range_count(), 1);
        // Straddling the boundary of two partly present units: one maximal range reported.
        assert_eq!(ins(&mut c, 0, 5 * MSS), [(0, s), (e, 5 * MSS)]);
        assert_eq!(
            ins(&mut c, 5 * MSS + 1, 5 * MSS + 2),
            [(5 * MSS + 1, 5 * MSS + 2)]
        );
        assert_eq!(c.range_count(), 2);
        // A whole unit next to partly present bytes: reported as one range.
        assert_eq!(
            ins(&mut c, 5 * MSS, 7 * MSS),
            [(5 * MSS, 5 * MSS + 1), (5 * MSS + 2, 7 * MSS)]
        );
        assert!(c.units.get(FULL, 6) && c.units.get(PART, 5) && !c.units.get(FULL, 5));
        assert_eq!(c.range_count(), 1);
        assert!(c.is_complete(7 * MSS));
        // Units filled only through the range set still count as present.
        assert!(ins(&mut c, 5 * MSS, 6 * MSS).is_empty());
        assert!(ins(&mut c, 0, 7 * MSS).is_empty());
    }

    #[test]
    fn one_byte_and_empty() {
        let mut c = Coverage::default();
        assert!(!c.is_complete(0) && !c.is_complete(1));
        assert!(ins(&mut c, 5, 5).is_empty());
        assert!(c.covers(3, 3) && !c.would_add_range(3, 3));
        assert_eq!(ins(&mut c, 0, 1), [(0, 1)]);
        assert!(ins(&mut c, 0, 1).is_empty());
        assert!(c.is_complete(1) && !c.is_complete(2));
        assert_eq!((c.range_count(), c.covered(), c.max_end()), (1, 1, 1));
    }

    #[test]
    fn would_add_range_sees_neighbours_in_both_structures() {
        let mut c = Coverage::default();
        ins(&mut c, 2 * MSS, 3 * MSS);
        ins(&mut c, 5 * MSS + 3, 5 * MSS + 9);
        assert!(
            !c.would_add_range(3 * MSS, 3 * MSS + 1),
            "adjacent to a full unit"
        );
        assert!(!c.would_add_range(MSS, 2 * MSS));
        assert!(
            !c.would_add_range(5 * MSS, 5 * MSS + 3),
            "adjacent to range-set bytes"
        );
        assert!(!c.would_add_range(5 * MSS + 9, 6 * MSS));
        assert!(!c.would_add_range(MSS, 4 * MSS), "spans a full unit");
        assert!(
            !c.would_add_range(4 * MSS, 6 * MSS),
            "spans range-set bytes"
        );
        assert!(c.would_add_range(3 * MSS + 1, 5 * MSS + 2));
        assert!(c.would_add_range(0, 2 * MSS - 1));
        assert!(c.would_add_range(5 * MSS + 10, 100 * MSS));
    }

    #[test]
    fn largest_message_in_shuffled_segments() {
        let len = (1 << 24) - 1;
        let mut starts: Vec<u32> = (0..len).step_by(MSS as usize).collect();
        let mut z = 7u64;
        for i in (1..starts.len()).rev() {
            z = z
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            starts.swap(i, ((z >> 33) % (i as u64 + 1)) as usize);
        }
        let mut c = Coverage::default();
        let mut total = 0u64;
        for (n, &s) in starts.iter().enumerate() {
            let e = (s + MSS).min(len);
            total += u64::from(c.insert(s, e, |_, _| {}));
            assert_eq!(c.insert(s, e, |_, _| {}), 0);
            if n % 997 == 0 {
                assert!(c.range_count() <= n + 1);
            }
        }
        assert_eq!(total, u64::from(len));
        assert!(c.is_complete(len));
        assert_eq!(c.range_count(), 1);
        assert!(c.units.0.len() <= (len / MSS) as usize / 64 + 1);
    }

    /// Segments on a grid of `mss` (whole, or the short last one), some cut at other
    /// boundaries, and arbitrary ranges; `len` is the message length.
    fn segments() -> impl Strategy<Value = (u32, u32, Vec<(u32, u32)>)> {
        (256u32..700, 1u32..12).prop_flat_map(|(mss, units)| {
            let len = mss * units + mss / 3;
            let grid = (0..=units).prop_map(move |k| (k * mss, ((k + 1) * mss).min(len)));
            let any = (0..len, 1..2 * mss).prop_map(move |(s, l)| (s, (s + l).min(len)));
            let small = (0..len, 1u32..8).prop_map(move |(s, l)| (s, (s + l).min(len)));
            let one = prop_oneof![4 => grid, 2 => any, 1 => small];
            (Just(mss), Just(len), prop::collection::vec(one, 1..60))
        })
    }

    proptest! {
        #[test]
        fn matches_a_byte_model((_mss, len, ops) in segments(), probes in prop::collection::vec((0u32..9000, 0u32..900), 8)) {
            let mut c = Coverage::default();
            let mut bits = vec![false; len as usize + 1];
            for (s, e) in ops {
                let got = ins(&mut c, s, e);
                prop_assert_eq!(got, model::insert(&mut bits, s, e));
                let runs = model::runs(&bits);
                prop_assert_eq!(c.range_count(), runs.len());
                prop_assert_eq!(c.covered(), bits.iter().filter(|b| **b).count() as u64);
                prop_assert_eq!(c.max_end(), runs.last().map_or(0, |r| r.1));
                prop_assert_eq!(c.is_complete(len), runs == [(0, len)]);
                for (at, &b) in bits.iter().enumerate() {
                    prop_assert_eq!(c.contains(at as u32), b);
                }
                for &(ps, pl) in &probes {
                    let (ps, pe) = (ps.min(len), (ps + pl).min(len));
                    let r = ps as usize..pe as usize;
                    prop_assert_eq!(c.covers(ps, pe), bits[r.clone()].iter().all(|b| *b));
                    let before = ps.checked_sub(1).is_some_and(|b| bits[b as usize]);
                    let touches = before || bits[pe as usize] || bits[r].iter().any(|b| *b);
                    prop_assert_eq!(c.would_add_range(ps, pe), ps < pe && !touches);
                }
            }
        }
    }
}
