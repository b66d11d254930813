//! The end of a driver: every read and write is cancelled and its completion reaped before the
//! registered buffers are freed.
//!
//! The driver keeps a read posted on the TUN descriptor at all times (one multishot read over
//! provided buffers by default, or `RX` single reads); when it is dropped
//! they are still in the kernel, which completes a read by copying a packet into its buffer.
//! Closing the ring does cancel them, but asynchronously (the kernel tears the ring down in a
//! worker), after our `Drop` has returned and freed the memory. So drop first submits one
//! `IORING_OP_ASYNC_CANCEL` with `IORING_ASYNC_CANCEL_ANY` (Linux 5.19; an older kernel answers
//! `EINVAL`, and then each operation is cancelled by its user_data), then waits for the
//! completion of every operation it had in flight. Only then may the region go. If the kernel
//! has not completed them all within [`REAP_LIMIT`] the region is leaked instead: a few hundred
//! KiB lost is better than the kernel writing into memory the allocator gave to someone else.

use super::{Driver, RX};
use io_uring::{opcode, squeue, types, IoUring};
use std::time::{Duration, Instant};

/// user_data of the cancellation requests: above every buffer index.
const CANCEL_ANY: u64 = 1 << 32;
const CANCEL_ONE: u64 = (1 << 32) + 1;
/// How long the reaping may take in all before the region is leaked.
const REAP_LIMIT: Duration = Duration::from_secs(2);
/// One wait for completions while reaping.
const REAP_WAIT: Duration = Duration::from_millis(10);

/// What [`Driver::close`] (or dropping the driver) found in flight, and what became of it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Shutdown {
    /// Reads and writes submitted (or queued for submission) and not completed when the
    /// shutdown began.
    pub reads: usize,
    /// Writes in flight when the shutdown began.
    pub writes: usize,
    /// Their completions, reaped: cancelled (`ECANCELED`), or finished before the
    /// cancellation reached them (a packet arrived, a write went out).
    pub cancelled: usize,
    /// Of those, finished before the cancellation reached them.
    pub completed: usize,
    /// Operations not reaped within the limit: the buffers were leaked, not freed.
    pub abandoned: usize,
    /// Each operation was cancelled by its user_data (the kernel refused
    /// `IORING_ASYNC_CANCEL_ANY`).
    pub per_op: bool,
}

impl Shutdown {
    /// Every operation in flight was reaped.
    pub fn all_reaped(&self) -> bool {
        self.abandoned == 0 && self.cancelled + self.completed == self.reads + self.writes
    }
}

impl Driver {
    /// Stop the data path: cancel every read and write in flight and reap their
    /// completions, then free the buffers. Dropping the driver does the same; this also
    /// says what it found.
    pub fn close(mut self) -> Shutdown {
        self.shutdown()
    }

    /// Cancel and reap; idempotent (the second call finds nothing to do).
    fn shutdown(&mut self) -> Shutdown {
        if self.closed {
            return Shutdown::default();
        }
        self.closed = true;
        let s = cancel_and_reap(&mut self.ring, &mut self.busy, RX, false, REAP_LIMIT);
        self.unsubmitted = self.ring.submission().len();
        if s.abandoned > 0 {
            self.region.leak();
            self.gathered.leak();
            if let Some(r) = self.bufring.as_mut() {
                r.leak();
            }
        }
        s
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Then the fields drop in order: the ring (unregistering the buffers), the device,
        // and the region last, which frees it unless `shutdown` leaked it.
        self.shutdown();
    }
}

fn push(ring: &mut IoUring, e: &squeue::Entry) -> bool {
    // SAFETY: a cancellation names operations by user_data and touches no memory of ours.
    unsafe { ring.submission().push(e) }.is_ok()
}

/// Cancel every operation marked in `busy` (user_data = index; reads below `reads_below`,
/// writes above) and reap completions until none is left or `limit` passes; `per_op` skips
/// `IORING_ASYNC_CANCEL_ANY` and cancels each by its user_data at once. Whatever is queued
/// in the submission queue is submitted first (in order, so before the cancellation).
fn cancel_and_reap(
    ring: &mut IoUring,
    busy: &mut [bool],
    reads_below: usize,
    per_op: bool,
    limit: Duration,
) -> Shutdown {
    let count = |b: &[bool]| b.iter().filter(|&&x| x).count();
    let split = reads_below.min(busy.len());
    let mut s = Shutdown {
        reads: count(&busy[..split]),
        writes: count(&busy[split..]),
        per_op,
        ..Shutdown::default()
    };
    let mut left = s.reads + s.writes;
    let until = Instant::now() + limit;
    let busy_list =
        |b: &[bool]| -> Vec<u64> { (0..b.len()).filter(|&i| b[i]).map(|i| i as u64).collect() };
    let mut any = (!per_op).then(|| {
        opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(CANCEL_ANY)
    });
    let mut one_by_one = if per_op { busy_list(busy) } else { Vec::new() };
    while left > 0 {
        if Instant::now() >= until {
            s.abandoned = left;
            break;
        }
        // Queue the cancellations; what does not fit goes after the next submit.
        if let Some(e) = any.take() {
            if !push(ring, &e) {
                any = Some(e);
            }
        }
        while let Some(&ud) = one_by_one.last() {
            let e = opcode::AsyncCancel::new(ud).build().user_data(CANCEL_ONE);
            if !push(ring, &e) {
                break;
            }
            one_by_one.pop();
        }
        reap_wait(ring);
        loop {
            let Some(c) = ring.completion().next() else {
                break;
            };
            let (ud, res) = (c.user_data(), c.result());
            if io_uring::cqueue::more(c.flags()) {
                // A multishot operation goes on after this completion: its last one counts.
                continue;
            }
            match ud {
                CANCEL_ANY if res == -libc::EINVAL => {
                    s.per_op = true;
                    one_by_one = busy_list(busy);
                }
                CANCEL_ANY | CANCEL_ONE => {}
                _ => {
                    let Some(b) = usize::try_from(ud).ok().and_then(|i| busy.get_mut(i)) else {
                        continue;
                    };
                    if *b {
                        *b = false;
                        left -= 1;
                        if res == -libc::ECANCELED {
                            s.cancelled += 1;
                        } else {
                            s.completed += 1;
                        }
                    }
                }
            }
        }
    }
    s
}

/// Submit what is queued and wait briefly for a completion.
fn reap_wait(ring: &mut IoUring) {
    let ts = types::Timespec::new().nsec(REAP_WAIT.subsec_nanos());
    let args = types::SubmitArgs::new().timespec(&ts);
    if let Err(e) = ring.submitter().submit_with_args(1, &args) {
        if !matches!(
            e.raw_os_error(),
            Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN)
        ) {
            // The ring itself fails: nothing will complete, but do not spin either.
            std::thread::sleep(REAP_WAIT);
        }
    }
}

#[cfg(test)]
#[path = "shutdown_tests.rs"]
mod tests;
