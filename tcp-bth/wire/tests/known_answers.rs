//! Known-answer vectors written by hand from the spec table (shared/spec/tcp-bth-option.md), one or
//! more per option length. ICRC values (over header, extension and payload: amendment 2) were
//! computed with an independent bitwise CRC32C
//! (polynomial 0x82F63B78, check value crc32c("123456789") = 0xE3069283), not with this crate.

use tcp_bth_wire::{
    Bth, BthOption, Extension, ExtensionKind, Inbound, InboundError, MsgClass, Nak, NakCode,
    Opcode, Reth, Timestamps, ZERO_LENGTH_MBO,
};

fn h(s: &str) -> Vec<u8> {
    hex::decode(s.replace(' ', "")).unwrap()
}

fn check(bytes: &[u8], want: Bth) {
    let got = Bth::from_bytes(bytes).unwrap_or_else(|e| panic!("{e} for {}", hex::encode(bytes)));
    assert_eq!(got, want);
    assert_eq!(want.to_vec().unwrap(), bytes, "emit differs");
    assert_eq!(want.buffer_len(), bytes.len());
}

fn base(opcode: Opcode, msn: u16, mbo: u32, seg: u8, icrc: u32) -> Bth {
    Bth {
        msn,
        mbo,
        seg,
        icrc,
        ..Bth::new(opcode)
    }
}

#[test]
fn len16_send_only_no_timestamps() {
    check(
        &h("FE10EFAB 00 04 0102 00000000 DEADBEEF"),
        base(Opcode::SendOnly, 0x0102, 0, 0, 0xDEAD_BEEF),
    );
}

#[test]
fn len20_send_last_with_immediate() {
    let mut b = base(Opcode::SendLastWithImmediate, 5, 4096, 2, 0x0102_0304);
    b.ext = Extension::Immediate(0xCAFE_BABE);
    check(&h("FE14EFAB 00 03 0005 00100002 01020304 CAFEBABE"), b);
}

#[test]
fn len24_ack_with_rtr_grant() {
    // R set: MSN is the credit, the offset field a grant of 0x100 * 4 KiB.
    let mut b = base(Opcode::Acknowledge, 0x00FF, 0x100, 0, 0);
    b.rtr = true;
    b.timestamps = Some(Timestamps {
        tsval: 0x1122_3344,
        tsecr: 0x5566_7788,
    });
    check(
        &h("FE18EFAB 14 11 00FF 00010000 00000000 11223344 55667788"),
        b,
    );
}

#[test]
fn len24_hello_icrc_over_header_only() {
    let bytes = h("FE18EFAB 04 FF 1234 FFFFFF00 A58E1008 00000001 00000000");
    let mut b = base(Opcode::Hello, 0x1234, 0xFF_FFFF, 0, 0xA58E_1008);
    b.timestamps = Some(Timestamps { tsval: 1, tsecr: 0 });
    check(&bytes, b);
    let view = BthOption::new_checked(&bytes[..]).unwrap();
    assert!(view.icrc_ok(&[]));
    assert!(b.icrc_ok(&[]));
}

#[test]
fn len28_send_only_with_immediate_and_timestamps() {
    let mut b = base(Opcode::SendOnlyWithImmediate, 1, 0, 0, 0);
    b.timestamps = Some(Timestamps { tsval: 1, tsecr: 2 });
    b.ext = Extension::Immediate(7);
    check(
        &h("FE1CEFAB 04 05 0001 00000000 00000000 00000001 00000002 00000007"),
        b,
    );
}

#[test]
fn len28_rdma_write_first_no_timestamps() {
    let mut b = base(Opcode::RdmaWriteFirst, 9, 0, 0, 0x0A0B_0C0D);
    b.ext = Extension::Reth(Reth {
        rkey: 0xABCD,
        addr: 0x7F00_0000_1000,
    });
    check(
        &h("FE1CEFAB 08 06 0009 00000000 0A0B0C0D 0000ABCD 00007F0000001000"),
        b,
    );
}

