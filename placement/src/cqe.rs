//! Completion queue entries, as verbs reports them (`ibv_wc`), trimmed to what this side sees.

use bth_wire::MsgClass;

/// What completed. Placement produces the receive-side ones; the stack uses the same type for
/// the requester's SEND and RDMA WRITE completions, so a connection has one completion type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcOp {
    /// A SEND this side posted was acknowledged (or failed).
    Send,
    /// An RDMA WRITE this side posted was acknowledged (or failed).
    RdmaWrite,
    /// A SEND landed in a posted receive.
    Recv,
    /// An RDMA WRITE with immediate finished; no posted receive is consumed (docs/design.md).
    /// Also the opcode of a WRITE's error completion at the target (status tells them apart:
    /// a plain WRITE that succeeds completes silently).
    RecvRdmaWithImm,
    /// A READ this side issued has all its response bytes in the sink.
    RdmaRead,
}

/// How it completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcStatus {
    /// The work request completed: every byte is in place (or, send side, acknowledged).
    Success,
    /// The message is longer than the posted buffer or READ sink.
    LocalLengthError,
    /// rkey unknown, right missing, or address range outside the region.
    RemoteAccessError,
    /// The peer broke the protocol for this message (lengths that contradict each other, a
    /// message above the announced size limit, a WRITE segment without RETH).
    RemoteInvalidRequest,
    /// The READ response ended before the requested length.
    BadResponse,
    /// Flushed by [`Placement::flush`](crate::Placement::flush): the connection is gone.
    WrFlushError,
    /// The responder failed for a reason of its own (NAK remote operational error).
    RemoteOperationalError,
    /// A SEND waited for the peer to post a receive (message credit) longer than the
    /// connection's RNR timeout (IB: RNR retry count exceeded).
    RnrRetryExceeded,
}

/// One completion. `buf` hands the posted buffer or READ sink back to its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cqe {
    /// The posted receive's or READ's `wr_id`; 0 for completions without a local work request
    /// (WRITE with immediate, error completion of a peer's WRITE).
    pub wr_id: u64,
    /// Message class of the completed message (SEND, WRITE, READ response, ...).
    pub class: MsgClass,
    /// The message's MSN in its class (for READs: the request MSN the response echoed).
    pub msn: u16,
    /// What completed: the verbs opcode of the completion.
    pub op: WcOp,
    /// Message length when known (always on success); 0 for flushed work requests.
    pub byte_len: u32,
    /// The immediate the SEND or WRITE carried; only on successful completions.
    pub imm: Option<u32>,
    /// How the work request ended.
    pub status: WcStatus,
    /// The posted receive buffer or READ sink, handed back with its bytes placed; `None` when
    /// no local buffer was involved (WRITE with immediate, send-side completions).
    pub buf: Option<Vec<u8>>,
}

impl Cqe {
    /// Whether `status` is [`WcStatus::Success`].
    pub fn is_success(&self) -> bool {
        self.status == WcStatus::Success
    }
}
