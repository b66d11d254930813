//! Packets written as gathered parts: the headers in a transmit buffer of the region, the
//! payload as the application's own buffers (`IORING_OP_WRITEV`), so the send side makes no
//! copy of a payload byte in user space; the kernel's copy into its socket buffer is the one.
//!
//! Before this, each payload byte was copied into the registered transmit buffer behind the
//! header and the kernel copied it again: at MTU 65000 that copy was 13 % of the client
//! thread's samples (`__memmove_avx_unaligned_erms`, `perf record` of `bth-perf local -s
//! 1048576 -t 2 --verify --mtu 65000`), 6 % at 9000.
//!
//! Lifetime: a packet's slices (`Bytes`, each a reference on the application's buffer) and
//! the iovecs pointing into them stay here until the write's completion is reaped, so the
//! memory the kernel reads cannot be freed or reused under it; if a shutdown cannot reap every
//! write, [`Gathered::leak`] keeps them forever, like the region.

use bytes::Bytes;

/// Most iovecs of one write: the headers and up to `MAX_IOV - 1` payload slices (a segment
/// within one posted buffer is one slice, across a boundary two; the connection copies a
/// payload in more than this allows).
pub(super) const MAX_IOV: usize = 4;

/// What the driver gathers: payloads of 2 KiB and more, in at most `MAX_IOV - 1` slices.
/// Smaller ones are copied into the registered buffer behind the header as before: at MTU
/// 1500 (1448-byte payloads) gathering measured 2.35-2.43 Gbit/s against 2.38-2.49 copying
/// (`bth-perf local -s 1048576 -n 384 -t 2 --verify`, alternating, five each), as `writev`
/// imports its iovecs where `WRITE_FIXED` uses a registered buffer, and the small copy was
/// cheap; at MTU 4096 gathering moved 5.23-5.78 against 5.29-5.66, at 9000 9.71-10.10
/// against 9.13-9.87.
pub(super) const GATHER: tcp_bth::GatherLimits = tcp_bth::GatherLimits {
    max_parts: MAX_IOV - 1,
    min_payload: 2048,
    // Set by the driver from the device and `Features::gso`.
    gso_payload: 0,
};

/// Per transmit buffer: the slices of the packet in flight from it, and its iovecs.
pub(super) struct Gathered {
    parts: Vec<Vec<Bytes>>,
    /// Boxed, so the addresses handed to the kernel never move.
    iov: Box<[[libc::iovec; MAX_IOV]]>,
    leaked: bool,
}

// SAFETY: the iovecs point into memory this value (the slices) or the driver's region owns;
// they are plain data with no thread affinity, and moving the driver moves their owners too.
unsafe impl Send for Gathered {}

impl Gathered {
    pub fn new(buffers: usize) -> Gathered {
        let none = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        Gathered {
            parts: (0..buffers).map(|_| Vec::with_capacity(MAX_IOV)).collect(),
            iov: vec![[none; MAX_IOV]; buffers].into_boxed_slice(),
            leaked: false,
        }
    }

    /// Buffer `slot`'s slice vector, for the endpoint to fill (empty unless a write from it
    /// is in flight).
    pub fn parts_mut(&mut self, slot: usize) -> &mut Vec<Bytes> {
        &mut self.parts[slot]
    }

    /// The iovecs of buffer `slot`'s packet: `head` (`head_len` bytes of the region) and
    /// then its slices; the pointer stays valid until [`release`](Self::release).
    pub fn iovecs(
        &mut self,
        slot: usize,
        head: *mut u8,
        head_len: usize,
    ) -> (*const libc::iovec, u32) {
        let iov = &mut self.iov[slot];
        let parts = &self.parts[slot];
        debug_assert!(parts.len() < MAX_IOV);
        iov[0] = libc::iovec {
            iov_base: head.cast(),
            iov_len: head_len,
        };
        for (v, p) in iov[1..].iter_mut().zip(parts) {
            *v = libc::iovec {
                // The kernel only reads through it (a write).
                iov_base: p.as_ptr().cast_mut().cast(),
                iov_len: p.len(),
            };
        }
        (iov.as_ptr(), 1 + parts.len() as u32)
    }

    /// Buffer `slot`'s write completed: let go of its slices (nothing after a
    /// [`leak`](Self::leak), which keeps them all).
    pub fn release(&mut self, slot: usize) {
        if let Some(p) = self.parts.get_mut(slot) {
            p.clear();
        }
    }

    /// A shutdown could not reap every write: never free what they may still read.
    pub fn leak(&mut self) {
        if !self.leaked {
            self.leaked = true;
            std::mem::forget(std::mem::take(&mut self.parts));
            std::mem::forget(std::mem::replace(&mut self.iov, Box::new([])));
        }
    }
}
