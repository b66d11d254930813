//! A deterministic, sans-IO simulated network link between two endpoints, A and B.
//!
//! The link owns no clock, thread or socket: the caller passes the virtual time (`now`, a
//! [`Duration`] since an arbitrary epoch) into every call, hands packets to
//! [`SimLink::send`], and takes them out again with [`SimLink::poll`] once the virtual clock
//! has reached their arrival time. [`SimLink::next_arrival`] tells an event loop when to wake
//! up next. Given the same [`LinkConfig`] (including its `seed`) and the same sequence of calls,
//! the link produces exactly the same output.
//!
//! # What is modelled
//!
//! Each [`Direction`] is independent, with its own bottleneck queue, its own serialization clock
//! and its own random streams. A packet sent in one direction goes through:
//!
//! 1. **Drop-tail bottleneck queue.** The queue holds every byte that was sent but whose
//!    serialization has not finished at `now` (the packet currently being serialized included).
//!    If admitting the packet would push that backlog above
//!    [`queue_limit_bytes`](LinkConfig::queue_limit_bytes), the packet is dropped and counted in
//!    [`LinkStats::dropped_queue`]. A limit of 0 means an unlimited queue.
//! 2. **Serialization.** The packet leaves the queue at
//!    `departure = max(now, link free at) + len * 8 / bandwidth_bps` (rounded up to the next
//!    nanosecond); a bandwidth of 0 means infinitely fast (no serialization time, never any
//!    backlog).
//! 3. **Random loss** on the wire, with probability [`loss`](LinkConfig::loss): the packet has
//!    still used its serialization slot at the bottleneck, but never arrives
//!    ([`LinkStats::dropped_loss`]).
//! 4. **Spraying** (only with [`spray`](LinkConfig::spray)): past the bottleneck the packet
//!    takes one of 2 to [`MAX_PATHS`] paths, chosen round-robin by its index in the direction
//!    or uniformly at random ([`SprayMode`]). The path may lose it, with its own
//!    [`loss`](PathConfig::loss) (counted in [`LinkStats::dropped_loss`] and in the path's
//!    [`PathStats`]), and otherwise adds its fixed [`extra_delay`](PathConfig::extra_delay).
//!    The shared bottleneck comes first, as in a fabric where a flow's packets leave one NIC
//!    port and are sprayed by the first switch: packets leave in send order, and a packet is
//!    overtaken only by packets that left less than [`Spray::spread`] after it. The reordering
//!    depth thus follows the delay spread, and every packet, not a random few, may be
//!    reordered.
//! 5. **Propagation:** `arrival = departure + delay + the path's extra delay` (0 without
//!    spraying).
//! 6. **Reordering:** with probability [`reorder`](LinkConfig::reorder) the packet is held back by
//!    an extra delay drawn uniformly from `(0, reorder_depth]` (nanosecond resolution), so that
//!    packets sent after it may overtake it ([`LinkStats::reordered`] counts packets chosen for
//!    the extra delay, whether or not anything actually overtook them). With
//!    [`reorder_in_place`](LinkConfig::reorder_in_place) the packet is chosen and counted the
//!    same way but not delayed: the control cell, whose super-packets are cut where the
//!    reordering link's are.
//! 7. **Duplication:** with probability [`duplicate`](LinkConfig::duplicate) an unaltered copy of
//!    the packet as sent is also delivered, `max(serialization time, 1 µs)` after the original
//!    (after the original's path and extra reorder delay, if any). The copy is made downstream of the
//!    bottleneck: it does not occupy the queue or delay later packets.
//! 8. **Corruption:** with probability [`corrupt`](LinkConfig::corrupt) exactly one uniformly
//!    chosen bit of the original (not of a duplicate) is flipped. Empty packets are never
//!    corrupted.
//! 9. **Checksum-neutral corruption:** with probability [`swap`](LinkConfig::swap) two distinct
//!    16-bit words, aligned, among the last 64 bytes of the original are swapped, in packets of
//!    at least [`SWAP_MIN_LEN`] bytes (so the words are payload, never headers). The TCP
//!    checksum is a ones'-complement sum, blind to the order of its words: only an end-to-end
//!    check such as the per-segment ICRC sees it. Its draws come from a stream of their own,
//!    taken only when it is on, so turning it on changes no other impairment's pattern.
//!
//! Delivery ([`SimLink::poll`]) returns packets in order of arrival time; ties are broken by the
//! order in which the copies were created (a global sequence number across both directions), so
//! the order is fully deterministic.
//!
//! ## Randomness
//!
//! The two directions use separate ChaCha8 streams (`rand_chacha`) keyed by
//! [`seed`](LinkConfig::seed), stream 0 for [`Direction::AtoB`] and stream 1 for
//! [`Direction::BtoA`]. Every call to [`send`](SimLink::send) consumes exactly six random values
//! from its direction's stream (loss, reorder, reorder delay, duplicate, corrupt, corrupt bit),
//! whatever happens to the packet. With spraying it also consumes exactly two (path, path loss)
//! from a second stream of its direction (2 for A→B, 3 for B→A), even in round-robin mode or
//! when the packet never reaches a path; so turning spraying on does not change which packets
//! the other impairments hit. The impairments applied to the *n*-th packet sent in a direction
//! thus depend only on the seed, the direction and *n*: traffic in the other direction, packet
//! sizes, send times and queue drops do not shift the random pattern.
//!
//! ## Several packets in one buffer
//!
//! [`SimLink::decide`] is `send` without the packet: it returns the packet's [`Fate`] (dropped,
//! or its arrival, duplicate arrival and corrupted bit) after the same draws and counting, and
//! the caller hands over what arrives with [`SimLink::schedule`]. The relay uses it for the
//! kernel's GSO super-packets: it asks about each MSS-sized segment in turn
//! ([`SimLink::decide_all`]), so a segment's impairments are those it would have had as a
//! packet of its own, and it delivers consecutive segments with equal fates as one buffer whose
//! counters count its segments.
//!
//! # What is not modelled
//!
//! * Correlated or bursty loss (Gilbert–Elliott), jitter on every packet, or time-varying
//!   bandwidth/delay: every probability is independent per packet and constant.
//! * Link-layer framing overhead (preamble, inter-frame gap, Ethernet/IP headers not present in
//!   the buffer), MTU limits or fragmentation: a packet costs exactly `len` bytes of serialization
//!   and queue space, whatever its size.
//! * AQM (RED, CoDel), ECN marking, priority queues, pacing, or a shared medium: the queue is
//!   plain drop-tail and the directions never compete for bandwidth.
//! * Congestion on the sprayed paths: each path is a fixed delay line with no queue or
//!   bandwidth of its own, and the choice of path never reacts to load (no adaptive routing
//!   feedback, no flowlets), so the spread is constant.
//! * Packet contents: the link never parses packets, so it cannot, e.g., reorder only data or
//!   drop only ACKs.
//! * Real time: nothing happens between calls. `now` should not decrease between calls; if it
//!   does, nothing panics but the earlier time is simply used for that call's arithmetic.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

