//! Properties of the TCP segment codec: round trips with checksums, the 40-byte option budget,
//! refusals instead of truncation, no panics on random bytes.

mod common;

use bth_wire::{
    Bth, Extension, IpPair, Opcode, Reth, SackBlock, SegmentError, TcpFlags, TcpOptionError,
    TcpOptions, TcpRepr, Timestamps, MAX_OPTIONS_LEN,
};
use common::*;
use proptest::prelude::*;

const IP: IpPair = IpPair::V4 {
    src: [10, 0, 0, 1],
    dst: [10, 0, 0, 2],
};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn segments_round_trip_within_budget(
        (flags, options) in segment_options(),
        payload in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let r = repr(flags, options, &payload);
        let bytes = r.to_vec(IP).unwrap();
        let hlen = usize::from(bytes[12] >> 4) * 4;
        prop_assert!(hlen <= 60);
        prop_assert!(hlen - 20 <= MAX_OPTIONS_LEN);
        prop_assert_eq!(hlen, r.header_len());
        prop_assert_eq!(TcpRepr::parse(&bytes, Some(IP)), Ok(r.clone()));
        // Parsed the other way round the checksum no longer matches.
        let other = IpPair::V4 { src: [10, 0, 0, 3], dst: [10, 0, 0, 2] };
        let wrong_ip = TcpRepr::parse(&bytes, Some(other));
        prop_assert!(matches!(wrong_ip, Err(SegmentError::Checksum { .. })), "{:?}", wrong_ip);
    }

    #[test]
    fn options_round_trip(opts in segment_options().prop_map(|(_, o)| o)) {
        let area = opts.emit().unwrap();
        prop_assert_eq!(area.len(), opts.encoded_len());
        prop_assert_eq!(area.len() % 4, 0);
        prop_assert_eq!(TcpOptions::parse(&area), Ok(opts));
    }

    #[test]
    fn over_budget_is_refused_not_truncated(b in bth(), blocks in sack_blocks(4)) {
        let mut o = TcpOptions { bth: Some(b), mss: Some(1460), timestamps: Some(Timestamps::default()), ..Default::default() };
        o.sack.extend(blocks);
        let need = o.encoded_len();
        if need > MAX_OPTIONS_LEN {
            prop_assert_eq!(o.emit(), Err(TcpOptionError::TooLong { needed: need, room: 40 }));
            let r = repr(TcpFlags::ACK, o, &[]);
            let emitted = r.to_vec(IP);
            let refused = matches!(emitted, Err(SegmentError::Options(TcpOptionError::TooLong { .. })));
            prop_assert!(refused, "{:?}", emitted);
        } else {
            prop_assert_eq!(o.emit().unwrap().len(), need);
        }
    }

    #[test]
    fn sack_room_is_exact(b in bth(), ts in any::<bool>()) {
        let o = TcpOptions {
            bth: Some(b),
            timestamps: ts.then(Timestamps::default),
            ..Default::default()
        };
        let room = o.sack_room();
        prop_assume!(o.encoded_len() <= MAX_OPTIONS_LEN);
        let mut fits = o.clone();
        fits.sack.extend((0..room as u32).map(|i| SackBlock { left: i, right: i + 1 }));
        prop_assert!(fits.emit().is_ok());
        if room < 4 {
            fits.sack.push(SackBlock { left: 9, right: 10 });
            prop_assert!(fits.emit().is_err());
        }
    }

    #[test]
    fn random_segments_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..100)) {
        let _ = TcpRepr::parse(&bytes, Some(IP));
        let _ = TcpRepr::parse(&bytes, None);
        let _ = TcpOptions::parse(&bytes);
    }

    #[test]
    fn corrupted_segments_are_refused(
        (flags, options) in segment_options(),
        payload in prop::collection::vec(any::<u8>(), 1..64),
        at in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let r = repr(flags, options, &payload);
        let mut bytes = r.to_vec(IP).unwrap();
        let i = at.index(bytes.len());
        bytes[i] ^= 1 << bit;
        // A single flipped bit is always caught by the checksum, or the header refuses to parse.
        prop_assert!(TcpRepr::parse(&bytes, Some(IP)).is_err());
    }
}

#[test]
fn syn_with_all_negotiation_options_fits() {
    let mut hello = Bth::new(Opcode::Hello);
    hello.timestamps = Some(Timestamps { tsval: 1, tsecr: 0 });
    hello.mbo = 0xFF_FFFF;
    let o = TcpOptions {
        mss: Some(1460),
        window_scale: Some(7),
        sack_permitted: true,
        bth: Some(hello),
        ..Default::default()
    };
    assert_eq!(o.encoded_len(), 36);
}

