//! The server app: registers its regions and receive buffers, waits for the client's hello,
//! compares the client's options with its own and accepts (or refuses, naming every option
//! that differs), runs its responder (and, with `-b`, a requester of its own), and when the
//! client has closed sends its statistics and closes.

use super::app::{PerfApp, Role, Turn};
use super::check::{refusal, Options};
use super::ctrl::{Ctrl, Hello, Regions};
use super::mismatch::Mismatch;
use super::plain::PlainServer;
use super::requester::Requester;
use super::responder::Responder;
use super::rq::RecvPool;
use super::side::Side;
use super::{PerfConfig, PerfError};
use std::time::Duration;
use tcp_bth::{Connection, State};

/// The server of one connection.
pub type Server = PerfApp<ServerRole>;

/// What only the server does.
pub struct ServerRole {
    /// This side's regions, for the accept (once set up).
    regions: Option<Regions>,
    hello: bool,
    plain: PlainServer,
    mismatch: Mismatch,
}

impl PerfApp<ServerRole> {
    /// The server of one connection, running `cfg` (the client's hello must match it:
    /// [`crate::check`]).
    pub fn new(cfg: PerfConfig) -> Server {
        let role = ServerRole {
            regions: None,
            hello: false,
            plain: PlainServer::default(),
            mismatch: Mismatch::default(),
        };
        PerfApp::with(cfg, false, role)
    }
}

impl Role for ServerRole {
    fn bth(&mut self, side: &mut Side, c: &mut Connection, now: Duration) -> Turn {
        let regions = match self.regions {
            Some(r) => r,
            None => *self.regions.insert(set_up(side, c)?),
        };
        if let Some(resp) = side.resp.as_mut() {
            resp.step(c, &mut side.report);
        }
        side.top_up(c)?;
        for m in side.poll(c, now) {
            match side.common_ctrl(c, m, now) {
                Some(Ctrl::Hello(h)) if !self.hello => {
                    self.hello = true;
                    on_hello(side, c, h, regions, now)?;
                }
                Some(other) => side.unexpected(&other),
                None => {}
            }
        }
        // Re-post at once for what just completed: with depth 1 (request/response) the next
        // message may arrive before the next turn.
        side.top_up(c)?;
        if side.closed {
            return Ok(());
        }
        if let Some(req) = side.req.as_mut() {
            req.step(c, now, &mut side.report, false)?;
        }
        if c.state() == State::CloseWait && side.req.as_ref().is_none_or(Requester::finished) {
            // Unless another connection of the run was refused: this one's client gave up too.
            if !self.hello && !side.run.is_set() {
                side.report.errors.push(PerfError::PeerClosedEarly);
            }
            side.close(c, self.hello);
        }
        Ok(())
    }

    fn plain(&mut self, side: &mut Side, c: &mut Connection, now: Duration) -> Turn {
        self.plain.turn(side, c, now)
    }

    fn mismatch(&mut self, side: &mut Side, c: &mut Connection, now: Duration) -> Turn {
        self.mismatch.server(side, c, now)
    }
}

fn set_up(side: &mut Side, c: &mut Connection) -> Result<Regions, PerfError> {
    side.cfg.validate()?;
    let (resp, regions) = Responder::set_up(c, &side.cfg)?;
    side.resp = Some(resp);
    side.pool = Some(RecvPool::new(&side.cfg, false));
    side.top_up(c)?;
    // `-b`: this side sends too, from the turn that gets the hello, which also owes the
    // hello's ACK: its first payloads are made now (`Requester::prepare`).
    if side.cfg.mode.bidir {
        side.prepared = Requester::prepare(&side.cfg);
    }
    Ok(regions)
}

/// The client's hello: refuse it if its options differ from ours (telling it why), accept it
/// otherwise, and start our requester with `-b`.
fn on_hello(
    side: &mut Side,
    c: &mut Connection,
    h: Hello,
    regions: Regions,
    now: Duration,
) -> Result<(), PerfError> {
    side.settled = true;
    if let Some(reason) = refusal(&h.options, &Options::of(&side.cfg)) {
        side.send_ctrl(c, &Ctrl::Refuse(reason.clone()))?;
        side.refusal(PerfError::OptionsDiffer { reason });
        side.close(c, false);
        return Ok(());
    }
    side.send_ctrl(c, &Ctrl::Accept(regions))?;
    side.start(now);
    if side.cfg.mode.bidir {
        side.req = Some(Requester::new(
            side.cfg.clone(),
            h.regions,
            now,
            std::mem::take(&mut side.prepared),
        ));
    }
    Ok(())
}
