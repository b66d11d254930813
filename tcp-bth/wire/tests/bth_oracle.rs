//! The option decoder against the straightforward byte-by-byte decoder it replaced (the oracle
//! below, kept only here): same value for every accepted input, same error for every refused one.

mod common;

use bth_wire::{
    Bth, BthError, BthOption, Extension, ExtensionKind, MessageKind, Opcode, Position, Reth,
    Timestamps,
};
use common::*;
use proptest::prelude::*;

/// The decoder as it was before the fused check: every refusal in the order the checks ran,
/// then every field read one byte at a time from its offset.
fn oracle(b: &[u8]) -> Result<Bth, BthError> {
    use BthError::*;
    let got = b.len();
    if got < 4 {
        return Err(Truncated { needed: 4, got });
    }
    if b[0] != 254 {
        return Err(WrongKind(b[0]));
    }
    if usize::from(b[1]) != got {
        return Err(LengthFieldMismatch {
            field: b[1],
            actual: got,
        });
    }
    let exid = u16::from(b[2]) << 8 | u16::from(b[3]);
    if exid != 0xEFAB {
        return Err(WrongExId(exid));
    }
    if got < 16 {
        return Err(Truncated { needed: 16, got });
    }
    let flags = b[4];
    if flags & 0x03 != 0 {
        return Err(UnsupportedVersion(flags & 0x03));
    }
    let opcode = Opcode::from_u8(b[5]).ok_or(UnknownOpcode(b[5]))?;
    let ts = flags & 0x04 != 0;
    let ext_len = match opcode.extension() {
        ExtensionKind::None => 0,
        ExtensionKind::Immediate => 4,
        ExtensionKind::Reth => 12,
        ExtensionKind::RethImmediate => 16,
    };
    let expected = 16 + if ts { 8 } else { 0 } + ext_len;
    if got != expected {
        return Err(LengthInconsistent {
            opcode,
            len: b[1],
            expected: expected as u8,
        });
    }
    let more = flags & 0x08 != 0;
    if more != opcode.more() {
        return Err(MoreBitInconsistent { opcode, more });
    }
    // The BTH form of a pure ACK stands in for the timestamp option; a hello need not
    // (amendment 4: a SYN's hello may have T=0 beside the RFC 7323 option).
    if !ts && opcode.kind() == MessageKind::Acknowledge {
        return Err(TimestampsRequired(opcode));
    }
    // Amendment 3: S=1 only on ONLY opcodes (acknowledge and hello are ONLY forms too).
    if flags & 0x40 != 0 && opcode.position() != Position::Only {
        return Err(SFramingOpcode(opcode));
    }
    let word = |at: usize| -> u32 {
        (u32::from(b[at]) << 24)
            | (u32::from(b[at + 1]) << 16)
            | (u32::from(b[at + 2]) << 8)
            | u32::from(b[at + 3])
    };
    let at = if ts { 24 } else { 16 };
    let reth = || Reth {
        rkey: word(at),
        addr: u64::from(word(at + 4)) << 32 | u64::from(word(at + 8)),
    };
    Ok(Bth {
        opcode,
        rtr: flags & 0x10 != 0,
        rtr_ack: flags & 0x20 != 0,
        seq_framed: flags & 0x40 != 0,
        rsvd: flags >> 7,
        msn: u16::from(b[6]) << 8 | u16::from(b[7]),
        mbo: word(8) >> 8,
        seg: b[11],
        icrc: word(12),
        timestamps: ts.then(|| Timestamps {
            tsval: word(16),
            tsecr: word(20),
        }),
        ext: match opcode.extension() {
            ExtensionKind::None => Extension::None,
            ExtensionKind::Immediate => Extension::Immediate(word(at)),
            ExtensionKind::Reth => Extension::Reth(reth()),
            ExtensionKind::RethImmediate => Extension::RethImmediate(reth(), word(at + 12)),
        },
    })
}

