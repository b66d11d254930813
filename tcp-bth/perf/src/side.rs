//! What the client and the server of a BTH-mode run share: the receive pool, the requester
//! and responder halves, the routing of completions to them, control messages, and the end of
//! the run (statistics to the peer, close, TIME-WAIT).

use super::counters::ConnCounters;
use super::ctrl::Ctrl;
use super::mismatch::MISMATCH_WAIT;
use super::requester::Requester;
use super::responder::Responder;
use super::rq::RecvPool;
use super::{PerfConfig, PerfError, PerfOp, PerfReport, CTRL_WR};
use bth_framer::{WorkRequest, WrOp};
use bth_placement::WcStatus;
use bytes::Bytes;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tcp_bth::{Completion, Connection, Mode, State, WcOp};

/// Longest the client stays in TIME-WAIT before it reports the run over.
const TIME_WAIT_LINGER_MAX: Duration = Duration::from_secs(3);

/// A run whose servers and clients are apps of one process (`bth-compare`, the integration
/// tests): each server counts its connection closed, and a client in TIME-WAIT stops
/// lingering once every server has. TIME-WAIT is there to acknowledge a server's FIN again if
/// the client's last ACK was lost; a server that reached CLOSED got that ACK, so lingering on
/// (three RTOs, 0.6 s at the minimum RTO, after every run) answers nothing.
#[derive(Debug, Clone)]
pub struct ServersClosed {
    closed: Arc<AtomicUsize>,
    of: usize,
}

impl ServersClosed {
    /// For a run of `of` server connections.
    pub fn new(of: usize) -> ServersClosed {
        ServersClosed {
            closed: Arc::new(AtomicUsize::new(0)),
            of,
        }
    }

    fn note(&self) {
        self.closed.fetch_add(1, Ordering::Release);
    }

    /// Every server connection of the run has closed.
    pub fn all(&self) -> bool {
        self.closed.load(Ordering::Acquire) >= self.of
    }
}

/// The connections of one side of a run (`-q`): once one of them is refused, refuses its
/// peer, or finds that the two sides disagree on `--plain`, the others would get the same
/// answer, so the run is over for all of them. A client connection still waiting for its
/// answer then ends at once (RST, no error of its own: a hello held for a receive the server
/// never posts waited out the RNR timeout, 10 s, and reported that); a server connection that
/// never came ends too; and an error of a connection after it (another refusal of the same
/// run, the peer's RST of a connection it gave up) is not recorded again. The driver shares
/// one among the apps of a run ([`crate::drive::run_many`]); an app alone has its own.
#[derive(Debug, Clone, Default)]
pub struct RunRefused(Arc<AtomicBool>);

impl RunRefused {
    /// Mark the run refused; true if it already was.
    pub(crate) fn set(&self) -> bool {
        self.0.swap(true, Ordering::AcqRel)
    }

