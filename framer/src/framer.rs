//! The queue of unacknowledged messages, the per-class MSN counters, and the lookups the stack
//! makes by stream offset.

use crate::message::{Kind, Message, MessageInfo};
use crate::request::{FramerConfig, WorkRequest, WrError, WrOp};
use crate::segment::SegmentDesc;
use bth_wire::{MsgClass, ReadRequest, MAX_MESSAGE_LEN};
use bytes::Bytes;
use std::collections::VecDeque;

/// Most messages of one class that may be posted and not yet released: with more, the oldest
/// and newest MSN would be 2^15 or more apart and serial comparison (`msn_lt`) would invert.
pub const MAX_IN_FLIGHT: u32 = 1 << 15;

/// What a successful post assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Posted {
    /// Message class whose MSN counter the message took (ReadResponse for a READ response).
    pub class: MsgClass,
    /// MSN of the message in its class: the class counter's value, or the request's MSN for a
    /// READ response.
    pub msn: u16,
    /// Stream offset of the message's first byte.
    pub stream_start: u64,
    /// Stream bytes the message occupies: 1 for a zero-length message (its pad byte), 16 for a
    /// READ request. (Not the message's length: [`Released::len`] is that.)
    pub stream_len: u32,
    /// The work request's `wr_id`; 0 for a READ response.
    pub wr_id: u64,
}

/// A message whose every byte the peer has acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Released {
    /// The `wr_id` the message was posted with (0 for a READ response), for the send CQE.
    pub wr_id: u64,
    /// Class of the released message.
    pub class: MsgClass,
    /// MSN the message carried in its class.
    pub msn: u16,
    /// The message's length as the application posted it (0 for a zero-length message).
    pub len: u32,
}

/// Send-side framing state of one connection.
#[derive(Debug, Clone)]
pub struct Framer {
    mss: u32,
    /// S framing (amendment 3): every segment of a message carries the same option.
    seq_framed: bool,
    max_message_len: u32,
    /// Next MSN per class, indexed by `MsgClass::index`; the ReadResponse slot is unused
    /// because responses echo the request's MSN.
    next_msn: [u16; 4],
    in_flight: [u32; 4],
    /// Contiguous and ordered by `stream_start`, which is what makes binary search valid.
    queue: VecDeque<Message>,
    stream_end: u64,
}

impl Framer {
    /// An empty framer: stream offset 0, every class counter at `cfg.first_msn`, `mss` 0
    /// raised to 1, `max_message_len` clamped to `MAX_MESSAGE_LEN`, S framing off.
    pub fn new(cfg: FramerConfig) -> Framer {
        Framer {
            mss: cfg.mss.max(1),
            seq_framed: false,
            max_message_len: cfg.max_message_len.min(MAX_MESSAGE_LEN),
            next_msn: [cfg.first_msn; 4],
            in_flight: [0; 4],
            queue: VecDeque::new(),
            stream_end: 0,
        }
    }

    /// Adopt the limit the peer announced in its hello when the framer was built before the
    /// handshake. Applies to later posts only; queued messages are not re-checked.
    pub fn set_max_message_len(&mut self, max: u32) {
        self.max_message_len = max.min(MAX_MESSAGE_LEN);
    }

    /// Change the segment-index divisor. Only meaningful before the first segment is cut:
    /// afterwards retransmissions would number segments differently from their originals.
    pub fn set_mss(&mut self, mss: u32) {
        self.mss = mss.max(1);
    }

    /// The segment-index divisor in use (at least 1).
    pub fn mss(&self) -> u32 {
        self.mss
    }

    /// Cut segments in S framing (amendment 3) from now on: the option of each segment is the
    /// message's (ONLY opcode, the anchor in the offset field, the message length in the ICRC
    /// field, a WRITE's address of its first byte), whatever the cut, so that a segmentation
    /// offload may cut a super-segment anywhere. Set at negotiation, before the first segment.
    pub fn set_seq_framed(&mut self, seq: bool) {
        self.seq_framed = seq;
    }

    /// Whether segments are cut in S framing (amendment 3).
    pub fn seq_framed(&self) -> bool {
        self.seq_framed
    }

    /// Largest message a post may carry, in bytes (the peer's limit, at most
    /// `MAX_MESSAGE_LEN`); larger posts fail with [`WrError::TooLarge`].
    pub fn max_message_len(&self) -> u32 {
        self.max_message_len
    }

