//! Tests of the GSO splitter: super-packets built with etherparse as the kernel hands them over,
//! split along fate patterns, every run's headers checked, the payload put back together; and
//! packets that lie about their lengths refused without a panic.
use super::*;
use etherparse::TcpOptionElement;
use proptest::prelude::*;

const SEQ: u32 = 0xffff_f000; // wraps within the packet
const ID: u16 = 0xfffe;

fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

fn tcp_header(fin: bool) -> TcpHeader {
    let mut t = TcpHeader::new(40000, 5201, SEQ, 512);
    t.ack = true;
    t.acknowledgment_number = 77;
    t.psh = true;
    t.fin = fin;
    t.cwr = true;
    t.set_options(&[
        TcpOptionElement::Noop,
        TcpOptionElement::Noop,
        TcpOptionElement::Timestamp(1234, 5678),
    ])
    .expect("options");
    t
}

fn vnet(gso_type: u8, gso_size: u16, ip_len: usize) -> VnetHdr {
    VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type,
        hdr_len: 128, // the kernel's hint: the linear part, not the headers
        gso_size,
        csum_start: ip_len as u16,
        csum_offset: 16,
    }
}

/// A GSO TCP/IPv4 super-packet as the kernel writes it: full lengths, valid IP checksum, the
/// pseudo-header sum of the whole TCP length in the TCP checksum.
fn gso_v4(gso_size: u16, data: &[u8], fin: bool) -> Vec<u8> {
    let tcp = tcp_header(fin);
    let mut ip = Ipv4Header::new(
        (tcp.header_len() + data.len()) as u16,
        64,
        IpNumber::TCP,
        [10, 99, 0, 2],
        [10, 99, 0, 1],
    )
    .expect("ip");
    ip.identification = ID;
    ip.header_checksum = ip.calc_header_checksum();
    let pair = IpPair::V4 {
        src: ip.source,
        dst: ip.destination,
    };
    super_packet(
        vnet(GSO_TCPV4, gso_size, ip.header_len()),
        (pair, &ip.to_bytes()),
        tcp,
        data,
    )
}

/// The super-packet: `vnet`, the IP header (`ip_header`, for the addresses in `pair`), then
/// `tcp` with the pseudo-header sum of the whole TCP length in its checksum, then `data`.
fn super_packet(
    vnet: VnetHdr,
    (pair, ip_header): (IpPair, &[u8]),
    mut tcp: TcpHeader,
    data: &[u8],
) -> Vec<u8> {
    let tcp_len = tcp.header_len() + data.len();
    tcp.checksum = checksum::partial(pair, tcp_len).expect("length");
    let mut out = vnet.to_bytes().to_vec();
    out.extend_from_slice(ip_header);
    out.extend_from_slice(&tcp.to_bytes());
    out.extend_from_slice(data);
    out
}

fn gso_v6(gso_size: u16, data: &[u8]) -> Vec<u8> {
    let tcp = tcp_header(false);
    let tcp_len = tcp.header_len() + data.len();
    let ip = Ipv6Header {
        traffic_class: 0,
        flow_label: Default::default(),
        payload_length: tcp_len as u16,
        next_header: IpNumber::TCP,
        hop_limit: 64,
        source: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
        destination: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    };
    let pair = IpPair::V6 {
        src: ip.source,
        dst: ip.destination,
    };
    super_packet(
        vnet(GSO_TCPV6, gso_size, Ipv6Header::LEN),
        (pair, &ip.to_bytes()),
        tcp,
        data,
    )
}

