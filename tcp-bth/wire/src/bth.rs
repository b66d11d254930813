//! The `tcp_bth` option: a typed view over its bytes ([`BthOption`]) with one validating entry
//! point, and a plain value ([`Bth`]) with `parse` and `emit`.
//!
//! Option bytes (offsets from the kind byte):
//! ```text
//!  0 kind=254 | 1 len | 2-3 ExID 0xEFAB
//!  4 flags: ver:2 (bits 1-0) T (0x04) M (0x08) R (0x10) A (0x20) S (0x40) rsvd (bit 7)
//!  5 opcode | 6-7 MSN | 8-11 mbo_seg (offset:24 | seg:8) | 12-15 ICRC
//! 16-23 TSval, TSecr            (only if T)
//!  then  imm | rkey+addr | rkey+addr+imm   (chosen by opcode)
//! ```

use crate::opcode::{ExtensionKind, MessageKind, Opcode};
use thiserror::Error;

/// TCP option kind: shared experimental (RFC 6994).
pub const KIND: u8 = 254;
/// Experiment identifier following kind and length.
pub const EXID: u16 = 0xEFAB;
/// The only version defined.
pub const VERSION: u8 = 0;
/// kind + len + ExID.
pub const PREFIX_LEN: usize = 4;
/// Bytes covered by the ICRC ahead of the payload (flags..mbo_seg).
pub const ICRC_HEADER_LEN: usize = 8;
/// Smallest option: prefix, flags..ICRC, no timestamps, no extension.
pub const MIN_LEN: usize = PREFIX_LEN + 12;
/// Largest option: timestamps and the largest extension.
pub const MAX_LEN: usize = MIN_LEN + 8 + 16;
/// The 24-bit offset field bounds message sizes.
pub const MAX_MESSAGE_LEN: u32 = (1 << 24) - 1;

const FLAG_VERSION: u8 = 0x03;
const FLAG_T: u8 = 0x04;
const FLAG_M: u8 = 0x08;
const FLAG_R: u8 = 0x10;
const FLAG_A: u8 = 0x20;
/// Sequence-anchored framing (amendment 3): the option is the same in every segment of a
/// message; offsets come from sequence numbers, the ICRC field (option bytes 12-15) holds the
/// message length.
const FLAG_S: u8 = 0x40;
const RSVD_SHIFT: u8 = 7;

mod field {
    use core::ops::Range;
    pub const KIND: usize = 0;
    pub const LEN: usize = 1;
    pub const EXID: Range<usize> = 2..4;
    pub const FLAGS: usize = 4;
    pub const OPCODE: usize = 5;
    pub const MSN: Range<usize> = 6..8;
    pub const MBO_SEG: Range<usize> = 8..12;
    pub const ICRC: Range<usize> = 12..16;
    pub const TS: usize = 16;
}

