//! The reference model of posted messages and the check every segment descriptor must pass.

use bth_framer::SegmentDesc;
use bth_wire::{
    Bth, BthOption, Extension, Inbound, MessageKind, MsgClass, Opcode, Position, ReadRequest, Reth,
    MAX_MESSAGE_LEN,
};
use bytes::Bytes;
use std::sync::OnceLock;

/// Room for a maximal message starting anywhere in the first `PATTERN_SLACK` bytes.
pub const PATTERN_SLACK: usize = 1 << 16;

/// One pseudo-random buffer, allocated once per test binary; messages are zero-copy slices of it
/// at different offsets, so a byte taken from the wrong place or message shows up as a mismatch.
pub fn pattern() -> &'static Bytes {
    static P: OnceLock<Bytes> = OnceLock::new();
    P.get_or_init(|| {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let n = MAX_MESSAGE_LEN as usize + PATTERN_SLACK;
        let v: Vec<u8> = (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect();
        Bytes::from(v)
    })
}

/// What the test posted, as the segments of the message must describe it.
#[derive(Debug, Clone)]
pub struct Expected {
    pub class: MsgClass,
    pub msn: u16,
    pub wr_id: u64,
    pub stream_start: u64,
    /// The message's bytes, contiguous (for a READ request: its 16-byte payload).
    pub bytes: Bytes,
    pub imm: Option<u32>,
    /// rkey and address of byte 0 for WRITEs.
    pub reth: Option<Reth>,
    pub read: Option<ReadRequest>,
}

impl Expected {
    pub fn len(&self) -> u32 {
        self.bytes.len() as u32
    }

    pub fn stream_end(&self) -> u64 {
        self.stream_start + self.bytes.len() as u64
    }

    fn kind(&self) -> MessageKind {
        match self.class {
            MsgClass::Send => MessageKind::Send,
            MsgClass::Write => MessageKind::RdmaWrite,
            MsgClass::ReadRequest => MessageKind::ReadRequest,
            MsgClass::ReadResponse => MessageKind::ReadResponse,
        }
    }
}

/// Every property a segment of `m` cut at `at` with budget `max_payload` must have.
pub fn check_segment(d: &SegmentDesc, m: &Expected, at: u64, max_payload: u32, mss: u32) {
    assert_eq!(d.stream_offset, at);
    let mbo = (at - m.stream_start) as u32;
    let left = m.len() - mbo;
    assert_eq!(d.len, left.min(max_payload), "length at {at}");
    assert!(d.len > 0);
    assert!(
        d.stream_end() <= m.stream_end(),
        "segment crosses a message boundary"
    );
    assert_eq!((d.class, d.wr_id), (m.class, m.wr_id));

    // Payload: the exact bytes of the message at that position, whichever path reads them.
    let want = &m.bytes[mbo as usize..(mbo + d.len) as usize];
    assert_eq!(
        d.payload.iter().map(|s| s.len()).sum::<usize>(),
        d.payload_len()
    );
    assert!(d.payload.iter().all(|s| !s.is_empty()));
    let bytes = d.payload_bytes();
    assert!(bytes[..] == *want, "payload differs at stream offset {at}");
    let mut copy = vec![0u8; d.payload_len()];
    assert_eq!(d.copy_payload_to(&mut copy), d.payload_len());
    assert!(copy[..] == *want);

    // BTH fields implied by the byte position.
    let b = &d.bth;
    let pos = Position::of(mbo, d.len, m.len());
    let last = !pos.more();
    let imm = m.imm.filter(|_| last);
    let opcode = if m.class == MsgClass::ReadRequest {
        Opcode::RdmaReadRequest
    } else {
        Opcode::for_data(m.kind(), pos, imm.is_some()).expect("data opcode")
    };
    assert_eq!(b.opcode, opcode, "opcode at mbo {mbo} of {}", m.len());
    assert_eq!(b.opcode.position(), pos);
    assert_eq!(
        (b.msn, b.mbo, b.seg),
        (m.msn, mbo, ((mbo / mss) % 256) as u8)
    );
    let reth = m.reth.map(|r| Reth {
        rkey: r.rkey,
        addr: r.addr + u64::from(mbo),
    });
    let ext = match (reth, imm) {
        (Some(r), Some(i)) => Extension::RethImmediate(r, i),
        (Some(r), None) => Extension::Reth(r),
        (None, Some(i)) => Extension::Immediate(i),
        (None, None) => Extension::None,
    };
    assert_eq!(b.ext, ext);
    assert_eq!(
        (b.timestamps, b.icrc, b.rtr, b.rtr_ack, b.rsvd),
        (None, 0, false, false, 0)
    );
    b.validate().expect("BTH must be valid as produced");

    // On the wire: the M bit the opcode demands, and a parse back to the same value.
    let wire = b.to_vec().expect("emit");
    let view = BthOption::new_checked(&wire[..]).expect("emitted option must check");
    assert_eq!(view.more(), !last);
    assert_eq!(Bth::parse(&view), *b);

    // The receive direction reads the same message, offset, end, immediate and RETH.
    let inb = Inbound::from_bth(b, &bytes).expect("Inbound must accept every framed segment");
    assert_eq!(
        (inb.class, inb.msn, inb.offset, inb.last, inb.imm, inb.reth),
        (m.class, m.msn, mbo, last, imm, reth)
    );
    if let Some(req) = m.read {
        assert_eq!(ReadRequest::parse(inb.payload), Ok(req));
    }
}
