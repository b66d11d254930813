//! Test helpers: segments built through the real wire path (`Bth` -> `Inbound::from_bth`) and a
//! small deterministic PRNG.
#![allow(dead_code)]

use bth_wire::{Bth, Extension, Inbound, MessageKind, Opcode, Position, ReadRequest, Reth};

pub const CANARY: u8 = 0xC5;

/// SplitMix64: deterministic, dependency-free randomness for segmentation and shuffles.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform-ish in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

/// The segment carrying `payload` = message bytes `[offset, offset + payload.len())` of a
/// `total`-byte message of `kind`. `imm` goes on the LAST/ONLY segment; `reth` is the address of
/// the message's byte 0 (the segment's own address is derived from it, as the framer does).
pub fn seg<'a>(
    kind: MessageKind,
    msn: u16,
    offset: u32,
    payload: &'a [u8],
    total: u32,
    imm: Option<u32>,
    reth: Option<Reth>,
) -> Inbound<'a> {
    let pos = Position::of(offset, payload.len() as u32, total);
    let last = matches!(pos, Position::Last | Position::Only);
    let imm = imm.filter(|_| last);
    let op = Opcode::for_data(kind, pos, imm.is_some()).expect("valid opcode");
    let mut b = Bth::new(op);
    b.msn = msn;
    b.mbo = offset;
    let reth = reth.map(|r| Reth {
        rkey: r.rkey,
        addr: r.addr.wrapping_add(u64::from(offset)),
    });
    b.ext = match (reth, imm) {
        (Some(r), Some(i)) => Extension::RethImmediate(r, i),
        (Some(r), None) => Extension::Reth(r),
        (None, Some(i)) => Extension::Immediate(i),
        (None, None) => Extension::None,
    };
    Inbound::from_bth(&b, payload).expect("valid segment")
}

/// A whole message as one ONLY segment.
pub fn only<'a>(
    kind: MessageKind,
    msn: u16,
    payload: &'a [u8],
    imm: Option<u32>,
    reth: Option<Reth>,
) -> Inbound<'a> {
    seg(kind, msn, 0, payload, payload.len() as u32, imm, reth)
}

/// A write segment whose RETH address is exactly `addr` (no derivation), for bounds tests.
pub fn write_at(msn: u16, payload: &[u8], rkey: u32, addr: u64) -> Inbound<'_> {
    let mut b = Bth::new(Opcode::RdmaWriteOnly);
    b.msn = msn;
    b.ext = Extension::Reth(Reth { rkey, addr });
    Inbound::from_bth(&b, payload).expect("valid segment")
}

/// A READ request segment; `bytes` holds the 16 payload bytes and must outlive the result.
pub fn read_request(msn: u16, bytes: &[u8; 16]) -> Inbound<'_> {
    let mut b = Bth::new(Opcode::RdmaReadRequest);
    b.msn = msn;
    Inbound::from_bth(&b, bytes).expect("valid segment")
}

pub fn rr_bytes(rkey: u32, addr: u64, len: u32) -> [u8; 16] {
    ReadRequest { rkey, addr, len }.to_bytes()
}

/// Cut `[0, len)` into consecutive chunks of at most `mss`.
pub fn cut(len: u32, mss: u32) -> Vec<(u32, u32)> {
    let mut v = Vec::new();
    let mut a = 0;
    while a < len {
        let b = a.saturating_add(mss).min(len);
        v.push((a, b));
        a = b;
    }
    v
}

/// Each class's next MSN, as a sender numbers its messages: SENDs and WRITEs from `first`,
/// READ responses from the READ requests' `read_first`. Class 0 is SEND, 1 WRITE, any other
/// a READ response (how the generated specs name them).
pub struct Msns {
    first: u16,
    read_first: u16,
    /// Messages numbered so far: SEND, WRITE, READ response.
    pub sent: [u16; 3],
}

impl Msns {
    pub fn new(first: u16, read_first: u16) -> Msns {
        Msns {
            first,
            read_first,
            sent: [0; 3],
        }
    }

    /// The next message of `class`: its kind and MSN.
    pub fn next(&mut self, class: u8) -> (MessageKind, u16) {
        let (kind, i, base) = match class {
            0 => (MessageKind::Send, 0, self.first),
            1 => (MessageKind::RdmaWrite, 1, self.first),
            _ => (MessageKind::ReadResponse, 2, self.read_first),
        };
        let msn = base.wrapping_add(self.sent[i]);
        self.sent[i] += 1;
        (kind, msn)
    }

    /// The MSN the last SEND and the last WRITE took (`first − 1` where none was sent): what
    /// placement reports completed once all arrived.
    pub fn last_send_write(&self) -> [u16; 2] {
        [0, 1].map(|i| self.first.wrapping_add(self.sent[i]).wrapping_sub(1))
    }
}
