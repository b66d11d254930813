//! One TCP connection as a pure state machine (RFC 9293), in the style of quinn-proto: feed it
//! received segments with [`Connection::handle_segment`] and timer expiries with
//! [`Connection::handle_timeout`], take segments to send from [`Connection::poll_transmit`] and the
//! next deadline from [`Connection::poll_timeout`]. The current time is always an argument
//! (`Duration` since an arbitrary epoch), so a virtual clock drives it deterministically.
//!
//! With `tcp_bth` negotiated, send data comes from the framer (one message per segment, BTH on
//! every segment) and received data goes straight to placement; otherwise the connection is a
//! plain TCP byte stream.

mod error;
mod events;
mod input;
mod output;
pub mod recovery;
mod timer;
mod timers;

#[cfg(test)]
mod tests;

use crate::config::Config;
use crate::ranges::RangeSet;
use crate::rtt::RttEstimator;
use crate::wire::{MsgClass, Opcode, TcpRepr};
use bth_cc::CongestionControl;
use bth_framer::{Framer, FramerConfig, PostError, WorkRequest, WrOp};
use bth_placement::{Access, MrHandle, Placement, PlacementConfig, PlacementLimits, WcStatus};
use bytes::Bytes;
pub use error::{ConnError, ConnectionError, PostBufError, PostSendError, RegisterError, Rejected};
pub use events::Event;
use recovery::{Recovery, RecoveryStats};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;
use timer::{Timer, TimerTable};

/// RFC 9293 connection states. LISTEN is the driver's job: it hands a SYN to [`Connection::accept`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    SynSent,
    SynReceived,
    Established,
    FinWait1,
    FinWait2,
    CloseWait,
    Closing,
    LastAck,
    TimeWait,
    Closed,
}

impl State {
    /// States in which the peer may still send us data.
    fn receives_data(self) -> bool {
        matches!(self, State::Established | State::FinWait1 | State::FinWait2)
    }

    fn synchronized(self) -> bool {
        !matches!(self, State::SynSent | State::SynReceived | State::Closed)
    }
}

/// What the handshake settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Handshake not finished.
    Pending,
    /// Both sides speak tcp_bth.
    Bth {
        peer_first_msn: u16,
        peer_max_message: u32,
    },
    /// Fallback: plain TCP byte stream.
    Plain,
}

/// The operation a completion reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WcOp {
    Send,
    RdmaWrite,
    RdmaRead,
    Recv,
    RecvRdmaWithImm,
}

/// A work completion, delivered in message order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub wr_id: u64,
    pub op: WcOp,
    pub status: WcStatus,
    pub byte_len: u32,
    pub imm: Option<u32>,
    pub msn: u16,
    /// The posted receive buffer or READ sink, handed back.
    pub buf: Option<Vec<u8>>,
}

/// Counters; nothing here is ever reset.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub segments_in: u64,
    pub segments_out: u64,
    /// Refused by the segment parser (checksum, header, options).
    pub malformed: u64,
    /// BTH segments whose ICRC did not match: dropped, never placed.
    pub icrc_errors: u64,
    /// Data segments whose BTH did not describe a valid message fragment.
    pub bad_bth: u64,
    pub paws_drops: u64,
    pub out_of_window: u64,
    /// SEND segments refused because no receive buffer was posted for their MSN.
    pub receiver_not_ready: u64,
    /// Segments placed while an earlier hole was open: direct out-of-order placement.
    pub ooo_placed: u64,
    /// Segments dropped because the out-of-order range table was full.
    pub ooo_table_full: u64,
    /// Segments placement did not take (its windows or range limits): not acknowledged.
    pub placement_refused: u64,
    pub challenge_acks: u64,
    /// RDMA READ requests whose response could not be framed (longer than the requester
    /// announced it accepts): the QP failed, never a silent drop.
    pub read_responses_refused: u64,
    pub bytes_received: u64,
    pub bytes_sent: u64,
}

/// Received payload held outside posted buffers, by structure ([`Connection::rx_held`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RxHeld {
    /// In-order bytes waiting for the application to read them (plain mode).
    pub stream_queue: u64,
    /// Bytes that arrived beyond a hole, waiting for it to fill (plain mode).
    pub ooo_store: u64,
}

impl RxHeld {
    pub fn total(&self) -> u64 {
        self.stream_queue + self.ooo_store
    }
}

const MAX_CHUNK: usize = 64 * 1024;

