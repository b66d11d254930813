//! The receiver's ACK policy (ack.rs), amendment 1's plain-form pure ACK with three SACK
//! blocks, D-SACK, and what the sender does with them: widen its reorder window and undo a
//! reduction its spurious retransmissions caused.

use super::*;
use crate::conn::ack::MAX_PENDING_ACKS;
use crate::wire::TcpRepr;
use std::cell::RefCell;

fn is_data(p: &[u8]) -> bool {
    TcpRepr::parse(p, None).is_ok_and(|s| !s.payload.is_empty())
}

fn is_pure_ack(p: &[u8]) -> bool {
    TcpRepr::parse(p, None)
        .is_ok_and(|s| s.payload.is_empty() && s.flags == crate::wire::TcpFlags::ACK)
}

/// B posts `n` receives of `len`, A sends `n` SENDs of `len` with distinct patterns.
fn sends(d: &mut BackToBack, n: u64, len: usize) {
    for i in 0..n {
        d.b.post_recv(i, vec![0; len]).unwrap();
    }
    d.settle(Duration::from_millis(10));
    for i in 0..n {
        d.a.post_send(WorkRequest::send(i, pattern(i as u8, len), None))
            .unwrap();
    }
}

/// Run until B has `n` completions, each verified against its pattern.
fn run_to_completion(
    d: &mut BackToBack,
    n: u64,
    len: usize,
    filter: impl FnMut(Direction, Duration, Vec<u8>) -> Option<Vec<u8>>,
) {
    let mut done = 0;
    let ok = d.run(Duration::from_secs(5), filter, |d| {
        while let Some(c) = d.b.poll_completion() {
            assert_eq!(c.status, WcStatus::Success);
            let buf = c.buf.expect("a SEND completion hands the buffer back");
            assert_eq!(&buf[..], &pattern(c.wr_id as u8, len)[..]);
            done += 1;
        }
        done == n
    });
    assert!(ok, "{done} of {n} messages: {:?} {:?}", d.a, d.b);
}

/// A flight that arrives in one driver turn is acknowledged every second full segment, not
/// once per turn (the TUN path measured 11 segments per ACK; the back-to-back wire delivers a
/// whole flight at one instant, so it got one ACK per flight).
#[test]
fn every_second_full_segment_is_acknowledged_within_one_turn() {
    let mut d = established(true);
    sends(&mut d, 1, 1 << 20);
    let (mut data, mut acks) = (0u64, 0u64);
    run_to_completion(&mut d, 1, 1 << 20, |dir, _, p| {
        match dir {
            Direction::AtoB => data += u64::from(is_data(&p)),
            Direction::BtoA => acks += u64::from(is_pure_ack(&p)),
        }
        Some(p)
    });
    assert!(
        acks * 2 + 2 >= data && acks <= data,
        "{acks} ACKs for {data} data segments"
    );
    let b = d.b.stats();
    assert!(b.acks_immediate > 0 && b.acks_immediate <= acks);
    assert_eq!(b.acks_superseded, 0);
}

/// More ACKs fall due than a driver turn's worth before any leaves: the oldest are dropped
/// and counted apart, and only those that leave count as sent at once (so that count never
/// exceeds the segments sent).
#[test]
fn acks_built_beyond_a_turn_are_superseded_and_counted() {
    let mut d = established(true);
    let out_before = d.b.stats().segments_out;
    // The first ACK carries a D-SACK; when it is dropped, the ACK built then must carry it.
    d.b.note_duplicate(0, 100);
    for _ in 0..MAX_PENDING_ACKS + 44 {
        d.b.ack_now(d.now);
    }
    assert_eq!(d.b.ack.pending(), MAX_PENDING_ACKS);
    assert_eq!(d.b.stats().acks_superseded, 44);
    assert_eq!(d.b.stats().acks_immediate, 0, "none has left yet");
    let (mut sent, mut with_dsack) = (0, 0);
    while let Some(p) = d.b.poll_transmit(d.now) {
        assert!(is_pure_ack(&p));
        sent += 1;
        with_dsack += usize::from(!TcpRepr::parse(&p, None).unwrap().options.sack.is_empty());
    }
    assert_eq!(
        with_dsack, 1,
        "the dropped ACK's D-SACK went with a later one"
    );
    let b = d.b.stats();
    assert_eq!(sent, MAX_PENDING_ACKS as u64);
    assert_eq!(b.acks_immediate, sent);
    assert_eq!(b.segments_out - out_before, sent);
}

