//! One TCP connection as a pure state machine (RFC 9293), in the style of quinn-proto: feed it
//! received segments with [`Connection::handle_segment`] and timer expiries with
//! [`Connection::handle_timeout`], take segments to send from [`Connection::poll_transmit`] and the
//! next deadline from [`Connection::poll_timeout`]. The current time is always an argument
//! (`Duration` since an arbitrary epoch), so a virtual clock drives it deterministically.
//!
//! With `tcp_bth` negotiated, send data comes from the framer (one message per segment, BTH on
//! every segment) and received data goes straight to placement; otherwise the connection is a
//! plain TCP byte stream.
//!
//! Files follow who owns the state: `send` (sequence space, window, framer, recovery, credit,
//! the peer's grant), `admission` (the byte grant: computed on receive, enforced on send),
//! `recv` (what has arrived, timestamps), `rx_bth`/`rx_plain` (the two receive paths, chosen at
//! negotiation), `handshake` (SYN and FIN state), `cq` (the completion queue), `verbs` (the
//! work-request API); `input`, `output` and `timers` are the three entry points that drive them.

mod ack;
mod admission;
mod chrono;
mod cq;
mod error;
mod events;
mod fail;
mod handshake;
mod icmp;
pub use icmp::{IcmpError, Unreachable};
mod input;
mod liveness;
mod output;
pub use output::GatherLimits;
pub(crate) use output::{Gather, Out};
mod passive;
pub use passive::PeerSyn;
pub(crate) mod recovery;
mod recv;
mod rx_bth;
mod rx_plain;
mod send;
mod timer_table;
mod timers;
mod verbs;

#[cfg(test)]
mod tests;

use crate::config::Config;
use crate::wire::{MsgClass, Nak, Opcode};
pub use bth_placement::{Cqe as Completion, WcOp, WcStatus};
pub use chrono::SendLimits;
use cq::CompletionQueue;
pub use error::{CallError, ConnectionError, PostBufError, PostSendError, RegisterError, Rejected};
pub use events::Event;
use handshake::{Negotiated, Syn};
pub use recovery::RecoveryStats;
use recv::RecvState;
use rx_bth::BthRx;
use rx_plain::PlainRx;
use send::SendState;
use std::time::Duration;
use timer_table::{Timer, TimerTable};
pub use verbs::Sge;

/// A connection's share of the receiving device's queue ([`Connection::set_rx_share`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RxShare {
    pub packets: u32,
    pub whole_super_segments: bool,
}

/// RFC 9293 connection states. LISTEN is the driver's job: it hands a SYN to [`Connection::accept`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Active open: our SYN sent (or about to be), the peer's SYN not yet seen.
    SynSent,
    /// The peer's SYN arrived (passive or simultaneous open): our SYN-ACK waits for its ACK.
    SynReceived,
    /// Open both ways.
    Established,
    /// We closed: our FIN is queued or sent, not yet acknowledged.
    FinWait1,
    /// Our FIN is acknowledged; the peer may still send until its FIN.
    FinWait2,
    /// The peer's FIN arrived; we have not closed yet.
    CloseWait,
    /// Both sides closed at once: the peer's FIN arrived before ours was acknowledged.
    Closing,
    /// The peer closed first, then we did: waiting for the ACK of our FIN.
    LastAck,
    /// Both FINs acknowledged: lingering `Config::time_wait` (2·MSL) to answer a resent FIN.
    TimeWait,
    /// Ended: in order, by RST, or by an error ([`Connection::error`]).
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
        /// The MSN of the peer's first message (its hello).
        peer_first_msn: u16,
        /// The largest message the peer accepts, in bytes (its hello's MBO field): ours are
        /// held to it.
        peer_max_message: u32,
    },
    /// Fallback: plain TCP byte stream, with RFC 7323 timestamps where both SYNs carried
    /// them ([`Connection::timestamps`]).
    Plain,
}

