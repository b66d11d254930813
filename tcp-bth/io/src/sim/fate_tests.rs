//! Tests of [`SimLink::decide`] and [`SimLink::schedule`]: asking about packets one by one or
//! in batches, and delivering them oneself, is `send` exactly.
use super::*;

const US: Duration = Duration::from_micros(1);

fn impaired_spraying(seed: u64) -> LinkConfig {
    let spray = Spray::even(3, 40 * US, SprayMode::Random)
        .expect("3 paths")
        .with_path_loss(0.05);
    LinkConfig::default()
        .with_bandwidth_bps(1_000_000_000)
        .with_queue_limit_bytes(40_000)
        .with_loss(0.1)
        .with_reorder(0.2, 30 * US)
        .with_duplicate(0.05)
        .with_corrupt(0.05)
        .with_spray(spray)
        .with_seed(seed)
}

fn pkt(i: u64, len: usize) -> Vec<u8> {
    let mut p: Vec<u8> = (0..len).map(|k| (k as u8) ^ (i as u8)).collect();
    p[..8].copy_from_slice(&i.to_le_bytes());
    p
}

type Trace = Vec<(Duration, Direction, Vec<u8>)>;

/// Batches of 1 to 7 packets sent at one instant, through `send` or through `decide_all` and
/// `schedule`; everything delivered, with the time it was polled at.
fn run(cfg: LinkConfig, batched: bool) -> (Trace, SimLink) {
    let mut link = SimLink::new(cfg);
    let mut out = Vec::new();
    let mut fates = Vec::new();
    let mut i = 0u64;
    for step in 0..600u64 {
        let now = Duration::from_nanos(step * 5_000);
        while let Some((d, p)) = link.poll(now) {
            out.push((now, d, p));
        }
        let batch: Vec<Vec<u8>> = (0..1 + step % 7)
            .map(|k| pkt(i + k, 100 + ((i + k) % 1400) as usize))
            .collect();
        i += batch.len() as u64;
        if !batched {
            for p in batch {
                link.send(now, Direction::AtoB, p);
            }
            continue;
        }
        link.decide_all(now, Direction::AtoB, batch.iter().map(Vec::len), &mut fates);
        assert_eq!(fates.len(), batch.len());
        for (mut p, fate) in batch.into_iter().zip(fates.iter().copied()) {
            let Fate::Deliver {
                arrival,
                duplicate,
                corrupt_bit,
                ..
            } = fate
            else {
                continue;
            };
            let copy = p.clone();
            if let Some(bit) = corrupt_bit {
                flip_bit(&mut p, bit);
            }
            let len = p.len();
            link.schedule(Direction::AtoB, arrival, p, 1, len);
            if let Some(at) = duplicate {
                link.schedule(Direction::AtoB, at, copy, 1, len);
            }
        }
    }
    while let Some(t) = link.next_arrival() {
        while let Some((d, p)) = link.poll(t) {
            out.push((t, d, p));
        }
    }
    (out, link)
}

#[test]
fn decide_and_schedule_are_send() {
    let (sent, a) = run(impaired_spraying(11), false);
    let (decided, b) = run(impaired_spraying(11), true);
    assert_eq!(sent, decided);
    assert_eq!(a.stats(Direction::AtoB), b.stats(Direction::AtoB));
    assert_eq!(a.path_stats(Direction::AtoB), b.path_stats(Direction::AtoB));
    let s = a.stats(Direction::AtoB);
    assert!(s.dropped_loss > 0 && s.dropped_queue > 0 && s.reordered > 0);
    assert!(s.duplicated > 0 && s.corrupted > 0);
}

#[test]
fn a_scheduled_buffer_counts_its_segments() {
    let mut link = SimLink::new(LinkConfig::default());
    link.schedule(Direction::BtoA, 5 * US, vec![0; 3000], 2, 3080);
    assert_eq!(link.poll(4 * US), None);
    assert_eq!(
        link.poll(5 * US).map(|(d, p)| (d, p.len())),
        Some((Direction::BtoA, 3000))
    );
    let s = link.stats(Direction::BtoA);
    assert_eq!((s.sent, s.delivered, s.bytes_delivered), (0, 2, 3080));
}

