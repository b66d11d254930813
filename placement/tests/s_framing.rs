//! S framing (amendment 3) at the placement level: any cut of a super-segment into segments,
//! delivered in any order with duplicates and overlaps, places the same bytes and completes
//! the same messages as the uncut one. Each message is one super-segment whose single option
//! (ONLY opcode, anchor = first stream byte mod 2^24, message length where the ICRC goes, a
//! WRITE's address of its first byte, the immediate) every piece repeats, as a segmentation
//! offload would cut it; a piece says where it belongs only through its stream offset
//! (`Inbound::from_seq`). Overlaps are other cuts of ranges already covered (a re-cut
//! retransmission) and unions of neighbours (receive coalescing). Streams start near multiples
//! of 2^24 and near and past 2^32, so anchors and offsets wrap.

mod common;

use bth_placement::{
    Access, Cqe, MrHandle, PlaceOutcome, Placement, PlacementConfig, PlacementLimits, WcOp,
    WcStatus,
};
use bth_wire::{
    Bth, Extension, Inbound, MessageKind, MsgClass, Opcode, Position, Reth, Timestamps,
    MAX_MESSAGE_LEN,
};
use common::{Msns, Rng, CANARY};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Spec {
    /// 0 SEND, 1 RDMA WRITE, 2 READ response.
    class: u8,
    /// 0 is a zero-length message (SEND and WRITE only; a READ response gets 1).
    len: u32,
    imm: bool,
}

#[derive(Debug)]
struct Msg {
    kind: MessageKind,
    msn: u16,
    data: Vec<u8>,
    imm: Option<u32>,
    /// WRITE: offset of byte 0 in the region.
    region_off: u64,
    /// Stream offset of its first byte (of its pad byte when zero-length).
    stream_start: u64,
    /// The option every piece of it carries (timestamps and A aside).
    bth: Bth,
}

impl Msg {
    /// Stream bytes it takes: a zero-length message has its pad byte.
    fn stream_len(&self) -> u32 {
        (self.data.len() as u32).max(1)
    }

    /// The payload of its piece `[a, b)` of stream bytes.
    fn piece(&self, a: u32, b: u32) -> &[u8] {
        if self.data.is_empty() {
            &[0]
        } else {
            &self.data[a as usize..b as usize]
        }
    }
}

/// A scenario: the messages, the receiver's first MSNs and the region length.
struct Scenario {
    first_msn: u16,
    msgs: Vec<Msg>,
    region_len: usize,
    /// Slack past the end of each posted receive, to catch stray writes.
    slack: Vec<usize>,
}

/// The receive side before any segment: receives posted and READ sinks expected in MSN order,
/// one region registered. The same every time for one scenario (rkeys come from a fixed seed).
fn fresh(s: &Scenario) -> (Placement, MrHandle) {
    // The range budget has its own tests; here any fragmentation must work.
    let limits = PlacementLimits {
        max_ranges: usize::MAX,
        ..PlacementLimits::default()
    };
    let mut p = Placement::with_limits(PlacementConfig::new(s.first_msn), limits);
    let region = p
        .regions_mut()
        .register(
            vec![CANARY; s.region_len + 8],
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        )
        .unwrap();
    for (i, m) in s.msgs.iter().enumerate() {
        match m.kind {
            MessageKind::Send => {
                let buf = vec![CANARY; m.data.len() + s.slack[i]];
                assert_eq!(p.post_recv(i as u64 + 1, buf).unwrap(), m.msn);
            }
            MessageKind::ReadResponse => {
                p.expect_read_response(m.msn, i as u64 + 1, vec![CANARY; m.data.len()])
                    .unwrap();
            }
            _ => {}
        }
    }
    (p, region)
}

