//! Incast: N senders, one receiver, one shared bottleneck queue toward the receiver, on a
//! virtual clock. The scenario receiver-driven admission exists for (`docs/stack.md`,
//! "Receiver-driven admission"): every sender starts a burst at the same instant, as the
//! senders of a collective step do, and without admission their windows together overrun the
//! queue in front of the receiver.
//!
//! One [`SimLink`]: its A→B lane is the shared bottleneck (drop-tail queue of
//! `queue_limit_bytes`, serialization at `bandwidth_bps`), every sender's packets go into it;
//! its B→A lane carries the receiver's ACKs back. The senders' own links are not modelled
//! (they are infinitely fast), so the only queue is the bottleneck's. The receiver has one
//! [`Connection`] per sender, found by the sender's port (the incast keeps its own table
//! rather than an endpoint's: it models one receiver's admission, not connection set-up).
//!
//! Deterministic: the link's seed draws its impairments, the keys are derived from the seed,
//! and every loop visits connections in sender order (rotated per step, so no sender always
//! reaches the queue first). The same config gives the same report.

use super::link::{Direction, LinkConfig, SimLink};
use super::pair::{pair_configs, B_PORT};
use super::workload::fill;
use bth_framer::WorkRequest;
use bth_placement::{Access, MrHandle, WcStatus};
use std::time::Duration;
use tcp_bth::{Completion, Config, Connection, State, WcOp};

/// Port of sender `i` is `SENDER_PORT + i`.
pub const SENDER_PORT: u16 = 41000;

/// What the senders post.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncastOp {
    /// SEND into receives the receiver keeps posted, `recv_depth` per sender: message credit
    /// bounds each sender to the messages it has receives for, grant or not.
    Send,
    /// RDMA WRITE with immediate into a region per sender (a collective library's data
    /// path): nothing but the grant bounds what a sender puts in flight besides cwnd.
    WriteImm,
}

/// An incast run ([`run`]): the senders, what they post and the bottleneck they share.
#[derive(Debug, Clone)]
pub struct IncastConfig {
    /// Senders, each with one connection to the receiver from port `SENDER_PORT + i`
    /// (at most `u16::MAX - SENDER_PORT`; more are cut to that).
    pub senders: usize,
    /// Messages per sender.
    pub messages: usize,
    /// Messages each sender keeps outstanding: all start at the same instant, and a sender
    /// posts its next one when one of its own completes (is acknowledged).
    pub window: usize,
    /// Bytes per message.
    pub message_len: u32,
    /// SEND or WRITE with immediate.
    pub op: IncastOp,
    /// Receives the receiver keeps posted per sender (SEND), reposted as each completes.
    pub recv_depth: usize,
    /// Senders enforce the receiver's grant (`Config::admission`).
    pub admission: bool,
    /// Bytes the receiver admits per sender: its `admission_allowance` and `admission_cap`
    /// (so the grant is this, whether the bytes are WRITEs or SENDs into deeper receives).
    pub admit: u32,
    /// The bottleneck (and the way back): bandwidth, delay, queue limit, seed.
    pub link: LinkConfig,
    /// Virtual time allowed for the run.
    pub time_limit: Duration,
}

impl Default for IncastConfig {
    /// 16 senders × 32 WRITEs of 64 KiB (32 MiB), two outstanding per sender, into one
    /// receiver behind a 10 Gbit/s bottleneck with a 512 KiB drop-tail queue and 10 µs one-way
    /// delay; the receiver admits 24 KiB per sender (16 × 24 KiB plus headers stays below the
    /// queue).
    fn default() -> Self {
        IncastConfig {
            senders: 16,
            messages: 32,
            window: 2,
            message_len: 64 << 10,
            op: IncastOp::WriteImm,
            recv_depth: 2,
            admission: true,
            admit: 24 << 10,
            link: LinkConfig::default()
                .with_delay(Duration::from_micros(10))
                .with_bandwidth_bps(10_000_000_000)
                .with_queue_limit_bytes(512 << 10),
            time_limit: Duration::from_secs(60),
        }
    }
}

/// What one run did; every figure is counted or measured on the virtual clock.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IncastReport {
    /// Whether the senders enforced the grant ([`IncastConfig::admission`]).
    pub admission: bool,
    /// Messages completed at the receiver, all senders together.
    pub messages: usize,
    /// Packets the bottleneck queue refused.
    pub queue_drops: u64,
    /// Message completion time: from its post at the sender to its completion at the
    /// receiver.
    pub p50: Duration,
    /// 99th percentile of the completion time (nearest rank).
    pub p99: Duration,
    /// Longest completion time.
    pub max: Duration,
    /// Segments the senders retransmitted.
    pub retransmits: u64,
    /// Retransmission timeouts at the senders.
    pub rto_events: u64,
    /// Senders' holds by the grant (`Stats::grant_holds`) and their total time.
    pub grant_holds: u64,
    /// Total time of those holds.
    pub grant_held: Duration,
    /// R=1 segments the receiver sent.
    pub grants_sent: u64,
    /// From the first posts to the last completion.
    pub elapsed: Duration,
    /// Message bytes over `elapsed`.
    pub goodput_gbps: f64,
}

