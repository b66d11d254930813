//! How a `bth-perf` run ends: an [`RunOutcome`] once it ran, or a [`PerfRunError`] saying why it could
//! not start or finish.

use super::args::ArgsError;
use super::host::HostError;
use crate::relay_args::RelayArgsError;
use std::io;
use thiserror::Error;

/// A run that got as far as running its rows.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// Every planned row ran and succeeded on every side this process ran.
    Passed,
    /// A row failed or did not run (each row's own line says which and why).
    RowsFailed,
}

impl RunOutcome {
    /// [`RunOutcome::Passed`] when `ok`.
    pub fn of(ok: bool) -> RunOutcome {
        if ok {
            RunOutcome::Passed
        } else {
            RunOutcome::RowsFailed
        }
    }
}

/// Why a run could not start or finish.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PerfRunError {
    /// The options make no run.
    #[error(transparent)]
    Args(#[from] ArgsError),
    /// The `--relay-*` options make no link.
    #[error(transparent)]
    Relay(#[from] RelayArgsError),
    /// The TUN address options do not fit together.
    #[error(transparent)]
    Host(#[from] HostError),
    /// `--pin-relay` without a relay to pin.
    #[error("--pin-relay needs the relay (--relay, or any --relay-* option but --relay-seed)")]
    PinWithoutRelay,
    /// Setting up or running a part of the run failed: `what` names the part (the
    /// namespaces, a TUN device, a side's thread).
    #[error("{what}: {source}")]
    Setup {
        /// The part that failed.
        what: String,
        /// Why.
        source: io::Error,
    },
}

impl PerfRunError {
    /// A [`PerfRunError::Setup`] of `what`, for `map_err`.
    pub fn setup(what: impl Into<String>) -> impl FnOnce(io::Error) -> PerfRunError {
        let what = what.into();
        move |source| PerfRunError::Setup { what, source }
    }
}
