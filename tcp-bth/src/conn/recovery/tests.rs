//! Unit tests of the scoreboard, RACK and undo.

use super::rack::MAX_REO_MEASURED;
use super::*;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// A scoreboard with `n` segments of 100 bytes from offset 0, all sent at `at`.
fn sent_at(n: u64, at: Duration) -> Recovery {
    let mut r = Recovery::new();
    for i in 0..n {
        r.on_send(i * 100, (i + 1) * 100, at, 0);
    }
    r
}

#[test]
fn reordering_within_window_is_not_loss() {
    let mut r = Recovery::new();
    for i in 0..4u64 {
        r.on_send(i * 100, (i + 1) * 100, ms(i), i as u32);
    }
    // Segment 0 delayed; 1 SACKed at t=10 (RTT 9 ms).
    r.on_ack(0, &[(100, 200)], None, None, ms(10), Some(ms(9)));
    let (lost, timer) = r.detect_losses(ms(10), Some(ms(9)), Some(ms(9)));
    assert_eq!(lost, 0);
    // Deadline: xmit 0 + rack_rtt 9 + reo 9/4.
    assert_eq!(timer, Some(ms(9) + ms(9) / 4));
    // It arrives before the deadline: nothing retransmitted.
    let a = r.on_ack(200, &[], None, None, ms(11), Some(ms(9)));
    assert_eq!(a.newly_acked_bytes, 200);
    assert_eq!(r.stats.retransmits, 0);
}

/// A segment declared lost and then delivered, unretransmitted, 4 ms late on a path with a
/// 1 ms SRTT: the window grows past SRTT to what was measured, so the next segment held
/// back as long is not declared lost (RFC 8985's cap at SRTT would declare it lost at
/// 12 ms). A lateness past 100 ms is a stall, not reordering: the window stops there.
#[test]
fn measured_reordering_longer_than_srtt_widens_the_window_past_it() {
    let mut r = Recovery::new();
    let srtt = Some(ms(1));
    r.on_send(0, 100, ms(0), 0);
    r.on_send(100, 200, ms(0), 0);
    r.on_ack(0, &[(100, 200)], None, None, ms(1), Some(ms(1)));
    assert_eq!(r.detect_losses(ms(2), Some(ms(1)), srtt).0, 100);
    r.on_ack(200, &[], None, None, ms(5), Some(ms(1)));
    assert_eq!(r.stats.false_losses, 1);
    assert_eq!(r.stats.reo_measured, ms(5), "4 ms late, and a quarter more");
    r.on_send(200, 300, ms(10), 10);
    r.on_send(300, 400, ms(10), 10);
    r.on_ack(200, &[(300, 400)], None, None, ms(11), Some(ms(1)));
    let (lost, timer) = r.detect_losses(ms(14), Some(ms(1)), srtt);
    assert_eq!(lost, 0);
    assert_eq!(timer, Some(ms(10) + ms(1) + ms(5)));
    // A segment delivered a second after it was declared lost.
    r.on_send(400, 500, ms(20), 20);
    r.on_send(500, 600, ms(20), 20);
    r.on_ack(300, &[(500, 600)], None, None, ms(21), Some(ms(1)));
    assert_eq!(r.detect_losses(ms(30), Some(ms(1)), srtt).0, 100);
    r.on_ack(600, &[], None, None, ms(1020), Some(ms(1)));
    assert_eq!(r.stats.reo_measured, MAX_REO_MEASURED);
}

#[test]
fn overdue_segment_is_lost_and_pipe_accounts() {
    let mut r = Recovery::new();
    r.on_send(0, 100, ms(0), 0);
    r.on_send(100, 200, ms(1), 1);
    assert_eq!(r.pipe(), 200);
    r.on_ack(0, &[(100, 200)], None, None, ms(10), Some(ms(9)));
    assert_eq!(r.pipe(), 100);
    let (lost, _) = r.detect_losses(ms(20), Some(ms(9)), Some(ms(9)));
    assert_eq!(lost, 100);
    assert_eq!(r.pipe(), 0);
    assert_eq!(r.next_lost(), Some((0, 100)));
    r.on_retransmit(0, ms(20), 20);
    assert_eq!(r.pipe(), 100);
    // ACK echoing the original's timestamp: the retransmission was spurious.
    let a = r.on_ack(200, &[], None, Some(0), ms(21), Some(ms(9)));
    assert_eq!(a.spurious, 1);
    assert_eq!(r.pipe(), 0);
    assert!(r.is_empty());
}

#[test]
fn rto_forgets_sack_so_reneged_or_forged_blocks_are_retransmitted() {
    let mut r = Recovery::new();
    r.on_send(0, 100, ms(0), 0);
    r.on_send(100, 200, ms(0), 0);
    r.on_send(200, 300, ms(0), 0);
    // A SACK for [100, 200) that the receiver never really kept (reneged or forged).
    r.on_ack(0, &[(100, 200)], None, None, ms(1), None);
    r.on_rto();
    let mut resent = Vec::new();
    while let Some((s, _)) = r.next_lost() {
        r.on_retransmit(s, ms(300), 300);
        resent.push(s);
    }
    assert_eq!(resent, vec![0, 100, 200]);
    assert_eq!(r.pipe(), 300);
}

