//! The io_uring loop over a TUN device: the real data path's [`PacketIo`].
//!
//! The driver only moves whole IP packets (IPv4 or IPv6, `IFF_NO_PI`: the kernel tells the two
//! apart by the version nibble); a [`tcp_bth::Endpoint`] parses and builds them and routes
//! them to any number of connections. Every connection of the endpoint shares the ring and its
//! registered buffers, and the one driver turn ([`crate::turn`]) serves them all.
//!
//! Ring layout: `RX` fixed-buffer reads stay posted on the TUN descriptor at all times
//! (user_data = buffer index); writes use the `TX` fixed buffers after them (user_data =
//! index). One `io_uring_enter` per turn ([`PacketIo::wait`]) both submits every queued write
//! and waits for the next completion or the endpoint's next deadline (`IORING_ENTER_EXT_ARG`
//! timeout), so there is no per-packet system call. Nothing waits in the driver: when the
//! transmit buffers are all in flight, [`PacketIo::can_send`] says no and the endpoint keeps
//! its segments (its connections build them only when asked).
//!
//! Buffer lifetime: the region is freed only after every read and write has completed. Drop
//! (or [`Driver::close`]) cancels what is in flight and reaps the completions first
//! (`shutdown.rs`).

mod bufring;
mod gather;
mod region;
mod shutdown;

pub use shutdown::Shutdown;

use super::gso::{
    GsoPacket, VnetHdr, F_DATA_VALID, F_NEEDS_CSUM, GSO_NONE, GSO_TCPV4, GSO_TCPV6, VNET_HDR_LEN,
};
use super::{Offload, TunDevice};
use crate::turn::{self, App, PacketIo, RunError, TurnStats};
use bufring::BufRing;
use gather::{Gathered, GATHER};
use io_uring::cqueue;
use io_uring::{opcode, types, IoUring};
use region::Region;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tcp_bth::wire::copy::copy_payload;
use tcp_bth::wire::ChecksumFill;
use tcp_bth::GatherLimits;

const RX: usize = 128;
const TX: usize = 256;
/// Smallest buffer stride; a device's buffers are whole pages apart, room for its MTU and
/// [`BUF_OFFSET`] ([`buf_size`]), each `stride - BUF_OFFSET` bytes long.
const MIN_BUF: usize = 4096;
/// Where each buffer starts in its pages. Not 0: the kernel reads a large packet out of page
/// fragments that start at a page boundary, and when the destination lies less than 32 bytes
/// past the source modulo 4 KiB this machine's copy (`_copy_to_iter`) runs at half speed.
/// A page-aligned buffer put a raw packet's payload 30 bytes in (virtio-net header and IPv4
/// header): plain `read(2)` threads moved 19.7 Gbit/s at MTU 65000 into page-aligned
/// buffers and 43.4 with the buffers 2 to 64 bytes further on (`docs/datapath.md`). 64 keeps
/// any header length clear of that window.
const BUF_OFFSET: usize = 64;
/// Room beyond the MTU in every buffer: a connection asks its transmit buffer for the
/// longest TCP header (60 bytes) on top of its MSS (MTU − 40), 40 bytes more than any segment
/// it sends at that MSS needs (`Config::largest_packet`).
const HEADER_SLACK: usize = tcp_bth::wire::TCP_HEADER_MAX - tcp_bth::wire::TCP_HEADER_MIN;
/// Largest MTU the driver takes: an IPv4 or IPv6 packet is at most 65,535 bytes (IPv6's
/// payload length excludes its 40-byte header, but nothing here sends jumbograms).
pub const MAX_MTU: u32 = 65_535;
/// Submission queue entries: every buffer's operation (RX + TX) fits at once, with room for
/// the cancellations of a shutdown.
const RING: u32 = 512;
/// How long after the last packet arrived a wait only polls the ring (a zero timeout) rather
/// than sleeping: `BTH_BUSY_POLL_US` microseconds, 0 (off) unless set. An experiment's knob,
/// off by default. A receiver asleep between packets is woken by each one, and the wake-up is
/// work done in the sender's system call (the path-ceiling probe's receiver polls for that
/// reason). In runs of ours where the server thread slept between packets (ten times its usual
/// voluntary context switches) the client spent up to twice its usual CPU per byte and moved
/// half its usual rate. Polling for 50 µs removed those slow runs at MTU 65000 (`bth-compare
/// --mtu 1500,4096,9000,65000 --runs 3`, twice each way: ours 24.7-29.4 Gbit/s against
/// 16.2-28.9) but cost where three threads share the two cores: four sprayed paths through the
/// relay moved 1.23 against 1.42 Gbit/s at MTU 1500 and 11.9 against 13.1 at 65000, and a
/// polling receiver's CPU counts its polling. Read once per process.
fn busy_poll() -> Duration {
    static V: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *V.get_or_init(|| {
        Duration::from_micros(
            std::env::var("BTH_BUSY_POLL_US")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
        )
    })
}
/// Longest one wait lasts without a deadline, so the application's turn runs regularly.
const MAX_WAIT: Duration = Duration::from_millis(5);
/// user_data of the multishot read (it owns receive buffer index 0's `busy` flag, so the
/// shutdown counts and reaps it like any read).
const MSHOT_UD: u64 = 0;
/// Buffer group of the multishot read's provided buffers.
const BGID: u16 = 0;
/// user_data of the poll on the wake eventfd (above every buffer index and the shutdown's
/// cancellations).
const WAKE_UD: u64 = 1 << 33;

