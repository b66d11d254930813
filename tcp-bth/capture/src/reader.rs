//! Reading: the packets of a pcap or pcapng file.

use super::LINKTYPE_UNKNOWN;
use pcap_file::pcap::RawPcapPacket;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::{PcapError, TsResolution};
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::time::Duration;

/// One packet as stored in a capture file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawPacket {
    /// Time stamp: since the Unix epoch for real captures, since the start of the run for
    /// simulated ones.
    pub ts: Duration,
    /// Link-layer type of the interface it was captured on (`LINKTYPE_*`).
    pub linktype: u32,
    /// The bytes the capture kept.
    pub data: Vec<u8>,
    /// Length on the wire; above `data.len()` when a snap length cut the packet.
    pub orig_len: u32,
}

impl RawPacket {
    /// The capture kept fewer bytes than were on the wire.
    pub fn is_truncated(&self) -> bool {
        (self.data.len() as u64) < u64::from(self.orig_len)
    }
}

/// File formats [`CaptureReader`] understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// libpcap, either byte order, micro- or nanosecond time stamps.
    Pcap,
    /// pcapng (Enhanced, Simple and obsolete Packet blocks; per-interface link types and
    /// time stamp resolutions).
    PcapNg,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Pcap => "pcap",
            Format::PcapNg => "pcapng",
        })
    }
}

/// Why a capture file could not be read (further). Every error ends the read: packets before
/// it have been returned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// Reading the file failed (also: opening it, in [`CaptureReader::open`]).
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The first bytes (up to 4, held here) are neither a pcap nor a pcapng magic number.
    #[error("not a pcap or pcapng file (starts with {0:02x?})")]
    UnknownFormat(Vec<u8>),
    /// The file has no bytes at all.
    #[error("empty file")]
    Empty,
    /// The file ends inside its file header (pcap) or first section header (pcapng).
    #[error("bad {format} file header: file ends inside its header")]
    HeaderTruncated {
        /// The format its magic number announced.
        format: Format,
    },
    /// The file header (pcap) or first section header (pcapng) is refused by the parser.
    #[error("bad {format} file header: {source}")]
    Header {
        /// The format its magic number announced.
        format: Format,
        /// What the parser refused.
        source: FormatError,
    },
    /// The file ends inside the record after the `record`-th packet record.
    #[error(
        "after packet record {record}: file ends inside a record (truncated capture, or a \
         record larger than 8 MB)"
    )]
    RecordTruncated {
        /// Packet records read whole before the cut one (0: the first was cut).
        record: u64,
    },
    /// The record after the `record`-th packet record cannot be read.
    #[error("after packet record {record}: {source}")]
    Record {
        /// Packet records read before the bad one.
        record: u64,
        /// What the parser refused.
        source: FormatError,
    },
}

/// A header, record or block that breaks the pcap or pcapng format; its message is the pcap
/// parser's.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct FormatError(PcapError);

/// The parser ran out of bytes inside the structure it was reading.
fn ends_inside(e: &PcapError) -> bool {
    matches!(e, PcapError::IoError(io) if io.kind() == io::ErrorKind::UnexpectedEof)
}

type Source<R> = io::Chain<io::Cursor<Vec<u8>>, R>;

enum ReaderKind<R: Read> {
    Pcap(pcap_file::pcap::PcapReader<Source<R>>),
    PcapNg(PcapNgReader<Source<R>>),
}

/// Reads the packets of a pcap or pcapng file, detected from its first bytes.
pub struct CaptureReader<R: Read> {
    kind: ReaderKind<R>,
    records: u64,
    done: bool,
}

impl CaptureReader<File> {
    /// Open the capture file at `path` and read its header ([`new`](Self::new)).
    pub fn open(path: impl AsRef<Path>) -> Result<CaptureReader<File>, ReadError> {
        CaptureReader::new(File::open(path)?)
    }
}

