//! TCP segments as the stack sees them: header fields read and written in place by our own
//! typed view ([`TcpSegment`], `segment.rs`), options through our own parser (etherparse's
//! option iterator refuses unknown kinds, and kind 254 is exactly what we need), with the
//! 40-byte option budget enforced on emit. etherparse serves here only as the checksum's
//! 16-bit word sums (`checksum.rs`); no TCP header goes through it.

use crate::bth::{self, Bth, BthError, BthOption, Timestamps};
use crate::checksum;
use crate::segment::TcpSegment;
use arrayvec::ArrayVec;
use thiserror::Error;

/// Option space in a TCP header (60 - 20).
pub const MAX_OPTIONS_LEN: usize = 40;
/// SACK blocks one option can hold.
pub const MAX_SACK_BLOCKS: usize = 4;
/// Fixed TCP header without options: a data offset of 5 words.
pub const TCP_HEADER_MIN: usize = 20;
/// Largest TCP header: a data offset of 15 words.
pub const TCP_HEADER_MAX: usize = 60;

mod kind {
    pub const EOL: u8 = 0;
    pub const NOP: u8 = 1;
    pub const MSS: u8 = 2;
    pub const WSCALE: u8 = 3;
    pub const SACK_PERMITTED: u8 = 4;
    pub const SACK: u8 = 5;
    pub const TIMESTAMPS: u8 = 8;
}

/// Why TCP option bytes were refused, or options could not be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TcpOptionError {
    /// An option's length byte, or the bytes it claims, runs past the option area.
    #[error("option kind {kind} at byte {at} runs past the option area")]
    Truncated {
        /// Kind byte of that option.
        kind: u8,
        /// Offset of its kind byte in the option area.
        at: usize,
    },
    /// A length byte below 2, or wrong for its kind (MSS 4, window scale 3, SACK-permitted 2,
    /// timestamps 10, SACK 2 + 8n with n 1 to 4).
    #[error("option kind {kind} has invalid length {len}")]
    BadLength {
        /// Kind byte of that option.
        kind: u8,
        /// Its length byte.
        len: u8,
    },
    /// A second `tcp_bth` option (kind 254, ExID 0xEFAB) in one option area.
    #[error("more than one tcp_bth option")]
    DuplicateBth,
    /// The `tcp_bth` option was refused on parse, or could not be emitted.
    #[error("malformed tcp_bth option: {0}")]
    Bth(#[from] BthError),
    /// Emit: the options, padded to a multiple of 4, need more than 40 bytes or more than the
    /// output buffer has.
    #[error("options need {needed} bytes; at most 40 fit in a TCP header, and the output buffer has {room}")]
    TooLong {
        /// Padded option-area length in bytes.
        needed: usize,
        /// Bytes the output buffer had.
        room: usize,
    },
}

/// Why a segment was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SegmentError {
    /// Fewer bytes than the 20-byte fixed header or than the data offset claims (for a
    /// checksum, than the 18 bytes through the checksum field).
    #[error("segment truncated: {got} bytes, header needs {needed}")]
    Truncated {
        /// Bytes required.
        needed: usize,
        /// Bytes present.
        got: usize,
    },
    /// Data offset below 5 (in 4-byte words); holds it.
    #[error("data offset {0} is below the minimum of 5 words")]
    BadDataOffset(u8),
    /// The TCP checksum does not verify.
    #[error("TCP checksum {got:#06x}, expected {expected:#06x}")]
    Checksum {
        /// Checksum the segment's bytes call for.
        expected: u16,
        /// Checksum field as received.
        got: u16,
    },
    /// The option area was refused, or the options could not be written.
    #[error("{0}")]
    Options(#[from] TcpOptionError),
    /// Segment length in bytes (header and payload) too large for the pseudo-header's length
    /// field: 16 bits for IPv4, 32 for IPv6.
    #[error(
        "segment of {0} bytes (header and payload) does not fit the pseudo-header's length field"
    )]
    PayloadTooLarge(usize),
    /// The output buffer is too short (for [`TcpRepr::emit_header_parts`], not exactly the
    /// header length: `got` may then be larger than `needed`).
    #[error("output buffer of {got} bytes, {needed} needed")]
    BufferTooSmall {
        /// Bytes required.
        needed: usize,
        /// Buffer length in bytes.
        got: usize,
    },
}

