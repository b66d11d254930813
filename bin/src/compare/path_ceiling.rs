//! The path's ceiling: how fast the comparison's topology carries MTU-sized packets from our
//! stack's TUN device in namespace A to the one in B when no TCP is involved — the limit any
//! stack on this data path can reach at that MTU.
//!
//! The same [`TwoNs`] as the stacks' runs, at the cell's MTU, and the same io_uring driver
//! ([`Driver`], through [`PacketIo`] and [`Driver::send_in_place`]): a thread in A writes raw
//! IPv4 packets of exactly the MTU (protocol 253, RFC 3692's "for experimentation and testing";
//! from A's stack address to B's), each built in place in a transmit buffer (its header and
//! sequence number written, its payload not copied: ours sends a full segment's payload with
//! no user-space copy either), into A's stack TUN device as fast as [`PacketIo::can_send`] allows and at
//! most `IN_FLIGHT` (256) packets ahead of the highest the receiver has read; the kernel
//! forwards them A-TUN → veth (or relay) → B-TUN, where a thread in B reads and counts them.
//! The receiver measures: from its first packet it lets a warm-up pass (ARP, queues
//! filling), then counts the packets that arrive during the measured window on its own clock.
//! Each packet carries a sequence number, so the receiver also counts the packets the path
//! dropped in the window (a device queue overflowing when the receiver is the slower side).
//! Packets are checked by length, IP header and sequence number, not byte by byte: the
//! ceiling measures the path, not an application. Over veth the receiver polls its ring
//! without sleeping once packets flow, so the sender does not pay for waking it; its CPU
//! figure is then a core's worth by construction. Through the relay it sleeps between
//! batches like our stack's driver: the relay is a third busy thread on the machine, and a
//! polling receiver takes the core the relay needs ([`Poll`]).
//!
//! **Gbit/s** ([`PathCeiling::gbps`]) is comparable with `bth-compare`'s Gbit/s for the
//! stacks, which count message payload: packets × [`payload_per_packet`] (MTU − 40 bytes of
//! IPv4 and TCP header − 40 bytes of `tcp_bth` option area: what one full-MTU data segment of
//! ours carries). [`PathCeiling::ip_gbps`] counts whole IP packets. Kernel TCP puts MTU − 52
//! bytes into a segment (timestamps only) and, over veth, hands the path 64 KiB GSO
//! super-packets, so it can exceed this ceiling: the ceiling is that of one packet per MTU
//! through TUN devices, which is what our stack sends.
//!
//! **With an ACK clock** ([`AckClock::Every`]) the receiver also writes one [`ACK_LEN`]-byte
//! packet back to the sender for every second packet it reads, and the sender reads them:
//! the reverse traffic of a TCP receiver under the ACK policy (RFC 5681 §4.2, #12), still
//! with no TCP. Each of those is a TUN write and a forwarding through the path and a TUN read
//! at the other end, so on a path whose cost is per packet the ACK clock takes a share of it
//! that no stack obeying that policy gets back: the bare ceiling less that share is what such
//! a stack can reach.

use bth_io::tun::{Driver, TunDevice};
use bth_io::turn::PacketIo;
use bth_perf::drive::IPV4_TCP_HEADERS;
use bth_perf::tunpair::{stack_tun_mtu, thread_cpu};
use bth_testbed::ready::{join_both, spawn_set_up};
use bth_testbed::topology::{TwoNs, A_STACK, B_STACK};
use etherparse::{IpNumber, Ipv4Header};
use serde::Serialize;
use std::io;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// IP protocol number of the ceiling's packets (RFC 3692: experimentation and testing).
pub const PROTOCOL: u8 = 253;
/// IPv4 header without options.
pub(super) const IP_HEADER: usize = 20;
/// Where the sequence number sits: right after the IP header, 8 bytes big-endian.
const SEQ_AT: usize = IP_HEADER;
/// How long the receiver waits for the first packet before giving up.
const FIRST_PACKET_WITHIN: Duration = Duration::from_secs(5);

