//! The kernel's TCP segmentation offload as it reaches a TUN device opened with
//! `IFF_VNET_HDR` ([`TunConfig::offload`](super::TunConfig::offload)): every packet comes with
//! a `struct virtio_net_hdr` ([`VnetHdr`]), and a TCP sender's packet may be a GSO super-packet,
//! one IP and TCP header followed by up to 64 KiB of payload that stands for
//! `ceil(payload / gso_size)` MSS-sized segments. Its TCP checksum field holds only the
//! pseudo-header sum (`NEEDS_CSUM`: whoever segments it finishes each segment's checksum).
//!
//! [`GsoPacket`] parses one and builds the packet a *run* of its consecutive segments would
//! be: the same headers with the run's IP length, IPv4 identification and header checksum,
//! TCP sequence number, flags (FIN and PSH only on the last run, CWR only on the first, as the
//! kernel's own segmentation does) and pseudo-header sum. A run of one segment is a plain
//! packet; longer runs stay GSO packets with the same `gso_size`. Packets come from the
//! kernel, but are read from a device like any wire input: every length and offset is checked
//! and a packet that does not add up is refused with a [`GsoError`], never a panic.

use etherparse::{IpNumber, Ipv4Header, Ipv6Header, TcpHeader};
use std::ops::Range;
use tcp_bth::wire::{checksum, IpPair};

/// Size of `struct virtio_net_hdr`, which `TunDevice::create` sets with `TUNSETVNETHDRSZ` on
/// every device with offload on (the stack's and the relay's) (no
/// `num_buffers`: that field is for mergeable receive buffers, which a TUN does not use).
pub const VNET_HDR_LEN: usize = 10;
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum at `csum_start + csum_offset` is partial.
pub const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_F_DATA_VALID`: the sender vouches for the checksum (the kernel sets it on
/// packets it has already verified), so the receiver does not check it.
pub const F_DATA_VALID: u8 = 2;
/// `VIRTIO_NET_HDR_GSO_NONE`, `_TCPV4`, `_TCPV6`.
pub const GSO_NONE: u8 = 0;
/// `VIRTIO_NET_HDR_GSO_TCPV4`: a TCP over IPv4 super-packet.
pub const GSO_TCPV4: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_TCPV6`: a TCP over IPv6 super-packet.
pub const GSO_TCPV6: u8 = 4;
/// Offset of the checksum in a TCP header: what `csum_offset` must be.
const TCP_CSUM_OFFSET: u16 = checksum::TCP_CHECKSUM_OFFSET as u16;

/// `struct virtio_net_hdr`, little-endian (`TunDevice::create` sets `TUNSETVNETLE`, so the byte order
/// does not depend on the host).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VnetHdr {
    /// [`F_NEEDS_CSUM`] and [`F_DATA_VALID`] bits.
    pub flags: u8,
    /// [`GSO_NONE`], [`GSO_TCPV4`] or [`GSO_TCPV6`]; any other value (ECN included) is refused
    /// ([`GsoError::GsoType`]).
    pub gso_type: u8,
    /// A hint (the sender's linear header bytes), not the header length: never trusted.
    pub hdr_len: u16,
    /// Payload bytes per segment (the MSS) of a super-packet; 0 for a single packet.
    pub gso_size: u16,
    /// Where the partial checksum's sum starts, from the start of the IP packet (the TCP
    /// header).
    pub csum_start: u16,
    /// Where the checksum field lies after `csum_start` (16 for TCP).
    pub csum_offset: u16,
}