/// A lone segment that ends no message is acknowledged after the delayed-ACK bound, not at
/// once and not never.
#[test]
fn a_lone_segment_mid_message_is_acknowledged_after_the_ack_delay() {
    let mut d = established(true);
    let mss = d.a.payload_mss() as usize;
    // Two segments; the second is lost, so B holds one mid-message segment.
    sends(&mut d, 1, 2 * mss);
    let mut data = 0;
    let arrived = RefCell::new(None);
    let acked = RefCell::new(None);
    let delay = d.b.config().ack_delay;
    d.run(
        Duration::from_millis(5),
        |dir, now, p| {
            if dir == Direction::AtoB && is_data(&p) {
                data += 1;
                if data == 1 {
                    *arrived.borrow_mut() = Some(now + Duration::from_micros(50));
                }
                if data == 2 {
                    return None;
                }
            }
            if dir == Direction::BtoA && is_pure_ack(&p) && acked.borrow().is_none() {
                *acked.borrow_mut() = Some(now);
            }
            Some(p)
        },
        |_| acked.borrow().is_some(),
    );
    let (arrived, acked) = (arrived.into_inner().unwrap(), acked.into_inner().unwrap());
    assert_eq!(acked - arrived, delay, "ACK delay bound");
}

/// Three holes: B acknowledges each out-of-order arrival at once, in the plain form (no BTH,
/// timestamps, three SACK blocks), and A retransmits exactly the three lost segments.
#[test]
fn holes_are_reported_with_three_sack_blocks_and_only_losses_are_retransmitted() {
    let mut d = established(true);
    sends(&mut d, 4, 64 << 10);
    let mut data = 0;
    let mut most_blocks = 0;
    let mut plain_acks = 0;
    run_to_completion(&mut d, 4, 64 << 10, |dir, _, p| {
        let seg = TcpRepr::parse(&p, None).unwrap();
        if dir == Direction::AtoB && !seg.payload.is_empty() {
            data += 1;
            if [3, 5, 7].contains(&data) {
                return None;
            }
        }
        if dir == Direction::BtoA && seg.payload.is_empty() && seg.options.bth.is_none() {
            plain_acks += 1;
            assert!(
                seg.options.timestamps.is_some(),
                "plain form carries timestamps"
            );
            most_blocks = most_blocks.max(seg.options.sack.len());
        }
        Some(p)
    });
    assert_eq!(most_blocks, 3, "three SACK blocks on a plain-form ACK");
    assert!(plain_acks > 0 && d.b.stats().plain_form_acks == plain_acks);
    let rec = d.a.recovery_stats();
    assert_eq!(rec.retransmits, 3, "{rec:?}");
    assert_eq!(rec.rto_losses, 0, "{rec:?}");
}

/// Five holes, and every ACK whose first block is one of the ranges between them is lost:
/// the ACKs after them still carry that range, because SACK blocks after the first repeat
/// the most recently reported ones (RFC 2018 §4), so the sender learns it was delivered and
/// retransmits only the five lost segments. When the later blocks were the lowest ranges
/// instead, the range after the third hole was never reported again and both its segments
/// were retransmitted needlessly.
#[test]
fn sack_blocks_repeat_the_most_recently_reported_ranges() {
    let mut d = established(true);
    sends(&mut d, 1, 64 << 10);
    let mut data = 0;
    let (mut tenth, mut thirteenth) = (None, None);
    // The SACK blocks of each ACK B sent whose first block is the range from the 13th segment.
    let mut after: Vec<Vec<u32>> = Vec::new();
    run_to_completion(&mut d, 1, 64 << 10, |dir, _, p| {
        let seg = TcpRepr::parse(&p, None).unwrap();
        if dir == Direction::AtoB && !seg.payload.is_empty() {
            data += 1;
            match data {
                10 => tenth = Some(seg.seq),
                13 => thirteenth = Some(seg.seq),
                3 | 6 | 9 | 12 | 15 => return None,
                _ => {}
            }
        }
        if dir == Direction::BtoA && seg.payload.is_empty() {
            match seg.options.sack.first().map(|b| b.left) {
                // The ACKs that first report the range from the 10th segment are lost.
                Some(left) if Some(left) == tenth => return None,
                Some(left) if Some(left) == thirteenth => {
                    after.push(seg.options.sack.iter().map(|b| b.left).collect());
                }
                _ => {}
            }
        }
        Some(p)
    });
    let tenth = tenth.expect("ten segments sent");
    assert!(!after.is_empty(), "the 13th segment's range was reported");
    for blocks in &after {
        assert_eq!(
            blocks.get(1),
            Some(&tenth),
            "second block: the range reported just before ({blocks:?})"
        );
    }
    let rec = d.a.recovery_stats();
    assert_eq!(rec.retransmits, 5, "{rec:?}");
    assert_eq!(rec.spurious_retransmits, 0, "{rec:?}");
}

