//! SYN flood against `tcp_bth::Listener`: 100,000 SYNs from random addresses and ports with a
//! legitimate client connecting in the middle; every listener queue stays within its bound after
//! every SYN, process RSS stays flat once the SYN queue is full, and the legitimate connection is
//! accepted and carries a verified SEND. See docs/reliability.md ("SYN flood").
//!
//! This is the only test in this binary on purpose: it measures the process's resident set size,
//! which means nothing while other tests allocate in the same process.

use bth_framer::{WorkRequest, WrOp};
use bth_placement::WcStatus;
use bth_tests::pattern;
use bth_tests::rss::rss_bytes;
use bytes::Bytes;
use std::time::Duration;
use tcp_bth::wire::{IpPair, TcpFlags, TcpOptions, TcpRepr};
use tcp_bth::{Connection, Listener, ListenerConfig, Mode, State};
use tcp_bth_io::sim::pair::B_PORT;
use tcp_bth_io::sim::pair_configs;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

fn send_wr(wr_id: u64, data: &[u8]) -> WorkRequest {
    WorkRequest {
        wr_id,
        op: WrOp::Send { imm: None },
        sg_list: vec![Bytes::copy_from_slice(data)],
    }
}

fn rss() -> u64 {
    rss_bytes().expect("measuring RSS (the flood's memory bound cannot be checked without it)")
}

#[test]
fn syn_flood_keeps_listener_bounded_and_a_real_client_connects() {
    let (a_cfg, b_cfg) = pair_configs(60);
    let lcfg = ListenerConfig::default();
    let mut l = Listener::new(b_cfg.clone(), lcfg.clone());
    let b_addr = match b_cfg.ip {
        IpPair::V4 { src, .. } => src,
        _ => unreachable!(),
    };
    let mut now = Duration::from_secs(1);
    let mut x: u64 = 0xDEAD_BEEF;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let flood = |l: &mut Listener, now: Duration, r: u64| {
        let src = [198, 18, (r >> 8) as u8, r as u8];
        let ip = IpPair::V4 { src, dst: b_addr };
        let syn = TcpRepr {
            src_port: (r >> 16) as u16 | 1024,
            dst_port: B_PORT,
            seq: (r >> 32) as u32,
            ack: 0,
            flags: TcpFlags::SYN,
            window: 65535,
            urgent: 0,
            options: TcpOptions {
                mss: Some(1460),
                ..TcpOptions::default()
            },
            payload: &[],
        }
        .to_vec(ip)
        .unwrap();
        l.handle_segment(now, ip, &syn);
    };
    let start_rss = rss();
    // RSS in bytes, every 10,000 SYNs.
    let mut samples = Vec::new();
    let mut client: Option<Connection> = None;
    let mut accepted = None;
    let mut sent_by_listener = 0u64;
    for i in 0..100_000u64 {
        now += Duration::from_micros(10); // 100k SYN/s
        flood(&mut l, now, rnd());
        if l.poll_timeout().is_some_and(|t| t <= now) {
            l.handle_timeout(now);
        }
        // The legitimate client connects in the middle of the flood.
        if i == 50_000 {
            client = Some(Connection::connect(a_cfg.clone(), now));
        }
        if let Some(c) = client.as_mut() {
            while let Some(seg) = c.poll_transmit(now) {
                l.handle_segment(now, a_cfg.ip, &seg);
            }
        }
        while let Some((ip, seg)) = l.poll_transmit(now) {
            sent_by_listener += 1;
            if ip == a_cfg.ip.reversed() {
                if let Some(c) = client.as_mut() {
                    c.handle_segment(now, &seg);
                }
            }
        }
        if let Some(conn) = l.accept() {
            accepted = Some(conn);
        }
        assert!(l.syn_queue_len() <= lcfg.syn_queue);
        assert!(l.order_len() <= 2 * lcfg.syn_queue + 1);
        assert!(l.tx_queue_len() <= lcfg.max_tx_queue);
        assert!(l.backlog_len() <= lcfg.backlog);
        if i % 10_000 == 9_999 {
            samples.push(rss());
        }
    }
    let st = l.stats();
    let kib: Vec<u64> = samples.iter().map(|b| b / KIB).collect();
    eprintln!(
        "listener stats: {st:?}; segments out {sent_by_listener}; RSS KiB before the flood {}, \
         every 10,000 SYNs: {kib:?}",
        start_rss / KIB
    );
    assert!(st.syns >= 99_000, "{st:?}");
    assert!(st.syn_evicted >= 100_000 - lcfg.syn_queue as u64 - 1000);
    let client = client.unwrap();
    assert_eq!(
        client.state(),
        State::Established,
        "legitimate client connected"
    );
    let mut server = accepted.expect("accepted the legitimate connection");
    assert_eq!(server.state(), State::Established);
    assert!(matches!(server.mode(), Mode::Bth { .. }));
    // RSS after the queue filled (sample 2 on, i.e. from 20,000 SYNs) stays flat: bounded state.
    assert_eq!(samples.len(), 10);
    let max = *samples[1..].iter().max().unwrap();
    let growth = max.saturating_sub(samples[1]);
    assert!(
        growth < 16 * MIB,
        "RSS grew {} KiB during the flood after the SYN queue filled: {kib:?} KiB",
        growth / KIB
    );
    // And the accepted connection carries data.
    let mut a = client;
    server.post_recv(1, vec![0u8; 3000]).unwrap();
    a.post_send(send_wr(9, &pattern(5, 3000))).unwrap();
    let mut got = None;
    for _ in 0..10_000 {
        now += Duration::from_micros(20);
        while let Some(s) = a.poll_transmit(now) {
            server.handle_segment(now, &s);
        }
        while let Some(s) = server.poll_transmit(now) {
            a.handle_segment(now, &s);
        }
        for c in [&mut a, &mut server] {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
        }
        if let Some(c) = server.poll_completion() {
            got = Some(c);
            break;
        }
    }
    let got = got.expect("SEND delivered over the accepted connection");
    assert_eq!(got.status, WcStatus::Success);
    assert_eq!(got.buf.unwrap(), pattern(5, 3000));
}
