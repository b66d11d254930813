//! The sending half of a perf connection: posts SEND / RDMA WRITE / RDMA READ work requests,
//! keeps `tx_depth` outstanding until the run's count or duration is reached, then SENDs a
//! done message with the number of messages behind the last one. The client always has one;
//! the server too with `-b`.

use super::ctrl::{Ctrl, Regions};
use super::{op_of, payload, MsgOp, PerfConfig, PerfError, PerfOp, PerfReport, DONE_WR};
use bth_framer::{WorkRequest, WrOp};
use bth_io::sim::workload::{fill, matches_fill};
use bth_placement::WcStatus;
use bytes::{Bytes, BytesMut};
use std::collections::HashMap;
use std::time::Duration;
use tcp_bth::{Completion, Connection, WcOp};

pub(crate) struct Requester {
    cfg: PerfConfig,
    remote: Regions,
    started: Duration,
    next: u64,
    done: u64,
    /// Replies seen ([`PerfOp::SendRecv`]): they come in request order.
    replies: u64,
    /// How many messages the run has, once no more will be posted (count reached, or
    /// duration over).
    total: Option<u64>,
    posted_at: HashMap<u64, Duration>,
    /// Without `--verify` every message carries the same zero bytes: one buffer, shared by
    /// reference, as perftest posts one registered buffer again and again (a fresh 1 MiB
    /// allocation per message cost more than the stack's own work per byte).
    zeros: Option<Bytes>,
    /// With `--verify`, each message in flight (by WR id), kept so that its buffer can carry
    /// a later message once the stack has let go of it: filling a recycled buffer in place is
    /// one pass over warm memory, where building a fresh 1 MiB message per post was an
    /// allocation and two passes (pattern, then copy into the new buffer; 10 % of the client
    /// thread's samples at MTU 9000).
    in_flight: HashMap<u64, Bytes>,
    /// Buffers of completed messages that nothing else references any more.
    spare: Vec<BytesMut>,
    /// With `--verify`: the first messages' payloads, made before the run starts
    /// ([`Requester::prepare`]), by message index.
    prepared: Vec<(u64, Bytes)>,
    /// The done message is posted, and acknowledged.
    done_posted: bool,
    done_acked: bool,
    /// When the previous message completed.
    last_done: Option<Duration>,
}

impl Requester {
    /// With `--verify`, the payloads of the messages posted first (up to the depth), made
    /// ahead of the run: allocating and filling them takes a driver turn of about a millisecond
    /// at 2 × 1 MiB, and in the turn that gets the peer's accept that held the ACK of it past
    /// the peer's tail loss probe (one spurious retransmission in every verified run).
    /// Empty without `--verify` (every message shares one buffer of zeros).
    pub fn prepare(cfg: &PerfConfig) -> Vec<(u64, Bytes)> {
        if !cfg.mode.verify {
            return Vec::new();
        }
        let first = match cfg.duration {
            Some(_) => cfg.tx_depth as u64,
            None => cfg.count.min(cfg.tx_depth as u64),
        };
        (0..first)
            .filter(|&i| op_of(cfg, i) != MsgOp::Read)
            .map(|i| (i, Bytes::from(payload(cfg, i))))
            .collect()
    }

    /// Start sending to a responder with `remote`'s regions; the run's clock starts `now`.
    /// `prepared`: payloads made ahead ([`Requester::prepare`]), or none.
    pub fn new(
        cfg: PerfConfig,
        remote: Regions,
        now: Duration,
        prepared: Vec<(u64, Bytes)>,
    ) -> Requester {
        Requester {
            prepared,
            cfg,
            remote,
            started: now,
            next: 0,
            done: 0,
            replies: 0,
            total: None,
            posted_at: HashMap::new(),
            zeros: None,
            in_flight: HashMap::new(),
            spare: Vec::new(),
            done_posted: false,
            done_acked: false,
            last_done: None,
        }
    }

    /// Every message completed and the done message acknowledged.
    pub fn finished(&self) -> bool {
        self.total == Some(self.done) && self.done_acked
    }

    /// Messages completed, and how many the run has if known (count mode).
    pub fn progress(&self) -> (u64, Option<u64>) {
        let total = self
            .total
            .or((self.cfg.duration.is_none()).then_some(self.cfg.count));
        (self.done, total)
    }

    /// Post what the depth allows (none with `hold`), and the done message once the run has
    /// all its messages.
    pub fn step(
        &mut self,
        c: &mut Connection,
        now: Duration,
        report: &mut PerfReport,
        hold: bool,
    ) -> Result<(), PerfError> {
        let (duration, count, started) = (self.cfg.duration, self.cfg.count, self.started);
        let over = |next: u64| match duration {
            Some(d) => now.saturating_sub(started) >= d,
            None => next >= count,
        };
        if self.total.is_none() && over(self.next) {
            self.total = Some(self.next);
        }
        while !hold && self.total.is_none() && self.next - self.done < self.cfg.tx_depth as u64 {
            self.post(c, now, report)?;
            if over(self.next) {
                self.total = Some(self.next);
            }
        }
        if let (Some(total), false) = (self.total, self.done_posted) {
            // Behind the last message in the stream: when it completes at the responder,
            // every message before it has been placed.
            c.post_send(WorkRequest {
                wr_id: DONE_WR,
                op: WrOp::Send { imm: None },
                sg_list: vec![Bytes::from(Ctrl::Done(total).encode())],
            })
            .map_err(|e| PerfError::Post(e.kind))?;
            self.done_posted = true;
        }
        Ok(())
    }