pub struct Connection {
    cfg: Config,
    state: State,
    mode: Mode,
    error: Option<ConnectionError>,

    // Send side. Offsets are stream offsets: 0 is the first data byte (sequence ISS + 1).
    iss: u32,
    syn_sent_at: Option<Duration>,
    syn_retransmitted: bool,
    syn_pending: bool,
    snd_una: u64,
    snd_nxt: u64,
    snd_wnd: u64,
    max_snd_wnd: u64,
    snd_wl1: u32,
    snd_wl2: u32,
    peer_wscale: u8,
    rcv_wscale: u8,
    peer_mss: u16,
    sack_ok: bool,
    ts_ok: bool,
    /// Stream offset of our FIN once close() was called.
    fin_at: Option<u64>,
    fin_sent: bool,
    /// The FIN must go out again (RTO).
    fin_resend: bool,
    fin_acked: bool,
    framer: Framer,
    rec: Recovery,
    rtt: RttEstimator,
    cc: Box<dyn CongestionControl>,
    recovery_point: Option<u64>,
    tlp_probe: Option<(u64, u64)>,
    peer_credit: Option<u16>,
    peer_grant: u32,
    credit_news: bool,
    /// READ work requests waiting for their response: wr_id by request MSN.
    reads: HashMap<u16, u64>,

    // Receive side.
    irs: u32,
    rcv_nxt: u64,
    rcv_ooo: RangeSet,
    latest_rx: Option<u64>,
    peer_fin: Option<u64>,
    ts_recent: Option<u32>,
    /// When `ts_recent` was last set (RFC 7323 §5.5 idle rule).
    ts_recent_at: Duration,
    /// Added to our TSval clock (`isn::ts_offset`).
    ts_offset: u32,
    placement: Placement,
    msg_end: HashMap<(MsgClass, u16), u64>,
    /// Completions waiting for the cumulative point to pass their message's end.
    held: BTreeMap<(u64, u64), Completion>,
    held_seq: u64,
    plain_rx: VecDeque<u8>,
    plain_ooo: BTreeMap<u64, Vec<u8>>,
    plain_ooo_bytes: usize,

