//! S framing (amendment 3) end to end over the core's `BackToBack`: the hellos negotiate it (S only
//! when both ends ask, kept across a lost SYN and a lost SYN-ACK), every BTH option of an S
//! connection says so and every option of a per-segment one does not, and a SEND, a WRITE with
//! immediate and a READ complete in both framings through a filter that drops, duplicates
//! and reorders segments.

use super::*;
use crate::config::Framing;
use crate::wire::{Bth, TcpRepr};
use bth_placement::{Access, WcStatus};
use std::cell::RefCell;
use std::collections::HashMap;

const FRAMINGS: [Framing; 2] = [Framing::PerSegment, Framing::Seq];

fn configs_with(fa: Framing, fb: Framing) -> (Config, Config) {
    let (mut a, mut b) = configs(true);
    a.framing = fa;
    b.framing = fb;
    (a, b)
}

/// The BTH option of a segment, if it has one.
fn bth_of(p: &[u8]) -> Option<Bth> {
    TcpRepr::parse(p, None).ok().and_then(|s| s.options.bth)
}

/// A connects with framing `fa` to B with framing `fb`. A's first SYN is lost (its
/// retransmission must repeat the offer) and so is B's first SYN-ACK (its retransmission must
/// repeat the answer). Returns the pair and the S bit of every hello: A's SYNs, B's SYN-ACKs.
fn handshake(fa: Framing, fb: Framing) -> (BackToBack, Vec<bool>, Vec<bool>) {
    let (ac, bc) = configs_with(fa, fb);
    let mut now = MS;
    let mut a = Connection::connect(ac, now);
    let lost = a.poll_transmit(now).expect("connect sends a SYN");
    let mut syns = vec![bth_of(&lost).expect("a hello").seq_framed];
    now = a.poll_timeout().expect("the SYN is timed");
    a.handle_timeout(now);
    let syn = a.poll_transmit(now).expect("the SYN again");
    let hello = bth_of(&syn).expect("a hello");
    assert_eq!(hello.opcode, Opcode::Hello);
    syns.push(hello.seq_framed);
    let b = Connection::accept(bc, now, &syn).expect("B accepts A's SYN");
    let mut d = BackToBack::new(a, b, now);
    let synacks = RefCell::new(Vec::new());
    let ok = d.run(
        Duration::from_secs(10),
        |dir, _, p| {
            let s = TcpRepr::parse(&p, None).unwrap();
            if dir == Direction::BtoA && s.flags.syn() {
                let hello = s.options.bth.expect("BTH answers BTH");
                assert_eq!(hello.opcode, Opcode::Hello);
                synacks.borrow_mut().push(hello.seq_framed);
                if synacks.borrow().len() == 1 {
                    return None;
                }
            }
            Some(p)
        },
        |d| d.a.is_established() && d.b.is_established(),
    );
    assert!(ok, "handshake {fa:?}/{fb:?}: {:?} {:?}", d.a, d.b);
    (d, syns, synacks.into_inner())
}

#[test]
fn s_only_when_both_ends_ask() {
    for fa in FRAMINGS {
        for fb in FRAMINGS {
            let both = fa == Framing::Seq && fb == Framing::Seq;
            let (mut d, syns, synacks) = handshake(fa, fb);
            assert_eq!(
                (d.a.seq_framed(), d.b.seq_framed()),
                (both, both),
                "A {fa:?}, B {fb:?}"
            );
            assert!(matches!(d.a.mode(), Mode::Bth { .. }));
            // The SYN offers what A asks, unchanged when retransmitted; the SYN-ACK accepts
            // only an offer B wants, also when retransmitted.
            assert_eq!(syns, [fa == Framing::Seq; 2], "A {fa:?}, B {fb:?}");
            assert!(synacks.len() >= 2, "{synacks:?}");
            assert!(synacks.iter().all(|&s| s == both), "{synacks:?}");

            // Every BTH option after the handshake, both ways (data, pure ACKs, credit), is in
            // the framing negotiated.
            d.b.post_recv(10, vec![0; 5000]).unwrap();
            d.a.post_recv(11, vec![0; 3000]).unwrap();
            d.a.post_send(WorkRequest::send(1, pattern(1, 5000), None))
                .unwrap();
            d.b.post_send(WorkRequest::send(2, pattern(2, 3000), None))
                .unwrap();
            let seen = RefCell::new([0usize; 2]);
            let mut got = [None, None];
            let ok = d.run(
                Duration::from_secs(5),
                |dir, _, p| {
                    if let Some(b) = bth_of(&p) {
                        assert_eq!(
                            b.seq_framed, both,
                            "{dir} {:?} option, A {fa:?}, B {fb:?}",
                            b.opcode
                        );
                        seen.borrow_mut()[dir.index()] += 1;
                    }
                    Some(p)
                },
                |d| {
                    for (k, c) in [&mut d.a, &mut d.b].into_iter().enumerate() {
                        while let Some(x) = c.poll_completion() {
                            if x.op == WcOp::Recv {
                                got[k] = x.buf.filter(|_| x.status == WcStatus::Success);
                            }
                        }
                    }
                    got.iter().all(Option::is_some)
                },
            );
            assert!(ok, "A {fa:?}, B {fb:?}: {:?} {:?}", d.a, d.b);
            assert_eq!(got[1].as_deref(), Some(&pattern(1, 5000)[..]));
            assert_eq!(got[0].as_deref(), Some(&pattern(2, 3000)[..]));
            let seen = seen.into_inner();
            assert!(seen[0] > 3 && seen[1] > 3, "{seen:?}");
            assert_no_framing_fault(&d, &format!("A {fa:?}, B {fb:?}"));
        }
    }
}