/// Amendment 4: the SYN's hello with T=0 (16 bytes) beside the RFC 7323 timestamp option:
/// MSS 4 + WS 3 + SACK-permitted 2 + TS 10 + hello 16 = 35 bytes, 36 padded, within 40. With
/// a T=1 hello (24) the same set would need 43 and is refused, not truncated.
#[test]
fn syn_with_t0_hello_and_timestamp_option_fits() {
    let mut hello = Bth::new(Opcode::Hello);
    hello.mbo = 0xFF_FFFF;
    hello.seq_framed = true;
    let mut o = TcpOptions {
        mss: Some(1460),
        window_scale: Some(14),
        sack_permitted: true,
        timestamps: Some(Timestamps {
            tsval: u32::MAX,
            tsecr: 0,
        }),
        bth: Some(hello),
        ..Default::default()
    };
    assert_eq!(o.encoded_len(), 36);
    let area = o.emit().unwrap();
    assert_eq!(area.len(), 36);
    assert_eq!(area[35], 0, "one byte of EOL padding");
    assert_eq!(TcpOptions::parse(&area), Ok(o.clone()));
    let r = repr(TcpFlags::SYN, o.clone(), &[]);
    let bytes = r.to_vec(IP).unwrap();
    assert_eq!(bytes.len(), 20 + 36);
    assert_eq!(TcpRepr::parse(&bytes, Some(IP)), Ok(r));
    hello.timestamps = Some(Timestamps::default());
    o.bth = Some(hello);
    assert_eq!(
        o.emit(),
        Err(TcpOptionError::TooLong {
            needed: 44,
            room: 40
        })
    );
}

#[test]
fn ack_with_bth_has_room_for_exactly_one_sack_block() {
    let mut ack = Bth::new(Opcode::Acknowledge);
    ack.timestamps = Some(Timestamps::default());
    let o = TcpOptions {
        bth: Some(ack),
        ..Default::default()
    };
    assert_eq!(o.sack_room(), 1);
}

#[test]
fn largest_data_option_leaves_no_room() {
    let mut w = Bth::new(Opcode::RdmaWriteOnlyWithImmediate);
    w.timestamps = Some(Timestamps::default());
    w.ext = Extension::RethImmediate(Reth { rkey: 1, addr: 2 }, 3);
    let o = TcpOptions {
        bth: Some(w),
        ..Default::default()
    };
    assert_eq!(o.encoded_len(), 40);
    assert_eq!(o.sack_room(), 0);
}

#[test]
fn unknown_options_are_skipped_by_length_and_bad_lengths_refused() {
    // NOP, unknown kind 30 len 4, MSS, another experiment under 254 with ExID 0x1234, EOL.
    let area = [
        1, 30, 4, 0xAA, 0xBB, 2, 4, 0x05, 0xB4, 254, 4, 0x12, 0x34, 0, 0, 0,
    ];
    let o = TcpOptions::parse(&area).unwrap();
    assert_eq!(o.mss, Some(1460));
    assert!(o.bth.is_none());
    assert_eq!(
        TcpOptions::parse(&[2, 5, 0, 0, 0]),
        Err(TcpOptionError::BadLength { kind: 2, len: 5 })
    );
    assert_eq!(
        TcpOptions::parse(&[30, 1]),
        Err(TcpOptionError::BadLength { kind: 30, len: 1 })
    );
    assert_eq!(
        TcpOptions::parse(&[30, 9, 0]),
        Err(TcpOptionError::Truncated { kind: 30, at: 0 })
    );
    assert_eq!(
        TcpOptions::parse(&[5, 2]),
        Err(TcpOptionError::BadLength { kind: 5, len: 2 })
    );
}

#[test]
fn two_bth_options_are_refused() {
    let one = Bth::new(Opcode::SendOnly).to_vec().unwrap();
    let mut area = one.clone();
    area.extend(&one);
    assert_eq!(TcpOptions::parse(&area), Err(TcpOptionError::DuplicateBth));
}

#[test]
fn malformed_bth_inside_tcp_is_reported() {
    let mut opt = Bth::new(Opcode::SendOnly).to_vec().unwrap();
    opt[4] |= 0x08; // M on an ONLY opcode
    assert!(matches!(
        TcpOptions::parse(&opt),
        Err(TcpOptionError::Bth(
            bth_wire::BthError::MoreBitInconsistent { .. }
        ))
    ));
}

#[test]
fn short_and_bad_offset_segments_are_refused() {
    assert!(matches!(
        TcpRepr::parse(&[0u8; 19], None),
        Err(SegmentError::Truncated { .. })
    ));
    let mut hdr = [0u8; 20];
    hdr[12] = 4 << 4;
    assert_eq!(
        TcpRepr::parse(&hdr, None),
        Err(SegmentError::BadDataOffset(4))
    );
    hdr[12] = 15 << 4;
    assert!(matches!(
        TcpRepr::parse(&hdr, None),
        Err(SegmentError::Truncated {
            needed: 60,
            got: 20
        })
    ));
}
