//! Property: whatever the segmentation, arrival order, duplicates and overlapping re-segmented
//! retransmissions, every message lands byte-identical in its target, nothing beyond it is
//! touched, completions leave in MSN order per class, and each message byte is copied once.

mod common;

use bth_placement::{
    Access, Cqe, PlaceOutcome, Placement, PlacementConfig, PlacementLimits, WcOp, WcStatus,
};
use bth_wire::{MessageKind, MsgClass, Reth, MAX_MESSAGE_LEN};
use common::{cut, seg, Msns, Rng, CANARY};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct MsgSpec {
    class: u8,
    len: u32,
    imm: bool,
}

struct Msg {
    kind: MessageKind,
    msn: u16,
    data: Vec<u8>,
    imm: Option<u32>,
    /// WRITE: offset of byte 0 inside the region.
    region_off: u64,
}

/// Run one scenario; panics (via prop_assert in the caller's closure) on any violation.
fn run(first_msn: u16, read_msn: u16, specs: &[MsgSpec], seed: u64) -> Result<(), TestCaseError> {
    let mut rng = Rng(seed);
    // The range budget has its own test (tests/errors.rs); here any fragmentation must work.
    let limits = PlacementLimits {
        max_ranges: usize::MAX,
        ..PlacementLimits::default()
    };
    let mut p = Placement::with_limits(PlacementConfig::new(first_msn), limits);
    let mut msgs = Vec::new();
    let mut msns = Msns::new(first_msn, read_msn);
    let mut region_len = 0u64;
    for s in specs {
        let (kind, msn) = msns.next(s.class);
        let gap = rng.range(0, 8);
        let region_off = region_len + gap;
        if kind == MessageKind::RdmaWrite {
            region_len = region_off + u64::from(s.len);
        }
        let imm = (s.imm && kind != MessageKind::ReadResponse).then(|| rng.next() as u32);
        let data = rng.bytes(s.len as usize);
        msgs.push(Msg {
            kind,
            msn,
            data,
            imm,
            region_off,
        });
    }
    let region = p
        .regions_mut()
        .register(
            vec![CANARY; region_len as usize + 8],
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        )
        .unwrap();
    // Posts in MSN order; buffers a little larger than the message to catch stray writes.
    let mut slack = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let extra = rng.range(0, 16) as usize;
        slack.push(extra);
        match m.kind {
            MessageKind::Send => {
                let msn = p
                    .post_recv(i as u64 + 1, vec![CANARY; m.data.len() + extra])
                    .unwrap();
                prop_assert_eq!(msn, m.msn);
            }
            MessageKind::ReadResponse => {
                p.expect_read_response(m.msn, i as u64 + 1, vec![CANARY; m.data.len()])
                    .unwrap();
            }
            _ => {}
        }
    }

    // Segments: a base segmentation, plus duplicates and overlapping re-cut ranges.
    let mut segs: Vec<(usize, u32, u32)> = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let len = m.data.len() as u32;
        // At most ~20k segments per message keeps 16 MiB cases quick.
        let min_mss = (len / 20_000).max(1);
        let mss = match rng.range(0, 3) {
            0 => 1448,
            1 => rng.range(1, 2000) as u32,
            2 => len,
            _ => rng.range(1, u64::from(len)) as u32,
        }
        .max(min_mss);
        let base = cut(len, mss);
        let extra = rng.range(0, (base.len() as u64 / 4).min(64) + 1);
        for _ in 0..extra {
            if rng.next() & 1 == 0 {
                // An exact duplicate of a base segment.
                let (a, b) = base[rng.range(0, base.len() as u64 - 1) as usize];
                segs.push((i, a, b));
            } else {
                // A re-cut range overlapping base segments, as a re-packetised retransmission.
                let a = rng.range(0, u64::from(len) - 1) as u32;
                let b = rng.range(u64::from(a) + 1, u64::from(len).min(u64::from(a) + 3000)) as u32;
                segs.push((i, a, b));
            }
        }
        segs.extend(base.into_iter().map(|(a, b)| (i, a, b)));
    }
    rng.shuffle(&mut segs);

    for &(i, a, b) in &segs {
        let m = &msgs[i];
        let reth = (m.kind == MessageKind::RdmaWrite).then(|| Reth {
            rkey: region.rkey,
            addr: region.addr + m.region_off,
        });
        let s = seg(
            m.kind,
            m.msn,
            a,
            &m.data[a as usize..b as usize],
            m.data.len() as u32,
            m.imm,
            reth,
        );
        let out = p.place(&s);
        prop_assert!(
            matches!(out, PlaceOutcome::Placed { .. } | PlaceOutcome::Duplicate),
            "segment {:?} of msg {} -> {:?}",
            (a, b),
            i,
            out
        );
    }

    let mut cqes: Vec<Cqe> = Vec::new();
    while let Some(c) = p.poll_completion() {
        cqes.push(c);
    }
    // Every message accounted for exactly once, in MSN order per class.
    let total: u64 = msgs.iter().map(|m| m.data.len() as u64).sum();
    let c = p.counters();
    prop_assert_eq!(c.bytes_placed, total);
    prop_assert_eq!(c.bytes_copied, total);
    for class in [MsgClass::Send, MsgClass::Write, MsgClass::ReadResponse] {
        let got: Vec<u16> = cqes
            .iter()
            .filter(|c| c.class == class)
            .map(|c| c.msn)
            .collect();
        let want: Vec<u16> = msgs
            .iter()
            .filter(|m| match class {
                MsgClass::Send => m.kind == MessageKind::Send,
                MsgClass::Write => m.kind == MessageKind::RdmaWrite && m.imm.is_some(),
                _ => m.kind == MessageKind::ReadResponse,
            })
            .map(|m| m.msn)
            .collect();
        prop_assert_eq!(got, want, "{:?} completion order", class);
    }
    for c in &cqes {
        prop_assert_eq!(c.status, WcStatus::Success);
        let m = msgs.iter().enumerate().find(|(_, m)| {
            m.msn == c.msn
                && match c.class {
                    MsgClass::Send => m.kind == MessageKind::Send,
                    MsgClass::Write => m.kind == MessageKind::RdmaWrite,
                    _ => m.kind == MessageKind::ReadResponse,
                }
        });
        let (i, m) = m.expect("completion for a sent message");
        prop_assert_eq!(c.byte_len as usize, m.data.len());
        prop_assert_eq!(c.imm, m.imm);
        match c.class {
            MsgClass::Write => {
                prop_assert_eq!(c.op, WcOp::RecvRdmaWithImm);
                prop_assert_eq!(c.wr_id, 0);
            }
            _ => {
                prop_assert_eq!(c.wr_id, i as u64 + 1);
                let buf = c.buf.as_ref().unwrap();
                prop_assert!(buf[..m.data.len()] == m.data[..], "msg {} differs", i);
                prop_assert!(buf[m.data.len()..].iter().all(|&b| b == CANARY));
                prop_assert_eq!(
                    buf.len(),
                    m.data.len()
                        + if c.class == MsgClass::Send {
                            slack[i]
                        } else {
                            0
                        }
                );
            }
        }
    }
    // Region: every write's bytes in place, every gap still canary.
    let bytes = p.regions().bytes(region.rkey).unwrap();
    let mut expect = vec![CANARY; bytes.len()];
    for m in msgs.iter().filter(|m| m.kind == MessageKind::RdmaWrite) {
        let o = m.region_off as usize;
        expect[o..o + m.data.len()].copy_from_slice(&m.data);
    }
    prop_assert!(bytes == &expect[..], "region contents differ");
    prop_assert_eq!(p.ranges_in_use(), 0);
    prop_assert_eq!(p.posted_recvs(), 0);
    prop_assert_eq!(p.outstanding_reads(), 0);
    prop_assert_eq!(
        [
            p.completed_msn(MsgClass::Send),
            p.completed_msn(MsgClass::Write)
        ],
        msns.last_send_write()
    );
    Ok(())
}

