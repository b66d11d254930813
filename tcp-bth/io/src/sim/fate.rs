//! [`SimLink::decide`], [`SimLink::decide_all`] and [`SimLink::schedule`]: `send` split in two,
//! the decision and the delivery, for drivers that carry several packets in one buffer (see
//! the [link's module docs](super)).

use super::{scale, Direction, InFlight, SimLink};
use rand::RngExt as _;
use std::time::Duration;

/// What the link does to one packet: [`SimLink::decide`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Refused by the full queue, or lost on the wire or on its path (already counted).
    Dropped,
    /// Delivered at `arrival`.
    Deliver {
        /// When the original arrives at the far end (the link's virtual time).
        arrival: Duration,
        /// An unaltered copy of the packet as sent arrives at this time too.
        duplicate: Option<Duration>,
        /// The original (not the copy) arrives with this bit flipped: bit `b` is bit `b % 8`
        /// (least significant first) of byte `b / 8` ([`flip_bit`]).
        corrupt_bit: Option<u64>,
        /// The original arrives with two payload words swapped ([`swap_words`]), a corruption
        /// the TCP checksum cannot see.
        swap: Option<(u8, u8)>,
        /// Drawn for reordering: held back by an extra delay, or, on a link that keeps
        /// reordered packets in place ([`LinkConfig::reorder_in_place`]), not. Either way its
        /// fate differs from its neighbours', so a super-packet is cut around it.
        ///
        /// [`LinkConfig::reorder_in_place`]: super::LinkConfig::reorder_in_place
        reordered: bool,
    },
}

/// Packets shorter than this are never swapped: at least 136 bytes before the last 64 cover
/// the longest IP and TCP headers (100 bytes), so the swapped words are payload.
pub const SWAP_MIN_LEN: usize = 200;

/// Swap two aligned 16-bit words among the last 64 bytes of `packet` (word `a % 32` and the
/// `b % 31 + 1`-th after it, mod 32): the words are at even offsets from its start, which for
/// an IP packet (a header of 20 or 40 bytes) or a TCP segment are even offsets from the TCP
/// header too, so the TCP checksum (a ones'-complement sum of 16-bit words) is unchanged.
/// Nothing for a packet shorter than [`SWAP_MIN_LEN`].
pub fn swap_words(packet: &mut [u8], (a, b): (u8, u8)) {
    let len = packet.len() & !1;
    if len < SWAP_MIN_LEN {
        return;
    }
    let base = len - 64;
    let i = usize::from(a % 32);
    let j = (i + usize::from(b % 31) + 1) % 32;
    let (x, y) = (base + 2 * i, base + 2 * j);
    let w = [packet[x], packet[x + 1]];
    packet.copy_within(y..y + 2, x);
    packet[y..y + 2].copy_from_slice(&w);
}

/// Flip bit `bit` of `packet` as a corrupting link does: bit `bit % 8` (least significant
/// first) of byte `bit / 8`; nothing if that is beyond the packet.
pub fn flip_bit(packet: &mut [u8], bit: u64) {
    if let Some(b) = usize::try_from(bit / 8)
        .ok()
        .and_then(|i| packet.get_mut(i))
    {
        *b ^= 1 << (bit % 8);
    }
}

