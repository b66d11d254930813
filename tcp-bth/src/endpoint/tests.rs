//! Endpoints joined back to back in memory (every packet delivered at once, time advanced to
//! the next deadline): routing, accept, cookies, RSTs and bad input, packet by packet.

use super::*;
use crate::wire::TcpFlags;
use bth_framer::{WorkRequest, WrOp};
use bytes::Bytes;

const A: [u8; 4] = [10, 1, 0, 1];
const B: [u8; 4] = [10, 1, 0, 2];
const PORT: u16 = 4791;
const SEC: Duration = Duration::from_secs(1);

fn key(n: u8) -> IsnKey {
    IsnKey([n; 16])
}

pub(super) fn endpoint(n: u8, f: impl FnOnce(&mut EndpointConfig)) -> Endpoint {
    let mut cfg = EndpointConfig {
        key: key(n),
        ..EndpointConfig::default()
    };
    f(&mut cfg);
    Endpoint::new(cfg)
}

pub(super) fn server() -> Endpoint {
    let mut s = endpoint(2, |_| {});
    s.listen(PORT, conn_cfg(IpPair::V4 { src: B, dst: A }, 0))
        .expect("listen");
    s
}

pub(super) fn conn_cfg(ip: IpPair, remote_port: u16) -> Config {
    Config {
        ip,
        remote_port,
        isn_key: key(9),
        ..Config::default()
    }
}

fn client_cfg() -> Config {
    conn_cfg(IpPair::V4 { src: A, dst: B }, PORT)
}

/// Move packets both ways until neither endpoint sends; `drop` filters what crosses.
fn flush(
    now: Duration,
    a: &mut Endpoint,
    b: &mut Endpoint,
    mut keep: impl FnMut(&[u8]) -> bool,
) -> usize {
    let mut buf = Vec::new();
    let mut moved = 0;
    loop {
        let mut any = false;
        while a.poll_transmit(now, &mut buf).is_some() {
            any = true;
            moved += 1;
            if keep(&buf) {
                b.handle(now, &buf);
            }
        }
        while b.poll_transmit(now, &mut buf).is_some() {
            any = true;
            moved += 1;
            if keep(&buf) {
                a.handle(now, &buf);
            }
        }
        if !any {
            return moved;
        }
    }
}

/// Run until `done` or `limit`, jumping time to the next deadline.
pub(super) fn run(
    now: &mut Duration,
    limit: Duration,
    a: &mut Endpoint,
    b: &mut Endpoint,
    mut done: impl FnMut(&mut Endpoint, &mut Endpoint) -> bool,
) -> bool {
    let end = *now + limit;
    loop {
        flush(*now, a, b, |_| true);
        if done(a, b) {
            return true;
        }
        let next = [a.poll_timeout(), b.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        match next {
            Some(t) if t <= end => {
                *now = t.max(*now);
                a.handle_timeout(*now);
                b.handle_timeout(*now);
            }
            _ => return done(a, b),
        }
    }
}

/// Run until B accepts a connection.
pub(super) fn accept_one(
    now: &mut Duration,
    a: &mut Endpoint,
    b: &mut Endpoint,
) -> ConnectionHandle {
    accept_within(now, Duration::from_secs(1), a, b).expect("a connection accepted")
}

/// Run until B accepts a connection, for at most `limit`.
fn accept_within(
    now: &mut Duration,
    limit: Duration,
    a: &mut Endpoint,
    b: &mut Endpoint,
) -> Option<ConnectionHandle> {
    let mut got = None;
    run(now, limit, a, b, |_, b| {
        got = got.or_else(|| b.accept());
        got.is_some()
    });
    got
}

/// `n` connections from A to B's listening port at once, run until B accepted them all: (A's
/// handles, B's in accept order).
pub(super) fn connect_many(
    now: &mut Duration,
    a: &mut Endpoint,
    b: &mut Endpoint,
    n: usize,
) -> (Vec<ConnectionHandle>, Vec<ConnectionHandle>) {
    let hs: Vec<_> = (0..n)
        .map(|_| a.connect(*now, client_cfg()).unwrap())
        .collect();
    let mut accepted = Vec::new();
    assert!(run(now, Duration::from_secs(1), a, b, |_, b| {
        accepted.extend(std::iter::from_fn(|| b.accept()));
        accepted.len() == n
    }));
    (hs, accepted)
}

/// A bare segment (no options).
fn segment(ports: (u16, u16), seq: u32, ack: u32, flags: TcpFlags, payload: &[u8]) -> TcpRepr<'_> {
    TcpRepr {
        src_port: ports.0,
        dst_port: ports.1,
        seq,
        ack,
        flags,
        window: 100,
        urgent: 0,
        options: Default::default(),
        payload,
    }
}

