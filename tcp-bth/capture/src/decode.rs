//! Decoding one captured packet: IP, TCP with checksum verification, the `tcp_bth` option and
//! its ICRC; for an S-framed data segment (amendment 3) its anchor, message length and, given
//! its sender's ISN, its placement offset.

use super::error::{Malformed, NotTcp, Problem, Stop, Truncated};
use super::ip::{ip_layer, pseudo_header_sum, IpPart};
use super::link::link_payload;
use super::{FlowKey, RawPacket};
use bth_wire::{
    Bth, Inbound, InboundError, MsgClass, Opcode, ReadRequest, SegmentError, TcpFlags,
    TcpOptionError, TcpOptions, TcpRepr, MAX_MESSAGE_LEN, ZERO_LENGTH_MBO,
};
use std::net::SocketAddr;
use std::time::Duration;

/// TCP checksum verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksum {
    /// The checksum field matches the pseudo-header, header and payload.
    Good,
    /// The checksum field matches neither the segment nor its pseudo-header sum alone.
    Bad {
        /// The checksum computed over the pseudo-header and the segment as captured.
        expected: u16,
        /// The value of the segment's checksum field.
        got: u16,
    },
    /// The capture cut the segment short: nothing to verify against.
    Unverified,
    /// The field holds only the pseudo-header sum: the packet was captured on the sending host
    /// before the NIC (or the loopback device) filled in the checksum (checksum offload).
    /// Not an error.
    Offloaded,
}

/// ICRC verdict of a BTH segment ([`Segment::icrc`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icrc {
    /// The ICRC matches the option header, extension and payload.
    Good,
    /// The ICRC does not match: the option, extension or payload changed after it was computed.
    Bad,
    /// The capture cut the payload short: nothing to verify against.
    Unverified,
    /// An S-framed data segment (amendment 3) has no ICRC: bytes 8-11 of its option hold the
    /// message length, and the TCP checksum is its check. Neither good nor bad.
    NotApplicable,
}

/// What an S-framed data segment's option says (amendment 3), and where that puts the segment.
/// The option is the same in every segment of a message; the segment's TCP sequence number
/// says where its bytes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqFraming {
    /// The anchor: stream offset of the message's first byte mod 2^24 (the option's offset
    /// field).
    pub anchor: u32,
    /// The message's length in bytes (bytes 8-11 of the option, where per-segment framing has
    /// its ICRC).
    pub msg_len: u32,
    /// Stream offset of the segment's first payload byte: (SEQ - ISN - 1) mod 2^32, with the
    /// ISN of its sender's SYN. `None` when the decoder has not seen that SYN: the placement
    /// offset is then unknown (never guessed).
    pub stream_offset: Option<u32>,
}

impl SeqFraming {
    /// For a segment with sequence number `seq` whose sender's ISN is `isn`, if known.
    pub fn new(bth: &Bth, seq: u32, isn: Option<u32>) -> SeqFraming {
        SeqFraming {
            anchor: bth.mbo,
            msg_len: bth.icrc,
            stream_offset: isn.map(|isn| stream_offset(seq, isn)),
        }
    }

    /// The placement offset of the segment's first payload byte in its message:
    /// (stream offset - anchor) mod 2^24; `None` while the stream offset is unknown.
    pub fn placement(&self) -> Option<u32> {
        self.stream_offset
            .map(|s| s.wrapping_sub(self.anchor) & MAX_MESSAGE_LEN)
    }
}

/// Stream offset of sequence number `seq` in a direction whose SYN had sequence number `isn`:
/// (seq - isn - 1) mod 2^32 (stream offset 0 is the first byte after the SYN).
pub fn stream_offset(seq: u32, isn: u32) -> u32 {
    seq.wrapping_sub(isn).wrapping_sub(1)
}

