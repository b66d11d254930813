//! Attack resistance: remote memory protection (rkey, rights, bounds, deregistration while
//! segments are in flight), RFC 5961 blind-injection defences, bounded state whatever the peer
//! sends, `Endpoint` half-open expiry, and ISN unpredictability. See docs/reliability.md. (The SYN
//! flood against the `Endpoint` is in syn_flood_memory.rs: it measures RSS, so it runs alone.)

use bth_framer::WorkRequest;
use bth_io::sim::pair::{A_PORT, B_PORT};
use bth_io::sim::{pair_configs, Pair};
use bth_placement::{Access, MrHandle, WcStatus};
use bth_tests::*;
use std::time::Duration;
use tcp_bth::wire::{
    Bth, Extension, IpPair, MsgClass, NakCode, Opcode, Reth, SackBlock, TcpFlags, TcpOptions,
    TcpRepr, Timestamps,
};
use tcp_bth::{
    Completion, Connection, ConnectionError, Endpoint, EndpointConfig, Mode, State, WcOp,
};

const SEC: Duration = Duration::from_secs(1);
const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);

fn a_ip() -> IpPair {
    pair_configs(0).0.ip
}

fn bth_pair(seed: u64) -> Pair {
    let (a, b) = configs(seed, |_, _| {});
    let p = established(a, b, quiet_link());
    assert!(matches!(p.a.mode(), Mode::Bth { .. }));
    p
}

fn completions(c: &mut Connection) -> Vec<Completion> {
    std::iter::from_fn(|| c.poll_completion()).collect()
}

/// B's memory for the access tests: a writable region, a read-only canary, a posted receive.
struct Setup {
    p: Pair,
    good: MrHandle,
    canary: MrHandle,
    canary_bytes: Vec<u8>,
    first_msg: Vec<u8>,
    first_write: Vec<u8>,
}

/// An established pair where A has already delivered one SEND and one WRITE_WITH_IMM to B
/// successfully (the "earlier messages" that must stay intact).
fn setup(seed: u64) -> Setup {
    let mut p = bth_pair(seed);
    let good = p.b().register_mr(vec![0u8; 64 * 1024], RW).unwrap();
    let canary_bytes = pattern(seed + 100, 32 * 1024);
    let canary = p
        .b()
        .register_mr(
            canary_bytes.clone(),
            Access::LOCAL_WRITE | Access::REMOTE_READ,
        )
        .unwrap();
    for i in 0..4 {
        p.b().post_recv(10 + i, vec![0u8; 8192]).unwrap();
    }
    let first_msg = pattern(seed, 5000);
    let first_write = pattern(seed + 1, 10_000);
    p.a.post_send(WorkRequest::send(1, first_msg.to_vec(), None))
        .unwrap();
    p.a.post_send(WorkRequest::write(
        2,
        good.rkey,
        good.addr,
        first_write.to_vec(),
        Some(77),
    ))
    .unwrap();
    let mut got = Vec::new();
    assert!(p.run_until(5 * SEC, |p| {
        got.extend(completions(p.b()));
        got.len() == 2
    }));
    assert_eq!(got[0].op, WcOp::Recv);
    assert_eq!(got[0].status, WcStatus::Success);
    assert_eq!(&got[0].buf.as_ref().unwrap()[..5000], &first_msg[..]);
    assert_eq!(got[1].op, WcOp::RecvRdmaWithImm);
    assert_eq!(got[1].imm, Some(77));
    assert_eq!(
        &p.b().mr_bytes(good.rkey).unwrap()[..10_000],
        &first_write[..]
    );
    completions(&mut p.a);
    Setup {
        p,
        good,
        canary,
        canary_bytes,
        first_msg,
        first_write,
    }
}

