//! Running a side's rows: per row, `-q` connections at once on one [`Port`] (driver and
//! endpoint), each with its own app, summed into the row's report. Shared by `server`,
//! `client` and both threads of `local`.

use super::args::Plan;
use super::progress::Bar;
use bth_perf::drive::{run_many, Port, Role};
use bth_perf::{
    aggregate, Client, PerfApp, PerfConfig, PerfReport, Role as Role2, Server, ServersClosed,
};
use std::net::SocketAddr;
use std::time::Duration;
use tcp_bth::{Config, Keepalive};

/// Keepalive of every bth-perf connection: a peer silent for 2 s is probed once a second,
/// and gone after three unanswered probes.
const PEER_KEEPALIVE: Keepalive = Keepalive {
    idle: Duration::from_secs(2),
    interval: Duration::from_secs(1),
    probes: 3,
};

/// User timeout of every bth-perf connection: data unacknowledged this long means the peer
/// is gone. Far above any recovery on the paths bth-perf runs (an RTO backed off five times
/// is 6.2 s from the first loss).
const PEER_USER_TIMEOUT: Duration = Duration::from_secs(10);

/// One row of a side's run: its configuration and what this side measured, summed over the
/// row's connections.
#[derive(Debug, Clone)]
pub struct Row {
    pub cfg: PerfConfig,
    pub report: PerfReport,
    /// Why a connection of the row did not run to its end (set-up failure, time limit).
    pub failure: Option<String>,
}

impl Row {
    pub fn ok(&self) -> bool {
        self.failure.is_none() && self.report.errors.is_empty()
    }
}

/// Which side this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    Server,
    /// Connects to the server's stack at this address (IPv4 or IPv6, as the stack's own).
    Client(SocketAddr),
}

/// The client's TCP port for connection `n` of this process: distinct per connection, so a
/// segment of an earlier row's connection still in flight never matches a later one.
fn client_port(n: usize) -> u16 {
    40000 + ((std::process::id() as usize + n) % 20000) as u16
}

/// A side's run: who it is, the server's TCP port, the rows, whether to draw progress bars.
pub struct SideRun<'a> {
    pub who: Who,
    pub tcp_port: u16,
    pub plan: &'a Plan,
    pub bars: bool,
    /// Both sides in this process (`local`): one [`ServersClosed`] per row, shared by the two
    /// sides' threads, so that a client in TIME-WAIT stops lingering once the row's servers
    /// have closed (they got its last ACK) instead of three RTOs after every row. None when
    /// the peer is another process (`server`, `client`): then the client lingers.
    pub in_process: Option<&'a [ServersClosed]>,
}

/// `app`, sharing `closed` with the other side's apps if both sides are in this process.
fn with_closed<R: Role2>(app: PerfApp<R>, closed: Option<&ServersClosed>) -> PerfApp<R> {
    match closed {
        Some(c) => app.in_process(c.clone()),
        None => app,
    }
}

/// One [`ServersClosed`] per row of `plan` (its `qps` server connections each), for the two
/// sides of `local`.
pub fn servers_closed(plan: &Plan) -> Vec<ServersClosed> {
    plan.rows
        .iter()
        .map(|_| ServersClosed::new(plan.qps as usize))
        .collect()
}

impl SideRun<'_> {
    /// The connections of row `i`, `qps` at once, numbered from `n` among this process's.
    fn row(
        &self,
        port: &mut Port,
        cfg: &PerfConfig,
        i: usize,
        n: usize,
    ) -> (Vec<PerfReport>, Option<String>) {
        let closed = self.in_process.and_then(|c| c.get(i));
        let conn = Config {
            bth: !cfg.mode.plain,
            framing: cfg.framing,
            // A peer killed mid-run (or its host gone) is noticed within seconds, not after
            // --timeout: keepalive while waiting on it (probes after 2 s of silence, one a
            // second, three unanswered: about 5 s), the user timeout while our data waits
            // for its ACK. An ICMP unreachable on the way is named in the error.
            keepalive: Some(PEER_KEEPALIVE),
            user_timeout: Some(PEER_USER_TIMEOUT),
            ..Config::default()
        };
        let qps = self.plan.qps;
        match self.who {
            Who::Server => {
                let apps = (0..qps)
                    .map(|_| with_closed(Server::new(cfg.clone()), closed))
                    .collect();
                let conn = Config {
                    local_port: self.tcp_port,
                    ..conn
                };
                self.run_apps(port, cfg, Role::Listen, conn, apps)
            }
            Who::Client(server) => {
                let apps = (0..qps)
                    .map(|qp| with_closed(Client::for_qp(cfg.clone(), qp), closed))
                    .collect();
                let conn = Config {
                    local_port: client_port(n),
                    // A server that is not there (or not routed to) is reported after 4
                    // SYNs, 15 s, rather than after Linux's 127 s.
                    syn_retries: 3,
                    ..conn
                };
                self.run_apps(port, cfg, Role::Connect(server), conn, apps)
            }
        }
    }

    /// Run `apps` at once, one connection each, with a progress bar over their sum.
    fn run_apps<R: Role2>(
        &self,
        port: &mut Port,
        cfg: &PerfConfig,
        role: Role,
        conn: Config,
        mut apps: Vec<PerfApp<R>>,
    ) -> (Vec<PerfReport>, Option<String>) {
        let mut bar = Bar::new(self.bars, format!("{} bytes", cfg.size), cfg.duration);
        let progress = |apps: &[PerfApp<R>]| {
            let (mut done, mut total) = (0, Some(0));
            for a in apps {
                let (d, t) = a.progress();
                done += d;
                total = total.zip(t).map(|(x, y)| x + y);
            }
            bar.update(done, total);
        };
        let r = run_many(port, role, conn, self.plan.limit, &mut apps, progress);
        bar.finish();
        match r {
            Ok(conns) => {
                let reports = apps
                    .into_iter()
                    .zip(conns)
                    .map(|(app, c)| {
                        let mut report = app.into_report();
                        if let Some(c) = c {
                            report.record_recovery(&c);
                        }
                        report
                    })
                    .collect();
                (reports, None)
            }
            Err(e) => {
                let reports = apps.into_iter().map(PerfApp::into_report).collect();
                (reports, Some(e.to_string()))
            }
        }
    }

    /// Run the rows in order; `on_row` sees each as it ends. Stops after the first row that
    /// failed: the peer has most likely given up too.
    pub fn run(&self, port: &mut Port, mut on_row: impl FnMut(&Row)) -> Vec<Row> {
        let plan = self.plan;
        let mut rows = Vec::new();
        for (i, cfg) in plan.rows.iter().enumerate() {
            let (reports, failure) = self.row(port, cfg, i, i * plan.qps as usize);
            let row = Row {
                cfg: cfg.clone(),
                report: aggregate(&reports),
                failure,
            };
            on_row(&row);
            let ok = row.ok();
            rows.push(row);
            if !ok {
                break;
            }
        }
        rows
    }
}
