//! `bth`'s command line without root: the demo refuses what would run nothing, fail only at
//! its end or mean something else than asked, and `decode` says what the input is taken as
//! and what to try instead, and fails a segment whose ICRC is wrong.

use std::process::Command;
use tcp_bth::wire::{Bth, IpPair, Opcode, TcpFlags, TcpOptions, TcpRepr, Timestamps};

const BIN: &str = env!("CARGO_BIN_EXE_bth");

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(BIN).args(args).output().expect("run bth");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_demo_refuses_no_messages_and_an_unwritable_capture_before_it_runs() {
    let (ok, out, err) = run(&["demo", "--messages", "0"]);
    assert!(!ok && err.contains("--messages 0"), "{out}{err}");
    let (ok, out, err) = run(&["demo", "--pcap", "/nonexistent-dir/x.pcap"]);
    assert!(
        !ok && err.contains("--pcap /nonexistent-dir/x.pcap"),
        "{err}"
    );
    assert!(
        !out.contains("messages verified"),
        "ran before refusing: {out}"
    );
}

/// A smallest message of 0 bytes is refused (it used to become 1 without a word), and a
/// negative probability is refused for its range, not taken for an unknown option `-0`.
#[test]
fn the_demo_refuses_a_zero_min_size_and_a_negative_loss_saying_why() {
    let (ok, out, err) = run(&["demo", "--min-size", "0"]);
    assert!(!ok && err.contains("1 <= --min-size"), "{out}{err}");
    let (ok, out, err) = run(&["demo", "--loss", "-0.5"]);
    assert!(!ok && err.contains("within [0, 1], got -0.5"), "{out}{err}");
}

#[test]
fn decode_says_what_to_try_and_when_an_option_area_is_only_padding() {
    // An option area (timestamps) decoded as one option: refused, with the flags to try.
    let (ok, _, err) = run(&["decode", "0101080a0000000100000002"]);
    assert!(
        !ok && err.contains("--options") && err.contains("--segment"),
        "{err}"
    );
    let (ok, out, err) = run(&["decode", "--options", "0101080a0000000100000002"]);
    assert!(
        ok && out.contains("timestamps") && out.ends_with('\n'),
        "{out}{err}"
    );
    let (ok, out, err) = run(&["decode", "--options", "0101"]);
    assert!(
        ok && out.contains("no options (only padding)"),
        "{out}{err}"
    );
}

const SRC: [u8; 4] = [10, 0, 0, 1];
const DST: [u8; 4] = [10, 0, 0, 2];

/// A per-segment SEND_ONLY data segment with its ICRC sealed over its 32-byte payload and a
/// correct TCP checksum for `SRC` → `DST`, as hex; with `swap`, the payload's first two
/// aligned 16-bit words swapped afterwards (the relay's `--relay-swap`): the TCP checksum
/// still holds, the ICRC no longer does.
fn send_only_segment(swap: bool, ip: IpPair) -> String {
    let payload: Vec<u8> = (0u8..32).collect();
    let mut bth = Bth::new(Opcode::SendOnly);
    bth.msn = 7;
    bth.timestamps = Some(Timestamps {
        tsval: 1000,
        tsecr: 900,
    });
    bth.seal(&payload);
    let seg = TcpRepr {
        src_port: 50000,
        dst_port: 4791,
        seq: 1_000_000,
        ack: 2_000_000,
        flags: TcpFlags::ACK,
        window: 512,
        urgent: 0,
        options: TcpOptions {
            bth: Some(bth),
            ..TcpOptions::default()
        },
        payload: &payload,
    };
    let mut buf = vec![0u8; 128];
    let n = seg.emit(ip, &mut buf).expect("emit");
    buf.truncate(n);
    if swap {
        let p = n - payload.len();
        buf.swap(p, p + 2);
        buf.swap(p + 1, p + 3);
    }
    hex::encode(buf)
}