impl SimLink {
    /// What the link does to a packet of `len` bytes sent in direction `dir` at `now`, without
    /// the packet: everything [`send`](Self::send) does (the same random draws, the queue and
    /// serialization clock, every counter) except handing the packet over, which is the
    /// caller's job, with [`schedule`](Self::schedule), for each delivery the fate names.
    ///
    /// This is for drivers that carry several packets in one buffer (the relay's GSO
    /// super-packets): they ask about each segment as if it had been sent alone, and deliver
    /// consecutive segments with the same fate together.
    pub fn decide(&mut self, now: Duration, dir: Direction, len: usize) -> Fate {
        let cfg = &self.cfg;
        let lane = &mut self.lanes[dir.index()];
        let draws = lane.draw();
        let spray_draws = cfg.spray.as_ref().map(|_| lane.draw_spray());
        // This packet's index in its direction: its round-robin path.
        let index = lane.stats.sent;
        lane.stats.sent += 1;

        lane.drain_departed(now);
        if cfg.queue_limit_bytes != 0
            && lane.queued_bytes.saturating_add(len) > cfg.queue_limit_bytes
        {
            lane.stats.dropped_queue += 1;
            return Fate::Dropped;
        }
        let serialization = cfg.serialization_time(len);
        let departure = now.max(lane.free_at).saturating_add(serialization);
        lane.free_at = departure;
        if departure > now {
            lane.queue.push_back((departure, len));
            lane.queued_bytes += len;
        }

        if draws.loss < cfg.loss {
            lane.stats.dropped_loss += 1;
            return Fate::Dropped;
        }

        let mut path_delay = Duration::ZERO;
        if let (Some(spray), Some(sd)) = (&cfg.spray, spray_draws) {
            let i = spray.choose(index, sd.path);
            // `choose` stays below the path count, which `validate` made at least 2, and
            // `lane.paths` has one entry per path; `get` keeps this panic-free regardless.
            if let (Some(path), Some(ps)) = (spray.paths.get(i), lane.paths.get_mut(i)) {
                ps.sent += 1;
                if sd.path_loss < path.loss {
                    ps.dropped_loss += 1;
                    lane.stats.dropped_loss += 1;
                    return Fate::Dropped;
                }
                path_delay = path.extra_delay;
            }
        }

        let mut arrival = departure
            .saturating_add(cfg.delay)
            .saturating_add(path_delay);
        let reordered = draws.reorder < cfg.reorder;
        if reordered && !cfg.reorder_in_place {
            let depth = u64::try_from(cfg.reorder_depth.as_nanos()).unwrap_or(u64::MAX);
            // Uniform in [1, depth] nanoseconds.
            let extra = 1 + scale(draws.reorder_delay, depth);
            arrival = arrival.saturating_add(Duration::from_nanos(extra));
        }
        if reordered {
            lane.stats.reordered += 1;
        }

        let duplicate = (draws.duplicate < cfg.duplicate).then(|| {
            lane.stats.duplicated += 1;
            arrival.saturating_add(serialization.max(Duration::from_micros(1)))
        });

        let corrupt_bit = (draws.corrupt < cfg.corrupt && len != 0).then(|| {
            lane.stats.corrupted += 1;
            let bits = u64::try_from(len).unwrap_or(u64::MAX).saturating_mul(8);
            scale(draws.corrupt_bit, bits)
        });

        let swap = (cfg.swap > 0.0).then(|| {
            let draw: f64 = lane.swap_rng.random();
            let words: (u8, u8) = (lane.swap_rng.random(), lane.swap_rng.random());
            (draw < cfg.swap && len >= SWAP_MIN_LEN).then(|| {
                lane.stats.swapped += 1;
                words
            })
        });
        Fate::Deliver {
            arrival,
            duplicate,
            corrupt_bit,
            swap: swap.flatten(),
            reordered,
        }
    }

    /// [`decide`](Self::decide) for consecutive packets of the lengths `lens`, all sent at
    /// `now`, in order: `fates` is cleared and gets one fate per length (reuse it across calls
    /// and nothing is allocated once it is large enough).
    pub fn decide_all(
        &mut self,
        now: Duration,
        dir: Direction,
        lens: impl IntoIterator<Item = usize>,
        fates: &mut Vec<Fate>,
    ) {
        fates.clear();
        for len in lens {
            fates.push(self.decide(now, dir, len));
        }
    }

    /// Hand `packet` to the far end of `dir` at `arrival`: one delivery of a fate from
    /// [`decide`](Self::decide). `segments` and `wire_bytes` are what [`LinkStats::delivered`](crate::sim::LinkStats::delivered)
    /// and [`LinkStats::bytes_delivered`](crate::sim::LinkStats::bytes_delivered) count when it is polled: 1 and its length for a plain
    /// packet, the number of segments and their bytes as separate packets for a buffer that
    /// carries several.
    pub fn schedule(
        &mut self,
        dir: Direction,
        arrival: Duration,
        packet: Vec<u8>,
        segments: u64,
        wire_bytes: usize,
    ) {
        self.in_flight.push(InFlight {
            arrival,
            seq: self.next_seq,
            dir,
            packet,
            segments,
            wire_bytes: wire_bytes as u64,
        });
        self.next_seq += 1;
    }
}
