//! Tests of multipath spraying in the simulated link.
use super::*;
use crate::sim::{Direction, LinkConfig, LinkConfigError, LinkStats, SimLink};
use std::time::Duration;

const US: Duration = Duration::from_micros(1);
const AB: Direction = Direction::AtoB;

/// A link whose only delay is 10 µs of propagation (infinite bandwidth), spraying over `spray`.
fn sprayed(spray: Spray) -> LinkConfig {
    LinkConfig::default()
        .with_delay(10 * US)
        .with_bandwidth_bps(0)
        .with_spray(spray)
}

/// Packet `i`: its index in 8 bytes, padded to `len`.
fn pkt(i: u64, len: usize) -> Vec<u8> {
    let mut p = vec![0x5A; len.max(8)];
    p[..8].copy_from_slice(&i.to_le_bytes());
    p
}

fn id(p: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&p[..8]);
    u64::from_le_bytes(b)
}

/// `(arrival, packet index)` of everything delivered, in delivery order.
fn drain(link: &mut SimLink) -> Vec<(Duration, u64)> {
    let mut out = Vec::new();
    while let Some(t) = link.next_arrival() {
        while let Some((_, p)) = link.poll(t) {
            out.push((t, id(&p)));
        }
    }
    out
}

/// Send `n` 64-byte packets A→B, packet `i` at `i * gap`, and drain.
fn run(cfg: LinkConfig, n: u64, gap: Duration) -> (Vec<(Duration, u64)>, SimLink) {
    let mut link = SimLink::new(cfg);
    for i in 0..n {
        link.send(gap * i as u32, AB, pkt(i, 64));
    }
    (drain(&mut link), link)
}

#[test]
fn even_spreads_delays_from_zero_to_spread() {
    let s = Spray::even(5, 100 * US, SprayMode::RoundRobin).unwrap();
    let delays: Vec<Duration> = s.paths.iter().map(|p| p.extra_delay).collect();
    assert_eq!(delays, [0, 25, 50, 75, 100].map(|d| d * US));
    assert!(s.paths.iter().all(|p| p.loss == 0.0));
    assert_eq!(s.spread(), 100 * US);
    assert_eq!(s.validate(), Ok(()));
    let two = Spray::even(2, 7 * US, SprayMode::Random).unwrap();
    assert_eq!(two.paths[1].extra_delay, 7 * US);
    assert_eq!(two.mode, SprayMode::Random);
    // Sixteen paths end exactly at the spread.
    let s16 = Spray::even(
        MAX_PATHS,
        Duration::from_nanos(1_000_001),
        SprayMode::Random,
    )
    .unwrap();
    assert_eq!(s16.paths[15].extra_delay, Duration::from_nanos(1_000_001));
    let lossy = s.with_path_loss(0.25);
    assert!(lossy.paths.iter().all(|p| p.loss == 0.25));
}

#[test]
fn path_counts_and_losses_are_validated() {
    for n in [0, 1, MAX_PATHS + 1, usize::MAX] {
        assert_eq!(
            Spray::even(n, US, SprayMode::RoundRobin),
            Err(LinkConfigError::PathCount { paths: n })
        );
    }
    let ok = Spray::even(4, US, SprayMode::RoundRobin).unwrap();
    for n in [0, 1, 17] {
        let mut s = ok.clone();
        s.paths.resize(
            n,
            PathConfig {
                extra_delay: US,
                loss: 0.0,
            },
        );
        let cfg = sprayed(s);
        assert_eq!(cfg.validate(), Err(LinkConfigError::PathCount { paths: n }));
        assert!(SimLink::try_new(cfg).is_err());
    }
    for bad in [-0.1, 1.0001, f64::NAN, f64::INFINITY] {
        let mut s = ok.clone();
        s.paths[3].loss = bad;
        match sprayed(s).validate() {
            Err(LinkConfigError::PathLoss { path: 3, .. }) => {}
            other => panic!("path loss {bad}: {other:?}"),
        }
    }
    // The message names the limits, for the command lines that pass it on.
    let e = LinkConfigError::PathCount { paths: 1 }.to_string();
    assert!(e.contains("2 to 16 paths"), "{e}");
    assert_eq!(sprayed(ok.with_path_loss(1.0)).validate(), Ok(()));
}

