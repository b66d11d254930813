//! A userspace impairment relay between two TUN devices (one per namespace): what the kernel
//! routes into one comes out of the other after the seeded loss, reordering, duplication,
//! corruption, delay and multipath spraying of a [`SimLink`] run on the real clock. The same
//! relay carries kernel TCP and our stack, so both see the same impairments (this machine has
//! no netem).
//!
//! With devices opened with [`offload`](super::TunConfig::offload) the kernel hands the relay
//! TCP super-packets of up to 64 KiB (GSO), as it would hand a veth peer, instead of one
//! `read(2)`, copy and `write(2)` per 1500-byte packet; that per-packet cost capped kernel TCP
//! through the relay at about a tenth of its veth throughput. Impairments stay per segment:
//! the link decides the fate of each MSS-sized segment of a super-packet as if it had been
//! sent alone ([`SimLink::decide_all`]). When all segments share one fate the super-packet
//! goes through whole; otherwise it is cut into runs of consecutive segments with the same
//! fate, each rebuilt as a smaller GSO packet or a plain one ([`GsoPacket::build_run`]).

use super::gso::{complete_checksum, GsoPacket, VnetHdr, GSO_NONE, VNET_HDR_LEN};
use super::TunDevice;
use crate::sim::{
    flip_bit, swap_words, Direction, Fate, LinkConfig, LinkStats, PathStats, SimLink,
};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Read buffer: a virtio-net header, an IPv6 header and the largest payload its length field
/// can describe, rounded up.
const BUF: usize = 128 << 10;
/// A packet at least this long goes into the link in the buffer it was read into, which saves
/// copying a super-packet (a tenth of the relay's time) without pinning 128 KiB per ACK
/// held back by the link; shorter ones are copied out and the buffer is reused.
const HAND_OVER: usize = BUF / 4;
/// Most read buffers kept for reuse once written out (16 MiB).
const SPARE: usize = 128;

/// The impairment relay between two TUN devices: [`new`](Self::new), then
/// [`run`](Self::run), which blocks its thread until stopped.
pub struct Relay {
    a: TunDevice,
    b: TunDevice,
    link: SimLink,
    /// Both devices carry virtio-net headers and GSO packets.
    offload: bool,
    /// The fates of one super-packet's segments, reused.
    fates: Vec<Fate>,
    /// Read buffers (capacity `BUF`) to read into, so reading does not allocate.
    spare: Vec<Vec<u8>>,
    io: RelayIo,
}

/// What the relay's link did, per direction, over the relay's whole life.
///
/// The link counters count MSS-sized segments, not reads or writes: a GSO super-packet of N
/// segments is N packets sent, and a run of k segments delivered in one write is k packets
/// delivered (its bytes counted as k separate packets would be). So the counters mean the
/// same with and without offload; [`RelayIo`] has the reads and writes.
#[derive(Debug, Clone, Default)]
pub struct RelayStats {
    /// Counters of the link from device `a` to `b`.
    pub a_to_b: LinkStats,
    /// Counters of the link from device `b` to `a`.
    pub b_to_a: LinkStats,
    /// Per sprayed path (empty without spraying).
    pub a_to_b_paths: Vec<PathStats>,
    /// Per sprayed path of B→A (empty without spraying).
    pub b_to_a_paths: Vec<PathStats>,
    /// The relay's reads and writes and what it did to GSO packets.
    pub io: RelayIo,
}

/// The relay's system calls and what it did to GSO packets, both directions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayIo {
    /// Packets read from the devices (a super-packet counts once).
    pub reads: u64,
    /// Of those, GSO super-packets.
    pub gso_reads: u64,
    /// Super-packets not forwarded as they came: a segment was lost, or segments had different
    /// fates and went out as several runs.
    pub split: u64,
    /// Packets written to the devices (runs and duplicates included).
    pub writes: u64,
    /// Writes the kernel refused (a full queue drops silently instead, as a congested link
    /// would). Never expected: a refusal means the relay built a packet the kernel rejects.
    pub write_errors: u64,
    /// Packets dropped because their virtio-net header or GSO headers did not add up
    /// ([`GsoError`](super::gso::GsoError)); never expected from the kernel.
    pub malformed: u64,
}

