//! The perf apps over the simulated pair (`bth_io::sim::Pair`): the same `Client` and
//! `Server` that `bth-perf` and the TUN tests run, on a virtual clock.

use super::*;
use bth_io::sim::{pair_configs, Direction, LinkConfig, LinkStats, Pair};
use bth_placement::WcStatus;
use std::time::Duration;
use tcp_bth::{Completion, WcOp};

pub(super) const SIZE: u32 = 64 * 1024;
pub(super) const COUNT: u64 = 48;

pub(crate) fn cfg(op: PerfOp) -> PerfConfig {
    PerfConfig {
        op,
        size: SIZE,
        count: COUNT,
        tx_depth: 8,
        rx_depth: 8,
        mode: RunMode::verified(),
        seed: 11,
        ..PerfConfig::default()
    }
}

/// Client in A, server in B, each stepped once per simulated instant until both have closed.
pub(crate) fn run_sim(
    client: PerfConfig,
    server: PerfConfig,
    link: LinkConfig,
) -> (PerfReport, PerfReport) {
    let (c, s, _) = run_sim_stats(client, server, link);
    (c, s)
}

/// [`run_sim`], also returning what the link did to the client's packets (A to B).
fn run_sim_stats(
    client: PerfConfig,
    server: PerfConfig,
    link: LinkConfig,
) -> (PerfReport, PerfReport, LinkStats) {
    let (c, s, [a_to_b, _]) = run_sim_links(client, server, link);
    (c, s, a_to_b)
}

/// [`run_sim`], also returning what the link did in each direction: A to B (the client's
/// packets), then B to A (the server's).
pub(super) fn run_sim_links(
    client: PerfConfig,
    server: PerfConfig,
    link: LinkConfig,
) -> (PerfReport, PerfReport, [LinkStats; 2]) {
    let (mut a, mut b) = pair_configs(7);
    // Each side offers tcp_bth unless it runs --plain, as bth-perf opens its connections.
    a.bth = !client.mode.plain;
    b.bth = !server.mode.plain;
    let mut p = Pair::new(a, b, link);
    let mut cl = Client::new(client);
    let mut sv = Server::new(server);
    let (mut c_done, mut s_done) = (false, false);
    let deadline = p.now + Duration::from_secs(120);
    let mut idle = 0;
    while !(c_done && s_done) {
        let now = p.now;
        if !c_done {
            c_done = cl.step(&mut p.a, now);
        }
        if let (false, Some(b)) = (s_done, p.b.as_mut()) {
            s_done = sv.step(b, now);
        }
        // Nothing more will happen: let the apps look once more (they may post), then stop.
        if p.step(deadline) {
            idle = 0;
        } else {
            idle += 1;
            if idle > 2 {
                break;
            }
        }
    }
    assert!(c_done && s_done, "run did not finish by {:?}", p.now);
    // As the TUN drivers' owners do: the final counters, after the apps' last turns.
    cl.report_mut().record_recovery(&p.a);
    if let Some(b) = p.b.as_ref() {
        sv.report_mut().record_recovery(b);
    }
    let links = [p.link.stats(Direction::AtoB), p.link.stats(Direction::BtoA)];
    (cl.into_report(), sv.into_report(), links)
}

fn lossy_link() -> LinkConfig {
    LinkConfig::default()
        .with_loss(0.01)
        .with_reorder(0.05, Duration::from_micros(200))
        .with_duplicate(0.005)
        .with_seed(5)
}

#[test]
fn op_names_parse_back_and_unknown_names_list_the_valid_ones() {
    for op in PerfOp::ALL {
        assert_eq!(op.to_string().parse::<PerfOp>(), Ok(op));
        assert_eq!(op.name().to_uppercase().parse::<PerfOp>(), Ok(op));
    }
    assert_eq!("rr".parse::<PerfOp>(), Ok(PerfOp::SendRecv));
    assert_eq!("write_imm".parse::<PerfOp>(), Ok(PerfOp::WriteImm));
    let e = "writes".parse::<PerfOp>().unwrap_err();
    assert_eq!(e.input, "writes");
    assert_eq!(
        e.to_string(),
        "writes: expected send, write, write-imm, read, mixed or sendrecv"
    );
}