/// `decode --segment` prints a per-segment option's ICRC check and exits 0 only when it
/// matches: a segment whose ICRC is wrong for its payload is still decoded in full, says
/// `MISMATCH`, and exits 1 with the reason on stderr, also when its TCP checksum is right.
#[test]
fn decode_segment_exits_non_zero_when_the_icrc_does_not_match() {
    const SRC6: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    const DST6: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    let v4 = IpPair::V4 { src: SRC, dst: DST };
    let v6 = IpPair::V6 {
        src: SRC6,
        dst: DST6,
    };
    // The addresses the checksum is checked against (none: no check); `--ipv4` is the
    // older name of `--ip`.
    for (ip, flag) in [
        (v4, None),
        (v4, Some(("--ipv4", "10.0.0.1,10.0.0.2"))),
        (v6, Some(("--ip", "2001:db8::1,2001:db8::2"))),
    ] {
        let with_ip = flag.is_some();
        let args = |hex: &str| {
            let mut a = vec![
                "decode".to_string(),
                "--segment".to_string(),
                hex.to_string(),
            ];
            if let Some((f, v)) = flag {
                a.extend([f.to_string(), v.to_string()]);
            }
            a
        };
        let good = args(&send_only_segment(false, ip));
        let good: Vec<&str> = good.iter().map(String::as_str).collect();
        let (ok, out, err) = run(&good);
        assert!(ok, "good segment, --ipv4 {with_ip}: {out}{err}");
        assert!(
            out.contains("SEND_ONLY") && out.contains("icrc          ok"),
            "{out}"
        );
        assert_eq!(out.contains("checksum      ok"), with_ip, "{out}");

        let bad = args(&send_only_segment(true, ip));
        let bad: Vec<&str> = bad.iter().map(String::as_str).collect();
        let (ok, out, err) = run(&bad);
        assert!(!ok, "bad ICRC accepted, --ipv4 {with_ip}: {out}{err}");
        // Still decoded and printed in full: the option, and the TCP checksum that the swap
        // keeps right.
        assert!(
            out.contains("SEND_ONLY") && out.contains("icrc          MISMATCH"),
            "{out}"
        );
        assert_eq!(out.contains("checksum      ok"), with_ip, "{out}");
        assert!(err.contains("ICRC mismatch"), "{err}");
    }
}

/// Amendment 4: a SYN's hello without timestamps (T=0, 16 bytes) is decoded, alone and in an
/// option area beside the RFC 7323 timestamp option, as every tool shows it: T=0, no tsval
/// or tsecr in the option, the timestamps in the option beside it.
#[test]
fn decode_reads_a_t0_hello_beside_the_timestamp_option() {
    // CRC32C(00 FF 12 34 FF FF FF 00) = 0x84939265 (tcp-bth/wire/tests/known_answers.rs).
    let hello = "fe10efab00ff1234ffffff0084939265";
    let (ok, out, err) = run(&["decode", hello]);
    assert!(ok, "{err}");
    for want in [
        "opcode        HELLO (0xff)\n",
        "flags         T=0 M=0 R=0 A=0 S=0 rsvd=0\n",
        "msn           4660\n",
        "offset        16777215\n",
        "icrc          0x84939265\n",
        "timestamps    not in the hello (T=0)",
        "length        16 bytes\n",
    ] {
        assert!(out.contains(want), "{want:?} in {out}");
    }
    assert!(!out.contains("tsval"), "{out}");
    // MSS, window scale, SACK-permitted, timestamps (TSval 0x01020304), the hello, one EOL.
    let area = format!("020405b4 030307 0402 080a0102030400000000 {hello} 00");
    let (ok, out, err) = run(&["decode", "--options", &area]);
    assert!(ok, "{err}");
    assert!(
        out.contains("timestamps    val=16909060 ecr=0\ntcp_bth:\n  opcode        HELLO"),
        "{out}"
    );
    assert!(out.contains("  flags         T=0 "), "{out}");
    // A pure ACK without timestamps is still refused.
    let (ok, _, err) = run(&["decode", "fe10efab001100000000000000000000"]);
    assert!(
        !ok && err.contains("requires the timestamp fields"),
        "{err}"
    );
}

/// `--ip` takes two addresses of one family: a pair of an IPv4 and an IPv6 address is refused
/// with the reason, before any checksum is computed.
#[test]
fn decode_refuses_addresses_of_two_families() {
    let hex = send_only_segment(false, IpPair::V4 { src: SRC, dst: DST });
    let (ok, _, err) = run(&["decode", "--segment", &hex, "--ip", "10.0.0.1,2001:db8::2"]);
    assert!(!ok, "mixed families accepted");
    assert!(err.contains("different families"), "{err}");
}
