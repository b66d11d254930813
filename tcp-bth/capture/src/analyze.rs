//! Following a capture: flows, messages, out-of-order segments, retransmissions and the counts
//! `bth-dump` prints.

use super::{
    decode_with, CaptureReader, Decoded, Format, Outcome, RawPacket, ReadError, SeqFraming,
};
use bth_wire::{MsgClass, Opcode};
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::net::SocketAddr;
use std::path::Path;

/// A direction of a TCP connection: (source, destination).
pub type FlowKey = (SocketAddr, SocketAddr);

/// Identifies a message: direction, class (its MSN counter, see docs/design.md) and MSN.
/// MSNs are 16-bit: a capture with more than 65536 messages of one class in one direction
/// folds later ones onto earlier keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageKey {
    /// Address and port of the message's sender (the data segments' source).
    pub src: SocketAddr,
    /// Address and port of the message's receiver (the data segments' destination).
    pub dst: SocketAddr,
    /// The message class, which picks the MSN counter the message is numbered in.
    pub class: MsgClass,
    /// The message sequence number within its class and direction (wraps at 2^16).
    pub msn: u16,
}

/// What the data segments of one message showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedMessage {
    /// Frame of its first data segment in the capture.
    pub first_frame: u64,
    /// Data segments seen, retransmissions included.
    pub segments: u64,
    /// Payload bytes seen, retransmissions included.
    pub bytes: u64,
    /// Largest offset + length of any of its segments.
    pub max_end: u64,
    /// The message length: offset + length of its LAST/ONLY segment once that segment is seen;
    /// in S framing the length field of its first segment seen.
    pub len: Option<u64>,
    /// The RDMA WRITE target address of its segment at offset 0 (S framing: of any segment,
    /// each carries the message's first byte's address).
    pub write_addr: Option<u64>,
    /// Immediate data, if its last segment carries some.
    pub imm: Option<u32>,
    /// A READ request's requested length.
    pub read_len: Option<u32>,
    /// Segments at offsets that disagree with their TCP sequence numbers (S framing: whose
    /// placement implies another start of the message than its first segment's, or that
    /// carry another message length).
    pub misplaced: u64,
    /// S-framed segments whose placement offset is unknown (their sender's SYN is not in the
    /// capture): counted in `segments` and `bytes`, not in `max_end`.
    pub unplaced: u64,
    /// Sequence number (unwrapped) of offset 0, from the first segment seen with an offset.
    seq0: Option<i128>,
}

/// Per direction of a connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowInfo {
    /// TCP segments seen in this direction, with or without payload.
    pub segments: u64,
    /// Segments with payload that carry message data (a BTH data opcode).
    pub data_segments: u64,
    /// TCP payload bytes seen in this direction, retransmissions included.
    pub payload_bytes: u64,
    /// Segments with payload marked out of order ([`Marks::out_of_order`]).
    pub out_of_order: u64,
    /// Segments with payload that repeat bytes already seen ([`Marks::retransmission`]).
    pub retransmissions: u64,
    /// MSN announced in the SYN's hello (the first MSN of every counter this side uses).
    pub hello_msn: Option<u16>,
    /// Largest message the side accepts, from the hello.
    pub hello_max_message: Option<u32>,
    /// The hello asked for S framing (amendment 3).
    pub hello_seq_framed: Option<bool>,
    /// Sequence number of this direction's SYN (its ISN), once seen: the stream offsets of
    /// S-framed segments count from it.
    pub isn: Option<u32>,
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
    /// BTH segments whose ICRC does not match their header and payload (S-framed data carry no
    /// ICRC and never count here).
    pub icrc_errors: u64,
    /// Data segments in S framing (amendment 3): no ICRC (not applicable), placement offsets
    /// from sequence numbers.
    pub s_data_segments: u64,
    /// S-framed data segments whose placement offset is unknown: their sender's SYN is not in
    /// the capture.
    pub s_offsets_unknown: u64,
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
    messages: BTreeMap<MessageKey, CapturedMessage>,
    summary: Summary,
}

