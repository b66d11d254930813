//! Property tests: random work-request sequences framed with random cut sizes, first
//! transmission and re-cut retransmissions, against a reference model (see `check.rs`).

mod check;

use bth_framer::{Framer, FramerConfig, Posted, Released, WorkRequest, WrOp};
use bth_wire::{MsgClass, ReadRequest, Reth, MAX_MESSAGE_LEN};
use bytes::Bytes;
use check::{check_segment, pattern, Expected, PATTERN_SLACK};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Send,
    Write { rkey: u32, addr: u64 },
    Read { rkey: u32, addr: u64, len: u32 },
    Response { request_msn: u16 },
}

#[derive(Debug, Clone)]
struct Spec {
    op: Op,
    imm: Option<u32>,
    len: u32,
    pattern_at: usize,
    /// Raw split points of the sg list, reduced modulo the length; 0 makes an empty entry.
    splits: Vec<u32>,
}

#[derive(Debug, Clone)]
struct Case {
    mss: u32,
    first_msn: u16,
    specs: Vec<Spec>,
    cuts: Vec<u32>,
    recuts: Vec<u64>,
    acks: Vec<u64>,
}

fn msg_len() -> impl Strategy<Value = u32> {
    prop_oneof![
        12 => 1u32..=64,
        8 => 65u32..=20_000,
        2 => 20_001u32..=(4 << 20),
        1 => (MAX_MESSAGE_LEN - 3)..=MAX_MESSAGE_LEN,
    ]
}

/// Mostly arbitrary, sometimes the top of the address space (clamped later so it never wraps).
fn addr() -> impl Strategy<Value = u64> {
    prop_oneof![4 => any::<u64>(), 1 => Just(u64::MAX)]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Send),
        4 => (any::<u32>(), addr()).prop_map(|(rkey, addr)| Op::Write { rkey, addr }),
        2 => (any::<u32>(), addr(), msg_len())
            .prop_map(|(rkey, addr, len)| Op::Read { rkey, addr, len }),
        1 => any::<u16>().prop_map(|request_msn| Op::Response { request_msn }),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        op(),
        proptest::option::of(any::<u32>()),
        msg_len(),
        0..PATTERN_SLACK,
        prop::collection::vec(any::<u32>(), 0..4),
    )
        .prop_map(|(op, imm, len, pattern_at, splits)| Spec {
            op,
            imm,
            len,
            pattern_at,
            splits,
        })
}

fn case() -> impl Strategy<Value = Case> {
    (
        1u32..=9000,
        prop_oneof![Just(0xFFFFu16), 0xFFF8u16..=0xFFFF, any::<u16>()],
        prop::collection::vec(spec(), 1..10),
        prop::collection::vec(prop_oneof![1u32..=64, 1u32..=9000, 9000u32..=65_535], 1..24),
        prop::collection::vec(any::<u64>(), 0..6),
        prop::collection::vec(any::<u64>(), 0..6),
    )
        .prop_map(|(mss, first_msn, specs, cuts, recuts, acks)| Case {
            mss,
            first_msn,
            specs,
            cuts,
            recuts,
            acks,
        })
}

/// The sg list for `bytes`, cut at the given points (duplicates give empty entries).
fn sg_list(bytes: &Bytes, splits: &[u32]) -> Vec<Bytes> {
    let mut points: Vec<usize> = splits
        .iter()
        .map(|&s| s as usize % (bytes.len() + 1))
        .collect();
    points.sort_unstable();
    let mut out = Vec::new();
    let mut at = 0;
    for p in points.into_iter().chain([bytes.len()]) {
        out.push(bytes.slice(at..p));
        at = p;
    }
    out
}

/// Post one spec, returning what the framer must report and the model of the message.
fn post(f: &mut Framer, s: &Spec, wr_id: u64, msn: u16) -> (Posted, Expected) {
    let bytes = pattern().slice(s.pattern_at..s.pattern_at + s.len as usize);
    let top = |addr: u64, len: u32| addr.min(u64::MAX - u64::from(len - 1));
    let mut exp = Expected {
        class: MsgClass::Send,
        msn,
        wr_id,
        stream_start: f.stream_end(),
        bytes: bytes.clone(),
        imm: s.imm,
        reth: None,
        read: None,
    };
    let op = match s.op {
        Op::Send => WrOp::Send { imm: s.imm },
        Op::Write { rkey, addr } => {
            let remote_addr = top(addr, s.len);
            exp.class = MsgClass::Write;
            exp.reth = Some(Reth {
                rkey,
                addr: remote_addr,
            });
            WrOp::RdmaWrite {
                rkey,
                remote_addr,
                imm: s.imm,
            }
        }
        Op::Read { rkey, addr, len } => {
            let req = ReadRequest {
                rkey,
                addr: top(addr, len),
                len,
            };
            exp.class = MsgClass::ReadRequest;
            exp.bytes = Bytes::copy_from_slice(&req.to_bytes());
            exp.imm = None;
            exp.read = Some(req);
            WrOp::RdmaRead {
                rkey,
                remote_addr: req.addr,
                len,
            }
        }
        Op::Response { request_msn } => {
            exp.class = MsgClass::ReadResponse;
            exp.msn = request_msn;
            exp.wr_id = 0;
            exp.imm = None;
            let p = f
                .post_read_response(request_msn, sg_list(&bytes, &s.splits), false)
                .expect("post read response");
            return (p, exp);
        }
    };
    let sg = if exp.read.is_some() {
        Vec::new()
    } else {
        sg_list(&bytes, &s.splits)
    };
    let wr = WorkRequest {
        wr_id,
        op,
        sg_list: sg,
    };
    (f.post(wr).expect("post"), exp)
}