/// One connection from A to B's listening port, run until B accepts it: (A's, B's handle).
fn establish(
    now: &mut Duration,
    a: &mut Endpoint,
    b: &mut Endpoint,
) -> (ConnectionHandle, ConnectionHandle) {
    let h = a.connect(*now, client_cfg()).unwrap();
    (h, accept_one(now, a, b))
}

fn send(c: &mut Connection, wr_id: u64, data: &[u8]) {
    let wr = WorkRequest {
        wr_id,
        op: WrOp::Send { imm: None },
        sg_list: vec![Bytes::copy_from_slice(data)],
    };
    c.post_send(wr).expect("send posted");
}

/// On each (A's, B's) connection of `pairs`, B posts a receive the size of `data` and A sends
/// `data`; runs (for at most `limit`) until every receive has completed, each with `data`.
fn deliver(
    now: &mut Duration,
    limit: Duration,
    (a, b): (&mut Endpoint, &mut Endpoint),
    pairs: &[(ConnectionHandle, ConnectionHandle)],
    data: &[u8],
) {
    for &(client, server) in pairs {
        b.conn_mut(server)
            .unwrap()
            .post_recv(1, vec![0; data.len()])
            .unwrap();
        send(a.conn_mut(client).unwrap(), 1, data);
    }
    let mut got = 0;
    let all = run(now, limit, a, b, |_, b| {
        for &(_, server) in pairs {
            while let Some(c) = b.conn_mut(server).unwrap().poll_completion() {
                assert_eq!(c.buf.as_deref(), Some(data));
                got += 1;
            }
        }
        got == pairs.len()
    });
    assert!(all, "{got} of {} messages arrived", pairs.len());
}

fn tcp_of(packet: &[u8]) -> TcpRepr<'_> {
    let (_, tcp) = ip::parse(packet).unwrap();
    TcpRepr::parse(tcp, None).unwrap()
}

#[test]
fn many_connections_are_routed_by_four_tuple_and_each_message_reaches_its_own() {
    let (mut a, mut b) = (endpoint(1, |_| {}), server());
    let mut now = Duration::from_millis(1);
    let n = 200;
    let (hs, accepted) = connect_many(&mut now, &mut a, &mut b, n);
    assert_eq!(b.stats().established, n as u64);
    // Each server connection posts a receive; each client sends its own index.
    for &h in &accepted {
        b.conn_mut(h).unwrap().post_recv(7, vec![0; 64]).unwrap();
    }
    for (i, &h) in hs.iter().enumerate() {
        let port = a.conn(h).unwrap().config().local_port;
        send(a.conn_mut(h).unwrap(), i as u64, &port.to_be_bytes());
    }
    let mut got = 0;
    assert!(run(
        &mut now,
        Duration::from_secs(1),
        &mut a,
        &mut b,
        |_, b| {
            for &h in &accepted {
                let c = b.conn_mut(h).unwrap();
                while let Some(done) = c.poll_completion() {
                    let data = done.buf.unwrap();
                    let port = u16::from_be_bytes([data[0], data[1]]);
                    assert_eq!(
                        port,
                        c.config().remote_port,
                        "message on its own connection"
                    );
                    got += 1;
                }
            }
            got == n
        }
    ));
    let ports: std::collections::HashSet<u16> = hs
        .iter()
        .map(|&h| a.conn(h).unwrap().config().local_port)
        .collect();
    assert_eq!(ports.len(), n, "distinct ephemeral ports");
    assert!(ports.iter().all(|&p| p >= 49152));
}