    fn post(
        &mut self,
        c: &mut Connection,
        now: Duration,
        report: &mut PerfReport,
    ) -> Result<(), PerfError> {
        let i = self.next;
        let (cfg, r) = (&self.cfg, &self.remote);
        let wr_op = match op_of(cfg, i) {
            MsgOp::Read => {
                let sink = vec![0u8; cfg.size as usize];
                c.post_read(i, r.read_rkey, r.read_addr + cfg.slot_offset(i), sink)
                    .map_err(|e| PerfError::Post(e.kind))?;
                None
            }
            MsgOp::Send => Some(WrOp::Send {
                imm: Some(i as u32),
            }),
            MsgOp::WriteImm => Some(WrOp::RdmaWrite {
                rkey: r.write_rkey,
                remote_addr: r.write_addr + cfg.write_offset(i),
                imm: Some(i as u32),
            }),
            MsgOp::Write => Some(WrOp::RdmaWrite {
                rkey: r.write_rkey,
                remote_addr: r.write_addr + cfg.write_offset(i),
                imm: None,
            }),
        };
        if let Some(op) = wr_op {
            let buf = if self.cfg.mode.verify {
                self.verified_payload(i)
            } else {
                let cfg = &self.cfg;
                let zeros = self
                    .zeros
                    .get_or_insert_with(|| Bytes::from(payload(cfg, i)));
                zeros.clone()
            };
            c.post_send(WorkRequest {
                wr_id: i,
                op,
                sg_list: vec![buf],
            })
            .map_err(|e| PerfError::Post(e.kind))?;
        }
        self.posted_at.insert(i, now);
        if self.cfg.trace {
            report.posted.push(now);
        }
        self.next += 1;
        Ok(())
    }

    /// Message `i`'s pattern bytes: made ahead, or in a recycled buffer when one is free;
    /// kept until the message completes.
    fn verified_payload(&mut self, i: u64) -> Bytes {
        let size = self.cfg.size as usize;
        let bytes = match self.prepared.iter().position(|(j, _)| *j == i) {
            Some(k) => self.prepared.swap_remove(k).1,
            None => match self.spare.pop() {
                Some(mut buf) => {
                    buf.resize(size, 0);
                    fill(self.cfg.seed, i, &mut buf);
                    buf.freeze()
                }
                None => Bytes::from(payload(&self.cfg, i)),
            },
        };
        self.in_flight.insert(i, bytes.clone());
        bytes
    }

    /// Take back message `wr_id`'s buffer if the stack no longer holds it (it may, until the
    /// last byte is acknowledged: then the buffer is simply dropped).
    fn recycle(&mut self, wr_id: u64) {
        if let Some(Ok(buf)) = self.in_flight.remove(&wr_id).map(Bytes::try_into_mut) {
            self.spare.push(buf);
        }
    }

    /// A completion of this side's own work: a SEND, WRITE or READ it posted, the done
    /// message, or ([`PerfOp::SendRecv`], routed here by the caller) a reply.
    pub fn on_completion(&mut self, comp: Completion, now: Duration, report: &mut PerfReport) {
        if matches!(comp.op, WcOp::Send | WcOp::RdmaWrite) {
            self.recycle(comp.wr_id);
        }
        if comp.status != WcStatus::Success {
            report.errors.push(PerfError::CompletionFailed {
                wr_id: comp.wr_id,
                status: comp.status,
            });
            return;
        }
        if comp.wr_id == DONE_WR && comp.op == WcOp::Send {
            self.done_acked = true;
            return;
        }
        let i = match comp.op {
            // A reply: the message it answers completes now.
            WcOp::Recv => {
                self.replies += 1;
                self.replies - 1
            }
            // The request's own completion: the message completes with its reply.
            _ if self.cfg.op == PerfOp::SendRecv => return,
            _ => comp.wr_id,
        };
        let posted = self.posted_at.remove(&i).unwrap_or(now);
        report.latencies.push(now.saturating_sub(posted));
        if comp.op == WcOp::RdmaRead && self.cfg.mode.verify {
            let slot = i % self.cfg.tx_depth as u64;
            let size = self.cfg.size as usize;
            let got = comp.buf.as_deref().filter(|b| b.len() == size);
            if got.is_some_and(|b| matches_fill(self.cfg.seed ^ 0x5EED, slot, b)) {
                report.verified += 1;
            } else {
                report.errors.push(PerfError::ReadDiffers { msg: i });
            }
        }
        self.done += 1;
        report.messages += 1;
        report.bytes += u64::from(self.cfg.size);
        // Messages in flight together arrive one after the other: this one's bytes moved
        // between the previous completion (or its post, if later) and its own, not over its
        // whole latency (which would count the same time for every message in flight).
        let since = self
            .last_done
            .replace(now)
            .map_or(posted, |t| t.max(posted));
        report
            .timeline
            .record_span(since, now, u64::from(self.cfg.size));
    }
}
