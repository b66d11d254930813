//! Shared code of the tcp-bth fuzz targets (cargo-fuzz / libFuzzer) and of the corpus generator.
//!
//! Targets: `bth_option` ([`check_bth_option`]), `tcp_segment` ([`check_tcp_segment`]),
//! `conn_receive` ([`conn::run`]), `endpoint_input` ([`endpoint::run`]). See `docs/reliability.md`.

pub mod conn;
pub mod endpoint;

use bth_wire::{Bth, Inbound, IpPair, SegmentError, TcpOptions, TcpRepr};

/// Addresses the segments of the parser targets are checksummed for.
pub const IP: IpPair = IpPair::V4 {
    src: [10, 77, 0, 1],
    dst: [10, 77, 0, 2],
};

/// `Bth::from_bytes` never panics, and accepted bytes emit back to exactly themselves.
pub fn check_bth_option(data: &[u8]) {
    let Ok(bth) = Bth::from_bytes(data) else {
        return;
    };
    let out = bth.to_vec().expect("an accepted option must emit");
    assert_eq!(out, data, "parse→emit is not the identity for {bth:?}");
    assert_eq!(bth.buffer_len(), data.len());
    // The ICRC check is total.
    let _ = bth.icrc_ok(&[]);
}

/// Internet checksum of a TCP segment for `ip` (checksum field taken as zero).
pub fn tcp_checksum(ip: IpPair, seg: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    let mut add = |b: &[u8]| {
        for c in b.chunks(2) {
            let w = if c.len() == 2 {
                u16::from_be_bytes([c[0], c[1]])
            } else {
                u16::from_be_bytes([c[0], 0])
            };
            sum += u64::from(w);
        }
    };
    match ip {
        IpPair::V4 { src, dst } => {
            add(&src);
            add(&dst);
            add(&[0, 6]);
            add(&(seg.len() as u16).to_be_bytes());
        }
        IpPair::V6 { src, dst } => {
            add(&src);
            add(&dst);
            add(&(seg.len() as u32).to_be_bytes());
            add(&[0, 0, 0, 6]);
        }
    }
    add(&seg[..16]);
    add(&seg[18..]);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The segment parsers never panic; what parses re-emits and re-parses (with checksum) to the
/// same value; a segment with its checksum fixed passes the checksum check.
pub fn check_tcp_segment(data: &[u8]) {
    let _ = TcpOptions::parse(data);
    let _ = TcpRepr::parse(data, Some(IP));
    let parsed = TcpRepr::parse(data, None);
    if let Ok(seg) = &parsed {
        if let Some(b) = &seg.options.bth {
            if let Ok(i) = Inbound::from_bth(b, seg.payload) {
                assert!(u64::from(i.offset) + i.payload.len() as u64 <= 1 << 24);
                assert_eq!(i.end() as usize, i.offset as usize + i.payload.len());
            }
            let _ = b.icrc_ok(seg.payload);
        }
        if let Ok(out) = seg.to_vec(IP) {
            let again = TcpRepr::parse(&out, Some(IP)).expect("emitted segment must parse");
            assert_eq!(&again, seg, "parse→emit→parse changed the segment");
        }
    }
    if data.len() >= 20 && data.len() <= 0xffff {
        let mut fixed = data.to_vec();
        let c = tcp_checksum(IP, &fixed);
        fixed[16..18].copy_from_slice(&c.to_be_bytes());
        match TcpRepr::parse(&fixed, Some(IP)) {
            Err(SegmentError::Checksum { expected, got }) => {
                panic!("checksum refused after fixing it: expected {expected:#x} got {got:#x}")
            }
            r => assert_eq!(r.is_ok(), parsed.is_ok()),
        }
    }
}
