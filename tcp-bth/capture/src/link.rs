//! Link layers: the link types a capture may use and the IP packet inside a frame of each.

use super::error::{Malformed, NotTcp, Stop};

/// LINKTYPE_NULL: 4-byte address family in the capturing host's byte order (BSD loopback).
pub const LINKTYPE_NULL: u32 = 0;
/// LINKTYPE_ETHERNET.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// LINKTYPE_RAW: the packet starts with an IPv4 or IPv6 header. What
/// [`PcapWriter`](super::PcapWriter) writes.
pub const LINKTYPE_RAW: u32 = 101;
/// LINKTYPE_LOOP: like NULL, family in network byte order (OpenBSD loopback).
pub const LINKTYPE_LOOP: u32 = 108;
/// LINKTYPE_LINUX_SLL: Linux "cooked" capture v1 (`tcpdump -i any` on older versions).
pub const LINKTYPE_LINUX_SLL: u32 = 113;
/// LINKTYPE_IPV4: raw IPv4 only.
pub const LINKTYPE_IPV4: u32 = 228;
/// LINKTYPE_IPV6: raw IPv6 only.
pub const LINKTYPE_IPV6: u32 = 229;
/// LINKTYPE_LINUX_SLL2: Linux "cooked" capture v2 (`tcpdump -i any`).
pub const LINKTYPE_LINUX_SLL2: u32 = 276;
/// Some systems write DLT_RAW's own value (12 or 14) instead of LINKTYPE_RAW.
const DLT_RAW_12: u32 = 12;
const DLT_RAW_14: u32 = 14;
/// Link type of a pcapng packet whose interface the file never described.
pub const LINKTYPE_UNKNOWN: u32 = u32::MAX;

fn by_ethertype(t: u16, rest: &[u8]) -> Result<&[u8], Stop> {
    match t {
        ETHERTYPE_IPV4 | ETHERTYPE_IPV6 => Ok(rest),
        other => Err(NotTcp::Ethertype(other).into()),
    }
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86DD;

/// The IP packet inside a link-layer frame; or why there is none: not IP, or malformed.
pub(super) fn link_payload(linktype: u32, d: &[u8]) -> Result<&[u8], Stop> {
    let be16 = |b: &[u8], at: usize| -> Option<u16> {
        Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
    };
    match linktype {
        LINKTYPE_RAW | DLT_RAW_12 | DLT_RAW_14 | LINKTYPE_IPV4 | LINKTYPE_IPV6 => Ok(d),
        LINKTYPE_ETHERNET => {
            let mut at = 12;
            let mut t = be16(d, at).ok_or(Malformed::EthernetTruncated)?;
            // 802.1Q / 802.1ad / QinQ tags.
            while matches!(t, 0x8100 | 0x88A8 | 0x9100) {
                at += 4;
                t = be16(d, at).ok_or(Malformed::VlanTagTruncated)?;
            }
            by_ethertype(t, &d[at + 2..])
        }
        LINKTYPE_LINUX_SLL => {
            let t = be16(d, 14).ok_or(Malformed::SllTruncated)?;
            by_ethertype(t, &d[16..])
        }
        LINKTYPE_LINUX_SLL2 => {
            let t = be16(d, 0).ok_or(Malformed::Sll2Truncated)?;
            if d.len() < 20 {
                return Err(Malformed::Sll2Truncated.into());
            }
            by_ethertype(t, &d[20..])
        }
        LINKTYPE_NULL | LINKTYPE_LOOP => {
            let b: [u8; 4] = d
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .ok_or(Malformed::LoopbackTruncated)?;
            let family = if linktype == LINKTYPE_LOOP {
                u32::from_be_bytes(b)
            } else {
                // Host byte order of the capturing machine: take whichever reading is small.
                u32::from_le_bytes(b).min(u32::from_be_bytes(b))
            };
            // AF_INET 2; AF_INET6 10 (Linux), 24 (Net/OpenBSD), 28 (FreeBSD), 30 (macOS).
            match family {
                2 | 10 | 24 | 28 | 30 => Ok(&d[4..]),
                f => Err(NotTcp::LoopbackFamily(f).into()),
            }
        }
        LINKTYPE_UNKNOWN => Err(Malformed::UnknownInterface.into()),
        other => Err(NotTcp::LinkType(other).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{ip_packet, raw, segment, send, V4};
    use crate::{decode, Outcome};
    use bth_wire::Opcode;

    #[test]
    fn link_layers() {
        let seg = segment(V4, 1, Some(send(0, Opcode::SendOnly, 0)), b"x");
        let ip = ip_packet(&seg);
        let with = |head: &[u8]| [head, &ip[..]].concat();
        let mut eth = vec![0u8; 12];
        eth.extend_from_slice(&[0x81, 0x00, 0, 5, 0x08, 0x00]); // one VLAN tag
        let mut sll = vec![0u8; 14];
        sll.extend_from_slice(&[0x08, 0x00]);
        let mut sll2 = vec![0x08, 0x00];
        sll2.extend_from_slice(&[0; 18]);
        for (lt, head) in [
            (LINKTYPE_RAW, vec![]),
            (LINKTYPE_IPV4, vec![]),
            (LINKTYPE_ETHERNET, eth),
            (LINKTYPE_LINUX_SLL, sll),
            (LINKTYPE_LINUX_SLL2, sll2),
            (LINKTYPE_NULL, 2u32.to_le_bytes().to_vec()),
            (LINKTYPE_NULL, 2u32.to_be_bytes().to_vec()),
            (LINKTYPE_LOOP, 2u32.to_be_bytes().to_vec()),
        ] {
            let d = decode(1, &raw(lt, with(&head)));
            let s = d
                .segment()
                .unwrap_or_else(|| panic!("{lt}: {:?}", d.outcome));
            assert_eq!(s.icrc_ok, Some(true), "{lt}");
        }
        let mut arp = vec![0u8; 12];
        arp.extend_from_slice(&[0x08, 0x06, 0, 0]);
        assert_eq!(
            decode(1, &raw(LINKTYPE_ETHERNET, arp)).outcome,
            Outcome::NotTcp(NotTcp::Ethertype(0x0806))
        );
        assert_eq!(
            decode(1, &raw(LINKTYPE_ETHERNET, vec![0; 13])).outcome,
            Outcome::Malformed(Malformed::EthernetTruncated)
        );
        assert_eq!(
            decode(1, &raw(999, vec![0; 40])).outcome,
            Outcome::NotTcp(NotTcp::LinkType(999))
        );
        assert_eq!(
            decode(1, &raw(LINKTYPE_RAW, vec![])).outcome,
            Outcome::Malformed(Malformed::EmptyIp)
        );
    }
}
