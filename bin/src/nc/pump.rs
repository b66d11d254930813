//! What `bth nc` does on its connection each driver turn: bytes from its input (stdin) onto
//! the connection, bytes from the connection to its output (stdout), in whichever mode the
//! handshake settled. Plain TCP is a byte stream (`send_bytes` / `recv_bytes`); tcp_bth
//! carries each input chunk as a SEND of up to [`MSG_MAX`] bytes into a receive buffer the
//! other side posted, and each received message's bytes go to the output in MSN order.
//!
//! The input and output are [`Source`] and [`Sink`]: the tool's are threads reading stdin and
//! writing stdout (`stdio.rs`), the tests' are in memory. Neither blocks the turn: a source
//! with nothing new says [`Input::Pending`], a full sink hands the bytes back and the pump
//! holds them (and stops reading the connection, so its window or its posted receives hold
//! the peer back) until the sink takes them.

use bth_framer::WorkRequest;
use bytes::Bytes;
use std::collections::VecDeque;
use tcp_bth::conn::WcStatus;
use tcp_bth::{CallError, Completion, Connection, ConnectionError, Framing, Mode, State, WcOp};
use thiserror::Error;

/// The largest SEND we post, and the largest message we accept (our hello says so, and every
/// receive buffer we post has this length).
pub const MSG_MAX: usize = 64 * 1024;

/// Receive buffers kept posted (or waiting for the output to take their bytes) in tcp_bth
/// mode: at most this many messages of the peer's are in flight towards us.
pub const RECV_DEPTH: usize = 32;

/// Input bytes taken onto the connection and not yet acknowledged, at most: beyond it the
/// pump reads no more input (the source's own queue then fills, and its reader waits).
pub const SEND_BACKLOG: u64 = 4 << 20;

/// What a [`Source`] has now.
#[derive(Debug)]
pub enum Input {
    /// These bytes (never empty).
    Data(Vec<u8>),
    /// Nothing yet.
    Pending,
    /// The input ended (stdin's EOF); asked again, it says so again.
    Eof,
    /// Reading the input failed; the pump gives up.
    Failed(std::io::Error),
}

/// Where the pump's input comes from, without blocking.
pub trait Source {
    /// What there is now.
    fn poll(&mut self) -> Input;
}

/// Why a [`Sink`] did not take bytes.
#[derive(Debug)]
pub enum Refused {
    /// Full for now: the bytes come back, to be offered again.
    Full(Vec<u8>),
    /// Gone (stdout closed or failed): nothing will be taken again.
    Closed,
}

/// Where the pump's output goes, without blocking.
pub trait Sink {
    /// Take `bytes` (never empty), or hand them back.
    fn offer(&mut self, bytes: Vec<u8>) -> Result<(), Refused>;
}

/// Why the pump gave up.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PumpError {
    /// The connection ended abnormally (reset, timeouts, a refused handshake).
    #[error("{0}")]
    Connection(ConnectionError),
    /// Reading the input failed.
    #[error("reading stdin: {0}")]
    Input(String),
    /// The output stopped taking bytes (its error is the writer's to tell).
    #[error("stdout closed")]
    Output,
    /// The stack refused a call (a bug of the tool, or of the stack).
    #[error("{what}: {err}")]
    Call {
        /// What was called.
        what: &'static str,
        /// Why it was refused.
        err: CallError,
    },
    /// A message of ours or of the peer's completed with an error.
    #[error("a {op:?} completed with {status:?}")]
    Completion {
        /// The completion's opcode.
        op: WcOp,
        /// Its status.
        status: WcStatus,
    },
}

/// Bytes moved so far, each way.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Moved {
    /// Taken from the input onto the connection.
    pub sent: u64,
    /// Handed to the output.
    pub received: u64,
    /// Messages posted (tcp_bth mode; 0 in plain mode).
    pub messages_sent: u64,
    /// Messages received (tcp_bth mode).
    pub messages_received: u64,
}