#[test]
fn every_op_verifies_every_message_exactly_once_in_the_simulator() {
    for op in PerfOp::ALL {
        let (c, s) = run_sim(cfg(op), cfg(op), LinkConfig::default());
        assert!(c.errors.is_empty(), "{op}: client errors {:?}", c.errors);
        assert!(s.errors.is_empty(), "{op}: server errors {:?}", s.errors);
        assert_eq!(c.messages, COUNT, "{op}");
        assert_eq!(c.latencies.len() as u64, COUNT, "{op}");
        assert_eq!(
            c.verified + s.verified,
            COUNT,
            "{op}: each message verified once"
        );
        // Which side checks what: READs at the client, everything else at the server.
        let at_client = match op {
            PerfOp::Read => COUNT,
            PerfOp::Mixed => COUNT / 3,
            _ => 0,
        };
        assert_eq!(c.verified, at_client, "{op}");
    }
}

#[test]
fn plain_write_lands_every_message_at_its_own_offset_through_loss_and_reordering() {
    let (c, s, link) = run_sim_stats(cfg(PerfOp::Write), cfg(PerfOp::Write), lossy_link());
    assert!(
        link.dropped() > 0 && link.reordered > 0,
        "the link dropped or reordered none of the WRITEs: {link:?}"
    );
    println!("link A to B: {link:?}; client {:?}", c.elapsed);
    assert!(c.errors.is_empty(), "client errors {:?}", c.errors);
    assert!(s.errors.is_empty(), "server errors {:?}", s.errors);
    assert_eq!((c.messages, c.bytes), (COUNT, COUNT * u64::from(SIZE)));
    assert_eq!(c.verified, 0, "a plain WRITE is checked at the server only");
    assert_eq!(s.verified, COUNT);
    assert_eq!((s.messages, s.bytes), (COUNT, COUNT * u64::from(SIZE)));
    assert!(
        s.arrived.is_empty(),
        "a plain WRITE completes nothing at the server"
    );
}

#[test]
fn plain_write_without_verify_counts_the_messages_from_the_done_message() {
    let mut c = cfg(PerfOp::Write);
    c.mode.verify = false;
    let (cr, sr) = run_sim(c.clone(), c, LinkConfig::default());
    assert!(cr.errors.is_empty() && sr.errors.is_empty());
    assert_eq!((cr.messages, sr.messages), (COUNT, COUNT));
    assert_eq!(sr.bytes, COUNT * u64::from(SIZE));
    assert_eq!(cr.verified + sr.verified, 0);
}

#[test]
fn plain_write_check_sees_bytes_that_differ() {
    // The client writes another pattern than the server expects: every message must fail.
    let mut client = cfg(PerfOp::Write);
    client.seed += 1;
    let (c, s) = run_sim(client, cfg(PerfOp::Write), LinkConfig::default());
    assert!(c.errors.is_empty(), "client errors {:?}", c.errors);
    assert_eq!(s.verified, 0);
    let want: Vec<PerfError> = (0..COUNT)
        .map(|msg| PerfError::MessageDiffers { msg })
        .collect();
    assert_eq!(s.errors, want);
}

/// The done message's count is checked against the run's and against what arrived.
#[test]
fn the_done_message_count_is_checked() {
    for (op, sent, want) in [
        (
            PerfOp::Write,
            COUNT - 1,
            PerfError::DoneCount {
                got: COUNT - 1,
                want: COUNT,
            },
        ),
        (
            PerfOp::Send,
            COUNT,
            PerfError::ArrivalsDiffer {
                sent: COUNT,
                expected: COUNT,
                arrived: 0,
            },
        ),
    ] {
        let mut p = Pair::new(pair_configs(3).0, pair_configs(3).1, LinkConfig::default());
        assert!(p.establish(Duration::from_secs(5)));
        let (mut r, _) = responder::Responder::set_up(&mut p.a, &cfg(op)).expect("set up");
        let mut report = PerfReport::default();
        r.on_done(&p.a, sent, Duration::ZERO, &mut report);
        assert_eq!(report.errors, [want], "{op}");
        assert!(r.finished());
    }
}

