//! Option encode and decode cost (ns per option) for the smallest and largest layouts, and a
//! whole TCP header parse with the option inside.

use bth_wire::{
    Bth, BthOption, ChecksumFill, Extension, IpPair, Opcode, Reth, TcpFlags, TcpOptions, TcpRepr,
    Timestamps,
};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

fn samples() -> [(&'static str, Bth); 2] {
    let mut small = Bth::new(Opcode::SendMiddle);
    small.mbo = 1448;
    small.seg = 1;
    let mut large = Bth::new(Opcode::RdmaWriteLastWithImmediate);
    large.timestamps = Some(Timestamps { tsval: 1, tsecr: 2 });
    large.ext = Extension::RethImmediate(
        Reth {
            rkey: 7,
            addr: 0x1000,
        },
        9,
    );
    [("16B", small), ("40B", large)]
}

/// The benchmarks' segment: fixed ports and numbers, ACK set, these options and payload.
fn ack_segment(options: TcpOptions, payload: &[u8]) -> TcpRepr<'_> {
    TcpRepr {
        src_port: 1,
        dst_port: 2,
        seq: 3,
        ack: 4,
        flags: TcpFlags::ACK,
        window: 5,
        urgent: 0,
        options,
        payload,
    }
}

fn codec(c: &mut Criterion) {
    let mut g = c.benchmark_group("bth_option");
    for (name, b) in samples() {
        let bytes = b.to_vec().unwrap();
        let mut buf = [0u8; 40];
        g.bench_function(format!("encode_{name}"), |bench| {
            bench.iter(|| black_box(&b).emit(black_box(&mut buf)).unwrap())
        });
        g.bench_function(format!("decode_{name}"), |bench| {
            bench.iter(|| Bth::parse(&BthOption::new_checked(black_box(&bytes[..])).unwrap()))
        });
    }
    g.finish();

    let ip = IpPair::V4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
    };
    let payload = vec![0xA5u8; 1448];
    let mut data = samples()[1].1;
    data.seal(&payload);
    let seg = ack_segment(
        TcpOptions {
            bth: Some(data),
            ..Default::default()
        },
        &payload,
    );
    let wire = seg.to_vec(ip).unwrap();
    let mut g = c.benchmark_group("tcp_segment_1448B");
    g.bench_function("parse_with_checksum", |b| {
        b.iter(|| TcpRepr::parse(black_box(&wire), Some(ip)).unwrap().seq)
    });
    g.bench_function("icrc_verify", |b| {
        b.iter(|| data.icrc_ok(black_box(&payload)))
    });
    g.bench_function("parse_offloaded_checksum", |b| {
        b.iter(|| TcpRepr::parse(black_box(&wire), None).unwrap().seq)
    });
    g.finish();
    acks(c, ip);
}

/// What a pure ACK costs to build (header, options, checksum, into a buffer) and to parse
/// (with its checksum), in both forms a receiver sends: amendment 1's plain form (timestamps
/// and three SACK blocks) and the BTH form (R=0, the completed MSN).
fn acks(c: &mut Criterion, ip: IpPair) {
    let plain = TcpOptions {
        timestamps: Some(Timestamps { tsval: 1, tsecr: 2 }),
        sack: (0..3u32)
            .map(|i| bth_wire::SackBlock {
                left: 10_000 * (i + 1),
                right: 10_000 * (i + 1) + 1448,
            })
            .collect(),
        ..Default::default()
    };
    let mut ack = Bth::new(Opcode::Acknowledge);
    ack.msn = 7;
    ack.timestamps = Some(Timestamps { tsval: 1, tsecr: 2 });
    ack.seal(&[]);
    let bth = TcpOptions {
        bth: Some(ack),
        ..Default::default()
    };
    let mut g = c.benchmark_group("pure_ack");
    for (name, options) in [("plain_3sack", plain), ("bth", bth)] {
        let seg = ack_segment(options, &[]);
        let len = seg.header_len();
        let mut buf = [0u8; 60];
        g.bench_function(format!("build_{name}"), |b| {
            b.iter(|| {
                black_box(&seg)
                    .emit_header(ip, &mut buf[..len], ChecksumFill::Full)
                    .unwrap()
            })
        });
        let wire = seg.to_vec(ip).unwrap();
        g.bench_function(format!("parse_{name}"), |b| {
            b.iter(|| TcpRepr::parse(black_box(&wire), Some(ip)).unwrap().ack)
        });
    }
    g.finish();
}

criterion_group!(benches, codec);
criterion_main!(benches);
