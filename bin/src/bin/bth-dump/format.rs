//! Rendering of decoded capture records for `bth-dump`: one text line or one JSON object per
//! packet, the per-message table and the summary. Decoding itself is `bth_capture`.

use bth_capture::{
    CapturedMessage, Checksum, DataSeg, Decoded, Icrc, Marks, MessageKey, Outcome, Segment, Summary,
};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;
use tcp_bth::wire::{Bth, Extension, MsgClass, Nak, NakCode, Opcode, TcpFlags};

/// `seconds.nanoseconds`.
pub fn time(ts: Duration) -> String {
    format!("{}.{:09}", ts.as_secs(), ts.subsec_nanos())
}

/// tcpdump-style flag letters: S F R P U E W, `.` for ACK.
pub fn flags(f: TcpFlags) -> String {
    let mut s = String::new();
    for (bit, c) in [
        (TcpFlags::SYN, 'S'),
        (TcpFlags::FIN, 'F'),
        (TcpFlags::RST, 'R'),
        (TcpFlags::PSH, 'P'),
        (TcpFlags::URG, 'U'),
        (TcpFlags::ECE, 'E'),
        (TcpFlags::CWR, 'W'),
        (TcpFlags::ACK, '.'),
    ] {
        if f.contains(bit) {
            s.push(c);
        }
    }
    if s.is_empty() {
        s.push_str("none");
    }
    s
}

pub fn class_name(c: MsgClass) -> &'static str {
    match c {
        MsgClass::Send => "send",
        MsgClass::Write => "write",
        MsgClass::ReadRequest => "read-req",
        MsgClass::ReadResponse => "read-resp",
    }
}

/// Short name of a NAK code, as printed and in JSON.
pub fn nak_name(code: NakCode) -> String {
    match code {
        NakCode::InvalidRequest => "invalid-request".into(),
        NakCode::RemoteAccess => "remote-access-error".into(),
        NakCode::RemoteOperational => "remote-operational-error".into(),
        other => format!("nak-{:#04x}", other.syndrome()),
    }
}

/// `off` of an S-framed segment: its placement offset, or `unknown` when its sender's SYN is
/// not in the capture.
fn placement(off: Option<u32>) -> String {
    off.map_or_else(|| "unknown".to_string(), |o| o.to_string())
}

/// Short name of an ICRC verdict, as printed in JSON.
pub fn icrc_name(i: Icrc) -> &'static str {
    match i {
        Icrc::Good => "ok",
        Icrc::Bad => "bad",
        Icrc::Unverified => "unverified",
        Icrc::NotApplicable => "n/a",
    }
}

/// The BTH fields in one line, as their meaning depends on the opcode, the R flag and the S
/// flag. `data`: the segment's message part, if it has one: whether it is the one pad byte of a
/// zero-length message (see [`bth_capture::is_zero_length`]), whose offset field is a marker,
/// not an offset; and for an S-framed segment its placement offset, computed from its sequence
/// number and its sender's ISN.
pub fn bth_fields(b: &Bth, data: Option<&DataSeg>) -> String {
    let mut s = String::new();
    let zero_length = data.is_some_and(|d| d.zero_length);
    // S-framed data (amendment 3): the offset field is the anchor, bytes 8-11 the length.
    let s_data = !b.carries_icrc();
    match b.opcode {
        Opcode::Hello => {
            let _ = write!(s, "{} first-msn {} max-msg {}", b.opcode, b.msn, b.mbo);
        }
        _ if b.rtr => {
            // From a data receiver: MSN is the SEND credit, the offset field a grant.
            let _ = write!(s, "{} credit-msn {} grant {}x4KiB", b.opcode, b.msn, b.mbo);
        }
        Opcode::Acknowledge => match Nak::from_bth(b) {
            Some(n) => {
                let _ = write!(s, "NAK {} for {} msn {}", nak_name(n.code), n.opcode, n.msn);
            }
            None if b.mbo == 0 && b.seg == 0 => {
                let _ = write!(s, "ack completed-msn {}", b.msn);
            }
            // Not a form this version defines: show the raw fields.
            None => {
                let _ = write!(
                    s,
                    "{} msn {} off {} syndrome {:#04x}",
                    b.opcode, b.msn, b.mbo, b.seg
                );
            }
        },
        _ if s_data => {
            let _ = write!(
                s,
                "{} S msn {} anchor {:#08x} off {} len {}",
                b.opcode,
                b.msn,
                b.mbo,
                placement(data.and_then(|d| d.offset)),
                b.icrc
            );
            if zero_length {
                s.push_str(" zero-length (1 pad byte)");
            }
        }
        _ if zero_length => {
            let _ = write!(s, "{} zero-length msn {} (1 pad byte)", b.opcode, b.msn);
        }
        _ => {
            let _ = write!(s, "{} msn {} off {} seg {}", b.opcode, b.msn, b.mbo, b.seg);
        }
    }
    let mut fl = String::new();
    if b.opcode.more() {
        fl.push('M');
    }
    if b.rtr {
        fl.push('R');
    }
    if b.rtr_ack {
        fl.push('A');
    }
    if b.seq_framed && !s_data {
        // A control form (hello, ACK, credit, NAK) of an S-framed connection.
        fl.push('S');
    }
    if !fl.is_empty() {
        let _ = write!(s, " {fl}");
    }
    match b.ext {
        Extension::None => {}
        Extension::Immediate(i) => {
            let _ = write!(s, " imm {i:#x}");
        }
        Extension::Reth(r) => {
            let _ = write!(s, " rkey {:#x} addr {:#x}", r.rkey, r.addr);
        }
        Extension::RethImmediate(r, i) => {
            let _ = write!(s, " rkey {:#x} addr {:#x} imm {i:#x}", r.rkey, r.addr);
        }
    }
    s
}

