//! Deterministic scenarios for the TCP state machine: handshakes with and without tcp_bth on
//! either side, simultaneous open, FIN in every order, RST handling, TIME-WAIT, zero window, RTO
//! backoff.

use bth_io::sim::{LinkConfig, SimLink};
use bth_tests::*;
use std::time::Duration;
use tcp_bth::wire::{TcpFlags, TcpRepr};
use tcp_bth::{CallError, Connection, ConnectionError, Mode, State};

const SEC: Duration = Duration::from_secs(1);

#[test]
fn both_speak_bth() {
    let (a, b) = configs(1, |_, _| {});
    let mut p = established(a, b, quiet_link());
    assert!(matches!(p.a.mode(), Mode::Bth { .. }));
    assert!(matches!(p.b().mode(), Mode::Bth { .. }));
}

fn plain_transfer(a_bth: bool, b_bth: bool) {
    let (a, b) = configs(2, |a, b| {
        a.bth = a_bth;
        b.bth = b_bth;
    });
    let mut p = established(a, b, quiet_link());
    assert_eq!(p.a.mode(), Mode::Plain);
    assert_eq!(p.b().mode(), Mode::Plain);
    // BTH verbs are refused in a plain connection, with a clear error.
    let refused = p.a.post_recv(1, vec![7; 8]).unwrap_err();
    assert_eq!(refused.kind, CallError::NotBth);
    assert_eq!(refused.buf, vec![7; 8], "the buffer comes back");
    let to_b = pattern(1, 300_000);
    let to_a = pattern(2, 100_000);
    p.a.send_bytes(&to_b).unwrap();
    p.b().send_bytes(&to_a).unwrap();
    let (mut got_b, mut got_a) = (Vec::new(), Vec::new());
    let done = p.run_until(10 * SEC, |p| {
        drain_bytes(p.b(), &mut got_b);
        drain_bytes(&mut p.a, &mut got_a);
        got_b.len() == to_b.len() && got_a.len() == to_a.len()
    });
    assert!(done, "transfer stalled: {} / {}", got_b.len(), got_a.len());
    assert_eq!(got_b, to_b);
    assert_eq!(got_a, to_a);
}

#[test]
fn peer_without_bth_falls_back_to_plain_tcp() {
    plain_transfer(true, false);
}

#[test]
fn we_without_bth_and_peer_with_bth_is_plain() {
    plain_transfer(false, true);
}

#[test]
fn neither_side_bth_is_plain() {
    plain_transfer(false, false);
}

#[test]
fn simultaneous_open() {
    let (a_cfg, mut b_cfg) = configs(3, |_, _| {});
    b_cfg.remote_port = a_cfg.local_port;
    let now = Duration::from_millis(1);
    let a = Connection::connect(a_cfg, now);
    let b = Connection::connect(b_cfg, now);
    let mut w = BackToBack::new(a, b, now);
    let ok = w.run(
        SEC,
        |_, _, p| Some(p),
        |w| w.a.state() == State::Established && w.b.state() == State::Established,
    );
    assert!(ok, "A {:?} B {:?}", w.a.state(), w.b.state());
    assert!(matches!(w.a.mode(), Mode::Bth { .. }));
}

fn close_both(first_a: bool, simultaneous: bool) -> (State, State) {
    let (a, b) = configs(4, |a, b| {
        a.time_wait = Duration::from_millis(100);
        b.time_wait = Duration::from_millis(100);
    });
    let mut p = established(a, b, quiet_link());
    if simultaneous {
        p.a.close();
        p.b().close();
    } else if first_a {
        p.a.close();
    } else {
        p.b().close();
    }
    // The other side closes once it has seen the FIN (CLOSE-WAIT).
    p.run_until(SEC, |p| {
        if p.a.state() == State::CloseWait {
            p.a.close();
        }
        if p.b().state() == State::CloseWait {
            p.b().close();
        }
        matches!(p.a.state(), State::TimeWait | State::Closed)
            && matches!(p.b().state(), State::TimeWait | State::Closed)
    });
    (p.a.state(), p.b().state())
}

#[test]
fn active_close_by_a_ends_in_time_wait_at_a() {
    assert_eq!(close_both(true, false), (State::TimeWait, State::Closed));
}