/// Counters; nothing here is ever reset.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Stats {
    /// Segments handed in (`handle_segment`; a passive open's SYN too), malformed included.
    pub segments_in: u64,
    /// Segments built (`poll_transmit*`): data, SYN, FIN, ACKs and RSTs.
    pub segments_out: u64,
    /// Refused by the segment parser (checksum, header, options).
    pub malformed: u64,
    /// BTH segments whose ICRC did not match: dropped, never placed.
    pub icrc_errors: u64,
    /// Data segments whose BTH did not describe a valid message fragment.
    pub bad_bth: u64,
    /// Of `bad_bth`: options in the framing not negotiated (the S bit, amendment 3); each
    /// fails the connection with a NAK.
    pub framing_mismatch: u64,
    /// Of `bad_bth`: S-framed segments at odds with their message (another start implied by
    /// the anchor, another length, opcode or extension than its first segment said, or bytes
    /// beyond its length): dropped, nothing placed.
    pub s_inconsistent: u64,
    /// Segments dropped by PAWS (RFC 7323 §5): a TSval older than TS.Recent, and no
    /// disordered or late ACK.
    pub paws_drops: u64,
    /// Of `paws_drops`: pure ACKs at RCV.NXT acknowledging less than SND.UNA with a TSval
    /// less than an RTO older than `ts_recent`, i.e. ACKs a later ACK overtook (spraying makes
    /// thousands a run), or a copy of one replayed within an RTO (the two look alike). Dropped
    /// as Linux drops them (`tcp_disordered_ack` exempts only ACK == SND.UNA); nothing they
    /// say is news but an older SACK or D-SACK block.
    pub paws_overtaken_acks: u64,
    /// Reordered duplicate ACKs with an older TSval, accepted as Linux does
    /// (`tcp_disordered_ack`) instead of dropped by PAWS.
    pub paws_disordered_acks: u64,
    /// Credit updates (R=1 pure ACKs) that arrived late, overtaken by the peer's later
    /// segments (PAWS dropped them, or they sat below RCV.NXT), whose credit was kept.
    pub late_credit_kept: u64,
    /// Segments outside the receive window (RFC 9293 §3.10.7.4), late pure ACKs excepted:
    /// dropped (data we already had is reported with a D-SACK).
    pub out_of_window: u64,
    /// Answers not sent to segments dropped without data to report (out of window without
    /// payload, PAWS, RFC 5961 challenges): within 500 ms of the last such answer.
    pub oow_acks_limited: u64,
    /// Pure ACKs overtaken by the peer's data (below RCV.NXT on arrival), taken for their
    /// SACK, D-SACK and credit instead of dropped as out of window.
    pub late_acks: u64,
    /// SEND segments refused because no receive buffer was posted for their MSN.
    pub receiver_not_ready: u64,
    /// Segments placed while an earlier hole was open: direct out-of-order placement.
    pub ooo_placed: u64,
    /// Segments dropped because the out-of-order range table was full.
    pub ooo_table_full: u64,
    /// Segments placement did not take (its windows or range limits): not acknowledged.
    pub placement_refused: u64,
    /// Challenge ACKs sent (RFC 5961) to a SYN or an RST in the window not at RCV.NXT, or to
    /// an ACK of data never sent or too old; those over the rate limit are in
    /// `oow_acks_limited`.
    pub challenge_acks: u64,
    /// ICMP errors accepted: destination unreachable or packet too big, quoting a sequence
    /// number we had in flight (`conn/icmp.rs`).
    pub icmp_errors: u64,
    /// ICMP errors that quoted a sequence number we had not sent or had acknowledged already
    /// (RFC 5927 §4.1): ignored.
    pub icmp_ignored: u64,
    /// Keepalive probes sent (`Config::keepalive`).
    pub keepalive_probes: u64,
    /// Times a packet-too-big message lowered the MSS.
    pub pmtu_reductions: u64,
    /// Bytes in flight that no longer fitted the lowered MSS: cut to the new size and resent.
    pub pmtu_resegmented: u64,
    /// RDMA READ requests whose response could not be framed (longer than the requester
    /// announced it accepts): the QP failed, never a silent drop.
    pub read_responses_refused: u64,
    /// Segments at or beyond a request we are about to refuse (it waits for the segments
    /// before it): neither placed nor acknowledged.
    pub behind_refused_request: u64,
    /// NAKs we sent (each ends the connection: IB RC's fatal responder errors).
    pub naks_sent: u64,
    /// NAKs the peer sent us, each completing one of our work requests with its error.
    pub naks_received: u64,
    /// Plain mode: payload bytes that joined the in-order stream for `recv_bytes` (each
    /// once). 0 in BTH mode: [`Connection::placement_counters`] counts the bytes placed.
    pub bytes_received: u64,
    /// New payload bytes sent (each once).
    pub bytes_sent: u64,
    /// Payload bytes sent again (retransmissions and loss probes of sent data).
    pub bytes_retransmitted: u64,
    /// ACKs sent that were built the moment they fell due (every second full segment, a hole,
    /// a filled hole, a duplicate), instead of at the end of the driver's turn.
    pub acks_immediate: u64,
    /// ACKs built when they fell due and dropped unsent, because more than a driver turn's
    /// worth waited to leave and a later one carries what they said (`conn/ack.rs`,
    /// `MAX_PENDING_ACKS`).
    pub acks_superseded: u64,
    /// Pure ACKs sent in amendment 1's plain form (timestamps and up to three SACK blocks).
    pub plain_form_acks: u64,
    /// Duplicate segments reported back with a D-SACK block (RFC 2883).
    pub dsacks_sent: u64,
    /// D-SACK blocks the peer reported (a duplicate of ours arrived there).
    pub dsacks_received: u64,
    /// Recovery episodes whose every retransmission proved spurious (D-SACK or timestamps):
    /// the congestion window reduction was undone (RFC 3708 / RFC 4015).
    pub undos: u64,
    /// Receiver-driven admission, sending side: times the next new segment was held back by
    /// the peer's grant alone (cwnd, window and credit would have let it go).
    pub grant_holds: u64,
    /// How long those holds lasted, together.
    pub grant_held: Duration,
    /// R=1 segments we sent (credit and grant).
    pub grants_sent: u64,
    /// Payload bytes copied into outgoing segments, retransmissions included: the send
    /// side's one copy per byte (from the application's buffer into the transmit buffer)
    /// where the caller does not gather the payload (`tx_payload_gathered`). Staged bytes
    /// (`tx_payload_staged`) copied here are their second copy, and counted in
    /// `tx_payload_staged_copied` as well.
    pub tx_payload_copied: u64,
    /// Payload bytes copied when they were posted into a buffer of the connection's own:
    /// READ responses (a snapshot of the region read) and `post_send_sg` (the regions'
    /// ranges). Counted where the copy is made (also for a post then refused); each such
    /// byte is copied so once, however often it is sent.
    pub tx_payload_staged: u64,
    /// Bytes of staged messages copied again into outgoing segments (part of
    /// `tx_payload_copied`): a second user-space copy, made only where the caller does not
    /// gather (the simulator, `poll_transmit_into`) or a segment would need more slices than
    /// a gathered write takes. 0 over the TUN driver.
    pub tx_payload_staged_copied: u64,
    /// Payload bytes of outgoing segments handed to the caller as slices of the
    /// application's buffers, not copied (`Endpoint::poll_transmit_gather`): every byte sent is counted
    /// here or in `tx_payload_copied`, once.
    pub tx_payload_gathered: u64,
    /// Super-segments sent (segmentation offload, `GatherLimits::gso_payload`).
    pub gso_sent: u64,
    /// The segments those super-segments stand for.
    pub gso_segments: u64,
    /// Data segments that arrived longer than our MSS: super-segments a device with TSO (or
    /// the kernel's GRO) handed over whole, each taken as the segments it stands for.
    pub super_segments_in: u64,
    /// Calls to `poll_transmit_into` with a buffer shorter than `max_segment_len`: nothing
    /// was built (a driver's buffers are smaller than the connection's MSS calls for).
    pub tx_buffer_short: u64,
}