/// The message part of a data segment (a BTH segment whose opcode belongs to a message class
/// and which carries payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataSeg {
    /// The message class of its opcode, which picks the MSN counter.
    pub class: MsgClass,
    /// The BTH opcode (e.g. SEND FIRST, RDMA WRITE ONLY, READ request).
    pub opcode: Opcode,
    /// The message sequence number of the message it belongs to, in its class's counter.
    pub msn: u16,
    /// Byte offset of the first payload byte inside the message (0 for a zero-length message):
    /// in per-segment framing the option's offset field; in S framing the placement offset
    /// computed from the sequence number ([`SeqFraming::placement`]), `None` while unknown.
    pub offset: Option<u32>,
    /// Message bytes carried: the payload bytes as on the wire, even if the capture kept fewer;
    /// 0 for the pad byte of a zero-length message.
    pub len: u32,
    /// The one segment of a zero-length SEND or RDMA WRITE: one pad byte of payload that is not
    /// message data (per-segment framing: offset field `ZERO_LENGTH_MBO`; S framing: message
    /// length 0).
    pub zero_length: bool,
    /// The message ends with this segment's last byte: LAST or ONLY in per-segment framing; in
    /// S framing offset + len = message length (false while the offset is unknown).
    pub last: bool,
    /// A READ request's payload (rkey, address, length), when it was captured whole.
    pub read_request: Option<ReadRequest>,
    /// S framing (amendment 3): anchor, message length, stream offset. `None` for per-segment
    /// framing.
    pub seq: Option<SeqFraming>,
}

impl DataSeg {
    /// One past the last message byte carried (`None` while the offset is unknown).
    pub fn end(&self) -> Option<u64> {
        self.offset.map(|o| u64::from(o) + u64::from(self.len))
    }

    /// The message's length, where this segment says it: an S-framed segment always
    /// (its length field), a per-segment LAST or ONLY segment as its end.
    pub fn message_len(&self) -> Option<u64> {
        match self.seq {
            Some(s) => Some(u64::from(s.msg_len)),
            None if self.last => self.end(),
            None => None,
        }
    }
}

/// A decoded TCP segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Source IP address and TCP port.
    pub src: SocketAddr,
    /// Destination IP address and TCP port.
    pub dst: SocketAddr,
    /// TCP sequence number, raw (not relative to the ISN).
    pub seq: u32,
    /// TCP acknowledgment number, raw (meaningful when the ACK flag is set).
    pub ack: u32,
    /// TCP flags (SYN, ACK, FIN, RST, PSH, ...).
    pub flags: TcpFlags,
    /// The window field as on the wire, in bytes before window scaling.
    pub window: u16,
    /// TCP header length (data offset × 4).
    pub header_len: usize,
    /// Payload bytes on the wire.
    pub payload_len: u32,
    /// The capture kept only part of the payload (checksum and ICRC not verified).
    pub truncated: bool,
    /// IPv4 header checksum verdict; `None` for IPv6.
    pub ip_checksum_ok: Option<bool>,
    /// TCP checksum verdict (over the IPv4 or IPv6 pseudo-header).
    pub checksum: Checksum,
    /// The options, or why they were refused (a malformed `tcp_bth` option among them).
    pub options: Result<TcpOptions, TcpOptionError>,
    /// ICRC verdict for a BTH segment whose payload was captured whole; `None` also for an
    /// S-framed data segment, which has no ICRC ([`Segment::icrc`] tells the cases apart).
    pub icrc_ok: Option<bool>,
    /// The message part, for a BTH data segment with a message opcode and payload.
    pub data: Option<DataSeg>,
    /// The BTH is well formed but breaks a rule of the protocol (e.g. a FIRST segment at a
    /// non-zero offset, a READ request whose payload is not 16 bytes).
    pub problem: Option<Problem>,
}

impl Segment {
    /// The `tcp_bth` option's BTH, if the options parsed and carry one.
    pub fn bth(&self) -> Option<&Bth> {
        self.options.as_ref().ok().and_then(|o| o.bth.as_ref())
    }

