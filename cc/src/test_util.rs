//! Helpers for the unit tests: a window-limited sender driven by a fixed RTT.

use core::time::Duration;

use crate::CongestionControl;

pub fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

/// One round trip of a window-limited sender: the window at the start of the round is
/// acknowledged in `seg`-byte ACKs spread evenly over `rtt`, each reporting the window full
/// before it (the sender refills it on every ACK) and `rtt` as the sample. Returns the time at
/// the end of the round.
pub fn round_trip<C: CongestionControl + ?Sized>(
    cc: &mut C,
    start: Duration,
    rtt: Duration,
    seg: u64,
) -> Duration {
    let w = cc.cwnd();
    let n = w.div_ceil(seg).max(1);
    let n32 = u32::try_from(n).expect("test windows are small");
    for i in 1..=n {
        let acked = seg.min(w - (i - 1) * seg);
        let now = start + rtt * (i as u32) / n32;
        let flight = cc.cwnd().saturating_sub(acked);
        cc.on_ack(now, acked, Some(rtt), flight);
    }
    start + rtt
}

/// `n` driver turns of a sender limited to `app` segments: each turn sends min(cwnd, `app`)
/// segments of `seg` bytes, then takes all their ACKs, spread evenly over `rtt`, before it
/// refills (unlike [`round_trip`], whose sender refills on every ACK). Advances `now`.
pub fn driver_turns<C: CongestionControl + ?Sized>(
    cc: &mut C,
    now: &mut Duration,
    seg: u64,
    app: u64,
    n: usize,
    rtt: Duration,
) {
    for _ in 0..n {
        let flight = (cc.cwnd() / seg).min(app);
        for k in 1..=flight {
            *now += rtt / (flight as u32);
            cc.on_ack(*now, seg, Some(rtt), (flight - k) * seg);
        }
    }
}

/// `cc`, fresh, after a congestion event at 1 ms with ten of its segments in flight: in
/// recovery, its window cut to `cwnd_segments` segments.
pub fn in_recovery_from_ten<C: CongestionControl>(mut cc: C, cwnd_segments: u64) -> C {
    let mss = cc.mss();
    cc.on_congestion_event(ms(1), 10 * mss);
    assert_eq!(cc.cwnd(), cwnd_segments * mss);
    assert!(cc.in_recovery());
    cc
}