/// IP length of the ACK clock's packets: what a pure ACK of ours is on a clean path (IPv4 and
/// TCP headers, 40 bytes, and the timestamps option padded to 12: amendment 1's plain form,
/// with no SACK block while nothing is missing).
pub const ACK_LEN: usize = 52;

/// Whether the probe's receiver sends packets back ([`measure`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AckClock {
    /// One-way traffic only: the path's bare ceiling.
    None,
    /// One [`ACK_LEN`]-byte packet back for every `n` packets read.
    Every(u32),
}

/// Our receiver's ACK clock on a clean path: every second full-sized segment (`tcp_bth`'s
/// `conn/ack.rs`; about 0.5 ACKs per data segment measured over veth).
pub const OURS_ACK_CLOCK: AckClock = AckClock::Every(2);

/// How long one ceiling measurement runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CeilingSpec {
    /// From the first packet's arrival to the start of the measured window.
    pub warmup_ms: u32,
    /// The measured window.
    pub measure_ms: u32,
}

impl CeilingSpec {
    /// What `--dry-run` says about it.
    pub fn describe(&self) -> String {
        format!(
            "raw packets for {:.1} s after {:.1} s of warm-up",
            f64::from(self.measure_ms) / 1000.0,
            f64::from(self.warmup_ms) / 1000.0
        )
    }
}

/// Payload bytes our stack puts in one data segment of a full MTU: the MTU less the IPv4 and
/// TCP headers (40) and the `tcp_bth` option area (40, `tcp_bth::wire::MAX_OPTIONS_LEN`).
pub fn payload_per_packet(mtu: u32) -> u32 {
    mtu.saturating_sub(IPV4_TCP_HEADERS + tcp_bth::wire::MAX_OPTIONS_LEN as u32)
}

/// What one measurement saw at the receiver during the measured window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathCeiling {
    pub mtu: u32,
    /// Intact packets of the sender's that arrived in the window.
    pub packets: u64,
    /// Their bytes, IP headers included.
    pub ip_bytes: u64,
    /// Sequence numbers sent between the window's first and last arrival that never arrived
    /// (dropped on the path; the sender never retransmits).
    pub lost: u64,
    /// Other packets read from B's device in the window (not the sender's, or not intact).
    pub foreign: u64,
    /// Length of the window on the receiver's clock.
    pub elapsed_s: f64,
    /// user + system CPU of the sending and the receiving thread over the window.
    pub sender_cpu_s: f64,
    pub receiver_cpu_s: f64,
    /// The ACK clock the receiver ran, and the ACK packets it wrote in the window and the
    /// sender read over the same window (its own clock: they count the same traffic, not the
    /// same packets).
    pub acks: AckClock,
    pub acks_sent: u64,
    pub acks_received: u64,
    /// The GSO probe only ([`super::gso_ceiling`]): the payload of each segment its
    /// super-packets stand for (its `gso_size`), and how many packets of more than one segment
    /// the receiver read whole. `packets` then counts segments, `ip_bytes` what they would be
    /// as MTU-sized packets on a wire. None and 0 for the raw probe.
    pub gso_size: Option<u32>,
    pub super_packets: u64,
}

impl PathCeiling {
    /// Payload-equivalent bytes: what our stack would have delivered in as many packets.
    pub fn payload_bytes(&self) -> u64 {
        self.packets * u64::from(payload_per_packet(self.mtu))
    }

    /// Payload-equivalent Gbit/s ([`payload_per_packet`]), as the stacks' Gbit/s count.
    pub fn gbps(&self) -> f64 {
        rate(self.payload_bytes() as f64 * 8.0, self.elapsed_s) / 1e9
    }

    /// Whole IP packets' Gbit/s.
    pub fn ip_gbps(&self) -> f64 {
        rate(self.ip_bytes as f64 * 8.0, self.elapsed_s) / 1e9
    }

    pub fn packets_per_sec(&self) -> f64 {
        rate(self.packets as f64, self.elapsed_s)
    }

    /// ACK clock packets the receiver wrote per second of the window.
    pub fn acks_per_sec(&self) -> f64 {
        rate(self.acks_sent as f64, self.elapsed_s)
    }

