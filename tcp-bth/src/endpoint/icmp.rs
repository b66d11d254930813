//! ICMP errors about packets we sent (RFC 5927): destination unreachable and packet too big,
//! for IPv4 and IPv6, parsed with etherparse. Everything is checked before it is believed:
//! the outer packet and the ICMP checksum, the error's type, and the quoted packet, which must
//! be one of ours (from the address the error came to, TCP, with at least the 8 bytes of TCP
//! header that hold the ports and the sequence number, RFC 792/4443). The connection then
//! checks the sequence number (`conn/icmp.rs`).

use crate::conn::{IcmpError, Unreachable};
use crate::wire::IpPair;
use etherparse::{
    icmpv4, icmpv6, Icmpv4Header, Icmpv4Slice, Icmpv4Type, Icmpv6Slice, Icmpv6Type, IpNumber,
    LaxIpSlice,
};

/// An ICMP error and the packet of ours it quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quoted {
    /// The quoted packet's addresses as we sent it: `src` us.
    pub ip: IpPair,
    /// The quoted TCP source port: ours.
    pub src_port: u16,
    /// The quoted TCP destination port: the peer's.
    pub dst_port: u16,
    /// The quoted TCP sequence number.
    pub seq: u32,
    /// What the ICMP message reported.
    pub error: IcmpError,
}

/// Why an ICMP message was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpDrop {
    /// An ICMP message of another type (echo, time exceeded, redirect, …): not for TCP.
    NotAnError,
    /// Malformed: checksum, lengths, a quoted packet that is not ours or not TCP.
    Malformed,
}

/// The error an ICMP message (the payload of an IP packet received with addresses `outer`,
/// `dst` us) reports about one of our TCP packets.
pub fn parse(outer: IpPair, proto: IpNumber, icmp: &[u8]) -> Result<Quoted, IcmpDrop> {
    let (error, quoted) = match (outer, proto) {
        (IpPair::V4 { .. }, IpNumber::ICMP) => v4(icmp)?,
        (IpPair::V6 { src, dst }, IpNumber::IPV6_ICMP) => v6(src, dst, icmp)?,
        _ => return Err(IcmpDrop::NotAnError),
    };
    let (inner, _) = LaxIpSlice::from_slice(quoted).map_err(|_| IcmpDrop::Malformed)?;
    let ip = match &inner {
        LaxIpSlice::Ipv4(v4) => IpPair::V4 {
            src: v4.header().source(),
            dst: v4.header().destination(),
        },
        LaxIpSlice::Ipv6(v6) => IpPair::V6 {
            src: v6.header().source(),
            dst: v6.header().destination(),
        },
    };
    // Ours: sent from the address the error came to, in the same family.
    if !same_host(ip, outer.reversed()) {
        return Err(IcmpDrop::Malformed);
    }
    let payload = inner.payload();
    let tcp = payload.payload;
    if payload.ip_number != IpNumber::TCP || payload.fragmented || tcp.len() < 8 {
        return Err(IcmpDrop::Malformed);
    }
    Ok(Quoted {
        ip,
        src_port: u16::from_be_bytes([tcp[0], tcp[1]]),
        dst_port: u16::from_be_bytes([tcp[2], tcp[3]]),
        seq: u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]),
        error,
    })
}

/// Do `a` and `b` have the same source address (and family)?
fn same_host(a: IpPair, b: IpPair) -> bool {
    match (a, b) {
        (IpPair::V4 { src, .. }, IpPair::V4 { src: s, .. }) => src == s,
        (IpPair::V6 { src, .. }, IpPair::V6 { src: s, .. }) => src == s,
        _ => false,
    }
}

fn v4(bytes: &[u8]) -> Result<(IcmpError, &[u8]), IcmpDrop> {
    use icmpv4::DestUnreachableHeader as D;
    let icmp = Icmpv4Slice::from_slice(bytes).map_err(|_| IcmpDrop::Malformed)?;
    let t = icmp.icmp_type();
    let Icmpv4Type::DestinationUnreachable(d) = t.clone() else {
        return Err(IcmpDrop::NotAnError);
    };
    if Icmpv4Header::with_checksum(t, icmp.payload()).checksum != icmp.checksum() {
        return Err(IcmpDrop::Malformed);
    }
    let error = match d {
        // An MTU of 0 is RFC 792's old form without the next hop's MTU: nothing to go by.
        D::FragmentationNeeded { next_hop_mtu: 0 } => return Err(IcmpDrop::Malformed),
        D::FragmentationNeeded { next_hop_mtu } => IcmpError::PacketTooBig {
            mtu: u32::from(next_hop_mtu),
        },
        D::Network | D::NetworkUnknown | D::TosNetwork => {
            IcmpError::Unreachable(Unreachable::Network)
        }
        D::Host | D::HostUnknown | D::TosHost | D::Isolated => {
            IcmpError::Unreachable(Unreachable::Host)
        }
        D::Protocol => IcmpError::Unreachable(Unreachable::Protocol),
        D::Port => IcmpError::Unreachable(Unreachable::Port),
        D::NetworkProhibited | D::HostProhibited | D::FilterProhibited => {
            IcmpError::Unreachable(Unreachable::Prohibited)
        }
        D::SourceRouteFailed | D::HostPrecedenceViolation | D::PrecedenceCutoff => {
            IcmpError::Unreachable(Unreachable::Other {
                icmp_type: icmpv4::TYPE_DEST_UNREACH,
                code: icmp.code_u8(),
            })
        }
    };
    Ok((error, icmp.payload()))
}

