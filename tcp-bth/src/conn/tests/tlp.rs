//! Tail loss probe (RFC 8985 §7) when the sender is limited by cwnd with data still queued:
//! one lost ACK must cost a probe timeout, not a retransmission timeout.

use super::*;
use crate::wire::TcpRepr;

/// Every ACK of a whole flight is lost while 1 MiB is queued behind cwnd. The probe (after about
/// 2·SRTT = 200 µs here) draws a new ACK and the transfer goes on; it used to do nothing when
/// unsent data was queued, so the sender sat silent for the 200 ms minimum RTO.
#[test]
fn a_lost_ack_with_data_queued_is_repaired_by_the_probe_not_the_rto() {
    let mut d = established(true);
    let n = 64u64;
    for i in 0..n {
        d.b.post_recv(i, vec![0; 16384]).unwrap();
    }
    d.settle(Duration::from_millis(10));
    for i in 0..n {
        d.a.post_send(WorkRequest::send(i, pattern(i as u8, 16384), None))
            .unwrap();
    }
    // Every ACK B sends for the first flight (all sent at one instant of the virtual clock:
    // B acknowledges every second segment of the flight, and all of them are lost).
    let mut dropped = 0;
    let mut drop_at = None;
    let mut done = 0;
    let start = d.now;
    let ok = d.run(
        Duration::from_secs(5),
        |dir, now, p| {
            let pure_ack = TcpRepr::parse(&p, None).is_ok_and(|s| s.payload.is_empty());
            if dir == Direction::BtoA && pure_ack && *drop_at.get_or_insert(now) == now {
                dropped += 1;
                return None;
            }
            Some(p)
        },
        |d| {
            while d.b.poll_completion().is_some() {
                done += 1;
            }
            done == n
        },
    );
    assert!(ok && dropped >= 1);
    let took = d.now - start;
    let rec = d.a.recovery_stats();
    assert_eq!(rec.rto_losses, 0, "{rec:?}, took {took:?}");
    assert!(rec.tlp_probes >= 1, "{rec:?}");
    assert!(took < Duration::from_millis(100), "took {took:?}: {rec:?}");
}

/// The probe waits for what a round trip may take: max(2·SRTT, SRTT + 4·RTTVAR) plus the
/// peer's delayed-ACK bound. It used to wait 2·SRTT (at least 100 µs), so a round trip a
/// little slower than usual (a relay, a busy driver) or an ACK the peer delayed drew a probe.
#[test]
fn the_probe_leaves_room_for_rtt_variance_and_the_peers_ack_delay() {
    let mut d = established(true);
    d.b.post_recv(1, vec![0; 4000]).unwrap();
    d.settle(Duration::from_millis(10));
    let srtt = d.a.srtt().expect("the handshake gave an RTT sample");
    let rttvar = d.a.snd.rtt.rttvar();
    let ack_delay = d.a.config().ack_delay;
    d.a.post_send(WorkRequest::send(1, pattern(1, 4000), None))
        .unwrap();
    let now = d.now;
    while d.a.poll_transmit(now).is_some() {}
    let probe_at = d.a.timers.get(Timer::Tlp).expect("a probe is armed");
    let pto = (srtt * 2).max(srtt + rttvar * 4) + ack_delay;
    assert_eq!(probe_at - now, pto, "srtt {srtt:?} rttvar {rttvar:?}");
    assert!(probe_at - now > srtt * 2 + ack_delay / 2);
}
