//! `bth-compare`'s command line: without root, `--help` explains `--mtu` and ours S,
//! `--dry-run` lists the MTU sweep's cells and counts every stack's runs, and an MTU out of
//! range is refused saying the range; as root, one small cell runs end to end and its table
//! and JSON file have an ours S row of verified messages (without root cargo reports it
//! `ignored (needs …)`, a failure under CI=true: the `bth_tests` gate).

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_bth-compare");

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .output()
        .expect("run bth-compare");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn help_explains_mtu_and_the_ceiling() {
    let (ok, help, _) = run(&["--help"]);
    assert!(ok);
    for want in [
        "--mtu <BYTES,...>",
        "576 to 65535",
        "path's ceiling",
        "protocol 253",
        "ours/ceiling",
        "throughput-vs-mtu.svg",
        "1500, 4096, 9000",
        "ours S",
        "S framing",
        "ours_seq",
        "GSO ceiling",
        "ours/GSO",
    ] {
        assert!(help.contains(want), "{want:?} not in --help:\n{help}");
    }
}

fn dry_run_lists_the_mtu_sweep_with_its_ceiling() {
    let (ok, plan, err) = run(&["--mtu", "1500,9000,65000", "--dry-run"]);
    assert!(ok, "{err}");
    assert!(plan.starts_with("3 cells x 3 runs per stack"), "{plan}");
    // Kernel, ours and ours S, and the three ceilings, 3 runs each in each cell.
    assert!(
        plan.lines()
            .next()
            .unwrap()
            .contains("x 3 stacks + 27 runs of the path's ceiling")
            && plan.contains(" = 54 runs"),
        "{plan}"
    );
    for id in [
        "bulk-1MiB-veth ",
        "bulk-1MiB-veth-mtu9000 ",
        "bulk-1MiB-veth-mtu65000 ",
    ] {
        let line = plan.lines().find(|l| l.contains(id)).expect(id);
        assert!(line.contains("path's ceiling"), "{line}");
    }
    assert!(
        plan.contains("MTU 9000 B") && plan.contains("MTU 65000 B"),
        "{plan}"
    );
    // The full plan has the sweep too.
    let (ok, full, _) = run(&["--dry-run"]);
    assert!(ok && full.contains("bulk-1MiB-veth-mtu4096 "), "{full}");
}

fn an_mtu_out_of_range_is_refused_clearly() {
    for bad in ["1500,70000", "100", "jumbo"] {
        let (ok, _, err) = run(&["--mtu", bad, "--dry-run"]);
        assert!(!ok, "{bad}");
        assert!(
            err.contains("expected 576 to 65535 bytes") || err.contains("whole number of bytes"),
            "{bad}: {err}"
        );
    }
}