fn problems(seg: &Segment) -> Vec<String> {
    let mut v = Vec::new();
    if let Checksum::Bad { expected, got } = seg.checksum {
        v.push(format!(
            "TCP CHECKSUM BAD ({got:#06x}, expected {expected:#06x})"
        ));
    }
    if seg.ip_checksum_ok == Some(false) {
        v.push("IPv4 HEADER CHECKSUM BAD".into());
    }
    if let Err(e) = &seg.options {
        v.push(format!("MALFORMED OPTIONS: {e}"));
    }
    if let Some(p) = &seg.problem {
        v.push(format!("INVALID BTH: {p}"));
    }
    if seg.truncated {
        v.push("truncated by capture (not verified)".into());
    }
    if seg.checksum == Checksum::Offloaded {
        v.push("checksum offloaded".into());
    }
    v
}

/// One text line for a packet.
pub fn line(d: &Decoded, m: Marks, t0: Duration) -> String {
    let ts = time(d.ts.saturating_sub(t0));
    let seg = match &d.outcome {
        Outcome::NotTcp(why) => return format!("{:>6} {ts} not TCP: {why}", d.frame),
        Outcome::Malformed(why) => return format!("{:>6} {ts} MALFORMED: {why}", d.frame),
        Outcome::Truncated(why) => {
            return format!("{:>6} {ts} truncated by capture: {why}", d.frame)
        }
        Outcome::Segment(s) => s,
    };
    let mut s = format!(
        "{:>6} {ts} {} > {} [{}] seq {} ack {} win {} len {}",
        d.frame,
        seg.src,
        seg.dst,
        flags(seg.flags),
        seg.seq,
        seg.ack,
        seg.window,
        seg.payload_len
    );
    // The RFC 7323 timestamp option: a plain connection's, amendment 1's plain-form ACK, or
    // beside a SYN's hello without timestamps (amendment 4: a fallback keeps them).
    if let Some(ts) = seg.options.as_ref().ok().and_then(|o| o.timestamps) {
        let _ = write!(s, " TS val {} ecr {}", ts.tsval, ts.tsecr);
    }
    if let Some(b) = seg.bth() {
        let _ = write!(s, " | {}", bth_fields(b, seg.data.as_ref()));
        match seg.icrc() {
            Some(Icrc::Good) => s.push_str(" icrc ok"),
            Some(Icrc::Bad) => s.push_str(" ICRC BAD"),
            // S-framed data: no ICRC (the TCP checksum checks), neither good nor bad.
            Some(Icrc::NotApplicable) => s.push_str(" icrc n/a"),
            Some(Icrc::Unverified) | None => {}
        }
    }
    if let Some(r) = seg.data.and_then(|d| d.read_request) {
        let _ = write!(
            s,
            " (read rkey {:#x} addr {:#x} len {})",
            r.rkey, r.addr, r.len
        );
    }
    if m.retransmission {
        s.push_str(" [retransmission]");
    } else if m.out_of_order {
        s.push_str(" [out-of-order]");
    }
    for p in problems(seg) {
        let _ = write!(s, " [{p}]");
    }
    s
}

