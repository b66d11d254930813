//! What can go wrong in a perf run, on either side ([`super::PerfReport::errors`]).

use super::ctrl::CtrlError;
use super::PerfOp;
use bth_placement::WcStatus;
use tcp_bth::{CallError, ConnectionError, WcOp};
use thiserror::Error;

/// Why a run failed or was refused: returned by
/// [`PerfConfig::validate`](crate::PerfConfig::validate), recorded by either side in
/// [`PerfReport::errors`](crate::PerfReport::errors).
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
    Reply {
        /// Index of the request answered.
        msg: u64,
        /// The stack's reason.
        source: CallError,
    },
    /// Client: the server's SYN-ACK carried no tcp_bth option, so the connection is a plain
    /// byte stream, but this run is not `--plain`.
    #[error("{}", peer_not_bth(*confirmed))]
    PeerNotBth {
        /// The server said so too: a bth-perf refusal came on the byte stream, so it runs
        /// `--plain`. False: it said nothing (it is not bth-perf, or did not answer in time).
        confirmed: bool,
    },
    /// Client with `--plain`: the handshake settled on tcp_bth.
    #[error("tcp_bth negotiated in plain mode")]
    BthInPlainMode,
    /// Server: a client connected without tcp_bth (its SYN carried no tcp_bth option): it runs
    /// `--plain`, this server does not. The client was told so on the byte stream.
    #[error(
        "a client connected without tcp_bth (plain TCP): it runs --plain and this server does \
         not; run both sides with or without --plain"
    )]
    ClientPlain,
    /// Server with `--plain`: the client's SYN offered tcp_bth, so it does not run `--plain`.
    /// The client was told so on the byte stream.
    #[error(
        "a client connected with tcp_bth (its SYN offered the option): it runs without \
         --plain and this server runs --plain; run both sides with or without --plain"
    )]
    ClientBth,
    /// A control message (hello, accept, refusal, done, statistics) could not be read.
    #[error(transparent)]
    Control(#[from] CtrlError),
    /// A control message arrived where the protocol has no place for it.
    #[error("unexpected {what} message from the peer")]
    UnexpectedControl {
        /// Its name ([`Ctrl::what`](crate::ctrl::Ctrl::what)), or `data` for a data message
        /// at a side with no responder.
        what: &'static str,
    },
    /// Server side: the client's options differ from ours; the run was refused and the client
    /// told why.
    #[error("refused the client: {reason}")]
    OptionsDiffer {
        /// Every option that differs, `; `-separated (the refusal carries it, cut to fit).
        reason: String,
    },
    /// Client side: the server refused the run, for this reason (its words).
    #[error("the server refused the run: {reason}")]
    Refused {
        /// The refusal's text.
        reason: String,
    },
    /// The peer closed the connection before the run was over.
    #[error("the peer closed the connection before the run was over")]
    PeerClosedEarly,
    /// A work request this side posted (SEND, WRITE, READ, reply, control message)
    /// completed with an error.
    #[error("completion {wr_id} failed: {status:?}")]
    CompletionFailed {
        /// The WR's `wr_id`: the message index, or `u64::MAX` (control message) and
        /// `u64::MAX - 1` (done message).
        wr_id: u64,
        /// The CQE's status.
        status: WcStatus,
    },
    /// A completion of the peer's work here (receive, WRITE with immediate) came with an
    /// error.
    #[error("completion {op:?} failed: {status:?}")]
    OpFailed {
        /// The CQE's opcode.
        op: WcOp,
        /// The CQE's status.
        status: WcStatus,
    },
    /// READ `msg` returned other bytes than the responder's READ source holds (`verify`).
    #[error("READ {msg} returned different bytes")]
    ReadDiffers {
        /// Index of the message.
        msg: u64,
    },
    /// Message `msg` did not arrive intact (at the responder: SEND, or WRITE at its offset;
    /// `--plain`: the byte stream's message).
    #[error("message {msg} differs")]
    MessageDiffers {
        /// Index of the message.
        msg: u64,
    },
    /// The done message counted a different number of messages than the run has (count
    /// mode; against arrivals: [`PerfError::ArrivalsDiffer`]).
    #[error("the peer reports {got} messages done, {want} expected")]
    DoneCount {
        /// Messages the done message counts.
        got: u64,
        /// The run's `count`.
        want: u64,
    },
    /// The requester's done message counts more (or fewer) messages than arrived here.
    #[error("the peer reports {sent} messages sent, of which {expected} should arrive here; {arrived} did")]
    ArrivalsDiffer {
        /// Messages the done message counts, READs and plain WRITEs included (they arrive
        /// nowhere here).
        sent: u64,
        /// Of them, the SENDs and WRITEs with immediate, which complete here.
        expected: u64,
        /// SENDs and WRITEs with immediate that completed here.
        arrived: u64,
    },
    /// Size 0 was asked for an operation that moves bytes (only SEND and WRITE with immediate
    /// have a zero-length form worth measuring).
    #[error(
        "size 0 is for send and write-imm only (zero-length SEND / WRITE with immediate); \
         {op} needs at least 1 byte"
    )]
    ZeroSize {
        /// The operation asked for.
        op: PerfOp,
    },
    /// Larger than a `tcp_bth` message can be.
    #[error("size {size} is above the largest message, {max} bytes")]
    SizeTooLarge {
        /// The size asked for, in bytes.
        size: u32,
        /// The largest message, in bytes (`tcp_bth::wire::MAX_MESSAGE_LEN`).
        max: u32,
    },
    /// A count, depth or duration of zero.
    #[error("{what} must be at least 1")]
    Zero {
        /// The option, as the command line names it (`--tx-depth`, `--iters`).
        what: &'static str,
    },
    /// A message arrived with another immediate than the next one expected in its class
    /// (`verify`: message `i` carries `i`, and a class completes in order).
    #[error("immediate {got:?} arrived where message {want} was expected")]
    UnexpectedImmediate {
        /// The immediate that arrived (`None`: the message carried none).
        got: Option<u32>,
        /// Index of the message expected (the immediate it carries).
        want: u64,
    },
    /// Message `msg` arrived with another length than the run's size (`verify`).
    #[error("message {msg} is {got} bytes long, {want} expected")]
    LengthDiffers {
        /// Index of the message (its immediate).
        msg: u64,
        /// Bytes that arrived.
        got: u32,
        /// The run's size, in bytes.
        want: u32,
    },
    /// A verified plain WRITE run needs a target of `count * size` bytes; this one is too big.
    #[error(
        "a verified plain WRITE run needs count * size = {bytes} bytes of target region, \
         at most {max}"
    )]
    WriteRegionTooLarge {
        /// The region the run needs, in bytes.
        bytes: u64,
        /// The most allowed, in bytes: [`crate::MAX_VERIFIED_WRITE_REGION`], or `usize::MAX`
        /// where the region cannot be addressed.
        max: u64,
    },
    /// A verified plain WRITE run gives every message its own offset, which needs a count.
    #[error(
        "--verify with --op write gives every message its own offset in the server's memory, \
         so it needs a message count (--iters), not --duration"
    )]
    VerifiedWriteNeedsCount,
    /// `--bidirectional` with an operation it cannot mean anything for.
    #[error("--bidirectional does not apply to {why}")]
    BidirUnsupported {
        /// The operation or switch, and why (for the message).
        why: &'static str,
    },
}

/// What [`PerfError::PeerNotBth`] says.
fn peer_not_bth(confirmed: bool) -> &'static str {
    if confirmed {
        "the server runs --plain (its SYN-ACK carried no tcp_bth option); run both sides with \
         or without --plain"
    } else {
        "the server answered without tcp_bth (its SYN-ACK carried no tcp_bth option) and said \
         nothing more: it runs --plain, or is not bth-perf; run both sides with or without \
         --plain"
    }
}
