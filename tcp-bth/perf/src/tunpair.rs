//! Our stack against our stack over the io_uring TUN data path, in a two-namespace topology
//! ([`TwoNs`]): server in namespace A, client in B, one thread each. Shared by the integration
//! tests (`bth_tests::tunpair`) and `bth-compare`.

use crate::drive::{run_many, Port, Role};
use crate::{PerfConfig, PerfReport};
use bth_io::tun::Offload;
use bth_testbed::ready::spawn_set_up;
use bth_testbed::topology::{self, TwoNs};
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tcp_bth::wire::IpPair;
use tcp_bth::{Config, Connection, Mode};

mod qps;
pub use qps::{Admission, QpsReport, QpsRun};

/// What one side measured besides its [`PerfReport`] (which carries the side's own
/// loss-recovery counters, [`PerfReport::recovery`]).
#[derive(Debug, Clone)]
pub struct SideRun {
    /// The side's app's report, its counters taken once the driver had stopped.
    pub report: PerfReport,
    /// user + system CPU of the side's thread while it drove the connection.
    pub cpu: Duration,
    /// `Instant` of driver time zero (so driver times of both sides can be compared).
    pub base: Instant,
    /// Largest number of received payload bytes held outside posted buffers seen at the end of
    /// any driver turn, summed over the connection's staging structures
    /// ([`Connection::rx_held`]: byte-stream queue and out-of-order store).
    pub held_max: u64,
    /// Segments placed while an earlier hole was open (direct out-of-order placement).
    pub ooo_placed: u64,
    /// The connection's MSS as the core kept it (`Config::mss` after its clamps: the port's
    /// MTU − 40, [`crate::drive::mss_for_mtu`]); a `tcp_bth` data segment carries
    /// its 40 option bytes less.
    pub mss: u16,
}

/// Client and server of one run.
#[derive(Debug, Clone)]
pub struct PairRun {
    /// The client's side (in B).
    pub client: SideRun,
    /// The server's side (in A).
    pub server: SideRun,
}

/// user + system CPU time of the calling thread.
pub fn thread_cpu() -> Duration {
    thread_usage().0
}

/// What the kernel counted for a thread besides its CPU time (`getrusage(RUSAGE_THREAD)`):
/// page faults served without I/O and context switches. Recorded per run of ours, so that a
/// run whose CPU per byte stands out can be told apart from the others (fresh memory being
/// faulted in, the thread being preempted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ThreadCounters {
    /// Page faults served without I/O (`ru_minflt`).
    pub minor_faults: u64,
    /// The thread gave up the CPU (waited; `ru_nvcsw`).
    pub voluntary_switches: u64,
    /// The thread was made to give up the CPU (preempted; `ru_nivcsw`).
    pub involuntary_switches: u64,
}

impl ThreadCounters {
    /// What happened since `earlier`.
    pub fn since(self, earlier: ThreadCounters) -> ThreadCounters {
        ThreadCounters {
            minor_faults: self.minor_faults.saturating_sub(earlier.minor_faults),
            voluntary_switches: self
                .voluntary_switches
                .saturating_sub(earlier.voluntary_switches),
            involuntary_switches: self
                .involuntary_switches
                .saturating_sub(earlier.involuntary_switches),
        }
    }
}

/// The calling thread's CPU time and [`ThreadCounters`].
pub fn thread_usage() -> (Duration, ThreadCounters) {
    // SAFETY: rusage is plain old data; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    let n = |v: libc::c_long| u64::try_from(v).unwrap_or(0);
    let counters = ThreadCounters {
        minor_faults: n(ru.ru_minflt),
        voluntary_switches: n(ru.ru_nvcsw),
        involuntary_switches: n(ru.ru_nivcsw),
    };
    (tv(ru.ru_utime) + tv(ru.ru_stime), counters)
}

/// Per-turn bookkeeping around an app's `step`.
struct Watch {
    base: Option<Instant>,
    held_max: u64,
}

impl Watch {
    fn new() -> Watch {
        Watch {
            base: None,
            held_max: 0,
        }
    }

