//! Helpers shared by the integration tests: building connected pairs over the simulated link
//! and driving them with a hand on every packet.

pub mod gate;
pub mod netns;
pub mod rss;
pub mod tunpair;

use std::time::Duration;
use tcp_bth::{Config, Connection};
use tcp_bth_io::sim::{pair_configs, LinkConfig, Pair};

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

/// Two connections back to back with a per-segment filter (the core's driver).
pub use tcp_bth::pair::Wire;

/// Deterministic bytes for tests.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    tcp_bth_io::sim::workload::fill(seed, 7, &mut v);
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
