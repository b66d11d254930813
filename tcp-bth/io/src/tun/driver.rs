//! The io_uring loop over a TUN device.
//!
//! Ring layout: `RX` fixed-buffer reads stay posted on the TUN descriptor at all times (user_data
//! = buffer index); writes use the `TX` fixed buffers after them (user_data = index). One
//! `io_uring_enter` per loop turn both submits every queued write and waits for the next
//! completion or the connection's next deadline (`IORING_ENTER_EXT_ARG` timeout), so there is no
//! per-packet system call.

use super::TunDevice;
use etherparse::{IpNumber, Ipv4Header, Ipv4Slice};
use io_uring::{opcode, types, IoUring};
use std::collections::VecDeque;
use std::io;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};
use tcp_bth::wire::IpPair;
use tcp_bth::{Config, Connection};

const RX: usize = 128;
const TX: usize = 256;
/// Largest packet: the TUN MTU is at most this (no offload super-segments here).
const BUF: usize = 4096;

/// Which side of the handshake this driver plays.
pub enum Endpoint {
    Connect(Config),
    /// Accept the first SYN for `cfg.local_port`; `cfg.ip`'s destination is taken from it.
    Listen(Config),
}

#[derive(Debug, Default, Clone, Copy)]
pub struct DriverStats {
    pub packets_in: u64,
    pub packets_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// io_uring_enter calls.
    pub enters: u64,
    /// Packets not for us (other protocol, address or port) or not IPv4.
    pub ignored: u64,
    pub largest_batch: usize,
}

pub struct Driver {
    ring: IoUring,
    tun: TunDevice,
    mem: Vec<u8>,
    tx_free: Vec<u16>,
    backlog: VecDeque<Vec<u8>>,
    local: [u8; 4],
    start: Instant,
    pub stats: DriverStats,
}

