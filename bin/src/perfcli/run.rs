//! Running a side's rows: one connection per row (and per `-q` connection, when the driver
//! can run more than one), each with its own app, on one [`Port`]. Shared by `server`,
//! `client` and both threads of `local`.

use super::args::Plan;
use super::progress::{Bar, WithBar};
use crate::perf::drive::{run_one, Port, Role};
use crate::perf::{aggregate, Client, PerfConfig, PerfReport, Server};
use std::net::SocketAddrV4;
use tcp_bth::Config;

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
    /// Connects to the server's stack at this address.
    Client(SocketAddrV4),
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
}

impl SideRun<'_> {
    /// Connection `n` of this process, `qp` of its row.
    fn conn(
        &self,
        port: &mut Port,
        cfg: &PerfConfig,
        n: usize,
        qp: u32,
    ) -> (PerfReport, Option<String>) {
        let bar = Bar::new(self.bars, format!("{} bytes", cfg.size), cfg.duration);
        let limit = self.plan.limit;
        match self.who {
            Who::Server => {
                let conn = Config {
                    local_port: self.tcp_port,
                    bth: !cfg.plain,
                    ..Config::default()
                };
                let mut app = Server::new(cfg.clone());
                let r = run_one(
                    port,
                    Role::Listen,
                    conn,
                    limit,
                    WithBar { app: &mut app, bar },
                );
                finish(r, app.into_report())
            }
            Who::Client(server) => {
                let conn = Config {
                    local_port: client_port(n),
                    bth: !cfg.plain,
                    ..Config::default()
                };
                let mut app = Client::for_qp(cfg.clone(), qp);
                let role = Role::Connect(server);
                let r = run_one(port, role, conn, limit, WithBar { app: &mut app, bar });
                finish(r, app.into_report())
            }
        }
    }

    /// Run the rows in order; `on_row` sees each as it ends. Stops after the first row that
    /// failed: the peer has most likely given up too.
    pub fn run(&self, port: &mut Port, mut on_row: impl FnMut(&Row)) -> Vec<Row> {
        let plan = self.plan;
        let mut rows = Vec::new();
        for (i, cfg) in plan.rows.iter().enumerate() {
            let mut reports = Vec::new();
            let mut failure = None;
            for qp in 0..plan.qps {
                let (r, f) = self.conn(port, cfg, i * plan.qps as usize + qp as usize, qp);
                reports.push(r);
                if f.is_some() {
                    failure = f;
                    break;
                }
            }
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

/// The report with the connection's final counters (the driver transmits after the app's
/// last turn), or the driver's error.
fn finish(
    r: std::io::Result<tcp_bth::Connection>,
    mut report: PerfReport,
) -> (PerfReport, Option<String>) {
    match r {
        Ok(conn) => {
            report.record_recovery(&conn);
            (report, None)
        }
        Err(e) => (report, Some(e.to_string())),
    }
}