fn small_len() -> impl Strategy<Value = u32> {
    prop_oneof![
        6 => 1u32..=64,
        3 => 1u32..=4096,
        1 => 1u32..=200_000,
    ]
}

fn spec(len: impl Strategy<Value = u32>) -> impl Strategy<Value = MsgSpec> {
    (0u8..3, len, any::<bool>()).prop_map(|(class, len, imm)| MsgSpec { class, len, imm })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn shuffled_duplicated_segments_place_exactly(
        first in any::<u16>(),
        read_first in any::<u16>(),
        specs in prop::collection::vec(spec(small_len()), 1..10),
        seed in any::<u64>(),
    ) {
        run(first, read_first, &specs, seed)?;
    }
}

proptest! {
    // Up to the 24-bit limit: few cases, each one moves tens of MiB.
    #![proptest_config(ProptestConfig::with_cases(3))]
    #[test]
    fn large_messages_place_exactly(
        first in any::<u16>(),
        specs in prop::collection::vec(spec(1u32..=MAX_MESSAGE_LEN), 1..3),
        seed in any::<u64>(),
    ) {
        run(first, first.wrapping_add(7), &specs, seed)?;
    }
}

#[test]
fn largest_message_of_each_class() {
    let specs: Vec<MsgSpec> = (0..3)
        .map(|class| MsgSpec {
            class,
            len: MAX_MESSAGE_LEN,
            imm: true,
        })
        .collect();
    run(0xFFFF, 0xFFFE, &specs, 7).unwrap();
}

#[test]
fn many_small_messages_across_msn_wrap() {
    let specs: Vec<MsgSpec> = (0..300)
        .map(|i| MsgSpec {
            class: (i % 3) as u8,
            len: 1 + (i * 37 % 3000),
            imm: i % 2 == 0,
        })
        .collect();
    run(0xFFC0, 0xFFF0, &specs, 99).unwrap();
}
