//! `bth-perf`'s command line, shaped like perftest (`ib_send_bw`, `ib_write_lat`, …): the
//! options ([`args`]), the table and JSON output, the progress bar, and the three ways to run
//! (`server` and `client` on two hosts: [`hosted`]; both on this machine: [`local`]).

pub mod args;
pub mod error;
pub mod host;
pub mod hosted;
pub mod json;
pub mod local;
pub mod output;
pub mod progress;
pub mod run;
pub mod sweep;
pub mod table;

#[cfg(test)]
mod tests;
