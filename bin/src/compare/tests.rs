//! The charts drawn from fixed, synthetic run records ([`RunRecord::synthetic`]: no network,
//! no root): each sweep's chart is written, is well-formed SVG and has a line for each stack.

use super::*;
use std::path::{Path, PathBuf};

/// One run of the ceilings, kernel TCP, ours and ours S in each of `cells` (GSO ceiling 5×,
/// ceiling 4×, kernel 3×, ours S 2× ours, growing cell by cell), as a one-run plan.
fn with_ceiling_runs(cells: Vec<Cell>) -> (Plan, Vec<RunRecord>) {
    let mut runs = Vec::new();
    for (i, c) in cells.iter().enumerate() {
        let g = 1.0 + i as f64;
        runs.push(RunRecord::synthetic(&c.id, Stack::Ceiling, 0, 4.0 * g));
        runs.push(RunRecord::synthetic(&c.id, Stack::CeilingAcked, 0, 3.5 * g));
        runs.push(RunRecord::synthetic(&c.id, Stack::CeilingGso, 0, 5.0 * g));
        runs.push(RunRecord::synthetic(&c.id, Stack::Kernel, 0, 3.0 * g));
        runs.push(RunRecord::synthetic(&c.id, Stack::Ours, 0, g));
        runs.push(RunRecord::synthetic(&c.id, Stack::OursSeq, 0, 2.0 * g));
    }
    let plan = Plan {
        quick: false,
        runs: 1,
        cells,
    };
    (plan, runs)
}

/// Two runs per stack of every cell, ours at a third of the kernel's throughput and ours S at
/// half, all falling with the cell's index (so each line has a slope and the points differ).
pub(super) fn results_of(cells: Vec<Cell>) -> Vec<CellResult> {
    let mut runs = Vec::new();
    for (i, c) in cells.iter().enumerate() {
        for run in 0..2 {
            let kernel = 3.0 / (1.0 + i as f64);
            runs.push(RunRecord::synthetic(&c.id, Stack::Kernel, run, kernel));
            runs.push(RunRecord::synthetic(&c.id, Stack::Ours, run, kernel / 3.0));
            runs.push(RunRecord::synthetic(
                &c.id,
                Stack::OursSeq,
                run,
                kernel / 2.0,
            ));
        }
    }
    let plan = Plan {
        quick: false,
        runs: 2,
        cells,
    };
    summarize(&plan, &runs)
}

/// Every tag closed in order (`<a><b/></a>`), one root `<svg>`; enough of XML to catch a
/// truncated or interleaved file without an XML parser in the dependencies.
fn assert_well_formed_svg(svg: &str) {
    let mut open: Vec<&str> = Vec::new();
    let mut roots = 0;
    let mut rest = svg;
    while let Some(at) = rest.find('<') {
        let end = rest[at..].find('>').expect("a tag is closed by '>'") + at;
        let tag = &rest[at + 1..end];
        rest = &rest[end + 1..];
        if tag.starts_with('?') || tag.starts_with('!') {
            continue;
        }
        if let Some(closing) = tag.strip_prefix('/') {
            assert_eq!(
                open.pop(),
                Some(closing.trim()),
                "</{closing}> out of order"
            );
            continue;
        }
        let tag_name = tag.split_whitespace().next().unwrap_or("");
        if open.is_empty() {
            assert_eq!(tag_name, "svg", "the root element is <svg>");
            roots += 1;
        }
        if !tag.ends_with('/') {
            open.push(tag_name);
        }
    }
    assert!(open.is_empty(), "unclosed: {open:?}");
    assert_eq!(roots, 1, "one root element");
    assert!(rest.trim().is_empty(), "text after the root: {rest:?}");
}

