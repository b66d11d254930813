//! Driving perf apps over the io_uring TUN data path: [`run_many`] runs one connection per app
//! at once (`-q`) on a [`Port`] (a TUN device, its driver and the endpoint it serves), in the
//! shared driver turn (`bth_io::turn`); [`run_one`] is the one-connection case.

use crate::side::RunRefused;
use bth_io::tun::{Driver, DriverStats, TunDevice};
use bth_io::turn::{self, PacketIo, RunError};
use bth_testbed::interrupt::{self, DriverLoop};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tcp_bth::wire::IpPair;
use tcp_bth::{Config, Connection, ConnectionHandle, EndpointConfig, EndpointStats, State};

/// An application on one connection: called once per driver turn with the connection and the
/// driver's time (post work, poll completions there); true when it is done.
pub trait ConnApp {
    /// One turn on `c` at driver time `now`; true when done (it is not called again).
    fn step(&mut self, c: &mut Connection, now: Duration) -> bool;

    /// Join the run of the other apps the driver runs with it (`-q`), which share `run`: the
    /// first refusal ends them all ([`RunRefused`]). Nothing by default.
    fn join_run(&mut self, run: &RunRefused) {
        let _ = run;
    }

    /// Done although its connection never came (the run ended without it: [`RunRefused`]).
    /// False by default: the driver waits for the connection.
    fn done_unopened(&self) -> bool {
        false
    }
}

impl<R: super::Role> ConnApp for super::PerfApp<R> {
    fn step(&mut self, c: &mut Connection, now: Duration) -> bool {
        super::PerfApp::step(self, c, now)
    }

    fn join_run(&mut self, run: &RunRefused) {
        super::PerfApp::join_run(self, run);
    }

    fn done_unopened(&self) -> bool {
        self.run_refused()
    }
}

impl<A: ConnApp + ?Sized> ConnApp for &mut A {
    fn step(&mut self, c: &mut Connection, now: Duration) -> bool {
        (**self).step(c, now)
    }

    fn join_run(&mut self, run: &RunRefused) {
        (**self).join_run(run);
    }

    fn done_unopened(&self) -> bool {
        (**self).done_unopened()
    }
}

/// Which side of the handshake a connection plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Accept the first SYN for the connection's `local_port`.
    Listen,
    /// Connect to the stack at this address (of the port's family: IPv4 or IPv6).
    Connect(SocketAddr),
}

/// Bytes of IPv4 and TCP header without options: what `tcp_bth::Config::mss` leaves out of
/// the MTU (RFC 6691).
pub const IPV4_TCP_HEADERS: u32 = 40;

/// Our connections' MSS on a device of MTU `mtu`: MTU − 40 (`tcp_bth::Config::mss`; an IPv6
/// connection takes 20 more off itself, and the core clamps it to what one IPv4 packet
/// holds).
pub fn mss_for_mtu(mtu: u32) -> u16 {
    u16::try_from(mtu.saturating_sub(IPV4_TCP_HEADERS)).unwrap_or(u16::MAX)
}

/// A TUN device with its driver and the endpoint it serves: our stack's address behind it.
/// The endpoint lives as long as the port, so a server listens once for every row and
/// connection, and connections that arrive before their app is ready wait in its accept
/// queue. Every connection on it takes its MSS from the device's MTU ([`mss_for_mtu`]).
pub struct Port {
    driver: Driver,
    local: IpAddr,
    ep: tcp_bth::Endpoint,
    listening: Option<u16>,
}

impl Port {
    /// Set up the driver on `tun`, for a stack at `local`, IPv4 or IPv6 (the kernel routes
    /// `local` into the device). The stack's connections are of `local`'s family.
    pub fn open(tun: TunDevice, local: impl Into<IpAddr>) -> io::Result<Port> {
        let local = local.into();
        let me = IpPair::from_addrs(local, local).expect("one family");
        let driver = Driver::open(tun)?;
        Ok(Port {
            local,
            ep: tcp_bth::Endpoint::new(EndpointConfig {
                local: vec![me],
                max_packet: driver.max_packet(),
                rx_queue: driver.rx_queue(),
                ..EndpointConfig::default()
            }),
            driver,
            listening: None,
        })
    }

