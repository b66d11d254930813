//! `endpoint_input`: whatever arrives at an endpoint from the network.
//!
//! Server endpoint B listens on one port with a tiny SYN queue (so SYN cookies are in play)
//! and holds one connection established with client endpoint A before the input starts. The
//! input is cut into ops: raw bytes handed to `Endpoint::handle` as an IP packet, or a TCP
//! segment from fields (any flags, ports, sequence and acknowledgement numbers, a tcp_bth hello
//! or timestamps) wrapped in a valid IPv4 or IPv6 header and checksum, so it reaches the
//! routing, SYN queue and cookie code instead of dying in a checksum, or an ICMP error quoting
//! such a segment as if B had sent it; time advances and timers fire between ops. After every op: queues within their bounds, every packet B sends (built in
//! place or, every other one, gathered as the TUN driver writes it) parses as IP + TCP with a
//! correct checksum, and the established connection, which the input never
//! names correctly (its ports are not reachable from the ops), still carries a message.

use arbitrary::Unstructured;
use bytes::Bytes;
use std::time::Duration;
use tcp_bth::wire::{Bth, ChecksumFill, IpPair, Opcode, TcpFlags, TcpOptions, TcpRepr, Timestamps};
use tcp_bth::{Config, ConnectionHandle, Endpoint, EndpointConfig, GatherLimits};

const B4: [u8; 4] = [10, 77, 0, 2];
const B6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
const PORT: u16 = 4791;
/// The established connection's client port: op ports are drawn below it.
const REAL_PORT: u16 = 60000;
const SYN_QUEUE: usize = 4;
const MAX_OPS: usize = 64;

fn server_cfg() -> EndpointConfig {
    EndpointConfig {
        syn_queue: SYN_QUEUE,
        backlog: 8,
        max_connections: 64,
        max_tx_queue: 64,
        key: tcp_bth::isn::IsnKey([3; 16]),
        ..EndpointConfig::default()
    }
}

fn conn_cfg(ip: IpPair, remote_port: u16, local_port: u16) -> Config {
    Config {
        ip,
        remote_port,
        local_port,
        isn_key: tcp_bth::isn::IsnKey([4; 16]),
        ..Config::default()
    }
}

struct World {
    a: Endpoint,
    b: Endpoint,
    real_a: ConnectionHandle,
    real_b: ConnectionHandle,
    now: Duration,
    buf: Vec<u8>,
    /// Packets alternate between built in place and gathered ([`poll`]).
    turns: u64,
}

impl World {
    fn new() -> World {
        let a4 = [10, 77, 0, 1];
        let mut a = Endpoint::new(EndpointConfig {
            key: tcp_bth::isn::IsnKey([5; 16]),
            ..EndpointConfig::default()
        });
        let mut b = Endpoint::new(server_cfg());
        b.listen(PORT, conn_cfg(IpPair::V4 { src: B4, dst: a4 }, 0, PORT))
            .expect("listen");
        let now = Duration::from_secs(1);
        let ip = IpPair::V4 { src: a4, dst: B4 };
        let real_a = a.connect(now, conn_cfg(ip, PORT, REAL_PORT)).unwrap();
        let mut w = World {
            a,
            b,
            real_a,
            real_b: real_a,
            now,
            buf: Vec::new(),
            turns: 0,
        };
        let mut accepted = None;
        for _ in 0..16 {
            w.exchange();
            accepted = accepted.or_else(|| w.b.accept());
        }
        w.real_b = accepted.expect("the real connection is established");
        w
    }

    /// Packets both ways until quiet; checks every packet B sends.
    fn exchange(&mut self) {
        for _ in 0..64 {
            let mut moved = false;
            while poll(&mut self.a, self.now, &mut self.buf, &mut self.turns) {
                moved = true;
                self.b.handle(self.now, &self.buf);
            }
            while poll(&mut self.b, self.now, &mut self.buf, &mut self.turns) {
                moved = true;
                check_packet(&self.buf);
                self.a.handle(self.now, &self.buf);
            }
            if !moved {
                return;
            }
        }
    }

