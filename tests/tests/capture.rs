//! Captures of a workload over the simulated link: the pcap written by the pair's tap is read
//! back by `bth_capture` (what `bth-dump` prints) and checked against what the workload
//! sent; tshark must read it cleanly; the Lua dissector in docs/wireshark must decode the same
//! BTH fields as the Rust decoder, frame by frame.

use bth_capture::{
    analyze_file, Analysis, CaptureReader, Checksum, MessageInfo, MessageKey, Outcome, PcapWriter,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tcp_bth::wire::{
    checksum, Bth, ChecksumFill, Extension, InboundError, IpPair, MsgClass, Nak, NakCode, Opcode,
    Reth, TcpFlags, TcpOptions, TcpRepr, Timestamps, ZERO_LENGTH_MBO,
};
use tcp_bth_io::sim::pair::{A_IP, A_PORT, B_IP, B_PORT};
use tcp_bth_io::sim::workload::{self, Kind, Report, WorkloadConfig};
use tcp_bth_io::sim::LinkConfig;

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

fn config(capture: &Path, seed: u64) -> WorkloadConfig {
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
        ..WorkloadConfig::default()
    }
}

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

fn run(seed: u64) -> Run {
    let file = TempFile::new("workload");
    let cfg = config(file.path(), seed);
    let report = workload::run(&cfg).expect("workload");
    assert_eq!(report.verified, MESSAGES);
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
    msgs: &BTreeMap<MessageKey, MessageInfo>,
    class: MsgClass,
    src: std::net::SocketAddr,
    first_msn: u16,
) -> Vec<(u16, &MessageInfo)> {
    let mut v: Vec<(u16, &MessageInfo)> = msgs
        .iter()
        .filter(|(k, _)| k.class == class && k.src == src)
        .map(|(k, m)| (k.msn, m))
        .collect();
    v.sort_by_key(|(msn, _)| msn.wrapping_sub(first_msn));
    v
}

fn decoded_capture_matches_what_the_workload_sent() {
    for seed in [7, 20, 35] {
        check_decoded_capture(run(seed));
    }
}

fn check_decoded_capture(r: Run) {
    println!("seed {} (a failure below is for this seed)", r.cfg.seed);
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

    // Taken before the link impairs anything: clean.
    assert_eq!(s.checksum_errors, 0);
    assert_eq!(s.icrc_errors, 0);
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
        // A plain-form ACK has no BTH, so no ICRC to check.
        let want_icrc = seg.bth().map(|_| true);
        assert_eq!(seg.icrc_ok, want_icrc, "frame {}", d.frame);
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
        assert_eq!(
            u32::from(bth.seg),
            (data.offset / mss[&seg.src]) % 256,
            "frame {}: segment index",
            d.frame
        );
        covered
            .entry(MessageKey {
                src: seg.src,
                dst: seg.dst,
                class: data.class,
                msn: data.msn,
            })
            .or_default()
            .insert((u64::from(data.offset), data.end()));
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
    let lens = |v: Vec<(u16, &MessageInfo)>| -> Vec<u64> {
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
    let r = run(7);
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
    assert_eq!(a.summary.icrc_errors, 1);
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

/// (opcode, msn, offset, seg, icrc status) of one BTH.
type LuaBth = (u8, u16, u32, u8, u8);

/// frame number -> the BTH as the Lua dissector shows it.
fn lua_fields(path: &str, extra: &[&str]) -> BTreeMap<u64, Option<LuaBth>> {
    let script = lua_script();
    let mut args = vec!["-X", &script, "-r", path, AS_DATA[0], AS_DATA[1]];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[
        "-T",
        "fields",
        "-E",
        "separator=\t",
        "-e",
        "frame.number",
        "-e",
        "tcp_bth.opcode",
        "-e",
        "tcp_bth.msn",
        "-e",
        "tcp_bth.offset",
        "-e",
        "tcp_bth.seg",
        "-e",
        "tcp_bth.icrc.status",
    ]);
    let out = tshark(&args);
    let num = |s: &str| -> u64 {
        match s.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16),
            None => s.parse(),
        }
        .unwrap_or_else(|e| panic!("{s:?}: {e}"))
    };
    // Numeric (0x04) in tshark 4.0; accept the value-string name too.
    let opcode = |s: &str| -> u8 {
        Opcode::ALL
            .iter()
            .find(|o| o.to_string() == s)
            .map_or_else(|| num(s) as u8, |o| o.as_u8())
    };
    out.lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 6, "{l:?}");
            let frame = num(f[0]);
            let v = (!f[1].is_empty()).then(|| {
                (
                    opcode(f[1]),
                    num(f[2]) as u16,
                    num(f[3]) as u32,
                    num(f[4]) as u8,
                    num(f[5]) as u8,
                )
            });
            (frame, v)
        })
        .collect()
}