impl std::ops::AddAssign for Stats {
    /// Sums every counter (the stats of several connections). Destructured without `..`, so
    /// a counter added to `Stats` fails to compile here until it is summed too.
    fn add_assign(&mut self, o: Stats) {
        let Stats {
            segments_in,
            segments_out,
            malformed,
            icrc_errors,
            bad_bth,
            framing_mismatch,
            s_inconsistent,
            paws_drops,
            paws_overtaken_acks,
            paws_disordered_acks,
            late_credit_kept,
            out_of_window,
            oow_acks_limited,
            late_acks,
            receiver_not_ready,
            ooo_placed,
            ooo_table_full,
            placement_refused,
            challenge_acks,
            icmp_errors,
            icmp_ignored,
            keepalive_probes,
            pmtu_reductions,
            pmtu_resegmented,
            read_responses_refused,
            behind_refused_request,
            naks_sent,
            naks_received,
            bytes_received,
            bytes_sent,
            bytes_retransmitted,
            acks_immediate,
            acks_superseded,
            plain_form_acks,
            dsacks_sent,
            dsacks_received,
            undos,
            grant_holds,
            grant_held,
            grants_sent,
            tx_payload_copied,
            tx_payload_staged,
            tx_payload_staged_copied,
            tx_payload_gathered,
            gso_sent,
            gso_segments,
            super_segments_in,
            tx_buffer_short,
        } = o;
        self.segments_in += segments_in;
        self.segments_out += segments_out;
        self.malformed += malformed;
        self.icrc_errors += icrc_errors;
        self.bad_bth += bad_bth;
        self.framing_mismatch += framing_mismatch;
        self.s_inconsistent += s_inconsistent;
        self.paws_drops += paws_drops;
        self.paws_overtaken_acks += paws_overtaken_acks;
        self.paws_disordered_acks += paws_disordered_acks;
        self.late_credit_kept += late_credit_kept;
        self.out_of_window += out_of_window;
        self.oow_acks_limited += oow_acks_limited;
        self.late_acks += late_acks;
        self.receiver_not_ready += receiver_not_ready;
        self.ooo_placed += ooo_placed;
        self.ooo_table_full += ooo_table_full;
        self.placement_refused += placement_refused;
        self.challenge_acks += challenge_acks;
        self.icmp_errors += icmp_errors;
        self.icmp_ignored += icmp_ignored;
        self.keepalive_probes += keepalive_probes;
        self.pmtu_reductions += pmtu_reductions;
        self.pmtu_resegmented += pmtu_resegmented;
        self.read_responses_refused += read_responses_refused;
        self.behind_refused_request += behind_refused_request;
        self.naks_sent += naks_sent;
        self.naks_received += naks_received;
        self.bytes_received += bytes_received;
        self.bytes_sent += bytes_sent;
        self.bytes_retransmitted += bytes_retransmitted;
        self.acks_immediate += acks_immediate;
        self.acks_superseded += acks_superseded;
        self.plain_form_acks += plain_form_acks;
        self.dsacks_sent += dsacks_sent;
        self.dsacks_received += dsacks_received;
        self.undos += undos;
        self.grant_holds += grant_holds;
        self.grant_held += grant_held;
        self.grants_sent += grants_sent;
        self.tx_payload_copied += tx_payload_copied;
        self.tx_payload_staged += tx_payload_staged;
        self.tx_payload_staged_copied += tx_payload_staged_copied;
        self.tx_payload_gathered += tx_payload_gathered;
        self.gso_sent += gso_sent;
        self.gso_segments += gso_segments;
        self.super_segments_in += super_segments_in;
        self.tx_buffer_short += tx_buffer_short;
    }
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
    /// Bytes held in all.
    pub fn total(&self) -> u64 {
        self.stream_queue + self.ooo_store
    }
}

