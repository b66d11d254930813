//! A capture of a real tcp_bth transfer: tcpdump on the veth between two namespaces while our
//! stack talks to our stack over the TUN data path; the Rust decoder (what bth-dump prints) must
//! report exactly the messages, MSNs, offsets and sizes that were sent, and tshark must read the
//! file without malformed packets or checksum errors, also with our Lua dissector, which must
//! show every data segment as the decoder does. Each in both framings: per-segment, and S
//! (sequence-anchored, spec amendment 3: placement offsets from sequence numbers, no ICRC).
//! And with TSO on both stack devices, S-framed super-segments cross the veth whole, one
//! option each (issue #36).

use bth_capture::{analyze_file, Icrc};
use bth_io::tun::Offload;
use bth_perf::ctrl::{Ctrl, Regions};
use bth_perf::{PerfConfig, PerfOp, RunMode};
use bth_testbed::topology::{self, TwoNs};
use bth_tests::tcpdump::{self, CaptureFile, Tcpdump};
use bth_tests::tunpair::run_perf;
use std::process::Command;
use tcp_bth::wire::MsgClass;
use tcp_bth::Framing;

const SIZE: u32 = 20_000;
const COUNT: u64 = 60;

/// One capture at a time: two transfers and two tcpdumps at once on a 2-core machine made
/// tcpdump lose packets (a message's last segment missing from the file).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A fresh topology (unique namespace names per run) whose stack TUN devices offload
/// `offload`, and a capture file name for it, removed on drop.
fn topology_and_file(tag: &str, offload: Offload) -> (TwoNs, CaptureFile) {
    static RUN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = RUN.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let ns = TwoNs::create(&format!("bc{tag}{}x{n}", std::process::id()), None)
        .expect("namespaces")
        .with_offload(offload);
    let file = std::env::temp_dir().join(format!("bth-tun-{tag}-{}-{n}.pcap", std::process::id()));
    (ns, CaptureFile(file))
}

/// Runs the perf transfer `cfg` between two namespaces whose stack TUN devices offload
/// `offload`, with tcpdump on the veth keeping `snaplen` bytes of each packet; returns the
/// capture file (removed on drop) and what tcpdump said on stderr.
fn capture_perf(
    tag: &str,
    offload: Offload,
    snaplen: u32,
    cfg: &PerfConfig,
) -> (CaptureFile, String) {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (ns, cleanup) = topology_and_file(tag, offload);
    // On the veth in namespace A.
    let dump = Tcpdump::start(&ns.a, "bthv0", &cleanup.0, snaplen);
    let (c, s) = run_perf(&ns, cfg);
    assert!(
        c.errors.is_empty() && s.errors.is_empty(),
        "{:?} {:?}",
        c.errors,
        s.errors
    );
    let said = dump.stop();
    (cleanup, said)
}

/// Runs a mixed transfer (SEND, WRITE, READ in turn) of [`COUNT`] messages of [`SIZE`] bytes
/// between two namespaces with tcpdump on the veth, both sides asking for `framing`; the
/// capture file is removed on drop. Offload is off, so the capture holds real MSS-sized
/// segments (amendment 3: captures checked with tshark are taken with offload off): tshark
/// checks every checksum, and none may be left partial for a device to finish.
fn capture_transfer(tag: &str, framing: Framing) -> CaptureFile {
    let cfg = PerfConfig {
        op: PerfOp::Mixed,
        size: SIZE,
        count: COUNT,
        tx_depth: 4,
        rx_depth: 4,
        mode: RunMode::verified(),
        seed: 5,
        framing,
        ..PerfConfig::default()
    };
    // Every packet here fits 2 KiB (MTU 1500).
    let (cleanup, said) = capture_perf(tag, Offload::None, 2048, &cfg);
    tcpdump::assert_complete(&said);
    cleanup
}

fn capture_of_a_bth_transfer_decodes_to_what_was_sent() {
    decodes_to_what_was_sent("d", Framing::PerSegment);
}

