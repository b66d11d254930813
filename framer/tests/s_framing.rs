//! The framer in S framing (amendment 3): whatever the cut, every segment of a message carries
//! the message's option (ONLY opcode, anchor = first stream byte mod 2^24, index 0, the
//! message length where the ICRC goes, the immediate, a WRITE's address of its first byte), so
//! a segmentation offload may cut a super-segment anywhere; and the receiver's
//! `Inbound::from_seq` puts each segment's bytes back where they were in the message. The
//! expected option is written here from the spec, not taken from the framer. Streams are moved
//! near multiples of 2^24 and near 2^32 by posting and releasing filler messages first.

use bth_framer::{Framer, FramerConfig, SegmentDesc, WorkRequest, WrOp};
use bth_wire::{
    Bth, Extension, Inbound, MsgClass, Opcode, ReadRequest, Reth, Timestamps, MAX_MESSAGE_LEN,
};
use bytes::Bytes;
use proptest::prelude::*;

fn framer(first_msn: u16) -> Framer {
    let mut f = Framer::new(FramerConfig {
        mss: 1448,
        first_msn,
        max_message_len: MAX_MESSAGE_LEN,
    });
    f.set_seq_framed(true);
    assert!(f.seq_framed());
    f
}

/// Post and release SENDs (one shared buffer, no copies) until the stream ends at `target`.
fn advance_to(f: &mut Framer, target: u64) {
    let filler = Bytes::from(vec![0u8; MAX_MESSAGE_LEN as usize]);
    while f.stream_end() < target {
        let n = (target - f.stream_end()).min(u64::from(MAX_MESSAGE_LEN)) as usize;
        f.post(WorkRequest {
            wr_id: 0,
            op: WrOp::Send { imm: None },
            sg_list: vec![filler.slice(..n)],
        })
        .unwrap();
        let end = f.stream_end();
        assert_eq!(f.release(end).len(), 1);
    }
    assert_eq!(f.stream_end(), target);
}

/// A message as posted, with what its option must say.
#[derive(Debug, Clone)]
struct Posted {
    class: MsgClass,
    msn: u16,
    start: u64,
    /// The message's bytes: the READ request's 16, one pad byte for a zero-length message.
    wire: Vec<u8>,
    /// The option every segment must carry.
    want: Bth,
}

#[derive(Debug, Clone)]
enum Op {
    Send {
        len: u32,
        imm: Option<u32>,
    },
    Write {
        len: u32,
        imm: Option<u32>,
        addr: u64,
    },
    Read {
        len: u32,
        addr: u64,
    },
    Response {
        len: u32,
    },
}

fn data(len: u32, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed))
        .collect()
}

/// Post `op`, split over up to three scatter-gather slices, and write down its expected
/// option from the spec.
fn post(f: &mut Framer, op: &Op, seed: u8) -> Posted {
    let start = f.stream_end();
    let anchor = (start % (1 << 24)) as u32;
    let sg = |bytes: &[u8]| -> Vec<Bytes> {
        let third = bytes.len() / 3;
        vec![
            Bytes::copy_from_slice(&bytes[..third]),
            Bytes::new(),
            Bytes::copy_from_slice(&bytes[third..2 * third]),
            Bytes::copy_from_slice(&bytes[2 * third..]),
        ]
    };
    let option = |op: Opcode, msn: u16, len: u32, ext: Extension| Bth {
        msn,
        seq_framed: true,
        mbo: anchor,
        seg: 0,
        icrc: len,
        ext,
        ..Bth::new(op)
    };
    match *op {
        Op::Send { len, imm } => {
            let bytes = data(len, seed);
            let p = f
                .post(WorkRequest {
                    wr_id: 1,
                    op: WrOp::Send { imm },
                    sg_list: sg(&bytes),
                })
                .unwrap();
            let (opcode, ext) = match imm {
                Some(i) => (Opcode::SendOnlyWithImmediate, Extension::Immediate(i)),
                None => (Opcode::SendOnly, Extension::None),
            };
            Posted {
                class: MsgClass::Send,
                msn: p.msn,
                start,
                wire: if len == 0 { vec![0] } else { bytes },
                want: option(opcode, p.msn, len, ext),
            }
        }
        Op::Write { len, imm, addr } => {
            let bytes = data(len, seed);
            let p = f
                .post(WorkRequest {
                    wr_id: 2,
                    op: WrOp::RdmaWrite {
                        rkey: 0xABCD,
                        remote_addr: addr,
                        imm,
                    },
                    sg_list: sg(&bytes),
                })
                .unwrap();
            let reth = Reth { rkey: 0xABCD, addr };
            let (opcode, ext) = match imm {
                Some(i) => (
                    Opcode::RdmaWriteOnlyWithImmediate,
                    Extension::RethImmediate(reth, i),
                ),
                None => (Opcode::RdmaWriteOnly, Extension::Reth(reth)),
            };
            Posted {
                class: MsgClass::Write,
                msn: p.msn,
                start,
                wire: if len == 0 { vec![0] } else { bytes },
                want: option(opcode, p.msn, len, ext),
            }
        }
        Op::Read { len, addr } => {
            let p = f
                .post(WorkRequest {
                    wr_id: 3,
                    op: WrOp::RdmaRead {
                        rkey: 0x77,
                        remote_addr: addr,
                        len,
                    },
                    sg_list: Vec::new(),
                })
                .unwrap();
            let req = ReadRequest {
                rkey: 0x77,
                addr,
                len,
            };
            Posted {
                class: MsgClass::ReadRequest,
                msn: p.msn,
                start,
                wire: req.to_bytes().to_vec(),
                // A READ request's length is its 16 bytes.
                want: option(Opcode::RdmaReadRequest, p.msn, 16, Extension::None),
            }
        }
        Op::Response { len } => {
            let bytes = data(len, seed);
            let msn = 0x4000 + u16::from(seed);
            let p = f.post_read_response(msn, sg(&bytes), false).unwrap();
            assert_eq!(p.msn, msn);
            Posted {
                class: MsgClass::ReadResponse,
                msn,
                start,
                wire: bytes,
                want: option(Opcode::RdmaReadResponseOnly, msn, len, Extension::None),
            }
        }
    }
}