/// One connection's pump. See the module documentation.
pub struct Pump<S, K> {
    source: S,
    sink: K,
    /// The input has ended and every byte of it was taken: our FIN is queued.
    closed: bool,
    /// Output bytes the sink did not take yet, oldest first.
    held: VecDeque<Vec<u8>>,
    /// Receive buffers posted and not yet completed (tcp_bth mode).
    posted: usize,
    next_wr: u64,
    moved: Moved,
}

impl<S: Source, K: Sink> Pump<S, K> {
    /// A pump from `source` to the connection and from the connection to `sink`.
    pub fn new(source: S, sink: K) -> Self {
        Pump {
            source,
            sink,
            closed: false,
            held: VecDeque::new(),
            posted: 0,
            next_wr: 1,
            moved: Moved::default(),
        }
    }

    /// Bytes moved so far.
    pub fn moved(&self) -> Moved {
        self.moved
    }

    /// The output, to drop it once the pump is done (the writer then ends).
    pub fn into_sink(self) -> K {
        self.sink
    }

    /// One turn on `c`: true once both directions are closed in order (our FIN acknowledged,
    /// the peer's taken and every byte before it handed to the sink). Does nothing until the
    /// handshake has settled the mode.
    pub fn step(&mut self, c: &mut Connection) -> Result<bool, PumpError> {
        if let Some(e) = c.error() {
            return Err(PumpError::Connection(e));
        }
        let bth = match c.mode() {
            Mode::Pending => return Ok(false),
            Mode::Plain => None,
            Mode::Bth {
                peer_max_message, ..
            } => Some((peer_max_message as usize).clamp(1, MSG_MAX)),
        };
        self.flush()?;
        match bth {
            None => {
                // A byte stream's sends complete nothing the pump needs; none is kept.
                while c.poll_completion().is_some() {}
                self.receive_plain(c)?;
            }
            Some(_) => self.receive_bth(c)?,
        }
        self.send(c, bth)?;
        let out_done = c.peer_finished() && !c.has_completion() && self.held.is_empty();
        let ours_acked = matches!(c.state(), State::TimeWait | State::Closed);
        Ok(self.closed && out_done && ours_acked)
    }

    /// Offer the held bytes again, oldest first.
    fn flush(&mut self) -> Result<(), PumpError> {
        while let Some(b) = self.held.pop_front() {
            match self.sink.offer(b) {
                Ok(()) => {}
                Err(Refused::Full(b)) => {
                    self.held.push_front(b);
                    break;
                }
                Err(Refused::Closed) => return Err(PumpError::Output),
            }
        }
        Ok(())
    }

    /// Hand `b` to the sink, or hold it behind what is held already.
    fn output(&mut self, b: Vec<u8>) -> Result<(), PumpError> {
        if b.is_empty() {
            return Ok(());
        }
        self.moved.received += b.len() as u64;
        self.held.push_back(b);
        self.flush()
    }

    /// Plain mode: read the stream while the sink keeps up.
    fn receive_plain(&mut self, c: &mut Connection) -> Result<(), PumpError> {
        while self.held.is_empty() && c.readable_bytes() > 0 {
            let mut b = vec![0u8; c.readable_bytes().min(MSG_MAX)];
            let n = c.recv_bytes(&mut b);
            b.truncate(n);
            self.output(b)?;
        }
        Ok(())
    }

    /// tcp_bth mode: completed receives to the sink, our SENDs' completions checked, and
    /// receive buffers posted again while the sink keeps up.
    fn receive_bth(&mut self, c: &mut Connection) -> Result<(), PumpError> {
        while let Some(comp) = c.poll_completion() {
            self.completion(comp)?;
        }
        while self.posted + self.held.len() < RECV_DEPTH {
            let wr = self.wr_id();
            c.post_recv(wr, vec![0u8; MSG_MAX])
                .map_err(|e| PumpError::Call {
                    what: "posting a receive buffer",
                    err: e.kind,
                })?;
            self.posted += 1;
        }
        Ok(())
    }

