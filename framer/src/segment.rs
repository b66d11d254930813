//! Cutting one segment out of a queued message: the BTH fields a byte position implies and the
//! payload as zero-copy slices of the posted buffers.

use crate::message::{Kind, Message};
use bth_wire::copy::copy_payload;
use bth_wire::{Bth, Extension, MessageKind, MsgClass, Opcode, Position, Reth, ZERO_LENGTH_MBO};
use bytes::{Bytes, BytesMut};
use smallvec::SmallVec;

/// One data segment ready for the stack: it adds timestamps and flags, seals the ICRC over the
/// payload and maps `stream_offset` to a sequence number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentDesc {
    /// Stream offset of the segment's first payload byte.
    pub stream_offset: u64,
    /// Payload bytes; equals [`payload_len`](Self::payload_len).
    pub len: u32,
    /// `wr_id` of the message the segment belongs to (0 for a READ response).
    pub wr_id: u64,
    /// Class of the message the segment belongs to.
    pub class: MsgClass,
    /// Opcode, MSN, offset, segment index and extension filled; timestamps `None`, ICRC 0.
    pub bth: Bth,
    /// Slices of the posted buffers covering exactly this segment's bytes, in order. Inline
    /// for up to two (a segment within one posted buffer, or across one boundary): cutting a
    /// segment allocates nothing.
    pub payload: Slices,
    /// The payload lies in the stack's own copy of its message, made at post (READ responses,
    /// posts from registered regions): one user-space copy of these bytes is already made,
    /// so they should leave without another (gathered, whatever their length).
    pub staged: bool,
}

/// A segment's payload slices.
pub type Slices = SmallVec<[Bytes; 2]>;

impl SegmentDesc {
    /// The segment of `m` starting at `stream_offset` with at most `max_payload` bytes, or
    /// `None` when no valid segment starts there (see [`crate::Framer::segment_at`]).
    pub(crate) fn cut(
        m: &Message,
        stream_offset: u64,
        max_payload: u32,
        mss: u32,
    ) -> Option<SegmentDesc> {
        let info = &m.info;
        let (mbo, len) = span(m, stream_offset, max_payload)?;
        let pos = Position::of(mbo, len, info.len);
        // IBTA puts the immediate only on the segment that ends the message.
        let imm_here = |imm: Option<u32>| imm.filter(|_| !pos.more());
        let (opcode, ext) = match m.kind {
            // RDMA_READ_REQUEST has no FIRST/MIDDLE/LAST forms: the request travels whole.
            Kind::ReadRequest if pos == Position::Only => {
                (Opcode::RdmaReadRequest, Extension::None)
            }
            Kind::ReadRequest => return None,
            Kind::Send { imm } => {
                let imm = imm_here(imm);
                let op = Opcode::for_data(MessageKind::Send, pos, imm.is_some())?;
                (op, imm.map_or(Extension::None, Extension::Immediate))
            }
            Kind::Write {
                rkey,
                remote_addr,
                imm,
            } => {
                let imm = imm_here(imm);
                let op = Opcode::for_data(MessageKind::RdmaWrite, pos, imm.is_some())?;
                // Post refused ranges that wrap, so this never actually wraps.
                let reth = Reth {
                    rkey,
                    addr: remote_addr.wrapping_add(u64::from(mbo)),
                };
                let ext = match imm {
                    Some(i) => Extension::RethImmediate(reth, i),
                    None => Extension::Reth(reth),
                };
                (op, ext)
            }
            Kind::ReadResponse => (
                Opcode::for_data(MessageKind::ReadResponse, pos, false)?,
                Extension::None,
            ),
        };
        let bth = Bth {
            msn: info.msn,
            // The pad byte of a zero-length message sits at an offset no real byte can have.
            mbo: if info.zero_length {
                ZERO_LENGTH_MBO
            } else {
                mbo
            },
            // A re-cut retransmission keeps the index of the original segment its first byte
            // belonged to, because the index depends on the offset and the fixed MSS only.
            seg: ((mbo / mss.max(1)) % 256) as u8,
            ext,
            ..Bth::new(opcode)
        };
        Some(desc(m, stream_offset, mbo, len, bth))
    }