#[test]
fn a_segment_for_no_connection_gets_an_rst_and_is_counted() {
    let (mut a, mut b) = (endpoint(1, |_| {}), server());
    let now = Duration::from_millis(1);
    // A SYN to a port nobody listens on: RST|ACK acknowledging the SYN.
    let mut cfg = client_cfg();
    cfg.remote_port = 9;
    a.connect(now, cfg).unwrap();
    let mut buf = Vec::new();
    a.poll_transmit(now, &mut buf).unwrap();
    let syn_seq = tcp_of(&buf).seq;
    b.handle(now, &buf);
    b.poll_transmit(now, &mut buf).unwrap();
    let rst = tcp_of(&buf);
    assert_eq!(rst.flags, TcpFlags::RST | TcpFlags::ACK);
    assert_eq!((rst.seq, rst.ack), (0, syn_seq.wrapping_add(1)));
    // The client's connection takes it as refused.
    a.handle(now, &buf);
    let h = a.handles().next().unwrap();
    assert_eq!(
        a.conn(h).unwrap().error(),
        Some(crate::ConnectionError::Refused)
    );
    // An ACK for no connection: RST with its acknowledgement number as sequence.
    let ack = segment((1234, PORT), 5, 777, TcpFlags::ACK, b"x");
    let ip = IpPair::V4 { src: A, dst: B };
    b.handle_segment(now, ip, &ack.to_vec(ip).unwrap());
    b.poll_transmit(now, &mut buf).unwrap();
    let rst = tcp_of(&buf);
    assert_eq!((rst.flags, rst.seq), (TcpFlags::RST, 777));
    assert_eq!(b.stats().unmatched, 2);
    assert_eq!(b.stats().rst_sent, 2);
    // An RST for no connection is not answered.
    b.handle(now, &buf.clone());
    assert!(b.poll_transmit(now, &mut buf).is_none());
}

#[test]
fn a_port_no_longer_listening_refuses_new_connections_and_keeps_its_own() {
    let (mut a, mut b) = (endpoint(1, |_| {}), server());
    let mut now = Duration::from_millis(1);
    let (first, accepted) = establish(&mut now, &mut a, &mut b);
    assert!(b.stop_listening(PORT));
    assert!(!b.stop_listening(PORT), "stopped once");
    let second = a.connect(now, client_cfg()).unwrap();
    flush(now, &mut a, &mut b, |_| true);
    assert_eq!(
        a.conn(second).unwrap().error(),
        Some(crate::ConnectionError::Refused)
    );
    assert!(a.conn(first).unwrap().is_established());
    assert!(b.conn(accepted).unwrap().is_established());
    assert_eq!(b.stats().established, 1);
}

#[test]
fn rsts_are_rate_limited() {
    let mut b = endpoint(2, |c| c.rst_per_sec = 100);
    let ip = IpPair::V4 { src: A, dst: B };
    let now = Duration::from_secs(1);
    for port in 0..50u16 {
        let seg = segment((1000 + port, 80), 1, 0, TcpFlags::SYN, &[]);
        b.handle_segment(now, ip, &seg.to_vec(ip).unwrap());
    }
    // A burst of a tenth of a second's worth.
    assert_eq!((b.stats().rst_sent, b.stats().rst_limited), (10, 40));
    assert_eq!(b.tx_queue_len(), 10);
}

#[test]
fn malformed_and_foreign_packets_are_counted_and_dropped() {
    let mut b = endpoint(2, |c| {
        c.local = vec![IpPair::V4 { src: B, dst: A }];
    });
    let now = Duration::from_millis(1);
    b.handle(now, &[0x45, 0, 0]);
    let mut buf = Vec::new();
    let ip = IpPair::V4 {
        src: A,
        dst: [10, 1, 0, 9],
    };
    ip::emit(ip, &[0u8; 20], &mut buf);
    b.handle(now, &buf);
    let ip = IpPair::V4 { src: A, dst: B };
    ip::emit(ip, &[0u8; 20], &mut buf);
    b.handle(now, &buf); // zero TCP header: bad checksum / offset
    let s = b.stats();
    assert_eq!((s.ip_malformed, s.not_local, s.tcp_malformed), (1, 1, 1));
    assert!(b.poll_transmit(now, &mut buf).is_none());
}

/// A SYN from a spoofed source that never completes.
fn flood_syn(port: u16) -> (IpPair, Vec<u8>) {
    let ip = IpPair::V4 {
        src: [10, 66, (port >> 8) as u8, port as u8],
        dst: B,
    };
    let opts = TcpOptions {
        mss: Some(1460),
        ..TcpOptions::default()
    };
    let seg = TcpRepr {
        options: opts,
        ..segment((port, PORT), u32::from(port) * 7919, 0, TcpFlags::SYN, &[])
    };
    let bytes = seg.to_vec(ip.reversed()).unwrap();
    (ip, bytes)
}

use crate::wire::TcpOptions;

