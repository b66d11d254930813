//! `bth`'s command line without root: the demo refuses what would run nothing, fail only at
//! its end or mean something else than asked, and `decode` says what the input is taken as
//! and what to try instead.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_bth");

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(BIN).args(args).output().expect("run bth");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_demo_refuses_no_messages_and_an_unwritable_capture_before_it_runs() {
    let (ok, out, err) = run(&["demo", "--messages", "0"]);
    assert!(!ok && err.contains("--messages 0"), "{out}{err}");
    let (ok, out, err) = run(&["demo", "--pcap", "/nonexistent-dir/x.pcap"]);
    assert!(
        !ok && err.contains("--pcap /nonexistent-dir/x.pcap"),
        "{err}"
    );
    assert!(
        !out.contains("messages verified"),
        "ran before refusing: {out}"
    );
}

/// A smallest message of 0 bytes is refused (it used to become 1 without a word), and a
/// negative probability is refused for its range, not taken for an unknown option `-0`.
#[test]
fn the_demo_refuses_a_zero_min_size_and_a_negative_loss_saying_why() {
    let (ok, out, err) = run(&["demo", "--min-size", "0"]);
    assert!(!ok && err.contains("1 <= --min-size"), "{out}{err}");
    let (ok, out, err) = run(&["demo", "--loss", "-0.5"]);
    assert!(!ok && err.contains("within [0, 1], got -0.5"), "{out}{err}");
}

#[test]
fn decode_says_what_to_try_and_when_an_option_area_is_only_padding() {
    // An option area (timestamps) decoded as one option: refused, with the flags to try.
    let (ok, _, err) = run(&["decode", "0101080a0000000100000002"]);
    assert!(
        !ok && err.contains("--options") && err.contains("--segment"),
        "{err}"
    );
    let (ok, out, err) = run(&["decode", "--options", "0101080a0000000100000002"]);
    assert!(
        ok && out.contains("timestamps") && out.ends_with('\n'),
        "{out}{err}"
    );
    let (ok, out, err) = run(&["decode", "--options", "0101"]);
    assert!(
        ok && out.contains("no options (only padding)"),
        "{out}{err}"
    );
}