/// Frame from `from` to the end of its message with cut sizes from `cuts`; checks every
/// segment and that their payloads concatenate to the message's bytes from `from` on.
fn walk(f: &Framer, model: &[Expected], from: u64, mss: u32, cuts: &mut impl Iterator<Item = u32>) {
    let m = &model[model.partition_point(|m| m.stream_end() <= from)];
    let info = f.message_at(from).expect("offset inside a queued message");
    assert_eq!(
        (
            info.class,
            info.msn,
            info.stream_start,
            info.len,
            info.wr_id
        ),
        (m.class, m.msn, m.stream_start, m.len(), m.wr_id)
    );
    if m.class == MsgClass::ReadRequest && from != m.stream_start {
        assert!(f.segment_at(from, 65_535).is_none(), "READ request split");
        return;
    }
    let mut got = Vec::new();
    let mut at = from;
    while at < m.stream_end() {
        // Bound the work on multi-MiB messages; small cuts are exercised on small ones.
        let mut mp = cuts.next().unwrap_or(1448).max(m.len() / 2000);
        if m.class == MsgClass::ReadRequest && mp < 16 {
            assert!(
                f.segment_at(at, mp).is_none(),
                "READ request cut below 16 bytes"
            );
            mp = 16;
        }
        let d = f
            .segment_at(at, mp)
            .expect("segment inside a queued message");
        check_segment(&d, m, at, mp, mss);
        got.extend_from_slice(&d.payload_bytes());
        at = d.stream_end();
    }
    let start = (from - m.stream_start) as usize;
    assert!(got[..] == m.bytes[start..], "reassembly differs");
}

fn run(c: &Case) {
    let mut f = Framer::new(FramerConfig {
        mss: c.mss,
        first_msn: c.first_msn,
        max_message_len: MAX_MESSAGE_LEN,
    });
    let mut next = [c.first_msn; 4];
    let mut model = Vec::new();
    for (i, s) in c.specs.iter().enumerate() {
        let class_of = |op: &Op| match op {
            Op::Send => MsgClass::Send,
            Op::Write { .. } => MsgClass::Write,
            Op::Read { .. } => MsgClass::ReadRequest,
            Op::Response { .. } => MsgClass::ReadResponse,
        };
        let class = class_of(&s.op);
        let (posted, exp) = post(&mut f, s, i as u64 + 1, next[class.index()]);
        let want = Posted {
            class,
            msn: exp.msn,
            stream_start: exp.stream_start,
            stream_len: exp.len(),
            wr_id: exp.wr_id,
        };
        assert_eq!(posted, want);
        if class != MsgClass::ReadResponse {
            // Consecutive per class, wrapping mod 2^16; other classes' counters untouched.
            next[class.index()] = next[class.index()].wrapping_add(1);
        }
        for k in [MsgClass::Send, MsgClass::Write, MsgClass::ReadRequest] {
            assert_eq!(f.next_msn(k), Some(next[k.index()]));
        }
        model.push(exp);
    }
    let end = model.last().map_or(0, Expected::stream_end);
    assert_eq!(f.stream_end(), end);
    assert_eq!(f.len(), model.len());

    let mut cuts = c.cuts.iter().copied().cycle();
    for m in &model {
        walk(&f, &model, m.stream_start, c.mss, &mut cuts);
    }
    // Retransmission-style re-framing from arbitrary byte positions, with a shifted cut cycle.
    cuts.next();
    for &r in &c.recuts {
        walk(&f, &model, r % end, c.mss, &mut cuts);
    }
    assert!(f.segment_at(end, 65_535).is_none());
    assert!(f.message_at(end).is_none());
    assert!(f
        .segment_at(c.recuts.first().map_or(0, |r| r % end), 0)
        .is_none());

    let mut acks: Vec<u64> = c.acks.iter().map(|a| a % (end + 2)).collect();
    acks.sort_unstable();
    acks.push(end);
    let mut released = 0;
    for ack in acks {
        let got = f.release(ack);
        let upto = model[released..].partition_point(|m| m.stream_end() <= ack) + released;
        let want: Vec<Released> = model[released..upto]
            .iter()
            .map(|m| Released {
                wr_id: m.wr_id,
                class: m.class,
                msn: m.msn,
                len: m.len(),
            })
            .collect();
        assert_eq!(got, want);
        released = upto;
        let floor = model.get(released).map_or(end, |m| m.stream_start);
        assert_eq!(f.released_up_to(), floor);
        if floor > 0 {
            assert!(f.segment_at(floor - 1, 65_535).is_none());
            assert!(f.message_at(floor - 1).is_none());
        }
        for k in MsgClass::ALL {
            let left = model[released..].iter().filter(|m| m.class == k).count();
            assert_eq!(f.in_flight(k) as usize, left);
        }
    }
    assert!(f.is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn framing_reproduces_messages_from_any_position(c in case()) {
        run(&c);
    }
}