impl<R: Read> CaptureReader<R> {
    /// Read the file header from `r`.
    pub fn new(mut r: R) -> Result<CaptureReader<R>, ReadError> {
        let mut magic = Vec::with_capacity(4);
        (&mut r).take(4).read_to_end(&mut magic)?;
        if magic.is_empty() {
            return Err(ReadError::Empty);
        }
        let format = match magic[..] {
            [0xA1, 0xB2, 0xC3, 0xD4]
            | [0xD4, 0xC3, 0xB2, 0xA1]
            | [0xA1, 0xB2, 0x3C, 0x4D]
            | [0x4D, 0x3C, 0xB2, 0xA1] => Format::Pcap,
            [0x0A, 0x0D, 0x0D, 0x0A] => Format::PcapNg,
            _ => return Err(ReadError::UnknownFormat(magic)),
        };
        let src = io::Cursor::new(magic).chain(r);
        let header_err = |e: PcapError| {
            if ends_inside(&e) {
                ReadError::HeaderTruncated { format }
            } else {
                ReadError::Header {
                    format,
                    source: FormatError(e),
                }
            }
        };
        let kind = match format {
            Format::Pcap => {
                ReaderKind::Pcap(pcap_file::pcap::PcapReader::new(src).map_err(header_err)?)
            }
            Format::PcapNg => ReaderKind::PcapNg(PcapNgReader::new(src).map_err(header_err)?),
        };
        Ok(CaptureReader {
            kind,
            records: 0,
            done: false,
        })
    }

    /// The file's format, detected from its magic number.
    pub fn format(&self) -> Format {
        match self.kind {
            ReaderKind::Pcap(_) => Format::Pcap,
            ReaderKind::PcapNg(_) => Format::PcapNg,
        }
    }

    /// The link type of a pcap file (pcapng has one per interface).
    pub fn pcap_linktype(&self) -> Option<u32> {
        match &self.kind {
            ReaderKind::Pcap(r) => Some(r.header().datalink.into()),
            ReaderKind::PcapNg(_) => None,
        }
    }

    /// The next packet; `None` at the end of the file and after an error.
    pub fn next_packet(&mut self) -> Option<Result<RawPacket, ReadError>> {
        if self.done {
            return None;
        }
        let r = match &mut self.kind {
            ReaderKind::Pcap(r) => next_pcap(r),
            ReaderKind::PcapNg(r) => next_pcapng(r),
        };
        match r {
            Some(Ok(p)) => {
                self.records += 1;
                Some(Ok(p))
            }
            Some(Err(e)) => {
                self.done = true;
                let record = self.records;
                Some(Err(if ends_inside(&e) {
                    ReadError::RecordTruncated { record }
                } else {
                    ReadError::Record {
                        record,
                        source: FormatError(e),
                    }
                }))
            }
            None => {
                self.done = true;
                None
            }
        }
    }
}

impl<R: Read> Iterator for CaptureReader<R> {
    type Item = Result<RawPacket, ReadError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_packet()
    }
}