/// Check one segment against its message, through the wire and back to the receiver.
fn check(m: &Posted, d: &SegmentDesc, off: u64, max: u32) -> Result<(), TestCaseError> {
    let len = m.wire.len() as u64;
    let rel = off - m.start;
    prop_assert_eq!(d.stream_offset, off);
    prop_assert_eq!(u64::from(d.len), (len - rel).min(u64::from(max)));
    prop_assert_eq!((d.class, d.bth.msn), (m.class, m.msn));
    // The message's option, whatever the cut.
    prop_assert_eq!(d.bth, m.want, "segment at {} of {} bytes", rel, d.len);
    let payload = d.payload_bytes();
    prop_assert_eq!(
        &payload[..],
        &m.wire[rel as usize..(rel + u64::from(d.len)) as usize]
    );
    // On the wire (with timestamps; sealing leaves the length alone) and back.
    let mut b = d.bth;
    b.timestamps = Some(Timestamps { tsval: 1, tsecr: 2 });
    b.seal(&payload);
    prop_assert_eq!(b.icrc, m.want.icrc, "seal overwrote the length");
    let b = Bth::from_bytes(&b.to_vec().unwrap()).unwrap();
    let i = Inbound::from_seq(&b, &payload, off);
    prop_assert!(i.is_ok(), "from_seq: {:?}", i);
    let i = i.unwrap();
    prop_assert_eq!((i.class, i.msn), (m.class, m.msn));
    if m.want.icrc == 0 {
        // Zero-length: the pad byte, nothing to place.
        prop_assert_eq!((i.offset, i.payload.len(), i.last), (0, 0, true));
        return Ok(());
    }
    prop_assert_eq!(u64::from(i.offset), rel);
    prop_assert_eq!(i.payload, &payload[..]);
    prop_assert_eq!(i.last, rel + u64::from(d.len) == len);
    prop_assert_eq!(i.imm, m.want.ext.immediate());
    prop_assert_eq!(
        i.reth,
        m.want.ext.reth().map(|r| Reth {
            addr: r.addr + rel,
            ..r
        })
    );
    Ok(())
}

/// Cut every message at random sizes from its start, then re-cut random ranges (a
/// retransmission cut differently); reassemble the first cut from what `from_seq` says.
fn run(
    first_msn: u16,
    target: u64,
    ops: &[Op],
    sizes: &[u32],
    recuts: &[(u32, u32)],
) -> Result<(), TestCaseError> {
    let mut f = framer(first_msn);
    advance_to(&mut f, target);
    let msgs: Vec<Posted> = ops
        .iter()
        .enumerate()
        .map(|(i, op)| post(&mut f, op, i as u8))
        .collect();
    let mut sizes = sizes.iter().cycle();
    for m in &msgs {
        let end = m.start + m.wire.len() as u64;
        let mut placed = vec![None; m.wire.len()];
        let mut off = m.start;
        while off < end {
            let mut max = *sizes.next().unwrap();
            if m.class == MsgClass::ReadRequest && max < 16 {
                // A READ request travels whole: no segment of part of it.
                prop_assert!(f.segment_at(off, max).is_none());
                max += 16;
            }
            let d = f.segment_at(off, max);
            prop_assert!(d.is_some(), "no segment at {} (max {})", off - m.start, max);
            let d = d.unwrap();
            check(m, &d, off, max)?;
            let payload = d.payload_bytes();
            let b = Inbound::from_seq(&d.bth, &payload, off).unwrap();
            if m.want.icrc == 0 {
                placed[0] = Some(0);
            } else {
                for (k, &x) in b.payload.iter().enumerate() {
                    let at = b.offset as usize + k;
                    prop_assert!(placed[at].is_none(), "byte {} twice", at);
                    placed[at] = Some(x);
                }
            }
            off = d.stream_end();
        }
        let back: Option<Vec<u8>> = placed.into_iter().collect();
        prop_assert_eq!(back.as_deref(), Some(&m.wire[..]), "msn {}", m.msn);
        // Retransmissions cut elsewhere carry the same option.
        for &(at, max) in recuts {
            let rel = u64::from(at) % m.wire.len() as u64;
            let off = m.start + rel;
            match f.segment_at(off, max) {
                Some(d) => check(m, &d, off, max)?,
                None => prop_assert!(m.class == MsgClass::ReadRequest && (rel != 0 || max < 16)),
            }
        }
    }
    Ok(())
}

