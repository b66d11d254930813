//! Which byte ranges of one message have arrived: a set of disjoint, non-adjacent half-open
//! ranges of message offsets, merged on insert.
//!
//! Insertion reports the sub-ranges that were *not* covered before, so the caller copies exactly
//! those bytes and nothing twice. A BTreeMap keeps insert O(log n) whatever order segments come
//! in (a sorted Vec would memmove on every out-of-order insert).

use std::collections::BTreeMap;

#[derive(Debug, Clone, Default)]
pub(crate) struct Coverage {
    /// start -> end, disjoint and non-adjacent.
    ranges: BTreeMap<u32, u32>,
    /// Total bytes covered.
    covered: u64,
}

impl Coverage {
    /// Number of disjoint ranges held (the state a peer can make grow).
    pub fn range_count(&self) -> usize {
        self.ranges.len()
    }

    /// Bytes covered, all ranges together.
    pub fn covered(&self) -> u64 {
        self.covered
    }

    /// One past the highest covered offset (0 when empty).
    pub fn max_end(&self) -> u32 {
        self.ranges.last_key_value().map_or(0, |(_, &e)| e)
    }

    /// Is the whole message `[0, len)` present?
    pub fn is_complete(&self, len: u32) -> bool {
        self.covered == u64::from(len) && self.ranges.first_key_value() == Some((&0, &len))
    }

    /// Are all bytes of `[start, end)` already present?
    pub fn covers(&self, start: u32, end: u32) -> bool {
        start >= end
            || self
                .ranges
                .range(..=start)
                .next_back()
                .is_some_and(|(_, &e)| e >= end)
    }

    /// Would inserting `[start, end)` create a new disjoint range (rather than extend or merge)?
    pub fn would_add_range(&self, start: u32, end: u32) -> bool {
        let touches_prev = self
            .ranges
            .range(..=start)
            .next_back()
            .is_some_and(|(_, &e)| e >= start);
        // `range(start..=end)` is only valid for start <= end; callers pass non-empty ranges,
        // but a guard costs nothing and keeps this panic-free.
        let touches_next = start <= end && self.ranges.range(start..=end).next().is_some();
        start < end && !(touches_prev || touches_next)
    }

    /// Add `[start, end)`, calling `new` once for each maximal sub-range that was not covered
    /// before, in increasing order. Returns the number of newly covered bytes.
    ///
    /// Written for few tree traversals (this is the per-segment hot path): one lookup for the
    /// predecessor, one per absorbed successor, one to store the merged range.
    pub fn insert(&mut self, start: u32, end: u32, mut new: impl FnMut(u32, u32)) -> u32 {
        if start >= end {
            return 0;
        }
        // Fast path, one tree search: the last range starting at or before `end`. If it starts
        // at or before `start`, no other range can touch [start, end): the segment is new
        // (isolated), a duplicate, or extends that range (the in-order case).
        if let Some((&k, e)) = self.ranges.range_mut(..=end).next_back() {
            if *e < start {
                self.ranges.insert(start, end);
                return self.added(start, end, &mut new);
            }
            if k <= start {
                if *e >= end {
                    return 0;
                }
                let from = *e;
                *e = end;
                return self.added(from, end, &mut new);
            }
        } else {
            self.ranges.insert(start, end);
            return self.added(start, end, &mut new);
        }
        // `cursor`: every byte of [start, cursor) is known covered or already reported.
        let (lo, mut cursor, extend_pred) = match self.ranges.range(..=start).next_back() {
            Some((_, &pe)) if pe >= end => return 0,
            Some((&ps, &pe)) if pe >= start => (ps, pe, true),
            _ => (start, start, false),
        };
        let mut hi = end;
        let mut added = 0u32;
        // Ranges starting inside (cursor, end] overlap or touch the new one: absorb each,
        // reporting the gap before it. Ranges are non-adjacent, so once one reaches `end` no
        // further one can touch.
        while cursor < end {
            let Some((&ns, &ne)) = self.ranges.range(cursor..=end).next() else {
                break;
            };
            if ns > cursor {
                new(cursor, ns);
                added += ns - cursor;
            }
            self.ranges.remove(&ns);
            cursor = ne;
            hi = hi.max(ne);
        }
        if cursor < end {
            new(cursor, end);
            added += end - cursor;
        }
        // The predecessor kept its key: update its end in place instead of remove + insert.
        let pred_end = if extend_pred {
            self.ranges.get_mut(&lo)
        } else {
            None
        };
        match pred_end {
            Some(e) => *e = hi,
            None => {
                self.ranges.insert(lo, hi);
            }
        }
        self.covered += u64::from(added);
        added
    }

    fn added(&mut self, a: u32, b: u32, new: &mut impl FnMut(u32, u32)) -> u32 {
        new(a, b);
        self.covered += u64::from(b - a);
        b - a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ins(c: &mut Coverage, s: u32, e: u32) -> Vec<(u32, u32)> {
        let mut v = Vec::new();
        c.insert(s, e, |a, b| v.push((a, b)));
        v
    }

    #[test]
    fn reports_only_gaps_and_merges() {
        let mut c = Coverage::default();
        assert_eq!(ins(&mut c, 10, 20), [(10, 20)]);
        assert_eq!(ins(&mut c, 30, 40), [(30, 40)]);
        assert_eq!(c.range_count(), 2);
        assert!(c.would_add_range(50, 60));
        assert!(!c.would_add_range(40, 45), "adjacent extends");
        assert!(!c.would_add_range(5, 10));
        assert_eq!(ins(&mut c, 5, 45), [(5, 10), (20, 30), (40, 45)]);
        assert_eq!(c.range_count(), 1);
        assert!(ins(&mut c, 12, 44).is_empty());
        assert!(c.covers(5, 45) && !c.covers(4, 6));
        assert_eq!(ins(&mut c, 0, 5), [(0, 5)]);
        assert!(c.is_complete(45) && !c.is_complete(46));
        assert_eq!(c.max_end(), 45);
    }

    proptest! {
        #[test]
        fn matches_a_bitmap(ops in prop::collection::vec((0u32..200, 1u32..40), 1..60)) {
            let mut c = Coverage::default();
            let mut bits = vec![false; 260];
            for (s, l) in ops {
                let e = s + l;
                let mut fresh = vec![false; 260];
                let n = c.insert(s, e, |a, b| {
                    for f in &mut fresh[a as usize..b as usize] { *f = true; }
                });
                let mut expect = 0;
                for i in s..e {
                    let i = i as usize;
                    prop_assert_eq!(fresh[i], !bits[i]);
                    if !bits[i] { expect += 1; }
                    bits[i] = true;
                }
                prop_assert_eq!(n, expect);
                // Ranges are disjoint, non-adjacent, and equal the bitmap's runs.
                let mut runs = Vec::new();
                let mut i = 0;
                while i < bits.len() {
                    if bits[i] {
                        let st = i;
                        while i < bits.len() && bits[i] { i += 1; }
                        runs.push((st as u32, i as u32));
                    } else { i += 1; }
                }
                let got: Vec<_> = c.ranges.iter().map(|(&a, &b)| (a, b)).collect();
                prop_assert_eq!(got, runs);
                prop_assert_eq!(c.covered, bits.iter().filter(|b| **b).count() as u64);
            }
        }
    }
}