/// A JSON string literal.
pub fn json_str(v: &str) -> String {
    let mut s = String::with_capacity(v.len() + 2);
    s.push('"');
    for c in v.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(s, "\\u{:04x}", c as u32);
            }
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// Builds a flat JSON object.
#[derive(Default)]
struct Obj(Vec<String>);

impl Obj {
    fn raw(&mut self, k: &str, v: impl std::fmt::Display) -> &mut Self {
        self.0.push(format!("{}:{v}", json_str(k)));
        self
    }
    fn str(&mut self, k: &str, v: &str) -> &mut Self {
        self.raw(k, json_str(v))
    }
    fn done(&self) -> String {
        format!("{{{}}}", self.0.join(","))
    }
}

/// One JSON object for a packet.
pub fn json_record(d: &Decoded, m: Marks) -> String {
    let mut o = Obj::default();
    o.raw("frame", d.frame)
        .str("time", &time(d.ts))
        .raw("wire_len", d.wire_len);
    let seg = match &d.outcome {
        Outcome::NotTcp(why) => return o.str("not_tcp", &why.to_string()).done(),
        Outcome::Malformed(why) => return o.str("malformed", &why.to_string()).done(),
        Outcome::Truncated(why) => return o.str("truncated", &why.to_string()).done(),
        Outcome::Segment(s) => s,
    };
    o.str("src", &seg.src.to_string())
        .str("dst", &seg.dst.to_string())
        .str("flags", &flags(seg.flags))
        .raw("seq", seg.seq)
        .raw("ack", seg.ack)
        .raw("win", seg.window)
        .raw("len", seg.payload_len)
        .str(
            "checksum",
            match seg.checksum {
                Checksum::Good => "good",
                Checksum::Bad { .. } => "bad",
                Checksum::Unverified => "unverified",
                Checksum::Offloaded => "offloaded",
            },
        );
    if let Some(ok) = seg.ip_checksum_ok {
        o.raw("ip_checksum_ok", ok);
    }
    if let Err(e) = &seg.options {
        o.str("malformed", &e.to_string());
    }
    // The RFC 7323 option, beside or instead of the BTH (whose folded ones are tsval/tsecr).
    if let Some(ts) = seg.options.as_ref().ok().and_then(|o| o.timestamps) {
        o.raw("opt_tsval", ts.tsval).raw("opt_tsecr", ts.tsecr);
    }
    if let Some(b) = seg.bth() {
        o.str("opcode", &b.opcode.to_string()).raw("msn", b.msn);
        if b.carries_icrc() {
            o.raw("offset", b.mbo).raw("seg", b.seg);
        } else {
            // S-framed data: the offset field is the anchor, bytes 8-11 the message length;
            // the placement offset comes from the sequence number (null: SYN not seen).
            let sf = seg.data.and_then(|d| d.seq);
            let null = |v: Option<u32>| v.map_or_else(|| "null".to_string(), |v| v.to_string());
            o.raw("anchor", b.mbo)
                .raw("stream_off", null(sf.and_then(|f| f.stream_offset)))
                .raw("place_off", null(seg.data.and_then(|d| d.offset)))
                .raw("msg_len", b.icrc)
                .raw("seg", b.seg);
        }
        o.raw("m", b.opcode.more())
            .raw("r", b.rtr)
            .raw("a", b.rtr_ack)
            .raw("s", b.seq_framed);
        if b.carries_icrc() {
            o.raw("icrc", b.icrc);
        }
        if b.opcode == Opcode::Acknowledge && !b.rtr {
            // The low byte of an ACKNOWLEDGE's mbo_seg: 0 = ACK, 0x61-0x63 = NAK.
            o.raw("syndrome", b.seg);
            if let Some(n) = Nak::from_bth(b) {
                o.str("nak", &nak_name(n.code))
                    .str("nak_opcode", &n.opcode.to_string());
            }
        }
        // T: the timestamps folded into the option (a SYN's hello may leave them to the RFC
        // 7323 option beside it, amendment 4).
        o.raw("t", b.timestamps.is_some());
        if let Some(ts) = b.timestamps {
            o.raw("tsval", ts.tsval).raw("tsecr", ts.tsecr);
        }
        if let Some(i) = b.ext.immediate() {
            o.raw("imm", i);
        }
        if let Some(r) = b.ext.reth() {
            o.raw("rkey", r.rkey).raw("addr", r.addr);
        }
        if let Some(ok) = seg.icrc_ok {
            o.raw("icrc_ok", ok);
        }
        if let Some(i) = seg.icrc() {
            o.str("icrc_status", icrc_name(i));
        }
    }
    if let Some(data) = seg.data {
        o.str("class", class_name(data.class))
            .raw("zero_length", data.zero_length)
            .str(
                "framing",
                if data.seq.is_some() {
                    "seq"
                } else {
                    "per-segment"
                },
            );
        if let Some(r) = data.read_request {
            o.raw("read_rkey", r.rkey)
                .raw("read_addr", r.addr)
                .raw("read_len", r.len);
        }
    }
    if let Some(p) = &seg.problem {
        o.str("invalid", &p.to_string());
    }
    o.raw("out_of_order", m.out_of_order)
        .raw("retransmission", m.retransmission)
        .done()
}

