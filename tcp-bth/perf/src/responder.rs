//! The receiving half of a perf connection: registers the WRITE target and READ source
//! regions, takes the requester's SENDs and WRITEs with immediate (checking each with
//! `verify`), answers requests ([`PerfOp::SendRecv`]) and, when the requester's done message
//! arrives, checks the count and (plain WRITE) the whole target region. The server always has
//! one; the client too with `-b`.

use super::ctrl::Regions;
use super::{is_payload, nth_of, MsgOp, PerfConfig, PerfError, PerfOp, PerfReport, REPLY_LEN};
use bth_framer::{WorkRequest, WrOp};
use bth_io::sim::workload::{fill, matches_fill};
use bth_placement::Access;
use bytes::Bytes;
use std::time::Duration;
use tcp_bth::{Completion, Connection, WcOp};

pub(crate) struct Responder {
    cfg: PerfConfig,
    write_rkey: u32,
    /// Messages arrived so far of each class (SEND, WRITE with immediate), for the order
    /// check of `verify` and the count check of the done message.
    seen: [u64; 2],
    /// Replies owed ([`PerfOp::SendRecv`]), sent on the next turn (see [`Responder::step`]).
    replies: Vec<u64>,
    /// The requester's done message: how many messages it sent.
    peer_done: Option<u64>,
    /// When the previous message arrived (or the run started): each message's bytes are
    /// spread over the time since, for the peak bandwidth.
    last: Option<Duration>,
}

impl Responder {
    /// Register the regions the peer's requester needs.
    pub fn set_up(c: &mut Connection, cfg: &PerfConfig) -> Result<(Responder, Regions), PerfError> {
        let target = cfg.write_region_len()?;
        let span = cfg.size as usize * cfg.tx_depth;
        let w = c
            .register_mr(
                vec![0u8; target],
                Access::REMOTE_WRITE | Access::LOCAL_WRITE,
            )
            .map_err(|e| PerfError::Register(e.kind))?;
        let mut src = vec![0u8; span];
        // Empty with size 0 (zero-length runs read nothing).
        if cfg.mode.verify && span > 0 {
            for (slot, chunk) in src.chunks_mut(cfg.size as usize).enumerate() {
                fill(cfg.seed ^ 0x5EED, slot as u64, chunk);
            }
        }
        let r = c
            .register_mr(src, Access::REMOTE_READ)
            .map_err(|e| PerfError::Register(e.kind))?;
        let me = Responder {
            cfg: cfg.clone(),
            write_rkey: w.rkey,
            seen: [0; 2],
            replies: Vec::new(),
            peer_done: None,
            last: None,
        };
        let regions = Regions {
            write_rkey: w.rkey,
            write_addr: w.addr,
            read_rkey: r.rkey,
            read_addr: r.addr,
        };
        Ok((me, regions))
    }

    /// The requester's done message has arrived (everything it sent is in).
    pub fn finished(&self) -> bool {
        self.peer_done.is_some()
    }

    /// Replies owed from the previous turn ([`PerfOp::SendRecv`]).
    pub fn step(&mut self, c: &mut Connection, report: &mut PerfReport) {
        // A reply is posted one driver turn after its request completed, after the receive
        // buffer for the next request was re-posted. This was a workaround: receive credit
        // (rtr) travels only on segments without payload, and a reply sent in the same turn as
        // the re-posted buffer used to take the pending ACK, and the credit with it (the client
        // then waited for its persist probe, ~200 ms). The stack no longer does that: with
        // `credit_owed` set, `poll_transmit` sends the credit ACK after the reply in the same
        // round (`build_data` in conn/output.rs). So the delay is no longer needed; it has not
        // been removed, and both runs recorded in docs/results.md were measured with it. It
        // adds one driver turn to every request/response round trip (the credit ACK's write
        // completion ends the wait of the turn in between).
        for i in std::mem::take(&mut self.replies) {
            let reply = WorkRequest {
                wr_id: i,
                op: WrOp::Send {
                    imm: Some(i as u32),
                },
                sg_list: vec![Bytes::from(vec![0u8; REPLY_LEN])],
            };
            if let Err(e) = c.post_send(reply) {
                report.errors.push(PerfError::Reply {
                    msg: i,
                    source: e.kind,
                });
            }
        }
    }