/// Which way a packet travels over the link (the core's type: the same for every driver).
pub use tcp_bth::pair::Direction;

pub use super::spray::{PathConfig, PathStats, Spray, SprayMode, MAX_PATHS};
pub use fate::{flip_bit, swap_words, Fate, SWAP_MIN_LEN};

// A child module, so that it sees the link's private state.
#[path = "fate.rs"]
mod fate;

/// Parameters of a [`SimLink`]; the same for both directions.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConfig {
    /// One-way propagation delay.
    pub delay: Duration,
    /// Bottleneck bandwidth in bits per second; 0 means infinite (no serialization time).
    pub bandwidth_bps: u64,
    /// Capacity of the drop-tail bottleneck queue, in bytes; 0 means unlimited.
    pub queue_limit_bytes: usize,
    /// Probability in `[0, 1]` that a packet is lost on the wire.
    pub loss: f64,
    /// Probability in `[0, 1]` that a packet is held back by an extra delay.
    pub reorder: f64,
    /// Upper bound of the extra delay of a reordered packet (uniform in `(0, reorder_depth]`).
    /// Must be non-zero when `reorder > 0` (unless `reorder_in_place`).
    pub reorder_depth: Duration,
    /// The control for a reordering link: a packet drawn for reordering is counted and
    /// marked ([`Fate::Deliver::reordered`]) as usual but keeps its place, with no extra
    /// delay. Every other draw is the same as with the delay, so a super-packet is cut at the
    /// same segments ([`SimLink::decide_all`]), in the same order: what reordering costs
    /// beyond the cuts is the difference between the two.
    pub reorder_in_place: bool,
    /// Probability in `[0, 1]` that a packet is delivered twice.
    pub duplicate: f64,
    /// Probability in `[0, 1]` that one random bit of a packet is flipped.
    pub corrupt: f64,
    /// Probability in `[0, 1]` that two aligned 16-bit words of a data packet's payload are
    /// swapped: a corruption the TCP checksum cannot see.
    pub swap: f64,
    /// Seed of the random streams of both directions.
    pub seed: u64,
    /// Spray packets over several paths after the bottleneck; `None`: one path.
    pub spray: Option<Spray>,
}

