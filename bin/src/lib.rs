//! Shared pieces of the command-line tools.

pub mod compare;
pub mod topology;
pub mod tunpair;
