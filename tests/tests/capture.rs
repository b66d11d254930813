//! Captures of a workload over the simulated link, in both framings (per-segment, and S,
//! sequence-anchored: spec amendment 3): the pcap written by the pair's tap is read back by
//! `bth_capture` (what `bth-dump` prints) and checked against what the workload sent; tshark
//! must read it cleanly; the Lua dissector in docs/wireshark must decode the same BTH fields as
//! the Rust decoder, frame by frame: for S the framing, anchor, placement offset (from the
//! sequence number and the SYN), message length and ICRC status (not applicable).

use bth_capture::{
    analyze_file, Analysis, CaptureReader, CapturedMessage, Checksum, Icrc, MessageKey, Outcome,
    PcapWriter, Segment,
};
use bth_io::sim::pair::{A_IP, A_PORT, B_IP, B_PORT};
use bth_io::sim::workload::{self, Kind, Report, WorkloadConfig};
use bth_io::sim::LinkConfig;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tcp_bth::wire::{
    checksum, Bth, ChecksumFill, Extension, InboundError, IpPair, MsgClass, Nak, NakCode, Opcode,
    Reth, TcpFlags, TcpOptions, TcpRepr, Timestamps, ZERO_LENGTH_MBO,
};
use tcp_bth::Framing;

/// A file in the temporary directory, removed when dropped (also when a test fails).
struct TempFile(PathBuf);

