//! Two endpoints over the simulated link, served by the shared driver turn: handshakes through
//! listen/accept, messages verified end to end, determinism, the driver model and the tap.

use super::*;
use crate::sim::pair::B_PORT;
use crate::sim::pcap_ip_tap;
use crate::sim::workload::fill;
use bth_framer::{WorkRequest, WrOp};
use bytes::Bytes;
use std::collections::HashMap;
use tcp_bth::{ConnectionHandle, State, WcOp};

/// `n` connections from A to B's listening port; B accepts them all.
fn connected(n: usize, link: LinkConfig) -> (Net, Vec<ConnectionHandle>, Vec<ConnectionHandle>) {
    let (ea, eb) = net_configs(7);
    let (ca, cb) = net_conn_configs(7);
    let mut net = Net::new(ea, eb, link);
    net.b.listen(B_PORT, cb).expect("listen");
    let now = net.now;
    let a: Vec<_> = (0..n)
        .map(|_| net.a.connect(now, ca.clone()).expect("connect"))
        .collect();
    let mut b = Vec::new();
    let up = net.run_until(Duration::from_secs(30), |net| {
        while let Some(h) = net.b.accept() {
            b.push(h);
        }
        b.len() == n
            && a.iter().all(|&h| {
                net.a
                    .conn(h)
                    .is_some_and(|c| c.state() == State::Established)
            })
    });
    assert!(up, "{} of {n} accepted", b.len());
    (net, a, b)
}

/// Each A connection SENDs `per` messages; B checks every byte and which connection it
/// arrived on. Returns the virtual time it took.
fn exchange(net: &mut Net, a: &[ConnectionHandle], b: &[ConnectionHandle], per: usize) {
    // B's connection for A's: by the peer's port.
    let by_port: HashMap<u16, ConnectionHandle> = b
        .iter()
        .map(|&h| (net.b.conn(h).unwrap().config().remote_port, h))
        .collect();
    let size = |q: usize, i: usize| 1 + (q * 977 + i * 1453) % 3000;
    let mut expect = HashMap::new();
    for (q, &h) in a.iter().enumerate() {
        let port = net.a.conn(h).unwrap().config().local_port;
        let hb = by_port[&port];
        expect.insert(hb, q);
        for i in 0..per {
            let recv = vec![0u8; size(q, i)];
            net.b
                .conn_mut(hb)
                .unwrap()
                .post_recv(i as u64, recv)
                .unwrap();
            let mut data = vec![0u8; size(q, i)];
            fill(q as u64, i as u64, &mut data);
            let wr = WorkRequest {
                wr_id: i as u64,
                op: WrOp::Send { imm: None },
                sg_list: vec![Bytes::from(data)],
            };
            net.a.conn_mut(h).unwrap().post_send(wr).unwrap();
        }
    }
    let mut got = 0;
    let total = a.len() * per;
    let done = net.run_until(Duration::from_secs(60), |net| {
        for &hb in b {
            if !net.b.conn(hb).unwrap().has_completion() {
                continue;
            }
            let q = expect[&hb];
            let c = net.b.conn_mut(hb).unwrap();
            while let Some(wc) = c.poll_completion() {
                assert_eq!(wc.op, WcOp::Recv);
                let i = wc.wr_id as usize;
                let mut want = vec![0u8; size(q, i)];
                fill(q as u64, i as u64, &mut want);
                assert_eq!(wc.byte_len as usize, want.len(), "qp {q} message {i}");
                assert!(wc.buf.as_deref() == Some(&want[..]), "qp {q} message {i}");
                got += 1;
            }
        }
        got == total
    });
    assert!(done, "{got} of {total} messages arrived");
}

#[test]
fn many_connections_exchange_verified_messages_over_a_lossy_link() {
    let link = LinkConfig::default()
        .with_loss(0.02)
        .with_reorder(0.05, Duration::from_micros(100));
    let (mut net, a, b) = connected(40, link);
    net.driver = Some(DriverModel::TUN);
    exchange(&mut net, &a, &b, 3);
    assert_eq!(net.b.stats().established, 40);
    assert!(net.link.stats(Direction::AtoB).dropped_loss > 0);
    assert!(net.busy[0] > Duration::ZERO && net.busy[1] > Duration::ZERO);
    assert!(net.turns[0].packets_out > 0 && net.turns[1].packets_in > 0);
}

/// The same configurations give the same run: the same time, counters and packets.
#[test]
fn a_run_repeats_exactly_for_a_seed() {
    let run = || {
        let link = LinkConfig::default().with_loss(0.03).with_seed(5);
        let (mut net, a, b) = connected(8, link);
        net.driver = Some(DriverModel::TUN);
        exchange(&mut net, &a, &b, 2);
        (
            net.now,
            net.turns,
            net.busy,
            net.a.stats(),
            net.b.stats(),
            net.link.stats(Direction::AtoB),
        )
    };
    assert_eq!(run(), run());
}