/// After an access violation at B: B is in the error state with `RemoteAccess`, every region is
/// as it was, the remaining posted receives come back flushed, A sees the reset and its
/// outstanding work completes with a flush error.
fn assert_access_error(s: &mut Setup, bad_wr: u64) {
    let Setup {
        p,
        good,
        canary,
        canary_bytes,
        first_write,
        ..
    } = s;
    p.run_until(5 * SEC, |p| p.a.state() == State::Closed);
    let b = p.b.as_mut().unwrap();
    assert_eq!(b.error(), Some(ConnectionError::RemoteAccess));
    assert_eq!(b.state(), State::Closed);
    // Earlier WRITE intact, nothing else written.
    let region = b.mr_bytes(good.rkey).unwrap();
    assert_eq!(&region[..first_write.len()], &first_write[..]);
    assert!(region[first_write.len()..].iter().all(|&x| x == 0));
    assert_eq!(b.mr_bytes(canary.rkey).unwrap(), &canary_bytes[..]);
    let c = b.placement_counters();
    assert_eq!(c.bytes_copied, c.bytes_placed);
    assert!(c.access_errors >= 1, "{c:?}");
    // Flush: the three receives not consumed come back with their buffers, untouched.
    let bc = completions(b);
    let flushed: Vec<_> = bc
        .iter()
        .filter(|c| c.status == WcStatus::WrFlushError && c.op == WcOp::Recv)
        .collect();
    assert_eq!(flushed.len(), 3, "{bc:?}");
    for f in flushed {
        assert!(f.buf.as_ref().unwrap().iter().all(|&x| x == 0));
    }
    assert!(bc.iter().all(|c| c.status != WcStatus::Success));
    // A: B's RST carries a NAK naming the bad WRITE, which completes with a remote access
    // error (IB RC); anything after it is flushed.
    assert_peer_nak(&p.a, NakCode::RemoteAccess, MsgClass::Write);
    let ac = completions(&mut p.a);
    let bad = ac
        .iter()
        .find(|c| c.wr_id == bad_wr)
        .expect("bad WRITE completes");
    assert_eq!(bad.status, WcStatus::RemoteAccessError, "{ac:?}");
    assert!(
        ac.iter()
            .filter(|c| c.wr_id != bad_wr)
            .all(|c| c.status == WcStatus::Success || c.status == WcStatus::WrFlushError),
        "{ac:?}"
    );
}

/// A posts WRITE 3, `len` bytes of pattern 9, to B's region `rkey` at `addr`; returns the bytes.
fn post_bad_write(s: &mut Setup, rkey: u32, addr: u64, len: usize) -> Vec<u8> {
    let data = pattern(9, len);
    s.p.a
        .post_send(WorkRequest::write(3, rkey, addr, data.clone(), None))
        .unwrap();
    data
}

/// WRITE 3 of `len` bytes to B's region `rkey` at `addr` ends in an access error
/// ([`assert_access_error`]).
fn assert_write_refused(s: &mut Setup, rkey: u32, addr: u64, len: usize) {
    post_bad_write(s, rkey, addr, len);
    assert_access_error(s, 3);
}

#[test]
fn write_with_wrong_rkey_is_a_remote_access_error() {
    let mut s = setup(1);
    let bad_rkey = s.good.rkey ^ 0x01; // same slot, wrong key byte
    let addr = s.good.addr + 20_000;
    let data = post_bad_write(&mut s, bad_rkey, addr, 3000);
    // A SEND behind it must not land either.
    s.p.a.post_send(WorkRequest::send(4, data, None)).unwrap();
    assert_access_error(&mut s, 3);
    let _ = (&s.first_msg, s.canary);
}

#[test]
fn write_to_region_without_remote_write_is_refused() {
    let mut s = setup(2);
    let (rkey, addr) = (s.canary.rkey, s.canary.addr);
    assert_write_refused(&mut s, rkey, addr, 3000);
}

#[test]
fn write_out_of_bounds_is_refused() {
    for (i, off) in [
        64 * 1024 - 100, // runs 2900 bytes past the end
        64 * 1024,       // starts one past the end (the guard page)
    ]
    .into_iter()
    .enumerate()
    {
        let mut s = setup(3 + i as u64);
        let (rkey, addr) = (s.good.rkey, s.good.addr + off);
        assert_write_refused(&mut s, rkey, addr, 3000);
    }
}

#[test]
fn write_below_region_and_address_overflow_are_refused() {
    for (i, addr) in [
        None,    // one byte below the base
        Some(0), // far below every region
    ]
    .into_iter()
    .enumerate()
    {
        let mut s = setup(10 + i as u64);
        let (rkey, addr) = (s.good.rkey, addr.unwrap_or(s.good.addr - 1));
        assert_write_refused(&mut s, rkey, addr, 100);
    }
}