    /// A connection of the run was refused (or refused its peer).
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Where a turn goes after looking at the negotiated mode.
pub(crate) enum ModeStep {
    /// Handshake not finished.
    Pending,
    /// Byte stream, as configured.
    Plain,
    /// tcp_bth, as configured.
    Bth,
    /// The two sides disagree on `--plain`: the connection is a byte stream (which either side
    /// can frame control messages on), but one side wanted tcp_bth ([`crate::mismatch`]).
    Mismatch,
    /// The mode is not the configured one: the error is recorded and the connection aborted.
    Failed,
}

/// Not for use outside the perf apps: public only because [`super::Role`] names it.
#[doc(hidden)]
pub struct Side {
    pub(crate) cfg: PerfConfig,
    client: bool,
    pub(crate) pool: Option<RecvPool>,
    pub(crate) req: Option<Requester>,
    /// Payloads made before the requester starts ([`Requester::prepare`]).
    pub(crate) prepared: Vec<(u64, bytes::Bytes)>,
    pub(crate) resp: Option<Responder>,
    pub(crate) report: PerfReport,
    pub(crate) started: Option<Duration>,
    /// When the last message completed or arrived (the end of `report.elapsed`).
    last_data: Option<Duration>,
    pub(crate) closed: bool,
    /// When the connection entered TIME-WAIT (see [`Side::finished`]).
    time_wait_since: Option<Duration>,
    /// Both ends in this process ([`ServersClosed`]); a server lets go of it once it has
    /// counted itself closed.
    pub(crate) in_process: Option<ServersClosed>,
    /// Shared with the run's other connections: one refusal ends them all.
    pub(crate) run: RunRefused,
    /// This connection has its answer: the client's accept or refusal, the server's hello, or
    /// (server) a disagreement on `--plain` found in the handshake.
    pub(crate) settled: bool,
    /// Client: when the server's refusal arrived ([`Side::close_after_refusal`]).
    pub(crate) refused_at: Option<Duration>,
}

impl Side {
    pub(crate) fn new(cfg: PerfConfig, client: bool) -> Side {
        Side {
            cfg,
            client,
            pool: None,
            req: None,
            prepared: Vec::new(),
            resp: None,
            report: PerfReport::default(),
            started: None,
            last_data: None,
            closed: false,
            time_wait_since: None,
            in_process: None,
            run: RunRefused::default(),
            settled: false,
            refused_at: None,
        }
    }

    pub(crate) fn mode(&mut self, c: &mut Connection) -> ModeStep {
        let step = match (c.mode(), self.cfg.mode.plain) {
            (Mode::Pending, _) => ModeStep::Pending,
            // A server running --plain whose client's SYN offered tcp_bth: the client does not
            // run --plain (the handshake settled on the byte stream all the same).
            (Mode::Plain, true) if !self.client && c.peer_offered_bth() => ModeStep::Mismatch,
            (Mode::Plain, true) => ModeStep::Plain,
            (Mode::Bth { .. }, false) => ModeStep::Bth,
            // We asked for tcp_bth and the peer did not: the client's SYN-ACK or the server's
            // SYN had no tcp_bth option.
            (Mode::Plain, false) => ModeStep::Mismatch,
            // Our SYN offered no tcp_bth (`--plain`) and the peer's answer had it: not a peer
            // that follows the protocol.
            (Mode::Bth { .. }, true) => {
                self.fail(c, PerfError::BthInPlainMode);
                ModeStep::Failed
            }
        };
        // The server's answer is this mismatch. A client's is what it learns from the server
        // ([`crate::mismatch`]): until then it stands down if another connection of the run
        // gets there first.
        if let (ModeStep::Mismatch, false) = (&step, self.client) {
            self.settled = true;
        }
        step
    }

    /// Record `e`, the refusal of this connection's run (ours of the peer, or the peer's of
    /// ours), unless another connection of the run has already recorded one: one reason per
    /// run, not one per connection.
    pub(crate) fn refusal(&mut self, e: PerfError) {
        self.settled = true;
        if !self.run.set() {
            self.report.errors.push(e);
        }
    }

    /// Client, refused by the server, which closes right after its refusal: close once its
    /// FIN is in (or [`MISMATCH_WAIT`] after the refusal), so that this side closes last and
    /// has no TIME-WAIT to linger in (three RTOs, which a refusal's run is not worth).
    pub(crate) fn close_after_refusal(&mut self, c: &mut Connection, now: Duration) {
        let since = *self.refused_at.get_or_insert(now);
        if c.state() == State::CloseWait || now.saturating_sub(since) >= MISMATCH_WAIT {
            self.close(c, false);
        }
    }

    /// Another connection of the run was refused while this client connection still waits
    /// for its answer (the same answer, or none: a hello held for a receive the server never
    /// posts): end it now, with RST and no error of its own. True if it ended.
    pub(crate) fn stand_down(&mut self, c: &mut Connection) -> bool {
        if !self.client || self.settled || self.closed || !self.run.is_set() {
            return false;
        }
        c.abort();
        self.closed = true;
        true
    }

