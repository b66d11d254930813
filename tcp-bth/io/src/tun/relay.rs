//! A userspace impairment relay between two TUN devices (one per namespace): what the kernel
//! routes into one comes out of the other after the seeded loss, reordering, duplication,
//! corruption, delay and multipath spraying of a [`SimLink`] run on the real clock. The same
//! relay carries kernel TCP and our stack, so both see the same impairments (this machine has
//! no netem).

use super::TunDevice;
use crate::sim::{Direction, LinkConfig, LinkStats, PathStats, SimLink};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub struct Relay {
    a: TunDevice,
    b: TunDevice,
    link: SimLink,
}

/// What the relay's link did, per direction, over the relay's whole life.
#[derive(Debug, Clone, Default)]
pub struct RelayStats {
    pub a_to_b: LinkStats,
    pub b_to_a: LinkStats,
    /// Per sprayed path (empty without spraying).
    pub a_to_b_paths: Vec<PathStats>,
    pub b_to_a_paths: Vec<PathStats>,
}

impl Relay {
    /// Packets read from `a` go to `b` (Direction::AtoB) and back.
    pub fn new(a: TunDevice, b: TunDevice, link: LinkConfig) -> io::Result<Relay> {
        let link = SimLink::try_new(link)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        a.set_nonblocking()?;
        b.set_nonblocking()?;
        Ok(Relay { a, b, link })
    }

    /// Forward until `stop` is set.
    pub fn run(&mut self, stop: &AtomicBool) -> io::Result<RelayStats> {
        // Timer slack (50 µs by default) would stretch every short wait; 1 µs keeps the
        // link's delays close to what it was configured with. Affects this thread only.
        // SAFETY: prctl with an integer argument; no memory is passed.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong) };
        let start = Instant::now();
        let mut buf = vec![0u8; 65536];
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
                while let Some(n) = read_nonblocking(fd, &mut buf)? {
                    self.link.send(now, dir, buf[..n].to_vec());
                }
            }
            while let Some((dir, pkt)) = self.link.poll(start.elapsed()) {
                let fd = match dir {
                    Direction::AtoB => self.b.raw_fd(),
                    Direction::BtoA => self.a.raw_fd(),
                };
                // A full TUN queue drops the packet, as a congested link would.
                // SAFETY: write(2) of a buffer we own.
                let _ = unsafe { libc::write(fd, pkt.as_ptr().cast(), pkt.len()) };
            }
        }
        Ok(RelayStats {
            a_to_b: self.link.stats(Direction::AtoB),
            b_to_a: self.link.stats(Direction::BtoA),
            a_to_b_paths: self.link.path_stats(Direction::AtoB).to_vec(),
            b_to_a_paths: self.link.path_stats(Direction::BtoA).to_vec(),
        })
    }
}

fn read_nonblocking(fd: i32, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: read(2) into a buffer we own.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n >= 0 {
        return Ok(Some(n as usize));
    }
    let e = io::Error::last_os_error();
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
        _ => Err(e),
    }
}
