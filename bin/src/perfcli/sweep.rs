//! The message sizes of `-a` and how many messages each runs.

/// Smallest and largest size of the sweep: 2 B to 8 MiB, as perftest's `-a`.
pub const SWEEP_MIN_LOG2: u32 = 1;
pub const SWEEP_MAX_LOG2: u32 = 23;
/// Without `-n`, a sweep row moves about this many bytes (unless that is more messages than
/// the default count, or fewer than [`SWEEP_MIN_ITERS`]).
pub const SWEEP_BYTES: u64 = 256 << 20;
pub const SWEEP_MIN_ITERS: u64 = 16;

/// Every size of the sweep, ascending: the powers of two from 2 B to 8 MiB.
pub fn sweep_sizes() -> Vec<u32> {
    (SWEEP_MIN_LOG2..=SWEEP_MAX_LOG2)
        .map(|e| 1u32 << e)
        .collect()
}

/// Messages for a sweep row of `size` bytes when `-n` is not given.
pub fn sweep_iters(size: u32, default: u64) -> u64 {
    (SWEEP_BYTES / u64::from(size.max(1)))
        .max(SWEEP_MIN_ITERS)
        .min(default)
}