    /// Our stack's address behind the device (as given to [`Port::open`]).
    pub fn local(&self) -> IpAddr {
        self.local
    }

    /// The TUN device's drops ([`TunDevice::drops`]); from the thread that opened the port.
    pub fn device_drops(&self) -> io::Result<bth_io::tun::devstats::DeviceDrops> {
        self.driver.device().drops()
    }

    /// The device's MTU.
    pub fn mtu(&self) -> u32 {
        self.driver.device().mtu()
    }

    /// The driver's counters, over every connection run so far.
    pub fn stats(&self) -> DriverStats {
        self.driver.stats
    }

    /// The endpoint's counters (SYNs, cookies, RSTs, bad packets), over the port's life.
    pub fn endpoint_stats(&self) -> EndpointStats {
        self.ep.stats()
    }
}

/// Run one connection of `role` on `port` until `app` says it is done or `limit` has passed.
/// `conn` gives the ports and options; for [`Role::Connect`] its addresses and remote port
/// are set here. Returns the connection as the driver left it (its final counters).
pub fn run_one(
    port: &mut Port,
    role: Role,
    conn: Config,
    limit: Duration,
    mut app: impl ConnApp,
) -> io::Result<Connection> {
    let apps = std::slice::from_mut(&mut app);
    let mut conns = run_many(port, role, conn, limit, apps, |_| {})?;
    conns
        .pop()
        .flatten()
        .ok_or_else(|| io::Error::other("the connection never opened"))
}

/// Run one connection per app at once (`-q`), all on `port`'s one endpoint and driver, until
/// every app is done or `limit` has passed. A server hands connections to its apps in the
/// order they are accepted; a client opens them all at once, each from its own port (`conn`'s
/// `local_port`, plus the app's index; 0: ephemeral ports). `conn`'s MSS is replaced by the
/// port's ([`mss_for_mtu`] of its device). Returns each app's connection as the driver left it
/// (None: it never opened). `each_turn` sees the apps after every turn (progress).
///
/// An interrupted process (`bth_testbed::interrupt`) asks the loop to stop: at its next turn every
/// connection on the port is aborted with RST, the RSTs are written into the device, and the
/// thread then waits for the signal thread to end the process ([`DriverLoop::answer`]): this
/// does not return.
pub fn run_many<A: ConnApp>(
    port: &mut Port,
    role: Role,
    mut conn: Config,
    limit: Duration,
    apps: &mut [A],
    each_turn: impl FnMut(&[A]),
) -> io::Result<Vec<Option<Connection>>> {
    conn.mss = mss_for_mtu(port.mtu());
    if let Role::Listen = role {
        if port.listening != Some(conn.local_port) {
            port.ep
                .listen(conn.local_port, conn.clone())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            port.listening = Some(conn.local_port);
        }
    }
    if let Role::Connect(remote) = role {
        conn.remote_port = remote.port();
        conn.ip = IpPair::from_addrs(port.local, remote.ip()).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "cannot connect to {remote} from the stack at {}: one is IPv4, the other \
                     IPv6",
                    port.local
                ),
            )
        })?;
    }
    let mut qps = Qps {
        interrupt: interrupt::driver_loop(port.driver.waker()),
        aborted: None,
        conns: Conns::new(role, conn, apps, each_turn),
    };
    let r = port.driver.serve(&mut port.ep, &mut qps, limit);
    let interrupt = qps.interrupt;
    if interrupt.asked() {
        let (aborted, r) = match qps.aborted {
            Some(n) => (n, r),
            // The run ended on its own before the loop saw the request: what the endpoint
            // still holds is aborted now, and its RSTs written.
            None => {
                let mut n = 0;
                let r = port.driver.serve(
                    &mut port.ep,
                    &mut |ep: &mut tcp_bth::Endpoint, _| {
                        n = abort_all(ep);
                        true
                    },
                    ABORT_FLUSH_LIMIT,
                );
                (n, r)
            }
        };
        interrupt.answer(aborted, r.is_ok());
    }
    drop(interrupt);
    let Conns { handles, error, .. } = qps.conns;
    let silent = match r {
        Err(RunError::TimedOut(_)) => never_answered(role, &handles, &port.ep),
        _ => None,
    };
    if r.is_err() || error.is_some() {
        // Nothing drives these connections any more: abort them (their RSTs go out with the
        // endpoint's next turn, on the next row or never) and free their 4-tuples.
        for h in handles.iter().flatten() {
            if let Some(c) = port.ep.conn_mut(*h) {
                c.abort();
            }
        }
    }
    if let Some(e) = error {
        for h in handles.iter().flatten() {
            port.ep.release(*h);
        }
        return Err(e);
    }
    let conns = handles
        .iter()
        .map(|h| h.and_then(|h| port.ep.release(h)))
        .collect();
    match r {
        Ok(_) => Ok(conns),
        Err(RunError::TimedOut(t)) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            match silent {
                Some(why) => format!("not done within {t:?}: {why}"),
                None => format!("not done within {t:?}"),
            },
        )),
        Err(RunError::Io(e)) => Err(e),
        Err(e) => Err(io::Error::other(e.to_string())),
    }
}