/// Why option bytes were refused (parse) or a value could not be written (emit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum BthError {
    /// Fewer bytes than the 4-byte prefix, or than the 16-byte smallest option.
    #[error("option truncated: {got} bytes, at least {needed} needed")]
    Truncated {
        /// Bytes required: 4 (kind, length, ExID) or 16 ([`MIN_LEN`]).
        needed: usize,
        /// Bytes present.
        got: usize,
    },
    /// Byte 0 is not kind 254; holds the kind found.
    #[error("option kind {0} is not 254")]
    WrongKind(u8),
    /// The length byte (byte 1) disagrees with the number of bytes handed in.
    #[error("length field says {field} bytes but {actual} are present")]
    LengthFieldMismatch {
        /// Value of the length byte.
        field: u8,
        /// Bytes present.
        actual: usize,
    },
    /// Bytes 2-3 are not ExID 0xEFAB; holds the ExID found.
    #[error("experiment id {0:#06x} is not 0xefab")]
    WrongExId(u16),
    /// Version bits (flags bits 1-0) other than 0; holds them.
    #[error("unsupported tcp_bth version {0}")]
    UnsupportedVersion(u8),
    /// Opcode byte (byte 5) with no defined opcode; holds it.
    #[error("unknown opcode {0:#04x}")]
    UnknownOpcode(u8),
    /// The option length is not 16 + 8·T + the opcode's extension length.
    #[error("length {len} does not match flags and opcode {opcode} (expected {expected})")]
    LengthInconsistent {
        /// The option's opcode, which picks the extension.
        opcode: Opcode,
        /// The length byte.
        len: u8,
        /// Length T and the opcode call for, in bytes.
        expected: u8,
    },
    /// M (flags 0x08) clear on FIRST/MIDDLE or set on any other opcode.
    #[error("M bit {more} is wrong for opcode {opcode}")]
    MoreBitInconsistent {
        /// The option's opcode.
        opcode: Opcode,
        /// The M bit as received.
        more: bool,
    },
    /// ACKNOWLEDGE with T=0: a pure ACK in BTH form stands in for the RFC 7323 timestamp
    /// option, so it must carry TSval/TSecr (refused on parse and on emit). A hello may have
    /// T=0 (amendment 4: a SYN's hello beside the RFC 7323 option).
    #[error("opcode {0} requires the timestamp fields (T=1)")]
    TimestampsRequired(Opcode),
    /// Emit: [`Bth::ext`] is not the extension kind the opcode calls for.
    #[error("extension does not match opcode {0}")]
    ExtensionMismatch(Opcode),
    /// Emit: [`Bth::mbo`] is above 2^24 − 1, too large for the 24-bit offset field; holds it.
    #[error("message byte offset {0} does not fit in 24 bits")]
    OffsetTooLarge(u32),
    /// Emit: the output buffer is shorter than the option.
    #[error("output buffer of {got} bytes, {needed} needed")]
    BufferTooSmall {
        /// Option length in bytes.
        needed: usize,
        /// Buffer length in bytes.
        got: usize,
    },
    /// S framing (amendment 3) carries messages in ONLY opcodes alone.
    #[error("S framing carries only ONLY opcodes, not {0}")]
    SFramingOpcode(Opcode),
}

/// Wire length of an option with these properties.
pub const fn option_len(timestamps: bool, ext: ExtensionKind) -> usize {
    MIN_LEN + if timestamps { 8 } else { 0 } + ext.len()
}

/// Opcodes an option with S=1 may carry: the ONLY forms of messages, and the control forms
/// (hello, acknowledge). FIRST, MIDDLE and LAST would need per-segment fields S does not have.
const fn s_framing_allows(op: Opcode) -> bool {
    matches!(op.position(), crate::opcode::Position::Only)
}

/// The BTH form of a pure ACK replaces the timestamp option, so it must carry timestamps.
/// A hello need not (amendment 4): a SYN's hello may have T=0 (16 bytes) beside the RFC 7323
/// timestamp option, so that a peer without BTH still negotiates timestamps. Where a T=0
/// hello is allowed (on a SYN) is the connection's to decide; the codec cannot see the flags.
const fn requires_timestamps(op: Opcode) -> bool {
    matches!(op.kind(), MessageKind::Acknowledge)
}

/// A read-only typed view over the bytes of one option (kind through the end of the extension).
#[derive(Debug, Clone, Copy)]
pub struct BthOption<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> BthOption<T> {
    /// Wrap without checking: accessors may panic on bytes [`check`](Self::check) would refuse.
    pub const fn new_unchecked(buffer: T) -> Self {
        BthOption { buffer }
    }