fn capture_of_an_s_framed_transfer_decodes_to_what_was_sent() {
    decodes_to_what_was_sent("ds", Framing::Seq);
}

fn decodes_to_what_was_sent(tag: &str, framing: Framing) {
    let file = capture_transfer(tag, framing);
    let (size, count) = (SIZE, COUNT);
    let a = analyze_file(&file.0).expect("read capture");
    assert!(a.error.is_none(), "capture read error: {:?}", a.error);
    let sum = &a.summary;
    assert_eq!(sum.checksum_errors, 0);
    assert_eq!(sum.icrc_errors, 0);
    assert_eq!(sum.malformed, 0);
    assert!(sum.bth_segments > 0 && sum.data_segments > 0);
    // S: every data segment is S-framed and placed (both SYNs are in the capture), with no
    // ICRC to check; per-segment: none is.
    let seq_framed = framing == Framing::Seq;
    assert_eq!(
        (sum.s_data_segments, sum.s_offsets_unknown),
        (if seq_framed { sum.data_segments } else { 0 }, 0)
    );
    for (d, _) in &a.records {
        let Some(seg) = d.segment() else { continue };
        let Some(b) = seg.bth() else { continue };
        assert_eq!(b.seq_framed, seq_framed, "frame {}: S flag", d.frame);
        let want = if seq_framed && seg.data.is_some() {
            Icrc::NotApplicable
        } else {
            Icrc::Good
        };
        assert_eq!(seg.icrc(), Some(want), "frame {}", d.frame);
    }

    // Client (B, 10.99.2.2) to server (A, 10.99.1.2): message i is SEND, WRITE, READ in turn.
    let from_client = |k: &bth_capture::MessageKey| k.src.ip() == topology::B_STACK;
    let count_of = |class: MsgClass, client: bool| {
        a.messages
            .iter()
            .filter(|(k, _)| k.class == class && from_client(k) == client)
            .map(|(_, m)| m)
            .collect::<Vec<_>>()
    };
    let per_kind = count / 3;
    // Data SENDs carry an immediate; the perf apps' control messages (client: hello, done,
    // statistics; server: accept, statistics) none.
    let (sends, client_ctrl): (Vec<_>, Vec<_>) = count_of(MsgClass::Send, true)
        .into_iter()
        .partition(|m| m.imm.is_some());
    let writes = count_of(MsgClass::Write, true);
    let reads = count_of(MsgClass::ReadRequest, true);
    let responses = count_of(MsgClass::ReadResponse, false);
    let server_sends = count_of(MsgClass::Send, false);
    assert_eq!(
        (
            sends.len(),
            writes.len(),
            reads.len(),
            responses.len(),
            client_ctrl.len(),
            server_sends.len()
        ),
        (
            per_kind as usize,
            per_kind as usize,
            per_kind as usize,
            per_kind as usize,
            3,
            2
        )
    );
    for m in sends.iter().chain(&writes).chain(&responses) {
        assert_eq!(
            m.len,
            Some(u64::from(size)),
            "message length in the capture: {m:?}"
        );
        assert_eq!(m.misplaced, 0, "offsets agree with sequence numbers");
    }
    for m in &reads {
        assert_eq!(m.read_len, Some(size));
    }
    // The server's accept, whole, with no immediate.
    let accept = Ctrl::Accept(Regions::default()).encode().len() as u64;
    assert!(
        server_sends
            .iter()
            .any(|m| m.len == Some(accept) && m.imm.is_none()),
        "{server_sends:?}"
    );
    // Each WRITE carries its message index as immediate: 1, 4, 7, ...
    let mut imms: Vec<u32> = writes.iter().filter_map(|m| m.imm).collect();
    imms.sort();
    assert_eq!(
        imms,
        (0..per_kind as u32).map(|k| 3 * k + 1).collect::<Vec<_>>()
    );
}

