//! Why a packet was not decoded into a segment, or decoded into one that breaks the protocol:
//! the reasons an [`Outcome`](super::Outcome) and a [`Segment`](super::Segment) carry.

use bth_wire::{InboundError, SegmentError};

/// Why a packet is skipped: it is not a TCP segment (or not one this crate can get at).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotTcp {
    /// A link-layer frame of another protocol: ARP, LLDP, RARP, MPLS are named, others get
    /// their ethertype.
    #[error("{}", ethertype_name(*.0))]
    Ethertype(u16),
    /// A loopback (NULL/LOOP) frame of an address family other than IPv4 and IPv6.
    #[error("loopback address family {0}")]
    LoopbackFamily(u32),
    /// A link type this crate does not unwrap.
    #[error("link type {0} not supported")]
    LinkType(u32),
    /// A fragment of an IP packet (fragments are not reassembled).
    #[error("IP fragment (not reassembled)")]
    IpFragment,
    /// An IP packet of another protocol (its IP protocol number).
    #[error("{}", ip_protocol_name(*.0))]
    IpProtocol(u8),
}

fn ethertype_name(t: u16) -> String {
    match t {
        0x0806 => "ARP".into(),
        0x88CC => "LLDP".into(),
        0x8035 => "RARP".into(),
        0x8847 | 0x8848 => "MPLS".into(),
        _ => format!("ethertype {t:#06x}"),
    }
}

fn ip_protocol_name(n: u8) -> String {
    match etherparse::IpNumber(n).keyword_str() {
        Some(k) => format!("IP protocol {k}"),
        None => format!("IP protocol {n}"),
    }
}

/// Why a link, IP or TCP header cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Malformed {
    /// Fewer bytes than an Ethernet header (14) on an Ethernet link.
    #[error("Ethernet header truncated")]
    EthernetTruncated,
    /// An 802.1Q/802.1ad (QinQ) VLAN tag cut short after the Ethernet header.
    #[error("VLAN tag truncated")]
    VlanTagTruncated,
    /// Linux cooked capture (v1) header.
    #[error("Linux cooked header truncated")]
    SllTruncated,
    /// Linux cooked capture v2 header.
    #[error("Linux cooked v2 header truncated")]
    Sll2Truncated,
    /// BSD loopback (NULL/LOOP) header.
    #[error("loopback header truncated")]
    LoopbackTruncated,
    /// A pcapng packet names an interface the file never described: its link type is unknown.
    #[error("packet of an interface the file does not describe")]
    UnknownInterface,
    /// No bytes left for the IP header after the link-layer header.
    #[error("empty IP packet")]
    EmptyIp,
    /// The IPv4 or IPv6 header (or an IPv6 extension header) is refused.
    #[error("IP: {0}")]
    Ip(#[source] IpError),
    /// Fewer bytes than the fixed TCP header (20) after the IP header.
    #[error("TCP header truncated: {0} bytes")]
    TcpTruncated(usize),
    /// A TCP data offset below 5 words.
    #[error("TCP data offset {0} is below 5")]
    DataOffset(u8),
    /// Fewer bytes than the TCP header's data offset announces.
    #[error("TCP header of {header_len} bytes truncated to {available}")]
    TcpHeaderCut {
        /// The header length the data offset announces, in bytes.
        header_len: usize,
        /// The bytes after the IP header.
        available: usize,
    },
    /// Source and destination of different IP versions.
    #[error("mixed IPv4/IPv6 addresses")]
    MixedAddresses,
    /// The TCP segment is refused by the codec.
    #[error("TCP: {0}")]
    Tcp(#[source] SegmentError),
}

/// An IP header the IP parser refused; its message is the parser's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(transparent)]
pub struct IpError(IpErrorKind);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum IpErrorKind {
    /// A packet captured whole.
    #[error(transparent)]
    Whole(etherparse::err::ip::SliceError),
    /// A packet the capture cut short, parsed as far as it goes.
    #[error(transparent)]
    Cut(etherparse::err::ip::LaxHeaderSliceError),
}

impl IpError {
    pub(super) fn whole(e: etherparse::err::ip::SliceError) -> IpError {
        IpError(IpErrorKind::Whole(e))
    }

    pub(super) fn cut(e: etherparse::err::ip::LaxHeaderSliceError) -> IpError {
        IpError(IpErrorKind::Cut(e))
    }
}

/// A packet the capture's snap length cut inside its headers: not decodable, not an error of
/// the packet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{header} (the capture kept {kept} of {wire_len} bytes)")]
pub struct Truncated {
    /// What the headers that were kept showed.
    pub header: Malformed,
    /// Bytes the capture kept.
    pub kept: usize,
    /// Bytes on the wire.
    pub wire_len: u32,
}

/// Why a well-formed BTH breaks a rule of the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Problem {
    /// Its fields do not describe a valid fragment of a message (e.g. a FIRST segment at a
    /// non-zero offset, a READ request whose payload is not 16 bytes).
    #[error(transparent)]
    Message(InboundError),
}

/// Why decoding stopped before a segment: the packet is skipped or malformed.
#[derive(Debug)]
pub(super) enum Stop {
    NotTcp(NotTcp),
    Malformed(Malformed),
}

impl From<NotTcp> for Stop {
    fn from(why: NotTcp) -> Stop {
        Stop::NotTcp(why)
    }
}

impl From<Malformed> for Stop {
    fn from(why: Malformed) -> Stop {
        Stop::Malformed(why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages() {
        assert_eq!(NotTcp::Ethertype(0x0806).to_string(), "ARP");
        assert_eq!(NotTcp::Ethertype(0x1234).to_string(), "ethertype 0x1234");
        assert_eq!(NotTcp::IpProtocol(17).to_string(), "IP protocol UDP");
        assert_eq!(
            NotTcp::LinkType(999).to_string(),
            "link type 999 not supported"
        );
        let t = Truncated {
            header: Malformed::TcpTruncated(10),
            kept: 30,
            wire_len: 140,
        };
        assert_eq!(
            t.to_string(),
            "TCP header truncated: 10 bytes (the capture kept 30 of 140 bytes)"
        );
    }
}