/// Check one built run against the super-packet it came from; returns its payload.
fn check_run(run: &[u8], first: usize, end: usize, count: usize, gso: u16, v6: bool) -> Vec<u8> {
    let v = VnetHdr::parse(run).expect("vnet");
    let pkt = &run[VNET_HDR_LEN..];
    let (ip_len, tcp_and_payload) = if v6 {
        let (h, rest) = Ipv6Header::from_slice(pkt).expect("ipv6");
        assert_eq!(Ipv6Header::LEN + usize::from(h.payload_length), pkt.len());
        (Ipv6Header::LEN, rest)
    } else {
        let (h, rest) = Ipv4Header::from_slice(pkt).expect("ipv4");
        assert_eq!(usize::from(h.total_len), pkt.len());
        assert_eq!(h.header_checksum, h.calc_header_checksum());
        assert_eq!(h.identification, ID.wrapping_add(first as u16));
        (h.header_len(), rest)
    };
    let (t, data) = TcpHeader::from_slice(tcp_and_payload).expect("tcp");
    let last = end == count;
    assert_eq!(
        t.sequence_number,
        SEQ.wrapping_add(first as u32 * u32::from(gso))
    );
    assert_eq!((t.psh, t.fin && !last, t.cwr), (last, false, first == 0));
    assert_eq!(t.options, tcp_header(false).options);
    assert_eq!((t.ack, t.acknowledgment_number), (true, 77));
    let segs = end - first;
    assert!(data.len() > (segs - 1) * usize::from(gso) && data.len() <= segs * usize::from(gso));
    assert!(v.needs_csum());
    assert_eq!((v.csum_start, v.csum_offset), (ip_len as u16, 16));
    assert_eq!(usize::from(v.hdr_len), ip_len + t.header_len());
    if segs == 1 {
        assert_eq!((v.gso_type, v.gso_size), (GSO_NONE, 0));
    } else {
        let ty = if v6 { GSO_TCPV6 } else { GSO_TCPV4 };
        assert_eq!((v.gso_type, v.gso_size), (ty, gso));
    }
    // The partial sum is right for the run's length: finishing it as the kernel would gives
    // the checksum etherparse computes from scratch.
    let mut single = run.to_vec();
    single[1] = GSO_NONE;
    complete_checksum(&mut single).expect("complete");
    assert_eq!(single[0] & F_NEEDS_CSUM, 0);
    let (ft, _) = TcpHeader::from_slice(&single[VNET_HDR_LEN + ip_len..]).expect("tcp");
    let want = if v6 {
        let (h, _) = Ipv6Header::from_slice(&single[VNET_HDR_LEN..]).expect("ipv6");
        ft.calc_checksum_ipv6(&h, data).expect("sum")
    } else {
        let (h, _) = Ipv4Header::from_slice(&single[VNET_HDR_LEN..]).expect("ipv4");
        ft.calc_checksum_ipv4(&h, data).expect("sum")
    };
    assert_eq!(ft.checksum, want);
    data.to_vec()
}

/// Split `buf` at `cuts` (run boundaries, ascending, within 1..count), check every run, and
/// return the concatenated payload.
fn split(buf: &[u8], cuts: &[usize], v6: bool) -> Vec<u8> {
    let g = GsoPacket::parse(buf).expect("parse");
    let count = g.segments();
    let mut bounds = vec![0];
    bounds.extend_from_slice(cuts);
    bounds.push(count);
    let mut data = Vec::new();
    let mut wire = 0;
    for w in bounds.windows(2) {
        let mut run = Vec::new();
        g.build_run(w[0], w[1], &mut run).expect("run");
        assert_eq!(
            g.run_wire_len(w[0], w[1]),
            run.len() - VNET_HDR_LEN + (w[1] - w[0] - 1) * g.header_len()
        );
        wire += g.run_wire_len(w[0], w[1]);
        let gso = VnetHdr::parse(buf).expect("vnet").gso_size;
        data.extend(check_run(&run, w[0], w[1], count, gso, v6));
    }
    assert_eq!(wire, g.segment_lens().sum::<usize>());
    data
}

