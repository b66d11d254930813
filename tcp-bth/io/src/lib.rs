//! tcp-bth-io: the drivers of the sans-IO `tcp-bth` stack.
//!
//! * [`tun`]: the real data path, a TUN device driven through io_uring ([`tun::Driver`], serving
//!   a whole `tcp_bth::Endpoint` in [`turn`]s), the userspace impairment relay between two TUN
//!   devices ([`tun::Relay`]) and the network namespace helpers (`enter_netns`,
//!   `net_admin_missing`);
//! * [`sim`]: the deterministic simulated link ([`sim::SimLink`]), two connections joined by it
//!   on a virtual clock ([`sim::Pair`]), two endpoints joined by it and served by [`turn`]
//!   ([`sim::Net`]), the verified message workload of `bth demo` ([`sim::workload`]) and pcap
//!   taps for both ([`sim::pcap_tap`], [`sim::pcap_ip_tap`]);
//! * [`turn`]: the one driver loop both data paths run around a sans-IO `tcp_bth::Endpoint`;
//! * [`api`]: the async (tokio) message API, over the simulated pair ([`api::sim_pair`]).
//!
//! Everything that reads a clock, opens a device or file, spawns a task or calls the kernel is
//! here, and all of the project's library `unsafe` code (in [`tun`]: ioctls, `poll`, io_uring
//! buffers). The connection itself ([`tcp_bth::Connection`]) is in the `tcp-bth` crate.

pub mod api;
pub mod sim;
pub mod tun;
pub mod turn;