/// One SACK block (RFC 2018): the sequence numbers `left..right` were received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SackBlock {
    /// Left edge: first sequence number of the block.
    pub left: u32,
    /// Right edge: the sequence number just past the block.
    pub right: u32,
}

/// The options the stack understands. Unknown options are skipped by length on parse.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TcpOptions {
    /// MSS (kind 2), in bytes.
    pub mss: Option<u16>,
    /// Window scale shift count (kind 3, RFC 7323).
    pub window_scale: Option<u8>,
    /// SACK-permitted (kind 4, RFC 2018).
    pub sack_permitted: bool,
    /// SACK blocks (kind 5, RFC 2018), 1 to 4 when present; of several SACK options the last
    /// parsed wins.
    pub sack: ArrayVec<SackBlock, MAX_SACK_BLOCKS>,
    /// The RFC 7323 timestamp option (kind 8): TSval, TSecr.
    pub timestamps: Option<Timestamps>,
    /// The `tcp_bth` option (kind 254, ExID 0xEFAB); at most one per segment.
    pub bth: Option<Bth>,
}

impl TcpOptions {
    /// Parse the option area of a TCP header.
    pub fn parse(area: &[u8]) -> Result<TcpOptions, TcpOptionError> {
        let mut o = TcpOptions::default();
        let mut at = 0;
        while at < area.len() {
            let k = area[at];
            match k {
                kind::EOL => break,
                kind::NOP => {
                    at += 1;
                    continue;
                }
                _ => {}
            }
            let len = *area
                .get(at + 1)
                .ok_or(TcpOptionError::Truncated { kind: k, at })?;
            let body = area
                .get(at..at + usize::from(len))
                .ok_or(TcpOptionError::Truncated { kind: k, at })?;
            let bad = TcpOptionError::BadLength { kind: k, len };
            if len < 2 {
                return Err(bad);
            }
            match k {
                kind::MSS => {
                    if len != 4 {
                        return Err(bad);
                    }
                    o.mss = Some(u16::from_be_bytes([body[2], body[3]]));
                }
                kind::WSCALE => {
                    if len != 3 {
                        return Err(bad);
                    }
                    o.window_scale = Some(body[2]);
                }
                kind::SACK_PERMITTED => {
                    if len != 2 {
                        return Err(bad);
                    }
                    o.sack_permitted = true;
                }
                kind::SACK => {
                    let n = (usize::from(len) - 2) / 8;
                    if (usize::from(len) - 2) % 8 != 0 || n == 0 || n > MAX_SACK_BLOCKS {
                        return Err(bad);
                    }
                    o.sack.clear();
                    for c in body[2..].chunks_exact(8) {
                        o.sack.push(SackBlock {
                            left: be32(&c[0..4]),
                            right: be32(&c[4..8]),
                        });
                    }
                }
                kind::TIMESTAMPS => {
                    if len != 10 {
                        return Err(bad);
                    }
                    o.timestamps = Some(Timestamps {
                        tsval: be32(&body[2..6]),
                        tsecr: be32(&body[6..10]),
                    });
                }
                bth::KIND if len >= 4 && u16::from_be_bytes([body[2], body[3]]) == bth::EXID => {
                    if o.bth.is_some() {
                        return Err(TcpOptionError::DuplicateBth);
                    }
                    o.bth = Some(Bth::parse(&BthOption::new_checked(body)?));
                }
                // Unknown kinds (and other experiments under 254) are skipped by length.
                _ => {}
            }
            at += usize::from(len);
        }
        Ok(o)
    }

    /// Option-area bytes these options occupy, padded to a 32-bit boundary.
    pub fn encoded_len(&self) -> usize {
        self.len_with_sack(self.sack.len())
    }