    /// The one validating entry point: after `Ok`, every accessor is in bounds and consistent.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, BthError> {
        let opt = BthOption { buffer };
        opt.check()?;
        Ok(opt)
    }

    /// Validate kind, length, ExID, version, opcode, and their mutual consistency.
    ///
    /// One pass over the fixed 16-byte head accepts every valid option; only bytes it refuses
    /// take the ordered walk that names the first thing wrong.
    #[inline]
    pub fn check(&self) -> Result<(), BthError> {
        let b = self.buffer.as_ref();
        match b.first_chunk::<MIN_LEN>() {
            Some(head) if accepts(head, b.len()) => Ok(()),
            _ => refusal(b),
        }
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Flags through ICRC, the part every option has, and what follows it.
    #[inline]
    fn head_tail(&self) -> (&[u8; MIN_LEN], &[u8]) {
        self.bytes().split_first_chunk().expect("checked view")
    }

    fn head(&self) -> &[u8; MIN_LEN] {
        self.head_tail().0
    }

    /// Bytes in the view: once checked, the option length (kind through extension), 16 to 40.
    pub fn len(&self) -> usize {
        self.bytes().len()
    }

    /// Whether the view holds no bytes (never true once checked).
    pub fn is_empty(&self) -> bool {
        self.bytes().is_empty()
    }

    /// The flags byte (byte 4): ver (bits 1-0), T, M, R, A, S and reserved bit 7.
    pub fn flags(&self) -> u8 {
        self.head()[field::FLAGS]
    }

    /// T (flags 0x04): TSval and TSecr follow the ICRC, at bytes 16-23.
    pub fn timestamp_present(&self) -> bool {
        self.flags() & FLAG_T != 0
    }

    /// M (flags 0x08): more segments of this message follow; set exactly on FIRST/MIDDLE.
    pub fn more(&self) -> bool {
        self.flags() & FLAG_M != 0
    }

    /// R (flags 0x10, rtr): MSN and offset field carry credit (the last SEND MSN with a posted
    /// buffer, and a byte grant in 4 KiB units).
    pub fn rtr(&self) -> bool {
        self.flags() & FLAG_R != 0
    }

    /// A (flags 0x20, rtr_ack): the stack sets it to echo that new R=1 credit arrived.
    pub fn rtr_ack(&self) -> bool {
        self.flags() & FLAG_A != 0
    }

    /// S: sequence-anchored framing (amendment 3).
    pub fn seq_framed(&self) -> bool {
        self.flags() & FLAG_S != 0
    }

    /// Reserved flags bit 7, as 0 or 1: 0 on send, ignored on receive.
    pub fn rsvd(&self) -> u8 {
        self.flags() >> RSVD_SHIFT
    }

    /// The opcode; defined after a successful check.
    pub fn opcode(&self) -> Opcode {
        head_opcode(self.head())
    }

    /// MSN (bytes 6-7), mod 2^16.
    pub fn msn(&self) -> u16 {
        be16(self.head(), field::MSN.start)
    }

    /// Upper 24 bits of mbo_seg: byte offset inside the message.
    pub fn mbo(&self) -> u32 {
        be32(self.head(), field::MBO_SEG.start) >> 8
    }

    /// Low 8 bits of mbo_seg: segment index inside the message, mod 256.
    pub fn seg(&self) -> u8 {
        self.head()[field::MBO_SEG.end - 1]
    }

    /// Bytes 12-15: the ICRC, or in an S-framed data segment the message length.
    pub fn icrc(&self) -> u32 {
        be32(self.head(), field::ICRC.start)
    }

    /// TSval and TSecr (bytes 16-23), if T=1.
    pub fn timestamps(&self) -> Option<Timestamps> {
        let (head, tail) = self.head_tail();
        Timestamps::split(head, tail).0
    }

    /// The extension the opcode selects, read from the bytes after the timestamps.
    pub fn extension(&self) -> Extension {
        let (head, tail) = self.head_tail();
        Extension::read(
            head_opcode(head).extension(),
            Timestamps::split(head, tail).1,
        )
    }

    /// The ICRC the bytes as received call for over this payload: flags through mbo_seg
    /// (option bytes 4-11), the extension as it stands on the wire, then the payload (amendment 2).
    pub fn compute_icrc(&self, payload: &[u8]) -> u32 {
        let (head, tail) = self.head_tail();
        let ext = Timestamps::split(head, tail).1;
        icrc_covered(&head[field::FLAGS..field::ICRC.start], ext, &[payload])
    }

    /// Whether the ICRC field equals [`compute_icrc`](Self::compute_icrc) over `payload`
    /// (not an ICRC check on an S-framed data segment, whose field is the message length).
    pub fn icrc_ok(&self, payload: &[u8]) -> bool {
        self.compute_icrc(payload) == self.icrc()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> BthOption<T> {
    /// Fill the ICRC in place once the payload is known (nothing for an S-framed data
    /// segment, whose bytes 8-11 hold its message's length, amendment 3).
    pub fn seal(&mut self, payload: &[u8]) {
        if self.seq_framed() && crate::MsgClass::of(self.opcode()).is_some() {
            return;
        }
        let crc = self.compute_icrc(payload);
        self.buffer.as_mut()[field::ICRC].copy_from_slice(&crc.to_be_bytes());
    }
}

/// CRC32C over the 8 header bytes (flags..mbo_seg) followed by the payload: the ICRC of an
/// option without extension. With one, the extension's bytes come between the two
/// ([`icrc_covered`], amendment 2).
pub fn icrc(header8: &[u8], payload: &[u8]) -> u32 {
    icrc_parts(header8, &[payload])
}

/// The ICRC of amendment 2: CRC32C over the 8 header bytes, then the extension's bytes as
/// they stand on the wire (imm_data, rkey and address, or all three), then the payload made of
/// `parts` in order. Before the amendment the extension was not covered, so a corrupted rkey or
/// address placed a WRITE elsewhere with every check passing. The timestamps stay outside it:
/// they are rewritten on every retransmission.
pub fn icrc_covered<P: AsRef<[u8]>>(header8: &[u8], ext: &[u8], parts: &[P]) -> u32 {
    let mut d = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
    d.update(header8);
    d.update(ext);
    for p in parts {
        d.update(p.as_ref());
    }
    // A 32-bit CRC in the low half of the 64-bit result.
    d.finalize() as u32
}

/// [`icrc`] over a payload made of `parts` in order.
///
/// CRC32C (CRC-32/ISCSI) from `crc-fast`, which folds with carry-less multiplication
/// (PCLMULQDQ, VPCLMULQDQ where the CPU has them, chosen at run time): on this project's
/// machine 28.6 GB/s over a 1448-byte payload and 58 over 64,960 bytes, against 13.1 and 26.0
/// for the `crc32c` crate's three-way `crc32` instruction loop used before, which was the
/// largest cost in our own code on both sides at MTU 65000 (`docs/datapath.md`, "The ICRC").
pub fn icrc_parts<P: AsRef<[u8]>>(header8: &[u8], parts: &[P]) -> u32 {
    icrc_covered(header8, &[], parts)
}

/// What one opcode wire value demands of an option, so that [`accepts`] needs one table load
/// instead of the opcode look-up and three property matches.
#[derive(Clone, Copy)]
struct Rule {
    /// Flag bits that must equal `want`: the version, M, and T where the opcode requires it.
    mask: u8,
    /// `0xFF` for an undefined opcode: no flags byte under `mask` = 0 equals it.
    want: u8,
    /// Option length without timestamps.
    len: u8,
}

const RULES: [Rule; 256] = {
    let mut rules = [Rule {
        mask: 0,
        want: 0xFF,
        len: 0,
    }; 256];
    let mut i = 0;
    while i < Opcode::ALL.len() {
        let op = Opcode::ALL[i];
        let t = if requires_timestamps(op) { FLAG_T } else { 0 };
        let m = if op.more() { FLAG_M } else { 0 };
        let s = if s_framing_allows(op) { 0 } else { FLAG_S };
        rules[op.as_u8() as usize] = Rule {
            mask: FLAG_VERSION | FLAG_M | t | s,
            want: VERSION | m | t,
            len: option_len(false, op.extension()) as u8,
        };
        i += 1;
    }
    rules
};

/// Whether an option of `len` bytes starting with `head` passes every check of
/// [`BthOption::check`]: their conjunction, without short-circuits, from one table load.
#[inline]
fn accepts(head: &[u8; MIN_LEN], len: usize) -> bool {
    let flags = head[field::FLAGS];
    let rule = RULES[usize::from(head[field::OPCODE])];
    let expected = usize::from(rule.len) + if flags & FLAG_T != 0 { 8 } else { 0 };
    let prefix = [
        KIND,
        head[field::LEN],
        EXID.to_be_bytes()[0],
        EXID.to_be_bytes()[1],
    ];
    (head[..PREFIX_LEN] == prefix)
        & (usize::from(head[field::LEN]) == len)
        & (flags & rule.mask == rule.want)
        & (expected == len)
}

/// The first thing wrong with option bytes [`accepts`] refused, checked in the order that picks
/// the error variant: prefix (length, kind, length field, ExID), then version, opcode, length
/// against flags and opcode, M bit, timestamps, S framing. `tests/bth_oracle.rs` pins this order.
#[cold]
#[inline(never)]
fn refusal(b: &[u8]) -> Result<(), BthError> {
    if b.len() < PREFIX_LEN {
        return Err(BthError::Truncated {
            needed: PREFIX_LEN,
            got: b.len(),
        });
    }
    if b[field::KIND] != KIND {
        return Err(BthError::WrongKind(b[field::KIND]));
    }
    let len = b[field::LEN];
    if usize::from(len) != b.len() {
        return Err(BthError::LengthFieldMismatch {
            field: len,
            actual: b.len(),
        });
    }
    let exid = u16::from_be_bytes([b[2], b[3]]);
    if exid != EXID {
        return Err(BthError::WrongExId(exid));
    }
    if b.len() < MIN_LEN {
        return Err(BthError::Truncated {
            needed: MIN_LEN,
            got: b.len(),
        });
    }
    let flags = b[field::FLAGS];
    if flags & FLAG_VERSION != VERSION {
        return Err(BthError::UnsupportedVersion(flags & FLAG_VERSION));
    }
    let opcode =
        Opcode::from_u8(b[field::OPCODE]).ok_or(BthError::UnknownOpcode(b[field::OPCODE]))?;
    let ts = flags & FLAG_T != 0;
    let expected = option_len(ts, opcode.extension());
    if b.len() != expected {
        return Err(BthError::LengthInconsistent {
            opcode,
            len,
            expected: expected as u8,
        });
    }
    let more = flags & FLAG_M != 0;
    if more != opcode.more() {
        return Err(BthError::MoreBitInconsistent { opcode, more });
    }
    if !ts && requires_timestamps(opcode) {
        return Err(BthError::TimestampsRequired(opcode));
    }
    if flags & FLAG_S != 0 && !s_framing_allows(opcode) {
        return Err(BthError::SFramingOpcode(opcode));
    }
    Ok(())
}

/// Big-endian loads at fixed offsets of fixed-size chunks: no bounds check survives inlining.
#[inline(always)]
fn be16<const N: usize>(b: &[u8; N], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline(always)]
fn be32<const N: usize>(b: &[u8; N], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline(always)]
fn be64<const N: usize>(b: &[u8; N], at: usize) -> u64 {
    (u64::from(be32(b, at)) << 32) | u64::from(be32(b, at + 4))
}

/// The first `N` bytes of a checked view's remainder.
#[inline(always)]
fn chunk<const N: usize>(b: &[u8]) -> &[u8; N] {
    b.first_chunk().expect("checked view")
}

#[inline]
fn head_opcode(head: &[u8; MIN_LEN]) -> Opcode {
    Opcode::from_u8(head[field::OPCODE]).expect("checked view")
}

/// Folded RFC 7323 timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Timestamps {
    /// TSval: the sender's timestamp clock (the stack ticks it in microseconds).
    pub tsval: u32,
    /// TSecr: the peer's TSval echoed back (RFC 7323 TS.Recent).
    pub tsecr: u32,
}

impl Timestamps {
    /// The timestamps, if the flags in `head` say they are present, and the bytes after them.
    #[inline]
    fn split<'a>(head: &[u8; MIN_LEN], tail: &'a [u8]) -> (Option<Timestamps>, &'a [u8]) {
        if head[field::FLAGS] & FLAG_T == 0 {
            return (None, tail);
        }
        let (ts, rest) = tail.split_first_chunk::<8>().expect("checked view");
        let ts = Timestamps {
            tsval: be32(ts, 0),
            tsecr: be32(ts, 4),
        };
        (Some(ts), rest)
    }
}

