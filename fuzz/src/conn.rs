//! `conn_receive`: the receive path of an established tcp_bth connection.
//!
//! B is built with [`bth_io::sim::Pair`] over a quiet link and `establish`ed, then given
//! registered regions (a writable target, a read-only source, and a **canary** registered
//! without REMOTE_WRITE) and posted receive buffers. The fuzz input is decoded op by op (a tiny
//! fixed-width format, so the corpus generator can write meaningful seeds) into segments built
//! from fields near B's `seq_state()` — TCP header fields, a BTH option with valid or near-valid
//! fields, whole messages cut into segments and delivered shuffled, dropped or duplicated, and
//! raw bytes — interleaved with `poll_transmit`, `handle_timeout`, `post_recv`, deregistration
//! and completion polling. After every op the invariants that must hold whatever arrives are
//! checked (see [`Harness::check`]).

use arbitrary::Unstructured;
use bth_placement::Access;
use bytes::Bytes;
use std::time::Duration;
use tcp_bth::wire::{
    Bth, Extension, ExtensionKind, IpPair, MessageKind, Opcode, Position, ReadRequest, Reth,
    SackBlock, TcpFlags, TcpOptions, TcpRepr, Timestamps,
};
use tcp_bth::{Connection, ConnectionError, State};
use bth_io::sim::{pair_configs, LinkConfig, Pair};

/// Payload bytes per segment A would send (MSS 1460 − 40 bytes of options).
pub const CHUNK: u32 = 1420;
const TARGET_LEN: usize = 64 * 1024;
const CANARY_LEN: usize = 16 * 1024;
const SOURCE_LEN: usize = 16 * 1024;
const MAX_OPS: usize = 96;

/// Op tags (first byte of every op, taken mod [`N_OPS`]).
pub mod tag {
    pub const SEGMENT: u8 = 0;
    pub const MESSAGE: u8 = 1;
    pub const RAW: u8 = 2;
    pub const POLL: u8 = 3;
    pub const ADVANCE: u8 = 4;
    pub const POST_RECV: u8 = 5;
    pub const DEREGISTER: u8 = 6;
    pub const COMPLETIONS: u8 = 7;
    pub const B_WRITE: u8 = 8;
    pub const REREGISTER: u8 = 9;
}
pub const N_OPS: u8 = 10;

/// Which rkey a WRITE/READ names.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    Target,
    Canary,
    Source,
    Raw(u32),
}

pub struct Harness {
    pub b: Connection,
    pub ip_a: IpPair,
    pub now: Duration,
    /// A's TSval clock at `now` when A was dropped (A's segments are synthesised after that).
    a_tsval_base: (Duration, u32),
    target: Option<(u32, u64)>,
    /// rkeys of deregistered target regions, with the Vec handed back (must never change).
    dead: Vec<(u32, u64, Vec<u8>, Vec<u8>)>,
    canary: (u32, u64),
    canary_bytes: Vec<u8>,
    source: (u32, u64),
    /// Stream offset (relative to rcv_nxt at start) where the next generated message goes.
    next_off: u32,
    next_msn: [u16; 4],
    rcv_start: u32,
    fed_bytes: u64,
    next_wr: u64,
}

fn u8_(u: &mut Unstructured<'_>) -> u8 {
    u.arbitrary().unwrap_or(0)
}
fn u16_(u: &mut Unstructured<'_>) -> u16 {
    u.arbitrary().unwrap_or(0)
}
fn u32_(u: &mut Unstructured<'_>) -> u32 {
    u.arbitrary().unwrap_or(0)
}