impl Analyzer {
    /// An analyzer that has seen no packet yet.
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
                f.hello_seq_framed = Some(bth.seq_framed);
            }
        }
        let flow = self.flows.entry((seg.src, seg.dst)).or_default();
        if seg.flags.syn() {
            // The latest SYN of a direction: a new connection on the same addresses restarts
            // its stream offsets.
            flow.isn = Some(seg.seq);
        }
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
            // A record decoded on its own (`decode`) has no S placement yet: this flow's ISN
            // may give it.
            let offset = data.offset.or_else(|| match data.seq {
                Some(sf) if sf.stream_offset.is_none() => {
                    SeqFraming::new(seg.bth()?, seg.seq, flow.isn).placement()
                }
                _ => None,
            });
            if data.seq.is_some() {
                s.s_data_segments += 1;
                s.s_offsets_unknown += u64::from(offset.is_none());
            }
            let key = MessageKey {
                src: seg.src,
                dst: seg.dst,
                class: data.class,
                msn: data.msn,
            };
            let m = self.messages.entry(key).or_insert_with(|| CapturedMessage {
                first_frame: d.frame,
                segments: 0,
                bytes: 0,
                max_end: 0,
                len: None,
                write_addr: None,
                imm: None,
                read_len: None,
                misplaced: 0,
                unplaced: 0,
                seq0: None,
            });
            m.segments += 1;
            m.bytes += u64::from(data.len);
            match offset {
                Some(o) => {
                    let seq0 = start - i128::from(o);
                    m.max_end = m.max_end.max(u64::from(o) + u64::from(data.len));
                    m.misplaced += u64::from(*m.seq0.get_or_insert(seq0) != seq0);
                }
                None => m.unplaced += 1,
            }
            match data.seq {
                Some(sf) => {
                    let len = u64::from(sf.msg_len);
                    m.misplaced += u64::from(m.len.is_some_and(|l| l != len));
                    m.len.get_or_insert(len);
                }
                None if data.last => m.len = data.end(),
                None => {}
            }
            let bth = seg.bth();
            if offset == Some(0) || data.seq.is_some() {
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

    /// The counts over every packet added so far.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// The messages seen so far, ordered by direction, class and MSN.
    pub fn messages(&self) -> &BTreeMap<MessageKey, CapturedMessage> {
        &self.messages
    }

    /// The directions of the connections seen so far, by (source, destination).
    pub fn flows(&self) -> &HashMap<FlowKey, FlowInfo> {
        &self.flows
    }

    /// Decode the next packet of the capture in the context of the ones before it (the ISN of
    /// each direction whose SYN was seen, which places S-framed data segments) and account for
    /// it ([`add`](Self::add)).
    pub fn decode(&mut self, frame: u64, pkt: &RawPacket) -> (Decoded, Marks) {
        let flows = &self.flows;
        let d = decode_with(frame, pkt, |k| flows.get(&k).and_then(|f| f.isn));
        let m = self.add(&d);
        (d, m)
    }
}

/// Everything [`analyze_file`] learnt.
#[derive(Debug)]
pub struct Analysis {
    /// The file's format (pcap or pcapng), from its first bytes.
    pub format: Format,
    /// Every packet with its marks, in file order.
    pub records: Vec<(Decoded, Marks)>,
    /// The counts over every packet read ([`Analyzer::summary`]).
    pub summary: Summary,
    /// Every message seen, ordered by direction, class and MSN ([`Analyzer::messages`]).
    pub messages: BTreeMap<MessageKey, CapturedMessage>,
    /// Every direction of every connection seen ([`Analyzer::flows`]).
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
                records.push(an.decode(frame, &p));
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
    use crate::test_util::{ip_packet, raw, segment, send, V4};
    use crate::{decode, LINKTYPE_RAW};
    use bth_wire::{Extension, Reth};

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
}
