//! Two sides that disagree on `--plain`. The handshake settles it: a SYN with the tcp_bth
//! option answered without it (or a SYN without it) leaves both sides on a plain byte stream,
//! so each side can still frame control messages there as `--plain` does ([`Ctrl::frame`]),
//! and both say what happened and how to fix it, within a round trip or two:
//!
//! * the server refuses at once, on the byte stream, naming the cause: it sees it in the
//!   handshake (a client without tcp_bth, or with `--plain` on its own side a client whose SYN
//!   offered it: [`tcp_bth::Connection::peer_offered_bth`]), records its error and closes;
//! * the client of a tcp_bth run that finds the byte stream sends its hello framed as a
//!   `--plain` client does (a server of an older bth-perf then refuses it on the option check),
//!   waits for the server to close (at most [`MISMATCH_WAIT`]), and records why. A `--plain`
//!   client facing a tcp_bth server is a plain client like any other: it gets the refusal
//!   and prints it.

use super::ctrl::Ctrl;
use super::plain::{plain_hello, read_all, send_frame};
use super::side::Side;
use super::PerfError;
use std::time::Duration;
use tcp_bth::{Connection, State};

/// Longest a side waits for its peer's part of the end (a client for the server's refusal and
/// FIN, a server for the client's FIN) before it ends the connection itself, with RST: a peer
/// that is not bth-perf may never send either.
pub(crate) const MISMATCH_WAIT: Duration = Duration::from_millis(500);

/// The refusal a tcp_bth server sends a client whose SYN had no tcp_bth option.
pub(crate) const SERVER_NOT_PLAIN: &str = "this server runs without --plain (tcp_bth) and this \
     client's SYN carried no tcp_bth option (it runs --plain); run both sides with or without \
     --plain";

/// The refusal a `--plain` server sends a client whose SYN offered tcp_bth.
pub(crate) const SERVER_PLAIN: &str = "this server runs --plain and this client's SYN offered \
     tcp_bth (it runs without --plain); run both sides with or without --plain";

/// One side's part in a disagreement on `--plain`.
#[derive(Default)]
pub(crate) struct Mismatch {
    /// When it was found (the first turn on the byte stream).
    since: Option<Duration>,
    inbox: Vec<u8>,
    /// Client: the server refused the run on the byte stream (it is a bth-perf).
    refused: bool,
}

impl Mismatch {
    /// The client of a tcp_bth run on a byte stream: hello, then wait for the server's
    /// refusal and FIN.
    pub fn client(
        &mut self,
        side: &mut Side,
        c: &mut Connection,
        now: Duration,
        qp: u32,
    ) -> Result<(), PerfError> {
        let since = match self.since {
            Some(t) => t,
            None => {
                // Framed as a --plain client's hello: a --plain server of an older bth-perf
                // refuses it on the option check (ours refuses the handshake at once).
                send_frame(c, &plain_hello(side, qp))?;
                *self.since.insert(now)
            }
        };
        read_all(c, &mut self.inbox);
        while let Some(m) = Ctrl::unframe(&mut self.inbox) {
            match m {
                Ok(Ctrl::Refuse(_)) => self.refused = true,
                Ok(_) => {}
                // Not bth-perf's framing: nothing more to learn from it.
                Err(_) => self.inbox.clear(),
            }
        }
        if side.closed {
            return Ok(());
        }
        let peer_closed = c.state() == State::CloseWait;
        if peer_closed || now.saturating_sub(since) >= MISMATCH_WAIT {
            side.refusal(PerfError::PeerNotBth {
                confirmed: self.refused,
            });
            if peer_closed {
                side.close(c, false);
            } else {
                c.abort();
                side.closed = true;
            }
        }
        Ok(())
    }

    /// The server: refuse at once, naming the cause, and close; wait for the client's FIN.
    pub fn server(
        &mut self,
        side: &mut Side,
        c: &mut Connection,
        now: Duration,
    ) -> Result<(), PerfError> {
        let since = match self.since {
            Some(t) => t,
            None => {
                let (e, why) = if side.cfg.mode.plain {
                    (PerfError::ClientBth, SERVER_PLAIN)
                } else {
                    (PerfError::ClientPlain, SERVER_NOT_PLAIN)
                };
                side.refusal(e);
                send_frame(c, &Ctrl::Refuse(why.to_string()))?;
                side.close(c, false);
                *self.since.insert(now)
            }
        };
        // The client's hello, if it sends one, says nothing the handshake did not.
        self.inbox.clear();
        read_all(c, &mut self.inbox);
        let over = matches!(c.state(), State::Closed | State::TimeWait);
        if !over && now.saturating_sub(since) >= MISMATCH_WAIT {
            c.abort();
        }
        Ok(())
    }
}
