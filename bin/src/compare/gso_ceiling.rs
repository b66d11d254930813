//! The path's ceiling for super-segments: what the comparison's topology carries from A's
//! stack TUN device to B's when a sender writes TCP-shaped GSO packets of up to 64 KiB, as our
//! stack in S framing does (`Stack::OursSeq`), and no TCP runs.
//!
//! The raw probe ([`super::path_ceiling`]) writes MTU-sized packets of IP protocol 253: a
//! super-packet of that protocol is dropped at the veth (the kernel segments TCP and UDP
//! only), so this probe's packets are TCP-shaped: an IPv4 header (protocol 6, DF), a TCP
//! header of 60 bytes (20 and a 40-byte option area of NOPs, as our segments carry the
//! `tcp_bth` option area; ACK set, fixed ports), and as many whole segments of
//! [`payload_per_packet`] bytes as fit in one IPv4 packet (46 at MTU 1500: 65,320 bytes;
//! one at 65000, where the kernel takes it as a plain packet), behind a virtio-net header
//! that says GSO TCPv4 with that `gso_size`, `NEEDS_CSUM` at the TCP checksum and the
//! pseudo-header sum in it. Cut at `gso_size`, each segment is an MTU-sized packet, the size
//! of one of our full segments. Both stack TUN devices have TSO (`Offload::Segmentation`, the
//! topology's offload in the GSO probe's runs): the kernel forwards a super-packet whole over
//! veth into B's device, which hands it over whole; through the relay, the relay cuts it
//! where the link treats its segments differently.
//!
//! B's receiver is the raw probe's (`path_ceiling::receive`: the same io_uring driver,
//! window, polling and flow control), counting each packet's segments from its length and its
//! TCP sequence number (bytes from the first, wrapped at 2^32 and unwrapped against the
//! highest seen).
//!
//! The sender writes with `write(2)` on A's TUN device, not through the driver: the driver
//! writes the virtio-net header of a packet it is handed itself (`Driver::send_in_place`
//! says no GSO), and only the stack's own transmit path (`poll_transmit_gather`) sets a
//! `gso_size`. The kernel's work per packet is the same (`tun_get_user`: the header, then one
//! copy of the packet into the socket buffer; io_uring runs the driver's TUN writes inline, in
//! its own `io_uring_enter`); what differs is one system call per write, about 46 segments'
//! worth at MTU 1500, where the driver submits several writes per call. The packet is built
//! once, and each write changes only the TCP sequence number (the pseudo-header sum does not
//! cover it): no user-space copy of the payload, as ours sends a message's bytes.

use super::path_ceiling::{
    payload_per_packet, Arrival, CeilingSpec, PathCeiling, Probe, HELD_PAUSE, IN_FLIGHT, IP_HEADER,
    MEASURING, STOP,
};
use super::AckClock;
use bth_io::tun::gso::{VnetHdr, F_NEEDS_CSUM, GSO_NONE, GSO_TCPV4, VNET_HDR_LEN};
use bth_io::tun::{Offload, MAX_MTU};
use bth_perf::tunpair::thread_cpu;
use bth_testbed::topology::{TwoNs, A_STACK, B_STACK};
use etherparse::{IpNumber, Ipv4Header};
use std::io;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};
use tcp_bth::wire::{checksum, IpPair};

/// The probe's TCP header: 20 bytes and a 40-byte option area of NOPs.
pub const TCP_HEADER: usize = 60;
/// Its ports (any: nothing listens, the packets are forwarded).
const SRC_PORT: u16 = 40_000;
const DST_PORT: u16 = 9;
/// Where the TCP sequence number sits in the IP packet.
const SEQ_AT: usize = IP_HEADER + 4;

/// Payload bytes of one super-packet at `mtu`: as many whole segments of
/// [`payload_per_packet`] as fit in the largest IPv4 packet with the probe's headers.
pub fn super_payload(mtu: u32) -> usize {
    let seg = payload_per_packet(mtu) as usize;
    let room = MAX_MTU as usize - IP_HEADER - TCP_HEADER;
    room / seg * seg
}