/// Why a packet from an offloading TUN device was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GsoError {
    /// The buffer is shorter than the virtio-net header.
    #[error("{len} bytes: shorter than the {VNET_HDR_LEN}-byte virtio-net header")]
    Short {
        /// Bytes in the buffer.
        len: usize,
    },
    /// A GSO type other than [`GSO_TCPV4`] and [`GSO_TCPV6`]; for [`complete_checksum`], any
    /// but [`GSO_NONE`].
    #[error("unsupported GSO type {0:#04x} (only TCPv4 and TCPv6, without ECN)")]
    GsoType(u8),
    /// A super-packet without [`F_NEEDS_CSUM`].
    #[error("GSO packet without NEEDS_CSUM")]
    NoPartialChecksum,
    /// The partial checksum is not the TCP header's checksum field.
    #[error("partial checksum at {start}+{offset}, not at the TCP checksum ({expected}+16)")]
    ChecksumPlace {
        /// `csum_start` as given.
        start: u16,
        /// `csum_offset` as given.
        offset: u16,
        /// Where the TCP header starts: the IP header's length.
        expected: usize,
    },
    /// The checksum field lies beyond the packet.
    #[error("partial checksum at {start}+{offset} beyond the {len}-byte packet")]
    ChecksumOutside {
        /// `csum_start` as given.
        start: u16,
        /// `csum_offset` as given.
        offset: u16,
        /// Bytes of the IP packet.
        len: usize,
    },
    /// The IPv4 header does not parse.
    #[error("IPv4 header: {0}")]
    Ipv4(#[from] etherparse::err::ipv4::HeaderSliceError),
    /// The IPv6 header does not parse.
    #[error("IPv6 header: {0}")]
    Ipv6(#[from] etherparse::err::ipv6::HeaderSliceError),
    /// The TCP header does not parse.
    #[error("TCP header: {0}")]
    Tcp(#[from] etherparse::err::tcp::HeaderSliceError),
    /// The IP header's length disagrees with the packet's.
    #[error("the IP header says {claimed} bytes, the packet has {actual}")]
    Length {
        /// Bytes the IP header claims.
        claimed: usize,
        /// Bytes the packet has.
        actual: usize,
    },
    /// An IPv4 fragment.
    #[error("IPv4 fragment")]
    Fragment,
    /// The IP protocol (IPv6: next header), not TCP; IPv6 extension headers land here.
    #[error("IP protocol {0} is not TCP (IPv6 extension headers are not supported)")]
    NotTcp(u8),
    /// A super-packet whose `gso_size` is 0.
    #[error("gso_size 0")]
    ZeroGsoSize,
    /// A super-packet without TCP payload.
    #[error("GSO packet without TCP payload")]
    NoPayload,
    /// [`GsoPacket::build_run`] was asked for no segment or for segments beyond the packet's.
    #[error("segments {first}..{end} are not within the packet's {count}")]
    Run {
        /// First segment asked for.
        first: usize,
        /// One past the last segment asked for.
        end: usize,
        /// Segments in the packet.
        count: usize,
    },
}

/// `hdr_len` for a packet written to the device: its IP header, and the TCP header behind it
/// when the packet is TCP and holds one whole.
///
/// The kernel (`tun_get_user`) sizes the linear part of the socket buffer it copies a written
/// packet into from `hdr_len` and puts the rest in page fragments; with `hdr_len` 0 it makes a
/// packet larger than a page *all* linear, one high-order allocation per packet. At MTU 65000
/// that allocation and the copy into its cold memory took 23.7 % of a `bth-perf local` profile
/// (`__pi_memcpy` under `tun_get_user`); with the headers as the hint, 13.0 %. A packet that
/// does not parse gets 0, the kernel's default. A hint only: the kernel checks it against the
/// packet's length.
pub fn linear_hint(packet: &[u8]) -> u16 {
    let ip = match packet.first().map(|b| b >> 4) {
        Some(4) => usize::from(packet[0] & 0x0f) * 4,
        Some(6) => 40,
        _ => return 0,
    };
    if ip < 20 || packet.len() < ip {
        return 0;
    }
    let proto = if ip == 40 { packet[6] } else { packet[9] };
    let tcp = match packet.get(ip + 12) {
        Some(&b) if proto == 6 => usize::from(b >> 4) * 4,
        _ => 0,
    };
    let hint = if tcp >= 20 && ip + tcp <= packet.len() {
        ip + tcp
    } else {
        ip
    };
    u16::try_from(hint).unwrap_or(0)
}

impl VnetHdr {
    /// The header at the start of `buf`.
    pub fn parse(buf: &[u8]) -> Result<VnetHdr, GsoError> {
        let b: &[u8; VNET_HDR_LEN] = buf
            .get(..VNET_HDR_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or(GsoError::Short { len: buf.len() })?;
        let u = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Ok(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        })
    }

    /// The header as the device reads it: 10 bytes, little-endian.
    pub fn to_bytes(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        for (i, v) in [
            self.hdr_len,
            self.gso_size,
            self.csum_start,
            self.csum_offset,
        ]
        .into_iter()
        .enumerate()
        {
            b[2 + 2 * i..4 + 2 * i].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    /// The header for one packet we write ourselves, not a GSO packet: `NEEDS_CSUM` over the
    /// TCP header at `tcp_offset` when `partial`, and in both cases `hdr_len` set to the
    /// packet's headers ([`linear_hint`]).
    pub fn for_packet(packet: &[u8], partial: Option<usize>) -> VnetHdr {
        let mut h = match partial {
            Some(tcp_offset) => VnetHdr {
                flags: F_NEEDS_CSUM,
                // Where the device's sum starts (the TCP header) and where in it the result goes.
                csum_start: tcp_offset as u16,
                csum_offset: TCP_CSUM_OFFSET,
                ..VnetHdr::default()
            },
            None => VnetHdr::default(),
        };
        h.hdr_len = linear_hint(packet);
        h
    }

    /// Whether [`F_NEEDS_CSUM`] is set: the TCP checksum field holds only the pseudo-header
    /// sum.
    pub fn needs_csum(&self) -> bool {
        self.flags & F_NEEDS_CSUM != 0
    }
}

#[derive(Debug, Clone)]
enum IpHdr {
    V4(Ipv4Header),
    V6(Ipv6Header),
}

/// A parsed GSO TCP super-packet (borrowing its payload): see the [module docs](self).
#[derive(Debug, Clone)]
pub struct GsoPacket<'a> {
    vnet: VnetHdr,
    ip: IpHdr,
    tcp: TcpHeader,
    /// IP header length (where the TCP header starts in the IP packet).
    ip_len: usize,
    payload: &'a [u8],
    gso_size: usize,
}

impl<'a> GsoPacket<'a> {
    /// Parse `buf`, a virtio-net header and the IP packet after it, whose header says
    /// GSO TCPv4 or TCPv6. The IP lengths must match the buffer exactly, the partial checksum
    /// must be the TCP checksum, and there must be payload.
    pub fn parse(buf: &'a [u8]) -> Result<GsoPacket<'a>, GsoError> {
        let vnet = VnetHdr::parse(buf)?;
        let pkt = &buf[VNET_HDR_LEN..];
        let (ip, rest) = match vnet.gso_type {
            GSO_TCPV4 => {
                let (h, rest) = Ipv4Header::from_slice(pkt)?;
                if usize::from(h.total_len) != pkt.len() {
                    return Err(GsoError::Length {
                        claimed: h.total_len.into(),
                        actual: pkt.len(),
                    });
                }
                if h.is_fragmenting_payload() {
                    return Err(GsoError::Fragment);
                }
                if h.protocol != IpNumber::TCP {
                    return Err(GsoError::NotTcp(h.protocol.0));
                }
                (IpHdr::V4(h), rest)
            }
            GSO_TCPV6 => {
                let (h, rest) = Ipv6Header::from_slice(pkt)?;
                // A jumbogram (payload length 0) fails here too: the kernel does not hand a
                // TUN one, and the hop-by-hop header it needs would not be TCP anyway.
                let claimed = Ipv6Header::LEN + usize::from(h.payload_length);
                if claimed != pkt.len() {
                    return Err(GsoError::Length {
                        claimed,
                        actual: pkt.len(),
                    });
                }
                if h.next_header != IpNumber::TCP {
                    return Err(GsoError::NotTcp(h.next_header.0));
                }
                (IpHdr::V6(h), rest)
            }
            other => return Err(GsoError::GsoType(other)),
        };
        let ip_len = pkt.len() - rest.len();
        let (tcp, payload) = TcpHeader::from_slice(rest)?;
        if !vnet.needs_csum() {
            return Err(GsoError::NoPartialChecksum);
        }
        if usize::from(vnet.csum_start) != ip_len || vnet.csum_offset != TCP_CSUM_OFFSET {
            return Err(GsoError::ChecksumPlace {
                start: vnet.csum_start,
                offset: vnet.csum_offset,
                expected: ip_len,
            });
        }
        if vnet.gso_size == 0 {
            return Err(GsoError::ZeroGsoSize);
        }
        if payload.is_empty() {
            return Err(GsoError::NoPayload);
        }
        Ok(GsoPacket {
            vnet,
            ip,
            tcp,
            ip_len,
            payload,
            gso_size: vnet.gso_size.into(),
        })
    }

    /// The number of MSS-sized segments: `ceil(payload / gso_size)` (at least 1).
    pub fn segments(&self) -> usize {
        self.payload.len().div_ceil(self.gso_size)
    }

    /// IP and TCP header bytes, repeated in every segment.
    pub fn header_len(&self) -> usize {
        self.ip_len + self.tcp.header_len()
    }

    /// The payload bytes of segments `first..end` (within the payload whatever the range).
    fn payload_range(&self, first: usize, end: usize) -> Range<usize> {
        let len = self.payload.len();
        let start = first.saturating_mul(self.gso_size).min(len);
        start..end.saturating_mul(self.gso_size).clamp(start, len)
    }

    /// Wire length of each segment as a packet of its own, in order: what the link is asked
    /// about.
    pub fn segment_lens(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.segments()).map(|i| self.header_len() + self.payload_range(i, i + 1).len())
    }

    /// Wire bytes of segments `first..end` as packets of their own.
    pub fn run_wire_len(&self, first: usize, end: usize) -> usize {
        let segs = end.saturating_sub(first);
        self.payload_range(first, end).len() + segs * self.header_len()
    }

    /// Append to `out` the virtio-net header and IP packet of segments `first..end` (see the
    /// [module docs](self)); `Run` unless `first < end <= segments()`.
    pub fn build_run(&self, first: usize, end: usize, out: &mut Vec<u8>) -> Result<(), GsoError> {
        let count = self.segments();
        if first >= end || end > count {
            return Err(GsoError::Run { first, end, count });
        }
        let range = self.payload_range(first, end);
        let tcp_len = self.tcp.header_len() + range.len();
        // Sequence numbers wrap; the offset is below 64 KiB, so the cast loses nothing.
        let offset = (first * self.gso_size) as u32;
        let mut tcp = self.tcp.clone();
        tcp.sequence_number = tcp.sequence_number.wrapping_add(offset);
        if end < count {
            tcp.fin = false;
            tcp.psh = false;
        }
        if first > 0 {
            tcp.cwr = false;
        }
        let mut vnet = self.vnet;
        vnet.hdr_len = u16::try_from(self.header_len()).unwrap_or(u16::MAX);
        if end - first == 1 {
            vnet.gso_type = GSO_NONE;
            vnet.gso_size = 0;
        }
        out.extend_from_slice(&vnet.to_bytes());
        // The lengths cannot overflow: a run is no longer than the packet it comes from,
        // whose IP length field held it.
        let pair = match &self.ip {
            IpHdr::V4(h) => {
                let mut h = h.clone();
                h.total_len = (self.ip_len + tcp_len) as u16;
                // As the kernel's segmentation: each segment's ID one more than the last's.
                h.identification = h.identification.wrapping_add(first as u16);
                h.header_checksum = h.calc_header_checksum();
                out.extend_from_slice(&h.to_bytes());
                IpPair::V4 {
                    src: h.source,
                    dst: h.destination,
                }
            }
            IpHdr::V6(h) => {
                let mut h = h.clone();
                h.payload_length = tcp_len as u16;
                out.extend_from_slice(&h.to_bytes());
                IpPair::V6 {
                    src: h.source,
                    dst: h.destination,
                }
            }
        };
        // NEEDS_CSUM: the field holds the pseudo-header sum, folded but not complemented.
        // A run is no longer than its packet, whose IP length field held it.
        tcp.checksum = checksum::partial(pair, tcp_len).unwrap_or(0);
        out.extend_from_slice(&tcp.to_bytes());
        out.extend_from_slice(&self.payload[range]);
        Ok(())
    }
}

/// Make the receiver verify the checksum of `buf` (a virtio-net header and the packet after
/// it): finish a partial checksum in software, as the kernel's `skb_checksum_help` does, and
/// clear `NEEDS_CSUM` and `DATA_VALID`. Needed before the link corrupts a packet: with either
/// flag the receiving kernel trusts the checksum and would deliver the flipped bit. Only for
/// single packets (`GSO_NONE`) when the checksum is partial.
pub fn complete_checksum(buf: &mut [u8]) -> Result<(), GsoError> {
    let vnet = VnetHdr::parse(buf)?;
    if !vnet.needs_csum() {
        buf[0] &= !F_DATA_VALID;
        return Ok(());
    }
    if vnet.gso_type != GSO_NONE {
        return Err(GsoError::GsoType(vnet.gso_type));
    }
    let start = VNET_HDR_LEN + usize::from(vnet.csum_start);
    let field = start + usize::from(vnet.csum_offset);
    if field + 2 > buf.len() {
        return Err(GsoError::ChecksumOutside {
            start: vnet.csum_start,
            offset: vnet.csum_offset,
            len: buf.len() - VNET_HDR_LEN,
        });
    }
    // The sum covers the field itself, which holds the pseudo-header part.
    checksum::complete(buf, start, usize::from(vnet.csum_offset)).ok_or(
        GsoError::ChecksumOutside {
            start: vnet.csum_start,
            offset: vnet.csum_offset,
            len: buf.len() - VNET_HDR_LEN,
        },
    )?;
    buf[0] &= !(F_NEEDS_CSUM | F_DATA_VALID);
    Ok(())
}

#[cfg(test)]
#[path = "gso_tests.rs"]
mod tests;
