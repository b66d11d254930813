//! A SEND workload over many QPs (connections) of one `tcp_bth::Endpoint`, every byte
//! verified: each side opens its own QPs to the peer's [`PORT`] and SENDs on them, and checks
//! every message its accepted QPs receive. One [`Side`] is the application of one driver
//! (`bth_io::turn::App`). The endpoint must listen on [`PORT`] before its driver starts
//! (not in the app's first turn: the peer's first SYN may arrive before it).
//!
//! Message `i` of QP `q` is `size(q, i)` bytes: `q` and `i` (little-endian u32 each), then a
//! pattern seeded by both; it carries immediate `i`. A receiver learns `q` from the first
//! message and checks every later one against it: order, length, header, every byte. QPs
//! close in order when done (the sender once every SEND is acknowledged, the receiver once
//! it has every message and the sender's FIN).

use bth_framer::{WorkRequest, WrOp};
use bth_io::turn::App;
use bytes::Bytes;
use std::time::Duration;
use tcp_bth::wire::IpPair;
use tcp_bth::{Config, Connection, ConnectionHandle, Endpoint, Event, State, WcOp};

pub const PORT: u16 = 4791;

/// The workload of every QP.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub messages: u32,
    /// Message sizes are spread over 8..=max_size bytes.
    pub max_size: usize,
    /// SENDs outstanding per QP, and receives posted per accepted QP.
    pub depth: u32,
}

fn mix(q: u32, i: u32) -> u64 {
    let mut z = (u64::from(q) << 32 | u64::from(i)).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z ^ (z >> 27)
}

impl Plan {
    pub fn size(&self, q: u32, i: u32) -> usize {
        8 + (mix(q, i) % (self.max_size as u64 - 7)) as usize
    }

    /// The bytes of message `i` of QP `q`.
    pub fn message(&self, q: u32, i: u32) -> Vec<u8> {
        let mut v = vec![0u8; self.size(q, i)];
        v[..4].copy_from_slice(&q.to_le_bytes());
        v[4..8].copy_from_slice(&i.to_le_bytes());
        bth_io::sim::workload::fill(mix(q, i), 7, &mut v[8..]);
        v
    }
}

fn finished(c: &Connection) -> bool {
    matches!(c.state(), State::TimeWait | State::Closed)
}

struct Sender {
    h: ConnectionHandle,
    qp: u32,
    next: u32,
    acked: u32,
    closed: bool,
}

struct Receiver {
    h: ConnectionHandle,
    qp: Option<u32>,
    got: u32,
    posted: u32,
    peer_done: bool,
    closed: bool,
}

/// One side's application: see the module documentation.
pub struct Side {
    plan: Plan,
    template: Config,
    /// QPs to open at the first turn: id and address pair.
    to_open: Vec<(u32, IpPair)>,
    senders: Vec<Sender>,
    receivers: Vec<Receiver>,
    expect_accepts: usize,
    /// Everything that went wrong, with the QP it happened on.
    pub errors: Vec<String>,
    /// Messages and payload bytes received and verified.
    pub verified: u64,
    pub bytes: u64,
    /// Driver time when every QP had finished.
    pub done_at: Option<Duration>,
    started: bool,
}

impl Side {
    /// Open a QP per entry of `open` (a QP id and the address pair toward the peer), expect
    /// `expect_accepts` QPs from the peer. `template` is every connection's config (its
    /// addresses and ports are set here).
    pub fn new(plan: Plan, template: Config, open: Vec<(u32, IpPair)>, accepts: usize) -> Side {
        Side {
            plan,
            template,
            to_open: open,
            senders: Vec::new(),
            receivers: Vec::new(),
            expect_accepts: accepts,
            errors: Vec::new(),
            verified: 0,
            bytes: 0,
            done_at: None,
            started: false,
        }
    }

    fn start(&mut self, ep: &mut Endpoint, now: Duration) {
        self.started = true;
        for (qp, ip) in std::mem::take(&mut self.to_open) {
            let cfg = Config {
                ip,
                local_port: 0,
                remote_port: PORT,
                ..self.template.clone()
            };
            match ep.connect(now, cfg) {
                Ok(h) => self.senders.push(Sender {
                    h,
                    qp,
                    next: 0,
                    acked: 0,
                    closed: false,
                }),
                Err(e) => self.errors.push(format!("QP {qp}: connect: {e}")),
            }
        }
    }