/// The receive path, chosen at negotiation. Until then it is `Bth`, because receives and
/// memory regions may be set up before the handshake; a plain peer turns it into `Plain` and
/// anything posted completes flushed.
enum RxPath {
    // Boxed: the plain path is a few words, placement is hundreds of bytes.
    Bth(Box<BthRx>),
    Plain(PlainRx),
}

/// What the next outgoing segments owe the peer besides data.
#[derive(Debug, Default)]
struct Owed {
    /// A pure ACK (unless a data segment carries the ACK first).
    ack: bool,
    /// Our receive credit changed, or the peer may have missed it: the next pure ACK carries
    /// R=1 with the credit (only pure ACKs can: a data segment's MSN is its own).
    credit: bool,
    /// An RST with this sequence number. Always without ACK: every RST this connection sends
    /// answers an acceptable-ACK failure or ends the QP (RFC 9293 §3.10.7.4); RST|ACK in answer
    /// to segments for no connection is the Endpoint's (LISTEN/CLOSED).
    rst: Option<u32>,
    /// Persist probe: (seq, ack).
    probe: Option<(u32, u32)>,
    /// The last ACK before a NAK's RST: (seq, ack). It acknowledges every message that arrived
    /// before the failed one, so those complete as successes at the requester (an IB NAK
    /// implies the same for the PSNs before it).
    ack_before_rst: Option<(u32, u32)>,
}

