//! What a data segment means for message placement: its class (which MSN counter it belongs to,
//! see docs/design.md), message, offset and payload, validated once from a parsed [`Bth`].

use crate::bth::{Bth, Reth, MAX_MESSAGE_LEN};
use crate::opcode::{MessageKind, Opcode};
use thiserror::Error;

/// Offset field of the one segment of a zero-length message. Sequence space is what TCP makes
/// reliable, so a message without bytes still occupies one: its `*_ONLY` segment carries a
/// single pad byte (covered by the ICRC, acknowledged and retransmitted like any byte, never
/// placed) and this offset says the byte is padding. No real byte can sit there: messages are
/// at most 2^24 - 1 bytes long, so the last real offset is 2^24 - 2. The option stays the
/// ordinary 24- to 40-byte layout; a parser that does not know the rule sees a 1-byte message
/// at an impossible offset.
pub const ZERO_LENGTH_MBO: u32 = MAX_MESSAGE_LEN;

/// The MSN counter a message belongs to, read from its opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MsgClass {
    /// SEND messages (SEND_* opcodes).
    Send,
    /// RDMA WRITE messages (RDMA_WRITE_* opcodes).
    Write,
    /// RDMA READ requests (opcode 0x0C).
    ReadRequest,
    /// MSN echoes the READ request answered.
    ReadResponse,
}

impl MsgClass {
    /// Every class, in [`index`](Self::index) order.
    pub const ALL: [MsgClass; 4] = [
        MsgClass::Send,
        MsgClass::Write,
        MsgClass::ReadRequest,
        MsgClass::ReadResponse,
    ];

    /// The class of a data opcode; `None` for ACKNOWLEDGE and hello.
    pub const fn of(op: Opcode) -> Option<MsgClass> {
        match op.kind() {
            MessageKind::Send => Some(MsgClass::Send),
            MessageKind::RdmaWrite => Some(MsgClass::Write),
            MessageKind::ReadRequest => Some(MsgClass::ReadRequest),
            MessageKind::ReadResponse => Some(MsgClass::ReadResponse),
            MessageKind::Acknowledge | MessageKind::Hello => None,
        }
    }

    /// 0 to 3, this class's place in [`ALL`](Self::ALL): an index for per-class arrays.
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// Payload of an RDMA READ request: what to read at the responder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReadRequest {
    /// rkey of the region to read (payload bytes 0-3).
    pub rkey: u32,
    /// Remote virtual address of the first byte to read (payload bytes 4-11).
    pub addr: u64,
    /// Bytes to read (payload bytes 12-15): 1 to 2^24 − 1.
    pub len: u32,
}

impl ReadRequest {
    /// Payload length of a READ request, in bytes.
    pub const LEN: usize = 16;

    /// Parse a READ request payload: exactly 16 big-endian bytes, `len` 1 to 2^24 − 1.
    pub fn parse(payload: &[u8]) -> Result<ReadRequest, InboundError> {
        let b: &[u8; 16] = payload
            .try_into()
            .map_err(|_| InboundError::BadReadRequestLen(payload.len()))?;
        let be32 = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let req = ReadRequest {
            rkey: be32(0),
            addr: (u64::from(be32(4)) << 32) | u64::from(be32(8)),
            len: be32(12),
        };
        if req.len == 0 || req.len > MAX_MESSAGE_LEN {
            return Err(InboundError::BadReadLength(req.len));
        }
        Ok(req)
    }

    /// The 16-byte big-endian payload (`len` is not checked).
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&self.rkey.to_be_bytes());
        b[4..12].copy_from_slice(&self.addr.to_be_bytes());
        b[12..16].copy_from_slice(&self.len.to_be_bytes());
        b
    }
}