#[test]
fn a_verified_plain_write_run_too_big_for_its_own_offsets_is_refused() {
    let mut c = cfg(PerfOp::Write);
    c.count = MAX_VERIFIED_WRITE_REGION / u64::from(SIZE) + 1;
    let e = c.validate().unwrap_err();
    assert!(matches!(e, PerfError::WriteRegionTooLarge { .. }), "{e}");
    // Without verify the WRITEs cycle through `depth` slots: any count is fine.
    c.mode.verify = false;
    assert_eq!(c.validate(), Ok(()));
    c.op = PerfOp::WriteImm;
    c.mode.verify = true;
    assert_eq!(c.validate(), Ok(()));
}

/// The client's last ACK (for the server's FIN) is lost, and the client's driver stops once
/// the client app says the run is over. The client lingers in TIME-WAIT long enough to answer
/// the server's retransmitted FIN, so the server closes cleanly. It used to stop at once: the
/// server sat in LAST-ACK retransmitting until `TimedOut`, an error on a run that had moved
/// every byte (seen once in eight relay runs over TUN). Every segment the client sends between
/// the server's FIN and the server's first retransmission is lost (the client may send more
/// than one: a credit update for the buffer the server's statistics took acknowledges the FIN
/// too).
#[test]
fn a_lost_last_ack_is_answered_from_time_wait() {
    lost_last_ack(None);
}

/// The same with both ends in one process ([`ServersClosed`]): the server has not closed (it
/// waits in LAST-ACK for the lost ACK), so the client still lingers and answers.
#[test]
fn a_lost_last_ack_is_answered_from_time_wait_with_both_ends_in_process() {
    lost_last_ack(Some(ServersClosed::new(1)));
}

fn lost_last_ack(in_process: Option<ServersClosed>) {
    use std::cell::Cell;
    use tcp_bth::pair::BackToBack;
    use tcp_bth::wire::TcpRepr;
    let (a, b) = pair_configs(7);
    let mut w = BackToBack::established(a, b, Duration::from_millis(1));
    let mut cl = Client::new(PerfConfig {
        count: 8,
        ..cfg(PerfOp::Send)
    });
    let mut sv = Server::new(PerfConfig {
        count: 8,
        ..cfg(PerfOp::Send)
    });
    if let Some(s) = in_process {
        cl = cl.in_process(s.clone());
        sv = sv.in_process(s);
    }
    let client_done = Cell::new(false);
    // 0: before the server's FIN; 1: the FIN seen, the client's segments lost; 2: the server
    // has sent again (its retransmission).
    let (phase, dropped) = (Cell::new(0), Cell::new(0));
    let mut filter = |dir: Direction, _: Duration, p: Vec<u8>| {
        let seg = TcpRepr::parse(&p, None).ok()?;
        match dir {
            // The client's driver has stopped: nothing reaches it any more.
            Direction::BtoA if client_done.get() => return None,
            Direction::BtoA if phase.get() == 0 && seg.flags.fin() => phase.set(1),
            Direction::BtoA if phase.get() == 1 && dropped.get() > 0 => phase.set(2),
            Direction::AtoB if phase.get() == 1 => {
                dropped.set(dropped.get() + 1);
                return None;
            }
            _ => {}
        }
        Some(p)
    };
    let (mut s_done, mut idle) = (false, 0);
    let limit = w.now + Duration::from_secs(600);
    while !(s_done && client_done.get()) && w.now < limit && idle < 3 {
        let now = w.now;
        if !client_done.get() {
            client_done.set(cl.step(&mut w.a, now));
        }
        s_done = sv.step(&mut w.b, now);
        // Nothing pending: the apps get another look (they may post or close) before we stop.
        idle = if w.step(&mut filter) { 0 } else { idle + 1 };
    }
    assert!(dropped.get() >= 1, "the last ACK was dropped");
    assert_eq!(phase.get(), 2, "the server sent again");
    assert!(client_done.get() && s_done);
    assert!(cl.report().errors.is_empty(), "{:?}", cl.report().errors);
    assert!(sv.report().errors.is_empty(), "{:?}", sv.report().errors);
    assert_eq!(w.b.state(), tcp_bth::State::Closed);
    assert!(w.b.error().is_none(), "{:?}", w.b.error());
}

