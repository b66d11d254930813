//! Proptest strategies shared by the codec property tests, and checks shared by the
//! known-answer tests.
#![allow(dead_code)]

use bth_wire::{
    Bth, Extension, ExtensionKind, InboundError, MessageKind, Opcode, Position, Reth, SackBlock,
    TcpFlags, TcpOptions, TcpRepr, Timestamps, MAX_MESSAGE_LEN,
};
use proptest::prelude::*;

pub fn opcode() -> impl Strategy<Value = Opcode> {
    prop::sample::select(Opcode::ALL)
}

pub fn timestamps() -> impl Strategy<Value = Timestamps> {
    (any::<u32>(), any::<u32>()).prop_map(|(tsval, tsecr)| Timestamps { tsval, tsecr })
}

pub fn extension(kind: ExtensionKind) -> BoxedStrategy<Extension> {
    let reth = (any::<u32>(), any::<u64>()).prop_map(|(rkey, addr)| Reth { rkey, addr });
    match kind {
        ExtensionKind::None => Just(Extension::None).boxed(),
        ExtensionKind::Immediate => any::<u32>().prop_map(Extension::Immediate).boxed(),
        ExtensionKind::Reth => reth.prop_map(Extension::Reth).boxed(),
        ExtensionKind::RethImmediate => (reth, any::<u32>())
            .prop_map(|(r, i)| Extension::RethImmediate(r, i))
            .boxed(),
    }
}

/// Only the BTH form of a pure ACK must carry timestamps; a hello may have T=0 (amendment 4).
fn needs_ts(op: Opcode) -> bool {
    op.kind() == MessageKind::Acknowledge
}

/// Any value the spec allows on the wire (rsvd included, so parse→emit can be exact).
pub fn bth_for(op: Opcode) -> BoxedStrategy<Bth> {
    let ts = if needs_ts(op) {
        timestamps().prop_map(Some).boxed()
    } else {
        prop::option::of(timestamps()).boxed()
    };
    (
        (any::<bool>(), any::<bool>(), 0u8..2, any::<u16>()),
        (0..=MAX_MESSAGE_LEN, any::<u8>(), any::<u32>()),
        ts,
        extension(op.extension()),
        // S only where amendment 3 allows it (ONLY opcodes, acknowledge, hello).
        any::<bool>().prop_map(move |s| s && op.position() == Position::Only),
    )
        .prop_map(
            move |((rtr, rtr_ack, rsvd, msn), (mbo, seg, icrc), timestamps, ext, seq_framed)| Bth {
                opcode: op,
                rtr,
                rtr_ack,
                seq_framed,
                rsvd,
                msn,
                mbo,
                seg,
                icrc,
                timestamps,
                ext,
            },
        )
        .boxed()
}

pub fn bth() -> impl Strategy<Value = Bth> {
    opcode().prop_flat_map(bth_for)
}

pub fn sack_blocks(max: usize) -> impl Strategy<Value = Vec<SackBlock>> {
    prop::collection::vec(
        (any::<u32>(), any::<u32>()).prop_map(|(left, right)| SackBlock { left, right }),
        0..=max,
    )
}

/// Option sets of the three segment shapes the stack emits, always within the 40-byte budget.
pub fn segment_options() -> impl Strategy<Value = (TcpFlags, TcpOptions)> {
    let syn = (any::<u16>(), 0u8..15, bth_for(Opcode::Hello), timestamps()).prop_map(
        |(mss, ws, hello, ts)| {
            // A hello with T=0 rides beside the RFC 7323 option (amendment 4), one with T=1 alone.
            let o = TcpOptions {
                mss: Some(mss),
                window_scale: Some(ws),
                sack_permitted: true,
                timestamps: hello.timestamps.is_none().then_some(ts),
                bth: Some(hello),
                ..Default::default()
            };
            (TcpFlags::SYN | TcpFlags::ACK, o)
        },
    );
    let data = opcode()
        .prop_filter("data opcodes", |o| {
            o.carries_payload() || *o == Opcode::RdmaReadRequest
        })
        .prop_flat_map(bth_for)
        .prop_map(|b| {
            let o = TcpOptions {
                bth: Some(b),
                ..Default::default()
            };
            (TcpFlags::ACK | TcpFlags::PSH, o)
        });
    let ack = (bth_for(Opcode::Acknowledge), sack_blocks(4)).prop_map(|(b, blocks)| {
        let mut o = TcpOptions {
            bth: Some(b),
            ..Default::default()
        };
        let room = o.sack_room();
        o.sack.extend(blocks.into_iter().take(room));
        (TcpFlags::ACK, o)
    });
    let plain = (timestamps(), sack_blocks(3)).prop_map(|(ts, blocks)| {
        let mut o = TcpOptions {
            timestamps: Some(ts),
            ..Default::default()
        };
        o.sack.extend(blocks);
        (TcpFlags::ACK, o)
    });
    prop_oneof![syn, data, ack, plain]
}

pub fn repr<'a>(flags: TcpFlags, options: TcpOptions, payload: &'a [u8]) -> TcpRepr<'a> {
    TcpRepr {
        src_port: 40000,
        dst_port: 4791,
        seq: 0x1000_0000,
        ack: 0x2000_0000,
        flags,
        window: 65535,
        urgent: 0,
        options,
        payload,
    }
}

/// A zero-length `op` message is exactly one pad byte: `decode` (the error decoding the
/// option with this payload, if any) refuses none and two as no zero-length form.
pub fn assert_only_one_pad_byte(op: Opcode, decode: impl Fn(&[u8]) -> Option<InboundError>) {
    for pad in [&[][..], &[0, 0][..]] {
        assert_eq!(
            decode(pad),
            Some(InboundError::BadZeroLength {
                opcode: op,
                pad: pad.len()
            }),
            "{op} with {} pad bytes",
            pad.len()
        );
    }
}
