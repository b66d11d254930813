//! The kernel-TCP side of a comparison: tokio sockets with the framing a user would write
//! (4-byte big-endian length, then the payload, read with `read_exact` into a `Vec` of that
//! size). Server in namespace A bound to 10.99.0.1, client in namespace B; each thread enters
//! its namespace before it creates its runtime and sockets. A cell of several connections
//! (`Cell::qps`) runs them as tasks of each side's one thread, paired afterwards by the
//! client's port.

use super::{Cell, Workload};
use bth_io::sim::workload::{fill, matches_fill};
use bth_io::tun::enter_netns;
use bth_perf::tunpair::thread_cpu;
use bth_perf::REPLY_LEN;
use bth_testbed::ready::{join_both, spawn_set_up};
use bth_testbed::topology::{TwoNs, A_LINK};
use nix::sys::socket::{getsockopt, setsockopt, sockopt::TcpCongestion};
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

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
    /// `tcpi_total_retrans` of the client and server sockets at the end (summed over the
    /// connections).
    pub client_retrans: u64,
    pub server_retrans: u64,
    /// Largest `SIOCINQ` (unread in-order bytes) seen on the receiving socket (several
    /// connections: each one's largest, added).
    pub max_inq: u64,
    /// Largest `SO_MEMINFO` rmem_alloc seen on the receiving socket (skb truesize of the
    /// receive and out-of-order queues: what `ss -m` shows as `r`).
    pub max_rmem: u64,
    /// Largest `SIOCOUTQ` (written, not yet acknowledged) sampled on the sending socket after a
    /// write, at most every 200 µs: the bytes its socket buffer let it keep outstanding (several connections: each
    /// one's largest, added).
    pub max_outq: u64,
    /// Messages the server read whose every byte matched what the client sent.
    pub verified: u64,
    /// The client's `tcpi_snd_mss` (payload bytes per full segment: the MSS the device's MTU
    /// gave, less the options it sends), the largest over its connections.
    pub client_mss: Option<u32>,
    /// The congestion control every socket of the run used, as read back from each
    /// (`TCP_CONGESTION`): the cell's `kernel_cc`.
    pub congestion: String,
}

/// Message `i`'s payload: the same pattern our stack's perf apps send (`perf::payload`), so
/// both stacks pay for building and checking the bytes alike.
const PATTERN_SEED: u64 = 1;

fn runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// The socket's `TCP_INFO`, if the kernel gives it.
fn tcp_info(fd: i32) -> Option<libc::tcp_info> {
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
    (rc == 0).then_some(ti)
}

/// Set the socket's congestion control (`TCP_CONGESTION`). An algorithm the kernel does not
/// have is an error that names the ones it has.
fn set_congestion(fd: &impl AsFd, name: &str) -> io::Result<()> {
    setsockopt(fd, TcpCongestion, &OsString::from(name)).map_err(|e| {
        let available =
            std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
                .unwrap_or_default();
        io::Error::new(
            io::Error::from(e).kind(),
            format!(
                "kernel congestion control {name:?}: {e} (this kernel has: {})",
                available.trim()
            ),
        )
    })
}

/// Whether this kernel lets a socket run `name`: a socket of this namespace is given it
/// (nothing bound, nothing sent). For checking `--kernel-cc` before a plan runs.
pub fn congestion_available(name: &str) -> io::Result<()> {
    use nix::sys::socket::{socket, AddressFamily, SockFlag, SockType};
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    set_congestion(&fd, name)
}

/// Check that a connection's socket runs `want` (accepted sockets inherit the listener's, set
/// by `setsockopt`; a kernel that did otherwise would silently compare another algorithm).
fn check_congestion(fd: &impl AsFd, want: &str) -> io::Result<()> {
    let got = getsockopt(fd, TcpCongestion)?;
    let got = got.to_string_lossy();
    if got != want {
        return Err(io::Error::other(format!(
            "kernel socket runs congestion control {got:?}, not the {want:?} asked for"
        )));
    }
    Ok(())
}

/// A socket queue is sampled at most once per 200 µs (a system call or two), so that a run of
/// small messages does not pay one per message.
#[derive(Default)]
struct Sampler(Option<Instant>);