#[test]
fn active_close_by_b_ends_in_time_wait_at_b() {
    assert_eq!(close_both(false, false), (State::Closed, State::TimeWait));
}

#[test]
fn simultaneous_close_ends_in_time_wait_on_both() {
    assert_eq!(close_both(false, true), (State::TimeWait, State::TimeWait));
}

#[test]
fn time_wait_lasts_its_period_then_closes() {
    let (a, b) = configs(5, |a, _| a.time_wait = Duration::from_millis(200));
    let mut p = established(a, b, quiet_link());
    p.a.close();
    assert!(p.run_until(SEC, |p| {
        if p.b().state() == State::CloseWait {
            p.b().close();
        }
        p.a.state() == State::TimeWait
    }));
    let entered = p.now;
    assert!(p.run_until(SEC, |p| p.a.state() == State::Closed));
    let stayed = p.now - entered;
    assert!(
        stayed >= Duration::from_millis(199) && stayed <= Duration::from_millis(201),
        "TIME-WAIT lasted {stayed:?}"
    );
}

/// A segment from A to B with the given flags at `seq` (checksummed for B).
fn forged(p: &mut bth_io::sim::Pair, flags: TcpFlags, seq: u32) -> Vec<u8> {
    let (a_ip, _) = (bth_io::sim::pair_configs(0).0.ip, ());
    let (_, _, ack) = p.a.seq_state();
    TcpRepr {
        src_port: bth_io::sim::pair::A_PORT,
        dst_port: bth_io::sim::pair::B_PORT,
        seq,
        ack,
        flags,
        window: 1000,
        urgent: 0,
        options: Default::default(),
        payload: &[],
    }
    .to_vec(a_ip)
    .unwrap()
}

#[test]
fn rst_at_exact_sequence_resets() {
    let (a, b) = configs(6, |_, _| {});
    let mut p = established(a, b, quiet_link());
    let (_, nxt, _) = p.a.seq_state();
    let rst = forged(&mut p, TcpFlags::RST, nxt);
    let now = p.now;
    p.b().handle_segment(now, &rst);
    assert_eq!(p.b().state(), State::Closed);
    assert_eq!(p.b().error(), Some(ConnectionError::Reset));
}

#[test]
fn rst_in_window_but_not_exact_gets_a_challenge_ack() {
    let (a, b) = configs(7, |_, _| {});
    let mut p = established(a, b, quiet_link());
    let (_, nxt, _) = p.a.seq_state();
    let rst = forged(&mut p, TcpFlags::RST, nxt.wrapping_add(1000));
    let now = p.now;
    p.b().handle_segment(now, &rst);
    assert_eq!(p.b().state(), State::Established);
    assert_eq!(p.b().stats().challenge_acks, 1);
    // Out of window: ignored without an answer.
    let far = forged(&mut p, TcpFlags::RST, nxt.wrapping_add(1 << 30));
    p.b().handle_segment(now, &far);
    assert_eq!(p.b().state(), State::Established);
    assert_eq!(p.b().stats().challenge_acks, 1);
}

#[test]
fn syn_on_established_connection_gets_a_challenge_ack() {
    // Plain TCP: on a BTH connection a segment without the option is dropped before this check.
    let (a, b) = configs(8, |a, b| {
        a.bth = false;
        b.bth = false;
    });
    let mut p = established(a, b, quiet_link());
    let (_, nxt, _) = p.a.seq_state();
    let syn = forged(&mut p, TcpFlags::SYN, nxt);
    let now = p.now;
    p.b().handle_segment(now, &syn);
    assert_eq!(p.b().state(), State::Established);
    assert_eq!(p.b().stats().challenge_acks, 1);
}

#[test]
fn abort_sends_rst_and_peer_sees_reset() {
    let (a, b) = configs(9, |_, _| {});
    let mut p = established(a, b, quiet_link());
    p.a.abort();
    assert!(p.run_until(SEC, |p| p.b().state() == State::Closed));
    assert_eq!(p.b().error(), Some(ConnectionError::Reset));
}