#[test]
fn ipv4_super_packet_splits_into_runs_that_add_up() {
    let data = payload(9 * 1448 + 100);
    let buf = gso_v4(1448, &data, false);
    let g = GsoPacket::parse(&buf).expect("parse");
    assert_eq!((g.segments(), g.header_len()), (10, 20 + 32));
    let lens: Vec<usize> = g.segment_lens().collect();
    assert_eq!(lens[..9], [1500; 9]);
    assert_eq!(lens[9], 152);
    // Lost segment 3, a reordered run 4..9, the rest as it came.
    assert_eq!(split(&buf, &[3, 4, 9], false), data);
    // Every segment alone, and the whole packet as one run.
    assert_eq!(split(&buf, &(1..10).collect::<Vec<_>>(), false), data);
    assert_eq!(split(&buf, &[], false), data);
}

#[test]
fn fin_stays_on_the_last_run_only() {
    let data = payload(3000);
    let buf = gso_v4(1000, &data, true);
    let g = GsoPacket::parse(&buf).expect("parse");
    for (first, end, fin) in [(0, 2, false), (2, 3, true)] {
        let mut run = Vec::new();
        g.build_run(first, end, &mut run).expect("run");
        let (t, _) = TcpHeader::from_slice(&run[VNET_HDR_LEN + 20..]).expect("tcp");
        assert_eq!(t.fin, fin);
    }
}

#[test]
fn ipv6_super_packet_splits_into_runs_that_add_up() {
    let data = payload(5 * 1428 + 1);
    let buf = gso_v6(1428, &data);
    let g = GsoPacket::parse(&buf).expect("parse");
    assert_eq!((g.segments(), g.header_len()), (6, 40 + 32));
    assert_eq!(split(&buf, &[1, 2, 5], true), data);
    assert_eq!(split(&buf, &[], true), data);
}

#[test]
fn runs_outside_the_packet_are_refused() {
    let buf = gso_v4(1000, &payload(2500), false);
    let g = GsoPacket::parse(&buf).expect("parse");
    let mut out = Vec::new();
    for (first, end) in [(0, 0), (2, 1), (0, 4), (3, 4), (usize::MAX, usize::MAX)] {
        assert!(
            matches!(g.build_run(first, end, &mut out), Err(GsoError::Run { .. })),
            "{first}..{end}"
        );
    }
    assert!(out.is_empty());
}

/// `buf` with `f` applied, then parsed.
fn parse_after(buf: &[u8], f: impl FnOnce(&mut Vec<u8>)) -> Result<usize, GsoError> {
    let mut b = buf.to_vec();
    f(&mut b);
    GsoPacket::parse(&b).map(|g| g.segments())
}

