//! The impairment relay between two namespaces these tests create: our stack through a relay
//! that sprays packets over several paths (every message verified, segments placed beyond
//! holes), kernel TCP's GSO super-packets through a lossy relay (every byte checked, losses
//! per segment), and the relay's ceiling as `bth-compare` can measure it (kernel TCP over veth
//! and through the relay).

use bth_io::sim::{LinkConfig, Spray, SprayMode};
use bth_io::tun::{enter_netns, RelayStats};
use bth_perf::tunpair::run_pair;
use bth_perf::{PerfConfig, PerfOp, RunMode};
use bth_testbed::topology::{TwoNs, A_LINK};
use bth_tests::netns::accept_within;
use bth_tests::pattern;
use bth_tools::compare::{ceiling_cell, relay_ceiling};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

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
        tx_depth: 8,
        rx_depth: 8,
        mode: RunMode::verified(),
        seed: 5,
        ..PerfConfig::default()
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

/// Kernel TCP from namespace B to A through a relay with `link`: every byte must arrive, in
/// order. Returns what the relay saw.
fn kernel_bulk_through(link: LinkConfig, bytes: usize) -> RelayStats {
    let data = pattern(11, bytes);
    let mut ns = TwoNs::create(&prefix(), Some(link)).expect("namespaces");
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let server = {
        let name = ns.a.clone();
        std::thread::spawn(move || -> std::io::Result<Vec<u8>> {
            enter_netns(&name)?;
            let l = TcpListener::bind((A_LINK, 5300))?;
            let _ = ready_tx.send(());
            // A client that never connects must not hang the test.
            let mut s = accept_within(&l, Duration::from_secs(30))?;
            s.set_read_timeout(Some(Duration::from_secs(60)))?;
            let mut got = Vec::with_capacity(bytes);
            s.read_to_end(&mut got)?;
            Ok(got)
        })
    };
    // A listener that failed to bind never signals; its join below says why.
    let _ = ready_rx.recv_timeout(Duration::from_secs(10));
    let client = {
        let (name, data) = (ns.b.clone(), data.clone());
        std::thread::spawn(move || -> std::io::Result<()> {
            enter_netns(&name)?;
            let to = (A_LINK, 5300).into();
            let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(10))?;
            s.set_write_timeout(Some(Duration::from_secs(60)))?;
            s.write_all(&data)?;
            s.shutdown(std::net::Shutdown::Write)
        })
    };
    let sent = client.join().expect("client thread");
    let got = server.join().expect("server thread");
    let relay = ns.stop_relay().expect("relay stats");
    // The namespaces go here, before any assertion (and on a panic above, with `ns`).
    drop(ns);
    sent.expect("client");
    let got = got.expect("server");
    assert_eq!(got.len(), data.len());
    assert!(got == data, "bytes differ");
    println!("{:?}, B to A {:?}", relay.io, relay.b_to_a);
    let io = relay.io;
    assert_eq!((io.malformed, io.write_errors), (0, 0), "{relay:?}");
    // The link counts segments: at least one per 1448 bytes of payload, more than the reads.
    assert!(relay.b_to_a.sent >= bytes as u64 / 1448, "{relay:?}");
    assert!(
        io.reads < relay.b_to_a.sent + relay.a_to_b.sent,
        "{relay:?}"
    );
    relay
}

/// 1 % loss: the kernel hands the relay GSO super-packets, the relay drops single segments out
/// of them, and the receiver still gets every byte.
fn kernel_tcp_through_a_lossy_relay_delivers_every_byte() {
    let link = LinkConfig::default()
        .with_delay(Duration::from_micros(10))
        .with_bandwidth_bps(0)
        .with_loss(0.01)
        .with_seed(3);
    let relay = kernel_bulk_through(link, 24 << 20);
    assert!(relay.io.gso_reads > 0 && relay.io.split > 0, "{relay:?}");
    assert!(relay.b_to_a.dropped_loss > 0, "{relay:?}");
}

/// Corruption, duplication and reordering out of super-packets: a corrupted segment leaves
/// with its checksum finished in software, so the receiving kernel drops it instead of
/// trusting the offloaded checksum and delivering the flipped bit.
fn kernel_tcp_through_a_corrupting_relay_delivers_every_byte() {
    let link = LinkConfig::default()
        .with_delay(Duration::from_micros(10))
        .with_bandwidth_bps(0)
        .with_corrupt(0.005)
        .with_duplicate(0.005)
        .with_reorder(0.02, Duration::from_micros(100))
        .with_seed(4);
    let relay = kernel_bulk_through(link, 24 << 20);
    let s = relay.b_to_a;
    assert!(
        s.corrupted > 0 && s.duplicated > 0 && s.reordered > 0,
        "{relay:?}"
    );
    assert!(relay.io.split > 0, "{relay:?}");
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

/// Every TUN device of the topology (the relay's and both stacks') runs without a qdisc, as
/// veth does: a TUN device drops for itself when its reader falls behind, so `pfifo_fast`
/// only cost a lock per packet (`topology::no_qdisc`).
fn the_topologys_tun_devices_have_no_qdisc() {
    let ns = TwoNs::create(&prefix(), Some(LinkConfig::default())).expect("namespaces");
    for (name, side_a, devs) in [
        (ns.a.clone(), true, ["bthr0", "tbtha"]),
        (ns.b.clone(), false, ["bthr1", "tbthb"]),
    ] {
        // The stack's device lives as long as its descriptor: hold it while asking. Made on a
        // thread of its own, which enters the namespace.
        let inside = name.clone();
        let tun = std::thread::spawn(move || bth_testbed::topology::stack_tun(&inside, side_a))
            .join()
            .expect("thread")
            .expect("stack TUN device");
        for dev in devs {
            let out = std::process::Command::new("ip")
                .args(["netns", "exec", &name, "tc", "qdisc", "show", "dev", dev])
                .output()
                .expect("tc");
            let shown = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && shown.contains("qdisc noqueue"),
                "{name}/{dev}: {shown}{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        drop(tun);
    }
}

bth_tests::test_main!(
    the_topologys_tun_devices_have_no_qdisc[NetAdmin],
    spraying_relay_carries_every_message[NetAdmin],
    kernel_tcp_through_a_lossy_relay_delivers_every_byte[NetAdmin],
    kernel_tcp_through_a_corrupting_relay_delivers_every_byte[NetAdmin],
    relay_ceiling_runs_kernel_tcp_over_both_links[NetAdmin],
);
