//! A perf app: the state both sides share ([`Side`]) and what only the client or only the
//! server does ([`Role`]). [`super::Client`] and [`super::Server`] are its two kinds.

use super::side::{ModeStep, ServersClosed, Side};
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

    /// Both ends of the run are apps of this process, sharing `servers`: the client stops
    /// lingering in TIME-WAIT once every server has closed ([`ServersClosed`]).
    pub fn in_process(mut self, servers: ServersClosed) -> Self {
        self.side.in_process = Some(servers);
        self
    }

    pub fn report(&self) -> &PerfReport {
        &self.side.report
    }

    pub fn report_mut(&mut self) -> &mut PerfReport {
        &mut self.side.report
    }

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
        if side.report.connection_ended(c) {
            return true;
        }
        let r = match side.mode(c) {
            ModeStep::Pending => return false,
            ModeStep::Failed => return true,
            ModeStep::Plain => self.role.plain(side, c, now),
            ModeStep::Bth => self.role.bth(side, c, now),
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