    /// The ICRC verdict of a BTH segment (`None` without a BTH): good, bad, unverified (payload
    /// cut by the capture) or not applicable (S-framed data, whose bytes 8-11 are the message
    /// length).
    pub fn icrc(&self) -> Option<Icrc> {
        let b = self.bth()?;
        Some(match self.icrc_ok {
            Some(true) => Icrc::Good,
            Some(false) => Icrc::Bad,
            None if !b.carries_icrc() => Icrc::NotApplicable,
            None => Icrc::Unverified,
        })
    }

    /// Refused options or a BTH that breaks the protocol.
    pub fn is_malformed(&self) -> bool {
        self.options.is_err() || self.problem.is_some()
    }

    /// A bad TCP checksum, or a bad IPv4 header checksum (offloaded checksums are not errors).
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
    /// A TCP segment whose IP and TCP headers parsed (checksum and option verdicts inside).
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
    /// Capture time stamp ([`RawPacket::ts`]): since the Unix epoch, or since the start of a
    /// simulated run.
    pub ts: Duration,
    /// Bytes on the wire.
    pub wire_len: u32,
    /// What the packet decoded to: a TCP segment, or why it is none.
    pub outcome: Outcome,
}

impl Decoded {
    /// The TCP segment, if the packet decoded to one.
    pub fn segment(&self) -> Option<&Segment> {
        match &self.outcome {
            Outcome::Segment(s) => Some(s),
            _ => None,
        }
    }
}

/// Decode one captured packet (`frame` is its 1-based position in the file) on its own: an
/// S-framed data segment's placement offset stays unknown, since it needs its sender's ISN
/// ([`decode_with`], [`Analyzer::decode`](super::Analyzer::decode)).
pub fn decode(frame: u64, pkt: &RawPacket) -> Decoded {
    decode_with(frame, pkt, |_| None)
}

/// [`decode`], with `isn` giving the ISN (the SYN's sequence number) of a direction
/// (source, destination) where it is known: an S-framed data segment's placement offset is
/// computed from it, and checked against its message length as a receiver would.
pub fn decode_with(frame: u64, pkt: &RawPacket, isn: impl Fn(FlowKey) -> Option<u32>) -> Decoded {
    let outcome = decode_outcome(pkt, &isn);
    Decoded {
        frame,
        ts: pkt.ts,
        wire_len: pkt.orig_len,
        outcome,
    }
}

type IsnOf<'a> = &'a dyn Fn(FlowKey) -> Option<u32>;