fn op() -> impl Strategy<Value = Op> {
    let len = prop_oneof![2 => Just(0u32), 6 => 1u32..=5000, 1 => 1u32..=200_000];
    let imm = prop::option::of(any::<u32>());
    prop_oneof![
        (len.clone(), imm.clone()).prop_map(|(len, imm)| Op::Send { len, imm }),
        (len.clone(), imm, 0u64..(1 << 48)).prop_map(|(len, imm, addr)| Op::Write {
            len,
            imm,
            addr
        }),
        (1u32..=MAX_MESSAGE_LEN, 0u64..(1 << 48)).prop_map(|(len, addr)| Op::Read { len, addr }),
        (1u32..=5000).prop_map(|len| Op::Response { len }),
    ]
}

/// Where the first message starts: near multiples of 2^24 and near 2^32.
fn target() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        (1u64..=300, 0u64..3000).prop_map(|(k, d)| (k << 24) - d),
        (1u64..=300, 0u64..3000).prop_map(|(k, d)| (k << 24) + d),
        (0u64..100_000).prop_map(|d| (1 << 32) - d),
        (0u64..3000).prop_map(|d| (1 << 32) + d),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_cut_carries_the_messages_option_and_lands_where_it_was(
        first in any::<u16>(),
        target in target(),
        ops in prop::collection::vec(op(), 1..6),
        sizes in prop::collection::vec(prop_oneof![1u32..20, 1u32..3000, Just(65_000u32), Just(u32::MAX)], 1..8),
        recuts in prop::collection::vec((any::<u32>(), 1u32..70_000), 0..8),
    ) {
        run(first, target, &ops, &sizes, &recuts)?;
    }
}

/// A SEND across 2^32 and a WRITE with immediate across 3·2^24, cut at 1448 bytes and at odd
/// sizes: the anchor is the start mod 2^24, the offset field never the segment's own.
#[test]
fn messages_across_2_32_and_3_times_2_24() {
    let send = Op::Send {
        len: 70_000,
        imm: Some(0xCAFE),
    };
    run(
        0xFFFF,
        (1 << 32) - 1000,
        &[send],
        &[1448, 7, 60_000],
        &[(5, 1)],
    )
    .unwrap();
    let write = Op::Write {
        len: 100_000,
        imm: Some(0xBEEF),
        addr: 0x7F00_0000_0000,
    };
    run(
        7,
        (3 << 24) - 50_000,
        &[write],
        &[1448, 1, 65_000],
        &[(50_000, 9)],
    )
    .unwrap();
    // The segment at the multiple of 2^24 says anchor 2^24 − 50,000, not 0.
    let mut f = framer(7);
    advance_to(&mut f, (3 << 24) - 50_000);
    f.post(WorkRequest {
        wr_id: 1,
        op: WrOp::Send { imm: None },
        sg_list: vec![Bytes::from(vec![1u8; 100_000])],
    })
    .unwrap();
    let d = f.segment_at(3 << 24, 1448).unwrap();
    assert_eq!(
        (d.bth.mbo, d.bth.seg, d.bth.icrc),
        ((1 << 24) - 50_000, 0, 100_000)
    );
    assert_eq!(
        Inbound::from_seq(&d.bth, &[1; 1448], 3 << 24)
            .unwrap()
            .offset,
        50_000
    );
}

/// The per-segment framer of the same messages gives FIRST/MIDDLE/LAST and its own offsets:
/// the switch is what makes the difference.
#[test]
fn without_s_the_same_cut_is_per_segment() {
    let mut f = framer(1);
    f.set_seq_framed(false);
    f.post(WorkRequest {
        wr_id: 1,
        op: WrOp::Send { imm: None },
        sg_list: vec![Bytes::from(vec![1u8; 3000])],
    })
    .unwrap();
    let d = f.segment_at(1448, 1448).unwrap();
    assert_eq!(
        (d.bth.opcode, d.bth.mbo, d.bth.seg, d.bth.seq_framed),
        (Opcode::SendMiddle, 1448, 1, false)
    );
    f.set_seq_framed(true);
    let d = f.segment_at(1448, 1448).unwrap();
    assert_eq!(
        (
            d.bth.opcode,
            d.bth.mbo,
            d.bth.seg,
            d.bth.icrc,
            d.bth.seq_framed
        ),
        (Opcode::SendOnly, 0, 0, 3000, true)
    );
}
