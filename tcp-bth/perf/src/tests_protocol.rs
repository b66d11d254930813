//! The perf protocol over the simulated pair: the option check at connect time, `-b`,
//! `--duration`, the statistics each side sends the other, `--plain` with its framed control
//! messages.

use super::tests::{cfg, run_sim, run_sim_links, COUNT, SIZE};
use super::*;
use bth_io::sim::LinkConfig;
use std::time::Duration;

fn lossy() -> LinkConfig {
    LinkConfig::default()
        .with_loss(0.01)
        .with_reorder(0.05, Duration::from_micros(200))
        .with_seed(21)
}

/// A client whose options differ is refused: the server names each differing option with
/// both values, the client gets the same words as its error, nothing is sent, and both
/// close (no hang).
#[test]
fn mismatched_options_are_refused_with_both_values_on_both_sides() {
    let mut client = cfg(PerfOp::Send);
    client.size = 4096;
    client.count = 10;
    let (c, s) = run_sim(client, cfg(PerfOp::Send), LinkConfig::default());
    let reason = format!(
        "client asked for --size 4096, this server runs --size {SIZE}; \
         client asked for --iters 10, this server runs --iters {COUNT}"
    );
    assert_eq!(
        s.errors,
        [PerfError::OptionsDiffer {
            reason: reason.clone()
        }]
    );
    assert_eq!(
        c.errors,
        [PerfError::Refused {
            reason: reason.clone()
        }]
    );
    assert_eq!(
        c.errors[0].to_string(),
        format!("the server refused the run: {reason}")
    );
    assert_eq!(c.messages + s.messages, 0);
}

/// The refusal gets through plain-mode runs too (as a frame in the byte stream).
#[test]
fn plain_mode_refuses_mismatched_options_too() {
    let mut server = cfg(PerfOp::Send);
    server.mode.plain = true;
    let mut client = server.clone();
    client.mode.verify = false;
    let (c, s) = run_sim(client, server, LinkConfig::default());
    let reason = "client asked for no --verify, this server runs --verify".to_string();
    assert!(
        s.peer.is_none() && c.peer.is_none(),
        "no statistics after a refusal"
    );
    assert_eq!(
        s.errors,
        [PerfError::OptionsDiffer {
            reason: reason.clone()
        }]
    );
    assert_eq!(c.errors, [PerfError::Refused { reason }]);
    assert_eq!(s.bytes, 0);
}

#[test]
fn plain_mode_checks_options_then_moves_every_byte() {
    let mut p = cfg(PerfOp::Send);
    p.mode.plain = true;
    let (c, s) = run_sim(p.clone(), p, lossy());
    assert!(c.errors.is_empty(), "client {:?}", c.errors);
    assert!(s.errors.is_empty(), "server {:?}", s.errors);
    assert_eq!((c.messages, s.messages, s.verified), (COUNT, COUNT, COUNT));
    assert_eq!(s.bytes, COUNT * u64::from(SIZE));
    // The server's statistics reach the client; the client sends none in plain mode.
    let peer = c.peer.expect("the server's statistics");
    assert_eq!((peer.messages, peer.verified), (COUNT, COUNT));
    assert!(s.peer.is_none());
}

/// The operations `-b` runs both ways (not `sendrecv`, already a round trip).
const BIDIR_OPS: [PerfOp; 5] = [
    PerfOp::Send,
    PerfOp::Write,
    PerfOp::WriteImm,
    PerfOp::Read,
    PerfOp::Mixed,
];

/// With `-b` both sides send and both check what they receive.
#[test]
fn bidirectional_runs_verify_both_directions_through_loss() {
    for op in BIDIR_OPS {
        let mut b = cfg(op);
        b.mode.bidir = true;
        let (c, s, [a_to_b, b_to_a]) = run_sim_links(b.clone(), b, lossy());
        assert!(
            a_to_b.dropped() + b_to_a.dropped() > 0,
            "{op}: nothing lost"
        );
        assert!(c.errors.is_empty(), "{op}: client {:?}", c.errors);
        assert!(s.errors.is_empty(), "{op}: server {:?}", s.errors);
        // Each side's requester sends COUNT; each side verifies what arrives for it (and
        // its own READs).
        for (side, r) in [("client", &c), ("server", &s)] {
            assert_eq!(r.verified, COUNT, "{op}: {side} verified");
            assert_eq!(r.latencies.len() as u64, COUNT, "{op}: {side} latencies");
        }
    }
}

