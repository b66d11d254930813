//! Several connections of one perf run at once between our stacks in A and B (`bth-compare`'s
//! `--qps` cells and its incast cells over TUN): one driver and one endpoint per side, one perf
//! app per connection, as `bth-perf -q` runs them, with each connection's client and server
//! paired afterwards so one-way latencies compare the right clocks and messages.

use super::{check_mode, client_config, run_apps_many, server_config, PairRun, Watched};
use crate::{Client, PerfConfig, Server, ServersClosed};
use bth_testbed::topology::TwoNs;
use std::io;
use std::time::Duration;
use tcp_bth::Config;

/// Receiver-driven admission of a run's connections (`docs/stack.md`, "Receiver-driven
/// admission"); the default is the stack's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// Senders keep within the receiver's grant (`Config::admission`). Off, the grant is
    /// ignored: the incast cells' comparison, as in the simulator's incast.
    pub enforce: bool,
    /// Bytes the server admits per connection: its `admission_allowance` and its
    /// `admission_cap`, as `bth_io::sim::incast` sets them, so the grant is this however
    /// deep the receives are posted. `None`: the stack's defaults (no cap).
    pub admit: Option<u32>,
}

impl Default for Admission {
    fn default() -> Admission {
        Admission {
            enforce: true,
            admit: None,
        }
    }
}

impl Admission {
    fn apply(&self, cfg: &mut Config, receiver: bool) {
        cfg.admission = self.enforce;
        if let (true, Some(admit)) = (receiver, self.admit) {
            cfg.admission_allowance = admit;
            cfg.admission_cap = Some(admit);
        }
    }
}

/// What to run: `qps` connections, each running `cfg` (its whole workload), at once.
#[derive(Debug, Clone)]
pub struct QpsRun {
    /// Each connection's workload (its `qps` is set to this run's).
    pub cfg: PerfConfig,
    /// Connections (`-q`); 0 runs 1.
    pub qps: u32,
    /// Receiver-driven admission of the connections.
    pub admission: Admission,
}

/// What a [`QpsRun`] measured.
#[derive(Debug, Clone)]
pub struct QpsReport {
    /// Per connection (client `i` first), its client's and its server's side. Their `cpu` is
    /// zero: one thread per side drove every connection, its CPU is `client_cpu` and
    /// `server_cpu`.
    pub pairs: Vec<PairRun>,
    /// user + system CPU of the client's thread over the run.
    pub client_cpu: Duration,
    /// user + system CPU of the server's thread over the run.
    pub server_cpu: Duration,
    /// The client's thread's page faults and context switches over the run.
    pub client_thread: crate::tunpair::ThreadCounters,
    /// The server's thread's page faults and context switches over the run.
    pub server_thread: crate::tunpair::ThreadCounters,
    /// How often the clients' connections held data back for the server's grant
    /// (`Stats::grant_holds`, summed): zero when admission did not limit them.
    pub grant_holds: u64,
    /// Packets both sides' TUN devices dropped (`Sides::device_drops`), None if either side's
    /// could not be read.
    pub device_drops: Option<u64>,
    /// The congestion control of the clients' connections (they send the data).
    pub congestion: &'static str,
}

impl QpsRun {
    /// `qps` connections running `cfg` with the stack's admission defaults.
    pub fn new(cfg: PerfConfig, qps: u32) -> QpsRun {
        QpsRun {
            cfg,
            qps,
            admission: Admission::default(),
        }
    }

    /// Run it between our stacks in `ns` (server in A, client in B); `limit` bounds each side.
    pub fn run(&self, ns: &TwoNs, limit: Duration) -> io::Result<QpsReport> {
        let n = self.qps.max(1);
        // Both sides' option check compares the connection count too.
        let cfg = PerfConfig {
            qps: n,
            ..self.cfg.clone()
        };
        let bth = !cfg.mode.plain;
        let (mut scfg, mut ccfg) = (server_config(bth), client_config(bth));
        (scfg.framing, ccfg.framing) = (cfg.framing, cfg.framing);
        self.admission.apply(&mut scfg, true);
        self.admission.apply(&mut ccfg, false);
        let first_port = ccfg.local_port;
        let congestion = ccfg.congestion.name();
        // Both ends are in this process: the clients linger in TIME-WAIT only until every
        // server has closed (`ServersClosed`), not three RTOs after each run.
        let closed = ServersClosed::new(n as usize);
        let servers =
            (0..n).map(|_| Watched::new(Server::new(cfg.clone()).in_process(closed.clone())));
        let clients =
            (0..n).map(|i| Watched::new(Client::for_qp(cfg.clone(), i).in_process(closed.clone())));
        let (s, c) = run_apps_many(
            ns,
            (scfg, servers.collect()),
            (ccfg, clients.collect()),
            limit,
        )?;
        // The server accepted the connections in arrival order: its connection from client
        // port `first_port + i` served client `i`.
        let mut served: Vec<Option<PairSide>> = (0..n).map(|_| None).collect();
        for (app, conn) in s.apps.into_iter().zip(s.conns) {
            let conn = conn.ok_or_else(|| io::Error::other("a server connection never opened"))?;
            check_mode(&conn, &cfg, "server")?;
            let i = usize::from(conn.config().remote_port.wrapping_sub(first_port));
            let slot = served
                .get_mut(i)
                .ok_or_else(|| io::Error::other("a connection from an unknown port"))?;
            *slot = Some((app, conn));
        }
        let mut out = QpsReport {
            pairs: Vec::with_capacity(n as usize),
            client_cpu: c.cpu,
            server_cpu: s.cpu,
            client_thread: c.thread,
            server_thread: s.thread,
            grant_holds: 0,
            device_drops: c.device_drops.zip(s.device_drops).map(|(c, s)| c + s),
            congestion,
        };
        for ((app, conn), server) in c.apps.into_iter().zip(c.conns).zip(served) {
            let conn = conn.ok_or_else(|| io::Error::other("a client connection never opened"))?;
            let (sapp, sconn) =
                server.ok_or_else(|| io::Error::other("a client's connection was not served"))?;
            check_mode(&conn, &cfg, "client")?;
            out.grant_holds += conn.stats().grant_holds;
            let zero = Duration::ZERO;
            out.pairs.push(PairRun {
                client: app.watch.finish(app.app.into_report(), &conn, zero),
                server: sapp.watch.finish(sapp.app.into_report(), &sconn, zero),
            });
        }
        Ok(out)
    }
}

/// A server's app and its connection, once matched to its client.
type PairSide = (Watched<Server>, tcp_bth::Connection);