impl Harness {
    pub fn new() -> Harness {
        let (a, b) = pair_configs(7);
        let ip_a = a.ip;
        let mut p = Pair::new(a, b, LinkConfig::default());
        assert!(p.establish(Duration::from_secs(5)), "handshake");
        let now = p.now;
        let a_tsval_base = (now, p.a.tsval_at(now));
        let mut b = p.b.take().expect("B exists");
        let t = b
            .register_mr(
                vec![0u8; TARGET_LEN],
                Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
            )
            .expect("register target");
        let canary_bytes: Vec<u8> = (0..CANARY_LEN).map(|i| (i * 7 + 3) as u8).collect();
        let c = b
            .register_mr(
                canary_bytes.clone(),
                Access::LOCAL_WRITE | Access::REMOTE_READ,
            )
            .expect("register canary");
        let s = b
            .register_mr(
                (0..SOURCE_LEN).map(|i| i as u8).collect(),
                Access::REMOTE_READ,
            )
            .expect("register source");
        for i in 0..8 {
            b.post_recv(i, vec![0u8; 4096]).expect("post_recv");
        }
        let rcv_start = b.seq_state().2;
        Harness {
            b,
            ip_a,
            now,
            a_tsval_base,
            target: Some((t.rkey, t.addr)),
            dead: Vec::new(),
            canary: (c.rkey, c.addr),
            canary_bytes,
            source: (s.rkey, s.addr),
            next_off: 0,
            next_msn: [0; 4],
            rcv_start,
            fed_bytes: 0,
            next_wr: 100,
        }
    }

    fn rkey_addr(&self, t: Target) -> (u32, u64) {
        match t {
            Target::Target => self
                .target
                .or_else(|| self.dead.last().map(|d| (d.0, d.1)))
                .unwrap_or((0x1234_5600, 1 << 32)),
            Target::Canary => self.canary,
            Target::Source => self.source,
            Target::Raw(k) => (k, 1 << 32),
        }
    }

    fn target_of(sel: u8) -> Target {
        match sel % 8 {
            0..=3 => Target::Target,
            4 => Target::Canary,
            5 => Target::Source,
            _ => Target::Raw(u32::from(sel) << 8 | 0x100),
        }
    }

    /// A's TSval at `now`: its clock ticks every microsecond from where it was.
    fn tsval(&self) -> u32 {
        let (t0, v0) = self.a_tsval_base;
        v0.wrapping_add(self.now.saturating_sub(t0).as_micros() as u32)
    }

    /// Emit a segment from A to B (checksummed for B) and hand it to B.
    pub fn deliver(&mut self, repr: &TcpRepr<'_>) {
        if let Ok(bytes) = repr.to_vec(self.ip_a) {
            self.fed_bytes += repr.payload.len() as u64;
            self.b.handle_segment(self.now, &bytes);
        }
    }

