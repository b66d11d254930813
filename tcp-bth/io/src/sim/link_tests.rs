//! Tests of the simulated link (kept apart: they outweigh the link itself).
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
        .with_swap(0.5)
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
            reorder_in_place: false,
            duplicate: 0.3,
            corrupt: 0.4,
            swap: 0.5,
            seed: 99,
            spray: None,
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
        spray in prop::option::of(arb_spray()),
    ) -> LinkConfig {
        LinkConfig {
            delay: Duration::from_nanos(delay_ns),
            bandwidth_bps,
            queue_limit_bytes,
            loss,
            reorder,
            reorder_depth: Duration::from_nanos(depth_ns),
            reorder_in_place: false,
            duplicate,
            corrupt,
            swap: 0.0,
            seed,
            spray,
        }
    }
}

prop_compose! {
    /// 2 to 16 paths with independent delays (up to 1 ms) and losses, either mode.
    fn arb_spray()(
        paths in prop::collection::vec((0u64..1_000_000, prob()), 2..=MAX_PATHS),
        random in any::<bool>(),
    ) -> Spray {
        Spray {
            paths: paths
                .into_iter()
                .map(|(ns, loss)| PathConfig { extra_delay: Duration::from_nanos(ns), loss })
                .collect(),
            mode: if random { SprayMode::Random } else { SprayMode::RoundRobin },
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
            if cfg.reorder == 0.0 && cfg.spray.is_none() {
                // Without reordering or spraying, originals arrive in send order.
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