    fn accept(&mut self, ep: &mut Endpoint) {
        while let Some(h) = ep.accept() {
            let mut r = Receiver {
                h,
                qp: None,
                got: 0,
                posted: 0,
                peer_done: false,
                closed: false,
            };
            if let Some(c) = ep.conn_mut(h) {
                while r.posted < self.plan.depth.min(self.plan.messages) {
                    let buf = vec![0u8; self.plan.max_size];
                    if let Err(e) = c.post_recv(u64::from(r.posted), buf) {
                        self.errors
                            .push(format!("accepted QP: post_recv: {}", e.kind));
                        break;
                    }
                    r.posted += 1;
                }
            }
            self.receivers.push(r);
        }
    }

    fn send(plan: &Plan, s: &mut Sender, c: &mut Connection, errors: &mut Vec<String>) {
        if let Some(e) = c.error() {
            errors.push(format!("QP {} (sender): {e}", s.qp));
            return;
        }
        if !s.closed && !c.is_established() {
            return; // the handshake is not done yet
        }
        while s.next < plan.messages && s.next - s.acked < plan.depth && !s.closed {
            let wr = WorkRequest {
                wr_id: u64::from(s.next),
                op: WrOp::Send { imm: Some(s.next) },
                sg_list: vec![Bytes::from(plan.message(s.qp, s.next))],
            };
            if let Err(e) = c.post_send(wr) {
                errors.push(format!(
                    "QP {} message {}: post_send: {}",
                    s.qp, s.next, e.kind
                ));
                return;
            }
            s.next += 1;
        }
        while let Some(cqe) = c.poll_completion() {
            if !cqe.is_success() || cqe.op != WcOp::Send || cqe.wr_id != u64::from(s.acked) {
                errors.push(format!("QP {} (sender): completion {cqe:?}", s.qp));
                return;
            }
            s.acked += 1;
        }
        if s.acked == plan.messages && !s.closed {
            c.close();
            s.closed = true;
        }
    }

    fn receive(&mut self, r: &mut Receiver, c: &mut Connection) -> Result<(), String> {
        let who = |r: &Receiver| r.qp.map_or("accepted QP".into(), |q| format!("QP {q}"));
        if let Some(e) = c.error() {
            return Err(format!("{} (receiver): {e}", who(r)));
        }
        while let Some(ev) = c.poll_event() {
            r.peer_done |= ev == Event::PeerFinished;
        }
        while let Some(mut cqe) = c.poll_completion() {
            let buf = cqe.buf.take().unwrap_or_default();
            if !cqe.is_success() || cqe.op != WcOp::Recv || cqe.imm != Some(r.got) {
                return Err(format!("{} (receiver): completion {cqe:?}", who(r)));
            }
            let msg = &buf[..(cqe.byte_len as usize).min(buf.len())];
            let qp = match (r.qp, msg.get(..4)) {
                (Some(q), _) => q,
                (None, Some(h)) => u32::from_le_bytes(h.try_into().unwrap_or_default()),
                (None, None) => return Err("a message shorter than its header".into()),
            };
            r.qp = Some(qp);
            if *msg != self.plan.message(qp, r.got)[..] {
                return Err(format!(
                    "QP {qp} message {}: {} bytes differ from what was sent",
                    r.got,
                    msg.len()
                ));
            }
            r.got += 1;
            self.verified += 1;
            self.bytes += msg.len() as u64;
            if r.posted < self.plan.messages {
                let mut buf = buf;
                buf.resize(self.plan.max_size, 0);
                c.post_recv(u64::from(r.posted), buf)
                    .map_err(|e| format!("QP {qp}: post_recv: {}", e.kind))?;
                r.posted += 1;
            }
        }
        if r.got == self.plan.messages && r.peer_done && !r.closed {
            c.close();
            r.closed = true;
        }
        Ok(())
    }
}

impl App for Side {
    fn turn(&mut self, ep: &mut Endpoint, now: Duration) -> bool {
        if !self.started {
            self.start(ep, now);
        }
        self.accept(ep);
        let mut senders = std::mem::take(&mut self.senders);
        for s in &mut senders {
            match ep.conn_mut(s.h) {
                Some(c) => Self::send(&self.plan, s, c, &mut self.errors),
                None => self.errors.push(format!("QP {}: handle gone", s.qp)),
            }
        }
        self.senders = senders;
        let mut receivers = std::mem::take(&mut self.receivers);
        for r in &mut receivers {
            let res = match ep.conn_mut(r.h) {
                Some(c) => self.receive(r, c),
                None => Err("accepted QP: handle gone".into()),
            };
            if let Err(e) = res {
                self.errors.push(e);
            }
        }
        self.receivers = receivers;
        let all_done = self.receivers.len() == self.expect_accepts
            && self
                .senders
                .iter()
                .map(|s| s.h)
                .chain(self.receivers.iter().map(|r| r.h))
                .all(|h| ep.conn(h).is_some_and(finished));
        if all_done && self.done_at.is_none() {
            self.done_at = Some(now);
        }
        all_done || !self.errors.is_empty()
    }
}
