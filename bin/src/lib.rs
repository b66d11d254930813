//! Shared pieces of the command-line tools.

pub mod topology;
