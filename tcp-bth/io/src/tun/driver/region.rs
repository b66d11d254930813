//! The memory registered with the ring: one page-aligned allocation cut into fixed-size
//! buffers.
//!
//! The kernel writes into a receive buffer while its read is in flight, at any moment, from
//! another context. So the region is held as a raw pointer, never as one `&mut [u8]` over
//! every buffer (that would claim exclusive access to bytes the kernel is writing); the
//! driver forms a slice of one buffer only while no operation on that buffer is in flight.
//!
//! Freeing the memory while an operation is in flight would let the kernel write into memory
//! the allocator has handed to someone else. The driver therefore reaps every operation
//! before the region drops (`shutdown.rs`); if it cannot prove that, it calls
//! [`Region::leak`] and the memory is never freed.

use std::alloc::{self, Layout};
use std::io;
use std::ptr::NonNull;

/// Buffers of `buf` bytes each, `stride` bytes apart and `offset` bytes into their stride.
pub(super) struct Region {
    ptr: NonNull<u8>,
    layout: Layout,
    stride: usize,
    offset: usize,
    buf: usize,
    count: usize,
    leaked: bool,
}

// SAFETY: the region is plain memory owned by one `Region` (no shared state, no thread
// affinity); moving it to another thread moves that ownership with it.
unsafe impl Send for Region {}

impl Region {
    /// `count` zeroed buffers of `buf` bytes, back to back from a page boundary (each
    /// page-aligned when `buf` is a whole number of pages).
    pub fn new(count: usize, buf: usize) -> io::Result<Region> {
        Region::with_offset(count, buf, 0)
    }

    /// `count` zeroed buffers, `stride` bytes apart (a whole number of pages keeps them all
    /// at the same offset in their page), each starting `offset` bytes into its stride and
    /// `stride - offset` bytes long.
    pub fn with_offset(count: usize, stride: usize, offset: usize) -> io::Result<Region> {
        let buf = stride
            .checked_sub(offset)
            .filter(|&b| b > 0)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("buffers of {stride} bytes cannot start {offset} bytes in"),
                )
            })?;
        // The offset is meant within a page: buffers a whole number of pages apart all have it.
        debug_assert!(
            offset == 0 || stride.is_multiple_of(4096),
            "stride {stride}"
        );
        let size = count
            .checked_mul(stride)
            .filter(|&s| s > 0)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty buffer region"))?;
        let layout = Layout::from_size_align(size, 4096)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        // SAFETY: the layout has a non-zero size (checked above).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        Ok(Region {
            ptr,
            layout,
            stride,
            offset,
            buf,
            count,
            leaked: false,
        })
    }

    /// One iovec per buffer, for `IORING_REGISTER_BUFFERS`: buffer `i` is registered index `i`.
    pub fn iovecs(&self) -> Vec<libc::iovec> {
        (0..self.count)
            .map(|i| libc::iovec {
                iov_base: self.ptr_of(i).cast(),
                iov_len: self.buf,
            })
            .collect()
    }

    /// Start of buffer `i` (`i` < count), for the kernel.
    pub fn ptr_of(&self, i: usize) -> *mut u8 {
        assert!(i < self.count, "buffer {i} of {}", self.count);
        // SAFETY: i < count and offset + buf = stride, so buffer i stays inside the allocation.
        unsafe { self.ptr.as_ptr().add(i * self.stride + self.offset) }
    }

    /// The first `len` bytes of buffer `i`.
    ///
    /// # Safety
    /// No operation on buffer `i` may be in flight (the kernel must not write to it) for as
    /// long as the slice lives.
    pub unsafe fn slice(&self, i: usize, len: usize) -> &[u8] {
        let len = len.min(self.buf);
        // SAFETY: inside buffer i (len clamped); the caller guarantees nobody writes to it.
        unsafe { std::slice::from_raw_parts(self.ptr_of(i), len) }
    }

    /// The first `len` bytes of buffer `i`, to fill.
    ///
    /// # Safety
    /// As [`slice`](Self::slice): no operation on buffer `i` in flight while the slice lives.
    pub unsafe fn slice_mut(&mut self, i: usize, len: usize) -> &mut [u8] {
        let len = len.min(self.buf);
        // SAFETY: inside buffer i (len clamped); `&mut self` and the caller's guarantee make
        // this the only access to it.
        unsafe { std::slice::from_raw_parts_mut(self.ptr_of(i), len) }
    }

    /// Never free the memory: the kernel may still write into it.
    pub fn leak(&mut self) {
        self.leaked = true;
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if !self.leaked {
            // SAFETY: allocated in `new` with this layout, freed once (here).
            unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_start_at_the_offset_in_their_pages_and_end_at_the_next_stride() {
        let r = Region::with_offset(3, 8192, 64).expect("region");
        let base = r.ptr_of(0) as usize - 64;
        assert_eq!(base % 4096, 0, "the allocation is page-aligned");
        for i in 0..3 {
            assert_eq!(r.ptr_of(i) as usize, base + i * 8192 + 64);
            assert_eq!(r.iovecs()[i].iov_len, 8192 - 64);
        }
        // A slice is clamped to its buffer.
        // SAFETY: nothing is in flight on a region no ring has seen.
        assert_eq!(unsafe { r.slice(2, 1 << 20) }.len(), 8192 - 64);
        assert_eq!(
            Region::new(2, 4096).expect("plain").ptr_of(1) as usize % 4096,
            0
        );
        for bad in [8192, 9000] {
            let e = Region::with_offset(1, 8192, bad).err().expect("refused");
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        }
    }
}
