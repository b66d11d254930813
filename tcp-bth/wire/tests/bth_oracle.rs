//! The option decoder against the straightforward byte-by-byte decoder it replaced (the oracle
//! below, kept only here): same value for every accepted input, same error for every refused one.

mod common;

use common::*;
use proptest::prelude::*;
use tcp_bth_wire::{
    Bth, BthError, BthOption, Extension, ExtensionKind, MessageKind, Opcode, Position, Reth,
    Timestamps,
};

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
    let hello_or_ack = matches!(opcode.kind(), MessageKind::Hello | MessageKind::Acknowledge);
    if !ts && hello_or_ack {
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