    fn turn(&mut self, c: &Connection, now: Duration) {
        // The driver computes `now` at the top of its turn, so `Instant::now() - now` is never
        // earlier than the driver's start; the smallest value seen is the closest estimate.
        let b = Instant::now() - now;
        self.base = Some(self.base.map_or(b, |x| x.min(b)));
        self.held_max = self.held_max.max(c.rx_held().total());
    }

    fn finish(self, mut report: PerfReport, c: &Connection, cpu: Duration) -> SideRun {
        // The driver transmitted after the app's last turn: count that too.
        report.record_recovery(c);
        SideRun {
            report,
            cpu,
            base: self.base.unwrap_or_else(Instant::now),
            held_max: self.held_max,
            ooo_placed: c.stats().ooo_placed,
            mss: c.config().mss,
        }
    }
}

/// The stack's TUN device in namespace `ns` at `mtu` (its topology's, [`TwoNs::mtu`]); retried
/// for a while because the previous run's device (same name) goes away only when the kernel
/// has torn down that run's io_uring, which it does asynchronously (TUNSETIFF answers EBUSY
/// until then).
pub fn stack_tun_mtu(
    ns: &str,
    side_a: bool,
    mtu: u32,
    offload: Offload,
) -> io::Result<bth_io::tun::TunDevice> {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        match topology::stack_tun_mtu(ns, side_a, mtu, offload) {
            Err(_) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
            r => return r,
        }
    }
}

fn check_mode(c: &Connection, cfg: &PerfConfig, side: &str) -> io::Result<()> {
    if matches!(c.mode(), Mode::Bth { .. }) == cfg.mode.plain {
        return Err(io::Error::other(format!(
            "{side}: negotiated {:?} but plain = {}",
            c.mode(),
            cfg.mode.plain
        )));
    }
    Ok(())
}

/// An application on one side of a [`run_apps`] run (see [`crate::drive::ConnApp`]).
pub use crate::drive::ConnApp;

/// One side of a [`run_apps`] run, once its app is done.
pub struct Side<A> {
    /// The app, after its last turn.
    pub app: A,
    /// The connection as the driver left it (closed or failed, or still open if the app
    /// stopped early): completions not yet polled are still in it.
    pub conn: Connection,
    /// user + system CPU of the side's thread while it drove the connection.
    pub cpu: Duration,
}

/// The server's connection: it listens on port 4791 in namespace A.
pub fn server_config(bth: bool) -> Config {
    Config {
        local_port: 4791,
        bth,
        ..Config::default()
    }
}

/// The client's connection: from B's stack address to the server's.
pub fn client_config(bth: bool) -> Config {
    Config {
        local_port: 40001,
        remote_port: 4791,
        bth,
        ip: IpPair::V4 {
            src: topology::B_STACK.octets(),
            dst: topology::A_STACK.octets(),
        },
        ..Config::default()
    }
}

/// Run `server` on our stack in A (listening with `server_cfg`) and `client` in B (connecting
/// with `client_cfg`), one thread, TUN device and io_uring driver each; `limit` bounds each
/// side's run. The client starts once the server's driver is up.
pub fn run_apps<S: ConnApp + Send + 'static, C: ConnApp + Send + 'static>(
    ns: &TwoNs,
    (server_cfg, server): (Config, S),
    (client_cfg, client): (Config, C),
    limit: Duration,
) -> io::Result<(Side<S>, Side<C>)> {
    let (s, c) = run_apps_many(
        ns,
        (server_cfg, vec![server]),
        (client_cfg, vec![client]),
        limit,
    )?;
    Ok((s.single()?, c.single()?))
}

/// One side of a [`run_apps_many`] run: every app, its connection, the thread's CPU.
pub struct Sides<A> {
    /// Every app, in the order given.
    pub apps: Vec<A>,
    /// Each app's connection as the driver left it (None: it never opened).
    pub conns: Vec<Option<Connection>>,
    /// user + system CPU of the side's thread while it drove all the connections.
    pub cpu: Duration,
    /// What else the kernel counted for that thread meanwhile.
    pub thread: ThreadCounters,
    /// Packets the side's TUN device dropped (receive and transmit; transmit drops are
    /// packets toward this side that found the device's queue full), read when the run
    /// ended; None if they could not be read.
    pub device_drops: Option<u64>,
}

