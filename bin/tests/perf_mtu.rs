//! `bth-perf local` at MTUs other than Ethernet's: every device of the two namespaces (veth
//! pair or the relay's TUN devices, and both stacks' TUN devices) at the MTU given, our
//! connections' MSS following it, every byte verified. Without root these are reported
//! `ignored (needs …)` (a failure under CI=true); the range check needs nothing.

use serde_json::Value;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

const BIN: &str = env!("CARGO_BIN_EXE_bth-perf");
static N: AtomicU32 = AtomicU32::new(0);

const SIZE: u64 = 65536;
const COUNT: u64 = 300;

use bth_tests::describe_output as describe;

/// `bth-perf local` with a namespace prefix of its own and `extra`; checks that its namespaces
/// are gone afterwards (deleting them if not, so a failure leaves nothing behind).
fn local(extra: &[&str]) -> Output {
    let prefix = format!(
        "bthpm{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    );
    let mut args = vec!["local", "--prefix", &prefix, "--timeout", "60"];
    args.extend_from_slice(extra);
    let out = Command::new(BIN)
        .args(&args)
        .output()
        .expect("run bth-perf");
    let mut left = Vec::new();
    for ns in [format!("{prefix}-a"), format!("{prefix}-b")] {
        if std::path::Path::new(&format!("/run/netns/{ns}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", &ns]).status();
            left.push(ns);
        }
    }
    assert!(left.is_empty(), "bth-perf left {left:?} behind");
    out
}

/// The path between the namespaces of a run.
#[derive(Clone, Copy, PartialEq)]
enum Path {
    Veth,
    Relay,
    /// The relay with its thread on a core of its own (`--pin-relay`).
    PinnedRelay,
}

/// A verified SEND run at `mtu` over `path`: both sides ok, every message verified by the
/// server, and the client's data segments as large as the MTU allows (our MSS is MTU − 40, a
/// segment carries 40 option bytes less).
fn verified_send_at(mtu: u32, path: Path) {
    let mtu_arg = mtu.to_string();
    let (size, count) = (SIZE.to_string(), COUNT.to_string());
    let mut args = vec![
        "--op", "send", "-s", &size, "-n", &count, "--verify", "--json", "--mtu", &mtu_arg,
    ];
    match path {
        Path::Veth => {}
        Path::Relay => args.push("--relay"),
        Path::PinnedRelay => args.extend(["--relay", "--pin-relay"]),
    }
    let out = local(&args);
    assert!(out.status.success(), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let cpus = bth_testbed::pinning::allowed_cpus().expect("this thread's CPU mask");
    let pinned = match bth_testbed::pinning::split(&cpus) {
        Some(c) => format!("pinned (--pin-relay): {}", c.describe()),
        None => "nothing pinned".into(),
    };
    assert_eq!(
        err.contains(&pinned),
        path == Path::PinnedRelay,
        "{}",
        describe(&out)
    );
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", describe(&out)));
    let (c, s) = (&v["client"], &v["server"]);
    assert_eq!(
        (c["ok"].as_bool(), s["ok"].as_bool()),
        (Some(true), Some(true))
    );
    assert_eq!(
        (c["mtu"].as_u64(), s["mtu"].as_u64()),
        (Some(mtu.into()), Some(mtu.into()))
    );
    let want = match path {
        Path::Veth => "veth, MTU",
        _ => "relay, MTU",
    };
    assert!(
        c["connection"].as_str().is_some_and(|x| x.contains(want)),
        "{c}"
    );
    let (cr, sr) = (&c["rows"][0], &s["rows"][0]);
    assert_eq!(sr["verified"], COUNT, "the server checked every message");
    assert_eq!(cr["peer"]["verified"], COUNT, "and told the client");
    let bytes = SIZE * COUNT;
    let sent = cr["counters"]["recovery"]["segments_sent"]
        .as_u64()
        .expect("segments sent");
    let payload = u64::from(mtu) - 80;
    // At least as many as full segments need; above 1500, fewer than 1500-byte segments would.
    assert!(
        sent >= bytes / payload && (mtu == 1500 || sent < bytes / (1500 - 80)),
        "{sent} data segments for {bytes} bytes at MTU {mtu}"
    );
}

fn local_send_at_mtu_9000_over_veth_is_verified() {
    verified_send_at(9000, Path::Veth);
}

fn local_send_at_mtu_65000_over_veth_is_verified() {
    verified_send_at(65_000, Path::Veth);
}

fn local_send_at_mtu_9000_through_the_relay_is_verified() {
    verified_send_at(9000, Path::Relay);
}

fn local_send_through_the_pinned_relay_is_verified() {
    verified_send_at(1500, Path::PinnedRelay);
}

/// The plain byte stream at MTU 8182, whose packet and virtio-net header fill two pages
/// exactly. The driver's buffers used to be exactly that, shorter than the longest segment a
/// plain connection with timestamps may build (MSS + 48 bytes of TCP); the connection refused
/// to build even its SYN and the client reported "no answer to 4 SYNs". Buffers now have room
/// for the longest TCP header, and a too-short one ends the connection with its reason.
fn local_plain_send_at_an_mtu_that_fills_whole_pages_is_verified() {
    let out = local(&[
        "--plain", "--op", "send", "-s", "65536", "-n", "50", "--verify", "--json", "--mtu", "8182",
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", describe(&out)));
    assert_eq!(v["server"]["rows"][0]["verified"], 50, "{v}");
}

/// `--pin-relay` without the relay is refused before anything is set up, saying what it needs.
fn pinning_without_the_relay_is_refused_clearly() {
    let out = Command::new(BIN)
        .args(["local", "--pin-relay"])
        .output()
        .expect("run bth-perf");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--pin-relay needs the relay"), "{err}");
}

/// An MTU outside 576..=65535 is refused before anything is set up, saying the range.
fn an_mtu_out_of_range_is_refused_clearly() {
    for m in ["575", "65536", "100000"] {
        let out = Command::new(BIN)
            .args(["local", "--mtu", m])
            .output()
            .expect("run bth-perf");
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("expected 576 to 65535 bytes"), "{m}: {err}");
    }
    let out = Command::new(BIN)
        .args(["local", "--help"])
        .output()
        .expect("run bth-perf");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("576 to 65535") && help.contains("MTU − 40"),
        "{help}"
    );
}

bth_tests::test_main!(
    pinning_without_the_relay_is_refused_clearly,
    local_send_at_mtu_9000_over_veth_is_verified[NetAdmin],
    local_send_at_mtu_65000_over_veth_is_verified[NetAdmin],
    local_send_at_mtu_9000_through_the_relay_is_verified[NetAdmin],
    local_send_through_the_pinned_relay_is_verified[NetAdmin],
    local_plain_send_at_an_mtu_that_fills_whole_pages_is_verified[NetAdmin],
    an_mtu_out_of_range_is_refused_clearly,
);
