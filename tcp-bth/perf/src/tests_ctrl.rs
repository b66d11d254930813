//! The control messages' encoding and the option comparison, without a connection.

use super::check::{compare, refusal, Options};
use super::ctrl::{Ctrl, CtrlError, Hello, Regions, CTRL_MAX, MAGIC, VERSION};
use super::*;
use std::time::Duration;

fn sample_summary() -> PeerSummary {
    let mut s = PeerSummary {
        messages: 5000,
        bytes: 5000 * 65536,
        verified: 4999,
        errors: 1,
        ..PeerSummary::default()
    };
    s.counters.recovery.retransmits = 7;
    s.counters.acks_sent = 1234;
    s.counters.drops.icrc = 3;
    s.counters.drops.behind_refused_request = 9;
    s
}

fn samples() -> Vec<Ctrl> {
    let mut p = PerfConfig {
        op: PerfOp::Mixed,
        size: 4096,
        duration: Some(Duration::from_millis(2500)),
        tx_depth: 32,
        rx_depth: 64,
        mode: RunMode {
            bidir: true,
            verify: true,
            sweep: true,
            ..RunMode::default()
        },
        qps: 2,
        ..PerfConfig::default()
    };
    let regions = Regions {
        write_rkey: 7,
        write_addr: 1 << 40,
        read_rkey: 9,
        read_addr: 12345,
    };
    let mut v = vec![Ctrl::Hello(Hello {
        options: Options::of(&p),
        qp: 1,
        regions,
    })];
    p.duration = None;
    p.count = 77;
    p.mode.lat = true;
    p.mode.plain = true;
    v.push(Ctrl::Hello(Hello {
        options: Options::of(&p),
        qp: 0,
        regions: Regions::default(),
    }));
    v.extend([
        Ctrl::Accept(regions),
        Ctrl::Refuse("client asked for --size 4096, this server runs --size 65536".into()),
        Ctrl::Done(u64::MAX - 5),
        Ctrl::Stats(Box::new(sample_summary())),
    ]);
    v
}

#[test]
fn control_messages_round_trip() {
    for m in samples() {
        assert_eq!(Ctrl::decode(&m.encode()), Ok(m.clone()), "{}", m.what());
        let mut framed = m.frame();
        framed.extend_from_slice(b"data after");
        assert_eq!(Ctrl::unframe(&mut framed), Some(Ok(m.clone())));
        assert_eq!(framed, b"data after", "the frame alone is taken");
    }
}

/// Every truncation of every message, and other garbage, is an error, never a panic; a
/// partial frame waits for more.
#[test]
fn damaged_control_messages_are_errors_not_panics() {
    for m in samples() {
        let b = m.encode();
        for cut in 0..b.len() {
            // A refusal's text may be cut anywhere (it is read as lossy UTF-8).
            if matches!(m, Ctrl::Refuse(_)) && cut >= MAGIC.len() + 2 {
                continue;
            }
            assert!(
                Ctrl::decode(&b[..cut]).is_err(),
                "{} cut at {cut}",
                m.what()
            );
            let mut partial = m.frame();
            partial.truncate(cut.min(partial.len() - 1));
            assert_eq!(Ctrl::unframe(&mut partial), None);
        }
    }
    assert_eq!(Ctrl::decode(b"HTTP/1.1 200"), Err(CtrlError::Magic));
    let mut v = MAGIC.to_vec();
    v.extend([VERSION + 1, b'A']);
    assert_eq!(
        Ctrl::decode(&v),
        Err(CtrlError::Version { got: VERSION + 1 })
    );
    v[MAGIC.len()] = VERSION;
    v[MAGIC.len() + 1] = b'Z';
    assert_eq!(Ctrl::decode(&v), Err(CtrlError::Tag(b'Z')));
    let mut hello = samples()[0].encode();
    hello[MAGIC.len() + 2] = 99;
    assert_eq!(Ctrl::decode(&hello), Err(CtrlError::Op(99)));
    let mut huge = (CTRL_MAX as u32 + 1).to_be_bytes().to_vec();
    huge.resize(CTRL_MAX + 10, 0);
    assert_eq!(
        Ctrl::unframe(&mut huge),
        Some(Err(CtrlError::TooLong { len: CTRL_MAX + 1 }))
    );
}

/// A refusal longer than a receive buffer is cut at a character boundary to fit.
#[test]
fn a_long_refusal_is_cut_to_fit() {
    let long = "é".repeat(CTRL_MAX);
    let b = Ctrl::Refuse(long).encode();
    assert!(b.len() <= CTRL_MAX);
    match Ctrl::decode(&b) {
        Ok(Ctrl::Refuse(r)) => assert!(!r.is_empty() && r.chars().all(|c| c == 'é')),
        other => panic!("{other:?}"),
    }
}

/// A change to a configuration.
type Change = fn(&mut PerfConfig);

/// Every option both sides must share is compared and named as the command line says it.
#[test]
fn every_shared_option_is_compared_and_named() {
    let base = PerfConfig::default();
    let cases: Vec<(Change, &str, &str)> = vec![
        (|c| c.op = PerfOp::Read, "--op read", "--op send"),
        (|c| c.size = 4096, "--size 4096", "--size 65536"),
        (|c| c.mode.sweep = true, "--all", "no --all"),
        (|c| c.count = 10, "--iters 10", "--iters 2000"),
        (
            |c| c.duration = Some(Duration::from_millis(1500)),
            "--duration 1.5",
            "--iters 2000",
        ),
        (|c| c.qps = 2, "--qps 2", "--qps 1"),
        (|c| c.tx_depth = 4, "--tx-depth 4", "--tx-depth 16"),
        (|c| c.rx_depth = 64, "--rx-depth 64", "--rx-depth 16"),
        (
            |c| c.mode.bidir = true,
            "--bidirectional",
            "no --bidirectional",
        ),
        (|c| c.mode.lat = true, "--lat", "no --lat"),
        (|c| c.mode.verify = true, "--verify", "no --verify"),
        (|c| c.mode.plain = true, "--plain", "no --plain"),
    ];
    for (change, client, server) in cases {
        let mut c = base.clone();
        change(&mut c);
        let m = compare(&Options::of(&c), &Options::of(&base));
        assert_eq!(m.len(), 1, "{client}: {m:?}");
        assert_eq!(
            (m[0].client.as_str(), m[0].server.as_str()),
            (client, server)
        );
        assert_eq!(
            m[0].to_string(),
            format!("client asked for {client}, this server runs {server}")
        );
    }
    // Neither the seed nor per-message tracing is part of the contract; the count does not
    // matter in duration mode.
    let mut c = base.clone();
    c.seed = 99;
    c.trace = !c.trace;
    assert_eq!(refusal(&Options::of(&c), &Options::of(&base)), None);
    let (mut a, mut b) = (base.clone(), base);
    a.duration = Some(Duration::from_secs(1));
    b.duration = a.duration;
    a.count = 1;
    assert_eq!(refusal(&Options::of(&a), &Options::of(&b)), None);
}
