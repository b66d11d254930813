//! A posted message as the framer keeps it until it is acknowledged: where it sits in the stream,
//! what it is, and its bytes as the caller's slices (never copied).

use bth_wire::MsgClass;
use bytes::Bytes;

/// Where a message sits in the stream and what it is; what the stack asks about a stream offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MessageInfo {
    /// Message class (SEND, WRITE, READ request or READ response).
    pub class: MsgClass,
    /// MSN of the message in its class (a READ response carries its request's MSN).
    pub msn: u16,
    /// Stream offset of the message's first byte; the segments' MBO is derived from it.
    pub stream_start: u64,
    /// Bytes of stream the message occupies (16 for a READ request).
    pub len: u32,
    /// 0 for READ responses, which answer the peer rather than a local work request.
    pub wr_id: u64,
    /// A message of no bytes: its one stream byte is padding (`len` is 1).
    pub zero_length: bool,
}

impl MessageInfo {
    /// One past the message's last stream byte.
    pub fn stream_end(&self) -> u64 {
        self.stream_start + u64::from(self.len)
    }

    /// Bytes of the message as posted: `len`, or 0 for a zero-length message.
    pub fn message_len(&self) -> u32 {
        if self.zero_length {
            0
        } else {
            self.len
        }
    }

    /// Whether stream offset `offset` is one of the message's stream bytes
    /// (`stream_start..stream_end()`).
    pub fn contains(&self, offset: u64) -> bool {
        (self.stream_start..self.stream_end()).contains(&offset)
    }
}

/// What decides the opcode family and the extension of every segment of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Send {
        imm: Option<u32>,
    },
    Write {
        rkey: u32,
        remote_addr: u64,
        imm: Option<u32>,
    },
    ReadRequest,
    ReadResponse,
}

impl Kind {
    pub(crate) const fn class(self) -> MsgClass {
        match self {
            Kind::Send { .. } => MsgClass::Send,
            Kind::Write { .. } => MsgClass::Write,
            Kind::ReadRequest => MsgClass::ReadRequest,
            Kind::ReadResponse => MsgClass::ReadResponse,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Message {
    pub(crate) info: MessageInfo,
    pub(crate) kind: Kind,
    /// Non-empty slices whose concatenation is the message.
    pub(crate) chunks: Vec<Bytes>,
    /// Offset inside the message of each chunk's first byte, ascending from 0, so the chunk
    /// holding an offset is found by binary search instead of a walk over a long sg list.
    pub(crate) chunk_starts: Vec<u32>,
    /// The chunks are the stack's own copy of the bytes, made when the message was posted (a
    /// READ response read out of a registered region, a post from registered regions), not
    /// the application's buffers: sending them straight from there is already their one
    /// user-space copy, so a caller that gathers takes them at any length (see
    /// [`SegmentDesc::staged`](crate::SegmentDesc::staged)).
    pub(crate) staged: bool,
}

impl Message {
    /// `chunks` must already be free of empty slices and total `info.len` bytes.
    pub(crate) fn new(info: MessageInfo, kind: Kind, chunks: Vec<Bytes>) -> Message {
        let mut at = 0u32;
        let chunk_starts = chunks
            .iter()
            .map(|c| {
                let start = at;
                // Lengths were summed and bounded by MAX_MESSAGE_LEN before we got here.
                at = at.saturating_add(c.len() as u32);
                start
            })
            .collect();
        Message {
            info,
            kind,
            chunks,
            chunk_starts,
            staged: false,
        }
    }
}
