//! The kernel-TCP side of a comparison: tokio sockets with the framing a user would write
//! (4-byte big-endian length, then the payload, read with `read_exact` into a `Vec` of that
//! size). Server in namespace A bound to 10.99.0.1, client in namespace B; each thread enters
//! its namespace before it creates its runtime and sockets.

use super::{Cell, Workload};
use crate::perf::REPLY_LEN;
use crate::topology::{TwoNs, A_LINK};
use crate::tunpair::thread_cpu;
use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};
use tcp_bth_io::sim::workload::fill;
use tcp_bth_io::tun::enter_netns;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What one kernel run measured.
#[derive(Debug, Clone, Default)]
pub struct KernelRun {
    pub messages: u64,
    pub bytes: u64,
    pub elapsed: Duration,
    /// Per message: one-way (bulk) or round trip (request/response), sorted.
    pub latencies: Vec<Duration>,
    pub client_cpu: Duration,
    pub server_cpu: Duration,
    /// `tcpi_total_retrans` of the client and server sockets at the end.
    pub client_retrans: u64,
    pub server_retrans: u64,
    /// Largest `SIOCINQ` (unread in-order bytes) seen on the receiving socket.
    pub max_inq: u64,
    /// Largest `SO_MEMINFO` rmem_alloc seen on the receiving socket (skb truesize of the
    /// receive and out-of-order queues: what `ss -m` shows as `r`).
    pub max_rmem: u64,
    /// Messages the server read whose every byte matched what the client sent.
    pub verified: u64,
}

/// Message `i`'s payload: the same pattern our stack's perf apps send (`perf::payload`), so
/// both stacks pay for building and checking the bytes alike.
const PATTERN_SEED: u64 = 1;

fn runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

fn total_retrans(fd: i32) -> u64 {
    // SAFETY: tcp_info is plain old data; getsockopt writes at most `len` bytes.
    let mut ti: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: valid pointers and length.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut ti as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        u64::from(ti.tcpi_total_retrans)
    } else {
        0
    }
}

/// (SIOCINQ, SO_MEMINFO rmem_alloc) of a socket.
fn rx_queued(fd: i32) -> (u64, u64) {
    let mut inq: libc::c_int = 0;
    // SAFETY: FIONREAD (= SIOCINQ) writes one int.
    let rc = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut inq) };
    let inq = if rc == 0 { inq.max(0) as u64 } else { 0 };
    const SO_MEMINFO: libc::c_int = 55;
    let mut mem = [0u32; 16];
    let mut len = std::mem::size_of_val(&mem) as libc::socklen_t;
    // SAFETY: SO_MEMINFO writes up to `len` bytes of u32 counters.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_MEMINFO,
            mem.as_mut_ptr().cast(),
            &mut len,
        )
    };
    (inq, if rc == 0 { u64::from(mem[0]) } else { 0 })
}

struct ServerOut {
    arrived: Vec<Instant>,
    verified: u64,
    /// The first message whose bytes differed.
    differs: Option<u64>,
    cpu: Duration,
    retrans: u64,
    max_inq: u64,
    max_rmem: u64,
}

async fn serve(l: TcpListener, rr: bool) -> io::Result<ServerOut> {
    let (mut s, _) = l.accept().await?;
    s.set_nodelay(true)?;
    let fd = s.as_raw_fd();
    let cpu0 = thread_cpu();
    let mut out = ServerOut {
        arrived: Vec::new(),
        verified: 0,
        differs: None,
        cpu: Duration::ZERO,
        retrans: 0,
        max_inq: 0,
        max_rmem: 0,
    };
    let mut reply = Vec::with_capacity(4 + REPLY_LEN);
    reply.extend_from_slice(&(REPLY_LEN as u32).to_be_bytes());
    reply.resize(4 + REPLY_LEN, 0);
    let mut last_sample: Option<Instant> = None;
    loop {
        // Sample the receive queue at most once per 200 µs (two cheap system calls).
        let due = match last_sample {
            None => true,
            Some(t) => t.elapsed() >= Duration::from_micros(200),
        };
        if due {
            let (inq, rmem) = rx_queued(fd);
            out.max_inq = out.max_inq.max(inq);
            out.max_rmem = out.max_rmem.max(rmem);
            last_sample = Some(Instant::now());
        }
        let mut len = [0u8; 4];
        match s.read_exact(&mut len).await {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e),
        }
        let n = u32::from_be_bytes(len) as usize;
        let mut msg = vec![0u8; n];
        s.read_exact(&mut msg).await?;
        out.arrived.push(Instant::now());
        // Every byte checked, as our server checks each SEND (`verify`).
        let i = out.arrived.len() as u64 - 1;
        let mut want = vec![0u8; n];
        fill(PATTERN_SEED, i, &mut want);
        if msg == want {
            out.verified += 1;
        } else {
            out.differs.get_or_insert(i);
        }
        if rr {
            s.write_all(&reply).await?;
        }
        drop(msg);
    }
    out.retrans = total_retrans(fd);
    out.cpu = thread_cpu() - cpu0;
    s.shutdown().await?;
    Ok(out)
}