impl Relay {
    /// Packets read from `a` go to `b` (Direction::AtoB) and back.
    pub fn new(a: TunDevice, b: TunDevice, link: LinkConfig) -> io::Result<Relay> {
        let link = SimLink::try_new(link)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        if a.offload() != b.offload() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the relay's two devices need the same offload setting",
            ));
        }
        a.set_nonblocking()?;
        b.set_nonblocking()?;
        Ok(Relay {
            offload: a.offload() != super::Offload::None,
            a,
            b,
            link,
            fates: Vec::new(),
            spare: Vec::new(),
            io: RelayIo::default(),
        })
    }

    /// Forward until `stop` is set.
    pub fn run(&mut self, stop: &AtomicBool) -> io::Result<RelayStats> {
        // Timer slack (50 µs by default) would stretch every short wait; 1 µs keeps the
        // link's delays close to what it was configured with. Affects this thread only.
        // SAFETY: prctl with an integer argument; no memory is passed.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong) };
        let start = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            let now = start.elapsed();
            let wait = self
                .link
                .next_arrival()
                .map_or(Duration::from_millis(20), |t| t.saturating_sub(now))
                .min(Duration::from_millis(20));
            let mut fds = [
                libc::pollfd {
                    fd: self.a.raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.b.raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // ppoll, not poll: poll's timeout is whole milliseconds, and rounding the link's
            // 10 µs delay or 100 µs reordering up to 1 ms whenever the link went quiet made
            // the relay's idle round trip 1.41 ms against 0.24 ms over plain veth.
            let ts = libc::timespec {
                tv_sec: wait.as_secs() as libc::time_t,
                tv_nsec: libc::c_long::from(wait.subsec_nanos() as i32),
            };
            // SAFETY: ppoll(2) on two descriptors we own, with a bounded timeout and no
            // signal mask.
            let rc = unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            let now = start.elapsed();
            for (dir, fd) in [
                (Direction::AtoB, self.a.raw_fd()),
                (Direction::BtoA, self.b.raw_fd()),
            ] {
                loop {
                    let mut buf = self.spare.pop().unwrap_or_default();
                    if !read_nonblocking(fd, &mut buf)? {
                        self.recycle(buf);
                        break;
                    }
                    self.io.reads += 1;
                    self.accept(now, dir, buf);
                }
            }
            while let Some((dir, pkt)) = self.link.poll(start.elapsed()) {
                let fd = match dir {
                    Direction::AtoB => self.b.raw_fd(),
                    Direction::BtoA => self.a.raw_fd(),
                };
                // A full TUN queue drops the packet, as a congested link would.
                // SAFETY: write(2) of a buffer we own.
                let rc = unsafe { libc::write(fd, pkt.as_ptr().cast(), pkt.len()) };
                self.io.writes += 1;
                if rc < 0 {
                    self.io.write_errors += 1;
                }
                self.recycle(pkt);
            }
        }
        Ok(RelayStats {
            a_to_b: self.link.stats(Direction::AtoB),
            b_to_a: self.link.stats(Direction::BtoA),
            a_to_b_paths: self.link.path_stats(Direction::AtoB).to_vec(),
            b_to_a_paths: self.link.path_stats(Direction::BtoA).to_vec(),
            io: self.io,
        })
    }

    /// Keep a read buffer for the next read (or free it: a copy, or enough kept already).
    fn recycle(&mut self, buf: Vec<u8>) {
        if buf.capacity() >= BUF && self.spare.len() < SPARE {
            self.spare.push(buf);
        }
    }

    /// Hand one packet read from the device of `dir`'s sender to the link.
    fn accept(&mut self, now: Duration, dir: Direction, buf: Vec<u8>) {
        if !self.offload {
            self.forward_single(now, dir, buf, 0);
            return;
        }
        match VnetHdr::parse(&buf) {
            Ok(v) if v.gso_type == GSO_NONE => self.forward_single(now, dir, buf, VNET_HDR_LEN),
            Ok(_) => self.forward_gso(now, dir, buf),
            Err(_) => {
                self.io.malformed += 1;
                self.recycle(buf);
            }
        }
    }

    /// A packet that is one segment: as [`SimLink::send`] would, keeping its virtio-net
    /// header (`hdr` bytes) out of the link's length and bit choice.
    fn forward_single(&mut self, now: Duration, dir: Direction, buf: Vec<u8>, hdr: usize) {
        let len = buf.len().saturating_sub(hdr);
        let fate = self.link.decide(now, dir, len);
        self.deliver(dir, fate, buf, hdr, 1, len);
    }

    /// A GSO super-packet: one fate per segment, then one delivery per run of equal fates.
    fn forward_gso(&mut self, now: Duration, dir: Direction, buf: Vec<u8>) {
        let g = match GsoPacket::parse(&buf) {
            Ok(g) => g,
            Err(_) => {
                self.io.malformed += 1;
                self.recycle(buf);
                return;
            }
        };
        self.io.gso_reads += 1;
        let mut fates = std::mem::take(&mut self.fates);
        self.link.decide_all(now, dir, g.segment_lens(), &mut fates);
        let n = fates.len();
        let whole = fates
            .first()
            .copied()
            .filter(|&f| !alone(f) && fates.iter().all(|&x| x == f));
        if let Some(fate) = whole {
            // The fast path: every segment alike, the super-packet goes as it came.
            let wire = g.run_wire_len(0, n);
            self.fates = fates;
            self.deliver(dir, fate, buf, VNET_HDR_LEN, n, wire);
            return;
        }
        self.io.split += 1;
        let mut first = 0;
        while let Some(&fate) = fates.get(first) {
            let solo = alone(fate);
            let mut end = first + 1;
            while !solo && fates.get(end) == Some(&fate) {
                end += 1;
            }
            if fate != Fate::Dropped {
                let mut run = Vec::with_capacity(VNET_HDR_LEN + g.run_wire_len(first, end));
                match g.build_run(first, end, &mut run) {
                    Ok(()) => {
                        let wire = g.run_wire_len(first, end);
                        self.deliver(dir, fate, run, VNET_HDR_LEN, end - first, wire);
                    }
                    // Cannot happen (the range is within the packet), but a lost run beats a
                    // panic.
                    Err(_) => self.io.malformed += 1,
                }
            }
            first = end;
        }
        self.fates = fates;
        self.recycle(buf);
    }

    /// Schedule `pkt` (a virtio-net header of `hdr` bytes, then `segments` segments' worth of
    /// packet, `wire` bytes as separate packets) as `fate` says: corrupted, duplicated. A read
    /// buffer goes in itself only when the packet is long ([`HAND_OVER`]).
    fn deliver(
        &mut self,
        dir: Direction,
        fate: Fate,
        mut pkt: Vec<u8>,
        hdr: usize,
        segments: usize,
        wire: usize,
    ) {
        let Fate::Deliver {
            arrival,
            duplicate,
            corrupt_bit,
            swap,
            ..
        } = fate
        else {
            self.recycle(pkt);
            return;
        };
        if pkt.len() < HAND_OVER && pkt.capacity() >= BUF {
            let copy = pkt.to_vec();
            self.recycle(std::mem::replace(&mut pkt, copy));
        }
        // As `send`: the copy is of the packet as sent, taken before the corruption.
        let copy = duplicate.map(|at| (at, pkt.clone()));
        if let Some(bit) = corrupt_bit {
            if hdr > 0 {
                // A packet whose checksum offsets are wrong goes out as it is: the receiving
                // kernel refuses it either way.
                let _ = complete_checksum(&mut pkt);
            }
            if let Some(ip) = pkt.get_mut(hdr..) {
                flip_bit(ip, bit);
            }
        }
        if let Some(words) = swap {
            // Checksum-neutral: the TCP checksum (partial or whole) stays right.
            if let Some(ip) = pkt.get_mut(hdr..) {
                swap_words(ip, words);
            }
        }
        let segments = segments as u64;
        self.link.schedule(dir, arrival, pkt, segments, wire);
        if let Some((at, copy)) = copy {
            self.link.schedule(dir, at, copy, segments, wire);
        }
    }
}

