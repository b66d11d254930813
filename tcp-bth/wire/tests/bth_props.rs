//! Properties of the option codec: exact round trips, specific refusals, no panics.

mod common;

use bth_wire::{Bth, BthError, Opcode};
use common::*;
use proptest::prelude::*;

const FLAG_T: u8 = 0x04;
const FLAG_M: u8 = 0x08;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn emit_then_parse_is_identity(b in bth()) {
        let bytes = b.to_vec().unwrap();
        prop_assert_eq!(bytes.len(), b.buffer_len());
        prop_assert_eq!(Bth::from_bytes(&bytes), Ok(b));
    }

    #[test]
    fn parse_then_emit_is_identity_on_accepted_bytes(
        b in bth(),
        flips in prop::collection::vec((0usize..40, any::<u8>()), 0..4),
    ) {
        // Start from a valid option and disturb it; whatever is still accepted must re-emit exactly.
        let mut bytes = b.to_vec().unwrap();
        for (at, v) in flips {
            let n = bytes.len();
            bytes[at % n] = v;
        }
        if let Ok(parsed) = Bth::from_bytes(&bytes) {
            prop_assert_eq!(parsed.to_vec().unwrap(), bytes);
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..48)) {
        let _ = Bth::from_bytes(&bytes);
        // With a plausible prefix, so the deeper checks are reached too.
        let mut framed = bytes.clone();
        if framed.len() >= 4 {
            framed[0] = 254;
            framed[1] = framed.len() as u8;
            framed[2] = 0xEF;
            framed[3] = 0xAB;
            if let Ok(b) = Bth::from_bytes(&framed) {
                prop_assert_eq!(b.to_vec().unwrap(), framed);
            }
        }
    }

    #[test]
    fn truncated_is_refused(b in bth(), cut in 1usize..40) {
        let bytes = b.to_vec().unwrap();
        let cut = cut.min(bytes.len());
        let short = &bytes[..bytes.len() - cut];
        // Length field unchanged: it names more bytes than are present.
        let err = Bth::from_bytes(short).unwrap_err();
        let expected_truncated = short.len() < 4;
        prop_assert!(
            matches!(err, BthError::LengthFieldMismatch { .. })
                || (expected_truncated && matches!(err, BthError::Truncated { .. })),
            "{:?}", err
        );
        // Length field fixed up to the short length: inconsistent with flags/opcode, or too short.
        if short.len() >= 4 {
            let mut fixed = short.to_vec();
            fixed[1] = fixed.len() as u8;
            let err = Bth::from_bytes(&fixed).unwrap_err();
            prop_assert!(
                matches!(err, BthError::Truncated { .. } | BthError::LengthInconsistent { .. }),
                "{:?}", err
            );
        }
    }

    #[test]
    fn over_long_is_refused(b in bth(), extra in prop::collection::vec(any::<u8>(), 1..8)) {
        let mut bytes = b.to_vec().unwrap();
        bytes.extend(extra);
        let got = Bth::from_bytes(&bytes);
        prop_assert!(matches!(got, Err(BthError::LengthFieldMismatch { .. })), "{:?}", got);
        bytes[1] = bytes.len() as u8;
        let got = Bth::from_bytes(&bytes);
        prop_assert!(matches!(got, Err(BthError::LengthInconsistent { .. })), "{:?}", got);
    }

    #[test]
    fn wrong_exid_is_refused(b in bth(), exid in any::<u16>().prop_filter("not ours", |e| *e != 0xEFAB)) {
        let mut bytes = b.to_vec().unwrap();
        bytes[2..4].copy_from_slice(&exid.to_be_bytes());
        prop_assert_eq!(Bth::from_bytes(&bytes), Err(BthError::WrongExId(exid)));
    }

    #[test]
    fn wrong_version_is_refused(b in bth(), ver in 1u8..4) {
        let mut bytes = b.to_vec().unwrap();
        bytes[4] |= ver;
        prop_assert_eq!(Bth::from_bytes(&bytes), Err(BthError::UnsupportedVersion(ver)));
    }

    #[test]
    fn unknown_opcode_is_refused(b in bth(), op in any::<u8>().prop_filter("undefined", |v| Opcode::from_u8(*v).is_none())) {
        let mut bytes = b.to_vec().unwrap();
        bytes[5] = op;
        prop_assert_eq!(Bth::from_bytes(&bytes), Err(BthError::UnknownOpcode(op)));
    }

    #[test]
    fn m_bit_must_match_opcode(b in bth()) {
        let mut bytes = b.to_vec().unwrap();
        bytes[4] ^= FLAG_M;
        prop_assert_eq!(
            Bth::from_bytes(&bytes),
            Err(BthError::MoreBitInconsistent { opcode: b.opcode, more: !b.opcode.more() })
        );
    }

    #[test]
    fn t_bit_must_match_length(b in bth()) {
        let mut bytes = b.to_vec().unwrap();
        bytes[4] ^= FLAG_T;
        let got = Bth::from_bytes(&bytes);
        prop_assert!(matches!(got, Err(BthError::LengthInconsistent { .. })), "{:?}", got);
    }

    #[test]
    fn opcode_swap_with_other_extension_is_refused(b in bth(), pick in any::<prop::sample::Index>()) {
        let others: Vec<Opcode> = Opcode::ALL
            .iter()
            .copied()
            .filter(|o| o.extension() != b.opcode.extension())
            .collect();
        let other = others[pick.index(others.len())];
        let mut bytes = b.to_vec().unwrap();
        bytes[5] = other.as_u8();
        // Keep M consistent so the length check is what fires.
        bytes[4] = (bytes[4] & !FLAG_M) | if other.more() { FLAG_M } else { 0 };
        let got = Bth::from_bytes(&bytes);
        prop_assert!(matches!(got, Err(BthError::LengthInconsistent { .. })), "{:?}", got);
    }

    #[test]
    fn emitter_refuses_offsets_beyond_24_bits(b in bth(), mbo in (1u32 << 24)..) {
        let b = Bth { mbo, ..b };
        prop_assert_eq!(b.to_vec(), Err(BthError::OffsetTooLarge(mbo)));
    }
}