/// Counters of the driver's I/O. Packets that are not for the endpoint (malformed, another
/// protocol or address) are the endpoint's to count (`tcp_bth::EndpointStats`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DriverStats {
    /// Packets read from the device, and their bytes.
    pub packets_in: u64,
    /// Bytes of those packets, virtio-net headers included.
    pub bytes_in: u64,
    /// Packets queued for writing into the device, and their bytes.
    pub packets_out: u64,
    /// Bytes of those packets, virtio-net headers included.
    pub bytes_out: u64,
    /// `io_uring_enter` calls.
    pub enters: u64,
    /// Read-side failures: reads that completed with an error, multishot completions that
    /// carried no buffer, failures to re-arm or re-post a read, and failed wake polls (each
    /// read is posted again unless the error is fatal).
    pub read_errors: u64,
    /// Writes the device refused (completed with an error): the packet is lost, the
    /// connection's recovery sends it again.
    pub writes_refused: u64,
    /// Writes that took fewer bytes than the packet had.
    pub writes_short: u64,
    /// Packets dropped before writing: larger than a buffer, or handed over without room.
    pub tx_dropped: u64,
    /// Most writes submitted by one `io_uring_enter`.
    pub largest_batch: usize,
    /// Bytes copied into a transmit buffer from a packet built elsewhere
    /// ([`PacketIo::send`]). Packets the endpoint builds in place ([`PacketIo::transmit`])
    /// are not copied: with the turn loop this stays 0, and a test holds it there.
    pub bytes_copied: u64,
    /// Packets written as gathered parts: headers from a transmit buffer, the payload from
    /// the application's buffers (`writev`, `gather.rs`): no user-space copy of the payload.
    pub packets_gathered: u64,
    /// Packets written with a partial TCP checksum for the device to finish (checksum
    /// offload, `NEEDS_CSUM`).
    pub csum_offloaded: u64,
    /// Packets read whose checksum the kernel vouched for (`DATA_VALID` or `NEEDS_CSUM`):
    /// the endpoint skips its checksum pass.
    pub csum_trusted: u64,
    /// Packets read that the driver refused: a segmentation-offload super-packet on a device
    /// opened without TSO (none should come), or one whose virtio-net header or lengths do
    /// not add up, or a short virtio-net header.
    pub rx_refused: u64,
    /// Super-packets read whole from a device with TSO offload ([`Offload::Segmentation`]),
    /// and super-segments written (the connection's `GatherLimits::gso_payload`): each
    /// stands for several segments, cut by the kernel or by the receiving device.
    pub gso_in: u64,
    /// Super-segments written.
    pub gso_out: u64,
    /// Times the multishot read ended and was armed again (the kernel ends it when the
    /// provided buffers run out, `ENOBUFS`, or on an error).
    pub read_rearms: u64,
    /// The kernel took the ring's io-wq worker limit (one worker), so packets leave in the
    /// order they were queued (false on a kernel that refused it, or with
    /// [`Features::iowq_limit`] off: several io-wq workers may reorder the writes they are
    /// handed).
    pub ordered_writes: bool,
    /// Reads are one multishot read over provided buffers (false: one `READ_FIXED` per
    /// receive buffer, on a kernel without it or with [`Features::multishot_read`] off).
    pub multishot_read: bool,
    /// The ring runs completions cooperatively (false: on a kernel without it or with
    /// [`Features::coop_taskrun`] off).
    pub coop_taskrun: bool,
}

