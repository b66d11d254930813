//! Human-readable renderings of wire values, shared by the tools (`bth decode`, `bth-dump`).

use std::fmt::Write;
use tcp_bth_wire::{Bth, Extension, TcpOptions, TcpRepr};

/// One field per line.
pub fn bth(b: &Bth) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "opcode        {} ({:#04x})", b.opcode, b.opcode.as_u8());
    let _ = writeln!(
        s,
        "flags         T={} M={} R={} A={} rsvd={}",
        u8::from(b.timestamps.is_some()),
        u8::from(b.opcode.more()),
        u8::from(b.rtr),
        u8::from(b.rtr_ack),
        b.rsvd
    );
    let _ = writeln!(s, "msn           {}", b.msn);
    let _ = writeln!(s, "offset        {}", b.mbo);
    let _ = writeln!(s, "segment       {}", b.seg);
    let _ = writeln!(s, "icrc          {:#010x}", b.icrc);
    if let Some(ts) = b.timestamps {
        let _ = writeln!(s, "tsval         {}", ts.tsval);
        let _ = writeln!(s, "tsecr         {}", ts.tsecr);
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
    s
}

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

pub fn segment(t: &TcpRepr<'_>) -> String {
    let mut s = String::new();
    let f = t.flags;
    let names = [
        (f.syn(), "SYN"),
        (f.ack(), "ACK"),
        (f.fin(), "FIN"),
        (f.rst(), "RST"),
        (f.contains(tcp_bth_wire::TcpFlags::PSH), "PSH"),
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