    fn advance(&mut self, by: Duration) {
        self.now += by;
        for ep in [&mut self.a, &mut self.b] {
            if ep.poll_timeout().is_some_and(|t| t <= self.now) {
                ep.handle_timeout(self.now);
            }
        }
    }

    fn check_bounds(&mut self) {
        let c = server_cfg();
        assert!(self.b.syn_queue_len() <= c.syn_queue);
        assert!(self.b.backlog_len() <= c.backlog);
        assert!(self.b.tx_queue_len() <= c.max_tx_queue);
        assert!(self.b.len() <= c.max_connections);
    }
}

/// A packet the endpoint sent: a well-formed IP packet holding a TCP segment whose checksum
/// is right for its addresses.
/// What the gathered packets take as slices (the TUN driver's limits, and a smaller threshold
/// so that the fuzzer's short messages are gathered too).
const GATHER: GatherLimits = GatherLimits {
    max_parts: 2,
    min_payload: 16,
    gso_payload: 0,
};

/// `ep`'s next packet into `buf`: built in place, or on every other call gathered (headers in
/// the buffer, a data payload as the application's slices, as the TUN driver writes it) and
/// joined here, so both ways reach the peer and [`check_packet`].
fn poll(ep: &mut Endpoint, now: Duration, buf: &mut Vec<u8>, turns: &mut u64) -> bool {
    *turns += 1;
    if turns.is_multiple_of(2) {
        return ep.poll_transmit(now, buf).is_some();
    }
    buf.resize(1 << 16, 0);
    let mut parts = Vec::new();
    let Some(t) = ep.poll_transmit_gather(now, buf, ChecksumFill::Full, &mut parts, GATHER) else {
        buf.clear();
        return false;
    };
    buf.truncate(t.in_buf);
    for p in &parts {
        buf.extend_from_slice(p);
    }
    assert_eq!(buf.len(), t.len, "gathered parts add up to the packet");
    true
}

fn check_packet(p: &[u8]) {
    let (ip, tcp) = tcp_bth::endpoint::parse_ip(p)
        .unwrap_or_else(|e| panic!("the endpoint sent a bad IP packet ({e:?}): {p:02x?}"));
    // `parse_ip` gives the pair as received; the checksum covers the same addresses.
    TcpRepr::parse(tcp, Some(ip)).expect("the endpoint sent a bad TCP segment");
}

/// One segment from fields, in a valid IP packet to B.
fn segment(u: &mut Unstructured) -> arbitrary::Result<Vec<u8>> {
    let v6: bool = u.arbitrary()?;
    let src_host: u8 = u.arbitrary()?;
    let ip = if v6 {
        let mut src = B6;
        src[15] = src_host;
        IpPair::V6 { src, dst: B6 }
    } else {
        IpPair::V4 {
            src: [10, 77, 1, src_host],
            dst: B4,
        }
    };
    let mut opts = TcpOptions {
        mss: u.arbitrary()?,
        window_scale: u.arbitrary()?,
        sack_permitted: u.arbitrary()?,
        ..TcpOptions::default()
    };
    let ts = Timestamps {
        tsval: u.arbitrary()?,
        tsecr: u.arbitrary()?,
    };
    match u.int_in_range(0..=3)? {
        0 => {}
        1 => opts.timestamps = Some(ts),
        form => {
            let mut hello = Bth::new(Opcode::Hello);
            hello.msn = u.arbitrary()?;
            hello.mbo = u.int_in_range(0..=0xFF_FFFF)?;
            // 2: timestamps folded into the hello (T=1); 3: a hello without them (T=0)
            // beside the RFC 7323 option (wire spec amendment 4).
            if form == 2 {
                hello.timestamps = Some(ts);
            } else {
                opts.timestamps = Some(ts);
            }
            hello.seal(&[]);
            opts.bth = Some(hello);
        }
    }
    let payload_len = u.int_in_range(0..=64)?;
    let payload = u.bytes(payload_len)?;
    let seg = TcpRepr {
        src_port: u.int_in_range(1..=REAL_PORT - 1)?,
        dst_port: if u.ratio(7, 8)? { PORT } else { u.arbitrary()? },
        seq: u.arbitrary()?,
        ack: u.arbitrary()?,
        flags: TcpFlags(u.arbitrary()?),
        window: u.arbitrary()?,
        urgent: 0,
        options: opts,
        payload,
    };
    let Ok(tcp) = seg.to_vec(ip) else {
        return Ok(Vec::new());
    };
    let mut pkt = Vec::new();
    tcp_bth::endpoint::emit_ip(ip, &tcp, &mut pkt);
    Ok(pkt)
}

