//! The provided-buffer ring of the driver's multishot read (`IORING_REGISTER_PBUF_RING`,
//! Linux 5.19; `IORING_OP_READ_MULTISHOT`, Linux 6.7).
//!
//! Why multishot: with one `READ_FIXED` posted per receive buffer, 128 reads waited on the TUN
//! descriptor, each with its own poll entry. Every packet that arrived woke all 128: each ran
//! its task work, one found the packet and the rest found nothing and re-armed their poll. On
//! a request/response workload that thundering herd was most of the CPU and the latency
//! (`docs/datapath.md`, "Ring layout and batching"). One multishot read waits once and
//! completes once per packet, taking a buffer from this ring each time.
//!
//! The ring is an array of `struct io_uring_buf` shared with the kernel: we write entries
//! beyond the tail and then publish the new tail (a release store into the first entry's
//! `resv` field, where the kernel reads it); the kernel consumes entries from its head. A
//! buffer handed out in a completion is ours until we push it back.

use super::region::Region;
use io_uring::types::BufRingEntry;
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

/// Bytes of one `struct io_uring_buf`.
const ENTRY: usize = std::mem::size_of::<BufRingEntry>();

pub(super) struct BufRing {
    /// One page-aligned buffer holding the entries (freed after the ring unregisters it:
    /// the driver drops its ring first, and leaks this if it leaks its buffers).
    mem: Region,
    entries: u16,
    /// Our tail: entries pushed, published or not.
    tail: u16,
}

impl BufRing {
    /// A ring of `entries` (a power of two, at most 32768) empty entries.
    pub fn new(entries: u16) -> io::Result<BufRing> {
        if !entries.is_power_of_two() || entries > 1 << 15 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{entries} buffer ring entries: a power of two up to 32768 is needed"),
            ));
        }
        let bytes = (usize::from(entries) * ENTRY).next_multiple_of(4096);
        Ok(BufRing {
            mem: Region::new(1, bytes)?,
            entries,
            tail: 0,
        })
    }

    /// Address of the entries, for `register_buf_ring_with_flags`.
    pub fn addr(&self) -> u64 {
        self.mem.ptr_of(0) as u64
    }

    pub fn entries(&self) -> u16 {
        self.entries
    }

    fn base(&self) -> *mut BufRingEntry {
        self.mem.ptr_of(0).cast()
    }

    /// Hand buffer `bid` (`len` bytes at `addr`) to the kernel; it sees it after
    /// [`publish`](Self::publish).
    pub fn push(&mut self, addr: *mut u8, len: u32, bid: u16) {
        let i = usize::from(self.tail & (self.entries - 1));
        // SAFETY: i < entries, inside the allocation (page-aligned, so the entry is aligned).
        // The kernel reads only entries between its head and the published tail; this one is
        // at the unpublished tail, so nobody else reads or writes it now. The setters write
        // addr, len and bid only, never entry 0's `resv`, which holds the published tail.
        let e = unsafe { &mut *self.base().add(i) };
        e.set_addr(addr as u64);
        e.set_len(len);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Make every pushed entry visible to the kernel.
    pub fn publish(&self) {
        // SAFETY: the tail field lies inside entry 0 and is 2-byte aligned; the kernel reads it
        // with acquire semantics, so this release store orders the entries written before it.
        let tail = unsafe { &*BufRingEntry::tail(self.base()).cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }

    /// Never free the entries: the kernel may still read them.
    pub fn leak(&mut self) {
        self.mem.leak();
    }
}