impl TempFile {
    fn new(tag: &str) -> TempFile {
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        TempFile(std::env::temp_dir().join(format!(
            "tcp-bth-capture-{}-{}-{nanos}-{tag}.pcap",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        )))
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

const MESSAGES: usize = 20;

fn config(capture: &Path, seed: u64, framing: Framing) -> WorkloadConfig {
    WorkloadConfig {
        messages: MESSAGES,
        min_size: 512,
        max_size: 64 * 1024,
        seed,
        link: LinkConfig::default()
            .with_delay(Duration::from_micros(100))
            .with_loss(0.05)
            .with_reorder(0.2, Duration::from_micros(100))
            .with_seed(seed),
        capture: Some(capture.to_path_buf()),
        framing,
        ..WorkloadConfig::default()
    }
}

/// Both framings, each as every test here runs it.
const FRAMINGS: [Framing; 2] = [Framing::PerSegment, Framing::Seq];

/// Message kinds and sizes in posting order, as the workload plans them.
fn planned(cfg: &WorkloadConfig) -> Vec<(Kind, u32)> {
    workload::plan(cfg)
        .iter()
        .map(|p| (p.kind, p.size))
        .collect()
}

/// Runs the workload with a capture and reads the capture back.
struct Run {
    file: TempFile,
    cfg: WorkloadConfig,
    report: Report,
    analysis: Analysis,
}

fn run(seed: u64, framing: Framing) -> Run {
    let file = TempFile::new("workload");
    let cfg = config(file.path(), seed, framing);
    let report = workload::run(&cfg).expect("workload");
    assert_eq!(report.verified, MESSAGES);
    assert_eq!(
        report.seq_framed,
        framing == Framing::Seq,
        "both ends asked for {framing:?}: that is what runs"
    );
    let analysis = analyze_file(file.path()).expect("capture readable");
    if let Some(e) = &analysis.error {
        panic!("capture read stopped: {e}");
    }
    Run {
        file,
        cfg,
        report,
        analysis,
    }
}

const A: IpPair = IpPair::V4 {
    src: A_IP,
    dst: B_IP,
};

fn a_to_b() -> (std::net::SocketAddr, std::net::SocketAddr) {
    (
        (std::net::Ipv4Addr::from(A_IP), A_PORT).into(),
        (std::net::Ipv4Addr::from(B_IP), B_PORT).into(),
    )
}

/// Messages of one class and direction in MSN order, counted from the first MSN announced.
fn in_msn_order(
    msgs: &BTreeMap<MessageKey, CapturedMessage>,
    class: MsgClass,
    src: std::net::SocketAddr,
    first_msn: u16,
) -> Vec<(u16, &CapturedMessage)> {
    let mut v: Vec<(u16, &CapturedMessage)> = msgs
        .iter()
        .filter(|(k, _)| k.class == class && k.src == src)
        .map(|(k, m)| (k.msn, m))
        .collect();
    v.sort_by_key(|(msn, _)| msn.wrapping_sub(first_msn));
    v
}

fn decoded_capture_matches_what_the_workload_sent() {
    for framing in FRAMINGS {
        for seed in [7, 20, 35] {
            check_decoded_capture(run(seed, framing));
        }
    }
}

fn check_decoded_capture(r: Run) {
    let seq_framed = r.cfg.framing == Framing::Seq;
    println!(
        "seed {}, {:?} framing (a failure below is for this run)",
        r.cfg.seed, r.cfg.framing
    );
    let (a, b) = a_to_b();
    let s = &r.analysis.summary;
    let plan = planned(&r.cfg);
    // The mirror of the plan agrees with the run's own totals.
    assert_eq!(plan.len(), r.report.messages);
    assert_eq!(
        plan.iter().map(|p| u64::from(p.1)).sum::<u64>(),
        r.report.message_bytes,
        "planned() no longer mirrors workload::plan"
    );

    // Taken before the link impairs anything: clean. S-framed data carry no ICRC: never an
    // ICRC error, and never an unknown offset (the capture holds both SYNs).
    assert_eq!(s.checksum_errors, 0);
    assert_eq!(s.icrc_errors, 0);
    assert_eq!(s.s_offsets_unknown, 0);
    assert_eq!(
        s.s_data_segments,
        if seq_framed { s.data_segments } else { 0 }
    );
    assert!(
        r.analysis
            .flows
            .values()
            .all(|f| f.isn.is_some() && f.hello_seq_framed == Some(seq_framed)),
        "both hellos ask for the framing, both SYNs are captured"
    );
    assert_eq!(s.malformed, 0);
    assert_eq!((s.not_tcp, s.truncated), (0, 0));
    assert_eq!(s.packets, s.tcp_segments);
    // Every segment carries tcp_bth, except amendment 1's plain-form pure ACKs: no payload,
    // ACK only, the RFC 7323 timestamps and at least one SACK block in its place.
    let mut plain_form = 0u64;
    for (d, _) in &r.analysis.records {
        let Some(seg) = d.segment() else { continue };
        if seg.bth().is_some() {
            continue;
        }
        let opts = seg.options.as_ref().expect("options parse");
        assert!(
            seg.payload_len == 0 && seg.flags == TcpFlags::ACK,
            "frame {}: only a pure ACK may go without tcp_bth: {seg:?}",
            d.frame
        );
        assert!(
            opts.timestamps.is_some() && !opts.sack.is_empty(),
            "frame {}: a plain-form ACK carries timestamps and SACK blocks: {opts:?}",
            d.frame
        );
        plain_form += 1;
    }
    assert_eq!(
        s.tcp_segments,
        s.bth_segments + plain_form,
        "every other segment carries tcp_bth"
    );

    // Every data segment: well-formed, offset agrees with its TCP sequence number, segment
    // index with the offset, payload no larger than the largest segment of its direction.
    let mut mss: BTreeMap<_, u32> = BTreeMap::new();
    for (d, _) in &r.analysis.records {
        if let Some(seg) = d.segment() {
            let e = mss.entry(seg.src).or_default();
            *e = (*e).max(seg.payload_len);
        }
    }
    let mut data_segments = 0;
    let mut covered: BTreeMap<MessageKey, BTreeSet<(u64, u64)>> = BTreeMap::new();
    for (d, _) in &r.analysis.records {
        let Some(seg) = d.segment() else {
            panic!("frame {}: {:?}", d.frame, d.outcome)
        };
        assert_eq!(seg.checksum, Checksum::Good, "frame {}", d.frame);
        assert_eq!(seg.ip_checksum_ok, Some(true), "frame {}", d.frame);
        // A plain-form ACK has no BTH, so no ICRC to check; S-framed data has none either
        // (not applicable, neither good nor bad); every other BTH's ICRC is good.
        if let Some(b) = seg.bth() {
            assert_eq!(b.seq_framed, seq_framed, "frame {}: S flag", d.frame);
            let s_data = seq_framed && seg.data.is_some();
            let (want, ok) = if s_data {
                (Icrc::NotApplicable, None)
            } else {
                (Icrc::Good, Some(true))
            };
            assert_eq!(
                (seg.icrc(), seg.icrc_ok),
                (Some(want), ok),
                "frame {}",
                d.frame
            );
        } else {
            assert_eq!((seg.icrc(), seg.icrc_ok), (None, None), "frame {}", d.frame);
        }
        let Some(data) = seg.data else {
            assert_eq!(
                seg.payload_len, 0,
                "frame {}: payload without data",
                d.frame
            );
            continue;
        };
        data_segments += 1;
        let bth = seg.bth().expect("data has a BTH");
        assert_eq!(data.len, seg.payload_len);
        assert!(data.len > 0 && data.len <= mss[&seg.src]);
        let offset = data
            .offset
            .unwrap_or_else(|| panic!("frame {}: offset unknown", d.frame));
        match data.seq {
            None => {
                assert!(!seq_framed, "frame {}: per-segment in S", d.frame);
                assert_eq!(
                    u32::from(bth.seg),
                    (offset / mss[&seg.src]) % 256,
                    "frame {}: segment index",
                    d.frame
                );
            }
            Some(sf) => {
                // The option: anchor and length; the placement from the stream offset.
                assert!(seq_framed, "frame {}: S in per-segment", d.frame);
                assert_eq!((bth.seg, sf.anchor, sf.msg_len), (0, bth.mbo, bth.icrc));
                let at = sf.stream_offset.expect("SYN seen");
                assert_eq!(at.wrapping_sub(offset) & 0xFF_FFFF, sf.anchor);
                assert!(data.end().unwrap() <= u64::from(sf.msg_len));
                assert_eq!(data.last, data.end() == Some(u64::from(sf.msg_len)));
            }
        }
        covered
            .entry(MessageKey {
                src: seg.src,
                dst: seg.dst,
                class: data.class,
                msn: data.msn,
            })
            .or_default()
            .insert((u64::from(offset), data.end().unwrap()));
    }
    assert_eq!(s.data_segments, data_segments);

    // Each message: its segments tile [0, length) and sit where the TCP sequence says.
    let msgs = &r.analysis.messages;
    assert_eq!(s.messages as usize, msgs.len());
    for (k, m) in msgs {
        let len = m
            .len
            .unwrap_or_else(|| panic!("{k:?}: LAST segment missing"));
        assert_eq!(m.max_end, len, "{k:?}: bytes beyond the LAST segment");
        assert_eq!(m.misplaced, 0, "{k:?}: offset disagrees with TCP sequence");
        assert_eq!(m.unplaced, 0, "{k:?}");
        let mut at = 0;
        for &(start, end) in &covered[k] {
            assert!(start <= at, "{k:?}: hole at {at}");
            at = at.max(end);
        }
        assert_eq!(at, len, "{k:?}");
    }

    // Message sizes per class, in MSN order from the MSN each side announced in its SYN.
    let first_a = r.analysis.flows[&(a, b)].hello_msn.expect("A's hello");
    let sizes = |k: Kind| -> Vec<u64> {
        plan.iter()
            .filter(|p| p.0 == k)
            .map(|p| u64::from(p.1))
            .collect()
    };
    let lens = |v: Vec<(u16, &CapturedMessage)>| -> Vec<u64> {
        v.iter().map(|(_, m)| m.len.unwrap_or(0)).collect()
    };
    let sends = in_msn_order(msgs, MsgClass::Send, a, first_a);
    let writes = in_msn_order(msgs, MsgClass::Write, a, first_a);
    let reqs = in_msn_order(msgs, MsgClass::ReadRequest, a, first_a);
    let resps = in_msn_order(msgs, MsgClass::ReadResponse, b, first_a);
    assert!(!sends.is_empty() && !writes.is_empty() && !reqs.is_empty());
    for (i, (msn, _)) in sends.iter().enumerate() {
        assert_eq!(
            *msn,
            first_a.wrapping_add(i as u16),
            "SEND MSNs are consecutive"
        );
    }
    assert_eq!(lens(sends), sizes(Kind::Send), "SEND sizes");
    assert_eq!(lens(writes.clone()), sizes(Kind::WriteImm), "WRITE sizes");
    assert_eq!(
        lens(resps.clone()),
        sizes(Kind::Read),
        "READ response sizes"
    );
    // READ: each request asks for what its response (same MSN) carries.
    assert_eq!(reqs.len(), resps.len());
    for ((qmsn, q), (pmsn, p)) in reqs.iter().zip(&resps) {
        assert_eq!(qmsn, pmsn);
        assert_eq!(q.len, Some(16));
        assert_eq!(q.read_len.map(u64::from), p.len, "READ MSN {qmsn}");
    }
    // WRITE with immediate: the immediate is the plan index; targets are back to back.
    let mut addr = writes[0].1.write_addr.expect("WRITE address");
    for (msn, m) in &writes {
        let i = m.imm.expect("WRITE_WITH_IMM carries an immediate") as usize;
        assert_eq!(
            plan[i],
            (Kind::WriteImm, m.len.unwrap() as u32),
            "WRITE {msn}"
        );
        assert_eq!(m.write_addr, Some(addr), "WRITE {msn} target");
        addr += m.len.unwrap();
    }
    // Nothing from B to A but READ responses.
    assert!(msgs
        .keys()
        .all(|k| (k.src == a) != (k.class == MsgClass::ReadResponse)));

    // Loss and reordering happen after the capture point (the pair's tap sees what the ends
    // send): every out-of-order segment here is a retransmission, and there are exactly as
    // many as the senders report; the lost segments were repaired.
    assert!(r.report.link_dropped > 0, "the link dropped nothing");
    assert!(r.report.link_reordered > 0, "the link reordered nothing");
    assert!(s.retransmissions > 0, "no retransmission captured");
    assert_eq!(s.retransmissions, r.report.retransmits);
    assert_eq!(s.out_of_order, s.retransmissions);
    assert_eq!(s.data_segments, r.report.segments_sent);
    for (d, m) in &r.analysis.records {
        assert_eq!(m.out_of_order, m.retransmission, "frame {}", d.frame);
    }
}

// ---------------------------------------------------------------------------------------------
// tshark
// ---------------------------------------------------------------------------------------------

/// Runs tshark; returns stdout, failing on a non-zero exit or a Lua error.
fn tshark(args: &[&str]) -> String {
    let out = Command::new("tshark")
        .args(args)
        .output()
        .expect("tshark runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "tshark {args:?} exited with {}: {stderr}",
        out.status
    );
    assert!(
        !stderr.contains("Lua") && !stderr.contains("rror"),
        "tshark {args:?}: {stderr}"
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The segment payload is opaque RDMA message data: decode it as such so that heuristic
/// dissectors (SMPP, for one) do not mistake random bytes for their protocol and report them
/// malformed.
const AS_DATA: [&str; 2] = ["-d", "tcp.port==4791,data"];

/// Finds segments with a bad TCP or IPv4 checksum, or malformed ones (checksum status 1 = good).
const BAD_FILTER: &str = "tcp.checksum.status != 1 || ip.checksum.status != 1 || _ws.malformed";

fn bad_rows(path: &str) -> String {
    tshark(&[
        "-r",
        path,
        AS_DATA[0],
        AS_DATA[1],
        "-o",
        "tcp.check_checksum:TRUE",
        "-o",
        "ip.check_checksum:TRUE",
        "-Y",
        BAD_FILTER,
    ])
}

fn tshark_reads_the_capture_cleanly() {
    for framing in FRAMINGS {
        tshark_reads_cleanly(framing);
    }
}

fn tshark_reads_cleanly(framing: Framing) {
    let r = run(7, framing);
    let path = r.file.path().to_str().expect("utf-8 temp path");
    let listing = tshark(&["-r", path, AS_DATA[0], AS_DATA[1]]);
    assert_eq!(listing.lines().count() as u64, r.analysis.summary.packets);
    let lower = listing.to_lowercase();
    for bad in ["malformed", "checksum", "incorrect", "bogus"] {
        assert!(!lower.contains(bad), "tshark output mentions {bad:?}");
    }
    let rows = bad_rows(path);
    assert!(rows.trim().is_empty(), "tshark flags: {rows}");

    // The filter does find a damaged segment: flip one payload byte of the last data segment.
    let mut bytes = std::fs::read(r.file.path()).unwrap();
    let damaged_frame = r
        .analysis
        .records
        .iter()
        .rev()
        .find(|(d, _)| d.segment().is_some_and(|s| s.payload_len > 0))
        .map(|(d, _)| d.frame)
        .unwrap();
    let at = record_end(&bytes, damaged_frame) - 1;
    bytes[at] ^= 0x40;
    let bad = TempFile::new("damaged");
    std::fs::write(bad.path(), &bytes).unwrap();
    let rows = bad_rows(bad.path().to_str().unwrap());
    assert_eq!(rows.lines().count(), 1, "{rows}");
    let a = analyze_file(bad.path()).unwrap();
    assert_eq!(a.summary.checksum_errors, 1);
    // S-framed data has no ICRC: only the TCP checksum catches it, as the spec says.
    let icrc_errors = u64::from(framing == Framing::PerSegment);
    assert_eq!(a.summary.icrc_errors, icrc_errors, "{framing:?}");
}

/// Byte offset one past the end of packet record `frame` (1-based) in a pcap file.
fn record_end(pcap: &[u8], frame: u64) -> usize {
    let le = pcap[..4] == 0xA1B2_3C4Du32.to_le_bytes() || pcap[..4] == 0xA1B2_C3D4u32.to_le_bytes();
    let mut at = 24;
    for _ in 0..frame {
        let b: [u8; 4] = pcap[at + 8..at + 12].try_into().unwrap();
        let incl = if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        };
        at += 16 + incl as usize;
    }
    at
}

// ---------------------------------------------------------------------------------------------
// The Lua dissector
// ---------------------------------------------------------------------------------------------

fn lua_script() -> String {
    let p = repo_root().join("docs/wireshark/tcp_bth.lua");
    assert!(p.exists(), "{} missing", p.display());
    format!("lua_script:{}", p.display())
}

/// One BTH as the Lua dissector shows it: the fields it adds, absent ones `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LuaBth {
    opcode: u8,
    msn: u16,
    /// tcp_bth.offset: the offset field, except on S-framed data.
    offset: Option<u32>,
    seg: u8,
    /// tcp_bth.icrc.status: 0 bad, 1 good, 2 unverified, 3 not applicable.
    icrc_status: u8,
    /// tcp_bth.s
    s: bool,
    /// S-framed data: tcp_bth.anchor, tcp_bth.msg_len, tcp_bth.stream_off, tcp_bth.place_off.
    anchor: Option<u32>,
    msg_len: Option<u32>,
    stream_off: Option<u32>,
    place_off: Option<u32>,
}

/// What the Lua dissector must show for this segment's BTH, from the Rust decoder.
fn expected_lua(seg: &Segment) -> Option<LuaBth> {
    let b = seg.bth()?;
    let s_data = !b.carries_icrc();
    let sf = seg.data.and_then(|d| d.seq);
    let icrc_status = match seg.icrc()? {
        Icrc::Bad => 0,
        Icrc::Good => 1,
        Icrc::Unverified => 2,
        Icrc::NotApplicable => 3,
    };
    Some(LuaBth {
        opcode: b.opcode.as_u8(),
        msn: b.msn,
        offset: (!s_data).then_some(b.mbo),
        seg: b.seg,
        icrc_status,
        s: b.seq_framed,
        anchor: s_data.then_some(b.mbo),
        msg_len: s_data.then_some(b.icrc),
        stream_off: sf.and_then(|f| f.stream_offset),
        place_off: sf.and_then(|f| f.placement()),
    })
}

fn num(s: &str) -> u64 {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    }
    .unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

/// tshark 4.0 prints booleans as 1/0; later versions True/False.
fn boolean(s: &str) -> bool {
    match s {
        "1" => true,
        "0" | "" => false,
        v if v.eq_ignore_ascii_case("true") => true,
        v if v.eq_ignore_ascii_case("false") => false,
        v => panic!("not a boolean: {v:?}"),
    }
}

const LUA_COLUMNS: [&str; 11] = [
    "frame.number",
    "tcp_bth.opcode",
    "tcp_bth.msn",
    "tcp_bth.offset",
    "tcp_bth.seg",
    "tcp_bth.icrc.status",
    "tcp_bth.s",
    "tcp_bth.anchor",
    "tcp_bth.msg_len",
    "tcp_bth.stream_off",
    "tcp_bth.place_off",
];

/// What tshark shows with the Lua dissector for the capture at `path`: after the `extra`
/// options (a display filter, preferences), the `columns` of each frame on its line, separated
/// by [`LUA_SEP`].
fn lua_table(path: &str, extra: &[&str], columns: &[&str]) -> String {
    let (script, separator) = (lua_script(), format!("separator={LUA_SEP}"));
    let mut args = vec!["-X", &script, "-r", path];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["-T", "fields", "-E", &separator]);
    for c in columns {
        args.extend_from_slice(&["-e", c]);
    }
    tshark(&args)
}

/// The separator of [`lua_table`]'s columns.
const LUA_SEP: char = '|';

/// frame number -> the BTH as the Lua dissector shows it.
fn lua_fields(path: &str, extra: &[&str]) -> BTreeMap<u64, Option<LuaBth>> {
    let mut opts = vec![AS_DATA[0], AS_DATA[1]];
    opts.extend_from_slice(extra);
    let out = lua_table(path, &opts, &LUA_COLUMNS);
    // Numeric (0x04) in tshark 4.0; accept the value-string name too.
    let opcode = |s: &str| -> u8 {
        Opcode::ALL
            .iter()
            .find(|o| o.to_string() == s)
            .map_or_else(|| num(s) as u8, |o| o.as_u8())
    };
    let opt = |s: &str| (!s.is_empty()).then(|| num(s) as u32);
    out.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(LUA_SEP).collect();
            assert_eq!(f.len(), LUA_COLUMNS.len(), "{l:?}");
            let frame = num(f[0]);
            let v = (!f[1].is_empty()).then(|| LuaBth {
                opcode: opcode(f[1]),
                msn: num(f[2]) as u16,
                offset: opt(f[3]),
                seg: num(f[4]) as u8,
                icrc_status: num(f[5]) as u8,
                s: boolean(f[6]),
                anchor: opt(f[7]),
                msg_len: opt(f[8]),
                stream_off: opt(f[9]),
                place_off: opt(f[10]),
            });
            (frame, v)
        })
        .collect()
}