    /// The S-framed segment (amendment 3) of `m` starting at `stream_offset` with at most
    /// `max_payload` bytes. Its option is the message's, whatever the cut: the ONLY opcode, the
    /// anchor (the message's first stream byte mod 2^24) in the offset field, index 0, the
    /// message's length where the ICRC goes, the immediate on every segment and a WRITE's
    /// address of the message's first byte. A READ request still travels whole.
    pub(crate) fn cut_seq(
        m: &Message,
        stream_offset: u64,
        max_payload: u32,
    ) -> Option<SegmentDesc> {
        let info = &m.info;
        let (mbo, len) = span(m, stream_offset, max_payload)?;
        let (opcode, ext) = match m.kind {
            Kind::ReadRequest if mbo == 0 && len == info.len => {
                (Opcode::RdmaReadRequest, Extension::None)
            }
            Kind::ReadRequest => return None,
            Kind::Send { imm } => (
                Opcode::for_data(MessageKind::Send, Position::Only, imm.is_some())?,
                imm.map_or(Extension::None, Extension::Immediate),
            ),
            Kind::Write {
                rkey,
                remote_addr,
                imm,
            } => {
                let reth = Reth {
                    rkey,
                    addr: remote_addr,
                };
                let op = Opcode::for_data(MessageKind::RdmaWrite, Position::Only, imm.is_some())?;
                let ext = match imm {
                    Some(i) => Extension::RethImmediate(reth, i),
                    None => Extension::Reth(reth),
                };
                (op, ext)
            }
            Kind::ReadResponse => (
                Opcode::for_data(MessageKind::ReadResponse, Position::Only, false)?,
                Extension::None,
            ),
        };
        let bth = Bth {
            msn: info.msn,
            seq_framed: true,
            // Stream offsets mod 2^24: the receiver subtracts it from its own stream offset of
            // the segment, mod 2^24, and gets the placement offset.
            mbo: (info.stream_start % (1 << 24)) as u32,
            seg: 0,
            // The message's length, where per-segment framing has its ICRC; 0 for a
            // zero-length message, whose one pad byte is then never placed.
            icrc: info.message_len(),
            ext,
            ..Bth::new(opcode)
        };
        Some(desc(m, stream_offset, mbo, len, bth))
    }

    /// Payload bytes of the segment (`len` as a `usize`).
    pub fn payload_len(&self) -> usize {
        self.len as usize
    }

    /// One past the segment's last stream byte.
    pub fn stream_end(&self) -> u64 {
        self.stream_offset + u64::from(self.len)
    }

    /// Copy the payload to the front of `out`; returns the bytes written, which is
    /// [`payload_len`](Self::payload_len) unless `out` is shorter (then `out` is filled).
    pub fn copy_payload_to(&self, out: &mut [u8]) -> usize {
        let mut at = 0;
        for s in &self.payload {
            let Some(dst) = out.get_mut(at..) else { break };
            let n = s.len().min(dst.len());
            copy_payload(&mut dst[..n], &s[..n]);
            at += n;
        }
        at
    }

    /// The payload as one buffer: zero-copy when it lies in one posted slice.
    pub fn payload_bytes(&self) -> Bytes {
        match self.payload.as_slice() {
            [one] => one.clone(),
            many => {
                let mut b = BytesMut::with_capacity(self.payload_len());
                for s in many {
                    b.extend_from_slice(s);
                }
                b.freeze()
            }
        }
    }
}

/// Where a segment of `m` starting at `stream_offset` with at most `max_payload` bytes lies in
/// its message: (offset, length); `None` outside the message.
fn span(m: &Message, stream_offset: u64, max_payload: u32) -> Option<(u32, u32)> {
    let info = &m.info;
    let mbo = u32::try_from(stream_offset.checked_sub(info.stream_start)?).ok()?;
    let left = info.len.checked_sub(mbo).filter(|&l| l > 0)?;
    Some((mbo, left.min(max_payload)))
}

/// The segment of `m` at `stream_offset` (offset `mbo` in the message, `len` bytes) with
/// option `bth`.
fn desc(m: &Message, stream_offset: u64, mbo: u32, len: u32, bth: Bth) -> SegmentDesc {
    SegmentDesc {
        stream_offset,
        len,
        wr_id: m.info.wr_id,
        class: m.info.class,
        bth,
        payload: slices(m, mbo, len),
        staged: m.staged,
    }
}

/// Slices of `m`'s chunks covering `[mbo, mbo + len)` of the message.
fn slices(m: &Message, mbo: u32, len: u32) -> Slices {
    let first = m
        .chunk_starts
        .partition_point(|&s| s <= mbo)
        .saturating_sub(1);
    let end = mbo.saturating_add(len);
    let mut at = mbo;
    let mut out = Slices::new();
    let chunks = m.chunks.iter().zip(&m.chunk_starts).skip(first);
    for (chunk, &start) in chunks {
        if at >= end {
            break;
        }
        let from = (at - start) as usize;
        let to = ((end - start) as usize).min(chunk.len());
        out.push(chunk.slice(from..to));
        at = start + to as u32;
    }
    out
}