/// Neither side refused a segment for its framing (mismatch, an inconsistent S option, a bad
/// BTH, an ICRC) nor failed.
fn assert_no_framing_fault(d: &BackToBack, what: &str) {
    for c in [&d.a, &d.b] {
        let s = c.stats();
        assert_eq!(
            (
                s.framing_mismatch,
                s.s_inconsistent,
                s.bad_bth,
                s.icrc_errors
            ),
            (0, 0, 0, 0),
            "{what}"
        );
        assert_eq!(c.error(), None, "{what}");
    }
}

/// SplitMix64, for the filter's choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// True with probability `pct` percent.
    fn pct(&mut self, pct: u64) -> bool {
        self.next() % 100 < pct
    }
}

/// What the filter did and saw.
#[derive(Default)]
struct Seen {
    dropped: usize,
    delayed: usize,
    duplicated: usize,
    /// Data segments, by direction.
    data: [usize; 2],
    /// S framing: the option of each message's first segment (timestamps and A cleared), by
    /// direction, class and MSN; every later segment of it must carry the same.
    s_options: HashMap<(Direction, MsgClass, u16), Bth>,
    /// S framing: data segments of a message other than its first (the cut was not one
    /// segment).
    s_repeats: usize,
}

/// Drive the pair until `done`, dropping (8 %), delaying past later segments (10 %) and
/// duplicating (5 %) data segments and pure ACKs both ways, and checking every option's S bit.
fn run_lossy(
    d: &mut BackToBack,
    seed: u64,
    limit: Duration,
    seen: &mut Seen,
    mut done: impl FnMut(&mut BackToBack) -> bool,
) -> bool {
    let seq = d.a.seq_framed();
    let mut rng = Rng(seed);
    let end = d.now + limit;
    let mut later: Vec<(Duration, Direction, Vec<u8>)> = Vec::new();
    while d.now < end {
        if done(d) {
            return true;
        }
        let more = d.step(&mut |dir, now, p| {
            let s = TcpRepr::parse(&p, None).unwrap();
            if let Some(b) = s.options.bth {
                assert_eq!(b.seq_framed, seq, "{dir} {:?}", b.opcode);
                if !s.payload.is_empty() {
                    seen.data[dir.index()] += 1;
                    if seq {
                        let class = MsgClass::of(b.opcode).expect("a data opcode");
                        let same = Bth {
                            timestamps: None,
                            rtr_ack: false,
                            ..b
                        };
                        match seen.s_options.entry((dir, class, b.msn)) {
                            std::collections::hash_map::Entry::Occupied(first) => {
                                assert_eq!(*first.get(), same, "{dir}: one option per message");
                                seen.s_repeats += 1;
                            }
                            std::collections::hash_map::Entry::Vacant(v) => {
                                v.insert(same);
                            }
                        }
                    } else {
                        assert!(b.carries_icrc() && b.icrc_ok(s.payload));
                    }
                }
            }
            if s.flags.syn() || s.flags.rst() || s.flags.fin() {
                return Some(p);
            }
            if rng.pct(8) {
                seen.dropped += 1;
                return None;
            }
            if rng.pct(10) {
                // Arrives after segments sent up to 3 ms later.
                seen.delayed += 1;
                later.push((now + Duration::from_micros(300 + rng.next() % 3000), dir, p));
                return None;
            }
            if rng.pct(5) {
                seen.duplicated += 1;
                later.push((
                    now + Duration::from_micros(rng.next() % 2000),
                    dir,
                    p.clone(),
                ));
            }
            Some(p)
        });
        for (at, dir, p) in later.drain(..) {
            d.inject(at, dir, p);
        }
        if !more {
            break;
        }
    }
    done(d)
}

