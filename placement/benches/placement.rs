//! Placement throughput against plain memcpy: a 16 MiB - 1 byte message cut into 1448-byte
//! segments, delivered in a shuffled order. `memcpy` copies the same slices into the same
//! offsets in the same order with `copy_from_slice`, so the gap between the two is the cost of
//! routing, bounds checks and coverage tracking.

use bth_placement::{Access, PlaceOutcome, Placement, PlacementConfig};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use tcp_bth_wire::{Bth, Extension, Inbound, MessageKind, Opcode, Position, Reth, MAX_MESSAGE_LEN};

const MSS: u32 = 1448;
const MSG: u32 = MAX_MESSAGE_LEN; // 16 MiB - 1: the largest message the 24-bit offset allows
const BUF: usize = 16 << 20;

fn segment(kind: MessageKind, offset: u32, payload: &[u8], reth: Option<Reth>) -> Inbound<'_> {
    let pos = Position::of(offset, payload.len() as u32, MSG);
    let mut b = Bth::new(Opcode::for_data(kind, pos, false).unwrap());
    b.mbo = offset;
    if let Some(r) = reth {
        b.ext = Extension::Reth(Reth {
            rkey: r.rkey,
            addr: r.addr + u64::from(offset),
        });
    }
    Inbound::from_bth(&b, payload).unwrap()
}

/// Segment boundaries in a deterministic shuffled order (Fisher-Yates on SplitMix64).
fn shuffled_ranges() -> Vec<(u32, u32)> {
    let mut v: Vec<(u32, u32)> = (0..MSG)
        .step_by(MSS as usize)
        .map(|a| (a, (a + MSS).min(MSG)))
        .collect();
    let mut state = 0x1234_5678_u64;
    for i in (1..v.len()).rev() {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        v.swap(i, ((z ^ (z >> 31)) % (i as u64 + 1)) as usize);
    }
    v
}

fn placement(c: &mut Criterion) {
    let src: Vec<u8> = (0..MSG).map(|i| (i * 31 + 7) as u8).collect();
    let ranges = shuffled_ranges();
    let sends: Vec<Inbound<'_>> = ranges
        .iter()
        .map(|&(a, b)| segment(MessageKind::Send, a, &src[a as usize..b as usize], None))
        .collect();

    let mut g = c.benchmark_group("place_16MiB_1448B_shuffled");
    g.throughput(Throughput::Bytes(u64::from(MSG)));
    g.sample_size(20);

    let mut dst = vec![0u8; BUF];
    g.bench_function("memcpy", |b| {
        b.iter(|| {
            for &(a, e) in &ranges {
                dst[a as usize..e as usize].copy_from_slice(&src[a as usize..e as usize]);
            }
            black_box(&mut dst);
        })
    });

    let mut buf = Some(vec![0u8; BUF]);
    g.bench_function("place_send", |b| {
        b.iter(|| {
            let mut p = Placement::new(PlacementConfig::new(0));
            p.post_recv(1, buf.take().unwrap()).unwrap();
            for s in &sends {
                black_box(p.place(s));
            }
            let cqe = p.poll_completion().unwrap();
            assert!(cqe.is_success());
            buf = cqe.buf;
        })
    });

    // RDMA WRITE into one registered region: rkey/bounds checks on every segment.
    let mut p = Placement::new(PlacementConfig::new(0));
    let mr = p
        .regions_mut()
        .register(vec![0u8; BUF], Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    let reth = Some(Reth {
        rkey: mr.rkey,
        addr: mr.addr,
    });
    let writes: Vec<Inbound<'_>> = ranges
        .iter()
        .map(|&(a, b)| {
            segment(
                MessageKind::RdmaWrite,
                a,
                &src[a as usize..b as usize],
                reth,
            )
        })
        .collect();
    let mut msn = 0u16;
    g.bench_function("place_write", |b| {
        b.iter(|| {
            for s in &writes {
                let mut s = *s;
                s.msn = msn;
                black_box(p.place(&s));
            }
            msn = msn.wrapping_add(1);
        })
    });
    g.finish();
    // Checked only if the write benchmark ran (a name filter may skip it).
    if msn != 0 {
        assert!(p.regions().bytes(mr.rkey).unwrap()[..MSG as usize] == src[..]);
        let n = p.counters();
        assert_eq!(n.bytes_copied, n.bytes_placed);
    }

    // Sanity outside the timing: the shuffled placement is exact.
    let mut p = Placement::new(PlacementConfig::new(0));
    p.post_recv(1, vec![0u8; BUF]).unwrap();
    for s in &sends {
        assert!(matches!(p.place(s), PlaceOutcome::Placed { .. }));
    }
    assert_eq!(
        p.poll_completion().unwrap().buf.unwrap()[..MSG as usize],
        src[..]
    );
}

criterion_group!(benches, placement);
criterion_main!(benches);