    // Control.
    ack_now: bool,
    /// A receive was posted since our last pure ACK: the new credit must reach the peer, and
    /// only pure ACKs carry it (a data segment's MSN field is its own).
    credit_owed: bool,
    /// An RST to send, with this sequence number. Always without ACK: every RST this
    /// connection sends answers an acceptable-ACK failure or ends the QP (RFC 9293 §3.10.7.4);
    /// RST|ACK in answer to segments for no connection is the Endpoint's (LISTEN/CLOSED).
    rst_pending: Option<u32>,
    /// Persist probe to send: (seq, ack).
    probe_pending: Option<(u32, u32)>,
    last_challenge: Option<Duration>,
    last_invalid_ack: Option<Duration>,
    timers: TimerTable,
    persist_backoff: u32,
    retries: u32,
    completions: VecDeque<Completion>,
    events: VecDeque<Event>,
    reported: events::Reported,
    stats: Stats,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("state", &self.state)
            .field("mode", &self.mode)
            .field("snd_una", &self.snd_una)
            .field("snd_nxt", &self.snd_nxt)
            .field("rcv_nxt", &self.rcv_nxt)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl Connection {
    fn new(cfg: Config, now: Duration, state: State) -> Connection {
        let iss = crate::isn::isn(&cfg.isn_key, now, cfg.ip, cfg.local_port, cfg.remote_port);
        let framer = Framer::new(FramerConfig {
            mss: u32::from(cfg.mss),
            first_msn: cfg.first_msn,
            max_message_len: cfg.max_message_len,
        });
        // Placement counts every class from MSN 0; the stack translates wire MSNs by the base
        // the peer announced in its hello (or our own base, for READ responses that echo our
        // requests). So regions and receives can be set up before the handshake.
        let limits = PlacementLimits {
            // rkeys must not be predictable: seed their key bytes from the host secret.
            rkey_seed: u64::from_le_bytes(cfg.isn_key.0[..8].try_into().expect("8 bytes"))
                ^ u64::from(iss),
            ..PlacementLimits::default()
        };
        let placement = Placement::with_limits(
            PlacementConfig {
                first_msn: 0,
                max_posted_recvs: cfg.max_posted_recvs,
                max_message_len: cfg.max_message_len,
            },
            limits,
        );
        let rtt = RttEstimator::new(cfg.min_rto, cfg.max_rto);
        let cc = cfg.congestion.build(u32::from(cfg.mss));
        Connection {
            state,
            mode: Mode::Pending,
            error: None,
            iss,
            syn_sent_at: None,
            syn_retransmitted: false,
            syn_pending: true,
            snd_una: 0,
            snd_nxt: 0,
            snd_wnd: 0,
            max_snd_wnd: 0,
            snd_wl1: 0,
            snd_wl2: 0,
            peer_wscale: 0,
            rcv_wscale: 0,
            peer_mss: 536,
            sack_ok: false,
            ts_ok: false,
            fin_at: None,
            fin_sent: false,
            fin_resend: false,
            fin_acked: false,
            framer,
            rec: Recovery::new(),
            rtt,
            cc,
            recovery_point: None,
            tlp_probe: None,
            peer_credit: None,
            peer_grant: 0,
            credit_news: false,
            reads: HashMap::new(),
            irs: 0,
            rcv_nxt: 0,
            rcv_ooo: RangeSet::new(),
            latest_rx: None,
            peer_fin: None,
            ts_recent: None,
            ts_recent_at: Duration::ZERO,
            ts_offset: crate::isn::ts_offset(&cfg.isn_key, cfg.ip, cfg.local_port, cfg.remote_port),
            placement,
            msg_end: HashMap::new(),
            held: BTreeMap::new(),
            held_seq: 0,
            plain_rx: VecDeque::new(),
            plain_ooo: BTreeMap::new(),
            plain_ooo_bytes: 0,
            ack_now: false,
            credit_owed: false,
            rst_pending: None,
            probe_pending: None,
            last_challenge: None,
            last_invalid_ack: None,
            timers: TimerTable::default(),
            persist_backoff: 0,
            retries: 0,
            completions: VecDeque::new(),
            events: VecDeque::new(),
            reported: Default::default(),
            stats: Stats::default(),
            cfg,
        }
    }

    /// Active open: the first poll_transmit sends the SYN.
    pub fn connect(cfg: Config, now: Duration) -> Connection {
        Connection::new(cfg, now, State::SynSent)
    }

    /// Passive open from a received SYN (header + payload, no IP header). `cfg.remote_port` is
    /// taken from the SYN. `None` if the segment is not a valid SYN.
    pub fn accept(mut cfg: Config, now: Duration, syn: &[u8]) -> Option<Connection> {
        let seg = TcpRepr::parse(syn, Some(cfg.ip.reversed())).ok()?;
        let f = seg.flags;
        if !f.syn() || f.ack() || f.rst() || seg.dst_port != cfg.local_port {
            return None;
        }
        if let Some(b) = &seg.options.bth {
            if !b.icrc_ok(seg.payload) {
                return None;
            }
        }
        cfg.remote_port = seg.src_port;
        let offer_ts = cfg.timestamps;
        let mut c = Connection::new(cfg, now, State::SynReceived);
        c.irs = seg.seq;
        c.negotiate(now, &seg.options, offer_ts);
        c.snd_wnd = u64::from(seg.window);
        c.snd_wl1 = seg.seq;
        c.stats.segments_in += 1;
        Some(c)
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Why the connection ended, if it ended abnormally.
    pub fn error(&self) -> Option<ConnectionError> {
        self.error.clone()
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    pub fn recovery_stats(&self) -> RecoveryStats {
        self.rec.stats
    }

    pub fn placement_counters(&self) -> bth_placement::Counters {
        self.placement.counters()
    }

    /// Received payload bytes held right now outside the application's posted buffers and
    /// registered regions, by the structure holding them. With `tcp_bth` placement writes every
    /// segment straight into its destination and nothing stages payload, so both stay 0 there;
    /// in plain mode they are the byte-stream queue and the out-of-order store.
    pub fn rx_held(&self) -> RxHeld {
        RxHeld {
            stream_queue: self.plain_rx.len() as u64,
            ooo_store: self.plain_ooo_bytes as u64,
        }
    }

    pub fn cwnd(&self) -> u64 {
        self.cc.cwnd()
    }

    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }

    /// Sequence-space view for tools and tests: (snd_una, snd_nxt, rcv_nxt) as wire sequence
    /// numbers.
    pub fn seq_state(&self) -> (u32, u32, u32) {
        (
            self.seq_of(self.snd_una),
            self.seq_of(self.snd_nxt),
            self.rcv_seq_of(self.rcv_nxt),
        )
    }

    /// Bytes the peer currently lets us send (its advertised window, scaled).
    pub fn peer_window(&self) -> u64 {
        self.snd_wnd
    }

    /// Retransmission timeout now in force.
    pub fn rto(&self) -> Duration {
        self.rtt.rto()
    }

    pub fn is_established(&self) -> bool {
        self.state == State::Established
    }

    /// Closed, with nothing left to send.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    fn require_bth(&self) -> Result<(), ConnError> {
        match self.mode {
            Mode::Bth { .. } => Ok(()),
            Mode::Plain => Err(ConnError::NotBth),
            Mode::Pending => Err(ConnError::NotEstablished),
        }
    }

    fn require_open(&self) -> Result<(), ConnError> {
        if let Some(e) = &self.error {
            return Err(ConnError::Ended(e.clone()));
        }
        if self.fin_at.is_some() || matches!(self.state, State::Closed | State::TimeWait) {
            return Err(ConnError::Closed);
        }
        Ok(())
    }

    // ---- verbs-like API (tcp_bth mode) ----

    /// Register `buf` as a memory region; on refusal the buffer comes back.
    pub fn register_mr(&mut self, buf: Vec<u8>, access: Access) -> Result<MrHandle, RegisterError> {
        self.placement
            .regions_mut()
            .register(buf, access)
            .map_err(|r| Rejected::new(r.error, r.buf))
    }

    pub fn deregister_mr(&mut self, rkey: u32) -> Result<Vec<u8>, ConnError> {
        Ok(self.placement.regions_mut().deregister(rkey)?)
    }

    /// Contents of a registered region (after a completion says a WRITE landed).
    pub fn mr_bytes(&self, rkey: u32) -> Option<&[u8]> {
        self.placement.regions().bytes(rkey)
    }

    /// Post a receive buffer for the next incoming SEND; advertises the new credit. Allowed
    /// before the handshake finishes. On refusal the buffer comes back.
    pub fn post_recv(&mut self, wr_id: u64, buf: Vec<u8>) -> Result<(), PostBufError> {
        if self.mode == Mode::Plain {
            return Err(Rejected::new(ConnError::NotBth, buf));
        }
        if let Some(e) = &self.error {
            return Err(Rejected::new(ConnError::Ended(e.clone()), buf));
        }
        self.placement
            .post_recv(wr_id, buf)
            .map_err(|r| Rejected::new(r.error, r.buf))?;
        self.ack_now = true;
        self.credit_owed = true;
        Ok(())
    }

    /// Post a SEND or RDMA WRITE (with or without immediate); returns its MSN. On refusal the
    /// work request comes back.
    pub fn post_send(&mut self, wr: WorkRequest) -> Result<u16, PostSendError> {
        if let Err(e) = self.require_bth().and_then(|_| self.require_open()) {
            return Err(Rejected::new(e, wr));
        }
        if matches!(wr.op, WrOp::RdmaRead { .. }) {
            return Err(Rejected::new(ConnError::ReadViaPostSend, wr));
        }
        // The framer consumes the request; a copy of its handles (reference counts, not
        // payload bytes) is what a refusal hands back.
        let keep = wr.clone();
        self.framer
            .post(wr)
            .map(|p| p.msn)
            .map_err(|e| Rejected::new(e, keep))
    }

    /// Post an RDMA READ of `len = sink.len()` bytes at the peer's `rkey`/`remote_addr` into `sink`.
    ///
    /// Transactional: either the READ is registered with placement *and* queued in the framer,
    /// or nothing changed (no MSN consumed, no request sent) and the sink comes back. The
    /// response is sent to us, so it may be no longer than the largest message we announced;
    /// a longer READ is refused here rather than dropped by the responder later.
    pub fn post_read(
        &mut self,
        wr_id: u64,
        rkey: u32,
        remote_addr: u64,
        sink: Vec<u8>,
    ) -> Result<u16, PostBufError> {
        if let Err(e) = self.require_bth().and_then(|_| self.require_open()) {
            return Err(Rejected::new(e, sink));
        }
        if self.reads.len() >= 1 << 15 {
            // READ MSNs are compared mod 2^16: more outstanding would alias.
            return Err(Rejected::new(ConnError::TooManyReads, sink));
        }
        let len = u32::try_from(sink.len()).unwrap_or(u32::MAX);
        let max = self.cfg.max_message_len.min(crate::wire::MAX_MESSAGE_LEN);
        if len > max {
            return Err(Rejected::new(PostError::ReadTooLarge { len, max }, sink));
        }
        let msn = self
            .framer
            .next_msn(MsgClass::ReadRequest)
            .expect("READ requests are numbered");
        // Placement first: it refuses (full, flushed) without a trace, before any MSN is used.
        self.placement
            .expect_read_response(msn, wr_id, sink)
            .map_err(|r| Rejected::new(r.error, r.buf))?;
        let posted = self.framer.post(WorkRequest {
            wr_id,
            op: WrOp::RdmaRead {
                rkey,
                remote_addr,
                len,
            },
            sg_list: Vec::new(),
        });
        match posted {
            Ok(p) => {
                debug_assert_eq!(p.msn, msn, "framer and placement number READs alike");
                self.reads.insert(msn, wr_id);
                Ok(msn)
            }
            Err(e) => {
                // Refused by the framer's own checks: take the registration back.
                let sink = self.placement.cancel_read(msn).unwrap_or_default();
                Err(Rejected::new(e, sink))
            }
        }
    }

    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    // ---- byte-stream API (plain fallback) ----

    /// Queue bytes to send; returns how many were taken.
    pub fn send_bytes(&mut self, data: &[u8]) -> Result<usize, ConnError> {
        if self.mode != Mode::Plain {
            return Err(if self.mode == Mode::Pending {
                ConnError::NotEstablished
            } else {
                ConnError::NotPlain
            });
        }
        self.require_open()?;
        let mut taken = 0;
        for chunk in data.chunks(MAX_CHUNK) {
            self.framer.post(WorkRequest {
                wr_id: 0,
                op: WrOp::Send { imm: None },
                sg_list: vec![Bytes::copy_from_slice(chunk)],
            })?;
            taken += chunk.len();
        }
        Ok(taken)
    }

    /// Read in-order received bytes.
    pub fn recv_bytes(&mut self, out: &mut [u8]) -> usize {
        let n = out.len().min(self.plain_rx.len());
        for (o, b) in out.iter_mut().zip(self.plain_rx.drain(..n)) {
            *o = b;
        }
        if n > 0 {
            // Reading opened the window: tell the peer (RFC 9293 window update).
            self.ack_now = true;
        }
        n
    }

    pub fn readable_bytes(&self) -> usize {
        self.plain_rx.len()
    }

    /// The peer sent FIN and every byte before it has been read.
    pub fn peer_finished(&self) -> bool {
        self.peer_fin.is_some_and(|f| self.rcv_nxt > f) && self.plain_rx.is_empty()
    }

    /// Unsent plus unacknowledged bytes.
    pub fn send_backlog(&self) -> u64 {
        self.framer.stream_end() - self.snd_una
    }

    // ---- close ----

    /// Orderly close: FIN after everything queued has been sent.
    pub fn close(&mut self) {
        if self.fin_at.is_some() {
            return;
        }
        match self.state {
            State::Established | State::SynReceived => {
                self.fin_at = Some(self.framer.stream_end());
                self.state = State::FinWait1;
            }
            State::CloseWait => {
                self.fin_at = Some(self.framer.stream_end());
                self.state = State::LastAck;
            }
            State::SynSent => self.state = State::Closed,
            _ => {}
        }
        self.note_events();
    }

    /// Abort: RST now, everything outstanding completes with a flush error.
    pub fn abort(&mut self) {
        if self.state.synchronized() || self.state == State::SynReceived {
            self.rst_pending = Some(self.seq_of(self.snd_nxt));
        }
        self.fail(ConnectionError::LocallyAborted);
        self.note_events();
    }

    // ---- internals shared by input/output ----

    fn seq_of(&self, off: u64) -> u32 {
        self.iss.wrapping_add(1).wrapping_add(off as u32)
    }

    /// Stream offset of a sequence number near snd_una.
    fn snd_off(&self, seq: u32) -> i64 {
        self.snd_una as i64 + i64::from(seq.wrapping_sub(self.seq_of(self.snd_una)) as i32)
    }

    fn rcv_seq_of(&self, off: u64) -> u32 {
        self.irs.wrapping_add(1).wrapping_add(off as u32)
    }

    /// Stream offset of a received sequence number near rcv_nxt.
    fn rcv_off(&self, seq: u32) -> i64 {
        self.rcv_nxt as i64 + i64::from(seq.wrapping_sub(self.rcv_seq_of(self.rcv_nxt)) as i32)
    }

    /// The TSval this connection puts on a segment it sends at `now` (for tools and tests
    /// that build segments in its name).
    pub fn tsval_at(&self, now: Duration) -> u32 {
        self.tsval(now)
    }

    fn tsval(&self, now: Duration) -> u32 {
        // 1 µs ticks (RFC 7323 recommends 1 ms..1 s but only requires that the clock not wrap
        // within an MSL, which 71.6 minutes satisfies): a retransmission and its original get
        // different TSvals even at datacenter RTTs, which Eifel-style spurious-retransmission
        // detection (recovery.rs) needs. The price is a TSval cycle of 71.6 minutes, which the
        // PAWS idle rule in input.rs accounts for.
        (now.as_micros() as u32).wrapping_add(self.ts_offset)
    }

    /// Bytes we advertise.
    fn rcv_window(&self) -> u64 {
        let cap = u64::from(self.cfg.recv_window);
        match self.mode {
            Mode::Plain => cap.saturating_sub((self.plain_rx.len() + self.plain_ooo_bytes) as u64),
            _ => cap,
        }
    }

    /// Payload bytes per data segment. MSS counts no options (RFC 6691), so the sender takes
    /// its own options off: in BTH mode the largest option is 40 bytes (SACK blocks are only
    /// added within that budget); in plain mode 12 for timestamps, and SACK rides on pure ACKs.
    fn payload_mss(&self) -> u32 {
        let mss = u32::from(self.peer_mss.min(self.cfg.mss));
        let reserve = match self.mode {
            Mode::Bth { .. } => crate::wire::MAX_OPTIONS_LEN as u32,
            _ if self.ts_ok => 12,
            _ => 0,
        };
        mss.saturating_sub(reserve).max(64)
    }

    /// Enter the error state: flush every outstanding work request, stop all timers.
    fn fail(&mut self, err: ConnectionError) {
        if self.error.is_none() {
            self.error = Some(err);
        }
        self.state = State::Closed;
        for r in self.framer.release(u64::MAX) {
            if r.class == MsgClass::ReadResponse || r.class == MsgClass::ReadRequest {
                continue;
            }
            self.completions.push_back(Completion {
                wr_id: r.wr_id,
                op: if r.class == MsgClass::Write {
                    WcOp::RdmaWrite
                } else {
                    WcOp::Send
                },
                status: WcStatus::WrFlushError,
                byte_len: r.len,
                imm: None,
                msn: r.msn,
                buf: None,
            });
        }
        let held = std::mem::take(&mut self.held);
        self.completions.extend(held.into_values());
        self.placement.flush();
        self.drain_placement_completions(u64::MAX);
        self.timers.stop_all();
    }

    /// Move placement's completions into the held list keyed by their message's end offset.
    fn drain_placement_completions(&mut self, default_end: u64) {
        while let Some(cqe) = self.placement.poll_completion() {
            let end = self
                .msg_end
                .remove(&(cqe.class, cqe.msn))
                .unwrap_or(default_end);
            let op = match cqe.opcode {
                bth_placement::WcOpcode::Recv => WcOp::Recv,
                bth_placement::WcOpcode::RecvRdmaWithImm => WcOp::RecvRdmaWithImm,
                bth_placement::WcOpcode::RdmaRead => WcOp::RdmaRead,
            };
            if op == WcOp::RdmaRead {
                self.reads.remove(&cqe.msn);
            }
            let c = Completion {
                wr_id: cqe.wr_id,
                op,
                status: cqe.status,
                byte_len: cqe.byte_len,
                imm: cqe.imm,
                msn: cqe.msn,
                buf: cqe.buf,
            };
            self.held_seq += 1;
            self.held.insert((end, self.held_seq), c);
        }
        self.release_held();
    }

    /// Completions whose message lies wholly below the cumulative point go out, in stream order:
    /// that restores order across message classes.
    fn release_held(&mut self) {
        while let Some(entry) = self.held.first_entry() {
            if entry.key().0 > self.rcv_nxt && self.state != State::Closed {
                break;
            }
            self.completions.push_back(entry.remove());
        }
    }
}

/// Opcode for our pure ACK / FIN / RST segments in BTH mode.
const ACK_OPCODE: Opcode = Opcode::Acknowledge;