/// RDMA extended transport header fields carried by WRITE segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reth {
    /// rkey naming the remote memory region (4 bytes on the wire).
    pub rkey: u32,
    /// Remote virtual address of this segment's first payload byte.
    pub addr: u64,
}

/// The opcode-selected extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Extension {
    /// No extension (0 bytes).
    None,
    /// imm_data (4 bytes): SEND_*_WITH_IMMEDIATE.
    Immediate(u32),
    /// rkey and address (12 bytes): RDMA_WRITE_* without immediate.
    Reth(Reth),
    /// rkey, address and imm_data (16 bytes): RDMA_WRITE_*_WITH_IMMEDIATE.
    RethImmediate(Reth, u32),
}

impl Extension {
    /// The extension of this kind at the front of `b` (imm | rkey+addr | rkey+addr+imm).
    #[inline]
    fn read(kind: ExtensionKind, b: &[u8]) -> Extension {
        let reth = |r: &[u8; 12]| Reth {
            rkey: be32(r, 0),
            addr: be64(r, 4),
        };
        match kind {
            ExtensionKind::None => Extension::None,
            ExtensionKind::Immediate => Extension::Immediate(be32(chunk::<4>(b), 0)),
            ExtensionKind::Reth => Extension::Reth(reth(chunk(b))),
            ExtensionKind::RethImmediate => {
                let b = chunk::<16>(b);
                Extension::RethImmediate(reth(chunk(b)), be32(b, 12))
            }
        }
    }