/// Frame by frame, the Lua dissector shows every BTH the Rust decoder reads as the decoder
/// reads it (frames whose options the decoder refuses are left to the callers). Returns the
/// dissector's view.
fn assert_lua_agrees(path: &str, a: &Analysis) -> BTreeMap<u64, Option<LuaBth>> {
    let lua = lua_fields(path, &[]);
    assert_eq!(lua.len() as u64, a.summary.packets);
    for (d, _) in &a.records {
        let seg = d.segment().unwrap();
        if seg.options.is_err() {
            continue;
        }
        assert_eq!(lua[&d.frame], expected_lua(seg), "frame {}", d.frame);
    }
    lua
}

const LUA_EXPERTS: &str = "tcp_bth.len_inconsistent || tcp_bth.icrc_bad || tcp_bth.truncated || \
     tcp_bth.unknown_opcode || tcp_bth.version_unsupported || tcp_bth.m_inconsistent || \
     tcp_bth.zero_length_invalid || tcp_bth.s_beyond_msg_len || tcp_bth.s_invalid || \
     tcp_bth.ts_missing";

fn lua_dissector_agrees_with_the_rust_decoder() {
    for framing in FRAMINGS {
        lua_agrees_on_a_workload(framing);
    }
}

fn lua_agrees_on_a_workload(framing: Framing) {
    let r = run(7, framing);
    let path = r.file.path().to_str().unwrap();
    let lua = assert_lua_agrees(path, &r.analysis);
    let mut data = 0;
    for (d, _) in &r.analysis.records {
        data += u64::from(d.segment().unwrap().data.is_some());
    }
    assert_eq!(data, r.analysis.summary.data_segments);
    // The same data segments, as the multiset of (MSN, offset, opcode) of data opcodes: the
    // offset is the placement offset in S framing, which the dissector computes from tcp.seq
    // and the SYN as the decoder does.
    let rust: BTreeMap<(u16, u32, u8), usize> = r
        .analysis
        .records
        .iter()
        .filter_map(|(d, _)| d.segment()?.data)
        .fold(BTreeMap::new(), |mut m, x| {
            *m.entry((x.msn, x.offset.unwrap(), x.opcode.as_u8()))
                .or_default() += 1;
            m
        });
    let from_lua: BTreeMap<(u16, u32, u8), usize> = lua
        .values()
        .flatten()
        .filter(|v| Opcode::from_u8(v.opcode).is_some_and(|o| MsgClass::of(o).is_some()))
        .fold(BTreeMap::new(), |mut m, v| {
            let off = v.place_off.or(v.offset).expect("an offset");
            *m.entry((v.msn, off, v.opcode)).or_default() += 1;
            m
        });
    assert_eq!(from_lua, rust);
    // Every S-framed data segment: not applicable, never bad; every other BTH good.
    let statuses: BTreeSet<(bool, u8)> = lua
        .values()
        .flatten()
        .map(|v| (v.anchor.is_some(), v.icrc_status))
        .collect();
    let want: BTreeSet<(bool, u8)> = match framing {
        Framing::PerSegment => [(false, 1)].into(),
        Framing::Seq => [(false, 1), (true, 3)].into(),
    };
    assert_eq!(statuses, want, "{framing:?}");
    // No expert info from the dissector on a clean capture.
    let experts = tshark(&[
        "-X",
        &lua_script(),
        "-r",
        path,
        AS_DATA[0],
        AS_DATA[1],
        "-Y",
        LUA_EXPERTS,
    ]);
    assert!(experts.trim().is_empty(), "{experts}");
}

