//! The endpoint's answer to a segment for no connection (RFC 9293 §3.10.7.1), and the rate
//! limit on such answers.

use crate::wire::{IpPair, TcpFlags, TcpOptions, TcpRepr};
use std::time::Duration;

/// The RST for `seg` (which reached no connection), from `ours` (`src` us); None for an RST.
///
/// If the segment has an ACK, the RST takes its sequence number from it; otherwise it has
/// sequence 0 and acknowledges everything the segment occupied.
pub fn rst_for(ours: IpPair, seg: &TcpRepr) -> Option<Vec<u8>> {
    if seg.flags.rst() {
        return None;
    }
    let (seq, ack, flags) = if seg.flags.ack() {
        (seg.ack, 0, TcpFlags::RST)
    } else {
        (
            0,
            seg.seq.wrapping_add(seg.seq_len()),
            TcpFlags::RST | TcpFlags::ACK,
        )
    };
    let rst = TcpRepr {
        src_port: seg.dst_port,
        dst_port: seg.src_port,
        seq,
        ack,
        flags,
        window: 0,
        urgent: 0,
        options: TcpOptions::default(),
        payload: &[],
    };
    rst.to_vec(ours).ok()
}

/// A token bucket: `rate` per second, bursts of a tenth of a second's worth (at least 1).
#[derive(Debug)]
pub struct RstLimiter {
    rate: u32,
    tokens: f64,
    at: Duration,
}

impl RstLimiter {
    pub fn new(rate: u32) -> RstLimiter {
        RstLimiter {
            rate,
            tokens: Self::burst(rate),
            at: Duration::ZERO,
        }
    }

    fn burst(rate: u32) -> f64 {
        (f64::from(rate) / 10.0).max(1.0)
    }

    pub fn allow(&mut self, now: Duration) -> bool {
        let dt = now.saturating_sub(self.at).as_secs_f64();
        self.at = self.at.max(now);
        self.tokens = (self.tokens + dt * f64::from(self.rate)).min(Self::burst(self.rate));
        if self.rate > 0 && self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}
