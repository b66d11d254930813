//! ICMP errors parsed, refused and routed, packet by packet.

use super::*;
use crate::endpoint::tests::{accept_one, conn_cfg, endpoint, server};
use crate::endpoint::{Endpoint, EndpointConfig};
use crate::{Config, ConnectionError, State};
use std::time::Duration;

const US: [u8; 4] = [10, 1, 0, 1];
const PEER: [u8; 4] = [10, 1, 0, 2];
const US6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const PEER6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// An IP packet from us carrying the first 20 bytes of a TCP header: ports 40000 → 4791,
/// sequence number `seq` (no checksum: nothing checks a quoted one).
fn ours(ip: IpPair, seq: u32) -> Vec<u8> {
    ours_cut(ip, seq, 20)
}

/// [`ours`] with only the first `len` bytes of the TCP header.
fn ours_cut(ip: IpPair, seq: u32, len: usize) -> Vec<u8> {
    let mut tcp = [0u8; 20];
    tcp[..2].copy_from_slice(&40000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&4791u16.to_be_bytes());
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
    tcp[12] = 5 << 4;
    let mut p = Vec::new();
    crate::endpoint::ip::emit(ip, &tcp[..len], &mut p);
    p
}

/// The ICMP error about `packet` as received: its address pair (`dst` us), protocol and body.
fn received(icmp: &[u8]) -> (IpPair, IpNumber, &[u8]) {
    crate::endpoint::ip::parse_any(icmp).expect("a well-formed IP packet")
}

fn pairs() -> [IpPair; 2] {
    [
        IpPair::V4 { src: US, dst: PEER },
        IpPair::V6 {
            src: US6,
            dst: PEER6,
        },
    ]
}

#[test]
fn every_error_round_trips_in_both_families() {
    let errors = [
        IcmpError::Unreachable(Unreachable::Network),
        IcmpError::Unreachable(Unreachable::Host),
        IcmpError::Unreachable(Unreachable::Port),
        IcmpError::Unreachable(Unreachable::Prohibited),
        IcmpError::PacketTooBig { mtu: 1400 },
    ];
    for ip in pairs() {
        for error in errors {
            let icmp = emit(&ours(ip, 0xdead_beef), error).expect("built");
            let (outer, proto, body) = received(&icmp);
            let q = parse(outer, proto, body).expect("parsed");
            assert_eq!(
                q,
                Quoted {
                    ip,
                    src_port: 40000,
                    dst_port: 4791,
                    seq: 0xdead_beef,
                    error,
                },
                "{ip:?} {error:?}"
            );
        }
    }
}

#[test]
fn a_damaged_or_foreign_error_is_refused() {
    for ip in pairs() {
        let error = IcmpError::Unreachable(Unreachable::Host);
        let good = emit(&ours(ip, 7), error).unwrap();
        // A flipped bit in the quoted packet: the ICMP checksum fails.
        let mut bad = good.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        let (o, p, b) = received(&bad);
        assert_eq!(parse(o, p, b), Err(IcmpDrop::Malformed));
        // Quoting a packet another host sent: not ours.
        let other = emit(&ours(ip.reversed(), 7), error).unwrap();
        let (_, p, b) = received(&other);
        assert_eq!(parse(ip.reversed(), p, b), Err(IcmpDrop::Malformed));
        // Too short to hold the ports and the sequence number.
        let icmp = emit(&ours_cut(ip, 7, 6), error).unwrap();
        let (o, p, b) = received(&icmp);
        assert_eq!(parse(o, p, b), Err(IcmpDrop::Malformed));
        // Eight bytes are enough (RFC 792 quotes no more).
        let icmp = emit(&ours_cut(ip, 7, 8), error).unwrap();
        let (o, p, b) = received(&icmp);
        assert_eq!(parse(o, p, b).map(|q| q.seq), Ok(7));
        // Every truncation of the ICMP body is refused or parsed, never a panic.
        let (o, p, b) = received(&good);
        for n in 0..b.len() {
            let _ = parse(o, p, &b[..n]);
        }
        // ICMPv4 in an IPv6 packet (and the reverse) is no error of ours.
        let wrong = match p {
            IpNumber::ICMP => IpNumber::IPV6_ICMP,
            _ => IpNumber::ICMP,
        };
        assert_eq!(parse(o, wrong, b), Err(IcmpDrop::NotAnError));
    }
}

#[test]
fn an_echo_request_is_no_error_and_a_frag_needed_without_mtu_is_refused() {
    use etherparse::PacketBuilder;
    let mut echo = Vec::new();
    PacketBuilder::ipv4(PEER, US, 64)
        .icmpv4_echo_request(1, 1)
        .write(&mut echo, b"ping")
        .unwrap();
    let (o, p, b) = received(&echo);
    assert_eq!(parse(o, p, b), Err(IcmpDrop::NotAnError));
    // RFC 792's form, before RFC 1191 put the next hop's MTU in it: nothing to lower to.
    let icmp = emit(
        &ours(IpPair::V4 { src: US, dst: PEER }, 1),
        IcmpError::PacketTooBig { mtu: 0 },
    )
    .unwrap();
    let (o, p, b) = received(&icmp);
    assert_eq!(parse(o, p, b), Err(IcmpDrop::Malformed));
}