fn v6(src: [u8; 16], dst: [u8; 16], bytes: &[u8]) -> Result<(IcmpError, &[u8]), IcmpDrop> {
    use icmpv6::DestUnreachableCode as D;
    let icmp = Icmpv6Slice::from_slice(bytes).map_err(|_| IcmpDrop::Malformed)?;
    let error = match icmp.icmp_type() {
        Icmpv6Type::DestinationUnreachable(code) => IcmpError::Unreachable(match code {
            D::NoRoute => Unreachable::Network,
            D::Address => Unreachable::Host,
            D::Port => Unreachable::Port,
            D::Prohibited | D::SourceAddressFailedPolicy | D::RejectRoute => {
                Unreachable::Prohibited
            }
            D::BeyondScope => Unreachable::Other {
                icmp_type: icmpv6::TYPE_DST_UNREACH,
                code: icmp.code_u8(),
            },
        }),
        Icmpv6Type::PacketTooBig { mtu } => IcmpError::PacketTooBig { mtu },
        _ => return Err(IcmpDrop::NotAnError),
    };
    if !icmp.is_checksum_valid(src, dst) {
        return Err(IcmpDrop::Malformed);
    }
    Ok((error, icmp.payload()))
}

/// The ICMP error a router or host would send about `ours`, an IP packet we sent: from its
/// destination's address (as the peer's own host answers; a router would use its own, which
/// nothing here reads) to its source, quoting as much of it as RFC 1812 §4.3.2.3 allows in a
/// 576-byte reply (IPv6: RFC 4443's 1280). For the simulator and tests; None if `ours` is not
/// a well-formed IP packet.
pub fn emit(ours: &[u8], error: IcmpError) -> Option<Vec<u8>> {
    use etherparse::PacketBuilder;
    let (ip, _, _) = super::ip::parse_any(ours).ok()?;
    let mut out = Vec::new();
    match ip {
        IpPair::V4 { src, dst } => {
            let d = match error {
                IcmpError::PacketTooBig { mtu } => {
                    icmpv4::DestUnreachableHeader::FragmentationNeeded {
                        next_hop_mtu: u16::try_from(mtu).unwrap_or(u16::MAX),
                    }
                }
                IcmpError::Unreachable(u) => v4_code(u),
            };
            let quoted = &ours[..ours.len().min(576 - 28)];
            PacketBuilder::ipv4(dst, src, 64)
                .icmpv4(Icmpv4Type::DestinationUnreachable(d))
                .write(&mut out, quoted)
                .ok()?;
        }
        IpPair::V6 { src, dst } => {
            let t = match error {
                IcmpError::PacketTooBig { mtu } => Icmpv6Type::PacketTooBig { mtu },
                IcmpError::Unreachable(u) => Icmpv6Type::DestinationUnreachable(v6_code(u)),
            };
            let quoted = &ours[..ours.len().min(1280 - 48)];
            PacketBuilder::ipv6(dst, src, 64)
                .icmpv6(t)
                .write(&mut out, quoted)
                .ok()?;
        }
    }
    Some(out)
}

/// An ICMPv4 code for `u` (the first of those `v4` maps to it).
fn v4_code(u: Unreachable) -> icmpv4::DestUnreachableHeader {
    use icmpv4::DestUnreachableHeader as D;
    match u {
        Unreachable::Network => D::Network,
        Unreachable::Host => D::Host,
        Unreachable::Protocol => D::Protocol,
        Unreachable::Port => D::Port,
        Unreachable::Prohibited => D::FilterProhibited,
        Unreachable::Other { .. } => D::SourceRouteFailed,
    }
}

/// An ICMPv6 code for `u` (the first of those `v6` maps to it).
fn v6_code(u: Unreachable) -> icmpv6::DestUnreachableCode {
    use icmpv6::DestUnreachableCode as D;
    match u {
        Unreachable::Network | Unreachable::Protocol => D::NoRoute,
        Unreachable::Host => D::Address,
        Unreachable::Port => D::Port,
        Unreachable::Prohibited => D::Prohibited,
        Unreachable::Other { .. } => D::BeyondScope,
    }
}

#[cfg(test)]
mod tests;
