//! Human-readable renderings of wire values, shared by the tools (`bth decode`, `bth-dump`).

use bth_wire::{Bth, Extension, Inbound, Nak, Opcode, TcpOptions, TcpRepr, ZERO_LENGTH_MBO};
use std::fmt::Write;

/// One field per line. An S-framed data option (amendment 3) shows its offset field as the
/// anchor and its bytes 8-11 as the message length, by name; where its bytes go also needs the
/// segment's sequence number and its sender's ISN.
pub fn bth(b: &Bth) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "opcode        {} ({:#04x})", b.opcode, b.opcode.as_u8());
    let _ = writeln!(
        s,
        "flags         T={} M={} R={} A={} S={} rsvd={}",
        u8::from(b.timestamps.is_some()),
        u8::from(b.opcode.more()),
        u8::from(b.rtr),
        u8::from(b.rtr_ack),
        u8::from(b.seq_framed),
        b.rsvd
    );
    let _ = writeln!(s, "msn           {}", b.msn);
    if !b.carries_icrc() {
        seq_framed_data(&mut s, b);
        return s;
    }
    // With one pad byte of payload this offset is a zero-length message (docs/option.md).
    let zero_length = b.mbo == ZERO_LENGTH_MBO && Inbound::from_bth(b, &[0]).is_ok();
    if zero_length {
        let _ = writeln!(
            s,
            "offset        {} (zero-length message: 1 pad byte)",
            b.mbo
        );
    } else {
        let _ = writeln!(s, "offset        {}", b.mbo);
    }
    if b.opcode == Opcode::Acknowledge && !b.rtr {
        // On an ACKNOWLEDGE the low byte of mbo_seg is the AETH syndrome.
        match Nak::from_bth(b) {
            Some(n) => {
                let _ = writeln!(s, "syndrome      {:#04x} ({n})", b.seg);
            }
            None if b.seg == 0 => {
                let _ = writeln!(s, "syndrome      0x00 (ACK)");
            }
            None => {
                let _ = writeln!(s, "syndrome      {:#04x} (not defined)", b.seg);
            }
        }
    } else {
        let _ = writeln!(s, "segment       {}", b.seg);
    }
    let _ = writeln!(s, "icrc          {:#010x}", b.icrc);
    tail(&mut s, b);
    s
}

/// The fields of an S-framed data option after its MSN.
fn seq_framed_data(s: &mut String, b: &Bth) {
    let _ = writeln!(
        s,
        "anchor        {:#08x} ({}: stream offset of the message's first byte mod 2^24)",
        b.mbo, b.mbo
    );
    let _ = writeln!(s, "segment       {}", b.seg);
    // With one pad byte of payload a length of 0 is a zero-length message.
    let zero = if b.icrc == 0 {
        " (zero-length message: 1 pad byte)"
    } else {
        ""
    };
    let _ = writeln!(s, "msg_len       {}{zero}", b.icrc);
    let _ = writeln!(
        s,
        "icrc          not applicable (S framing: bytes 8-11 are the message length; the TCP \
         checksum is the check)"
    );
    let _ = writeln!(
        s,
        "placement     ((SEQ - ISN - 1) mod 2^32 - anchor) mod 2^24"
    );
    tail(s, b);
}

/// Timestamps, extension and length: the same in both framings.
fn tail(s: &mut String, b: &Bth) {
    match b.timestamps {
        Some(ts) => {
            let _ = writeln!(s, "tsval         {}", ts.tsval);
            let _ = writeln!(s, "tsecr         {}", ts.tsecr);
        }
        // Amendment 4: a SYN's hello may leave them to the RFC 7323 option beside it.
        None if b.opcode == Opcode::Hello => {
            let _ = writeln!(
                s,
                "timestamps    not in the hello (T=0): a SYN's, beside the RFC 7323 \
                 timestamp option (amendment 4)"
            );
        }
        None => {}
    }
    match b.ext {
        Extension::None => {}
        Extension::Immediate(i) => {
            let _ = writeln!(s, "imm_data      {i:#010x}");
        }
        Extension::Reth(r) => {
            let _ = writeln!(s, "rkey          {:#010x}", r.rkey);
            let _ = writeln!(s, "remote_addr   {:#018x}", r.addr);
        }
        Extension::RethImmediate(r, i) => {
            let _ = writeln!(s, "rkey          {:#010x}", r.rkey);
            let _ = writeln!(s, "remote_addr   {:#018x}", r.addr);
            let _ = writeln!(s, "imm_data      {i:#010x}");
        }
    }
    let _ = writeln!(s, "length        {} bytes", b.buffer_len());
}

/// The TCP options, one per line (`mss`, `window_scale`, `sack_permitted`, `sack`,
/// `timestamps`), then the `tcp_bth` option indented as [`bth`] shows it.
pub fn options(o: &TcpOptions) -> String {
    let mut s = String::new();
    if let Some(m) = o.mss {
        let _ = writeln!(s, "mss           {m}");
    }
    if let Some(w) = o.window_scale {
        let _ = writeln!(s, "window_scale  {w}");
    }
    if o.sack_permitted {
        let _ = writeln!(s, "sack_permitted");
    }
    for blk in &o.sack {
        let _ = writeln!(s, "sack          {}-{}", blk.left, blk.right);
    }
    if let Some(ts) = o.timestamps {
        let _ = writeln!(s, "timestamps    val={} ecr={}", ts.tsval, ts.tsecr);
    }
    if let Some(b) = &o.bth {
        let _ = writeln!(s, "tcp_bth:");
        for line in bth(b).lines() {
            let _ = writeln!(s, "  {line}");
        }
    }
    s
}