fn lua_dissector_agrees_with_the_rust_decoder() {
    let r = run(7);
    let path = r.file.path().to_str().unwrap();
    let lua = lua_fields(path, &[]);
    assert_eq!(lua.len() as u64, r.analysis.summary.packets);
    let mut data = 0;
    for (d, _) in &r.analysis.records {
        let seg = d.segment().unwrap();
        let want = seg
            .bth()
            .map(|b| (b.opcode.as_u8(), b.msn, b.mbo, b.seg, 1u8));
        assert_eq!(lua[&d.frame], want, "frame {}", d.frame);
        data += u64::from(seg.data.is_some());
    }
    assert_eq!(data, r.analysis.summary.data_segments);
    // The same data segments, as the multiset of (MSN, offset) of data opcodes.
    let rust: BTreeMap<(u16, u32, u8), usize> = r
        .analysis
        .records
        .iter()
        .filter_map(|(d, _)| d.segment()?.data)
        .fold(BTreeMap::new(), |mut m, x| {
            *m.entry((x.msn, x.offset, x.opcode.as_u8())).or_default() += 1;
            m
        });
    let from_lua: BTreeMap<(u16, u32, u8), usize> = lua
        .values()
        .flatten()
        .filter(|v| Opcode::from_u8(v.0).is_some_and(|o| MsgClass::of(o).is_some()))
        .fold(BTreeMap::new(), |mut m, v| {
            *m.entry((v.1, v.2, v.0)).or_default() += 1;
            m
        });
    assert_eq!(from_lua, rust);
    // No expert info from the dissector on a clean capture.
    let experts = tshark(&[
        "-X",
        &lua_script(),
        "-r",
        path,
        AS_DATA[0],
        AS_DATA[1],
        "-Y",
        "tcp_bth.len_inconsistent || tcp_bth.icrc_bad || tcp_bth.truncated || \
         tcp_bth.unknown_opcode || tcp_bth.version_unsupported || tcp_bth.m_inconsistent",
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
fn any_segment(seq: u32, flags: TcpFlags, mut b: Bth, payload: &[u8]) -> Vec<u8> {
    b.timestamps = Some(Timestamps { tsval: 5, tsecr: 6 });
    b.seal(payload);
    TcpRepr {
        src_port: A_PORT,
        dst_port: B_PORT,
        seq,
        ack: 1,
        flags,
        window: 100,
        urgent: 0,
        options: TcpOptions {
            bth: Some(b),
            ..TcpOptions::default()
        },
        payload,
    }
    .to_vec(A)
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
        assert_eq!((d.class, d.offset, d.len, d.end()), (class, 0, 0, 0));
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

fn lua_dissector_flags_a_bad_length_and_a_bad_icrc() {
    let file = crafted_capture();
    let path = file.path().to_str().unwrap();
    let script = lua_script();
    let experts = |filter: &str| -> Vec<u64> {
        tshark(&[
            "-X",
            &script,
            "-r",
            path,
            "-Y",
            filter,
            "-T",
            "fields",
            "-e",
            "frame.number",
        ])
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect()
    };
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
    let script = lua_script();
    let out = tshark(&[
        "-X",
        &script,
        "-r",
        path,
        "-Y",
        "frame.number >= 4",
        "-T",
        "fields",
        "-E",
        "separator=|",
        "-e",
        "frame.number",
        "-e",
        "tcp_bth.offset",
        "-e",
        "tcp_bth.zero_length",
        "-e",
        "tcp_bth.syndrome",
        "-e",
        "tcp_bth.nak",
        "-e",
        "tcp_bth.nak.opcode",
        "-e",
        "_ws.col.Info",
    ]);
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split('|').collect()).collect();
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
    reader_survives_damaged_files,
);