/// Rewrites the TCP checksum of `seg` so it is correct for `ip`.
fn fix_checksum(seg: &mut [u8], ip: IpPair) {
    checksum::fill(ip, seg, ChecksumFill::Full).expect("a whole segment");
}

fn bth_segment(seq: u32, payload: &[u8]) -> Vec<u8> {
    let mut b = Bth::new(Opcode::SendOnly);
    b.msn = 3;
    any_segment(seq, TcpFlags::ACK | TcpFlags::PSH, b, payload)
}

/// A segment from A carrying `b` (timestamps added, ICRC sealed over `payload`).
fn any_segment(seq: u32, flags: TcpFlags, b: Bth, payload: &[u8]) -> Vec<u8> {
    segment_from(A, seq, flags, Some(b), payload)
}

/// A segment from `ip`'s source (A's port, or B's for B's address) carrying `b` (timestamps
/// added, ICRC sealed over `payload`: nothing for S-framed data, whose field is its length).
fn segment_from(ip: IpPair, seq: u32, flags: TcpFlags, b: Option<Bth>, payload: &[u8]) -> Vec<u8> {
    let bth = b.map(|mut b| {
        b.timestamps = Some(Timestamps { tsval: 5, tsecr: 6 });
        b.seal(payload);
        b
    });
    let options = TcpOptions {
        bth,
        ..TcpOptions::default()
    };
    tcp_segment(ip, (seq, 1), flags, options, payload)
}

