//! `Inbound::from_seq`: where an S-framed segment (amendment 3) lands in its message. The
//! placement offset is (stream offset − anchor) mod 2^24, where the anchor is the message's
//! first stream byte mod 2^24 and the stream offsets the stack passes keep growing past 2^32
//! (the sequence space wraps, the u64 does not). Checked here against plain integer arithmetic
//! on the message's start, never against the formula itself.

use bth_wire::{
    Bth, Extension, Inbound, InboundError, MsgClass, Opcode, ReadRequest, Reth, Timestamps,
    MAX_MESSAGE_LEN,
};
use proptest::prelude::*;

mod common;

const TS: Timestamps = Timestamps { tsval: 5, tsecr: 6 };

/// The option every segment of a message starting at stream offset `start` carries.
fn s_option(op: Opcode, msn: u16, start: u64, len: u32, ext: Extension) -> Bth {
    Bth {
        msn,
        seq_framed: true,
        mbo: (start % (1 << 24)) as u32,
        seg: 0,
        icrc: len,
        ext,
        timestamps: Some(TS),
        ..Bth::new(op)
    }
}

fn bytes(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7) as u8).collect()
}

/// (offset, end, last) of the segment of `n` bytes at message offset `off`.
fn place(b: &Bth, start: u64, off: u64, n: usize) -> Result<(u32, u32, bool), InboundError> {
    let p = bytes(n);
    Inbound::from_seq(b, &p, start + off).map(|i| (i.offset, i.end(), i.last))
}

#[test]
fn anchor_near_a_multiple_of_2_24() {
    // The message starts 5 bytes before stream offset 3·2^24: anchor 2^24 − 5.
    let start = 3 * (1u64 << 24) - 5;
    let b = s_option(Opcode::SendOnly, 1, start, 10_000, Extension::None);
    assert_eq!(b.mbo, (1 << 24) - 5);
    assert_eq!(place(&b, start, 0, 5), Ok((0, 5, false)));
    // Stream offset 3·2^24 exactly: (0 − (2^24 − 5)) mod 2^24 = 5.
    assert_eq!(place(&b, start, 5, 100), Ok((5, 105, false)));
    // A segment across the multiple of 2^24.
    assert_eq!(place(&b, start, 2, 1448), Ok((2, 1450, false)));
    assert_eq!(place(&b, start, 9_000, 1000), Ok((9_000, 10_000, true)));
    // Anchor 0 (the start on the multiple itself).
    let at = 5 * (1u64 << 24);
    let z = s_option(Opcode::SendOnly, 1, at, 10_000, Extension::None);
    assert_eq!(z.mbo, 0);
    assert_eq!(place(&z, at, 0, 1), Ok((0, 1, false)));
    assert_eq!(place(&z, at, 9_999, 1), Ok((9_999, 10_000, true)));
}

#[test]
fn stream_offsets_near_and_past_2_32() {
    // Starting 3 bytes before 2^32: the segment at 2^32 + 10 is byte 13.
    let start = (1u64 << 32) - 3;
    let b = s_option(Opcode::SendOnly, 9, start, 4096, Extension::None);
    assert_eq!(b.mbo, 0xFF_FFFD);
    assert_eq!(place(&b, start, 0, 3), Ok((0, 3, false)));
    assert_eq!(place(&b, start, 3, 10), Ok((3, 13, false)));
    assert_eq!(place(&b, start, 13, 4083), Ok((13, 4096, true)));
    // Far past 2^32 (the u64 keeps growing): only the offset mod 2^24 matters.
    for start in [
        (1u64 << 32) + 1,
        (7u64 << 32) - 1,
        (1u64 << 40) + 0x00FF_FFFF,
        u64::MAX / 2,
    ] {
        let b = s_option(Opcode::SendOnly, 9, start, 100_000, Extension::None);
        assert_eq!(
            place(&b, start, 0, 1448),
            Ok((0, 1448, false)),
            "{start:#x}"
        );
        assert_eq!(
            place(&b, start, 98_552, 1448),
            Ok((98_552, 100_000, true)),
            "{start:#x}"
        );
    }
    // The largest message, 2^24 − 1 bytes, across 2^32: its last byte is at offset 2^24 − 2.
    let start = (1u64 << 32) - 1000;
    let big = s_option(Opcode::SendOnly, 1, start, MAX_MESSAGE_LEN, Extension::None);
    let last = u64::from(MAX_MESSAGE_LEN) - 1;
    assert_eq!(
        place(&big, start, last, 1),
        Ok((MAX_MESSAGE_LEN - 1, MAX_MESSAGE_LEN, true))
    );
    assert_eq!(place(&big, start, 1000, 1), Ok((1000, 1001, false)));
}