    /// Padded option length if the SACK option held `blocks` blocks.
    fn len_with_sack(&self, blocks: usize) -> usize {
        let n = self.mss.map_or(0, |_| 4)
            + self.window_scale.map_or(0, |_| 3)
            + if self.sack_permitted { 2 } else { 0 }
            + self.timestamps.map_or(0, |_| 10)
            + self.bth.as_ref().map_or(0, |b| b.buffer_len())
            + if blocks == 0 { 0 } else { 2 + 8 * blocks };
        n.div_ceil(4) * 4
    }

    /// How many SACK blocks fit beside the other options in the 40-byte budget.
    pub fn sack_room(&self) -> usize {
        (0..=MAX_SACK_BLOCKS)
            .rev()
            .find(|&n| self.len_with_sack(n) <= MAX_OPTIONS_LEN)
            .unwrap_or(0)
    }

    /// Write the option area; refuses (never truncates) what does not fit in 40 bytes.
    pub fn emit(&self) -> Result<ArrayVec<u8, MAX_OPTIONS_LEN>, TcpOptionError> {
        let mut out = [0u8; MAX_OPTIONS_LEN];
        let n = self.emit_into(&mut out)?;
        let mut v = ArrayVec::new();
        v.try_extend_from_slice(&out[..n])
            .expect("emit_into writes at most 40 bytes");
        Ok(v)
    }

    /// Write the option area into `out` (padding zeroed), returning its length; refuses
    /// what needs more than 40 bytes or more than `out` has.
    pub fn emit_into(&self, out: &mut [u8]) -> Result<usize, TcpOptionError> {
        let needed = self.encoded_len();
        if needed > MAX_OPTIONS_LEN || needed > out.len() {
            return Err(TcpOptionError::TooLong {
                needed,
                room: out.len(),
            });
        }
        let out = &mut out[..needed];
        let mut at = 0;
        let mut put = |v: &[u8]| {
            out[at..at + v.len()].copy_from_slice(v);
            at += v.len();
        };
        if let Some(mss) = self.mss {
            let m = mss.to_be_bytes();
            put(&[kind::MSS, 4, m[0], m[1]]);
        }
        if let Some(ws) = self.window_scale {
            put(&[kind::WSCALE, 3, ws]);
        }
        if self.sack_permitted {
            put(&[kind::SACK_PERMITTED, 2]);
        }
        if let Some(ts) = self.timestamps {
            put(&[kind::TIMESTAMPS, 10]);
            put(&ts.tsval.to_be_bytes());
            put(&ts.tsecr.to_be_bytes());
        }
        if let Some(b) = &self.bth {
            let mut tmp = [0u8; bth::MAX_LEN];
            let n = b.emit(&mut tmp)?;
            put(&tmp[..n]);
        }
        if !self.sack.is_empty() {
            put(&[kind::SACK, (2 + 8 * self.sack.len()) as u8]);
            for s in &self.sack {
                put(&s.left.to_be_bytes());
                put(&s.right.to_be_bytes());
            }
        }
        // Padding bytes are zero: EOL, which ends option processing.
        out[at..].fill(0);
        Ok(needed)
    }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// TCP header flags as a bit set in wire order (FIN = bit 0 ... CWR = bit 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    /// FIN (0x01): the sender has no more data; occupies one sequence number.
    pub const FIN: TcpFlags = TcpFlags(0x01);
    /// SYN (0x02): synchronize sequence numbers; occupies one sequence number.
    pub const SYN: TcpFlags = TcpFlags(0x02);
    /// RST (0x04): reset the connection.
    pub const RST: TcpFlags = TcpFlags(0x04);
    /// PSH (0x08): push.
    pub const PSH: TcpFlags = TcpFlags(0x08);
    /// ACK (0x10): the acknowledgment number is significant.
    pub const ACK: TcpFlags = TcpFlags(0x10);
    /// URG (0x20): the urgent pointer is significant.
    pub const URG: TcpFlags = TcpFlags(0x20);
    /// ECE (0x40): ECN-Echo (RFC 3168).
    pub const ECE: TcpFlags = TcpFlags(0x40);
    /// CWR (0x80): congestion window reduced (RFC 3168).
    pub const CWR: TcpFlags = TcpFlags(0x80);

