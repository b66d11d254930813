//! Property: arbitrary segments — any option fields a peer can send — never
//! panic, never touch memory they have no right to, and never grow state past the limits.

mod common;

use bth_placement::{Access, PlaceOutcome, Placement, PlacementConfig, PlacementLimits};
use bth_wire::{Bth, Extension, ExtensionKind, Inbound, Opcode, Reth, MAX_MESSAGE_LEN};
use common::CANARY;
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Raw {
    op: usize,
    msn: u16,
    offset: u32,
    len: usize,
    imm: Option<u32>,
    reth: Option<(bool, i64)>,
}

fn raw() -> impl Strategy<Value = Raw> {
    (
        0..Opcode::ALL.len(),
        prop_oneof![0u16..24, any::<u16>()],
        prop_oneof![Just(0u32), 0u32..80, MAX_MESSAGE_LEN - 40..=u32::MAX],
        0usize..48,
        any::<Option<u32>>(),
        any::<Option<(bool, i64)>>().prop_map(|r| r.map(|(ro, d)| (ro, d % 200))),
    )
        .prop_map(|(op, msn, offset, len, imm, reth)| Raw {
            op,
            msn,
            offset,
            len,
            imm,
            reth,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn arbitrary_segments_stay_contained(
        raws in prop::collection::vec(raw(), 1..200),
    ) {
        let limits = PlacementLimits { max_inflight: 8, max_ranges: 16, max_completions: 4, rkey_seed: 5 };
        let cfg = PlacementConfig { max_posted_recvs: 4, ..PlacementConfig::new(0) };
        let mut p = Placement::with_limits(cfg, limits.clone());
        let rw = p.regions_mut().register(vec![CANARY; 64], Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
        let ro = p.regions_mut().register(vec![CANARY; 64], Access::REMOTE_READ).unwrap();
        for i in 0..4 {
            p.post_recv(i, vec![CANARY; 32]).unwrap();
        }
        p.expect_read_response(0, 9, vec![CANARY; 16]).unwrap();
        let payload = [0x11u8; 48];
        let mut polled = 0;
        let mut refused = 0u64;
        for r in &raws {
            let opcode = Opcode::ALL[r.op];
            let reth = r.reth.map(|(use_ro, d)| {
                let h = if use_ro { ro } else { rw };
                Reth { rkey: h.rkey, addr: h.addr.wrapping_add_signed(d) }
            });
            // Whatever a peer can put in an option: fields that contradict each other,
            // offsets near the 24-bit limit. What the wire parser refuses never reaches
            // placement (Inbound exists only through `from_bth`).
            let ext = match opcode.extension() {
                ExtensionKind::None => Extension::None,
                ExtensionKind::Immediate => Extension::Immediate(r.imm.unwrap_or(1)),
                ExtensionKind::Reth => Extension::Reth(reth.unwrap_or(Reth { rkey: 7, addr: 0 })),
                ExtensionKind::RethImmediate => Extension::RethImmediate(
                    reth.unwrap_or(Reth { rkey: 7, addr: 0 }),
                    r.imm.unwrap_or(1),
                ),
            };
            let bth = Bth { msn: r.msn, mbo: r.offset & MAX_MESSAGE_LEN, ext, ..Bth::new(opcode) };
            let Ok(seg) = Inbound::from_bth(&bth, &payload[..r.len]) else {
                refused += 1;
                continue;
            };
            let out = p.place(&seg);
            if let PlaceOutcome::Placed { new_bytes } = out {
                prop_assert!(new_bytes as usize <= r.len);
            }
            prop_assert!(p.pending_completions() <= limits.max_completions);
            // Budget plus at most one range per tracked message (those starting at offset 0).
            prop_assert!(p.ranges_in_use() <= limits.max_ranges + 4 + 8 + 1);
            if r.op % 7 == 0 && p.poll_completion().is_some() {
                polled += 1;
            }
        }
        prop_assert!(p.regions().bytes(ro.rkey).unwrap().iter().all(|&b| b == CANARY));
        let c = p.counters();
        prop_assert_eq!(c.bytes_copied, c.bytes_placed);
        prop_assert_eq!(c.segments + refused, raws.len() as u64);
        p.flush();
        while p.poll_completion().is_some() {
            polled += 1;
        }
        prop_assert_eq!(p.posted_recvs() + p.outstanding_reads(), 0);
        prop_assert_eq!(p.ranges_in_use(), 0);
        prop_assert!(polled >= 5, "every posted buffer comes back");
    }
}
