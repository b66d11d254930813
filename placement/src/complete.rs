//! In-order completion per class, the completion queue, and flush.
//!
//! A finished message leaves its class's window only from the front, so its completion waits
//! for every earlier MSN of the class. The completion queue is bounded: when it is full, a
//! completion that needs an entry stays in its window (which eventually fills and turns further
//! segments away as out of window, i.e. back-pressure) until the owner polls.

use crate::cqe::{Cqe, WcOp, WcStatus};
use crate::placer::Placement;
use bth_wire::MsgClass;

impl Placement {
    /// The next completion, in MSN order within each class.
    pub fn poll_completion(&mut self) -> Option<Cqe> {
        let cqe = self.cq.pop_front()?;
        // Room again: release completions that were held back by a full queue.
        for class in MsgClass::ALL {
            self.drain(class, false);
        }
        Some(cqe)
    }

    /// Completions queued and not yet polled.
    pub fn pending_completions(&self) -> usize {
        self.cq.len()
    }

    /// The newest MSN of `class` completed in order (`first_msn - 1` before any).
    pub fn completed_msn(&self, class: MsgClass) -> u16 {
        match class {
            MsgClass::Send => self.send.completed(),
            MsgClass::Write => self.write.completed(),
            MsgClass::ReadRequest => self.read_req.completed(),
            MsgClass::ReadResponse => self.reads.completed(),
        }
    }

    /// The responder refused our READ with this MSN (a NAK): it completes with `status`, sink
    /// handed back, when it reaches the front of the window or at [`flush`](Self::flush).
    /// False if no such READ is outstanding.
    pub fn fail_read(&mut self, msn: u16, status: WcStatus) -> bool {
        if !self.reads_anchored {
            return false;
        }
        let crate::window::Locate::At(k) = self.reads.locate(msn) else {
            return false;
        };
        match self.reads.entries.get_mut(k) {
            Some(r) => {
                r.track.failed.get_or_insert(status);
                r.track.finished = true;
                self.drain(MsgClass::ReadResponse, false);
                true
            }
            None => false,
        }
    }

    /// Connection error or close: messages already finished complete as usual, then every
    /// posted receive and outstanding READ completes in MSN order, with its own error if it
    /// failed (a SEND longer than its buffer, a refused READ) and `WrFlushError` otherwise,
    /// buffer handed back. Later posts are refused and later segments dropped.
    pub fn flush(&mut self) {
        if self.flushed {
            return;
        }
        for class in MsgClass::ALL {
            self.drain(class, true);
        }
        self.flushed = true;
        while let Some((msn, p)) = self.send.pop() {
            self.books.release(&p.track);
            self.recv_unfilled
                .retire(p.buf.len(), p.track.cov.covered());
            let e = Ended::new(MsgClass::Send, msn, p.wr_id, WcOp::Recv);
            self.push_ended(e, p.track.failed, p.buf);
        }
        while let Some((msn, r)) = self.reads.pop() {
            self.books.release(&r.track);
            self.sink_unfilled
                .retire(r.sink.len(), r.track.cov.covered());
            let e = Ended::new(MsgClass::ReadResponse, msn, r.wr_id, WcOp::RdmaRead);
            self.push_ended(e, r.track.failed, r.sink);
        }
        while let Some((_, w)) = self.write.pop() {
            if let Some(t) = w {
                self.books.release(&t);
                if t.finished && (t.imm.is_some() || t.failed.is_some()) {
                    self.books.counters.discarded_on_flush += 1;
                }
            }
        }
        self.read_req.entries.clear();
    }

    /// A work request ended by `flush`: its own failure status, or flushed.
    fn push_ended(&mut self, e: Ended, failed: Option<WcStatus>, buf: Vec<u8>) {
        let status = failed.unwrap_or(WcStatus::WrFlushError);
        if status == WcStatus::WrFlushError {
            self.books.counters.flushed += 1;
        }
        self.push(Cqe {
            wr_id: e.wr_id,
            class: e.class,
            msn: e.msn,
            op: e.op,
            byte_len: 0,
            imm: None,
            status,
            buf: Some(buf),
        });
    }

