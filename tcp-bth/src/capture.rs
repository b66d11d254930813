//! Packet captures of tcp-bth traffic.
//!
//! * Writing: [`PcapWriter`] wraps TCP segments (as the stack emits them) in an IPv4 or IPv6
//!   header and writes them to a libpcap file with link type RAW (101), readable by tcpdump,
//!   Wireshark/tshark (with `docs/wireshark/tcp_bth.lua` for the option) and `bth-dump`.
//!   [`PcapWriter::tap`] turns one into a [`Tap`] for the simulated pair.
//! * Reading: [`CaptureReader`] reads pcap and pcapng files (any byte order, micro- or
//!   nanosecond timestamps) and yields [`RawPacket`]s; [`decode`] turns one into a [`Decoded`]
//!   record (IP, TCP with checksum verification, the `tcp_bth` option, ICRC); an [`Analyzer`]
//!   follows the records of a capture and keeps the counts `bth-dump` prints (out-of-order
//!   segments, retransmissions, messages, errors). [`analyze_file`] does all three.
//!
//! Capture files are untrusted input: nothing here panics on their contents. A packet that
//! cannot be decoded becomes a [`Outcome::Malformed`] record; a file whose framing breaks
//! (truncated record, bad block) ends the read with an error after the packets before it.
//!
//! This is the one module of the crate that touches the file system (`PcapWriter::create`,
//! `CaptureReader::open`): the stack itself stays sans-IO.

use crate::sim::link::Direction;
use crate::sim::pair::Tap;
use crate::wire::{
    Bth, Inbound, IpPair, MsgClass, Opcode, ReadRequest, SegmentError, TcpFlags, TcpOptionError,
    TcpOptions, TcpRepr,
};
use pcap_file::pcap::RawPcapPacket;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::{PcapError, TsResolution};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// LINKTYPE_NULL: 4-byte address family in the capturing host's byte order (BSD loopback).
pub const LINKTYPE_NULL: u32 = 0;
/// LINKTYPE_ETHERNET.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// LINKTYPE_RAW: the packet starts with an IPv4 or IPv6 header. What [`PcapWriter`] writes.
pub const LINKTYPE_RAW: u32 = 101;
/// LINKTYPE_LOOP: like NULL, family in network byte order (OpenBSD loopback).
pub const LINKTYPE_LOOP: u32 = 108;
/// LINKTYPE_LINUX_SLL: Linux "cooked" capture v1 (`tcpdump -i any` on older versions).
pub const LINKTYPE_LINUX_SLL: u32 = 113;
/// LINKTYPE_IPV4: raw IPv4 only.
pub const LINKTYPE_IPV4: u32 = 228;
/// LINKTYPE_IPV6: raw IPv6 only.
pub const LINKTYPE_IPV6: u32 = 229;
/// LINKTYPE_LINUX_SLL2: Linux "cooked" capture v2 (`tcpdump -i any`).
pub const LINKTYPE_LINUX_SLL2: u32 = 276;
/// Some systems write DLT_RAW's own value (12 or 14) instead of LINKTYPE_RAW.
const DLT_RAW_12: u32 = 12;
const DLT_RAW_14: u32 = 14;

/// Snap length written in the file header: more than any IPv4 packet or jumbo-free IPv6 one.
pub const SNAPLEN: u32 = 262_144;
/// TTL / hop limit of the IP headers [`PcapWriter`] builds.
pub const TTL: u8 = 64;

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

/// Writes TCP segments to a libpcap file (link type RAW, nanosecond timestamps, host byte
/// order), each wrapped in an IPv4 header (TTL 64, DF, correct total length and header
/// checksum, incrementing identification) or an IPv6 header (hop limit 64), according to the
/// [`IpPair`] given.
///
/// Output is buffered; it is flushed by [`flush`](Self::flush), [`finish`](Self::finish), or
/// on drop (where a write error can no longer be reported).
pub struct PcapWriter<W: Write> {
    out: BufWriter<W>,
    ident: u16,
    packets: u64,
}

/// Magic of a nanosecond-resolution libpcap file, written in host byte order.
const PCAP_MAGIC_NANOS: u32 = 0xA1B2_3C4D;

impl PcapWriter<File> {
    /// Create (or truncate) `path` and write the pcap file header.
    pub fn create(path: impl AsRef<Path>) -> io::Result<PcapWriter<File>> {
        PcapWriter::new(File::create(path)?)
    }
}