impl Default for LinkConfig {
    /// A clean data-centre link: 50 µs one-way delay, 10 Gbit/s, 4 MiB queue, no impairments
    /// (reorder depth 200 µs, used only once `reorder` is set), one path, seed 1.
    fn default() -> Self {
        LinkConfig {
            delay: Duration::from_micros(50),
            bandwidth_bps: 10_000_000_000,
            queue_limit_bytes: 4 << 20,
            loss: 0.0,
            reorder: 0.0,
            reorder_depth: Duration::from_micros(200),
            reorder_in_place: false,
            duplicate: 0.0,
            corrupt: 0.0,
            swap: 0.0,
            seed: 1,
            spray: None,
        }
    }
}

/// Why a [`LinkConfig`] was refused by [`LinkConfig::validate`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LinkConfigError {
    /// A probability field is NaN or outside `[0, 1]`.
    #[error("link {field} probability must be within [0, 1], got {value}")]
    Probability {
        /// The field: `loss`, `reorder`, `duplicate`, `corrupt` or `swap`.
        field: &'static str,
        /// The value refused.
        value: f64,
    },
    /// `reorder > 0` but `reorder_depth` is zero, so reordering could not delay anything.
    #[error("reordering with probability {reorder} needs a non-zero reordering depth")]
    ZeroReorderDepth {
        /// The reorder probability.
        reorder: f64,
    },
    /// A [`Spray`] with fewer than 2 or more than [`MAX_PATHS`] paths (one path is no spraying:
    /// leave [`LinkConfig::spray`] at `None`).
    #[error("spraying needs 2 to {max} paths, got {paths}", max = MAX_PATHS)]
    PathCount {
        /// Paths given.
        paths: usize,
    },
    /// A path's loss probability is NaN or outside `[0, 1]`.
    #[error("path loss probability must be within [0, 1], got {value} (path {path})")]
    PathLoss {
        /// Index of the path in [`Spray::paths`].
        path: usize,
        /// Its loss probability.
        value: f64,
    },
}

impl LinkConfig {
    /// Set the one-way propagation delay.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Set the bottleneck bandwidth in bit/s (0 = infinite).
    pub fn with_bandwidth_bps(mut self, bandwidth_bps: u64) -> Self {
        self.bandwidth_bps = bandwidth_bps;
        self
    }

    /// Set the drop-tail queue capacity in bytes (0 = unlimited).
    pub fn with_queue_limit_bytes(mut self, queue_limit_bytes: usize) -> Self {
        self.queue_limit_bytes = queue_limit_bytes;
        self
    }