impl<A> Sides<A> {
    /// The side of a one-connection run.
    fn single(mut self) -> io::Result<Side<A>> {
        match (self.apps.pop(), self.conns.pop().flatten()) {
            (Some(app), Some(conn)) => Ok(Side {
                app,
                conn,
                cpu: self.cpu,
            }),
            _ => Err(io::Error::other("the connection never opened")),
        }
    }
}

/// [`run_apps`] with any number of connections at once, one app each, on each side's one
/// driver and endpoint ([`run_many`]): the server accepts them in arrival order, the client
/// opens connection `i` from `client_cfg.local_port + i`.
pub fn run_apps_many<S: ConnApp + Send + 'static, C: ConnApp + Send + 'static>(
    ns: &TwoNs,
    (server_cfg, server): (Config, Vec<S>),
    (client_cfg, client): (Config, Vec<C>),
    limit: Duration,
) -> io::Result<(Sides<S>, Sides<C>)> {
    let (mtu, offload) = (ns.mtu, ns.offload);
    let server = {
        let name = ns.a.clone();
        spawn_set_up(
            "bth-server",
            move || {
                stack_tun_mtu(&name, true, mtu, offload)
                    .and_then(|t| Port::open(t, topology::A_STACK))
            },
            move |mut port| drive(&mut port, Role::Listen, server_cfg, server, limit),
        )?
    };
    let client = {
        let name = ns.b.clone();
        std::thread::spawn(move || -> io::Result<Sides<C>> {
            let tun = stack_tun_mtu(&name, false, mtu, offload)?;
            let mut port = Port::open(tun, topology::B_STACK)?;
            let server = SocketAddr::from((topology::A_STACK, client_cfg.remote_port));
            drive(&mut port, Role::Connect(server), client_cfg, client, limit)
        })
    };
    bth_testbed::ready::join_both((server, "server"), (client, "client"))
}

fn drive<A: ConnApp>(
    port: &mut Port,
    role: Role,
    cfg: Config,
    mut apps: Vec<A>,
    limit: Duration,
) -> io::Result<Sides<A>> {
    let (cpu0, t0) = thread_usage();
    let conns = run_many(port, role, cfg, limit, &mut apps, |_| {})?;
    let (cpu1, t1) = thread_usage();
    let (cpu, thread) = (cpu1 - cpu0, t1.since(t0));
    // This thread is in the device's namespace, and the device still exists.
    let device_drops = port.device_drops().ok().map(|d| d.total());
    Ok(Sides {
        apps,
        conns,
        cpu,
        thread,
        device_drops,
    })
}

/// A perf app with the bookkeeping of [`Watch`] around each turn.
struct Watched<A> {
    app: A,
    watch: Watch,
}

impl<A> Watched<A> {
    fn new(app: A) -> Watched<A> {
        Watched {
            app,
            watch: Watch::new(),
        }
    }
}

impl<A: ConnApp> ConnApp for Watched<A> {
    fn step(&mut self, c: &mut Connection, now: Duration) -> bool {
        self.watch.turn(c, now);
        self.app.step(c, now)
    }

    fn join_run(&mut self, run: &crate::RunRefused) {
        self.app.join_run(run);
    }

    fn done_unopened(&self) -> bool {
        self.app.done_unopened()
    }
}

/// Run one perf exchange between our stack in A (server, port 4791) and B (client); `limit`
/// bounds each side's run.
pub fn run_pair(ns: &TwoNs, cfg: &PerfConfig, limit: Duration) -> io::Result<PairRun> {
    let one = QpsRun::new(cfg.clone(), 1);
    let mut r = one.run(ns, limit)?;
    let mut p = r
        .pairs
        .pop()
        .ok_or_else(|| io::Error::other("no connection ran"))?;
    p.client.cpu = r.client_cpu;
    p.server.cpu = r.server_cpu;
    Ok(p)
}