#[test]
fn bytes_beyond_the_declared_length_are_refused() {
    let start = (1u64 << 32) - 100;
    let b = s_option(Opcode::SendOnly, 1, start, 1000, Extension::None);
    // One byte too many.
    assert_eq!(
        place(&b, start, 900, 101),
        Err(InboundError::BeyondMessageLength {
            offset: 900,
            len: 101,
            msg_len: 1000
        })
    );
    // Starting at the length.
    assert_eq!(
        place(&b, start, 1000, 1),
        Err(InboundError::BeyondMessageLength {
            offset: 1000,
            len: 1,
            msg_len: 1000
        })
    );
    // Before the message's start: the offset wraps to near 2^24, far past the length.
    let p = bytes(10);
    assert_eq!(
        Inbound::from_seq(&b, &p, start - 10),
        Err(InboundError::BeyondMessageLength {
            offset: (1 << 24) - 10,
            len: 10,
            msg_len: 1000
        })
    );
    // Bytes 2^24 past the start look like offset 0 again: that this is another start is
    // the receiver's to catch across segments (conn/rx_bth.rs), not this function's.
    assert_eq!(place(&b, start, 1 << 24, 10), Ok((0, 10, false)));
    // No payload: nothing to place in a message that has bytes.
    assert_eq!(
        Inbound::from_seq(&b, &[], start),
        Err(InboundError::EmptyPayload)
    );
}

#[test]
fn the_s_fields_themselves_are_checked() {
    let start = 77;
    let b = s_option(Opcode::SendOnly, 1, start, 100, Extension::None);
    let p = bytes(10);
    // A segment index other than 0.
    let indexed = Bth { seg: 1, ..b };
    assert_eq!(
        Inbound::from_seq(&indexed, &p, start),
        Err(InboundError::BadSFraming {
            opcode: Opcode::SendOnly,
            seg: 1,
            len: 100
        })
    );
    // A length of 2^24 or more.
    let long = Bth {
        icrc: MAX_MESSAGE_LEN + 1,
        ..b
    };
    assert_eq!(
        Inbound::from_seq(&long, &p, start),
        Err(InboundError::BadSFraming {
            opcode: Opcode::SendOnly,
            seg: 0,
            len: MAX_MESSAGE_LEN + 1
        })
    );
    // The largest length is fine.
    let max = Bth {
        icrc: MAX_MESSAGE_LEN,
        ..b
    };
    assert!(Inbound::from_seq(&max, &p, start).is_ok());
    // Not a message.
    let ack = Bth {
        icrc: 0,
        ..s_option(Opcode::Acknowledge, 1, 0, 0, Extension::None)
    };
    assert_eq!(
        Inbound::from_seq(&ack, &p, start),
        Err(InboundError::NotData(Opcode::Acknowledge))
    );
}

#[test]
fn zero_length_is_length_0_and_one_pad_byte_at_offset_0() {
    let start = (2u64 << 32) - 1;
    for (op, ext) in [
        (Opcode::SendOnly, Extension::None),
        (Opcode::SendOnlyWithImmediate, Extension::Immediate(0xCAFE)),
        (
            Opcode::RdmaWriteOnly,
            Extension::Reth(Reth {
                rkey: 3,
                addr: 0x1000,
            }),
        ),
        (
            Opcode::RdmaWriteOnlyWithImmediate,
            Extension::RethImmediate(
                Reth {
                    rkey: 3,
                    addr: 0x1000,
                },
                0xBEEF,
            ),
        ),
    ] {
        let b = s_option(op, 4, start, 0, ext);
        let i = Inbound::from_seq(&b, &[0], start).unwrap_or_else(|e| panic!("{op}: {e}"));
        assert_eq!(
            (i.class, i.msn, i.offset, i.payload, i.last, i.end()),
            (MsgClass::of(op).unwrap(), 4, 0, &[][..], true, 0),
            "{op}: nothing to place"
        );
        assert_eq!((i.imm, i.reth), (ext.immediate(), ext.reth()), "{op}");
        // The pad byte's value does not matter.
        assert!(Inbound::from_seq(&b, &[0xFF], start).is_ok());
        // Not one pad byte: no zero-length form.
        common::assert_only_one_pad_byte(op, |pad| Inbound::from_seq(&b, pad, start).err());
        // The pad byte anywhere but at the message's start.
        assert_eq!(
            Inbound::from_seq(&b, &[0], start + 1),
            Err(InboundError::BeyondMessageLength {
                offset: 1,
                len: 1,
                msg_len: 0
            }),
            "{op}"
        );
    }
    // READ messages are never empty.
    for op in [Opcode::RdmaReadRequest, Opcode::RdmaReadResponseOnly] {
        let b = s_option(op, 4, start, 0, Extension::None);
        assert_eq!(
            Inbound::from_seq(&b, &[0], start),
            Err(InboundError::BadZeroLength { opcode: op, pad: 1 })
        );
    }
}

