//! IP framing of the endpoint's segments: IPv4 and IPv6 headers parsed and built with
//! etherparse, so drivers move whole IP packets and never look inside them.

use crate::wire::IpPair;
use etherparse::{IpNumber, IpSlice, Ipv4Header, Ipv6FlowLabel, Ipv6Header};

/// Why an IP packet was not handed to TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpDrop {
    /// Not a well-formed IPv4 or IPv6 packet (bad version, lengths, IPv4 header checksum).
    Malformed,
    /// Another transport protocol.
    NotTcp,
    /// A fragment: this stack sends with DF set and reassembles nothing.
    Fragment,
}

/// The TCP segment of an IP packet and its address pair as received (`src` the peer).
pub fn parse(packet: &[u8]) -> Result<(IpPair, &[u8]), IpDrop> {
    let (pair, proto, payload) = parse_any(packet)?;
    if proto != IpNumber::TCP {
        return Err(IpDrop::NotTcp);
    }
    Ok((pair, payload))
}

/// The address pair of a well-formed, unfragmented IP packet as received, its protocol and
/// its payload.
pub fn parse_any(packet: &[u8]) -> Result<(IpPair, IpNumber, &[u8]), IpDrop> {
    let ip = IpSlice::from_slice(packet).map_err(|_| IpDrop::Malformed)?;
    if ip.is_fragmenting_payload() {
        return Err(IpDrop::Fragment);
    }
    let pair = match &ip {
        IpSlice::Ipv4(v4) => {
            let h = v4.header();
            if h.to_header().calc_header_checksum() != h.header_checksum() {
                return Err(IpDrop::Malformed);
            }
            IpPair::V4 {
                src: h.source(),
                dst: h.destination(),
            }
        }
        IpSlice::Ipv6(v6) => IpPair::V6 {
            src: v6.header().source(),
            dst: v6.header().destination(),
        },
    };
    let payload = ip.payload();
    Ok((pair, payload.ip_number, payload.payload))
}

/// Length of the IP header [`emit_header`] writes for `ip`.
pub fn header_len(ip: IpPair) -> usize {
    match ip {
        IpPair::V4 { .. } => Ipv4Header::MIN_LEN,
        IpPair::V6 { .. } => Ipv6Header::LEN,
    }
}

/// Write the IP header for a TCP segment of `seg_len` bytes already at
/// `buf[header_len(ip)..]` (`src` us); false if the segment does not fit one IP packet or
/// `buf` has no room for the header.
pub fn emit_header(ip: IpPair, seg_len: usize, buf: &mut [u8]) -> bool {
    let (Ok(len), true) = (u16::try_from(seg_len), buf.len() >= header_len(ip)) else {
        return false;
    };
    match ip {
        IpPair::V4 { src, dst } => {
            let Ok(mut h) = Ipv4Header::new(len, 64, IpNumber::TCP, src, dst) else {
                return false;
            };
            h.dont_fragment = true;
            h.header_checksum = h.calc_header_checksum();
            buf[..Ipv4Header::MIN_LEN].copy_from_slice(&h.to_bytes());
        }
        IpPair::V6 { src, dst } => {
            let h = Ipv6Header {
                traffic_class: 0,
                flow_label: Ipv6FlowLabel::ZERO,
                payload_length: len,
                next_header: IpNumber::TCP,
                hop_limit: 64,
                source: src,
                destination: dst,
            };
            buf[..Ipv6Header::LEN].copy_from_slice(&h.to_bytes());
        }
    }
    true
}

/// Write `segment` behind an IP header for `ip` (`src` us) into `buf` (cleared first): for
/// tools and tests that build packets from segments they hold.
pub fn emit(ip: IpPair, segment: &[u8], buf: &mut Vec<u8>) {
    let at = header_len(ip);
    buf.clear();
    buf.resize(at + segment.len(), 0);
    buf[at..].copy_from_slice(segment);
    // A segment from a connection fits its MSS, far below 64 KiB; one that does not is a bug
    // in the caller.
    assert!(
        emit_header(ip, segment.len(), buf),
        "segment within the IP payload limit"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_families_round_trip_and_other_packets_are_refused() {
        let v4 = IpPair::V4 {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
        };
        let v6 = IpPair::V6 {
            src: [0xfd; 16],
            dst: [0xfe; 16],
        };
        let seg = [1u8, 2, 3, 4];
        let mut buf = Vec::new();
        for ip in [v4, v6] {
            emit(ip, &seg, &mut buf);
            assert_eq!(parse(&buf), Ok((ip, &seg[..])));
        }
        emit(v4, &seg, &mut buf);
        buf[9] = 17; // UDP; the header checksum no longer matches
        assert_eq!(parse(&buf), Err(IpDrop::Malformed));
        let mut h = Ipv4Header::new(4, 64, IpNumber::UDP, [1; 4], [2; 4]).unwrap();
        h.header_checksum = h.calc_header_checksum();
        let mut udp = h.to_bytes().to_vec();
        udp.extend_from_slice(&seg);
        assert_eq!(parse(&udp), Err(IpDrop::NotTcp));
        h.protocol = IpNumber::TCP;
        h.more_fragments = true;
        h.header_checksum = h.calc_header_checksum();
        let mut frag = h.to_bytes().to_vec();
        frag.extend_from_slice(&seg);
        assert_eq!(parse(&frag), Err(IpDrop::Fragment));
        assert_eq!(parse(&[0x45, 0]), Err(IpDrop::Malformed));
        assert_eq!(parse(&[]), Err(IpDrop::Malformed));
    }
}
