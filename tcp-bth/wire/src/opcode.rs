//! IBTA RC opcodes as the `tcp_bth` option carries them, and what each one implies
//! for the option layout (M bit, extension) and for the receiver (message kind).

use core::fmt;

/// Where a segment sits inside its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Position {
    /// First segment of a multi-segment message (M=1).
    First,
    /// Neither first nor last (M=1).
    Middle,
    /// Last segment of a multi-segment message (M=0).
    Last,
    /// The whole message in one segment (M=0); also hello, ACKNOWLEDGE and READ request.
    Only,
}

impl Position {
    /// The M (more segments) bit this position requires.
    pub const fn more(self) -> bool {
        matches!(self, Position::First | Position::Middle)
    }

    /// The position of the segment covering `[offset, offset+len)` of a message of `total` bytes.
    pub fn of(offset: u32, len: u32, total: u32) -> Position {
        let starts = offset == 0;
        let ends = offset.saturating_add(len) >= total;
        match (starts, ends) {
            (true, true) => Position::Only,
            (true, false) => Position::First,
            (false, true) => Position::Last,
            (false, false) => Position::Middle,
        }
    }
}

/// The kind of message an opcode belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageKind {
    /// SEND: consumes a receive buffer the receiver posted.
    Send,
    /// RDMA WRITE: lands at the rkey and address its extension names.
    RdmaWrite,
    /// RDMA READ request: its payload names what to read (rkey, address, length).
    ReadRequest,
    /// RDMA READ response: the bytes read, going back to the requester.
    ReadResponse,
    /// Pure acknowledgement: no message.
    Acknowledge,
    /// SYN / SYN-ACK negotiation form.
    Hello,
}

/// Which opcode-selected extension follows the (optional) timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtensionKind {
    /// No extension (0 bytes).
    None,
    /// imm_data (4 bytes).
    Immediate,
    /// rkey (4) + remote virtual address (8).
    Reth,
    /// rkey (4) + remote virtual address (8) + imm_data (4).
    RethImmediate,
}

impl ExtensionKind {
    /// Bytes this extension occupies on the wire.
    #[inline]
    pub const fn len(self) -> usize {
        match self {
            ExtensionKind::None => 0,
            ExtensionKind::Immediate => 4,
            ExtensionKind::Reth => 12,
            ExtensionKind::RethImmediate => 16,
        }
    }

    /// Whether this is [`ExtensionKind::None`], 0 bytes.
    pub const fn is_empty(self) -> bool {
        matches!(self, ExtensionKind::None)
    }
}