/// An ICMP error about a segment from fields as if B had sent it (addresses and ports of
/// [`segment`] swapped): destination unreachable of any kind or packet too big with any MTU,
/// now and then with a byte flipped, so the endpoint's ICMP checks and the connections'
/// sequence check are reached. The real connection's client port is never quoted.
fn icmp(u: &mut Unstructured) -> arbitrary::Result<Vec<u8>> {
    use tcp_bth::{IcmpError, Unreachable};
    let to_b = segment(u)?;
    let Ok((ip, tcp)) = tcp_bth::endpoint::parse_ip(&to_b) else {
        return Ok(Vec::new());
    };
    let mut tcp = tcp.to_vec();
    let (src, dst) = ([tcp[0], tcp[1]], [tcp[2], tcp[3]]);
    tcp[..2].copy_from_slice(&dst);
    tcp[2..4].copy_from_slice(&src);
    let mut from_b = Vec::new();
    tcp_bth::endpoint::emit_ip(ip.reversed(), &tcp, &mut from_b);
    let error = match u.int_in_range(0..=5u8)? {
        0 => IcmpError::Unreachable(Unreachable::Network),
        1 => IcmpError::Unreachable(Unreachable::Host),
        2 => IcmpError::Unreachable(Unreachable::Port),
        3 => IcmpError::Unreachable(Unreachable::Prohibited),
        4 => IcmpError::Unreachable(Unreachable::Protocol),
        _ => IcmpError::PacketTooBig {
            mtu: u.arbitrary()?,
        },
    };
    let mut pkt = tcp_bth::endpoint::icmp::emit(&from_b, error).unwrap_or_default();
    if !pkt.is_empty() && u.ratio(1, 8)? {
        let at = u.choose_index(pkt.len())?;
        pkt[at] ^= u.int_in_range(1..=255u8)?;
    }
    Ok(pkt)
}

/// Run one fuzz input.
pub fn run(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let mut w = World::new();
    for _ in 0..MAX_OPS {
        let Ok(op) = u.int_in_range(0..=4u8) else {
            break;
        };
        let pkt = match op {
            0 => {
                let Ok(n) = u.int_in_range(0..=80usize) else {
                    break;
                };
                u.bytes(n).map(<[u8]>::to_vec).unwrap_or_default()
            }
            1 | 2 => segment(&mut u).unwrap_or_default(),
            3 => icmp(&mut u).unwrap_or_default(),
            _ => {
                let ms = u.int_in_range(0..=2000u64).unwrap_or(0);
                w.advance(Duration::from_millis(ms));
                Vec::new()
            }
        };
        if !pkt.is_empty() {
            w.b.handle(w.now, &pkt);
        }
        w.exchange();
        w.check_bounds();
    }
    // The real connection still carries a message both ways round.
    let c =
        w.b.conn_mut(w.real_b)
            .expect("the real connection is never released");
    c.post_recv(1, vec![0; 64]).unwrap();
    let wr = bth_framer::WorkRequest {
        wr_id: 9,
        op: bth_framer::WrOp::Send { imm: None },
        sg_list: vec![Bytes::from_static(b"still here")],
    };
    w.a.conn_mut(w.real_a).unwrap().post_send(wr).unwrap();
    let mut got = None;
    for _ in 0..200 {
        w.exchange();
        got = got.or_else(|| w.b.conn_mut(w.real_b).unwrap().poll_completion());
        if got.is_some() {
            break;
        }
        w.advance(Duration::from_millis(50));
    }
    let got = got.expect("the established connection survives any input");
    assert_eq!(&got.buf.unwrap()[..10], b"still here");
}
