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
//! Each [`Direction`] is an independent, full-duplex path with its own bottleneck queue, its own
//! serialization clock and its own random stream. A packet sent in one direction goes through:
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
//! 4. **Propagation:** `arrival = departure + delay`.
//! 5. **Reordering:** with probability [`reorder`](LinkConfig::reorder) the packet is held back by
//!    an extra delay drawn uniformly from `(0, reorder_depth]` (nanosecond resolution), so that
//!    packets sent after it may overtake it ([`LinkStats::reordered`] counts packets chosen for
//!    the extra delay, whether or not anything actually overtook them).
//! 6. **Duplication:** with probability [`duplicate`](LinkConfig::duplicate) an unaltered copy of
//!    the packet as sent is also delivered, `max(serialization time, 1 µs)` after the original
//!    (after the original's extra reorder delay, if any). The copy is made downstream of the
//!    bottleneck: it does not occupy the queue or delay later packets.
//! 7. **Corruption:** with probability [`corrupt`](LinkConfig::corrupt) exactly one uniformly
//!    chosen bit of the original (not of a duplicate) is flipped. Empty packets are never
//!    corrupted.
//!
//! Delivery ([`SimLink::poll`]) returns packets in order of arrival time; ties are broken by the
//! order in which the copies were created (a global sequence number across both directions), so
//! the order is fully deterministic.
//!
//! ## Randomness
//!
//! The two directions use separate ChaCha8 streams (`rand_chacha`) keyed by
//! [`seed`](LinkConfig::seed), stream 0 for [`Direction::AtoB`] and stream 1 for
//! [`Direction::BtoA`]. Every call to [`send`](SimLink::send) consumes exactly the same number of
//! random values from its direction's stream, whatever happens to the packet. So the impairments
//! applied to the *n*-th packet sent in a direction depend only on the seed, the direction and
//! *n*: traffic in the other direction, packet sizes, send times and queue drops do not shift
//! the random pattern.
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
//! * Packet contents: the link never parses packets, so it cannot, e.g., reorder only data or
//!   drop only ACKs.
//! * Real time: nothing happens between calls. `now` should not decrease between calls; if it
//!   does, nothing panics but the earlier time is simply used for that call's arithmetic.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::time::Duration;

/// Which way a packet travels over the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    /// From endpoint A to endpoint B.
    AtoB,
    /// From endpoint B to endpoint A.
    BtoA,
}

impl Direction {
    /// Both directions, `AtoB` first.
    pub const ALL: [Direction; 2] = [Direction::AtoB, Direction::BtoA];

    /// The opposite direction.
    pub fn reverse(self) -> Direction {
        match self {
            Direction::AtoB => Direction::BtoA,
            Direction::BtoA => Direction::AtoB,
        }
    }

    /// 0 for `AtoB`, 1 for `BtoA` (also the ChaCha stream number of the direction).
    pub fn index(self) -> usize {
        match self {
            Direction::AtoB => 0,
            Direction::BtoA => 1,
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::AtoB => "A->B",
            Direction::BtoA => "B->A",
        })
    }
}

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
    /// Must be non-zero when `reorder > 0`.
    pub reorder_depth: Duration,
    /// Probability in `[0, 1]` that a packet is delivered twice.
    pub duplicate: f64,
    /// Probability in `[0, 1]` that one random bit of a packet is flipped.
    pub corrupt: f64,
    /// Seed of the random streams of both directions.
    pub seed: u64,
}

impl Default for LinkConfig {
    /// A clean data-centre link: 50 µs one-way delay, 10 Gbit/s, 4 MiB queue, no impairments
    /// (reorder depth 200 µs, used only once `reorder` is set), seed 1.
    fn default() -> Self {
        LinkConfig {
            delay: Duration::from_micros(50),
            bandwidth_bps: 10_000_000_000,
            queue_limit_bytes: 4 << 20,
            loss: 0.0,
            reorder: 0.0,
            reorder_depth: Duration::from_micros(200),
            duplicate: 0.0,
            corrupt: 0.0,
            seed: 1,
        }
    }
}

