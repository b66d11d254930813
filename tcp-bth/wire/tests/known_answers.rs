//! Known-answer vectors written by hand from the wire spec's table, restated in docs/option.md
//! ("Byte layout" with its special forms, and "S framing"), one or more per option length. ICRC
//! values (over header, extension and payload: amendment 2) were computed with an independent
//! bitwise CRC32C (polynomial 0x82F63B78, check value crc32c("123456789") = 0xE3069283), not
//! with this crate.

use bth_wire::{
    Bth, BthError, BthOption, Extension, ExtensionKind, Inbound, InboundError, MsgClass, Nak,
    NakCode, Opcode, Position, Reth, Timestamps, ZERO_LENGTH_MBO,
};

mod common;

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

/// Amendment 4: a SYN's hello with T=0, 16 bytes, beside the RFC 7323 timestamp option
/// (MSS 4 + WS 3 + SACK-permitted 2 + TS 10 + hello 16 = 35 bytes, 36 with padding): no
/// timestamp fields, the ICRC over bytes 4-11 as always: CRC32C(00 FF 12 34 FF FF FF 00).
#[test]
fn len16_hello_without_timestamps() {
    let bytes = h("FE10EFAB 00 FF 1234 FFFFFF00 84939265");
    let b = base(Opcode::Hello, 0x1234, 0xFF_FFFF, 0, 0x8493_9265);
    check(&bytes, b);
    let view = BthOption::new_checked(&bytes[..]).unwrap();
    assert_eq!(view.timestamps(), None);
    assert!(!view.timestamp_present());
    assert!(view.icrc_ok(&[]) && b.icrc_ok(&[]));
    // The same hello offering S framing: CRC32C(40 FF 12 34 FF FF FF 00).
    let s = Bth {
        seq_framed: true,
        icrc: 0x9E93_5957,
        ..b
    };
    check(&h("FE10EFAB 40 FF 1234 FFFFFF00 9E935957"), s);
    assert!(s.icrc_ok(&[]));
    // Beside the RFC 7323 option in a SYN's option area, as our SYN lays them out.
    let o = bth_wire::TcpOptions {
        mss: Some(1460),
        window_scale: Some(7),
        sack_permitted: true,
        timestamps: Some(Timestamps {
            tsval: 0x0102_0304,
            tsecr: 0,
        }),
        bth: Some(b),
        ..Default::default()
    };
    let area = o.emit().unwrap();
    assert_eq!(
        &area[..],
        &h("020405B4 030307 0402 080A0102030400000000 \
            FE10EFAB00FF1234FFFFFF0084939265 00")[..]
    );
    assert_eq!(bth_wire::TcpOptions::parse(&area), Ok(o));
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
        common::assert_only_one_pad_byte(op, |pad| Inbound::from_bth(&b, pad).err());
    }
    assert_eq!(
        refused, 13,
        "SEND and WRITE FIRST/MIDDLE/LAST(_WITH_IMMEDIATE), all READ opcodes"
    );
}

// ---------------------------------------------------------------------------------------------
// Amendment 3, sequence-anchored framing (S, flag bit 6, 0x40). Data options carry the ONLY
// opcode, the anchor (the message's first stream byte mod 2^24) in bytes 8-10, index 0 in byte
// 11 and the message length in bytes 12-15 where the ICRC would be; every segment of a message
// carries the same option. Control forms (ACKNOWLEDGE, hello) keep their ICRC, which covers the
// flags byte and so the S bit.
// ---------------------------------------------------------------------------------------------

/// The payload bytes `[off, off + n)` of a message, for from_seq checks (values do not matter).
fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| i as u8).collect()
}