/// After an RTO the segments it presumed lost are delivered (they arrived long before; the
/// timeout forgot their SACKs). That is not reordering: the reorder window stays as it
/// was, and the next loss is declared a round trip after it, as before the timeout. It
/// used to count each of them as a segment 200 ms late, so the window went to 100 ms for
/// the next 16 episodes (on the relay at 1 % loss, 16 stalls of about 90 ms after each
/// RTO), and RACK's RTT became their age.
#[test]
fn segments_an_rto_presumed_lost_are_no_reordering_when_they_turn_out_delivered() {
    let mut r = sent_at(10, ms(0));
    let rtt = Some(ms(1));
    // [0, 100) lost, the rest SACKed; then the RTO (its retransmission lost too).
    r.on_ack(0, &[(100, 1000)], None, None, ms(1), rtt);
    r.on_rto();
    r.start_episode();
    let (s, _) = r.next_lost().expect("everything is presumed lost");
    assert_eq!(s, 0);
    r.on_retransmit(0, ms(200), 200);
    // The receiver still had [100, 1000): one cumulative ACK covers it all.
    let a = r.on_ack(1000, &[], None, Some(200), ms(201), rtt);
    assert_eq!(a.false_losses, 0, "{a:?}");
    assert!(!a.undo, "{a:?}");
    assert_eq!(r.stats.false_losses, 0);
    assert_eq!(r.stats.reo_measured, Duration::ZERO);
    assert!(r.is_empty());
    // The next loss: [1000, 1100) lost, a later segment SACKed 1 ms after they were sent.
    r.on_send(1000, 1100, ms(210), 210);
    r.on_send(1100, 1200, ms(210), 210);
    r.on_ack(1000, &[(1100, 1200)], None, None, ms(211), rtt);
    let (lost, _) = r.detect_losses(ms(213), rtt, rtt);
    assert_eq!(
        lost, 100,
        "declared after RTT + min_rtt/4, not 100 ms later"
    );
}

/// RACK's RTT is that of the most recently sent segment delivered (RFC 8985 §6.2 step 2,
/// which takes them in transmission order): a cumulative ACK that also covers an old
/// segment, whose own ACK was lost, does not make it the old segment's age.
#[test]
fn rack_rtt_follows_the_newest_segment_delivered_not_the_oldest() {
    let mut r = sent_at(3, ms(0));
    let rtt = Some(ms(1));
    r.on_send(300, 400, ms(49), 49);
    // [0, 100) is retransmitted at 50 ms; one ACK at 51 ms covers the retransmission and
    // [100, 200), whose own ACK was lost (sent at 0: 51 ms old).
    r.on_retransmit(0, ms(50), 50);
    r.on_ack(200, &[], None, None, ms(51), rtt);
    // RACK RTT 1 ms: [200, 300) (sent at 0) and [300, 400) (sent at 49, before the
    // delivered retransmission) are overdue. With RACK RTT 51 ms neither would be.
    assert_eq!(r.detect_losses(ms(51), rtt, rtt), (200, None));
}

/// Per-ACK cost does not grow with the window: 20,000 segments in flight, the first one
/// lost, and every later ACK repeating a growing SACK block (as a receiver does for each
/// arrival behind one hole). Scanning the scoreboard from the front on each ACK cost about
/// 10,000 entries per ACK here; the transmission-ordered queue and the SACK cache make it
/// a few.
#[test]
fn per_ack_work_does_not_grow_with_the_window() {
    let mut r = Recovery::new();
    let n = 20_000u64;
    for i in 0..n {
        r.on_send(i * 100, (i + 1) * 100, Duration::from_micros(i), 0);
    }
    let rtt = Some(ms(1));
    let before = r.stats.scoreboard_visits;
    for k in 1..n {
        let now = ms(1) + Duration::from_micros(k);
        r.on_ack(0, &[(100, (k + 1) * 100)], None, None, now, rtt);
        r.detect_losses(now, rtt, rtt);
    }
    let per_ack = (r.stats.scoreboard_visits - before) as f64 / (n - 1) as f64;
    assert!(per_ack < 8.0, "{per_ack} entries per ACK");
    assert_eq!(r.next_lost(), Some((0, 100)), "the hole is found lost");
    assert_eq!(r.pipe(), 0);
}