/// A segment that goes alone, never in a run or a whole super-packet: a corrupted one (its
/// checksum is finished before its bit flips, and its swapped words are its own payload's),
/// and one drawn for reordering, whose extra delay is its own (two in a row almost never draw
/// the same), so that on a link that keeps reordered segments in place (the control cell) the
/// super-packets are cut exactly as on the reordering link.
fn alone(fate: Fate) -> bool {
    matches!(
        fate,
        Fate::Deliver {
            corrupt_bit: Some(_),
            ..
        } | Fate::Deliver { swap: Some(_), .. }
            | Fate::Deliver {
                reordered: true,
                ..
            }
    )
}

/// Read one packet into `buf` (emptied first, given `BUF` bytes of room): `false` when there is
/// none.
fn read_nonblocking(fd: i32, buf: &mut Vec<u8>) -> io::Result<bool> {
    buf.clear();
    buf.reserve_exact(BUF);
    // Into the spare capacity, not a zero-filled Vec: zeroing 128 KiB per read would cost as
    // much as the copy the buffer reuse saves.
    // SAFETY: read(2) writes at most `capacity` bytes into the Vec's allocation.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.capacity()) };
    if let Ok(n) = usize::try_from(n) {
        // SAFETY: read(2) initialised the first `n <= capacity` bytes.
        unsafe { buf.set_len(n) };
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(false),
        _ => Err(e),
    }
}