/// (label, value, explanation) rows of the summary, in print order.
fn summary_rows(s: &Summary) -> Vec<(&'static str, &'static str, u64)> {
    vec![
        ("packets", "packets", s.packets),
        ("wire_bytes", "bytes on the wire", s.wire_bytes),
        ("tcp_segments", "TCP segments", s.tcp_segments),
        ("bth_segments", "BTH segments", s.bth_segments),
        ("data_segments", "data segments", s.data_segments),
        ("messages", "messages", s.messages),
        ("payload_bytes", "TCP payload bytes", s.payload_bytes),
        ("out_of_order", "out-of-order segments", s.out_of_order),
        ("retransmissions", "retransmissions", s.retransmissions),
        ("icrc_errors", "ICRC errors", s.icrc_errors),
        ("s_data_segments", "S data segments", s.s_data_segments),
        (
            "s_offsets_unknown",
            "S offsets unknown",
            s.s_offsets_unknown,
        ),
        ("checksum_errors", "checksum errors", s.checksum_errors),
        ("malformed", "malformed", s.malformed),
        ("not_tcp", "not TCP (skipped)", s.not_tcp),
        ("truncated", "truncated by snaplen", s.truncated),
    ]
}

/// Messages per class, e.g. "send 10, write 5".
pub fn per_class(msgs: &BTreeMap<MessageKey, CapturedMessage>) -> String {
    let mut n = [0u64; 4];
    for k in msgs.keys() {
        n[k.class.index()] += 1;
    }
    MsgClass::ALL
        .iter()
        .filter(|c| n[c.index()] > 0)
        .map(|c| format!("{} {}", class_name(*c), n[c.index()]))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn summary_text(s: &Summary, msgs: &BTreeMap<MessageKey, CapturedMessage>) -> String {
    let rows = summary_rows(s);
    let w = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
    let mut out = String::from("summary\n");
    for (key, label, v) in rows {
        let _ = write!(out, "  {label:<w$}  {v}");
        if key == "messages" && v > 0 {
            let _ = write!(out, " ({})", per_class(msgs));
        }
        out.push('\n');
    }
    out
}

pub fn summary_json(s: &Summary, read_error: Option<&str>) -> String {
    let mut inner = Obj::default();
    for (key, _, v) in summary_rows(s) {
        inner.raw(key, v);
    }
    if let Some(e) = read_error {
        inner.str("read_error", e);
    }
    format!("{{\"summary\":{}}}", inner.done())
}

/// One row per message: direction, class, MSN, segments, bytes seen, length.
pub fn messages_text(msgs: &BTreeMap<MessageKey, CapturedMessage>) -> String {
    let mut out = String::from("messages\n");
    let _ = writeln!(
        out,
        "  {:<45} {:<9} {:>5} {:>6} {:>9} {:>9}  notes",
        "direction", "class", "msn", "segs", "bytes", "length"
    );
    for (k, m) in msgs {
        let dir = format!("{} > {}", k.src, k.dst);
        let len = m.len.map_or_else(|| "?".to_string(), |l| l.to_string());
        let mut notes = Vec::new();
        match m.len {
            None => notes.push("last segment not seen".to_string()),
            Some(l) if m.max_end > l => notes.push(format!("bytes beyond its end ({})", m.max_end)),
            // S framing says the length in every segment: some of its bytes were not captured.
            Some(l) if m.max_end < l && m.unplaced == 0 => {
                notes.push(format!("bytes from {} not seen", m.max_end));
            }
            Some(_) => {}
        }
        if m.misplaced > 0 {
            notes.push(format!(
                "{} segments disagree with the TCP sequence",
                m.misplaced
            ));
        }
        if m.unplaced > 0 {
            notes.push(format!("{} S segments not placed (no SYN)", m.unplaced));
        }
        if let Some(i) = m.imm {
            notes.push(format!("imm {i:#x}"));
        }
        if let Some(a) = m.write_addr {
            notes.push(format!("addr {a:#x}"));
        }
        if let Some(l) = m.read_len {
            notes.push(format!("reads {l}"));
        }
        let row = format!(
            "  {dir:<45} {:<9} {:>5} {:>6} {:>9} {len:>9}  {}",
            class_name(k.class),
            k.msn,
            m.segments,
            m.bytes,
            notes.join(", ")
        );
        let _ = writeln!(out, "{}", row.trim_end());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bth_capture::{analyze, CaptureReader, PcapWriter};
    use tcp_bth::wire::{IpPair, Reth, TcpOptions, TcpRepr, Timestamps};

    const IP: IpPair = IpPair::V4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
    };

    fn seg(seq: u32, bth: Bth, payload: &[u8]) -> Vec<u8> {
        let mut b = bth;
        b.seal(payload);
        TcpRepr {
            src_port: 1000,
            dst_port: 2000,
            seq,
            ack: 7,
            flags: TcpFlags::ACK | TcpFlags::PSH,
            window: 512,
            urgent: 0,
            options: TcpOptions {
                bth: Some(b),
                ..TcpOptions::default()
            },
            payload,
        }
        .to_vec(IP)
        .unwrap()
    }

    /// A capture of three WRITE segments (the middle one twice), decoded.
    fn records() -> Vec<(Decoded, Marks)> {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        let mut b = Bth::new(Opcode::RdmaWriteFirst);
        b.msn = 4;
        b.timestamps = Some(Timestamps { tsval: 1, tsecr: 2 });
        b.ext = Extension::Reth(Reth {
            rkey: 0x11,
            addr: 0x1000,
        });
        let first = seg(100, b, &[1; 10]);
        b.opcode = Opcode::RdmaWriteMiddle;
        b.mbo = 10;
        b.seg = 1;
        b.ext = Extension::Reth(Reth {
            rkey: 0x11,
            addr: 0x100a,
        });
        let middle = seg(110, b, &[2; 10]);
        b.opcode = Opcode::RdmaWriteLastWithImmediate;
        b.mbo = 20;
        b.seg = 2;
        b.ext = Extension::RethImmediate(
            Reth {
                rkey: 0x11,
                addr: 0x1014,
            },
            0xabc,
        );
        let last = seg(120, b, &[3; 5]);
        for (i, s) in [&first, &last, &middle, &middle].iter().enumerate() {
            w.write_tcp(Duration::from_micros(i as u64), IP, s).unwrap();
        }
        let bytes = w.finish().unwrap();
        let a = analyze(CaptureReader::new(&bytes[..]).unwrap()).unwrap();
        assert!(a.error.is_none());
        a.records
    }

    #[test]
    fn lines_show_bth_fields_and_marks() {
        let r = records();
        let l0 = line(&r[0].0, r[0].1, Duration::ZERO);
        assert_eq!(
            l0,
            "     1 0.000000000 10.0.0.1:1000 > 10.0.0.2:2000 [P.] seq 100 ack 7 win 512 len 10 \
             | RDMA_WRITE_FIRST msn 4 off 0 seg 0 M rkey 0x11 addr 0x1000 icrc ok"
        );
        let l1 = line(&r[1].0, r[1].1, Duration::ZERO);
        assert!(
            l1.ends_with("RDMA_WRITE_LAST_WITH_IMMEDIATE msn 4 off 20 seg 2 rkey 0x11 addr 0x1014 imm 0xabc icrc ok"),
            "{l1}"
        );
        let l2 = line(&r[2].0, r[2].1, Duration::ZERO);
        assert!(l2.ends_with("icrc ok [out-of-order]"), "{l2}");
        let l3 = line(&r[3].0, r[3].1, Duration::ZERO);
        assert!(l3.ends_with("icrc ok [retransmission]"), "{l3}");
    }

    #[test]
    fn json_records_are_flat_objects() {
        let r = records();
        let j = json_record(&r[2].0, r[2].1);
        assert!(
            j.starts_with("{\"frame\":3,\"time\":\"0.000002000\""),
            "{j}"
        );
        assert!(
            j.contains(
                "\"opcode\":\"RDMA_WRITE_MIDDLE\",\"msn\":4,\"offset\":10,\"seg\":1,\"m\":true"
            ),
            "{j}"
        );
        assert!(j.contains("\"class\":\"write\""), "{j}");
        assert!(
            j.ends_with("\"out_of_order\":true,\"retransmission\":false}"),
            "{j}"
        );
        assert_eq!(json_str("a\"b\\\n\u{1}"), "\"a\\\"b\\\\\\n\\u0001\"");
    }

    #[test]
    fn summary_and_message_table() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        let mut b = Bth::new(Opcode::SendOnly);
        b.timestamps = Some(Timestamps { tsval: 1, tsecr: 2 });
        w.write_tcp(Duration::ZERO, IP, &seg(1, b, b"hello"))
            .unwrap();
        let bytes = w.finish().unwrap();
        let a = analyze(CaptureReader::new(&bytes[..]).unwrap()).unwrap();
        let t = summary_text(&a.summary, &a.messages);
        assert!(t.contains("  messages               1 (send 1)\n"), "{t}");
        assert!(t.contains("  ICRC errors            0\n"), "{t}");
        let j = summary_json(&a.summary, None);
        assert!(j.starts_with("{\"summary\":{\"packets\":1,"), "{j}");
        let m = messages_text(&a.messages);
        assert!(m.contains("10.0.0.1:1000 > 10.0.0.2:2000"), "{m}");
        assert!(
            m.contains(" send          0      1         5         5"),
            "{m}"
        );
    }

    /// A capture of: a zero-length SEND_ONLY_WITH_IMMEDIATE (one pad byte), an R=0 pure ACK,
    /// an R=1 credit update and a NAK on an RST, decoded.
    fn special_forms() -> Vec<(Decoded, Marks)> {
        let ts = Some(Timestamps { tsval: 1, tsecr: 2 });
        let mut zl = Bth::new(Opcode::SendOnlyWithImmediate);
        zl.msn = 9;
        zl.mbo = tcp_bth::wire::ZERO_LENGTH_MBO;
        zl.timestamps = ts;
        zl.ext = Extension::Immediate(0x77);
        let mut ack = Bth::new(Opcode::Acknowledge);
        ack.msn = 5;
        ack.timestamps = ts;
        let credit = Bth {
            rtr: true,
            msn: 6,
            mbo: 16,
            ..ack
        };
        let mut nak = tcp_bth::wire::Nak {
            code: NakCode::RemoteAccess,
            opcode: Opcode::RdmaWriteFirst,
            msn: 3,
        }
        .to_bth();
        nak.timestamps = ts;
        let mut rst = seg(102, nak, &[]);
        rst[13] = TcpFlags::RST.0;
        fix_checksum(&mut rst);
        let a = analyzed(&[
            seg(100, zl, &[0]),
            seg(101, ack, &[]),
            seg(101, credit, &[]),
            rst,
        ]);
        assert_eq!(a.summary.malformed, 0);
        a.records
    }

    /// A capture of `segs`, a microsecond apart, analysed (without error).
    fn analyzed(segs: &[Vec<u8>]) -> bth_capture::Analysis {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        for (i, s) in segs.iter().enumerate() {
            w.write_tcp(Duration::from_micros(i as u64), IP, s).unwrap();
        }
        let bytes = w.finish().unwrap();
        let a = analyze(CaptureReader::new(&bytes[..]).unwrap()).unwrap();
        assert!(a.error.is_none());
        a
    }

    fn fix_checksum(s: &mut [u8]) {
        tcp_bth::wire::checksum::fill(IP, s, tcp_bth::wire::ChecksumFill::Full)
            .expect("a whole segment");
    }

    #[test]
    fn lines_name_zero_length_ack_credit_and_nak() {
        let r = special_forms();
        let want = [
            "len 1 | SEND_ONLY_WITH_IMMEDIATE zero-length msn 9 (1 pad byte) imm 0x77 icrc ok",
            "len 0 | ack completed-msn 5 icrc ok",
            "len 0 | ACKNOWLEDGE credit-msn 6 grant 16x4KiB R icrc ok",
            "len 0 | NAK remote-access-error for RDMA_WRITE_FIRST msn 3 icrc ok",
        ];
        for ((d, m), want) in r.iter().zip(want) {
            let l = line(d, *m, Duration::ZERO);
            assert!(l.ends_with(want), "{l}");
        }
        assert!(line(&r[3].0, r[3].1, Duration::ZERO).contains(" [R] seq 102 "));
    }

    #[test]
    fn json_has_syndrome_nak_and_zero_length() {
        let r = special_forms();
        let j: Vec<String> = r.iter().map(|(d, m)| json_record(d, *m)).collect();
        // (record, text it contains, or with '!' in front, must not contain)
        for (i, want) in [
            (0, "\"offset\":16777215,\"seg\":0,"),
            (0, "\"class\":\"send\",\"zero_length\":true"),
            (1, "\"syndrome\":0,"),
            (1, "!nak"),
            (2, "!syndrome"),
            (
                3,
                "\"syndrome\":98,\"nak\":\"remote-access-error\",\"nak_opcode\":\"RDMA_WRITE_FIRST\"",
            ),
        ] {
            match want.strip_prefix('!') {
                Some(absent) => assert!(!j[i].contains(absent), "{}", j[i]),
                None => assert!(j[i].contains(want), "{}", j[i]),
            }
        }
    }

    #[test]
    fn zero_length_message_in_the_table() {
        let r = special_forms();
        let mut an = bth_capture::Analyzer::new();
        for (d, _) in &r {
            an.add(d);
        }
        let m = messages_text(an.messages());
        assert!(
            m.contains(" send          9      1         0         0  imm 0x77"),
            "{m}"
        );
        assert!(summary_text(an.summary(), an.messages())
            .contains("  messages               1 (send 1)\n"));
    }

    /// A capture of an S-framed transfer (amendment 3): the SYN (ISN 999), two segments of a
    /// 3000-byte SEND whose first byte is at stream offset 0x12ab, an S-framed pure ACK from
    /// the peer, and a segment of another connection whose SYN is not in the capture; decoded.
    fn s_framed() -> Vec<(Decoded, Marks)> {
        let ts = Some(Timestamps { tsval: 1, tsecr: 2 });
        // Any SYN gives its direction's ISN; this one has no options.
        let syn = TcpRepr {
            src_port: 1000,
            dst_port: 2000,
            seq: 999,
            ack: 0,
            flags: TcpFlags::SYN,
            window: 512,
            urgent: 0,
            options: TcpOptions::default(),
            payload: &[],
        }
        .to_vec(IP)
        .unwrap();
        let mut b = Bth::new(Opcode::SendOnly);
        b.seq_framed = true;
        b.msn = 4;
        b.mbo = 0x12ab;
        b.icrc = 3000;
        b.timestamps = ts;
        let mut ack = Bth::new(Opcode::Acknowledge);
        ack.seq_framed = true;
        ack.msn = 4;
        ack.timestamps = ts;
        let mut other = seg(5000, b, &[3; 10]);
        other[0..2].copy_from_slice(&1001u16.to_be_bytes());
        fix_checksum(&mut other);
        let a = analyzed(&[
            syn,
            seg(1000 + 0x12ab, b, &[1; 1448]),
            seg(1000 + 0x12ab + 1448, b, &[2; 1552]),
            seg(7, ack, &[]),
            other,
        ]);
        assert_eq!((a.summary.malformed, a.summary.icrc_errors), (0, 0));
        assert_eq!(
            (a.summary.s_data_segments, a.summary.s_offsets_unknown),
            (3, 1)
        );
        a.records
    }

    #[test]
    fn lines_show_s_options_by_their_meaning() {
        let r = s_framed();
        let want = [
            "len 1448 | SEND_ONLY S msn 4 anchor 0x0012ab off 0 len 3000 icrc n/a",
            "len 1552 | SEND_ONLY S msn 4 anchor 0x0012ab off 1448 len 3000 icrc n/a",
            "len 0 | ack completed-msn 4 S icrc ok",
            "len 10 | SEND_ONLY S msn 4 anchor 0x0012ab off unknown len 3000 icrc n/a",
        ];
        for ((d, m), want) in r[1..].iter().zip(want) {
            let l = line(d, *m, Duration::ZERO);
            assert!(l.ends_with(want), "{l}");
        }
        let mut an = bth_capture::Analyzer::new();
        for (d, _) in &r {
            an.add(d);
        }
        let t = summary_text(an.summary(), an.messages());
        assert!(t.contains("  ICRC errors            0\n"), "{t}");
        assert!(t.contains("  S data segments        3\n"), "{t}");
        assert!(t.contains("  S offsets unknown      1\n"), "{t}");
        let m = messages_text(an.messages());
        assert!(
            m.contains(" send          4      2      3000      3000\n"),
            "{m}"
        );
        assert!(m.contains("1 S segments not placed (no SYN)"), "{m}");
    }

    #[test]
    fn json_has_s_fields() {
        let r = s_framed();
        let j: Vec<String> = r.iter().map(|(d, m)| json_record(d, *m)).collect();
        for (i, want) in [
            (
                2,
                "\"opcode\":\"SEND_ONLY\",\"msn\":4,\"anchor\":4779,\"stream_off\":6227,\
                 \"place_off\":1448,\"msg_len\":3000,\"seg\":0,\"m\":false,\"r\":false,\
                 \"a\":false,\"s\":true,",
            ),
            (
                2,
                "\"icrc_status\":\"n/a\",\"class\":\"send\",\"zero_length\":false,\"framing\":\"seq\"",
            ),
            (2, "!icrc_ok"),
            (2, "!\"offset\""),
            (2, "!\"icrc\""),
            (3, "\"s\":true,\"icrc\":"),
            (3, "\"icrc_ok\":true,\"icrc_status\":\"ok\""),
            (4, "\"stream_off\":null,\"place_off\":null,\"msg_len\":3000"),
        ] {
            match want.strip_prefix('!') {
                Some(absent) => assert!(!j[i].contains(absent), "{}", j[i]),
                None => assert!(j[i].contains(want), "{}", j[i]),
            }
        }
        // Per-segment framing says so too.
        let p = records();
        let j = json_record(&p[0].0, p[0].1);
        assert!(j.contains("\"s\":false,\"icrc\":"), "{j}");
        assert!(
            j.contains("\"icrc_status\":\"ok\",\"class\":\"write\",\"zero_length\":false,\"framing\":\"per-segment\""),
            "{j}"
        );
    }

    /// Amendment 4: our SYN's hello without timestamps (T=0) beside the RFC 7323 option, and
    /// a kernel's SYN-ACK with the option alone (a fallback that keeps timestamps).
    #[test]
    fn a_t0_hello_and_the_timestamp_option_are_shown() {
        let mut hello = Bth::new(Opcode::Hello);
        hello.mbo = 0xFF_FFFF;
        hello.seal(&[]);
        let syn = |flags: TcpFlags, tsval: u32, tsecr: u32, bth: Option<Bth>| {
            TcpRepr {
                src_port: 1000,
                dst_port: 2000,
                seq: 50,
                ack: 0,
                flags,
                window: 512,
                urgent: 0,
                options: TcpOptions {
                    mss: Some(1460),
                    window_scale: Some(7),
                    sack_permitted: true,
                    timestamps: Some(Timestamps { tsval, tsecr }),
                    bth,
                    ..TcpOptions::default()
                },
                payload: &[],
            }
            .to_vec(IP)
            .unwrap()
        };
        let a = analyzed(&[
            syn(TcpFlags::SYN, 11, 0, Some(hello)),
            syn(TcpFlags::SYN | TcpFlags::ACK, 22, 11, None),
        ]);
        assert_eq!(a.summary.malformed, 0);
        let l0 = line(&a.records[0].0, a.records[0].1, Duration::ZERO);
        assert!(
            l0.ends_with(
                "[S] seq 50 ack 0 win 512 len 0 TS val 11 ecr 0 | HELLO first-msn 0 \
                 max-msg 16777215 icrc ok"
            ),
            "{l0}"
        );
        let l1 = line(&a.records[1].0, a.records[1].1, Duration::ZERO);
        assert!(
            l1.ends_with("[S.] seq 50 ack 0 win 512 len 0 TS val 22 ecr 11"),
            "{l1}"
        );
        let j0 = json_record(&a.records[0].0, a.records[0].1);
        assert!(
            j0.contains("\"opt_tsval\":11,\"opt_tsecr\":0,\"opcode\":\"HELLO\""),
            "{j0}"
        );
        assert!(
            j0.contains("\"t\":false,") && !j0.contains("\"tsval\""),
            "{j0}"
        );
        let j1 = json_record(&a.records[1].0, a.records[1].1);
        assert!(j1.contains("\"opt_tsval\":22,\"opt_tsecr\":11"), "{j1}");
        assert!(!j1.contains("opcode"), "{j1}");
        // A BTH with its timestamps folded says so.
        let r = records();
        let j = json_record(&r[0].0, r[0].1);
        assert!(j.contains("\"t\":true,\"tsval\":1,\"tsecr\":2"), "{j}");
        assert!(!j.contains("opt_tsval"), "{j}");
    }

    #[test]
    fn flag_letters() {
        assert_eq!(flags(TcpFlags::SYN | TcpFlags::ACK), "S.");
        assert_eq!(flags(TcpFlags(0)), "none");
        assert_eq!(flags(TcpFlags::FIN | TcpFlags::PSH | TcpFlags::ACK), "FP.");
    }
}
