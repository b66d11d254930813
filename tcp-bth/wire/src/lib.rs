//! Wire formats for tcp-bth: the `tcp_bth` TCP option (kind 254, ExID 0xEFAB) and the TCP
//! segments that carry it.
//!
//! Parsing follows one rule: bytes from the wire reach a typed value only through a validating
//! entry point ([`BthOption::new_checked`], [`TcpOptions::parse`], [`TcpRepr::parse`]), and every
//! refusal names what was wrong. Emitting refuses values that would not fit instead of truncating.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod ack;
pub mod bth;
pub mod checksum;
pub mod copy;
pub mod message;
pub mod opcode;
pub mod segment;
pub mod tcp;

pub use ack::{Nak, NakCode};
pub use bth::{Bth, BthError, BthOption, Extension, Reth, Timestamps, EXID, KIND, MAX_MESSAGE_LEN};
pub use message::{msn_lt, Inbound, InboundError, MsgClass, ReadRequest, ZERO_LENGTH_MBO};
pub use opcode::{ExtensionKind, MessageKind, Opcode, Position};
pub use segment::TcpSegment;
pub use tcp::{
    ChecksumFill, IpPair, SackBlock, SegmentError, TcpFlags, TcpOptionError, TcpOptions, TcpRepr,
    MAX_OPTIONS_LEN, MAX_SACK_BLOCKS, TCP_HEADER_MAX, TCP_HEADER_MIN,
};
