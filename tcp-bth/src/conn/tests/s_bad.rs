//! Bad input under S framing (amendment 3), segment by segment: an option in the framing not
//! negotiated fails the connection with a NAK (a retransmission would repeat the fault); an
//! S segment at odds with its message (another start, bytes past its length) is dropped and
//! counted, nothing is placed, and nothing already placed is disturbed.

use super::*;
use crate::config::Framing;
use crate::wire::{Bth, NakCode, TcpRepr};
use std::cell::RefCell;

fn pair(framing: Framing) -> BackToBack {
    let (mut a, mut b) = configs(true);
    a.framing = framing;
    b.framing = framing;
    BackToBack::established(a, b, MS)
}

/// `seg` (a segment A sent, as on the wire) with its option changed by `f`, checksum redone.
fn altered(d: &BackToBack, seg: &[u8], f: impl FnOnce(&mut Bth, &[u8])) -> Vec<u8> {
    let mut repr = TcpRepr::parse(seg, None).unwrap();
    let mut b = repr.options.bth.expect("a BTH segment");
    f(&mut b, repr.payload);
    repr.options.bth = Some(b);
    repr.to_vec(d.a.config().ip).unwrap()
}

/// A's data segments for one SEND of `len` bytes into a receive B posted, held back.
fn held_send(d: &mut BackToBack, len: usize) -> Vec<Vec<u8>> {
    d.b.post_recv(1, vec![0; len]).unwrap();
    d.settle(10 * MS);
    d.a.post_send(WorkRequest::send(1, pattern(1, len), None))
        .unwrap();
    let held = RefCell::new(Vec::new());
    d.step(&mut |dir, _, p| {
        if dir == Direction::AtoB && !TcpRepr::parse(&p, None).unwrap().payload.is_empty() {
            held.borrow_mut().push(p);
            return None;
        }
        Some(p)
    });
    held.into_inner()
}

/// Deliver `segs` to B at once, then let the pair finish; B's completed buffer.
fn deliver_and_finish(d: &mut BackToBack, segs: Vec<Vec<u8>>) -> Option<Vec<u8>> {
    for s in segs {
        let now = d.now;
        d.b.handle_segment(now, &s);
    }
    let mut got = None;
    d.run(Duration::from_secs(2), pass, |d| {
        if let Some(c) = d.b.poll_completion() {
            got = c.buf;
        }
        got.is_some()
    });
    got
}

#[test]
fn an_option_in_the_framing_not_negotiated_fails_the_connection_with_a_nak() {
    for framing in [Framing::Seq, Framing::PerSegment] {
        let mut d = pair(framing);
        assert_eq!(d.a.seq_framed(), framing == Framing::Seq);
        let segs = held_send(&mut d, 300);
        assert_eq!(segs.len(), 1, "a SEND_ONLY");
        // The same segment in the other framing, with a valid ICRC where that framing has one
        // (so it is the S bit, not the ICRC, that refuses it).
        let other = altered(&d, &segs[0], |b, payload| {
            b.seq_framed = !b.seq_framed;
            b.icrc = if b.seq_framed { 300 } else { 0 };
            b.seal(payload);
        });
        let now = d.now;
        d.b.handle_segment(now, &other);
        assert_eq!(d.b.error(), Some(ConnectionError::FramingMismatch));
        assert_eq!(d.b.stats().framing_mismatch, 1);
        assert_eq!(d.b.test_placement().counters().bytes_placed, 0);
        // The requester hears why: a NAK naming the SEND.
        d.run(Duration::from_secs(1), pass, |d| d.a.error().is_some());
        match d.a.error() {
            Some(ConnectionError::PeerNak(n)) => {
                assert_eq!((n.code, n.msn), (NakCode::InvalidRequest, 0));
            }
            other => panic!("{framing:?}: A ended with {other:?}"),
        }
    }
}

#[test]
fn an_s_segment_implying_another_start_is_dropped_and_the_message_completes_intact() {
    let mut d = pair(Framing::Seq);
    let segs = held_send(&mut d, 20_000);
    assert!(segs.len() > 3, "{} segments", segs.len());
    // The first segment, then a copy of the third whose anchor says the message starts 8
    // bytes later (its bytes would land 8 bytes too early), then everything.
    let moved = altered(&d, &segs[2], |b, _| b.mbo = (b.mbo + 8) % (1 << 24));
    let now = d.now;
    d.b.handle_segment(now, &segs[0]);
    d.b.handle_segment(now, &moved);
    assert_eq!(d.b.stats().s_inconsistent, 1);
    let got = deliver_and_finish(&mut d, segs).expect("the SEND completes");
    assert_eq!(got, pattern(1, 20_000));
    assert_eq!(d.b.error(), None);
}

#[test]
fn an_s_segment_past_its_message_length_is_dropped_and_the_message_completes_intact() {
    let mut d = pair(Framing::Seq);
    let segs = held_send(&mut d, 20_000);
    // The second segment claiming a message of 100 bytes: its bytes would pass the end.
    let short = altered(&d, &segs[1], |b, _| b.icrc = 100);
    let now = d.now;
    d.b.handle_segment(now, &short);
    assert_eq!(d.b.stats().s_inconsistent, 1);
    assert_eq!(d.b.test_placement().counters().bytes_placed, 0);
    // And a segment of the real message with another length than its first said.
    d.b.handle_segment(now, &segs[0]);
    let other_len = altered(&d, &segs[2], |b, _| b.icrc += 1);
    d.b.handle_segment(now, &other_len);
    assert_eq!(d.b.stats().s_inconsistent, 2);
    let got = deliver_and_finish(&mut d, segs).expect("the SEND completes");
    assert_eq!(got, pattern(1, 20_000));
}

/// An S segment that runs past the receive window is trimmed to it (amendment 3: its offsets
/// come from its sequence number, so its bytes in the window are placed where they belong), as
/// RFC 9293 trims any segment; a per-segment one is dropped whole (its fields describe it
/// whole). Found by the S framing tests: the S one used to be dropped whole too.
#[test]
fn an_s_segment_past_the_window_is_trimmed_and_its_bytes_in_the_window_placed() {
    for framing in [Framing::Seq, Framing::PerSegment] {
        let (mut a, mut b) = configs(true);
        a.framing = framing;
        b.framing = framing;
        b.recv_window = 16_384;
        let mut d = BackToBack::established(a, b, MS);
        let segs = held_send(&mut d, 20_000);
        // The message's first 17,384 bytes in one segment with its first segment's option
        // (B is the one checked here: these bytes stand for a peer's super-segment).
        let data = pattern(1, 20_000);
        let first = TcpRepr::parse(&segs[0], None).unwrap();
        let mut bth = first.options.bth.unwrap();
        bth.seal(&data[..17_384]);
        let mut long = TcpRepr {
            payload: &data[..17_384],
            ..first
        };
        long.options.bth = Some(bth);
        let long = long.to_vec(d.a.config().ip).unwrap();
        let now = d.now;
        d.b.handle_segment(now, &long);
        let placed = d.b.test_placement().counters().bytes_placed;
        if framing == Framing::Seq {
            assert_eq!(d.b.stats().out_of_window, 0);
            assert_eq!(placed, 16_384, "the bytes in the window");
            assert_eq!(d.b.seq_state().2, first.seq.wrapping_add(16_384));
        } else {
            assert_eq!(d.b.stats().out_of_window, 1);
            assert_eq!(placed, 0);
        }
    }
}
