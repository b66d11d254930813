//! Our stack to our stack with tcp_bth over the io_uring TUN data path, between two namespaces
//! this test creates: joined by veth, and through the userspace impairment relay (loss and
//! reordering). Mixed SEND / WRITE-with-immediate / READ messages, every byte verified.

use bth_tests::tunpair::run_perf;
use bth_tools::perf::{PerfConfig, PerfOp, PerfReport};
use bth_tools::topology::TwoNs;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tcp_bth_io::sim::LinkConfig;

static N: AtomicU32 = AtomicU32::new(0);

/// Total bytes moved by each test: 1 GiB by default (CI), BTH_TUN_BYTES overrides it.
fn total_bytes(default: u64) -> u64 {
    std::env::var("BTH_TUN_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run(
    relay: Option<LinkConfig>,
    total: u64,
) -> (PerfReport, PerfReport, Option<tcp_bth_io::tun::RelayStats>) {
    let size = 256 * 1024;
    let cfg = PerfConfig {
        op: PerfOp::Mixed,
        size,
        count: total.div_ceil(u64::from(size)),
        depth: 8,
        verify: true,
        seed: 3,
        plain: false,
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
    let count = total.div_ceil(256 * 1024);
    assert_eq!(c.messages, count);
    // SEND and WRITE messages are verified at the server, READs at the client.
    assert_eq!(s.verified + c.verified, count, "every message verified");
    assert!(c.verified > 0 && s.verified > 0);
}

fn bth_between_namespaces_over_veth() {
    let total = total_bytes(1 << 30);
    let (c, s, _) = run(None, total);
    check(&c, &s, total);
    println!(
        "veth: {} bytes in {:?} ({:.2} Gbit/s)",
        c.bytes,
        c.elapsed,
        c.gbps()
    );
}

fn bth_between_namespaces_through_the_impairment_relay() {
    let total = total_bytes(1 << 30);
    let link = LinkConfig::default()
        .with_delay(Duration::from_micros(20))
        .with_bandwidth_bps(0)
        .with_loss(0.005)
        .with_reorder(0.05, Duration::from_micros(100))
        .with_duplicate(0.001)
        .with_seed(9);
    let (c, s, relay) = run(Some(link), total);
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

bth_tests::test_main!(
    bth_between_namespaces_over_veth[NetAdmin],
    bth_between_namespaces_through_the_impairment_relay[NetAdmin],
);
