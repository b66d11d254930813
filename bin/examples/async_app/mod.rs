//! The application of the `async_qp` example, written once against the async API and run
//! unchanged over the simulated link and over the io_uring TUN data path (the example's
//! `--tun`, and `tests/tests/async_api.rs` for both). Copy it as the start of your own.
//!
//! The server accepts one QP, registers a region the client may write and read, and tells the
//! client where it is in a first SEND. The client then SENDs `messages` messages, WRITEs with
//! immediate into the region, and READs the region back; every byte is checked on the side
//! that receives it.

use bth_io::api::{ApiError, AsyncEndpoint};
use bth_placement::Access;
use tcp_bth::Config;

/// The region the server exposes.
pub const REGION: usize = 1 << 20;

/// Bytes of message `i`: its index, then a pattern that depends on it, so the receiver can
/// check every byte whichever posted receive it landed in (receives posted from several
/// tasks are posted in no particular order).
pub fn message(i: u64, len: usize) -> Vec<u8> {
    let mut m: Vec<u8> = (0..len)
        .map(|k| (k as u64).wrapping_mul(31).wrapping_add(i * 7) as u8)
        .collect();
    let n = len.min(8);
    m[..n].copy_from_slice(&i.to_be_bytes()[..n]);
    m
}

/// The index a message carries (messages of at least 8 bytes).
fn index_of(m: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(m.get(..8)?.try_into().ok()?))
}

/// What one side checked.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Checked {
    pub messages: u64,
    pub bytes: u64,
}

#[derive(Debug)]
pub enum AppError {
    Api(ApiError),
    /// Bytes that arrived differ from what was sent.
    Corrupt(&'static str),
}

impl From<ApiError> for AppError {
    fn from(e: ApiError) -> AppError {
        AppError::Api(e)
    }
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AppError::Api(e) => write!(f, "{e}"),
            AppError::Corrupt(what) => write!(f, "{what} arrived corrupted"),
        }
    }
}

/// Accept one QP and serve it: `messages` SENDs of `len` (≥ 8) bytes, then the client's
/// WRITE.
pub async fn server(ep: AsyncEndpoint, messages: u64, len: usize) -> Result<Checked, AppError> {
    let qp = ep.accept().await?;
    let access = Access::REMOTE_WRITE | Access::REMOTE_READ | Access::LOCAL_WRITE;
    let mr = qp.register(vec![0u8; REGION], access).await?;
    // Post the receives before telling the client to go, so no SEND waits for credit.
    let recvs: Vec<_> = (0..messages)
        .map(|_| {
            let qp = qp.clone();
            tokio::spawn(async move { qp.recv(len).await })
        })
        .collect();
    tokio::task::yield_now().await;
    let mut hello = mr.rkey.to_be_bytes().to_vec();
    hello.extend_from_slice(&mr.addr.to_be_bytes());
    qp.send(hello, None).await?;
    let mut checked = Checked::default();
    let mut seen = vec![false; messages as usize];
    for r in recvs {
        let m = r.await.map_err(|_| ApiError::DriverGone)??;
        let i = index_of(&m.data).filter(|&i| i < messages);
        match i {
            Some(i) if !seen[i as usize] && m.data == message(i, len) => seen[i as usize] = true,
            _ => return Err(AppError::Corrupt("a SEND")),
        }
        checked.messages += 1;
        checked.bytes += m.data.len() as u64;
    }
    let notice = qp.write_notice().await?;
    let region = qp.region(mr.rkey).await?;
    let n = notice.len as usize;
    if region[..n] != message(u64::from(notice.imm), n)[..] {
        return Err(AppError::Corrupt("the WRITE"));
    }
    checked.messages += 1;
    checked.bytes += n as u64;
    // The driver keeps serving the client's READ after this returns.
    Ok(checked)
}

/// Connect with `cfg`, SEND `messages` messages of `len` bytes, WRITE with immediate into the
/// server's region and READ it back.
pub async fn client(
    ep: AsyncEndpoint,
    cfg: Config,
    messages: u64,
    len: usize,
) -> Result<Checked, AppError> {
    let qp = ep.connect(cfg).await?;
    let hello = qp.recv(12).await?;
    let rkey = u32::from_be_bytes(hello.data[..4].try_into().expect("4 bytes"));
    let addr = u64::from_be_bytes(hello.data[4..12].try_into().expect("8 bytes"));
    for i in 0..messages {
        qp.send(message(i, len), None).await?;
    }
    let data = message(99, REGION / 2);
    qp.write(rkey, addr, data.clone(), Some(99)).await?;
    let back = qp.read(rkey, addr, data.len() as u32).await?;
    if back != data {
        return Err(AppError::Corrupt("the READ"));
    }
    qp.close().await?;
    Ok(Checked {
        messages: 1,
        bytes: back.len() as u64,
    })
}