    /// Set the loss probability.
    pub fn with_loss(mut self, loss: f64) -> Self {
        self.loss = loss;
        self
    }

    /// Set the reorder probability and the maximum extra delay of a reordered packet.
    pub fn with_reorder(mut self, reorder: f64, reorder_depth: Duration) -> Self {
        self.reorder = reorder;
        self.reorder_depth = reorder_depth;
        self
    }

    /// Keep reordered packets in place ([`reorder_in_place`](Self::reorder_in_place)): the
    /// control cell of a reordering link.
    pub fn with_reorder_in_place(mut self, in_place: bool) -> Self {
        self.reorder_in_place = in_place;
        self
    }

    /// Set the duplication probability.
    pub fn with_duplicate(mut self, duplicate: f64) -> Self {
        self.duplicate = duplicate;
        self
    }

    /// Set the checksum-neutral corruption probability (two payload words swapped).
    pub fn with_swap(mut self, swap: f64) -> Self {
        self.swap = swap;
        self
    }

    /// Set the single-bit corruption probability.
    pub fn with_corrupt(mut self, corrupt: f64) -> Self {
        self.corrupt = corrupt;
        self
    }

    /// Set the seed of the random streams.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Spray packets over the paths of `spray`.
    pub fn with_spray(mut self, spray: Spray) -> Self {
        self.spray = Some(spray);
        self
    }

    /// Check that every probability is a number within `[0, 1]`, that reordering has a
    /// non-zero depth and that a spray has 2 to [`MAX_PATHS`] paths ([`Spray::validate`]).
    pub fn validate(&self) -> Result<(), LinkConfigError> {
        for (field, value) in [
            ("loss", self.loss),
            ("reorder", self.reorder),
            ("duplicate", self.duplicate),
            ("corrupt", self.corrupt),
            ("swap", self.swap),
        ] {
            // `contains` is false for NaN.
            if !(0.0..=1.0).contains(&value) {
                return Err(LinkConfigError::Probability { field, value });
            }
        }
        if self.reorder > 0.0 && self.reorder_depth.is_zero() && !self.reorder_in_place {
            return Err(LinkConfigError::ZeroReorderDepth {
                reorder: self.reorder,
            });
        }
        if let Some(spray) = &self.spray {
            spray.validate()?;
        }
        Ok(())
    }