    /// Record `e` and abort the connection.
    pub(crate) fn fail(&mut self, c: &mut Connection, e: PerfError) {
        self.report.errors.push(e);
        c.abort();
    }

    /// The run's clock starts now.
    pub(crate) fn start(&mut self, now: Duration) {
        self.started = Some(now);
        self.report.timeline.start(now);
    }

    /// A message completed or arrived now (the end of `report.elapsed` so far).
    pub(crate) fn mark_data(&mut self, now: Duration) {
        self.last_data = Some(now);
    }

    /// Keep the receive buffers posted; true if any was posted now.
    pub(crate) fn top_up(&mut self, c: &mut Connection) -> Result<bool, PerfError> {
        match self.pool.as_mut() {
            Some(p) => p.top_up(c),
            None => Ok(false),
        }
    }

    pub(crate) fn send_ctrl(&mut self, c: &mut Connection, ctrl: &Ctrl) -> Result<(), PerfError> {
        c.post_send(WorkRequest {
            wr_id: CTRL_WR,
            op: WrOp::Send { imm: None },
            sg_list: vec![Bytes::from(ctrl.encode())],
        })
        .map(|_| ())
        .map_err(|e| PerfError::Post(e.kind))
    }

    /// Route every completion to its half; control messages are returned in arrival order.
    pub(crate) fn poll(&mut self, c: &mut Connection, now: Duration) -> Vec<Ctrl> {
        let mut ctrl = Vec::new();
        while let Some(comp) = c.poll_completion() {
            let before = self.report.messages;
            if let Some(m) = self.route(c, comp, now) {
                ctrl.push(m);
            }
            if self.report.messages != before {
                self.last_data = Some(now);
            }
        }
        ctrl
    }

    fn route(&mut self, c: &Connection, comp: Completion, now: Duration) -> Option<Ctrl> {
        let report = &mut self.report;
        let incoming = matches!(comp.op, WcOp::Recv | WcOp::RecvRdmaWithImm);
        if comp.op == WcOp::Recv {
            if let Some(p) = self.pool.as_mut() {
                p.used_one();
            }
        }
        if incoming && comp.status != WcStatus::Success {
            let (op, status) = (comp.op, comp.status);
            report.errors.push(PerfError::OpFailed { op, status });
            return None;
        }
        if comp.op == WcOp::Recv && comp.imm.is_none() {
            let len = comp.byte_len as usize;
            let body = comp.buf.as_deref().unwrap_or_default();
            return match Ctrl::decode(body.get(..len).unwrap_or(body)) {
                Ok(m) => Some(m),
                Err(e) => {
                    report.errors.push(e.into());
                    None
                }
            };
        }
        let reply = self.client && self.cfg.op == PerfOp::SendRecv && comp.op == WcOp::Recv;
        match (incoming && !reply, &mut self.req, &mut self.resp) {
            (true, _, Some(resp)) => {
                resp.on_data(c, &comp, now, report);
                if let (Some(p), Some(buf)) = (self.pool.as_mut(), comp.buf) {
                    p.recycle(buf);
                }
            }
            (true, _, None) => report
                .errors
                .push(PerfError::UnexpectedControl { what: "data" }),
            (false, _, _) if comp.wr_id == CTRL_WR => {
                if comp.status != WcStatus::Success {
                    let (wr_id, status) = (comp.wr_id, comp.status);
                    report
                        .errors
                        .push(PerfError::CompletionFailed { wr_id, status });
                }
            }
            (false, Some(req), _) => req.on_completion(comp, now, report),
            // A server's reply to a request: nothing to count.
            (false, None, _) if comp.status == WcStatus::Success => {}
            (false, None, _) => {
                let (wr_id, status) = (comp.wr_id, comp.status);
                report
                    .errors
                    .push(PerfError::CompletionFailed { wr_id, status });
            }
        }
        None
    }