/// How much longer an IPv6 header is than an IPv4 one.
const IPV6_EXTRA_HEADER: u16 = 20;
/// The smallest MSS a connection uses (RFC 9293's 536 is for IPv4 without options; this
/// leaves room for the 40 bytes of BTH options and some payload).
const MIN_MSS: u16 = 128;
/// 65,535 − 20 (IPv4) − 20 (TCP header). As RFC 6691 has it, the MSS is reckoned from the
/// fixed headers and counts no options: a sender takes its options off it to size a data
/// segment's payload (`payload_mss`: 40 bytes in BTH mode).
pub(crate) const MAX_MSS: u16 = 65_495;

/// One TCP connection, with or without `tcp_bth`, as a state machine the caller drives (see
/// [`crate::conn`]); with `tcp_bth` negotiated it is also the QP of the verbs API.
pub struct Connection {
    cfg: Config,
    state: State,
    mode: Mode,
    error: Option<ConnectionError>,
    /// The latest destination unreachable an established connection was told of (a soft
    /// error, `icmp.rs`): reported with the timeout if the connection times out.
    soft_error: Option<Unreachable>,
    /// The NAK our RST carries when we failed the peer's request (resent on the RST that
    /// answers anything the peer sends after, RFC 9293 §3.10.7.1).
    nak: Option<Nak>,
    syn: Syn,
    neg: Negotiated,
    /// The peer's SYN or SYN-ACK carried a tcp_bth hello ([`Connection::peer_offered_bth`]).
    peer_hello: bool,
    snd: SendState,
    rcv: RecvState,
    rx: RxPath,
    owed: Owed,
    ack: ack::AckState,
    /// When we last resent our RST to a peer that kept sending after it (`on_closed`).
    last_rst_resend: Option<Duration>,
    /// When we last answered a segment we dropped with an ACK (`input.rs`, `oow_ack`).
    last_oow_ack: Option<Duration>,
    timers: TimerTable,
    persist_backoff: u32,
    retries: u32,
    /// Keepalive probes sent since the peer was last heard (`liveness.rs`).
    keepalive_probes: u32,
    cq: CompletionQueue,
    events: std::collections::VecDeque<Event>,
    reported: events::Reported,
    stats: Stats,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("state", &self.state)
            .field("mode", &self.mode)
            .field("snd_una", &self.snd.una())
            .field("snd_nxt", &self.snd.nxt())
            .field("rcv_nxt", &self.rcv.nxt)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl Connection {
    fn new(cfg: Config, now: Duration, state: State) -> Connection {
        let iss = crate::isn::isn(&cfg.isn_key, now, cfg.ip, cfg.local_port, cfg.remote_port);
        Connection::with_iss(cfg, state, iss)
    }

    /// A connection whose initial sequence number is given (a SYN cookie's, `passive.rs`).
    fn with_iss(mut cfg: Config, state: State, iss: u32) -> Connection {
        if matches!(cfg.ip, crate::wire::IpPair::V6 { .. }) {
            // `Config::mss` is MTU − 40 (IPv4 and TCP headers); IPv6's header is 20 bytes
            // longer, so the same MTU holds 20 fewer bytes of segment.
            cfg.mss = cfg.mss.saturating_sub(IPV6_EXTRA_HEADER).max(MIN_MSS);
        }
        // A segment (20-byte header, then options and payload within the MSS) must fit an
        // IPv4 packet's 16-bit total length with its 20-byte header.
        cfg.mss = cfg.mss.min(MAX_MSS);
        let ts_offset =
            crate::isn::ts_offset(&cfg.isn_key, cfg.ip, cfg.local_port, cfg.remote_port);
        Connection {
            state,
            mode: Mode::Pending,
            error: None,
            soft_error: None,
            nak: None,
            syn: Syn::Owed {
                retransmission: false,
            },
            neg: Negotiated::default(),
            peer_hello: false,
            snd: SendState::new(&cfg, iss),
            rcv: RecvState::new(ts_offset),
            rx: RxPath::Bth(Box::new(BthRx::new(&cfg, iss))),
            owed: Owed::default(),
            ack: ack::AckState::default(),
            last_rst_resend: None,
            last_oow_ack: None,
            timers: TimerTable::default(),
            persist_backoff: 0,
            retries: 0,
            keepalive_probes: 0,
            cq: CompletionQueue::default(),
            events: Default::default(),
            reported: Default::default(),
            stats: Stats::default(),
            cfg,
        }
    }

    /// Active open: the first poll_transmit sends the SYN.
    pub fn connect(cfg: Config, now: Duration) -> Connection {
        Connection::new(cfg, now, State::SynSent)
    }

    /// The configuration in force: the one given, with the MSS as lowered for IPv6, for the
    /// largest IPv4 packet and by packet-too-big messages.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The RFC 9293 state.
    pub fn state(&self) -> State {
        self.state
    }

    /// What the handshake settled: tcp_bth, plain TCP, or not yet.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Whether the peer's SYN (passive side) or SYN-ACK (active side) carried a tcp_bth
    /// hello, whatever [`mode`](Self::mode) the handshake settled on. A listener without
    /// [`Config::bth`] answers a hello with plain TCP: this tells it that the peer asked for
    /// tcp_bth, so an application can say why the two sides disagree rather than run a byte
    /// stream the peer did not want. On the active side it is true exactly when the mode is
    /// [`Mode::Bth`] with a conforming peer, whose SYN-ACK carries a hello only to accept ours.
    /// False before the peer's SYN or SYN-ACK has been taken.
    pub fn peer_offered_bth(&self) -> bool {
        self.peer_hello
    }

    /// Both hellos asked for S framing (amendment 3): data segments are S-framed both ways.
    pub fn seq_framed(&self) -> bool {
        self.neg.seq_framed
    }

    /// Whether the connection's segments carry timestamps (RTT from echoes, PAWS): always in
    /// BTH mode (folded into the option), in plain mode when both SYNs carried the RFC 7323
    /// option, which ours does beside its hello too (wire spec amendment 4: a fallback to plain
    /// TCP keeps timestamps). False before the handshake settles the mode.
    pub fn timestamps(&self) -> bool {
        match self.mode {
            Mode::Bth { .. } => true,
            Mode::Plain => self.neg.ts_ok,
            Mode::Pending => false,
        }
    }

    /// Why the connection ended, if it ended abnormally.
    pub fn error(&self) -> Option<ConnectionError> {
        self.error.clone()
    }

    /// The connection's counters now.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// What held the sender back, over time, up to `now` (`chrono.rs`: Linux's `busy`,
    /// `rwnd_limited` and `sndbuf_limited`, with this stack's limits).
    pub fn send_limits(&self, now: Duration) -> SendLimits {
        let at = match self.state {
            State::Closed => self.snd.chrono.last().min(now),
            _ => now,
        };
        self.snd.chrono.read(at)
    }

    /// The loss recovery counters now (what this side sent and how it repaired it).
    pub fn recovery_stats(&self) -> RecoveryStats {
        self.snd.rec.stats
    }

    /// The receive side's placement counters (BTH mode; all 0 in plain mode).
    pub fn placement_counters(&self) -> bth_placement::Counters {
        match &self.rx {
            RxPath::Bth(b) => b.placement.counters(),
            RxPath::Plain(_) => Default::default(),
        }
    }

    /// Received payload bytes held right now outside the application's posted buffers and
    /// registered regions, by the structure holding them. With `tcp_bth` placement writes every
    /// segment straight into its destination and nothing stages payload, so both stay 0 there;
    /// in plain mode they are the byte-stream queue and the out-of-order store.
    pub fn rx_held(&self) -> RxHeld {
        match &self.rx {
            RxPath::Bth(_) => RxHeld::default(),
            RxPath::Plain(p) => p.held(),
        }
    }

    /// The congestion window, in bytes.
    pub fn cwnd(&self) -> u64 {
        self.snd.cc.cwnd()
    }

    /// Smoothed RTT (RFC 6298); `None` before the first sample.
    pub fn srtt(&self) -> Option<Duration> {
        self.snd.rtt.srtt()
    }

    /// Smallest round trip measured so far: the closest this connection came to the path's
    /// base RTT (host delays, and any queue that never drained, still in it).
    pub fn min_rtt(&self) -> Option<Duration> {
        self.snd.rtt.min_rtt()
    }

    /// Bytes in flight as recovery counts them (RFC 6675's pipe: sent, neither acknowledged
    /// nor SACKed, nor marked lost), the figure the congestion window bounds.
    pub fn pipe(&self) -> u64 {
        self.snd.rec.pipe()
    }

    /// Sequence-space view for tools and tests: (snd_una, snd_nxt, rcv_nxt) as wire sequence
    /// numbers.
    pub fn seq_state(&self) -> (u32, u32, u32) {
        (
            self.snd.seq_of(self.snd.una()),
            self.snd.seq_of(self.snd.nxt()),
            self.rcv.seq_of(self.rcv.nxt),
        )
    }

    /// Bytes the peer currently lets us send (its advertised window, scaled).
    pub fn peer_window(&self) -> u64 {
        self.snd.wnd()
    }

    /// Retransmission timeout now in force.
    pub fn rto(&self) -> Duration {
        self.snd.rtt.rto()
    }

    /// In [`State::Established`].
    pub fn is_established(&self) -> bool {
        self.state == State::Established
    }

    /// Closed, with nothing left to send.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// Unsent plus unacknowledged bytes.
    pub fn send_backlog(&self) -> u64 {
        self.snd.framer.stream_end() - self.snd.una()
    }

    /// The TSval this connection puts on a segment it sends at `now` (for tools and tests
    /// that build segments in its name).
    pub fn tsval_at(&self, now: Duration) -> u32 {
        self.rcv.tsval(now)
    }

    /// The next completion (CQE), oldest first: work requests and receives that finished.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.cq.pop()
    }