/// What was done to the packet, what parsing it gave, and whether that is the right error.
type Case = (&'static str, Result<usize, GsoError>, fn(&GsoError) -> bool);

#[test]
fn malformed_packets_are_refused() {
    let v4 = gso_v4(1448, &payload(4000), false);
    let v6 = gso_v6(1428, &payload(4000));
    let ip_total = |b: &mut Vec<u8>, v: u16| b[12..14].copy_from_slice(&v.to_be_bytes());
    use GsoError as E;
    let cases: Vec<Case> = vec![
        ("empty", parse_after(&v4, |b| b.clear()), |e| {
            matches!(e, E::Short { len: 0 })
        }),
        ("header only", parse_after(&v4, |b| b.truncate(10)), |e| {
            matches!(e, E::Ipv4(_))
        }),
        ("UDP GSO", parse_after(&v4, |b| b[1] = 3), |e| {
            matches!(e, E::GsoType(3))
        }),
        ("ECN", parse_after(&v4, |b| b[1] = 0x81), |e| {
            matches!(e, E::GsoType(0x81))
        }),
        ("no NEEDS_CSUM", parse_after(&v4, |b| b[0] = 0), |e| {
            matches!(e, E::NoPartialChecksum)
        }),
        ("csum_start", parse_after(&v4, |b| b[6] = 21), |e| {
            matches!(e, E::ChecksumPlace { .. })
        }),
        ("csum_offset", parse_after(&v4, |b| b[8] = 6), |e| {
            matches!(e, E::ChecksumPlace { .. })
        }),
        ("gso_size 0", parse_after(&v4, |b| b[4..6].fill(0)), |e| {
            matches!(e, E::ZeroGsoSize)
        }),
        ("long IPv4", parse_after(&v4, |b| ip_total(b, 5000)), |e| {
            matches!(e, E::Length { .. })
        }),
        ("short IPv4", parse_after(&v4, |b| ip_total(b, 100)), |e| {
            matches!(e, E::Length { .. })
        }),
        (
            "truncated",
            parse_after(&v4, |b| b.truncate(10 + 40)),
            |e| matches!(e, E::Length { .. }),
        ),
        ("fragment", parse_after(&v4, |b| b[16] |= 0x20), |e| {
            matches!(e, E::Fragment)
        }),
        ("UDP in IPv4", parse_after(&v4, |b| b[19] = 17), |e| {
            matches!(e, E::NotTcp(17))
        }),
        ("IHL 3", parse_after(&v4, |b| b[10] = 0x43), |e| {
            matches!(e, E::Ipv4(_))
        }),
        (
            "IPv6 as TCPV4",
            parse_after(&v6, |b| b[1] = GSO_TCPV4),
            |e| matches!(e, E::Ipv4(_)),
        ),
        (
            "IPv4 as TCPV6",
            parse_after(&v4, |b| b[1] = GSO_TCPV6),
            |e| matches!(e, E::Ipv6(_)),
        ),
        (
            "long IPv6",
            parse_after(&v6, |b| b[14..16].copy_from_slice(&9000u16.to_be_bytes())),
            |e| matches!(e, E::Length { .. }),
        ),
        (
            "IPv6 jumbogram",
            parse_after(&v6, |b| b[14..16].fill(0)),
            |e| matches!(e, E::Length { .. }),
        ),
        ("IPv6 hop-by-hop", parse_after(&v6, |b| b[16] = 0), |e| {
            matches!(e, E::NotTcp(0))
        }),
        (
            "TCP data offset beyond the packet",
            parse_after(&v4, |b| {
                b.truncate(10 + 20 + 20);
                ip_total(b, 40);
                b[10 + 20 + 12] = 0xf0;
            }),
            |e| matches!(e, E::Tcp(_)),
        ),
        (
            "TCP data offset 4",
            parse_after(&v4, |b| b[10 + 20 + 12] = 0x40),
            |e| matches!(e, E::Tcp(_)),
        ),
        (
            "no payload",
            parse_after(&v4, |b| {
                b.truncate(10 + 20 + 32);
                ip_total(b, 52);
            }),
            |e| matches!(e, E::NoPayload),
        ),
    ];
    for (what, got, ok) in cases {
        match got {
            Err(e) => assert!(ok(&e), "{what}: wrong error {e:?}"),
            Ok(n) => panic!("{what}: parsed as {n} segments"),
        }
    }
}

#[test]
fn complete_checksum_checks_its_offsets() {
    let mut b = gso_v4(1000, &payload(500), false);
    // A GSO packet is not finished in one piece.
    assert!(matches!(
        complete_checksum(&mut b),
        Err(GsoError::GsoType(1))
    ));
    b[1] = GSO_NONE;
    b[8..10].copy_from_slice(&2000u16.to_le_bytes());
    assert!(matches!(
        complete_checksum(&mut b),
        Err(GsoError::ChecksumOutside { .. })
    ));
    assert!(matches!(
        complete_checksum(&mut [1u8; 4]),
        Err(GsoError::Short { len: 4 })
    ));
    // Without NEEDS_CSUM only DATA_VALID goes.
    let mut plain = [0u8; 30];
    plain[0] = F_DATA_VALID;
    assert!(complete_checksum(&mut plain).is_ok());
    assert_eq!(plain, [0u8; 30]);
}

#[test]
fn vnet_header_round_trips() {
    let v = VnetHdr {
        flags: 1,
        gso_type: 4,
        hdr_len: 0x1234,
        gso_size: 1448,
        csum_start: 40,
        csum_offset: 16,
    };
    assert_eq!(VnetHdr::parse(&v.to_bytes()).expect("parse"), v);
    assert_eq!(v.to_bytes()[4..6], 1448u16.to_le_bytes());
}

#[test]
fn our_packets_tell_the_kernel_their_headers() {
    // TCP over IPv4 and IPv6: IP header plus TCP header with its 12 bytes of options.
    let data = payload(3000);
    for (buf, ip_len) in [(gso_v4(1000, &data, false), 20), (gso_v6(1000, &data), 40)] {
        let pkt = &buf[VNET_HDR_LEN..];
        let headers = ip_len + 32;
        assert_eq!(usize::from(linear_hint(pkt)), headers);
        let h = VnetHdr::for_packet(pkt, Some(ip_len));
        assert_eq!((h.flags, h.gso_type), (F_NEEDS_CSUM, GSO_NONE));
        assert_eq!((h.csum_start, h.csum_offset), (ip_len as u16, 16));
        assert_eq!(usize::from(h.hdr_len), headers);
        let whole = VnetHdr::for_packet(pkt, None);
        assert_eq!(whole.flags, 0);
        assert_eq!(usize::from(whole.hdr_len), headers);
        // Cut inside the TCP header: only the IP header is whole.
        assert_eq!(usize::from(linear_hint(&pkt[..ip_len + 20])), ip_len);
    }
    // Not TCP (the ceiling's protocol 253): the IP header.
    let mut raw = gso_v4(1000, &data, false)[VNET_HDR_LEN..].to_vec();
    raw[9] = 253;
    assert_eq!(linear_hint(&raw), 20);
    // Nothing that parses: the kernel's default.
    // (Empty, a cut IPv4 header, IHL 15 in 30 bytes, IHL 1, version 1.)
    for junk in [
        &[][..],
        &[0x45, 0, 0][..],
        &[0x4f; 30][..],
        &[0x41; 64][..],
        &[0x10; 64][..],
    ] {
        assert_eq!(linear_hint(junk), 0, "{junk:?}");
    }
}

proptest! {
    /// Any bytes: the hint is 0 or within the packet.
    #[test]
    fn the_linear_hint_stays_inside_the_packet(pkt in proptest::collection::vec(any::<u8>(), 0..200)) {
        prop_assert!(usize::from(linear_hint(&pkt)) <= pkt.len());
    }

    /// Any payload length, gso_size and set of cuts: the runs check out and add up.
    #[test]
    fn any_split_adds_up(
        gso in 1u16..1500,
        count in 1usize..=40,
        last in 1usize..1500,
        v6 in any::<bool>(),
        cut_bits in any::<u64>(),
    ) {
        let len = (count - 1) * usize::from(gso) + last.min(usize::from(gso));
        let data = payload(len);
        let buf = if v6 { gso_v6(gso, &data) } else { gso_v4(gso, &data, false) };
        let cuts: Vec<usize> = (1..count).filter(|i| cut_bits >> (i % 64) & 1 == 1).collect();
        prop_assert_eq!(split(&buf, &cuts, v6), data);
    }

    /// Whatever bytes come in, parsing neither panics nor yields a packet whose runs cannot be
    /// built.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(g) = GsoPacket::parse(&bytes) {
            let mut out = Vec::new();
            prop_assert!(g.build_run(0, g.segments(), &mut out).is_ok());
        }
        let mut b = bytes.clone();
        let _ = complete_checksum(&mut b);
    }

    /// A valid packet with one byte changed: refused or parsed, never a panic, and what
    /// parses can be split into single segments.
    #[test]
    fn mutated_packets_never_panic(at in 0usize..200, value in any::<u8>(), v6 in any::<bool>()) {
        let data = payload(3000);
        let mut buf = if v6 { gso_v6(1000, &data) } else { gso_v4(1000, &data, false) };
        let i = at % buf.len();
        buf[i] = value;
        if let Ok(g) = GsoPacket::parse(&buf) {
            let mut out = Vec::new();
            for s in 0..g.segments() {
                prop_assert!(g.build_run(s, s + 1, &mut out).is_ok());
            }
        }
    }
}