#[test]
fn write_whose_address_range_wraps_is_refused() {
    let mut s = setup(15);
    // Our own framer refuses to build it...
    let data = pattern(9, 100);
    let err =
        s.p.a
            .post_send(WorkRequest::write(
                3,
                s.good.rkey,
                u64::MAX - 10,
                data.to_vec(),
                None,
            ))
            .unwrap_err();
    assert!(format!("{err}").contains("wrap") || format!("{err:?}").contains("Wraps"));
    // ...so a hostile peer forges it: RETH addr = 2^64 - 11, 100 bytes (addr + len overflows).
    let forged = Forge {
        op: Opcode::RdmaWriteOnly,
        msn: 1, // the setup's WRITE was MSN 0: a reused MSN is a duplicate, dropped unplaced
        reth: Reth {
            rkey: s.good.rkey,
            addr: u64::MAX - 10,
        },
        payload: data,
        ..Forge::new(&mut s.p)
    };
    let now = s.p.now;
    forged.send_to_b(&mut s.p, now);
    let b = s.p.b();
    assert_eq!(b.error(), Some(ConnectionError::RemoteAccess));
    assert_eq!(b.state(), State::Closed);
    assert!(b.placement_counters().access_errors >= 1);
    let region = b.mr_bytes(s.good.rkey).unwrap();
    assert_eq!(&region[..s.first_write.len()], &s.first_write[..]);
    assert!(region[s.first_write.len()..].iter().all(|&x| x == 0));
    assert_eq!(b.mr_bytes(s.canary.rkey).unwrap(), &s.canary_bytes[..]);
    let flushed = completions(b)
        .into_iter()
        .filter(|c| c.status == WcStatus::WrFlushError)
        .count();
    assert_eq!(flushed, 3);
}

#[test]
fn read_from_region_without_remote_read_is_refused() {
    let mut s = setup(20);
    // `good` is LOCAL_WRITE | REMOTE_WRITE only.
    let (rkey, addr) = (s.good.rkey, s.good.addr);
    s.p.a.post_read(3, rkey, addr, vec![0u8; 4000]).unwrap();
    s.p.run_until(5 * SEC, |p| p.a.state() == State::Closed);
    let b = s.p.b.as_mut().unwrap();
    assert_eq!(b.error(), Some(ConnectionError::RemoteAccess));
    assert!(b.placement_counters().access_errors >= 1);
    assert!(
        b.stats().bytes_sent < 16 * 1024,
        "no READ response was sent"
    );
    assert_peer_nak(&s.p.a, NakCode::RemoteAccess, MsgClass::ReadRequest);
    let ac = completions(&mut s.p.a);
    let read = ac.iter().find(|c| c.wr_id == 3).expect("READ completes");
    assert_eq!(read.op, WcOp::RdmaRead);
    assert_eq!(read.status, WcStatus::RemoteAccessError);
    // The sink comes back, never written.
    assert!(read.buf.as_ref().unwrap().iter().all(|&x| x == 0));
    // A READ of the canary (REMOTE_READ) would have worked: the check is the right, not the rkey.
    let _ = s.canary;
}

#[test]
fn read_out_of_bounds_is_refused() {
    let mut s = setup(21);
    let (rkey, addr) = (s.canary.rkey, s.canary.addr);
    s.p.a
        .post_read(3, rkey, addr + 32 * 1024 - 10, vec![0u8; 100])
        .unwrap();
    s.p.run_until(5 * SEC, |p| p.a.state() == State::Closed);
    assert_eq!(s.p.b().error(), Some(ConnectionError::RemoteAccess));
    assert_peer_nak(&s.p.a, NakCode::RemoteAccess, MsgClass::ReadRequest);
    let ac = completions(&mut s.p.a);
    let read = ac.iter().find(|c| c.wr_id == 3).expect("READ completes");
    assert_eq!(read.status, WcStatus::RemoteAccessError);
}

#[test]
fn deregistered_region_is_never_written_after_deregistration() {
    let mut s = setup(30);
    // A big WRITE to a second region; deregister it at B while segments are on the link.
    let victim = s.p.b().register_mr(vec![0u8; 1 << 20], RW).unwrap();
    let data = pattern(31, 1 << 20);
    s.p.a
        .post_send(WorkRequest::write(
            3,
            victim.rkey,
            victim.addr,
            data.to_vec(),
            None,
        ))
        .unwrap();
    let started = s.p.run_until(5 * SEC, |p| {
        p.link.in_flight() > 4 && p.b.as_ref().unwrap().placement_counters().bytes_placed > 0
    });
    assert!(started, "WRITE segments in flight");
    assert!(s.p.link.in_flight() > 0);
    let returned = s.p.b().deregister_mr(victim.rkey).unwrap();
    let snapshot = returned.clone();
    let placed_before = s.p.b().placement_counters().bytes_placed;
    assert!(placed_before < 1 << 20, "deregistered mid-transfer");
    // A new region registered now (possibly in the freed slot) must not receive the bytes
    // addressed with the stale rkey.
    let fresh = s.p.b().register_mr(vec![0u8; 1 << 20], RW).unwrap();
    assert_ne!(fresh.rkey, victim.rkey);
    assert_access_error(&mut s, 3);
    let b = s.p.b.as_mut().unwrap();
    assert_eq!(returned, snapshot, "deregistered memory changed");
    // What had landed before deregistration is the WRITE's prefix; nothing after it.
    let landed = returned.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
    assert!(landed as u64 <= placed_before + 4096);
    assert!(b.mr_bytes(fresh.rkey).unwrap().iter().all(|&x| x == 0));
    assert!(b.mr_bytes(victim.rkey).is_none());
    assert_eq!(b.placement_counters().bytes_placed, placed_before);
}