/// Why a data segment cannot be interpreted as part of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum InboundError {
    /// The opcode is not a data opcode (ACKNOWLEDGE or hello).
    #[error("opcode {0} carries no message")]
    NotData(Opcode),
    /// A data segment without payload (even a zero-length message carries one pad byte).
    #[error("data segment with no payload")]
    EmptyPayload,
    /// Offset plus payload length passes the message size limit, 2^24 − 1 bytes.
    #[error("offset {offset} + {len} bytes passes the 24-bit message size limit")]
    BeyondMessageLimit {
        /// The segment's offset field.
        offset: u32,
        /// Payload bytes.
        len: usize,
    },
    /// A READ request payload that is not 16 bytes; holds its length (in S framing, the
    /// message length the option declares).
    #[error("READ request payload is {0} bytes, not 16")]
    BadReadRequestLen(usize),
    /// A READ request for 0 bytes or more than 2^24 − 1; holds the length asked for.
    #[error("READ request length {0} is zero or above the message size limit")]
    BadReadLength(u32),
    /// A FIRST or ONLY opcode at a nonzero offset, or a MIDDLE or LAST one at offset 0.
    #[error("opcode {0} at offset 0 must be FIRST or ONLY, and FIRST/ONLY must be at offset 0")]
    PositionMismatch(Opcode),
    /// Offset field [`ZERO_LENGTH_MBO`] on an opcode other than SEND_ONLY*, RDMA_WRITE_ONLY*,
    /// or with other than one pad byte.
    #[error("zero-length form on opcode {opcode} with {pad} pad bytes (needs a SEND or RDMA WRITE ONLY opcode and 1 pad byte)")]
    BadZeroLength {
        /// The segment's opcode.
        opcode: Opcode,
        /// Payload bytes the segment carries (the form needs exactly 1).
        pad: usize,
    },
    /// S framing (amendment 3): only ONLY opcodes, a segment index of 0, and a message length
    /// below 2^24 (bytes 8-11).
    #[error("S-framed segment with opcode {opcode}, segment index {seg}, message length {len}")]
    BadSFraming {
        /// The segment's opcode.
        opcode: Opcode,
        /// Its segment index (low 8 bits of mbo_seg).
        seg: u8,
        /// The message length it declares, in bytes.
        len: u32,
    },
    /// S framing: the segment's bytes, placed where its sequence number says, pass the end of
    /// the message its option declares.
    #[error("S-framed segment at message offset {offset} with {len} bytes passes the message's {msg_len}")]
    BeyondMessageLength {
        /// Placement offset computed from the sequence number.
        offset: u32,
        /// Payload bytes.
        len: usize,
        /// Message length the option declares, in bytes.
        msg_len: u32,
    },
}

/// A validated data segment: enough to place it without further checks on the BTH itself.
/// Built only by [`Inbound::from_bth`] (the private `checked` field sees to that), so whoever
/// holds one knows every check below has passed: the segment is validated once, here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inbound<'a> {
    /// The MSN counter `msn` is in.
    pub class: MsgClass,
    /// The segment's opcode.
    pub opcode: Opcode,
    /// MSN of the message the segment belongs to.
    pub msn: u16,
    /// Byte offset of `payload[0]` inside the message.
    pub offset: u32,
    /// The segment ends the message (LAST or ONLY): the message length is `offset + len`.
    pub last: bool,
    /// imm_data, on *_WITH_IMMEDIATE opcodes.
    pub imm: Option<u32>,
    /// rkey and the remote address of this segment's first byte, on RDMA WRITE opcodes.
    pub reth: Option<Reth>,
    /// The message bytes this segment carries: empty only for a zero-length message
    /// ([`ZERO_LENGTH_MBO`]), whose pad byte is not here.
    pub payload: &'a [u8],
    checked: Checked,
}

/// Proof of construction by [`Inbound::from_bth`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Checked;