    /// Queue a SEND, RDMA WRITE or RDMA READ request after everything posted so far.
    pub fn post(&mut self, wr: WorkRequest) -> Result<Posted, WrError> {
        let WorkRequest { wr_id, op, sg_list } = wr;
        let (kind, payload) = match op {
            WrOp::Send { imm } => (Kind::Send { imm }, self.message_chunks(sg_list)?),
            WrOp::RdmaWrite {
                rkey,
                remote_addr,
                imm,
            } => {
                let payload = self.message_chunks(sg_list)?;
                check_remote_range(remote_addr, u64::from(payload.len))?;
                let kind = Kind::Write {
                    rkey,
                    remote_addr,
                    imm,
                };
                (kind, payload)
            }
            WrOp::RdmaRead {
                rkey,
                remote_addr,
                len,
            } => {
                if !sg_list.is_empty() {
                    return Err(WrError::ReadWithData {
                        entries: sg_list.len(),
                    });
                }
                if len == 0 {
                    return Err(WrError::ReadEmpty);
                }
                if len > MAX_MESSAGE_LEN {
                    return Err(WrError::ReadTooLarge {
                        len,
                        max: MAX_MESSAGE_LEN,
                    });
                }
                check_remote_range(remote_addr, u64::from(len))?;
                let req = ReadRequest {
                    rkey,
                    addr: remote_addr,
                    len,
                };
                let bytes = req.to_bytes();
                let payload = Payload {
                    len: bytes.len() as u32,
                    chunks: vec![Bytes::copy_from_slice(&bytes)],
                };
                (Kind::ReadRequest, payload)
            }
        };
        let class = kind.class();
        let msn = self.next_msn[class.index()];
        let posted = self.enqueue(msn, wr_id, kind, payload)?;
        self.next_msn[class.index()] = msn.wrapping_add(1);
        Ok(posted)
    }

    /// Queue the answer to the peer's READ request `request_msn`. The caller has already
    /// checked the request (rkey, bounds, that `data` is exactly the requested length); this
    /// only frames it. No counter advances: the response's MSN is the request's. `staged`:
    /// `data` is the caller's own copy of the region, made for this response (see
    /// [`SegmentDesc::staged`](crate::SegmentDesc::staged)).
    pub fn post_read_response(
        &mut self,
        request_msn: u16,
        data: Vec<Bytes>,
        staged: bool,
    ) -> Result<Posted, WrError> {
        let payload = self.data_chunks(data)?;
        let posted = self.enqueue(request_msn, 0, Kind::ReadResponse, payload)?;
        self.mark_staged(staged);
        Ok(posted)
    }

    /// [`post`](Self::post) of a SEND or WRITE whose `sg_list` is the caller's own copy of the
    /// bytes, made for this request (see [`SegmentDesc::staged`](crate::SegmentDesc::staged)).
    pub fn post_staged(&mut self, wr: WorkRequest) -> Result<Posted, WrError> {
        let posted = self.post(wr)?;
        self.mark_staged(true);
        Ok(posted)
    }

    /// Mark the message just queued (the last one) as staged.
    fn mark_staged(&mut self, staged: bool) {
        if let Some(m) = self.queue.back_mut() {
            m.staged = staged;
        }
    }

    /// Drop every message whose whole range lies below `acked_stream_offset`, oldest first.
    /// A partly acknowledged message stays: its tail may still need (re)transmission.
    pub fn release(&mut self, acked_stream_offset: u64) -> Vec<Released> {
        let mut out = Vec::new();
        while let Some(m) = self
            .queue
            .front()
            .filter(|m| m.info.stream_end() <= acked_stream_offset)
        {
            let i = m.info;
            let n = &mut self.in_flight[i.class.index()];
            *n = n.saturating_sub(1);
            self.queue.pop_front();
            out.push(Released {
                wr_id: i.wr_id,
                class: i.class,
                msn: i.msn,
                len: i.message_len(),
            });
        }
        out
    }

    /// The segment that starts exactly at `stream_offset` and carries at most `max_payload`
    /// bytes of the message holding that offset (never bytes of the next message).
    ///
    /// `None` when the offset is not inside a queued message, `max_payload` is 0, or the
    /// message is a READ request (16 bytes with the single opcode RDMA_READ_REQUEST, so it
    /// cannot be split) and either the offset is not its first byte or `max_payload < 16`.
    pub fn segment_at(&self, stream_offset: u64, max_payload: u32) -> Option<SegmentDesc> {
        if max_payload == 0 {
            return None;
        }
        let m = self.find(stream_offset)?;
        if self.seq_framed {
            return SegmentDesc::cut_seq(m, stream_offset, max_payload);
        }
        SegmentDesc::cut(m, stream_offset, max_payload, self.mss)
    }

    /// The queued message holding `offset`.
    pub fn message_at(&self, offset: u64) -> Option<&MessageInfo> {
        self.find(offset).map(|m| &m.info)
    }

