//! The receive window never shrinks (RFC 9293 §3.8.6), and answers to segments dropped
//! without data to report are rate-limited. Together these ended a lockup: in plain mode the
//! window's right edge moved left as out-of-order bytes arrived, so after bulk data both ways
//! each side took the other's ACKs for out-of-window segments and answered every one of them,
//! millions of segments a second, and no ACK was processed again.

use super::*;
use crate::wire::TcpRepr;

/// Right edges (sequence space, relative to B's first ACK) of every segment B sent.
fn edges_of_b(
    d: &mut BackToBack,
    send: impl FnOnce(&mut BackToBack),
    drop_first: usize,
) -> Vec<i64> {
    let shift = d.b.neg.rcv_wscale;
    let mut edges = Vec::new();
    let mut base = None;
    let mut dropped = 0;
    send(d);
    d.run(
        Duration::from_secs(2),
        |dir, _, p| {
            if dir == Direction::AtoB {
                // The first segments are lost: everything after them arrives out of order.
                dropped += 1;
                return (dropped > drop_first).then_some(p);
            }
            let seg = TcpRepr::parse(&p, None).unwrap();
            let edge = seg.ack.wrapping_add(u32::from(seg.window) << shift);
            let b: u32 = *base.get_or_insert(seg.ack);
            edges.push(i64::from(edge.wrapping_sub(b) as i32));
            Some(p)
        },
        |_| false,
    );
    edges
}

/// No edge falls short of the furthest before it by a whole scale unit (rounding a kept edge
/// down to whole units may cost less than one; data up to the furthest is still accepted).
fn never_left(edges: &[i64], unit: i64) {
    assert!(edges.len() > 10, "B sent {} segments", edges.len());
    let mut furthest = edges[0];
    for &e in edges {
        assert!(
            e > furthest - unit,
            "the right edge moved left: {furthest} then {e}"
        );
        furthest = furthest.max(e);
    }
}

#[test]
fn plain_mode_window_never_shrinks_as_out_of_order_bytes_arrive() {
    let mut d = established(false);
    let edges = edges_of_b(
        &mut d,
        |d| {
            d.a.send_bytes(&pattern(1, 400_000)).unwrap();
        },
        1,
    );
    never_left(&edges, 1 << d.b.neg.rcv_wscale);
    // The bytes behind the hole were held, and arrived whole once it filled.
    let mut got = vec![0u8; 500_000];
    let n = d.b.recv_bytes(&mut got);
    assert_eq!(&got[..n], &pattern(1, 400_000)[..]);
}

#[test]
fn plain_mode_window_never_shrinks_while_the_application_does_not_read() {
    // A small buffer that fills: the window closes by the edge staying put while RCV.NXT
    // reaches it, never by the edge moving back.
    let (a, mut b) = configs(false);
    b.recv_window = 64 * 1024;
    let mut d = BackToBack::established(a, b, MS);
    let edges = edges_of_b(
        &mut d,
        |d| {
            d.a.send_bytes(&pattern(2, 200_000)).unwrap();
        },
        2,
    );
    never_left(&edges, 1 << d.b.neg.rcv_wscale);
    // Filled to within a scale unit (the window is advertised in whole units), never past.
    let unit = 1 << d.b.neg.rcv_wscale;
    let held = d.b.readable_bytes();
    assert!(
        held > 64 * 1024 - unit && held <= 64 * 1024,
        "{held} bytes held"
    );
}

#[test]
fn bth_mode_window_never_shrinks() {
    let mut d = established(true);
    let edges = edges_of_b(
        &mut d,
        |d| {
            for i in 0..4 {
                d.b.post_recv(i, vec![0; 100_000]).unwrap();
                d.a.post_send(WorkRequest::send(i, pattern(i as u8, 100_000), None))
                    .unwrap();
            }
        },
        1,
    );
    never_left(&edges, 1 << d.b.neg.rcv_wscale);
}

