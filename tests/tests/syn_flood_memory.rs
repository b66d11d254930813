//! SYN flood against `tcp_bth::Endpoint`: 100,000 SYNs from random addresses and ports with a
//! legitimate client connecting in the middle; every endpoint queue stays within its bound after
//! every SYN, the SYNs beyond the SYN queue are answered with cookies (no state), process RSS
//! stays flat once the SYN queue is full, and the legitimate connection (which arrives while
//! the queue is full, so it completes through its cookie) is accepted and carries a verified
//! SEND. See docs/reliability.md ("SYN flood").
//!
//! This is the only test in this binary on purpose: it measures the process's resident set size,
//! which means nothing while other tests allocate in the same process.

use bth_framer::WorkRequest;
use bth_io::sim::pair::B_PORT;
use bth_io::sim::pair_configs;
use bth_placement::WcStatus;
use bth_tests::pattern;
use bth_tests::rss::rss_bytes;
use std::time::Duration;
use tcp_bth::wire::{IpPair, TcpFlags, TcpOptions, TcpRepr};
use tcp_bth::{Endpoint, EndpointConfig, Mode, State};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

fn rss() -> u64 {
    rss_bytes().expect("measuring RSS (the flood's memory bound cannot be checked without it)")
}

#[test]
fn syn_flood_keeps_the_endpoint_bounded_and_a_real_client_connects_through_a_cookie() {
    let (a_cfg, b_cfg) = pair_configs(60);
    let lcfg = EndpointConfig::default();
    let mut l = Endpoint::new(lcfg.clone());
    l.listen(B_PORT, b_cfg.clone()).expect("listen");
    let mut client_ep = Endpoint::new(EndpointConfig::default());
    let mut buf = Vec::new();
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
    let flood = |l: &mut Endpoint, now: Duration, r: u64| {
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
    let mut client = None;
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
            client = Some(client_ep.connect(now, a_cfg.clone()).unwrap());
        }
        if client_ep.poll_timeout().is_some_and(|t| t <= now) {
            client_ep.handle_timeout(now);
        }
        while client_ep.poll_transmit(now, &mut buf).is_some() {
            l.handle(now, &buf);
        }
        while let Some(t) = l.poll_transmit(now, &mut buf) {
            sent_by_listener += 1;
            if t.ip == a_cfg.ip.reversed() {
                client_ep.handle(now, &buf);
            }
        }
        if let Some(conn) = l.accept() {
            accepted = Some(conn);
        }
        assert!(l.syn_queue_len() <= lcfg.syn_queue);
        assert!(l.len() <= lcfg.syn_queue + 1);
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
    assert!(st.syns + st.cookies_sent >= 99_000, "{st:?}");
    assert!(st.cookies_sent >= 90_000, "{st:?}");
    assert_eq!(
        st.cookies_accepted, 1,
        "the real client came through its cookie"
    );
    let client = client.unwrap();
    assert_eq!(
        client_ep.conn(client).unwrap().state(),
        State::Established,
        "legitimate client connected"
    );
    let server = accepted.expect("accepted the legitimate connection");
    assert_eq!(l.conn(server).unwrap().state(), State::Established);
    assert!(matches!(l.conn(server).unwrap().mode(), Mode::Bth { .. }));
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
    l.conn_mut(server)
        .unwrap()
        .post_recv(1, vec![0u8; 3000])
        .unwrap();
    client_ep
        .conn_mut(client)
        .unwrap()
        .post_send(WorkRequest::send(9, pattern(5, 3000).to_vec(), None))
        .unwrap();
    let mut got = None;
    for _ in 0..10_000 {
        now += Duration::from_micros(20);
        while client_ep.poll_transmit(now, &mut buf).is_some() {
            l.handle(now, &buf);
        }
        while l.poll_transmit(now, &mut buf).is_some() {
            client_ep.handle(now, &buf);
        }
        for ep in [&mut client_ep, &mut l] {
            if ep.poll_timeout().is_some_and(|t| t <= now) {
                ep.handle_timeout(now);
            }
        }
        if let Some(c) = l.conn_mut(server).unwrap().poll_completion() {
            got = Some(c);
            break;
        }
    }
    let got = got.expect("SEND delivered over the accepted connection");
    assert_eq!(got.status, WcStatus::Success);
    assert_eq!(got.buf.unwrap(), pattern(5, 3000));
}