#[test]
fn round_robin_puts_packet_n_on_path_n_mod_paths() {
    let spray = Spray::even(4, 30 * US, SprayMode::RoundRobin).unwrap();
    // 100 µs apart: no packet overtakes another, so arrivals show each packet's path.
    let (got, link) = run(sprayed(spray), 12, 100 * US);
    assert_eq!(got.len(), 12);
    for (arrival, i) in got {
        let extra = 10 * US * (i % 4) as u32;
        assert_eq!(arrival, 100 * US * i as u32 + 10 * US + extra, "packet {i}");
    }
    let per_path: Vec<u64> = link.path_stats(AB).iter().map(|p| p.sent).collect();
    assert_eq!(per_path, [3, 3, 3, 3]);
    assert!(link.path_stats(Direction::BtoA).iter().all(|p| p.sent == 0));
    // No spraying, no path counters.
    assert!(SimLink::new(LinkConfig::default())
        .path_stats(AB)
        .is_empty());
}

#[test]
fn round_robin_counts_packets_dropped_at_the_queue() {
    // 1 Gbit/s, room for two 1000-byte packets: of each burst of five sent at once, three are
    // refused at the queue, yet packet n still takes path n mod 3 (the index, not the count of
    // packets that reached the paths, picks the path).
    let cfg = sprayed(Spray::even(3, 9 * US, SprayMode::RoundRobin).unwrap())
        .with_bandwidth_bps(1_000_000_000)
        .with_queue_limit_bytes(2000);
    let mut link = SimLink::new(cfg);
    for burst in 0..6u64 {
        for k in 0..5 {
            let i = burst * 5 + k;
            link.send(Duration::from_millis(burst), AB, pkt(i, 1000));
        }
    }
    let got = drain(&mut link);
    let s = link.stats(AB);
    assert_eq!((s.sent, s.dropped_queue), (30, 18));
    let on_paths: u64 = link.path_stats(AB).iter().map(|p| p.sent).sum();
    assert_eq!(on_paths, 12, "queue drops never reach a path");
    for (arrival, i) in got {
        let (burst, k) = (i / 5, i % 5);
        assert!(k < 2, "packet {i} should have been refused");
        let departure = Duration::from_millis(burst) + 8 * US * (k as u32 + 1);
        let extra = Duration::from_nanos(4500) * (i % 3) as u32;
        assert_eq!(arrival, departure + 10 * US + extra, "packet {i}");
    }
}

/// Largest send-time gap between a packet and a later-sent packet that arrived before it.
fn deepest_overtake(got: &[(Duration, u64)], gap: Duration) -> Option<Duration> {
    let mut arrival = vec![Duration::ZERO; got.len()];
    for &(t, i) in got {
        arrival[i as usize] = t;
    }
    let mut deepest = None;
    for i in 0..arrival.len() {
        for j in i + 1..arrival.len() {
            if arrival[j] < arrival[i] {
                deepest = deepest.max(Some(gap * (j - i) as u32));
            }
        }
    }
    deepest
}

#[test]
fn reordering_depth_follows_the_spread() {
    for spread in [20 * US, 200 * US] {
        let spray = Spray::even(16, spread, SprayMode::Random).unwrap();
        let (got, link) = run(sprayed(spray).with_seed(5), 1500, US);
        assert_eq!(got.len(), 1500);
        assert_eq!(
            link.stats(AB).reordered,
            0,
            "spraying alone, no random hold-back"
        );
        let deepest = deepest_overtake(&got, US).expect("spraying reorders");
        // Only packets that left less than the spread later may overtake; with 16 paths and
        // 1500 random draws some packet on the fastest path comes close to that bound.
        assert!(
            deepest < spread,
            "{deepest:?} overtook with spread {spread:?}"
        );
        assert!(
            deepest >= spread * 8 / 10,
            "{deepest:?} with spread {spread:?}"
        );
    }
}

