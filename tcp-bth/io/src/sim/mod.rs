mod capture;
pub mod incast;
mod incast_work;
pub mod link;
pub mod pair;
pub mod workload;
pub use capture::pcap_tap;
pub use link::*;
pub use pair::{pair_configs, Pair};
