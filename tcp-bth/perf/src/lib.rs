//! Client and server applications for throughput/latency runs (`bth-perf`) and the data-path
//! integrity tests. Each is a small state machine called once per driver turn with the
//! connection and the time, so the same code runs over the TUN driver and the simulated pair
//! (`bth_io::sim::Pair`; the tests in `src/tests*.rs` run it there). One app drives one
//! connection; a run of several connections (`-q`) gives each its own app
//! ([`Client::for_qp`]) and sums their reports ([`aggregate`]).
//!
//! Protocol (control messages: [`ctrl`]): once connected, each side posts its receive buffers
//! (`rq`) and registers the regions its peer may WRITE to and READ from (the server always,
//! the client with `-b`). The client SENDs a hello with its options and regions; the server
//! compares the options with its own ([`check`]) and answers with an accept carrying its
//! regions, or a refusal naming every option that differs. Then the client's requester (and
//! with `-b` the server's) keeps `tx_depth` work requests outstanding until `count` messages
//! have completed or `duration` has passed, and SENDs a done message with its count behind the
//! last one; the responder checks that count. Each side SENDs its connection counters to the
//! other just before its FIN: the client closes when its work is done, the server when it sees
//! the client's FIN. With `-b` each side's report counts both directions: what its requester
//! completed and what the peer's requester did here (the peer's READs, which complete nowhere
//! here, from its done message, as plain WRITEs are counted).
//!
//! Sides that disagree on `--plain` find it in the handshake (a SYN with the tcp_bth option
//! answered without it, or one without it); the byte stream they then share carries the
//! server's refusal framed as `--plain` frames it, so both sides say why, and how to fix it,
//! within a round trip or two (`mismatch.rs`). The connections of one run (`-q`) share its
//! end: the first refusal ends them all, each side naming the cause once ([`RunRefused`]).
//!
//! Plain RDMA WRITE ([`PerfOp::Write`]) gives the server no completion per message: the client
//! completes each WRITE when it is acknowledged, and its done message follows the WRITEs in
//! the same ordered stream, so when it completes at the server every WRITE before it has been
//! placed; the server then checks the count and, with `verify`, the whole target region byte
//! for byte. With `verify` every message has its own offset (`i * size`), so the check proves
//! that each message landed, complete and unchanged, at its own place; without it the WRITEs
//! cycle through `tx_depth` slots like the other operations.
//!
//! Size 0 is allowed for [`PerfOp::Send`] and [`PerfOp::WriteImm`] only: zero-length SEND and
//! RDMA WRITE with immediate, the completion signal of collective libraries, carry nothing but
//! their immediate. With `verify` the server checks every message's immediate (its index,
//! arriving in order within its class) and length, so a zero-length run is verified too.

#![warn(missing_docs)]

mod aggregate;
mod app;
pub mod check;
mod client;
mod config;
pub mod counters;
pub mod ctrl;
pub mod drive;
mod error;
mod mismatch;
mod mode;
mod op;
pub mod path;
mod plain;
mod report;
mod requester;
mod responder;
mod rq;
mod server;
mod side;
pub mod tunpair;
pub mod units;

pub use aggregate::aggregate;
pub use app::{PerfApp, Role};
pub use client::{Client, ClientRole};
pub use config::{PerfConfig, MAX_VERIFIED_WRITE_REGION};
pub use counters::{ConnCounters, Drops, PeerSummary};
pub use error::PerfError;
pub use mode::RunMode;
pub use op::{ParseOpError, PerfOp};
pub use path::{LimitsSummary, PathSamples, PathSummary};
pub use report::{percentile, LatencyStats, PerfReport, Timeline, BUCKET, PEAK_WINDOW};
pub use server::{Server, ServerRole};
pub use side::{RunRefused, ServersClosed};

use bth_io::sim::workload::{filled, matches_fill};

/// Length of the server's reply in [`PerfOp::SendRecv`].
pub const REPLY_LEN: usize = 8;

/// `wr_id` of a requester's done message.
const DONE_WR: u64 = u64::MAX - 1;
/// `wr_id` of the other control messages (hello, accept, refusal, statistics).
const CTRL_WR: u64 = u64::MAX;

/// What one message is on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MsgOp {
    Send,
    Write,
    WriteImm,
    Read,
}

/// The operations of [`PerfOp::Mixed`], in turn.
const MIXED: [MsgOp; 3] = [MsgOp::Send, MsgOp::WriteImm, MsgOp::Read];

fn op_of(cfg: &PerfConfig, i: u64) -> MsgOp {
    match cfg.op {
        PerfOp::Send | PerfOp::SendRecv => MsgOp::Send,
        PerfOp::Write => MsgOp::Write,
        PerfOp::WriteImm => MsgOp::WriteImm,
        PerfOp::Read => MsgOp::Read,
        PerfOp::Mixed => MIXED[(i % 3) as usize],
    }
}

/// Index of the `n`-th message (from 0) that is an `op`: where it stands among all messages.
fn nth_of(cfg: &PerfConfig, op: MsgOp, n: u64) -> u64 {
    match cfg.op {
        PerfOp::Mixed => {
            let turn = MIXED.iter().position(|&m| m == op).unwrap_or(0) as u64;
            3 * n + turn
        }
        _ => n,
    }
}

/// Which pattern bytes message `i` carries (READ data comes from the server's region).
fn payload(cfg: &PerfConfig, i: u64) -> Vec<u8> {
    if cfg.mode.verify {
        filled(cfg.seed, i, cfg.size as usize)
    } else {
        vec![0u8; cfg.size as usize]
    }
}

/// Whether `got` is what [`payload`] gave message `i`.
fn is_payload(cfg: &PerfConfig, i: u64, got: &[u8]) -> bool {
    got.len() == cfg.size as usize && matches_fill(cfg.seed, i, got)
}

#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod tests_ctrl;
#[cfg(test)]
mod tests_mismatch;
#[cfg(test)]
mod tests_protocol;
#[cfg(test)]
mod tests_stats;
