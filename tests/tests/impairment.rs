//! Integrity under impairment: loss, reordering, duplication and corruption together, many
//! seeds; spurious retransmissions under pure reordering; credit waits with no posted buffers;
//! a segment whose payload was altered under a valid TCP checksum is caught by the ICRC.

use bth_framer::WorkRequest;
use bth_io::sim::workload::{self, WorkloadConfig};
use bth_io::sim::{Direction, LinkConfig};
use bth_tests::*;
use std::time::Duration;
use tcp_bth::wire::TcpRepr;
use tcp_bth::{Connection, WcOp};

fn impaired(seed: u64, loss: f64, reorder: f64) -> LinkConfig {
    LinkConfig::default()
        .with_delay(Duration::from_micros(200))
        .with_loss(loss)
        .with_reorder(reorder, Duration::from_micros(100))
        .with_duplicate(0.01)
        .with_corrupt(0.005)
        .with_seed(seed)
}

#[test]
fn every_message_arrives_intact_under_loss_reordering_duplication_and_corruption() {
    let mut corrupted = 0;
    let mut caught = 0;
    for seed in 1..=12u64 {
        let loss = [0.01, 0.03, 0.05][seed as usize % 3];
        let reorder = [0.1, 0.2, 0.3][(seed as usize / 3) % 3];
        let cfg = WorkloadConfig {
            messages: 60,
            max_size: 256 * 1024,
            seed,
            link: impaired(seed, loss, reorder),
            congestion: if seed % 2 == 0 {
                bth_cc::Algorithm::NewReno
            } else {
                bth_cc::Algorithm::Cubic
            },
            ..WorkloadConfig::default()
        };
        let r = workload::run(&cfg).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        // `run` compares every byte of every message and checks per-class MSN order.
        assert_eq!(r.verified, r.messages, "seed {seed}");
        assert_eq!(
            r.bytes_copied, r.bytes_placed,
            "seed {seed}: one copy per payload byte"
        );
        assert!(
            r.link_dropped > 0 && r.link_reordered > 0,
            "seed {seed}: impairments applied"
        );
        assert!(r.retransmits > 0, "seed {seed}: losses were repaired");
        assert!(r.closed_cleanly, "seed {seed}");
        corrupted += r.link_corrupted;
        caught += r.malformed + r.icrc_errors;
    }
    assert!(
        corrupted > 0,
        "the link corrupted nothing: test is not testing"
    );
    // A corrupted segment still in flight when a run ends is never received, so caught <= sent.
    assert!(
        caught > 0 && caught <= corrupted,
        "caught {caught} of {corrupted}"
    );
}

#[test]
fn pure_reordering_causes_under_one_percent_spurious_retransmissions() {
    for seed in [3u64, 4, 5] {
        let link = LinkConfig::default()
            .with_delay(Duration::from_micros(500))
            .with_reorder(0.3, Duration::from_micros(200))
            .with_seed(seed);
        let cfg = WorkloadConfig {
            messages: 80,
            max_size: 512 * 1024,
            seed,
            link,
            ..WorkloadConfig::default()
        };
        let r = workload::run(&cfg).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        // The test means something only if the link really reordered: at least one packet in
        // ten (the link holds back 30 %; ACKs count too, and since an ACK covers two segments
        // there are fewer of them than there were).
        assert!(
            r.link_reordered * 10 > r.segments_sent && r.link_reordered > 500,
            "seed {seed}: {} reordered, {} segments",
            r.link_reordered,
            r.segments_sent
        );
        assert!(r.ooo_placed > 0);
        // No loss: every retransmission is spurious.
        let rate = r.retransmits as f64 / r.segments_sent as f64;
        assert!(
            rate < 0.01,
            "seed {seed}: {} retransmissions of {} segments",
            r.retransmits,
            r.segments_sent
        );
    }
}

#[test]
fn sender_waits_for_credit_then_resumes_when_buffers_are_posted() {
    let (a, b) = configs(20, |_, _| {});
    let mut p = established(a, b, quiet_link());
    let msgs: Vec<Vec<u8>> = (0..5).map(|i| pattern(i, 10_000 + i as usize)).collect();
    for (i, m) in msgs.iter().enumerate() {
        p.a.post_send(WorkRequest::send(i as u64, m.clone(), None))
            .unwrap();
    }
    // No receive posted: nothing may start, nothing is dropped, the connection stays up.
    p.run_until(Duration::from_secs(3), |_| false);
    assert_eq!(p.a.stats().bytes_sent, 0, "a SEND started without credit");
    assert_eq!(p.b().stats().receiver_not_ready, 0);
    assert!(p.a.poll_completion().is_none());
    assert!(p.a.is_established() && p.b().is_established());
    // Post the buffers: everything flows and lands in order.
    for (i, m) in msgs.iter().enumerate() {
        p.b().post_recv(100 + i as u64, vec![0; m.len()]).unwrap();
    }
    let mut got = Vec::new();
    let ok = p.run_until(Duration::from_secs(5), |p| {
        while let Some(c) = p.b().poll_completion() {
            got.push(c);
        }
        got.len() == msgs.len()
    });
    assert!(ok, "got {} of {}", got.len(), msgs.len());
    for (i, c) in got.iter().enumerate() {
        assert_eq!(c.op, WcOp::Recv);
        assert_eq!(c.wr_id, 100 + i as u64, "completions in posting order");
        assert_eq!(c.buf.as_deref(), Some(&msgs[i][..]));
    }
    assert_eq!(p.b().stats().receiver_not_ready, 0);
}