    /// A control message both sides take the same way: the peer's done message or its
    /// statistics. Anything else is returned.
    pub(crate) fn common_ctrl(&mut self, c: &Connection, m: Ctrl, now: Duration) -> Option<Ctrl> {
        match m {
            Ctrl::Done(n) => match self.resp.as_mut() {
                Some(resp) => {
                    resp.on_done(c, n, now, &mut self.report);
                    self.last_data = Some(now);
                }
                None => self.unexpected(&Ctrl::Done(n)),
            },
            Ctrl::Stats(s) => self.report.peer = Some(*s),
            other => return Some(other),
        }
        None
    }

    pub(crate) fn unexpected(&mut self, m: &Ctrl) {
        let what = m.what();
        self.report
            .errors
            .push(PerfError::UnexpectedControl { what });
    }

    /// Whether this side's own work is over: its requester finished, its responder has the
    /// peer's done message.
    pub(crate) fn work_done(&self) -> bool {
        self.req.as_ref().is_none_or(Requester::finished)
            && self.resp.as_ref().is_none_or(Responder::finished)
    }

    /// End the run on this side: statistics to the peer (`stats`), then the FIN.
    pub(crate) fn close(&mut self, c: &mut Connection, stats: bool) {
        if self.closed {
            return;
        }
        if stats {
            self.report.counters = ConnCounters::of(c);
            let s = Ctrl::Stats(Box::new(self.report.summary()));
            if let Err(e) = self.send_ctrl(c, &s) {
                self.report.errors.push(e);
            }
        }
        self.settle_elapsed();
        c.close();
        self.closed = true;
    }

    /// The run's time (start to the last message) and its latencies in order, as the report
    /// gives them; at the close, or when a run cut short is handed over without one.
    pub(crate) fn settle_elapsed(&mut self) {
        if let (Some(start), Some(end)) = (self.started, self.last_data) {
            self.report.elapsed = end.saturating_sub(start);
        }
        self.report.latencies.sort();
    }

    /// After our close: CLOSED, or TIME-WAIT for a few RTOs. TIME-WAIT exists to acknowledge
    /// the peer's FIN again if our last ACK was lost; a client that stopped its driver at once
    /// left the server in LAST-ACK retransmitting its FIN until it gave up (15 RTOs, minutes,
    /// and a `TimedOut` error on a run that had moved every byte). Three RTOs cover the
    /// server's first retransmissions without holding the process for the full 2·MSL. The
    /// server closes last and has no TIME-WAIT to linger in unless it closed first. With both
    /// ends in this process the client lingers only until every server has closed
    /// ([`ServersClosed`]).
    pub(crate) fn finished(&mut self, c: &Connection, now: Duration) -> bool {
        match c.state() {
            _ if !self.closed => false,
            State::Closed => true,
            State::TimeWait if !self.client => true,
            State::TimeWait if self.in_process.as_ref().is_some_and(ServersClosed::all) => true,
            State::TimeWait => {
                let since = *self.time_wait_since.get_or_insert(now);
                now.saturating_sub(since) >= (c.rto() * 3).min(TIME_WAIT_LINGER_MAX)
            }
            _ => false,
        }
    }

    /// A server whose connection has closed (or waits in TIME-WAIT, having closed first)
    /// counts itself, once, for the clients of its process ([`ServersClosed`]).
    pub(crate) fn note_server_closed(&mut self, c: &Connection) {
        if self.client || !matches!(c.state(), State::Closed | State::TimeWait) {
            return;
        }
        if let Some(s) = self.in_process.take() {
            s.note();
        }
    }

    /// Messages done, and how many are expected if known: for the progress bar.
    pub(crate) fn progress(&self) -> (u64, Option<u64>) {
        match &self.req {
            Some(r) => r.progress(),
            None => (
                self.report.messages,
                self.cfg.duration.is_none().then_some(self.cfg.count),
            ),
        }
    }
}
