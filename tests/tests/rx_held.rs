//! Receive memory held outside posted buffers (`Connection::rx_held`), measured where it can be
//! non-zero: the same transfer with the first data segment lost, once as a plain byte stream
//! (the bytes after the hole wait in the out-of-order store, then in the stream queue until the
//! application reads them) and once with `tcp_bth` (every segment goes straight into the posted
//! buffer, so nothing is held, though segments were placed out of order).

use bth_framer::{WorkRequest, WrOp};
use bth_io::sim::{Direction, Pair};
use bth_tests::*;
use bytes::Bytes;
use std::time::Duration;
use tcp_bth::wire::TcpRepr;
use tcp_bth::{Mode, RxHeld};

const LEN: usize = 20_000;

/// An established pair over a direct wire, A to B.
fn wire(seed: u64, bth: bool) -> BackToBack {
    let (a, b) = configs(seed, |a, b| {
        a.bth = bth;
        b.bth = bth;
    });
    let mut pair = Pair::new(a, b, quiet_link());
    assert!(pair.establish(Duration::from_secs(1)));
    let Pair { a, b, now, .. } = pair;
    BackToBack::new(a, b.expect("accepted"), now)
}

/// A filter that drops the first A→B segment carrying data, once.
fn drop_first_data() -> impl FnMut(Direction, Duration, Vec<u8>) -> Option<Vec<u8>> {
    let mut dropped = false;
    move |dir, _, pkt| {
        let seg = TcpRepr::parse(&pkt, None).expect("our own segment parses");
        if dir == Direction::AtoB && !seg.payload.is_empty() && !dropped {
            dropped = true;
            return None;
        }
        Some(pkt)
    }
}

#[test]
fn plain_mode_with_a_hole_holds_the_bytes_after_it() {
    let mut w = wire(71, false);
    assert_eq!(w.a.mode(), Mode::Plain);
    let data = pattern(3, LEN);
    w.a.send_bytes(&data).unwrap();
    let mut filter = drop_first_data();
    // Until the lost segment is retransmitted, B holds what arrived beyond the hole.
    let mut max_ooo = 0;
    let ok = w.run(Duration::from_secs(2), &mut filter, |w| {
        max_ooo = max_ooo.max(w.b.rx_held().ooo_store);
        w.b.readable_bytes() == LEN
    });
    assert!(ok, "transfer did not complete: {:?}", w.b.rx_held());
    assert!(
        max_ooo > 0,
        "the out-of-order store held bytes behind the hole"
    );
    // Filled: everything waits in the stream queue until the application reads it.
    assert_eq!(
        w.b.rx_held(),
        RxHeld {
            stream_queue: LEN as u64,
            ooo_store: 0
        }
    );
    let mut got = Vec::new();
    drain_bytes(&mut w.b, &mut got);
    assert_eq!(got, data);
    assert_eq!(w.b.rx_held().total(), 0);
}

#[test]
fn bth_mode_with_the_same_hole_holds_nothing() {
    let mut w = wire(71, true);
    assert!(matches!(w.a.mode(), Mode::Bth { .. }));
    let data = pattern(3, LEN);
    w.b.post_recv(1, vec![0; LEN]).unwrap();
    w.run(Duration::from_millis(5), |_, _, p| Some(p), |_| false);
    w.a.post_send(WorkRequest {
        wr_id: 1,
        op: WrOp::Send { imm: None },
        sg_list: vec![Bytes::from(data.clone())],
    })
    .unwrap();
    let mut filter = drop_first_data();
    let mut max_held = 0;
    let mut got = None;
    let ok = w.run(Duration::from_secs(2), &mut filter, |w| {
        max_held = max_held.max(w.b.rx_held().total());
        if let Some(c) = w.b.poll_completion() {
            got = c.buf;
        }
        got.is_some()
    });
    assert!(ok, "message did not complete");
    assert_eq!(got.as_deref(), Some(&data[..]));
    assert!(
        w.b.stats().ooo_placed > 0,
        "segments after the hole were placed out of order"
    );
    assert_eq!(max_held, 0, "nothing staged outside the posted buffer");
}