// ---- RFC 5961 and blind injection ----

/// A forged segment to B's port, checksummed: "from A" ([`Forge::new`]), or from anyone
/// ([`Forge::bare`]). In BTH mode it carries a valid option (pure ACK opcode, or `op` with
/// payload, and `reth` where the opcode has one) so it passes the checks before the ones under
/// test.
#[derive(Clone)]
struct Forge {
    ip: IpPair,
    src_port: u16,
    seq: u32,
    ack: u32,
    flags: TcpFlags,
    payload: Vec<u8>,
    bth: bool,
    op: Opcode,
    msn: u16,
    tsval: u32,
    sack: Option<(u32, u32)>,
    reth: Reth,
}

impl Forge {
    /// From `src_port` over `ip`: `flags`, no ACK number, no options, no payload.
    fn bare(ip: IpPair, src_port: u16, seq: u32, flags: TcpFlags) -> Forge {
        Forge {
            ip,
            src_port,
            seq,
            ack: 0,
            flags,
            payload: Vec::new(),
            bth: false,
            op: Opcode::Acknowledge,
            msn: 0,
            tsval: 0,
            sack: None,
            reth: Reth { rkey: 0, addr: 0 },
        }
    }

    /// From A, in window: at A's SND.NXT, acknowledging its RCV.NXT, a little after A's clock.
    fn new(p: &mut Pair) -> Forge {
        let (_, a_nxt, a_rcv) = p.a.seq_state();
        Forge {
            ack: a_rcv,
            bth: matches!(p.a.mode(), Mode::Bth { .. }),
            tsval: p.a.tsval_at(p.now).wrapping_add(10),
            ..Forge::bare(a_ip(), A_PORT, a_nxt, TcpFlags::ACK)
        }
    }

    /// As [`Forge::new`], stamped with A's clock at `now`.
    fn at(p: &mut Pair, now: Duration) -> Forge {
        Forge {
            tsval: p.a.tsval_at(now),
            ..Forge::new(p)
        }
    }

    /// A blind RST from A, without the option.
    fn rst(p: &mut Pair, seq: u32) -> Forge {
        Forge {
            seq,
            flags: TcpFlags::RST,
            bth: false,
            ..Forge::new(p)
        }
    }

    /// Hands it to B's connection.
    fn send_to_b(&self, p: &mut Pair, now: Duration) {
        p.b().handle_segment(now, &self.bytes());
    }

    fn bytes(&self) -> Vec<u8> {
        let bth = self.bth.then(|| {
            let mut b = Bth::new(self.op);
            b.msn = self.msn;
            b.timestamps = Some(Timestamps {
                tsval: self.tsval,
                tsecr: 0,
            });
            if matches!(self.op.extension(), tcp_bth::wire::ExtensionKind::Reth) {
                b.ext = Extension::Reth(self.reth);
            }
            b.seal(&self.payload);
            b
        });
        let mut options = TcpOptions {
            bth,
            ..TcpOptions::default()
        };
        if let Some((l, r)) = self.sack {
            options.sack.push(SackBlock { left: l, right: r });
        }
        TcpRepr {
            src_port: self.src_port,
            dst_port: B_PORT,
            seq: self.seq,
            ack: self.ack,
            flags: self.flags,
            window: 0xffff,
            urgent: 0,
            options,
            payload: &self.payload,
        }
        .to_vec(self.ip)
        .unwrap()
    }
}

/// Drain B's output; returns how many segments it sent.
fn drain_b(p: &mut Pair) -> usize {
    let now = p.now;
    std::iter::from_fn(|| p.b().poll_transmit(now)).count()
}

/// B sends a WRITE of `len` bytes (pattern `seed`) into a region of A's, all of it at once and
/// none delivered yet: B's (SND.UNA, SND.NXT).
fn b_write_in_flight(p: &mut Pair, seed: u64, len: usize) -> (u32, u32) {
    let h = p.a.register_mr(vec![0u8; len], RW).unwrap();
    p.b()
        .post_send(WorkRequest::write(
            1,
            h.rkey,
            h.addr,
            pattern(seed, len),
            None,
        ))
        .unwrap();
    let now = p.now;
    while p.b().poll_transmit(now).is_some() {}
    let (una, nxt, _) = p.b().seq_state();
    (una, nxt)
}

