//! The deterministic simulated data path: a seeded, sans-IO link ([`SimLink`]) between two
//! ends on a virtual clock that only the caller moves, so a seed repeats a run bit for bit.
//!
//! * [`Pair`]: two bare `tcp_bth::Connection`s joined by the link;
//! * [`Net`]: two `tcp_bth::Endpoint`s joined by it, each served by [`crate::turn::turn`], and
//!   optionally costed like a real driver ([`DriverModel`]);
//! * [`workload`]: the verified message workload of `bth demo`; [`incast`]: N senders into one
//!   receiver behind one bottleneck;
//! * [`pattern`]: the payload pattern that tools and tests send and check;
//! * [`pcap_tap`], [`pcap_ip_tap`]: pcap captures of what a [`Pair`] or a [`Net`] hands to the
//!   link.

mod capture;
mod clock;
pub mod incast;
mod incast_work;
pub mod link;
pub mod net;
pub mod pair;
pub mod pattern;
mod spray;
pub mod workload;
pub use capture::{pcap_ip_tap, pcap_tap};
pub use clock::DriverModel;
pub use link::*;
pub use net::{net_configs, net_conn_configs, Net};
pub use pair::{pair_configs, Pair};