impl Sampler {
    /// True, and the sample's time noted, when the last sample is 200 µs old or none was taken.
    fn due(&mut self, now: Instant) -> bool {
        let due = self
            .0
            .is_none_or(|t| now.saturating_duration_since(t) >= Duration::from_micros(200));
        if due {
            self.0 = Some(now);
        }
        due
    }
}

/// `SIOCOUTQ` of a socket: bytes written and not yet acknowledged (0 if it cannot be read).
fn outq(fd: i32) -> u64 {
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (= SIOCOUTQ) writes one int.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut n) };
    if rc == 0 {
        n.max(0) as u64
    } else {
        0
    }
}

fn total_retrans(fd: i32) -> u64 {
    tcp_info(fd).map_or(0, |ti| u64::from(ti.tcpi_total_retrans))
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

/// What the server saw on one connection.
struct ServerOut {
    /// The client's port: which client connection this was.
    peer: u16,
    arrived: Vec<Instant>,
    verified: u64,
    /// The first message whose bytes differed.
    differs: Option<u64>,
    retrans: u64,
    max_inq: u64,
    max_rmem: u64,
}

/// Accept `n` connections and serve each in a task of this thread's runtime (one thread per
/// side, as our stack's one driver serves all its connections). Returns each connection's
/// figures in accept order and the thread's CPU over the run.
async fn serve_all(
    l: TcpListener,
    n: u32,
    rr: bool,
    cc: &str,
) -> io::Result<(Vec<ServerOut>, Duration)> {
    let mut tasks = Vec::new();
    let mut cpu0 = None;
    for _ in 0..n {
        let (s, from) = l.accept().await?;
        check_congestion(&s, cc)?;
        cpu0.get_or_insert_with(thread_cpu);
        tasks.push(tokio::spawn(serve(s, from.port(), rr)));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.map_err(io::Error::other)??);
    }
    Ok((out, thread_cpu() - cpu0.unwrap_or_default()))
}

