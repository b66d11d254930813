//! Decoding one captured packet: IP, TCP with checksum verification, the `tcp_bth` option and
//! its ICRC.

use super::error::{Malformed, NotTcp, Problem, Stop, Truncated};
use super::ip::{ip_layer, ip_pair, pseudo_header_sum, IpPart};
use super::link::link_payload;
use super::RawPacket;
use std::net::SocketAddr;
use std::time::Duration;
use tcp_bth_wire::{
    Bth, Inbound, MsgClass, Opcode, ReadRequest, SegmentError, TcpFlags, TcpOptionError,
    TcpOptions, TcpRepr, ZERO_LENGTH_MBO,
};

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
    /// Byte offset of the first payload byte inside the message (0 for a zero-length message).
    pub offset: u32,
    /// Message bytes carried: the payload bytes as on the wire, even if the capture kept fewer;
    /// 0 for the pad byte of a zero-length message.
    pub len: u32,
    /// The one segment of a zero-length SEND or RDMA WRITE: offset field `ZERO_LENGTH_MBO`, one
    /// pad byte of payload that is not message data.
    pub zero_length: bool,
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
    pub problem: Option<Problem>,
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
    NotTcp(NotTcp),
    /// Link, IP or TCP header that cannot be parsed.
    Malformed(Malformed),
    /// The capture's snap length cut the packet inside its headers: not decodable, not an
    /// error of the packet.
    Truncated(Truncated),
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
        Ok(s) => Outcome::Segment(Box::new(s)),
        Err(Stop::NotTcp(why)) => Outcome::NotTcp(why),
        Err(Stop::Malformed(header)) if pkt.is_truncated() => Outcome::Truncated(Truncated {
            header,
            kept: pkt.data.len(),
            wire_len: pkt.orig_len,
        }),
        Err(Stop::Malformed(why)) => Outcome::Malformed(why),
    }
}

fn decode_layers(pkt: &RawPacket) -> Result<Segment, Stop> {
    let truncated = pkt.is_truncated();
    let l3 = link_payload(pkt.linktype, &pkt.data)?;
    let ip = ip_layer(l3, truncated)?;
    let missing = u64::from(pkt.orig_len).saturating_sub(pkt.data.len() as u64);
    tcp_layer(&ip, truncated, missing).map_err(Stop::Malformed)
}

fn tcp_layer(ip: &IpPart<'_>, truncated: bool, missing: u64) -> Result<Segment, Malformed> {
    let b = ip.tcp;
    if b.len() < 20 {
        return Err(Malformed::TcpTruncated(b.len()));
    }
    let doff = b[12] >> 4;
    if doff < 5 {
        return Err(Malformed::DataOffset(doff));
    }
    let header_len = usize::from(doff) * 4;
    if b.len() < header_len {
        return Err(Malformed::TcpHeaderCut {
            header_len,
            available: b.len(),
        });
    }
    let be16 = |at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
    let be32 = |at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let captured = &b[header_len..];
    let payload_len = u32::try_from(captured.len() as u64 + missing).unwrap_or(u32::MAX);
    let pair = ip_pair(ip.src, ip.dst).ok_or(Malformed::MixedAddresses)?;
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
            Err(e) => return Err(Malformed::Tcp(e)),
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
        let zero_length = is_zero_length(&bth, payload_len);
        let mut data = DataSeg {
            class,
            opcode: bth.opcode,
            msn: bth.msn,
            offset: if zero_length { 0 } else { bth.mbo },
            len: if zero_length { 0 } else { payload_len },
            zero_length,
            last: !bth.opcode.more(),
            read_request: None,
        };
        if !truncated {
            match Inbound::from_bth(&bth, captured) {
                Ok(_) if class == MsgClass::ReadRequest => {
                    data.read_request = ReadRequest::parse(captured).ok();
                }
                Ok(_) => {}
                Err(e) => seg.problem = Some(Problem::Message(e)),
            }
        }
        seg.data = Some(data);
    }
    Ok(seg)
}

/// The segment of a zero-length message (docs/option.md): a SEND or RDMA WRITE `*_ONLY` opcode,
/// offset field [`ZERO_LENGTH_MBO`] and exactly one (pad) byte of payload. Decided from the
/// payload length on the wire, so also for a capture that kept only the headers; any other use
/// of that offset is refused by [`Inbound::from_bth`] and reported as a problem.
pub fn is_zero_length(bth: &Bth, payload_len: u32) -> bool {
    bth.mbo == ZERO_LENGTH_MBO && payload_len == 1 && Inbound::from_bth(bth, &[0]).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{ip_packet, raw, segment, send, write, V4, V6};
    use crate::{analyze, Analyzer, CaptureReader, LINKTYPE_RAW};
    use tcp_bth_wire::InboundError;

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
        assert!(matches!(
            decode(1, &p).outcome,
            Outcome::Truncated(Truncated {
                header: Malformed::TcpTruncated(10),
                kept: 30,
                ..
            })
        ));
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
        assert_eq!(
            d.segment().unwrap().problem,
            Some(Problem::Message(InboundError::PositionMismatch(
                Opcode::SendMiddle
            )))
        );
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

    #[test]
    fn zero_length_message_is_data_of_no_bytes_not_a_problem() {
        use tcp_bth_wire::{Extension, ZERO_LENGTH_MBO};
        let mut b = send(5, Opcode::SendOnlyWithImmediate, ZERO_LENGTH_MBO);
        b.ext = Extension::Immediate(0x42);
        let zl = segment(V4, 1, Some(b), &[0]);
        let after = segment(V4, 2, Some(send(6, Opcode::SendOnly, 0)), b"abc");
        let file = write(&[(V4, zl), (V4, after)]);
        let a = analyze(CaptureReader::new(&file[..]).unwrap()).unwrap();
        let s = a.records[0].0.segment().unwrap();
        assert_eq!((s.problem, s.icrc_ok, s.payload_len), (None, Some(true), 1));
        let d = s.data.unwrap();
        assert!(d.zero_length && d.last);
        assert_eq!((d.offset, d.len, d.end()), (0, 0, 0));
        assert_eq!((a.summary.malformed, a.summary.messages), (0, 2));
        let m = a.messages.values().next().unwrap();
        assert_eq!(
            (m.len, m.bytes, m.max_end, m.segments, m.imm, m.misplaced),
            (Some(0), 0, 0, 1, Some(0x42), 0),
            "a message of 0 bytes"
        );
        // The pad byte is still a byte of the TCP stream: the next segment is not out of order.
        assert_eq!(a.records[1].1, crate::Marks::default());
    }

    #[test]
    fn zero_length_offset_elsewhere_is_a_problem() {
        use tcp_bth_wire::ZERO_LENGTH_MBO;
        for (op, payload) in [
            (Opcode::SendFirst, &[0][..]),
            (Opcode::RdmaReadResponseOnly, &[0][..]),
            (Opcode::SendOnly, &[0, 0][..]),
        ] {
            let seg = segment(V4, 1, Some(send(0, op, ZERO_LENGTH_MBO)), payload);
            let d = decode(1, &raw(LINKTYPE_RAW, ip_packet(&seg)));
            let s = d.segment().unwrap();
            assert_eq!(
                s.problem,
                Some(Problem::Message(InboundError::BadZeroLength {
                    opcode: op,
                    pad: payload.len()
                })),
                "{op}"
            );
            assert!(!s.data.unwrap().zero_length);
        }
    }
}