/// A SEND, a WRITE with immediate and a READ from A, and a SEND from B, through loss,
/// reordering and duplication: everything completes with the right bytes in both framings.
#[test]
fn send_write_with_immediate_and_read_complete_in_both_framings() {
    for framing in FRAMINGS {
        for seed in [1u64, 2, 3] {
            let (ac, bc) = configs_with(framing, framing);
            let mut d = BackToBack::established(ac, bc, MS);
            assert_eq!(d.a.seq_framed(), framing == Framing::Seq);
            let target =
                d.b.register_mr(vec![0; 120_000], Access::LOCAL_WRITE | Access::REMOTE_WRITE)
                    .unwrap();
            let source = pattern(9, 90_000);
            let src =
                d.b.register_mr(source.clone(), Access::REMOTE_READ)
                    .unwrap();
            d.b.post_recv(20, vec![0; 100_000]).unwrap();
            d.a.post_recv(21, vec![0; 40_000]).unwrap();
            d.settle(10 * MS);

            let send = pattern(1, 100_000);
            let write = pattern(2, 70_000);
            d.a.post_send(WorkRequest::send(1, send.clone(), None))
                .unwrap();
            d.a.post_send(WorkRequest {
                wr_id: 2,
                op: WrOp::RdmaWrite {
                    rkey: target.rkey,
                    remote_addr: target.addr + 1000,
                    imm: Some(0xC0FFEE),
                },
                sg_list: vec![Bytes::from(write.clone())],
            })
            .unwrap();
            d.a.post_read(3, src.rkey, src.addr + 500, vec![0; 80_000])
                .unwrap();
            let back = pattern(3, 40_000);
            d.b.post_send(WorkRequest::send(4, back.clone(), None))
                .unwrap();

            let (mut at_a, mut at_b) = (Vec::new(), Vec::new());
            let mut seen = Seen::default();
            let ok = run_lossy(&mut d, seed, Duration::from_secs(60), &mut seen, |d| {
                at_a.extend(std::iter::from_fn(|| d.a.poll_completion()));
                at_b.extend(std::iter::from_fn(|| d.b.poll_completion()));
                at_a.len() >= 4 && at_b.len() >= 2
            });
            let what = format!("{framing:?}, seed {seed}");
            assert!(ok, "{what}: A {at_a:?}\nB {at_b:?}\n{:?}\n{:?}", d.a, d.b);
            assert!(
                seen.dropped > 0 && seen.delayed > 0 && seen.duplicated > 0,
                "{what}: the filter did nothing"
            );
            assert!(seen.data[0] > 100 && seen.data[1] > 50, "{what}");

            // A: its SEND and WRITE acknowledged, its READ with B's bytes, B's SEND received.
            let a_of = |id: u64| {
                at_a.iter()
                    .find(|c| c.wr_id == id)
                    .unwrap_or_else(|| panic!("{what}: wr {id} at A: {at_a:?}"))
            };
            assert_eq!(
                (a_of(1).op, a_of(1).status),
                (WcOp::Send, WcStatus::Success)
            );
            assert_eq!(
                (a_of(2).op, a_of(2).status),
                (WcOp::RdmaWrite, WcStatus::Success)
            );
            let read = a_of(3);
            assert_eq!((read.op, read.status), (WcOp::RdmaRead, WcStatus::Success));
            assert_eq!(read.buf.as_deref(), Some(&source[500..80_500]), "{what}");
            let recv = a_of(21);
            assert_eq!(
                (recv.op, recv.status, recv.byte_len),
                (WcOp::Recv, WcStatus::Success, 40_000)
            );
            assert_eq!(recv.buf.as_deref(), Some(&back[..]), "{what}");

            // B: the SEND in its receive, the WRITE's immediate, the bytes in the region.
            let recv = at_b
                .iter()
                .find(|c| c.op == WcOp::Recv)
                .expect("B's receive");
            assert_eq!(
                (recv.wr_id, recv.status, recv.byte_len),
                (20, WcStatus::Success, 100_000)
            );
            assert_eq!(
                &recv.buf.as_deref().unwrap()[..100_000],
                &send[..],
                "{what}"
            );
            let imm = at_b
                .iter()
                .find(|c| c.op == WcOp::RecvRdmaWithImm)
                .expect("the WRITE's completion");
            assert_eq!(
                (imm.status, imm.imm, imm.byte_len),
                (WcStatus::Success, Some(0xC0FFEE), 70_000)
            );
            let region = d.b.mr_bytes(target.rkey).unwrap();
            assert_eq!(&region[1000..71_000], &write[..], "{what}");
            assert!(region[..1000]
                .iter()
                .chain(&region[71_000..])
                .all(|&x| x == 0));

            if framing == Framing::Seq {
                assert!(seen.s_repeats > 100, "{what}: messages cut into segments");
            }
            assert_no_framing_fault(&d, &what);
        }
    }
}
