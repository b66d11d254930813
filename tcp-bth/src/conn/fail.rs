//! The error state (IB RC's QP error): the failed work request completes with its error,
//! everything else outstanding with a flush error, in an order both sides agree on.

use super::*;

impl Connection {
    /// Enter the error state: the failed work request (if any) completes with its error,
    /// everything else outstanding with a flush error; all timers stop.
    pub(super) fn fail(&mut self, err: ConnectionError) {
        if self.error.is_none() {
            self.error = Some(err.clone());
        }
        self.state = State::Closed;
        let failed = match err {
            ConnectionError::PeerNak(nak) => send::FailedWr::from_nak(nak),
            ConnectionError::RnrRetryExceeded { msn } => Some(send::FailedWr {
                class: MsgClass::Send,
                msn,
                status: WcStatus::RnrRetryExceeded,
            }),
            _ => None,
        };
        let reads = self.flush_receive_side(failed);
        if let (ConnectionError::PeerNak(_), Some(f)) = (&err, failed) {
            self.acknowledge_before(f);
        }
        self.end_send_queue(failed, reads);
        self.timers.stop_all();
    }

    /// Receive side: completions of messages wholly below the cumulative point leave as they
    /// are. A message that arrived whole beyond a hole never will be acknowledged, so its
    /// sender flushes it: here it flushes too (its buffer handed back; a WRITE-with-immediate
    /// notice is dropped), so both sides agree. Returns the READ completions (the requester's
    /// own), which end in posting order with the send queue.
    fn flush_receive_side(&mut self, failed: Option<send::FailedWr>) -> Vec<Completion> {
        if let RxPath::Bth(b) = &mut self.rx {
            if let Some(f) = failed.filter(|f| f.class == MsgClass::ReadRequest) {
                // Our READ's response will never come: it completes with the NAK's status.
                b.placement.fail_read(f.msn, f.status);
            }
            b.placement.flush();
            b.drain(&mut self.cq, u64::MAX);
        }
        self.cq.release(self.rcv.nxt);
        let mut reads = Vec::new();
        for mut c in self.cq.take_held() {
            if c.status == WcStatus::Success {
                if c.op == WcOp::RecvRdmaWithImm {
                    continue;
                }
                c.status = WcStatus::WrFlushError;
                c.byte_len = 0;
                c.imm = None;
            }
            match c.op {
                WcOp::RdmaRead => reads.push(c),
                _ => self.cq.push(c),
            }
        }
        reads
    }

    /// The responder refuses in order: a NAK means every message before the failed one
    /// arrived, even if the ACK it sent just before the RST was lost (an IB NAK acknowledges
    /// the PSNs before it the same way). Only if everything before the named message was sent:
    /// a NAK naming a message never sent is forged (or from a confused peer), and taking it
    /// would complete as delivered messages that never left this side.
    fn acknowledge_before(&mut self, f: send::FailedWr) {
        let start = self
            .snd
            .framer
            .messages()
            .find(|m| m.class == f.class && m.msn == f.msn)
            .map(|m| m.stream_start);
        if let Some(start) = start.filter(|&s| s > self.snd.una() && s <= self.snd.max()) {
            for c in self.snd.on_ack_advance(start, true) {
                self.cq.push(c);
            }
        }
    }

    /// Send side, in posting order: READs whose request was acknowledged before the failure
    /// were posted before anything still queued, so they end first; then the queue, each READ
    /// still queued at its place.
    fn end_send_queue(&mut self, failed: Option<send::FailedWr>, reads: Vec<Completion>) {
        let queued = self.snd.fail(failed);
        let still_queued = |msn: u16| {
            queued
                .iter()
                .any(|q| matches!(q, send::QueuedEnd::Read(m) if *m == msn))
        };
        let (mut later, earlier): (Vec<_>, Vec<_>) =
            reads.into_iter().partition(|c| still_queued(c.msn));
        for c in earlier {
            self.cq.push(c);
        }
        for q in queued {
            match q {
                send::QueuedEnd::Done(c) => self.cq.push(c),
                send::QueuedEnd::Read(msn) => {
                    if let Some(i) = later.iter().position(|c| c.msn == msn) {
                        self.cq.push(later.remove(i));
                    }
                }
            }
        }
    }

    /// Fail the QP because of what the peer sent: RST carrying a NAK for its message, so its
    /// work request completes with the error on its side too.
    pub(super) fn fail_with_nak(&mut self, nak: Nak, err: ConnectionError) {
        self.nak = Some(nak);
        self.stats.naks_sent += 1;
        let seq = self.snd.seq_of(self.snd.max());
        self.owed.ack_before_rst = Some((seq, self.rcv.seq_of(self.rcv.nxt)));
        self.owed.rst = Some(self.snd.seq_of(self.snd.nxt()));
        self.fail(err);
    }
}