/// Why a [`LinkConfig`] was refused by [`LinkConfig::validate`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LinkConfigError {
    /// A probability field is NaN or outside `[0, 1]`.
    #[error("link {field} probability must be within [0, 1], got {value}")]
    Probability { field: &'static str, value: f64 },
    /// `reorder > 0` but `reorder_depth` is zero, so reordering could not delay anything.
    #[error("link reorder probability {reorder} needs a non-zero reorder_depth")]
    ZeroReorderDepth { reorder: f64 },
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

    /// Set the duplication probability.
    pub fn with_duplicate(mut self, duplicate: f64) -> Self {
        self.duplicate = duplicate;
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

    /// Check that every probability is a number within `[0, 1]` and that reordering has a
    /// non-zero depth.
    pub fn validate(&self) -> Result<(), LinkConfigError> {
        for (field, value) in [
            ("loss", self.loss),
            ("reorder", self.reorder),
            ("duplicate", self.duplicate),
            ("corrupt", self.corrupt),
        ] {
            // `contains` is false for NaN.
            if !(0.0..=1.0).contains(&value) {
                return Err(LinkConfigError::Probability { field, value });
            }
        }
        if self.reorder > 0.0 && self.reorder_depth.is_zero() {
            return Err(LinkConfigError::ZeroReorderDepth {
                reorder: self.reorder,
            });
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
    /// Packets lost on the wire (after serialization).
    pub dropped_loss: u64,
    /// Packets refused by the full drop-tail queue.
    pub dropped_queue: u64,
    /// Packets given an extra reorder delay.
    pub reordered: u64,
    /// Extra copies created.
    pub duplicated: u64,
    /// Packets with one bit flipped.
    pub corrupted: u64,
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

/// `floor(r * n / 2^64)`: maps a uniform `u64` onto `[0, n)` (bias below `n / 2^64`, and a
/// fixed single draw, unlike rejection sampling).
fn scale(r: u64, n: u64) -> u64 {
    ((u128::from(r) * u128::from(n)) >> 64) as u64
}

/// State of one direction.
#[derive(Debug, Clone)]
struct Lane {
    rng: ChaCha8Rng,
    /// When the bottleneck finishes serializing everything accepted so far.
    free_at: Duration,
    /// `(departure, len)` of accepted packets, in departure order, not yet known to have left.
    queue: VecDeque<(Duration, usize)>,
    /// Sum of the lengths in `queue`.
    queued_bytes: usize,
    stats: LinkStats,
}

impl Lane {
    fn new(seed: u64, dir: Direction) -> Lane {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(dir.index() as u64);
        Lane {
            rng,
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
        Ok(SimLink {
            lanes: Direction::ALL.map(|d| Lane::new(cfg.seed, d)),
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
    /// packets are only counted.
    pub fn send(&mut self, now: Duration, dir: Direction, mut packet: Vec<u8>) {
        let cfg = &self.cfg;
        let lane = &mut self.lanes[dir.index()];
        let draws = lane.draw();
        lane.stats.sent += 1;

        let len = packet.len();
        lane.drain_departed(now);
        if cfg.queue_limit_bytes != 0
            && lane.queued_bytes.saturating_add(len) > cfg.queue_limit_bytes
        {
            lane.stats.dropped_queue += 1;
            return;
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
            return;
        }

        let mut arrival = departure.saturating_add(cfg.delay);
        if draws.reorder < cfg.reorder {
            let depth = u64::try_from(cfg.reorder_depth.as_nanos()).unwrap_or(u64::MAX);
            // Uniform in [1, depth] nanoseconds.
            let extra = 1 + scale(draws.reorder_delay, depth);
            arrival = arrival.saturating_add(Duration::from_nanos(extra));
            lane.stats.reordered += 1;
        }

        let duplicate = (draws.duplicate < cfg.duplicate).then(|| packet.clone());

        if draws.corrupt < cfg.corrupt && len != 0 {
            let bits = u64::try_from(len).unwrap_or(u64::MAX).saturating_mul(8);
            let bit = scale(draws.corrupt_bit, bits);
            packet[(bit / 8) as usize] ^= 1 << (bit % 8);
            lane.stats.corrupted += 1;
        }

        let seq = self.next_seq;
        self.in_flight.push(InFlight {
            arrival,
            seq,
            dir,
            packet,
        });
        self.next_seq += 1;

        if let Some(copy) = duplicate {
            lane.stats.duplicated += 1;
            let gap = serialization.max(Duration::from_micros(1));
            self.in_flight.push(InFlight {
                arrival: arrival.saturating_add(gap),
                seq: self.next_seq,
                dir,
                packet: copy,
            });
            self.next_seq += 1;
        }
    }

    /// The next packet (of either direction) whose arrival time is `<= now`: the earliest
    /// arrival first, equal arrivals in the order the copies were created.
    pub fn poll(&mut self, now: Duration) -> Option<(Direction, Vec<u8>)> {
        if self.in_flight.peek()?.arrival > now {
            return None;
        }
        let InFlight { dir, packet, .. } = self.in_flight.pop()?;
        let stats = &mut self.lanes[dir.index()].stats;
        stats.delivered += 1;
        stats.bytes_delivered += packet.len() as u64;
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const US: Duration = Duration::from_micros(1);

    fn clean() -> LinkConfig {
        LinkConfig::default()
    }

    /// Packet `i` of `len` bytes (len >= 8): the index in the first 8 bytes, then a pattern.
    fn pkt(i: u64, len: usize) -> Vec<u8> {
        let mut p: Vec<u8> = (0..len)
            .map(|k| (k as u8).wrapping_mul(31) ^ 0x5A)
            .collect();
        p[..8].copy_from_slice(&i.to_le_bytes());
        p
    }

    /// `(arrival, direction, packet)` of delivered packets.
    type Trace = Vec<(Duration, Direction, Vec<u8>)>;

    /// Drain everything, advancing the clock to each arrival.
    fn drain(link: &mut SimLink) -> Trace {
        let mut out = Vec::new();
        while let Some(t) = link.next_arrival() {
            while let Some((d, p)) = link.poll(t) {
                out.push((t, d, p));
            }
        }
        out
    }

    #[test]
    fn default_is_valid_and_builders_set_fields() {
        assert_eq!(LinkConfig::default().validate(), Ok(()));
        let c = LinkConfig::default()
            .with_delay(7 * US)
            .with_bandwidth_bps(123)
            .with_queue_limit_bytes(456)
            .with_loss(0.1)
            .with_reorder(0.2, 9 * US)
            .with_duplicate(0.3)
            .with_corrupt(0.4)
            .with_seed(99);
        assert_eq!(
            c,
            LinkConfig {
                delay: 7 * US,
                bandwidth_bps: 123,
                queue_limit_bytes: 456,
                loss: 0.1,
                reorder: 0.2,
                reorder_depth: 9 * US,
                duplicate: 0.3,
                corrupt: 0.4,
                seed: 99,
            }
        );
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn validate_refuses_bad_probabilities() {
        for bad in [-0.1, 1.0001, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let cases = [
                ("loss", clean().with_loss(bad)),
                ("reorder", clean().with_reorder(bad, US)),
                ("duplicate", clean().with_duplicate(bad)),
                ("corrupt", clean().with_corrupt(bad)),
            ];
            for (field, cfg) in cases {
                match cfg.validate() {
                    Err(LinkConfigError::Probability { field: f, .. }) => assert_eq!(f, field),
                    other => panic!("{field}={bad}: {other:?}"),
                }
                assert!(SimLink::try_new(cfg).is_err());
            }
        }
        for ok in [0.0, 1.0, 0.5] {
            assert_eq!(clean().with_loss(ok).validate(), Ok(()));
        }
        assert_eq!(
            clean().with_reorder(0.5, Duration::ZERO).validate(),
            Err(LinkConfigError::ZeroReorderDepth { reorder: 0.5 })
        );
        assert_eq!(clean().with_reorder(0.0, Duration::ZERO).validate(), Ok(()));
    }

    #[test]
    #[should_panic(expected = "invalid LinkConfig")]
    fn new_panics_on_invalid_config() {
        SimLink::new(clean().with_loss(f64::NAN));
    }

    #[test]
    fn direction_reverse_and_index() {
        assert_eq!(Direction::AtoB.reverse(), Direction::BtoA);
        assert_eq!(Direction::BtoA.reverse(), Direction::AtoB);
        assert_eq!(Direction::AtoB.index(), 0);
        assert_eq!(Direction::BtoA.index(), 1);
        assert_eq!(Direction::AtoB.to_string(), "A->B");
    }

    #[test]
    fn serialization_time_rounds_up() {
        let c = clean().with_bandwidth_bps(1_000_000_000);
        assert_eq!(c.serialization_time(1250), 10 * US);
        assert_eq!(c.serialization_time(1), Duration::from_nanos(8));
        assert_eq!(
            clean().with_bandwidth_bps(3).serialization_time(1),
            Duration::from_nanos(2_666_666_667)
        );
        assert_eq!(
            clean().with_bandwidth_bps(0).serialization_time(9000),
            Duration::ZERO
        );
        // Saturates instead of overflowing.
        assert_eq!(
            clean().with_bandwidth_bps(1).serialization_time(usize::MAX),
            Duration::from_nanos(u64::MAX)
        );
    }

    #[test]
    fn clean_link_delivers_in_order_after_delay_and_serialization() {
        let cfg = clean(); // 50 µs, 10 Gbit/s: 1500 bytes take 1.2 µs.
        let mut link = SimLink::new(cfg.clone());
        let t0 = Duration::from_millis(3);
        link.send(t0, Direction::AtoB, pkt(0, 1500));
        assert_eq!(link.in_flight(), 1);
        let arrival = t0 + Duration::from_nanos(1200) + cfg.delay;
        assert_eq!(link.next_arrival(), Some(arrival));
        assert_eq!(link.poll(arrival - Duration::from_nanos(1)), None);
        assert_eq!(link.poll(arrival), Some((Direction::AtoB, pkt(0, 1500))));
        assert_eq!(link.poll(arrival), None);
        assert_eq!(link.next_arrival(), None);
        assert_eq!(link.in_flight(), 0);

        for i in 0..100 {
            link.send(t0 + i * US, Direction::BtoA, pkt(i.into(), 64 + i as usize));
        }
        let got = drain(&mut link);
        assert_eq!(got.len(), 100);
        for (i, (t, d, p)) in got.into_iter().enumerate() {
            assert_eq!(d, Direction::BtoA);
            assert_eq!(p, pkt(i as u64, 64 + i));
            let expect = t0 + i as u32 * US + cfg.serialization_time(64 + i) + cfg.delay;
            assert_eq!(t, expect);
        }
        let s = link.stats(Direction::BtoA);
        assert_eq!(s.sent, 100);
        assert_eq!(s.delivered, 100);
        assert_eq!(s.bytes_delivered, (64..164).sum::<u64>());
        assert_eq!(s.dropped(), 0);
        assert_eq!(link.stats(Direction::AtoB).delivered, 1);
    }

    #[test]
    fn bandwidth_spaces_arrivals() {
        // 1 Gbit/s: 1250 bytes = 10 µs on the wire.
        let cfg = clean()
            .with_bandwidth_bps(1_000_000_000)
            .with_delay(100 * US);
        let mut link = SimLink::new(cfg);
        for i in 0..10 {
            link.send(Duration::ZERO, Direction::AtoB, pkt(i, 1250));
        }
        assert_eq!(link.queued_bytes(Direction::AtoB, Duration::ZERO), 12_500);
        assert_eq!(link.queued_bytes(Direction::AtoB, 35 * US), 7 * 1250);
        // The other direction has its own serialization clock.
        link.send(Duration::ZERO, Direction::BtoA, pkt(99, 1250));
        let got = drain(&mut link);
        assert_eq!(got[0], (110 * US, Direction::AtoB, pkt(0, 1250)));
        assert_eq!(got[1], (110 * US, Direction::BtoA, pkt(99, 1250)));
        let a: Vec<_> = got.iter().filter(|g| g.1 == Direction::AtoB).collect();
        for (i, (t, _, p)) in a.iter().enumerate() {
            assert_eq!(*t, 100 * US + (i as u32 + 1) * 10 * US);
            assert_eq!(*p, pkt(i as u64, 1250));
        }
        // An idle link starts serializing at `now`, not where it last stopped.
        let mut link = SimLink::new(clean().with_bandwidth_bps(1_000_000_000));
        link.send(Duration::ZERO, Direction::AtoB, pkt(0, 1250));
        link.send(Duration::from_millis(1), Direction::AtoB, pkt(1, 1250));
        let got = drain(&mut link);
        assert_eq!(got[1].0, Duration::from_millis(1) + 10 * US + 50 * US);
    }

    #[test]
    fn queue_limit_drops_excess() {
        // 1000 bytes = 8 µs at 1 Gbit/s; room for 10 packets (the one being serialized counts).
        let cfg = clean()
            .with_bandwidth_bps(1_000_000_000)
            .with_queue_limit_bytes(10_000);
        let mut link = SimLink::new(cfg);
        for i in 0..15 {
            link.send(Duration::ZERO, Direction::AtoB, pkt(i, 1000));
        }
        let s = link.stats(Direction::AtoB);
        assert_eq!((s.sent, s.dropped_queue), (15, 5));
        assert_eq!(link.in_flight(), 10);
        assert_eq!(link.queued_bytes(Direction::AtoB, Duration::ZERO), 10_000);
        // One packet has left the queue after 8 µs: room for exactly one more.
        link.send(8 * US, Direction::AtoB, pkt(15, 1000));
        link.send(8 * US, Direction::AtoB, pkt(16, 1000));
        let s = link.stats(Direction::AtoB);
        assert_eq!((s.sent, s.dropped_queue), (17, 6));
        // A full queue refuses even a small packet.
        link.send(8 * US, Direction::AtoB, pkt(17, 8));
        assert_eq!(link.stats(Direction::AtoB).dropped_queue, 7);
        // The other direction's queue is empty.
        link.send(8 * US, Direction::BtoA, pkt(18, 1000));
        assert_eq!(link.stats(Direction::BtoA).dropped_queue, 0);
        let got = drain(&mut link);
        let ids: Vec<u64> = got
            .iter()
            .filter(|g| g.1 == Direction::AtoB)
            .map(|g| u64::from_le_bytes(g.2[..8].try_into().unwrap()))
            .collect();
        assert_eq!(ids, (0..10).chain([15]).collect::<Vec<_>>());
        // After everything drained, the queue is empty again.
        let later = Duration::from_millis(1);
        assert_eq!(link.queued_bytes(Direction::AtoB, later), 0);
        for i in 0..10 {
            link.send(later, Direction::AtoB, pkt(100 + i, 1000));
        }
        assert_eq!(link.stats(Direction::AtoB).dropped_queue, 7);

        // Infinite bandwidth never builds a queue.
        let mut link = SimLink::new(clean().with_bandwidth_bps(0).with_queue_limit_bytes(1));
        for i in 0..10 {
            link.send(Duration::ZERO, Direction::AtoB, vec![i]);
        }
        assert_eq!(link.stats(Direction::AtoB).dropped_queue, 0);
        assert_eq!(drain(&mut link).len(), 10);
    }

    /// Send `n` packets of 64 bytes, 1 µs apart, in direction AtoB.
    fn blast(cfg: LinkConfig, n: u64) -> (Trace, LinkStats) {
        let mut link = SimLink::new(cfg);
        for i in 0..n {
            link.send(i as u32 * US, Direction::AtoB, pkt(i, 64));
        }
        let got = drain(&mut link);
        (got, link.stats(Direction::AtoB))
    }

    fn assert_rate(count: u64, n: u64, p: f64, what: &str) {
        let rate = count as f64 / n as f64;
        assert!(
            (rate - p).abs() <= 0.015,
            "{what}: {count}/{n} = {rate}, expected {p} ± 0.015"
        );
    }

    #[test]
    fn loss_rate_within_tolerance() {
        let n = 20_000;
        let (got, s) = blast(clean().with_loss(0.1), n);
        assert_rate(s.dropped_loss, n, 0.1, "loss");
        assert_eq!(got.len() as u64, n - s.dropped_loss);
        assert_eq!(s.delivered, n - s.dropped_loss);
        // Losses are spread out, not all at the start or end.
        let ids: Vec<u64> = got
            .iter()
            .map(|g| u64::from_le_bytes(g.2[..8].try_into().unwrap()))
            .collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert!(ids[0] < 100 && *ids.last().unwrap() > n - 100);
        let (_, all) = blast(clean().with_loss(1.0), 100);
        assert_eq!((all.dropped_loss, all.delivered), (100, 0));
    }

    #[test]
    fn duplicate_rate_within_tolerance() {
        let n = 20_000;
        let (got, s) = blast(clean().with_duplicate(0.1), n);
        assert_rate(s.duplicated, n, 0.1, "duplicate");
        assert_eq!(got.len() as u64, n + s.duplicated);
        let mut seen = vec![0u32; n as usize];
        for (_, _, p) in &got {
            let id = u64::from_le_bytes(p[..8].try_into().unwrap());
            assert_eq!(*p, pkt(id, 64), "duplicates are exact copies");
            seen[id as usize] += 1;
        }
        assert!(seen.iter().all(|&c| c == 1 || c == 2));
        assert_eq!(
            seen.iter().filter(|&&c| c == 2).count() as u64,
            s.duplicated
        );
    }

    #[test]
    fn corrupt_rate_within_tolerance_and_flips_one_bit() {
        let n = 20_000u64;
        let mut link = SimLink::new(clean().with_corrupt(0.1).with_bandwidth_bps(0));
        // Send in order with distinct times so arrival order identifies the packet.
        let originals: Vec<Vec<u8>> = (0..n).map(|i| pkt(i, 8 + (i % 200) as usize)).collect();
        for (i, p) in originals.iter().enumerate() {
            link.send(i as u32 * US, Direction::AtoB, p.clone());
        }
        let got = drain(&mut link);
        let s = link.stats(Direction::AtoB);
        assert_eq!(got.len() as u64, n);
        assert_rate(s.corrupted, n, 0.1, "corrupt");
        let mut flipped = 0;
        let mut flipped_positions = std::collections::HashSet::new();
        for ((_, _, p), orig) in got.iter().zip(&originals) {
            assert_eq!(p.len(), orig.len());
            let bits: u32 = p.iter().zip(orig).map(|(a, b)| (a ^ b).count_ones()).sum();
            assert!(bits <= 1);
            if bits == 1 {
                flipped += 1;
                let pos = p.iter().zip(orig).position(|(a, b)| a != b).unwrap();
                flipped_positions.insert((pos, (p[pos] ^ orig[pos]).trailing_zeros()));
            }
        }
        assert_eq!(flipped, s.corrupted);
        // The flipped bit is spread over the packet, not always the same one.
        assert!(flipped_positions.len() > 100);
        // Empty packets are never corrupted.
        let mut link = SimLink::new(clean().with_corrupt(1.0));
        link.send(Duration::ZERO, Direction::AtoB, Vec::new());
        assert_eq!(
            link.poll(Duration::from_secs(1)),
            Some((Direction::AtoB, vec![]))
        );
        assert_eq!(link.stats(Direction::AtoB).corrupted, 0);
    }

    #[test]
    fn reorder_produces_out_of_order_arrivals() {
        let n = 5_000;
        let depth = 20 * US;
        let cfg = clean().with_reorder(0.3, depth);
        let (got, s) = blast(cfg.clone(), n);
        assert_rate(s.reordered, n, 0.3, "reorder");
        assert_eq!(got.len() as u64, n);
        let ids: Vec<u64> = got
            .iter()
            .map(|g| u64::from_le_bytes(g.2[..8].try_into().unwrap()))
            .collect();
        let inversions = ids.windows(2).filter(|w| w[0] > w[1]).count();
        assert!(inversions > 100, "only {inversions} inversions");
        for (t, _, p) in &got {
            let id = u64::from_le_bytes(p[..8].try_into().unwrap());
            let base = id as u32 * US + cfg.serialization_time(64) + cfg.delay;
            assert!(*t >= base && *t <= base + depth, "{id}: {t:?} vs {base:?}");
        }
        assert_eq!(
            got.iter()
                .filter(|(t, _, p)| {
                    let id = u64::from_le_bytes(p[..8].try_into().unwrap());
                    *t > id as u32 * US + cfg.serialization_time(64) + cfg.delay
                })
                .count() as u64,
            s.reordered
        );
    }

    fn impaired(seed: u64) -> LinkConfig {
        clean()
            .with_bandwidth_bps(1_000_000_000)
            .with_queue_limit_bytes(20_000)
            .with_loss(0.1)
            .with_reorder(0.2, 30 * US)
            .with_duplicate(0.05)
            .with_corrupt(0.05)
            .with_seed(seed)
    }

    /// A mixed two-way schedule; `b_traffic` switches the BtoA half on or off.
    fn trace(cfg: LinkConfig, b_traffic: bool) -> (Trace, SimLink) {
        let mut link = SimLink::new(cfg);
        let mut out = Vec::new();
        for i in 0..3000u64 {
            let now = Duration::from_nanos(i * 1700);
            while let Some((d, p)) = link.poll(now) {
                out.push((now, d, p));
            }
            link.send(now, Direction::AtoB, pkt(i, 200 + (i % 1300) as usize));
            if b_traffic && i % 3 == 0 {
                link.send(now, Direction::BtoA, pkt(i, 100 + (i % 900) as usize));
            }
        }
        out.extend(drain(&mut link));
        (out, link)
    }

    #[test]
    fn same_seed_same_trace_different_seed_different_trace() {
        let (t1, l1) = trace(impaired(7), true);
        let (t2, l2) = trace(impaired(7), true);
        assert_eq!(t1, t2);
        for d in Direction::ALL {
            assert_eq!(l1.stats(d), l2.stats(d));
        }
        let s = l1.stats(Direction::AtoB);
        assert!(s.dropped_loss > 0 && s.dropped_queue > 0 && s.reordered > 0);
        assert!(s.duplicated > 0 && s.corrupted > 0);
        let (t3, l3) = trace(impaired(8), true);
        assert_ne!(t1, t3);
        assert_ne!(l1.stats(Direction::AtoB), l3.stats(Direction::AtoB));
    }

    #[test]
    fn directions_are_independent() {
        let (with_b, lw) = trace(impaired(3), true);
        let (without_b, lo) = trace(impaired(3), false);
        assert!(lw.stats(Direction::BtoA).sent > 0);
        assert_eq!(lo.stats(Direction::BtoA), LinkStats::default());
        assert_eq!(lw.stats(Direction::AtoB), lo.stats(Direction::AtoB));
        let a_only = |t: &Trace| -> Trace {
            t.iter()
                .filter(|g| g.1 == Direction::AtoB)
                .cloned()
                .collect()
        };
        assert_eq!(a_only(&with_b), a_only(&without_b));
        // The two directions draw from different streams: the same schedule in each direction
        // is impaired differently.
        let cfg = clean().with_loss(0.5);
        let mut link = SimLink::new(cfg);
        for i in 0..200 {
            link.send(Duration::ZERO, Direction::AtoB, pkt(i, 64));
            link.send(Duration::ZERO, Direction::BtoA, pkt(i, 64));
        }
        let got = drain(&mut link);
        let ids = |d: Direction| -> Vec<Vec<u8>> {
            got.iter()
                .filter(|g| g.1 == d)
                .map(|g| g.2.clone())
                .collect()
        };
        assert_ne!(ids(Direction::AtoB), ids(Direction::BtoA));
    }

    #[test]
    fn impairment_pattern_does_not_depend_on_sizes_or_times() {
        // The n-th packet of a direction gets the same fate whatever its size and send time.
        let cfg = clean().with_loss(0.3).with_bandwidth_bps(0);
        let fates = |len: usize, gap: Duration| {
            let mut link = SimLink::new(cfg.clone());
            for i in 0..500 {
                link.send(gap * i as u32, Direction::AtoB, pkt(i, len));
            }
            drain(&mut link)
                .into_iter()
                .map(|g| u64::from_le_bytes(g.2[..8].try_into().unwrap()))
                .collect::<Vec<_>>()
        };
        assert_eq!(fates(64, US), fates(1500, Duration::from_millis(3)));
    }

    #[test]
    fn ties_are_broken_by_send_order() {
        let mut link = SimLink::new(clean().with_bandwidth_bps(0).with_delay(Duration::ZERO));
        for i in 0..50u8 {
            let d = if i % 2 == 0 {
                Direction::AtoB
            } else {
                Direction::BtoA
            };
            link.send(Duration::ZERO, d, vec![i]);
        }
        // Zero delay and infinite bandwidth: due immediately.
        assert_eq!(link.next_arrival(), Some(Duration::ZERO));
        let got: Vec<u8> = std::iter::from_fn(|| link.poll(Duration::ZERO))
            .map(|(_, p)| p[0])
            .collect();
        assert_eq!(got, (0..50).collect::<Vec<_>>());
    }

    #[test]
    fn extreme_times_saturate_instead_of_panicking() {
        let cfg = clean()
            .with_delay(Duration::MAX)
            .with_reorder(1.0, Duration::MAX)
            .with_duplicate(1.0)
            .with_bandwidth_bps(1);
        let mut link = SimLink::new(cfg);
        link.send(Duration::MAX, Direction::AtoB, vec![1; 100]);
        link.send(Duration::MAX, Direction::AtoB, vec![2; 100]);
        assert_eq!(link.in_flight(), 4);
        assert_eq!(drain(&mut link).len(), 4);
    }

    /// Majority vote over the three copies of the 8-byte id at the start of a proptest packet:
    /// recovers the id even with one flipped bit.
    fn tagged(id: u64, len: usize) -> Vec<u8> {
        let mut p = vec![0xA5; len];
        for k in 0..3 {
            p[k * 8..k * 8 + 8].copy_from_slice(&id.to_le_bytes());
        }
        p
    }

    fn untag(p: &[u8]) -> u64 {
        let mut id = [0u8; 8];
        for (i, b) in id.iter_mut().enumerate() {
            let (x, y, z) = (p[i], p[8 + i], p[16 + i]);
            *b = (x & y) | (y & z) | (x & z);
        }
        u64::from_le_bytes(id)
    }

    fn prob() -> impl Strategy<Value = f64> {
        prop_oneof![Just(0.0), Just(1.0), 0.0..=1.0f64]
    }

    prop_compose! {
        fn arb_config()(
            delay_ns in 0u64..2_000_000,
            bandwidth_bps in prop_oneof![Just(0u64), 1_000u64..100_000_000_000],
            queue_limit_bytes in prop_oneof![Just(0usize), 1usize..100_000],
            loss in prob(),
            reorder in prob(),
            depth_ns in 1u64..5_000_000,
            duplicate in prob(),
            corrupt in prob(),
            seed in any::<u64>(),
        ) -> LinkConfig {
            LinkConfig {
                delay: Duration::from_nanos(delay_ns),
                bandwidth_bps,
                queue_limit_bytes,
                loss,
                reorder,
                reorder_depth: Duration::from_nanos(depth_ns),
                duplicate,
                corrupt,
                seed,
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn prop_every_surviving_copy_delivered_exactly_once(
            cfg in arb_config(),
            schedule in prop::collection::vec(
                (0u64..50_000, any::<bool>(), 24usize..3000), 0..300),
        ) {
            let mut link = SimLink::new(cfg.clone());
            // Absolute send times.
            let mut t = Duration::ZERO;
            let sends: Vec<(Duration, Direction, usize)> = schedule
                .iter()
                .map(|&(gap, b, len)| {
                    t += Duration::from_nanos(gap);
                    (t, if b { Direction::BtoA } else { Direction::AtoB }, len)
                })
                .collect();
            let mut deliveries = vec![0u32; sends.len()];
            let mut first_seen: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
            let mut now = Duration::ZERO;
            let mut next = 0;
            loop {
                let due = [sends.get(next).map(|s| s.0), link.next_arrival()]
                    .into_iter()
                    .flatten()
                    .min();
                let Some(due) = due else { break };
                prop_assert!(due >= now);
                now = due;
                while let Some((dir, p)) = link.poll(now) {
                    let id = untag(&p) as usize;
                    prop_assert!(id < sends.len());
                    let (sent_at, sent_dir, len) = sends[id];
                    prop_assert_eq!(dir, sent_dir);
                    prop_assert_eq!(p.len(), len);
                    prop_assert!(now >= sent_at + cfg.delay);
                    deliveries[id] += 1;
                    prop_assert!(deliveries[id] <= 2);
                    if deliveries[id] == 1 {
                        first_seen[dir.index()].push(id as u64);
                    }
                }
                prop_assert!(!matches!(link.next_arrival(), Some(a) if a <= now));
                while next < sends.len() && sends[next].0 == now {
                    let (_, dir, len) = sends[next];
                    link.send(now, dir, tagged(next as u64, len));
                    next += 1;
                }
            }
            prop_assert_eq!(link.in_flight(), 0);
            let mut total = LinkStats::default();
            for d in Direction::ALL {
                let s = link.stats(d);
                prop_assert_eq!(s.sent, sends.iter().filter(|x| x.1 == d).count() as u64);
                prop_assert_eq!(s.delivered, s.sent - s.dropped() + s.duplicated);
                prop_assert!(s.corrupted + s.reordered <= 2 * (s.sent - s.dropped()));
                if cfg.reorder == 0.0 {
                    // Without reordering, originals arrive in send order.
                    prop_assert!(first_seen[d.index()].windows(2).all(|w| w[0] < w[1]));
                }
                total.sent += s.sent;
                total.delivered += s.delivered;
                total.dropped_loss += s.dropped_loss;
                total.dropped_queue += s.dropped_queue;
                total.duplicated += s.duplicated;
            }
            let never = deliveries.iter().filter(|&&c| c == 0).count() as u64;
            let twice = deliveries.iter().filter(|&&c| c == 2).count() as u64;
            prop_assert_eq!(never, total.dropped_loss + total.dropped_queue);
            prop_assert_eq!(twice, total.duplicated);
            prop_assert_eq!(deliveries.iter().map(|&c| u64::from(c)).sum::<u64>(), total.delivered);
        }

        #[test]
        fn prop_arbitrary_calls_never_panic(
            cfg in arb_config(),
            ops in prop::collection::vec(
                (any::<u64>(), any::<bool>(), 0usize..2000, any::<bool>()), 0..200),
        ) {
            // Arbitrary (even decreasing) times, any sizes, polls interleaved with sends.
            let mut link = SimLink::new(cfg);
            for (t, b, len, poll) in ops {
                let now = Duration::from_nanos(t);
                if poll {
                    let _ = link.poll(now);
                } else {
                    let dir = if b { Direction::BtoA } else { Direction::AtoB };
                    link.send(now, dir, vec![0x3C; len]);
                }
                let _ = link.queued_bytes(Direction::AtoB, now);
            }
            let n = link.in_flight();
            prop_assert_eq!(drain(&mut link).len(), n);
        }
    }
}