    fn completion(&mut self, comp: Completion) -> Result<(), PumpError> {
        if comp.status != WcStatus::Success {
            return Err(PumpError::Completion {
                op: comp.op,
                status: comp.status,
            });
        }
        match comp.op {
            WcOp::Recv => {
                self.posted = self.posted.saturating_sub(1);
                self.moved.messages_received += 1;
                let mut b = comp.buf.unwrap_or_default();
                b.truncate(comp.byte_len as usize);
                self.output(b)
            }
            // Our SEND, acknowledged.
            WcOp::Send => Ok(()),
            // Nothing else is posted or allowed (no memory region is registered).
            op => Err(PumpError::Completion {
                op,
                status: comp.status,
            }),
        }
    }

    fn wr_id(&mut self) -> u64 {
        self.next_wr += 1;
        self.next_wr
    }

    /// Input onto the connection while its backlog has room; once the input has ended,
    /// our FIN. `bth`: tcp_bth mode, with the longest SEND to post.
    fn send(&mut self, c: &mut Connection, bth: Option<usize>) -> Result<(), PumpError> {
        while !self.closed && c.send_backlog() < SEND_BACKLOG {
            match self.source.poll() {
                Input::Pending => break,
                Input::Data(v) => {
                    self.moved.sent += v.len() as u64;
                    match bth {
                        None => {
                            c.send_bytes(&v).map_err(|err| PumpError::Call {
                                what: "send_bytes",
                                err,
                            })?;
                        }
                        Some(max) => {
                            let v = Bytes::from(v);
                            for at in (0..v.len()).step_by(max) {
                                let part = v.slice(at..v.len().min(at + max));
                                let wr = WorkRequest::send(self.wr_id(), part, None);
                                c.post_send(wr).map_err(|e| PumpError::Call {
                                    what: "posting a SEND",
                                    err: e.kind,
                                })?;
                                self.moved.messages_sent += 1;
                            }
                        }
                    }
                }
                Input::Eof => {
                    c.close();
                    self.closed = true;
                }
                Input::Failed(e) => return Err(PumpError::Input(e.to_string())),
            }
        }
        Ok(())
    }
}

/// Which side of the connection this is, for [`mode_line`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// We connected.
    Client,
    /// We accepted.
    Server,
}

/// What was offered, for [`mode_line`]: `--plain`, `--framing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    /// `--plain`: no tcp_bth option offered (client) or taken (server).
    pub plain: bool,
    /// The framing asked for.
    pub framing: Framing,
}

/// What the handshake settled, as `bth nc` says it on stderr after "connected to PEER: " (or
/// "connection from PEER: "): `tcp_bth, per-segment framing`, or `plain TCP (the peer did not
/// answer the tcp_bth option), timestamps on`. `None` while the mode is pending.
pub fn mode_line(c: &Connection, side: Side, offer: Offer) -> Option<String> {
    match c.mode() {
        Mode::Pending => None,
        Mode::Bth { .. } => {
            let framing = match (c.seq_framed(), offer.framing) {
                (true, _) => "seq framing (one option per message, spec amendment 3)",
                (false, Framing::Seq) => {
                    "per-segment framing (the peer did not ask for seq framing)"
                }
                (false, Framing::PerSegment) => "per-segment framing",
            };
            Some(format!("tcp_bth, {framing}"))
        }
        Mode::Plain => {
            let why = match (side, offer.plain, c.peer_offered_bth()) {
                (Side::Client, true, _) => "--plain: no tcp_bth option offered",
                (Side::Client, false, _) => "the peer did not answer the tcp_bth option",
                (Side::Server, true, true) => "--plain: the peer offered tcp_bth, not taken",
                (Side::Server, true, false) => "--plain; the peer did not offer tcp_bth either",
                (Side::Server, false, _) => "the peer did not offer the tcp_bth option",
            };
            let ts = if c.timestamps() { "on" } else { "off" };
            Some(format!("plain TCP ({why}), timestamps {ts}"))
        }
    }
}