#[test]
fn a_syn_flood_gets_cookies_and_a_real_client_still_connects_and_moves_data() {
    let (mut a, mut b) = (endpoint(1, |_| {}), server());
    b.cfg.syn_queue = 8;
    let mut now = Duration::from_millis(1);
    // One connection established before the flood.
    let (early, served) = establish(&mut now, &mut a, &mut b);
    for port in 1..=2000u16 {
        let (ip, syn) = flood_syn(port);
        b.handle_segment(now, ip, &syn);
    }
    assert_eq!(b.syn_queue_len(), 8, "the SYN queue stays bounded");
    assert_eq!(b.len(), 1 + 8);
    assert_eq!(b.stats().cookies_sent, 2000 - 8);
    let mut buf = Vec::new();
    while b.poll_transmit(now, &mut buf).is_some() {} // SYN-ACKs to nowhere
                                                      // A real client now connects: its SYN gets a cookie, its ACK brings the connection.
    let late = a.connect(now, client_cfg()).unwrap();
    let accepted = accept_within(&mut now, Duration::from_millis(50), &mut a, &mut b)
        .expect("the cookie connection accepted");
    assert_eq!(b.stats().cookies_accepted, 1);
    // Both the early and the cookie connection carry a message, in BTH mode.
    let pairs = [(early, served), (late, accepted)];
    for (_, server) in pairs {
        assert!(matches!(
            b.conn(server).unwrap().mode(),
            crate::Mode::Bth { .. }
        ));
    }
    let big = [0xAB; 100_000];
    deliver(
        &mut now,
        Duration::from_secs(2),
        (&mut a, &mut b),
        &pairs,
        &big,
    );
    // The flood's half-open entries expire; nothing else stays.
    now += Duration::from_secs(31);
    b.handle_timeout(now);
    assert_eq!(b.syn_queue_len(), 0);
    assert_eq!(b.len(), 2);
}

#[test]
fn a_forged_cookie_ack_is_answered_with_an_rst() {
    let mut b = server();
    b.cfg.syn_queue = 1;
    let now = Duration::from_secs(5);
    let ip = IpPair::V4 { src: A, dst: B };
    let ack = segment((5555, PORT), 1000, 123_456, TcpFlags::ACK, &[]);
    b.handle_segment(now, ip, &ack.to_vec(ip).unwrap());
    assert_eq!(b.len(), 0);
    assert_eq!((b.stats().cookies_accepted, b.stats().rst_sent), (0, 1));
}

#[test]
fn half_open_connections_expire_and_a_full_backlog_resets() {
    let (mut a, mut b) = (endpoint(1, |_| {}), server());
    b.cfg.backlog = 2;
    b.cfg.syn_timeout = Duration::from_secs(3);
    b.table = Table::new(b.cfg.syn_timeout);
    let mut now = Duration::from_millis(1);
    for _ in 0..3 {
        a.connect(now, client_cfg()).unwrap();
    }
    run(
        &mut now,
        Duration::from_millis(100),
        &mut a,
        &mut b,
        |_, _| false,
    );
    let s = b.stats();
    assert_eq!((s.established, s.backlog_drops), (2, 1));
    assert_eq!(b.backlog_len(), 2);
    let refused = a
        .handles()
        .filter(|&h| a.conn(h).unwrap().error().is_some())
        .count();
    assert_eq!(refused, 1);
    // A SYN that is never completed leaves the queue after syn_timeout.
    let (ip, syn) = flood_syn(1);
    b.handle_segment(now, ip, &syn);
    assert_eq!(b.syn_queue_len(), 1);
    let mut buf = Vec::new();
    let end = now + Duration::from_secs(10);
    while let Some(t) = b.poll_timeout().filter(|&t| t <= end) {
        now = t;
        b.handle_timeout(now);
        while b.poll_transmit(now, &mut buf).is_some() {}
        if b.syn_queue_len() == 0 {
            break;
        }
    }
    assert_eq!(b.syn_queue_len(), 0);
    assert_eq!(b.stats().syn_expired, 1);
}