    /// Packets of several segments the receiver read whole, per second of the window.
    pub fn super_packets_per_sec(&self) -> f64 {
        rate(self.super_packets as f64, self.elapsed_s)
    }

    /// The sending thread's share of a core over the window (1.0: a whole core).
    pub fn sender_core(&self) -> f64 {
        rate(self.sender_cpu_s, self.elapsed_s)
    }

    /// The receiving thread's share of a core over the window.
    pub fn receiver_core(&self) -> f64 {
        rate(self.receiver_cpu_s, self.elapsed_s)
    }
}

/// A thread at this share of a core or more is saturated: it bounds the probe.
pub const SATURATED: f64 = 0.9;

/// What bounded a ceiling probe, from its threads' shares of a core (`sender`, `receiver`,
/// medians over runs), the relay's (None over veth) and the packets the path lost: a
/// ceiling is one only where a core is saturated or the path drops; otherwise the probe
/// measured its own pacing, and says so. The relay's core first, then the sender's: over
/// veth the receiver polls (`receive`), so its share reads about 1.0 busy or not, and it is
/// named only when neither of the others is saturated.
pub fn bound(sender: f64, receiver: f64, relay: Option<f64>, lost: f64) -> &'static str {
    if relay.is_some_and(|r| r >= SATURATED) {
        "the relay's core"
    } else if sender >= SATURATED {
        "the sender's core"
    } else if receiver >= SATURATED {
        "the receiver's core"
    } else if lost > 0.0 {
        "drops on the path"
    } else {
        "neither: no core saturated, nothing dropped"
    }
}

fn rate(n: f64, s: f64) -> f64 {
    if s > 0.0 {
        n / s
    } else {
        0.0
    }
}

/// A `len`-byte IPv4 packet of the probe: no options, DF, TTL 64, protocol 253, `src` to
/// `dst`, zeros after the header. The header is etherparse's, as the stack's
/// (`tcp_bth::endpoint`).
fn ip_packet(len: usize, src: Ipv4Addr, dst: Ipv4Addr) -> Vec<u8> {
    let mut h = Ipv4Header::new(
        (len - IP_HEADER) as u16,
        64,
        IpNumber(PROTOCOL),
        src.octets(),
        dst.octets(),
    )
    .expect("the probe's packets fit an IPv4 packet");
    // `new` sets DF: a packet larger than a link's MTU is refused, not fragmented.
    h.header_checksum = h.calc_header_checksum();
    let mut p = vec![0u8; len];
    p[..IP_HEADER].copy_from_slice(&h.to_bytes());
    p
}

/// The sender's packet: from A's stack address to B's, `mtu` bytes (576 or more,
/// `check_mtu`); the sequence number at [`SEQ_AT`] is written per packet (the header and its
/// checksum stay the same).
fn template(mtu: usize) -> Vec<u8> {
    let mut p = ip_packet(mtu, A_STACK, B_STACK);
    for (i, b) in p[SEQ_AT + 8..].iter_mut().enumerate() {
        *b = i as u8;
    }
    p
}

/// The ACK clock's packet: from B's stack address back to A's, [`ACK_LEN`] bytes.
fn ack_template() -> Vec<u8> {
    ip_packet(ACK_LEN, B_STACK, A_STACK)
}

/// Whether `p` has `want`'s IPv4 header but for what forwarding changes (the TTL, lowered
/// once in each namespace, and so the checksum).
fn same_header(p: &[u8], want: &[u8]) -> bool {
    p[..8] == want[..8] && p[9] == want[9] && p[12..IP_HEADER] == want[12..IP_HEADER]
}

/// Packets the sender may have sent beyond the highest one the receiver has read: the probe
/// is flow-controlled, like any stack, so it measures what the path delivers rather than how
/// fast the sender can overrun the receiving device's queue (500 packets) and have the kernel
/// forward packets it then drops. Without it, at MTU 65000 most of what was sent was lost on
/// the path and the probe measured less than our stack moves.
pub(super) const IN_FLIGHT: u64 = 256;
/// How long the sender waits for the receiver when `IN_FLIGHT` is reached.
pub(super) const HELD_PAUSE: Duration = Duration::from_micros(20);