macro_rules! opcodes {
    ($( $(#[$doc:meta])* $name:ident = $val:literal, $kind:ident, $pos:ident, $ext:ident; )*) => {
        /// An IBTA RC opcode (plus this project's `Hello` for SYN segments).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Opcode {
            $( $(#[$doc])* $name = $val, )*
        }

        impl Opcode {
            /// Every opcode, in wire-value order.
            pub const ALL: &'static [Opcode] = &[ $( Opcode::$name, )* ];

            /// The opcode for a wire value; `None` for values the spec does not define.
            #[inline]
            pub const fn from_u8(v: u8) -> Option<Opcode> {
                match v {
                    $( $val => Some(Opcode::$name), )*
                    _ => None,
                }
            }

            /// The kind of message this opcode belongs to.
            #[inline]
            pub const fn kind(self) -> MessageKind {
                match self { $( Opcode::$name => MessageKind::$kind, )* }
            }

            /// Position inside the message; `Only` for single-segment forms (ACK, hello, READ request).
            #[inline]
            pub const fn position(self) -> Position {
                match self { $( Opcode::$name => Position::$pos, )* }
            }

            /// The extension this opcode puts after the timestamps.
            #[inline]
            pub const fn extension(self) -> ExtensionKind {
                match self { $( Opcode::$name => ExtensionKind::$ext, )* }
            }
        }
    };
}

opcodes! {
    /// SEND_FIRST (0x00).
    SendFirst = 0x00, Send, First, None;
    /// SEND_MIDDLE (0x01).
    SendMiddle = 0x01, Send, Middle, None;
    /// SEND_LAST (0x02).
    SendLast = 0x02, Send, Last, None;
    /// SEND_LAST_WITH_IMMEDIATE (0x03): extension imm_data.
    SendLastWithImmediate = 0x03, Send, Last, Immediate;
    /// SEND_ONLY (0x04).
    SendOnly = 0x04, Send, Only, None;
    /// SEND_ONLY_WITH_IMMEDIATE (0x05): extension imm_data.
    SendOnlyWithImmediate = 0x05, Send, Only, Immediate;
    /// RDMA_WRITE_FIRST (0x06): extension rkey + address.
    RdmaWriteFirst = 0x06, RdmaWrite, First, Reth;
    /// RDMA_WRITE_MIDDLE (0x07): extension rkey + address.
    RdmaWriteMiddle = 0x07, RdmaWrite, Middle, Reth;
    /// RDMA_WRITE_LAST (0x08): extension rkey + address.
    RdmaWriteLast = 0x08, RdmaWrite, Last, Reth;
    /// RDMA_WRITE_LAST_WITH_IMMEDIATE (0x09): extension rkey + address + imm_data.
    RdmaWriteLastWithImmediate = 0x09, RdmaWrite, Last, RethImmediate;
    /// RDMA_WRITE_ONLY (0x0A): extension rkey + address.
    RdmaWriteOnly = 0x0A, RdmaWrite, Only, Reth;
    /// RDMA_WRITE_ONLY_WITH_IMMEDIATE (0x0B): extension rkey + address + imm_data.
    RdmaWriteOnlyWithImmediate = 0x0B, RdmaWrite, Only, RethImmediate;
    /// Payload: rkey (4), remote address (8), length (4).
    RdmaReadRequest = 0x0C, ReadRequest, Only, None;
    /// RDMA_READ_RESPONSE_FIRST (0x0D).
    RdmaReadResponseFirst = 0x0D, ReadResponse, First, None;
    /// RDMA_READ_RESPONSE_MIDDLE (0x0E).
    RdmaReadResponseMiddle = 0x0E, ReadResponse, Middle, None;
    /// RDMA_READ_RESPONSE_LAST (0x0F).
    RdmaReadResponseLast = 0x0F, ReadResponse, Last, None;
    /// RDMA_READ_RESPONSE_ONLY (0x10).
    RdmaReadResponseOnly = 0x10, ReadResponse, Only, None;
    /// ACKNOWLEDGE (0x11): pure ACK, credit update (R=1) or NAK; requires T=1.
    Acknowledge = 0x11, Acknowledge, Only, None;
    /// SYN / SYN-ACK form: MSN = first MSN, offset field = largest message accepted.
    Hello = 0xFF, Hello, Only, None;
}

impl Opcode {
    /// The wire value (byte 5 of the option).
    #[inline]
    pub const fn as_u8(self) -> u8 {
        self as u8
    }

    /// The M bit this opcode requires.
    #[inline]
    pub const fn more(self) -> bool {
        self.position().more()
    }

    /// Whether segments with this opcode carry message payload that is placed at the receiver.
    pub const fn carries_payload(self) -> bool {
        matches!(
            self.kind(),
            MessageKind::Send | MessageKind::RdmaWrite | MessageKind::ReadResponse
        )
    }

    /// Whether the extension carries imm_data (the *_WITH_IMMEDIATE opcodes).
    pub const fn has_immediate(self) -> bool {
        matches!(
            self.extension(),
            ExtensionKind::Immediate | ExtensionKind::RethImmediate
        )
    }

    /// The data opcode for a message kind at a position, with or without immediate data.
    /// `None` where IBTA has no such opcode (immediate on FIRST/MIDDLE, or on READ responses).
    pub const fn for_data(kind: MessageKind, pos: Position, immediate: bool) -> Option<Opcode> {
        use Opcode::*;
        use Position::*;
        Some(match (kind, pos, immediate) {
            (MessageKind::Send, First, false) => SendFirst,
            (MessageKind::Send, Middle, false) => SendMiddle,
            (MessageKind::Send, Last, false) => SendLast,
            (MessageKind::Send, Last, true) => SendLastWithImmediate,
            (MessageKind::Send, Only, false) => SendOnly,
            (MessageKind::Send, Only, true) => SendOnlyWithImmediate,
            (MessageKind::RdmaWrite, First, false) => RdmaWriteFirst,
            (MessageKind::RdmaWrite, Middle, false) => RdmaWriteMiddle,
            (MessageKind::RdmaWrite, Last, false) => RdmaWriteLast,
            (MessageKind::RdmaWrite, Last, true) => RdmaWriteLastWithImmediate,
            (MessageKind::RdmaWrite, Only, false) => RdmaWriteOnly,
            (MessageKind::RdmaWrite, Only, true) => RdmaWriteOnlyWithImmediate,
            (MessageKind::ReadResponse, First, false) => RdmaReadResponseFirst,
            (MessageKind::ReadResponse, Middle, false) => RdmaReadResponseMiddle,
            (MessageKind::ReadResponse, Last, false) => RdmaReadResponseLast,
            (MessageKind::ReadResponse, Only, false) => RdmaReadResponseOnly,
            _ => return None,
        })
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Opcode::SendFirst => "SEND_FIRST",
            Opcode::SendMiddle => "SEND_MIDDLE",
            Opcode::SendLast => "SEND_LAST",
            Opcode::SendLastWithImmediate => "SEND_LAST_WITH_IMMEDIATE",
            Opcode::SendOnly => "SEND_ONLY",
            Opcode::SendOnlyWithImmediate => "SEND_ONLY_WITH_IMMEDIATE",
            Opcode::RdmaWriteFirst => "RDMA_WRITE_FIRST",
            Opcode::RdmaWriteMiddle => "RDMA_WRITE_MIDDLE",
            Opcode::RdmaWriteLast => "RDMA_WRITE_LAST",
            Opcode::RdmaWriteLastWithImmediate => "RDMA_WRITE_LAST_WITH_IMMEDIATE",
            Opcode::RdmaWriteOnly => "RDMA_WRITE_ONLY",
            Opcode::RdmaWriteOnlyWithImmediate => "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
            Opcode::RdmaReadRequest => "RDMA_READ_REQUEST",
            Opcode::RdmaReadResponseFirst => "RDMA_READ_RESPONSE_FIRST",
            Opcode::RdmaReadResponseMiddle => "RDMA_READ_RESPONSE_MIDDLE",
            Opcode::RdmaReadResponseLast => "RDMA_READ_RESPONSE_LAST",
            Opcode::RdmaReadResponseOnly => "RDMA_READ_RESPONSE_ONLY",
            Opcode::Acknowledge => "ACKNOWLEDGE",
            Opcode::Hello => "HELLO",
        };
        f.write_str(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_values_round_trip() {
        for &op in Opcode::ALL {
            assert_eq!(Opcode::from_u8(op.as_u8()), Some(op));
        }
        let defined: Vec<u8> = Opcode::ALL.iter().map(|o| o.as_u8()).collect();
        for v in 0..=255u8 {
            assert_eq!(Opcode::from_u8(v).is_some(), defined.contains(&v), "{v:#x}");
        }
    }

    #[test]
    fn for_data_inverts_kind_position_immediate() {
        for &op in Opcode::ALL.iter().filter(|o| o.carries_payload()) {
            let back = Opcode::for_data(op.kind(), op.position(), op.has_immediate());
            assert_eq!(back, Some(op));
        }
        assert_eq!(
            Opcode::for_data(MessageKind::Send, Position::First, true),
            None
        );
    }

    #[test]
    fn position_of_ranges() {
        assert_eq!(Position::of(0, 10, 10), Position::Only);
        assert_eq!(Position::of(0, 4, 10), Position::First);
        assert_eq!(Position::of(4, 4, 10), Position::Middle);
        assert_eq!(Position::of(8, 2, 10), Position::Last);
    }
}
