//! The command-line tools' own pieces: argument parsing ([`cli`], [`perfcli`],
//! [`relay_args`]), the comparison against kernel TCP ([`compare`]) and `bth nc` ([`nc`]).
//! The perf application protocol is `bth-perf`, the namespace testbed `bth-testbed`.

pub mod cli;
pub mod compare;
pub mod nc;
pub mod perfcli;
pub mod relay_args;
