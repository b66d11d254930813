//! Soak: 32 pairs (64 connections) over impaired simulated links kept busy with mixed messages
//! (SEND, RDMA WRITE with immediate, RDMA READ; 1 B – 64 KiB) for a fixed number of rounds; every
//! byte is checked, process RSS is sampled at fixed round counts after a warm-up and must stay
//! flat, and at the end every connection is closed and checked: all receive buffers returned
//! through completions, every message completed, send queues empty, placement counters
//! consistent.
//!
//! The work is bounded, not the wall time: a round is 50 simulator steps of every pair, the
//! simulator runs in virtual time and is deterministic per seed, so every figure but the RSS and
//! the wall time is the same on any machine. `SOAK_ROUNDS` (default [`DEFAULT_ROUNDS`]) runs it
//! longer; docs/reliability.md has the figures.
//!
//! This is the only test in this binary on purpose: it measures the process's resident set size,
//! which means nothing while other tests allocate in the same process.

use bth_framer::{WorkRequest, WrOp};
use bth_io::sim::{LinkConfig, Pair};
use bth_placement::{Access, MrHandle, WcStatus};
use bth_tests::rss::rss_bytes;
use bth_tests::*;
use bytes::Bytes;
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use tcp_bth::{State, WcOp};

const PAIRS: usize = 32;
const DEPTH: usize = 6;
const MAX_SIZE: usize = 64 * 1024;
const RECV_DEPTH: usize = 8;
const SOURCE_LEN: usize = 1 << 20;
const WRITE_SLOTS: usize = 2 * DEPTH;
/// Rounds of the busy phase unless `SOAK_ROUNDS` says otherwise (10–15 s in the test profile
/// on the shared 2-core development machine).
const DEFAULT_ROUNDS: u64 = 1500;
/// Simulator steps per pair per round.
const STEPS_PER_ROUND: usize = 50;
/// RSS samples after the warm-up (plus one at the end of the busy phase).
const RSS_SAMPLES: u64 = 16;
const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

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

fn rss() -> u64 {
    rss_bytes().expect("measuring RSS (the soak's flat-memory check cannot run without it)")
}

#[test]
fn soak_64_connections_mixed_messages_memory_flat() {
    let rounds: u64 = match std::env::var("SOAK_ROUNDS") {
        Ok(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("SOAK_ROUNDS={s:?} is not a number of rounds")),
        Err(_) => DEFAULT_ROUNDS,
    };
    // Fewer rounds would put the first RSS sample inside the allocator's warm-up (RSS still
    // climbing towards its plateau), so SOAK_ROUNDS only makes the soak longer.
    assert!(
        rounds >= DEFAULT_ROUNDS,
        "SOAK_ROUNDS={rounds}: at least {DEFAULT_ROUNDS} (SOAK_ROUNDS runs the soak longer)"
    );
    // RSS is sampled after the warm-up (the first fifth of the rounds), every `every` rounds,
    // and after the last round: fixed round counts, the same on any machine.
    let warmup = rounds / 5;
    let every = ((rounds - warmup) / RSS_SAMPLES).max(1);
    let sample_at = |r: u64| r == rounds || (r >= warmup && (r - warmup).is_multiple_of(every));
    let expected_samples = (1..=rounds).filter(|&r| sample_at(r)).count();
    let wall = Instant::now();
    let mut pairs: Vec<Busy> = (0..PAIRS as u64).map(Busy::new).collect();
    // (round, RSS bytes)
    let mut samples: Vec<(u64, u64)> = Vec::new();
    for round in 1..=rounds {
        for b in pairs.iter_mut() {
            b.run_for(STEPS_PER_ROUND, true);
        }
        if sample_at(round) {
            samples.push((round, rss()));
        }
    }
    let busy_wall = wall.elapsed();
    let busy_virt = pairs.iter().map(|b| b.p.now).max().unwrap();
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
    let posted: u64 = pairs.iter().map(|b| b.next_msg).sum();
    let posted_bytes: u64 = pairs
        .iter()
        .map(|b| b.send_write_bytes + b.read_bytes)
        .sum();
    let first = samples[0].1;
    let last = samples[samples.len() - 1].1;
    let max = samples.iter().map(|s| s.1).max().unwrap();
    let kib: Vec<(u64, u64)> = samples.iter().map(|&(r, b)| (r, b / KIB)).collect();
    eprintln!(
        "soak: {PAIRS} pairs, {rounds} rounds ({STEPS_PER_ROUND} steps per pair each), {msgs} \
         messages, {bytes} bytes verified, {retrans} retransmissions, virtual time per pair at \
         the end of the busy phase ≤ {busy_virt:?}, at the end ≤ {virt:?} (5 s TIME-WAIT), wall \
         {:?} ({busy_wall:?} busy); RSS KiB after warm-up ({warmup} rounds): first {}, last {}, \
         max {}; samples (round, KiB) {kib:?}",
        wall.elapsed(),
        first / KIB,
        last / KIB,
        max / KIB,
    );
    // Everything posted completed and was checked; none of this depends on machine speed.
    assert_eq!(msgs, posted, "every posted message completed");
    assert_eq!(bytes, posted_bytes, "every posted byte was verified");
    assert!(
        msgs >= rounds,
        "the soak did some work: {msgs} messages in {rounds} rounds"
    );
    assert_eq!(samples.len(), expected_samples);
    assert!(samples.len() >= 2);
    // Flat memory: after warm-up RSS may not grow by more than 8 MiB (or 10%).
    let allowed = (8 * MIB).max(first / 10);
    assert!(
        max.saturating_sub(first) <= allowed,
        "RSS grew from {} to {} KiB after warm-up: {kib:?}",
        first / KIB,
        max / KIB
    );
}