    /// Whether [`poll_completion`](Self::poll_completion) has one, without taking it. Through
    /// `Endpoint::conn` this needs no `&mut`, so it does not mark the connection for the
    /// endpoint's next transmit pass: an application holding many connections asks each
    /// per turn and touches only those with news.
    pub fn has_completion(&self) -> bool {
        self.cq.has_ready()
    }

    /// Bytes beyond RCV.NXT we have room for now. In plain mode the in-order bytes the
    /// application has not read take room; the out-of-order store does not, because it holds
    /// bytes inside a window already advertised: counting them moved the window's right edge
    /// left as they arrived (a window that shrinks, RFC 9293 §3.8.6), and two plain
    /// connections sending bulk both ways then took each other's ACKs for out-of-window
    /// segments and answered them without end. Memory stays bounded by `recv_window`: the
    /// right edge last advertised, less RCV.NXT, plus the queue never exceeds it (in-order
    /// arrivals move both RCV.NXT and the queue; reads only open room).
    fn rcv_room(&self) -> u64 {
        let cap = u64::from(self.cfg.recv_window);
        let cap = match self.rcv.device {
            Some(share) => cap.min(u64::from(share.packets) * self.queued_packet_bytes(share)),
            None => cap,
        };
        match &self.rx {
            RxPath::Plain(p) => cap.saturating_sub(p.held().stream_queue),
            RxPath::Bth(_) => cap,
        }
    }