    fn base_repr<'p>(&self, seq: u32, payload: &'p [u8], bth: Option<Bth>) -> TcpRepr<'p> {
        let (una, _, _) = self.b.seq_state();
        TcpRepr {
            src_port: bth_io::sim::pair::A_PORT,
            dst_port: bth_io::sim::pair::B_PORT,
            seq,
            ack: una,
            flags: TcpFlags::ACK,
            window: 0xffff,
            urgent: 0,
            options: TcpOptions {
                bth,
                ..TcpOptions::default()
            },
            payload,
        }
    }

    /// One TCP segment whose header and BTH fields come from the input, near valid values.
    fn op_segment(&mut self, u: &mut Unstructured<'_>) {
        let (una, nxt, rcv) = self.b.seq_state();
        let fl = u8_(u);
        let flags = if fl & 0x80 == 0 {
            TcpFlags(TcpFlags::ACK.0 | (fl & 0x09))
        } else {
            TcpFlags(fl & 0x3f)
        };
        let seq_mode = u8_(u);
        let seq_d = u32_(u);
        let seq = match seq_mode % 4 {
            0 => rcv.wrapping_add(seq_d as i16 as u32),
            1 => rcv.wrapping_add((seq_d % 64).wrapping_mul(CHUNK)),
            2 => self.rcv_start.wrapping_add(seq_d % (1 << 20)),
            _ => seq_d,
        };
        let ack_mode = u8_(u);
        let ack_d = u16_(u) as i16 as u32;
        let ack = match ack_mode % 4 {
            0 => una,
            1 => nxt.wrapping_add(ack_d),
            2 => una.wrapping_add(ack_d),
            _ => ack_d.wrapping_mul(0x10001),
        };
        let window = u16_(u);
        let plen = usize::from(u16_(u) % 3000);
        let fill = u8_(u);
        let payload: Vec<u8> = (0..plen).map(|i| fill.wrapping_add(i as u8)).collect();
        let bth_mode = u8_(u);
        let op_idx = u8_(u);
        let msn_d = u8_(u);
        let mbo_mode = u8_(u);
        let mbo_raw = u32_(u);
        let segb = u8_(u);
        let bits = u8_(u);
        let ts_d = u16_(u) as i16;
        let tsel = u8_(u);
        let addr_d = u32_(u) as i32;
        let imm = u32_(u);
        let rd_len = u16_(u);
        let sack_mode = u8_(u);
        let sack_l = u16_(u) as i16 as u32;
        let sack_r = u16_(u);

        let opcode = Opcode::ALL[usize::from(op_idx) % Opcode::ALL.len()];
        let mbo = match mbo_mode % 4 {
            0 => 0,
            1 => u32::from(mbo_raw as u8) * CHUNK,
            2 => mbo_raw & 0xff_ffff,
            _ => (mbo_raw & 0xff_ffff) % 8192,
        };
        let class = tcp_bth::wire::MsgClass::of(opcode);
        let msn = match class {
            Some(c) => self.next_msn[c.index()]
                .wrapping_add(u16::from(msn_d))
                .wrapping_sub(4),
            None => u16::from(msn_d) << (bits & 7),
        };
        let (rkey, base) = self.rkey_addr(Self::target_of(tsel));
        let reth = Reth {
            rkey,
            addr: base
                .wrapping_add(addr_d as i64 as u64)
                .wrapping_add(u64::from(mbo)),
        };
        let ext = match opcode.extension() {
            ExtensionKind::None => Extension::None,
            ExtensionKind::Immediate => Extension::Immediate(imm),
            ExtensionKind::Reth => Extension::Reth(reth),
            ExtensionKind::RethImmediate => Extension::RethImmediate(reth, imm),
        };
        let payload = if opcode == Opcode::RdmaReadRequest && bth_mode & 0x10 == 0 {
            ReadRequest {
                rkey,
                addr: reth.addr,
                len: u32::from(rd_len),
            }
            .to_bytes()
            .to_vec()
        } else {
            payload
        };
        let mut bth = Bth {
            opcode,
            rtr: bits & 0x10 != 0,
            rtr_ack: bits & 0x20 != 0,
            seq_framed: false,
            rsvd: 0,
            msn,
            mbo,
            seg: segb,
            icrc: 0,
            timestamps: (bits & 0x40 == 0).then(|| Timestamps {
                tsval: self.tsval().wrapping_add(ts_d as i32 as u32),
                tsecr: self.tsval(),
            }),
            ext,
        };
        bth.seal(&payload);
        if bth_mode & 0x20 != 0 {
            bth.icrc ^= 1;
        }
        let with_bth = bth_mode & 7 != 0;
        let mut repr = self.base_repr(seq, &payload, with_bth.then_some(bth));
        repr.flags = flags;
        repr.ack = ack;
        repr.window = window;
        if sack_mode % 4 == 1 {
            let left = una.wrapping_add(sack_l);
            repr.options.sack.push(SackBlock {
                left,
                right: left.wrapping_add(u32::from(sack_r)),
            });
        }
        self.deliver(&repr);
    }

    /// A whole message at the next stream offset, cut into segments and delivered in an
    /// input-chosen order with drops and duplicates.
    fn op_message(&mut self, u: &mut Unstructured<'_>) {
        let kind = u8_(u);
        let len = u32::from(u16_(u) % 12000) + 1;
        let perm = u8_(u);
        let drop = u8_(u);
        let dup = u8_(u);
        let tsel = u8_(u);
        let addr_d = u16_(u) as i16;
        let imm_sel = u8_(u);
        let (mkind, len) = match kind % 4 {
            0 => (MessageKind::Send, len),
            1 => (MessageKind::RdmaWrite, len),
            2 => (MessageKind::ReadRequest, 16),
            _ => (MessageKind::ReadResponse, len),
        };
        let class = match mkind {
            MessageKind::Send => tcp_bth::wire::MsgClass::Send,
            MessageKind::RdmaWrite => tcp_bth::wire::MsgClass::Write,
            MessageKind::ReadRequest => tcp_bth::wire::MsgClass::ReadRequest,
            _ => tcp_bth::wire::MsgClass::ReadResponse,
        };
        let msn = self.next_msn[class.index()];
        self.next_msn[class.index()] = msn.wrapping_add(1);
        let (rkey, base) = self.rkey_addr(Self::target_of(tsel));
        let base = base.wrapping_add(addr_d as i64 as u64);
        let body: Vec<u8> = if mkind == MessageKind::ReadRequest {
            ReadRequest {
                rkey,
                addr: base,
                len: u32::from(addr_d as u16 % 8192) + 1,
            }
            .to_bytes()
            .to_vec()
        } else {
            (0..len).map(|i| (i as u8) ^ perm).collect()
        };
        let imm = imm_sel & 1 == 1 && matches!(mkind, MessageKind::Send | MessageKind::RdmaWrite);
        let start = self.rcv_start.wrapping_add(self.next_off);
        self.next_off = self.next_off.wrapping_add(len);
        let mut segs = Vec::new();
        let mut off = 0u32;
        while off < len {
            let n = CHUNK.min(len - off);
            let pos = Position::of(off, n, len);
            let last = !pos.more();
            let opcode = Opcode::for_data(mkind, pos, imm && last).unwrap_or(Opcode::SendOnly);
            let reth = Reth {
                rkey,
                addr: base.wrapping_add(u64::from(off)),
            };
            let ext = match opcode.extension() {
                ExtensionKind::None => Extension::None,
                ExtensionKind::Immediate => Extension::Immediate(0xabcd),
                ExtensionKind::Reth => Extension::Reth(reth),
                ExtensionKind::RethImmediate => Extension::RethImmediate(reth, 0xabcd),
            };
            segs.push((off, n, opcode, ext));
            off += n;
        }
        // Input-chosen order: rotate, and reverse for odd `perm`.
        let k = segs.len();
        segs.rotate_left(usize::from(perm) % k);
        if perm & 0x80 != 0 {
            segs.reverse();
        }
        for (i, (off, n, opcode, ext)) in segs.iter().enumerate() {
            if drop & (1 << (i % 8)) != 0 && drop & 0x80 != 0 {
                continue;
            }
            let payload = &body[*off as usize..(*off + *n) as usize];
            let mut bth = Bth {
                opcode: *opcode,
                rtr: false,
                rtr_ack: false,
                seq_framed: false,
                rsvd: 0,
                msn,
                mbo: *off,
                seg: (*off / CHUNK) as u8,
                icrc: 0,
                timestamps: Some(Timestamps {
                    tsval: self.tsval(),
                    tsecr: self.tsval(),
                }),
                ext: *ext,
            };
            bth.seal(payload);
            let repr = self.base_repr(start.wrapping_add(*off), payload, Some(bth));
            self.deliver(&repr);
            if dup & (1 << (i % 8)) != 0 {
                self.deliver(&repr);
            }
            self.check();
        }
    }

    fn poll(&mut self) {
        let mut n = 0;
        while self.b.poll_transmit(self.now).is_some() {
            n += 1;
            assert!(n < 100_000, "poll_transmit does not run dry");
        }
    }

    fn advance(&mut self, micros: u32) {
        self.now += Duration::from_micros(u64::from(micros));
        for _ in 0..100 {
            match self.b.poll_timeout() {
                Some(t) if t <= self.now => self.b.handle_timeout(self.now),
                _ => break,
            }
            self.poll();
        }
    }

    fn completions(&mut self) {
        let mut n = 0;
        while let Some(c) = self.b.poll_completion() {
            n += 1;
            assert!(n < 1_000_000, "completion queue does not run dry");
            if let Some(buf) = c.buf {
                // Re-post the buffer half the time so SENDs keep finding receives.
                if c.wr_id & 1 == 0 {
                    let _ = self.b.post_recv(self.next_wr, buf);
                    self.next_wr += 1;
                }
            }
        }
    }

    /// Invariants that hold whatever arrived.
    pub fn check(&self) {
        let c = self.b.placement_counters();
        assert_eq!(c.bytes_copied, c.bytes_placed, "one-copy invariant: {c:?}");
        assert_eq!(
            self.b.mr_bytes(self.canary.0),
            Some(&self.canary_bytes[..]),
            "canary region (no REMOTE_WRITE) was modified"
        );
        for (rkey, _, before, now) in &self.dead {
            assert_eq!(before, now, "deregistered region changed");
            assert!(self.b.mr_bytes(*rkey).is_none(), "stale rkey resolves");
        }
        // The cumulative point never passes bytes that were actually fed (+1 for a FIN).
        let advanced = self.b.seq_state().2.wrapping_sub(self.rcv_start);
        assert!(
            u64::from(advanced) <= self.fed_bytes + 1,
            "rcv_nxt advanced {advanced} with {} bytes fed",
            self.fed_bytes
        );
        if self.b.error() == Some(ConnectionError::RemoteAccess) {
            assert_eq!(self.b.state(), State::Closed);
        }
        let s = self.b.stats();
        assert!(s.bytes_received <= self.fed_bytes);
    }

    /// Decode and run one op; false when the input is used up.
    pub fn step(&mut self, u: &mut Unstructured<'_>) -> bool {
        if u.is_empty() {
            return false;
        }
        match u8_(u) % N_OPS {
            tag::SEGMENT => self.op_segment(u),
            tag::MESSAGE => self.op_message(u),
            tag::RAW => {
                let n = usize::from(u16_(u) % 2048);
                let bytes = u.bytes(n.min(u.len())).unwrap_or(&[]).to_vec();
                self.fed_bytes += bytes.len() as u64;
                self.b.handle_segment(self.now, &bytes);
            }
            tag::POLL => self.poll(),
            tag::ADVANCE => {
                let d = u16_(u);
                let micros = if d & 0x8000 != 0 {
                    u32::from(d & 0x7fff) * 1000
                } else {
                    u32::from(d)
                };
                self.advance(micros);
            }
            tag::POST_RECV => {
                let n = usize::from(u16_(u) % 16384) + 1;
                let _ = self.b.post_recv(self.next_wr, vec![0u8; n]);
                self.next_wr += 1;
            }
            tag::DEREGISTER => {
                if let Some((rkey, addr)) = self.target.take() {
                    let v = self.b.deregister_mr(rkey).expect("deregister target");
                    self.dead.push((rkey, addr, v.clone(), v));
                }
            }
            tag::COMPLETIONS => self.completions(),
            tag::B_WRITE => {
                let n = usize::from(u16_(u) % 8000) + 1;
                let _ = self.b.post_send(bth_framer::WorkRequest {
                    wr_id: self.next_wr,
                    op: bth_framer::WrOp::RdmaWrite {
                        rkey: 0x4242_4200,
                        remote_addr: 1 << 32,
                        imm: None,
                    },
                    sg_list: vec![Bytes::from(vec![0x5au8; n])],
                });
                self.next_wr += 1;
                self.poll();
            }
            tag::REREGISTER => {
                if self.target.is_none() {
                    if let Ok(h) = self.b.register_mr(
                        vec![0u8; TARGET_LEN],
                        Access::LOCAL_WRITE | Access::REMOTE_WRITE,
                    ) {
                        self.target = Some((h.rkey, h.addr));
                    }
                }
            }
            _ => unreachable!(),
        }
        self.check();
        true
    }
}