/// Why an incast [`run`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IncastError {
    /// Not every connection was established within 5 s of virtual time.
    #[error("{established} of {senders} connections established")]
    Handshake {
        /// Connections up: established ends (senders' and receiver's) halved.
        established: usize,
        /// Senders in the run.
        senders: usize,
    },
    /// A sender refused to post a message.
    #[error("sender {sender}: post refused: {source}")]
    Post {
        /// The sender (index from 0; its port is `SENDER_PORT + sender`).
        sender: usize,
        /// Why the post was refused.
        source: tcp_bth::CallError,
    },
    /// The receiver refused a receive buffer (SEND) or the registration of the sender's MR
    /// (WRITE).
    #[error("receive buffer or target region for sender {sender} refused: {source}")]
    PostRecv {
        /// The sender the receive or MR was for.
        sender: usize,
        /// Why it was refused.
        source: tcp_bth::CallError,
    },
    /// Not every message completed at the receiver within the time limit.
    #[error("not finished after {limit:?}: {completed} of {expected} messages")]
    Stalled {
        /// The run's [`IncastConfig::time_limit`] (virtual time).
        limit: Duration,
        /// Messages completed at the receiver.
        completed: usize,
        /// Messages posted in all: senders × messages.
        expected: usize,
    },
    /// A completion with an error status or of the wrong kind, or at the receiver one for an
    /// unknown or already completed message.
    #[error("sender {sender}: completion failed: {completion:?}")]
    Failed {
        /// The sender whose connection (either end) produced it.
        sender: usize,
        /// The CQE as polled.
        completion: Completion,
    },
    /// Bytes that landed at the receiver differ from those sent.
    #[error("sender {sender} message {message}: bytes differ from what was sent")]
    Mismatch {
        /// The sender.
        sender: usize,
        /// Index of the message among that sender's.
        message: usize,
    },
}

/// The senders' and the receiver's connections and the link between them.
struct Net {
    link: SimLink,
    now: Duration,
    senders: Vec<Connection>,
    /// The receiver's connection for sender `i`, created by its SYN.
    rx: Vec<Option<Connection>>,
    rx_cfg: Config,
    /// Rotates the order in which senders hand packets to the link.
    turn: usize,
}

fn port(p: &[u8], at: usize) -> Option<u16> {
    p.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]))
}

impl Net {
    /// Deliver what is due, fire due timers, hand every segment the connections want to send
    /// to the link.
    fn step(&mut self) {
        let now = self.now;
        while let Some((dir, pkt)) = self.link.poll(now) {
            // TCP header: source port, then destination port. A sender's port names it.
            let (at, conns_rx) = match dir {
                Direction::AtoB => (0, true),
                Direction::BtoA => (2, false),
            };
            let Some(i) = port(&pkt, at).and_then(|p| p.checked_sub(SENDER_PORT)) else {
                continue;
            };
            let i = usize::from(i);
            if i >= self.senders.len() {
                continue;
            }
            if !conns_rx {
                self.senders[i].handle_segment(now, &pkt);
                continue;
            }
            match &mut self.rx[i] {
                Some(c) => c.handle_segment(now, &pkt),
                slot => *slot = Connection::accept(self.rx_cfg.clone(), now, &pkt),
            }
        }
        let n = self.senders.len();
        for c in self.senders.iter_mut().chain(self.rx.iter_mut().flatten()) {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
        }
        self.turn = (self.turn + 1) % n.max(1);
        for k in 0..n {
            let i = (self.turn + k) % n;
            while let Some(p) = self.senders[i].poll_transmit(now) {
                self.link.send(now, Direction::AtoB, p);
            }
        }
        for c in self.rx.iter_mut().flatten() {
            while let Some(p) = c.poll_transmit(now) {
                self.link.send(now, Direction::BtoA, p);
            }
        }
    }

    /// The next instant anything happens, if any.
    fn next_event(&self) -> Option<Duration> {
        let timers = self.senders.iter().chain(self.rx.iter().flatten());
        timers
            .filter_map(Connection::poll_timeout)
            .chain(self.link.next_arrival())
            .min()
    }

    /// Step, then move the clock to the next event (at least 1 ns on, so a timer that stays
    /// due cannot spin). False when nothing will happen before `deadline`.
    fn advance(&mut self, deadline: Duration) -> bool {
        self.step();
        match self.next_event() {
            Some(t) if t <= deadline => {
                self.now = t.max(self.now + Duration::from_nanos(1));
                true
            }
            _ => false,
        }
    }
}

/// Configs of sender `i` and of the receiver, keys derived from the link's seed.
fn configs(cfg: &IncastConfig, i: usize) -> (Config, Config) {
    let (mut s, mut r) = pair_configs(cfg.link.seed ^ (i as u64).wrapping_mul(0x9E37_79B9));
    s.local_port = SENDER_PORT + i as u16;
    s.remote_port = B_PORT;
    s.admission = cfg.admission;
    r.admission_allowance = cfg.admit;
    r.admission_cap = Some(cfg.admit);
    (s, r)
}

