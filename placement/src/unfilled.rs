//! Bytes of posted buffers (receive buffers, READ sinks) that no segment has filled yet: what
//! the receiver can still take without the application posting more. The stack builds its
//! admission grant (the R=1 byte grant) on it.
//!
//! Kept as two running sums per class, updated where buffers are posted, filled and retired,
//! because the grant is re-evaluated after every in-order segment: summing over up to
//! `max_posted_recvs` buffers each time would put a loop over the receive queue on the
//! per-segment path.

/// The unfilled bytes of one class's posted buffers.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unfilled {
    /// Capacity of the buffers in the class's window.
    posted: u64,
    /// Bytes covered inside those buffers.
    covered: u64,
}

/// Capacity a buffer of `len` bytes stands for. A zero-length receive still admits one byte:
/// the pad byte a zero-length SEND takes in the stream, which a grant of 0 would hold back.
pub(crate) fn capacity(len: usize) -> u64 {
    (len as u64).max(1)
}

impl Unfilled {
    /// A buffer of `len` bytes was posted.
    pub fn post(&mut self, len: usize) {
        self.posted = self.posted.saturating_add(capacity(len));
    }

    /// A segment moved one message's coverage from `before` to `after` bytes.
    pub fn placed(&mut self, before: u64, after: u64) {
        self.covered = self.covered.saturating_add(after.saturating_sub(before));
    }

    /// A segment filled `n` bytes that were not present before.
    pub fn filled(&mut self, n: u32) {
        self.covered = self.covered.saturating_add(u64::from(n));
    }

    /// A buffer of `len` bytes with `covered` bytes placed left the window (completed, flushed
    /// or cancelled).
    pub fn retire(&mut self, len: usize, covered: u64) {
        self.posted = self.posted.saturating_sub(capacity(len));
        self.covered = self.covered.saturating_sub(covered);
    }

    /// Posted bytes not yet filled. Saturating: a segment refused for running past its buffer
    /// (length error) is still tracked in coverage, so `covered` may exceed `posted` until
    /// that buffer retires.
    pub fn bytes(&self) -> u64 {
        self.posted.saturating_sub(self.covered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn post_fill_retire() {
        let mut u = Unfilled::default();
        u.post(1000);
        u.post(0);
        assert_eq!(u.bytes(), 1001);
        u.placed(0, 400);
        u.placed(400, 400);
        assert_eq!(u.bytes(), 601);
        u.retire(1000, 400);
        assert_eq!(u.bytes(), 1);
        u.retire(0, 0);
        assert_eq!(u, Unfilled::default());
        // Covered past the buffer (a length error) never underflows.
        u.post(10);
        u.placed(0, 50);
        assert_eq!(u.bytes(), 0);
        u.retire(10, 50);
        assert_eq!(u.bytes(), 0);
    }
}
