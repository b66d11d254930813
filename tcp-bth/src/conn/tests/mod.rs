//! Unit tests of the connection, segment in and segment out, without the simulator: two
//! [`Connection`]s wired back to back on a virtual clock ([`BackToBack`]), every segment visible to a
//! filter that may drop it. Each file is one defect or one behaviour.

mod ack;
mod admission;
mod buffer;
mod coalesce;
mod events;
mod fallback;
mod framing;
mod gather;
mod isn;
mod late_ack;
mod limits;
mod liveness;
mod offered;
mod paws;
mod read;
mod s_bad;
mod socket;
mod tlp;
mod verbs;
mod window;

use super::*;
use crate::isn::IsnKey;
use crate::pair::{BackToBack, Direction};
use crate::wire::IpPair;
use crate::wire::TcpRepr;
use bth_framer::{WorkRequest, WrOp};
use bytes::Bytes;

pub(super) const A_PORT: u16 = 40_000;
pub(super) const B_PORT: u16 = 4791;
pub(super) const MS: Duration = Duration::from_millis(1);

/// Configs for A (client) and B (server) with a fixed key, so runs repeat.
pub(super) fn configs(bth: bool) -> (Config, Config) {
    let ip = IpPair::V4 {
        src: [10, 1, 0, 1],
        dst: [10, 1, 0, 2],
    };
    let a = Config {
        bth,
        local_port: A_PORT,
        remote_port: B_PORT,
        ip,
        isn_key: IsnKey([7; 16]),
        ..Config::default()
    };
    let b = Config {
        local_port: B_PORT,
        ip: ip.reversed(),
        ..a.clone()
    };
    (a, b)
}

/// The core's back-to-back driver, established, on the test configs.
pub(super) fn established(bth: bool) -> BackToBack {
    let (a, b) = configs(bth);
    BackToBack::established(a, b, MS)
}

/// Every segment goes through.
pub(super) fn pass(_: Direction, _: Duration, p: Vec<u8>) -> Option<Vec<u8>> {
    Some(p)
}

pub(super) fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Append every byte readable on a plain-mode connection to `out`.
pub(super) fn drain(c: &mut Connection, out: &mut Vec<u8>) {
    let mut buf = [0u8; 8192];
    loop {
        let n = c.recv_bytes(&mut buf);
        if n == 0 {
            return;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

impl Connection {
    /// The BTH receive path's placement (panics in plain mode: tests ask only in BTH mode).
    pub(super) fn test_placement(&self) -> &bth_placement::Placement {
        match &self.rx {
            RxPath::Bth(b) => &b.placement,
            RxPath::Plain(_) => panic!("plain mode has no placement"),
        }
    }
}