/// Run the incast once. Err if it could not finish or a byte differs from what was sent.
pub fn run(cfg: &IncastConfig) -> Result<IncastReport, IncastError> {
    let n = cfg.senders.min(usize::from(u16::MAX - SENDER_PORT));
    let start = Duration::from_millis(1);
    let mut net = Net {
        link: SimLink::new(cfg.link.clone()),
        now: start,
        senders: (0..n)
            .map(|i| Connection::connect(configs(cfg, i).0, start))
            .collect(),
        rx: (0..n).map(|_| None).collect(),
        rx_cfg: configs(cfg, 0).1,
        turn: 0,
    };
    let established = |net: &Net| {
        let up = |c: &Connection| c.state() == State::Established;
        net.senders.iter().filter(|c| up(c)).count()
            + net.rx.iter().flatten().filter(|c| up(c)).count()
    };
    let deadline = start + Duration::from_secs(5);
    while established(&net) < 2 * n && net.advance(deadline) {}
    if established(&net) < 2 * n {
        return Err(IncastError::Handshake {
            established: established(&net) / 2,
            senders: n,
        });
    }
    let mut w = super::incast_work::Work::new(cfg, n);
    w.prepare(&mut net.rx)?;
    // The receiver is ready before the step starts, as in a collective: its grants (and
    // credit) reach the senders first. A sender's first flight before its first grant would
    // be ungoverned, as TCP's initial window is.
    while net.link.in_flight() > 0 && net.advance(deadline) {}
    let t0 = net.now;
    w.post_more(&mut net.senders, t0)?;
    let deadline = t0 + cfg.time_limit;
    loop {
        w.collect(&mut net.senders, &mut net.rx, net.now)?;
        if w.done() {
            break;
        }
        if !net.advance(deadline) {
            return Err(IncastError::Stalled {
                limit: cfg.time_limit,
                completed: w.completed(),
                expected: w.expected(),
            });
        }
    }
    w.verify(&net.rx)?;
    let mut r = w.report(cfg.admission, net.now - t0);
    r.queue_drops = net.link.stats(Direction::AtoB).dropped_queue;
    for s in &net.senders {
        let (st, rec) = (s.stats(), s.recovery_stats());
        r.retransmits += rec.retransmits;
        r.rto_events += rec.rto_losses;
        r.grant_holds += st.grant_holds;
        r.grant_held += st.grant_held;
    }
    r.grants_sent = net.rx.iter().flatten().map(|c| c.stats().grants_sent).sum();
    Ok(r)
}

/// The same incast with admission off, then on: the comparison `bth-compare` prints.
pub fn compare(cfg: &IncastConfig) -> Result<[IncastReport; 2], IncastError> {
    let off = run(&IncastConfig {
        admission: false,
        ..cfg.clone()
    })?;
    let on = run(&IncastConfig {
        admission: true,
        ..cfg.clone()
    })?;
    Ok([off, on])
}

/// A Markdown table of reports, one row each.
pub fn table(reports: &[IncastReport]) -> String {
    let mut s = String::from(
        "| admission | messages | queue drops | p50 | p99 | max | retrans | RTOs | grant holds | R=1 sent | elapsed | Gbit/s |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in reports {
        s += &format!(
            "| {} | {} | {} | {:.2} ms | {:.2} ms | {:.2} ms | {} | {} | {} | {} | {:.2} ms | {:.2} |\n",
            if r.admission { "on" } else { "off" },
            r.messages,
            r.queue_drops,
            r.p50.as_secs_f64() * 1e3,
            r.p99.as_secs_f64() * 1e3,
            r.max.as_secs_f64() * 1e3,
            r.retransmits,
            r.rto_events,
            r.grant_holds,
            r.grants_sent,
            r.elapsed.as_secs_f64() * 1e3,
            r.goodput_gbps,
        );
    }
    s
}

/// Payload of sender `i`'s message `k`.
pub(super) fn payload(seed: u64, i: usize, k: usize, len: u32) -> Vec<u8> {
    let mut v = vec![0u8; len as usize];
    fill(seed, ((i as u64) << 32) | k as u64, &mut v);
    v
}

/// A WRITE of message `k` of `len` bytes into `mr` at `k * len`, immediate `k`.
pub(super) fn write_wr(mr: &MrHandle, k: usize, data: Vec<u8>) -> WorkRequest {
    let addr = mr.addr + k as u64 * data.len() as u64;
    WorkRequest::write(k as u64, mr.rkey, addr, data, Some(k as u32))
}

/// Access a sender needs on the receiver's region.
pub(super) const TARGET: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);

/// Is `c` a successful completion of `op`?
pub(super) fn ok(c: &Completion, op: WcOp) -> bool {
    c.status == WcStatus::Success && c.op == op
}

#[cfg(test)]
#[path = "incast_tests.rs"]
mod tests;
