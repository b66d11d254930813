//! An async message API for applications (tokio): `send`/`recv` of messages and `write`/`read`
//! of remote memory, each resolving when its work completion arrives.
//!
//! A driver task owns the sans-IO connections and their transport and serves [`AsyncQp`] handles
//! through a channel. [`sim_pair`] runs both ends over the deterministic simulated link, as fast
//! as the CPU allows (virtual time, no sleeping).

use crate::sim::{LinkConfig, Pair};
use bth_framer::{WorkRequest, WrOp};
use bth_placement::{Access, MrHandle, WcStatus};
use bytes::Bytes;
use std::collections::HashMap;
use std::time::Duration;
use tcp_bth::{Completion, ConnError, Connection, ConnectionError, RegisterError, WcOp};
use thiserror::Error;
use tokio::sync::{mpsc, oneshot};

/// Why an async operation failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ApiError {
    /// The connection refused the post (see [`ConnError`]).
    #[error("refused: {0}")]
    Refused(ConnError),
    /// Registration refused; the buffer is in the error.
    #[error("registration refused: {0}")]
    RegisterRefused(RegisterError),
    /// The work request completed with an error status.
    #[error("completed with {0:?}")]
    Completion(WcStatus),
    /// The connection ended before the operation completed.
    #[error("connection ended: {0}")]
    Ended(ConnectionError),
    /// The driver task is gone (the pair was dropped or its runtime stopped).
    #[error("the driver task has stopped")]
    DriverGone,
}

/// A received message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub data: Vec<u8>,
    pub imm: Option<u32>,
}

/// An RDMA WRITE with immediate that landed in our memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteNotice {
    pub imm: u32,
    pub len: u32,
}

type Reply<T> = oneshot::Sender<Result<T, ApiError>>;

enum Cmd {
    Send(Bytes, Option<u32>, Reply<()>),
    Recv(usize, Reply<Message>),
    Register(Vec<u8>, Access, Reply<MrHandle>),
    Region(u32, Reply<Vec<u8>>),
    Write(u32, u64, Bytes, Option<u32>, Reply<()>),
    WriteNotice(Reply<WriteNotice>),
    Read(u32, u64, u32, Reply<Vec<u8>>),
    Close(Reply<()>),
}

/// One end of a connection, usable from any task.
#[derive(Clone)]
pub struct AsyncQp {
    tx: mpsc::UnboundedSender<Cmd>,
}

impl AsyncQp {
    async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Cmd) -> Result<T, ApiError> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(make(tx)).map_err(|_| ApiError::DriverGone)?;
        rx.await.map_err(|_| ApiError::DriverGone)?
    }

    /// SEND a message; resolves when the peer acknowledged it.
    pub async fn send(&self, data: impl Into<Bytes>, imm: Option<u32>) -> Result<(), ApiError> {
        let data = data.into();
        self.call(|r| Cmd::Send(data, imm, r)).await
    }

    /// Post a receive buffer of `max_len` bytes and wait for the message that lands in it.
    pub async fn recv(&self, max_len: usize) -> Result<Message, ApiError> {
        self.call(|r| Cmd::Recv(max_len, r)).await
    }

    /// Register local memory the peer may access.
    pub async fn register(&self, buf: Vec<u8>, access: Access) -> Result<MrHandle, ApiError> {
        self.call(|r| Cmd::Register(buf, access, r)).await
    }

    /// A copy of a registered region's current contents.
    pub async fn region(&self, rkey: u32) -> Result<Vec<u8>, ApiError> {
        self.call(|r| Cmd::Region(rkey, r)).await
    }

    /// RDMA WRITE into the peer's region; resolves when acknowledged.
    pub async fn write(
        &self,
        rkey: u32,
        remote_addr: u64,
        data: impl Into<Bytes>,
        imm: Option<u32>,
    ) -> Result<(), ApiError> {
        let data = data.into();
        self.call(|r| Cmd::Write(rkey, remote_addr, data, imm, r))
            .await
    }

    /// Wait for the next RDMA WRITE with immediate from the peer.
    pub async fn write_notice(&self) -> Result<WriteNotice, ApiError> {
        self.call(Cmd::WriteNotice).await
    }

    /// RDMA READ `len` bytes from the peer's region.
    pub async fn read(&self, rkey: u32, remote_addr: u64, len: u32) -> Result<Vec<u8>, ApiError> {
        self.call(|r| Cmd::Read(rkey, remote_addr, len, r)).await
    }

    /// Orderly close of our direction.
    pub async fn close(&self) -> Result<(), ApiError> {
        self.call(Cmd::Close).await
    }
}