/// tshark reads the capture without malformed packets or checksum errors, and our Lua dissector
/// finds exactly the data segments the Rust decoder finds, each with the same fields.
fn tshark_reads_a_tun_capture_like_the_decoder() {
    tshark_reads_like_the_decoder("t", Framing::PerSegment);
}

fn tshark_reads_an_s_framed_tun_capture_like_the_decoder() {
    tshark_reads_like_the_decoder("ts", Framing::Seq);
}

/// One data segment's BTH as the Lua dissector shows it, or as the decoder says it must:
/// (frame, MSN, S, offset field, anchor, placement offset, message length, ICRC status), the
/// fields the dissector leaves out empty.
type Row = (u64, String, String, String, String, String, String, String);

fn tshark_reads_like_the_decoder(tag: &str, framing: Framing) {
    let file = capture_transfer(tag, framing);
    let a = analyze_file(&file.0).expect("read capture");
    assert!(a.error.is_none(), "capture read error: {:?}", a.error);
    let sum = &a.summary;
    let out = Command::new("tshark")
        // `-d ... data`: tshark's SMPP heuristic otherwise claims our random payload and calls
        // it malformed; that is about the payload, not our packets.
        .args([
            "-n",
            "-d",
            "tcp.port==4791,data",
            "-o",
            "tcp.check_checksum:TRUE",
        ])
        .args(["-o", "ip.check_checksum:TRUE", "-r"])
        .arg(&file.0)
        .args([
            "-Y",
            "tcp.checksum.status != 1 || ip.checksum.status != 1 || _ws.malformed",
        ])
        .output()
        .expect("tshark");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout.is_empty(),
        "tshark flags packets: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let lua = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/wireshark/tcp_bth.lua");
    let out = Command::new("tshark")
        .args(["-n", "-X", &format!("lua_script:{lua}"), "-r"])
        .arg(&file.0)
        .args([
            "-Y",
            "tcp_bth && tcp.len > 0",
            "-T",
            "fields",
            "-E",
            "separator=|",
        ])
        .args(
            [
                "frame.number",
                "tcp_bth.msn",
                "tcp_bth.s",
                "tcp_bth.offset",
                "tcp_bth.anchor",
                "tcp_bth.place_off",
                "tcp_bth.msg_len",
                "tcp_bth.icrc.status",
            ]
            .iter()
            .flat_map(|f| ["-e", f]),
        )
        .output()
        .expect("tshark with the dissector");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // tshark 4.0 prints booleans as 1/0 and hex fields as 0x..; later versions True/False.
    let norm = |v: &str| -> String {
        match v {
            "True" | "true" => "1".into(),
            "False" | "false" => "0".into(),
            v => match v.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).map_or(v.into(), |n| n.to_string()),
                None => v.into(),
            },
        }
    };
    let lua: Vec<Row> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<String> = l.split('|').map(norm).collect();
            assert_eq!(f.len(), 8, "{l:?}");
            let frame = f[0].parse().expect("frame number");
            (
                frame,
                f[1].clone(),
                f[2].clone(),
                f[3].clone(),
                f[4].clone(),
                f[5].clone(),
                f[6].clone(),
                f[7].clone(),
            )
        })
        .collect();
    let some = |v: Option<u32>| v.map_or_else(String::new, |v| v.to_string());
    let rust: Vec<Row> = a
        .records
        .iter()
        .filter_map(|(d, _)| {
            let seg = d.segment()?;
            let b = seg.bth()?;
            (seg.payload_len > 0).then_some(())?;
            let s_data = !b.carries_icrc();
            let status = match seg.icrc()? {
                Icrc::Bad => 0,
                Icrc::Good => 1,
                Icrc::Unverified => 2,
                Icrc::NotApplicable => 3,
            };
            Some((
                d.frame,
                b.msn.to_string(),
                u8::from(b.seq_framed).to_string(),
                some((!s_data).then_some(b.mbo)),
                some(s_data.then_some(b.mbo)),
                some(seg.data.and_then(|x| x.seq).and_then(|f| f.placement())),
                some(s_data.then_some(b.icrc)),
                status.to_string(),
            ))
        })
        .collect();
    assert_eq!(
        lua.len() as u64,
        sum.data_segments,
        "dissector and decoder see the same data segments"
    );
    for (l, r) in lua.iter().zip(&rust) {
        assert_eq!(
            l, r,
            "(frame, msn, s, offset, anchor, place_off, msg_len, icrc status)"
        );
    }
    assert_eq!(lua.len(), rust.len());
}