    /// A SEND with immediate or an RDMA WRITE with immediate from the requester.
    pub fn on_data(
        &mut self,
        c: &Connection,
        comp: &Completion,
        now: Duration,
        report: &mut PerfReport,
    ) {
        let i = u64::from(comp.imm.unwrap_or(0));
        report.messages += 1;
        report.bytes += u64::from(comp.byte_len);
        // The first message's span starts at the start of the run (the timeline's origin).
        let since = self.last.replace(now).unwrap_or_default();
        report
            .timeline
            .record_span(since, now, u64::from(comp.byte_len));
        if self.cfg.trace {
            report.arrived.push((i, now));
        }
        if self.cfg.op == PerfOp::SendRecv {
            self.replies.push(i);
        }
        let in_order = self.in_order(comp, i, report);
        if !self.cfg.mode.verify || !in_order {
            return;
        }
        let len = self.cfg.size as usize;
        let ok = match comp.op {
            WcOp::Recv => comp
                .buf
                .as_deref()
                .and_then(|b| b.get(..len))
                .is_some_and(|got| is_payload(&self.cfg, i, got)),
            _ => {
                let at = self.cfg.write_offset(i) as usize;
                c.mr_bytes(self.write_rkey)
                    .and_then(|r| r.get(at..at + len))
                    .is_some_and(|got| is_payload(&self.cfg, i, got))
            }
        };
        if ok {
            report.verified += 1;
        } else {
            report.errors.push(PerfError::MessageDiffers { msg: i });
        }
    }

    /// Counts the message in its class; with `verify`, checks that it is the next one of its
    /// class (its immediate) and has the run's size, recording the error and returning false
    /// otherwise.
    fn in_order(&mut self, comp: &Completion, i: u64, report: &mut PerfReport) -> bool {
        let (class, op) = match comp.op {
            WcOp::Recv => (0, MsgOp::Send),
            _ => (1, MsgOp::WriteImm),
        };
        let want = nth_of(&self.cfg, op, self.seen[class]);
        self.seen[class] += 1;
        if !self.cfg.mode.verify {
            return true;
        }
        if comp.imm != Some(want as u32) {
            let got = comp.imm;
            report
                .errors
                .push(PerfError::UnexpectedImmediate { got, want });
            return false;
        }
        if comp.byte_len != self.cfg.size {
            report.errors.push(PerfError::LengthDiffers {
                msg: i,
                got: comp.byte_len,
                want: self.cfg.size,
            });
            return false;
        }
        true
    }

    /// The requester's done message: it sent `count` messages, all of which are in (they
    /// precede the done message in the stream). Check the count against the run's (count
    /// mode) and against what arrived; a plain WRITE run counts its messages here and, with
    /// `verify`, checks each at its own offset in the target region.
    pub fn on_done(&mut self, c: &Connection, count: u64, now: Duration, report: &mut PerfReport) {
        self.peer_done = Some(count);
        if self.cfg.duration.is_none() && count != self.cfg.count {
            report.errors.push(PerfError::DoneCount {
                got: count,
                want: self.cfg.count,
            });
            return;
        }
        let arrived = self.seen[0] + self.seen[1];
        let expected = match self.cfg.op {
            PerfOp::Send | PerfOp::SendRecv | PerfOp::WriteImm => count,
            // Message i is a READ when i % 3 == 2.
            PerfOp::Mixed => count - count / 3,
            PerfOp::Read | PerfOp::Write => 0,
        };
        if arrived != expected {
            report.errors.push(PerfError::ArrivalsDiffer {
                sent: count,
                expected,
                arrived,
            });
        }
        // Messages that complete nowhere here, counted now: plain WRITEs (always), and with
        // `-b` the peer's READs, so that a row counts both directions for every operation.
        let before = report.bytes;
        if self.cfg.op == PerfOp::Write {
            self.check_writes(c, count, report);
        }
        if self.cfg.mode.bidir {
            let reads = match self.cfg.op {
                PerfOp::Read => count,
                PerfOp::Mixed => count / 3,
                _ => 0,
            };
            report.messages += reads;
            report.bytes += reads.saturating_mul(u64::from(self.cfg.size));
        }
        // No arrival per message: spread them over the run. Only these: with `-b` the report
        // holds this side's own completions too, already in the timeline.
        let bytes = report.bytes - before;
        if bytes > 0 {
            report.timeline.record_span(Duration::ZERO, now, bytes);
        }
    }

    /// Plain WRITE: no completion per message here; count them all now and, with `verify`,
    /// check each at its own offset.
    fn check_writes(&mut self, c: &Connection, count: u64, report: &mut PerfReport) {
        let size = self.cfg.size as usize;
        report.messages += count;
        report.bytes += count.saturating_mul(size as u64);
        if !self.cfg.mode.verify {
            return;
        }
        let region = c.mr_bytes(self.write_rkey).unwrap_or_default();
        for i in 0..count {
            let at = self.cfg.write_offset(i) as usize;
            if region
                .get(at..at + size)
                .is_some_and(|got| matches_fill(self.cfg.seed, i, got))
            {
                report.verified += 1;
            } else {
                report.errors.push(PerfError::MessageDiffers { msg: i });
            }
        }
    }
}
