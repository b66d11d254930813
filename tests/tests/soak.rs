//! Soak: 32 pairs (64 connections) over impaired simulated links kept busy with mixed messages
//! (SEND, RDMA WRITE with immediate, RDMA READ; 1 B – 64 KiB) for a bounded wall time; every
//! byte is checked, process RSS is sampled after warm-up and must stay flat, and at the end every
//! connection is closed and checked: all receive buffers returned through completions, every
//! message completed, send queues empty, placement counters consistent.
//!
//! `SOAK_SECS` (default 20) sets the busy phase's wall time; docs/reliability.md has the figures.

use bth_framer::{WorkRequest, WrOp};
use bth_placement::{Access, MrHandle, WcStatus};
use bth_tests::*;
use bytes::Bytes;
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use tcp_bth::sim::{LinkConfig, Pair};
use tcp_bth::{State, WcOp};

const PAIRS: usize = 32;
const DEPTH: usize = 6;
const MAX_SIZE: usize = 64 * 1024;
const RECV_DEPTH: usize = 8;
const SOURCE_LEN: usize = 1 << 20;
const WRITE_SLOTS: usize = 2 * DEPTH;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Send,
    Write,
    Read,
}

struct Busy {
    p: Pair,
    seed: u64,
    rng: u64,
    target: MrHandle,
    source: MrHandle,
    source_bytes: Vec<u8>,
    next_msg: u64,
    write_slot: usize,
    /// Messages A posted and has not seen complete: (wr_id, kind).
    outstanding: VecDeque<(u64, Kind)>,
    /// What B must receive next, in order: (message id, kind, len, slot).
    b_expect: VecDeque<(u64, Kind, usize, usize)>,
    /// READs A expects: wr_id → (offset, len).
    reads: std::collections::HashMap<u64, (usize, usize)>,
    recv_posted: u64,
    recv_returned: u64,
    recv_flushed: u64,
    next_recv: u64,
    messages_done: u64,
    bytes_verified: u64,
    send_write_bytes: u64,
    read_bytes: u64,
}

fn link(seed: u64) -> LinkConfig {
    LinkConfig::default()
        .with_loss(0.005)
        .with_reorder(0.05, Duration::from_micros(100))
        .with_duplicate(0.005)
        .with_corrupt(0.001)
        .with_bandwidth_bps(2_000_000_000)
        .with_seed(seed)
}

impl Busy {
    fn new(seed: u64) -> Busy {
        let (a, b) = configs(1000 + seed, |a, b| {
            // Short for the test, but well above the RTO: TIME-WAIT must outlast the peer's FIN
            // retransmissions (50 ms was too short: a lost final ACK left the peer in CLOSING,
            // its retransmitted FIN arriving at a connection already CLOSED).
            a.time_wait = Duration::from_secs(5);
            b.time_wait = Duration::from_secs(5);
        });
        let mut p = established(a, b, link(seed));
        let target = p
            .b()
            .register_mr(
                vec![0u8; WRITE_SLOTS * MAX_SIZE],
                Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            )
            .unwrap();
        let source_bytes = pattern(seed ^ 0x50, SOURCE_LEN);
        let source = p
            .b()
            .register_mr(source_bytes.clone(), Access::REMOTE_READ)
            .unwrap();
        let mut s = Busy {
            p,
            seed,
            rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            target,
            source,
            source_bytes,
            next_msg: 0,
            write_slot: 0,
            outstanding: VecDeque::new(),
            b_expect: VecDeque::new(),
            reads: Default::default(),
            recv_posted: 0,
            recv_returned: 0,
            recv_flushed: 0,
            next_recv: 0,
            messages_done: 0,
            bytes_verified: 0,
            send_write_bytes: 0,
            read_bytes: 0,
        };
        for _ in 0..RECV_DEPTH {
            s.post_recv();
        }
        s
    }