/// With both ends in one process, the client stops lingering in TIME-WAIT as soon as the
/// server has closed, not three RTOs (600 ms at the minimum RTO) after; alone, it lingers.
#[test]
fn an_in_process_client_stops_lingering_once_its_server_has_closed() {
    use tcp_bth::pair::BackToBack;
    let linger = |in_process: bool| -> Duration {
        let (a, b) = pair_configs(7);
        let mut w = BackToBack::established(a, b, Duration::from_millis(1));
        let run = PerfConfig {
            count: 8,
            ..cfg(PerfOp::Send)
        };
        let (mut cl, mut sv) = (Client::new(run.clone()), Server::new(run));
        if in_process {
            let s = ServersClosed::new(1);
            cl = cl.in_process(s.clone());
            sv = sv.in_process(s);
        }
        let (mut c_done, mut s_done, mut server_closed_at) = (false, false, None);
        let limit = w.now + Duration::from_secs(60);
        while !c_done && w.now < limit {
            let now = w.now;
            if !s_done {
                s_done = sv.step(&mut w.b, now);
                if s_done {
                    server_closed_at = Some(now);
                }
            }
            c_done = cl.step(&mut w.a, now);
            if !c_done {
                // The apps look at least every millisecond, as a driver's idle wait lets them
                // (the wire alone would jump to the next timer: TIME-WAIT's, a minute on).
                w.step(&mut |_, _, p| Some(p));
                w.now = w.now.min(now + Duration::from_millis(1));
            }
        }
        assert!(c_done && s_done, "client {c_done}, server {s_done}");
        assert_eq!(
            w.a.state(),
            tcp_bth::State::TimeWait,
            "the client closed first"
        );
        assert_eq!(w.b.state(), tcp_bth::State::Closed);
        w.now - server_closed_at.expect("the server closed")
    };
    let (together, alone) = (linger(true), linger(false));
    assert!(
        together <= Duration::from_millis(2),
        "in process: {together:?}"
    );
    assert!(alone >= Duration::from_millis(500), "alone: {alone:?}");
}

/// Zero-length SEND and WRITE with immediate (`size: 0`), through loss and reordering: every
/// message arrives, in order, with its immediate and length 0, and is counted as verified.
#[test]
fn zero_length_send_and_write_imm_are_verified_through_loss_and_reordering() {
    const N: u64 = 2000;
    for op in [PerfOp::Send, PerfOp::WriteImm] {
        let mut c = cfg(op);
        c.size = 0;
        c.count = N;
        c.tx_depth = 16;
        c.rx_depth = 16;
        let (cr, sr, link) = run_sim_stats(c.clone(), c, lossy_link());
        assert!(link.dropped() > 0 && link.reordered > 0, "{op}: {link:?}");
        assert!(cr.errors.is_empty(), "{op}: client errors {:?}", cr.errors);
        assert!(sr.errors.is_empty(), "{op}: server errors {:?}", sr.errors);
        assert_eq!((cr.messages, cr.bytes), (N, 0), "{op}");
        assert_eq!((sr.messages, sr.bytes, sr.verified), (N, 0, N), "{op}");
        let order: Vec<u64> = sr.arrived.iter().map(|a| a.0).collect();
        assert_eq!(order, (0..N).collect::<Vec<_>>(), "{op}");
    }
}

#[test]
fn size_zero_is_refused_for_operations_that_move_bytes() {
    for op in PerfOp::ALL {
        let mut c = cfg(op);
        c.size = 0;
        match op {
            PerfOp::Send | PerfOp::WriteImm => assert_eq!(c.validate(), Ok(()), "{op}"),
            _ => {
                let e = c.validate().unwrap_err();
                assert_eq!(e, PerfError::ZeroSize { op }, "{op}");
                assert!(e.to_string().contains("send and write-imm only"), "{e}");
            }
        }
    }
    // Both apps refuse the run at set-up, so neither posts anything.
    let mut c = cfg(PerfOp::Read);
    c.size = 0;
    let (cr, sr) = run_sim(c.clone(), c, LinkConfig::default());
    let zero = PerfError::ZeroSize { op: PerfOp::Read };
    assert_eq!(cr.errors.first(), Some(&zero), "{:?}", cr.errors);
    assert_eq!(sr.errors.first(), Some(&zero), "{:?}", sr.errors);
    assert_eq!(cr.messages + sr.messages, 0);
}