#[test]
fn len32_rdma_write_only_with_immediate() {
    let mut b = base(Opcode::RdmaWriteOnlyWithImmediate, 2, 0, 0, 0);
    b.ext = Extension::RethImmediate(
        Reth {
            rkey: 0x0102_0304,
            addr: 0x1122_3344_5566_7788,
        },
        0x99AA_BBCC,
    );
    check(
        &h("FE20EFAB 00 0B 0002 00000000 00000000 01020304 1122334455667788 99AABBCC"),
        b,
    );
}

#[test]
fn len36_rdma_write_middle_with_timestamps() {
    let mut b = base(Opcode::RdmaWriteMiddle, 3, 1448, 1, 0);
    b.timestamps = Some(Timestamps {
        tsval: 0x10,
        tsecr: 0x20,
    });
    b.ext = Extension::Reth(Reth {
        rkey: 5,
        addr: 0x1000 + 1448,
    });
    check(
        &h("FE24EFAB 0C 07 0003 0005A801 00000000 00000010 00000020 00000005 00000000000015A8"),
        b,
    );
}

#[test]
fn len40_rdma_write_last_with_immediate_full_budget() {
    let mut b = base(Opcode::RdmaWriteLastWithImmediate, 4, 2896, 2, 0xFFFF_FFFF);
    b.rtr_ack = true;
    b.timestamps = Some(Timestamps {
        tsval: 0xFFFF_FFFF,
        tsecr: 0,
    });
    b.ext = Extension::RethImmediate(Reth { rkey: 6, addr: 0 }, 1);
    check(
        &h("FE28EFAB 24 09 0004 000B5002 FFFFFFFF FFFFFFFF 00000000 00000006 0000000000000000 00000001"),
        b,
    );
}

#[test]
fn icrc_covers_header_and_payload() {
    let b = base(Opcode::SendOnly, 0x0102, 0, 0, 0xA2AE_4E27);
    assert!(b.icrc_ok(b"hello"));
    assert!(!b.icrc_ok(b"hellp"));
    let mut sealed = base(Opcode::SendOnly, 0x0102, 0, 0, 0);
    sealed.seal(b"hello");
    assert_eq!(sealed.icrc, 0xA2AE_4E27);
    // Sealing in place over the wire bytes gives the same value.
    let mut bytes = h("FE10EFAB 00 04 0102 00000000 00000000");
    let mut view = BthOption::new_checked(&mut bytes[..]).unwrap();
    view.seal(b"hello");
    assert_eq!(&bytes[12..16], &0xA2AE_4E27u32.to_be_bytes());
}

/// Amendment 2: the ICRC covers bytes 0-7, then the extension (here rkey and address), then the
/// payload; the timestamps stay outside it. A corrupted rkey or address fails the check, so a
/// WRITE can no longer be placed elsewhere with every check passing.
#[test]
fn icrc_covers_the_extension_but_not_the_timestamps() {
    let reth = Reth {
        rkey: 0x1234,
        addr: 0x7F00_0000_2000,
    };
    let mut b = Bth {
        timestamps: Some(Timestamps { tsval: 9, tsecr: 8 }),
        ext: Extension::Reth(reth),
        ..base(Opcode::RdmaWriteOnly, 3, 0, 0, 0)
    };
    b.seal(b"hello");
    assert_eq!(b.icrc, 0xC907_EF10);
    let bytes = h("FE24EFAB 04 0A 0003 00000000 C907EF10 00000009 00000008 \
                   00001234 00007F0000002000");
    check(&bytes, b);
    assert!(BthOption::new_checked(&bytes[..])
        .unwrap()
        .icrc_ok(b"hello"));
    // Every bit of the extension is covered, in the view and in the value.
    for bit in 0..96 {
        let mut bad = bytes.clone();
        bad[24 + bit / 8] ^= 1 << (bit % 8);
        let view = BthOption::new_checked(&bad[..]).unwrap();
        assert!(!view.icrc_ok(b"hello"), "bit {bit} of the extension");
        assert!(!Bth::from_bytes(&bad).unwrap().icrc_ok(b"hello"));
    }
    // The timestamps are not (they change on every retransmission).
    let mut retimed = bytes.clone();
    retimed[16..24].copy_from_slice(&h("0000FFFF 0000EEEE"));
    assert!(BthOption::new_checked(&retimed[..])
        .unwrap()
        .icrc_ok(b"hello"));
}