impl Driver {
    /// Set up the ring and register its buffers. `local` is the stack's own address (behind the
    /// TUN device; the kernel routes it into the device).
    pub fn new(tun: TunDevice, local: Ipv4Addr) -> io::Result<Driver> {
        if tun.offload() {
            // Its packets would start with a virtio-net header and could be 64 KiB.
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the driver needs a TUN device without offload",
            ));
        }
        if tun.mtu() as usize > BUF {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("MTU {} above the driver's {BUF}-byte buffers", tun.mtu()),
            ));
        }
        let ring = IoUring::new(512)?;
        let mut mem = vec![0u8; (RX + TX) * BUF];
        let iovecs: Vec<libc::iovec> = mem
            .chunks_mut(BUF)
            .map(|c| libc::iovec {
                iov_base: c.as_mut_ptr().cast(),
                iov_len: BUF,
            })
            .collect();
        // SAFETY: the buffers live in `mem`, which is never resized and outlives the ring
        // (the ring is declared first in `Driver`, so it is dropped, and unregisters them, first).
        unsafe { ring.submitter().register_buffers(&iovecs)? };
        let mut d = Driver {
            ring,
            tun,
            mem,
            tx_free: (RX as u16..(RX + TX) as u16).collect(),
            backlog: VecDeque::new(),
            local: local.octets(),
            start: Instant::now(),
            stats: DriverStats::default(),
        };
        for i in 0..RX {
            d.post_read(i as u16)?;
        }
        Ok(d)
    }

    fn post_read(&mut self, idx: u16) -> io::Result<()> {
        let ptr = self.mem[idx as usize * BUF..].as_mut_ptr();
        let e = opcode::ReadFixed::new(types::Fd(self.tun.raw_fd()), ptr, BUF as u32, idx)
            .build()
            .user_data(u64::from(idx));
        // SAFETY: the buffer stays valid and untouched until this read completes.
        unsafe { self.ring.submission().push(&e) }
            .map_err(|_| io::Error::other("submission queue full"))
    }

    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Queue one TCP segment as an IPv4 packet into a free TX buffer.
    fn queue_write(&mut self, dst: [u8; 4], tcp: &[u8]) -> io::Result<bool> {
        let Some(idx) = self.tx_free.pop() else {
            return Ok(false);
        };
        let mut h = Ipv4Header::new(tcp.len() as u16, 64, IpNumber::TCP, self.local, dst)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        h.dont_fragment = true;
        h.header_checksum = h.calc_header_checksum();
        let hb = h.to_bytes();
        let total = hb.len() + tcp.len();
        let base = idx as usize * BUF;
        self.mem[base..base + hb.len()].copy_from_slice(&hb);
        self.mem[base + hb.len()..base + total].copy_from_slice(tcp);
        let e = opcode::WriteFixed::new(
            types::Fd(self.tun.raw_fd()),
            self.mem[base..].as_ptr(),
            total as u32,
            idx,
        )
        .build()
        .user_data(u64::from(idx));
        // SAFETY: the TX buffer is not reused until its completion returns it to tx_free.
        unsafe { self.ring.submission().push(&e) }
            .map_err(|_| io::Error::other("submission queue full"))?;
        self.stats.packets_out += 1;
        self.stats.bytes_out += total as u64;
        Ok(true)
    }

    /// Run one connection until `app` says it is done (or `limit` passes). `app` runs every loop
    /// turn with the connection and the current time: post work, poll completions there.
    pub fn run(
        &mut self,
        endpoint: Endpoint,
        limit: Duration,
        mut app: impl FnMut(&mut Connection, Duration) -> bool,
    ) -> io::Result<Connection> {
        let deadline = self.now() + limit;
        let (mut conn, listen_cfg) = match endpoint {
            Endpoint::Connect(cfg) => (Some(Connection::connect(cfg, self.now())), None),
            Endpoint::Listen(cfg) => (None, Some(cfg)),
        };
        let mut done = false;
        loop {
            let now = self.now();
            if now >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("not done within {limit:?}"),
                ));
            }
            // 1. Completions: received packets and finished writes.
            let cqes: Vec<(u64, i32)> = self
                .ring
                .completion()
                .map(|c| (c.user_data(), c.result()))
                .collect();
            for (ud, res) in cqes {
                let idx = ud as u16;
                if (idx as usize) < RX {
                    if res > 0 {
                        let (start, len) = (idx as usize * BUF, res as usize);
                        self.deliver(now, start, len, &mut conn, listen_cfg.as_ref());
                    }
                    self.post_read(idx)?;
                } else {
                    self.tx_free.push(idx);
                }
            }
            if let Some(c) = conn.as_mut() {
                if c.poll_timeout().is_some_and(|t| t <= now) {
                    c.handle_timeout(now);
                }
                if !done && app(c, now) {
                    done = true;
                }
            }
            // 2. Everything the connection wants to send, as one batch.
            let dst = conn.as_ref().and_then(|c| match c.config().ip {
                IpPair::V4 { dst, .. } => Some(dst),
                IpPair::V6 { .. } => None,
            });
            let mut batch = 0;
            while let Some(seg) = self.backlog.pop_front() {
                if !self.write_segment(dst, &seg)? {
                    self.backlog.push_front(seg);
                    break;
                }
                batch += 1;
            }
            if let Some(c) = conn.as_mut() {
                while self.backlog.is_empty() {
                    let Some(seg) = c.poll_transmit(now) else {
                        break;
                    };
                    if !self.write_segment(dst, &seg)? {
                        self.backlog.push_back(seg);
                    } else {
                        batch += 1;
                    }
                }
            }
            self.stats.largest_batch = self.stats.largest_batch.max(batch);
            let in_flight_writes = self.tx_free.len() < TX;
            if done && self.backlog.is_empty() && !in_flight_writes {
                return conn.ok_or_else(|| io::Error::other("no connection"));
            }
            // 3. One enter: submit the batch, wait for a completion or the next deadline.
            let wait = conn
                .as_ref()
                .and_then(|c| c.poll_timeout())
                .map_or(Duration::from_millis(5), |t| t.saturating_sub(now))
                .min(Duration::from_millis(5));
            let ts = types::Timespec::new()
                .sec(wait.as_secs())
                .nsec(wait.subsec_nanos());
            let args = types::SubmitArgs::new().timespec(&ts);
            self.stats.enters += 1;
            match self.ring.submitter().submit_with_args(1, &args) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ETIME) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// False when no TX buffer is free (the caller keeps the segment for the next turn).
    fn write_segment(&mut self, dst: Option<[u8; 4]>, seg: &[u8]) -> io::Result<bool> {
        match dst {
            Some(dst) => self.queue_write(dst, seg),
            // IPv6 is not driven over TUN yet: drop rather than write a wrong packet.
            None => Ok(true),
        }
    }

    fn deliver(
        &mut self,
        now: Duration,
        start: usize,
        len: usize,
        conn: &mut Option<Connection>,
        listen: Option<&Config>,
    ) {
        let pkt = &self.mem[start..start + len];
        let Ok(ip) = Ipv4Slice::from_slice(pkt) else {
            self.stats.ignored += 1;
            return;
        };
        let h = ip.header();
        if h.protocol() != IpNumber::TCP || h.destination() != self.local || ip.payload().fragmented
        {
            self.stats.ignored += 1;
            return;
        }
        let tcp = ip.payload().payload;
        self.stats.packets_in += 1;
        self.stats.bytes_in += len as u64;
        match (conn.as_mut(), listen) {
            (Some(c), _) => c.handle_segment(now, tcp),
            (None, Some(cfg)) => {
                let mut cfg = cfg.clone();
                cfg.ip = IpPair::V4 {
                    src: self.local,
                    dst: h.source(),
                };
                *conn = Connection::accept(cfg, now, tcp);
                if conn.is_none() {
                    self.stats.ignored += 1;
                }
            }
            (None, None) => self.stats.ignored += 1,
        }
    }
}