#[test]
fn len24_s_send_only_anchor_index_0_and_length() {
    // Anchor 0xABCDEF, index 0, message length 70,000 (0x00011170), T=1.
    let bytes = h("FE18EFAB 44 04 0102 ABCDEF00 00011170 01020304 05060708");
    let want = Bth {
        seq_framed: true,
        timestamps: Some(TS),
        ..base(Opcode::SendOnly, 0x0102, 0xAB_CDEF, 0, 70_000)
    };
    check(&bytes, want);
    assert_eq!(bytes.len(), 24, "the prototype's 24-byte layout");
    // Counted from the kind byte: the anchor in bytes 8-10, index 0 in byte 11, the length in
    // bytes 12-15, the S bit (0x40) beside T (0x04) in byte 4.
    assert_eq!(
        (&bytes[8..11], bytes[11], &bytes[12..16], bytes[4]),
        (
            &[0xAB, 0xCD, 0xEF][..],
            0,
            &70_000u32.to_be_bytes()[..],
            0x44
        )
    );
    let view = BthOption::new_checked(&bytes[..]).unwrap();
    assert!(view.seq_framed());
    assert_eq!(
        (view.mbo(), view.seg(), view.icrc()),
        (0xAB_CDEF, 0, 70_000)
    );
    // Bytes 12-15 are the length, not an ICRC: sealing leaves them alone.
    assert!(!want.carries_icrc());
    let mut sealed = want;
    sealed.seal(b"any payload");
    assert_eq!(
        sealed.icrc, 70_000,
        "seal must not overwrite the message length"
    );
    // Without S the same bytes 8-15 are an offset, an index and an ICRC.
    let plain = Bth {
        seq_framed: false,
        ..want
    };
    assert!(plain.carries_icrc());
    assert_eq!(plain.to_vec().unwrap()[4], 0x04);

    // Where its segments land. The message starts at stream offset 0x1_00AB_CDEF (past 2^32:
    // the stream offsets the stack passes keep growing), so its anchor is that mod 2^24.
    let start: u64 = 0x1_00AB_CDEF;
    assert_eq!(start % (1 << 24), u64::from(want.mbo));
    let p = payload(1448);
    let first = Inbound::from_seq(&want, &p, start).unwrap();
    assert_eq!(
        (
            first.class,
            first.msn,
            first.offset,
            first.end(),
            first.last
        ),
        (MsgClass::Send, 0x0102, 0, 1448, false)
    );
    let second = Inbound::from_seq(&want, &p, start + 1448).unwrap();
    assert_eq!((second.offset, second.last), (1448, false));
    let tail = Inbound::from_seq(&want, &p[..100], start + 69_900).unwrap();
    assert_eq!((tail.offset, tail.end(), tail.last), (69_900, 70_000, true));
    assert_eq!(
        Inbound::from_seq(&want, &p[..100], start + 69_950),
        Err(InboundError::BeyondMessageLength {
            offset: 69_950,
            len: 100,
            msg_len: 70_000
        })
    );
}

#[test]
fn len40_s_rdma_write_only_with_immediate_names_the_first_byte() {
    // Anchor 0xFFFFF0: the message starts 16 bytes before a multiple of 2^24 (here 2^32), so
    // its segments' stream offsets cross it. The address is the message's first byte's, the
    // immediate rides on every segment, length 8192.
    let bytes = h("FE28EFAB 44 0B 0007 FFFFF000 00002000 01020304 05060708 \
                   00000011 00007F0000001000 99AABBCC");
    let reth = Reth {
        rkey: 0x11,
        addr: 0x7F00_0000_1000,
    };
    let want = Bth {
        seq_framed: true,
        timestamps: Some(TS),
        ext: Extension::RethImmediate(reth, 0x99AA_BBCC),
        ..base(Opcode::RdmaWriteOnlyWithImmediate, 7, 0xFF_FFF0, 0, 8192)
    };
    check(&bytes, want);
    assert_eq!(bytes.len(), 40);
    assert!(!want.carries_icrc());

    let start: u64 = (1 << 32) - 16;
    let p = payload(1000);
    // Before the multiple of 2^24: offset 0, address of byte 0.
    let a = Inbound::from_seq(&want, &p[..16], start).unwrap();
    assert_eq!(
        (a.offset, a.reth, a.imm),
        (0, Some(reth), Some(0x99AA_BBCC))
    );
    // After it: stream offset 2^32 + 16 is message byte 32, address + 32.
    let b = Inbound::from_seq(&want, &p, (1 << 32) + 16).unwrap();
    assert_eq!(b.offset, 32);
    assert_eq!(
        b.reth,
        Some(Reth {
            rkey: 0x11,
            addr: 0x7F00_0000_1020
        })
    );
    assert_eq!((b.imm, b.last), (Some(0x99AA_BBCC), false));
    // The last byte, at 8191: address + 8191, the segment that ends the message.
    let c = Inbound::from_seq(&want, &p[..1], start + 8191).unwrap();
    assert_eq!(
        (c.offset, c.reth.unwrap().addr, c.last),
        (8191, 0x7F00_0000_1000 + 8191, true)
    );
}

