//! The command-line tools' own pieces: argument parsing ([`cli`], [`perfcli`],
//! [`relay_args`]) and the comparison against kernel TCP ([`compare`]). The perf
//! application protocol is `bth-perf`, the namespace testbed `bth-testbed`.

pub mod cli;
pub mod compare;
pub mod perfcli;
pub mod relay_args;
