//! The Internet checksum of TCP segments (RFC 9293 §3.1, RFC 8200 §8.1): the one
//! implementation in the workspace, on etherparse's [`Sum16BitWords`] (which also sums the IPv4
//! header, `etherparse::Ipv4Header::calc_header_checksum`). Everything that fills or checks a
//! TCP checksum comes here: the stack on send and receive, the capture tools, the relay's
//! segmentation, the fuzz harnesses and tests that forge segments.
//!
//! A segment sent with checksum offload (a TUN device opened with `IFF_VNET_HDR`, flag
//! `NEEDS_CSUM`) carries only the pseudo-header sum, [`partial`]: whoever delivers it finishes
//! the sum over the segment, as a NIC does for kernel TCP, or, on a path that ends in another
//! user-space stack, nobody needs to.

use crate::tcp::{ChecksumFill, IpPair, SegmentError};
use etherparse::checksum::Sum16BitWords;

/// Offset of the checksum field in a TCP header.
pub const TCP_CHECKSUM_OFFSET: usize = 16;

/// The pseudo-header sum of a TCP segment of `len` bytes between `ip`'s addresses.
fn pseudo(ip: IpPair, len: usize) -> Result<Sum16BitWords, SegmentError> {
    let mut sum = Sum16BitWords::new();
    Ok(match ip {
        IpPair::V4 { src, dst } => {
            let len16 = u16::try_from(len).map_err(|_| SegmentError::PayloadTooLarge(len))?;
            sum.add_4bytes(src)
                .add_4bytes(dst)
                .add_2bytes([0, 6])
                .add_2bytes(len16.to_be_bytes())
        }
        IpPair::V6 { src, dst } => {
            let len32 = u32::try_from(len).map_err(|_| SegmentError::PayloadTooLarge(len))?;
            sum.add_16bytes(src)
                .add_16bytes(dst)
                .add_4bytes(len32.to_be_bytes())
                .add_4bytes([0, 0, 0, 6])
        }
    })
}

/// The checksum a segment's bytes call for, its own checksum field excluded (so it both fills
/// and checks). Over the raw bytes: a header model that drops the reserved bits would miss a
/// flip there.
pub fn tcp(ip: IpPair, seg: &[u8]) -> Result<u16, SegmentError> {
    tcp_parts::<&[u8]>(ip, seg, &[])
}

/// [`tcp`] of a segment whose header (`header`, options included, checksum field ignored) and
/// payload (`parts`, in order) lie in separate buffers. A piece of odd length shifts the next
/// one's bytes to the other half of their 16-bit words, as the concatenation would.
pub fn tcp_parts<P: AsRef<[u8]>>(
    ip: IpPair,
    header: &[u8],
    parts: &[P],
) -> Result<u16, SegmentError> {
    if header.len() < TCP_CHECKSUM_OFFSET + 2 {
        return Err(SegmentError::Truncated {
            needed: TCP_CHECKSUM_OFFSET + 2,
            got: header.len(),
        });
    }
    let len = header.len() + parts.iter().map(|p| p.as_ref().len()).sum::<usize>();
    let mut sum = pseudo(ip, len)?.add_slice(&header[..TCP_CHECKSUM_OFFSET]);
    let rest = std::iter::once(&header[TCP_CHECKSUM_OFFSET + 2..]);
    // The byte left over from an odd-length piece, waiting for its word's second byte.
    let mut odd: Option<u8> = None;
    for mut b in rest.chain(parts.iter().map(AsRef::as_ref)) {
        if let (Some(hi), Some((&lo, tail))) = (odd, b.split_first()) {
            sum = sum.add_2bytes([hi, lo]);
            odd = None;
            b = tail;
        }
        let even = b.len() & !1;
        sum = sum.add_slice(&b[..even]);
        if even < b.len() {
            odd = Some(b[even]);
        }
    }
    if let Some(hi) = odd {
        sum = sum.add_2bytes([hi, 0]);
    }
    Ok(sum.ones_complement().to_be())
}

/// What the checksum field of an offloaded segment of `len` bytes holds: the pseudo-header sum,
/// not complemented (virtio-net's `NEEDS_CSUM`: the deliverer adds the segment's words, with
/// this field in them, and complements).
pub fn partial(ip: IpPair, len: usize) -> Result<u16, SegmentError> {
    // `ones_complement` complements, in native byte order like etherparse's own checksums.
    Ok((!pseudo(ip, len)?.ones_complement()).to_be())
}