/// Longest an interrupted loop that had already left its run turns again to write its RSTs.
/// Well within `interrupt::LOOPS_WAIT`, which bounds it anyway.
const ABORT_FLUSH_LIMIT: Duration = Duration::from_millis(200);

/// Abort every connection `ep` holds that the peer may still think open (the accepted, those
/// waiting to be, and our own), as an interrupted process must leave them: RST. Returns how
/// many got one. A connection still in SYN-SENT ends too, with no RST (the peer has nothing to
/// reset). Closing ones (CLOSING, LAST-ACK, TIME-WAIT) are left alone, as RFC 9293's ABORT
/// leaves them (no RST: the peer has closed its side), and so are half-open ones (SYN
/// received, not yet handed to `accept`), which the endpoint keeps to itself: the peer's
/// handshake then never completes.
fn abort_all(ep: &mut tcp_bth::Endpoint) -> usize {
    // Take the accept queue, so its connections are among `handles`.
    while ep.accept().is_some() {}
    let handles: Vec<_> = ep.handles().collect();
    let mut reset = 0;
    for h in handles {
        let Some(c) = ep.conn_mut(h) else { continue };
        let state = c.state();
        let open = matches!(
            state,
            State::SynSent
                | State::SynReceived
                | State::Established
                | State::FinWait1
                | State::FinWait2
                | State::CloseWait
        );
        if open {
            c.abort();
            reset += usize::from(state != State::SynSent);
        }
    }
    reset
}

/// The apps of one [`run_many`], with what answers an interrupted process.
struct Qps<'a, A, F> {
    /// Asked by the signal thread to abort everything (see [`run_many`]).
    interrupt: DriverLoop,
    /// Connections aborted once asked: the turn is then over, and `turn::run` goes on only
    /// until the RSTs have been written.
    aborted: Option<usize>,
    conns: Conns<'a, A, F>,
}

impl<A: ConnApp, F: FnMut(&[A])> turn::App for Qps<'_, A, F> {
    fn turn(&mut self, ep: &mut tcp_bth::Endpoint, now: Duration) -> bool {
        if self.interrupt.asked() {
            // Before anything else of the turn: no new connection, no more data before the
            // RSTs.
            self.aborted.get_or_insert_with(|| abort_all(ep));
            return true;
        }
        turn::App::turn(&mut self.conns, ep, now)
    }
}

/// The apps of a run on one endpoint and their connections, as one application of the driver
/// turn (`bth_io::turn::App`): what [`run_many`] serves on a port's driver, and what the
/// simulated network (`bth_io::sim::net::Net`) serves in the tests. The apps share one
/// [`RunRefused`] ([`ConnApp::join_run`]). A client opens every connection at its first turn, each
/// from its own port (`conn`'s `local_port` plus the app's index; 0: ephemeral ports); a
/// server hands connections to its apps in the order it accepts them, and an app whose
/// connection never came is done once [`ConnApp::done_unopened`] says so.
pub struct Conns<'a, A, F> {
    role: Role,
    conn: Config,
    apps: &'a mut [A],
    /// Each app's connection, once opened or accepted.
    handles: Vec<Option<ConnectionHandle>>,
    done: Vec<bool>,
    each_turn: F,
    opened: bool,
    error: Option<io::Error>,
}