/// With `-b` a row counts both directions, messages and bytes, for every operation: what this
/// side's requester completed and what the peer's requester did here. READs complete only at
/// their requester, so the responder counts the peer's READs from its done message (as it
/// counts plain WRITEs); without that a READ row with `-b` counted one direction. Every byte
/// counted is in the peak's timeline once. Without `-b` the side that answers READs still
/// counts none (its footer says where they are counted).
#[test]
fn bidirectional_rows_count_both_directions_for_every_op() {
    let total = 2 * COUNT;
    for op in BIDIR_OPS {
        for verify in [false, true] {
            let mut b = cfg(op);
            b.mode.bidir = true;
            b.mode.verify = verify;
            let (c, s) = run_sim(b.clone(), b, LinkConfig::default());
            assert!(c.errors.is_empty(), "{op}: client {:?}", c.errors);
            assert!(s.errors.is_empty(), "{op}: server {:?}", s.errors);
            for (side, r) in [("client", &c), ("server", &s)] {
                assert_eq!(
                    (r.messages, r.bytes),
                    (total, total * u64::from(SIZE)),
                    "{op}, verify {verify}: {side}"
                );
                assert_eq!(r.timeline.total(), r.bytes, "{op}: {side}'s timeline");
            }
        }
        // One way: the client counts its own, the server what reached it (no READ).
        let (c, s) = run_sim(cfg(op), cfg(op), LinkConfig::default());
        let served = match op {
            PerfOp::Read => 0,
            PerfOp::Mixed => COUNT - COUNT / 3,
            _ => COUNT,
        };
        assert_eq!((c.messages, s.messages), (COUNT, served), "{op} one way");
        assert_eq!(
            s.timeline.total(),
            s.bytes,
            "{op}: one way, server's timeline"
        );
    }
}

#[test]
fn bidirectional_is_refused_where_it_means_nothing() {
    let mut rr = cfg(PerfOp::SendRecv);
    rr.mode.bidir = true;
    let e = rr.validate().unwrap_err();
    assert!(matches!(e, PerfError::BidirUnsupported { .. }), "{e}");
    let mut plain = cfg(PerfOp::Send);
    plain.mode.bidir = true;
    plain.mode.plain = true;
    assert!(plain
        .validate()
        .unwrap_err()
        .to_string()
        .contains("--plain"));
}

/// `--duration`: the requester posts until the time is up, then finishes; the responder
/// learns the count from the done message and checks it against what arrived.
#[test]
fn duration_mode_runs_by_time_and_both_sides_agree_on_the_count() {
    for op in [PerfOp::Send, PerfOp::Write, PerfOp::SendRecv] {
        let mut d = cfg(op);
        d.duration = Some(Duration::from_millis(200));
        d.size = 4096;
        d.mode.verify = op != PerfOp::Write;
        d.count = 1; // ignored with a duration
        let (c, s) = run_sim(d.clone(), d, LinkConfig::default());
        assert!(c.errors.is_empty(), "{op}: client {:?}", c.errors);
        assert!(s.errors.is_empty(), "{op}: server {:?}", s.errors);
        assert!(c.messages > 10, "{op}: only {} messages", c.messages);
        assert_eq!(c.messages, s.messages, "{op}");
        assert!(
            c.elapsed >= Duration::from_millis(200) && c.elapsed < Duration::from_millis(400),
            "{op}: {:?}",
            c.elapsed
        );
    }
    let mut w = cfg(PerfOp::Write);
    w.duration = Some(Duration::from_secs(1));
    assert_eq!(w.validate(), Err(PerfError::VerifiedWriteNeedsCount));
}

/// Each side sends the other its counters and summary just before its FIN.
#[test]
fn both_sides_get_the_peers_statistics() {
    let (c, s) = run_sim(cfg(PerfOp::WriteImm), cfg(PerfOp::WriteImm), lossy());
    assert!(c.errors.is_empty() && s.errors.is_empty());
    let from_server = c.peer.expect("server's statistics");
    let from_client = s.peer.expect("client's statistics");
    assert_eq!(
        (
            from_server.messages,
            from_server.verified,
            from_server.errors
        ),
        (COUNT, COUNT, 0)
    );
    assert_eq!(from_client.messages, COUNT);
    // The client's counters as it closed: its data segments are all there but the
    // statistics message itself (only that, pure ACKs and the FIN follow).
    assert_eq!(
        from_client.counters.recovery.segments_sent + 1,
        c.counters.recovery.segments_sent
    );
    assert!(
        from_client.counters.recovery.retransmits > 0,
        "{from_client:?}"
    );
    assert!(from_server.counters.acks_sent > 0);
}

/// The hello says which connection of a multi-connection run it is.
#[test]
fn the_hello_carries_the_connection_index() {
    let mut p = cfg(PerfOp::Send);
    p.qps = 4;
    let hello = ctrl::Ctrl::Hello(ctrl::Hello {
        options: check::Options::of(&p),
        qp: 3,
        regions: ctrl::Regions::default(),
    });
    match ctrl::Ctrl::decode(&hello.encode()) {
        Ok(ctrl::Ctrl::Hello(h)) => assert_eq!((h.qp, h.options.qps), (3, 4)),
        other => panic!("{other:?}"),
    }
}