/// Build the messages of `specs`, laid out in the stream from `base` (with small gaps, as other
/// messages the receiver does not place would leave), each with its S option.
fn scenario(first_msn: u16, read_msn: u16, base: u64, specs: &[Spec], rng: &mut Rng) -> Scenario {
    let mut s = Scenario {
        first_msn,
        msgs: Vec::new(),
        region_len: 0,
        slack: Vec::new(),
    };
    // The region's handle, to put its address in the WRITEs' options: a fresh placement
    // registers it alike every time.
    let mut region_len = 0u64;
    let mut layout = Vec::new();
    for sp in specs {
        let gap = rng.range(0, 8);
        let region_off = region_len + gap;
        if sp.class == 1 {
            region_len = region_off + u64::from(sp.len);
        }
        layout.push(region_off);
    }
    s.region_len = region_len as usize;
    let (_, region) = fresh(&s);
    let mut msns = Msns::new(first_msn, read_msn);
    let mut at = base;
    for (sp, region_off) in specs.iter().zip(layout) {
        let (kind, msn) = msns.next(sp.class);
        let len = if kind == MessageKind::ReadResponse {
            sp.len.max(1)
        } else {
            sp.len
        };
        let imm = (sp.imm && kind != MessageKind::ReadResponse).then(|| rng.next() as u32);
        let reth = Reth {
            rkey: region.rkey,
            addr: region.addr + region_off,
        };
        let ext = match (kind, imm) {
            (MessageKind::RdmaWrite, Some(i)) => Extension::RethImmediate(reth, i),
            (MessageKind::RdmaWrite, None) => Extension::Reth(reth),
            (_, Some(i)) => Extension::Immediate(i),
            (_, None) => Extension::None,
        };
        let op = Opcode::for_data(kind, Position::Only, imm.is_some()).unwrap();
        let stream_start = at + rng.range(0, 3);
        let bth = Bth {
            msn,
            seq_framed: true,
            mbo: (stream_start % (1 << 24)) as u32,
            seg: 0,
            icrc: len,
            ext,
            ..Bth::new(op)
        };
        let m = Msg {
            kind,
            msn,
            data: rng.bytes(len as usize),
            imm,
            region_off,
            stream_start,
            bth,
        };
        at = stream_start + u64::from(m.stream_len());
        s.slack.push(rng.range(0, 16) as usize);
        s.msgs.push(m);
    }
    s
}

/// What a run leaves that anyone can observe.
#[derive(Debug, PartialEq, Eq)]
struct Observed {
    /// Completions per class (Send, Write, ReadResponse), in the order they left.
    cqes: [Vec<Cqe>; 3],
    region: Vec<u8>,
    bytes_placed: u64,
    bytes_copied: u64,
    completed: [u16; 2],
    posted_recvs: usize,
    outstanding_reads: usize,
    ranges_in_use: usize,
}

impl Observed {
    /// Short enough to read in a failure: buffers and the region as digests.
    fn summary(&self) -> String {
        let digest = |b: &[u8]| {
            b.iter().fold(0xCBF2_9CE4_8422_2325u64, |h, &x| {
                (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01B3)
            })
        };
        let cqes: Vec<Vec<String>> = self
            .cqes
            .iter()
            .map(|class| {
                class
                    .iter()
                    .map(|c| {
                        format!(
                            "msn {} wr {} {:?} {:?} len {} imm {:?} buf {:?}",
                            c.msn,
                            c.wr_id,
                            c.op,
                            c.status,
                            c.byte_len,
                            c.imm,
                            c.buf.as_deref().map(|b| (b.len(), digest(b)))
                        )
                    })
                    .collect()
            })
            .collect();
        format!(
            "cqes {:?}; region {} bytes, digest {:#x}; placed {} copied {}; completed {:?}; \
             posted {} reads {} ranges {}",
            cqes,
            self.region.len(),
            digest(&self.region),
            self.bytes_placed,
            self.bytes_copied,
            self.completed,
            self.posted_recvs,
            self.outstanding_reads,
            self.ranges_in_use
        )
    }
}

