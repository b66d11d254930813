mod capture;
pub mod link;
pub mod pair;
mod spray;
pub mod workload;
pub use capture::pcap_tap;
pub use link::*;
pub use pair::{pair_configs, Pair};