impl<W: Write> PcapWriter<W> {
    /// Write the pcap file header to `w`.
    pub fn new(w: W) -> io::Result<PcapWriter<W>> {
        let mut out = BufWriter::with_capacity(256 * 1024, w);
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&PCAP_MAGIC_NANOS.to_ne_bytes());
        h.extend_from_slice(&2u16.to_ne_bytes()); // version 2.4
        h.extend_from_slice(&4u16.to_ne_bytes());
        h.extend_from_slice(&0i32.to_ne_bytes()); // thiszone
        h.extend_from_slice(&0u32.to_ne_bytes()); // sigfigs
        h.extend_from_slice(&SNAPLEN.to_ne_bytes());
        h.extend_from_slice(&LINKTYPE_RAW.to_ne_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter {
            out,
            ident: 0,
            packets: 0,
        })
    }

    /// Packets written so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Write one TCP segment (header + payload, checksum already computed over `ip`) at time
    /// `ts`, inside an IP header for `ip`. Refuses a segment too large for one IP packet and a
    /// time past the year 2106 (pcap seconds are 32-bit).
    pub fn write_tcp(&mut self, ts: Duration, ip: IpPair, tcp_segment: &[u8]) -> io::Result<()> {
        let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidInput, what);
        let too_big = || {
            invalid(format!(
                "TCP segment of {} bytes does not fit one IP packet",
                tcp_segment.len()
            ))
        };
        let secs = u32::try_from(ts.as_secs())
            .map_err(|_| invalid(format!("timestamp {ts:?} does not fit a pcap record")))?;
        let len = u16::try_from(tcp_segment.len()).map_err(|_| too_big())?;
        let mut pkt = Vec::with_capacity(16 + 40 + tcp_segment.len());
        pkt.resize(16, 0); // record header, filled below
        match ip {
            IpPair::V4 { src, dst } => {
                let mut h =
                    etherparse::Ipv4Header::new(len, TTL, etherparse::IpNumber::TCP, src, dst)
                        .map_err(|_| too_big())?;
                h.dont_fragment = true;
                h.identification = self.ident;
                self.ident = self.ident.wrapping_add(1);
                h.header_checksum = h.calc_header_checksum();
                pkt.extend_from_slice(&h.to_bytes());
            }
            IpPair::V6 { src, dst } => {
                let h = etherparse::Ipv6Header {
                    traffic_class: 0,
                    flow_label: Default::default(),
                    payload_length: len,
                    next_header: etherparse::IpNumber::TCP,
                    hop_limit: TTL,
                    source: src,
                    destination: dst,
                };
                pkt.extend_from_slice(&h.to_bytes());
            }
        }
        pkt.extend_from_slice(tcp_segment);
        let caplen = (pkt.len() - 16) as u32; // at most 40 + 65535
        pkt[0..4].copy_from_slice(&secs.to_ne_bytes());
        pkt[4..8].copy_from_slice(&ts.subsec_nanos().to_ne_bytes());
        pkt[8..12].copy_from_slice(&caplen.to_ne_bytes());
        pkt[12..16].copy_from_slice(&caplen.to_ne_bytes());
        self.out.write_all(&pkt)?;
        self.packets += 1;
        Ok(())
    }

    /// Push buffered packets to the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Flush and return the underlying writer.
    pub fn finish(self) -> io::Result<W> {
        self.out.into_inner().map_err(|e| e.into_error())
    }

    /// A [`Tap`] for [`crate::sim::Pair`] writing every segment it sees: direction A→B uses
    /// `a_to_b`, B→A its reverse. Write errors cannot be returned from a tap: after the first
    /// one the tap stops writing; use [`shared_tap`](Self::shared_tap) to learn about them.
    pub fn tap(self, a_to_b: IpPair) -> Tap
    where
        W: Send + 'static,
    {
        self.shared_tap(a_to_b).0
    }

    /// Like [`tap`](Self::tap), plus a handle to flush the capture and collect its first write
    /// error once the run is over.
    pub fn shared_tap(self, a_to_b: IpPair) -> (Tap, CaptureHandle<W>)
    where
        W: Send + 'static,
    {
        let shared = Arc::new(Mutex::new(Shared {
            writer: Some(self),
            error: None,
        }));
        let handle = CaptureHandle {
            shared: Arc::clone(&shared),
        };
        let tap: Tap = Box::new(move |ts: Duration, dir: Direction, seg: &[u8]| {
            let Ok(mut s) = shared.lock() else { return };
            if s.error.is_some() {
                return;
            }
            let ip = match dir {
                Direction::AtoB => a_to_b,
                Direction::BtoA => a_to_b.reversed(),
            };
            let r = match s.writer.as_mut() {
                Some(w) => w.write_tcp(ts, ip, seg),
                None => return,
            };
            if let Err(e) = r {
                s.error = Some(e);
            }
        });
        (tap, handle)
    }
}

struct Shared<W: Write> {
    writer: Option<PcapWriter<W>>,
    error: Option<io::Error>,
}

/// The other end of a [`PcapWriter::shared_tap`].
pub struct CaptureHandle<W: Write> {
    shared: Arc<Mutex<Shared<W>>>,
}

