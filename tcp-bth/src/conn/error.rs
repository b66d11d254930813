//! Errors, split by whose they are (rustls' rule): [`ConnectionError`] says why a connection
//! ended and is reported once ([`Event::Closed`](super::Event::Closed),
//! [`Connection::error`](super::Connection::error)); [`CallError`] says why one call was refused
//! and leaves the connection as it was. A refused call that took a buffer hands it back in a
//! [`Rejected`].

use super::Unreachable;
use bth_framer::WrError;
use bth_placement::MrError;
use bth_wire::Nak;
use std::fmt;
use thiserror::Error;

/// Why a connection ended abnormally. Terminal: once set it never changes.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ConnectionError {
    /// The peer answered our SYN with RST.
    #[error("connection refused by peer (RST in reply to SYN)")]
    Refused,
    /// The peer reset an established connection.
    #[error("connection reset by peer")]
    Reset,
    /// The retransmission timer expired this many times in a row. `icmp`: the latest
    /// destination unreachable the path reported meanwhile (a soft error), if any.
    #[error("retransmission timeout: peer unreachable after {retries} retries{}", IcmpNote(*.icmp))]
    TimedOut {
        /// Retransmissions made before giving up (`Config::max_retries`).
        retries: u32,
        /// The latest destination unreachable reported meanwhile.
        icmp: Option<Unreachable>,
    },
    /// Keepalive (`Config::keepalive`): the peer answered none of `probes` probes.
    #[error("keepalive: no answer to {probes} probes, the peer is gone{}", IcmpNote(*.icmp))]
    KeepaliveTimedOut {
        /// Probes sent without an answer (`Keepalive::probes`).
        probes: u32,
        /// The latest destination unreachable reported meanwhile.
        icmp: Option<Unreachable>,
    },
    /// User timeout (`Config::user_timeout`): data we sent stayed unacknowledged this long.
    #[error("user timeout: data unacknowledged for {after:?}{}", IcmpNote(*.icmp))]
    UserTimeout {
        /// The user timeout in force (`Config::user_timeout`).
        after: std::time::Duration,
        /// The latest destination unreachable reported meanwhile.
        icmp: Option<Unreachable>,
    },
    /// The peer sent an option in the framing we did not negotiate (the S bit, amendment 3):
    /// its segment was refused with a NAK.
    #[error(
        "framing mismatch: the peer sent a tcp_bth option in the framing not negotiated (S bit)"
    )]
    FramingMismatch,
    /// An ICMP destination unreachable answered our SYN (or SYN-ACK): the connect fails at
    /// once, as Linux's does (`conn/icmp.rs`).
    #[error("destination unreachable: {0} (ICMP, in answer to our SYN)")]
    Unreachable(Unreachable),
    /// Our SYN (or SYN-ACK) went unanswered `syns` times (`Config::syn_retries` + 1): nobody
    /// listens at that address, or no route leads there.
    #[error("no answer to {syns} SYNs: nothing listens there, or no route leads there")]
    HandshakeTimedOut {
        /// SYNs (or SYN-ACKs) sent, the first included.
        syns: u32,
    },
    /// The peer sent a segment that violated one of our memory regions' rights or bounds
    /// (RDMA rule: the QP goes to the error state).
    #[error("remote access error: a segment violated memory region rights or bounds")]
    RemoteAccess,
    /// The peer asked for an RDMA READ we cannot answer (longer than it accepts).
    #[error("remote invalid request: an RDMA READ we cannot answer")]
    RemoteInvalidRequest,
    /// The peer sent a SEND longer than the receive buffer posted for it: that receive
    /// completed with `LocalLengthError` and the peer's SEND with a NAK.
    #[error("local length error: a SEND longer than the receive buffer posted for it")]
    LocalLength,
    /// The peer refused one of our work requests (IB RC NAK): that request completed with the
    /// matching error status, everything else outstanding flushed.
    #[error("peer refused our request: {0}")]
    PeerNak(Nak),
    /// A SEND waited longer than `Config::rnr_timeout` for the peer to post a receive.
    #[error("receiver not ready: SEND MSN {msn} found no posted receive within the RNR timeout")]
    RnrRetryExceeded {
        /// MSN of the SEND that waited; it completed with `RnrRetryExceeded`.
        msn: u16,
    },
    /// [`Connection::abort`](super::Connection::abort) was called.
    #[error("aborted locally")]
    LocallyAborted,
    /// The driver offered a transmit buffer shorter than the longest segment this connection
    /// may build ([`max_segment_len`](super::Connection::max_segment_len)): it could never
    /// send, so it ends at once instead of stalling. `Config::mss` is larger than the data
    /// path's packets (set it from the device's MTU, less 40).
    #[error("transmit buffer of {buffer} bytes is shorter than the {needed}-byte segments this connection may build: Config::mss is larger than the data path carries")]
    TransmitBufferShort {
        /// Bytes the longest segment may take (`max_segment_len`).
        needed: usize,
        /// Bytes the offered buffer held.
        buffer: usize,
    },
}