#[test]
fn path_loss_is_counted_per_path() {
    let mut spray = Spray::even(4, 5 * US, SprayMode::RoundRobin).unwrap();
    spray.paths[2].loss = 1.0;
    let (got, link) = run(sprayed(spray), 400, 10 * US);
    let paths = link.path_stats(AB);
    assert!(paths.iter().all(|p| p.sent == 100));
    let lost: Vec<u64> = paths.iter().map(|p| p.dropped_loss).collect();
    assert_eq!(lost, [0, 0, 100, 0]);
    let s = link.stats(AB);
    assert_eq!((s.dropped_loss, s.dropped(), s.delivered), (100, 100, 300));
    assert!(got.iter().all(|&(_, i)| i % 4 != 2));

    // Link-wide loss comes before the paths: what it takes never reaches a path.
    let spray = Spray::even(4, 5 * US, SprayMode::Random).unwrap();
    let n = 20_000;
    let (_, link) = run(sprayed(spray.with_path_loss(0.2)).with_loss(0.5), n, US);
    let s = link.stats(AB);
    let on_paths: u64 = link.path_stats(AB).iter().map(|p| p.sent).sum();
    let path_lost: u64 = link.path_stats(AB).iter().map(|p| p.dropped_loss).sum();
    let link_lost = s.dropped_loss - path_lost;
    assert_eq!(on_paths, n - link_lost);
    let rate = |x: u64, of: u64| x as f64 / of as f64;
    assert!((rate(link_lost, n) - 0.5).abs() < 0.02, "{link_lost}");
    assert!(
        (rate(path_lost, on_paths) - 0.2).abs() < 0.02,
        "{path_lost}"
    );
    // Random choice spreads packets evenly enough.
    for p in link.path_stats(AB) {
        assert!((rate(p.sent, on_paths) - 0.25).abs() < 0.02, "{p:?}");
    }
}

fn impaired(seed: u64, spray: Option<Spray>) -> LinkConfig {
    let cfg = LinkConfig::default()
        .with_bandwidth_bps(1_000_000_000)
        .with_loss(0.1)
        .with_reorder(0.1, 30 * US)
        .with_duplicate(0.05)
        .with_seed(seed);
    match spray {
        Some(s) => cfg.with_spray(s),
        None => cfg,
    }
}

#[test]
fn same_seed_same_trace_and_other_impairments_unchanged() {
    let spray = Spray::even(8, 40 * US, SprayMode::Random)
        .unwrap()
        .with_path_loss(0.05);
    let go = |seed, spray: Option<Spray>| -> (Vec<(Duration, u64)>, LinkStats, Vec<PathStats>) {
        let (got, link) = run(impaired(seed, spray), 3000, 2 * US);
        (got, link.stats(AB), link.path_stats(AB).to_vec())
    };
    let a = go(7, Some(spray.clone()));
    assert_eq!(a, go(7, Some(spray.clone())));
    assert_ne!(a.0, go(8, Some(spray.clone())).0);
    // Spraying draws from streams of its own: the link-wide impairments hit the same packets
    // with spraying (lossless paths) as without it.
    let plain = go(7, None);
    let lossless = go(7, Some(spray.with_path_loss(0.0)));
    assert_eq!(lossless.1, plain.1, "same losses, reorders and duplicates");
    let ids = |t: &[(Duration, u64)]| {
        let mut v: Vec<u64> = t.iter().map(|g| g.1).collect();
        v.sort_unstable();
        v
    };
    assert_eq!(ids(&lossless.0), ids(&plain.0));
    assert_ne!(lossless.0, plain.0, "but in another order");
}

#[test]
fn extreme_path_delays_saturate() {
    let spray = Spray {
        paths: vec![
            PathConfig {
                extra_delay: Duration::MAX,
                loss: 0.0,
            };
            2
        ],
        mode: SprayMode::RoundRobin,
    };
    assert_eq!(spray.spread(), Duration::ZERO);
    let mut link = SimLink::new(sprayed(spray).with_delay(Duration::MAX));
    link.send(Duration::MAX, AB, vec![1; 10]);
    assert_eq!(link.next_arrival(), Some(Duration::MAX));
    assert_eq!(drain(&mut link).len(), 1);
}