/// Fill the checksum field of `seg` (a whole TCP segment), whole or partial.
pub fn fill(ip: IpPair, seg: &mut [u8], how: ChecksumFill) -> Result<(), SegmentError> {
    let c = match how {
        ChecksumFill::Full => tcp(ip, seg)?,
        ChecksumFill::Partial => partial(ip, seg.len())?,
    };
    if seg.len() < TCP_CHECKSUM_OFFSET + 2 {
        return Err(SegmentError::Truncated {
            needed: TCP_CHECKSUM_OFFSET + 2,
            got: seg.len(),
        });
    }
    seg[TCP_CHECKSUM_OFFSET..TCP_CHECKSUM_OFFSET + 2].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

/// Finish a partial checksum in place, as a deliverer of `NEEDS_CSUM` does: the one's
/// complement sum of the 16-bit words of `buf[start..]`, complemented, written at
/// `start + offset` (what the field held, the pseudo-header sum, is part of the sum).
pub fn complete(buf: &mut [u8], start: usize, offset: usize) -> Option<()> {
    let at = start.checked_add(offset)?;
    if at.checked_add(2)? > buf.len() {
        return None;
    }
    let c = Sum16BitWords::new()
        .add_slice(&buf[start..])
        .ones_complement()
        .to_be();
    buf[at..at + 2].copy_from_slice(&c.to_be_bytes());
    Some(())
}

/// Whether a received segment's checksum holds: the sum of the pseudo-header and every word
/// of the segment, its checksum field included, is zero in one's complement (so a field of
/// 0xffff where 0 was computed, the other zero, passes too).
pub fn verify(ip: IpPair, seg: &[u8]) -> bool {
    pseudo(ip, seg.len()).is_ok_and(|s| s.add_slice(seg).ones_complement() == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn v4() -> IpPair {
        IpPair::V4 {
            src: Ipv4Addr::new(10, 0, 0, 1).octets(),
            dst: Ipv4Addr::new(10, 0, 0, 2).octets(),
        }
    }

    fn v6() -> IpPair {
        IpPair::V6 {
            src: Ipv6Addr::LOCALHOST.octets(),
            dst: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2).octets(),
        }
    }

    fn segment(len: usize) -> Vec<u8> {
        let mut s: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        s[12] = 5 << 4;
        s
    }

    #[test]
    fn a_segment_in_parts_sums_as_the_whole_at_every_split() {
        for ip in [v4(), v6()] {
            let mut s = segment(20 + 41);
            fill(ip, &mut s, ChecksumFill::Full).unwrap();
            // `verify` sums the segment in one piece, its own way: the reference.
            assert!(verify(ip, &s));
            let whole = tcp(ip, &s).unwrap();
            let (h, p) = s.split_at(20);
            for a in 0..=p.len() {
                for b in a..=p.len() {
                    let parts = [&p[..a], &p[a..b], &p[b..]];
                    assert_eq!(tcp_parts(ip, h, &parts).unwrap(), whole, "split {a} {b}");
                }
            }
            assert_eq!(tcp_parts::<&[u8]>(ip, &s, &[]).unwrap(), whole);
            // A header piece of odd length too (the checksum field must be in it).
            assert_eq!(tcp_parts(ip, &s[..21], &[&s[21..]]).unwrap(), whole);
            assert!(tcp_parts(ip, &s[..17], &[&s[17..]]).is_err());
        }
    }

    #[test]
    fn filled_checksums_verify_and_a_flipped_bit_does_not() {
        for ip in [v4(), v6()] {
            for len in [20, 21, 1480, 9000] {
                let mut s = segment(len);
                fill(ip, &mut s, ChecksumFill::Full).unwrap();
                let field = u16::from_be_bytes([s[16], s[17]]);
                assert_eq!(tcp(ip, &s).unwrap(), field);
                assert!(verify(ip, &s));
                s[len - 1] ^= 0x10;
                assert_ne!(tcp(ip, &s).unwrap(), field);
                assert!(!verify(ip, &s));
            }
        }
    }

    #[test]
    fn a_completed_partial_checksum_equals_the_full_one() {
        for ip in [v4(), v6()] {
            for len in [20, 33, 1448, 65000] {
                let mut full = segment(len);
                fill(ip, &mut full, ChecksumFill::Full).unwrap();
                let mut part = segment(len);
                fill(ip, &mut part, ChecksumFill::Partial).unwrap();
                complete(&mut part, 0, 16).unwrap();
                assert_eq!(part, full, "{len} bytes");
            }
        }
    }

    #[test]
    fn lengths_out_of_range_are_refused() {
        assert!(tcp(v4(), &[0u8; 17]).is_err());
        assert!(partial(v4(), 70_000).is_err());
        assert!(complete(&mut [0u8; 17], 0, 16).is_none());
        assert!(complete(&mut [0u8; 40], usize::MAX, 16).is_none());
    }
}
