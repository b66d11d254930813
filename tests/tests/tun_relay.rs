//! The impairment relay between two namespaces these tests create: our stack through a relay
//! that sprays packets over several paths (every message verified, segments placed beyond
//! holes), and the relay's ceiling as `bth-compare` can measure it (kernel TCP over veth and
//! through the relay).

use bth_tools::compare::{ceiling_cell, relay_ceiling};
use bth_tools::perf::{PerfConfig, PerfOp};
use bth_tools::topology::TwoNs;
use bth_tools::tunpair::run_pair;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tcp_bth_io::sim::{LinkConfig, Spray, SprayMode};

static N: AtomicU32 = AtomicU32::new(0);

/// A namespace prefix unique to this process and call.
fn prefix() -> String {
    format!(
        "btr{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

fn gone(ns: &str) -> bool {
    !std::path::Path::new(&format!("/run/netns/{ns}")).exists()
}

fn spraying_relay_carries_every_message() {
    let spray = Spray::even(4, Duration::from_micros(200), SprayMode::RoundRobin).expect("paths");
    let link = LinkConfig::default()
        .with_delay(Duration::from_micros(20))
        .with_bandwidth_bps(0)
        .with_spray(spray)
        .with_seed(5);
    let cfg = PerfConfig {
        op: PerfOp::Send,
        size: 64 * 1024,
        count: 400,
        depth: 8,
        verify: true,
        seed: 5,
        plain: false,
    };
    let mut ns = TwoNs::create(&prefix(), Some(link)).expect("namespaces");
    let run = run_pair(&ns, &cfg, Duration::from_secs(120)).expect("perf run");
    let relay = ns.stop_relay().expect("relay stats");
    let (c, s) = (&run.client, &run.server);
    assert!(c.report.errors.is_empty(), "client: {:?}", c.report.errors);
    assert!(s.report.errors.is_empty(), "server: {:?}", s.report.errors);
    assert_eq!(
        s.report.verified, cfg.count,
        "every SEND checked at the server"
    );
    // The data goes from the client (namespace B) to the server (A): round-robin over four
    // lossless paths puts the same number of packets, to one, on each.
    let paths = &relay.b_to_a_paths;
    assert_eq!(paths.len(), 4);
    let (min, max) = (
        paths.iter().map(|p| p.sent).min().unwrap_or(0),
        paths.iter().map(|p| p.sent).max().unwrap_or(0),
    );
    assert!(max - min <= 1 && min > 0, "{paths:?}");
    assert_eq!(relay.b_to_a.dropped(), 0);
    // 200 µs of spread reorders the data: the receiver placed segments beyond holes.
    assert!(s.ooo_placed > 0, "nothing arrived out of order: {relay:?}");
}

fn relay_ceiling_runs_kernel_tcp_over_both_links() {
    let cell = ceiling_cell(1 << 20, 16);
    let p = prefix();
    let ceiling = relay_ceiling(&p, &cell, None, 1).expect("topologies");
    for ns in ["v-a", "v-b", "r-a", "r-b"] {
        assert!(gone(&format!("{p}{ns}")), "{p}{ns} left behind");
    }
    assert_eq!((ceiling.veth.len(), ceiling.relay.len()), (1, 1));
    for r in ceiling.veth.iter().chain(&ceiling.relay) {
        assert_eq!(r.error, None);
        assert_eq!(r.bytes, 16 << 20);
    }
    assert!(ceiling.ratio().is_some_and(|r| r > 0.0), "{ceiling:?}");
    // The relay carried the data, MTU-sized: at least one packet per 1448 payload bytes.
    assert!(
        ceiling.relay_packets >= (16 << 20) / 1448,
        "{} packets through the relay",
        ceiling.relay_packets
    );
    assert_eq!(ceiling.relay_dropped, 0);
    let line = ceiling.describe();
    println!("{line}");
    assert!(
        line.contains("relay/veth") && line.contains("packets/s"),
        "{line}"
    );
}

bth_tests::test_main!(
    spraying_relay_carries_every_message[NetAdmin],
    relay_ceiling_runs_kernel_tcp_over_both_links[NetAdmin],
);