    /// Whether every flag set in `other` is set here.
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }
    /// The flags set in either.
    pub const fn union(self, other: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | other.0)
    }
    /// Whether FIN is set.
    pub fn fin(self) -> bool {
        self.contains(Self::FIN)
    }
    /// Whether SYN is set.
    pub fn syn(self) -> bool {
        self.contains(Self::SYN)
    }
    /// Whether RST is set.
    pub fn rst(self) -> bool {
        self.contains(Self::RST)
    }
    /// Whether ACK is set.
    pub fn ack(self) -> bool {
        self.contains(Self::ACK)
    }
}

impl core::ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        self.union(rhs)
    }
}

/// The IP addresses a TCP checksum covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpPair {
    /// IPv4 addresses.
    V4 {
        /// Source address, network byte order.
        src: [u8; 4],
        /// Destination address, network byte order.
        dst: [u8; 4],
    },
    /// IPv6 addresses.
    V6 {
        /// Source address, network byte order.
        src: [u8; 16],
        /// Destination address, network byte order.
        dst: [u8; 16],
    },
}

impl IpPair {
    /// The pair from `src` to `dst`; `None` when their families differ.
    pub fn from_addrs(src: std::net::IpAddr, dst: std::net::IpAddr) -> Option<IpPair> {
        use std::net::IpAddr;
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => Some(IpPair::V4 {
                src: s.octets(),
                dst: d.octets(),
            }),
            (IpAddr::V6(s), IpAddr::V6(d)) => Some(IpPair::V6 {
                src: s.octets(),
                dst: d.octets(),
            }),
            _ => None,
        }
    }

    /// The same pair seen from the other end.
    pub fn reversed(self) -> IpPair {
        match self {
            IpPair::V4 { src, dst } => IpPair::V4 { src: dst, dst: src },
            IpPair::V6 { src, dst } => IpPair::V6 { src: dst, dst: src },
        }
    }
}

/// A parsed TCP segment borrowing its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpRepr<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number: of the SYN if set, else of the first payload byte.
    pub seq: u32,
    /// Acknowledgment number (significant with ACK).
    pub ack: u32,
    /// FIN through CWR.
    pub flags: TcpFlags,
    /// Window field as on the wire, before window scaling.
    pub window: u16,
    /// Urgent pointer.
    pub urgent: u16,
    /// The options; emitted as MSS, window scale, SACK-permitted, timestamps, `tcp_bth`,
    /// SACK, with no NOPs, and EOL-padded to a multiple of 4.
    pub options: TcpOptions,
    /// The segment's data, after the header.
    pub payload: &'a [u8],
}

/// How a segment's checksum field is filled on emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChecksumFill {
    /// The whole checksum (RFC 9293 §3.1).
    #[default]
    Full,
    /// The pseudo-header sum only, for a device that finishes it (checksum offload:
    /// [`checksum::partial`]).
    Partial,
}