// ---------------------------------------------------------------------------------------------
// Zero-length messages, NAKs and the R=0 pure ACK (docs/option.md, "Special forms"). Each is the
// ordinary layout with T=1: 24 bytes for the ACKNOWLEDGE forms, the prototype's `struct enf_bth`
// after the 4-byte prefix, and 28 or 40 bytes for the zero-length forms with their extension.
// ---------------------------------------------------------------------------------------------

const TS: Timestamps = Timestamps {
    tsval: 0x0102_0304,
    tsecr: 0x0506_0708,
};

/// The pad byte the sender puts in the one segment of a zero-length message.
const PAD: [u8; 1] = [0];

/// A NAK option: ACKNOWLEDGE, R=0, MSN of the failed message, offset field = opcode of the
/// offending segment, low byte = AETH syndrome; ICRC over the 8 header bytes only.
fn check_nak(bytes: &str, icrc: u32, nak: Nak) {
    let bytes = h(bytes);
    let want = Bth {
        timestamps: Some(TS),
        icrc,
        ..nak.to_bth()
    };
    check(&bytes, want);
    assert_eq!(bytes.len(), 24, "the prototype's 24-byte layout");
    assert!(want.icrc_ok(&[]), "ICRC over the header alone");
    assert!(BthOption::new_checked(&bytes[..]).unwrap().icrc_ok(&[]));
    assert_eq!(Nak::from_bth(&want), Some(nak));
}

#[test]
fn len24_nak_invalid_request_for_a_send() {
    // A SEND longer than the receive posted for it (or a READ longer than the requester
    // accepts, with RDMA_READ_REQUEST in the offset field).
    check_nak(
        "FE18EFAB 04 11 0007 00000461 2C3C9970 01020304 05060708",
        0x2C3C_9970,
        Nak {
            code: NakCode::InvalidRequest,
            opcode: Opcode::SendOnly,
            msn: 7,
        },
    );
}

#[test]
fn len24_nak_remote_access_error_for_a_write() {
    check_nak(
        "FE18EFAB 04 11 0003 00000662 F86CE4DA 01020304 05060708",
        0xF86C_E4DA,
        Nak {
            code: NakCode::RemoteAccess,
            opcode: Opcode::RdmaWriteFirst,
            msn: 3,
        },
    );
}

#[test]
fn len24_nak_remote_operational_error_for_a_read() {
    check_nak(
        "FE18EFAB 04 11 FFFE 00000C63 D1A70B48 01020304 05060708",
        0xD1A7_0B48,
        Nak {
            code: NakCode::RemoteOperational,
            opcode: Opcode::RdmaReadRequest,
            msn: 0xFFFE,
        },
    );
}

#[test]
fn syndromes_are_the_aeth_nak_codes() {
    let codes = [
        (NakCode::InvalidRequest, 0x61),
        (NakCode::RemoteAccess, 0x62),
        (NakCode::RemoteOperational, 0x63),
    ];
    for (code, syndrome) in codes {
        assert_eq!(code.syndrome(), syndrome);
        assert_eq!(NakCode::from_syndrome(syndrome), Some(code));
    }
    // 0x00 is an ordinary ACK; 0x60 (PSN sequence error) and RNR NAKs (0x20..) are not used.
    for s in [0x00, 0x20, 0x60, 0x64, 0xFF] {
        assert_eq!(NakCode::from_syndrome(s), None, "{s:#04x}");
    }
}

#[test]
fn len24_pure_ack_r0_names_the_newest_completed_send() {
    // R=0, syndrome 0: MSN is the newest SEND MSN completed in order, the offset field 0.
    let bytes = h("FE18EFAB 04 11 0102 00000000 C67F52C8 01020304 05060708");
    let mut b = base(Opcode::Acknowledge, 0x0102, 0, 0, 0xC67F_52C8);
    b.timestamps = Some(TS);
    check(&bytes, b);
    assert!(!b.rtr && b.icrc_ok(&[]));
    assert_eq!(Nak::from_bth(&b), None, "syndrome 0 is an ACK");
}

