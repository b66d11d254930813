//! Helpers shared by the integration tests: building connected pairs over the simulated link
//! and driving them with a hand on every packet.

pub mod gate;
pub mod livelock;
pub mod many_qps;
pub mod qpwork;
pub mod rss;
pub mod tcpdump;
pub mod tunpair;

use bth_io::sim::{pair_configs, LinkConfig, Pair};
use std::time::Duration;
use tcp_bth::wire::{MsgClass, NakCode};
use tcp_bth::{Config, Connection, ConnectionError};

/// A quiet link: 50 µs one way, 10 Gbit/s, no impairments.
pub fn quiet_link() -> LinkConfig {
    LinkConfig::default()
}

/// Configs for A and B, adjusted by `f`.
pub fn configs(seed: u64, f: impl FnOnce(&mut Config, &mut Config)) -> (Config, Config) {
    let (mut a, mut b) = pair_configs(seed);
    f(&mut a, &mut b);
    (a, b)
}

/// An established pair over `link`.
pub fn established(a: Config, b: Config, link: LinkConfig) -> Pair {
    let mut p = Pair::new(a, b, link);
    assert!(p.establish(Duration::from_secs(5)), "handshake failed");
    p
}

/// The namespaces of the tests, from the testbed the tools share.
pub use bth_testbed::{dualns, netns};
/// Two connections back to back with a per-segment filter (the core's driver).
pub use tcp_bth::pair::BackToBack;

/// A finished command's exit status, stdout and stderr, for an assertion's message.
pub fn describe_output(o: &std::process::Output) -> String {
    format!(
        "{}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Deterministic bytes for tests.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    bth_io::sim::workload::fill(seed, 7, &mut v);
    v
}

/// Append everything readable on a plain-mode connection to `out`.
pub fn drain_bytes(c: &mut Connection, out: &mut Vec<u8>) {
    let mut buf = [0u8; 65536];
    loop {
        let n = c.recv_bytes(&mut buf);
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// `c` failed because its peer refused one of its requests: a NAK with this code, naming the
/// request's class and MSN.
pub fn assert_peer_nak(c: &Connection, code: NakCode, class: MsgClass, msn: u16) {
    match c.error() {
        Some(ConnectionError::PeerNak(n)) => {
            assert_eq!((n.code, n.class(), n.msn), (code, Some(class), msn), "{n}");
        }
        other => panic!("expected a NAK, got {other:?}"),
    }
}
