//! Our stack to our stack with tcp_bth over the io_uring TUN data path, between two namespaces
//! this test creates: joined by veth, and through the userspace impairment relay (loss and
//! reordering). Mixed SEND / WRITE-with-immediate / READ messages, and plain RDMA WRITEs (no
//! immediate: the server checks its whole target region when the client says it is done),
//! every byte verified.

use bth_io::sim::LinkConfig;
use bth_perf::{PerfConfig, PerfOp, PerfReport, RunMode, MAX_VERIFIED_WRITE_REGION};
use bth_testbed::topology::TwoNs;
use bth_tests::tunpair::{impaired_link, run_perf};
use std::sync::atomic::{AtomicU32, Ordering};

static N: AtomicU32 = AtomicU32::new(0);

const SIZE: u32 = 256 * 1024;

/// Total bytes moved by each test: 1 GiB by default (CI), BTH_TUN_BYTES overrides it.
fn total_bytes(default: u64) -> u64 {
    std::env::var("BTH_TUN_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Plain WRITE runs: 64 MiB by default (the server holds a target region of that size),
/// BTH_TUN_BYTES overrides it up to the largest region a verified plain WRITE run may use.
fn plain_write_bytes() -> u64 {
    total_bytes(64 << 20).min(MAX_VERIFIED_WRITE_REGION)
}

fn run(
    op: PerfOp,
    relay: Option<LinkConfig>,
    total: u64,
) -> (PerfReport, PerfReport, Option<bth_io::tun::RelayStats>) {
    let cfg = PerfConfig {
        op,
        size: SIZE,
        count: total.div_ceil(u64::from(SIZE)),
        tx_depth: 8,
        rx_depth: 8,
        mode: RunMode::verified(),
        seed: 3,
        ..PerfConfig::default()
    };
    let prefix = format!(
        "bt{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    );
    let mut ns = TwoNs::create(&prefix, relay).expect("namespaces");
    let (c, s) = run_perf(&ns, &cfg);
    (c, s, ns.stop_relay())
}

fn check(c: &PerfReport, s: &PerfReport, total: u64) {
    assert!(c.errors.is_empty(), "client errors: {:?}", c.errors);
    assert!(s.errors.is_empty(), "server errors: {:?}", s.errors);
    let count = total.div_ceil(u64::from(SIZE));
    assert_eq!(c.messages, count);
    // SEND and WRITE messages are verified at the server, READs at the client.
    assert_eq!(s.verified + c.verified, count, "every message verified");
    assert!(c.verified > 0 && s.verified > 0);
}

/// Plain WRITE: the client completes each message when it is acknowledged; the server has no
/// completion per message and checks every message at its own offset once the done message
/// (which follows the WRITEs in the stream) arrives.
fn check_plain_write(c: &PerfReport, s: &PerfReport, total: u64) {
    assert!(c.errors.is_empty(), "client errors: {:?}", c.errors);
    assert!(s.errors.is_empty(), "server errors: {:?}", s.errors);
    let count = total.div_ceil(u64::from(SIZE));
    assert_eq!(c.messages, count, "client completions");
    assert_eq!(c.bytes, count * u64::from(SIZE));
    assert_eq!(c.verified, 0, "plain WRITEs are checked at the server only");
    assert_eq!(s.messages, count, "the done message's count");
    assert_eq!(s.bytes, count * u64::from(SIZE), "server-side bytes");
    assert_eq!(
        s.verified, count,
        "every message verified at its own offset"
    );
    assert!(
        s.arrived.is_empty(),
        "no completion per plain WRITE at the server"
    );
}

/// "N bytes in T (G Gbit/s)", as the client measured it.
fn rate(c: &PerfReport) -> String {
    format!(
        "{} bytes in {:?} ({:.2} Gbit/s)",
        c.bytes,
        c.elapsed,
        c.gbps()
    )
}

fn bth_between_namespaces_over_veth() {
    let total = total_bytes(1 << 30);
    let (c, s, _) = run(PerfOp::Mixed, None, total);
    check(&c, &s, total);
    staged_once(&c, &s);
    println!("veth: {}", rate(&c));
}

/// READ responses are copied once, out of the responder's region, when the request arrives;
/// the TUN driver then writes their segments from that copy (gathered), whatever their
/// length, so no byte of them is copied twice. The server answers the client's READs.
fn staged_once(c: &PerfReport, s: &PerfReport) {
    for (name, r) in [("client", c), ("server", s)] {
        let k = &r.counters;
        assert_eq!(k.payload_staged_copied, 0, "{name}: {k:?}");
        assert!(k.payload_copied + k.payload_gathered > 0, "{name}: {k:?}");
    }
    // Mixed runs a third of the messages as READs of SIZE bytes.
    let reads = c.messages / 3 * u64::from(SIZE);
    assert!(
        s.counters.payload_staged >= reads,
        "the server's READ responses: {} bytes staged, at least {reads} read",
        s.counters.payload_staged
    );
    assert!(
        s.counters.payload_gathered >= s.counters.payload_staged,
        "the staged bytes leave gathered: {:?}",
        s.counters
    );
}

fn bth_between_namespaces_through_the_impairment_relay() {
    let total = total_bytes(1 << 30);
    let (c, s, relay) = run(PerfOp::Mixed, Some(impaired_link()), total);
    check(&c, &s, total);
    let r = relay.expect("relay stats");
    assert!(
        r.a_to_b.dropped() + r.b_to_a.dropped() > 0,
        "relay dropped nothing"
    );
    assert!(
        r.a_to_b.reordered + r.b_to_a.reordered > 0,
        "relay reordered nothing"
    );
}

fn plain_rdma_write_between_namespaces_over_veth() {
    let total = plain_write_bytes();
    let (c, s, _) = run(PerfOp::Write, None, total);
    check_plain_write(&c, &s, total);
    println!(
        "veth, plain WRITE: {}, {} messages verified at the server",
        rate(&c),
        s.verified
    );
}

fn plain_rdma_write_through_the_impairment_relay() {
    let total = plain_write_bytes();
    let (c, s, relay) = run(PerfOp::Write, Some(impaired_link()), total);
    check_plain_write(&c, &s, total);
    let r = relay.expect("relay stats");
    // The WRITEs go from the client (namespace B) to the server (A).
    assert!(
        r.b_to_a.dropped() > 0 && r.b_to_a.reordered > 0,
        "the relay dropped or reordered none of the WRITE data: {r:?}"
    );
    println!(
        "relay, plain WRITE: {}; client to server {} dropped, {} reordered",
        rate(&c),
        r.b_to_a.dropped(),
        r.b_to_a.reordered
    );
}

bth_tests::test_main!(
    bth_between_namespaces_over_veth[NetAdmin],
    bth_between_namespaces_through_the_impairment_relay[NetAdmin],
    plain_rdma_write_between_namespaces_over_veth[NetAdmin],
    plain_rdma_write_through_the_impairment_relay[NetAdmin],
);