/// Whether the receiver polls its ring between packets once they flow, or sleeps until the
/// next completion. Polling spares the sender the wake-up in its write (see `receive`), but
/// it spends a core: with a relay thread on the path, three threads then want the machine's
/// two cores. Through 4 sprayed paths at MTU 1500 a polling receiver measured 1.40–1.53
/// Gbit/s, a sleeping one 2.67–2.79 (alternating, two runs of `bth-compare --only
/// bulk-1MiB-relay-spray4-200us --runs 2` each way), so the ceiling through the relay sleeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    /// Spin on the ring once packets flow (veth: sender and receiver, two threads).
    BetweenPackets,
    /// Sleep until the next packet, as our stack's driver does (a relay on the path).
    Never,
}

impl Poll {
    /// Poll only where the probe's two threads are the only busy ones.
    pub fn for_topology(ns: &TwoNs) -> Poll {
        if ns.has_relay() {
            Poll::Never
        } else {
            Poll::BetweenPackets
        }
    }
}

/// The measurement's phases, shared by the two threads.
const WARMING: u8 = 0;
pub(super) const MEASURING: u8 = 1;
/// Set by the receiver when the window has closed, or by either side when it failed.
pub(super) const STOP: u8 = 2;

/// Measure the path's ceiling in `ns` at its MTU: a sender on A's stack TUN device, a
/// receiver on B's (each on a thread of its own, in its namespace). Needs CAP_NET_ADMIN.
/// With `acks` the receiver also sends the ACK clock's packets back ([`AckClock`]).
pub fn measure(ns: &TwoNs, spec: &CeilingSpec, acks: AckClock) -> io::Result<PathCeiling> {
    // The same devices as the stack's: the same MTU and offload (a virtio-net header in
    // front of every packet when the stack has one).
    let mtu = ns.mtu;
    let probe = Probe {
        what: "ceiling",
        threads: ("bth-ceil-rx", "bth-ceil-tx"),
        acks,
    };
    let (sent, mut out) = probe.run(
        ns,
        spec,
        move || {
            let want = template(mtu as usize);
            move |p: &[u8]| {
                (p.len() == want.len() && same_header(p, &want)).then(|| {
                    let mut seq = [0u8; 8];
                    seq.copy_from_slice(&p[SEQ_AT..SEQ_AT + 8]);
                    Arrival {
                        segments: 1,
                        ip_bytes: p.len() as u64,
                        next_seq: u64::from_be_bytes(seq) + 1,
                    }
                })
            }
        },
        move |tun, phase, arrived, limit| {
            Driver::open(tun).and_then(|mut io| send(&mut io, mtu, phase, arrived, limit))
        },
    )?;
    out.sender_cpu_s = sent.cpu.as_secs_f64();
    out.acks_received = sent.acks;
    if acks != AckClock::None && out.acks_received == 0 {
        return Err(io::Error::other(format!(
            "the receiver wrote {} ACK packets in the window and the sender read none",
            out.acks_sent
        )));
    }
    Ok(out)
}

/// One probe of the path (the raw ceiling, or the GSO ceiling): a receiver thread on B's
/// stack TUN device driving our driver with `classify` (made on that thread), a sender thread
/// on A's device running `send` until the receiver's window closes. Returns what the sender
/// returned and the receiver's measurement; the sender's failure explains the receiver's, so it
/// is reported first.
pub(super) struct Probe {
    /// Its name in errors ("ceiling", "GSO ceiling").
    pub what: &'static str,
    /// The receiver's and the sender's thread names.
    pub threads: (&'static str, &'static str),
    pub acks: AckClock,
}