    fn find(&self, offset: u64) -> Option<&Message> {
        let idx = self
            .queue
            .partition_point(|m| m.info.stream_end() <= offset);
        self.queue.get(idx).filter(|m| m.info.contains(offset))
    }

    /// Offset one past the last posted byte: where the next message will start.
    pub fn stream_end(&self) -> u64 {
        self.stream_end
    }

    /// Offset below which every message has been released: the start of the oldest queued
    /// message, or [`stream_end`](Self::stream_end) when none is queued.
    pub fn released_up_to(&self) -> u64 {
        self.queue
            .front()
            .map_or(self.stream_end, |m| m.info.stream_start)
    }

    /// The MSN the next post of `class` will get; `None` for ReadResponse, which has no counter.
    pub fn next_msn(&self, class: MsgClass) -> Option<u16> {
        (class != MsgClass::ReadResponse).then(|| self.next_msn[class.index()])
    }

    /// Messages of `class` posted and not yet released.
    pub fn in_flight(&self, class: MsgClass) -> u32 {
        self.in_flight[class.index()]
    }

    /// No message is queued.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Number of queued messages, all classes together.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Queued messages, oldest first.
    pub fn messages(&self) -> impl ExactSizeIterator<Item = &MessageInfo> + '_ {
        self.queue.iter().map(|m| &m.info)
    }

    /// SEND/WRITE payload: like [`data_chunks`](Self::data_chunks), but a message of no bytes
    /// is allowed (IB verbs allow it; zero-length SEND/WRITE with immediate is how collective
    /// libraries signal completion). It takes one pad byte of stream, so TCP makes it reliable
    /// like any other message; the segment says so with `ZERO_LENGTH_MBO`.
    fn message_chunks(&self, sg_list: Vec<Bytes>) -> Result<Payload, WrError> {
        match self.data_chunks(sg_list) {
            Err(WrError::Empty) => Ok(Payload {
                chunks: Vec::new(),
                len: 0,
            }),
            other => other,
        }
    }

    /// READ response payload and, through `message_chunks`, SEND/WRITE payload: non-empty
    /// slices within the peer's limit.
    fn data_chunks(&self, sg_list: Vec<Bytes>) -> Result<Payload, WrError> {
        let chunks: Vec<Bytes> = sg_list.into_iter().filter(|b| !b.is_empty()).collect();
        let total: u64 = chunks.iter().map(|c| c.len() as u64).sum();
        if total == 0 {
            return Err(WrError::Empty);
        }
        // Within the limit is what makes it a u32 (the limit is at most MAX_MESSAGE_LEN).
        match u32::try_from(total) {
            Ok(len) if len <= self.max_message_len => Ok(Payload { chunks, len }),
            _ => Err(WrError::TooLarge {
                len: total,
                max: self.max_message_len,
            }),
        }
    }

    /// Append after the last message. Every check happens before the first mutation, so a
    /// refusal leaves the framer as it was.
    fn enqueue(
        &mut self,
        msn: u16,
        wr_id: u64,
        kind: Kind,
        Payload { chunks, len }: Payload,
    ) -> Result<Posted, WrError> {
        let class = kind.class();
        if self.in_flight[class.index()] >= MAX_IN_FLIGHT {
            return Err(WrError::TooManyInFlight { class });
        }
        let zero_length = len == 0;
        let (chunks, len) = if zero_length {
            (vec![Bytes::from_static(&[0])], 1)
        } else {
            (chunks, len)
        };
        let stream_start = self.stream_end;
        let end = stream_start
            .checked_add(u64::from(len))
            .ok_or(WrError::StreamExhausted)?;
        let info = MessageInfo {
            class,
            msn,
            stream_start,
            len,
            wr_id,
            zero_length,
        };
        self.queue.push_back(Message::new(info, kind, chunks));
        self.in_flight[class.index()] += 1;
        self.stream_end = end;
        Ok(Posted {
            class,
            msn,
            stream_start,
            stream_len: len,
            wr_id,
        })
    }
}

/// A message's payload slices and their total length, already checked against the message
/// limit (so the length fits the 24-bit offset, and a `u32`).
struct Payload {
    chunks: Vec<Bytes>,
    len: u32,
}

/// The address carried for the message's last byte must not wrap, or the RETH of a later
/// segment would name a different region than the one the application targeted.
fn check_remote_range(addr: u64, len: u64) -> Result<(), WrError> {
    match addr.checked_add(len.saturating_sub(1)) {
        Some(_) => Ok(()),
        None => Err(WrError::RemoteRangeWraps { addr, len }),
    }
}
