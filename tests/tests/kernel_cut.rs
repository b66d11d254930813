//! The kernel's own segmentation as the judge of both framings (issue #36), with none of our
//! stack's connection logic: ONE TCP-shaped GSO super-packet carrying one message of
//! [`SEGMENTS`] full segments and one `tcp_bth` option is written into A's stack TUN device
//! (TSO, virtio-net header: GSO TCPv4, `gso_size` the payload per full segment), and B's stack
//! TUN device, opened without offload, gets what the kernel cut from it: MTU-sized segments,
//! each with a copy of the one TCP header, option included, and its own TCP checksum.
//!
//! Those segments are written to a pcap file and judged by the project's decoder
//! ([`bth_capture::analyze_file`]) and codec:
//! * per-segment framing (the first segment's option: offset 0, segment index 0, ICRC over the
//!   first segment's payload, what a per-segment sender would hand to GSO if it wrongly did):
//!   every segment but the first is refused by its ICRC, and the option's offset disagrees
//!   with the sequence number of every one but the first;
//! * S framing (amendment 3: anchor, message length, no ICRC, as our S sender writes it): no
//!   segment is malformed or fails a check, each carries the option unchanged, and the
//!   placement offsets its sequence numbers give through the anchor put every byte where the
//!   message has it.

use bth_capture::{analyze_file, stream_offset, Analysis, Icrc, PcapWriter};
use bth_io::tun::gso::{VnetHdr, GSO_TCPV4};
use bth_io::tun::{Offload, TunDevice};
use bth_testbed::topology::{self, TwoNs, A_STACK, B_STACK};
use bth_tests::pattern;
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tcp_bth::endpoint::{emit_ip, parse_ip};
use tcp_bth::wire::{
    Bth, ChecksumFill, Inbound, IpPair, Opcode, TcpFlags, TcpOptions, TcpRepr, Timestamps,
    MAX_MESSAGE_LEN,
};

const MTU: u32 = topology::DEFAULT_MTU;
/// Full segments in the one message (and the one super-packet): about 64 KiB of payload.
const SEGMENTS: usize = 45;
/// A's ISN: the message's sequence numbers wrap past 2^32 inside it.
const ISN: u32 = u32::MAX - 30_000;
/// Stream offset of the message's first byte: past 2^24, so its anchor (mod 2^24) is 5,000.
const START: u32 = (1 << 24) + 5_000;
const MSN: u16 = 7;
const SRC_PORT: u16 = 40_000;
const DST_PORT: u16 = 4791;

fn ips() -> IpPair {
    IpPair::V4 {
        src: A_STACK.octets(),
        dst: B_STACK.octets(),
    }
}

/// Payload bytes per full segment: IPv4 and TCP headers with the 40-byte option area and
/// this fit the MTU (1,420 at MTU 1500, what the stack sends).
fn gso_size() -> usize {
    // The MTU less the IPv4 and TCP headers (40) and the tcp_bth option area (40): what our
    // stack puts in one full segment (bth-compare's `path_ceiling::payload_per_packet`).
    (MTU - 40) as usize - tcp_bth::wire::MAX_OPTIONS_LEN
}

/// The message's bytes.
fn message() -> Vec<u8> {
    pattern(36, SEGMENTS * gso_size())
}

/// The whole write: virtio-net header (GSO TCPv4 at [`gso_size`], the TCP checksum left to
/// whoever cuts it, the pseudo-header sum in it), IPv4 header, TCP header with `bth` as its
/// only option (emitted by the codec), and the message as payload, its first byte at stream
/// offset [`START`].
fn super_packet(bth: Bth, payload: &[u8]) -> Vec<u8> {
    let tcp = TcpRepr {
        src_port: SRC_PORT,
        dst_port: DST_PORT,
        seq: ISN.wrapping_add(1).wrapping_add(START),
        ack: 1,
        flags: TcpFlags::ACK,
        window: u16::MAX,
        urgent: 0,
        options: TcpOptions {
            bth: Some(bth),
            ..TcpOptions::default()
        },
        payload,
    };
    let mut seg = vec![0u8; tcp.header_len() + payload.len()];
    seg[tcp.header_len()..].copy_from_slice(payload);
    tcp.emit_header(ips(), &mut seg, ChecksumFill::Partial)
        .expect("the TCP header");
    let mut ip = Vec::new();
    emit_ip(ips(), &seg, &mut ip);
    let mut h = VnetHdr::for_packet(&ip, Some(20));
    h.gso_type = GSO_TCPV4;
    h.gso_size = gso_size() as u16;
    [&h.to_bytes()[..], &ip].concat()
}

