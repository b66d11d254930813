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
