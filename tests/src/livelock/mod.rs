//! The livelock detector of issue #35: random workloads driven over a simulated pair
//! (`bth_io::sim::Pair`) step by step, watched by a progress [`Monitor`].
//!
//! A *workload* ([`Workload`]) is a mode (`tcp_bth` or plain TCP), link impairments, a seed,
//! receive windows and a list of [`Step`]s: SENDs, RDMA WRITEs (with and without immediate)
//! and READs in either direction (BTH), bytes either way (plain), pauses of a receiver (it
//! stops reading, or stops posting receives, so the window or the message credit closes and
//! opens again) and idles from a millisecond to a day of virtual time. Consecutive non-idle
//! steps are posted at the same instant, so both directions are busy at once.
//!
//! [`run`] posts the steps, verifies every byte that lands against what was sent, and fails
//! (a [`Failure`] naming the step, both ends' counters and sequence state) when
//! * more segments were sent without progress than [`Limits::quiet_segments`] allows
//!   (a livelock: the defect of `tests/tests/plain_bidir.rs` sent millions of ACKs without
//!   moving a byte), or
//! * work was outstanding with no progress for [`Limits::stall_after`] of virtual time while
//!   the workload held nothing back (a stall: idles and pauses the workload asked for are not
//!   stalls), or the work is not done an hour of virtual time after the last step.
//!
//! "Progress" is anything that moved the transfer closer to its end: SND.UNA moving at either
//! end, new bytes at a receiver (placed by `tcp_bth`, or received in order or out of order in
//! plain mode), a completion, bytes read by the application (`drive.rs`).
//!
//! Every type here derives `Debug` with plain numeric fields, so a failing (shrunk) workload as
//! printed is a Rust expression: paste it into a test with `use
//! bth_tests::livelock::{Side::*, Step::*, *};` to replay it.

mod drive;
pub mod monitor;

pub use drive::{run, run_with, Failure, FailureKind, Summary};
pub use monitor::{Alarm, Limits, Monitor, Sample};

use bth_io::sim::LinkConfig;
use std::time::Duration;

/// One end of the pair: A opened the connection, B accepted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    A,
    B,
}

impl Side {
    pub fn index(self) -> usize {
        match self {
            Side::A => 0,
            Side::B => 1,
        }
    }

    pub fn peer(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }
}

/// One thing the workload does. Lengths are bytes, times microseconds of virtual time.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// BTH: `from` SENDs `len` bytes (with its id as immediate if `imm`); the peer posts the
    /// receive for it `recv_lag_us` later (0: at once). Receives are posted in order, so a
    /// late one holds back those after it: the sender's message credit runs out, then returns.
    Send {
        from: Side,
        len: u32,
        imm: bool,
        recv_lag_us: u64,
    },
    /// BTH: `from` RDMA WRITEs `len` bytes into the peer's target region (a fresh range of
    /// it), with its id as immediate if `imm`.
    Write { from: Side, len: u32, imm: bool },
    /// BTH: `from` RDMA READs `len` (≥ 1) bytes at `offset` of the peer's source region.
    Read { from: Side, len: u32, offset: u32 },
    /// Plain: `from` sends `len` bytes on its byte stream.
    Bytes { from: Side, len: u32 },
    /// `side` stops consuming for `us`: in plain mode it reads nothing (its receive window
    /// fills and closes), with BTH it posts no receive (credit stays where it is).
    Pause { side: Side, us: u64 },
    /// Post nothing for `us`; what is in flight carries on.
    Idle { us: u64 },
}

/// The link's impairments (the rest of [`LinkConfig`] keeps its defaults: 10 Gbit/s, a 4 MiB
/// drop-tail queue).
#[derive(Debug, Clone, PartialEq)]
pub struct LinkSpec {
    pub delay_us: u64,
    pub loss: f64,
    pub reorder: f64,
    pub reorder_depth_us: u64,
    pub duplicate: f64,
    pub corrupt: f64,
}

impl LinkSpec {
    pub fn config(&self, seed: u64) -> LinkConfig {
        LinkConfig::default()
            .with_delay(Duration::from_micros(self.delay_us))
            .with_loss(self.loss)
            .with_reorder(
                self.reorder,
                Duration::from_micros(self.reorder_depth_us.max(1)),
            )
            .with_duplicate(self.duplicate)
            .with_corrupt(self.corrupt)
            .with_seed(seed)
    }
}

/// A whole run: everything [`run`] needs, nothing it draws itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Negotiate `tcp_bth` (both ends offer it) or run plain TCP (neither does).
    pub bth: bool,
    /// Seeds the link's impairments, the ends' keys and the payload patterns.
    pub seed: u64,
    pub link: LinkSpec,
    /// `Config::recv_window` of A and of B.
    pub recv_window: [u32; 2],
    /// Serve each end in driver turns as the TUN path does (`DriverModel::TUN_QUEUED`:
    /// batches of arrivals per turn, a bounded queue that drops), instead of handling every
    /// arrival the instant it lands.
    pub driver_turns: bool,
    pub steps: Vec<Step>,
}

/// Smallest payload of a full data segment: the default MSS (1460) less the largest options
/// (40 bytes of `tcp_bth`, or timestamps and SACK blocks in plain mode), rounded down.
const MIN_SEGMENT_PAYLOAD: u64 = 1000;

/// How many segments a healthy run may send between two instants of progress, for this
/// workload: 4 × the segments that fill both receive windows, plus 2000.
///
/// Why that covers every healthy run: new data is progress when it arrives (it is placed, or
/// held out of order), so what a healthy pair sends *without* progress is (1) data that
/// arrives as a duplicate or is lost: at most the flight, i.e. the peer's window, sent again
/// (RACK or an RTO marking it all lost; with reordering and duplication some of it twice),
/// (2) the ACKs answering those, at most one per arriving segment, and (3) probes and their
/// answers (tail loss probes, persist and grant probes, window and credit updates), which back
/// off exponentially up to `max_rto` (60 s): a few dozen in the longest quiet time the stall
/// limit allows. 2 × (data + ACK) per window's worth of segments, plus a constant for (3).
/// The runs of the suite stay far below (the test prints the largest count it saw); the
/// defect this guards against sent about 12.6 million segments per side in 500 ms.
pub fn quiet_segment_bound(recv_window: [u32; 2]) -> u64 {
    let window_segments: u64 = recv_window
        .iter()
        .map(|&w| u64::from(w).div_ceil(MIN_SEGMENT_PAYLOAD))
        .sum();
    4 * window_segments + 2000
}

/// How long work may be outstanding without progress (while the workload holds nothing
/// back): 10 × `max_rto`. A healthy end retries within `max_rto` (60 s, the cap of RTO and
/// persist backoff) of its last try, so this is nine or more consecutive losses of retries or
/// their answers: at 3 % loss, around 10⁻¹¹ per wait.
pub const STALL_AFTER: Duration = Duration::from_secs(600);

/// The limits [`run`] uses for `w`.
pub fn limits(w: &Workload) -> Limits {
    Limits {
        quiet_segments: quiet_segment_bound(w.recv_window),
        stall_after: STALL_AFTER,
    }
}
