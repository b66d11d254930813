//! The connection-count dimension and the incast cells over TUN, without a network: plan
//! building (`--qps`, the full plan's cells), the incast table, the charts leaving both out.

use super::tests::{ours_mut, results_of};
use super::*;

#[test]
fn qps_runs_every_cell_at_each_count_at_equal_bytes() {
    let quick = plan(true);
    let p = plan(true).with_qps(&[1, 8, 8]);
    assert_eq!(
        p.cells.len(),
        2 * quick.cells.len(),
        "a count given twice runs once"
    );
    for one in &quick.cells {
        let eight = p
            .cells
            .iter()
            .find(|c| c.id == format!("{}-q8", one.id))
            .expect("the 8-connection cell");
        assert_eq!(eight.qps, 8);
        assert_eq!(eight.count, one.count.div_ceil(8));
        // The messages are shared out: about the one-connection cell's bytes.
        assert!(
            eight.bytes() >= one.bytes() && eight.bytes() < one.bytes() + 8 * u64::from(one.size)
        );
        assert!(p.cells.iter().any(|c| c.id == one.id && c.qps == 1));
    }
    // Only the 8-connection cells when 1 is not asked for.
    let only8 = plan(true).with_qps(&[8]);
    assert!(only8
        .cells
        .iter()
        .all(|c| c.qps == 8 && c.id.ends_with("-q8")));
    assert!(
        only8.describe().contains("x  8 QPs"),
        "{}",
        only8.describe()
    );
}

#[test]
fn the_full_plan_has_a_qp_cell_and_the_incast_over_tun_with_and_without_admission() {
    let full = plan(false);
    let q8 = full
        .cells
        .iter()
        .find(|c| c.id == "bulk-64KiB-veth-q8")
        .expect("q8");
    assert_eq!((q8.qps, q8.link), (8, Link::Veth));
    let incast: Vec<&Cell> = full.cells.iter().filter(|c| c.is_incast()).collect();
    assert_eq!(incast.len(), 2);
    assert_eq!(
        incast.iter().map(|c| c.admission).collect::<Vec<_>>(),
        [false, true]
    );
    for c in &incast {
        assert!(
            c.id.starts_with("incast-tun-q16-64KiB-relay-500mbit-q256KiB"),
            "{}",
            c.id
        );
        assert_eq!(c.id.ends_with("-noadm"), !c.admission);
        assert_eq!(
            (c.qps, c.depth, c.admit),
            (16, INCAST_DEPTH, Some(INCAST_ADMIT))
        );
        assert!(c.link.per_run_topology());
        let link = c.link.link_config(1).expect("valid").expect("relay");
        assert_eq!(
            (link.bandwidth_bps, link.queue_limit_bytes),
            (500_000_000, 256 << 10)
        );
    }
    // The admitted bytes of every connection fit in the queue (headers besides).
    assert!(16 * u64::from(INCAST_ADMIT) * 21 / 20 < 256 << 10);
    // --qps leaves cells of several connections as they are; ids stay unique.
    let with = plan(false).with_qps(&[1, 8]);
    let ids: std::collections::HashSet<_> = with.cells.iter().map(|c| c.id.clone()).collect();
    assert_eq!(ids.len(), with.cells.len());
    assert!(with.cells.iter().all(|c| !c.id.contains("-q8-q8")));
}

#[test]
fn incast_cells_have_a_table_of_their_own_with_relay_drops() {
    let cells = incast_cells(4, 8);
    let mut runs = Vec::new();
    for c in &cells {
        for stack in [Stack::Kernel, Stack::Ours, Stack::OursSeq] {
            let mut r = RunRecord::synthetic(&c.id, stack, 0, 0.4);
            r.relay_queue_drops = Some(if c.admission { 0 } else { 123 });
            if stack.is_ours() {
                ours_mut(&mut r).grant_holds = if c.admission { 77 } else { 0 };
            }
            runs.push(r);
        }
    }
    let p = Plan {
        quick: false,
        runs: 1,
        cells: cells.clone(),
    };
    let results = summarize(&p, &runs);
    assert_eq!(render::markdown(&results).lines().count(), 2, "header only");
    let t = render::incast_markdown(&results);
    assert_eq!(t.lines().count(), 2 + 2 * 3, "{t}");
    for row in [
        "| ours (no admission) |",
        "| ours |",
        "| ours S (no admission) |",
        "| ours S |",
    ] {
        assert!(t.contains(row), "{row}: {t}");
    }
    assert!(t.contains("| 123 |") && t.contains("| 77 |"), "{t}");
    assert!(render::incast_markdown(&results_of(plan(true).cells)).is_empty());
}

#[test]
fn charts_leave_out_cells_of_several_connections() {
    let one = Cell::new(Workload::Bulk, 4096, 100, Link::Veth);
    let other = Cell::new(Workload::Bulk, 65536, 100, Link::Veth);
    let cells = vec![one.clone(), other, one.with_qps(8)];
    let dir = std::env::temp_dir().join(format!("bth-compare-qps-{}", std::process::id()));
    render::charts(&results_of(cells), &dir).expect("charts");
    let svg = std::fs::read_to_string(dir.join("throughput-vs-size.svg")).expect("chart");
    // A point per stack and one-connection cell: the 8-connection cell is not one.
    assert_eq!(svg.matches("<circle").count(), 2 * 3, "{svg}");
    let _ = std::fs::remove_dir_all(&dir);
}