/// The io_uring features the driver uses when the kernel has them. Each has a fallback for
/// an older kernel, and each can be turned off here to run that fallback on a kernel that has
/// the feature (`tests/tests/tun_endpoint.rs` does); [`DriverStats`] says what was used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// One multishot read over a provided-buffer ring (Linux 6.7); without it, one
    /// `READ_FIXED` per receive buffer, posted again as each completes.
    pub multishot_read: bool,
    /// `IORING_SETUP_COOP_TASKRUN` with `TASKRUN_FLAG` (Linux 5.19); without it the kernel
    /// interrupts the thread to run each completion.
    pub coop_taskrun: bool,
    /// `IORING_REGISTER_IOWQ_MAX_WORKERS` (Linux 5.15); without it the kernel's default,
    /// under which this kernel handed writes to several io-wq workers that reordered them.
    pub iowq_limit: bool,
    /// Write super-segments (virtio-net GSO, up to 64 KiB) for connections whose framing a
    /// segmentation offload can cut (S, amendment 3), on a device with TSO
    /// ([`Offload::Segmentation`]); without it, one segment per write.
    pub gso: bool,
}

impl Features {
    /// Everything the kernel has: what [`Driver::open`] uses.
    pub const ALL: Features = Features {
        multishot_read: true,
        coop_taskrun: true,
        iowq_limit: true,
        gso: true,
    };
    /// None of them: the path of a kernel older than 5.15.
    pub const NONE: Features = Features {
        multishot_read: false,
        coop_taskrun: false,
        iowq_limit: false,
        gso: false,
    };
}

impl Default for Features {
    fn default() -> Features {
        Features::ALL
    }
}

/// The io_uring driver of one TUN device. See the module documentation.
pub struct Driver {
    ring: IoUring,
    tun: TunDevice,
    /// Dropped after `ring` (field order), and only once nothing is in flight (Drop).
    region: Region,
    /// The multishot read's provided buffers: receive buffers 0..RX, lent to the kernel
    /// through this ring (dropped after `ring`, which unregisters it). `None` if the kernel
    /// refused the ring: then one `READ_FIXED` per receive buffer is posted instead.
    bufring: Option<BufRing>,
    /// Bytes in each buffer: room for one packet of the device's MTU (and its virtio-net
    /// header).
    buf: usize,
    /// The device has checksum offload ([`Offload::Checksum`], or with TSO
    /// [`Offload::Segmentation`]): every packet starts with a virtio-net header, TCP
    /// checksums are left partial on send and trusted on receive when the kernel vouches
    /// for them.
    vnet: bool,
    /// The device delivers super-packets whole ([`Offload::Segmentation`]): receive buffers
    /// hold 64 KiB.
    tso: bool,
    /// What the endpoint may hand over as gathered parts, super-segments included
    /// ([`Features::gso`]).
    gather: tcp_bth::GatherLimits,
    tx_free: Vec<u16>,
    /// Per TX buffer (index − RX): the payload slices of the packet written from it, when
    /// it was written as gathered parts (`gather.rs`).
    gathered: Gathered,
    /// Bytes of the packet in each TX buffer (index − RX), to tell a short write.
    tx_len: Vec<u32>,
    /// Per buffer: an operation on it was queued and has not completed.
    busy: Vec<bool>,
    /// Entries queued in the submission queue and not yet submitted.
    unsubmitted: usize,
    /// Writes queued since the last enter.
    batch: usize,
    /// When a packet last arrived (driver time): waits only poll for [`busy_poll`] after it.
    last_rx: Duration,
    /// The read error that stopped the data path, reported by the next wait.
    fatal: Option<i32>,
    /// `close` ran: nothing is in flight, the ring takes no more work.
    closed: bool,
    start: Instant,
    /// An eventfd polled in the ring, so another thread ends a wait early by writing to it
    /// ([`PacketIo::waker`]: the async API's commands). A poll holds no buffer, so it needs
    /// no care at shutdown beyond the cancellation every operation gets.
    wake: Arc<OwnedFd>,
    /// The driver's counters; [`stats`](Self::stats) returns a copy.
    pub stats: DriverStats,
}

impl Driver {
    /// Set up the ring on `tun`, register its buffers and post the reads, with every
    /// feature the kernel has ([`Features::ALL`]).
    pub fn open(tun: TunDevice) -> io::Result<Driver> {
        Driver::open_with(tun, Features::ALL)
    }