impl Probe {
    pub(super) fn run<C, T>(
        &self,
        ns: &TwoNs,
        spec: &CeilingSpec,
        classify: impl FnOnce() -> C + Send + 'static,
        send: impl FnOnce(TunDevice, &AtomicU8, &AtomicU64, Duration) -> io::Result<T> + Send + 'static,
    ) -> io::Result<(T, PathCeiling)>
    where
        C: FnMut(&[u8]) -> Option<Arrival>,
        T: Send + 'static,
    {
        // The same devices as the stack's: the same MTU and offload (a virtio-net header in
        // front of every packet when the stack has one).
        let (mtu, offload, poll, what) = (ns.mtu, ns.offload, Poll::for_topology(ns), self.what);
        let phase = Arc::new(AtomicU8::new(WARMING));
        let arrived = Arc::new(AtomicU64::new(0));
        let receiver = {
            let (name, phase, spec, arrived) =
                (ns.b.clone(), phase.clone(), *spec, arrived.clone());
            let acks = self.acks;
            spawn_set_up(
                self.threads.0,
                move || stack_tun_mtu(&name, false, mtu, offload).and_then(Driver::open),
                move |mut io| {
                    let mut classify = classify();
                    let on = Receiver {
                        mtu,
                        spec,
                        poll,
                        acks,
                        phase: &phase,
                        arrived: &arrived,
                    };
                    let r = receive(&mut io, &on, &mut classify);
                    phase.store(STOP, Ordering::Relaxed);
                    r
                },
            )
            .map_err(|e| io::Error::new(e.kind(), format!("{what} receiver: {e}")))?
        };
        let sender = {
            let (name, phase, arrived) = (ns.a.clone(), phase.clone(), arrived.clone());
            let limit = FIRST_PACKET_WITHIN
                + Duration::from_millis(u64::from(spec.warmup_ms) + u64::from(spec.measure_ms))
                + Duration::from_secs(5);
            std::thread::Builder::new()
                .name(self.threads.1.into())
                .spawn(move || {
                    let r = stack_tun_mtu(&name, true, mtu, offload)
                        .and_then(|tun| send(tun, &phase, &arrived, limit));
                    phase.store(STOP, Ordering::Relaxed);
                    r
                })?
        };
        let (out, sent) = join_both(
            (receiver, &format!("{what} receiver")),
            (sender, &format!("{what} sender")),
        )?;
        Ok((sent, out))
    }
}

/// What the sender saw over the measured window.
struct Sent {
    cpu: Duration,
    /// ACK clock packets read.
    acks: u64,
}

/// Write packets while the driver has room, until the receiver says stop (or `limit` passes);
/// returns the thread's CPU and the ACK packets it read over the measured window.
fn send(
    io: &mut Driver,
    mtu: u32,
    phase: &AtomicU8,
    arrived: &AtomicU64,
    limit: Duration,
) -> io::Result<Sent> {
    let pkt = template(mtu as usize);
    let ack = ack_template();
    let mut seq: u64 = 0;
    let (mut cpu0, mut cpu1) = (None, None);
    let (mut acks, mut acks0) = (0u64, None);
    let until = io.now() + limit;
    loop {
        match phase.load(Ordering::Relaxed) {
            MEASURING => {
                cpu0.get_or_insert_with(thread_cpu);
                acks0.get_or_insert(acks);
            }
            STOP => {
                cpu1.get_or_insert_with(thread_cpu);
                break;
            }
            _ => {}
        }
        // Reaps the writes that completed (their buffers take packets again) and reads the
        // ACK clock's packets, if the receiver sends them.
        io.receive(&mut |p, _| {
            if p.len() == ACK_LEN && same_header(p, &ack) {
                acks += 1;
            }
        });
        let mut held = false;
        while io.can_send() {
            if seq.saturating_sub(arrived.load(Ordering::Relaxed)) >= IN_FLIGHT {
                held = true;
                break;
            }
            // Built in place: the header and the sequence number, no user-space copy of the
            // payload (which the receiver does not look at), as ours sends a full segment's
            // payload from the application's buffer with no copy. The kernel's copy out of
            // the buffer, the TUN path's own, is the one copy of each byte.
            io.send_in_place(pkt.len(), |b| {
                b[..SEQ_AT].copy_from_slice(&pkt[..SEQ_AT]);
                b[SEQ_AT..SEQ_AT + 8].copy_from_slice(&seq.to_be_bytes());
            });
            seq += 1;
        }
        let now = io.now();
        if now >= until {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the receiver did not finish in time",
            ));
        }
        let pause = if held {
            HELD_PAUSE
        } else {
            Duration::from_millis(1)
        };
        io.wait(Some(now + pause))?;
    }
    let cpu = match (cpu0, cpu1) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => Duration::ZERO,
    };
    let acks = acks - acks0.unwrap_or(acks);
    Ok(Sent { cpu, acks })
}

