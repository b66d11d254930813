//! A verified mixed workload over many queue pairs between two endpoints, as two
//! [`turn::App`](bth_io::turn::App)s: A connects every QP, B accepts them, registers a
//! WRITE target and a READ source for each and posts its receives; A then posts the QP's
//! SENDs, RDMA WRITEs with immediate and RDMA READs. Every byte is checked where it lands:
//! SEND and WRITE payloads at B, READ responses at A.
//!
//! The two apps share a control plane ([`Control`]) standing in for the out-of-band exchange
//! an RDMA application does (which QP is which, and the remote keys): B learns a QP's number
//! from A's port, A learns B's regions when B has them.

use bth_framer::WorkRequest;
use bth_io::sim::workload::fill;
use bth_io::turn::App;
use bth_placement::{Access, MrHandle, WcStatus};
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;
use tcp_bth::{Completion, ConnectionHandle, Endpoint, Mode, WcOp};

/// Messages per QP: one SEND, one WRITE with immediate, one READ, and a fourth SEND or WRITE.
pub const PER_QP: usize = 4;
/// Largest message; sizes run from 1 byte to this (one to three segments).
pub const MAX_SIZE: usize = 2500;
/// READs start within this many bytes of B's source region.
const READ_SPAN: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Send,
    WriteImm,
    Read,
}

/// One planned message of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Msg {
    pub kind: Kind,
    pub size: usize,
    /// WRITE: offset in B's target region; READ: offset in B's source region.
    pub offset: usize,
}