#[test]
fn ipv6_connections_work_and_released_handles_go_stale() {
    let a6 = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let b6 = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    let mut a = endpoint(1, |_| {});
    let mut b = endpoint(2, |_| {});
    b.listen(PORT, conn_cfg(IpPair::V6 { src: b6, dst: a6 }, 0))
        .expect("listen");
    let mut now = Duration::from_millis(1);
    let h = a
        .connect(now, conn_cfg(IpPair::V6 { src: a6, dst: b6 }, PORT))
        .unwrap();
    let s = accept_one(&mut now, &mut a, &mut b);
    deliver(&mut now, SEC, (&mut a, &mut b), &[(h, s)], b"over ipv6");
    // Released: the handle is stale even when its slot is reused.
    let c = b.release(s).unwrap();
    assert_eq!(
        c.config().remote_port,
        a.conn(h).unwrap().config().local_port
    );
    assert!(b.conn(s).is_none());
    a.connect(now, conn_cfg(IpPair::V6 { src: a6, dst: b6 }, PORT))
        .unwrap();
    run(
        &mut now,
        Duration::from_millis(10),
        &mut a,
        &mut b,
        |_, b| b.backlog_len() > 0,
    );
    assert!(b.conn(s).is_none());
    assert_eq!(b.len(), 1);
    // The released connection's peer now reaches no connection: its FIN gets an RST.
    a.conn_mut(h).unwrap().close();
    flush(now, &mut a, &mut b, |_| true);
    assert!(b.stats().rst_sent >= 1);
    assert!(a.conn(h).unwrap().error().is_some());
}

/// The index remembers the tuple it found last (`Table::find`); releasing that very connection
/// must make its tuple unknown at once: the peer's next segment (its FIN) gets an RST, not a
/// stale handle.
#[test]
fn a_released_connection_is_unknown_to_the_next_packet_of_its_tuple() {
    let mut a = endpoint(1, |_| {});
    let mut b = server();
    let mut now = Duration::from_millis(1);
    let (h, s) = establish(&mut now, &mut a, &mut b);
    deliver(&mut now, SEC, (&mut a, &mut b), &[(h, s)], b"first");
    b.release(s).unwrap();
    let rst_before = b.stats().rst_sent;
    a.conn_mut(h).unwrap().close();
    flush(now, &mut a, &mut b, |_| true);
    assert_eq!(b.stats().rst_sent, rst_before + 1);
    assert!(a.conn(h).unwrap().error().is_some());
}

#[test]
fn connect_refuses_a_tuple_in_use_and_a_full_table() {
    let mut a = endpoint(1, |c| c.max_connections = 2);
    let now = Duration::ZERO;
    let mut cfg = client_cfg();
    cfg.local_port = 40000;
    a.connect(now, cfg.clone()).unwrap();
    assert_eq!(a.connect(now, cfg.clone()), Err(OpenError::TupleInUse));
    a.connect(now, client_cfg()).unwrap();
    assert_eq!(
        a.connect(now, client_cfg()),
        Err(OpenError::TooManyConnections)
    );
}

#[test]
fn a_connect_to_nobody_fails_after_its_syn_retries_with_a_clear_error() {
    let mut a = endpoint(1, |_| {});
    let mut now = Duration::from_millis(1);
    let cfg = Config {
        syn_retries: 2,
        ..client_cfg()
    };
    let h = a.connect(now, cfg).unwrap();
    let mut buf = Vec::new();
    let mut syns = 0;
    while a.conn(h).unwrap().error().is_none() {
        while a.poll_transmit(now, &mut buf).is_some() {
            syns += 1;
        }
        now = a.poll_timeout().expect("a SYN timer while opening");
        a.handle_timeout(now);
    }
    assert_eq!(syns, 3, "the SYN and 2 retransmissions");
    assert_eq!(
        a.conn(h).unwrap().error(),
        Some(crate::ConnectionError::HandshakeTimedOut { syns: 3 })
    );
    // 1 + 2 + 4 s of backed-off RTOs.
    assert!(now < Duration::from_secs(8), "{now:?}");
}

/// A cookie carries what the SYN-ACK settles: a plain listener answering a tcp_bth hello (no
/// timestamps in its SYN-ACK), and a listener without timestamps answering a peer that offers
/// them. Both used to fail the cookie check (the cookie assumed an echo that never came).
#[test]
fn cookies_work_when_the_listener_negotiates_less_than_the_syn_offers() {
    for (listener_bth, listener_ts, client_bth) in [(false, true, true), (false, false, false)] {
        let mut a = endpoint(1, |_| {});
        let mut b = endpoint(2, |c| c.syn_queue = 1);
        let mut template = conn_cfg(IpPair::V4 { src: B, dst: A }, 0);
        template.bth = listener_bth;
        template.timestamps = listener_ts;
        b.listen(PORT, template).expect("listen");
        let mut now = Duration::from_millis(1);
        let (ip, syn) = flood_syn(1);
        b.handle_segment(now, ip, &syn);
        let mut cfg = client_cfg();
        cfg.bth = client_bth;
        cfg.timestamps = true;
        let h = a.connect(now, cfg).unwrap();
        let s = accept_one(&mut now, &mut a, &mut b);
        assert_eq!(
            b.stats().cookies_accepted,
            1,
            "bth {listener_bth} ts {listener_ts}"
        );
        assert_eq!(b.conn(s).unwrap().mode(), crate::Mode::Plain);
        assert_eq!(a.conn(h).unwrap().state(), State::Established);
        // Amendment 4: the client's SYN offers timestamps beside its hello too, so a plain
        // listener that uses them keeps them, through the cookie.
        assert_eq!(b.conn(s).unwrap().timestamps(), listener_ts);
        assert_eq!(a.conn(h).unwrap().timestamps(), listener_ts);
    }
}

