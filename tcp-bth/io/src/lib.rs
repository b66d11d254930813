//! bth-io: the drivers of the sans-IO `tcp-bth` stack.
//!
//! * [`tun`]: the real data path, a TUN device driven through io_uring ([`tun::Driver`], serving
//!   a whole `tcp_bth::Endpoint` in [`turn`]s), the userspace impairment relay between two TUN
//!   devices ([`tun::Relay`]) and the network namespace helpers (`enter_netns`,
//!   `net_admin_missing`);
//! * [`sim`]: the deterministic simulated link ([`sim::SimLink`]), two connections joined by it
//!   on a virtual clock ([`sim::Pair`]), two endpoints joined by it and served by [`turn`]
//!   ([`sim::Net`]), the verified message workload of `bth demo` ([`sim::workload`]), the
//!   incast scenario ([`sim::incast`]) and pcap taps for both ([`sim::pcap_tap`],
//!   [`sim::pcap_ip_tap`]);
//! * [`turn`]: the one driver loop both data paths run around a sans-IO `tcp_bth::Endpoint`;
//! * [`api`]: the async (tokio) message API over both data paths: two endpoints on the
//!   simulated link served by a tokio task ([`api::sim_endpoints`], [`api::sim_pair`]), or one
//!   endpoint on a real-time data path (the TUN driver, or any [`turn::PacketIo`]) served by a
//!   thread ([`api::tun_endpoint`]).
//!
//! Of the stack's library crates, everything that reads a clock, opens a device, spawns a task
//! or a thread or calls the kernel is here (pcap files are `bth-capture`'s), and all of their
//! `unsafe` code (in [`tun`]: ioctls, `poll`, io_uring buffers; the tools' crate, `bth-tools`,
//! has a little of its own). The connection itself ([`tcp_bth::Connection`]) is in the
//! `tcp-bth` crate.

#![warn(missing_docs)]

pub mod api;
pub mod sim;
pub mod tun;
pub mod turn;