fn observe(p: &mut Placement, region: &MrHandle) -> Observed {
    let mut cqes: [Vec<Cqe>; 3] = Default::default();
    while let Some(c) = p.poll_completion() {
        let k = match c.class {
            MsgClass::Send => 0,
            MsgClass::Write => 1,
            _ => 2,
        };
        cqes[k].push(c);
    }
    let c = p.counters();
    Observed {
        cqes,
        region: p.regions().bytes(region.rkey).unwrap().to_vec(),
        bytes_placed: c.bytes_placed,
        bytes_copied: c.bytes_copied,
        completed: [
            p.completed_msn(MsgClass::Send),
            p.completed_msn(MsgClass::Write),
        ],
        posted_recvs: p.posted_recvs(),
        outstanding_reads: p.outstanding_reads(),
        ranges_in_use: p.ranges_in_use(),
    }
}

/// One piece through the wire: its option (with its own timestamps and A bit, which S lets
/// differ) emitted and parsed, then `from_seq` at its stream offset, then placement.
fn deliver(
    p: &mut Placement,
    m: &Msg,
    a: u32,
    b: u32,
    rng: &mut Rng,
) -> Result<PlaceOutcome, TestCaseError> {
    let mut bth = m.bth;
    bth.timestamps = Some(Timestamps {
        tsval: rng.next() as u32,
        tsecr: rng.next() as u32,
    });
    bth.rtr_ack = rng.next() & 1 == 0;
    let bth = Bth::from_bytes(&bth.to_vec().unwrap()).unwrap();
    let payload = m.piece(a, b);
    let at = m.stream_start + u64::from(a);
    let inb = Inbound::from_seq(&bth, payload, at);
    prop_assert!(
        inb.is_ok(),
        "piece {:?} of msg {} at {:#x}: {:?}",
        (a, b),
        m.msn,
        at,
        inb
    );
    let inb = inb.unwrap();
    // Where the piece says it belongs, from its stream offset alone.
    if !m.data.is_empty() {
        prop_assert_eq!(inb.offset, a);
        prop_assert_eq!(inb.last, b as usize == m.data.len());
        if let Some(r) = m.bth.ext.reth() {
            prop_assert_eq!(inb.reth.map(|r| r.addr), Some(r.addr + u64::from(a)));
        }
    }
    Ok(p.place(&inb))
}

/// Random cut points of `[0, len)`: anywhere, or at a fixed size (as an offload cuts at
/// gso_size), at most about `max_pieces` pieces.
fn cut(len: u32, rng: &mut Rng, max_pieces: u32) -> Vec<(u32, u32)> {
    let mut points = vec![0, len];
    match rng.range(0, 2) {
        0 => {
            let k = rng.range(0, u64::from((len - 1).min(max_pieces)));
            for _ in 0..k {
                points.push(rng.range(1, u64::from(len)) as u32);
            }
        }
        1 => {
            let min = (len / max_pieces).max(1);
            let size = (rng.range(1, 2000) as u32).max(min);
            points.extend((1..).map(|i| i * size).take_while(|&p| p < len));
        }
        _ => {}
    }
    points.sort_unstable();
    points.dedup();
    points.windows(2).map(|w| (w[0], w[1])).collect()
}