    /// [`open`](Self::open) using only the features in `want` that the kernel has.
    pub fn open_with(tun: TunDevice, want: Features) -> io::Result<Driver> {
        // With TSO the kernel delivers super-packets whole: a per-segment framed one never
        // comes (the kernel's GRO merges only segments whose options are equal), an S-framed
        // or plain one is placed whole.
        let tso = tun.offload() == Offload::Segmentation;
        let vnet = tso || tun.offload() == Offload::Checksum;
        if tun.mtu() > MAX_MTU {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("MTU {} above the largest IP packet ({MAX_MTU})", tun.mtu()),
            ));
        }
        let vnet_len = if vnet { VNET_HDR_LEN } else { 0 };
        let packet = if tso {
            MAX_MTU as usize
        } else {
            tun.mtu() as usize
        };
        let stride = buf_size(packet + HEADER_SLACK + vnet_len + BUF_OFFSET);
        let buf = stride - BUF_OFFSET;
        // Completions (a packet read, a write done) reach us as task work, and by default the
        // kernel interrupts the thread with an IPI to run it at once: at MTU 9000 that was
        // 10 % of a profile, in irqentry_exit_to_user_mode under our own copies and CRC.
        // Cooperative task running (Linux 5.19) leaves it for the thread's next kernel entry,
        // which the turn makes every pass (`wait`); a thread asleep in `wait` is still woken.
        let coop = if want.coop_taskrun {
            IoUring::builder()
                .setup_coop_taskrun()
                .setup_taskrun_flag()
                .build(RING)
                .ok()
        } else {
            None
        };
        let coop_taskrun = coop.is_some();
        let ring = match coop {
            Some(ring) => ring,
            None => IoUring::new(RING)?,
        };
        // Without this call io_uring handed almost every TUN write to its io-wq worker threads
        // (224,378 of 225,067 in one `bth-perf local` run, `perf stat -e
        // io_uring:io_uring_queue_async_work`), and several workers sent packets in another
        // order than they were queued: the peer saw ACKs go back in time (dropped by PAWS) and
        // data out of order (spurious retransmissions on a clean veth), and 4 KiB round trips
        // doubled. With it, on Linux 6.18, no write is handed over at all (0 of 222,369): they
        // run in the driver thread's own `io_uring_enter`, in order. A query-only call (limits
        // 0/0) has the same effect, so what changes the kernel's choice is not the limit
        // itself; why was not established. Should a kernel still hand writes over, one worker
        // keeps them in order. A kernel without the call (before 5.15) keeps its default,
        // which `DriverStats::ordered_writes` says.
        let ordered_writes = want.iowq_limit
            && ring
                .submitter()
                .register_iowq_max_workers(&mut [1, 1])
                .is_ok();
        let region = Region::with_offset(RX + TX, stride, BUF_OFFSET)?;
        // SAFETY: the iovecs point into `region`, which is never resized and is freed only
        // after the ring (field order) and after every operation has been reaped (Drop).
        unsafe { ring.submitter().register_buffers(&region.iovecs())? };
        let bufring = BufRing::new(RX as u16)?;
        // The multishot read needs Linux 6.7 (provided-buffer rings, 5.19): a kernel without
        // it gets one fixed read per receive buffer, as before.
        let mut probe = io_uring::Probe::new();
        let multishot = want.multishot_read
            && ring.submitter().register_probe(&mut probe).is_ok()
            && probe.is_supported(opcode::ReadMulti::CODE);
        // SAFETY: the entries live in `bufring`, freed only after the ring (field order), which
        // unregisters them when it is dropped, and leaked with the region if a shutdown cannot
        // reap every operation. Not registered at all without multishot reads.
        let registered = multishot
            && unsafe {
                ring.submitter().register_buf_ring_with_flags(
                    bufring.addr(),
                    bufring.entries(),
                    BGID,
                    0,
                )
            }
            .is_ok();
        let mut d = Driver {
            ring,
            tun,
            region,
            bufring: registered.then_some(bufring),
            buf,
            vnet,
            tso,
            gather: GatherLimits {
                // IPv4's total length holds a 60-byte TCP header and the IP header beside it
                // (IPv6's payload length the TCP header alone).
                // One switch for both ways: a device with TSO (`Offload::Segmentation`) takes
                // our super-segments and hands the peer's over whole.
                gso_payload: if tso && want.gso {
                    MAX_MTU - 20 - tcp_bth::wire::TCP_HEADER_MAX as u32
                } else {
                    0
                },
                ..GATHER
            },
            tx_free: (RX as u16..(RX + TX) as u16).rev().collect(),
            gathered: Gathered::new(TX),
            tx_len: vec![0; TX],
            busy: vec![false; RX + TX],
            unsubmitted: 0,
            batch: 0,
            last_rx: Duration::ZERO,
            fatal: None,
            closed: false,
            start: Instant::now(),
            wake: Arc::new(eventfd()?),
            stats: DriverStats {
                ordered_writes,
                multishot_read: registered,
                coop_taskrun,
                ..DriverStats::default()
            },
        };
        d.arm_wake()?;
        // From here on a failure drops `d`, which cancels and reaps what was posted.
        if d.bufring.is_some() {
            for i in 0..RX as u16 {
                d.give_back(i);
            }
            d.arm_mshot()?;
        } else {
            for i in 0..RX as u16 {
                d.post_read(i)?;
            }
        }
        // Into the kernel now: packets that arrive before the first turn are read.
        d.ring.submit()?;
        d.unsubmitted = d.ring.submission().len();
        Ok(d)
    }

    /// Serve `ep` and every connection it holds or accepts until `app` is done and
    /// everything queued has been written, or `limit` passes (the shared loop,
    /// [`turn::run`]). May be called again with the same or another endpoint.
    pub fn serve(
        &mut self,
        ep: &mut tcp_bth::Endpoint,
        app: &mut dyn App,
        limit: Duration,
    ) -> Result<TurnStats, RunError> {
        turn::run(ep, self, app, limit)
    }

    /// The driver's clock: time since [`open`](Self::open) (what the endpoint is given).
    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// A copy of the counters.
    pub fn stats(&self) -> DriverStats {
        self.stats
    }

    /// The longest IP packet the driver writes: its buffers less the virtio-net header. An
    /// endpoint it drives gets it as `EndpointConfig::max_packet`, so a connection whose MSS
    /// does not fit is refused at `connect`/`listen`.
    pub fn max_packet(&self) -> usize {
        self.buf - self.vnet_len()
    }

    /// The device's queue towards us: `txqueuelen` packets, super-segments whole with TSO.
    /// An endpoint it drives gets it as `EndpointConfig::rx_queue`.
    pub fn rx_queue(&self) -> Option<tcp_bth::RxQueue> {
        Some(tcp_bth::RxQueue {
            packets: self.tun.queue_len(),
            whole_super_segments: self.tun.offload() == Offload::Segmentation,
        })
        .filter(|q| q.packets > 0)
    }

    /// The TUN device the driver serves.
    pub fn device(&self) -> &TunDevice {
        &self.tun
    }

    /// Write a `len`-byte IP packet built in place: `build` gets a free transmit buffer of
    /// exactly `len` bytes and writes what it needs to. No byte is copied in user space: the
    /// buffer still holds whatever the last packet written from it left there (zeros at
    /// first), so `build` must write every byte its receiver looks at. For a sender whose
    /// packets differ only in their headers (the path's ceiling in `bth-compare`), as
    /// [`PacketIo::send`] is for a whole packet in hand. Dropped and counted (`tx_dropped`)
    /// when it does not fit or no buffer is free.
    pub fn send_in_place(&mut self, len: usize, build: impl FnOnce(&mut [u8])) {
        let hdr = self.vnet_len();
        if hdr + len > self.buf || !self.can_send() {
            self.stats.tx_dropped += 1;
            return;
        }
        let Some(&idx) = self.tx_free.last() else {
            self.stats.tx_dropped += 1;
            return;
        };
        // SAFETY: buffer idx is free (its last write completed), so nothing else uses it.
        let b = unsafe { self.region.slice_mut(usize::from(idx), hdr + len) };
        build(&mut b[hdr..]);
        // No offload asked for (the checksum is whole); only the kernel's hint of the headers.
        if self.vnet {
            let h = VnetHdr::for_packet(&b[hdr..], None).to_bytes();
            b[..hdr].copy_from_slice(&h);
        }
        self.submit_write(idx, hdr + len);
    }

    fn push(&mut self, e: &io_uring::squeue::Entry) -> io::Result<()> {
        // SAFETY: every entry the driver builds reads or writes one registered buffer that
        // no other operation uses until this one completes (`busy`), and that lives until
        // every operation has been reaped (Drop); a gathered write also reads its iovecs and
        // slices, which `gathered` holds as long (`gather.rs`).
        unsafe { self.ring.submission().push(e) }
            .map_err(|_| io::Error::other("submission queue full"))?;
        self.unsubmitted += 1;
        Ok(())
    }

    /// Poll the wake eventfd (again): its completion ends the current or next wait.
    fn arm_wake(&mut self) -> io::Result<()> {
        let e = opcode::PollAdd::new(types::Fd(self.wake.as_raw_fd()), libc::POLLIN as u32)
            .build()
            .user_data(WAKE_UD);
        self.push(&e)
    }

    /// Empty the eventfd (it is non-blocking) and poll it again.
    fn on_wake(&mut self, res: i32) {
        if res < 0 && res != -libc::ECANCELED {
            // A poll that fails would fail again at once: stop polling (waits then end by
            // their timeout only) rather than spin.
            self.stats.read_errors += 1;
            return;
        }
        let mut v = [0u8; 8];
        // SAFETY: reads at most 8 bytes into `v`, a live local buffer.
        unsafe { libc::read(self.wake.as_raw_fd(), v.as_mut_ptr().cast(), 8) };
        if self.arm_wake().is_err() {
            // Cannot happen (the queue has room); waits then end by their timeout only.
            self.stats.read_errors += 1;
        }
    }

    fn post_read(&mut self, idx: u16) -> io::Result<()> {
        let i = usize::from(idx);
        let ptr = self.region.ptr_of(i);
        let fd = types::Fd(self.tun.raw_fd());
        let e = opcode::ReadFixed::new(fd, ptr, self.buf as u32, idx)
            .build()
            .user_data(u64::from(idx));
        self.push(&e)?;
        self.busy[i] = true;
        Ok(())
    }

    /// Arm the multishot read: one completion per packet, each in a buffer from `bufring`.
    fn arm_mshot(&mut self) -> io::Result<()> {
        let fd = types::Fd(self.tun.raw_fd());
        let e = opcode::ReadMulti::new(fd, 0, BGID)
            .build()
            .user_data(MSHOT_UD);
        self.push(&e)?;
        self.busy[MSHOT_UD as usize] = true;
        Ok(())
    }

    /// Lend receive buffer `bid` to the multishot read again.
    fn give_back(&mut self, bid: u16) {
        let ptr = self.region.ptr_of(usize::from(bid));
        if let Some(r) = self.bufring.as_mut() {
            r.push(ptr, self.buf as u32, bid);
            r.publish();
        }
    }

    /// A completion of the multishot read: a packet in a provided buffer (deliver it, lend
    /// the buffer again), or the read's end (arm it again unless the error is fatal).
    fn on_mshot(&mut self, res: i32, flags: u32, f: &mut dyn FnMut(&[u8], bool)) {
        let more = cqueue::more(flags);
        if !more {
            self.busy[MSHOT_UD as usize] = false;
        }
        match (res, cqueue::buffer_select(flags)) {
            (n, Some(bid)) if n >= 0 && usize::from(bid) < RX => {
                if n > 0 {
                    self.deliver(usize::from(bid), n as usize, f);
                }
                self.give_back(bid);
            }
            (n, _) if n >= 0 => self.stats.read_errors += 1,
            (n, _) => {
                let errno = -n;
                // ENOBUFS: every provided buffer was in use (they are lent again as soon as
                // their packet is handled). ECANCELED: the thread that armed it exited.
                if !matches!(
                    errno,
                    libc::EINTR | libc::EAGAIN | libc::ENOBUFS | libc::ECANCELED
                ) {
                    self.stats.read_errors += 1;
                    self.fatal.get_or_insert(errno);
                    return;
                }
            }
        }
        if !more {
            self.stats.read_rearms += 1;
            if self.arm_mshot().is_err() {
                // Cannot happen (the queue has room); if it did, nothing is read any more and
                // the connections time out, which says so.
                self.stats.read_errors += 1;
            }
        }
    }

    /// Hand the packet read into receive buffer `i` (`n` bytes) to `f`.
    fn deliver(&mut self, i: usize, n: usize, f: &mut dyn FnMut(&[u8], bool)) {
        self.stats.packets_in += 1;
        self.stats.bytes_in += n as u64;
        // SAFETY: the read into buffer i has completed and the buffer is lent to the kernel
        // (or its read posted) again only after `f` returns, so nothing writes to it while
        // the slice lives.
        let pkt = unsafe { self.region.slice(i, n) };
        if !self.vnet {
            f(pkt, false);
            return;
        }
        match VnetHdr::parse(pkt) {
            Ok(h) if h.gso_type == GSO_NONE => {
                let trusted = h.flags & (F_DATA_VALID | F_NEEDS_CSUM) != 0;
                self.stats.csum_trusted += u64::from(trusted);
                f(&pkt[VNET_HDR_LEN..], trusted);
            }
            // A super-packet, whole: its header and lengths are checked like any wire input
            // (`GsoPacket::parse`), then the endpoint takes it as one segment of many MSS
            // (the kernel made or merged it, and its checksum is partial: vouched for).
            Ok(h) if self.tso && GsoPacket::parse(pkt).is_ok() => {
                self.stats.gso_in += 1;
                self.stats.csum_trusted += u64::from(h.needs_csum());
                f(&pkt[VNET_HDR_LEN..], h.needs_csum());
            }
            _ => self.stats.rx_refused += 1,
        }
    }

    /// One completion: a read (deliver, post again) or a write (free its buffer).
    fn complete(&mut self, ud: u64, res: i32, flags: u32, f: &mut dyn FnMut(&[u8], bool)) {
        if ud == WAKE_UD {
            self.on_wake(res);
            return;
        }
        if ud == MSHOT_UD && self.bufring.is_some() {
            self.on_mshot(res, flags, f);
            return;
        }
        let Ok(idx) = u16::try_from(ud) else {
            return; // a cancellation's completion (shutdown only)
        };
        let i = usize::from(idx);
        if i >= RX + TX || !self.busy[i] {
            return;
        }
        self.busy[i] = false;
        if i >= RX {
            self.gathered.release(i - RX);
            self.tx_free.push(idx);
            if res < 0 {
                self.stats.writes_refused += 1;
            } else if (res as u32) < self.tx_len[i - RX] {
                self.stats.writes_short += 1;
            }
            return;
        }
        match res {
            n if n > 0 => self.deliver(i, n as usize, f),
            0 => {}
            n => {
                self.stats.read_errors += 1;
                let errno = -n;
                // ECANCELED: the thread that posted the read has exited (the kernel cancels a
                // task's requests when it exits), e.g. a driver opened on one thread and run
                // on another; the thread driving now posts it again.
                if !matches!(
                    errno,
                    libc::EINTR | libc::EAGAIN | libc::ENOBUFS | libc::ECANCELED
                ) {
                    // The device is gone or broken: posting again would spin.
                    self.fatal.get_or_insert(errno);
                    return;
                }
            }
        }
        if self.post_read(idx).is_err() {
            // Cannot happen (the queue has room for every buffer); if it did, the read is
            // lost and the data path runs with one fewer.
            self.stats.read_errors += 1;
        }
    }
}

