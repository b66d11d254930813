//! PAWS after long idle (RFC 7323 §5.5). The TSval clock ticks every microsecond, so a peer's
//! TSval moves by 2^31 ticks in about 35.8 minutes: after an idle gap longer than that, a
//! fresh segment's TSval looks older than `ts_recent`. Without the idle rule every segment was
//! then dropped by PAWS and each drop answered with an ACK that the peer dropped the same way,
//! without end (reproduced: ~485,000 PAWS drops per side in 10 s after 36–71 min of idle).

use super::*;
use std::cell::RefCell;

/// One exchange after `gap` of silence: A sends, B must receive it within a second, and the
/// segments both sides send in the following second stay few.
fn exchange_after_idle(bth: bool, gap: Duration) {
    let mut d = established(bth);
    let first = pattern(1, 3000);
    transfer(&mut d, bth, 1, &first);
    d.settle(Duration::from_secs(1));
    d.idle(gap);
    let before = d.sent;
    let drops_before = d.a.stats().paws_drops + d.b.stats().paws_drops;
    let second = pattern(2, 3000);
    transfer(&mut d, bth, 2, &second);
    d.settle(Duration::from_secs(1));
    let sent = (d.sent[0] - before[0]) + (d.sent[1] - before[1]);
    let drops = d.a.stats().paws_drops + d.b.stats().paws_drops - drops_before;
    assert!(
        sent < 40,
        "after {gap:?} idle ({}): {sent} segments in the exchange, {drops} PAWS drops",
        if bth { "bth" } else { "plain" }
    );
}

/// Send `data` from A to B and wait (at most 1 s virtual) until B has all of it.
fn transfer(d: &mut BackToBack, bth: bool, id: u64, data: &[u8]) {
    let mut got = Vec::new();
    if bth {
        d.b.post_recv(id, vec![0; data.len()]).unwrap();
        d.a.post_send(WorkRequest::send(id, data.to_vec(), None))
            .unwrap();
    } else {
        d.a.send_bytes(data).unwrap();
    }
    let ok = d.run(Duration::from_secs(1), pass, |d| {
        if bth {
            while let Some(c) = d.b.poll_completion() {
                got = c.buf.expect("receive buffer back");
            }
        } else {
            drain(&mut d.b, &mut got);
        }
        got.len() == data.len()
    });
    assert!(
        ok,
        "no delivery within 1 s: B {:?}, stats {:?}",
        d.b,
        d.b.stats()
    );
    assert_eq!(got, data);
}

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn plain_mode_survives_1h_3h_and_25h_of_idle() {
    for gap in [HOUR, 3 * HOUR, 25 * HOUR] {
        exchange_after_idle(false, gap);
    }
}

#[test]
fn bth_mode_survives_1h_3h_and_25h_of_idle() {
    for gap in [HOUR, 3 * HOUR, 25 * HOUR] {
        exchange_after_idle(true, gap);
    }
}

/// Idle gaps across the whole TSval cycle (2^32 µs ≈ 71.6 min), in 5-minute steps.
#[test]
fn every_idle_gap_within_a_tsval_cycle_recovers() {
    for minutes in (5..=75).step_by(5) {
        exchange_after_idle(true, Duration::from_secs(60 * minutes));
    }
}

/// A segment that really is old (a pure ACK replayed after newer ones moved `ts_recent` on,
/// within the TSval half-cycle) is still dropped, and the ACKs answering PAWS drops are
/// rate-limited.
#[test]
fn stale_segments_are_still_dropped_and_their_acks_limited() {
    let mut d = established(true);
    // B sends to A; keep the last pure ACK A sends for it.
    let mut captured = None;
    d.a.post_recv(1, vec![0; 1000]).unwrap();
    d.b.post_send(WorkRequest::send(1, pattern(3, 1000), None))
        .unwrap();
    let keep = |dir: Direction, _: Duration, p: Vec<u8>| {
        if dir == Direction::AtoB {
            captured = Some(p.clone());
        }
        Some(p)
    };
    d.run(Duration::from_secs(1), keep, |d| {
        d.a.poll_completion().is_some()
    });
    d.settle(Duration::from_millis(10));
    let old = captured.expect("a pure ACK from A");
    // More traffic from B: A's newer ACKs move B's ts_recent past the captured one's TSval.
    d.now += Duration::from_millis(5);
    d.a.post_recv(2, vec![0; 500]).unwrap();
    d.b.post_send(WorkRequest::send(2, pattern(4, 500), None))
        .unwrap();
    d.run(Duration::from_secs(1), pass, |d| {
        d.a.poll_completion().is_some()
    });
    d.settle(Duration::from_millis(10));
    let (drops, overtaken) = (d.b.stats().paws_drops, d.b.stats().paws_overtaken_acks);
    let sent_before = d.sent[1];
    // Replay the old ACK 1000 times within one millisecond.
    for _ in 0..1000 {
        d.b.handle_segment(d.now, &old);
        while d.b.poll_transmit(d.now).is_some() {
            d.sent[1] += 1;
        }
        d.now += Duration::from_micros(1);
    }
    assert_eq!(d.b.stats().paws_drops - drops, 1000, "every replay dropped");
    // Within an RTO and at RCV.NXT, a replay looks like an ACK a later one overtook.
    assert_eq!(d.b.stats().paws_overtaken_acks - overtaken, 1000);
    let acks = d.sent[1] - sent_before;
    assert!(acks <= 2, "{acks} ACKs answered 1000 PAWS drops in 1 ms");
}