fn next_pcap<R: Read>(
    r: &mut pcap_file::pcap::PcapReader<R>,
) -> Option<Result<RawPacket, PcapError>> {
    let header = r.header();
    let raw: RawPcapPacket = match r.next_raw_packet()? {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    // Our own time stamp arithmetic: never panics, carries an out-of-range fraction.
    let frac = match header.ts_resolution {
        TsResolution::MicroSecond => Duration::from_micros(u64::from(raw.ts_frac)),
        TsResolution::NanoSecond => Duration::from_nanos(u64::from(raw.ts_frac)),
    };
    let ts = Duration::from_secs(u64::from(raw.ts_sec)) + frac;
    Some(Ok(RawPacket {
        ts,
        linktype: header.datalink.into(),
        orig_len: raw.orig_len.max(raw.incl_len),
        data: raw.data.into_owned(),
    }))
}

/// pcapng time stamp units: `if_tsresol` (default 6 = microseconds; high bit set: powers of 2)
/// and `if_tsoffset` seconds. `None` when the result does not fit a `Duration`.
fn pcapng_ts(units: u64, tsresol: u8, offset_secs: u64) -> Option<Duration> {
    let units = u128::from(units);
    let nanos: u128 = if tsresol & 0x80 == 0 {
        let p = u32::from(tsresol);
        if p <= 9 {
            units * 10u128.pow(9 - p)
        } else {
            10u128.checked_pow(p - 9).map_or(0, |d| units / d)
        }
    } else {
        let n = u32::from(tsresol & 0x7F);
        if n >= 100 {
            0
        } else {
            units
                .checked_mul(1_000_000_000)?
                .checked_shr(n)
                .unwrap_or(0)
        }
    };
    let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
    let sub = (nanos % 1_000_000_000) as u32;
    Some(Duration::new(secs.checked_add(offset_secs)?, sub))
}

fn next_pcapng<R: Read>(r: &mut PcapNgReader<R>) -> Option<Result<RawPacket, PcapError>> {
    loop {
        // (interface, time stamp units, data, original length)
        let (iface, units, data, orig_len) = match r.next_block()? {
            Err(e) => return Some(Err(e)),
            Ok(Block::EnhancedPacket(b)) => (
                Some(b.interface_id),
                // pcap-file 2 stores the raw units in a Duration of nanoseconds.
                u64::try_from(b.timestamp.as_nanos()).unwrap_or(u64::MAX),
                b.data.into_owned(),
                b.original_len,
            ),
            Ok(Block::SimplePacket(b)) => (Some(0), 0, b.data.into_owned(), b.original_len),
            Ok(Block::Packet(b)) => (
                Some(u32::from(b.interface_id)),
                b.timestamp,
                b.data.into_owned(),
                b.original_len,
            ),
            Ok(_) => continue,
        };
        let desc = iface.and_then(|i| r.interfaces().get(i as usize));
        let (linktype, tsresol, offset) = match desc {
            Some(d) => {
                let mut tsresol = 6;
                let mut offset = 0;
                for o in &d.options {
                    match o {
                        InterfaceDescriptionOption::IfTsResol(v) => tsresol = *v,
                        InterfaceDescriptionOption::IfTsOffset(v) => offset = *v,
                        _ => {}
                    }
                }
                (u32::from(d.linktype), tsresol, offset)
            }
            None => (LINKTYPE_UNKNOWN, 6, 0),
        };
        let ts = pcapng_ts(units, tsresol, offset).unwrap_or(Duration::ZERO);
        let orig_len = orig_len.max(u32::try_from(data.len()).unwrap_or(u32::MAX));
        return Some(Ok(RawPacket {
            ts,
            linktype,
            data,
            orig_len,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{ip_packet, segment, send, write, V4};
    use crate::{analyze, Checksum, Outcome, LINKTYPE_RAW};
    use bth_wire::Opcode;
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
    use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
    use pcap_file::pcapng::PcapNgWriter;
    use pcap_file::DataLink;
    use std::borrow::Cow;

    #[test]
    fn pcapng_with_nanosecond_interface_is_read() {
        let seg = segment(V4, 1, Some(send(0, Opcode::SendOnly, 0)), b"ng");
        let ip = ip_packet(&seg);
        let mut w = PcapNgWriter::new(Vec::new()).unwrap();
        let mut idb = InterfaceDescriptionBlock::new(DataLink::RAW, 65535);
        idb.options.push(InterfaceDescriptionOption::IfTsResol(9));
        w.write_pcapng_block(idb).unwrap();
        w.write_pcapng_block(EnhancedPacketBlock {
            interface_id: 0,
            timestamp: Duration::from_nanos(1_500_000_123), // raw units: nanoseconds here
            original_len: ip.len() as u32,
            data: Cow::Borrowed(&ip),
            options: vec![],
        })
        .unwrap();
        w.write_pcapng_block(EnhancedPacketBlock {
            interface_id: 0,
            timestamp: Duration::ZERO,
            original_len: ip.len() as u32,
            data: Cow::Borrowed(&ip),
            options: vec![],
        })
        .unwrap();
        let mut bytes = w.into_inner();
        // Make the last packet name an interface the file never described (the writer refuses
        // to): its block starts `trailer length` bytes before the end, the id 8 bytes in.
        let n = bytes.len();
        let len = u32::from_ne_bytes(bytes[n - 4..].try_into().unwrap()) as usize;
        bytes[n - len + 8..n - len + 12].copy_from_slice(&3u32.to_ne_bytes());
        let r = CaptureReader::new(&bytes[..]).unwrap();
        assert_eq!(r.format(), Format::PcapNg);
        let a = analyze(r).unwrap();
        assert!(a.error.is_none());
        assert_eq!(a.records[0].0.ts, Duration::new(1, 500_000_123));
        assert_eq!(a.records[0].0.segment().unwrap().icrc_ok, Some(true));
        assert!(matches!(a.records[1].0.outcome, Outcome::Malformed(_)));
    }

    #[test]
    fn pcapng_time_stamp_units() {
        assert_eq!(
            pcapng_ts(1_500_000, 6, 0),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(pcapng_ts(3, 0, 10), Some(Duration::from_secs(13)));
        assert_eq!(
            pcapng_ts(1 << 20, 0x80 | 20, 0),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            pcapng_ts(u64::MAX, 12, 0).map(|d| d.as_secs()),
            Some(18_446_744)
        );
        assert_eq!(pcapng_ts(5, 127, 0), Some(Duration::ZERO));
        assert_eq!(pcapng_ts(5, 0xFF, 0), Some(Duration::ZERO));
        assert_eq!(pcapng_ts(u64::MAX, 0, 1), None);
    }

    #[test]
    fn big_endian_microsecond_pcap_is_read() {
        let seg = segment(V4, 1, None, b"be");
        let ip = ip_packet(&seg);
        let mut f = Vec::new();
        f.extend_from_slice(&0xA1B2_C3D4u32.to_be_bytes());
        f.extend_from_slice(&[0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0]);
        f.extend_from_slice(&65535u32.to_be_bytes());
        f.extend_from_slice(&LINKTYPE_RAW.to_be_bytes());
        f.extend_from_slice(&7u32.to_be_bytes());
        f.extend_from_slice(&1_500_000u32.to_be_bytes()); // out of range: carried
        f.extend_from_slice(&(ip.len() as u32).to_be_bytes());
        f.extend_from_slice(&(ip.len() as u32).to_be_bytes());
        f.extend_from_slice(&ip);
        let a = analyze(CaptureReader::new(&f[..]).unwrap()).unwrap();
        assert!(a.error.is_none(), "{:?}", a.error);
        assert_eq!(a.records[0].0.ts, Duration::from_millis(8500));
        assert_eq!(a.records[0].0.segment().unwrap().checksum, Checksum::Good);
    }

    #[test]
    fn file_cut_inside_a_record() {
        let seg = segment(V4, 1, None, b"cut");
        let mut file = write(&[(V4, seg.clone()), (V4, seg)]);
        file.truncate(file.len() - 2);
        let a = analyze(CaptureReader::new(&file[..]).unwrap()).unwrap();
        assert_eq!(a.records.len(), 1);
        let e = a.error.unwrap();
        assert!(
            matches!(e, ReadError::RecordTruncated { record: 1 }),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "after packet record 1: file ends inside a record (truncated capture, or a record \
             larger than 8 MB)"
        );
    }

    #[test]
    fn not_a_capture() {
        assert!(matches!(
            CaptureReader::new(&b""[..]),
            Err(ReadError::Empty)
        ));
        assert!(matches!(
            CaptureReader::new(&b"GET / HTTP/1.1"[..]),
            Err(ReadError::UnknownFormat(_))
        ));
        let e = CaptureReader::new(&0xA1B2_C3D4u32.to_le_bytes()[..]).err();
        assert!(matches!(
            e,
            Some(ReadError::HeaderTruncated {
                format: Format::Pcap
            })
        ));
        assert_eq!(
            e.unwrap().to_string(),
            "bad pcap file header: file ends inside its header"
        );
    }
}