/// The whole write: virtio-net header, IPv4 and TCP headers, [`super_payload`] bytes of
/// payload (a counting pattern; the receiver does not look at it), sequence number 0.
pub fn super_packet(mtu: u32) -> Vec<u8> {
    let (seg, payload) = (payload_per_packet(mtu), super_payload(mtu));
    let tcp_len = TCP_HEADER + payload;
    let mut ip = Ipv4Header::new(
        tcp_len as u16,
        64,
        IpNumber::TCP,
        A_STACK.octets(),
        B_STACK.octets(),
    )
    .expect("a super-packet fits an IPv4 packet");
    ip.header_checksum = ip.calc_header_checksum();
    let mut p = vec![0u8; VNET_HDR_LEN + IP_HEADER + tcp_len];
    let pkt = &mut p[VNET_HDR_LEN..];
    pkt[..IP_HEADER].copy_from_slice(&ip.to_bytes());
    {
        let tcp = &mut pkt[IP_HEADER..IP_HEADER + TCP_HEADER];
        tcp[0..2].copy_from_slice(&SRC_PORT.to_be_bytes());
        tcp[2..4].copy_from_slice(&DST_PORT.to_be_bytes());
        // Sequence 0, acknowledgment 0; 15 words of header; ACK; the largest window.
        tcp[12] = ((TCP_HEADER / 4) as u8) << 4;
        tcp[13] = 0x10;
        tcp[14..16].copy_from_slice(&u16::MAX.to_be_bytes());
        tcp[20..].fill(1);
    }
    for (i, b) in pkt[IP_HEADER + TCP_HEADER..].iter_mut().enumerate() {
        *b = i as u8;
    }
    // The pseudo-header sum over the whole super-packet's TCP length: whoever cuts it
    // adjusts it per segment, and whoever delivers a segment may finish it.
    let ips = IpPair::V4 {
        src: A_STACK.octets(),
        dst: B_STACK.octets(),
    };
    let sum = checksum::partial(ips, tcp_len).expect("a super-packet's TCP length fits");
    let at = IP_HEADER + checksum::TCP_CHECKSUM_OFFSET;
    pkt[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    // One segment (MTU 32,768 and up) is a plain packet, as our stack writes it: the kernel
    // refuses a GSO packet no larger than its gso_size.
    let (gso_type, gso_size) = if payload > seg as usize {
        (GSO_TCPV4, seg as u16)
    } else {
        (GSO_NONE, 0)
    };
    let h = VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type,
        hdr_len: (IP_HEADER + TCP_HEADER) as u16,
        gso_size,
        csum_start: IP_HEADER as u16,
        csum_offset: checksum::TCP_CHECKSUM_OFFSET as u16,
    };
    p[..VNET_HDR_LEN].copy_from_slice(&h.to_bytes());
    p
}

/// The receiver's view of one packet: the sender's (IPv4 without options, TCP, its addresses
/// and ports, lengths that add up, payload in whole segments but for none) or not.
struct Classify {
    mtu: u32,
    seg: u64,
    /// The highest byte offset past a segment seen so far (unwraps the next sequence number).
    high: u64,
}

impl Classify {
    fn arrival(&mut self, p: &[u8]) -> Option<Arrival> {
        if p.len() < IP_HEADER + 20 || p[0] != 0x45 || p[9] != 6 {
            return None;
        }
        let (src, dst) = (&p[12..16], &p[16..20]);
        if src != A_STACK.octets() || dst != B_STACK.octets() {
            return None;
        }
        let tcp = &p[IP_HEADER..];
        let ports = [SRC_PORT.to_be_bytes(), DST_PORT.to_be_bytes()].concat();
        let doff = usize::from(tcp[12] >> 4) * 4;
        let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
        if tcp[..4] != ports[..]
            || doff != TCP_HEADER
            || total != p.len()
            || p.len() < IP_HEADER + doff
        {
            return None;
        }
        let payload = (p.len() - IP_HEADER - doff) as u64;
        if payload == 0 {
            return None;
        }
        let seq = u32::from_be_bytes([p[SEQ_AT], p[SEQ_AT + 1], p[SEQ_AT + 2], p[SEQ_AT + 3]]);
        // Unwrapped against the highest seen: the sender keeps a few MiB ahead at most.
        let d = i64::from(seq.wrapping_sub(self.high as u32) as i32);
        let start = (self.high as i64 + d).max(0) as u64;
        let end = start + payload;
        self.high = self.high.max(end);
        let segments = payload.div_ceil(self.seg);
        Some(Arrival {
            segments,
            ip_bytes: segments * u64::from(self.mtu),
            next_seq: end.div_ceil(self.seg),
        })
    }
}