/// Both entry points against the oracle, and the view's accessors against the parsed value.
fn agrees(bytes: &[u8]) -> Result<(), TestCaseError> {
    let want = oracle(bytes);
    prop_assert_eq!(Bth::from_bytes(bytes), want);
    let view = BthOption::new_checked(bytes);
    prop_assert_eq!(view.map(|v| Bth::parse(&v)), want);
    if let (Ok(v), Ok(b)) = (view, want) {
        prop_assert_eq!(v.len(), bytes.len());
        prop_assert_eq!(v.opcode(), b.opcode);
        prop_assert_eq!((v.rtr(), v.rtr_ack(), v.rsvd()), (b.rtr, b.rtr_ack, b.rsvd));
        prop_assert_eq!(v.seq_framed(), b.seq_framed);
        prop_assert_eq!(
            (v.msn(), v.mbo(), v.seg(), v.icrc()),
            (b.msn, b.mbo, b.seg, b.icrc)
        );
        prop_assert_eq!(v.timestamps(), b.timestamps);
        prop_assert_eq!(v.extension(), b.ext);
        prop_assert_eq!(v.more(), b.opcode.more());
        prop_assert_eq!(v.timestamp_present(), b.timestamps.is_some());
    }
    Ok(())
}

/// Bytes that pass the prefix checks, so the flag, opcode and length checks are what decide.
fn framed(mut bytes: Vec<u8>) -> Vec<u8> {
    if bytes.len() >= 4 {
        bytes[0] = 254;
        bytes[1] = bytes.len() as u8;
        bytes[2] = 0xEF;
        bytes[3] = 0xAB;
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        agrees(&bytes)?;
        agrees(&framed(bytes))?;
    }

    #[test]
    fn framed_with_any_flags_and_opcode(
        len in prop::sample::select(vec![4usize, 12, 15, 16, 19, 20, 24, 28, 32, 36, 40, 44]),
        flags in any::<u8>(),
        opcode in prop_oneof![any::<u8>(), prop::sample::select(Opcode::ALL).prop_map(Opcode::as_u8)],
        fill in any::<u8>(),
    ) {
        let mut bytes = framed(vec![fill; len]);
        if len > 5 {
            bytes[4] = flags;
            bytes[5] = opcode;
        }
        agrees(&bytes)?;
    }

    #[test]
    fn disturbed_valid_options(
        b in bth(),
        flips in prop::collection::vec((0usize..40, any::<u8>()), 0..4),
        cut in 0usize..3,
    ) {
        let mut bytes = b.to_vec().unwrap();
        agrees(&bytes)?;
        for (at, v) in flips {
            let n = bytes.len();
            bytes[at % n] = v;
        }
        agrees(&bytes)?;
        bytes.truncate(bytes.len().saturating_sub(cut * 4));
        agrees(&bytes)?;
        agrees(&framed(bytes))?;
    }
}

#[test]
fn every_flags_and_opcode_at_every_length() {
    for len in [16usize, 20, 24, 28, 32, 36, 40] {
        for flags in 0..=255u8 {
            for opcode in 0..=255u8 {
                let mut bytes: Vec<u8> = (0..len as u8).map(|i| i.wrapping_mul(37)).collect();
                bytes = framed(bytes);
                bytes[4] = flags;
                bytes[5] = opcode;
                agrees(&bytes).unwrap();
            }
        }
    }
}

/// `struct enf_bth` as the C prototype declares it (dsahern/random-cmds, src/motcp_hdr.h),
/// read the way its parser reads an option of `TCPOLEN_EXP_ENF_BTH` (24) bytes: kind 254,
/// length 24, ExID 0xEFAB, then the struct, its first byte a bitfield laid out least
/// significant bit first (`ver:2, timestamp_present:1, more_segments:1, rtr:1, rtr_ack:1,
/// rsvd:2`). It knows nothing of amendment 3: the S bit is the low bit of its `rsvd`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EnfBth {
    ver: u8,
    timestamp_present: u8,
    more_segments: u8,
    rtr: u8,
    rtr_ack: u8,
    rsvd: u8,
    opcode: u8,
    msn: u16,
    mbo_seg: u32,
    icrc: u32,
    timestamp: u32,
    timestamp_echo: u32,
}

