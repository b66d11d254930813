//! Bulk data both ways at once in plain mode, after idles from seconds to hours: the transfer
//! completes, and costs about what two one-way transfers cost. Before the window stopped
//! shrinking and out-of-window answers were rate-limited, each side sent millions of ACKs
//! answering the other's and the data stopped for good (the lockup this guards against).

use bth_io::sim::{Direction, Pair};
use bth_tests::*;
use std::time::Duration;

const SEC: Duration = Duration::from_secs(1);
const LEN: usize = 8 << 20;

/// Segments both ends sent to move `to_b` A→B and `to_a` B→A at once, or None if it stalled.
fn both_ways(p: &mut Pair, to_b: &[u8], to_a: &[u8]) -> Option<u64> {
    let before = p.a.stats().segments_out + p.b().stats().segments_out;
    p.a.send_bytes(to_b).unwrap();
    p.b().send_bytes(to_a).unwrap();
    let (mut got_b, mut got_a) = (Vec::new(), Vec::new());
    // Far more than the transfer needs (about 2 × 6,000 data segments and their ACKs): the
    // lockup sent millions within a virtual instant, so it ends the run instead of hanging it.
    let budget = 200_000;
    let mut over = false;
    let done = p.run_until(30 * SEC, |p| {
        drain_bytes(p.b(), &mut got_b);
        drain_bytes(&mut p.a, &mut got_a);
        over = p.a.stats().segments_out + p.b().stats().segments_out - before > budget;
        over || (got_b.len() == to_b.len() && got_a.len() == to_a.len())
    });
    if !done || over {
        eprintln!(
            "stalled: {} of {} A→B, {} of {} B→A; A {:?} B {:?}",
            got_b.len(),
            to_b.len(),
            got_a.len(),
            to_a.len(),
            p.a.stats(),
            p.b().stats()
        );
        return None;
    }
    assert_eq!(got_b, to_b);
    assert_eq!(got_a, to_a);
    Some(p.a.stats().segments_out + p.b().stats().segments_out - before)
}

/// Segments a one-way transfer of `len` bytes takes on a fresh pair (data and ACKs).
fn one_way(len: usize) -> u64 {
    let (a, b) = configs(7, |a, b| {
        a.bth = false;
        b.bth = false;
    });
    let mut p = established(a, b, quiet_link());
    let data = pattern(1, len);
    let before = p.a.stats().segments_out + p.b().stats().segments_out;
    p.a.send_bytes(&data).unwrap();
    let mut got = Vec::new();
    assert!(p.run_until(30 * SEC, |p| {
        drain_bytes(p.b(), &mut got);
        got.len() == len
    }));
    p.a.stats().segments_out + p.b().stats().segments_out - before
}

fn idle(p: &mut Pair, d: Duration) {
    let end = p.now + d;
    p.run_until(d, |p| p.now >= end);
}

fn bidirectional_after_idle(idle_for: Duration) {
    let (a, b) = configs(7, |a, b| {
        a.bth = false;
        b.bth = false;
    });
    let mut p = established(a, b, quiet_link());
    idle(&mut p, idle_for);
    let to_b = pattern(1, LEN);
    let to_a = pattern(2, LEN);
    let segs = both_ways(&mut p, &to_b, &to_a).expect("bidirectional transfer completes");
    let single = one_way(LEN);
    assert!(
        segs <= single * 2 * 13 / 10,
        "both ways took {segs} segments, one way {single}"
    );
    // And again right after, without an idle.
    let segs = both_ways(&mut p, &to_a, &to_b).expect("second bidirectional transfer");
    assert!(
        segs <= single * 2 * 13 / 10,
        "second time both ways took {segs} segments, one way {single}"
    );
}

#[test]
fn bidirectional_plain_bulk_without_idle() {
    bidirectional_after_idle(Duration::ZERO);
}

#[test]
fn bidirectional_plain_bulk_after_two_seconds_idle() {
    bidirectional_after_idle(2 * SEC);
}

#[test]
fn bidirectional_plain_bulk_after_forty_minutes_idle() {
    bidirectional_after_idle(40 * 60 * SEC);
}

#[test]
fn bidirectional_plain_bulk_after_two_hours_idle() {
    bidirectional_after_idle(2 * 3600 * SEC);
}

/// Two one-way transfers in a row on a clean link cost about the same: the second used to
/// need 1,479 retransmissions and 1,416 out-of-window drops, 90,577 segments where the first
/// took 46,346 (the shrinking window again).
#[test]
fn a_second_one_way_transfer_costs_what_the_first_did() {
    let (a, b) = configs(7, |a, b| {
        a.bth = false;
        b.bth = false;
    });
    let mut p = established(a, b, quiet_link());
    let data = pattern(1, 64 << 20);
    let mut costs = Vec::new();
    for _ in 0..2 {
        let before = p.a.stats().segments_out + p.b().stats().segments_out;
        let rtx = p.a.recovery_stats().retransmits;
        p.a.send_bytes(&data).unwrap();
        let mut got = Vec::new();
        assert!(p.run_until(60 * SEC, |p| {
            drain_bytes(p.b(), &mut got);
            got.len() == data.len()
        }));
        assert!(got == data);
        let segs = p.a.stats().segments_out + p.b().stats().segments_out - before;
        costs.push((segs, p.a.recovery_stats().retransmits - rtx));
    }
    let [(first, _), (second, rtx)] = costs[..] else {
        unreachable!()
    };
    assert!(second * 10 <= first * 11, "{second} segments after {first}");
    // The second starts with the first's congestion window, and its first flight can overflow
    // the link's 4 MiB queue: those drops are what it retransmits, nothing more.
    let drops = p.link.stats(Direction::AtoB).dropped();
    assert!(
        rtx <= drops + 2,
        "{rtx} retransmissions for {drops} packets the link dropped"
    );
    assert_eq!(p.b().stats().out_of_window, 0);
}