/// `verify` checks each message's immediate (its index, in order within its class) and length.
#[test]
fn verify_checks_immediates_and_lengths() {
    let mut c = cfg(PerfOp::Mixed);
    c.size = 0;
    let mut p = Pair::new(pair_configs(1).0, pair_configs(1).1, LinkConfig::default());
    assert!(p.establish(Duration::from_secs(5)));
    let (mut s, _) = responder::Responder::set_up(&mut p.a, &c).expect("set up");
    let mut report = PerfReport::default();
    let recv = |imm: u32, byte_len: u32| Completion {
        wr_id: 0,
        class: tcp_bth::wire::MsgClass::Send,
        msn: 0,
        op: WcOp::Recv,
        byte_len,
        imm: Some(imm),
        status: WcStatus::Success,
        buf: Some(Vec::new()),
    };
    // Mixed: SENDs are messages 0, 3, 6, …
    for (imm, len) in [(0, 0), (3, 0), (9, 0), (9, 4)] {
        s.on_data(&p.a, &recv(imm, len), Duration::ZERO, &mut report);
    }
    assert_eq!(report.verified, 2);
    assert_eq!(
        report.errors,
        [
            PerfError::UnexpectedImmediate {
                got: Some(9),
                want: 6
            },
            PerfError::LengthDiffers {
                msg: 9,
                got: 4,
                want: 0
            },
        ]
    );
}

/// In an RDMA READ the responder, the server, sends the data: over a lossy link its report
/// carries the retransmissions, while the client's shows what the client sent (requests and
/// ACKs). `bth-perf` used to print the client's counters only, and a READ run reported 0.
#[test]
fn a_lossy_read_run_reports_the_servers_retransmissions() {
    let (c, s, [a_to_b, b_to_a]) =
        run_sim_links(cfg(PerfOp::Read), cfg(PerfOp::Read), lossy_link());
    assert!(
        b_to_a.dropped() > 0,
        "no READ response was lost: {b_to_a:?}"
    );
    assert!(c.errors.is_empty(), "client errors {:?}", c.errors);
    assert!(s.errors.is_empty(), "server errors {:?}", s.errors);
    assert_eq!(c.verified, COUNT, "every READ checked byte for byte");
    let (cr, sr) = (c.recovery, s.recovery);
    println!("client: {cr}\nserver: {sr}\nA to B {a_to_b:?}\nB to A {b_to_a:?}");
    assert!(sr.retransmits > 0, "server: {sr}");
    // The data is the server's: at least one segment per 64 KiB response's MSS-sized piece.
    assert!(
        sr.segments_sent > cr.segments_sent,
        "client {cr}; server {sr}"
    );
    assert!(
        sr.rack_losses + sr.rto_losses + sr.tlp_probes > 0,
        "some detector found the losses: {sr}"
    );
    assert!(sr.spurious_retransmits <= sr.retransmits);
    assert!(sr
        .to_string()
        .contains(&format!("{} retransmitted", sr.retransmits)));
}

#[test]
fn the_first_verified_payloads_are_made_ahead_and_only_for_messages_that_carry_data() {
    // Mixed: message 2 of every three is a READ, which carries no payload from here.
    let c = PerfConfig {
        count: 5,
        ..cfg(PerfOp::Mixed)
    };
    let ahead = requester::Requester::prepare(&c);
    let idx: Vec<u64> = ahead.iter().map(|(i, _)| *i).collect();
    assert_eq!(idx, [0, 1, 3, 4], "depth 8 > count 5; READs (2) left out");
    for (i, b) in &ahead {
        assert_eq!(&b[..], &payload(&c, *i)[..], "message {i}");
    }
    // Capped by the depth, and by time-bound runs' depth alone.
    let deep = PerfConfig {
        count: 100,
        ..cfg(PerfOp::Send)
    };
    assert_eq!(requester::Requester::prepare(&deep).len(), 8);
    let timed = PerfConfig {
        count: 1,
        duration: Some(Duration::from_secs(1)),
        ..cfg(PerfOp::Send)
    };
    assert_eq!(requester::Requester::prepare(&timed).len(), 8);
    // Nothing without --verify: every message shares one buffer of zeros.
    let plain = PerfConfig {
        mode: RunMode::default(),
        ..cfg(PerfOp::Send)
    };
    assert!(requester::Requester::prepare(&plain).is_empty());
}