#[test]
fn read_request_is_one_segment_of_16_bytes_length_16() {
    let start = (1u64 << 32) - 8;
    let req = ReadRequest {
        rkey: 0xAABB,
        addr: 0x1122_3344_5566_7788,
        len: 65_536,
    };
    let payload = req.to_bytes();
    let b = s_option(Opcode::RdmaReadRequest, 12, start, 16, Extension::None);
    let i = Inbound::from_seq(&b, &payload, start).unwrap();
    assert_eq!(
        (i.class, i.msn, i.offset, i.last, i.payload),
        (MsgClass::ReadRequest, 12, 0, true, &payload[..])
    );
    assert_eq!(ReadRequest::parse(i.payload), Ok(req));
    // A declared length other than 16.
    let seventeen = Bth { icrc: 17, ..b };
    assert_eq!(
        Inbound::from_seq(&seventeen, &payload, start),
        Err(InboundError::BadReadRequestLen(17))
    );
    // Part of the request (it cannot be split).
    assert_eq!(
        Inbound::from_seq(&b, &payload[..15], start),
        Err(InboundError::BadReadRequestLen(15))
    );
    assert_eq!(
        Inbound::from_seq(&b, &payload[8..], start + 8),
        Err(InboundError::PositionMismatch(Opcode::RdmaReadRequest))
    );
    // A request for no bytes.
    let none = ReadRequest { len: 0, ..req }.to_bytes();
    assert_eq!(
        Inbound::from_seq(&b, &none, start),
        Err(InboundError::BadReadLength(0))
    );
}

#[test]
fn write_address_is_the_first_bytes_plus_the_offset() {
    let start = 3 * (1u64 << 24) - 700;
    let reth = Reth {
        rkey: 0x0102_0304,
        addr: 0x7F00_0000_0000,
    };
    for imm in [None, Some(0x99AA_BBCC)] {
        let (op, ext) = match imm {
            None => (Opcode::RdmaWriteOnly, Extension::Reth(reth)),
            Some(i) => (
                Opcode::RdmaWriteOnlyWithImmediate,
                Extension::RethImmediate(reth, i),
            ),
        };
        let b = s_option(op, 2, start, 5000, ext);
        for (off, n) in [(0u64, 700usize), (700, 1448), (1, 1), (4000, 1000)] {
            let p = bytes(n);
            let i = Inbound::from_seq(&b, &p, start + off).unwrap();
            assert_eq!(i.class, MsgClass::Write);
            assert_eq!(u64::from(i.offset), off);
            assert_eq!(
                i.reth,
                Some(Reth {
                    rkey: reth.rkey,
                    addr: reth.addr + off
                }),
                "{op} at {off}"
            );
            // The immediate rides on every segment; placement takes it from the last.
            assert_eq!(i.imm, imm);
            assert_eq!(i.last, off + n as u64 == 5000);
        }
    }
}

fn start_near_wraps() -> impl Strategy<Value = u64> {
    prop_oneof![
        // Around a multiple of 2^24.
        (1u64..1024, 0u64..4096).prop_map(|(k, d)| (k << 24) - d),
        (1u64..1024, 0u64..4096).prop_map(|(k, d)| (k << 24) + d),
        // Around 2^32 and its multiples.
        (1u64..16, 0u64..100_000).prop_map(|(k, d)| (k << 32) - d),
        (1u64..16, 0u64..100_000).prop_map(|(k, d)| (k << 32) + d),
        0u64..(1 << 40),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Any segment of any message, wherever the message starts, lands at its distance from the
    /// start; its RETH names the first byte's address plus that distance; it ends the message
    /// exactly when its last byte is the message's; and one byte more is refused.
    #[test]
    fn every_segment_lands_at_its_distance_from_the_start(
        start in start_near_wraps(),
        len in prop_oneof![1u32..5000, 1u32..=MAX_MESSAGE_LEN],
        at in any::<u32>(),
        n in 1u32..3000,
        addr in 0u64..(1 << 48),
        write in any::<bool>(),
    ) {
        let off = at % len;
        let n = n.min(len - off);
        let (op, ext) = if write {
            (Opcode::RdmaWriteOnly, Extension::Reth(Reth { rkey: 1, addr }))
        } else {
            (Opcode::SendOnly, Extension::None)
        };
        let b = s_option(op, 1, start, len, ext);
        // Through the wire and back.
        let b = Bth::from_bytes(&b.to_vec().unwrap()).unwrap();
        let p = bytes(n as usize);
        let i = Inbound::from_seq(&b, &p, start + u64::from(off)).unwrap();
        prop_assert_eq!(i.offset, off);
        prop_assert_eq!(i.end(), off + n);
        prop_assert_eq!(i.last, off + n == len);
        prop_assert_eq!(i.payload, &p[..]);
        if write {
            prop_assert_eq!(i.reth, Some(Reth { rkey: 1, addr: addr + u64::from(off) }));
        }
        let over = bytes(n as usize + 1);
        if off + n == len {
            prop_assert_eq!(
                Inbound::from_seq(&b, &over, start + u64::from(off)),
                Err(InboundError::BeyondMessageLength { offset: off, len: over.len(), msg_len: len })
            );
        }
    }
}
