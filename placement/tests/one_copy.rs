//! "One copy per payload byte", checked against the test's own arithmetic rather than against
//! another counter: duplicate, overlapping and out-of-order segments of a SEND and a WRITE, and
//! `bytes_copied` (counted at the copy itself) must equal the number of distinct message bytes
//! sent, as must `bytes_placed`. A second or repeated copy anywhere in placement makes
//! `bytes_copied` exceed that number and these tests fail.

mod common;

use bth_placement::{Access, PlaceOutcome, Placement, PlacementConfig};
use bth_wire::{MessageKind, Reth};
use common::{cut, seg, Rng, CANARY};

const F: u16 = 7;

/// `(offset, len)` pieces of a 1000-byte message, in arrival order: out of order, a whole
/// duplicate, two partial overlaps, and a piece entirely inside one already placed.
const PIECES: [(u32, u32); 7] = [
    (500, 200), // out of order: a hole before it
    (500, 200), // whole duplicate
    (0, 300),   //
    (250, 300), // overlaps both neighbours: 50 + 50 already there, 200 new
    (600, 50),  // inside [500, 700): nothing new
    (900, 100), // LAST, out of order
    (650, 300), // overlaps [650, 700) and [900, 950): 200 new
];
const LEN: u32 = 1000;

fn message() -> Vec<u8> {
    (0..LEN).map(|i| (i * 7 + 3) as u8).collect()
}

/// Distinct bytes the pieces bring, computed independently of placement.
fn distinct_bytes() -> u64 {
    let mut seen = vec![false; LEN as usize];
    for (o, n) in PIECES {
        seen[o as usize..(o + n) as usize].fill(true);
    }
    seen.iter().filter(|&&b| b).count() as u64
}

/// Bytes sent in total (what a copy-per-segment implementation would copy).
fn sent_bytes() -> u64 {
    PIECES.iter().map(|&(_, n)| u64::from(n)).sum()
}

#[test]
fn duplicate_and_overlapping_sends_copy_each_byte_once() {
    let msg = message();
    let mut p = Placement::new(PlacementConfig::new(F));
    p.post_recv(1, vec![CANARY; LEN as usize]).unwrap();
    for (o, n) in PIECES {
        let piece = &msg[o as usize..(o + n) as usize];
        p.place(&seg(MessageKind::Send, F, o, piece, LEN, None, None));
    }
    let c = p.poll_completion().expect("message complete");
    assert_eq!(c.buf.as_deref(), Some(&msg[..]), "every byte in place");
    let k = p.counters();
    let distinct = distinct_bytes();
    assert_eq!(distinct, u64::from(LEN));
    assert!(sent_bytes() > distinct, "the pieces really overlap");
    assert_eq!(k.bytes_copied, distinct, "one copy per byte: {k:?}");
    assert_eq!(k.bytes_placed, distinct, "{k:?}");
    assert_eq!(k.duplicate_bytes, sent_bytes() - distinct, "{k:?}");
    // (500,200) again and (600,50): nothing new in either.
    assert_eq!(k.duplicate_segments, 2, "{k:?}");
}

#[test]
fn duplicate_and_overlapping_writes_copy_each_byte_once() {
    let msg = message();
    let mut p = Placement::new(PlacementConfig::new(F));
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let r = p
        .regions_mut()
        .register(vec![CANARY; LEN as usize + 64], rw)
        .unwrap();
    let reth = Reth {
        rkey: r.rkey,
        addr: r.addr + 32,
    };
    for (o, n) in PIECES {
        let piece = &msg[o as usize..(o + n) as usize];
        p.place(&seg(
            MessageKind::RdmaWrite,
            F,
            o,
            piece,
            LEN,
            None,
            Some(reth),
        ));
    }
    let bytes = p.regions().bytes(r.rkey).unwrap();
    assert_eq!(&bytes[32..32 + LEN as usize], &msg[..]);
    assert!(bytes[..32]
        .iter()
        .chain(&bytes[32 + LEN as usize..])
        .all(|&b| b == CANARY));
    let k = p.counters();
    assert_eq!(k.bytes_copied, distinct_bytes(), "one copy per byte: {k:?}");
    assert_eq!(k.bytes_placed, distinct_bytes(), "{k:?}");
}

#[test]
fn a_segment_placed_twice_is_copied_once() {
    let mut p = Placement::new(PlacementConfig::new(F));
    p.post_recv(1, vec![CANARY; 64]).unwrap();
    let data = [0xABu8; 32];
    let first = p.place(&seg(MessageKind::Send, F, 0, &data, 64, None, None));
    assert_eq!(first, PlaceOutcome::Placed { new_bytes: 32 });
    let again = p.place(&seg(MessageKind::Send, F, 0, &data, 64, None, None));
    assert_eq!(again, PlaceOutcome::Duplicate);
    let k = p.counters();
    assert_eq!((k.bytes_copied, k.bytes_placed), (32, 32), "{k:?}");
    assert_eq!((k.duplicate_segments, k.duplicate_bytes), (1, 32), "{k:?}");
}

/// MSS-sized segments (what the arrival bitmap tracks a bit each) in shuffled order with every
/// third one lost, then a retransmission re-cut at other boundaries over arrived and missing
/// bytes alike, so its pieces straddle units: each byte is copied once, the overlap is counted
/// as duplicate, and the message completes exactly when its last missing byte arrives.
#[test]
fn grid_segments_and_a_recut_retransmission_copy_each_byte_once() {
    const MSS: u32 = 1448;
    let len = 40 * MSS + 313;
    let msg: Vec<u8> = (0..len).map(|i| (i * 13 + 5) as u8).collect();
    let mut p = Placement::new(PlacementConfig::new(F));
    p.post_recv(1, vec![CANARY; len as usize + 16]).unwrap();
    let mut base = cut(len, MSS);
    Rng(3).shuffle(&mut base);
    let first: Vec<_> = base
        .iter()
        .enumerate()
        .filter(|(n, _)| n % 3 != 1)
        .collect();
    let mut present = vec![false; len as usize];
    let mut sent = 0u64;
    let pieces = first.into_iter().map(|(_, &r)| r).chain(cut(len, 1000));
    for (a, b) in pieces {
        let out = p.place(&seg(
            MessageKind::Send,
            F,
            a,
            &msg[a as usize..b as usize],
            len,
            None,
            None,
        ));
        let fresh = present[a as usize..b as usize]
            .iter()
            .filter(|&&x| !x)
            .count() as u32;
        present[a as usize..b as usize].fill(true);
        sent += u64::from(b - a);
        let expect = if fresh > 0 {
            PlaceOutcome::Placed { new_bytes: fresh }
        } else {
            PlaceOutcome::Duplicate
        };
        assert_eq!(out, expect, "[{a}, {b})");
        let complete = present.iter().all(|&x| x);
        assert_eq!(p.pending_completions(), usize::from(complete), "[{a}, {b})");
    }
    let c = p.poll_completion().expect("message complete");
    let buf = c.buf.unwrap();
    assert_eq!(&buf[..len as usize], &msg[..]);
    assert!(buf[len as usize..].iter().all(|&b| b == CANARY));
    let k = p.counters();
    assert_eq!(
        (k.bytes_copied, k.bytes_placed),
        (len.into(), len.into()),
        "{k:?}"
    );
    assert_eq!(k.duplicate_bytes, sent - u64::from(len), "{k:?}");
}
