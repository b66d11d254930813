//! What held the sender back (`chrono.rs`), end to end on the back-to-back wire.

use super::*;

/// B posts a receive of `len` bytes and A starts sending a SEND of that length; returns the
/// time A posted it.
fn start_bulk(d: &mut BackToBack, len: usize) -> Duration {
    d.b.post_recv(1, vec![0; len]).unwrap();
    d.settle(Duration::from_millis(10));
    d.a.post_send(WorkRequest::send(1, pattern(1, len), None))
        .unwrap();
    d.now
}

/// Run until B completes a receive (within a few seconds of virtual time).
fn b_completes(d: &mut BackToBack) -> bool {
    d.run(
        Duration::from_secs(5),
        |_, _, p| Some(p),
        |d| d.b.poll_completion().is_some(),
    )
}

/// A bulk transfer on a clean wire: the sender's time goes to its congestion window (on the
/// back-to-back wire a flight leaves in no time at all, so "sending" stays 0 here; a real
/// driver charges it the time its data path was full), the receiver (nothing to send) is never
/// busy, and the sender is idle again once all is acknowledged.
#[test]
fn a_bulk_sender_is_busy_until_acknowledged_and_a_receiver_never() {
    let mut d = established(true);
    let start = start_bulk(&mut d, 4 << 20);
    assert!(b_completes(&mut d));
    d.settle(Duration::from_millis(10));
    let a = d.a.send_limits(d.now);
    let elapsed = d.now - start;
    assert!(a.cwnd > a.busy() / 2, "{a:?}");
    assert!(a.busy() <= elapsed, "{a:?} in {elapsed:?}");
    // Idle once everything is acknowledged: later readings add nothing.
    assert_eq!(d.a.send_limits(d.now + Duration::from_secs(1)), a);
    assert_eq!(d.b.send_limits(d.now).busy(), Duration::ZERO);
}

/// A SEND with no receive posted at the peer waits for its credit, and that time is the
/// credit's.
#[test]
fn waiting_for_the_peers_receive_is_charged_to_credit() {
    let mut d = established(true);
    d.settle(Duration::from_millis(10));
    d.a.post_send(WorkRequest::send(1, pattern(1, 1000), None))
        .unwrap();
    d.settle(Duration::from_millis(20));
    let a = d.a.send_limits(d.now);
    assert!(a.credit >= Duration::from_millis(15), "{a:?}");
    assert_eq!(a.busy(), a.credit, "{a:?}");
    // The credit's clock stops once the receive is posted and its credit arrives.
    d.b.post_recv(1, vec![0; 1000]).unwrap();
    assert!(b_completes(&mut d));
    d.settle(Duration::from_millis(20));
    let after = d.a.send_limits(d.now);
    assert!(
        after.credit - a.credit < Duration::from_millis(1),
        "{after:?}"
    );
}

/// A connection aborted mid-transfer stops its clock: later readings add nothing.
#[test]
fn an_aborted_connections_clock_stops() {
    let mut d = established(true);
    start_bulk(&mut d, 4 << 20);
    // Part of the transfer, then the sender aborts.
    d.run(Duration::from_micros(300), |_, _, p| Some(p), |_| false);
    assert!(d.a.send_limits(d.now).busy() > Duration::ZERO);
    d.a.abort();
    d.settle(Duration::from_millis(10));
    assert!(d.a.is_closed());
    let at_close = d.a.send_limits(d.now);
    assert_eq!(d.a.send_limits(d.now + Duration::from_secs(5)), at_close);
}