impl<W: Write> CaptureHandle<W> {
    /// Flush and close the capture; returns the packets written, or the first write error.
    /// The tap writes nothing after this.
    pub fn finish(&self) -> io::Result<u64> {
        let mut s = self
            .shared
            .lock()
            .map_err(|_| io::Error::other("capture tap panicked"))?;
        if let Some(e) = s.error.take() {
            s.writer = None;
            return Err(e);
        }
        match s.writer.take() {
            Some(w) => {
                let n = w.packets();
                w.finish()?;
                Ok(n)
            }
            None => Err(io::Error::other("capture already finished")),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------

/// Link type of a pcapng packet whose interface the file never described.
pub const LINKTYPE_UNKNOWN: u32 = u32::MAX;

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
pub enum ReadError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("not a pcap or pcapng file (starts with {0:02x?})")]
    UnknownFormat(Vec<u8>),
    #[error("empty file")]
    Empty,
    #[error("bad {format} file header: {message}")]
    Header { format: Format, message: String },
    #[error("after packet record {record}: {message}")]
    Record { record: u64, message: String },
}

fn describe_pcap_error(e: &PcapError) -> String {
    match e {
        PcapError::IoError(io) if io.kind() == io::ErrorKind::UnexpectedEof => {
            "file ends inside a record (truncated capture, or a record larger than 8 MB)".into()
        }
        other => other.to_string(),
    }
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
        let header_err = |e: PcapError| ReadError::Header {
            format,
            message: match &e {
                PcapError::IoError(io) if io.kind() == io::ErrorKind::UnexpectedEof => {
                    "file ends inside its header".into()
                }
                other => other.to_string(),
            },
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
            Some(Err(message)) => {
                self.done = true;
                Some(Err(ReadError::Record {
                    record: self.records,
                    message,
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

fn next_pcap<R: Read>(r: &mut pcap_file::pcap::PcapReader<R>) -> Option<Result<RawPacket, String>> {
    let header = r.header();
    let raw: RawPcapPacket = match r.next_raw_packet()? {
        Ok(p) => p,
        Err(e) => return Some(Err(describe_pcap_error(&e))),
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

fn next_pcapng<R: Read>(r: &mut PcapNgReader<R>) -> Option<Result<RawPacket, String>> {
    loop {
        // (interface, time stamp units, data, original length)
        let (iface, units, data, orig_len) = match r.next_block()? {
            Err(e) => return Some(Err(describe_pcap_error(&e))),
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

// ---------------------------------------------------------------------------------------------
// Decoding one packet
// ---------------------------------------------------------------------------------------------

/// TCP checksum verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksum {
    Good,
    Bad {
        expected: u16,
        got: u16,
    },
    /// The capture cut the segment short: nothing to verify against.
    Unverified,
    /// The field holds only the pseudo-header sum: the packet was captured on the sending host
    /// before the NIC (or the loopback device) filled in the checksum (checksum offload).
    /// Not an error.
    Offloaded,
}

/// The message part of a data segment (a BTH segment whose opcode belongs to a message class
/// and which carries payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataSeg {
    pub class: MsgClass,
    pub opcode: Opcode,
    pub msn: u16,
    /// Byte offset of the first payload byte inside the message.
    pub offset: u32,
    /// Payload bytes (as on the wire, even if the capture kept fewer).
    pub len: u32,
    /// LAST or ONLY: the message is `offset + len` bytes long.
    pub last: bool,
    /// A READ request's payload (rkey, address, length), when it was captured whole.
    pub read_request: Option<ReadRequest>,
}

impl DataSeg {
    /// One past the last message byte carried.
    pub fn end(&self) -> u64 {
        u64::from(self.offset) + u64::from(self.len)
    }
}

/// A decoded TCP segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub seq: u32,
    pub ack: u32,
    pub flags: TcpFlags,
    pub window: u16,
    /// TCP header length (data offset × 4).
    pub header_len: usize,
    /// Payload bytes on the wire.
    pub payload_len: u32,
    /// The capture kept only part of the payload (checksum and ICRC not verified).
    pub truncated: bool,
    /// IPv4 header checksum verdict; `None` for IPv6.
    pub ip_checksum_ok: Option<bool>,
    pub checksum: Checksum,
    /// The options, or why they were refused (a malformed `tcp_bth` option among them).
    pub options: Result<TcpOptions, TcpOptionError>,
    /// ICRC verdict for a BTH segment whose payload was captured whole.
    pub icrc_ok: Option<bool>,
    pub data: Option<DataSeg>,
    /// The BTH is well formed but breaks a rule of the protocol (e.g. a FIRST segment at a
    /// non-zero offset, a READ request whose payload is not 16 bytes).
    pub problem: Option<String>,
}

impl Segment {
    pub fn bth(&self) -> Option<&Bth> {
        self.options.as_ref().ok().and_then(|o| o.bth.as_ref())
    }

    /// Refused options or a BTH that breaks the protocol.
    pub fn is_malformed(&self) -> bool {
        self.options.is_err() || self.problem.is_some()
    }

    pub fn checksum_error(&self) -> bool {
        matches!(self.checksum, Checksum::Bad { .. }) || self.ip_checksum_ok == Some(false)
    }

    /// Sequence space taken: payload + SYN + FIN.
    pub fn seq_len(&self) -> u64 {
        u64::from(self.payload_len) + u64::from(self.flags.syn()) + u64::from(self.flags.fin())
    }
}

/// What a packet turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Segment(Box<Segment>),
    /// Not a TCP segment (ARP, UDP, ICMP, an IP fragment, an unsupported link type): skipped.
    NotTcp(String),
    /// Link, IP or TCP header that cannot be parsed.
    Malformed(String),
    /// The capture's snap length cut the packet inside its headers: not decodable, not an
    /// error of the packet.
    Truncated(String),
}

/// One packet of a capture, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// 1-based position in the file, as Wireshark numbers frames.
    pub frame: u64,
    pub ts: Duration,
    /// Bytes on the wire.
    pub wire_len: u32,
    pub outcome: Outcome,
}

impl Decoded {
    pub fn segment(&self) -> Option<&Segment> {
        match &self.outcome {
            Outcome::Segment(s) => Some(s),
            _ => None,
        }
    }
}

fn by_ethertype(t: u16, rest: &[u8]) -> Result<&[u8], String> {
    match t {
        ETHERTYPE_IPV4 | ETHERTYPE_IPV6 => Ok(rest),
        other => Err(ethertype_name(other)),
    }
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86DD;

fn ethertype_name(t: u16) -> String {
    match t {
        0x0806 => "ARP".into(),
        0x88CC => "LLDP".into(),
        0x8035 => "RARP".into(),
        0x8847 | 0x8848 => "MPLS".into(),
        _ => format!("ethertype {t:#06x}"),
    }
}

/// The IP packet inside a link-layer frame: Ok(Ok(ip)), Ok(Err(not IP)), Err(malformed).
fn link_payload(linktype: u32, d: &[u8]) -> Result<Result<&[u8], String>, String> {
    let be16 = |b: &[u8], at: usize| -> Option<u16> {
        Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
    };
    match linktype {
        LINKTYPE_RAW | DLT_RAW_12 | DLT_RAW_14 | LINKTYPE_IPV4 | LINKTYPE_IPV6 => Ok(Ok(d)),
        LINKTYPE_ETHERNET => {
            let mut at = 12;
            let mut t = be16(d, at).ok_or("Ethernet header truncated")?;
            // 802.1Q / 802.1ad / QinQ tags.
            while matches!(t, 0x8100 | 0x88A8 | 0x9100) {
                at += 4;
                t = be16(d, at).ok_or("VLAN tag truncated")?;
            }
            Ok(by_ethertype(t, &d[at + 2..]))
        }
        LINKTYPE_LINUX_SLL => {
            let t = be16(d, 14).ok_or("Linux cooked header truncated")?;
            Ok(by_ethertype(t, &d[16..]))
        }
        LINKTYPE_LINUX_SLL2 => {
            let t = be16(d, 0).ok_or("Linux cooked v2 header truncated")?;
            if d.len() < 20 {
                return Err("Linux cooked v2 header truncated".into());
            }
            Ok(by_ethertype(t, &d[20..]))
        }
        LINKTYPE_NULL | LINKTYPE_LOOP => {
            let b: [u8; 4] = d
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .ok_or("loopback header truncated")?;
            let family = if linktype == LINKTYPE_LOOP {
                u32::from_be_bytes(b)
            } else {
                // Host byte order of the capturing machine: take whichever reading is small.
                u32::from_le_bytes(b).min(u32::from_be_bytes(b))
            };
            // AF_INET 2; AF_INET6 10 (Linux), 24 (Net/OpenBSD), 28 (FreeBSD), 30 (macOS).
            match family {
                2 | 10 | 24 | 28 | 30 => Ok(Ok(&d[4..])),
                f => Ok(Err(format!("loopback address family {f}"))),
            }
        }
        LINKTYPE_UNKNOWN => Err("packet of an interface the file does not describe".into()),
        other => Ok(Err(format!("link type {other} not supported"))),
    }
}

fn ip_pair(src: IpAddr, dst: IpAddr) -> Option<IpPair> {
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

/// The folded (not complemented) sum of the TCP pseudo header: what a sender leaves in the
/// checksum field for the NIC to complete under checksum offload.
fn pseudo_header_sum(ip: IpPair, tcp_len: usize) -> u16 {
    let mut sum: u64 = 0;
    let mut add = |b: &[u8]| {
        for w in b.chunks(2) {
            sum += u64::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
        }
    };
    match ip {
        IpPair::V4 { src, dst } => {
            add(&src);
            add(&dst);
            add(&[0, 6]);
            add(&(tcp_len as u16).to_be_bytes());
        }
        IpPair::V6 { src, dst } => {
            add(&src);
            add(&dst);
            add(&(tcp_len as u32).to_be_bytes());
            add(&[0, 0, 0, 6]);
        }
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    sum as u16
}

/// What the IP layer yields: addresses, TCP bytes, IPv4 header checksum verdict.
struct IpPart<'a> {
    src: IpAddr,
    dst: IpAddr,
    tcp: &'a [u8],
    ip_checksum_ok: Option<bool>,
}

fn ip_number_name(n: etherparse::IpNumber) -> String {
    match n.keyword_str() {
        Some(k) => format!("IP protocol {k}"),
        None => format!("IP protocol {}", n.0),
    }
}

fn ipv4_checksum_ok(h: etherparse::Ipv4HeaderSlice<'_>) -> bool {
    h.to_header().calc_header_checksum() == h.header_checksum()
}

/// Ok(Ok(ip part)), Ok(Err(skip reason)), Err(malformed).
fn ip_layer(l3: &[u8], truncated: bool) -> Result<Result<IpPart<'_>, String>, String> {
    if l3.is_empty() {
        return Err("empty IP packet".into());
    }
    if !truncated {
        let ip = etherparse::IpSlice::from_slice(l3).map_err(|e| format!("IP: {e}"))?;
        let p = ip.payload();
        if p.fragmented {
            return Ok(Err("IP fragment (not reassembled)".into()));
        }
        if p.ip_number != etherparse::IpNumber::TCP {
            return Ok(Err(ip_number_name(p.ip_number)));
        }
        let ip_checksum_ok = ip.ipv4().map(|v4| ipv4_checksum_ok(v4.header()));
        return Ok(Ok(IpPart {
            src: ip.source_addr(),
            dst: ip.destination_addr(),
            tcp: p.payload,
            ip_checksum_ok,
        }));
    }
    let (ip, _ext_err) = etherparse::LaxIpSlice::from_slice(l3).map_err(|e| format!("IP: {e}"))?;
    let p = ip.payload();
    if p.fragmented {
        return Ok(Err("IP fragment (not reassembled)".into()));
    }
    if p.ip_number != etherparse::IpNumber::TCP {
        return Ok(Err(ip_number_name(p.ip_number)));
    }
    let ip_checksum_ok = ip.ipv4().map(|v4| ipv4_checksum_ok(v4.header()));
    Ok(Ok(IpPart {
        src: ip.source_addr(),
        dst: ip.destination_addr(),
        tcp: p.payload,
        ip_checksum_ok,
    }))
}

/// Decode one captured packet (`frame` is its 1-based position in the file).
pub fn decode(frame: u64, pkt: &RawPacket) -> Decoded {
    let outcome = decode_outcome(pkt);
    Decoded {
        frame,
        ts: pkt.ts,
        wire_len: pkt.orig_len,
        outcome,
    }
}

fn decode_outcome(pkt: &RawPacket) -> Outcome {
    match decode_layers(pkt) {
        Outcome::Malformed(why) if pkt.is_truncated() => Outcome::Truncated(format!(
            "{why} (the capture kept {} of {} bytes)",
            pkt.data.len(),
            pkt.orig_len
        )),
        o => o,
    }
}

fn decode_layers(pkt: &RawPacket) -> Outcome {
    let truncated = pkt.is_truncated();
    let l3 = match link_payload(pkt.linktype, &pkt.data) {
        Err(m) => return Outcome::Malformed(m),
        Ok(Err(skip)) => return Outcome::NotTcp(skip),
        Ok(Ok(l3)) => l3,
    };
    let ip = match ip_layer(l3, truncated) {
        Err(m) => return Outcome::Malformed(m),
        Ok(Err(skip)) => return Outcome::NotTcp(skip),
        Ok(Ok(ip)) => ip,
    };
    let missing = u64::from(pkt.orig_len).saturating_sub(pkt.data.len() as u64);
    match tcp_layer(&ip, truncated, missing) {
        Ok(s) => Outcome::Segment(Box::new(s)),
        Err(m) => Outcome::Malformed(m),
    }
}

fn tcp_layer(ip: &IpPart<'_>, truncated: bool, missing: u64) -> Result<Segment, String> {
    let b = ip.tcp;
    if b.len() < 20 {
        return Err(format!("TCP header truncated: {} bytes", b.len()));
    }
    let doff = b[12] >> 4;
    if doff < 5 {
        return Err(format!("TCP data offset {doff} is below 5"));
    }
    let header_len = usize::from(doff) * 4;
    if b.len() < header_len {
        return Err(format!(
            "TCP header of {header_len} bytes truncated to {}",
            b.len()
        ));
    }
    let be16 = |at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
    let be32 = |at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let captured = &b[header_len..];
    let payload_len = u32::try_from(captured.len() as u64 + missing).unwrap_or(u32::MAX);
    let pair = ip_pair(ip.src, ip.dst).ok_or("mixed IPv4/IPv6 addresses")?;
    let (checksum, options) = if truncated {
        (Checksum::Unverified, TcpOptions::parse(&b[20..header_len]))
    } else {
        match TcpRepr::parse(b, Some(pair)) {
            Ok(t) => (Checksum::Good, Ok(t.options)),
            Err(SegmentError::Checksum { expected, got }) => (
                if got == pseudo_header_sum(pair, b.len()) {
                    Checksum::Offloaded
                } else {
                    Checksum::Bad { expected, got }
                },
                TcpOptions::parse(&b[20..header_len]),
            ),
            Err(SegmentError::Options(e)) => (Checksum::Good, Err(e)),
            Err(e) => return Err(format!("TCP: {e}")),
        }
    };
    let mut seg = Segment {
        src: SocketAddr::new(ip.src, be16(0)),
        dst: SocketAddr::new(ip.dst, be16(2)),
        seq: be32(4),
        ack: be32(8),
        flags: TcpFlags(b[13]),
        window: be16(14),
        header_len,
        payload_len,
        truncated,
        ip_checksum_ok: ip.ip_checksum_ok,
        checksum,
        options,
        icrc_ok: None,
        data: None,
        problem: None,
    };
    let Some(bth) = seg.bth().copied() else {
        return Ok(seg);
    };
    if !truncated {
        seg.icrc_ok = Some(bth.icrc_ok(captured));
    }
    if let Some(class) = MsgClass::of(bth.opcode).filter(|_| payload_len > 0) {
        let mut data = DataSeg {
            class,
            opcode: bth.opcode,
            msn: bth.msn,
            offset: bth.mbo,
            len: payload_len,
            last: !bth.opcode.more(),
            read_request: None,
        };
        if !truncated {
            match Inbound::from_bth(&bth, captured) {
                Ok(_) if class == MsgClass::ReadRequest => {
                    data.read_request = ReadRequest::parse(captured).ok();
                }
                Ok(_) => {}
                Err(e) => seg.problem = Some(e.to_string()),
            }
        }
        seg.data = Some(data);
    }
    Ok(seg)
}

// ---------------------------------------------------------------------------------------------
// Following a capture
// ---------------------------------------------------------------------------------------------

/// A direction of a TCP connection: (source, destination).
pub type FlowKey = (SocketAddr, SocketAddr);

/// Identifies a message: direction, class (its MSN counter, see docs/design.md) and MSN.
/// MSNs are 16-bit: a capture with more than 65536 messages of one class in one direction
/// folds later ones onto earlier keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageKey {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub class: MsgClass,
    pub msn: u16,
}

/// What the data segments of one message showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageInfo {
    /// Frame of its first data segment in the capture.
    pub first_frame: u64,
    /// Data segments seen, retransmissions included.
    pub segments: u64,
    /// Payload bytes seen, retransmissions included.
    pub bytes: u64,
    /// Largest offset + length of any of its segments.
    pub max_end: u64,
    /// Offset + length of its LAST/ONLY segment: the message length, once that segment is seen.
    pub len: Option<u64>,
    /// The RDMA WRITE target address of its segment at offset 0.
    pub write_addr: Option<u64>,
    /// Immediate data, if its last segment carries some.
    pub imm: Option<u32>,
    /// A READ request's requested length.
    pub read_len: Option<u32>,
    /// Segments at offsets that disagree with their TCP sequence numbers.
    pub misplaced: u64,
    /// Sequence number (unwrapped) of offset 0, from the first segment seen.
    seq0: i128,
}

/// Per direction of a connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowInfo {
    pub segments: u64,
    pub data_segments: u64,
    pub payload_bytes: u64,
    pub out_of_order: u64,
    pub retransmissions: u64,
    /// MSN announced in the SYN's hello (the first MSN of every counter this side uses).
    pub hello_msn: Option<u16>,
    /// Largest message the side accepts, from the hello.
    pub hello_max_message: Option<u32>,
    /// Unwrapping of 32-bit sequence numbers: last raw and extended values.
    last_seq: Option<(u32, i128)>,
    highest_end: Option<i128>,
    /// Byte ranges of data seen (start -> end), merged.
    seen: BTreeMap<i128, i128>,
}

impl FlowInfo {
    fn unwrap_seq(&mut self, seq: u32) -> i128 {
        let ext = match self.last_seq {
            None => i128::from(seq),
            Some((raw, ext)) => ext + i128::from(seq.wrapping_sub(raw) as i32),
        };
        self.last_seq = Some((seq, ext));
        ext
    }

    fn overlaps(&self, start: i128, end: i128) -> bool {
        self.seen
            .range(..end)
            .next_back()
            .is_some_and(|(_, &e)| e > start)
    }

    fn insert(&mut self, mut start: i128, mut end: i128) {
        // Merge with every range touching [start, end).
        let touching: Vec<(i128, i128)> = self
            .seen
            .range(..=end)
            .rev()
            .take_while(|(_, &e)| e >= start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in touching {
            self.seen.remove(&s);
            start = start.min(s);
            end = end.max(e);
        }
        self.seen.insert(start, end);
    }
}

/// How a data segment relates to the ones before it in its direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Marks {
    /// Its sequence number is below the highest sequence number + length already seen in its
    /// direction: it comes after data that follows it (a retransmission, or reordering upstream
    /// of the capture point).
    pub out_of_order: bool,
    /// It carries at least one byte already seen in its direction.
    pub retransmission: bool,
}

/// The counts of a capture.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Packet records read.
    pub packets: u64,
    /// Bytes on the wire of all packets.
    pub wire_bytes: u64,
    /// Packets that decoded as TCP segments (checksum errors included).
    pub tcp_segments: u64,
    /// TCP segments carrying a well-formed `tcp_bth` option.
    pub bth_segments: u64,
    /// BTH segments carrying message payload.
    pub data_segments: u64,
    /// Distinct (direction, class, MSN) among data segments.
    pub messages: u64,
    /// TCP payload bytes of all segments.
    pub payload_bytes: u64,
    /// See [`Marks::out_of_order`].
    pub out_of_order: u64,
    /// See [`Marks::retransmission`].
    pub retransmissions: u64,
    /// BTH segments whose ICRC does not match their header and payload.
    pub icrc_errors: u64,
    /// Segments with a wrong TCP checksum or IPv4 header checksum.
    pub checksum_errors: u64,
    /// Packets whose link, IP or TCP header, or `tcp_bth` option, could not be parsed, or whose
    /// BTH breaks a protocol rule.
    pub malformed: u64,
    /// Packets that are not TCP (skipped).
    pub not_tcp: u64,
    /// Packets the capture cut short (checksum and ICRC not verified; not decoded at all when
    /// the cut is inside the headers).
    pub truncated: u64,
}

/// Follows the decoded packets of a capture in file order.
#[derive(Debug, Default)]
pub struct Analyzer {
    flows: HashMap<FlowKey, FlowInfo>,
    messages: BTreeMap<MessageKey, MessageInfo>,
    summary: Summary,
}

impl Analyzer {
    pub fn new() -> Analyzer {
        Analyzer::default()
    }

    /// Account for the next packet; returns how a data segment relates to earlier ones.
    pub fn add(&mut self, d: &Decoded) -> Marks {
        let s = &mut self.summary;
        s.packets += 1;
        s.wire_bytes += u64::from(d.wire_len);
        let seg = match &d.outcome {
            Outcome::NotTcp(_) => {
                s.not_tcp += 1;
                return Marks::default();
            }
            Outcome::Malformed(_) => {
                s.malformed += 1;
                return Marks::default();
            }
            Outcome::Truncated(_) => {
                s.truncated += 1;
                return Marks::default();
            }
            Outcome::Segment(seg) => seg,
        };
        s.tcp_segments += 1;
        s.payload_bytes += u64::from(seg.payload_len);
        s.truncated += u64::from(seg.truncated);
        s.checksum_errors += u64::from(seg.checksum_error());
        s.malformed += u64::from(seg.is_malformed());
        if let Some(bth) = seg.bth() {
            s.bth_segments += 1;
            s.icrc_errors += u64::from(seg.icrc_ok == Some(false));
            if seg.flags.syn() && bth.opcode == Opcode::Hello {
                let f = self.flows.entry((seg.src, seg.dst)).or_default();
                f.hello_msn = Some(bth.msn);
                f.hello_max_message = Some(bth.mbo);
            }
        }
        let flow = self.flows.entry((seg.src, seg.dst)).or_default();
        flow.segments += 1;
        flow.payload_bytes += u64::from(seg.payload_len);
        if seg.payload_len == 0 {
            return Marks::default();
        }
        let start = flow.unwrap_seq(seg.seq);
        let end = start + i128::from(seg.payload_len);
        let marks = Marks {
            out_of_order: flow.highest_end.is_some_and(|h| start < h),
            retransmission: flow.overlaps(start, end),
        };
        flow.highest_end = Some(flow.highest_end.map_or(end, |h| h.max(end)));
        flow.insert(start, end);
        flow.out_of_order += u64::from(marks.out_of_order);
        flow.retransmissions += u64::from(marks.retransmission);
        s.out_of_order += u64::from(marks.out_of_order);
        s.retransmissions += u64::from(marks.retransmission);
        if let Some(data) = seg.data {
            flow.data_segments += 1;
            s.data_segments += 1;
            let key = MessageKey {
                src: seg.src,
                dst: seg.dst,
                class: data.class,
                msn: data.msn,
            };
            let seq0 = start - i128::from(data.offset);
            let m = self.messages.entry(key).or_insert_with(|| MessageInfo {
                first_frame: d.frame,
                segments: 0,
                bytes: 0,
                max_end: 0,
                len: None,
                write_addr: None,
                imm: None,
                read_len: None,
                misplaced: 0,
                seq0,
            });
            m.segments += 1;
            m.bytes += u64::from(data.len);
            m.max_end = m.max_end.max(data.end());
            m.misplaced += u64::from(seq0 != m.seq0);
            if data.last {
                m.len = Some(data.end());
            }
            let bth = seg.bth();
            if data.offset == 0 {
                if let Some(r) = bth.and_then(|b| b.ext.reth()) {
                    m.write_addr = Some(r.addr);
                }
            }
            if let Some(i) = bth.and_then(|b| b.ext.immediate()) {
                m.imm = Some(i);
            }
            if let Some(r) = data.read_request {
                m.read_len = Some(r.len);
            }
            s.messages = self.messages.len() as u64;
        }
        marks
    }

    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    pub fn messages(&self) -> &BTreeMap<MessageKey, MessageInfo> {
        &self.messages
    }

    pub fn flows(&self) -> &HashMap<FlowKey, FlowInfo> {
        &self.flows
    }
}

/// Everything [`analyze_file`] learnt.
#[derive(Debug)]
pub struct Analysis {
    pub format: Format,
    /// Every packet with its marks, in file order.
    pub records: Vec<(Decoded, Marks)>,
    pub summary: Summary,
    pub messages: BTreeMap<MessageKey, MessageInfo>,
    pub flows: HashMap<FlowKey, FlowInfo>,
    /// The error that ended the read early, if one did.
    pub error: Option<ReadError>,
}

/// Read, decode and follow every packet of a capture file. Fails only when the file cannot be
/// opened or its header is not pcap/pcapng; an error later in the file ends the read and is
/// returned in [`Analysis::error`] with everything before it.
pub fn analyze_file(path: impl AsRef<Path>) -> Result<Analysis, ReadError> {
    analyze(CaptureReader::open(path)?)
}

/// [`analyze_file`] over an open reader.
pub fn analyze<R: Read>(mut reader: CaptureReader<R>) -> Result<Analysis, ReadError> {
    let format = reader.format();
    let mut an = Analyzer::new();
    let mut records = Vec::new();
    let mut error = None;
    let mut frame = 0;
    while let Some(r) = reader.next_packet() {
        match r {
            Ok(p) => {
                frame += 1;
                let d = decode(frame, &p);
                let m = an.add(&d);
                records.push((d, m));
            }
            Err(e) => error = Some(e),
        }
    }
    Ok(Analysis {
        format,
        records,
        summary: an.summary.clone(),
        messages: an.messages,
        flows: an.flows,
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Extension, Reth, Timestamps};
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
    use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
    use pcap_file::pcapng::PcapNgWriter;
    use pcap_file::DataLink;
    use std::borrow::Cow;

    const V4: IpPair = IpPair::V4 {
        src: [192, 0, 2, 1],
        dst: [192, 0, 2, 2],
    };
    const V6: IpPair = IpPair::V6 {
        src: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        dst: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
    };

    fn segment(ip: IpPair, seq: u32, bth: Option<Bth>, payload: &[u8]) -> Vec<u8> {
        let bth = bth.map(|mut b| {
            b.seal(payload);
            b
        });
        TcpRepr {
            src_port: 1000,
            dst_port: 2000,
            seq,
            ack: 9,
            flags: TcpFlags::ACK,
            window: 100,
            urgent: 0,
            options: TcpOptions {
                bth,
                ..TcpOptions::default()
            },
            payload,
        }
        .to_vec(ip)
        .unwrap()
    }

    fn send(msn: u16, opcode: Opcode, offset: u32) -> Bth {
        let mut b = Bth::new(opcode);
        b.msn = msn;
        b.mbo = offset;
        b.timestamps = Some(Timestamps { tsval: 1, tsecr: 2 });
        b
    }

    fn raw(linktype: u32, data: Vec<u8>) -> RawPacket {
        RawPacket {
            ts: Duration::ZERO,
            linktype,
            orig_len: data.len() as u32,
            data,
        }
    }

    fn write(packets: &[(IpPair, Vec<u8>)]) -> Vec<u8> {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        for (i, (ip, s)) in packets.iter().enumerate() {
            w.write_tcp(Duration::new(1, i as u32 * 1000 + 7), *ip, s)
                .unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn writer_builds_a_correct_ipv4_header() {
        let seg = segment(V4, 1, Some(send(0, Opcode::SendOnly, 0)), b"payload");
        let file = write(&[(V4, seg.clone()), (V4, seg.clone())]);
        assert_eq!(file[..4], 0xA1B2_3C4Du32.to_ne_bytes());
        assert_eq!(file[20..24], LINKTYPE_RAW.to_ne_bytes());
        let pkts: Vec<RawPacket> = CaptureReader::new(&file[..])
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(pkts.len(), 2);
        assert_eq!(pkts[1].ts, Duration::new(1, 1007));
        let (h, rest) = etherparse::Ipv4Header::from_slice(&pkts[0].data).unwrap();
        assert_eq!(h.header_checksum, h.calc_header_checksum());
        assert_eq!(
            (h.time_to_live, h.protocol, h.dont_fragment),
            (64, etherparse::IpNumber::TCP, true)
        );
        assert_eq!(usize::from(h.total_len), 20 + seg.len());
        assert_eq!(rest, &seg[..]);
        let (h2, _) = etherparse::Ipv4Header::from_slice(&pkts[1].data).unwrap();
        assert_eq!(h2.identification, h.identification.wrapping_add(1));
    }

    #[test]
    fn ipv6_round_trip_decodes_and_verifies() {
        let seg = segment(V6, 5, Some(send(3, Opcode::SendOnly, 0)), b"abc");
        let file = write(&[(V6, seg)]);
        let a = analyze(CaptureReader::new(&file[..]).unwrap()).unwrap();
        let s = a.records[0].0.segment().unwrap();
        assert_eq!(s.src.to_string(), "[2001:db8::1]:1000");
        assert_eq!(
            (s.checksum, s.ip_checksum_ok, s.icrc_ok),
            (Checksum::Good, None, Some(true))
        );
        assert_eq!(s.data.unwrap().msn, 3);
    }

    #[test]
    fn writer_refuses_what_does_not_fit() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        let e = w
            .write_tcp(Duration::ZERO, V4, &vec![0; 70_000])
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = w
            .write_tcp(Duration::from_secs(1 << 33), V4, &[0; 20])
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(w.packets(), 0);
    }

    #[test]
    fn bad_checksums_and_icrc_are_reported_not_fatal() {
        let mut seg = segment(V4, 1, Some(send(0, Opcode::SendOnly, 0)), b"payload");
        *seg.last_mut().unwrap() ^= 1;
        let mut ip = etherparse::Ipv4Header::new(
            seg.len() as u16,
            64,
            etherparse::IpNumber::TCP,
            [192, 0, 2, 1],
            [192, 0, 2, 2],
        )
        .unwrap();
        ip.header_checksum = ip.calc_header_checksum() ^ 0x100;
        let mut pkt = ip.to_bytes().to_vec();
        pkt.extend_from_slice(&seg);
        let d = decode(1, &raw(LINKTYPE_RAW, pkt));
        let s = d.segment().unwrap();
        assert!(matches!(s.checksum, Checksum::Bad { .. }));
        assert_eq!(s.ip_checksum_ok, Some(false));
        assert_eq!(s.icrc_ok, Some(false));
        let mut an = Analyzer::new();
        an.add(&d);
        assert_eq!(
            (an.summary().checksum_errors, an.summary().icrc_errors),
            (1, 1)
        );
    }

    #[test]
    fn offloaded_checksum_is_recognised() {
        let mut seg = segment(V4, 1, None, b"xy");
        let partial = pseudo_header_sum(V4, seg.len());
        seg[16..18].copy_from_slice(&partial.to_be_bytes());
        let file = write(&[(V4, seg)]);
        let a = analyze(CaptureReader::new(&file[..]).unwrap()).unwrap();
        assert_eq!(
            a.records[0].0.segment().unwrap().checksum,
            Checksum::Offloaded
        );
        assert_eq!(a.summary.checksum_errors, 0);
    }

    fn ip_packet(seg: &[u8]) -> Vec<u8> {
        let file = write(&[(V4, seg.to_vec())]);
        CaptureReader::new(&file[..])
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .data
    }

    #[test]
    fn link_layers() {
        let seg = segment(V4, 1, Some(send(0, Opcode::SendOnly, 0)), b"x");
        let ip = ip_packet(&seg);
        let with = |head: &[u8]| [head, &ip[..]].concat();
        let mut eth = vec![0u8; 12];
        eth.extend_from_slice(&[0x81, 0x00, 0, 5, 0x08, 0x00]); // one VLAN tag
        let mut sll = vec![0u8; 14];
        sll.extend_from_slice(&[0x08, 0x00]);
        let mut sll2 = vec![0x08, 0x00];
        sll2.extend_from_slice(&[0; 18]);
        for (lt, head) in [
            (LINKTYPE_RAW, vec![]),
            (LINKTYPE_IPV4, vec![]),
            (LINKTYPE_ETHERNET, eth),
            (LINKTYPE_LINUX_SLL, sll),
            (LINKTYPE_LINUX_SLL2, sll2),
            (LINKTYPE_NULL, 2u32.to_le_bytes().to_vec()),
            (LINKTYPE_NULL, 2u32.to_be_bytes().to_vec()),
            (LINKTYPE_LOOP, 2u32.to_be_bytes().to_vec()),
        ] {
            let d = decode(1, &raw(lt, with(&head)));
            let s = d
                .segment()
                .unwrap_or_else(|| panic!("{lt}: {:?}", d.outcome));
            assert_eq!(s.icrc_ok, Some(true), "{lt}");
        }
        let mut arp = vec![0u8; 12];
        arp.extend_from_slice(&[0x08, 0x06, 0, 0]);
        assert_eq!(
            decode(1, &raw(LINKTYPE_ETHERNET, arp)).outcome,
            Outcome::NotTcp("ARP".into())
        );
        assert!(matches!(
            decode(1, &raw(LINKTYPE_ETHERNET, vec![0; 13])).outcome,
            Outcome::Malformed(_)
        ));
        assert!(matches!(
            decode(1, &raw(999, vec![0; 40])).outcome,
            Outcome::NotTcp(_)
        ));
        assert!(matches!(
            decode(1, &raw(LINKTYPE_RAW, vec![])).outcome,
            Outcome::Malformed(_)
        ));
    }

    #[test]
    fn truncated_packets_are_decoded_as_far_as_they_go() {
        let seg = segment(V4, 1, Some(send(0, Opcode::SendFirst, 0)), &[7; 100]);
        let ip = ip_packet(&seg);
        let mut p = raw(LINKTYPE_RAW, ip[..80].to_vec());
        p.orig_len = ip.len() as u32;
        let d = decode(1, &p);
        let s = d.segment().unwrap();
        assert!(s.truncated);
        assert_eq!(
            (s.payload_len, s.checksum, s.icrc_ok),
            (100, Checksum::Unverified, None)
        );
        assert_eq!(s.data.unwrap().len, 100);
        p.data.truncate(30);
        assert!(matches!(decode(1, &p).outcome, Outcome::Truncated(_)));
    }

    #[test]
    fn protocol_violations_and_bad_options_are_malformed() {
        // SEND_MIDDLE at offset 0.
        let d = decode(
            1,
            &raw(
                LINKTYPE_RAW,
                ip_packet(&segment(V4, 1, Some(send(0, Opcode::SendMiddle, 0)), b"z")),
            ),
        );
        assert!(d.segment().unwrap().problem.is_some());
        // An option whose length disagrees with its flags (T cleared, checksum fixed up).
        let mut seg = segment(V4, 1, Some(send(0, Opcode::SendOnly, 0)), b"z");
        seg[24] &= !0x04;
        if let Err(SegmentError::Checksum { expected, .. }) = TcpRepr::parse(&seg, Some(V4)) {
            seg[16..18].copy_from_slice(&expected.to_be_bytes());
        }
        let d = decode(1, &raw(LINKTYPE_RAW, ip_packet(&seg)));
        let s = d.segment().unwrap();
        assert_eq!(s.checksum, Checksum::Good);
        assert!(s.is_malformed() && s.bth().is_none());
        let mut an = Analyzer::new();
        an.add(&d);
        assert_eq!(an.summary().malformed, 1);
    }

    fn decoded(frame: u64, seg: Vec<u8>) -> Decoded {
        decode(frame, &raw(LINKTYPE_RAW, ip_packet(&seg)))
    }

    #[test]
    fn marks_and_messages_follow_the_stream_across_wrap() {
        let base = u32::MAX - 5; // the message straddles the 2^32 wrap
        let mut w = send(9, Opcode::RdmaWriteFirst, 0);
        w.ext = Extension::Reth(Reth {
            rkey: 1,
            addr: 0x5000,
        });
        let first = segment(V4, base, Some(w), &[1; 10]);
        w.opcode = Opcode::RdmaWriteLastWithImmediate;
        w.mbo = 10;
        w.ext = Extension::RethImmediate(
            Reth {
                rkey: 1,
                addr: 0x500a,
            },
            77,
        );
        let last = segment(V4, base.wrapping_add(10), Some(w), &[2; 6]);
        let mut an = Analyzer::new();
        let marks: Vec<Marks> = [
            decoded(1, last.clone()),
            decoded(2, first.clone()),
            decoded(3, first),
            decoded(4, last),
        ]
        .iter()
        .map(|d| an.add(d))
        .collect();
        let m = |o, r| Marks {
            out_of_order: o,
            retransmission: r,
        };
        assert_eq!(
            marks,
            vec![
                m(false, false),
                m(true, false),
                m(true, true),
                m(true, true)
            ]
        );
        let s = an.summary();
        assert_eq!(
            (
                s.data_segments,
                s.messages,
                s.out_of_order,
                s.retransmissions
            ),
            (4, 1, 3, 2)
        );
        let (k, info) = an.messages().iter().next().unwrap();
        assert_eq!((k.class, k.msn), (MsgClass::Write, 9));
        assert_eq!(
            (
                info.len,
                info.segments,
                info.misplaced,
                info.write_addr,
                info.imm
            ),
            (Some(16), 4, 0, Some(0x5000), Some(77))
        );
    }

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
    fn not_a_capture() {
        assert!(matches!(
            CaptureReader::new(&b""[..]),
            Err(ReadError::Empty)
        ));
        assert!(matches!(
            CaptureReader::new(&b"GET / HTTP/1.1"[..]),
            Err(ReadError::UnknownFormat(_))
        ));
        assert!(matches!(
            CaptureReader::new(&0xA1B2_C3D4u32.to_le_bytes()[..]),
            Err(ReadError::Header { .. })
        ));
    }

    #[test]
    fn tap_writes_both_directions_and_reports_errors() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::other("disk full"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Err(io::Error::other("disk full"))
            }
        }
        let a = segment(V4, 1, None, b"a");
        let b = segment(V4.reversed(), 1, None, b"b");
        let shared = Arc::new(Mutex::new(Vec::new()));
        #[derive(Clone)]
        struct Sink(Arc<Mutex<Vec<u8>>>);
        impl Write for Sink {
            fn write(&mut self, d: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(d);
                Ok(d.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let (mut tap, handle) = PcapWriter::new(Sink(shared.clone()))
            .unwrap()
            .shared_tap(V4);
        tap(Duration::from_millis(1), Direction::AtoB, &a);
        tap(Duration::from_millis(2), Direction::BtoA, &b);
        assert_eq!(handle.finish().unwrap(), 2);
        let bytes = shared.lock().unwrap().clone();
        let an = analyze(CaptureReader::new(&bytes[..]).unwrap()).unwrap();
        assert_eq!(an.summary.checksum_errors, 0, "B->A uses the reversed pair");
        assert_eq!(an.flows.len(), 2);

        // Buffered: the error surfaces at the latest when the handle flushes.
        let (mut tap, handle) = PcapWriter::new(Full)
            .map_or_else(|_| panic!("header write is buffered"), |w| w.shared_tap(V4));
        tap(Duration::ZERO, Direction::AtoB, &a);
        assert!(handle.finish().is_err());
    }
}