    /// Bytes beyond RCV.NXT the peer may send: the room we have, or the furthest right edge
    /// we ever advertised if that lies further (a window is never taken back, and data a
    /// shrunken window from an older stack would have allowed is accepted, RFC 9293 §3.8.6).
    fn rcv_window(&self) -> u64 {
        let advertised = self.rcv.adv_edge.saturating_sub(self.rcv.nxt);
        self.rcv_room().max(advertised)
    }

    /// The window field of a segment acknowledging stream offset `ack_off`, in units of our
    /// window scale, with its right edge remembered. The field says, in whole units, the
    /// furthest of the edge our room gives and every edge advertised before: data up to that
    /// furthest edge is accepted (`rcv_window`), so no sender that honours any window we
    /// advertised is refused, and the field falls short of it by less than a unit. Rounding
    /// up instead (Linux's `ALIGN(cur_win)`) lets the edge creep right by up to a unit with
    /// every ACK while the application reads nothing, and without bound against a peer that
    /// sends a byte at a time: memory would no longer be bounded by `recv_window`.
    fn advertise_window(&mut self, ack_off: u64) -> u16 {
        let unit = 1u64 << self.neg.rcv_wscale;
        let room = self.rcv_room() / unit * unit;
        self.rcv.adv_edge = self.rcv.adv_edge.max(ack_off + room);
        ((self.rcv.adv_edge - ack_off) / unit).min(65535) as u16
    }