impl PacketIo for Driver {
    fn now(&self) -> Duration {
        Driver::now(self)
    }

    fn max_packet(&self) -> usize {
        Driver::max_packet(self)
    }

    fn rx_queue(&self) -> Option<tcp_bth::RxQueue> {
        Driver::rx_queue(self)
    }

    fn receive(&mut self, f: &mut dyn FnMut(&[u8], bool)) {
        if self.closed {
            return;
        }
        let before = self.stats.packets_in;
        // One completion at a time: handling one may post a read into the submission queue,
        // which needs the ring again.
        loop {
            let Some(c) = self.ring.completion().next() else {
                break;
            };
            self.complete(c.user_data(), c.result(), c.flags(), f);
        }
        // The clock is read only for the busy-poll experiment (off unless set).
        if self.stats.packets_in != before && !busy_poll().is_zero() {
            self.last_rx = self.now();
        }
    }

    fn can_send(&self) -> bool {
        !self.closed && !self.tx_free.is_empty() && self.unsubmitted < RING as usize
    }

    fn send(&mut self, packet: &[u8]) {
        let mut copied = 0;
        self.send_in_place(packet.len(), |b| {
            copy_payload(b, packet);
            copied = packet.len() as u64;
        });
        self.stats.bytes_copied += copied;
    }