impl<'a> Inbound<'a> {
    /// Interpret a parsed option and its segment's payload.
    pub fn from_bth(bth: &Bth, payload: &'a [u8]) -> Result<Inbound<'a>, InboundError> {
        let op = bth.opcode;
        let class = MsgClass::of(op).ok_or(InboundError::NotData(op))?;
        if bth.mbo == ZERO_LENGTH_MBO {
            return Inbound::zero_length(bth, class, payload.len());
        }
        if payload.is_empty() {
            return Err(InboundError::EmptyPayload);
        }
        let end = u64::from(bth.mbo) + payload.len() as u64;
        if end > u64::from(MAX_MESSAGE_LEN) {
            return Err(InboundError::BeyondMessageLimit {
                offset: bth.mbo,
                len: payload.len(),
            });
        }
        let starts = matches!(
            op.position(),
            crate::opcode::Position::First | crate::opcode::Position::Only
        );
        if starts != (bth.mbo == 0) {
            return Err(InboundError::PositionMismatch(op));
        }
        if class == MsgClass::ReadRequest {
            ReadRequest::parse(payload)?;
        }
        Ok(Inbound {
            class,
            opcode: op,
            msn: bth.msn,
            offset: bth.mbo,
            last: !op.more(),
            imm: bth.ext.immediate(),
            reth: bth.ext.reth(),
            payload,
            checked: Checked,
        })
    }

    /// Interpret an S-framed data segment (amendment 3) whose first payload byte has stream
    /// offset `at` (its sequence number less IRS + 1). The option is the same in every segment
    /// of the message: its offset field is the anchor (the message's first byte's stream offset
    /// mod 2^24), its ICRC field the message length. The placement offset is
    /// (`at` − anchor) mod 2^24; a segment whose bytes would pass the message's length is
    /// refused. That the anchor gives the same start for every segment of one message (and so
    /// that no segment lies 2^24 or more past it) is the receiver's to check, across segments.
    pub fn from_seq(bth: &Bth, payload: &'a [u8], at: u64) -> Result<Inbound<'a>, InboundError> {
        let op = bth.opcode;
        let class = MsgClass::of(op).ok_or(InboundError::NotData(op))?;
        let msg_len = bth.icrc;
        let only = op.position() == crate::opcode::Position::Only;
        if !only || bth.seg != 0 || msg_len > MAX_MESSAGE_LEN {
            return Err(InboundError::BadSFraming {
                opcode: op,
                seg: bth.seg,
                len: msg_len,
            });
        }
        let offset = (at as u32).wrapping_sub(bth.mbo) & MAX_MESSAGE_LEN;
        if msg_len == 0 {
            // Zero-length: one pad byte at offset 0, never placed.
            if offset != 0 {
                return Err(InboundError::BeyondMessageLength {
                    offset,
                    len: payload.len(),
                    msg_len,
                });
            }
            return Inbound::zero_length(bth, class, payload.len());
        }
        if payload.is_empty() {
            return Err(InboundError::EmptyPayload);
        }
        let end = u64::from(offset) + payload.len() as u64;
        if end > u64::from(msg_len) {
            return Err(InboundError::BeyondMessageLength {
                offset,
                len: payload.len(),
                msg_len,
            });
        }
        if class == MsgClass::ReadRequest {
            // One segment of its 16 bytes, length 16: an ONLY opcode not at offset 0 is a
            // piece of a request, which cannot be split.
            if offset != 0 {
                return Err(InboundError::PositionMismatch(op));
            }
            if msg_len != ReadRequest::LEN as u32 {
                return Err(InboundError::BadReadRequestLen(msg_len as usize));
            }
            ReadRequest::parse(payload)?;
        }
        // The address is the message's first byte's: this segment's is further by its offset.
        let reth = bth.ext.reth().map(|r| Reth {
            addr: r.addr.wrapping_add(u64::from(offset)),
            ..r
        });
        Ok(Inbound {
            class,
            opcode: op,
            msn: bth.msn,
            offset,
            last: end == u64::from(msg_len),
            imm: bth.ext.immediate(),
            reth,
            payload,
            checked: Checked,
        })
    }

    /// The one segment of a zero-length SEND or RDMA WRITE: one pad byte on the wire, nothing
    /// to place.
    fn zero_length(bth: &Bth, class: MsgClass, pad: usize) -> Result<Inbound<'a>, InboundError> {
        let only = bth.opcode.position() == crate::opcode::Position::Only;
        if !only || pad != 1 || !matches!(class, MsgClass::Send | MsgClass::Write) {
            return Err(InboundError::BadZeroLength {
                opcode: bth.opcode,
                pad,
            });
        }
        Ok(Inbound {
            class,
            opcode: bth.opcode,
            msn: bth.msn,
            offset: 0,
            last: true,
            imm: bth.ext.immediate(),
            reth: bth.ext.reth(),
            payload: &[],
            checked: Checked,
        })
    }

    /// One past the last message byte this segment carries.
    pub fn end(&self) -> u32 {
        self.offset + self.payload.len() as u32
    }
}

/// Serial-number comparison for 16-bit MSNs (RFC 1982): is `a` before `b`?
pub fn msn_lt(a: u16, b: u16) -> bool {
    a != b && b.wrapping_sub(a) < 0x8000
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bth::Extension;

    #[test]
    fn read_request_round_trips_and_rejects_bad_lengths() {
        let r = ReadRequest {
            rkey: 7,
            addr: 0x1122_3344_5566_7788,
            len: 4096,
        };
        assert_eq!(ReadRequest::parse(&r.to_bytes()), Ok(r));
        assert_eq!(
            ReadRequest::parse(&[0; 15]),
            Err(InboundError::BadReadRequestLen(15))
        );
        let zero = ReadRequest { len: 0, ..r };
        assert_eq!(
            ReadRequest::parse(&zero.to_bytes()),
            Err(InboundError::BadReadLength(0))
        );
    }

    #[test]
    fn classification_checks_position_and_limits() {
        let mut b = Bth::new(Opcode::SendMiddle);
        b.mbo = 0;
        assert_eq!(
            Inbound::from_bth(&b, b"x"),
            Err(InboundError::PositionMismatch(Opcode::SendMiddle))
        );
        b.mbo = MAX_MESSAGE_LEN - 1;
        assert!(matches!(
            Inbound::from_bth(&b, b"xx"),
            Err(InboundError::BeyondMessageLimit { .. })
        ));
        // The last offset is the zero-length form's, valid only on a 1-byte ONLY segment.
        b.mbo = ZERO_LENGTH_MBO;
        assert!(matches!(
            Inbound::from_bth(&b, b"x"),
            Err(InboundError::BadZeroLength { .. })
        ));
        let mut z = Bth::new(Opcode::SendOnlyWithImmediate);
        z.mbo = ZERO_LENGTH_MBO;
        z.ext = Extension::Immediate(9);
        let i = Inbound::from_bth(&z, b"\0").unwrap();
        assert_eq!(
            (i.payload.len(), i.offset, i.last, i.imm),
            (0, 0, true, Some(9))
        );
        let mut w = Bth::new(Opcode::RdmaWriteOnlyWithImmediate);
        w.ext = Extension::RethImmediate(Reth { rkey: 1, addr: 2 }, 3);
        let i = Inbound::from_bth(&w, b"abc").unwrap();
        assert_eq!(
            (i.class, i.last, i.imm, i.end()),
            (MsgClass::Write, true, Some(3), 3)
        );
        assert_eq!(
            Inbound::from_bth(&Bth::new(Opcode::Acknowledge), b"x"),
            Err(InboundError::NotData(Opcode::Acknowledge))
        );
    }

    #[test]
    fn msn_serial_order() {
        assert!(msn_lt(1, 2));
        assert!(msn_lt(0xFFFF, 0));
        assert!(!msn_lt(2, 1));
        assert!(!msn_lt(5, 5));
    }
}