/// A segment from `ip`'s source (A's port, or B's for B's address) with these sequence and
/// acknowledgement numbers, flags and options; window 100.
fn tcp_segment(
    ip: IpPair,
    (seq, ack): (u32, u32),
    flags: TcpFlags,
    options: TcpOptions,
    payload: &[u8],
) -> Vec<u8> {
    let (src_port, dst_port) = if ip == A {
        (A_PORT, B_PORT)
    } else {
        (B_PORT, A_PORT)
    };
    TcpRepr {
        src_port,
        dst_port,
        seq,
        ack,
        flags,
        window: 100,
        urgent: 0,
        options,
        payload,
    }
    .to_vec(ip)
    .unwrap()
}

/// Crafted segments: 1 well formed, 2 a length that contradicts the flags (ICRC re-sealed),
/// 3 a payload changed under a correct TCP checksum (only the ICRC catches it); then the forms
/// of docs/option.md: 4 a zero-length SEND_ONLY_WITH_IMMEDIATE (one pad byte), 5 a zero-length
/// RDMA_WRITE_ONLY_WITH_IMMEDIATE, 6 a pure ACK with R=0, 7 a NAK on the RST that ends the
/// connection, 8 the zero-length offset on a SEND_FIRST (malformed).
fn crafted_capture() -> TempFile {
    let file = TempFile::new("crafted");
    let mut w = PcapWriter::create(file.path()).unwrap();
    // 1: well formed.
    w.write_tcp(Duration::ZERO, A, &bth_segment(1000, b"abcdefgh"))
        .unwrap();
    // 2: T flag cleared in a 24-byte option: the length no longer matches flags and opcode.
    let mut s = bth_segment(1008, b"ijklmnop");
    assert_eq!((s[20], s[21], s[24]), (254, 24, 0x04));
    s[24] &= !0x04;
    // Re-seal: the ICRC covers the flags byte (option bytes 4..12, then the payload).
    let icrc = tcp_bth::wire::bth::icrc(&s[24..32], &s[44..]);
    s[32..36].copy_from_slice(&icrc.to_be_bytes());
    fix_checksum(&mut s, A);
    w.write_tcp(Duration::from_micros(1), A, &s).unwrap();
    // 3: payload changed under a correct TCP checksum: only the ICRC catches it.
    let mut s = bth_segment(1016, b"qrstuvwx");
    *s.last_mut().unwrap() ^= 1;
    fix_checksum(&mut s, A);
    w.write_tcp(Duration::from_micros(2), A, &s).unwrap();
    for (i, s) in special_forms().iter().enumerate() {
        w.write_tcp(Duration::from_micros(3 + i as u64), A, s)
            .unwrap();
    }
    drop(w);
    file
}

/// Frames 4-8 of [`crafted_capture`].
fn special_forms() -> [Vec<u8>; 5] {
    let data = TcpFlags::ACK | TcpFlags::PSH;
    let zero_length = |op, msn, ext| Bth {
        msn,
        mbo: ZERO_LENGTH_MBO,
        ext,
        ..Bth::new(op)
    };
    let send = zero_length(
        Opcode::SendOnlyWithImmediate,
        4,
        Extension::Immediate(0xC0FFEE),
    );
    let write = zero_length(
        Opcode::RdmaWriteOnlyWithImmediate,
        8,
        Extension::RethImmediate(
            Reth {
                rkey: 0x11,
                addr: 0x2000,
            },
            7,
        ),
    );
    let ack = Bth {
        msn: 4,
        ..Bth::new(Opcode::Acknowledge)
    };
    let nak = Nak {
        code: NakCode::RemoteAccess,
        opcode: Opcode::RdmaWriteFirst,
        msn: 9,
    }
    .to_bth();
    let bad = zero_length(Opcode::SendFirst, 5, Extension::None);
    [
        any_segment(1024, data, send, &[0]),
        any_segment(1025, data, write, &[0]),
        any_segment(1026, TcpFlags::ACK, ack, &[]),
        any_segment(1026, TcpFlags::RST, nak, &[]),
        any_segment(1026, data, bad, &[0]),
    ]
}

fn rust_decoder_flags_a_bad_length_and_a_bad_icrc() {
    let file = crafted_capture();
    let a = analyze_file(file.path()).unwrap();
    assert_eq!(a.summary.packets, 8);
    assert_eq!(a.summary.checksum_errors, 0);
    assert_eq!(a.summary.malformed, 2, "frames 2 and 8");
    assert_eq!(a.summary.icrc_errors, 1);
    let seg = |i: usize| match &a.records[i].0.outcome {
        Outcome::Segment(s) => s.clone(),
        o => panic!("{o:?}"),
    };
    assert!(seg(1).options.is_err());
    assert_eq!((seg(0).icrc_ok, seg(2).icrc_ok), (Some(true), Some(false)));
    // The forms of docs/option.md: well formed, ICRC over the pad byte correct.
    for i in 3..8 {
        assert_eq!(seg(i).icrc_ok, Some(true), "frame {}", i + 1);
    }
    for (i, class) in [(3, MsgClass::Send), (4, MsgClass::Write)] {
        let d = seg(i).data.expect("zero-length data segment");
        assert!(d.zero_length && seg(i).problem.is_none(), "frame {}", i + 1);
        assert_eq!(
            (d.class, d.offset, d.len, d.end()),
            (class, Some(0), 0, Some(0))
        );
    }
    let msgs: Vec<(MsgClass, u16, Option<u64>, u64)> = a
        .messages
        .iter()
        .map(|(k, m)| (k.class, k.msn, m.len, m.bytes))
        .collect();
    assert!(msgs.contains(&(MsgClass::Send, 4, Some(0), 0)), "{msgs:?}");
    assert!(msgs.contains(&(MsgClass::Write, 8, Some(0), 0)), "{msgs:?}");
    let ack = seg(5);
    let ack = ack.bth().unwrap();
    assert_eq!(
        (ack.rtr, ack.msn, ack.seg, Nak::from_bth(ack)),
        (false, 4, 0, None)
    );
    assert_eq!(
        Nak::from_bth(seg(6).bth().unwrap()),
        Some(Nak {
            code: NakCode::RemoteAccess,
            opcode: Opcode::RdmaWriteFirst,
            msn: 9
        })
    );
    assert_eq!(
        seg(7).problem,
        Some(bth_capture::Problem::Message(InboundError::BadZeroLength {
            opcode: Opcode::SendFirst,
            pad: 1
        }))
    );
}

/// The frames of the capture at `path` that match the display `filter` under the Lua
/// dissector.
fn lua_frames(path: &str, filter: &str) -> Vec<u64> {
    lua_table(path, &["-Y", filter], &["frame.number"])
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect()
}

