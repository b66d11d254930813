//! A perf app: the state both sides share ([`Side`]) and what only the client or only the
//! server does ([`Role`]). [`super::Client`] and [`super::Server`] are its two kinds.

use super::side::{ModeStep, RunRefused, ServersClosed, Side};
use super::{PerfConfig, PerfError, PerfReport};
use std::time::Duration;
use tcp_bth::Connection;

/// How a turn of a [`Role`] ended: an error fails the run.
pub type Turn = Result<(), PerfError>;

/// What one kind of app does in a turn, once the connection is up in the configured mode.
pub trait Role {
    /// A turn in tcp_bth mode.
    #[doc(hidden)]
    fn bth(&mut self, side: &mut Side, c: &mut Connection, now: Duration) -> Result<(), PerfError>;
    /// A turn on the plain byte stream (`--plain`).
    #[doc(hidden)]
    fn plain(&mut self, side: &mut Side, c: &mut Connection, now: Duration) -> Turn;
    /// A turn on a byte stream where the two sides disagree on `--plain` (`mismatch.rs`).
    #[doc(hidden)]
    fn mismatch(&mut self, side: &mut Side, c: &mut Connection, now: Duration) -> Turn;
    /// Messages done, and how many the run has if known.
    #[doc(hidden)]
    fn progress(&self, side: &Side) -> (u64, Option<u64>) {
        side.progress()
    }
}

/// One side of one connection of a run, called once per driver turn.
pub struct PerfApp<R> {
    pub(crate) side: Side,
    role: R,
}

impl<R: Role> PerfApp<R> {
    pub(crate) fn with(cfg: PerfConfig, client: bool, role: R) -> PerfApp<R> {
        PerfApp {
            side: Side::new(cfg, client),
            role,
        }
    }

    /// One of a run's connections, sharing `run` with the others: the first refusal ends them
    /// all ([`RunRefused`]). [`crate::drive::run_many`] does this for the apps it runs.
    pub fn in_run(mut self, run: &RunRefused) -> Self {
        self.join_run(run);
        self
    }

    pub(crate) fn join_run(&mut self, run: &RunRefused) {
        self.side.run = run.clone();
    }

    /// Whether the run this app belongs to was refused on another connection: an app whose
    /// connection never came (a server of `-q 8` whose client runs `-q 1`) is then done.
    pub fn run_refused(&self) -> bool {
        self.side.run.is_set()
    }

    /// Both ends of the run are apps of this process, sharing `servers`: the client stops
    /// lingering in TIME-WAIT once every server has closed ([`ServersClosed`]).
    pub fn in_process(mut self, servers: ServersClosed) -> Self {
        self.side.in_process = Some(servers);
        self
    }

    /// What this side has measured so far.
    pub fn report(&self) -> &PerfReport {
        &self.side.report
    }

    /// The report, for what its driver adds after the last turn (the counters once the driver
    /// has stopped: [`PerfReport::record_recovery`]).
    pub fn report_mut(&mut self) -> &mut PerfReport {
        &mut self.side.report
    }

    /// The report, its `elapsed` settled (start to last message) and its latencies sorted even
    /// when the run was cut short (time limit, error) and never closed.
    pub fn into_report(mut self) -> PerfReport {
        // A run cut short (the time limit, an error) never closed, which is where the time its
        // messages took is written: without it a row that moved 9 messages read 0 MB/s.
        self.side.settle_elapsed();
        self.side.report
    }

    /// Messages done, and how many the run has if known (for a progress bar).
    pub fn progress(&self) -> (u64, Option<u64>) {
        self.role.progress(&self.side)
    }

    /// One driver turn; true when the run is over (closed, or failed).
    pub fn step(&mut self, c: &mut Connection, now: Duration) -> bool {
        let over = self.turn(c, now);
        self.side.report.record_recovery(c);
        self.side.report.path.sample(c, now);
        over
    }

    fn turn(&mut self, c: &mut Connection, now: Duration) -> bool {
        let side = &mut self.side;
        side.note_server_closed(c);
        if side.stand_down(c) {
            return true;
        }
        // Once the run was refused, a connection's end (the peer's RST of a connection it gave
        // up) is part of that refusal, which is the run's error.
        if side.run.is_set() && c.error().is_some() {
            return true;
        }
        if side.report.connection_ended(c) {
            return true;
        }
        let r = match side.mode(c) {
            ModeStep::Pending => return false,
            ModeStep::Failed => return true,
            ModeStep::Plain => self.role.plain(side, c, now),
            ModeStep::Bth => self.role.bth(side, c, now),
            ModeStep::Mismatch => self.role.mismatch(side, c, now),
        };
        match r {
            Ok(()) => side.finished(c, now),
            Err(e) => {
                side.fail(c, e);
                true
            }
        }
    }
}
