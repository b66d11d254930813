//! `bth-perf local --framing seq`: S framing (spec amendment 3) over the TUN data path, veth
//! and the impairment relay, every byte verified, and the framing each side ran. Without root
//! these are reported `ignored (needs …)` (a failure under CI=true).

use serde_json::Value;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

const BIN: &str = env!("CARGO_BIN_EXE_bth-perf");
static N: AtomicU32 = AtomicU32::new(0);

use bth_tests::describe_output as describe;

/// `bth-perf local --json` with a namespace prefix of its own and `extra`; its namespaces are
/// gone afterwards (deleted here if not, so a failure leaves nothing behind).
fn local_json(extra: &[&str]) -> Value {
    let prefix = format!(
        "bthpf{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    );
    let mut args = vec!["local", "--prefix", &prefix, "--timeout", "60", "--json"];
    args.extend_from_slice(extra);
    let out: Output = Command::new(BIN)
        .args(&args)
        .output()
        .expect("run bth-perf");
    for ns in [format!("{prefix}-a"), format!("{prefix}-b")] {
        if std::path::Path::new(&format!("/run/netns/{ns}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", &ns]).status();
            panic!("bth-perf left {ns} behind");
        }
    }
    assert!(out.status.success(), "{}", describe(&out));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", describe(&out)))
}

/// A verified run of `op` asking for `framing` on both sides over `path` (extra arguments):
/// both sides ok, every message verified where it completes, and S framing ran exactly when
/// asked for. Returns the JSON of the two sides' first rows (client, server).
fn verified(op: &str, framing: &str, path: &[&str]) -> (Value, Value) {
    verified_n(op, framing, 65536, 200, path)
}

/// [`verified`] with `count` messages of `size` bytes.
fn verified_n(op: &str, framing: &str, size: u32, count: u64, path: &[&str]) -> (Value, Value) {
    let (size, n) = (size.to_string(), count.to_string());
    let mut args = vec![
        "--op",
        op,
        "-s",
        &size,
        "-n",
        &n,
        "--verify",
        "--framing",
        framing,
    ];
    args.extend_from_slice(path);
    let v = local_json(&args);
    let (c, s) = (&v["client"], &v["server"]);
    assert_eq!(
        (c["ok"].as_bool(), s["ok"].as_bool()),
        (Some(true), Some(true)),
        "{v}"
    );
    let (cr, sr) = (&c["rows"][0], &s["rows"][0]);
    let seq = framing == "seq";
    assert_eq!(cr["seq_framed"].as_bool(), Some(seq), "{cr}");
    assert_eq!(sr["seq_framed"].as_bool(), Some(seq), "{sr}");
    let checked = cr["verified"].as_u64().unwrap() + sr["verified"].as_u64().unwrap();
    assert_eq!(
        checked, count,
        "every message checked on the side where it completes: {v}"
    );
    let errors = |r: &Value| r["errors"].as_array().map_or(0, Vec::len);
    assert_eq!(errors(cr) + errors(sr), 0, "{v}");
    (cr.clone(), sr.clone())
}

fn counter(r: &Value, name: &str) -> u64 {
    r["counters"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {name}: {r}"))
}

/// S framing with segmentation offload (the default): the client writes super-segments of
/// one message, each standing for many segments, and the server's device (TSO on) hands them
/// over whole; per-segment framing writes none; with --no-gso neither side sees one.
fn s_framing_moves_super_segments_whole_across_veth() {
    let (c, s) = verified_n("send", "seq", 1 << 20, 64, &[]);
    let (sent, stands_for) = (counter(&c, "gso_sent"), counter(&c, "gso_segments"));
    assert!(
        sent > 0 && stands_for > 10 * sent,
        "{sent} super-segments for {stands_for}"
    );
    assert!(counter(&s, "super_segments_in") > 0, "{s}");
    for (framing, extra) in [("per-segment", None), ("seq", Some("--no-gso"))] {
        let path: Vec<&str> = extra.into_iter().collect();
        let (c, s) = verified_n("send", framing, 1 << 20, 64, &path);
        assert_eq!(counter(&c, "gso_sent"), 0, "{framing} {extra:?}");
        assert_eq!(counter(&s, "super_segments_in"), 0, "{framing} {extra:?}");
    }
}

fn s_framing_sends_writes_and_reads_over_veth_are_verified() {
    for op in ["send", "write-imm", "read"] {
        verified(op, "seq", &[]);
    }
}

/// Through the relay with loss, reordering and duplication: S segments are retransmitted,
/// re-cut and placed out of order like per-segment ones.
fn s_framing_through_an_impaired_relay_is_verified() {
    verified(
        "mixed",
        "seq",
        &[
            "--relay-loss",
            "0.01",
            "--relay-reorder",
            "0.05",
            "--relay-duplicate",
            "0.01",
        ],
    );
}

/// The same run asking for per-segment framing runs per-segment (the control).
fn per_segment_framing_is_what_runs_unless_asked() {
    verified("send", "per-segment", &[]);
}

/// An unknown framing is refused before anything is set up, naming the two there are. (Both
/// sides of `local` run the same options; what one side asking alone negotiates is tested
/// segment by segment in tcp-bth/src/conn/tests.)
fn an_unknown_framing_is_refused_clearly() {
    let out = Command::new(BIN)
        .args(["local", "--framing", "both"])
        .output()
        .expect("run bth-perf");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("expected per-segment or seq"), "{err}");
}

bth_tests::test_main!(
    an_unknown_framing_is_refused_clearly,
    s_framing_sends_writes_and_reads_over_veth_are_verified[NetAdmin],
    s_framing_through_an_impaired_relay_is_verified[NetAdmin],
    s_framing_moves_super_segments_whole_across_veth[NetAdmin],
    per_segment_framing_is_what_runs_unless_asked[NetAdmin],
);