impl Default for Harness {
    fn default() -> Self {
        Harness::new()
    }
}

/// The `conn_receive` target.
pub fn run(data: &[u8]) {
    let mut h = Harness::new();
    let mut u = Unstructured::new(data);
    let trace = std::env::var_os("CONN_FUZZ_TRACE").is_some();
    for _ in 0..MAX_OPS {
        if trace {
            eprintln!(
                "op at {}: seq {:?} fed {} state {:?} stats {:?}",
                data.len() - u.len(),
                h.b.seq_state(),
                h.fed_bytes,
                h.b.state(),
                h.b.stats()
            );
        }
        if !h.step(&mut u) {
            break;
        }
    }
    h.advance(1_000);
    h.completions();
    h.check();
}

/// Writes inputs in the op format [`Harness::step`] decodes (integers little-endian, as
/// `arbitrary` reads them), for the seed corpus.
#[derive(Default)]
pub struct Seed(pub Vec<u8>);

impl Seed {
    pub fn message(mut self, kind: u8, len: u16, perm: u8, drop: u8, dup: u8, tsel: u8) -> Self {
        self.0.push(tag::MESSAGE);
        self.0.push(kind);
        self.0.extend(len.to_le_bytes());
        self.0.extend([perm, drop, dup, tsel]);
        self.0.extend(0i16.to_le_bytes());
        self.0.push(0);
        self
    }
    #[allow(clippy::too_many_arguments)]
    pub fn segment(
        mut self,
        flags: u8,
        seq_mode: u8,
        seq_d: u32,
        plen: u16,
        bth_mode: u8,
        opcode: u8,
        mbo_mode: u8,
        mbo: u32,
    ) -> Self {
        self.0.push(tag::SEGMENT);
        self.0.push(flags);
        self.0.push(seq_mode);
        self.0.extend(seq_d.to_le_bytes());
        self.0.push(0); // ack mode: snd_una
        self.0.extend(0u16.to_le_bytes());
        self.0.extend(0xffffu16.to_le_bytes());
        self.0.extend(plen.to_le_bytes());
        self.0.push(0x33);
        self.0.push(bth_mode);
        self.0.push(opcode);
        self.0.push(4); // msn delta: the next MSN of the class
        self.0.push(mbo_mode);
        self.0.extend(mbo.to_le_bytes());
        self.0.push(0);
        self.0.push(0);
        self.0.extend(0u16.to_le_bytes());
        self.0.push(0);
        self.0.extend(0u32.to_le_bytes());
        self.0.extend(0u32.to_le_bytes());
        self.0.extend(64u16.to_le_bytes());
        self.0.push(0);
        self.0.extend(0u16.to_le_bytes());
        self.0.extend(0u16.to_le_bytes());
        self
    }
    pub fn raw(mut self, bytes: &[u8]) -> Self {
        self.0.push(tag::RAW);
        self.0.extend((bytes.len() as u16).to_le_bytes());
        self.0.extend_from_slice(bytes);
        self
    }
    pub fn op(mut self, t: u8) -> Self {
        self.0.push(t);
        self
    }
    pub fn advance(mut self, d: u16) -> Self {
        self.0.push(tag::ADVANCE);
        self.0.extend(d.to_le_bytes());
        self
    }
    pub fn post_recv(mut self, n: u16) -> Self {
        self.0.push(tag::POST_RECV);
        self.0.extend(n.to_le_bytes());
        self
    }
    pub fn b_write(mut self, n: u16) -> Self {
        self.0.push(tag::B_WRITE);
        self.0.extend(n.to_le_bytes());
        self
    }
}