/// Pending operations of one end, by wr_id.
#[derive(Default)]
struct EndState {
    next_wr: u64,
    sends: HashMap<u64, Reply<()>>,
    recvs: HashMap<u64, Reply<Message>>,
    reads: HashMap<u64, Reply<Vec<u8>>>,
    notices: Vec<Reply<WriteNotice>>,
    unclaimed_notices: Vec<WriteNotice>,
}

impl EndState {
    fn wr(&mut self) -> u64 {
        self.next_wr += 1;
        self.next_wr
    }

    fn apply(&mut self, c: &mut Connection, cmd: Cmd) {
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
                        .ok_or(ApiError::Refused(ConnError::Mr(
                            bth_placement::MrError::UnknownRkey(rkey),
                        ))),
                );
            }
            Cmd::WriteNotice(r) => match self.unclaimed_notices.pop() {
                Some(n) => {
                    let _ = r.send(Ok(n));
                }
                None => self.notices.push(r),
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

    fn complete(&mut self, comp: Completion) {
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
                let n = WriteNotice {
                    imm: comp.imm.unwrap_or(0),
                    len: comp.byte_len,
                };
                if self.notices.is_empty() {
                    self.unclaimed_notices.insert(0, n);
                } else {
                    let _ = self.notices.remove(0).send(Ok(n));
                }
            }
        }
    }

    /// The connection failed: every waiter learns why.
    fn fail_all(&mut self, err: ConnectionError) {
        let err = ApiError::Ended(err);
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

/// Two connected ends over the simulated link with `link`, served by a spawned driver task.
/// Must be called inside a tokio runtime.
pub async fn sim_pair(link: LinkConfig, seed: u64) -> Result<(AsyncQp, AsyncQp), ApiError> {
    let (a_cfg, b_cfg) = crate::sim::pair_configs(seed);
    let mut pair = Pair::new(a_cfg, b_cfg, link);
    if !pair.establish(Duration::from_secs(30)) {
        return Err(pair.a.error().map_or(
            ApiError::Refused(ConnError::NotEstablished),
            ApiError::Ended,
        ));
    }
    let (ta, ra) = mpsc::unbounded_channel();
    let (tb, rb) = mpsc::unbounded_channel();
    tokio::spawn(drive(pair, ra, rb));
    Ok((AsyncQp { tx: ta }, AsyncQp { tx: tb }))
}

async fn drive(
    mut pair: Pair,
    mut ra: mpsc::UnboundedReceiver<Cmd>,
    mut rb: mpsc::UnboundedReceiver<Cmd>,
) {
    let mut ea = EndState::default();
    let mut eb = EndState::default();
    let (mut a_open, mut b_open) = (true, true);
    loop {
        while let Ok(cmd) = ra.try_recv() {
            ea.apply(&mut pair.a, cmd);
        }
        while let Ok(cmd) = rb.try_recv() {
            eb.apply(pair.b(), cmd);
        }
        let horizon = pair.now + Duration::from_secs(3600);
        let busy = pair.step(horizon);
        while let Some(c) = pair.a.poll_completion() {
            ea.complete(c);
        }
        while let Some(c) = pair.b().poll_completion() {
            eb.complete(c);
        }
        if let Some(e) = pair.a.error() {
            ea.fail_all(e);
        }
        if let Some(e) = pair.b().error() {
            eb.fail_all(e);
        }
        if busy {
            // Let the application tasks run between simulation steps.
            tokio::task::yield_now().await;
            continue;
        }
        // Idle: nothing will happen until an application asks for something.
        tokio::select! {
            cmd = ra.recv(), if a_open => match cmd {
                Some(cmd) => ea.apply(&mut pair.a, cmd),
                None => a_open = false,
            },
            cmd = rb.recv(), if b_open => match cmd {
                Some(cmd) => eb.apply(pair.b(), cmd),
                None => b_open = false,
            },
            else => return,
        }
    }
}