/// D-SACK of a retransmission proves it spurious; when every retransmission of the
/// episode is proven, the caller is told to undo (also after recovery ended: the proof
/// typically arrives just after the late original ended it).
#[test]
fn dsack_of_every_retransmission_undoes_the_episode() {
    let mut r = Recovery::new();
    for i in 0..4u64 {
        r.on_send(i * 100, (i + 1) * 100, ms(0), 0);
    }
    r.on_ack(0, &[(200, 400)], None, None, ms(10), Some(ms(9)));
    let (lost, _) = r.detect_losses(ms(20), Some(ms(9)), Some(ms(9)));
    assert_eq!(lost, 200);
    r.start_episode();
    while let Some((s, _)) = r.next_lost() {
        r.on_retransmit(s, ms(20), 20);
    }
    // The originals arrive: cumulative ACK, recovery over; no undo yet.
    let a = r.on_ack(400, &[], None, None, ms(21), Some(ms(9)));
    assert!(!a.undo);
    r.end_episode();
    let a = r.on_ack(400, &[], Some((0, 100)), None, ms(22), Some(ms(9)));
    assert!(!a.undo && a.spurious == 1, "{a:?}");
    let a = r.on_ack(400, &[], Some((100, 200)), None, ms(23), Some(ms(9)));
    assert!(a.undo, "{a:?}");
    assert_eq!(r.stats.dsack_spurious, 2);
    // A D-SACK of something never retransmitted proves nothing.
    let a = r.on_ack(400, &[], Some((200, 300)), None, ms(24), Some(ms(9)));
    assert!(!a.undo && a.spurious == 0);
}

/// Reordering deeper than the reorder window: a segment is declared lost (the caller
/// reduces cwnd) and then arrives before its retransmission went out. The episode's only
/// "loss" was false: undo, and widen the window; a second, real loss is not undone.
#[test]
fn a_segment_declared_lost_that_arrives_by_itself_undoes_the_episode() {
    let mut r = Recovery::new();
    for i in 0..4u64 {
        r.on_send(i * 100, (i + 1) * 100, ms(i), 0);
    }
    r.on_ack(0, &[(100, 400)], None, None, ms(10), Some(ms(9)));
    let (lost, _) = r.detect_losses(ms(20), Some(ms(9)), Some(ms(9)));
    assert_eq!(lost, 100);
    r.start_episode();
    let a = r.on_ack(400, &[], None, None, ms(21), Some(ms(9)));
    assert_eq!(a.false_losses, 1);
    assert!(a.undo, "{a:?}");
    assert_eq!(r.stats.reo_wnd_mult, 2);

    // Two segments declared lost, one arrives, the other does not: no undo.
    for i in 4..8u64 {
        r.on_send(i * 100, (i + 1) * 100, ms(30 + i), 0);
    }
    r.on_ack(400, &[(600, 800)], None, None, ms(50), Some(ms(9)));
    let (lost, _) = r.detect_losses(ms(80), Some(ms(9)), Some(ms(9)));
    assert_eq!(lost, 200);
    r.start_episode();
    let a = r.on_ack(500, &[(600, 800)], None, None, ms(81), Some(ms(9)));
    assert_eq!(a.false_losses, 1);
    assert!(!a.undo, "[500, 600) is still lost: {a:?}");
}

/// A segment acknowledged in part keeps only its unacknowledged tail: its retransmission
/// starts at the cumulative ACK, never below it (where the send queue holds nothing), and the
/// pipe counts only the tail. Kept whole, the retransmission started below SND.UNA.
#[test]
fn a_partly_acknowledged_segment_keeps_only_its_tail() {
    let mut r = sent_at(3, ms(0));
    assert_eq!(r.pipe(), 300);
    let a = r.on_ack(150, &[], None, None, ms(5), Some(ms(5)));
    assert_eq!(a.newly_acked_bytes, 150);
    assert_eq!(r.pipe(), 150);
    // Everything left is lost to an RTO: the first retransmission is the tail [150, 200).
    r.on_rto();
    assert_eq!(r.next_lost(), Some((150, 200)));
    r.on_retransmit(150, ms(300), 1);
    assert_eq!(r.pipe(), 50);
    assert_eq!(r.next_lost(), Some((200, 300)));
}

/// Attack resistance (docs/reliability.md, "Bounded state whatever the peer sends"; moved here
/// from `tests/tests/attacks.rs` when this module became crate-private).
#[test]
fn sack_scoreboard_holds_only_sent_segments_whatever_the_blocks() {
    let mut r = Recovery::new();
    let now = Duration::from_millis(10);
    for i in 0..100u64 {
        r.on_send(i * 1000, (i + 1) * 1000, now, 0);
    }
    let full_pipe = r.pipe();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..100_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let l = x % 200_000;
        let sacks = [
            (l, l + (x >> 40) % 50_000),
            (x % 7, u64::MAX),
            (u64::MAX - 1, 0),
        ];
        r.on_ack(0, &sacks, None, None, now, None);
        assert!(r.pipe() <= full_pipe);
        assert_eq!(r.highest_end(), Some(100_000));
    }
    // A real cumulative ACK still empties it.
    r.on_ack(100_000, &[], None, None, now, None);
    assert!(r.is_empty());
    assert_eq!(r.pipe(), 0);
}
