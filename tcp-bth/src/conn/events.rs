//! What changed, for the application: [`Connection::poll_event`] instead of polling `state()`,
//! `mode()` and `error()` after every call. Events are derived from the connection's state at
//! the end of each call that can change it (segment in, timeout, close, abort), so no state
//! transition has to remember to report itself.

use super::*;

/// A change the application may act on, reported once, in the order it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The handshake finished; `mode` says what it settled: BTH or the plain byte stream.
    Connected {
        /// [`Mode::Bth`] or [`Mode::Plain`].
        mode: Mode,
    },
    /// The peer sent FIN and every byte before it has arrived: it will send nothing more.
    PeerFinished,
    /// The connection is closed. `error` is `None` after an orderly close, otherwise the
    /// terminal reason (also in [`Connection::error`]).
    Closed {
        /// Why it ended; `None` after an orderly close.
        error: Option<ConnectionError>,
    },
}

/// Which events were already reported.
#[derive(Debug, Default)]
pub(super) struct Reported {
    connected: bool,
    peer_finished: bool,
    closed: bool,
}

impl Connection {
    /// The next event, oldest first.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Queue an event for every change not reported yet.
    pub(super) fn note_events(&mut self) {
        let r = &mut self.reported;
        if !r.connected && self.state.synchronized() && self.mode != Mode::Pending {
            r.connected = true;
            self.events.push_back(Event::Connected { mode: self.mode });
        }
        if !r.peer_finished && self.rcv.peer_finished() {
            r.peer_finished = true;
            self.events.push_back(Event::PeerFinished);
        }
        if !r.closed && self.state == State::Closed {
            r.closed = true;
            self.events.push_back(Event::Closed {
                error: self.error.clone(),
            });
        }
    }
}