#[test]
fn forged_send_is_placed_only_with_valid_seq_and_ack() {
    // The forgery is otherwise valid: with the right seq and ack it IS placed (control case).
    let mut p = bth_pair(40);
    p.b().post_recv(1, vec![0u8; 4096]).unwrap();
    drain_b(&mut p);
    let base = Forge::new(&mut p);
    let mk = |seq_add: u32, ack_add: u32| Forge {
        seq: base.seq.wrapping_add(seq_add),
        ack: base.ack.wrapping_add(ack_add),
        flags: TcpFlags::ACK,
        payload: vec![0xEE; 1000],
        bth: true,
        op: Opcode::SendOnly,
        msn: 0,
        tsval: base.tsval,
        sack: None,
        ..base.clone()
    };
    let now = p.now;
    let cases = [
        (1u32 << 31, 0u32, "seq far outside the window"),
        (0u32.wrapping_sub(5000), 0, "seq below RCV.NXT"),
        (0, 1 << 20, "ACK of data never sent"),
        (
            0,
            0u32.wrapping_sub(64 << 20),
            "ACK older than SND.UNA - MAX.SND.WND",
        ),
    ];
    for (seq_add, ack_add, what) in cases {
        let before = p.b().placement_counters();
        let (_, _, rcv) = p.b().seq_state();
        mk(seq_add, ack_add).send_to_b(&mut p, now);
        assert_eq!(
            p.b().placement_counters().bytes_placed,
            before.bytes_placed,
            "{what}"
        );
        assert_eq!(p.b().seq_state().2, rcv, "{what}: RCV.NXT moved");
        assert_eq!(p.b().state(), State::Established, "{what}");
        assert!(drain_b(&mut p) <= 1, "{what}: at most one ACK in answer");
    }
    mk(0, 0).send_to_b(&mut p, now);
    assert_eq!(
        p.b().placement_counters().bytes_placed,
        1000,
        "control: placed"
    );
}

#[test]
fn blind_rst_outside_window_or_below_rcv_nxt_is_ignored() {
    let mut p = bth_pair(41);
    let now = p.now;
    let base = Forge::new(&mut p);
    for seq in [
        base.seq.wrapping_sub(1),
        base.seq.wrapping_sub(1 << 20),
        base.seq.wrapping_add(1 << 30),
        base.seq.wrapping_add(0x8000_0000),
    ] {
        Forge::rst(&mut p, seq).send_to_b(&mut p, now);
        assert_eq!(p.b().state(), State::Established);
    }
    assert_eq!(p.b().stats().challenge_acks, 0);
    // In window but not exact: challenge ACK, no reset.
    Forge::rst(&mut p, base.seq.wrapping_add(100)).send_to_b(&mut p, now);
    assert_eq!(p.b().state(), State::Established);
    assert_eq!(p.b().stats().challenge_acks, 1);
}

#[test]
fn blind_syn_with_any_sequence_number_never_resets() {
    for bth in [true, false] {
        let (a, b) = configs(42, |a, b| {
            a.bth = bth;
            b.bth = bth;
        });
        let mut p = established(a, b, quiet_link());
        drain_b(&mut p);
        let base = Forge::new(&mut p);
        let mut now = p.now;
        for (i, seq) in [0u32, 1, 100, 1 << 20, 1 << 31, 0u32.wrapping_sub(1)]
            .into_iter()
            .enumerate()
        {
            now += Duration::from_millis(2);
            let f = Forge {
                seq: base.seq.wrapping_add(seq),
                flags: TcpFlags::SYN,
                ..Forge::at(&mut p, now)
            };
            f.send_to_b(&mut p, now);
            assert_eq!(p.b().state(), State::Established, "case {i}");
            assert!(p.b().error().is_none());
            // Answered by at most one ACK (challenge ACK in window, plain ACK outside).
            assert!(drain_b(&mut p) <= 1);
        }
        assert!(p.b().stats().challenge_acks >= 1, "bth={bth}");
        // The connection still works.
        p.now = now;
        if bth {
            p.b().post_recv(1, vec![0u8; 100]).unwrap();
            p.a.post_send(WorkRequest::send(1, [7u8; 100].to_vec(), None))
                .unwrap();
            assert!(p.run_until(5 * SEC, |p| p.b().poll_completion().is_some()));
        }
    }
}

