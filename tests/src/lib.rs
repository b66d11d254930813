//! Helpers shared by the integration tests: building connected pairs over the simulated link
//! and driving them with a hand on every packet.

pub mod gate;
pub mod netns;
pub mod rss;
pub mod tunpair;

use std::time::Duration;
use tcp_bth::sim::{pair_configs, Direction, LinkConfig, Pair};
use tcp_bth::{Config, Connection};

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

/// Two connections wired back to back with no link: every segment is handed to `filter`,
/// which may drop it (return None) or change it, then delivered after `delay`.
pub struct Wire {
    pub a: Connection,
    pub b: Connection,
    pub now: Duration,
    pub delay: Duration,
    in_flight: Vec<(Duration, Direction, Vec<u8>)>,
}

impl Wire {
    pub fn new(a: Connection, b: Connection, now: Duration) -> Wire {
        Wire {
            a,
            b,
            now,
            delay: Duration::from_micros(50),
            in_flight: Vec::new(),
        }
    }

    /// Advance to the next event; `filter` sees each segment as it is sent.
    pub fn step(
        &mut self,
        filter: &mut impl FnMut(Direction, Duration, Vec<u8>) -> Option<Vec<u8>>,
    ) -> bool {
        let now = self.now;
        let mut due: Vec<_> = Vec::new();
        self.in_flight.retain(|(t, d, p)| {
            if *t <= now {
                due.push((*d, p.clone()));
                false
            } else {
                true
            }
        });
        for (d, p) in due {
            match d {
                Direction::AtoB => self.b.handle_segment(now, &p),
                Direction::BtoA => self.a.handle_segment(now, &p),
            }
        }
        for c in [&mut self.a, &mut self.b] {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
        }
        while let Some(p) = self.a.poll_transmit(now) {
            if let Some(p) = filter(Direction::AtoB, now, p) {
                self.in_flight.push((now + self.delay, Direction::AtoB, p));
            }
        }
        while let Some(p) = self.b.poll_transmit(now) {
            if let Some(p) = filter(Direction::BtoA, now, p) {
                self.in_flight.push((now + self.delay, Direction::BtoA, p));
            }
        }
        let next = self
            .in_flight
            .iter()
            .map(|x| x.0)
            .chain(self.a.poll_timeout())
            .chain(self.b.poll_timeout())
            .min();
        match next {
            Some(t) => {
                self.now = t.max(now + Duration::from_nanos(1));
                true
            }
            None => false,
        }
    }

    pub fn run(
        &mut self,
        limit: Duration,
        mut filter: impl FnMut(Direction, Duration, Vec<u8>) -> Option<Vec<u8>>,
        mut done: impl FnMut(&mut Wire) -> bool,
    ) -> bool {
        let end = self.now + limit;
        while self.now < end {
            if done(self) {
                return true;
            }
            if !self.step(&mut filter) {
                break;
            }
        }
        done(self)
    }
}

/// Deterministic bytes for tests.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    tcp_bth::sim::workload::fill(seed, 7, &mut v);
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