impl<'a, A: ConnApp, F: FnMut(&[A])> Conns<'a, A, F> {
    /// `apps`, one connection each, for `role`; `conn` gives the ports, addresses and options
    /// (for [`Role::Connect`], the remote's address and port too). `each_turn` sees the apps
    /// after every turn.
    pub fn new(role: Role, conn: Config, apps: &'a mut [A], each_turn: F) -> Self {
        let run = RunRefused::default();
        for a in apps.iter_mut() {
            a.join_run(&run);
        }
        Conns {
            role,
            conn,
            handles: vec![None; apps.len()],
            done: vec![false; apps.len()],
            apps,
            each_turn,
            opened: false,
            error: None,
        }
    }

    /// Each app's connection, once opened or accepted, in the apps' order.
    pub fn handles(&self) -> &[Option<ConnectionHandle>] {
        &self.handles
    }

    /// Which apps are done, in the apps' order.
    pub fn done(&self) -> &[bool] {
        &self.done
    }
}

impl<A: ConnApp, F: FnMut(&[A])> turn::App for Conns<'_, A, F> {
    fn turn(&mut self, ep: &mut tcp_bth::Endpoint, now: Duration) -> bool {
        match self.role {
            Role::Connect(_) if !self.opened => {
                self.opened = true;
                for (i, h) in self.handles.iter_mut().enumerate() {
                    let mut cfg = self.conn.clone();
                    if cfg.local_port != 0 {
                        cfg.local_port = cfg.local_port.wrapping_add(i as u16).max(1024);
                    }
                    match ep.connect(now, cfg) {
                        Ok(c) => *h = Some(c),
                        Err(e) => {
                            self.error = Some(io::Error::other(format!("connect: {e}")));
                            return true;
                        }
                    }
                }
            }
            Role::Connect(_) => {}
            Role::Listen => {
                // Not for an app that is done without one (its run ended): the connection
                // stays in the endpoint's queue, for the next run on the port or none.
                let open = self.handles.iter_mut().zip(&self.done);
                for (h, _) in open.filter(|(h, done)| h.is_none() && !**done) {
                    match ep.accept() {
                        Some(c) => *h = Some(c),
                        None => break,
                    }
                }
            }
        }
        let mut all = true;
        for ((h, app), done) in self
            .handles
            .iter()
            .zip(self.apps.iter_mut())
            .zip(&mut self.done)
        {
            if !*done {
                match h.and_then(|h| ep.conn_mut(h)) {
                    Some(c) => *done = app.step(c, now),
                    // The run ended without this connection: a server of `-q 8` whose client
                    // runs `-q 1` and was refused.
                    None if h.is_none() && app.done_unopened() => *done = true,
                    None => all = false,
                }
            }
            all &= *done;
        }
        (self.each_turn)(self.apps);
        all
    }
}

/// Why a timed-out run did not finish, when the peer never answered at all: a server no
/// client reached, or a client whose SYNs (on some or all of its connections) got nothing.
fn never_answered(
    role: Role,
    handles: &[Option<ConnectionHandle>],
    ep: &tcp_bth::Endpoint,
) -> Option<String> {
    match role {
        Role::Listen => handles.iter().all(Option::is_none).then(|| {
            "no client connected (is `bth-perf client` pointed at this stack's address, and \
             does the client's host route this stack's prefix here?)"
                .to_string()
        }),
        Role::Connect(remote) => {
            let conns: Vec<_> = handles
                .iter()
                .flatten()
                .filter_map(|h| ep.conn(*h))
                .collect();
            let silent = conns.iter().filter(|c| c.stats().segments_in == 0).count();
            let which = if silent == conns.len() {
                String::new()
            } else {
                format!(" on {silent} of {} connections", conns.len())
            };
            (silent > 0).then(|| {
                format!(
                    "{remote} never answered the handshake{which} (is `bth-perf server` running \
                     there, and does this host route its prefix to it?)"
                )
            })
        }
    }
}