#[test]
fn zero_window_stalls_the_sender_and_reading_resumes_it() {
    let window = 64 * 1024;
    let (a, b) = configs(10, |a, b| {
        a.bth = false;
        b.bth = false;
        b.recv_window = window;
        b.window_scale = 0;
    });
    let mut p = established(a, b, quiet_link());
    let data = pattern(3, 1 << 20);
    p.a.send_bytes(&data).unwrap();
    // B does not read: the window closes and the sender stops with data queued.
    p.run_until(5 * SEC, |_| false);
    assert_eq!(p.b().readable_bytes(), window as usize);
    assert_eq!(p.a.peer_window(), 0);
    assert!(p.a.send_backlog() > 0);
    let probes_before = p.a.stats().segments_out;
    p.run_until(5 * SEC, |_| false);
    assert!(
        p.a.stats().segments_out > probes_before,
        "no zero-window probe in 5 s"
    );
    // Reading opens the window; everything arrives intact.
    let mut got = Vec::new();
    let done = p.run_until(30 * SEC, |p| {
        drain_bytes(p.b(), &mut got);
        got.len() == data.len()
    });
    assert!(done, "got {} of {}", got.len(), data.len());
    assert_eq!(got, data);
}

#[test]
fn rto_backs_off_exponentially_then_gives_up() {
    let (a, b) = configs(11, |a, _| a.max_retries = 5);
    let mut p = established(a, b, quiet_link());
    p.b().post_recv(1, vec![0; 4096]).unwrap();
    p.run_until(SEC, |_| false);
    // Cut the link, then send.
    p.link = SimLink::new(LinkConfig::default().with_loss(1.0));
    p.a.post_send(bth_framer::WorkRequest {
        wr_id: 1,
        op: bth_framer::WrOp::Send { imm: None },
        sg_list: vec![bytes::Bytes::from(vec![7u8; 1000])],
    })
    .unwrap();
    let mut sends = Vec::new();
    let mut last = p.a.stats().segments_out;
    p.run_until(600 * SEC, |p| {
        let n = p.a.stats().segments_out;
        if n > last {
            sends.push(p.now);
            last = n;
        }
        p.a.state() == State::Closed
    });
    assert_eq!(
        p.a.error(),
        Some(ConnectionError::TimedOut {
            retries: 5,
            icmp: None
        })
    );
    // The RST sent on giving up leaves at the same instant as the last timeout: not a gap.
    let gaps: Vec<Duration> = sends
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|g| !g.is_zero())
        .collect();
    assert!(gaps.len() >= 4, "sends at {sends:?}");
    // After the first RTO each gap doubles (RFC 6298 §5.5).
    let tail = &gaps[gaps.len() - 4..];
    for w in tail.windows(2) {
        let ratio = w[1].as_secs_f64() / w[0].as_secs_f64();
        assert!((1.9..=2.1).contains(&ratio), "gaps {gaps:?}");
    }
}

#[test]
fn paws_drops_a_segment_with_an_old_timestamp() {
    // Plain TCP with the RFC 7323 timestamp option on both sides.
    let (a, b) = configs(12, |a, b| {
        a.bth = false;
        b.bth = false;
    });
    let mut p = established(a, b, quiet_link());
    p.a.send_bytes(b"hello").unwrap();
    assert!(p.run_until(SEC, |p| p.b().readable_bytes() == 5));
    let (_, nxt, ack) = p.a.seq_state();
    let a_ip = bth_io::sim::pair_configs(0).0.ip;
    let seg = |tsval: u32| {
        let options = tcp_bth::wire::TcpOptions {
            timestamps: Some(tcp_bth::wire::Timestamps { tsval, tsecr: 0 }),
            ..Default::default()
        };
        TcpRepr {
            src_port: bth_io::sim::pair::A_PORT,
            dst_port: bth_io::sim::pair::B_PORT,
            seq: nxt,
            ack,
            flags: TcpFlags::ACK | TcpFlags::PSH,
            window: 1000,
            urgent: 0,
            options,
            payload: b"world",
        }
        .to_vec(a_ip)
        .unwrap()
    };
    let now = p.now;
    // A TSval 2^20 ticks (about a second) before A's clock is older than anything A sent
    // after the handshake: dropped, data not taken.
    let fresh = p.a.tsval_at(now);
    p.b().handle_segment(now, &seg(fresh.wrapping_sub(1 << 20)));
    assert_eq!(p.b().stats().paws_drops, 1);
    assert_eq!(p.b().readable_bytes(), 5);
    // The same segment with a current timestamp is accepted.
    p.b().handle_segment(now, &seg(fresh));
    assert_eq!(p.b().readable_bytes(), 10);
}