fn run(
    first_msn: u16,
    read_msn: u16,
    base: u64,
    specs: &[Spec],
    seed: u64,
) -> Result<(), TestCaseError> {
    let mut rng = Rng(seed);
    let s = scenario(first_msn, read_msn, base, specs, &mut rng);

    // The uncut: each message as one segment, in stream order.
    let (mut whole, region) = fresh(&s);
    for m in &s.msgs {
        let out = deliver(&mut whole, m, 0, m.stream_len(), &mut rng)?;
        prop_assert!(
            matches!(out, PlaceOutcome::Placed { .. }),
            "uncut {}: {:?}",
            m.msn,
            out
        );
    }
    let want = observe(&mut whole, &region);

    // The cut: pieces, duplicates, overlapping re-cuts and coalesced neighbours, shuffled.
    let (mut p, region2) = fresh(&s);
    prop_assert_eq!(region, region2);
    let mut pieces: Vec<(usize, u32, u32)> = Vec::new();
    for (i, m) in s.msgs.iter().enumerate() {
        let len = m.stream_len();
        let base = cut(len, &mut rng, 20_000);
        let extra = rng.range(0, (base.len() as u64 / 4).min(64) + 1);
        for _ in 0..extra {
            match rng.range(0, 2) {
                0 => {
                    let (a, b) = base[rng.range(0, base.len() as u64 - 1) as usize];
                    pieces.push((i, a, b));
                }
                1 => {
                    let a = rng.range(0, u64::from(len) - 1) as u32;
                    let b = rng.range(u64::from(a) + 1, u64::from(len).min(u64::from(a) + 3000));
                    pieces.push((i, a, b as u32));
                }
                _ => {
                    // Neighbours coalesced into one (GRO): one option, their bytes.
                    let k = rng.range(0, base.len() as u64 - 1) as usize;
                    let j = (k + rng.range(1, 3) as usize).min(base.len() - 1);
                    pieces.push((i, base[k].0, base[j].1));
                }
            }
        }
        pieces.extend(base.into_iter().map(|(a, b)| (i, a, b)));
    }
    rng.shuffle(&mut pieces);
    for &(i, a, b) in &pieces {
        let out = deliver(&mut p, &s.msgs[i], a, b, &mut rng)?;
        prop_assert!(
            matches!(out, PlaceOutcome::Placed { .. } | PlaceOutcome::Duplicate),
            "piece {:?} of msg {} -> {:?}",
            (a, b),
            i,
            out
        );
    }
    let got = observe(&mut p, &region);
    prop_assert!(
        got == want,
        "cut: {}\nuncut: {}\nfirst region byte that differs: {:?}",
        got.summary(),
        want.summary(),
        got.region
            .iter()
            .zip(&want.region)
            .position(|(a, b)| a != b)
    );

    // And both are right, not merely equal: every byte where it belongs, once.
    let total: u64 = s.msgs.iter().map(|m| m.data.len() as u64).sum();
    prop_assert_eq!((got.bytes_placed, got.bytes_copied), (total, total));
    prop_assert_eq!((got.posted_recvs, got.outstanding_reads), (0, 0));
    prop_assert_eq!(got.ranges_in_use, 0);
    let mut expect = vec![CANARY; got.region.len()];
    for m in s.msgs.iter().filter(|m| m.kind == MessageKind::RdmaWrite) {
        let o = m.region_off as usize;
        expect[o..o + m.data.len()].copy_from_slice(&m.data);
    }
    prop_assert!(
        got.region == expect,
        "region differs at {:?}",
        got.region.iter().zip(&expect).position(|(a, b)| a != b)
    );
    for (k, kind) in [
        MessageKind::Send,
        MessageKind::RdmaWrite,
        MessageKind::ReadResponse,
    ]
    .into_iter()
    .enumerate()
    {
        // Every SEND and READ response completes, and every WRITE with an immediate; in MSN
        // order within the class.
        let completing: Vec<(usize, &Msg)> = s
            .msgs
            .iter()
            .enumerate()
            .filter(|(_, m)| m.kind == kind && (kind != MessageKind::RdmaWrite || m.imm.is_some()))
            .collect();
        prop_assert_eq!(got.cqes[k].len(), completing.len(), "{:?}", kind);
        for (c, (i, m)) in got.cqes[k].iter().zip(completing) {
            prop_assert_eq!(c.msn, m.msn);
            prop_assert_eq!(c.status, WcStatus::Success);
            prop_assert_eq!(c.byte_len as usize, m.data.len());
            prop_assert_eq!(c.imm, m.imm);
            match kind {
                MessageKind::RdmaWrite => prop_assert_eq!(c.op, WcOp::RecvRdmaWithImm),
                _ => {
                    prop_assert_eq!(c.wr_id, i as u64 + 1);
                    let buf = c.buf.as_ref().unwrap();
                    prop_assert!(buf[..m.data.len()] == m.data[..], "msg {} differs", i);
                    prop_assert!(buf[m.data.len()..].iter().all(|&b| b == CANARY));
                }
            }
        }
    }
    let mut msns = Msns::new(first_msn, 0);
    for m in &s.msgs {
        msns.next(match m.kind {
            MessageKind::Send => 0,
            MessageKind::RdmaWrite => 1,
            _ => 2,
        });
    }
    prop_assert_eq!(got.completed, msns.last_send_write());
    Ok(())
}

