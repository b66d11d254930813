//! Shared pieces of the command-line tools.

pub mod cli;
pub mod compare;
pub mod interrupt;
pub mod perf;
pub mod perfcli;
pub mod pinning;
pub mod ready;
pub mod relay_args;
pub mod topology;
pub mod tunpair;
pub mod units;