/// A hundred pure ACKs from A beyond B's window, 10 µs apart (what a peer that took our ACKs
/// for out-of-window ones would send back without end): B answers at most one per 500 ms.
/// Data below RCV.NXT is still answered each time, with its D-SACK.
#[test]
fn answers_to_out_of_window_acks_are_rate_limited_but_old_data_gets_its_dsack_at_once() {
    for bth in [false, true] {
        let mut d = established(bth);
        if !bth {
            // Data to have old copies of (below).
            d.a.send_bytes(&pattern(3, 100)).unwrap();
            d.settle(Duration::from_millis(10));
        }
        let (_, a_nxt, a_rcv) = d.a.seq_state();
        let ip = d.a.config().ip;
        let beyond = a_nxt
            .wrapping_add(d.b.config().recv_window)
            .wrapping_add(1 << 20);
        let ack = |seq: u32, payload: &'static [u8]| {
            TcpRepr {
                src_port: A_PORT,
                dst_port: B_PORT,
                seq,
                ack: a_rcv,
                flags: crate::wire::TcpFlags::ACK,
                window: 1000,
                urgent: 0,
                options: Default::default(),
                payload,
            }
            .to_vec(ip)
            .unwrap()
        };
        let forged = ack(beyond, &[]);
        let before = d.b.stats();
        let sent_before = d.sent[1];
        for k in 0..100u64 {
            let at = d.now + Duration::from_micros(10 * k);
            d.inject(at, Direction::AtoB, forged.clone());
        }
        d.run(Duration::from_millis(5), pass, |_| false);
        let s = d.b.stats();
        assert_eq!(s.out_of_window - before.out_of_window, 100);
        let answers = d.sent[1] - sent_before;
        assert!(answers <= 1, "{answers} answers to 100 out-of-window ACKs");
        assert_eq!(s.oow_acks_limited - before.oow_acks_limited, 100 - answers);
        if bth {
            continue;
        }
        // Old data (a spurious retransmission): each copy answered at once with a D-SACK.
        let old = ack(a_nxt.wrapping_sub(10), b"0123456789");
        let (dsacks, sent_before) = (d.b.stats().dsacks_sent, d.sent[1]);
        for k in 0..5u64 {
            let at = d.now + Duration::from_micros(10 * k);
            d.inject(at, Direction::AtoB, old.clone());
        }
        d.run(Duration::from_millis(5), pass, |_| false);
        assert_eq!(d.sent[1] - sent_before, 5);
        assert_eq!(d.b.stats().dsacks_sent - dsacks, 5);
    }
}

/// A retransmission of the peer's that also carries new bytes has an older sequence number
/// than its latest segment but a newer ACK and window: an ACK that moves SND.UNA updates the
/// send window whatever SND.WL1 says (Linux's `tcp_may_update_window`). Keeping the old window,
/// now counted from the new SND.UNA, moved our idea of the peer's right edge past the one it
/// advertised, and we sent beyond it (the livelock detector's finding).
#[test]
fn an_ack_that_moves_snd_una_updates_the_window_whatever_its_sequence_number() {
    let mut d = established(false);
    d.b.send_bytes(&pattern(4, 1000)).unwrap();
    d.settle(Duration::from_millis(10));
    // B's latest segment is then a pure ACK at the end of its data: SND.WL1 at A is there.
    d.a.send_bytes(&pattern(6, 100)).unwrap();
    d.settle(Duration::from_millis(10));
    d.a.send_bytes(&pattern(5, 2000)).unwrap();
    // A's data is sent; nothing comes back.
    d.run(
        Duration::from_millis(1),
        |dir, _, p| (dir == Direction::AtoB).then_some(p),
        |_| false,
    );
    let (a_una, a_nxt, a_rcv) = d.a.seq_state();
    assert_eq!(a_nxt.wrapping_sub(a_una), 2000);
    let shift = d.a.neg.peer_wscale;
    // B's retransmission: 10 bytes A has, 10 it has not, acknowledging all of A's data with
    // a window of 5 units.
    let payload = [7u8; 20];
    let seg = TcpRepr {
        src_port: B_PORT,
        dst_port: A_PORT,
        seq: a_rcv.wrapping_sub(10),
        ack: a_nxt,
        flags: crate::wire::TcpFlags::ACK,
        window: 5,
        urgent: 0,
        options: Default::default(),
        payload: &payload,
    }
    .to_vec(d.b.config().ip)
    .unwrap();
    let now = d.now;
    d.a.handle_segment(now, &seg);
    assert_eq!(d.a.seq_state().0, a_nxt, "SND.UNA moved");
    assert_eq!(d.a.peer_window(), 5 << shift, "the window came with it");
}