/// Where the stream's first message starts: near multiples of 2^24 (the anchor wraps inside
/// the message), near 2^32 and its multiples (the sequence space wraps; the stack's u64 stream
/// offsets do not), or anywhere.
fn base() -> impl Strategy<Value = u64> {
    prop_oneof![
        (1u64..=256, 0u64..5000).prop_map(|(k, d)| (k << 24) - d),
        (1u64..=256, 0u64..5000).prop_map(|(k, d)| (k << 24) + d),
        (1u64..=8, 0u64..200_000).prop_map(|(k, d)| (k << 32) - d),
        (1u64..=8, 0u64..5000).prop_map(|(k, d)| (k << 32) + d),
        0u64..(1 << 44),
    ]
}

fn spec(len: impl Strategy<Value = u32>) -> impl Strategy<Value = Spec> {
    (0u8..3, len, any::<bool>()).prop_map(|(class, len, imm)| Spec { class, len, imm })
}

fn small_len() -> impl Strategy<Value = u32> {
    prop_oneof![
        1 => Just(0u32),
        6 => 1u32..=64,
        3 => 1u32..=8192,
        1 => 1u32..=200_000,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_cut_in_any_order_places_what_the_uncut_places(
        first in any::<u16>(),
        read_first in any::<u16>(),
        base in base(),
        specs in prop::collection::vec(spec(small_len()), 1..8),
        seed in any::<u64>(),
    ) {
        run(first, read_first, base, &specs, seed)?;
    }
}

proptest! {
    // Up to the 24-bit limit: few cases, each moves tens of MiB.
    #![proptest_config(ProptestConfig::with_cases(4))]

    #[test]
    fn large_messages_cut_anywhere_across_the_wraps(
        first in any::<u16>(),
        base in base(),
        specs in prop::collection::vec(spec(1u32..=MAX_MESSAGE_LEN), 1..3),
        seed in any::<u64>(),
    ) {
        run(first, first.wrapping_add(3), base, &specs, seed)?;
    }
}

/// A SEND, a WRITE with immediate and a READ response, each across a wrap: the SEND across
/// 2^32 (where a 32-bit sequence number wraps), the WRITE across the next multiple of 2^24,
/// the READ response right after it; and the largest message, whose anchor is 2^24 − 1.
#[test]
fn messages_across_2_32_and_a_multiple_of_2_24() {
    let specs = [
        Spec {
            class: 0,
            len: 70_000,
            imm: true,
        },
        Spec {
            class: 1,
            len: (1 << 24) - 60_000 + 5000,
            imm: true,
        },
        Spec {
            class: 2,
            len: 9000,
            imm: false,
        },
    ];
    for seed in 0..4 {
        run(0xFFFE, 0x7FFF, (1 << 32) - 10_000, &specs, seed).unwrap();
    }
    let largest = [Spec {
        class: 1,
        len: MAX_MESSAGE_LEN,
        imm: false,
    }];
    run(1, 1, (3 << 24) - 1, &largest, 5).unwrap();
}
