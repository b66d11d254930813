//! A bounded set of disjoint half-open u64 ranges: which stream bytes beyond the cumulative point
//! have arrived. Bounded because a peer chooses how fragmented it is.

use std::collections::BTreeMap;

#[derive(Debug, Clone, Default)]
pub struct RangeSet {
    /// start -> end, disjoint and non-adjacent.
    map: BTreeMap<u64, u64>,
}

impl RangeSet {
    pub fn new() -> RangeSet {
        RangeSet::default()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Would inserting `[start, end)` add a new disjoint range (rather than extend or merge)?
    pub fn would_fragment(&self, start: u64, end: u64) -> bool {
        let touches_prev = self
            .map
            .range(..=start)
            .next_back()
            .is_some_and(|(_, &e)| e >= start);
        let touches_next = self.map.range(start..=end).next().is_some();
        !(touches_prev || touches_next)
    }

    /// Insert, merging with overlapping or adjacent ranges. Returns the merged range.
    pub fn insert(&mut self, mut start: u64, mut end: u64) -> (u64, u64) {
        if start >= end {
            return (start, end);
        }
        if let Some((&s, &e)) = self.map.range(..=start).next_back() {
            if e >= start {
                start = s;
                end = end.max(e);
                self.map.remove(&s);
            }
        }
        while let Some((&s, &e)) = self.map.range(start..=end).next() {
            end = end.max(e);
            self.map.remove(&s);
        }
        self.map.insert(start, end);
        (start, end)
    }

    /// Whether every byte of `[start, end)` is present.
    pub fn contains(&self, start: u64, end: u64) -> bool {
        self.map
            .range(..=start)
            .next_back()
            .is_some_and(|(_, &e)| e >= end)
    }

    /// Remove and return the range starting exactly at `at`, if any (the cumulative point moved).
    pub fn take_from(&mut self, at: u64) -> Option<u64> {
        self.map.remove(&at)
    }

    /// Drop everything below `at`.
    pub fn discard_below(&mut self, at: u64) {
        let keep = self.map.split_off(&at);
        if let Some((&s, &e)) = self.map.iter().next_back() {
            if e > at {
                let _ = s;
                self.map = keep;
                self.map.insert(at, e);
                return;
            }
        }
        self.map = keep;
    }

    /// The range containing `at`, if any.
    pub fn range_containing(&self, at: u64) -> Option<(u64, u64)> {
        self.map
            .range(..=at)
            .next_back()
            .filter(|(_, &e)| e > at)
            .map(|(&s, &e)| (s, e))
    }

    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.map.iter().map(|(&s, &e)| (s, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_overlaps_and_adjacency() {
        let mut r = RangeSet::new();
        r.insert(10, 20);
        r.insert(30, 40);
        assert!(r.would_fragment(50, 60));
        assert!(!r.would_fragment(20, 25));
        assert_eq!(r.insert(20, 30), (10, 40));
        assert_eq!(r.len(), 1);
        assert!(r.contains(12, 40));
        assert!(!r.contains(5, 12));
        assert_eq!(r.range_containing(39), Some((10, 40)));
        assert_eq!(r.range_containing(40), None);
        r.discard_below(15);
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![(15, 40)]);
        assert_eq!(r.take_from(15), Some(40));
        assert!(r.is_empty());
    }
}