#[test]
fn payload_altered_under_a_valid_checksum_is_caught_by_icrc_and_never_placed() {
    let (a_cfg, b_cfg) = configs(21, |_, _| {});
    let mut pair = bth_io::sim::Pair::new(a_cfg.clone(), b_cfg.clone(), quiet_link());
    assert!(pair.establish(Duration::from_secs(1)));
    let bth_io::sim::Pair { a, b, now, .. } = pair;
    let mut w = BackToBack::new(a, b.unwrap(), now);
    let msg = pattern(9, 3000);
    w.b.post_recv(1, vec![0; 3000]).unwrap();
    w.run(Duration::from_millis(10), |_, _, p| Some(p), |_| false);
    w.a.post_send(WorkRequest::send(1, msg.clone(), None))
        .unwrap();
    let mut tampered = 0;
    let ok = w.run(
        Duration::from_secs(2),
        |dir, _, pkt| {
            let seg = TcpRepr::parse(&pkt, None).unwrap();
            if dir != Direction::AtoB || seg.payload.is_empty() || tampered > 0 {
                return Some(pkt);
            }
            // Flip a payload byte and recompute the TCP checksum: only the ICRC can tell.
            tampered += 1;
            let mut payload = seg.payload.to_vec();
            payload[10] ^= 0x40;
            let forged = TcpRepr {
                payload: &payload,
                ..seg.clone()
            };
            Some(forged.to_vec(a_cfg.ip).unwrap())
        },
        |w| {
            let mut done = false;
            while let Some(c) = w.b.poll_completion() {
                assert_eq!(c.buf.as_deref(), Some(&msg[..]), "placed bytes differ");
                done = true;
            }
            done
        },
    );
    assert_eq!(tampered, 1);
    assert_eq!(w.b.stats().icrc_errors, 1);
    assert_eq!(w.b.stats().malformed, 0, "the TCP checksum was valid");
    assert!(
        ok,
        "message never completed after the tampered segment was dropped"
    );
    // Exactly one copy per payload byte: the tampered segment was never placed.
    let c = w.b.placement_counters();
    assert_eq!(c.bytes_copied, 3000);
    let _: Option<Connection> = None;
}

#[test]
fn same_seed_gives_the_same_run() {
    let cfg = WorkloadConfig {
        messages: 40,
        max_size: 128 * 1024,
        seed: 77,
        link: impaired(77, 0.02, 0.2),
        ..WorkloadConfig::default()
    };
    let a = workload::run(&cfg).unwrap();
    let b = workload::run(&cfg).unwrap();
    assert_eq!(
        (
            a.virtual_time,
            a.segments_sent,
            a.retransmits,
            a.ooo_placed,
            a.link_dropped
        ),
        (
            b.virtual_time,
            b.segments_sent,
            b.retransmits,
            b.ooo_placed,
            b.link_dropped
        )
    );
    let other = workload::run(&WorkloadConfig {
        link: impaired(78, 0.02, 0.2),
        ..cfg
    })
    .unwrap();
    assert_ne!(
        (a.segments_sent, a.link_dropped, a.virtual_time),
        (other.segments_sent, other.link_dropped, other.virtual_time)
    );
}

#[test]
fn new_credit_reaches_the_sender_even_while_the_receiver_sends_data() {
    // B posts a receive in the same turn as it sends data: the credit must still go out at once
    // (on a pure ACK after the data), not wait for the persist probe (≥ 200 ms here).
    let (a, b) = configs(30, |_, _| {});
    let mut p = established(a, b, quiet_link());
    p.a.post_recv(1, vec![0; 1 << 20]).unwrap();
    p.run_until(Duration::from_millis(5), |_| false);
    p.a.post_send(WorkRequest::send(7, pattern(1, 4000), None))
        .unwrap();
    p.run_until(Duration::from_millis(5), |_| false);
    assert_eq!(p.a.stats().bytes_sent, 0, "no credit yet");
    let start = p.now;
    p.b()
        .post_send(WorkRequest::send(8, pattern(2, 1 << 20), None))
        .unwrap();
    p.b().post_recv(2, vec![0; 4000]).unwrap();
    let mut done = false;
    p.run_until(Duration::from_secs(2), |p| {
        while let Some(c) = p.b().poll_completion() {
            done |= c.op == WcOp::Recv;
        }
        done
    });
    assert!(done, "A's SEND never arrived");
    let took = p.now - start;
    assert!(
        took < Duration::from_millis(50),
        "credit waited {took:?} (persist probe?)"
    );
}

/// What S framing gives up, shown: a link that swaps two aligned payload words (a corruption
/// the TCP checksum cannot see, `LinkConfig::swap`). Per-segment framing's ICRC drops every
/// such segment and the workload arrives intact; S framing has no ICRC, places the damaged
/// bytes, and the workload's byte-for-byte check finds them.
#[test]
fn a_checksum_neutral_corruption_is_caught_by_the_icrc_and_not_by_s_framing() {
    let cfg = |framing| WorkloadConfig {
        messages: 100,
        max_size: 64 * 1024,
        seed: 3,
        link: LinkConfig::default()
            .with_delay(Duration::from_micros(100))
            .with_swap(0.01)
            .with_seed(3),
        framing,
        ..WorkloadConfig::default()
    };
    let r = workload::run(&cfg(tcp_bth::Framing::PerSegment)).expect("every message intact");
    assert_eq!(r.verified, 100);
    assert!(r.link_swapped > 0);
    assert!(
        r.icrc_errors >= r.link_swapped / 2,
        "{} swapped, {} caught by the ICRC",
        r.link_swapped,
        r.icrc_errors
    );
    match workload::run(&cfg(tcp_bth::Framing::Seq)) {
        Err(workload::WorkloadError::Mismatch { .. }) => {}
        other => panic!("S framing should have placed a damaged message: {other:?}"),
    }
}