fn lua_dissector_flags_a_bad_length_and_a_bad_icrc() {
    let file = crafted_capture();
    let path = file.path().to_str().unwrap();
    let experts = |filter: &str| lua_frames(path, filter);
    assert_eq!(experts("tcp_bth.len_inconsistent"), vec![2]);
    assert_eq!(experts("tcp_bth.icrc_bad"), vec![3]);
    assert_eq!(
        experts("tcp_bth.icrc.status == 1"),
        vec![1, 2, 4, 5, 6, 7, 8]
    );
    assert_eq!(experts("tcp_bth.zero_length_invalid"), vec![8]);
    assert_eq!(experts("tcp_bth.nak_received"), vec![7]);
}

/// The zero-length form, the R=0 pure ACK and the NAK as the Lua dissector shows them: fields
/// and info column, frame by frame (frames 4-8 of [`crafted_capture`]).
fn lua_dissector_names_zero_length_ack_and_nak() {
    let file = crafted_capture();
    let path = file.path().to_str().unwrap();
    let out = lua_table(
        path,
        &["-Y", "frame.number >= 4"],
        &[
            "frame.number",
            "tcp_bth.offset",
            "tcp_bth.zero_length",
            "tcp_bth.syndrome",
            "tcp_bth.nak",
            "tcp_bth.nak.opcode",
            "_ws.col.Info",
        ],
    );
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split(LUA_SEP).collect()).collect();
    assert_eq!(rows.len(), 5, "{out}");
    // tshark 4.0 prints booleans as 1 and unsigned fields with a value string as numbers
    // (hex fields as 0x..); accept "True" as later versions print it.
    let t = |v: &str| v == "1" || v.eq_ignore_ascii_case("true");
    let num = |v: &str| match v.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16).unwrap_or_else(|e| panic!("{v:?}: {e}")),
        None => v.parse().unwrap_or_else(|e| panic!("{v:?}: {e}")),
    };
    let info = |r: &[&str]| r[6].to_string();
    // 4, 5: zero-length, the raw offset field still 0xFFFFFF.
    for (r, name, msn) in [
        (&rows[0], "SEND_ONLY_WITH_IMMEDIATE", 4),
        (&rows[1], "RDMA_WRITE_ONLY_WITH_IMMEDIATE", 8),
    ] {
        assert_eq!(num(r[1]), ZERO_LENGTH_MBO, "{r:?}");
        assert!(t(r[2]), "{r:?}");
        assert!(r[3].is_empty() && r[4].is_empty(), "{r:?}");
        assert!(
            info(r).contains(&format!("[BTH {name} msn={msn} zero-length]")),
            "{r:?}"
        );
    }
    // 6: pure ACK, R=0: syndrome 0 (ACK), not a NAK.
    let r = &rows[2];
    assert_eq!((num(r[3]), r[2], r[4], r[5]), (0, "", "", ""), "{r:?}");
    assert!(info(r).contains("[BTH ACK completed-msn=4]"), "{r:?}");
    // 7: the NAK.
    let r = &rows[3];
    assert_eq!(num(r[3]), 0x62, "{r:?}");
    assert!(t(r[4]), "{r:?}");
    assert_eq!(
        num(r[5]),
        u32::from(Opcode::RdmaWriteFirst.as_u8()),
        "{r:?}"
    );
    assert!(
        info(r).contains("[BTH NAK remote-access-error for RDMA_WRITE_FIRST msn=9]"),
        "{r:?}"
    );
    // 8: the zero-length offset where it cannot be: not shown as zero-length.
    let r = &rows[4];
    assert_eq!((num(r[1]), r[2]), (ZERO_LENGTH_MBO, ""), "{r:?}");
}

// ---------------------------------------------------------------------------------------------
// Fallback keeps timestamps (amendment 4), crafted
// ---------------------------------------------------------------------------------------------

/// A SYN or SYN-ACK with MSS, window scale, SACK-permitted, the RFC 7323 option and `hello`.
fn handshake_segment(
    ip: IpPair,
    seq: u32,
    flags: TcpFlags,
    tsval: u32,
    hello: Option<Bth>,
) -> Vec<u8> {
    let options = TcpOptions {
        mss: Some(1460),
        window_scale: Some(7),
        sack_permitted: true,
        timestamps: Some(Timestamps { tsval, tsecr: 0 }),
        bth: hello.map(|mut h| {
            h.seal(&[]);
            h
        }),
        ..TcpOptions::default()
    };
    let ack = if flags.ack() { 1001 } else { 0 };
    tcp_segment(ip, (seq, ack), flags, options, &[])
}

/// Crafted: 1 A's SYN, a hello without timestamps (T=0, 16 bytes) beside the RFC 7323 option
/// (TSval 11); 2 a kernel's SYN-ACK from B: the RFC 7323 option (TSval 22), no hello; 3 an
/// ACKNOWLEDGE with T=0 (16 bytes, ICRC sealed), which only a hello may be: malformed.
fn crafted_fallback_capture() -> TempFile {
    let file = TempFile::new("crafted-fallback");
    let mut w = PcapWriter::create(file.path()).unwrap();
    let hello = Bth {
        mbo: ZERO_LENGTH_MBO,
        ..Bth::new(Opcode::Hello)
    };
    let b_to_a = A.reversed();
    let syn = handshake_segment(A, 1000, TcpFlags::SYN, 11, Some(hello));
    let syn_ack = handshake_segment(b_to_a, 5000, TcpFlags::SYN | TcpFlags::ACK, 22, None);
    // 3: a T=0 hello turned into an ACKNOWLEDGE by hand (the codec will not emit one).
    let mut ack = segment_from(A, 1001, TcpFlags::ACK, None, &[]);
    let opt = Bth::new(Opcode::Hello).to_vec().unwrap();
    ack.extend_from_slice(&opt);
    ack[12] = (5 + 4) << 4;
    ack[25] = Opcode::Acknowledge.as_u8();
    let icrc = tcp_bth::wire::bth::icrc(&ack[24..32], &[]);
    ack[32..36].copy_from_slice(&icrc.to_be_bytes());
    fix_checksum(&mut ack, A);
    for (i, (ip, s)) in [(A, syn), (b_to_a, syn_ack), (A, ack)].iter().enumerate() {
        w.write_tcp(Duration::from_micros(i as u64), *ip, s)
            .unwrap();
    }
    drop(w);
    file
}