#[test]
fn len24_s_acknowledge_keeps_its_icrc_which_covers_the_s_bit() {
    // ICRC = CRC32C(44 11 01 02 00 00 00 00), computed bitwise in Python: with S the flags
    // byte is 0x44, so the value differs from the plain form's C67F52C8 (see
    // len24_pure_ack_r0_names_the_newest_completed_send).
    let bytes = h("FE18EFAB 44 11 0102 00000000 DC7F99FA 01020304 05060708");
    let want = Bth {
        seq_framed: true,
        timestamps: Some(TS),
        ..base(Opcode::Acknowledge, 0x0102, 0, 0, 0xDC7F_99FA)
    };
    check(&bytes, want);
    assert!(
        want.carries_icrc(),
        "control forms keep their ICRC in S framing"
    );
    assert!(want.icrc_ok(&[]));
    assert!(BthOption::new_checked(&bytes[..]).unwrap().icrc_ok(&[]));
    let mut resealed = Bth { icrc: 0, ..want };
    resealed.seal(&[]);
    assert_eq!(resealed.icrc, 0xDC7F_99FA);
    // Clearing the S bit (a middlebox, a bit error) fails the ICRC.
    let mut flipped = bytes.clone();
    flipped[4] ^= 0x40;
    assert!(!BthOption::new_checked(&flipped[..]).unwrap().icrc_ok(&[]));
    assert_eq!(Nak::from_bth(&want), None, "syndrome 0 is an ACK");
    assert_eq!(
        Inbound::from_seq(&want, &[], 0),
        Err(InboundError::NotData(Opcode::Acknowledge))
    );
}

#[test]
fn len24_s_credit_update_nak_and_hello() {
    // R=1 credit: CRC32C(54 11 00 FF 00 01 00 00).
    let mut credit = Bth {
        seq_framed: true,
        rtr: true,
        timestamps: Some(Timestamps {
            tsval: 0x1122_3344,
            tsecr: 0x5566_7788,
        }),
        ..base(Opcode::Acknowledge, 0x00FF, 0x100, 0, 0xC232_D8D2)
    };
    check(
        &h("FE18EFAB 54 11 00FF 00010000 C232D8D2 11223344 55667788"),
        credit,
    );
    assert!(credit.icrc_ok(&[]));
    credit.icrc = 0;
    credit.seal(&[]);
    assert_eq!(credit.icrc, 0xC232_D8D2);

    // NAK, invalid request for SEND MSN 7: CRC32C(44 11 00 07 00 00 04 61).
    let nak = Nak {
        code: NakCode::InvalidRequest,
        opcode: Opcode::SendOnly,
        msn: 7,
    };
    let want = Bth {
        seq_framed: true,
        timestamps: Some(TS),
        icrc: 0x363C_5242,
        ..nak.to_bth()
    };
    check(
        &h("FE18EFAB 44 11 0007 00000461 363C5242 01020304 05060708"),
        want,
    );
    assert!(want.icrc_ok(&[]));
    assert_eq!(Nak::from_bth(&want), Some(nak), "S does not hide a NAK");

    // Hello offering (or accepting) S: CRC32C(44 FF 12 34 FF FF FF 00).
    let hello = Bth {
        seq_framed: true,
        timestamps: Some(Timestamps { tsval: 1, tsecr: 0 }),
        ..base(Opcode::Hello, 0x1234, 0xFF_FFFF, 0, 0xBF8E_DB3A)
    };
    check(
        &h("FE18EFAB 44 FF 1234 FFFFFF00 BF8EDB3A 00000001 00000000"),
        hello,
    );
    assert!(hello.carries_icrc() && hello.icrc_ok(&[]));
}

