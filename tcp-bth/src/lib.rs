//! tcp-bth: TCP with message framing through the `tcp_bth` option.
//!
//! The option and segment codec live in the `tcp-bth-wire` crate (under `tcp-bth/wire/`) so that
//! `framer` and `placement`, which this crate's stack builds on, can use the same types without a
//! dependency cycle; it is re-exported here as [`wire`].

pub use tcp_bth_wire as wire;

pub mod api;
pub mod capture;
pub mod config;
pub mod conn;
pub mod describe;
pub mod isn;
pub mod listener;
pub mod perf;
pub mod ranges;
pub mod rtt;
pub mod sim;
pub mod tun;

pub use config::Config;
pub use conn::{Completion, ConnError, Connection, Mode, RxHeld, State, Stats, WcOp};
pub use listener::{Listener, ListenerConfig, ListenerStats};