/// An in-window segment whose ACK is unacceptable (acknowledges data never sent) carries a
/// TSval far ahead of the peer's clock. It is dropped, and it must not move `ts_recent`: it
/// used to, and PAWS then dropped everything the real peer sent.
#[test]
fn forged_segment_with_a_bad_ack_cannot_poison_ts_recent() {
    let mut d = established(false);
    let (_, a_nxt, a_rcv) = d.a.seq_state();
    let forged = TcpRepr {
        src_port: A_PORT,
        dst_port: B_PORT,
        seq: a_nxt,
        ack: a_rcv.wrapping_add(1 << 20),
        flags: crate::wire::TcpFlags::ACK,
        window: 1000,
        urgent: 0,
        options: crate::wire::TcpOptions {
            timestamps: Some(crate::wire::Timestamps {
                tsval: d.a.tsval_at(d.now).wrapping_add(1 << 30),
                tsecr: 0,
            }),
            ..Default::default()
        },
        payload: &[],
    }
    .to_vec(d.a.config().ip)
    .unwrap();
    d.b.handle_segment(d.now, &forged);
    transfer(&mut d, false, 1, &pattern(5, 2000));
    assert_eq!(d.b.stats().paws_drops, 0);
}

/// One step in which B sends its credit update, alone, and the network holds it back: returned
/// for the test to inject when it likes.
fn hold_credit_update(d: &mut BackToBack) -> RefCell<Option<Vec<u8>>> {
    let held = RefCell::new(None);
    let mut from_b = 0;
    d.step(&mut |dir, _, p| {
        if dir == Direction::BtoA {
            from_b += 1;
            *held.borrow_mut() = Some(p);
            return None;
        }
        Some(p)
    });
    assert_eq!(from_b, 1, "B sent its credit update, and nothing else");
    held
}

/// The run since `start` finished (`ok`) with the held-back credit update's credit kept: the
/// SEND waiting for it went at once, well before the persist probe (≥ 200 ms).
fn assert_late_credit_kept(d: &BackToBack, ok: bool, start: Duration) {
    assert!(ok, "{:?}", d.a.stats());
    assert!(d.a.stats().late_credit_kept >= 1, "{:?}", d.a.stats());
    assert!(
        d.now - start < Duration::from_millis(50),
        "took {:?}",
        d.now - start
    );
}

/// A credit update overtaken by the peer's later ACK: PAWS drops it (its TSval is older, and
/// it acknowledges less than SND.UNA by then, so it is no duplicate ACK Linux would exempt),
/// but its credit is kept, so the SEND waiting for it goes at once instead of after the
/// persist probe (≥ 200 ms).
#[test]
fn a_reordered_credit_update_is_not_lost_to_paws() {
    let mut d = established(true);
    d.b.post_recv(0, vec![0; 1000]).unwrap();
    d.settle(Duration::from_millis(10));
    // Message 0 has credit, message 1 waits for B's next receive.
    d.a.post_send(WorkRequest::send(0, pattern(0, 1000), None))
        .unwrap();
    d.a.post_send(WorkRequest::send(1, pattern(1, 1000), None))
        .unwrap();
    d.b.post_recv(1, vec![0; 1000]).unwrap();
    // This instant: A sends message 0, B its credit update, which the network holds back
    // until B's ACK of message 0 (sent later, newer TSval) has arrived.
    let held = hold_credit_update(&mut d);
    let start = d.now;
    let mut done = 0;
    let b_ack_sent = RefCell::new(None);
    let ok = d.run(
        Duration::from_secs(1),
        |dir, now, p| {
            if dir == Direction::BtoA {
                b_ack_sent.borrow_mut().get_or_insert(now);
            }
            Some(p)
        },
        |d| {
            // Once B's ACK of message 0 has arrived (the wire takes 50 µs), the credit update.
            let arrived = b_ack_sent
                .borrow()
                .is_some_and(|t| d.now >= t + Duration::from_micros(50));
            if arrived {
                if let Some(p) = held.borrow_mut().take() {
                    d.inject(d.now, Direction::BtoA, p);
                }
            }
            while d.b.poll_completion().is_some() {
                done += 1;
            }
            done == 2
        },
    );
    assert_late_credit_kept(&d, ok, start);
}

/// A credit update overtaken by the peer's data (request/response: the responder posts a
/// receive and sends its reply): below RCV.NXT when it arrives, so not acceptable, but its
/// credit is kept and the SEND waiting for it goes at once, not after the persist probe.
#[test]
fn a_credit_update_behind_the_peers_data_keeps_its_credit() {
    let mut d = established(true);
    // B may send to A; A's SEND to B waits for credit.
    d.a.post_recv(100, vec![0; 2000]).unwrap();
    d.settle(Duration::from_millis(10));
    d.a.post_send(WorkRequest::send(1, pattern(1, 1000), None))
        .unwrap();
    d.settle(Duration::from_millis(10));
    assert_eq!(d.a.stats().bytes_sent, 0, "no credit yet");
    // B posts a receive (its credit update is held back) and sends data right after.
    d.b.post_recv(1, vec![0; 1000]).unwrap();
    let held = hold_credit_update(&mut d);
    d.b.post_send(WorkRequest::send(7, pattern(7, 500), None))
        .unwrap();
    let start = d.now;
    let mut done = false;
    let ok = d.run(Duration::from_secs(1), pass, |d| {
        // B's data has arrived (RCV.NXT moved past the update): now the credit update.
        if d.a.stats().bytes_received > 0 {
            if let Some(p) = held.borrow_mut().take() {
                d.inject(d.now, Direction::BtoA, p);
            }
        }
        while let Some(c) = d.b.poll_completion() {
            done |= c.wr_id == 1 && c.status == WcStatus::Success;
        }
        done
    });
    assert_late_credit_kept(&d, ok, start);
}
