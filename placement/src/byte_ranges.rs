//! An exact set of message bytes: disjoint, non-adjacent half-open ranges of offsets, merged on
//! insert. [`Coverage`](crate::coverage::Coverage) keeps here the bytes its arrival bitmap cannot
//! hold (segments that do not fall on its grid, or all of them while it has none).
//!
//! Insertion reports the sub-ranges that were *not* covered before, so the caller copies exactly
//! those bytes and nothing twice. A BTreeMap keeps insert O(log n) whatever order segments come
//! in (a sorted Vec would memmove on every out-of-order insert).

use std::collections::BTreeMap;

#[derive(Debug, Clone, Default)]
pub(crate) struct ByteRanges {
    /// start -> end, disjoint and non-adjacent.
    ranges: BTreeMap<u32, u32>,
}

impl ByteRanges {
    /// The ranges, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.ranges.iter().map(|(&s, &e)| (s, e))
    }

    /// Is byte `at` present?
    pub fn contains(&self, at: u32) -> bool {
        self.ranges
            .range(..=at)
            .next_back()
            .is_some_and(|(_, &e)| e > at)
    }

    /// Are all bytes of `[start, end)` present?
    pub fn covers(&self, start: u32, end: u32) -> bool {
        start >= end
            || self
                .ranges
                .range(..=start)
                .next_back()
                .is_some_and(|(_, &e)| e >= end)
    }

    /// Is any byte of `[start, end)` present?
    pub fn intersects(&self, start: u32, end: u32) -> bool {
        start < end && (self.contains(start) || self.ranges.range(start..end).next().is_some())
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
                return added(start, end, &mut new);
            }
            if k <= start {
                if *e >= end {
                    return 0;
                }
                let from = *e;
                *e = end;
                return added(from, end, &mut new);
            }
        } else {
            self.ranges.insert(start, end);
            return added(start, end, &mut new);
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
        added
    }
}

fn added(a: u32, b: u32, new: &mut impl FnMut(u32, u32)) -> u32 {
    new(a, b);
    b - a
}

/// The reference model the property tests hold arrival tracking against: one bool a byte.
#[cfg(test)]
pub(crate) mod model {
    /// The maximal runs of present bytes, in increasing order.
    pub fn runs(bits: &[bool]) -> Vec<(u32, u32)> {
        let mut runs = Vec::new();
        let mut i = 0;
        while i < bits.len() {
            if bits[i] {
                let st = i;
                while i < bits.len() && bits[i] {
                    i += 1;
                }
                runs.push((st as u32, i as u32));
            } else {
                i += 1;
            }
        }
        runs
    }

    /// Mark `[s, e)` present; returns the bytes that were absent, as maximal runs.
    pub fn insert(bits: &mut [bool], s: u32, e: u32) -> Vec<(u32, u32)> {
        let mut fresh = vec![false; bits.len()];
        for i in s as usize..e as usize {
            fresh[i] = !bits[i];
            bits[i] = true;
        }
        runs(&fresh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ins(c: &mut ByteRanges, s: u32, e: u32) -> Vec<(u32, u32)> {
        let mut v = Vec::new();
        c.insert(s, e, |a, b| v.push((a, b)));
        v
    }

    #[test]
    fn reports_only_gaps_and_merges() {
        let mut c = ByteRanges::default();
        assert_eq!(ins(&mut c, 10, 20), [(10, 20)]);
        assert_eq!(ins(&mut c, 30, 40), [(30, 40)]);
        assert!(c.contains(10) && c.contains(19) && !c.contains(20) && !c.contains(9));
        assert!(c.intersects(19, 30) && !c.intersects(20, 30) && !c.intersects(40, 41));
        assert!(c.intersects(0, 11) && !c.intersects(0, 10) && !c.intersects(15, 15));
        assert_eq!(ins(&mut c, 5, 45), [(5, 10), (20, 30), (40, 45)]);
        assert_eq!(c.iter().collect::<Vec<_>>(), [(5, 45)]);
        assert!(ins(&mut c, 12, 44).is_empty());
        assert!(c.covers(5, 45) && !c.covers(4, 6) && c.covers(7, 7));
        assert_eq!(ins(&mut c, 0, 5), [(0, 5)]);
        assert_eq!(c.iter().collect::<Vec<_>>(), [(0, 45)]);
    }

    proptest! {
        #[test]
        fn matches_a_bitmap(ops in prop::collection::vec((0u32..200, 1u32..40), 1..60)) {
            let mut c = ByteRanges::default();
            let mut bits = vec![false; 260];
            for (s, l) in ops {
                let e = s + l;
                let mut got = Vec::new();
                let n = c.insert(s, e, |a, b| got.push((a, b)));
                let expect = model::insert(&mut bits, s, e);
                prop_assert_eq!(n, expect.iter().map(|(a, b)| b - a).sum::<u32>());
                prop_assert_eq!(got, expect);
                // Ranges are disjoint, non-adjacent, and equal the bitmap's runs.
                prop_assert_eq!(c.iter().collect::<Vec<_>>(), model::runs(&bits));
                for (at, &b) in bits.iter().enumerate() {
                    prop_assert_eq!(c.contains(at as u32), b);
                }
            }
        }
    }
}