/// The Rust decoder (what bth-dump prints) takes the T=0 hello with the RFC 7323 option beside
/// it, the kernel's SYN-ACK as plain TCP with timestamps, and refuses the T=0 ACKNOWLEDGE.
fn rust_decoder_reads_a_t0_hello_beside_the_timestamp_option() {
    let file = crafted_fallback_capture();
    let a = analyze_file(file.path()).unwrap();
    assert_eq!((a.summary.packets, a.summary.checksum_errors), (3, 0));
    assert_eq!(
        (a.summary.bth_segments, a.summary.malformed),
        (1, 1),
        "frame 3"
    );
    let seg = |i: usize| a.records[i].0.segment().unwrap().clone();
    let syn = seg(0);
    let o = syn.options.as_ref().unwrap();
    assert_eq!(
        o.timestamps,
        Some(Timestamps {
            tsval: 11,
            tsecr: 0
        })
    );
    let hello = o.bth.expect("the hello");
    assert_eq!(
        (hello.opcode, hello.timestamps, hello.buffer_len()),
        (Opcode::Hello, None, 16)
    );
    assert_eq!((syn.icrc(), syn.header_len), (Some(Icrc::Good), 20 + 36));
    let syn_ack = seg(1);
    let o = syn_ack.options.as_ref().unwrap();
    assert_eq!((o.bth, o.timestamps.map(|t| t.tsval)), (None, Some(22)));
    assert!(matches!(
        seg(2).options,
        Err(tcp_bth::wire::TcpOptionError::Bth(
            tcp_bth::wire::BthError::TimestampsRequired(Opcode::Acknowledge)
        ))
    ));
}

/// The Lua dissector reads the T=0 hello without a timestamp field (tcp_bth.t false, no
/// tcp_bth.tsval), tshark's TCP dissector the RFC 7323 option beside it, and flags the T=0
/// ACKNOWLEDGE (tcp_bth.ts_missing) as the codec refuses it; nothing else is flagged.
fn lua_dissector_reads_a_t0_hello_beside_the_timestamp_option() {
    let file = crafted_fallback_capture();
    let path = file.path().to_str().unwrap();
    let out = lua_table(
        path,
        &[],
        &[
            "frame.number",
            "tcp_bth.opcode",
            "tcp_bth.t",
            "tcp_bth.len",
            "tcp_bth.tsval",
            "tcp.options.timestamp.tsval",
            "tcp_bth.icrc.status",
            "_ws.col.Info",
        ],
    );
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split(LUA_SEP).collect()).collect();
    assert_eq!(rows.len(), 3, "{out}");
    let f = |v: &str| v == "0" || v.eq_ignore_ascii_case("false");
    let r = &rows[0];
    assert!(r[1] == "255" || r[1] == "0xff" || r[1] == "HELLO", "{r:?}");
    assert!(f(r[2]), "T=0: {r:?}");
    assert_eq!((r[3], r[4], r[5], r[6]), ("16", "", "11", "1"), "{r:?}");
    assert!(
        r[7].contains("[BTH HELLO first-msn=0 max-msg=16777215 T=0]"),
        "{r:?}"
    );
    let r = &rows[1];
    assert_eq!((r[1], r[4], r[5]), ("", "", "22"), "{r:?}");
    let experts = |filter: &str| lua_frames(path, filter);
    assert_eq!(experts(LUA_EXPERTS), vec![3]);
    assert_eq!(experts("tcp_bth.ts_missing"), vec![3]);
    assert!(bad_rows(path).trim().is_empty(), "{}", bad_rows(path));
}

// ---------------------------------------------------------------------------------------------
// S framing (amendment 3), crafted
// ---------------------------------------------------------------------------------------------

/// A's ISN in [`crafted_s_capture`].
const S_ISN: u32 = 5000;

/// An S-framed option: the anchor in the offset field, the message length in bytes 8-11.
fn s_bth(op: Opcode, msn: u16, anchor: u32, msg_len: u32) -> Bth {
    Bth {
        seq_framed: true,
        msn,
        mbo: anchor,
        icrc: msg_len,
        ..Bth::new(op)
    }
}

/// Crafted segments of an S-framed connection: 1 A's SYN (hello with S, ISN [`S_ISN`]); 2, 3
/// a 20-byte SEND (MSN 1, anchor 0) in 12 + 8 bytes; 4 a SEND (MSN 2, anchor 20, length 10)
/// whose 10 bytes sit at placement offset 5, passing its length; 5 a zero-length SEND with
/// immediate (MSN 3) whose anchor is 0xFFFFFF (its pad byte at stream offset 0xFFFFFF); 6 an
/// S-framed pure ACK (ICRC as always); 7 a SEND from B, whose SYN is not in the capture
/// (placement unknown); 8 the S flag on a SEND_FIRST (refused).
fn crafted_s_capture() -> TempFile {
    let file = TempFile::new("crafted-s");
    let mut w = PcapWriter::create(file.path()).unwrap();
    let data = TcpFlags::ACK | TcpFlags::PSH;
    let at = |stream_offset: u32| S_ISN.wrapping_add(1).wrapping_add(stream_offset);
    let hello = Bth {
        seq_framed: true,
        mbo: ZERO_LENGTH_MBO,
        ..Bth::new(Opcode::Hello)
    };
    let send = s_bth(Opcode::SendOnly, 1, 0, 20);
    let mut zero = s_bth(Opcode::SendOnlyWithImmediate, 3, ZERO_LENGTH_MBO, 0);
    zero.ext = Extension::Immediate(0xAB);
    let ack = Bth {
        seq_framed: true,
        msn: 3,
        ..Bth::new(Opcode::Acknowledge)
    };
    // 8: a SEND_FIRST with S set by hand (the codec will not emit it), checksum fixed.
    let mut first = any_segment(at(100), data, send_first(), b"xyz");
    assert_eq!((first[20], first[24]), (254, 0x0C), "kind, flags T|M");
    first[24] |= 0x40;
    fix_checksum(&mut first, A);
    let b_to_a = IpPair::V4 {
        src: B_IP,
        dst: A_IP,
    };
    let segments = [
        segment_from(A, S_ISN, TcpFlags::SYN, Some(hello), &[]),
        any_segment(at(0), data, send, &[1; 12]),
        any_segment(at(12), data, send, &[2; 8]),
        any_segment(at(25), data, s_bth(Opcode::SendOnly, 2, 20, 10), &[3; 10]),
        any_segment(at(ZERO_LENGTH_MBO), data, zero, &[0]),
        any_segment(at(ZERO_LENGTH_MBO + 1), TcpFlags::ACK, ack, &[]),
        segment_from(
            b_to_a,
            777,
            data,
            Some(s_bth(Opcode::SendOnly, 0, 0x12ab, 100)),
            &[4; 10],
        ),
        first,
    ];
    for (i, s) in segments.iter().enumerate() {
        let ip = if i == 6 { b_to_a } else { A };
        w.write_tcp(Duration::from_micros(i as u64), ip, s).unwrap();
    }
    drop(w);
    file
}

fn send_first() -> Bth {
    Bth {
        msn: 9,
        ..Bth::new(Opcode::SendFirst)
    }
}