    /// Time to serialize `len` bytes at [`bandwidth_bps`](Self::bandwidth_bps), rounded up to
    /// the next nanosecond (zero for an infinite bandwidth; saturates rather than overflows).
    pub fn serialization_time(&self, len: usize) -> Duration {
        if self.bandwidth_bps == 0 {
            return Duration::ZERO;
        }
        let bits = len as u128 * 8;
        let nanos = (bits * 1_000_000_000).div_ceil(u128::from(self.bandwidth_bps));
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

/// Counters of one direction of a [`SimLink`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Packets handed to [`SimLink::send`].
    pub sent: u64,
    /// Packets (duplicates included) returned by [`SimLink::poll`].
    pub delivered: u64,
    /// Packets lost on the wire (after serialization): link-wide loss and, with spraying, loss
    /// on a path ([`SimLink::path_stats`] has the per-path share).
    pub dropped_loss: u64,
    /// Packets refused by the full drop-tail queue.
    pub dropped_queue: u64,
    /// Packets given an extra reorder delay.
    pub reordered: u64,
    /// Extra copies created.
    pub duplicated: u64,
    /// Packets with one bit flipped.
    pub corrupted: u64,
    /// Packets whose payload words were swapped (checksum-neutral corruption).
    pub swapped: u64,
    /// Bytes of the packets (duplicates included) returned by [`SimLink::poll`].
    pub bytes_delivered: u64,
}

impl LinkStats {
    /// Packets dropped for any reason.
    pub fn dropped(&self) -> u64 {
        self.dropped_loss + self.dropped_queue
    }
}

/// A packet copy on its way to the far end.
#[derive(Debug)]
struct InFlight {
    arrival: Duration,
    /// Global creation order of copies: the tie-breaker for equal arrival times.
    seq: u64,
    dir: Direction,
    packet: Vec<u8>,
    /// Packets (segments) this copy stands for, and their bytes: what the counters count.
    segments: u64,
    wire_bytes: u64,
}

impl InFlight {
    fn key(&self) -> (Duration, u64) {
        (self.arrival, self.seq)
    }
}

impl PartialEq for InFlight {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for InFlight {}

impl PartialOrd for InFlight {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for InFlight {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest `(arrival, seq)` first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(&self.key())
    }
}

/// The random values one `send` consumes, always all of them, in this order.
struct Draws {
    loss: f64,
    reorder: f64,
    reorder_delay: u64,
    duplicate: f64,
    corrupt: f64,
    corrupt_bit: u64,
}

/// The random values one `send` consumes from its direction's spray stream when the link
/// sprays: always both, in this order.
#[derive(Clone, Copy)]
struct SprayDraws {
    path: u64,
    path_loss: f64,
}

/// `floor(r * n / 2^64)`: maps a uniform `u64` onto `[0, n)` (bias below `n / 2^64`, and a
/// fixed single draw, unlike rejection sampling).
pub(crate) fn scale(r: u64, n: u64) -> u64 {
    ((u128::from(r) * u128::from(n)) >> 64) as u64
}

/// State of one direction.
#[derive(Debug, Clone)]
struct Lane {
    rng: ChaCha8Rng,
    /// Path choices and path losses (streams 2 and 3), apart from `rng` so that turning
    /// spraying on leaves the other impairments' pattern as it was.
    spray_rng: ChaCha8Rng,
    /// Checksum-neutral corruption (streams 4 and 5), drawn only when it is on.
    swap_rng: ChaCha8Rng,
    /// One entry per path of the spray; empty without spraying.
    paths: Vec<PathStats>,
    /// When the bottleneck finishes serializing everything accepted so far.
    free_at: Duration,
    /// `(departure, len)` of accepted packets, in departure order, not yet known to have left.
    queue: VecDeque<(Duration, usize)>,
    /// Sum of the lengths in `queue`.
    queued_bytes: usize,
    stats: LinkStats,
}

impl Lane {
    fn new(seed: u64, dir: Direction, paths: usize) -> Lane {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(dir.index() as u64);
        let mut spray_rng = ChaCha8Rng::seed_from_u64(seed);
        spray_rng.set_stream(2 + dir.index() as u64);
        let mut swap_rng = ChaCha8Rng::seed_from_u64(seed);
        swap_rng.set_stream(4 + dir.index() as u64);
        Lane {
            rng,
            spray_rng,
            swap_rng,
            paths: vec![PathStats::default(); paths],
            free_at: Duration::ZERO,
            queue: VecDeque::new(),
            queued_bytes: 0,
            stats: LinkStats::default(),
        }
    }

    fn draw(&mut self) -> Draws {
        Draws {
            loss: self.rng.random(),
            reorder: self.rng.random(),
            reorder_delay: self.rng.random(),
            duplicate: self.rng.random(),
            corrupt: self.rng.random(),
            corrupt_bit: self.rng.random(),
        }
    }

    fn draw_spray(&mut self) -> SprayDraws {
        SprayDraws {
            path: self.spray_rng.random(),
            path_loss: self.spray_rng.random(),
        }
    }