#[test]
fn ack_of_unsent_data_and_too_old_ack_do_not_move_snd_una() {
    let mut p = bth_pair(43);
    // Give B data in flight towards A so that SND.UNA < SND.NXT.
    let (una, nxt) = b_write_in_flight(&mut p, 1, 40_000);
    let now = p.now;
    assert!(nxt.wrapping_sub(una) > 10_000);
    let base = Forge::new(&mut p);
    for (ack, what) in [
        (nxt.wrapping_add(1), "one past SND.NXT"),
        (nxt.wrapping_add(1 << 20), "far past SND.NXT"),
        (una.wrapping_sub(512 << 20), "below SND.UNA - MAX.SND.WND"),
    ] {
        let challenges = p.b().stats().challenge_acks;
        let f = Forge {
            ack,
            ..Forge::new(&mut p)
        };
        f.send_to_b(&mut p, now);
        assert_eq!(p.b().seq_state().0, una, "{what}: SND.UNA moved");
        assert_eq!(p.b().state(), State::Established);
        assert!(drain_b(&mut p) <= 1);
        let _ = (challenges, &base);
    }
    // A SACK block for unsent data is ignored (no scoreboard change, no panic).
    let f = Forge {
        ack: una,
        sack: Some((nxt.wrapping_add(10), nxt.wrapping_add(5000))),
        ..Forge::new(&mut p)
    };
    f.send_to_b(&mut p, now);
    assert_eq!(p.b().seq_state().0, una);
    // The real exchange still completes.
    assert!(p.run_until(5 * SEC, |p| p.b().seq_state().0 == p.b().seq_state().1));
}

#[test]
fn challenge_acks_are_rate_limited() {
    let mut p = bth_pair(44);
    drain_b(&mut p);
    let base = Forge::new(&mut p);
    let now = p.now;
    let mut out = 0;
    for i in 0..1000u32 {
        Forge::rst(&mut p, base.seq.wrapping_add(1 + i)).send_to_b(&mut p, now);
        out += drain_b(&mut p);
    }
    assert_eq!(p.b().stats().challenge_acks, 1, "1000 RSTs in one instant");
    assert_eq!(out, 1);
    // Spread over 2 s: one per 500 ms, the limit every answer to a dropped segment shares
    // (out of window, PAWS, challenges; Linux's tcp_invalid_ratelimit).
    let mut t = now;
    for i in 0..1000u32 {
        t += Duration::from_millis(2);
        Forge::rst(&mut p, base.seq.wrapping_add(1 + i)).send_to_b(&mut p, t);
    }
    let n = p.b().stats().challenge_acks;
    assert_eq!(
        n, 5,
        "{n} challenge ACKs: the burst's, then at 0.5, 1, 1.5 and 2 s"
    );
    assert_eq!(p.b().state(), State::Established);
}

// ---- bounded state whatever the peer sends ----

#[test]
fn out_of_order_ranges_are_bounded_in_bth_mode() {
    let (a, b) = configs(50, |_, b| b.max_ooo_ranges = 16);
    let mut p = established(a, b, quiet_link());
    let region = p.b().register_mr(vec![0u8; 1 << 20], RW).unwrap();
    let base = Forge::new(&mut p);
    let now = p.now;
    // 2000 one-segment WRITEs, each with a gap before it: each would open a new range.
    for i in 0..2000u32 {
        let f = Forge {
            seq: base.seq.wrapping_add(200 * (i + 1)),
            payload: vec![1u8; 100],
            bth: true,
            op: Opcode::RdmaWriteOnly,
            msn: (i % 512) as u16,
            reth: Reth {
                rkey: region.rkey,
                addr: region.addr + u64::from(i % 512) * 100,
            },
            ..base.clone()
        };
        f.send_to_b(&mut p, now);
        drain_b(&mut p);
    }
    let s = p.b().stats();
    assert!(s.ooo_table_full >= 2000 - 16 - 1, "{s:?}");
    assert!(s.ooo_placed <= 16, "{s:?}");
    assert_eq!(p.b().state(), State::Established);
    let c = p.b().placement_counters();
    assert_eq!(c.bytes_copied, c.bytes_placed);
}

#[test]
fn out_of_order_ranges_are_bounded_in_plain_mode() {
    let (a, b) = configs(51, |a, b| {
        a.bth = false;
        b.bth = false;
        b.max_ooo_ranges = 8;
    });
    let mut p = established(a, b, quiet_link());
    let base = Forge::new(&mut p);
    let mut now = p.now;
    for i in 0..5000u32 {
        now += Duration::from_micros(1);
        let f = Forge {
            seq: base.seq.wrapping_add(100 * (i % 1000 + 1)),
            payload: vec![2u8; 50],
            ..Forge::at(&mut p, now)
        };
        f.send_to_b(&mut p, now);
        drain_b(&mut p);
    }
    assert!(p.b().stats().ooo_table_full >= 4000);
    assert_eq!(p.b().readable_bytes(), 0);
    assert_eq!(p.b().state(), State::Established);
}

