//! What [`Placement::place`](crate::Placement::place) did with a segment, and the counters it
//! keeps.

use crate::mr::MrError;
use bth_wire::ReadRequest;

/// The result of placing one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlaceOutcome {
    /// `new_bytes` were written to their final place; any bytes of the segment already present
    /// were skipped, not copied again. At least one, except for the segment of a zero-length
    /// message, which finishes its message without bytes.
    Placed {
        /// Payload bytes of this segment copied to their target for the first time.
        new_bytes: u32,
    },
    /// Nothing new: the message already completed, or every byte was already present.
    Duplicate,
    /// A SEND for an MSN beyond the posted receives (beyond the credit). Nothing written; the
    /// stack must not acknowledge these bytes, so the peer retransmits them after a post.
    ReceiverNotReady,
    /// A valid READ request: the stack answers it (once: repeats are `Duplicate`) with READ
    /// response segments carrying the request's MSN.
    ReadRequested(ReadRequest),
    /// WRITE or READ request refused (rkey, right or bounds); nothing written. The message fails
    /// with `RemoteAccessError`.
    AccessError(MrError),
    /// The message is longer than its posted buffer or READ sink; nothing of this segment is
    /// written and the work request completes with `LocalLengthError`.
    LengthError,
    /// Refused for another reason; nothing written.
    Dropped(DropReason),
}

/// Why a segment was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// READ response whose MSN matches no outstanding READ.
    UnknownRead,
    /// MSN further ahead than any message could legitimately be (more than the configured
    /// in-flight bound, or the receive queue's maximum for SENDs).
    OutOfWindow,
    /// The connection's budget of coverage ranges is used up and this segment would open a new
    /// disjoint range; segments that extend or merge ranges are still accepted, so retransmission
    /// from the cumulative ACK point always makes progress.
    TooFragmented,
    /// The segment contradicts its message (length, limits, missing RETH, bad READ request).
    Invalid,
    /// A later segment of a message that already failed.
    MessageFailed,
    /// After [`Placement::flush`](crate::Placement::flush).
    Flushed,
}

impl PlaceOutcome {
    /// May the stack count this segment's bytes as received (ACK/SACK them)? False where a
    /// retransmission later could succeed: no receive posted yet, out of window, fragmentation
    /// budget, or connection flushed. Everything else is final, so retransmitting it is pointless.
    pub fn accepted(&self) -> bool {
        !matches!(
            self,
            PlaceOutcome::ReceiverNotReady
                | PlaceOutcome::Dropped(
                    DropReason::OutOfWindow | DropReason::TooFragmented | DropReason::Flushed
                )
        )
    }
}

/// Running totals for one connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Segments handed to `place`.
    pub segments: u64,
    /// Payload bytes that reached their final place (each message byte counted once).
    pub bytes_placed: u64,
    /// Payload bytes written into receive buffers and regions, counted at the copy itself
    /// (`msg.rs`, `CopyMeter`); equals `bytes_placed` when every byte is copied exactly once.
    pub bytes_copied: u64,
    /// Segments that brought nothing new.
    pub duplicate_segments: u64,
    /// Bytes that had already arrived (whole duplicates and the overlap of partial ones).
    pub duplicate_bytes: u64,
    /// SEND segments refused for lack of a posted receive.
    pub receiver_not_ready: u64,
    /// Messages failed because they are longer than their buffer or READ sink.
    pub length_errors: u64,
    /// Segments refused by rkey, right or bounds checks.
    pub access_errors: u64,
    /// READ responses for no outstanding READ.
    pub unknown_read_responses: u64,
    /// Segments whose MSN is too far ahead.
    pub out_of_window: u64,
    /// Protocol violations (see [`DropReason::Invalid`]).
    pub invalid: u64,
    /// READs whose response ended short of the requested length.
    pub bad_responses: u64,
    /// Segments refused by the coverage-range budget.
    pub too_fragmented: u64,
    /// Later segments of already failed messages.
    pub failed_message_segments: u64,
    /// Valid READ requests handed to the stack.
    pub read_requests: u64,
    /// Segments offered after `flush`.
    pub after_flush: u64,
    /// Completions queued (all statuses).
    pub completions: u64,
    /// Work requests completed with `WrFlushError`.
    pub flushed: u64,
    /// Finished WRITE-with-immediate messages still waiting for an earlier WRITE at flush time:
    /// no work request to flush, so their completion is discarded.
    pub discarded_on_flush: u64,
}