/// A segment the network delivers twice is reported with a D-SACK block; the sender counts
/// it, widens its reorder window, and does not mistake it for one of its retransmissions.
#[test]
fn a_duplicated_segment_is_reported_with_dsack() {
    let mut d = established(true);
    sends(&mut d, 2, 16 << 10);
    let copy = RefCell::new(None);
    let mut data = 0;
    let mut first = true;
    let mut done = 0;
    let ok = d.run(
        Duration::from_secs(1),
        |dir, _, p| {
            if dir == Direction::AtoB && is_data(&p) {
                data += 1;
                if data == 2 {
                    *copy.borrow_mut() = Some(p.clone());
                }
            }
            Some(p)
        },
        |d| {
            if first {
                if let Some(p) = copy.borrow_mut().take() {
                    first = false;
                    // Well after the original: wholly below B's cumulative point by then.
                    d.inject(d.now + Duration::from_micros(400), Direction::AtoB, p);
                }
            }
            while d.b.poll_completion().is_some() {
                done += 1;
            }
            done == 2 && d.a.stats().dsacks_received > 0
        },
    );
    assert!(ok, "{:?}", d.a.stats());
    assert_eq!(d.b.stats().dsacks_sent, 1);
    let rec = d.a.recovery_stats();
    assert_eq!(rec.dsack_spurious, 0, "not a retransmission: {rec:?}");
    assert_eq!(rec.reo_wnd_mult, 2, "{rec:?}");
}

/// A duplicate of a segment held beyond a hole, arriving after a later range was reported
/// first: the D-SACK block names it, and the block after it is the out-of-order range that
/// holds it (RFC 2883 §4), not the latest one. (The plain byte stream drops such a duplicate
/// before recording it, so the latest range is elsewhere; before the rule it came second.)
#[test]
fn a_duplicate_beyond_a_hole_is_followed_by_the_range_holding_it() {
    let mut d = established(false);
    let total = 40_000;
    let mut bufs = pattern(9, total);
    let copy = RefCell::new(None);
    let data = std::cell::Cell::new(0);
    let (mut third, mut fourth) = (None, None);
    let mut pairs = Vec::new();
    let mut injected = false;
    let mut got = 0;
    let ok = d.run(
        Duration::from_secs(1),
        |dir, _, p| {
            let seg = TcpRepr::parse(&p, None).unwrap();
            if dir == Direction::AtoB && !seg.payload.is_empty() {
                data.set(data.get() + 1);
                match data.get() {
                    2 | 6 => return None,
                    3 => third = Some(seg.seq),
                    4 => {
                        fourth = Some(seg.seq);
                        *copy.borrow_mut() = Some(p.clone());
                    }
                    _ => {}
                }
            }
            if dir == Direction::BtoA && seg.options.sack.len() >= 2 {
                let b = &seg.options.sack;
                pairs.push(((b[0].left, b[0].right), (b[1].left, b[1].right)));
            }
            Some(p)
        },
        |d| {
            if !bufs.is_empty() {
                let n = d.a.send_bytes(&bufs).unwrap_or(0);
                bufs.drain(..n);
            }
            // Once the range beyond the second hole was reported first.
            if !injected && data.get() >= 8 {
                if let Some(p) = copy.borrow_mut().take() {
                    injected = true;
                    d.inject(d.now + Duration::from_micros(5), Direction::AtoB, p);
                }
            }
            let mut buf = [0u8; 65536];
            loop {
                let n = d.b.recv_bytes(&mut buf);
                if n == 0 {
                    break;
                }
                got += n;
            }
            got == total
        },
    );
    assert!(ok, "{got} of {total}: {:?}", d.b.stats());
    assert!(d.b.stats().dsacks_sent >= 1, "{:?}", d.b.stats());
    let (third, fourth) = (third.unwrap(), fourth.unwrap());
    let reported = pairs.iter().find(|(dup, _)| dup.0 == fourth);
    let Some(&(dup, held)) = reported else {
        panic!("no ACK reported the duplicate first: {pairs:?}");
    };
    assert_eq!(
        held.0, third,
        "the range from the 3rd segment holds it: {pairs:?}"
    );
    assert!(held.1 >= dup.1, "{pairs:?}");
}