    /// Which extension this is, as an opcode names it.
    pub const fn kind(&self) -> ExtensionKind {
        match self {
            Extension::None => ExtensionKind::None,
            Extension::Immediate(_) => ExtensionKind::Immediate,
            Extension::Reth(_) => ExtensionKind::Reth,
            Extension::RethImmediate(..) => ExtensionKind::RethImmediate,
        }
    }

    /// The imm_data, if this extension has one.
    pub const fn immediate(&self) -> Option<u32> {
        match self {
            Extension::Immediate(i) | Extension::RethImmediate(_, i) => Some(*i),
            _ => None,
        }
    }

    /// The rkey and address, if this extension has them.
    pub const fn reth(&self) -> Option<Reth> {
        match self {
            Extension::Reth(r) | Extension::RethImmediate(r, _) => Some(*r),
            _ => None,
        }
    }
}

/// A decoded `tcp_bth` option. The M bit and version are implied by `opcode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Bth {
    /// Opcode (byte 5); it also fixes the M bit and which extension follows.
    pub opcode: Opcode,
    /// R (flags 0x10): MSN and `mbo` carry credit, not an acknowledgement (see `mbo`).
    pub rtr: bool,
    /// A (flags 0x20): the stack sets it to echo that new R=1 credit arrived.
    pub rtr_ack: bool,
    /// S: sequence-anchored framing (amendment 3). Then `mbo` is the message's anchor (its
    /// first byte's stream offset mod 2^24), `seg` is 0 and `icrc` holds the message length.
    pub seq_framed: bool,
    /// Reserved bit 7: zero when sending, kept as received so parse→emit is exact.
    pub rsvd: u8,
    /// MSN (bytes 6-7), mod 2^16: on data, the message's, counted per message class.
    pub msn: u16,
    /// Message byte offset (24 bits); for `Hello` the largest message accepted; with `rtr` a grant.
    pub mbo: u32,
    /// Low 8 bits of mbo_seg: the segment's index in its message mod 256; the AETH syndrome
    /// on ACKNOWLEDGE; 0 under S.
    pub seg: u8,
    /// Bytes 12-15: the CRC32C ICRC, set by [`seal`](Self::seal); in an S-framed data
    /// segment, the message length in bytes.
    pub icrc: u32,
    /// TSval and TSecr; `Some` sets T and adds 8 bytes to the option.
    pub timestamps: Option<Timestamps>,
    /// The extension; must be the kind [`Opcode::extension`] names.
    pub ext: Extension,
}

