//! The connection's completion queue. Placement completes messages in MSN order within each
//! class; a completion then waits here until the cumulative ACK point has passed the end of its
//! message, which restores order across classes (a WRITE-with-immediate after an earlier SEND).
//! Requester completions (SEND, WRITE acknowledged; errors) need no wait and go straight out.

use super::Completion;
use std::collections::{BTreeMap, VecDeque};

#[derive(Debug, Default)]
pub(super) struct CompletionQueue {
    /// Keyed by (stream end of the message, arrival order).
    held: BTreeMap<(u64, u64), Completion>,
    arrivals: u64,
    ready: VecDeque<Completion>,
}

impl CompletionQueue {
    /// Hold `c` until the cumulative point reaches `end`.
    pub fn hold(&mut self, end: u64, c: Completion) {
        self.arrivals += 1;
        self.held.insert((end, self.arrivals), c);
    }

    /// Ready now.
    pub fn push(&mut self, c: Completion) {
        self.ready.push_back(c);
    }

    /// Everything held for messages wholly below `nxt` becomes ready, in stream order.
    pub fn release(&mut self, nxt: u64) {
        while let Some(entry) = self.held.first_entry() {
            if entry.key().0 > nxt {
                break;
            }
            self.ready.push_back(entry.remove());
        }
    }

    /// The connection ended: nothing will arrive any more, so nothing waits.
    pub fn release_all(&mut self) {
        self.release(u64::MAX);
    }

    /// Take what is still held: messages beyond a hole that the connection will never fill.
    pub fn take_held(&mut self) -> Vec<Completion> {
        std::mem::take(&mut self.held).into_values().collect()
    }

    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    pub fn pop(&mut self) -> Option<Completion> {
        self.ready.pop_front()
    }
}