/// A zero-length message's segment (T=1, offset field 0xFFFFFF, index 0): the option bytes, and
/// what the receiver makes of it.
fn check_zero_length(bytes: &str, opcode: Opcode, msn: u16, icrc: u32, ext: Extension) {
    let bytes = h(bytes);
    let want = Bth {
        timestamps: Some(TS),
        ext,
        ..base(opcode, msn, ZERO_LENGTH_MBO, 0, icrc)
    };
    check(&bytes, want);
    assert!(want.icrc_ok(&PAD), "ICRC covers the pad byte");
    assert!(!want.icrc_ok(&[]), "the pad byte is part of the ICRC");
    assert!(BthOption::new_checked(&bytes[..]).unwrap().icrc_ok(&PAD));
    let i = Inbound::from_bth(&want, &PAD).expect("zero-length form accepted");
    assert_eq!(
        (i.class, i.msn, i.offset, i.payload, i.last, i.end()),
        (MsgClass::of(opcode).unwrap(), msn, 0, &[][..], true, 0),
        "nothing to place: a message of 0 bytes"
    );
    assert_eq!((i.imm, i.reth), (ext.immediate(), ext.reth()));
}

#[test]
fn len28_zero_length_send_only_with_immediate() {
    check_zero_length(
        "FE1CEFAB 04 05 0009 FFFFFF00 C8D1276F 01020304 05060708 CAFEBABE",
        Opcode::SendOnlyWithImmediate,
        9,
        0xC8D1_276F,
        Extension::Immediate(0xCAFE_BABE),
    );
}

#[test]
fn len40_zero_length_rdma_write_only_with_immediate() {
    // The address is the WRITE's target (offset 0 in the message): nothing is written there.
    check_zero_length(
        "FE28EFAB 04 0B 0002 FFFFFF00 9118E6A8 01020304 05060708 \
         00000011 00007F0000001000 99AABBCC",
        Opcode::RdmaWriteOnlyWithImmediate,
        2,
        0x9118_E6A8,
        Extension::RethImmediate(
            Reth {
                rkey: 0x11,
                addr: 0x7F00_0000_1000,
            },
            0x99AA_BBCC,
        ),
    );
}

#[test]
fn zero_length_form_refused_outside_send_and_write_only() {
    // Only SEND and RDMA WRITE *_ONLY (with or without immediate) have a zero-length form: a
    // zero-length message is one segment, and a READ is never empty.
    let mut refused = 0;
    for &op in Opcode::ALL {
        if MsgClass::of(op).is_none() {
            continue;
        }
        let mut b = base(op, 4, ZERO_LENGTH_MBO, 0, 0);
        b.ext = match op.extension() {
            ExtensionKind::None => Extension::None,
            ExtensionKind::Immediate => Extension::Immediate(1),
            ExtensionKind::Reth => Extension::Reth(Reth { rkey: 1, addr: 2 }),
            ExtensionKind::RethImmediate => Extension::RethImmediate(Reth { rkey: 1, addr: 2 }, 1),
        };
        let allowed = matches!(
            op,
            Opcode::SendOnly
                | Opcode::SendOnlyWithImmediate
                | Opcode::RdmaWriteOnly
                | Opcode::RdmaWriteOnlyWithImmediate
        );
        let got = Inbound::from_bth(&b, &PAD);
        if allowed {
            let i = got.unwrap_or_else(|e| panic!("{op}: {e}"));
            assert_eq!((i.payload.len(), i.end(), i.last), (0, 0, true), "{op}");
        } else {
            assert_eq!(
                got,
                Err(InboundError::BadZeroLength { opcode: op, pad: 1 }),
                "{op}"
            );
            refused += 1;
        }
        // Exactly one pad byte: none, or two, is not the zero-length form.
        for pad in [&[][..], &[0, 0][..]] {
            assert_eq!(
                Inbound::from_bth(&b, pad),
                Err(InboundError::BadZeroLength {
                    opcode: op,
                    pad: pad.len()
                }),
                "{op} with {} pad bytes",
                pad.len()
            );
        }
    }
    assert_eq!(
        refused, 13,
        "SEND and WRITE FIRST/MIDDLE/LAST(_WITH_IMMEDIATE), all READ opcodes"
    );
}