/// Segments the sender may be ahead of the receiver: the raw probe's [`IN_FLIGHT`], or 16
/// super-packets where that is more (MTU 1500: 736 segments, about 1 MB). The receiving
/// device's queue holds 500 packets, whole super-packets each.
fn in_flight(mtu: u32) -> u64 {
    let per_super = super_payload(mtu) as u64 / u64::from(payload_per_packet(mtu));
    IN_FLIGHT.max(16 * per_super)
}

/// Measure the path's ceiling for super-segments in `ns` at its MTU: a sender on A's stack
/// TUN device, a receiver on B's, both with TSO (the topology's offload must be
/// `Offload::Segmentation`). Needs CAP_NET_ADMIN.
pub fn measure_gso(ns: &TwoNs, spec: &CeilingSpec) -> io::Result<PathCeiling> {
    let (mtu, offload) = (ns.mtu, ns.offload);
    if offload != Offload::Segmentation {
        return Err(io::Error::other(format!(
            "the GSO ceiling needs stack TUN devices with TSO, not {offload:?}"
        )));
    }
    let seg = u64::from(payload_per_packet(mtu));
    let probe = Probe {
        what: "GSO ceiling",
        threads: ("bth-ceilg-rx", "bth-ceilg-tx"),
        acks: AckClock::None,
    };
    let (cpu, mut out) = probe.run(
        ns,
        spec,
        move || {
            let mut c = Classify { mtu, seg, high: 0 };
            move |p: &[u8]| c.arrival(p)
        },
        move |tun, phase, arrived, limit| send(&tun, mtu, phase, arrived, limit),
    )?;
    out.sender_cpu_s = cpu.as_secs_f64();
    out.gso_size = Some(seg as u32);
    Ok(out)
}

/// Write super-packets to `tun` while at most [`in_flight`] segments ahead of the receiver,
/// until it says stop (or `limit` passes); the thread's CPU over the measured window.
fn send(
    tun: &bth_io::tun::TunDevice,
    mtu: u32,
    phase: &AtomicU8,
    arrived: &AtomicU64,
    limit: Duration,
) -> io::Result<Duration> {
    let mut pkt = super_packet(mtu);
    let seg = u64::from(payload_per_packet(mtu));
    let per_super = super_payload(mtu) as u64 / seg;
    let ahead = in_flight(mtu);
    let seq_at = VNET_HDR_LEN + SEQ_AT;
    let (mut next, mut cpu0) = (0u64, None);
    let until = Instant::now() + limit;
    loop {
        match phase.load(Ordering::Relaxed) {
            MEASURING => {
                cpu0.get_or_insert_with(thread_cpu);
            }
            STOP => break,
            _ => {}
        }
        if next.saturating_sub(arrived.load(Ordering::Relaxed)) + per_super > ahead {
            if Instant::now() >= until {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the receiver did not finish in time",
                ));
            }
            std::thread::sleep(HELD_PAUSE);
            continue;
        }
        // The byte offset of the first segment, as TCP numbers bytes (wrapping at 2^32).
        let seq = (next * seg) as u32;
        pkt[seq_at..seq_at + 4].copy_from_slice(&seq.to_be_bytes());
        // SAFETY: write(2) of a buffer we own, of its length, to a descriptor the device owns.
        let n = unsafe { libc::write(tun.raw_fd(), pkt.as_ptr().cast(), pkt.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("writing a super-packet: {e}"),
            ));
        }
        next += per_super;
    }
    let end = thread_cpu();
    Ok(cpu0.map_or(Duration::ZERO, |c| end.saturating_sub(c)))
}