/// Super-segments cross the veth whole: with TSO on both stack TUN devices
/// (`Offload::Segmentation`), a bulk S-framed SEND transfer from B's stack to A's leaves B's
/// device as GSO super-packets, which the kernel forwards over the veth uncut. tcpdump on the
/// veth keeps each packet's headers and option only (snap length 200) and its length on the
/// wire: some are far above the MTU, and each of those carries an S-framed `tcp_bth` option
/// for a data message of the transfer, placed (both SYNs are in the capture) inside it.
fn s_framed_super_segments_cross_the_veth_whole() {
    const MSG: u32 = 1 << 20;
    let cfg = PerfConfig {
        op: PerfOp::Send,
        size: MSG,
        count: 16,
        mode: RunMode::verified(),
        framing: Framing::Seq,
        ..PerfConfig::default()
    };
    // Headers and option only.
    let (cleanup, said) = capture_perf("g", Offload::Segmentation, 200, &cfg);
    let file = &cleanup.0;
    let a = analyze_file(file).expect("read capture");
    assert!(a.error.is_none(), "capture read error: {:?}", a.error);
    let largest = a.records.iter().map(|(d, _)| d.wire_len).max().unwrap_or(0);
    // Link type Ethernet: the wire length counts 14 bytes of it beside the IP packet.
    let supers: Vec<_> = a
        .records
        .iter()
        .map(|(d, _)| d)
        .filter(|d| d.wire_len > 30_000)
        .collect();
    eprintln!(
        "{} of {} packets above 30,000 bytes, largest {largest}; tcpdump: {}",
        supers.len(),
        a.records.len(),
        said.trim().replace('\n', "; ")
    );
    assert!(
        !supers.is_empty(),
        "no super-segment on the veth (largest packet {largest} bytes)"
    );
    for d in supers {
        let seg = d.segment().expect("a TCP segment");
        assert!(seg.truncated, "frame {}: kept to the snap length", d.frame);
        assert_eq!(
            seg.src.ip(),
            topology::B_STACK,
            "frame {}: the client's",
            d.frame
        );
        let bth = seg.bth().expect("a tcp_bth option");
        assert!(bth.seq_framed, "frame {}: S framing", d.frame);
        let data = seg.data.expect("a data segment");
        assert_eq!(data.class, MsgClass::Send, "frame {}", d.frame);
        let sf = data.seq.expect("S framing");
        assert_eq!(
            sf.msg_len, MSG,
            "frame {}: a message of the transfer",
            d.frame
        );
        let at = data.offset.expect("placed: the SYN is in the capture");
        assert!(
            u64::from(at) + u64::from(seg.payload_len) <= u64::from(MSG),
            "frame {}: {} bytes at offset {at} inside the message",
            d.frame,
            seg.payload_len
        );
    }
    assert_eq!(a.summary.malformed, 0);
}

bth_tests::test_main!(
    capture_of_a_bth_transfer_decodes_to_what_was_sent[NetAdmin, Tcpdump],
    capture_of_an_s_framed_transfer_decodes_to_what_was_sent[NetAdmin, Tcpdump],
    tshark_reads_a_tun_capture_like_the_decoder[NetAdmin, Tcpdump, Tshark],
    tshark_reads_an_s_framed_tun_capture_like_the_decoder[NetAdmin, Tcpdump, Tshark],
    s_framed_super_segments_cross_the_veth_whole[NetAdmin, Tcpdump],
);
