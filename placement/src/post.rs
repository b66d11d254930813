//! Work requests the local owner posts: receive buffers (send class) and READ sinks
//! (read-response class), and the credit the receive queue implies.

use crate::msg::MsgTrack;
use crate::placer::{PendingRead, Placement, PostedRecv};
use bth_wire::MAX_MESSAGE_LEN;
use thiserror::Error;

/// Why a post was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PostRecvError {
    /// The queue is at its limit: `max_posted_recvs` receives, or `max_inflight` outstanding
    /// READs.
    #[error("queue full: {max} entries posted")]
    Full {
        /// The limit reached, in entries.
        max: usize,
    },
    /// [`Placement::flush`] has run; nothing can be posted any more.
    #[error("the connection was flushed")]
    Flushed,
    /// [`Placement::expect_read_response`] with an MSN other than the one after the last READ
    /// registered.
    #[error("READ request MSN {got} is not the next one ({expected}): MSNs are consecutive")]
    NotNextMsn {
        /// The READ request MSN that was due.
        expected: u16,
        /// The MSN given.
        got: u16,
    },
    /// A READ sink (length given here, in bytes) that is empty or longer than
    /// `MAX_MESSAGE_LEN`.
    #[error("READ sink of {0} bytes: a READ reads 1 to 2^24 - 1 bytes")]
    BadSinkLen(usize),
}

/// A refused post hands its buffer back.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{error}")]
pub struct PostRejected {
    /// Why the post was refused.
    pub error: PostRecvError,
    /// The receive buffer or READ sink that was posted, unchanged.
    pub buf: Vec<u8>,
}

impl Placement {
    /// Post a receive buffer. Buffers bind to consecutive SEND MSNs: the first one posted to the
    /// peer's `first_msn`, each later one to the next MSN. Returns the MSN this buffer serves.
    pub fn post_recv(&mut self, wr_id: u64, buf: Vec<u8>) -> Result<u16, PostRejected> {
        if self.flushed {
            return Err(PostRejected {
                error: PostRecvError::Flushed,
                buf,
            });
        }
        if self.send.entries.len() >= self.cfg.max_posted_recvs {
            return Err(PostRejected {
                error: PostRecvError::Full {
                    max: self.cfg.max_posted_recvs,
                },
                buf,
            });
        }
        let msn = self.send.next_msn();
        self.recv_unfilled.post(buf.len());
        self.send.entries.push_back(PostedRecv {
            wr_id,
            buf,
            track: MsgTrack::default(),
        });
        Ok(msn)
    }

    /// The last SEND MSN with a buffer posted: the `rtr` credit. Equals
    /// [`completed_send_msn`](Self::completed_send_msn) when nothing is posted (no credit).
    pub fn credit_msn(&self) -> u16 {
        self.send.next_msn().wrapping_sub(1)
    }

    /// The newest SEND whose completion has been generated in order: the pure ACK's MSN.
    pub fn completed_send_msn(&self) -> u16 {
        self.send.completed()
    }

    /// Receives posted and not yet completed.
    pub fn posted_recvs(&self) -> usize {
        self.send.entries.len()
    }

    /// Register a READ this side sends with MSN `request_msn`, whose response lands in `sink`
    /// (`sink.len()` = READ length). Call it before the request goes out, so the response can
    /// never arrive first. The first call fixes the class's start (our own first MSN); later
    /// calls must use consecutive MSNs, as the framer numbers them.
    pub fn expect_read_response(
        &mut self,
        request_msn: u16,
        wr_id: u64,
        sink: Vec<u8>,
    ) -> Result<(), PostRejected> {
        let refuse = |error, buf| Err(PostRejected { error, buf });
        if self.flushed {
            return refuse(PostRecvError::Flushed, sink);
        }
        if sink.is_empty() || sink.len() > MAX_MESSAGE_LEN as usize {
            return refuse(PostRecvError::BadSinkLen(sink.len()), sink);
        }
        if self.reads.entries.len() >= self.limits.max_inflight {
            return refuse(
                PostRecvError::Full {
                    max: self.limits.max_inflight,
                },
                sink,
            );
        }
        if !self.reads_anchored {
            self.reads.head = request_msn;
            self.reads_anchored = true;
        }
        let expected = self.reads.next_msn();
        if request_msn != expected {
            return refuse(
                PostRecvError::NotNextMsn {
                    expected,
                    got: request_msn,
                },
                sink,
            );
        }
        self.sink_unfilled.post(sink.len());
        self.reads.entries.push_back(PendingRead {
            wr_id,
            sink,
            track: MsgTrack::default(),
        });
        Ok(())
    }

    /// READs issued and not yet completed.
    pub fn outstanding_reads(&self) -> usize {
        self.reads.entries.len()
    }

    /// Take back the READ registered last, if it is `request_msn` and nothing of its response
    /// has arrived: for a caller whose own checks, made after registering, refused the READ.
    /// Returns the sink.
    pub fn cancel_read(&mut self, request_msn: u16) -> Option<Vec<u8>> {
        let last = self.reads.next_msn().wrapping_sub(1);
        let untouched = self
            .reads
            .entries
            .back()
            .is_some_and(|r| r.track.cov.range_count() == 0 && r.track.failed.is_none());
        if last != request_msn || !untouched {
            return None;
        }
        let r = self.reads.entries.pop_back()?;
        self.sink_unfilled
            .retire(r.sink.len(), r.track.cov.covered());
        Some(r.sink)
    }

    /// Bytes of the posted receives that no SEND segment has filled yet (a zero-length receive
    /// counts one byte, for the pad byte of a zero-length SEND). A receive whose SEND finished
    /// short of its length counts its unused tail until its completion leaves in order.
    pub fn unfilled_recv_bytes(&self) -> u64 {
        self.recv_unfilled.bytes()
    }

    /// Bytes of the outstanding READs' sinks that no response segment has filled yet.
    pub fn unfilled_read_bytes(&self) -> u64 {
        self.sink_unfilled.bytes()
    }
}
