pub mod link;
pub mod pair;
pub mod workload;
pub use link::*;
pub use pair::{pair_configs, Pair};
