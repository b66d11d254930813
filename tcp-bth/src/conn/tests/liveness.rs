//! A peer that vanishes: keepalive notices it on a quiet connection, the user timeout on one
//! whose data goes unacknowledged; a live peer is never taken for a vanished one; and both are
//! off unless asked for.

use super::*;
use crate::config::Keepalive;
use crate::wire::TcpRepr;

const SEC: Duration = Duration::from_secs(1);

const KA: Keepalive = Keepalive {
    idle: Duration::from_secs(2),
    interval: Duration::from_secs(1),
    probes: 3,
};

fn with(bth: bool, f: impl Fn(&mut Config)) -> BackToBack {
    let (mut a, mut b) = configs(bth);
    f(&mut a);
    f(&mut b);
    BackToBack::established(a, b, MS)
}

fn drop_all(_: Direction, _: Duration, _: Vec<u8>) -> Option<Vec<u8>> {
    None
}

#[test]
fn keepalive_is_off_by_default_and_an_idle_connection_sends_nothing() {
    for bth in [false, true] {
        let mut d = established(bth);
        let before = d.sent;
        // A day of nothing: no timer is even due.
        assert_eq!(d.a.poll_timeout(), None);
        d.run(24 * 3600 * SEC, pass, |_| false);
        assert_eq!(d.sent, before);
        assert!(d.a.is_established() && d.b.is_established());
    }
}

#[test]
fn a_live_peer_answers_every_probe_and_the_connection_stays() {
    for bth in [false, true] {
        let mut d = with(bth, |c| c.keepalive = Some(KA));
        let before = d.sent;
        // An hour idle: a probe every 2 s of silence, each answered.
        d.run(3600 * SEC, pass, |_| false);
        assert!(
            d.a.is_established() && d.b.is_established(),
            "{:?}",
            d.a.error()
        );
        let probes = d.a.stats().keepalive_probes;
        assert!(
            (1700..=1801).contains(&probes),
            "{probes} probes in an hour"
        );
        // Each probe and its answer, nothing more: no ACK exchange grows from them.
        let sent = (d.sent[0] - before[0]) + (d.sent[1] - before[1]);
        let all_probes = probes + d.b.stats().keepalive_probes;
        assert!(
            sent <= 2 * all_probes,
            "{sent} segments for {all_probes} probes"
        );
    }
}

#[test]
fn a_vanished_peer_is_noticed_after_its_probes_and_told_with_rst() {
    for bth in [false, true] {
        let mut d = with(bth, |c| c.keepalive = Some(KA));
        // From the handshake (the harness's clock stops at the next event after it).
        let start = MS;
        let mut last_from_a = None;
        let done = d.run(
            60 * SEC,
            |dir, _, p| {
                if dir == Direction::AtoB {
                    last_from_a = Some(p);
                }
                None
            },
            |d| d.a.error().is_some(),
        );
        assert!(done, "A never noticed");
        assert_eq!(
            d.a.error(),
            Some(ConnectionError::KeepaliveTimedOut {
                probes: 3,
                icmp: None
            })
        );
        // 2 s idle, then three probes a second apart, and the fourth interval.
        let took = d.now - start;
        assert!(took >= 5 * SEC && took <= 5 * SEC + 10 * MS, "{took:?}");
        let rst = last_from_a.expect("A sent");
        let seg = TcpRepr::parse(&rst, None).unwrap();
        assert!(
            seg.flags.rst(),
            "the last segment A sent is an RST: {:?}",
            seg.flags
        );
        assert_eq!(d.a.stats().keepalive_probes, 3);
    }
}

#[test]
fn the_user_timeout_ends_a_connection_whose_data_goes_unacknowledged() {
    let t = 3 * SEC;
    let mut d = with(false, |c| c.user_timeout = Some(t));
    let start = d.now;
    d.a.send_bytes(&pattern(1, 10_000)).unwrap();
    let done = d.run(120 * SEC, drop_all, |d| d.a.error().is_some());
    assert!(done);
    assert_eq!(
        d.a.error(),
        Some(ConnectionError::UserTimeout {
            after: t,
            icmp: None
        })
    );
    let took = d.now - start;
    assert!(took >= t && took <= t + MS, "{took:?}");
    // Without it, the same loss ends the connection only after max_retries RTOs.
    let mut d = established(false);
    d.a.send_bytes(&pattern(1, 10_000)).unwrap();
    d.run(120 * SEC, drop_all, |d| d.a.error().is_some());
    assert_eq!(d.a.error(), None, "still retrying after 120 s");
}

#[test]
fn the_user_timeout_spares_a_connection_that_keeps_making_progress() {
    let t = SEC;
    let mut d = with(false, |c| c.user_timeout = Some(t));
    let mut got = Vec::new();
    let mut sent = Vec::new();
    // Two seconds of sending, a chunk every 100 ms, with one data segment in five lost: the
    // retransmissions take time, but every ACK that moves SND.UNA restarts the clock.
    let mut k = 0u64;
    for round in 0..20u8 {
        let chunk = pattern(round, 5000);
        d.a.send_bytes(&chunk).unwrap();
        sent.extend_from_slice(&chunk);
        d.run(
            100 * MS,
            |dir, _, p| {
                k += 1;
                (dir == Direction::BtoA || !k.is_multiple_of(5)).then_some(p)
            },
            |_| false,
        );
        drain(&mut d.b, &mut got);
    }
    d.settle(5 * SEC);
    drain(&mut d.b, &mut got);
    assert_eq!(d.a.error(), None);
    assert_eq!(got, sent);
}

/// An ICMP error quoting a keepalive probe (sent one below SND.UNA) is about a packet we sent:
/// taken as a soft error, and named when the keepalive gives up. One about a sequence number
/// we never sent is ignored.
#[test]
fn an_icmp_error_about_a_probe_is_named_when_keepalive_gives_up() {
    use crate::conn::{IcmpError, Unreachable};
    let mut d = with(false, |c| c.keepalive = Some(KA));
    let mut probe_seq = None;
    d.run(
        60 * SEC,
        |dir, _, p| {
            if dir == Direction::AtoB && probe_seq.is_none() {
                probe_seq = Some(TcpRepr::parse(&p, None).unwrap().seq);
            }
            None
        },
        |d| d.a.stats().keepalive_probes > 0,
    );
    let seq = probe_seq.expect("a probe");
    let now = d.now;
    d.a.handle_icmp(
        now,
        IcmpError::Unreachable(Unreachable::Host),
        seq.wrapping_add(5000),
    );
    assert_eq!(d.a.stats().icmp_ignored, 1);
    d.a.handle_icmp(now, IcmpError::Unreachable(Unreachable::Host), seq);
    assert_eq!(d.a.stats().icmp_errors, 1);
    assert!(d.a.is_established(), "soft: the probes go on");
    d.run(60 * SEC, drop_all, |d| d.a.error().is_some());
    assert_eq!(
        d.a.error(),
        Some(ConnectionError::KeepaliveTimedOut {
            probes: 3,
            icmp: Some(Unreachable::Host)
        })
    );
}
