//! What one perf connection runs ([`PerfConfig`]) and the checks that make a run possible.

use super::{PerfError, PerfOp, RunMode};
use std::time::Duration;

/// The largest WRITE target a verified [`PerfOp::Write`] run registers (`count * size`: every
/// message has its own offset). Larger runs are refused by [`PerfConfig::validate`].
pub const MAX_VERIFIED_WRITE_REGION: u64 = 4 << 30;

/// One connection's run. Client and server must agree on everything but `seed` and `trace`:
/// the client sends the rest in its hello and the server refuses a run that differs
/// ([`super::check`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PerfConfig {
    /// The operation (`--op`).
    pub op: PerfOp,
    /// Message size in bytes.
    pub size: u32,
    /// Messages each requester sends (ignored when `duration` is set).
    pub count: u64,
    /// Run by time instead of count: each requester posts new messages until this much time
    /// has passed since the run started, then finishes what is outstanding.
    pub duration: Option<Duration>,
    /// Work requests kept outstanding by a requester; also the number of slots of the READ
    /// source and (unverified) WRITE target regions.
    pub tx_depth: usize,
    /// Receive buffers kept posted for the peer's SENDs.
    pub rx_depth: usize,
    /// The switches both sides must share: `-b` (for [`PerfOp::Send`], [`PerfOp::Write`],
    /// [`PerfOp::WriteImm`], [`PerfOp::Read`], [`PerfOp::Mixed`]), `--verify`, `--plain`,
    /// `--lat`, `-a`.
    pub mode: RunMode,
    /// Seed of the payload pattern.
    pub seed: u64,
    /// The framing this side asks for (the handshake settles what runs).
    pub framing: tcp_bth::Framing,
    /// Connections of the run (`-q`); this connection is one of them. For the option check.
    pub qps: u32,
    /// Keep the per-message times [`super::PerfReport::posted`] and
    /// [`super::PerfReport::arrived`] (16 bytes per message: `bth-compare` needs them for
    /// one-way latencies, a long `--duration` run does not).
    pub trace: bool,
}

impl Default for PerfConfig {
    fn default() -> PerfConfig {
        PerfConfig {
            op: PerfOp::Send,
            size: 65536,
            count: 2000,
            duration: None,
            tx_depth: 16,
            rx_depth: 16,
            mode: RunMode::default(),
            seed: 1,
            framing: tcp_bth::Framing::PerSegment,
            qps: 1,
            trace: true,
        }
    }
}

impl PerfConfig {
    /// Whether plain WRITEs each get their own offset (verified [`PerfOp::Write`]), rather
    /// than cycling through `tx_depth` slots.
    pub(crate) fn own_offsets(&self) -> bool {
        self.op == PerfOp::Write && self.mode.verify && !self.mode.plain
    }

    /// Length of the WRITE target region a responder registers.
    pub(crate) fn write_region_len(&self) -> Result<usize, PerfError> {
        let slots = if self.own_offsets() {
            self.count
        } else {
            self.tx_depth as u64
        };
        let bytes = slots.saturating_mul(u64::from(self.size));
        if self.own_offsets() && bytes > MAX_VERIFIED_WRITE_REGION {
            return Err(PerfError::WriteRegionTooLarge {
                bytes,
                max: MAX_VERIFIED_WRITE_REGION,
            });
        }
        usize::try_from(bytes).map_err(|_| PerfError::WriteRegionTooLarge {
            bytes,
            max: usize::MAX as u64,
        })
    }

    /// Whether this run can be set up; client and server refuse it (and abort) otherwise.
    pub fn validate(&self) -> Result<(), PerfError> {
        let max = tcp_bth::wire::MAX_MESSAGE_LEN;
        if self.size > max {
            return Err(PerfError::SizeTooLarge {
                size: self.size,
                max,
            });
        }
        if self.size == 0 && !matches!(self.op, PerfOp::Send | PerfOp::WriteImm) {
            return Err(PerfError::ZeroSize { op: self.op });
        }
        for (what, zero) in [
            ("--tx-depth", self.tx_depth == 0),
            ("--rx-depth", self.rx_depth == 0),
            ("--qps", self.qps == 0),
            ("--iters", self.duration.is_none() && self.count == 0),
            ("--duration", self.duration.is_some_and(|d| d.is_zero())),
            // The byte stream has no message boundaries but the size.
            ("--size with --plain", self.mode.plain && self.size == 0),
        ] {
            if zero {
                return Err(PerfError::Zero { what });
            }
        }
        if self.op == PerfOp::Write && self.mode.verify && self.duration.is_some() {
            return Err(PerfError::VerifiedWriteNeedsCount);
        }
        if self.mode.bidir {
            if self.op == PerfOp::SendRecv {
                return Err(PerfError::BidirUnsupported {
                    why: "sendrecv (request/response is two-way already)",
                });
            }
            if self.mode.plain {
                return Err(PerfError::BidirUnsupported {
                    why: "--plain (the byte stream runs one way)",
                });
            }
        }
        self.write_region_len().map(|_| ())
    }

    /// Offset of message `i` in a region of `tx_depth` slots (READ source, WRITE target).
    pub(crate) fn slot_offset(&self, i: u64) -> u64 {
        i % self.tx_depth as u64 * u64::from(self.size)
    }

    /// Offset of WRITE `i` in the responder's WRITE target region.
    pub(crate) fn write_offset(&self, i: u64) -> u64 {
        if self.own_offsets() {
            i * u64::from(self.size)
        } else {
            self.slot_offset(i)
        }
    }
}
