//! `--only`: which cells of a plan run, and which of the full run's extra sections.
//!
//! A cell id is also a prefix of longer ids (`bulk-1MiB-veth` of `bulk-1MiB-veth-mtu9000` and
//! `bulk-1MiB-veth-plain`), so a plain substring match could not pick that one cell. A pattern
//! that is a whole cell id therefore selects that cell alone; any other pattern selects every
//! cell whose id contains it. Several patterns, comma-separated, select the union.

use super::Cell;

/// The patterns of `--only`, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Only {
    patterns: Vec<String>,
}

impl Only {
    /// Comma-separated patterns; none may be empty.
    pub fn parse(s: &str) -> Result<Only, String> {
        let patterns: Vec<String> = s.split(',').map(|p| p.trim().to_string()).collect();
        if patterns.iter().any(String::is_empty) {
            return Err(
                "an empty pattern (give cell ids or parts of them, comma-separated)".into(),
            );
        }
        Ok(Only { patterns })
    }

    /// Whether `pattern` picks the cell `id`, with `ids` every id of the plan.
    fn picks(pattern: &str, id: &str, ids: &[&str]) -> bool {
        if ids.contains(&pattern) {
            id == pattern
        } else {
            id.contains(pattern)
        }
    }

    /// Keep the cells the patterns select.
    pub fn retain(&self, cells: &mut Vec<Cell>) {
        let ids: Vec<String> = cells.iter().map(|c| c.id.clone()).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        cells.retain(|c| self.patterns.iter().any(|p| Self::picks(p, &c.id, &ids)));
    }

    /// Whether the full run's extra section `name` (`relay-ceiling`, `incast`) runs: its name
    /// contains one of the patterns.
    pub fn wants_extra(&self, name: &str) -> bool {
        self.patterns.iter().any(|p| name.contains(p.as_str()))
    }

    /// The patterns that select nothing among `ids` and no extra section in `extras`: named in
    /// the error, so a typo in one of several patterns is not silently dropped.
    pub fn unmatched(&self, ids: &[&str], extras: &[&str]) -> Vec<&str> {
        self.patterns
            .iter()
            .filter(|p| {
                !ids.iter().any(|id| Self::picks(p, id, ids))
                    && !extras.iter().any(|e| e.contains(p.as_str()))
            })
            .map(String::as_str)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDS: [&str; 5] = [
        "bulk-1MiB-veth",
        "bulk-1MiB-veth-mtu9000",
        "bulk-1MiB-veth-plain",
        "bulk-1MiB-relay-spray4-200us",
        "bulk-1MiB-relay-spray4-200us-mtu9000",
    ];

    fn kept(only: &str) -> Vec<&'static str> {
        let o = Only::parse(only).unwrap();
        IDS.iter()
            .copied()
            .filter(|id| o.patterns.iter().any(|p| Only::picks(p, id, &IDS)))
            .collect()
    }

    #[test]
    fn a_whole_id_picks_that_cell_alone() {
        assert_eq!(kept("bulk-1MiB-veth"), ["bulk-1MiB-veth"]);
        assert_eq!(
            kept("bulk-1MiB-relay-spray4-200us"),
            ["bulk-1MiB-relay-spray4-200us"]
        );
    }

    #[test]
    fn a_part_of_ids_picks_every_cell_containing_it() {
        assert_eq!(
            kept("spray4"),
            [
                "bulk-1MiB-relay-spray4-200us",
                "bulk-1MiB-relay-spray4-200us-mtu9000"
            ]
        );
        assert_eq!(
            kept("veth"),
            [
                "bulk-1MiB-veth",
                "bulk-1MiB-veth-mtu9000",
                "bulk-1MiB-veth-plain"
            ]
        );
    }

    #[test]
    fn several_patterns_pick_the_union() {
        assert_eq!(
            kept("bulk-1MiB-veth, mtu9000"),
            [
                "bulk-1MiB-veth",
                "bulk-1MiB-veth-mtu9000",
                "bulk-1MiB-relay-spray4-200us-mtu9000"
            ]
        );
    }

    #[test]
    fn empty_patterns_and_unmatched_ones_are_named() {
        assert!(Only::parse("veth,").unwrap_err().contains("empty pattern"));
        assert!(Only::parse("").is_err());
        let o = Only::parse("veth,sprya4,incast").unwrap();
        assert_eq!(o.unmatched(&IDS, &["relay-ceiling", "incast"]), ["sprya4"]);
        assert!(o.wants_extra("incast"));
        assert!(!o.wants_extra("relay-ceiling"));
    }
}
