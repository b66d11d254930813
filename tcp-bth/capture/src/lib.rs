//! Packet captures of tcp-bth traffic.
//!
//! * Writing: [`PcapWriter`] wraps TCP segments (as the stack emits them) in an IPv4 or IPv6
//!   header and writes them to a libpcap file with link type RAW (101), readable by tcpdump,
//!   Wireshark/tshark (with `docs/wireshark/tcp_bth.lua` for the option) and `bth-dump`.
//!   [`PcapWriter::shared`] lets a packet callback write to one (`bth_io::sim::pcap_tap`
//!   makes it the simulated pair's tap).
//! * Reading: [`CaptureReader`] reads pcap and pcapng files (any byte order, micro- or
//!   nanosecond timestamps) and yields [`RawPacket`]s; [`decode`] turns one into a [`Decoded`]
//!   record (IP, TCP with checksum verification, the `tcp_bth` option, ICRC); an [`Analyzer`]
//!   follows the records of a capture and keeps the counts `bth-dump` prints (out-of-order
//!   segments, retransmissions, messages, errors). [`analyze_file`] does all three.
//!   [`Analyzer::decode`] decodes each packet with what the capture showed before it: an
//!   S-framed data segment (amendment 3) is placed from its sequence number and its sender's
//!   ISN, from the SYN; without that SYN its placement offset is reported unknown. S-framed
//!   data carry no ICRC: [`Icrc::NotApplicable`], never an ICRC error.
//! * Rendering: [`describe`] prints wire values (segment, option area, BTH) as text, for
//!   `bth decode` and `bth-dump`.
//!
//! Capture files are untrusted input: nothing here panics on their contents. A packet that
//! cannot be decoded becomes a [`Outcome::Malformed`] record; a file whose framing breaks
//! (truncated record, bad block) ends the read with an error after the packets before it.
//!
//! This crate touches the file system (`PcapWriter::create`, `CaptureReader::open`); the stack
//! (`tcp-bth`) does not, and knows nothing of captures. It depends on the codec
//! (`bth-wire`) only, never on the stack or its drivers.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

// writer.rs: writing pcap files; reader.rs: reading pcap and pcapng files; link.rs and ip.rs:
// unwrapping a captured packet down to its TCP segment; decode.rs: decoding that segment;
// error.rs: why a packet was not decoded, or breaks the protocol; analyze.rs: following a whole
// capture; describe.rs: text renderings of wire values.
mod analyze;
mod decode;
pub mod describe;
mod error;
mod ip;
mod link;
mod reader;
#[cfg(test)]
mod test_util;
mod writer;

pub use analyze::{
    analyze, analyze_file, Analysis, Analyzer, CapturedMessage, FlowInfo, FlowKey, Marks,
    MessageKey, Summary,
};
pub use decode::{
    decode, decode_with, is_zero_length, stream_offset, Checksum, DataSeg, Decoded, Icrc, Outcome,
    Segment, SeqFraming,
};
pub use error::{IpError, Malformed, NotTcp, Problem, Truncated};
pub use link::{
    LINKTYPE_ETHERNET, LINKTYPE_IPV4, LINKTYPE_IPV6, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2,
    LINKTYPE_LOOP, LINKTYPE_NULL, LINKTYPE_RAW, LINKTYPE_UNKNOWN,
};
pub use reader::{CaptureReader, Format, FormatError, RawPacket, ReadError};
pub use writer::{CaptureHandle, PcapWriter, SharedWriter, SNAPLEN, TTL};