struct ClientOut {
    posted: Vec<Instant>,
    rtts: Vec<Duration>,
    start: Instant,
    end: Instant,
    cpu: Duration,
    retrans: u64,
}

async fn drive(cell: &Cell, port: u16) -> io::Result<ClientOut> {
    let mut s = TcpStream::connect((A_LINK, port)).await?;
    s.set_nodelay(true)?;
    let fd = s.as_raw_fd();
    let cpu0 = thread_cpu();
    // The message as the application builds it: length prefix and payload in one buffer.
    let mut msg = Vec::with_capacity(4 + cell.size as usize);
    msg.extend_from_slice(&cell.size.to_be_bytes());
    msg.resize(4 + cell.size as usize, 0);
    let mut posted = Vec::with_capacity(cell.count as usize);
    let mut rtts = Vec::new();
    let start = Instant::now();
    let mut end = start;
    for i in 0..cell.count {
        fill(PATTERN_SEED, i, &mut msg[4..]);
        let t = Instant::now();
        posted.push(t);
        s.write_all(&msg).await?;
        if cell.workload == Workload::RequestResponse {
            let mut len = [0u8; 4];
            s.read_exact(&mut len).await?;
            let mut reply = vec![0u8; u32::from_be_bytes(len) as usize];
            s.read_exact(&mut reply).await?;
            end = Instant::now();
            rtts.push(end - t);
        }
    }
    s.shutdown().await?;
    // Wait for the server's FIN: everything sent has been read (and acknowledged).
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).await?;
    Ok(ClientOut {
        posted,
        rtts,
        start,
        end,
        cpu: thread_cpu() - cpu0,
        retrans: total_retrans(fd),
    })
}

/// One kernel run of `cell` on port `port` (server in A, client in B).
pub fn run(ns: &TwoNs, cell: &Cell, port: u16) -> io::Result<KernelRun> {
    let rr = cell.workload == Workload::RequestResponse;
    // The server says when it listens; a server that ends without saying so failed to start,
    // and its result says why.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let server = {
        let a = ns.a.clone();
        std::thread::spawn(move || -> io::Result<ServerOut> {
            enter_netns(&a)?;
            runtime()?.block_on(async move {
                let l = TcpListener::bind((A_LINK, port)).await?;
                let _ = ready_tx.send(());
                tokio::time::timeout(Duration::from_secs(300), serve(l, rr))
                    .await
                    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "server timed out"))?
            })
        })
    };
    if ready_rx.recv().is_err() {
        return Err(match server.join() {
            Ok(Err(e)) => e,
            _ => io::Error::other("kernel server thread died"),
        });
    }
    let client = {
        let (b, cell) = (ns.b.clone(), cell.clone());
        std::thread::spawn(move || -> io::Result<ClientOut> {
            enter_netns(&b)?;
            let rt = runtime()?;
            rt.block_on(async move {
                tokio::time::timeout(Duration::from_secs(300), drive(&cell, port))
                    .await
                    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "client timed out"))?
            })
        })
    };
    let c = client
        .join()
        .map_err(|_| io::Error::other("kernel client panicked"))?;
    let s = server
        .join()
        .map_err(|_| io::Error::other("kernel server panicked"))?;
    let (c, s) = (c?, s?);
    let messages = s.arrived.len() as u64;
    if let Some(i) = s.differs {
        return Err(io::Error::other(format!(
            "message {i} arrived with other bytes than were sent"
        )));
    }
    if messages != cell.count {
        return Err(io::Error::other(format!(
            "server read {messages} of {} messages",
            cell.count
        )));
    }
    let (mut latencies, end) = if rr {
        (c.rtts, c.end)
    } else {
        let lat = c
            .posted
            .iter()
            .zip(&s.arrived)
            .map(|(p, a)| a.saturating_duration_since(*p))
            .collect();
        (lat, *s.arrived.last().unwrap_or(&c.start))
    };
    latencies.sort();
    Ok(KernelRun {
        messages,
        bytes: messages * u64::from(cell.size),
        elapsed: end - c.start,
        latencies,
        client_cpu: c.cpu,
        server_cpu: s.cpu,
        client_retrans: c.retrans,
        server_retrans: s.retrans,
        max_inq: s.max_inq,
        max_rmem: s.max_rmem,
        verified: s.verified,
    })
}