/// Every stack's line and legend entry is in the chart at `path`: kernel TCP, ours and
/// ours S.
fn assert_both_series(path: &Path) {
    let svg = std::fs::read_to_string(path).expect("chart written");
    assert_well_formed_svg(&svg);
    for name in [
        "kernel TCP",
        "tcp-bth (ours)",
        "tcp-bth S framing + GSO (ours S)",
    ] {
        assert!(
            svg.contains(name),
            "{}: no legend for {name}",
            path.display()
        );
    }
    // One polyline per stack: the three series' colours (`charts.rs`).
    let lines: Vec<&str> = svg.split("<polyline").skip(1).collect();
    for colour in ["#1F77B4", "#D62728", "#9467BD"] {
        assert!(
            lines.iter().any(|l| l.contains(colour)),
            "{}: no line in {colour}",
            path.display()
        );
    }
}

fn temp_dir(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("bth-compare-{name}-{}", std::process::id()))
}

#[test]
fn the_reordering_depth_chart_has_both_stacks() {
    let cells = REORDER_DEPTHS_US
        .into_iter()
        .map(|reorder_depth_us| {
            let link = Link::Relay {
                reorder: REORDER_DEPTH_SWEEP_RATE,
                loss: 0.0,
                reorder_depth_us,
            };
            Cell::new(Workload::Bulk, 1 << 20, 128, link)
        })
        .collect();
    let dir = temp_dir("depth");
    let files = render::charts(&results_of(cells), &dir).expect("charts");
    let chart = dir.join("throughput-vs-reorder-depth.svg");
    assert!(files.contains(&chart), "{files:?}");
    assert_both_series(&chart);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_well_formedness_check_refuses_broken_svg() {
    for bad in ["<svg><g></svg></g>", "<svg><g>", "<svg/><svg/>", "<div/>"] {
        assert!(
            std::panic::catch_unwind(|| assert_well_formed_svg(bad)).is_err(),
            "{bad}"
        );
    }
    assert_well_formed_svg(
        "<?xml version=\"1.0\"?>\n<svg a=\"1\"><g><text>x</text></g><a/></svg>\n",
    );
}

#[test]
fn the_paths_chart_has_both_stacks_and_starts_from_the_unsprayed_relay() {
    let mut cells = vec![Cell::new(
        Workload::Bulk,
        1 << 20,
        128,
        Link::relay(0.0, 0.0),
    )];
    cells.extend(
        SPRAY_PATHS
            .into_iter()
            .map(|paths| Cell::new(Workload::Bulk, 1 << 20, 128, Link::spray(paths))),
    );
    let results = results_of(cells);
    let dir = temp_dir("paths");
    let files = render::charts(&results, &dir).expect("charts");
    let chart = dir.join("throughput-vs-paths.svg");
    assert!(files.contains(&chart), "{files:?}");
    assert_both_series(&chart);
    let svg = std::fs::read_to_string(&chart).expect("chart");
    assert!(svg.contains("paths (round-robin"), "x axis described");
    // A point per cell and stack: 1 (the 0 % relay cell) and every sweep's path count.
    let points = svg.matches("<circle").count();
    assert_eq!(points, 3 * (1 + SPRAY_PATHS.len()), "{svg}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The full plan's relay cells with a ceiling put both on the paths chart beside the three
/// stacks, a point per path count (and the unsprayed relay), and stay off the MTU chart, which
/// is the veth sweep's alone.
#[test]
fn the_paths_chart_has_the_relays_ceiling_and_the_mtu_chart_only_veths() {
    let cells: Vec<Cell> = plan(false)
        .cells
        .into_iter()
        .filter(|c| c.ceiling.is_some())
        .collect();
    let relayed = cells
        .iter()
        .filter(|c| c.link != Link::Veth && c.mtu == bth_testbed::topology::DEFAULT_MTU)
        .count();
    assert_eq!(relayed, 1 + SPRAY_PATHS.len());
    let (plan, runs) = with_ceiling_runs(cells);
    let dir = temp_dir("relay-ceiling");
    let files = render::charts(&summarize(&plan, &runs), &dir).expect("charts");
    let paths = dir.join("throughput-vs-paths.svg");
    assert!(files.contains(&paths), "{files:?}");
    assert_both_series(&paths);
    let svg = std::fs::read_to_string(&paths).expect("chart");
    assert!(svg.contains("ceiling: raw packets, no TCP"), "{svg}");
    assert!(
        svg.contains("ceiling with an ACK back per 2 packets"),
        "{svg}"
    );
    assert!(svg.contains("ceiling: 64 KiB GSO super-packets"), "{svg}");
    assert_eq!(svg.matches("<circle").count(), 6 * relayed);
    let mtu = std::fs::read_to_string(dir.join("throughput-vs-mtu.svg")).expect("chart");
    assert_eq!(mtu.matches("<circle").count(), 6 * FULL_MTUS.len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn spraying_cells_are_named_by_paths_and_spread_and_build_a_valid_link() {
    let full = plan(false);
    for paths in SPRAY_PATHS {
        let id = format!("bulk-1MiB-relay-spray{paths}-{SPRAY_SPREAD_US}us");
        let cell = full.cells.iter().find(|c| c.id == id).expect(&id);
        let link = cell.link.link_config(1).expect("valid").expect("relay");
        let spray = link.spray.expect("spraying");
        assert_eq!(spray.paths.len(), paths as usize);
        assert_eq!(
            spray.spread(),
            Duration::from_micros(SPRAY_SPREAD_US.into())
        );
        assert!(full.describe().contains(&id));
    }
    assert!(plan(true)
        .cells
        .iter()
        .any(|c| matches!(c.link, Link::Spray { .. })));
    // A path count the link model refuses is an error, not a panic.
    let bad = Link::Spray {
        paths: 1,
        spread_us: 200,
    };
    assert!(bad.link_config(1).is_err());
}

#[test]
fn the_relay_cells_run_again_at_jumbo_mtus_with_their_own_ids() {
    let full = plan(false);
    for mtu in JUMBO_RELAY_MTUS {
        for link in jumbo_relay_links() {
            let id = format!("bulk-1MiB-{}-mtu{mtu}", link.id());
            let cell = full.cells.iter().find(|c| c.id == id).expect(&id);
            assert_eq!((cell.mtu, cell.link), (mtu, link));
            // The same link as the MTU-1500 cell of that id, which the plan also has.
            assert!(full
                .cells
                .iter()
                .any(|c| c.id == format!("bulk-1MiB-{}", link.id())));
        }
    }
    // Kept out of the charts (x = reordering or paths, MTU 1500) and the simulator's table.
    let jumbo = full
        .cells
        .iter()
        .find(|c| c.mtu == 9000 && c.link != Link::Veth);
    let results = results_of(jumbo.into_iter().cloned().collect());
    assert!(!charts::charted(&results[0]));
    assert!(!simulated::comparable(&results[0].cell));
}

#[test]
fn bulk_cells_keep_what_kernel_tcps_send_buffer_holds_and_a_message_more() {
    for c in plan(false).cells.iter().filter(|c| !c.is_incast()) {
        let want = match c.workload {
            Workload::RequestResponse => 1,
            Workload::Bulk => bulk_depth(c.size),
        };
        assert_eq!(c.depth, want, "{}", c.id);
    }
    // 4 MiB and one message: 5 at 1 MiB, 65 at 64 KiB, 1025 → 256 at 4 KiB, 2 at
    // 16 MiB − 1 (at least 2).
    assert_eq!(bulk_depth(BULK_LARGE), 5);
    assert_eq!(bulk_depth(64 << 10), 65);
    assert_eq!(bulk_depth(4096), BULK_MAX_DEPTH);
    assert_eq!(bulk_depth(3 << 20), 3);
    assert_eq!(bulk_depth(tcp_bth::wire::MAX_MESSAGE_LEN), 2);
    assert_eq!(bulk_depth(64), BULK_MAX_DEPTH);
    for size in [1, 1000, 1 << 20, 5 << 20] {
        let d = bulk_depth(size) as u64;
        assert!(d * u64::from(size) > KERNEL_SNDBUF_MAX || d == BULK_MAX_DEPTH as u64);
    }
}

/// The labels of an SVG's `<text>` elements.
fn texts(svg: &str) -> Vec<&str> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim()))
        .collect()
}

#[test]
fn the_size_axis_reads_as_people_read_sizes() {
    let cells = SIZES
        .into_iter()
        .map(|s| Cell::new(Workload::Bulk, s, 16, Link::Veth))
        .collect();
    let dir = temp_dir("sizes");
    let files = render::charts(&results_of(cells), &dir).expect("charts");
    let chart = dir.join("throughput-vs-size.svg");
    assert!(files.contains(&chart), "{files:?}");
    assert_both_series(&chart);
    let svg = std::fs::read_to_string(&chart).expect("chart");
    let labels = texts(&svg);
    // A tick at every size measured, and none at plotters' own powers of ten.
    for want in ["64 B", "4 KiB", "64 KiB", "1 MiB", "16 MiB − 1 B"] {
        assert!(labels.contains(&want), "{want:?} not in {labels:?}");
    }
    for l in &labels {
        assert!(!l.ends_with("0B") && !l.contains("00000"), "{l:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_mtu_chart_has_both_ceilings_kernel_ours_and_ours_s_at_each_mtu() {
    let cells = mtu_plan(&FULL_MTUS, false).cells;
    let (plan, runs) = with_ceiling_runs(cells);
    // The sweep's other-MTU cells stay out of the size chart: only the MTU chart.
    let dir = temp_dir("mtu");
    let files = render::charts(&summarize(&plan, &runs), &dir).expect("charts");
    let chart = dir.join("throughput-vs-mtu.svg");
    assert_eq!(files, std::slice::from_ref(&chart));
    assert_both_series(&chart);
    let svg = std::fs::read_to_string(&chart).expect("chart");
    for (legend, colour) in [
        ("ceiling: raw packets, no TCP", "#2CA02C"),
        ("ceiling with an ACK back per 2 packets", "#FF7F0E"),
        ("tcp-bth S framing + GSO (ours S)", "#9467BD"),
        ("ceiling: 64 KiB GSO super-packets, no TCP", "#8C564B"),
    ] {
        assert!(svg.contains(legend), "{legend}");
        let lines = svg.split("<polyline").skip(1);
        assert!(
            lines.filter(|l| l.contains(colour)).count() >= 1,
            "{legend}: its line"
        );
    }
    assert_eq!(svg.matches("<circle").count(), 6 * FULL_MTUS.len());
    // Ours S's points are its own Gbit/s: twice ours' at each MTU (`with_ceiling_runs`).
    let results = summarize(&plan, &runs);
    for c in &results {
        assert_eq!(c.ours_seq_over_ours, Some(2.0), "{}", c.cell.id);
    }
    let labels = texts(&svg);
    for want in ["1500 B", "4 KiB", "9000 B", "65000 B"] {
        assert!(labels.contains(&want), "{want:?} not in {labels:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_runs_device_drops_add_the_stacks_own_devices_to_the_topologys_for_ours_only() {
    assert_eq!(add_drops(Some(7), Some(5), Stack::Ours), Some(12));
    assert_eq!(add_drops(Some(7), Some(5), Stack::OursSeq), Some(12));
    assert_eq!(add_drops(None, Some(5), Stack::Kernel), Some(5));
    assert_eq!(add_drops(None, Some(5), Stack::Ceiling), Some(5));
    // A part that could not be read makes the whole unknown, not smaller.
    assert_eq!(add_drops(None, Some(5), Stack::Ours), None);
    assert_eq!(add_drops(Some(7), None, Stack::Ours), None);
}

/// The detail of a run of ours, to edit.
pub(super) fn ours_mut(r: &mut RunRecord) -> &mut OursDetail {
    match &mut r.detail {
        Some(StackDetail::Ours(o)) => o.as_mut(),
        _ => panic!("{:?} has no detail of ours", r.stack),
    }
}

/// The quick plan's first cell with three runs of each stack, ours' run `i` given to `edit`.
fn three_runs(edit: impl Fn(usize, &mut RunRecord)) -> (Plan, Vec<RunRecord>) {
    let cells = vec![plan(true).cells.remove(0)];
    let mut runs = Vec::new();
    for run in 0..3 {
        let mut r = RunRecord::synthetic(&cells[0].id, Stack::Ours, run, 1.0);
        edit(run, &mut r);
        runs.push(r);
        runs.push(RunRecord::synthetic(&cells[0].id, Stack::Kernel, run, 2.0));
    }
    let plan = Plan {
        quick: true,
        runs: 3,
        cells,
    };
    (plan, runs)
}

#[test]
fn the_table_shows_the_relays_median_share_of_a_core_and_a_dash_without_a_relay() {
    let (plan, runs) = three_runs(|run, r| r.relay_busy = Some([0.91, 0.97, 0.99][run]));
    let results = summarize(&plan, &runs);
    assert_eq!(results[0].ours.relay_busy, Some(0.97));
    assert_eq!(results[0].kernel.relay_busy, None);
    let table = super::render::markdown(&results);
    let header: Vec<&str> = table.lines().next().unwrap().split('|').collect();
    let col = header
        .iter()
        .position(|h| h.trim() == "relay busy")
        .unwrap();
    let cell = |stack: &str| -> String {
        let row = table
            .lines()
            .find(|l| l.contains(&format!("| {stack} |")))
            .unwrap();
        row.split('|').nth(col).unwrap().trim().to_string()
    };
    assert_eq!(cell("ours"), "97 %");
    // Kernel TCP's row in a bulk cell names what its socket buffer kept outstanding.
    assert_eq!(cell("kernel (outq 3.0 MiB)"), "–");
}

/// What held ours' sender back: per run the busier side's shares, their medians per cell, and
/// a table row per cell that has them (none for kernel TCP).
#[test]
fn the_senders_limits_are_medians_of_the_busier_side() {
    use bth_perf::{LimitsSummary, PathSummary};
    let path = |busy: u64, cwnd: u64| PathSummary {
        limits: LimitsSummary {
            busy_us: busy,
            sending_us: busy - cwnd,
            cwnd_us: cwnd,
            ..LimitsSummary::default()
        },
        ..PathSummary::default()
    };
    let (plan, runs) = three_runs(|run, r| {
        // The client sent the data; the server's few control messages must not count.
        let o = ours_mut(r);
        o.client_path = path(1000, [900, 500, 800][run]);
        o.server_path = path(10, 10);
    });
    let results = summarize(&plan, &runs);
    let held = results[0].ours.sender_held.expect("ours has them");
    assert!(
        (held[0] - 0.2).abs() < 1e-9 && (held[1] - 0.8).abs() < 1e-9,
        "{held:?}"
    );
    assert_eq!(results[0].kernel.sender_held, None);
    let table = super::render::limits_markdown(&results);
    let row = table.lines().nth(2).expect("one row");
    assert_eq!(
        row,
        format!(
            "| {} | ours | 20 % | 80 % | 0 % | 0 % | 0 % | 0 % |",
            results[0].cell.id
        )
    );
    // Ours S ran no run here: no row of its own.
    assert_eq!(table.lines().count(), 3, "{table}");
    assert!(super::render::limits_markdown(&summarize(&plan, &[])).is_empty());
}

/// The ours/kernel column gives the range of the single runs' ratios beside the ratio of the
/// medians: each run of ours over kernel TCP's run of the same number, a failed run's pair
/// left out, and no range from fewer than two pairs.
#[test]
fn the_ratio_column_gives_the_single_runs_range() {
    // Kernel TCP moves 2.0 Gbit/s in each run: ratios 0.5, 0.75 and 1.5, medians 1.5 / 2.0.
    let (plan, mut runs) = three_runs(|run, r| r.gbps = [1.0, 1.5, 3.0][run]);
    let ratio_cell = |runs: &[RunRecord]| {
        let results = summarize(&plan, runs);
        let table = super::render::markdown(&results);
        let row = table.lines().find(|l| l.contains("| ours |")).unwrap();
        let cols: Vec<&str> = row.split('|').collect();
        (
            results[0].ours_over_kernel_runs,
            cols[cols.len() - 2].trim().to_string(),
        )
    };
    assert_eq!(
        ratio_cell(&runs),
        (Some((0.5, 1.5)), "0.75× (0.50–1.50)".to_string())
    );
    let fail = |runs: &mut Vec<RunRecord>, run: usize| {
        let r = runs
            .iter_mut()
            .find(|r| r.stack == Stack::Kernel && r.run == run);
        r.unwrap().error = Some("refused".into());
    };
    fail(&mut runs, 2);
    assert_eq!(
        ratio_cell(&runs),
        (Some((0.5, 0.75)), "0.75× (0.50–0.75)".to_string())
    );
    fail(&mut runs, 1);
    assert_eq!(ratio_cell(&runs), (None, "0.75×".to_string()));
}

/// The relay's share for the stacks is over the transfer, not the run's wall time: ours' runs
/// spend about as long in setup and teardown as in the transfer, when the relay idles.
#[test]
fn relay_busy_is_over_the_transfer_for_the_stacks_and_over_the_run_for_the_ceiling() {
    let share = bth_testbed::topology::RelayShare {
        cpu: std::time::Duration::from_millis(450),
        wall: std::time::Duration::from_millis(1100),
    };
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(super::relay_busy(share, Stack::Ours, 0.5), 0.9));
    assert!(close(super::relay_busy(share, Stack::OursSeq, 0.5), 0.9));
    assert!(close(super::relay_busy(share, Stack::Kernel, 0.5), 0.9));
    assert!(close(
        super::relay_busy(share, Stack::Ceiling, 1.0),
        450.0 / 1100.0
    ));
    // A failed run measured no transfer: over the wall time.
    assert!(close(
        super::relay_busy(share, Stack::Ours, 0.0),
        450.0 / 1100.0
    ));
}

/// A stack's name in messages is its name in the JSON file.
#[test]
fn a_stacks_name_is_its_json_name() {
    for s in [
        Stack::Kernel,
        Stack::Ours,
        Stack::OursSeq,
        Stack::Ceiling,
        Stack::CeilingAcked,
        Stack::CeilingGso,
    ] {
        let json = serde_json::to_string(&s).expect("serializable");
        assert_eq!(json, format!("\"{}\"", s.name()));
    }
    assert_eq!(Stack::OursSeq.name(), "ours_seq");
    assert_eq!(Stack::CeilingGso.name(), "ceiling_gso");
}

/// A ceiling names what bounded it: a saturated thread (the relay's, then the sender's, then
/// the receiver's, which polls over veth), else drops, else nothing, which makes it no
/// ceiling.
#[test]
fn a_ceiling_says_what_bounded_it() {
    use super::path_ceiling::bound;
    assert_eq!(bound(0.98, 0.60, None, 0.0), "the sender's core");
    assert_eq!(bound(0.97, 1.00, None, 0.0), "the sender's core");
    assert_eq!(bound(0.70, 0.95, None, 12.0), "the receiver's core");
    assert_eq!(bound(0.70, 0.60, Some(0.99), 0.0), "the relay's core");
    assert_eq!(bound(0.50, 0.40, Some(0.30), 3.0), "drops on the path");
    assert_eq!(
        bound(0.50, 0.48, None, 0.0),
        "neither: no core saturated, nothing dropped"
    );
}
