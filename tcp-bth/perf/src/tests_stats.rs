//! The figures the report derives: latency statistics, the peak bandwidth's timeline, the
//! sum of several connections' reports, the counters' wire form.

use super::*;
use std::time::Duration;

fn us(v: u64) -> Duration {
    Duration::from_micros(v)
}

#[test]
fn latency_statistics_are_perftests_columns() {
    assert_eq!(LatencyStats::of(&[]), None);
    let four: Vec<Duration> = [1, 2, 3, 4].map(us).to_vec();
    let s = LatencyStats::of(&four).unwrap();
    assert_eq!((s.min_us, s.max_us, s.avg_us), (1.0, 4.0, 2.5));
    // Population standard deviation: sqrt(((1.5² + 0.5²) * 2) / 4).
    assert!((s.stdev_us - 1.25f64.sqrt()).abs() < 1e-9, "{}", s.stdev_us);
    // The element at round((n - 1) / 2): the upper middle for an even count.
    assert_eq!(s.typical_us, 3.0);
    let thousand: Vec<Duration> = (1..=1000).map(us).collect();
    let s = LatencyStats::of(&thousand).unwrap();
    let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
    assert!(close(s.typical_us, 501.0), "{}", s.typical_us);
    assert!(close(s.p99_us, 990.0) && close(s.p999_us, 999.0), "{s:?}");
    let one = LatencyStats::of(&[us(7)]).unwrap();
    assert_eq!(
        (one.min_us, one.typical_us, one.p999_us, one.stdev_us),
        (7.0, 7.0, 7.0, 0.0)
    );
}

#[test]
fn the_peak_is_the_best_ten_milliseconds() {
    let ms = Duration::from_millis;
    let mut t = Timeline::default();
    t.start(Duration::ZERO);
    // 1 MB per ms for 20 ms, then 3 MB per ms for 10 ms.
    for i in 0..20 {
        t.record(ms(i), 1_000_000);
    }
    for i in 20..30 {
        t.record(ms(i), 3_000_000);
    }
    let peak = t.peak().unwrap();
    assert!((peak - 3e9).abs() < 1.0, "{peak}");
    // Shorter than the window: no peak (the table shows the average).
    let mut short = Timeline::default();
    short.record(ms(3), 100);
    assert_eq!(short.peak(), None);
}

/// A message's bytes are spread over the time they moved in: a single 10 MB message taking
/// 100 ms peaks at its average rate, not at 10 MB in one window.
#[test]
fn a_spanned_message_is_spread_over_its_time() {
    let ms = Duration::from_millis;
    let mut t = Timeline::default();
    t.start(Duration::ZERO);
    t.record_span(ms(0), ms(100), 10_000_000);
    let peak = t.peak().unwrap();
    assert!((peak - 1e8).abs() / 1e8 < 0.02, "{peak}");
    // The parts add up exactly, even with spans that do not fall on bucket edges.
    let mut odd = Timeline::default();
    odd.start(Duration::ZERO);
    odd.record_span(
        Duration::from_micros(333),
        Duration::from_micros(25_777),
        999_983,
    );
    odd.record_span(ms(5), ms(5), 17);
    let mut all = Timeline::default();
    all.merge(&odd);
    assert_eq!(
        all.total(),
        999_983 + 17,
        "merging keeps every byte as well"
    );
}

