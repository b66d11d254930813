//! Send side of tcp-bth: work requests become messages laid back to back in a 64-bit stream
//! offset space, and any byte position of that space can be cut into a segment descriptor that
//! carries the BTH fields the position implies (see docs/design.md, "Stream offsets and
//! segmentation").
//!
//! The framer keeps every message until the cumulative ACK has passed its end, because a
//! retransmission may re-cut the stream at boundaries different from the first transmission.
//! The receive direction is [`bth_wire::Inbound::from_bth`]; every [`SegmentDesc`] this crate
//! produces is accepted by it and means the same message, offset, immediate and RETH.
//!
//! Sans-IO: no sockets, clocks or threads; nothing here panics on caller input.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod framer;
mod message;
mod request;
mod segment;

pub use framer::{Framer, Posted, Released, MAX_IN_FLIGHT};
pub use message::MessageInfo;
pub use request::{FramerConfig, WorkRequest, WrError, WrOp};
pub use segment::SegmentDesc;