fn values_that_would_run_nothing_are_refused_clearly() {
    for (args, want) in [
        (
            &["--only", "nosuchcell", "--dry-run"][..],
            "matches no cell",
        ),
        (&["--runs", "0", "--dry-run"][..], "--runs 0"),
        (&["--relay-ceiling", "0"][..], "--relay-ceiling 0"),
    ] {
        let (ok, _, err) = run(args);
        assert!(!ok, "{args:?} accepted");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // --only also selects the full run's extra sections by name.
    let (ok, _, err) = run(&["--only", "relay-ceiling", "--dry-run"]);
    assert!(ok, "{err}");
}

fn only_picks_a_whole_id_alone_and_the_union_of_several_patterns() {
    let cells = |args: &[&str]| -> Vec<String> {
        let (ok, out, err) = run(args);
        assert!(ok, "{args:?}: {err}");
        // The plan's first line counts; each cell line starts with its id.
        out.lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect()
    };
    assert_eq!(
        cells(&["--only", "bulk-1MiB-veth", "--dry-run"]),
        ["bulk-1MiB-veth"]
    );
    let both = cells(&["--only", "bulk-1MiB-veth,spray4-200us-mtu", "--dry-run"]);
    assert_eq!(
        both,
        [
            "bulk-1MiB-veth",
            "bulk-1MiB-relay-spray4-200us-mtu9000",
            "bulk-1MiB-relay-spray4-200us-mtu65000"
        ]
    );
    // With --qps the picked cell runs at each count.
    assert_eq!(
        cells(&["--only", "bulk-4KiB-veth", "--qps", "1,8", "--dry-run"]),
        ["bulk-4KiB-veth", "bulk-4KiB-veth-q8"]
    );
    let (ok, _, err) = run(&["--only", "bulk-1MiB-veth,sprya4", "--dry-run"]);
    assert!(!ok);
    assert!(err.contains("sprya4 matches no cell"), "{err}");
    assert!(!err.contains("bulk-1MiB-veth matches"), "{err}");
}

fn the_quick_plan_runs_ours_s_in_every_cell_but_the_plain_one() {
    let (ok, plan, err) = run(&["--quick", "--dry-run"]);
    assert!(ok, "{err}");
    let first = plan.lines().next().unwrap();
    // 6 cells, 2 runs of each of 3 stacks, less ours S in the plain cell.
    assert!(
        first.starts_with("6 cells x 2 runs per stack x 3 stacks (1 plain cell without ours S)")
            && first.contains(" = 34 runs"),
        "{first}"
    );
}

/// As root: one small cell (`--only bulk-4KiB-veth --quick --runs 1`) runs kernel TCP, ours
/// and ours S, and the table and the JSON file have ours S's row of verified messages, which
/// ran S framing and wrote super-segments.
fn one_small_cell_has_an_ours_s_row_of_verified_messages() {
    let dir = std::env::temp_dir().join(format!("bth-compare-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("runs.json");
    let (j, charts) = (json.to_str().unwrap(), dir.join("charts"));
    let (ok, out, err) = run(&[
        "--only",
        "bulk-4KiB-veth",
        "--quick",
        "--runs",
        "1",
        "--json",
        j,
        "--charts",
        charts.to_str().unwrap(),
    ]);
    assert!(ok, "{err}\n{out}");
    assert!(out.contains("3 runs in"), "{out}");
    let row = out
        .lines()
        .find(|l| l.starts_with("| bulk-4KiB-veth | ours S | 1 |"))
        .unwrap_or_else(|| panic!("no ours S row:\n{out}"));
    // Its own ratio over kernel TCP in the last column.
    assert!(row.trim_end().ends_with("× |"), "{row}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).expect("JSON");
    let runs = v["runs"].as_array().expect("runs");
    let stacks: Vec<&str> = runs.iter().filter_map(|r| r["stack"].as_str()).collect();
    assert_eq!(stacks, ["kernel", "ours", "ours_seq"]);
    let seq = &runs[2];
    assert!(seq["error"].is_null(), "{seq}");
    assert_eq!(seq["messages"].as_u64(), Some(2000), "{seq}");
    assert_eq!(seq["verified"], seq["messages"], "{seq}");
    assert_eq!(seq["seq_framed"], true, "{seq}");
    assert!(seq["gso_sent"].as_u64().unwrap() > 0, "{seq}");
    assert_eq!(runs[1]["seq_framed"], false);
    assert_eq!(runs[1]["gso_sent"].as_u64(), Some(0));
    let cell = &v["cells"][0];
    assert_eq!(cell["ours_seq"]["runs_ok"].as_u64(), Some(1), "{cell}");
    assert!(
        cell["ours_seq_over_kernel"]
            .as_f64()
            .is_some_and(|r| r > 0.0),
        "{cell}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

bth_tests::test_main!(
    help_explains_mtu_and_the_ceiling,
    dry_run_lists_the_mtu_sweep_with_its_ceiling,
    an_mtu_out_of_range_is_refused_clearly,
    values_that_would_run_nothing_are_refused_clearly,
    only_picks_a_whole_id_alone_and_the_union_of_several_patterns,
    the_quick_plan_runs_ours_s_in_every_cell_but_the_plain_one,
    one_small_cell_has_an_ours_s_row_of_verified_messages[NetAdmin],
);