async fn serve(mut s: TcpStream, peer: u16, rr: bool) -> io::Result<ServerOut> {
    s.set_nodelay(true)?;
    let fd = s.as_raw_fd();
    let mut out = ServerOut {
        peer,
        arrived: Vec::new(),
        verified: 0,
        differs: None,
        retrans: 0,
        max_inq: 0,
        max_rmem: 0,
    };
    let mut reply = Vec::with_capacity(4 + REPLY_LEN);
    reply.extend_from_slice(&(REPLY_LEN as u32).to_be_bytes());
    reply.resize(4 + REPLY_LEN, 0);
    let mut sample = Sampler::default();
    loop {
        if sample.due(Instant::now()) {
            let (inq, rmem) = rx_queued(fd);
            out.max_inq = out.max_inq.max(inq);
            out.max_rmem = out.max_rmem.max(rmem);
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
        if matches_fill(PATTERN_SEED, i, &msg) {
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
    s.shutdown().await?;
    Ok(out)
}

/// What the client saw on one connection.
struct ClientOut {
    /// The client's local port: the server's connection from it is this one's peer.
    port: u16,
    posted: Vec<Instant>,
    rtts: Vec<Duration>,
    start: Instant,
    end: Instant,
    retrans: u64,
    /// `tcpi_snd_mss` at the end.
    mss: Option<u32>,
    /// Largest SIOCOUTQ sampled after a write (at most every 200 µs).
    max_outq: u64,
}

/// Open `cell.qps` connections and run the cell's workload on each in a task of this
/// thread's runtime. Returns each connection's figures and the thread's CPU over the run.
async fn drive_all(cell: &Cell, port: u16) -> io::Result<(Vec<ClientOut>, Duration)> {
    let cpu0 = thread_cpu();
    let mut tasks = Vec::new();
    for _ in 0..cell.qps.max(1) {
        let cell = cell.clone();
        tasks.push(tokio::spawn(async move { drive(&cell, port).await }));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.map_err(io::Error::other)??);
    }
    Ok((out, thread_cpu() - cpu0))
}

async fn drive(cell: &Cell, port: u16) -> io::Result<ClientOut> {
    let sock = TcpSocket::new_v4()?;
    set_congestion(&sock, &cell.kernel_cc)?;
    let mut s = sock
        .connect(std::net::SocketAddr::from((A_LINK, port)))
        .await?;
    check_congestion(&s, &cell.kernel_cc)?;
    s.set_nodelay(true)?;
    let fd = s.as_raw_fd();
    // The message as the application builds it: length prefix and payload in one buffer.
    let mut msg = Vec::with_capacity(4 + cell.size as usize);
    msg.extend_from_slice(&cell.size.to_be_bytes());
    msg.resize(4 + cell.size as usize, 0);
    let mut posted = Vec::with_capacity(cell.count as usize);
    let mut rtts = Vec::new();
    let start = Instant::now();
    let mut end = start;
    let (mut max_outq, mut sample) = (0, Sampler::default());
    for i in 0..cell.count {
        fill(PATTERN_SEED, i, &mut msg[4..]);
        let t = Instant::now();
        posted.push(t);
        s.write_all(&msg).await?;
        if sample.due(t) {
            max_outq = max_outq.max(outq(fd));
        }
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
        port: s.local_addr()?.port(),
        posted,
        rtts,
        start,
        end,
        retrans: total_retrans(fd),
        mss: tcp_info(fd).map(|ti| ti.tcpi_snd_mss),
        max_outq,
    })
}

/// One kernel run of `cell` on port `port` (server in A, client in B): `cell.qps` connections
/// at once, their figures summed (receive-queue maxima: each connection's, added).
pub fn run(ns: &TwoNs, cell: &Cell, port: u16) -> io::Result<KernelRun> {
    let rr = cell.workload == Workload::RequestResponse;
    let n = cell.qps.max(1);
    // The caller goes on once the server listens; a server that could not start says why.
    let server = {
        let (a, cc) = (ns.a.clone(), cell.kernel_cc.clone());
        spawn_set_up(
            "kernel-server",
            move || {
                enter_netns(&a)?;
                let rt = runtime()?;
                let l = rt.block_on(TcpListener::bind((A_LINK, port)))?;
                set_congestion(&l, &cc)?;
                Ok((rt, l, cc))
            },
            move |(rt, l, cc)| -> io::Result<(Vec<ServerOut>, Duration)> {
                rt.block_on(async move {
                    tokio::time::timeout(Duration::from_secs(300), serve_all(l, n, rr, &cc))
                        .await
                        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "server timed out"))?
                })
            },
        )?
    };
    let client = {
        let (b, cell) = (ns.b.clone(), cell.clone());
        std::thread::spawn(move || -> io::Result<(Vec<ClientOut>, Duration)> {
            enter_netns(&b)?;
            let rt = runtime()?;
            rt.block_on(async move {
                tokio::time::timeout(Duration::from_secs(300), drive_all(&cell, port))
                    .await
                    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "client timed out"))?
            })
        })
    };
    // Both failed: the server's error first. A connection the server refuses (its socket runs
    // another congestion control than asked) reaches the client as a reset.
    let ((servers, server_cpu), (clients, client_cpu)) =
        join_both((server, "kernel server"), (client, "kernel client"))?;
    let mut out = KernelRun {
        client_cpu,
        server_cpu,
        congestion: cell.kernel_cc.clone(),
        ..KernelRun::default()
    };
    let start = clients.iter().map(|c| c.start).min();
    let mut end = start;
    for c in &clients {
        let s = servers
            .iter()
            .find(|s| s.peer == c.port)
            .ok_or_else(|| io::Error::other("a client connection was not served"))?;
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
        let last = if rr {
            out.latencies.extend_from_slice(&c.rtts);
            c.end
        } else {
            let lat = c.posted.iter().zip(&s.arrived);
            out.latencies
                .extend(lat.map(|(p, a)| a.saturating_duration_since(*p)));
            *s.arrived.last().unwrap_or(&c.start)
        };
        end = end.max(Some(last));
        out.messages += messages;
        out.verified += s.verified;
        out.client_retrans += c.retrans;
        out.client_mss = out.client_mss.max(c.mss);
        out.server_retrans += s.retrans;
        out.max_inq += s.max_inq;
        out.max_rmem += s.max_rmem;
        out.max_outq += c.max_outq;
    }
    out.latencies.sort();
    out.bytes = out.messages * u64::from(cell.size);
    out.elapsed = end.zip(start).map_or(Duration::ZERO, |(e, s)| e - s);
    Ok(out)
}