    fn rnd(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn size(&mut self) -> usize {
        // Mostly small, sometimes large: 1 B .. 64 KiB, log-uniform-ish.
        let r = self.rnd();
        let max = [64usize, 1024, 8192, MAX_SIZE][(r % 4) as usize];
        1 + (r >> 8) as usize % max
    }

    fn post_recv(&mut self) {
        self.p
            .b()
            .post_recv(self.next_recv, vec![0u8; MAX_SIZE])
            .unwrap();
        self.next_recv += 1;
        self.recv_posted += 1;
    }

    fn post_one(&mut self) {
        let id = self.next_msg;
        self.next_msg += 1;
        let kind = match self.rnd() % 4 {
            0 | 1 => Kind::Send,
            2 => Kind::Write,
            _ => Kind::Read,
        };
        let len = self.size();
        match kind {
            Kind::Send | Kind::Write => {
                let data = Bytes::from(pattern(self.seed << 32 | id, len));
                let (op, slot) = if kind == Kind::Send {
                    (WrOp::Send { imm: None }, 0)
                } else {
                    let slot = self.write_slot;
                    self.write_slot = (self.write_slot + 1) % WRITE_SLOTS;
                    (
                        WrOp::RdmaWrite {
                            rkey: self.target.rkey,
                            remote_addr: self.target.addr + (slot * MAX_SIZE) as u64,
                            imm: Some(id as u32),
                        },
                        slot,
                    )
                };
                self.p
                    .a
                    .post_send(WorkRequest {
                        wr_id: id,
                        op,
                        sg_list: vec![data],
                    })
                    .unwrap();
                self.b_expect.push_back((id, kind, len, slot));
                self.send_write_bytes += len as u64;
            }
            Kind::Read => {
                let off = (self.rnd() as usize) % (SOURCE_LEN - len);
                self.p
                    .a
                    .post_read(
                        id,
                        self.source.rkey,
                        self.source.addr + off as u64,
                        vec![0u8; len],
                    )
                    .unwrap();
                self.reads.insert(id, (off, len));
                self.read_bytes += len as u64;
            }
        }
        self.outstanding.push_back((id, kind));
    }

    /// Check every completion on both sides.
    fn verify(&mut self) {
        while let Some(c) = self.p.b().poll_completion() {
            assert_eq!(c.status, WcStatus::Success, "pair {}: {c:?}", self.seed);
            let (id, kind, len, slot) = self.b_expect.pop_front().expect("expected a message");
            let want = pattern(self.seed << 32 | id, len);
            match kind {
                Kind::Send => {
                    assert_eq!(c.op, WcOp::Recv);
                    assert_eq!(c.byte_len as usize, len);
                    let buf = c.buf.expect("buffer back");
                    assert_eq!(&buf[..len], &want[..], "pair {} SEND {id}", self.seed);
                    self.recv_returned += 1;
                    self.post_recv();
                }
                Kind::Write => {
                    assert_eq!(c.op, WcOp::RecvRdmaWithImm);
                    assert_eq!(c.imm, Some(id as u32));
                    assert_eq!(c.byte_len as usize, len);
                    let r = self.p.b().mr_bytes(self.target.rkey).unwrap();
                    let at = slot * MAX_SIZE;
                    assert_eq!(&r[at..at + len], &want[..], "pair {} WRITE {id}", self.seed);
                }
                Kind::Read => unreachable!(),
            }
            self.bytes_verified += len as u64;
        }
        while let Some(c) = self.p.a.poll_completion() {
            assert_eq!(c.status, WcStatus::Success, "pair {}: {c:?}", self.seed);
            let pos = self
                .outstanding
                .iter()
                .position(|&(id, _)| id == c.wr_id)
                .expect("completion for a posted work request");
            let (_, kind) = self.outstanding.remove(pos).unwrap();
            if kind == Kind::Read {
                assert_eq!(c.op, WcOp::RdmaRead);
                let (off, len) = self.reads.remove(&c.wr_id).unwrap();
                let buf = c.buf.expect("sink back");
                assert_eq!(buf.len(), len);
                assert_eq!(
                    buf,
                    &self.source_bytes[off..off + len],
                    "pair {} READ",
                    self.seed
                );
                self.bytes_verified += len as u64;
            }
            self.messages_done += 1;
        }
    }

    fn run_for(&mut self, steps: usize, post: bool) {
        for _ in 0..steps {
            if post {
                while self.outstanding.len() < DEPTH {
                    self.post_one();
                }
            }
            let deadline = self.p.now + Duration::from_secs(1);
            self.p.step(deadline);
            self.verify();
        }
    }
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = s.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4
}

#[test]
fn soak_64_connections_mixed_messages_memory_flat() {
    let secs: u64 = std::env::var("SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let busy_for = Duration::from_secs(secs);
    let warmup = busy_for / 5;
    let wall = Instant::now();
    let mut pairs: Vec<Busy> = (0..PAIRS as u64).map(Busy::new).collect();
    let mut samples: Vec<(f64, u64)> = Vec::new();
    let mut next_sample = warmup;
    let mut rounds = 0u64;
    while wall.elapsed() < busy_for {
        for b in pairs.iter_mut() {
            b.run_for(50, true);
        }
        rounds += 1;
        if wall.elapsed() >= next_sample {
            samples.push((wall.elapsed().as_secs_f64(), rss_kib()));
            next_sample += Duration::from_secs(1).min(busy_for / 10);
        }
    }
    // Drain: no new messages; everything outstanding completes.
    for b in pairs.iter_mut() {
        let mut guard = 0;
        while !b.outstanding.is_empty() || !b.b_expect.is_empty() {
            b.run_for(100, false);
            guard += 1;
            assert!(guard < 10_000, "pair {} did not drain", b.seed);
        }
    }
    // Close both ends; wait for CLOSED (TIME-WAIT is 5 s of virtual time here).
    for b in pairs.iter_mut() {
        b.p.a.close();
        b.p.b().close();
        let done = b.p.run_until(Duration::from_secs(120), |p| {
            p.a.state() == State::Closed && p.b.as_ref().unwrap().state() == State::Closed
        });
        assert!(
            done,
            "pair {} did not close: {:?} {:?}",
            b.seed, b.p.a, b.p.b
        );
    }
    let mut msgs = 0;
    let mut bytes = 0;
    let mut virt = Duration::ZERO;
    let mut retrans = 0;
    for b in pairs.iter_mut() {
        // Framer empty, every message completed on both sides.
        assert_eq!(b.p.a.send_backlog(), 0);
        assert_eq!(b.p.b().send_backlog(), 0);
        assert!(b.outstanding.is_empty() && b.b_expect.is_empty() && b.reads.is_empty());
        assert!(b.p.a.poll_completion().is_none());
        // Placement counters: one copy per byte; B placed at least every SEND/WRITE byte (and
        // the 16-byte READ requests), A placed exactly the READ bytes.
        let cb = b.p.b().placement_counters();
        let ca = b.p.a.placement_counters();
        assert_eq!(cb.bytes_copied, cb.bytes_placed);
        assert_eq!(ca.bytes_copied, ca.bytes_placed);
        assert!(cb.bytes_placed >= b.send_write_bytes, "{cb:?}");
        assert_eq!(ca.bytes_placed, b.read_bytes, "{ca:?}");
        // The remaining posted receives: releasing the closed connection flushes them back.
        assert!(
            b.p.b().poll_completion().is_none(),
            "no completion left behind"
        );
        b.p.b().abort();
        while let Some(c) = b.p.b().poll_completion() {
            assert_eq!(c.status, WcStatus::WrFlushError);
            assert_eq!(c.op, WcOp::Recv);
            assert_eq!(c.buf.map(|v| v.len()), Some(MAX_SIZE));
            b.recv_flushed += 1;
        }
        assert_eq!(
            b.recv_posted,
            b.recv_returned + b.recv_flushed,
            "pair {}: every receive buffer came back",
            b.seed
        );
        msgs += b.messages_done;
        bytes += b.bytes_verified;
        virt = virt.max(b.p.now);
        retrans += b.p.a.recovery_stats().retransmits + b.p.b().recovery_stats().retransmits;
    }
    let first = samples.first().map_or(0, |s| s.1);
    let last = samples.last().map_or(0, |s| s.1);
    let max = samples.iter().map(|s| s.1).max().unwrap_or(0);
    eprintln!(
        "soak: {PAIRS} pairs, {secs} s busy, {rounds} rounds, {msgs} messages, {bytes} bytes \
         verified, {retrans} retransmissions, max virtual time {virt:?}, wall {:?}; RSS KiB after \
         warm-up: first {first}, last {last}, max {max}; samples {samples:?}",
        wall.elapsed()
    );
    assert!(msgs > 1000, "the soak did some work");
    assert!(samples.len() >= 3);
    // Flat memory: after warm-up RSS may not grow by more than 8 MiB (or 10%).
    let allowed = (8 * 1024).max(first / 10);
    assert!(
        max.saturating_sub(first) <= allowed,
        "RSS grew from {first} to {max} KiB after warm-up"
    );
}