impl Bth {
    /// A value with everything but the opcode zeroed and no extension or timestamps.
    pub const fn new(opcode: Opcode) -> Bth {
        Bth {
            opcode,
            rtr: false,
            rtr_ack: false,
            seq_framed: false,
            rsvd: 0,
            msn: 0,
            mbo: 0,
            seg: 0,
            icrc: 0,
            timestamps: None,
            ext: Extension::None,
        }
    }

    /// Parse a checked view: fixed-offset loads from the 16-byte head, then the timestamps and
    /// extension from what follows it, each behind one length test a checked view always passes.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(opt: &BthOption<T>) -> Bth {
        let (head, tail) = opt.head_tail();
        let (timestamps, rest) = Timestamps::split(head, tail);
        let opcode = opt.opcode();
        Bth {
            opcode,
            rtr: opt.rtr(),
            rtr_ack: opt.rtr_ack(),
            seq_framed: opt.seq_framed(),
            rsvd: opt.rsvd(),
            msn: opt.msn(),
            mbo: opt.mbo(),
            seg: opt.seg(),
            icrc: opt.icrc(),
            timestamps,
            ext: Extension::read(opcode.extension(), rest),
        }
    }

    /// Validate and parse option bytes (kind through end of option).
    #[inline]
    pub fn from_bytes(bytes: &[u8]) -> Result<Bth, BthError> {
        BthOption::new_checked(bytes).map(|o| Bth::parse(&o))
    }

    /// Bytes [`emit`](Self::emit) writes.
    pub fn buffer_len(&self) -> usize {
        option_len(self.timestamps.is_some(), self.ext.kind())
    }

    /// Check that this value can be put on the wire as it is.
    pub fn validate(&self) -> Result<(), BthError> {
        if self.mbo > MAX_MESSAGE_LEN {
            return Err(BthError::OffsetTooLarge(self.mbo));
        }
        if self.ext.kind() != self.opcode.extension() {
            return Err(BthError::ExtensionMismatch(self.opcode));
        }
        if self.timestamps.is_none() && requires_timestamps(self.opcode) {
            return Err(BthError::TimestampsRequired(self.opcode));
        }
        if self.seq_framed && !s_framing_allows(self.opcode) {
            return Err(BthError::SFramingOpcode(self.opcode));
        }
        Ok(())
    }

    /// The 8 bytes the ICRC covers ahead of the payload.
    pub fn icrc_header(&self) -> [u8; ICRC_HEADER_LEN] {
        let mut h = [0u8; ICRC_HEADER_LEN];
        h[0] = self.flags();
        h[1] = self.opcode.as_u8();
        h[2..4].copy_from_slice(&self.msn.to_be_bytes());
        h[4..8].copy_from_slice(&((self.mbo << 8) | u32::from(self.seg)).to_be_bytes());
        h
    }

    fn flags(&self) -> u8 {
        let mut f = VERSION;
        if self.timestamps.is_some() {
            f |= FLAG_T;
        }
        if self.opcode.more() {
            f |= FLAG_M;
        }
        if self.rtr {
            f |= FLAG_R;
        }
        if self.rtr_ack {
            f |= FLAG_A;
        }
        if self.seq_framed {
            f |= FLAG_S;
        }
        f | ((self.rsvd & 0x01) << RSVD_SHIFT)
    }

    /// The extension's bytes as [`emit`](Self::emit) writes them (what the ICRC covers
    /// between the header and the payload), and how many there are.
    pub fn extension_bytes(&self) -> ([u8; 16], usize) {
        let mut b = [0u8; 16];
        let mut n = 0;
        if let Some(r) = self.ext.reth() {
            b[..4].copy_from_slice(&r.rkey.to_be_bytes());
            b[4..12].copy_from_slice(&r.addr.to_be_bytes());
            n = 12;
        }
        if let Some(imm) = self.ext.immediate() {
            b[n..n + 4].copy_from_slice(&imm.to_be_bytes());
            n += 4;
        }
        (b, n)
    }

    /// Whether the ICRC field (option bytes 12-15) holds an ICRC: not in an S-framed data segment, where they hold the
    /// message's length (amendment 3); the TCP checksum is its check. Control forms (hello,
    /// acknowledge, NAK) keep their ICRC in both framings.
    pub fn carries_icrc(&self) -> bool {
        !(self.seq_framed && crate::MsgClass::of(self.opcode).is_some())
    }

    /// The ICRC over flags through mbo_seg, the extension, then `payload` (amendment 2).
    pub fn compute_icrc(&self, payload: &[u8]) -> u32 {
        self.icrc_of(&[payload])
    }

    fn icrc_of<P: AsRef<[u8]>>(&self, parts: &[P]) -> u32 {
        let (ext, n) = self.extension_bytes();
        icrc_covered(&self.icrc_header(), &ext[..n], parts)
    }

    /// Set `icrc` for this payload (nothing for an S-framed data segment, whose field holds
    /// its message's length: [`carries_icrc`](Self::carries_icrc)).
    pub fn seal(&mut self, payload: &[u8]) {
        self.seal_parts(&[payload]);
    }

    /// Set `icrc` for the payload made of `parts` in order (a segment whose payload is
    /// handed to the device as the application's own buffers, not copied behind the header).
    pub fn seal_parts<P: AsRef<[u8]>>(&mut self, parts: &[P]) {
        if self.carries_icrc() {
            self.icrc = self.icrc_of(parts);
        }
    }

    /// Whether `icrc` equals [`compute_icrc`](Self::compute_icrc) over `payload`.
    pub fn icrc_ok(&self, payload: &[u8]) -> bool {
        self.compute_icrc(payload) == self.icrc
    }

    /// Write the option into the front of `buf`; returns the bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, BthError> {
        self.validate()?;
        let len = self.buffer_len();
        let got = buf.len();
        let out = buf
            .get_mut(..len)
            .ok_or(BthError::BufferTooSmall { needed: len, got })?;
        out[field::KIND] = KIND;
        out[field::LEN] = len as u8;
        out[field::EXID].copy_from_slice(&EXID.to_be_bytes());
        out[field::FLAGS..field::ICRC.start].copy_from_slice(&self.icrc_header());
        out[field::ICRC].copy_from_slice(&self.icrc.to_be_bytes());
        let mut at = field::TS;
        let mut put = |v: &[u8]| {
            out[at..at + v.len()].copy_from_slice(v);
            at += v.len();
        };
        if let Some(ts) = self.timestamps {
            put(&ts.tsval.to_be_bytes());
            put(&ts.tsecr.to_be_bytes());
        }
        let (ext, n) = self.extension_bytes();
        put(&ext[..n]);
        Ok(len)
    }

    /// Emit into a fresh vector (convenience for tests and tools).
    pub fn to_vec(&self) -> Result<Vec<u8>, BthError> {
        let mut v = vec![0u8; self.buffer_len()];
        self.emit(&mut v)?;
        Ok(v)
    }
}
