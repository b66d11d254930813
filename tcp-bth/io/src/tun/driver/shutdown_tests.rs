//! Cancel and reap without a TUN device (no privileges): reads posted on an empty pipe stay in
//! the kernel, as the driver's reads on a quiet TUN descriptor do.

use super::super::region::Region;
use super::*;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const N: usize = 16;
const BUF: usize = 4096;

/// A ring with `N` fixed-buffer reads posted and submitted on the read end of a pipe.
struct Posted {
    ring: IoUring,
    busy: Vec<bool>,
    write_end: OwnedFd,
    _read_end: OwnedFd,
    // Last: freed after the ring, and only once the test has reaped (as in the driver).
    _region: Region,
}

fn posted() -> Posted {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: fresh descriptors we own.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let mut ring = IoUring::new(64).expect("ring");
    let region = Region::new(N, BUF).expect("region");
    // SAFETY: the region outlives the ring (field order) and every read is reaped first.
    unsafe { ring.submitter().register_buffers(&region.iovecs()) }.expect("register");
    for i in 0..N {
        let e = opcode::ReadFixed::new(
            types::Fd(r.as_raw_fd()),
            region.ptr_of(i),
            BUF as u32,
            i as u16,
        )
        .build()
        .user_data(i as u64);
        // SAFETY: buffer i is used by this read alone and lives until it is reaped.
        unsafe { ring.submission().push(&e) }.expect("queue room");
    }
    ring.submit().expect("submit");
    Posted {
        ring,
        busy: vec![true; N],
        write_end: w,
        _read_end: r,
        _region: region,
    }
}

#[test]
fn cancel_any_reaps_every_posted_read() {
    let mut p = posted();
    let s = cancel_and_reap(&mut p.ring, &mut p.busy, N, false, REAP_LIMIT);
    assert_eq!((s.reads, s.writes, s.cancelled), (N, 0, N), "{s:?}");
    assert!(s.all_reaped() && !s.per_op, "{s:?}");
    assert!(p.busy.iter().all(|b| !b));
}

#[test]
fn cancelling_one_by_one_reaps_them_too() {
    let mut p = posted();
    let s = cancel_and_reap(&mut p.ring, &mut p.busy, N, true, REAP_LIMIT);
    assert_eq!((s.reads, s.cancelled), (N, N), "{s:?}");
    assert!(s.all_reaped() && s.per_op, "{s:?}");
}

#[test]
fn a_read_with_data_completes_and_is_reaped_as_completed() {
    let mut p = posted();
    // SAFETY: write(2) of one byte from a live buffer to a descriptor we own.
    let n = unsafe { libc::write(p.write_end.as_raw_fd(), b"x".as_ptr().cast(), 1) };
    assert_eq!(n, 1);
    // Upper half counted as writes: the split is only bookkeeping.
    let s = cancel_and_reap(&mut p.ring, &mut p.busy, N / 2, false, REAP_LIMIT);
    assert_eq!((s.reads, s.writes), (N / 2, N / 2));
    assert_eq!((s.completed, s.cancelled), (1, N - 1), "{s:?}");
    assert!(s.all_reaped(), "{s:?}");
}

#[test]
fn nothing_in_flight_is_nothing_to_do() {
    let mut ring = IoUring::new(8).expect("ring");
    let mut busy = vec![false; 4];
    let s = cancel_and_reap(&mut ring, &mut busy, 2, false, REAP_LIMIT);
    assert_eq!(s, Shutdown::default());
    assert!(s.all_reaped());
}