/// FIRST, MIDDLE and LAST need per-segment fields S does not have: an option with S=1 and one
/// of them is refused when parsed and when emitted, and nothing else is.
#[test]
fn s_on_first_middle_last_is_refused() {
    // Hand-written: S=1 on SEND_FIRST (M=1), RDMA_WRITE_MIDDLE (M=1, 36 bytes) and
    // SEND_LAST_WITH_IMMEDIATE (M=0, 28 bytes), each otherwise well formed.
    let cases = [
        (
            "FE18EFAB 4C 00 0001 00000000 00001000 01020304 05060708",
            Opcode::SendFirst,
        ),
        (
            "FE24EFAB 4C 07 0001 00000000 00001000 01020304 05060708 00000011 00007F0000001000",
            Opcode::RdmaWriteMiddle,
        ),
        (
            "FE1CEFAB 44 03 0001 00000000 00001000 01020304 05060708 CAFEBABE",
            Opcode::SendLastWithImmediate,
        ),
        (
            "FE10EFAB 48 0E 0001 00000000 00001000",
            Opcode::RdmaReadResponseMiddle,
        ),
    ];
    for (hex, op) in cases {
        let bytes = h(hex);
        assert_eq!(
            Bth::from_bytes(&bytes),
            Err(BthError::SFramingOpcode(op)),
            "{hex}"
        );
        assert_eq!(
            BthOption::new_checked(&bytes[..]).err(),
            Some(BthError::SFramingOpcode(op))
        );
        // The same bytes without S are an ordinary option.
        let mut plain = bytes.clone();
        plain[4] &= !0x40;
        let b = Bth::from_bytes(&plain).unwrap_or_else(|e| panic!("{op}: {e}"));
        assert!(!b.seq_framed);
    }
    // Every opcode, parse and emit: refused exactly where the position is not ONLY.
    let mut refused = 0;
    for &op in Opcode::ALL {
        let b = Bth {
            seq_framed: true,
            timestamps: Some(TS),
            ext: match op.extension() {
                ExtensionKind::None => Extension::None,
                ExtensionKind::Immediate => Extension::Immediate(1),
                ExtensionKind::Reth => Extension::Reth(Reth { rkey: 1, addr: 2 }),
                ExtensionKind::RethImmediate => {
                    Extension::RethImmediate(Reth { rkey: 1, addr: 2 }, 1)
                }
            },
            ..base(op, 1, 0, 0, 16)
        };
        let first_middle_last = matches!(
            op.position(),
            Position::First | Position::Middle | Position::Last
        );
        if first_middle_last {
            refused += 1;
            assert_eq!(b.to_vec(), Err(BthError::SFramingOpcode(op)), "emit {op}");
            assert_eq!(b.validate(), Err(BthError::SFramingOpcode(op)));
            // The bytes as the non-S form would emit them, with S set afterwards.
            let mut bytes = Bth {
                seq_framed: false,
                ..b
            }
            .to_vec()
            .unwrap();
            bytes[4] |= 0x40;
            assert_eq!(
                Bth::from_bytes(&bytes),
                Err(BthError::SFramingOpcode(op)),
                "parse {op}"
            );
            // from_seq does not take them either, should a caller build one by hand.
            assert!(matches!(
                Inbound::from_seq(&b, &payload(4), 0),
                Err(InboundError::BadSFraming { opcode, .. }) if opcode == op
            ));
        } else {
            let bytes = b.to_vec().unwrap_or_else(|e| panic!("emit {op}: {e}"));
            assert_eq!(bytes[4] & 0x40, 0x40);
            assert_eq!(Bth::from_bytes(&bytes), Ok(b), "{op}");
        }
    }
    assert_eq!(
        refused, 11,
        "SEND and RDMA WRITE FIRST/MIDDLE/LAST(_WITH_IMMEDIATE), READ response FIRST/MIDDLE/LAST"
    );
}
