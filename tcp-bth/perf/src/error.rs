//! What can go wrong in a perf run, on either side ([`super::PerfReport::errors`]).

use super::ctrl::CtrlError;
use super::PerfOp;
use bth_placement::WcStatus;
use tcp_bth::{CallError, ConnectionError, WcOp};
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PerfError {
    /// The connection ended abnormally.
    #[error(transparent)]
    Connection(#[from] ConnectionError),
    /// The stack refused a post (SEND, WRITE, READ or receive buffer).
    #[error(transparent)]
    Post(CallError),
    /// The stack refused to register a memory region.
    #[error(transparent)]
    Register(CallError),
    /// The server's reply to request `msg` was refused ([`PerfOp::SendRecv`]).
    #[error("reply {msg}: {source}")]
    Reply { msg: u64, source: CallError },
    #[error("peer does not speak tcp_bth")]
    PeerNotBth,
    #[error("tcp_bth negotiated in plain mode")]
    BthInPlainMode,
    #[error("client and server disagree on --plain")]
    PlainMismatch,
    /// A control message (hello, accept, refusal, done, statistics) could not be read.
    #[error(transparent)]
    Control(#[from] CtrlError),
    /// A control message arrived where the protocol has no place for it.
    #[error("unexpected {what} message from the peer")]
    UnexpectedControl { what: &'static str },
    /// Server side: the client's options differ from ours; the run was refused and the client
    /// told why.
    #[error("refused the client: {reason}")]
    OptionsDiffer { reason: String },
    /// Client side: the server refused the run, for this reason (its words).
    #[error("the server refused the run: {reason}")]
    Refused { reason: String },
    /// The peer closed the connection before the run was over.
    #[error("the peer closed the connection before the run was over")]
    PeerClosedEarly,
    /// A client work request completed with an error.
    #[error("completion {wr_id} failed: {status:?}")]
    CompletionFailed { wr_id: u64, status: WcStatus },
    /// A server completion of this kind completed with an error.
    #[error("completion {op:?} failed: {status:?}")]
    OpFailed { op: WcOp, status: WcStatus },
    #[error("READ {msg} returned different bytes")]
    ReadDiffers { msg: u64 },
    /// Message `msg` did not arrive intact (at the server: SEND, or WRITE at its offset).
    #[error("message {msg} differs")]
    MessageDiffers { msg: u64 },
    /// The done message counted a different number of messages than the run has (count
    /// mode), or than arrived.
    #[error("the peer reports {got} messages done, {want} expected")]
    DoneCount { got: u64, want: u64 },
    /// The requester's done message counts more (or fewer) messages than arrived here.
    #[error("the peer reports {sent} messages sent, {arrived} arrived here")]
    ArrivalsDiffer { sent: u64, arrived: u64 },
    /// Size 0 was asked for an operation that moves bytes (only SEND and WRITE with immediate
    /// have a zero-length form worth measuring).
    #[error(
        "size 0 is for send and write-imm only (zero-length SEND / WRITE with immediate); \
         {op} needs at least 1 byte"
    )]
    ZeroSize { op: PerfOp },
    /// Larger than a `tcp_bth` message can be.
    #[error("size {size} is above the largest message, {max} bytes")]
    SizeTooLarge { size: u32, max: u32 },
    /// A count, depth or duration of zero.
    #[error("{what} must be at least 1")]
    Zero { what: &'static str },
    /// A message arrived with another immediate than the next one expected in its class
    /// (`verify`: message `i` carries `i`, and a class completes in order).
    #[error("immediate {got:?} arrived where message {want} was expected")]
    UnexpectedImmediate { got: Option<u32>, want: u64 },
    /// Message `msg` arrived with another length than the run's size (`verify`).
    #[error("message {msg} is {got} bytes long, {want} expected")]
    LengthDiffers { msg: u64, got: u32, want: u32 },
    /// A verified plain WRITE run needs a target of `count * size` bytes; this one is too big.
    #[error(
        "a verified plain WRITE run needs count * size = {bytes} bytes of target region, \
         at most {max}"
    )]
    WriteRegionTooLarge { bytes: u64, max: u64 },
    /// A verified plain WRITE run gives every message its own offset, which needs a count.
    #[error(
        "--verify with --op write gives every message its own offset in the server's memory, \
         so it needs a message count (--iters), not --duration"
    )]
    VerifiedWriteNeedsCount,
    /// `--bidirectional` with an operation it cannot mean anything for.
    #[error("--bidirectional does not apply to {why}")]
    BidirUnsupported { why: &'static str },
}