    fn transmit(&mut self, ep: &mut tcp_bth::Endpoint, now: Duration, _: &mut Vec<u8>) -> bool {
        let Some(&idx) = self.tx_free.last().filter(|_| !self.closed) else {
            return false;
        };
        let (i, hdr) = (usize::from(idx), self.vnet_len());
        let fill = if self.vnet {
            ChecksumFill::Partial
        } else {
            ChecksumFill::Full
        };
        // SAFETY: buffer i is free (its last write completed), so nothing else uses it.
        let b = unsafe { self.region.slice_mut(i, self.buf) };
        let parts = self.gathered.parts_mut(i - RX);
        let Some(t) = ep.poll_transmit_gather(now, &mut b[hdr..], fill, parts, self.gather) else {
            return false;
        };
        if self.vnet {
            let partial = (t.checksum == ChecksumFill::Partial).then_some(t.tcp_offset);
            let mut h = VnetHdr::for_packet(&b[hdr..hdr + t.in_buf], partial);
            if t.gso_size > 0 {
                // Cut by the kernel on the way, or carried whole to a receiver with TSO.
                h.gso_type = match t.ip {
                    tcp_bth::wire::IpPair::V4 { .. } => GSO_TCPV4,
                    tcp_bth::wire::IpPair::V6 { .. } => GSO_TCPV6,
                };
                h.gso_size = t.gso_size;
                self.stats.gso_out += 1;
            }
            b[..hdr].copy_from_slice(&h.to_bytes());
            self.stats.csum_offloaded += u64::from(t.checksum == ChecksumFill::Partial);
        }
        if t.in_buf == t.len {
            self.submit_write(idx, hdr + t.len);
        } else {
            self.stats.packets_gathered += 1;
            self.submit_writev(idx, hdr + t.in_buf, hdr + t.len);
        }
        true
    }