    /// The payload one packet in the receiving device's queue holds: one full segment of
    /// the peer's (our MSS less the option area its segments carry), or, where the device
    /// hands super-segments over whole and this connection's peer sends them (S framing,
    /// plain), what its packets have lately carried (up to 64 KiB whole, much less when a
    /// relay cuts them), never below one segment.
    fn queued_packet_bytes(&self, share: RxShare) -> u64 {
        let (reserve, supers) = match self.mode {
            Mode::Bth { .. } => (crate::wire::MAX_OPTIONS_LEN as u32, self.neg.seq_framed),
            _ => (12, true),
        };
        let segment = u32::from(self.cfg.mss).saturating_sub(reserve).max(64);
        let packet = if share.whole_super_segments && supers {
            self.rcv.packet_bytes.max(segment)
        } else {
            segment
        };
        u64::from(packet)
    }

    /// This connection's share of the receiving device's queue (the endpoint sets it before
    /// every call into the connection, `endpoint::table`): the receive window is held to
    /// what that many packets carry, so the peer cannot have more in flight towards us than
    /// the queue holds. A window already advertised is never taken back (`rcv_window`).
    pub(crate) fn set_rx_share(&mut self, share: Option<RxShare>) {
        self.rcv.device = share;
    }

    /// Payload bytes per data segment. The MSS counts no options (RFC 6691), so the sender
    /// takes its own options off: in BTH mode the largest option is 40 bytes (SACK blocks are
    /// only added within that budget); in plain mode 12 for timestamps, and SACK rides on pure
    /// ACKs.
    fn payload_mss(&self) -> u32 {
        let mss = u32::from(self.neg.peer_mss.min(self.cfg.mss));
        let reserve = match self.mode {
            Mode::Bth { .. } => crate::wire::MAX_OPTIONS_LEN as u32,
            _ if self.neg.ts_ok => 12,
            _ => 0,
        };
        mss.saturating_sub(reserve).max(64)
    }
}

/// Opcode for our pure ACK / FIN / RST segments in BTH mode.
const ACK_OPCODE: Opcode = Opcode::Acknowledge;
