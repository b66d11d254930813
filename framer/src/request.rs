//! What the stack hands the framer: work requests, the connection's framing parameters, and the
//! reasons a post is refused.

use bth_wire::MsgClass;
use bytes::Bytes;
use thiserror::Error;

/// The operation of a work request, with the remote-side parameters it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WrOp {
    /// A SEND into the peer's next posted receive buffer; `imm` rides on the last segment.
    Send {
        /// Immediate data delivered in the peer's receive CQE, if any.
        imm: Option<u32>,
    },
    /// An RDMA WRITE to `rkey`/`remote_addr`; `imm` rides on the last segment and is delivered
    /// to the peer as a completion without consuming a receive buffer.
    RdmaWrite {
        /// The peer's rkey of the target region.
        rkey: u32,
        /// Address in the peer's region of the message's first byte.
        remote_addr: u64,
        /// Immediate data for the peer's completion, if any (none: the WRITE completes
        /// silently at the peer).
        imm: Option<u32>,
    },
    /// An RDMA READ of `len` bytes at the peer's `rkey`/`remote_addr`. On the wire it is a
    /// 16-byte READ request; the local sink is registered with the placement crate.
    RdmaRead {
        /// The peer's rkey of the source region.
        rkey: u32,
        /// Address in the peer's region of the first byte to read.
        remote_addr: u64,
        /// Bytes to read: 1 to `MAX_MESSAGE_LEN`.
        len: u32,
    },
}

/// One work request as posted by the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkRequest {
    /// The application's identifier, echoed in the send completion ([`Released`](crate::Released)).
    pub wr_id: u64,
    /// The operation and its remote-side parameters.
    pub op: WrOp,
    /// SEND/WRITE: the message is the concatenation of these slices (empty slices are allowed
    /// and skipped). READ: must be empty.
    pub sg_list: Vec<Bytes>,
}

impl WorkRequest {
    /// A SEND of `data` into the peer's next posted receive buffer, with or without immediate
    /// (empty `data`: a zero-length message).
    pub fn send(wr_id: u64, data: impl Into<Bytes>, imm: Option<u32>) -> WorkRequest {
        WorkRequest {
            wr_id,
            op: WrOp::Send { imm },
            sg_list: vec![data.into()],
        }
    }

    /// An RDMA WRITE of `data` to the peer's region `rkey` at `remote_addr`, with or without
    /// immediate.
    pub fn write(
        wr_id: u64,
        rkey: u32,
        remote_addr: u64,
        data: impl Into<Bytes>,
        imm: Option<u32>,
    ) -> WorkRequest {
        WorkRequest {
            wr_id,
            op: WrOp::RdmaWrite {
                rkey,
                remote_addr,
                imm,
            },
            sg_list: vec![data.into()],
        }
    }

    /// An RDMA READ of `len` bytes of the peer's region `rkey` at `remote_addr` (the local
    /// sink is posted with the placement side).
    pub fn read(wr_id: u64, rkey: u32, remote_addr: u64, len: u32) -> WorkRequest {
        WorkRequest {
            wr_id,
            op: WrOp::RdmaRead {
                rkey,
                remote_addr,
                len,
            },
            sg_list: Vec::new(),
        }
    }
}

/// Framing parameters fixed when the connection is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FramerConfig {
    /// Divisor of the segment index (`seg = (offset_in_message / mss) mod 256`). It does not
    /// limit segment sizes: that is the `max_payload` of each [`Framer::segment_at`] call.
    /// 0 is treated as 1 so no input can divide by zero.
    ///
    /// [`Framer::segment_at`]: crate::Framer::segment_at
    pub mss: u32,
    /// First MSN of every class counter (the MSN this side announces in its hello).
    pub first_msn: u16,
    /// Largest message the peer accepts (from its hello); values above
    /// [`MAX_MESSAGE_LEN`](bth_wire::MAX_MESSAGE_LEN) are clamped to it, because the 24-bit
    /// offset field could not address the bytes beyond.
    pub max_message_len: u32,
}

/// Why a work request was refused. A refused post changes no framer state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum WrError {
    /// A SEND, WRITE or READ response longer than the framer's message limit.
    #[error("message of {len} bytes exceeds the {max}-byte limit (refused, never truncated)")]
    TooLarge {
        /// Total bytes of the refused message.
        len: u64,
        /// The limit in force, in bytes.
        max: u32,
    },
    /// Only READ responses refuse it (a READ is never zero-length); a zero-length SEND or
    /// WRITE is posted with one pad byte.
    #[error("empty READ response")]
    Empty,
    /// An RDMA READ asking for more than `MAX_MESSAGE_LEN` bytes (the response could not be
    /// addressed by the 24-bit offset).
    #[error("RDMA READ of {len} bytes exceeds the {max}-byte message limit")]
    ReadTooLarge {
        /// Bytes the READ asked for.
        len: u32,
        /// `MAX_MESSAGE_LEN`, in bytes.
        max: u32,
    },
    /// An RDMA READ of `len` 0.
    #[error("RDMA READ of zero bytes: the responder would have to send an empty message")]
    ReadEmpty,
    /// An RDMA READ whose `sg_list` is not empty (its sink is posted on the placement side).
    #[error("RDMA READ takes no local data, but {entries} scatter/gather entries were given")]
    ReadWithData {
        /// Number of scatter/gather entries given.
        entries: usize,
    },
    /// A WRITE or READ whose remote range would run past address `u64::MAX`.
    #[error("remote range at {addr:#x} of {len} bytes wraps past the end of the address space")]
    RemoteRangeWraps {
        /// The request's `remote_addr`.
        addr: u64,
        /// Length of the remote range, in bytes.
        len: u64,
    },
    /// The class already has [`MAX_IN_FLIGHT`](crate::MAX_IN_FLIGHT) messages posted and not
    /// released.
    #[error(
        "{class:?} already has 32768 (2^15) messages in flight; more would break MSN serial order"
    )]
    TooManyInFlight {
        /// The class whose limit was reached.
        class: MsgClass,
    },
    /// The message would end past stream offset `u64::MAX`.
    #[error("the 64-bit stream offset space is exhausted")]
    StreamExhausted,
}