/// A busy end does not turn: what arrives meanwhile waits, and it is reaped in one batch.
#[test]
fn a_busy_end_batches_what_arrived_during_its_turn() {
    let slow = DriverModel {
        per_turn: Duration::from_micros(200),
        per_segment: Duration::from_micros(10),
        rx_queue: None,
        turn_reads: None,
    };
    let (mut net, a, b) = connected(16, LinkConfig::default());
    net.driver = Some(slow);
    exchange(&mut net, &a, &b, 2);
    assert!(net.turns[1].largest_batch > 1, "{:?}", net.turns[1]);
}

/// A segment to a port nobody listens on is answered with an RST through the link.
#[test]
fn a_connection_to_a_closed_port_is_refused() {
    let (ea, eb) = net_configs(3);
    let (mut ca, _) = net_conn_configs(3);
    ca.remote_port = 9;
    let mut net = Net::new(ea, eb, LinkConfig::default());
    let h = net.a.connect(net.now, ca).unwrap();
    let refused = net.run_until(Duration::from_secs(1), |net| {
        net.a.conn(h).is_some_and(|c| c.state() == State::Closed)
    });
    assert!(refused);
    assert_eq!(net.b.stats().rst_sent, 1);
}

/// The tap sees IP packets; the pcap it writes has both directions with good checksums.
#[test]
fn the_ip_tap_writes_a_clean_capture() {
    use bth_capture::{analyze, CaptureReader, PcapWriter};
    use std::sync::{Arc, Mutex};
    #[derive(Clone)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Sink {
        fn write(&mut self, d: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(d);
            Ok(d.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let shared = Arc::new(Mutex::new(Vec::new()));
    let (tap, handle) = pcap_ip_tap(PcapWriter::new(Sink(shared.clone())).unwrap());
    let (ea, eb) = net_configs(4);
    let (ca, cb) = net_conn_configs(4);
    let mut net = Net::new(ea, eb, LinkConfig::default());
    net.tap = Some(tap);
    net.b.listen(B_PORT, cb).expect("listen");
    net.a.connect(net.now, ca.clone()).unwrap();
    net.a.connect(net.now, ca).unwrap();
    net.run_until(Duration::from_millis(10), |net| {
        net.b.stats().established == 2
    });
    let sent = net.turns[0].packets_out + net.turns[1].packets_out;
    assert_eq!(handle.finish().unwrap(), sent);
    let bytes = shared.lock().unwrap().clone();
    let an = analyze(CaptureReader::new(&bytes[..]).unwrap()).unwrap();
    assert_eq!(an.summary.checksum_errors, 0);
    assert_eq!(an.flows.len(), 4, "two connections, both directions");
}

/// `turn::run` cannot drive one end of the net: its wait says so instead of spinning.
#[test]
fn one_end_cannot_wait_on_its_own() {
    let mut link = SimLink::new(LinkConfig::default());
    let mut inbox = VecDeque::new();
    let mut ptb_sent = 0;
    let mut io = LinkEnd {
        link: &mut link,
        inbox: &mut inbox,
        reads: usize::MAX,
        tap: None,
        end: Direction::AtoB,
        now: Duration::ZERO,
        path_mtu: None,
        ptb_sent: &mut ptb_sent,
        gone: None,
    };
    let e = io.wait(None).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::Unsupported);
}

/// A path whose MTU is below the ends' (a tunnel on the way): the first full-sized packets are
/// dropped and answered with ICMP packet too big; the sender lowers its MSS, resends what was
/// in flight cut to the new size, and the transfer completes with every byte checked, in
/// both modes. Without it, every full-sized segment and each retransmission was lost until
/// the connection timed out.
#[test]
fn a_smaller_path_mtu_is_learned_from_icmp_and_the_transfer_completes() {
    for bth in [true, false] {
        let (ea, eb) = net_configs(3);
        let (mut ca, mut cb) = net_conn_configs(3);
        ca.bth = bth;
        cb.bth = bth;
        let mut net = Net::new(ea, eb, LinkConfig::default());
        net.path_mtu = Some(1280);
        net.b.listen(B_PORT, cb).expect("listen");
        let a = net.a.connect(net.now, ca).expect("connect");
        let mut b = None;
        let up = net.run_until(Duration::from_secs(5), |net| {
            b = b.or_else(|| net.b.accept());
            b.is_some() && net.a.conn(a).unwrap().is_established()
        });
        assert!(up, "handshake (its packets are small)");
        let b = b.unwrap();
        let mut data = vec![0u8; 300_000];
        fill(9, 9, &mut data);
        if bth {
            let recv = vec![0u8; data.len()];
            net.b.conn_mut(b).unwrap().post_recv(1, recv).unwrap();
            let wr = WorkRequest {
                wr_id: 1,
                op: WrOp::Send { imm: None },
                sg_list: vec![Bytes::from(data.clone())],
            };
            net.a.conn_mut(a).unwrap().post_send(wr).unwrap();
        } else {
            net.a.conn_mut(a).unwrap().send_bytes(&data).unwrap();
        }
        let mut got = Vec::new();
        let done = net.run_until(Duration::from_secs(10), |net| {
            let c = net.b.conn_mut(b).unwrap();
            if bth {
                if let Some(wc) = c.poll_completion() {
                    got = wc.buf.expect("the receive buffer back");
                }
            } else {
                let mut buf = vec![0u8; 65536];
                loop {
                    let n = c.recv_bytes(&mut buf);
                    if n == 0 {
                        break;
                    }
                    got.extend_from_slice(&buf[..n]);
                }
            }
            got.len() == data.len()
        });
        let s = net.a.conn(a).unwrap().stats();
        assert!(
            done,
            "bth {bth}: {} of {} bytes; {s:?}",
            got.len(),
            data.len()
        );
        assert!(got == data, "bth {bth}: the bytes differ");
        assert_eq!(s.pmtu_reductions, 1, "bth {bth}");
        assert!(
            s.pmtu_resegmented > 0,
            "bth {bth}: what was in flight was cut"
        );
        // Only the first flight met the smaller MTU; once lowered, everything fit.
        let segs = s.segments_out;
        assert!(
            net.ptb_sent > 0 && net.ptb_sent < 64,
            "{} PTBs for {segs} segments",
            net.ptb_sent
        );
        assert_eq!(s.icmp_ignored + s.icmp_errors, net.ptb_sent, "bth {bth}");
    }
}

/// A peer that vanishes (its host killed: nothing it sent arrives, nothing reaches it) is
/// noticed by keepalive on an idle connection and by the user timeout on one with data
/// outstanding, each with RST, within its settings: without them, the idle connection lived
/// forever and the busy one until 15 backed-off RTOs had passed.
#[test]
fn a_vanished_peer_is_noticed_by_keepalive_or_the_user_timeout() {
    use tcp_bth::{ConnectionError, Keepalive};
    for (busy, bth) in [(false, true), (false, false), (true, true), (true, false)] {
        let (ea, eb) = net_configs(5);
        let (mut ca, mut cb) = net_conn_configs(5);
        ca.bth = bth;
        cb.bth = bth;
        ca.keepalive = Some(Keepalive {
            idle: Duration::from_secs(2),
            interval: Duration::from_secs(1),
            probes: 3,
        });
        ca.user_timeout = Some(Duration::from_secs(4));
        let mut net = Net::new(ea, eb, LinkConfig::default());
        net.b.listen(B_PORT, cb).expect("listen");
        let opened = net.now;
        let a = net.a.connect(net.now, ca).expect("connect");
        let mut b = None;
        assert!(net.run_until(Duration::from_secs(5), |net| {
            b = b.or_else(|| net.b.accept());
            b.is_some() && net.a.conn(a).unwrap().is_established()
        }));
        // (The clock has moved on to the next event after the handshake: keepalive's first.)
        net.gone = Some(Direction::BtoA);
        let start = net.now;
        if busy {
            let data = vec![7u8; 50_000];
            let c = net.a.conn_mut(a).unwrap();
            if bth {
                let wr = WorkRequest {
                    wr_id: 1,
                    op: WrOp::RdmaWrite {
                        rkey: 0,
                        remote_addr: 0,
                        imm: None,
                    },
                    sg_list: vec![Bytes::from(data)],
                };
                c.post_send(wr).unwrap();
            } else {
                c.send_bytes(&data).unwrap();
            }
        }
        let ended = net.run_until(Duration::from_secs(120), |net| {
            net.a.conn(a).unwrap().error().is_some()
        });
        assert!(ended, "busy {busy} bth {bth}: A never noticed");
        let took = net.now - start;
        let err = net.a.conn(a).unwrap().error().unwrap();
        if busy {
            let t = Duration::from_secs(4);
            assert_eq!(
                err,
                ConnectionError::UserTimeout {
                    after: t,
                    icmp: None
                }
            );
            assert!(
                took >= t && took < t + Duration::from_millis(10),
                "{took:?}"
            );
        } else {
            let k = ConnectionError::KeepaliveTimedOut {
                probes: 3,
                icmp: None,
            };
            assert_eq!(err, k);
            // 2 s of silence after the handshake, three probes a second apart, one more second.
            let took = net.now - opened;
            let t = Duration::from_secs(5);
            assert!(
                took >= t && took < t + Duration::from_millis(10),
                "{took:?}"
            );
        }
    }
}