#[test]
fn flip_bit_flips_one_bit_and_ignores_bits_beyond_the_packet() {
    let mut p = vec![0u8; 4];
    flip_bit(&mut p, 9);
    assert_eq!(p, [0, 2, 0, 0]);
    flip_bit(&mut p, 32);
    flip_bit(&mut p, u64::MAX);
    assert_eq!(p, [0, 2, 0, 0]);
}

/// Swapping two aligned payload words keeps the TCP checksum right (it is blind to the order of
/// its 16-bit words), changes the payload, and leaves short packets (ACKs) alone.
#[test]
fn swapped_words_change_the_payload_and_not_the_checksum() {
    use tcp_bth::wire::{IpPair, TcpFlags, TcpRepr};
    let ip = IpPair::V4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
    };
    let payload: Vec<u8> = (0..400u32).map(|i| (i * 7 + i / 256) as u8).collect();
    let seg = TcpRepr {
        src_port: 1,
        dst_port: 2,
        seq: 3,
        ack: 4,
        flags: TcpFlags::ACK,
        window: 5,
        urgent: 0,
        options: Default::default(),
        payload: &payload,
    }
    .to_vec(ip)
    .unwrap();
    for words in [(0u8, 0u8), (5, 9), (31, 30), (200, 7)] {
        let mut s = seg.clone();
        swap_words(&mut s, words);
        assert_ne!(s, seg, "{words:?}: something moved");
        let got = TcpRepr::parse(&s, Some(ip)).expect("the checksum still holds");
        assert_ne!(got.payload, &payload[..], "{words:?}");
        assert_eq!(got.payload.len(), payload.len());
    }
    let mut ack = seg[..60].to_vec();
    swap_words(&mut ack, (1, 2));
    assert_eq!(ack, seg[..60], "a short packet is left alone");
}

/// The control of a reordering link draws, counts and marks the same packets but delays none:
/// same drops, same marks (so the relay cuts super-packets at the same segments), arrivals of
/// the marked ones those of their unmarked neighbours.
#[test]
fn reordering_in_place_marks_the_same_packets_and_delays_none() {
    let cfg = LinkConfig::default()
        .with_bandwidth_bps(0)
        .with_loss(0.02)
        .with_reorder(0.1, 100 * US)
        .with_seed(7);
    let mut delayed = SimLink::new(cfg.clone());
    let mut control = SimLink::new(cfg.clone().with_reorder_in_place(true));
    let (mut fd, mut fc) = (Vec::new(), Vec::new());
    let mut marked = 0;
    for batch in 0..200u64 {
        let now = 50 * US * batch as u32;
        let lens = [1500usize; 45];
        delayed.decide_all(now, Direction::AtoB, lens.iter().copied(), &mut fd);
        control.decide_all(now, Direction::AtoB, lens.iter().copied(), &mut fc);
        let base = now + cfg.delay;
        for (d, c) in fd.iter().zip(&fc) {
            match (*d, *c) {
                (Fate::Dropped, Fate::Dropped) => {}
                (
                    Fate::Deliver {
                        arrival: ad,
                        reordered: rd,
                        ..
                    },
                    Fate::Deliver {
                        arrival: ac,
                        reordered: rc,
                        ..
                    },
                ) => {
                    assert_eq!(rd, rc, "the same packets are drawn");
                    assert_eq!(ac, base, "the control delays nothing");
                    assert_eq!(ad > base, rd, "the reordering link delays the drawn ones");
                    marked += usize::from(rc);
                }
                other => panic!("different fates: {other:?}"),
            }
        }
    }
    assert!(marked > 700, "about 10 % of 9000 marked: {marked}");
    assert_eq!(
        delayed.stats(Direction::AtoB).reordered,
        control.stats(Direction::AtoB).reordered
    );
    assert!(LinkConfig::default()
        .with_reorder(0.1, Duration::ZERO)
        .with_reorder_in_place(true)
        .validate()
        .is_ok());
}