/// A TCP segment, one field per line (ports, seq, ack, flags, window, payload length), then
/// its options as [`options`] shows them.
pub fn segment(t: &TcpRepr<'_>) -> String {
    let mut s = String::new();
    let f = t.flags;
    let names = [
        (f.syn(), "SYN"),
        (f.ack(), "ACK"),
        (f.fin(), "FIN"),
        (f.rst(), "RST"),
        (f.contains(bth_wire::TcpFlags::PSH), "PSH"),
    ];
    let flags: Vec<&str> = names
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, n)| *n)
        .collect();
    let _ = writeln!(s, "ports         {} -> {}", t.src_port, t.dst_port);
    let _ = writeln!(s, "seq           {}", t.seq);
    let _ = writeln!(s, "ack           {}", t.ack);
    let _ = writeln!(s, "flags         {}", flags.join(","));
    let _ = writeln!(s, "window        {}", t.window);
    let _ = writeln!(s, "payload       {} bytes", t.payload.len());
    s.push_str(&options(&t.options));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use bth_wire::{Nak, NakCode, Timestamps};

    #[test]
    fn nak_and_zero_length_are_named() {
        let mut nak = Nak {
            code: NakCode::RemoteAccess,
            opcode: Opcode::RdmaWriteFirst,
            msn: 3,
        }
        .to_bth();
        nak.timestamps = Some(Timestamps::default());
        let t = bth(&nak);
        assert!(t.contains("offset        6\n"), "{t}");
        assert!(
            t.contains("syndrome      0x62 (NAK remote access error for RDMA_WRITE_FIRST MSN 3)\n"),
            "{t}"
        );
        let ack = Bth {
            msn: 4,
            mbo: 0,
            seg: 0,
            ..nak
        };
        assert!(bth(&ack).contains("syndrome      0x00 (ACK)\n"));
        let mut zl = Bth::new(Opcode::SendOnly);
        zl.mbo = ZERO_LENGTH_MBO;
        let t = bth(&zl);
        assert!(
            t.contains("offset        16777215 (zero-length message: 1 pad byte)\n"),
            "{t}"
        );
        assert!(t.contains("segment       0\n"), "{t}");
        zl.opcode = Opcode::SendLast;
        assert!(bth(&zl).contains("offset        16777215\n"));
    }

    /// A hello without timestamps (amendment 4) says where they are; one with them shows them.
    #[test]
    fn a_t0_hello_says_its_timestamps_ride_beside_it() {
        let mut hello = Bth::new(Opcode::Hello);
        hello.mbo = 0xFF_FFFF;
        let t = bth(&hello);
        assert!(
            t.contains("flags         T=0 M=0 R=0 A=0 S=0 rsvd=0\n"),
            "{t}"
        );
        assert!(t.contains("timestamps    not in the hello (T=0)"), "{t}");
        assert!(!t.contains("tsval"), "{t}");
        assert!(t.contains("length        16 bytes\n"), "{t}");
        let o = TcpOptions {
            mss: Some(1460),
            timestamps: Some(Timestamps { tsval: 9, tsecr: 0 }),
            bth: Some(hello),
            ..TcpOptions::default()
        };
        let t = options(&o);
        assert!(t.contains("timestamps    val=9 ecr=0\ntcp_bth:\n"), "{t}");
        hello.timestamps = Some(Timestamps { tsval: 1, tsecr: 2 });
        let t = bth(&hello);
        assert!(
            t.contains("tsval         1\n") && !t.contains("not in the hello"),
            "{t}"
        );
    }

    #[test]
    fn s_framed_data_shows_anchor_and_length_by_name() {
        let mut b = Bth::new(Opcode::SendOnly);
        b.seq_framed = true;
        b.msn = 4;
        b.mbo = 0x12ab;
        b.icrc = 65536;
        b.timestamps = Some(Timestamps::default());
        let t = bth(&b);
        assert!(
            t.contains("flags         T=1 M=0 R=0 A=0 S=1 rsvd=0\n"),
            "{t}"
        );
        assert!(t.contains("anchor        0x0012ab (4779: "), "{t}");
        assert!(t.contains("msg_len       65536\n"), "{t}");
        assert!(t.contains("icrc          not applicable"), "{t}");
        assert!(!t.contains("\noffset ") && !t.contains("0x00010000"), "{t}");
        // The anchor may be 0xFFFFFF: only the length says zero-length.
        b.mbo = ZERO_LENGTH_MBO;
        assert!(!bth(&b).contains("zero-length"));
        b.icrc = 0;
        assert!(bth(&b).contains("msg_len       0 (zero-length message: 1 pad byte)\n"));
        // A control form keeps its ICRC in S framing.
        let mut ack = Bth::new(Opcode::Acknowledge);
        ack.seq_framed = true;
        ack.timestamps = Some(Timestamps::default());
        let t = bth(&ack);
        assert!(t.contains("S=1") && t.contains("icrc          0x"), "{t}");
    }
}