/// Removes the capture file on drop.
struct Cleanup(PathBuf);
impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A stack TUN device of the topology, made on a thread of its own (making it enters the
/// namespace).
fn device(ns: &TwoNs, side_a: bool, offload: Offload) -> TunDevice {
    let name = if side_a { ns.a.clone() } else { ns.b.clone() };
    std::thread::spawn(move || topology::stack_tun_mtu(&name, side_a, MTU, offload))
        .join()
        .expect("device thread")
        .expect("stack TUN device")
}

/// Write `packet` (virtio-net header first) into A's stack device, which has TSO, and return
/// the IP packets from A's stack that B's stack device, without offload, reads: everything
/// until `payload` bytes of TCP payload have come and 100 ms more, or until 5 s have passed.
/// Other packets (IPv6 router solicitations and the like) are skipped.
fn cut_by_the_kernel(tag: &str, packet: &[u8], payload: usize) -> Vec<Vec<u8>> {
    static RUN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = RUN.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let ns =
        TwoNs::create(&format!("bk{tag}{}x{n}", std::process::id()), None).expect("namespaces");
    let a = device(&ns, true, Offload::Segmentation);
    let b = device(&ns, false, Offload::None);
    // SAFETY: write(2) of a buffer we own, of its length, to a descriptor the device owns.
    let wrote = unsafe { libc::write(a.raw_fd(), packet.as_ptr().cast(), packet.len()) };
    assert_eq!(
        wrote,
        packet.len() as isize,
        "writing the super-packet: {}",
        io::Error::last_os_error()
    );
    let (mut got, mut seen) = (Vec::new(), 0usize);
    let mut until = Instant::now() + Duration::from_secs(5);
    let mut buf = vec![0u8; 1 << 17];
    while Instant::now() < until {
        let mut pfd = libc::pollfd {
            fd: b.raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll(2) on one pollfd we own.
        if unsafe { libc::poll(&mut pfd, 1, 50) } <= 0 {
            continue;
        }
        // SAFETY: read(2) into a buffer we own, at most its length.
        let r = unsafe { libc::read(b.raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        assert!(r >= 0, "reading B's device: {}", io::Error::last_os_error());
        let p = &buf[..r as usize];
        match parse_ip(p) {
            Ok((pair, tcp)) if pair == ips() && tcp.len() >= 20 => {
                let before = seen;
                seen += tcp.len() - usize::from(tcp[12] >> 4) * 4;
                got.push(p.to_vec());
                if before < payload && seen >= payload {
                    // All of it: anything more (a copy, a whole super-packet) would come now.
                    until = Instant::now() + Duration::from_millis(100);
                }
            }
            _ => continue,
        }
    }
    got
}

/// The packets, as B's device delivered them, in a pcap file, and what the decoder says of
/// it.
fn analyzed(tag: &str, packets: &[Vec<u8>]) -> Analysis {
    let file = std::env::temp_dir().join(format!("bth-kcut-{tag}-{}.pcap", std::process::id()));
    let _cleanup = Cleanup(file.clone());
    let mut w = PcapWriter::create(&file).expect("capture file");
    for (i, p) in packets.iter().enumerate() {
        let (pair, tcp) = parse_ip(p).expect("an IP packet");
        w.write_tcp(Duration::from_millis(i as u64), pair, tcp)
            .expect("write");
    }
    w.finish().expect("flush");
    let a = analyze_file(&file).expect("read capture");
    assert!(a.error.is_none(), "capture read error: {:?}", a.error);
    a
}

/// `bth` and `data` as one super-packet through the kernel: the segments B's device read, and
/// what the decoder says of them. The kernel must have cut it into [`SEGMENTS`] segments of
/// one MTU at most each (none reaches B whole), each a data segment of the one message with a
/// good TCP checksum and the option as written, well formed.
fn judged(tag: &str, bth: Bth, data: &[u8]) -> (Vec<Vec<u8>>, Analysis) {
    let cut = cut_by_the_kernel(tag, &super_packet(bth, data), data.len());
    assert_eq!(
        cut.len(),
        SEGMENTS,
        "segments B's device read (lengths {:?})",
        cut.iter().map(Vec::len).collect::<Vec<_>>()
    );
    for p in &cut {
        let (_, tcp) = parse_ip(p).expect("an IP packet");
        assert!(p.len() <= MTU as usize, "{} bytes reached B whole", p.len());
        assert!(tcp.len() > gso_size(), "one full segment each");
    }
    let a = analyzed(tag, &cut);
    let s = &a.summary;
    assert_eq!(
        (s.data_segments, s.malformed, s.checksum_errors, s.messages),
        (SEGMENTS as u64, 0, 0, 1)
    );
    for (d, _) in &a.records {
        let seg = d.segment().expect("a TCP segment");
        assert_eq!(
            seg.bth(),
            Some(&bth),
            "frame {}: the option copied",
            d.frame
        );
    }
    eprintln!(
        "{tag}: {} segments cut, {} ICRC errors",
        cut.len(),
        a.summary.icrc_errors
    );
    (cut, a)
}

/// Each segment's TCP view with its checksum checked, its option, and the stream offset of its
/// first payload byte.
fn segments(cut: &[Vec<u8>]) -> Vec<(TcpRepr<'_>, Bth, u32)> {
    cut.iter()
        .map(|p| {
            let (pair, tcp) = parse_ip(p).expect("an IP packet");
            let t = TcpRepr::parse(tcp, Some(pair)).expect("a TCP segment, checksum good");
            let bth = t.options.bth.expect("the tcp_bth option in every segment");
            let at = stream_offset(t.seq, ISN);
            (t, bth, at)
        })
        .collect()
}

fn timestamps() -> Option<Timestamps> {
    Some(Timestamps {
        tsval: 1_000,
        tsecr: 2_000,
    })
}

/// Per-segment framing handed to GSO: each cut segment carries the first segment's option,
/// whose ICRC covers the first segment's payload only, so the decoder refuses every other
/// segment by its ICRC (and the offset field, 0 in every copy, agrees with no other
/// segment's sequence number). Nothing is malformed: each copy is a well-formed option.
fn per_segment_framing_cut_by_the_kernel_fails_its_icrc() {
    let data = message();
    let mut bth = Bth::new(Opcode::SendFirst);
    bth.msn = MSN;
    bth.timestamps = timestamps();
    // Offset 0, segment index 0, the ICRC over the first segment's payload.
    bth.seal(&data[..gso_size()]);
    let (cut, a) = judged("per-segment", bth, &data);
    assert_eq!(a.summary.s_data_segments, 0);
    let n = SEGMENTS as u64;
    assert_eq!(a.summary.icrc_errors, n - 1, "all but the first refused");
    let first = ISN.wrapping_add(1).wrapping_add(START);
    for seg in a.records.iter().filter_map(|(d, _)| d.segment()) {
        let want = if seg.seq == first {
            Icrc::Good
        } else {
            Icrc::Bad
        };
        assert_eq!(seg.icrc(), Some(want), "seq {}", seg.seq);
    }
    let m = a.messages.values().next().expect("the message");
    assert_eq!(m.misplaced, n - 1, "offset 0 fits the first only");
    // The codec reads every copy as the message's first segment.
    for (t, bth, _) in segments(&cut) {
        let i = Inbound::from_bth(&bth, t.payload).expect("a well-formed option");
        assert_eq!(i.offset, 0);
        assert_eq!(bth.icrc_ok(t.payload), t.seq == first);
    }
}

/// S framing handed to GSO: every cut segment is correct as it is, placed by its sequence
/// number through the anchor.
fn s_framing_cut_by_the_kernel_is_placed_whole() {
    let data = message();
    let mut bth = Bth::new(Opcode::SendOnly);
    bth.seq_framed = true;
    bth.msn = MSN;
    bth.timestamps = timestamps();
    bth.mbo = START & MAX_MESSAGE_LEN;
    bth.icrc = data.len() as u32;
    let (cut, a) = judged("s", bth, &data);
    let s = &a.summary;
    let n = SEGMENTS as u64;
    assert_eq!(s.icrc_errors, 0);
    // Every data segment S-framed; no SYN in this capture, so the decoder leaves their
    // placement offsets unknown rather than guess (they are placed below, from A's ISN).
    assert_eq!((s.s_data_segments, s.s_offsets_unknown), (n, n));
    for seg in a.records.iter().filter_map(|(d, _)| d.segment()) {
        assert_eq!(seg.icrc(), Some(Icrc::NotApplicable), "seq {}", seg.seq);
        let sf = seg.data.and_then(|x| x.seq).expect("S framing");
        assert_eq!((sf.anchor, sf.msg_len), (5_000, data.len() as u32));
    }
    let m = a.messages.values().next().expect("the message");
    assert_eq!(m.len, Some(data.len() as u64));
    // Placed as a receiver that knows A's ISN places them: every byte where the message has
    // it, every full segment once, the last one ending the message.
    let mut offsets = Vec::new();
    let mut last = 0;
    for (t, bth, at) in segments(&cut) {
        let i = Inbound::from_seq(&bth, t.payload, u64::from(at)).expect("placed");
        let o = i.offset as usize;
        assert_eq!(
            i.payload,
            &data[o..o + i.payload.len()],
            "bytes at offset {o}"
        );
        offsets.push(o);
        last += usize::from(i.last);
    }
    offsets.sort();
    let want: Vec<usize> = (0..SEGMENTS).map(|k| k * gso_size()).collect();
    assert_eq!(offsets, want);
    assert_eq!(last, 1, "one segment ends the message");
}

bth_tests::test_main!(
    per_segment_framing_cut_by_the_kernel_fails_its_icrc[NetAdmin],
    s_framing_cut_by_the_kernel_is_placed_whole[NetAdmin],
);