    fn wait(&mut self, deadline: Option<Duration>) -> io::Result<()> {
        if self.closed {
            return Err(io::Error::other("the driver was closed"));
        }
        if let Some(errno) = self.fatal {
            let e = io::Error::from_raw_os_error(errno);
            return Err(io::Error::new(e.kind(), format!("TUN read: {e}")));
        }
        let now = self.now();
        let polling = now.saturating_sub(self.last_rx) < busy_poll();
        let wait = if polling {
            Duration::ZERO
        } else {
            deadline
                .map_or(MAX_WAIT, |d| d.saturating_sub(now))
                .min(MAX_WAIT)
        };
        let ts = types::Timespec::new()
            .sec(wait.as_secs())
            .nsec(wait.subsec_nanos());
        let args = types::SubmitArgs::new().timespec(&ts);
        self.stats.enters += 1;
        self.stats.largest_batch = self.stats.largest_batch.max(self.batch);
        self.batch = 0;
        let r = self.ring.submitter().submit_with_args(1, &args);
        self.unsubmitted = self.ring.submission().len();
        match r {
            Ok(_) => Ok(()),
            // The timeout, a signal, or completions to reap first: all mean "turn again".
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn in_flight(&self) -> usize {
        TX - self.tx_free.len()
    }

    fn waker(&self) -> Option<Arc<dyn Fn() + Send + Sync>> {
        let fd = self.wake.clone();
        Some(Arc::new(move || {
            let one = 1u64.to_ne_bytes();
            // SAFETY: writes 8 bytes from a live local buffer to an eventfd we own; a full
            // counter (EAGAIN) already means "wake".
            unsafe { libc::write(fd.as_raw_fd(), one.as_ptr().cast(), 8) };
        }))
    }
}

impl Driver {
    /// Bytes in front of each packet: the virtio-net header, when the device has one.
    fn vnet_len(&self) -> usize {
        if self.vnet {
            VNET_HDR_LEN
        } else {
            0
        }
    }

    /// Write the first `len` bytes of TX buffer `idx` (the last free one) into the device.
    fn submit_write(&mut self, idx: u16, len: usize) {
        let i = usize::from(idx);
        let fd = types::Fd(self.tun.raw_fd());
        let e = opcode::WriteFixed::new(fd, self.region.ptr_of(i), len as u32, idx)
            .build()
            .user_data(u64::from(idx));
        self.queue_write(idx, &e, len);
    }

    /// Write TX buffer `idx`'s first `head` bytes followed by its gathered slices, `len`
    /// bytes in all, into the device.
    fn submit_writev(&mut self, idx: u16, head: usize, len: usize) {
        let i = usize::from(idx);
        let fd = types::Fd(self.tun.raw_fd());
        let (iov, n) = self.gathered.iovecs(i - RX, self.region.ptr_of(i), head);
        let e = opcode::Writev::new(fd, iov, n)
            .build()
            .user_data(u64::from(idx));
        self.queue_write(idx, &e, len);
    }

    /// Queue write `e` of TX buffer `idx` (`len` bytes).
    fn queue_write(&mut self, idx: u16, e: &io_uring::squeue::Entry, len: usize) {
        let i = usize::from(idx);
        if self.push(e).is_err() {
            // The buffer stays free; the packet is lost, the connection's recovery resends.
            self.gathered.release(i - RX);
            self.stats.tx_dropped += 1;
            return;
        }
        self.tx_free.pop();
        self.busy[i] = true;
        self.tx_len[i - RX] = len as u32;
        self.batch += 1;
        self.stats.packets_out += 1;
        self.stats.bytes_out += len as u64;
    }
}

/// Buffer size for a device whose largest packet (MTU and virtio-net header) is `packet`:
/// rounded up to whole pages, so a read never truncates a packet the kernel lets through the
/// device. 384 buffers of 68 KiB are 26 MiB.
fn buf_size(packet: usize) -> usize {
    packet.max(MIN_BUF).next_multiple_of(MIN_BUF)
}

/// A non-blocking eventfd.
fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes no pointers; a non-negative result is a new descriptor we own.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