/// The endpoint's first packet after `connect` (the SYN).
fn syn_of(ep: &mut Endpoint, now: Duration) -> Vec<u8> {
    let mut buf = Vec::new();
    let t = ep.poll_transmit(now, &mut buf).expect("the SYN");
    buf.truncate(t.len);
    buf
}

/// The sequence number of a TCP packet we sent.
fn seq_of(packet: &[u8]) -> u32 {
    let (_, tcp) = crate::endpoint::ip::parse(packet).unwrap();
    u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]])
}

fn client() -> (Endpoint, Config) {
    let ep = endpoint(1, |_: &mut EndpointConfig| {});
    (ep, conn_cfg(IpPair::V4 { src: US, dst: PEER }, 4791))
}

#[test]
fn an_unreachable_answer_to_our_syn_fails_the_connect_at_once() {
    for why in [Unreachable::Network, Unreachable::Host, Unreachable::Port] {
        let (mut a, cfg) = client();
        let now = Duration::from_millis(1);
        let h = a.connect(now, cfg).unwrap();
        let syn = syn_of(&mut a, now);
        // 30 µs later, as a host's kernel answers a SYN it has no route for.
        let icmp = emit(&syn, IcmpError::Unreachable(why)).unwrap();
        a.handle(now + Duration::from_micros(30), &icmp);
        let c = a.conn(h).expect("still held for the application");
        assert_eq!(c.state(), State::Closed);
        assert_eq!(c.error(), Some(ConnectionError::Unreachable(why)));
        assert_eq!(c.stats().icmp_errors, 1);
        assert_eq!(a.stats().icmp_in, 1);
        // The error says what happened, in words.
        let text = c.error().unwrap().to_string();
        assert!(text.contains(&why.to_string()), "{text}");
    }
}

#[test]
fn an_error_quoting_another_sequence_number_or_port_changes_nothing() {
    let (mut a, cfg) = client();
    let now = Duration::from_millis(1);
    let h = a.connect(now, cfg).unwrap();
    let syn = syn_of(&mut a, now);
    let seq = seq_of(&syn);
    let mut forged = syn.clone();
    let (_, tcp) = crate::endpoint::ip::parse(&syn).unwrap();
    let at = syn.len() - tcp.len();
    // A blind attacker's guess: another sequence number.
    forged[at + 4..at + 8].copy_from_slice(&seq.wrapping_add(1000).to_be_bytes());
    let icmp = emit(&forged, IcmpError::Unreachable(Unreachable::Host)).unwrap();
    a.handle(now, &icmp);
    assert_eq!(a.conn(h).unwrap().state(), State::SynSent);
    assert_eq!(a.conn(h).unwrap().stats().icmp_ignored, 1);
    // Another local port: no connection of ours.
    forged[at..at + 2].copy_from_slice(&1u16.to_be_bytes());
    forged[at + 4..at + 8].copy_from_slice(&seq.to_be_bytes());
    let icmp = emit(&forged, IcmpError::Unreachable(Unreachable::Host)).unwrap();
    a.handle(now, &icmp);
    assert_eq!(a.stats().icmp_unmatched, 1);
    assert_eq!(a.conn(h).unwrap().state(), State::SynSent);
}

#[test]
fn an_unreachable_once_established_is_soft_and_named_when_the_connection_times_out() {
    let (mut a, cfg) = client();
    // Plain mode: bytes go out without a receive posted at the peer.
    let cfg = Config {
        max_retries: 2,
        bth: false,
        ..cfg
    };
    let mut b = server();
    let mut now = Duration::from_millis(1);
    let h = a.connect(now, cfg).unwrap();
    accept_one(&mut now, &mut a, &mut b);
    assert_eq!(a.conn(h).unwrap().state(), State::Established);
    a.conn_mut(h).unwrap().send_bytes(b"hello").unwrap();
    // The data segment leaves and is lost.
    let mut buf = Vec::new();
    let mut data = None;
    while let Some(t) = a.poll_transmit(now, &mut buf) {
        data = Some(buf[..t.len].to_vec());
    }
    let data = data.expect("a packet in flight");
    let icmp = emit(&data, IcmpError::Unreachable(Unreachable::Host)).unwrap();
    a.handle(now, &icmp);
    let c = a.conn(h).unwrap();
    assert_eq!(
        c.state(),
        State::Established,
        "soft: the connection carries on"
    );
    assert_eq!(c.stats().icmp_errors, 1);
    // Nothing answers: the retransmissions time out, and the error names what the path said.
    while a.conn(h).unwrap().error().is_none() {
        while a.poll_transmit(now, &mut buf).is_some() {}
        now = a.poll_timeout().expect("the RTO");
        a.handle_timeout(now);
    }
    assert_eq!(
        a.conn(h).unwrap().error(),
        Some(ConnectionError::TimedOut {
            retries: 2,
            icmp: Some(Unreachable::Host)
        })
    );
}
