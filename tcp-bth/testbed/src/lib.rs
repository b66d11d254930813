//! The network-namespace testbed the tools and the integration tests share: two namespaces
//! joined by veth or by the impairment relay, with the stacks' TUN devices in them
//! ([`topology`]), threads set up in a namespace and reporting readiness ([`ready`]), the
//! relay and stack threads pinned to cores ([`pinning`]), and the drivers reset and the
//! namespaces removed when the process is interrupted ([`interrupt`]); for the integration
//! tests, one namespace that goes away with its value ([`netns`]) and two joined over IPv4 and
//! IPv6 ([`dualns`]).

#![warn(missing_docs)]

pub mod dualns;
pub mod interrupt;
pub mod netns;
pub mod pinning;
pub mod ready;
pub mod topology;