fn decode_outcome(pkt: &RawPacket, isn: IsnOf<'_>) -> Outcome {
    match decode_layers(pkt, isn) {
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

fn decode_layers(pkt: &RawPacket, isn: IsnOf<'_>) -> Result<Segment, Stop> {
    let truncated = pkt.is_truncated();
    let l3 = link_payload(pkt.linktype, &pkt.data)?;
    let ip = ip_layer(l3, truncated)?;
    let missing = u64::from(pkt.orig_len).saturating_sub(pkt.data.len() as u64);
    tcp_layer(&ip, truncated, missing, isn).map_err(Stop::Malformed)
}

fn tcp_layer(
    ip: &IpPart<'_>,
    truncated: bool,
    missing: u64,
    isn: IsnOf<'_>,
) -> Result<Segment, Malformed> {
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
    let pair = bth_wire::IpPair::from_addrs(ip.src, ip.dst).ok_or(Malformed::MixedAddresses)?;
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
    // S-framed data carries no ICRC: its field is the message length (Segment::icrc).
    if !truncated && bth.carries_icrc() {
        seg.icrc_ok = Some(bth.icrc_ok(captured));
    }
    if let Some(class) = MsgClass::of(bth.opcode).filter(|_| payload_len > 0) {
        let zero_length = is_zero_length(&bth, payload_len);
        let sf = bth
            .seq_framed
            .then(|| SeqFraming::new(&bth, seg.seq, isn((seg.src, seg.dst))));
        let offset = match sf {
            Some(sf) => sf.placement(),
            None if zero_length => Some(0),
            None => Some(bth.mbo),
        };
        let len = if zero_length { 0 } else { payload_len };
        let last = match sf {
            Some(sf) => {
                offset.is_some_and(|o| u64::from(o) + u64::from(len) == u64::from(sf.msg_len))
            }
            None => !bth.opcode.more(),
        };
        let mut data = DataSeg {
            class,
            opcode: bth.opcode,
            msn: bth.msn,
            offset,
            len,
            zero_length,
            last,
            read_request: None,
            seq: sf,
        };
        if !truncated {
            let checked = match sf {
                None => Inbound::from_bth(&bth, captured).map(|_| ()),
                Some(sf) => check_seq_framed(&bth, captured, sf),
            };
            match checked {
                Ok(()) if class == MsgClass::ReadRequest => {
                    data.read_request = ReadRequest::parse(captured).ok();
                }
                Ok(()) => {}
                Err(e) => seg.problem = Some(Problem::Message(e)),
            }
        }
        seg.data = Some(data);
    }
    Ok(seg)
}

/// An S-framed data segment checked as its receiver checks it ([`Inbound::from_seq`]). Without
/// its stream offset only what holds at any offset is checked: it is taken at placement offset
/// 0, and a verdict that depends on the offset (bytes past the message's length) is not given.
fn check_seq_framed(bth: &Bth, payload: &[u8], sf: SeqFraming) -> Result<(), InboundError> {
    match sf.stream_offset {
        Some(at) => Inbound::from_seq(bth, payload, u64::from(at)).map(|_| ()),
        None => match Inbound::from_seq(bth, payload, u64::from(bth.mbo)) {
            Err(InboundError::BeyondMessageLength { .. }) => Ok(()),
            r => r.map(|_| ()),
        },
    }
}

/// The segment of a zero-length message (docs/option.md): a SEND or RDMA WRITE `*_ONLY` opcode,
/// offset field [`ZERO_LENGTH_MBO`] and exactly one (pad) byte of payload. Decided from the
/// payload length on the wire, so also for a capture that kept only the headers; any other use
/// of that offset is refused by [`Inbound::from_bth`] and reported as a problem. In S framing
/// (amendment 3) only the length field says zero-length: message length 0, one pad byte, the
/// same opcodes (the offset field is then an anchor like any other).
pub fn is_zero_length(bth: &Bth, payload_len: u32) -> bool {
    if payload_len != 1 {
        return false;
    }
    if bth.seq_framed {
        // Taken at placement offset 0, where the pad byte of a zero-length message sits.
        bth.icrc == 0 && Inbound::from_seq(bth, &[0], u64::from(bth.mbo)).is_ok()
    } else {
        bth.mbo == ZERO_LENGTH_MBO && Inbound::from_bth(bth, &[0]).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{ip_packet, raw, segment, send, write, V4, V6};
    use crate::{analyze, Analyzer, CaptureReader, LINKTYPE_RAW};
    use bth_wire::InboundError;

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
        use bth_wire::{Extension, ZERO_LENGTH_MBO};
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
        assert_eq!((d.offset, d.len, d.end()), (Some(0), 0, Some(0)));
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

    /// An S-framed SEND_ONLY option (amendment 3): the same in every segment of its message.
    fn s_send(msn: u16, anchor: u32, msg_len: u32) -> Bth {
        let mut b = send(msn, Opcode::SendOnly, anchor);
        b.seq_framed = true;
        b.icrc = msg_len;
        b
    }

    fn syn(ip: bth_wire::IpPair, isn: u32) -> Vec<u8> {
        TcpRepr {
            src_port: 1000,
            dst_port: 2000,
            seq: isn,
            ack: 0,
            flags: TcpFlags::SYN,
            window: 100,
            urgent: 0,
            options: TcpOptions::default(),
            payload: &[],
        }
        .to_vec(ip)
        .unwrap()
    }

    #[test]
    fn s_framed_segments_are_placed_from_the_syn_and_have_no_icrc() {
        // ISN near the wrap; the message starts at stream offset 2^24 + 5 (anchor 5), its
        // segments arrive out of order, the second twice.
        let isn = u32::MAX - 3;
        let start = isn.wrapping_add(1).wrapping_add((1 << 24) + 5);
        let b = s_send(7, 5, 25);
        let file = write(&[
            (V4, syn(V4, isn)),
            (V4, segment(V4, start.wrapping_add(10), Some(b), &[2; 15])),
            (V4, segment(V4, start, Some(b), &[1; 10])),
            (V4, segment(V4, start.wrapping_add(10), Some(b), &[2; 15])),
        ]);
        let a = analyze(CaptureReader::new(&file[..]).unwrap()).unwrap();
        let seg = |i: usize| a.records[i].0.segment().unwrap().clone();
        for (i, off) in [(1, 10), (2, 0), (3, 10)] {
            let s = seg(i);
            assert_eq!(
                (s.icrc_ok, s.icrc(), s.problem),
                (None, Some(Icrc::NotApplicable), None)
            );
            let d = s.data.unwrap();
            assert_eq!(
                d.seq,
                Some(SeqFraming {
                    anchor: 5,
                    msg_len: 25,
                    stream_offset: Some((1 << 24) + 5 + off)
                })
            );
            assert_eq!(
                (d.offset, d.last, d.message_len()),
                (Some(off), off == 10, Some(25))
            );
        }
        let s = &a.summary;
        assert_eq!(
            (
                s.icrc_errors,
                s.malformed,
                s.s_data_segments,
                s.s_offsets_unknown
            ),
            (0, 0, 3, 0)
        );
        let m = a.messages.values().next().unwrap();
        assert_eq!(
            (m.len, m.max_end, m.segments, m.misplaced, m.unplaced),
            (Some(25), 25, 3, 0, 0)
        );
    }

    /// Amendment 4: a SYN whose hello has no timestamps (T=0, 16 bytes) beside the RFC 7323
    /// option decodes cleanly, its ICRC checked, both options kept; it gives its direction's
    /// ISN like any SYN.
    #[test]
    fn a_syn_with_a_t0_hello_beside_the_timestamp_option_is_well_formed() {
        let mut hello = Bth::new(Opcode::Hello);
        hello.mbo = 0xFF_FFFF;
        hello.seal(&[]);
        let ts = bth_wire::Timestamps {
            tsval: 77,
            tsecr: 0,
        };
        let syn = TcpRepr {
            src_port: 1000,
            dst_port: 2000,
            seq: 500,
            ack: 0,
            flags: TcpFlags::SYN,
            window: 100,
            urgent: 0,
            options: TcpOptions {
                mss: Some(1460),
                window_scale: Some(7),
                sack_permitted: true,
                timestamps: Some(ts),
                bth: Some(hello),
                ..TcpOptions::default()
            },
            payload: &[],
        }
        .to_vec(V4)
        .unwrap();
        assert_eq!(syn.len(), 20 + 36);
        let b = s_send(1, 0, 10);
        let file = write(&[(V4, syn), (V4, segment(V4, 501, Some(b), &[1; 10]))]);
        let a = analyze(CaptureReader::new(&file[..]).unwrap()).unwrap();
        let s = a.records[0].0.segment().unwrap();
        assert_eq!(
            (s.checksum, s.icrc(), &s.problem),
            (Checksum::Good, Some(Icrc::Good), &None)
        );
        let o = s.options.as_ref().unwrap();
        assert_eq!(o.timestamps, Some(ts));
        assert_eq!(
            s.bth().map(|b| (b.opcode, b.timestamps)),
            Some((Opcode::Hello, None))
        );
        assert_eq!((a.summary.malformed, a.summary.bth_segments), (0, 2));
        // The SYN placed the S-framed segment after it.
        let d = a.records[1].0.segment().unwrap().data.unwrap();
        assert_eq!(d.offset, Some(0));
    }

    #[test]
    fn s_framed_offset_is_unknown_without_the_syn() {
        let b = s_send(1, 0x12ab, 100);
        let file = write(&[(V4, segment(V4, 5000, Some(b), &[1; 10]))]);
        let a = analyze(CaptureReader::new(&file[..]).unwrap()).unwrap();
        let s = a.records[0].0.segment().unwrap();
        let d = s.data.unwrap();
        assert_eq!((d.offset, d.end(), d.last), (None, None, false));
        assert_eq!(d.seq.unwrap().stream_offset, None);
        assert_eq!((s.icrc(), s.problem), (Some(Icrc::NotApplicable), None));
        assert_eq!(
            (a.summary.s_data_segments, a.summary.s_offsets_unknown),
            (1, 1)
        );
        let m = a.messages.values().next().unwrap();
        assert_eq!(
            (m.len, m.max_end, m.unplaced, m.misplaced),
            (Some(100), 0, 1, 0)
        );
    }

    #[test]
    fn an_analyzer_places_a_record_decoded_on_its_own() {
        let b = s_send(1, 0, 30);
        let d0 = decode(1, &raw(LINKTYPE_RAW, ip_packet(&syn(V4, 100))));
        let d1 = decode(
            2,
            &raw(
                LINKTYPE_RAW,
                ip_packet(&segment(V4, 111, Some(b), &[0; 20])),
            ),
        );
        assert_eq!(d1.segment().unwrap().data.unwrap().offset, None);
        let mut an = Analyzer::new();
        an.add(&d0);
        an.add(&d1);
        assert_eq!(an.summary().s_offsets_unknown, 0);
        let m = an.messages().values().next().unwrap();
        assert_eq!((m.max_end, m.unplaced), (30, 0));
    }

    #[test]
    fn s_framed_problems() {
        let mut an = Analyzer::new();
        let isn = 1000;
        let mut frame = 0;
        let mut add = |seq: u32, b: Option<Bth>, payload: &[u8]| {
            frame += 1;
            let p = match b {
                Some(b) => segment(V4, seq, Some(b), payload),
                None => syn(V4, seq),
            };
            an.decode(frame, &raw(LINKTYPE_RAW, ip_packet(&p))).0
        };
        add(isn, None, &[]);
        // 20 bytes at placement offset 90 of a 100-byte message.
        let d = add(isn + 1 + 90, Some(s_send(1, 0, 100)), &[0; 20]);
        assert_eq!(
            d.segment().unwrap().problem,
            Some(Problem::Message(InboundError::BeyondMessageLength {
                offset: 90,
                len: 20,
                msg_len: 100
            }))
        );
        // A zero-length message whose anchor is 0xFFFFFF: its pad byte at stream offset
        // 0xFFFFFF (placement 0) is fine; the offset field is an anchor, not the marker.
        let mut z = s_send(2, ZERO_LENGTH_MBO, 0);
        z.opcode = Opcode::SendOnlyWithImmediate;
        z.ext = bth_wire::Extension::Immediate(3);
        let d = add(isn + 1 + ZERO_LENGTH_MBO, Some(z), &[0]);
        let s = d.segment().unwrap();
        assert_eq!(s.problem, None);
        let data = s.data.unwrap();
        assert!(data.zero_length && data.last);
        assert_eq!(
            (data.offset, data.len, data.message_len()),
            (Some(0), 0, Some(0))
        );
        // Length 0 with two bytes: not the zero-length form.
        let d = add(isn + 1 + 7, Some(s_send(3, 7, 0)), &[0, 0]);
        assert!(d.segment().unwrap().problem.is_some());
        assert_eq!(an.summary().malformed, 2);
        assert_eq!(an.summary().icrc_errors, 0);
    }

    #[test]
    fn zero_length_offset_elsewhere_is_a_problem() {
        use bth_wire::ZERO_LENGTH_MBO;
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