    fn push(&mut self, cqe: Cqe) {
        self.books.counters.completions += 1;
        self.cq.push_back(cqe);
    }

    fn cq_full(&self, ignore_cap: bool) -> bool {
        !ignore_cap && self.cq.len() >= self.limits.max_completions
    }

    /// Complete finished messages at the front of `class`'s window, in MSN order.
    pub(crate) fn drain(&mut self, class: MsgClass, ignore_cap: bool) {
        match class {
            MsgClass::Send => self.drain_send(ignore_cap),
            MsgClass::Write => self.drain_write(ignore_cap),
            MsgClass::ReadRequest => self.drain_read_requests(),
            MsgClass::ReadResponse => self.drain_reads(ignore_cap),
        }
    }

    fn drain_send(&mut self, ignore_cap: bool) {
        while self.send.entries.front().is_some_and(|p| p.track.finished)
            && !self.cq_full(ignore_cap)
        {
            let Some((msn, p)) = self.send.pop() else {
                break;
            };
            self.books.release(&p.track);
            self.recv_unfilled
                .retire(p.buf.len(), p.track.cov.covered());
            let status = p.track.status();
            self.push(Cqe {
                wr_id: p.wr_id,
                class: MsgClass::Send,
                msn,
                op: WcOp::Recv,
                byte_len: p.track.len.unwrap_or(0),
                imm: p.track.imm.filter(|_| status == WcStatus::Success),
                status,
                buf: Some(p.buf),
            });
        }
    }

    fn drain_write(&mut self, ignore_cap: bool) {
        while let Some(Some(t)) = self.write.entries.front() {
            if !t.finished {
                break;
            }
            // A plain WRITE that succeeded completes silently; only WITH_IMM and errors
            // need a completion entry.
            let needs_cqe = t.imm.is_some() || t.failed.is_some();
            if needs_cqe && self.cq_full(ignore_cap) {
                break;
            }
            let Some((msn, Some(t))) = self.write.pop() else {
                break;
            };
            self.books.release(&t);
            if needs_cqe {
                let status = t.status();
                self.push(Cqe {
                    wr_id: 0,
                    class: MsgClass::Write,
                    msn,
                    op: WcOp::RecvRdmaWithImm,
                    byte_len: t.len.unwrap_or(0),
                    imm: t.imm.filter(|_| status == WcStatus::Success),
                    status,
                    buf: None,
                });
            }
        }
    }

    /// READ requests produce no completion at the responder (as in verbs): in order, the seen
    /// ones just leave the window. A refused one was reported by `PlaceOutcome::AccessError`.
    fn drain_read_requests(&mut self) {
        while self.read_req.entries.front() == Some(&true) {
            self.read_req.pop();
        }
    }

    fn drain_reads(&mut self, ignore_cap: bool) {
        while self.reads.entries.front().is_some_and(|r| r.track.finished)
            && !self.cq_full(ignore_cap)
        {
            let Some((msn, r)) = self.reads.pop() else {
                break;
            };
            self.books.release(&r.track);
            self.sink_unfilled
                .retire(r.sink.len(), r.track.cov.covered());
            let len = r.track.len.unwrap_or(0);
            let mut status = r.track.status();
            if status == WcStatus::Success && len as usize != r.sink.len() {
                // All bytes up to the LAST segment arrived, but the READ asked for more.
                status = WcStatus::BadResponse;
                self.books.counters.bad_responses += 1;
            }
            self.push(Cqe {
                wr_id: r.wr_id,
                class: MsgClass::ReadResponse,
                msn,
                op: WcOp::RdmaRead,
                byte_len: len,
                imm: None,
                status,
                buf: Some(r.sink),
            });
        }
    }
}

/// Which work request `flush` is ending.
struct Ended {
    class: MsgClass,
    msn: u16,
    wr_id: u64,
    op: WcOp,
}

impl Ended {
    fn new(class: MsgClass, msn: u16, wr_id: u64, op: WcOp) -> Ended {
        Ended {
            class,
            msn,
            wr_id,
            op,
        }
    }
}
