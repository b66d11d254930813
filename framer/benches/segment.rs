//! Cost of cutting segments: a 16 MiB - 1 message framed into 1448-byte segments (reported per
//! segment), and a re-cut at an arbitrary mid-message offset as a retransmission does.

use bth_framer::{Framer, FramerConfig, WorkRequest, WrOp};
use bth_wire::MAX_MESSAGE_LEN;
use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

const MSS: u32 = 1448;

fn framer_with(op: WrOp, sg_list: Vec<Bytes>) -> Framer {
    let mut f = Framer::new(FramerConfig {
        mss: MSS,
        first_msn: 0,
        max_message_len: MAX_MESSAGE_LEN,
    });
    f.post(WorkRequest {
        wr_id: 1,
        op,
        sg_list,
    })
    .expect("post");
    f
}

fn segment(c: &mut Criterion) {
    let data = Bytes::from(vec![0xA5u8; MAX_MESSAGE_LEN as usize]);
    let segments = u64::from(MAX_MESSAGE_LEN.div_ceil(MSS));
    let cases = [
        ("send_1_sge", WrOp::Send { imm: None }, vec![data.clone()]),
        (
            "write_imm_4_sge",
            WrOp::RdmaWrite {
                rkey: 7,
                remote_addr: 0x10_0000,
                imm: Some(9),
            },
            // Unequal pieces so segments regularly straddle two entries.
            (0..4)
                .map(|i| {
                    let q = data.len() / 4;
                    let end = if i == 3 { data.len() } else { (i + 1) * q + 7 };
                    data.slice(i * q + if i == 0 { 0 } else { 7 }..end)
                })
                .collect(),
        ),
    ];
    let mut g = c.benchmark_group("frame_16MiB_message_1448B");
    g.throughput(Throughput::Elements(segments));
    g.sample_size(20);
    for (name, op, sg) in cases {
        let f = framer_with(op, sg);
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut at = 0;
                let end = f.stream_end();
                while at < end {
                    let d = f.segment_at(black_box(at), MSS).expect("inside message");
                    at += u64::from(d.len);
                    black_box(d);
                }
            })
        });
    }
    g.finish();

    let f = framer_with(WrOp::Send { imm: None }, vec![data]);
    c.bench_function("recut_mid_message_1448B", |b| {
        let mut at = 12_345_677u64;
        b.iter(|| {
            at = (at * 48271) % u64::from(MAX_MESSAGE_LEN);
            black_box(f.segment_at(black_box(at), MSS))
        })
    });
}

criterion_group!(benches, segment);
criterion_main!(benches);
