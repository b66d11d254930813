//! What one QP's callers are waiting for, by work request: the futures of [`super::AsyncQp`]
//! resolve here when their completions arrive.

use super::{ApiError, Cmd, Message, Reply, WriteNotice};
use bth_framer::{WorkRequest, WrOp};
use bth_placement::WcStatus;
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};
use tcp_bth::{CallError, Completion, Connection, WcOp};

/// Pending operations of one end, by wr_id.
#[derive(Default)]
pub(super) struct EndState {
    next_wr: u64,
    sends: HashMap<u64, Reply<()>>,
    recvs: HashMap<u64, Reply<Message>>,
    reads: HashMap<u64, Reply<Vec<u8>>>,
    notices: VecDeque<Reply<WriteNotice>>,
    /// WRITE-with-immediate notices nobody has asked for yet, oldest first; at most
    /// [`MAX_UNCLAIMED`], then the QP's completions stay in its completion queue (whose own
    /// bound then holds the peer back).
    unclaimed_notices: VecDeque<Result<WriteNotice, ApiError>>,
}

/// Notices held for callers that have not asked yet.
const MAX_UNCLAIMED: usize = 1024;

impl EndState {
    fn wr(&mut self) -> u64 {
        self.next_wr += 1;
        self.next_wr
    }

    pub(super) fn apply(&mut self, c: &mut Connection, cmd: Cmd) {
        match cmd {
            Cmd::Send(data, imm, r) => self.post(c, WrOp::Send { imm }, data, r),
            Cmd::Write(rkey, remote_addr, data, imm, r) => {
                let op = WrOp::RdmaWrite {
                    rkey,
                    remote_addr,
                    imm,
                };
                self.post(c, op, data, r)
            }
            Cmd::Recv(len, r) => {
                let wr_id = self.wr();
                match c.post_recv(wr_id, vec![0u8; len]) {
                    Ok(()) => {
                        self.recvs.insert(wr_id, r);
                    }
                    Err(e) => {
                        let _ = r.send(Err(ApiError::Refused(e.kind)));
                    }
                }
            }
            Cmd::Register(buf, access, r) => {
                let _ = r.send(
                    c.register_mr(buf, access)
                        .map_err(ApiError::RegisterRefused),
                );
            }
            Cmd::Region(rkey, r) => {
                let _ = r.send(
                    c.mr_bytes(rkey)
                        .map(<[u8]>::to_vec)
                        .ok_or(ApiError::Refused(CallError::Mr(
                            bth_placement::MrError::UnknownRkey(rkey),
                        ))),
                );
            }
            Cmd::WriteNotice(r) => match self.unclaimed_notices.pop_front() {
                Some(n) => {
                    if let Err(Ok(n)) = r.send(n) {
                        // The caller stopped waiting at once: the notice stays first.
                        self.unclaimed_notices.push_front(Ok(n));
                    }
                }
                None => self.notices.push_back(r),
            },
            Cmd::Read(rkey, addr, len, r) => {
                let wr_id = self.wr();
                match c.post_read(wr_id, rkey, addr, vec![0u8; len as usize]) {
                    Ok(_) => {
                        self.reads.insert(wr_id, r);
                    }
                    Err(e) => {
                        let _ = r.send(Err(ApiError::Refused(e.kind)));
                    }
                }
            }
            Cmd::Close(r) => {
                c.close();
                let _ = r.send(Ok(()));
            }
            Cmd::Stats(r) => {
                let _ = r.send(Ok(c.stats()));
            }
        }
    }

    /// Post a SEND or WRITE; the reply waits for its completion.
    fn post(&mut self, c: &mut Connection, op: WrOp, data: Bytes, r: Reply<()>) {
        let wr_id = self.wr();
        let wr = WorkRequest {
            wr_id,
            op,
            sg_list: vec![data],
        };
        match c.post_send(wr) {
            Ok(_) => {
                self.sends.insert(wr_id, r);
            }
            Err(e) => {
                let _ = r.send(Err(ApiError::Refused(e.kind)));
            }
        }
    }

    pub(super) fn complete(&mut self, comp: Completion) {
        let status = if comp.status == WcStatus::Success {
            Ok(())
        } else {
            Err(ApiError::Completion(comp.status))
        };
        match comp.op {
            WcOp::Send | WcOp::RdmaWrite => {
                if let Some(r) = self.sends.remove(&comp.wr_id) {
                    let _ = r.send(status);
                }
            }
            WcOp::Recv => {
                if let Some(r) = self.recvs.remove(&comp.wr_id) {
                    let msg = comp.buf.map(|mut b| {
                        b.truncate(comp.byte_len as usize);
                        Message {
                            data: b,
                            imm: comp.imm,
                        }
                    });
                    let _ = r.send(status.and(msg.ok_or(ApiError::Completion(comp.status))));
                }
            }
            WcOp::RdmaRead => {
                if let Some(r) = self.reads.remove(&comp.wr_id) {
                    let _ = r.send(status.and(comp.buf.ok_or(ApiError::Completion(comp.status))));
                }
            }
            WcOp::RecvRdmaWithImm => {
                let mut n = status.map(|()| WriteNotice {
                    imm: comp.imm.unwrap_or(0),
                    len: comp.byte_len,
                });
                // The oldest caller still waiting gets it; one that gave up (a dropped
                // future) hands it back to the next.
                while let Some(r) = self.notices.pop_front() {
                    match r.send(n) {
                        Ok(()) => return,
                        Err(back) => n = back,
                    }
                }
                self.unclaimed_notices.push_back(n);
            }
        }
    }

    /// Whether this QP's completions may be taken now (room for notices nobody asked for).
    pub(super) fn can_take(&self) -> bool {
        self.unclaimed_notices.len() < MAX_UNCLAIMED
    }

    /// The peer has finished (its FIN consumed): no message or notice will arrive any more,
    /// so callers waiting for one learn that now instead of waiting forever.
    pub(super) fn peer_finished(&mut self) {
        for (_, r) in self.recvs.drain() {
            let _ = r.send(Err(ApiError::Closed));
        }
        for r in self.notices.drain(..) {
            let _ = r.send(Err(ApiError::Closed));
        }
    }

    /// Whether anything waits here (callers, or notices nobody has asked for yet).
    pub(super) fn pending(&self) -> bool {
        !(self.sends.is_empty()
            && self.recvs.is_empty()
            && self.reads.is_empty()
            && self.notices.is_empty()
            && self.unclaimed_notices.is_empty())
    }

    /// The connection failed or is gone: every waiter learns why.
    pub(super) fn fail_all(&mut self, err: ApiError) {
        for (_, r) in self.sends.drain() {
            let _ = r.send(Err(err.clone()));
        }
        for (_, r) in self.recvs.drain() {
            let _ = r.send(Err(err.clone()));
        }
        for (_, r) in self.reads.drain() {
            let _ = r.send(Err(err.clone()));
        }
        for r in self.notices.drain(..) {
            let _ = r.send(Err(err.clone()));
        }
    }
}
