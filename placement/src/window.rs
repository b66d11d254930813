//! A per-class window of MSNs: `entries[k]` belongs to MSN `head + k` (mod 2^16). The head is
//! the oldest message not yet completed; completing pops from the front, so completions leave in
//! MSN order.

use std::collections::VecDeque;

/// Serial-number arithmetic allows at most 2^15 messages of a class in flight.
pub(crate) const MAX_WINDOW: usize = 0x8000;

#[derive(Debug)]
pub(crate) struct MsnWindow<T> {
    pub head: u16,
    pub entries: VecDeque<T>,
}

/// Where an MSN falls relative to a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Locate {
    /// Before the head: that message already completed.
    Behind,
    /// `entries[k]`.
    At(usize),
    /// `k` messages past the head, at or beyond the entries held.
    Ahead(usize),
}

impl<T> MsnWindow<T> {
    pub fn new(head: u16) -> Self {
        MsnWindow {
            head,
            entries: VecDeque::new(),
        }
    }

    #[inline(always)]
    pub fn locate(&self, msn: u16) -> Locate {
        let k = usize::from(msn.wrapping_sub(self.head));
        if k >= MAX_WINDOW {
            Locate::Behind
        } else if k < self.entries.len() {
            Locate::At(k)
        } else {
            Locate::Ahead(k)
        }
    }

    /// The MSN the next pushed entry belongs to.
    pub fn next_msn(&self) -> u16 {
        self.head.wrapping_add(self.entries.len() as u16)
    }

    /// Newest completed MSN of the class.
    pub fn completed(&self) -> u16 {
        self.head.wrapping_sub(1)
    }

    pub fn pop(&mut self) -> Option<(u16, T)> {
        let e = self.entries.pop_front()?;
        let msn = self.head;
        self.head = self.head.wrapping_add(1);
        Some((msn, e))
    }
}