impl<'a> TcpRepr<'a> {
    /// Parse a TCP segment (header + payload). With `ip`, the checksum is verified.
    pub fn parse(bytes: &'a [u8], ip: Option<IpPair>) -> Result<TcpRepr<'a>, SegmentError> {
        let s = TcpSegment::new_checked(bytes)?;
        if let Some(ip) = ip {
            if !checksum::verify(ip, bytes) {
                return Err(SegmentError::Checksum {
                    expected: checksum::tcp(ip, bytes)?,
                    got: s.checksum(),
                });
            }
        }
        Ok(TcpRepr {
            src_port: s.src_port(),
            dst_port: s.dst_port(),
            seq: s.seq(),
            ack: s.ack(),
            flags: s.flags(),
            window: s.window(),
            urgent: s.urgent(),
            options: TcpOptions::parse(s.options())?,
            payload: &bytes[s.header_len()..],
        })
    }

    /// Header length in bytes as emitted: 20 plus the padded option length. Computed from
    /// `options`, so for a parsed segment it can differ from the data offset it arrived with
    /// (NOPs, unknown options).
    pub fn header_len(&self) -> usize {
        TCP_HEADER_MIN + self.options.encoded_len()
    }

    /// Length in sequence space (payload + SYN + FIN).
    pub fn seq_len(&self) -> u32 {
        self.payload.len() as u32 + u32::from(self.flags.syn()) + u32::from(self.flags.fin())
    }

    /// Write header and payload with a correct checksum; returns bytes written.
    pub fn emit(&self, ip: IpPair, buf: &mut [u8]) -> Result<usize, SegmentError> {
        let hlen = self.header_len();
        let total = hlen + self.payload.len();
        if buf.len() < total {
            return Err(SegmentError::BufferTooSmall {
                needed: total,
                got: buf.len(),
            });
        }
        buf[hlen..total].copy_from_slice(self.payload);
        self.emit_header(ip, &mut buf[..total], ChecksumFill::Full)
    }

    /// Write the header in front of a payload already in place: `buf` is the whole segment,
    /// its payload at `buf[self.header_len()..]` (`self.payload` is not read), so the payload
    /// is copied once, by whoever put it there. Fills the checksum as `fill` says; returns
    /// the segment's length, `buf.len()`.
    pub fn emit_header(
        &self,
        ip: IpPair,
        buf: &mut [u8],
        fill: ChecksumFill,
    ) -> Result<usize, SegmentError> {
        let hlen = self.header_len();
        if buf.len() < hlen {
            return Err(SegmentError::BufferTooSmall {
                needed: hlen,
                got: buf.len(),
            });
        }
        let (header, payload) = buf.split_at_mut(hlen);
        self.emit_header_parts(ip, header, &[&*payload], fill)
    }

    /// Write the header alone into `buf` (exactly [`header_len`](Self::header_len) bytes
    /// long) for a payload of `parts` that stays where it is (`self.payload` is not read):
    /// whoever sends the segment gathers the header and the parts. Fills the checksum as
    /// `fill` says, over the parts too when it is whole; returns the segment's length.
    pub fn emit_header_parts<P: AsRef<[u8]>>(
        &self,
        ip: IpPair,
        buf: &mut [u8],
        parts: &[P],
        fill: ChecksumFill,
    ) -> Result<usize, SegmentError> {
        let hlen = self.header_len();
        if buf.len() != hlen {
            return Err(SegmentError::BufferTooSmall {
                needed: hlen,
                got: buf.len(),
            });
        }
        let total = hlen + parts.iter().map(|p| p.as_ref().len()).sum::<usize>();
        let n = self.options.emit_into(&mut buf[TCP_HEADER_MIN..hlen])?;
        debug_assert_eq!(TCP_HEADER_MIN + n, hlen);
        self.fill_fixed_header(buf, hlen);
        let c = match fill {
            ChecksumFill::Full => checksum::tcp_parts(ip, buf, parts)?,
            ChecksumFill::Partial => checksum::partial(ip, total)?,
        };
        TcpSegment::new_unchecked(&mut *buf).set_checksum(c);
        Ok(total)
    }

    /// The fixed header's fields (checksum 0) into the front of `buf`.
    fn fill_fixed_header(&self, buf: &mut [u8], hlen: usize) {
        let mut s = TcpSegment::new_unchecked(&mut *buf);
        s.set_src_port(self.src_port);
        s.set_dst_port(self.dst_port);
        s.set_seq(self.seq);
        s.set_ack(self.ack);
        s.set_header_len(hlen);
        s.set_flags(self.flags);
        s.set_window(self.window);
        s.set_urgent(self.urgent);
        s.set_checksum(0);
    }

    /// Emit into a fresh vector.
    pub fn to_vec(&self, ip: IpPair) -> Result<Vec<u8>, SegmentError> {
        let mut v = vec![0u8; self.header_len() + self.payload.len()];
        let n = self.emit(ip, &mut v)?;
        v.truncate(n);
        Ok(v)
    }
}