/// ", and the path reported …" for an error that an ICMP soft error preceded.
struct IcmpNote(Option<Unreachable>);

impl fmt::Display for IcmpNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(u) => write!(f, " (the path reported {u} by ICMP)"),
            None => Ok(()),
        }
    }
}

impl ConnectionError {
    /// Did we end the connection with an RST of our own (so a peer that keeps sending is told
    /// again), rather than the peer or silence ending it?
    pub(super) fn sent_rst(&self) -> bool {
        !matches!(
            self,
            ConnectionError::Refused
                | ConnectionError::Reset
                // Nobody there to tell.
                | ConnectionError::Unreachable(_)
                | ConnectionError::PeerNak(_)
                // No buffer to build it in.
                | ConnectionError::TransmitBufferShort { .. }
        )
    }
}

/// Why a call was refused. The connection is unchanged by the refusal.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum CallError {
    /// The connection has ended with this error.
    #[error("connection ended: {0}")]
    Ended(ConnectionError),
    /// `close()` was called, or the connection closed in order: no new work.
    #[error("connection is closing or closed")]
    Closed,
    /// A verbs call (work requests, memory regions) on a connection that fell back to plain
    /// TCP.
    #[error("operation needs tcp_bth, but the peer did not negotiate it")]
    NotBth,
    /// `send_bytes` on a connection that negotiated tcp_bth.
    #[error("operation needs a plain TCP byte stream, but tcp_bth was negotiated")]
    NotPlain,
    /// The call depends on the mode, which the handshake has not settled yet.
    #[error("handshake not finished")]
    NotEstablished,
    /// The framer refused the work request (size, sequence space, range).
    #[error("work request refused: {0}")]
    Post(#[from] WrError),
    /// Placement refused the receive buffer or READ sink (queue full, bad length).
    #[error("receive side refused the buffer: {0}")]
    Placement(#[from] bth_placement::PostRecvError),
    /// Memory regions refused the call (registration, deregistration, a local write, a
    /// scatter/gather entry); the `MrError` says why.
    #[error("memory region: {0}")]
    Mr(#[from] MrError),
    /// An RDMA READ given to `post_send`: it needs a sink, so it goes through `post_read`.
    #[error("RDMA READ is posted with post_read, not post_send")]
    ReadViaPostSend,
}

/// A refused call that took a buffer: why, and the buffer, handed back untouched.
#[derive(Clone, PartialEq, Eq, Error)]
#[error("{kind}")]
pub struct Rejected<B> {
    /// Why the call was refused.
    pub kind: CallError,
    /// The buffer (or work request) the call took, unchanged.
    pub buf: B,
}

impl<B> Rejected<B> {
    pub(super) fn new(kind: impl Into<CallError>, buf: B) -> Rejected<B> {
        Rejected {
            kind: kind.into(),
            buf,
        }
    }
}

/// Prints the reason, not the buffer's bytes.
impl<B> fmt::Debug for Rejected<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rejected")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// `post_recv` and `post_read` refusals: the receive buffer or READ sink comes back.
pub type PostBufError = Rejected<Vec<u8>>;
/// `post_send` refusals: the work request comes back.
pub type PostSendError = Rejected<bth_framer::WorkRequest>;
/// `register_mr` refusals: the buffer comes back.
pub type RegisterError = Rejected<Vec<u8>>;