/// Reordering deeper than the reorder window: one segment arrives late, after RACK declared
/// it lost and retransmitted it. `timestamps` off leaves D-SACK as the only proof; on (BTH
/// mode folds them in always), Eifel usually proves it first. Either way the episode's one
/// retransmission is spurious, the reduction is undone, and the reorder window widens.
fn late_segment_is_undone(bth: bool) {
    let (mut a, mut b) = configs(bth);
    a.timestamps = false;
    b.timestamps = false;
    let mut d = BackToBack::established(a, b, MS);
    let mut held: Option<Vec<u8>> = None;
    let mut sent_at: Option<u32> = None;
    let release = RefCell::new(None);
    let cwnd_before = RefCell::new(0);
    let mut seen = 0;
    let total: usize = 256 << 10;
    let mut got = Vec::new();
    let mut expect = Vec::new();
    let mut bufs = Vec::new();
    if bth {
        sends(&mut d, 1, total);
    } else {
        expect = pattern(9, total);
        bufs = expect.clone();
    }
    let ok = d.run(
        Duration::from_secs(2),
        |dir, now, p| {
            let seg = TcpRepr::parse(&p, None).unwrap();
            if dir == Direction::AtoB && !seg.payload.is_empty() {
                seen += 1;
                if seen == 5 && held.is_none() {
                    sent_at = Some(seg.seq);
                    held = Some(p);
                    return None;
                }
                if Some(seg.seq) == sent_at && held.is_some() {
                    // The retransmission: the original goes in its place, and the
                    // retransmission follows a little later.
                    *release.borrow_mut() = Some((now, p));
                    return held.take();
                }
            }
            Some(p)
        },
        |d| {
            if *cwnd_before.borrow() == 0 && d.a.recovery_stats().retransmits == 0 {
                *cwnd_before.borrow_mut() = d.a.cwnd();
            }
            if !bufs.is_empty() {
                let n = d.a.send_bytes(&bufs).unwrap_or(0);
                bufs.drain(..n);
            }
            if let Some((at, p)) = release.borrow_mut().take() {
                d.inject(at + Duration::from_micros(60), Direction::AtoB, p);
            }
            if bth {
                while d.b.poll_completion().is_some() {
                    got.resize(total, 0);
                }
            } else {
                drain(&mut d.b, &mut got);
            }
            got.len() == total && d.a.stats().undos > 0
        },
    );
    let rec = d.a.recovery_stats();
    assert!(ok, "undos {} {rec:?}", d.a.stats().undos);
    if !bth {
        assert_eq!(got, expect);
        assert_eq!(rec.dsack_spurious, 1, "D-SACK proved it: {rec:?}");
    }
    assert_eq!(rec.retransmits, 1, "{rec:?}");
    assert_eq!(rec.spurious_retransmits, 1, "{rec:?}");
    assert!(rec.reo_wnd_mult >= 2, "{rec:?}");
    assert!(
        d.a.cwnd() >= *cwnd_before.borrow(),
        "cwnd {} < {} before the spurious loss",
        d.a.cwnd(),
        cwnd_before.borrow()
    );
}

#[test]
fn a_spurious_retransmission_proven_by_dsack_is_undone() {
    late_segment_is_undone(false);
}

#[test]
fn a_spurious_retransmission_in_bth_mode_is_undone() {
    late_segment_is_undone(true);
}

/// More ACKs fall due in one turn than are kept (a driver turn of over 512 segments): the
/// oldest go, but the credit update among them must not. It was dropped with them, and the
/// sender waited for its persist probe (200 ms in the simulator with driver turns).
#[test]
fn a_credit_update_dropped_from_a_full_ack_queue_is_owed_again() {
    let mut d = established(true);
    let now = d.now;
    d.b.owed.credit = true;
    for _ in 0..300 {
        d.b.ack_now(now);
    }
    let mut credit_acks = 0;
    while let Some(p) = d.b.poll_transmit(now) {
        let seg = TcpRepr::parse(&p, None).unwrap();
        credit_acks += usize::from(seg.options.bth.is_some_and(|b| b.rtr));
    }
    assert_eq!(
        credit_acks, 1,
        "the credit update must survive the full queue"
    );
}