fn rust_decoder_reads_s_framed_forms() {
    let file = crafted_s_capture();
    let a = analyze_file(file.path()).unwrap();
    let s = &a.summary;
    assert_eq!(s.packets, 8);
    assert_eq!(s.checksum_errors, 0);
    assert_eq!(s.icrc_errors, 0, "S-framed data have no ICRC to get wrong");
    assert_eq!(s.malformed, 2, "frames 4 and 8");
    assert_eq!((s.s_data_segments, s.s_offsets_unknown), (5, 1));
    let seg = |frame: usize| a.records[frame - 1].0.segment().unwrap().clone();
    // (frame, stream offset, placement offset, message length, last)
    for (frame, stream, place, len, last) in [
        (2, Some(0), Some(0), 20, false),
        (3, Some(12), Some(12), 20, true),
        (4, Some(25), Some(5), 10, false),
        (5, Some(ZERO_LENGTH_MBO), Some(0), 0, true),
        (7, None, None, 100, false),
    ] {
        let sg = seg(frame);
        assert_eq!(
            (sg.icrc(), sg.icrc_ok),
            (Some(Icrc::NotApplicable), None),
            "frame {frame}"
        );
        let d = sg.data.unwrap();
        let sf = d.seq.expect("S-framed");
        assert_eq!(
            (sf.stream_offset, d.offset, sf.msg_len, d.last),
            (stream, place, len, last),
            "frame {frame}"
        );
    }
    assert_eq!(
        seg(4).problem,
        Some(bth_capture::Problem::Message(
            InboundError::BeyondMessageLength {
                offset: 5,
                len: 10,
                msg_len: 10
            }
        ))
    );
    let z = seg(5);
    assert!(z.problem.is_none() && z.data.unwrap().zero_length);
    assert_eq!(seg(6).icrc(), Some(Icrc::Good));
    assert!(seg(6).bth().unwrap().seq_framed);
    assert!(seg(8).options.is_err(), "S on SEND_FIRST is refused");
    let (a_addr, b_addr) = a_to_b();
    assert_eq!(a.flows[&(a_addr, b_addr)].isn, Some(S_ISN));
    assert_eq!(a.flows[&(a_addr, b_addr)].hello_seq_framed, Some(true));
    assert_eq!(a.flows[&(b_addr, a_addr)].isn, None);
    let m: Vec<(u16, Option<u64>, u64, u64, u64)> = a
        .messages
        .iter()
        .map(|(k, m)| (k.msn, m.len, m.max_end, m.segments, m.unplaced))
        .collect();
    assert_eq!(
        m,
        vec![
            (1, Some(20), 20, 2, 0),
            (2, Some(10), 15, 1, 0),
            (3, Some(0), 0, 1, 0),
            (0, Some(100), 0, 1, 1),
        ]
    );
}

fn lua_dissector_reads_s_framed_forms() {
    let file = crafted_s_capture();
    let path = file.path().to_str().unwrap();
    let a = analyze_file(file.path()).unwrap();
    // Frames 1-7 field by field as the decoder reads them (8 the decoder refuses).
    let lua = assert_lua_agrees(path, &a);
    let f8 = lua[&8].expect("the dissector still shows frame 8");
    assert!(f8.s && f8.anchor.is_some() && f8.icrc_status == 3, "{f8:?}");
    assert_eq!(
        lua[&7].unwrap().place_off,
        None,
        "B's SYN is not in the capture"
    );
    let frames = |filter: &str| lua_frames(path, filter);
    assert_eq!(frames("tcp_bth.s_beyond_msg_len"), vec![4]);
    assert_eq!(frames("tcp_bth.s_invalid"), vec![8]);
    assert_eq!(frames("tcp_bth.zero_length"), vec![5]);
    assert_eq!(frames("tcp_bth.zero_length_invalid"), Vec::<u64>::new());
    assert_eq!(frames("tcp_bth.icrc.status == 3"), vec![2, 3, 4, 5, 7, 8]);
    assert_eq!(frames("tcp_bth.icrc.status == 1"), vec![1, 6]);
    assert_eq!(frames("tcp_bth.s"), (1..=8).collect::<Vec<u64>>());
    assert_eq!(frames("tcp_bth.icrc_bad"), Vec::<u64>::new());
    // The info column names the S fields; the dissector computes the same placement from the
    // raw sequence numbers with relative sequence numbers off.
    let info = lua_table(path, &[], &["_ws.col.Info"]);
    let rows: Vec<&str> = info.lines().collect();
    for (frame, want) in [
        (1, "[BTH HELLO first-msn=0 max-msg=16777215 S]"),
        (3, "[BTH SEND_ONLY S msn=1 anchor=0x000000 off=12 len=20]"),
        (
            5,
            "[BTH SEND_ONLY_WITH_IMMEDIATE S msn=3 anchor=0xffffff off=0 len=0 zero-length]",
        ),
        (6, "[BTH ACK completed-msn=3 S]"),
        (
            7,
            "[BTH SEND_ONLY S msn=0 anchor=0x0012ab off=unknown len=100]",
        ),
    ] {
        let row = rows[frame - 1];
        assert!(row.contains(want), "frame {frame}: {row}");
    }
    let raw = lua_fields(path, &["-o", "tcp.relative_sequence_numbers:FALSE"]);
    assert_eq!(raw, lua, "the same with raw sequence numbers");
}

fn reader_survives_damaged_files() {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    for i in 0..4u32 {
        w.write_tcp(
            Duration::from_millis(u64::from(i)),
            A,
            &bth_segment(1000 + 8 * i, b"12345678"),
        )
        .unwrap();
    }
    let good = w.finish().unwrap();
    // Every truncation and many single-byte changes: never a panic; a truncated record ends
    // the read with an error after the packets before it.
    for cut in 0..good.len() {
        let r = CaptureReader::new(&good[..cut]);
        let Ok(r) = r else { continue };
        let mut n = 0;
        for p in r {
            match p {
                Ok(p) => {
                    n += 1;
                    let _ = bth_capture::decode(n, &p);
                }
                Err(_) => break,
            }
        }
        assert!(n <= 4);
    }
    for at in 0..good.len() {
        for x in [0x01, 0x80, 0xFF] {
            let mut b = good.clone();
            b[at] ^= x;
            if let Ok(r) = CaptureReader::new(&b[..]) {
                let _ = bth_capture::analyze(r);
            }
        }
    }
    let a = bth_capture::analyze(CaptureReader::new(&good[..]).unwrap()).unwrap();
    assert_eq!(a.summary.bth_segments, 4);
    assert!(a.error.is_none());
}

bth_tests::test_main!(
    decoded_capture_matches_what_the_workload_sent,
    tshark_reads_the_capture_cleanly[Tshark],
    lua_dissector_agrees_with_the_rust_decoder[Tshark],
    rust_decoder_flags_a_bad_length_and_a_bad_icrc,
    lua_dissector_flags_a_bad_length_and_a_bad_icrc[Tshark],
    lua_dissector_names_zero_length_ack_and_nak[Tshark],
    rust_decoder_reads_s_framed_forms,
    lua_dissector_reads_s_framed_forms[Tshark],
    rust_decoder_reads_a_t0_hello_beside_the_timestamp_option,
    lua_dissector_reads_a_t0_hello_beside_the_timestamp_option[Tshark],
    reader_survives_damaged_files,
);
