//! `bth-compare`'s command line without root: `--help` explains `--mtu`, `--dry-run` lists
//! the MTU sweep's cells, and an MTU out of range is refused saying the range.

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

#[test]
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
    ] {
        assert!(help.contains(want), "{want:?} not in --help:\n{help}");
    }
}

#[test]
fn dry_run_lists_the_mtu_sweep_with_its_ceiling() {
    let (ok, plan, err) = run(&["--mtu", "1500,9000,65000", "--dry-run"]);
    assert!(ok, "{err}");
    assert!(plan.starts_with("3 cells x 3 runs per stack"), "{plan}");
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

#[test]
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

#[test]
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

#[test]
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
