//! The async (tokio) API: endpoints that connect and accept, and QPs whose work requests are
//! futures that resolve with their completions.
//!
//! A driver (a thread on the io_uring TUN data path, a task over the simulated link) owns the
//! sans-IO [`tcp_bth::Endpoint`] and runs the one driver turn ([`crate::turn`]); its application part is
//! [`ApiApp`], which takes the commands of [`AsyncEndpoint`] and [`AsyncQp`] handles from a
//! channel and answers them from the connections' completions. The same application code
//! runs over both data paths: [`tun_endpoint`] and [`sim_endpoints`] both hand out
//! [`AsyncEndpoint`]s.

mod serve;
mod sim;
mod state;
mod tun;

pub use serve::{ApiApp, Wake};
pub use sim::{sim_endpoints, sim_pair};
pub use tun::{tun_endpoint, DriverThread};

use bth_placement::{Access, MrHandle, WcStatus};
use bytes::Bytes;
use std::sync::Arc;
use tcp_bth::{CallError, Config, ConnectionError, ConnectionHandle, OpenError, RegisterError};
use thiserror::Error;
use tokio::sync::{mpsc, oneshot};

/// Why an async operation failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ApiError {
    /// The connection refused the post (see [`CallError`]).
    #[error("refused: {0}")]
    Refused(CallError),
    /// Registration refused; the buffer is in the error.
    #[error("registration refused: {0}")]
    RegisterRefused(RegisterError),
    /// The work request completed with an error status.
    #[error("completed with {0:?}")]
    Completion(WcStatus),
    /// The connection ended before the operation completed.
    #[error("connection ended: {0}")]
    Ended(ConnectionError),
    /// The driver is gone (its thread or task stopped, or the endpoint was dropped).
    #[error("the driver has stopped")]
    DriverGone,
    /// The endpoint refused to open the connection.
    #[error("connect refused: {0}")]
    Connect(OpenError),
    /// The endpoint released the connection (it no longer exists).
    #[error("the connection is gone")]
    Gone,
    /// The connection closed in order (the peer finished, or both did): what was waited for
    /// will not arrive.
    #[error("the connection is closed")]
    Closed,
}

/// A received message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The message's bytes: the receive buffer cut to the length that landed.
    pub data: Vec<u8>,
    /// The immediate data sent with it, if any.
    pub imm: Option<u32>,
}

/// An RDMA WRITE with immediate that landed in our memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteNotice {
    /// The WRITE's immediate data (0 if the CQE carried none).
    pub imm: u32,
    /// Bytes the WRITE placed in our MR (the CQE's byte length).
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
    Stats(Reply<tcp_bth::Stats>),
}

impl Cmd {
    /// Answer the command with `err` without running it.
    fn refuse(self, err: ApiError) {
        // A caller that stopped waiting does not need the answer.
        match self {
            Cmd::Send(.., r) | Cmd::Write(.., r) | Cmd::Close(r) => drop(r.send(Err(err))),
            Cmd::Recv(_, r) => drop(r.send(Err(err))),
            Cmd::Register(_, _, r) => drop(r.send(Err(err))),
            Cmd::Region(_, r) => drop(r.send(Err(err))),
            Cmd::WriteNotice(r) => drop(r.send(Err(err))),
            Cmd::Read(.., r) => drop(r.send(Err(err))),
            Cmd::Stats(r) => drop(r.send(Err(err))),
        }
    }
}

/// What a handle asks of the driver.
enum EpCmd {
    Connect(Config, Reply<AsyncQp>),
    Accept(Reply<AsyncQp>),
    Qp(ConnectionHandle, Cmd),
}

/// The channel to a driver and the way to wake it.
#[derive(Clone)]
struct Link {
    tx: mpsc::UnboundedSender<EpCmd>,
    wake: Arc<dyn Wake>,
}

impl Link {
    async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> EpCmd) -> Result<T, ApiError> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(make(tx)).map_err(|_| ApiError::DriverGone)?;
        self.wake.wake();
        rx.await.map_err(|_| ApiError::DriverGone)?
    }
}

/// An endpoint served by a driver: opens and accepts connections. Cheap to clone.
#[derive(Clone)]
pub struct AsyncEndpoint {
    link: Link,
}

impl AsyncEndpoint {
    /// Open a connection (`cfg.ip`: ours and the peer's addresses; `cfg.local_port` 0 picks
    /// one); resolves once it is established, or with why not (refused, timed out).
    pub async fn connect(&self, cfg: Config) -> Result<AsyncQp, ApiError> {
        self.link.call(|r| EpCmd::Connect(cfg, r)).await
    }

    /// The next connection to a listening port, once established.
    pub async fn accept(&self) -> Result<AsyncQp, ApiError> {
        self.link.call(EpCmd::Accept).await
    }
}

/// One end of a connection, usable from any task. Cheap to clone.
#[derive(Clone)]
pub struct AsyncQp {
    link: Link,
    handle: ConnectionHandle,
}

impl AsyncQp {
    async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Cmd) -> Result<T, ApiError> {
        let h = self.handle;
        self.link.call(|r| EpCmd::Qp(h, make(r))).await
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

    /// The connection's counters now.
    pub async fn stats(&self) -> Result<tcp_bth::Stats, ApiError> {
        self.call(Cmd::Stats).await
    }
}