#[test]
fn hammering_acks_with_sacks_and_credit_keeps_the_sender_bounded() {
    let mut p = bth_pair(52);
    let (una, nxt) = b_write_in_flight(&mut p, 2, 1 << 20);
    let mut now = p.now;
    let mut x: u32 = 12345;
    for i in 0..20_000u32 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        now += Duration::from_nanos(100);
        let mut f = Forge::at(&mut p, now);
        f.ack = una;
        f.sack = Some((
            una.wrapping_add(x % 4_000_000),
            una.wrapping_add(x % 4_000_000 + i),
        ));
        let mut seg = f.bytes();
        if i % 2 == 0 {
            // Also claim absurd receive credit: rtr with an MSN far ahead and a huge grant.
            let mut b = Bth::new(Opcode::Acknowledge);
            b.rtr = true;
            b.msn = (x >> 16) as u16;
            b.mbo = 0xff_ffff;
            b.timestamps = Some(Timestamps {
                tsval: f.tsval,
                tsecr: 0,
            });
            b.seal(&[]);
            seg = TcpRepr {
                options: TcpOptions {
                    bth: Some(b),
                    ..TcpOptions::default()
                },
                ..TcpRepr::parse(&seg, None).unwrap()
            }
            .to_vec(a_ip())
            .unwrap();
        }
        p.b().handle_segment(now, &seg);
        while p.b().poll_transmit(now).is_some() {}
        let (u2, n2, _) = p.b().seq_state();
        assert_eq!(u2, una);
        // Flight never exceeds the 1 MiB message: nothing is invented by forged ACKs.
        assert!(u64::from(n2.wrapping_sub(u2)) <= 1 << 20);
        let _ = nxt;
    }
    assert_eq!(p.b().state(), State::Established);
    // And the real peer still gets everything.
    p.now = now;
    assert!(p.run_until(30 * SEC, |p| p.b().send_backlog() == 0));
}

// ---- Endpoint SYN queue (the SYN-flood test is alone in tests/tests/syn_flood_memory.rs: it measures RSS) ----

#[test]
fn endpoint_expires_half_open_connections() {
    let (_, b_cfg) = pair_configs(61);
    let mut l = endpoint(
        b_cfg,
        EndpointConfig {
            syn_timeout: Duration::from_secs(2),
            ..EndpointConfig::default()
        },
    );
    let mut buf = Vec::new();
    let ip = IpPair::V4 {
        src: [198, 18, 0, 1],
        dst: [10, 77, 0, 2],
    };
    let mut now = Duration::from_secs(1);
    for port in 0..500u16 {
        let syn = Forge::bare(ip, 2000 + port, 7, TcpFlags::SYN).bytes();
        l.handle_segment(now, ip, &syn);
    }
    assert_eq!(l.syn_queue_len(), 500);
    for _ in 0..100 {
        let Some(t) = l.poll_timeout() else { break };
        now = now.max(t);
        l.handle_timeout(now);
        while l.poll_transmit(now, &mut buf).is_some() {}
    }
    assert_eq!(l.syn_queue_len(), 0);
    assert!(now <= Duration::from_secs(4));
    assert_eq!(l.stats().syn_expired, 500);
}

/// An endpoint listening on B_PORT with `template` for its connections.
fn endpoint(template: tcp_bth::Config, cfg: EndpointConfig) -> Endpoint {
    let mut e = Endpoint::new(cfg);
    e.listen(B_PORT, template).expect("listen");
    e
}

// ---- ISN unpredictability (RFC 6528) ----

fn syn_ack_isn(l: &mut Endpoint, now: Duration, port: u16) -> u32 {
    let ip = IpPair::V4 {
        src: [10, 77, 0, 1],
        dst: [10, 77, 0, 2],
    };
    let syn = Forge::bare(ip, port, 1, TcpFlags::SYN).bytes();
    l.handle_segment(now, ip, &syn);
    let mut isn = None;
    let mut buf = Vec::new();
    while l.poll_transmit(now, &mut buf).is_some() {
        let r = TcpRepr::parse(&buf[20..], None).unwrap();
        if r.dst_port == port && r.flags.syn() {
            isn = Some(r.seq);
        }
    }
    isn.expect("SYN-ACK")
}