/// Whether `ip` is a packet a GSO probe at `mtu` would count, and as how many segments (for
/// tests: the receiver's own rule).
#[cfg(test)]
fn segments_of(mtu: u32, ip: &[u8]) -> Option<u64> {
    let seg = u64::from(payload_per_packet(mtu));
    Classify { mtu, seg, high: 0 }
        .arrival(ip)
        .map(|a| a.segments)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bth_io::tun::gso::GsoPacket;

    /// The super-packet parses as the kernel's own GSO TCPv4 packets do (the relay's parser:
    /// lengths, partial checksum at the TCP checksum), stands for whole segments of ours'
    /// payload size that are each exactly an MTU on the wire, and every one of them, cut as
    /// the kernel cuts, carries a valid TCP checksum once finished.
    #[test]
    fn the_super_packet_is_a_gso_tcp_packet_of_whole_mtu_sized_segments() {
        for (mtu, segs) in [(1500u32, 46usize), (4096, 16), (9000, 7), (65_000, 1)] {
            let p = super_packet(mtu);
            assert_eq!(super_payload(mtu), segs * payload_per_packet(mtu) as usize);
            assert!(p.len() - VNET_HDR_LEN <= MAX_MTU as usize, "MTU {mtu}");
            let h = VnetHdr::parse(&p).expect("header");
            if segs == 1 {
                // One segment: a plain packet of the MTU, its checksum left to the device.
                assert_eq!((h.gso_type, h.gso_size), (GSO_NONE, 0));
                assert!(h.needs_csum());
                assert_eq!(p.len() - VNET_HDR_LEN, mtu as usize);
                assert_eq!(segments_of(mtu, &p[VNET_HDR_LEN..]), Some(1));
                continue;
            }
            assert_eq!(h.gso_type, GSO_TCPV4);
            let g = GsoPacket::parse(&p).unwrap_or_else(|e| panic!("MTU {mtu}: {e}"));
            assert_eq!(g.segments(), segs, "MTU {mtu}");
            assert_eq!(g.header_len(), IP_HEADER + TCP_HEADER);
            // Each segment cut from it is MTU bytes of IP packet.
            for i in 0..segs {
                assert_eq!(g.run_wire_len(i, i + 1), mtu as usize, "MTU {mtu} seg {i}");
            }
            let mut one = Vec::new();
            g.build_run(segs - 1, segs, &mut one)
                .expect("the last segment");
            let ip = &one[VNET_HDR_LEN..];
            assert_eq!(ip.len(), mtu as usize);
            let h = VnetHdr::parse(&one).expect("header");
            let mut done = one.clone();
            if h.needs_csum() {
                bth_io::tun::gso::complete_checksum(&mut done).expect("finished");
            }
            let ips = IpPair::V4 {
                src: A_STACK.octets(),
                dst: B_STACK.octets(),
            };
            assert!(
                checksum::verify(ips, &done[VNET_HDR_LEN + IP_HEADER..]),
                "MTU {mtu}"
            );
            // The receiver counts the whole packet and the cut segment alike.
            assert_eq!(segments_of(mtu, &p[VNET_HDR_LEN..]), Some(segs as u64));
            assert_eq!(segments_of(mtu, ip), Some(1));
        }
    }

    /// The receiver's sequence numbers are bytes, wrapped at 2^32 and unwrapped against the
    /// highest seen, so the window's segments and losses count right past the wrap; other
    /// packets (another protocol, another port) are foreign.
    #[test]
    fn sequence_numbers_unwrap_past_two_to_the_32() {
        let mtu = 1500;
        let seg = u64::from(payload_per_packet(mtu));
        let mut c = Classify { mtu, seg, high: 0 };
        let mut p = super_packet(mtu)[VNET_HDR_LEN..].to_vec();
        let per = super_payload(mtu) as u64 / seg;
        let mut n = 0u64;
        while n * seg < (1u64 << 32) + 10 * super_payload(mtu) as u64 {
            let seq = (n * seg) as u32;
            p[SEQ_AT..SEQ_AT + 4].copy_from_slice(&seq.to_be_bytes());
            let a = c.arrival(&p).expect("the sender's");
            assert_eq!(a.segments, per);
            assert_eq!(a.next_seq, n + per, "at segment {n}");
            n += per;
        }
        let mut other = p.clone();
        other[9] = 17;
        assert!(c.arrival(&other).is_none());
        let mut other = p.clone();
        other[IP_HEADER + 2] ^= 1;
        assert!(c.arrival(&other).is_none());
    }
}