fn prototype(b: &[u8]) -> Option<EnfBth> {
    if b.len() != 24 || b[0] != 254 || b[1] != 24 || b[2..4] != [0xEF, 0xAB] {
        return None;
    }
    let be32 = |at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let f = b[4];
    Some(EnfBth {
        ver: f & 0x3,
        timestamp_present: (f >> 2) & 1,
        more_segments: (f >> 3) & 1,
        rtr: (f >> 4) & 1,
        rtr_ack: (f >> 5) & 1,
        rsvd: f >> 6,
        opcode: b[5],
        msn: u16::from_be_bytes([b[6], b[7]]),
        mbo_seg: be32(8),
        icrc: be32(12),
        timestamp: be32(16),
        timestamp_echo: be32(20),
    })
}

/// The prototype's view of an S option: every field where it always was, the anchor as the
/// offset, index 0 as the segment, the length as the ICRC, S as the low `rsvd` bit.
fn prototype_reads_s(bytes: &[u8], b: &Bth) -> Result<(), TestCaseError> {
    prop_assert!(b.seq_framed);
    let p = prototype(bytes);
    prop_assert!(p.is_some(), "the prototype parses it");
    let p = p.unwrap();
    let ts = b.timestamps.expect("T=1");
    prop_assert_eq!(
        p,
        EnfBth {
            ver: 0,
            timestamp_present: 1,
            more_segments: 0,
            rtr: u8::from(b.rtr),
            rtr_ack: u8::from(b.rtr_ack),
            rsvd: 1 | b.rsvd << 1,
            opcode: b.opcode.as_u8(),
            msn: b.msn,
            mbo_seg: b.mbo << 8 | u32::from(b.seg),
            icrc: b.icrc,
            timestamp: ts.tsval,
            timestamp_echo: ts.tsecr,
        }
    );
    Ok(())
}

#[test]
fn the_prototype_still_parses_a_24_byte_s_option() {
    // S SEND_ONLY, MSN 0x0102, anchor 0xABCDEF, message length 70,000, TSval 1, TSecr 2.
    let bytes = hex::decode("FE18EFAB44040102ABCDEF00000111700000000100000002").unwrap();
    agrees(&bytes).unwrap();
    assert_eq!(oracle(&bytes), Bth::from_bytes(&bytes));
    let b = oracle(&bytes).expect("the byte-by-byte decoder accepts it");
    assert!(b.seq_framed);
    assert_eq!((b.mbo, b.seg, b.icrc), (0xAB_CDEF, 0, 70_000));
    prototype_reads_s(&bytes, &b).unwrap();
    let p = prototype(&bytes).unwrap();
    assert_eq!(p.mbo_seg >> 8, 0xAB_CDEF, "the anchor, read as the offset");
    assert_eq!(p.mbo_seg & 0xFF, 0, "segment 0");
    assert_eq!(p.icrc, 70_000, "the length, read as the ICRC");
    assert_eq!((p.opcode, p.msn, p.more_segments), (0x04, 0x0102, 0));
    assert_eq!(
        (p.timestamp_present, p.timestamp, p.timestamp_echo),
        (1, 1, 2)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Any S option the codec emits at 24 bytes (T=1, no extension: SEND_ONLY, READ request,
    /// READ response ONLY, ACKNOWLEDGE, hello) is read by the prototype field for field, and by
    /// the byte-by-byte decoder as by ours.
    #[test]
    fn every_24_byte_s_option_reads_the_same_in_the_prototype(
        op in prop::sample::select(vec![
            Opcode::SendOnly,
            Opcode::RdmaReadRequest,
            Opcode::RdmaReadResponseOnly,
            Opcode::Acknowledge,
            Opcode::Hello,
        ]),
        (rtr, rtr_ack, rsvd, msn) in (any::<bool>(), any::<bool>(), 0u8..2, any::<u16>()),
        anchor in 0..=bth_wire::MAX_MESSAGE_LEN,
        len in any::<u32>(),
        (tsval, tsecr) in (any::<u32>(), any::<u32>()),
    ) {
        let b = Bth {
            rtr,
            rtr_ack,
            rsvd,
            msn,
            seq_framed: true,
            mbo: anchor,
            seg: 0,
            icrc: len,
            timestamps: Some(Timestamps { tsval, tsecr }),
            ..Bth::new(op)
        };
        let bytes = b.to_vec().unwrap();
        prop_assert_eq!(bytes.len(), 24);
        agrees(&bytes)?;
        prop_assert_eq!(oracle(&bytes), Ok(b));
        prototype_reads_s(&bytes, &b)?;
    }
}