#[test]
fn several_connections_sum_into_one_report() {
    let ms = Duration::from_millis;
    let mut a = PerfReport {
        messages: 10,
        bytes: 1000,
        verified: 10,
        elapsed: ms(50),
        latencies: vec![us(5), us(9)],
        ..PerfReport::default()
    };
    a.counters.recovery.retransmits = 2;
    a.counters.recovery.scoreboard_visits = 40;
    a.counters.recovery.reo_wnd_mult = 1;
    a.peer = Some(PeerSummary {
        messages: 10,
        ..PeerSummary::default()
    });
    a.timeline.start(ms(100));
    a.timeline.record(ms(100), 1000);
    let mut b = PerfReport {
        messages: 5,
        bytes: 500,
        elapsed: ms(80),
        latencies: vec![us(1), us(7)],
        errors: vec![PerfError::MessageDiffers { msg: 3 }],
        ..PerfReport::default()
    };
    b.counters.recovery.retransmits = 3;
    b.counters.recovery.scoreboard_visits = 2;
    b.counters.recovery.reo_wnd_mult = 3;
    b.timeline.start(ms(98));
    b.timeline.record(ms(98), 500);
    let s = aggregate(&[a, b]);
    assert_eq!((s.messages, s.bytes, s.verified), (15, 1500, 10));
    assert_eq!(s.elapsed, ms(80));
    assert_eq!(s.latencies, [1, 5, 7, 9].map(us));
    assert_eq!(s.errors.len(), 1);
    assert_eq!(
        (s.counters.recovery.retransmits, s.recovery.retransmits),
        (5, 5)
    );
    // The recovery fields the statistics message does not carry are summed too (levels:
    // the largest).
    assert_eq!(
        (s.recovery.scoreboard_visits, s.recovery.reo_wnd_mult),
        (42, 3)
    );
    assert_eq!(s.peer.map(|p| p.messages), Some(10));
    assert_eq!(s.timeline.total(), 1500);
}

#[test]
fn counters_survive_their_wire_form_and_drops_add_up() {
    let mut c = ConnCounters::default();
    c.recovery.segments_sent = 1;
    c.recovery.tlp_probes = 6;
    c.segments_in = 7;
    c.naks_received = 15;
    c.drops.malformed = 16;
    c.drops.behind_refused_request = 24;
    c.payload_copied = 25;
    c.payload_gathered = 26;
    assert!(!c.lines()[2].contains("overtaken"), "{}", c.lines()[2]);
    c.drops.paws = 9;
    c.paws_overtaken_acks = 8;
    assert_eq!(ConnCounters::from_words(&c.to_words()), c);
    assert!(c.lines()[3].contains("25 bytes copied") && c.lines()[3].contains("26 sent"));
    assert!(
        c.lines()[2].contains("9 PAWS (of them 8 ACKs a later ACK had overtaken"),
        "{}",
        c.lines()[2]
    );
    // A subset of the PAWS drops, not counted again.
    assert_eq!(c.drops.total(), 49);
    // A peer with fewer counters leaves the rest at 0; one with more is cut.
    let words = c.to_words();
    let short = ConnCounters::from_words(&words[..7]);
    assert_eq!((short.segments_in, short.naks_received), (7, 0));
    let mut long = words.clone();
    long.push(99);
    assert_eq!(ConnCounters::from_words(&long), c);
    let mut sum = c;
    sum += c;
    assert_eq!(sum.drops.total(), 98);
    assert_eq!((sum.payload_copied, sum.payload_gathered), (50, 52));
}

/// A run cut short (its time limit, an error) is handed over without a close: its report still
/// has the time its messages took, so its average is not 0 (a row that moved 9 messages read
/// "0.00 MB/s" beside a peak of 0.11).
#[test]
fn a_run_cut_short_reports_the_time_its_messages_took() {
    let ms = Duration::from_millis;
    let mut app = Client::new(PerfConfig::default());
    app.side.start(ms(10));
    app.side.report.messages = 9;
    app.side.report.bytes = 9 * 65536;
    app.side.report.latencies = vec![ms(3), ms(1), ms(2)];
    app.side.mark_data(ms(4_010));
    let r = app.into_report();
    assert_eq!(r.elapsed, ms(4_000));
    assert!(r.msgs_per_sec() > 2.2 && r.msgs_per_sec() < 2.3, "{r:?}");
    assert_eq!(
        r.latencies,
        [ms(1), ms(2), ms(3)],
        "in order, as the statistics need"
    );
}