    /// Forget the packets whose serialization has finished by `now`.
    fn drain_departed(&mut self, now: Duration) {
        while let Some(&(departure, len)) = self.queue.front() {
            if departure > now {
                break;
            }
            self.queue.pop_front();
            self.queued_bytes -= len;
        }
    }
}

/// A deterministic simulated link between endpoints A and B; see the [module docs](self).
#[derive(Debug)]
pub struct SimLink {
    cfg: LinkConfig,
    lanes: [Lane; 2],
    in_flight: BinaryHeap<InFlight>,
    next_seq: u64,
}

impl SimLink {
    /// A link with configuration `cfg`.
    ///
    /// # Panics
    ///
    /// If `cfg` fails [`LinkConfig::validate`]; use [`try_new`](Self::try_new) to get the error
    /// instead.
    #[track_caller]
    pub fn new(cfg: LinkConfig) -> SimLink {
        match SimLink::try_new(cfg) {
            Ok(link) => link,
            Err(e) => panic!("invalid LinkConfig: {e}"),
        }
    }

    /// A link with configuration `cfg`, or why `cfg` is invalid.
    pub fn try_new(cfg: LinkConfig) -> Result<SimLink, LinkConfigError> {
        cfg.validate()?;
        let paths = cfg.spray.as_ref().map_or(0, |s| s.paths.len());
        Ok(SimLink {
            lanes: Direction::ALL.map(|d| Lane::new(cfg.seed, d, paths)),
            cfg,
            in_flight: BinaryHeap::new(),
            next_seq: 0,
        })
    }

    /// The configuration the link was built with.
    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// Send `packet` in direction `dir` at virtual time `now`. The packet is queued, serialized,
    /// impaired and scheduled for delivery as described in the [module docs](self); dropped
    /// packets are only counted. The same as [`decide`](Self::decide) followed by
    /// [`schedule`](Self::schedule) of the packet (corrupted as the fate says) and of its
    /// duplicate.
    pub fn send(&mut self, now: Duration, dir: Direction, mut packet: Vec<u8>) {
        let Fate::Deliver {
            arrival,
            duplicate,
            corrupt_bit,
            swap,
            ..
        } = self.decide(now, dir, packet.len())
        else {
            return;
        };
        // The copy is of the packet as sent: taken before the corruption.
        let copy = duplicate.map(|at| (at, packet.clone()));
        if let Some(bit) = corrupt_bit {
            flip_bit(&mut packet, bit);
        }
        if let Some(words) = swap {
            swap_words(&mut packet, words);
        }
        let len = packet.len();
        self.schedule(dir, arrival, packet, 1, len);
        if let Some((at, copy)) = copy {
            self.schedule(dir, at, copy, 1, len);
        }
    }

    /// The next packet (of either direction) whose arrival time is `<= now`: the earliest
    /// arrival first, equal arrivals in the order the copies were created.
    pub fn poll(&mut self, now: Duration) -> Option<(Direction, Vec<u8>)> {
        if self.in_flight.peek()?.arrival > now {
            return None;
        }
        let InFlight {
            dir,
            packet,
            segments,
            wire_bytes,
            ..
        } = self.in_flight.pop()?;
        let stats = &mut self.lanes[dir.index()].stats;
        stats.delivered += segments;
        stats.bytes_delivered += wire_bytes;
        Some((dir, packet))
    }

    /// Arrival time of the next packet to be delivered, if any is in flight.
    pub fn next_arrival(&self) -> Option<Duration> {
        self.in_flight.peek().map(|p| p.arrival)
    }

    /// Packet copies (both directions, duplicates included) scheduled but not yet polled.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Bytes in `dir`'s bottleneck queue at `now`: accepted but not yet fully serialized.
    pub fn queued_bytes(&self, dir: Direction, now: Duration) -> usize {
        self.lanes[dir.index()]
            .queue
            .iter()
            .filter(|&&(departure, _)| departure > now)
            .map(|&(_, len)| len)
            .sum()
    }

    /// Counters of direction `dir`.
    pub fn stats(&self, dir: Direction) -> LinkStats {
        self.lanes[dir.index()].stats
    }

    /// Counters of each sprayed path of direction `dir`, in path order (empty without
    /// spraying).
    pub fn path_stats(&self, dir: Direction) -> &[PathStats] {
        &self.lanes[dir.index()].paths
    }
}

#[cfg(test)]
#[path = "link_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "fate_tests.rs"]
mod fate_tests;