/// SYN cookies with both forms of a tcp_bth SYN: the hello folding the timestamps (T=1, no
/// RFC 7323 option: the client's `Config::timestamps` off) and amendment 4's hello without
/// them (T=0) beside the RFC 7323 option. Each comes back from the cookie as a BTH
/// connection with timestamps, and a message crosses it.
#[test]
fn cookies_work_with_both_forms_of_a_bth_syn() {
    for client_ts in [false, true] {
        let mut a = endpoint(1, |_| {});
        let mut b = endpoint(2, |c| c.syn_queue = 1);
        b.listen(PORT, conn_cfg(IpPair::V4 { src: B, dst: A }, 0))
            .expect("listen");
        let mut now = Duration::from_millis(1);
        // One half-open connection fills the SYN queue: the next SYN gets a cookie.
        let (ip, syn) = flood_syn(1);
        b.handle_segment(now, ip, &syn);
        let mut cfg = client_cfg();
        cfg.timestamps = client_ts;
        let h = a.connect(now, cfg).unwrap();
        let mut buf = Vec::new();
        a.poll_transmit(now, &mut buf).expect("A's SYN");
        let o = tcp_of(&buf).options;
        let hello = o.bth.expect("a hello");
        assert_eq!(
            hello.timestamps.is_some(),
            !client_ts,
            "T=1 exactly without the option"
        );
        assert_eq!(o.timestamps.is_some(), client_ts);
        b.handle(now, &buf);
        assert_eq!(b.stats().cookies_sent, 1);
        let s = accept_one(&mut now, &mut a, &mut b);
        assert_eq!(
            b.stats().cookies_accepted,
            1,
            "client timestamps {client_ts}"
        );
        for c in [b.conn(s).unwrap(), a.conn(h).unwrap()] {
            assert!(
                matches!(c.mode(), crate::Mode::Bth { .. }),
                "{:?}",
                c.mode()
            );
            assert!(c.timestamps());
        }
        deliver(&mut now, SEC, (&mut a, &mut b), &[(h, s)], &[0x5A; 3000]);
    }
}

/// `max_packet`: a configuration whose longest packet (MSS + 80) does not fit the data path
/// is refused at `connect` and `listen`, nothing kept; one that fits exactly is taken.
#[test]
fn an_mss_larger_than_the_data_path_is_refused_at_connect_and_listen() {
    let mut a = endpoint(1, |c| c.max_packet = 1540);
    let fits = Config {
        mss: 1460,
        ..client_cfg()
    };
    assert_eq!(fits.largest_packet(), 1540);
    let big = Config {
        mss: 1461,
        ..client_cfg()
    };
    let err = OpenError::MssTooLarge {
        mss: 1461,
        needs: 1541,
        max: 1540,
    };
    assert_eq!(a.connect(Duration::ZERO, big.clone()), Err(err));
    assert!(err.to_string().contains("at most 1460"), "{err}");
    assert_eq!(a.listen(PORT, big), Err(err));
    assert!(a.is_empty());
    // Not listening: a SYN to the port gets an RST.
    let mut b = endpoint(2, |_| {});
    b.connect(
        Duration::ZERO,
        conn_cfg(IpPair::V4 { src: B, dst: A }, PORT),
    )
    .unwrap();
    let mut syn = Vec::new();
    b.poll_transmit(Duration::ZERO, &mut syn).unwrap();
    a.handle(Duration::ZERO, &syn);
    assert_eq!(a.stats().rst_sent, 1);
    // What fits is taken, both ways, and an IPv6 connection at the same MSS too.
    a.listen(PORT, fits.clone()).expect("listen");
    a.connect(Duration::ZERO, fits).expect("connect");
    let v6 = conn_cfg(
        IpPair::V6 {
            src: [1; 16],
            dst: [2; 16],
        },
        PORT,
    );
    a.connect(Duration::ZERO, Config { mss: 1460, ..v6 })
        .expect("connect over IPv6");
}
