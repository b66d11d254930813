//! tcp-bth: TCP with message framing through the `tcp_bth` option.
//!
//! This crate is the sans-IO core: the connection state machine ([`Connection`]),
//! the endpoint that routes segments to connections and accepts new ones ([`Endpoint`]),
//! ISNs and RTT estimation, and [`pair::BackToBack`], two connections back to back on a virtual clock. Inputs are segments, calls and the current time; outputs are
//! segments, timers and completions. It opens no socket or file, reads no clock and starts no
//! thread. The drivers that do (the io_uring TUN data path, the impairment relay, the simulated
//! link and its pair driver, the tokio API) are in the `bth-io` crate (`tcp-bth/io/`);
//! packet captures are in `bth-capture` (`tcp-bth/capture/`).
//!
//! The option and segment codec live in the `bth-wire` crate (under `tcp-bth/wire/`) so that
//! `framer` and `placement`, which this crate's stack builds on, can use the same types without a
//! dependency cycle; it is re-exported here as [`wire`].

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use bth_wire as wire;

pub mod config;
pub mod conn;
pub mod endpoint;
pub mod isn;
pub mod pair;
pub mod ranges;
pub mod rtt;

pub use config::{Config, Framing, Keepalive};
pub use conn::{
    CallError, Completion, Connection, ConnectionError, Event, GatherLimits, IcmpError, Mode,
    PostBufError, PostSendError, RecoveryStats, RegisterError, Rejected, RxHeld, SendLimits, Sge,
    State, Stats, Unreachable, WcOp,
};
pub use endpoint::{
    ConnectionHandle, Endpoint, EndpointConfig, EndpointStats, OpenError, RxQueue, Transmit,
};