#[test]
fn isns_are_not_a_counter_and_depend_on_the_key() {
    let (_, b1) = pair_configs(70);
    let (_, b2) = pair_configs(71);
    let big = EndpointConfig {
        syn_queue: 1 << 16,
        ..EndpointConfig::default()
    };
    let mut l1 = endpoint(b1, big.clone());
    let mut l2 = endpoint(b2, big);
    const N: usize = 8192;
    let mut isn1 = Vec::with_capacity(N);
    let mut isn2 = Vec::with_capacity(N);
    for i in 0..N {
        // Consecutive ports, one connection every 4 µs of time.
        let now = Duration::from_secs(5) + Duration::from_micros(4 * i as u64);
        isn1.push(syn_ack_isn(&mut l1, now, 10_000 + i as u16));
        isn2.push(syn_ack_isn(&mut l2, now, 10_000 + i as u16));
    }
    // 1. Not a counter: consecutive differences are (almost) all distinct, and no difference
    //    repeats more than a few times (a counter gives one difference N times).
    let mut diffs: Vec<u32> = isn1.windows(2).map(|w| w[1].wrapping_sub(w[0])).collect();
    diffs.sort_unstable();
    let mut max_run = 1;
    let mut run = 1;
    for w in diffs.windows(2) {
        run = if w[0] == w[1] { run + 1 } else { 1 };
        max_run = max_run.max(run);
    }
    assert!(max_run <= 3, "a difference repeats {max_run} times");
    // 2. Uniform: chi-square of the top 4 bits over 16 buckets (15 dof; p = 0.001 at 37.7).
    let mut buckets = [0f64; 16];
    for &v in &isn1 {
        buckets[(v >> 28) as usize] += 1.0;
    }
    let e = N as f64 / 16.0;
    let chi2: f64 = buckets.iter().map(|&o| (o - e) * (o - e) / e).sum();
    assert!(chi2 < 37.7, "chi-square {chi2}");
    // 3. Each bit is set about half the time (N = 8192: ±5 sigma ≈ ±226).
    for bit in 0..32 {
        let ones = isn1.iter().filter(|&&v| v >> bit & 1 == 1).count() as i64;
        assert!((ones - N as i64 / 2).abs() < 226, "bit {bit}: {ones} ones");
    }
    // 4. Key dependence: same tuples and times, another key → unrelated ISNs (XOR has ~16 bits
    //    set on average, and no equal pairs to speak of).
    let equal = isn1.iter().zip(&isn2).filter(|(a, b)| a == b).count();
    assert!(equal <= 1);
    let mean_bits: f64 = isn1
        .iter()
        .zip(&isn2)
        .map(|(a, b)| f64::from((a ^ b).count_ones()))
        .sum::<f64>()
        / N as f64;
    assert!(
        (15.5..16.5).contains(&mean_bits),
        "mean XOR weight {mean_bits}"
    );
    // 5. Over time, for the same tuple, the ISN advances with the 4 µs clock (RFC 6528's M):
    //    a later connection's sequence space does not overlap an earlier one's.
    let (_, b3) = pair_configs(70);
    let mut l3 = endpoint(b3, EndpointConfig::default());
    let t0 = syn_ack_isn(&mut l3, Duration::from_secs(5), 10_000);
    assert_eq!(t0, isn1[0]);
}

#[test]
fn second_fin_does_not_advance_rcv_nxt() {
    // Found by the conn_receive fuzz target: after the peer's FIN was consumed (CLOSE-WAIT), a
    // further FIN at RCV.NXT moved RCV.NXT by one more, over sequence space never sent.
    for bth in [true, false] {
        let (a, b) = configs(80, |a, b| {
            a.bth = bth;
            b.bth = bth;
        });
        let mut p = established(a, b, quiet_link());
        p.a.close();
        assert!(p.run_until(5 * SEC, |p| p.b().state() == State::CloseWait));
        let (_, _, rcv) = p.b().seq_state();
        let now = p.now + Duration::from_millis(1);
        for k in 0..3u32 {
            let f = Forge {
                seq: rcv.wrapping_add(k),
                flags: TcpFlags::ACK | TcpFlags::FIN,
                ..Forge::at(&mut p, now)
            };
            f.send_to_b(&mut p, now);
            assert_eq!(p.b().seq_state().2, rcv, "bth={bth} k={k}: RCV.NXT moved");
            assert_eq!(p.b().state(), State::CloseWait);
        }
    }
}

/// The requester failed because the responder NAKed one of its messages with `code`.
fn assert_peer_nak(c: &Connection, code: NakCode, class: MsgClass) {
    match c.error() {
        Some(ConnectionError::PeerNak(n)) => {
            assert_eq!((n.code, n.class()), (code, Some(class)), "{n}");
        }
        other => panic!("expected a NAK, got {other:?}"),
    }
    assert_eq!(c.stats().naks_received, 1);
}
