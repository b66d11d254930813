//! Memory regions, posted receive buffers and direct placement of tcp_bth segments.
//!
//! The receive side of tcp-bth (see `docs/placement.md` and `docs/design.md`). Every data segment
//! names its message class, MSN and byte offset, so [`Placement::place`] puts its payload straight
//! into its final place — the receive buffer posted for that SEND MSN, the registered region a
//! WRITE names, or the sink of an outstanding READ — in whatever order segments arrive, copying
//! each new payload byte exactly once and never a byte outside the target. Completions leave in
//! MSN order within each class.
//!
//! Sans-IO: no sockets, threads or clocks. Inputs are validated segments
//! ([`bth_wire::Inbound`]) and work requests; outputs are [`PlaceOutcome`]s and [`Cqe`]s.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod byte_ranges;
mod complete;
mod coverage;
mod cqe;
mod mr;
mod msg;
mod outcome;
mod placer;
mod post;
mod unfilled;
mod window;

pub use cqe::{Cqe, WcOp, WcStatus};
pub use mr::{Access, MemoryRegions, MrError, MrHandle, MrRejected, IOVA_BASE, MAX_REGIONS};
pub use outcome::{Counters, DropReason, PlaceOutcome};
pub use placer::{Placement, PlacementConfig, PlacementLimits};
pub use post::{PostRecvError, PostRejected};