/// A 16-byte form (length consistent with T=0) of `op`: no timestamps, no extension.
fn sixteen_bytes(op: Opcode) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..4].copy_from_slice(&[254, 16, 0xEF, 0xAB]);
    b[5] = op.as_u8();
    b
}

#[test]
fn a_pure_ack_needs_timestamps() {
    let op = Opcode::Acknowledge;
    assert_eq!(
        Bth::from_bytes(&sixteen_bytes(op)),
        Err(BthError::TimestampsRequired(op))
    );
    assert_eq!(Bth::new(op).to_vec(), Err(BthError::TimestampsRequired(op)));
}

/// Amendment 4: a hello may have T=0 (a SYN's, beside the RFC 7323 timestamp option), in
/// either framing; parse and emit agree byte for byte.
#[test]
fn a_hello_without_timestamps_is_accepted() {
    for s in [false, true] {
        let mut bytes = sixteen_bytes(Opcode::Hello);
        bytes[4] = if s { 0x40 } else { 0 };
        let b = Bth::from_bytes(&bytes).expect("a T=0 hello");
        assert_eq!(
            (b.opcode, b.timestamps, b.seq_framed),
            (Opcode::Hello, None, s)
        );
        assert_eq!(b.to_vec().unwrap(), bytes);
    }
    assert_eq!(Bth::new(Opcode::Hello).to_vec().unwrap().len(), 16);
}

#[test]
fn emitter_refuses_extension_that_does_not_match_opcode() {
    let b = Bth::new(Opcode::RdmaWriteOnly);
    assert_eq!(
        b.to_vec(),
        Err(BthError::ExtensionMismatch(Opcode::RdmaWriteOnly))
    );
    let mut buf = [0u8; 10];
    assert_eq!(
        Bth::new(Opcode::SendOnly).emit(&mut buf),
        Err(BthError::BufferTooSmall {
            needed: 16,
            got: 10
        })
    );
}

#[test]
fn wrong_kind_is_refused() {
    let mut bytes = Bth::new(Opcode::SendOnly).to_vec().unwrap();
    bytes[0] = 253;
    assert_eq!(Bth::from_bytes(&bytes), Err(BthError::WrongKind(253)));
}
