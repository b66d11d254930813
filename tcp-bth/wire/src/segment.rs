//! A typed view of a TCP segment in a byte buffer, like smoltcp's `TcpPacket<T>` and our own
//! [`BthOption<T>`](crate::BthOption): fields are read and written in place at their fixed
//! offsets (RFC 9293 §3.1), so a segment is parsed without copying its header into a model and
//! built straight into the buffer it leaves from (the driver's registered transmit buffer,
//! behind the IP header). [`TcpSegment::new_checked`] is the one validating entry point:
//! after it, every accessor is in bounds.

use crate::tcp::{SegmentError, TcpFlags, TCP_HEADER_MAX, TCP_HEADER_MIN};

mod field {
    use std::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const SEQ: Range<usize> = 4..8;
    pub const ACK: Range<usize> = 8..12;
    pub const DATA_OFFSET: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WINDOW: Range<usize> = 14..16;
    pub const CHECKSUM: Range<usize> = 16..18;
    pub const URGENT: Range<usize> = 18..20;
}

/// A TCP segment (header, options, payload) over `T`.
#[derive(Debug, Clone)]
pub struct TcpSegment<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpSegment<T> {
    /// Wrap without checking; only for buffers the caller has sized (see
    /// [`new_checked`](Self::new_checked) for anything from the wire).
    pub fn new_unchecked(buffer: T) -> TcpSegment<T> {
        TcpSegment { buffer }
    }

    /// Wrap bytes from the wire: at least a fixed header, a data offset of 5 words or more,
    /// and as many bytes as the data offset claims.
    pub fn new_checked(buffer: T) -> Result<TcpSegment<T>, SegmentError> {
        let got = buffer.as_ref().len();
        if got < TCP_HEADER_MIN {
            return Err(SegmentError::Truncated {
                needed: TCP_HEADER_MIN,
                got,
            });
        }
        let s = TcpSegment { buffer };
        let doff = s.buffer.as_ref()[field::DATA_OFFSET] >> 4;
        if doff < 5 {
            return Err(SegmentError::BadDataOffset(doff));
        }
        if got < s.header_len() {
            return Err(SegmentError::Truncated {
                needed: s.header_len(),
                got,
            });
        }
        Ok(s)
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn be16(&self, r: std::ops::Range<usize>) -> u16 {
        let b = &self.buffer.as_ref()[r];
        u16::from_be_bytes([b[0], b[1]])
    }

    fn be32(&self, r: std::ops::Range<usize>) -> u32 {
        let b = &self.buffer.as_ref()[r];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Source port (bytes 0-1).
    pub fn src_port(&self) -> u16 {
        self.be16(field::SRC_PORT)
    }

    /// Destination port (bytes 2-3).
    pub fn dst_port(&self) -> u16 {
        self.be16(field::DST_PORT)
    }

    /// Sequence number (bytes 4-7).
    pub fn seq(&self) -> u32 {
        self.be32(field::SEQ)
    }

    /// Acknowledgment number (bytes 8-11).
    pub fn ack(&self) -> u32 {
        self.be32(field::ACK)
    }

    /// Header length in bytes, from the data offset.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::DATA_OFFSET] >> 4) * 4
    }

    /// The flags byte (byte 13), FIN through CWR.
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(self.buffer.as_ref()[field::FLAGS])
    }

    /// Window field (bytes 14-15), before window scaling.
    pub fn window(&self) -> u16 {
        self.be16(field::WINDOW)
    }

    /// Checksum field (bytes 16-17) as it stands; [`crate::checksum::verify`] checks it.
    pub fn checksum(&self) -> u16 {
        self.be16(field::CHECKSUM)
    }

    /// Urgent pointer (bytes 18-19).
    pub fn urgent(&self) -> u16 {
        self.be16(field::URGENT)
    }

    /// The option area (between the fixed header and the data offset).
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[TCP_HEADER_MIN..self.header_len()]
    }

    /// The bytes after the header (from the data offset on).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpSegment<T> {
    fn put(&mut self, r: std::ops::Range<usize>, v: &[u8]) {
        self.buffer.as_mut()[r].copy_from_slice(v);
    }

    /// Write the source port (bytes 0-1).
    pub fn set_src_port(&mut self, v: u16) {
        self.put(field::SRC_PORT, &v.to_be_bytes());
    }

    /// Write the destination port (bytes 2-3).
    pub fn set_dst_port(&mut self, v: u16) {
        self.put(field::DST_PORT, &v.to_be_bytes());
    }

    /// Write the sequence number (bytes 4-7).
    pub fn set_seq(&mut self, v: u32) {
        self.put(field::SEQ, &v.to_be_bytes());
    }

    /// Write the acknowledgment number (bytes 8-11).
    pub fn set_ack(&mut self, v: u32) {
        self.put(field::ACK, &v.to_be_bytes());
    }

    /// Data offset from a header length (a multiple of 4, 20 to 60); the reserved bits clear.
    pub fn set_header_len(&mut self, len: usize) {
        debug_assert!(len.is_multiple_of(4) && (TCP_HEADER_MIN..=TCP_HEADER_MAX).contains(&len));
        self.buffer.as_mut()[field::DATA_OFFSET] = ((len / 4) as u8) << 4;
    }

    /// Write the flags byte (byte 13); the data offset byte is left alone.
    pub fn set_flags(&mut self, f: TcpFlags) {
        self.buffer.as_mut()[field::FLAGS] = f.0;
    }

    /// Write the window field (bytes 14-15).
    pub fn set_window(&mut self, v: u16) {
        self.put(field::WINDOW, &v.to_be_bytes());
    }

    /// Write the checksum field (bytes 16-17); [`crate::checksum`] computes the value.
    pub fn set_checksum(&mut self, v: u16) {
        self.put(field::CHECKSUM, &v.to_be_bytes());
    }

    /// Write the urgent pointer (bytes 18-19).
    pub fn set_urgent(&mut self, v: u16) {
        self.put(field::URGENT, &v.to_be_bytes());
    }

    /// The option area, writable; its length comes from the data offset already written.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        &mut self.buffer.as_mut()[TCP_HEADER_MIN..hl]
    }

    /// The bytes after the header, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        &mut self.buffer.as_mut()[hl..]
    }
}
