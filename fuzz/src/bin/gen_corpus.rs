//! Writes the seed corpus under `fuzz/corpus/<target>/` from real segments: a short simulated
//! transfer (handshake, SEND, RDMA WRITE with immediate, RDMA READ, close) is captured with the
//! pair's tap; its segments seed `tcp_segment`, their BTH options seed `bth_option`, and op
//! sequences (whole messages, single segments, raw captured segments) seed `conn_receive`.
//!
//! Run from `fuzz/`: `cargo run --release --bin gen_corpus`.

use bth_placement::Access;
use bytes::Bytes;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tcp_bth::wire::TcpRepr;
use bth_fuzz::conn::{tag, Seed};
use bth_io::sim::{pair_configs, LinkConfig, Pair};

fn capture() -> Vec<Vec<u8>> {
    let (a, b) = pair_configs(3);
    let mut p = Pair::new(a, b, LinkConfig::default());
    let segs = Arc::new(Mutex::new(Vec::new()));
    let s2 = segs.clone();
    p.tap = Some(Box::new(move |_, _, bytes| {
        s2.lock().unwrap().push(bytes.to_vec())
    }));
    assert!(p.establish(Duration::from_secs(5)));
    let h = p
        .b()
        .register_mr(
            vec![0; 8192],
            Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
        )
        .unwrap();
    p.b().post_recv(1, vec![0; 4096]).unwrap();
    let msg = |n: usize| vec![Bytes::from((0..n).map(|i| i as u8).collect::<Vec<_>>())];
    p.a.post_send(bth_framer::WorkRequest {
        wr_id: 1,
        op: bth_framer::WrOp::Send { imm: Some(7) },
        sg_list: msg(3000),
    })
    .unwrap();
    p.a.post_send(bth_framer::WorkRequest {
        wr_id: 2,
        op: bth_framer::WrOp::RdmaWrite {
            rkey: h.rkey,
            remote_addr: h.addr,
            imm: Some(9),
        },
        sg_list: msg(5000),
    })
    .unwrap();
    p.a.post_read(3, h.rkey, h.addr, vec![0; 2000]).unwrap();
    p.run_until(Duration::from_secs(2), |p| p.a.send_backlog() == 0);
    p.a.close();
    p.b().close();
    p.run_until(Duration::from_secs(2), |_| false);
    let v = segs.lock().unwrap().clone();
    v
}

fn write(dir: &str, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(format!("{dir}/{name}"), bytes).unwrap();
}

fn main() {
    let segs = capture();
    eprintln!("captured {} segments", segs.len());
    // tcp_segment: a spread of real segments (SYN, SYN-ACK, data of each kind, ACKs, FIN).
    let step = (segs.len() / 24).max(1);
    let picked: Vec<&Vec<u8>> = segs.iter().step_by(step).take(24).collect();
    for (i, s) in segs
        .iter()
        .take(4)
        .chain(picked.iter().copied())
        .enumerate()
    {
        write("corpus/tcp_segment", &format!("seg-{i:02}"), s);
    }
    // bth_option: the option bytes of those segments (all opcodes that occurred).
    let mut seen = std::collections::HashSet::new();
    for s in &segs {
        let Ok(r) = TcpRepr::parse(s, None) else {
            continue;
        };
        let Some(b) = r.options.bth else { continue };
        let v = b.to_vec().unwrap();
        let key = (b.opcode, b.rtr, b.timestamps.is_some());
        if seen.insert(key) {
            write("corpus/bth_option", &format!("opt-{:02}", seen.len()), &v);
        }
    }
    // conn_receive: op sequences.
    let d = "corpus/conn_receive";
    let mut n = 0;
    let mut put = |s: Seed| {
        write(d, &format!("ops-{n:02}"), &s.0);
        n += 1;
    };
    for kind in 0..4u8 {
        for (len, perm, drop, dup) in [(100, 0, 0, 0), (5000, 0x81, 0, 0x05), (9000, 3, 0x82, 0)] {
            put(Seed::default()
                .message(kind, len, perm, drop, dup, 0)
                .op(tag::POLL)
                .op(tag::COMPLETIONS));
        }
    }
    put(Seed::default()
        .message(1, 3000, 0, 0, 0, 4)
        .op(tag::COMPLETIONS));
    put(Seed::default()
        .message(1, 3000, 0, 0, 0, 6)
        .op(tag::COMPLETIONS));
    put(Seed::default().message(2, 16, 0, 0, 0, 5).op(tag::POLL));
    put(Seed::default()
        .b_write(5000)
        .message(0, 2000, 0, 0, 0, 0)
        .advance(0x8000 | 300)
        .op(tag::POLL));
    put(Seed::default()
        .op(tag::DEREGISTER)
        .message(1, 4000, 0, 0, 0, 0)
        .op(tag::REREGISTER)
        .message(1, 4000, 0, 0, 0, 0)
        .op(tag::COMPLETIONS));
    put(Seed::default()
        .post_recv(100)
        .message(0, 6000, 1, 0, 0, 0)
        .op(tag::COMPLETIONS));
    for (op, mbo_mode) in [
        (0x04u8, 0u8),
        (0x0a, 0),
        (0x0c, 0),
        (0x01, 1),
        (0x08, 1),
        (0x11, 0),
    ] {
        put(Seed::default()
            .segment(0x10, 0, 0, 1000, 1, op, mbo_mode, 1)
            .op(tag::POLL));
    }
    put(Seed::default().segment(0x84, 0, 0, 0, 1, 0x11, 0, 0)); // RST at RCV.NXT
    put(Seed::default().segment(0x84, 0, 1000, 0, 1, 0x11, 0, 0)); // in-window RST
    put(Seed::default().segment(0x82, 0, 10, 0, 1, 0x11, 0, 0)); // SYN
    for s in segs.iter().filter(|s| s.len() > 60).take(6) {
        put(Seed::default().raw(s));
    }
    eprintln!("wrote {n} conn_receive seeds");
}
