//! The IP layer of a captured packet: addresses, the TCP bytes inside, header checksums.

use super::error::{IpError, Malformed, NotTcp, Stop};
use bth_wire::IpPair;
use std::net::IpAddr;

/// The folded (not complemented) sum of the TCP pseudo header: what a sender leaves in the
/// checksum field for the NIC to complete under checksum offload.
pub(super) fn pseudo_header_sum(ip: IpPair, tcp_len: usize) -> u16 {
    // A length no IP packet can hold has no pseudo header: 0 matches no real field value
    // better than any other.
    bth_wire::checksum::partial(ip, tcp_len).unwrap_or(0)
}

/// What the IP layer yields: addresses, TCP bytes, IPv4 header checksum verdict.
pub(super) struct IpPart<'a> {
    pub(super) src: IpAddr,
    pub(super) dst: IpAddr,
    pub(super) tcp: &'a [u8],
    pub(super) ip_checksum_ok: Option<bool>,
}

fn ipv4_checksum_ok(h: etherparse::Ipv4HeaderSlice<'_>) -> bool {
    h.to_header().calc_header_checksum() == h.header_checksum()
}

/// The TCP part of an IP packet; or why there is none: not TCP, or malformed. A packet the
/// capture cut short (`truncated`) is parsed as far as it goes.
pub(super) fn ip_layer(l3: &[u8], truncated: bool) -> Result<IpPart<'_>, Stop> {
    if l3.is_empty() {
        return Err(Malformed::EmptyIp.into());
    }
    // Either slice type: (source, destination, IPv4 header checksum verdict, payload).
    let (src, dst, ip_checksum_ok, (fragmented, ip_number, tcp)) = if truncated {
        let (ip, _ext_err) =
            etherparse::LaxIpSlice::from_slice(l3).map_err(|e| Malformed::Ip(IpError::cut(e)))?;
        let p = ip.payload();
        let ok = ip.ipv4().map(|v4| ipv4_checksum_ok(v4.header()));
        let p = (p.fragmented, p.ip_number, p.payload);
        (ip.source_addr(), ip.destination_addr(), ok, p)
    } else {
        let ip =
            etherparse::IpSlice::from_slice(l3).map_err(|e| Malformed::Ip(IpError::whole(e)))?;
        let p = ip.payload();
        let ok = ip.ipv4().map(|v4| ipv4_checksum_ok(v4.header()));
        let p = (p.fragmented, p.ip_number, p.payload);
        (ip.source_addr(), ip.destination_addr(), ok, p)
    };
    if fragmented {
        return Err(NotTcp::IpFragment.into());
    }
    if ip_number != etherparse::IpNumber::TCP {
        return Err(NotTcp::IpProtocol(ip_number.0).into());
    }
    Ok(IpPart {
        src,
        dst,
        tcp,
        ip_checksum_ok,
    })
}