/// One of the sender's packets as the receiver counts it ([`receive`]'s `classify`).
pub(super) struct Arrival {
    /// Segments it carries (1 for the raw probe; a super-packet's many).
    pub segments: u64,
    /// Its IP bytes: the packet's own, or for a super-packet what its segments would be.
    pub ip_bytes: u64,
    /// The sequence number after its last segment, in segments from the first.
    pub next_seq: u64,
}

/// What a receiver does besides classifying packets: the probe's MTU, window, polling, ACK
/// clock and the state it shares with the sender.
struct Receiver<'a> {
    pub mtu: u32,
    pub spec: CeilingSpec,
    pub poll: Poll,
    pub acks: AckClock,
    pub phase: &'a AtomicU8,
    /// The highest sequence number read, plus one, for the sender's flow control.
    pub arrived: &'a AtomicU64,
}

/// What the receiver has counted so far (cumulative).
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    packets: u64,
    ip_bytes: u64,
    foreign: u64,
    /// Packets of more than one segment.
    super_packets: u64,
    /// Highest sequence number seen, plus one (0: none yet).
    next_seq: u64,
    /// ACK clock packets written.
    acks: u64,
    cpu: Duration,
    at: Duration,
}

/// Read and count until the window has closed; the figures of the window. `classify` says
/// whether a packet read is one of the sender's, and what it counts for; every other packet
/// is foreign.
fn receive(
    io: &mut Driver,
    on: &Receiver,
    classify: &mut dyn FnMut(&[u8]) -> Option<Arrival>,
) -> io::Result<PathCeiling> {
    let Receiver {
        mtu,
        spec,
        poll,
        acks,
        phase,
        arrived,
    } = *on;
    let ack = ack_template();
    let every = match acks {
        AckClock::None => 0,
        AckClock::Every(n) => u64::from(n.max(1)),
    };
    // ACKs owed and not yet written: a turn's packets are counted first, then answered (the
    // driver cannot send from inside its receive callback), as our stack's receiver does.
    let mut owed: u64 = 0;
    let mut t = Tally::default();
    let start = io.now();
    let mut first: Option<Duration> = None;
    let mut window_start: Option<Tally> = None;
    let warmup = Duration::from_millis(u64::from(spec.warmup_ms));
    let window = Duration::from_millis(u64::from(spec.measure_ms));
    loop {
        io.receive(&mut |p, _| match classify(p) {
            Some(a) => {
                t.packets += a.segments;
                t.super_packets += u64::from(a.segments > 1);
                t.ip_bytes += a.ip_bytes;
                t.next_seq = t.next_seq.max(a.next_seq);
                if every > 0 && t.packets % every == 0 {
                    owed += 1;
                }
            }
            None => t.foreign += 1,
        });
        arrived.store(t.next_seq, Ordering::Relaxed);
        // An ACK that finds no free transmit buffer stays owed for the next turn.
        while owed > 0 && io.can_send() {
            io.send(&ack);
            t.acks += 1;
            owed -= 1;
        }
        let now = io.now();
        if phase.load(Ordering::Relaxed) == STOP {
            return Err(io::Error::other("the sender stopped"));
        }
        if first.is_none() && t.packets > 0 {
            first = Some(now);
        }
        let next = match (first, window_start) {
            (None, _) if now - start > FIRST_PACKET_WITHIN => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "none of the sender's packets arrived within {FIRST_PACKET_WITHIN:?} \
                         ({} other packets did; is IPv4 forwarding on in both namespaces?)",
                        t.foreign
                    ),
                ));
            }
            (None, _) => now + Duration::from_millis(1),
            (Some(f), None) if now >= f + warmup => {
                t.cpu = thread_cpu();
                t.at = now;
                window_start = Some(t);
                phase.store(MEASURING, Ordering::Relaxed);
                now + window
            }
            (Some(f), None) => f + warmup,
            (Some(_), Some(w)) if now >= w.at + window => {
                let sent = t.next_seq.saturating_sub(w.next_seq);
                let packets = t.packets - w.packets;
                return Ok(PathCeiling {
                    mtu,
                    packets,
                    ip_bytes: t.ip_bytes - w.ip_bytes,
                    lost: sent.saturating_sub(packets),
                    foreign: t.foreign - w.foreign,
                    elapsed_s: (now - w.at).as_secs_f64(),
                    sender_cpu_s: 0.0,
                    receiver_cpu_s: thread_cpu().saturating_sub(w.cpu).as_secs_f64(),
                    acks,
                    acks_sent: t.acks - w.acks,
                    acks_received: 0,
                    gso_size: None,
                    super_packets: t.super_packets - w.super_packets,
                });
            }
            (Some(_), Some(w)) => w.at + window,
        };
        // Once packets flow the receiver polls instead of sleeping: a receiver asleep between
        // packets has to be woken, and that wake-up is work done in the sender's write. At MTU
        // 9000, where the sender is the bound, sleeping cost the sender about 0.1 CPU s per GB
        // and the ceiling read 11.0-11.2 Gbit/s, against 12.2-13.3 polling (three runs each,
        // alternating). The receiver's CPU then counts its polling. Not through the relay
        // ([`Poll`]).
        let until = match (first, poll) {
            (Some(_), Poll::BetweenPackets) => io.now(),
            _ => next,
        };
        io.wait(Some(until))?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_packet_is_an_mtu_sized_ipv4_packet_with_a_valid_header() {
        for mtu in [576usize, 1500, 9000, 65_535] {
            let p = template(mtu);
            assert_eq!(p.len(), mtu);
            assert_eq!(u16::from_be_bytes([p[2], p[3]]) as usize, mtu);
            assert_eq!((p[0], p[9]), (0x45, PROTOCOL));
            let (h, _) = Ipv4Header::from_slice(&p).expect("parses");
            // The checksum the header carries is the one its fields give (etherparse's sum,
            // the project's one implementation).
            assert_eq!(h.header_checksum, h.calc_header_checksum(), "MTU {mtu}");
            assert!(h.dont_fragment && h.time_to_live == 64, "{h:?}");
            // Forwarded twice: the TTL and checksum change, the rest stays.
            let mut h = h;
            h.time_to_live -= 2;
            h.header_checksum = h.calc_header_checksum();
            let mut fwd = p.clone();
            fwd[..IP_HEADER].copy_from_slice(&h.to_bytes());
            assert_ne!(fwd[..IP_HEADER], p[..IP_HEADER]);
            assert!(same_header(&fwd, &p));
            fwd[15] ^= 1;
            assert!(!same_header(&fwd, &p), "another source");
        }
    }

    #[test]
    fn payload_per_packet_is_what_a_full_segment_of_ours_carries() {
        assert_eq!(payload_per_packet(1500), 1420);
        assert_eq!(payload_per_packet(65_000), 64_920);
        let c = PathCeiling {
            mtu: 1500,
            packets: 1_000_000,
            ip_bytes: 1_500_000_000,
            lost: 0,
            foreign: 0,
            elapsed_s: 2.0,
            sender_cpu_s: 1.0,
            receiver_cpu_s: 1.0,
            acks: AckClock::None,
            acks_sent: 0,
            acks_received: 0,
            gso_size: None,
            super_packets: 0,
        };
        assert!((c.ip_gbps() - 6.0).abs() < 1e-9);
        assert!((c.gbps() - 5.68).abs() < 1e-9);
        assert!((c.packets_per_sec() - 500_000.0).abs() < 1e-6);
    }
}