fn mix(seed: u64, q: usize, i: usize) -> u64 {
    let mut z = seed ^ ((q as u64) << 20 | i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// QP `q`'s messages in posting order (the kinds rotate from QP to QP).
pub fn plan(seed: u64, q: usize) -> Vec<Msg> {
    let fourth = if q.is_multiple_of(2) {
        Kind::Send
    } else {
        Kind::WriteImm
    };
    let mut kinds = [Kind::Send, Kind::WriteImm, Kind::Read, fourth];
    kinds.rotate_left(q % PER_QP);
    let mut write_at = 0;
    kinds
        .iter()
        .enumerate()
        .map(|(i, &kind)| {
            let r = mix(seed, q, i);
            let size = 1 + (r % MAX_SIZE as u64) as usize;
            let offset = match kind {
                Kind::WriteImm => {
                    write_at += size;
                    write_at - size
                }
                Kind::Read => ((r >> 32) % READ_SPAN as u64) as usize,
                Kind::Send => 0,
            };
            Msg { kind, size, offset }
        })
        .collect()
}

/// The message's id: its `wr_id` at A, its receive's `wr_id` and its immediate at B.
fn id(q: usize, i: usize) -> u64 {
    (q * PER_QP + i) as u64
}

fn payload(seed: u64, q: usize, i: usize, size: usize) -> Vec<u8> {
    let mut v = vec![0u8; size];
    fill(seed, id(q, i), &mut v);
    v
}

/// B's READ source region of QP `q`.
fn source(seed: u64, q: usize) -> Vec<u8> {
    let mut v = vec![0u8; READ_SPAN + MAX_SIZE];
    fill(seed ^ 0x5EED, q as u64, &mut v);
    v
}

/// What the two apps share: the out-of-band exchange, failures and per-QP finish times.
pub struct Control {
    pub seed: u64,
    /// A's QP number by A's port.
    pub qp_of_port: HashMap<u16, usize>,
    /// QPs B has set up: (QP, WRITE target, READ source).
    ready: VecDeque<(usize, MrHandle, MrHandle)>,
    pub failures: Vec<String>,
    /// When each QP's last completion was polled at A and at B.
    pub finished: [Vec<Option<Duration>>; 2],
    /// Payload bytes compared where they landed.
    pub bytes_verified: u64,
}

impl Control {
    pub fn new(seed: u64, qps: usize) -> Rc<RefCell<Control>> {
        Rc::new(RefCell::new(Control {
            seed,
            qp_of_port: HashMap::new(),
            ready: VecDeque::new(),
            failures: Vec::new(),
            finished: [vec![None; qps], vec![None; qps]],
            bytes_verified: 0,
        }))
    }

    fn fail(&mut self, what: String) {
        // The first few say what went wrong; a thousand would drown them.
        if self.failures.len() < 20 {
            self.failures.push(what);
        }
    }
}

/// A QP an app waits on: its number, its connection and the completions still due.
struct Open {
    q: usize,
    h: ConnectionHandle,
    left: usize,
    /// B's WRITE target (its rkey), to read back what landed.
    target: u32,
}

/// Polls the completions of the QPs with news; `check` judges each. Returns the QPs it
/// finished. Connections without a completion are only looked at, not touched, so a turn
/// costs one glance per open QP and real work only where something happened.
fn reap(
    ep: &mut Endpoint,
    open: &mut Vec<Open>,
    ctl: &mut Control,
    mut check: impl FnMut(&mut Control, &Open, &Completion, &tcp_bth::Connection) -> Result<(), String>,
) -> Vec<usize> {
    let mut finished = Vec::new();
    open.retain_mut(|o| {
        if !ep.conn(o.h).is_some_and(|c| c.has_completion()) {
            return true;
        }
        let Some(c) = ep.conn_mut(o.h) else {
            return true;
        };
        while let Some(wc) = c.poll_completion() {
            o.left = o.left.saturating_sub(1);
            if let Err(e) = check(ctl, o, &wc, c) {
                ctl.fail(format!("QP {}: {e}", o.q));
            }
        }
        if o.left == 0 {
            finished.push(o.q);
        }
        o.left > 0
    });
    finished
}

/// A's app: posts each QP's messages once B has set it up, checks READs and every status.
pub struct Client {
    ctl: Rc<RefCell<Control>>,
    qps: Vec<ConnectionHandle>,
    open: Vec<Open>,
    posted: usize,
}

impl Client {
    /// `qps[q]`: A's connection of QP `q`.
    pub fn new(ctl: Rc<RefCell<Control>>, qps: Vec<ConnectionHandle>) -> Client {
        Client {
            ctl,
            qps,
            open: Vec::new(),
            posted: 0,
        }
    }

    /// Post QP `q`'s messages on `c`, to B's regions `target` and `source`.
    fn post(
        c: &mut tcp_bth::Connection,
        seed: u64,
        q: usize,
        target: MrHandle,
        source: MrHandle,
    ) -> Result<(), String> {
        if !matches!(c.mode(), Mode::Bth { .. }) {
            return Err(format!("mode {:?}", c.mode()));
        }
        for (i, m) in plan(seed, q).iter().enumerate() {
            let wr_id = id(q, i);
            let r = match m.kind {
                Kind::Send => c
                    .post_send(WorkRequest::send(wr_id, payload(seed, q, i, m.size), None))
                    .map(drop)
                    .map_err(|e| e.kind.to_string()),
                Kind::WriteImm => {
                    let data = payload(seed, q, i, m.size);
                    let addr = target.addr + m.offset as u64;
                    let wr = WorkRequest::write(wr_id, target.rkey, addr, data, Some(wr_id as u32));
                    c.post_send(wr).map(drop).map_err(|e| e.kind.to_string())
                }
                Kind::Read => {
                    let addr = source.addr + m.offset as u64;
                    c.post_read(wr_id, source.rkey, addr, vec![0; m.size])
                        .map(drop)
                        .map_err(|e| e.kind.to_string())
                }
            };
            r.map_err(|e| format!("post {i}: {e}"))?;
        }
        Ok(())
    }
}

fn check_a(ctl: &mut Control, o: &Open, wc: &Completion) -> Result<(), String> {
    if wc.status != WcStatus::Success {
        return Err(format!("A: {:?} {} {:?}", wc.op, wc.wr_id, wc.status));
    }
    let i = (wc.wr_id as usize).checked_sub(o.q * PER_QP);
    let m = i.and_then(|i| plan(ctl.seed, o.q).get(i).copied());
    let (i, m) = i.zip(m).ok_or(format!("A: unknown wr_id {}", wc.wr_id))?;
    let want = match m.kind {
        Kind::Send => WcOp::Send,
        Kind::WriteImm => WcOp::RdmaWrite,
        Kind::Read => WcOp::RdmaRead,
    };
    if wc.op != want {
        return Err(format!("A: message {i} completed as {:?}", wc.op));
    }
    if m.kind == Kind::Read {
        let src = source(ctl.seed, o.q);
        if wc.buf.as_deref() != Some(&src[m.offset..m.offset + m.size]) {
            return Err(format!("READ {i} returned other bytes"));
        }
        ctl.bytes_verified += m.size as u64;
    }
    Ok(())
}

impl App for Client {
    fn turn(&mut self, ep: &mut Endpoint, now: Duration) -> bool {
        let mut ctl = self.ctl.borrow_mut();
        while let Some((q, target, source)) = ctl.ready.pop_front() {
            let Some(&h) = self.qps.get(q) else {
                ctl.fail(format!("B set up QP {q}, which A never opened"));
                continue;
            };
            let posted = match ep.conn_mut(h) {
                Some(c) => Client::post(c, ctl.seed, q, target, source),
                None => Err("no connection".into()),
            };
            if let Err(e) = posted {
                ctl.fail(format!("QP {q}: {e}"));
            }
            self.posted += 1;
            let left = PER_QP;
            self.open.push(Open {
                q,
                h,
                left,
                target: 0,
            });
        }
        let check = |ctl: &mut Control, o: &Open, wc: &Completion, _: &_| check_a(ctl, o, wc);
        for q in reap(ep, &mut self.open, &mut ctl, check) {
            ctl.finished[0][q] = Some(now);
        }
        !ctl.failures.is_empty() || (self.posted == self.qps.len() && self.open.is_empty())
    }
}

/// B's app: accepts, sets each QP up, and checks every SEND and WRITE that lands.
pub struct Server {
    ctl: Rc<RefCell<Control>>,
    qps: usize,
    open: Vec<Open>,
    /// B's connections, by QP.
    pub accepted: Vec<(usize, ConnectionHandle)>,
}

impl Server {
    pub fn new(ctl: Rc<RefCell<Control>>, qps: usize) -> Server {
        Server {
            ctl,
            qps,
            open: Vec::new(),
            accepted: Vec::new(),
        }
    }

    /// Register the QP's regions, post its receives and tell A.
    fn set_up(ep: &mut Endpoint, ctl: &mut Control, h: ConnectionHandle) -> Result<Open, String> {
        let c = ep.conn_mut(h).ok_or("no connection")?;
        let port = c.config().remote_port;
        let q = *ctl
            .qp_of_port
            .get(&port)
            .ok_or(format!("unknown port {port}"))?;
        let plan = plan(ctl.seed, q);
        let write_len: usize = plan
            .iter()
            .filter(|m| m.kind == Kind::WriteImm)
            .map(|m| m.size)
            .sum();
        let access = Access::REMOTE_WRITE | Access::LOCAL_WRITE;
        let target = c.register_mr(vec![0; write_len.max(1)], access);
        let target = target.map_err(|e| format!("QP {q}: register: {}", e.kind))?;
        let source = c.register_mr(source(ctl.seed, q), Access::REMOTE_READ);
        let source = source.map_err(|e| format!("QP {q}: register: {}", e.kind))?;
        for (i, m) in plan
            .iter()
            .enumerate()
            .filter(|(_, m)| m.kind == Kind::Send)
        {
            c.post_recv(id(q, i), vec![0; m.size])
                .map_err(|e| format!("QP {q}: post_recv: {}", e.kind))?;
        }
        ctl.ready.push_back((q, target, source));
        let left = plan.iter().filter(|m| m.kind != Kind::Read).count();
        Ok(Open {
            q,
            h,
            left,
            target: target.rkey,
        })
    }
}

fn check_b(
    ctl: &mut Control,
    o: &Open,
    wc: &Completion,
    c: &tcp_bth::Connection,
) -> Result<(), String> {
    if wc.status != WcStatus::Success {
        return Err(format!("B: {:?} {:?}", wc.op, wc.status));
    }
    let base = (o.q * PER_QP) as u64;
    let n = match wc.op {
        WcOp::Recv => wc.wr_id,
        WcOp::RecvRdmaWithImm => u64::from(wc.imm.ok_or("WRITE without immediate")?),
        other => return Err(format!("B: unexpected {other:?}")),
    };
    let i = n
        .checked_sub(base)
        .filter(|&i| i < PER_QP as u64)
        .ok_or(format!("B: foreign id {n}"))? as usize;
    let m = plan(ctl.seed, o.q)[i];
    if wc.byte_len as usize != m.size {
        return Err(format!(
            "B: message {i}: {} bytes, sent {}",
            wc.byte_len, m.size
        ));
    }
    let want = payload(ctl.seed, o.q, i, m.size);
    let got = match wc.op {
        WcOp::Recv => wc.buf.as_deref().and_then(|b| b.get(..m.size)),
        _ => c
            .mr_bytes(o.target)
            .and_then(|r| r.get(m.offset..m.offset + m.size)),
    };
    if got != Some(&want[..]) {
        return Err(format!(
            "B: message {i} ({:?}) differs from what was sent",
            m.kind
        ));
    }
    ctl.bytes_verified += m.size as u64;
    Ok(())
}

impl App for Server {
    fn turn(&mut self, ep: &mut Endpoint, now: Duration) -> bool {
        let mut ctl = self.ctl.borrow_mut();
        while let Some(h) = ep.accept() {
            match Server::set_up(ep, &mut ctl, h) {
                Ok(o) => {
                    self.accepted.push((o.q, h));
                    self.open.push(o);
                }
                Err(e) => ctl.fail(e),
            }
        }
        for q in reap(ep, &mut self.open, &mut ctl, check_b) {
            ctl.finished[1][q] = Some(now);
        }
        !ctl.failures.is_empty() || (self.accepted.len() == self.qps && self.open.is_empty())
    }
}
