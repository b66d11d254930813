//! `bth-compare`: the same message workload over Linux kernel TCP (tokio sockets, length-prefixed
//! messages) and over our stack (the `perf` apps on the io_uring TUN path), between the two
//! namespaces of [`TwoNs`], runs of the two stacks interleaved per cell (A B A B).
//!
//! Library side of the tool: plan building ([`plan`]), running ([`run_cell`]), summaries
//! ([`summarize`]) and rendering ([`render`]), so tests can check the plan and the rendering
//! without root and run one small cell end to end with it.

pub mod ceiling;
pub mod kernel;
pub mod render;

pub use ceiling::{ceiling_cell, relay_ceiling, RelayCeiling};

use crate::perf::{PerfConfig, PerfOp};
use crate::topology::TwoNs;
use crate::tunpair;
use serde::Serialize;
use std::io;
use std::time::{Duration, Instant};
use tcp_bth_io::sim::LinkConfig;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    /// The client sends messages back to back (ours: `depth` outstanding SENDs; kernel: the
    /// socket buffer is the queue).
    Bulk,
    /// The client sends a message and waits for an 8-byte reply before the next.
    RequestResponse,
}

/// How the two namespaces are joined.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Link {
    Veth,
    /// The userspace impairment relay: reordering and loss probabilities per packet.
    Relay {
        reorder: f64,
        loss: f64,
    },
}

impl Link {
    /// The relay's link model: 10 µs one way, no bandwidth limit, reordered packets delayed by
    /// up to 100 µs (as `bth-perf server --relay-*`).
    pub fn link_config(&self, seed: u64) -> Option<LinkConfig> {
        match *self {
            Link::Veth => None,
            Link::Relay { reorder, loss } => Some(
                LinkConfig::default()
                    .with_delay(Duration::from_micros(10))
                    .with_bandwidth_bps(0)
                    .with_loss(loss)
                    .with_reorder(reorder, Duration::from_micros(100))
                    .with_seed(seed),
            ),
        }
    }

    pub fn label(&self) -> String {
        match *self {
            Link::Veth => "veth".into(),
            Link::Relay { reorder, loss } => {
                format!("relay reorder {}% loss {}%", reorder * 100.0, loss * 100.0)
            }
        }
    }
}

/// One workload on one link.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub id: String,
    pub workload: Workload,
    pub size: u32,
    pub count: u64,
    /// Our client's outstanding work requests (bulk); 1 for request/response.
    pub depth: usize,
    pub link: Link,
    /// Our stack runs as a plain TCP byte stream (`tcp_bth` off on both sides), the fallback
    /// a peer without the option gets: received data then waits in the stack's receive queue
    /// and out-of-order store, which the rx-held column measures.
    pub plain: bool,
}

impl Cell {
    fn new(workload: Workload, size: u32, count: u64, link: Link) -> Cell {
        let depth = match workload {
            Workload::RequestResponse => 1,
            Workload::Bulk if size >= 8 << 20 => 4,
            Workload::Bulk if size >= 1 << 20 => 8,
            Workload::Bulk => 16,
        };
        let w = match workload {
            Workload::Bulk => "bulk",
            Workload::RequestResponse => "rr",
        };
        let l = match link {
            Link::Veth => "veth".to_string(),
            Link::Relay { reorder, loss } => {
                format!("relay-r{}-l{}", reorder * 100.0, loss * 100.0)
            }
        };
        Cell {
            id: format!("{w}-{}-{l}", size_label(size)),
            workload,
            size,
            count,
            depth,
            link,
            plain: false,
        }
    }

    /// The same cell with our stack in plain byte-stream mode (id suffix `-plain`).
    fn plain(mut self) -> Cell {
        self.plain = true;
        self.id += "-plain";
        self
    }

    pub fn bytes(&self) -> u64 {
        self.count * u64::from(self.size)
    }

    /// The `perf` configuration our stack runs for this cell.
    pub fn perf_config(&self) -> PerfConfig {
        PerfConfig {
            op: match self.workload {
                Workload::Bulk => PerfOp::Send,
                Workload::RequestResponse => PerfOp::SendRecv,
            },
            size: self.size,
            count: self.count,
            depth: self.depth,
            verify: false,
            seed: 1,
            plain: self.plain,
        }
    }
}

pub fn size_label(size: u32) -> String {
    match size {
        s if s == tcp_bth::wire::MAX_MESSAGE_LEN => "16MiB-1".into(),
        s if s >= 1 << 20 && s % (1 << 20) == 0 => format!("{}MiB", s >> 20),
        s if s >= 1 << 10 && s % (1 << 10) == 0 => format!("{}KiB", s >> 10),
        s => format!("{s}B"),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stack {
    Kernel,
    Ours,
}

/// Cells and runs per stack.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub quick: bool,
    pub runs: usize,
    pub cells: Vec<Cell>,
}

pub const SIZES: [u32; 5] = [64, 4096, 65536, 1 << 20, tcp_bth::wire::MAX_MESSAGE_LEN];

/// The impairment sweep: reordering 0, 1 and 10 %, then loss 0.1 and 1 %.
pub const IMPAIRMENTS: [(f64, f64); 5] = [
    (0.0, 0.0),
    (0.01, 0.0),
    (0.10, 0.0),
    (0.0, 0.001),
    (0.0, 0.01),
];

/// The cells: message sizes over veth (bulk and request/response), and the impairment sweep
/// over the relay (bulk 1 MiB and request/response 4 KiB). Byte counts keep a full run of
/// both stacks well under 15 minutes on a 2-core machine; `quick` is a small subset.
pub fn plan(quick: bool) -> Plan {
    use Workload::*;
    let relay = |(reorder, loss): (f64, f64)| Link::Relay { reorder, loss };
    if quick {
        return Plan {
            quick,
            runs: 2,
            cells: vec![
                Cell::new(Bulk, 4096, 2000, Link::Veth),
                Cell::new(Bulk, 1 << 20, 16, Link::Veth),
                Cell::new(RequestResponse, 4096, 500, Link::Veth),
                Cell::new(Bulk, 1 << 20, 16, relay((0.10, 0.0))),
                Cell::new(Bulk, 1 << 20, 16, relay((0.10, 0.0))).plain(),
            ],
        };
    }
    let mut cells = Vec::new();
    let bulk_count = |s: u32| match s {
        64 => 100_000,
        4096 => 40_000,
        65536 => 4_000,
        s if s <= 1 << 20 => 256,
        _ => 24,
    };
    let rr_count = |s: u32| match s {
        64 | 4096 => 10_000,
        65536 => 2_000,
        s if s <= 1 << 20 => 200,
        _ => 12,
    };
    for s in SIZES {
        cells.push(Cell::new(Bulk, s, bulk_count(s), Link::Veth));
    }
    for s in SIZES {
        cells.push(Cell::new(RequestResponse, s, rr_count(s), Link::Veth));
    }
    for imp in IMPAIRMENTS {
        cells.push(Cell::new(Bulk, 1 << 20, 128, relay(imp)));
    }
    for imp in IMPAIRMENTS {
        cells.push(Cell::new(RequestResponse, 4096, 3_000, relay(imp)));
    }
    // Our fallback byte stream beside BTH, in order and with holes: what staging costs.
    cells.push(Cell::new(Bulk, 1 << 20, 256, Link::Veth).plain());
    cells.push(Cell::new(Bulk, 1 << 20, 128, relay((0.10, 0.0))).plain());
    Plan {
        quick,
        runs: 3,
        cells,
    }
}

impl Plan {
    pub fn total_runs(&self) -> usize {
        self.cells.len() * self.runs * 2
    }

    /// Human-readable plan (`--dry-run`).
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{} cells x {} runs per stack x 2 stacks = {} runs, interleaved kernel/ours per cell\n",
            self.cells.len(),
            self.runs,
            self.total_runs()
        );
        for c in &self.cells {
            s += &format!(
                "  {:<34} {:>16} x {:>6} = {:>10} bytes, depth {:>2}, {}\n",
                c.id,
                format!("{:?}", c.workload),
                c.count,
                c.bytes(),
                c.depth,
                c.link.label()
            );
        }
        s
    }
}

/// One run of one stack in one cell: everything the report needs, raw.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    pub cell: String,
    pub stack: Stack,
    pub run: usize,
    /// Why the run failed: the error's message, as the report and its JSON file record it.
    pub error: Option<String>,
    pub messages: u64,
    pub bytes: u64,
    pub elapsed_s: f64,
    pub gbps: f64,
    pub msgs_per_sec: f64,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
    pub cpu_client_s: f64,
    pub cpu_server_s: f64,
    /// Retransmitted segments, both directions (sender and, for request/response, replies).
    pub retrans: u64,
    /// Ours only: retransmissions later found unnecessary.
    pub spurious: Option<u64>,
    /// Receive-side bytes held outside posted buffers (max over the run). Ours: the receiving
    /// connection's staging structures (`Connection::rx_held`: byte-stream queue and
    /// out-of-order store; both 0 with `tcp_bth`, where segments are placed directly); kernel:
    /// SO_MEMINFO rmem_alloc of the receiving socket.
    pub rx_held_max: u64,
    /// Kernel only: largest SIOCINQ (unread in-order payload bytes) on the receiving socket.
    pub kernel_max_inq: Option<u64>,
    /// Ours only: segments placed directly while an earlier hole was open (receiver side).
    pub ooo_placed: Option<u64>,
    /// Per-message latencies, sorted (bulk: one way, client post to server completion;
    /// request/response: round trip). Not written to the JSON file.
    #[serde(skip)]
    pub latencies: Vec<Duration>,
}

impl RunRecord {
    /// A run that failed with `e`: its message is what the report records.
    fn failed(cell: &Cell, stack: Stack, run: usize, e: &io::Error) -> RunRecord {
        RunRecord {
            cell: cell.id.clone(),
            stack,
            run,
            error: Some(e.to_string()),
            messages: 0,
            bytes: 0,
            elapsed_s: 0.0,
            gbps: 0.0,
            msgs_per_sec: 0.0,
            p50_us: None,
            p99_us: None,
            p999_us: None,
            cpu_client_s: 0.0,
            cpu_server_s: 0.0,
            retrans: 0,
            spurious: None,
            rx_held_max: 0,
            kernel_max_inq: None,
            ooo_placed: None,
            latencies: Vec::new(),
        }
    }

    fn fill_rates(&mut self, mut latencies: Vec<Duration>) {
        latencies.sort();
        let s = self.elapsed_s;
        if s > 0.0 {
            self.gbps = self.bytes as f64 * 8.0 / s / 1e9;
            self.msgs_per_sec = self.messages as f64 / s;
        }
        let us = |q| percentile(&latencies, q).map(|d| d.as_secs_f64() * 1e6);
        self.p50_us = us(0.5);
        self.p99_us = us(0.99);
        self.p999_us = us(0.999);
        self.latencies = latencies;
    }
}

/// Value at quantile `q` of sorted `v`.
pub fn percentile(v: &[Duration], q: f64) -> Option<Duration> {
    if v.is_empty() {
        return None;
    }
    Some(v[((v.len() - 1) as f64 * q).round() as usize])
}

fn run_ours(ns: &TwoNs, cell: &Cell, run: usize) -> io::Result<RunRecord> {
    let p = tunpair::run_pair(ns, &cell.perf_config(), Duration::from_secs(180))?;
    let (c, s) = (&p.client, &p.server);
    if let Some(e) = c.report.errors.iter().chain(&s.report.errors).next() {
        return Err(io::Error::other(e.clone()));
    }
    let at = |base: Instant, t: Duration| base + t;
    let start = c.report.posted.first().map_or(c.base, |&t| at(c.base, t));
    let (latencies, end) = match cell.workload {
        Workload::RequestResponse => (c.report.latencies.clone(), start + c.report.elapsed),
        Workload::Bulk => {
            // One way: posted at the client to complete at the server, on one clock.
            let lat = s
                .report
                .arrived
                .iter()
                .filter_map(|&(i, t)| {
                    let p = *c.report.posted.get(i as usize)?;
                    Some(at(s.base, t).saturating_duration_since(at(c.base, p)))
                })
                .collect();
            let end = s
                .report
                .arrived
                .iter()
                .map(|&(_, t)| at(s.base, t))
                .max()
                .unwrap_or(start);
            (lat, end)
        }
    };
    let mut r = RunRecord {
        cell: cell.id.clone(),
        stack: Stack::Ours,
        run,
        error: None,
        messages: c.report.messages,
        bytes: c.report.bytes,
        elapsed_s: end.saturating_duration_since(start).as_secs_f64(),
        gbps: 0.0,
        msgs_per_sec: 0.0,
        p50_us: None,
        p99_us: None,
        p999_us: None,
        cpu_client_s: c.cpu.as_secs_f64(),
        cpu_server_s: s.cpu.as_secs_f64(),
        retrans: c.retrans.retransmits + s.retrans.retransmits,
        spurious: Some(c.retrans.spurious + s.retrans.spurious),
        rx_held_max: s.held_max,
        kernel_max_inq: None,
        ooo_placed: Some(s.ooo_placed),
        latencies: Vec::new(),
    };
    r.fill_rates(latencies);
    Ok(r)
}

fn run_kernel(ns: &TwoNs, cell: &Cell, run: usize, port: u16) -> io::Result<RunRecord> {
    let k = kernel::run(ns, cell, port)?;
    let mut r = RunRecord {
        cell: cell.id.clone(),
        stack: Stack::Kernel,
        run,
        error: None,
        messages: k.messages,
        bytes: k.bytes,
        elapsed_s: k.elapsed.as_secs_f64(),
        gbps: 0.0,
        msgs_per_sec: 0.0,
        p50_us: None,
        p99_us: None,
        p999_us: None,
        cpu_client_s: k.client_cpu.as_secs_f64(),
        cpu_server_s: k.server_cpu.as_secs_f64(),
        retrans: k.client_retrans + k.server_retrans,
        spurious: None,
        rx_held_max: k.max_rmem,
        kernel_max_inq: Some(k.max_inq),
        ooo_placed: None,
        latencies: Vec::new(),
    };
    r.fill_rates(k.latencies);
    Ok(r)
}

/// Run every run of `cell` in a fresh topology named `{prefix}-a`/`-b` (deleted on return,
/// also on error), kernel and ours alternating. `progress` is called after each run.
pub fn run_cell(
    cell: &Cell,
    runs: usize,
    prefix: &str,
    seed: u64,
    mut progress: impl FnMut(&RunRecord),
) -> io::Result<Vec<RunRecord>> {
    let ns = TwoNs::create(prefix, cell.link.link_config(seed))?;
    let mut out = Vec::new();
    for run in 0..runs {
        for stack in [Stack::Kernel, Stack::Ours] {
            let r = match stack {
                Stack::Kernel => run_kernel(&ns, cell, run, 5001 + run as u16),
                Stack::Ours => run_ours(&ns, cell, run),
            };
            let r = r.unwrap_or_else(|e| RunRecord::failed(cell, stack, run, &e));
            progress(&r);
            out.push(r);
        }
    }
    drop(ns);
    Ok(out)
}

/// Figures of one stack in one cell, over its successful runs.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub stack: Stack,
    pub runs_ok: usize,
    pub runs_failed: usize,
    /// Medians over runs.
    pub gbps: f64,
    pub msgs_per_sec: f64,
    /// Percentiles over the latencies of all runs together.
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
    /// Medians over runs of CPU seconds per GB (10^9 bytes) moved.
    pub cpu_client_s_per_gb: f64,
    pub cpu_server_s_per_gb: f64,
    /// Median over runs.
    pub retrans: f64,
    pub spurious: Option<f64>,
    /// Max over runs.
    pub rx_held_max: u64,
    pub kernel_max_inq: Option<u64>,
}

/// Both stacks' figures for one cell.
#[derive(Debug, Clone, Serialize)]
pub struct CellResult {
    pub cell: Cell,
    pub kernel: Summary,
    pub ours: Summary,
}

impl CellResult {
    /// ours / kernel throughput.
    pub fn ratio(&self) -> Option<f64> {
        (self.kernel.gbps > 0.0 && self.ours.runs_ok > 0).then(|| self.ours.gbps / self.kernel.gbps)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn summary(stack: Stack, runs: &[&RunRecord]) -> Summary {
    let ok: Vec<&&RunRecord> = runs.iter().filter(|r| r.error.is_none()).collect();
    let mut lat: Vec<Duration> = ok.iter().flat_map(|r| r.latencies.clone()).collect();
    lat.sort();
    let us = |q| percentile(&lat, q).map(|d| d.as_secs_f64() * 1e6);
    let per_gb = |cpu: fn(&RunRecord) -> f64| {
        median(
            ok.iter()
                .filter(|r| r.bytes > 0)
                .map(|r| cpu(r) / (r.bytes as f64 / 1e9))
                .collect(),
        )
    };
    Summary {
        stack,
        runs_ok: ok.len(),
        runs_failed: runs.len() - ok.len(),
        gbps: median(ok.iter().map(|r| r.gbps).collect()),
        msgs_per_sec: median(ok.iter().map(|r| r.msgs_per_sec).collect()),
        p50_us: us(0.5),
        p99_us: us(0.99),
        p999_us: us(0.999),
        cpu_client_s_per_gb: per_gb(|r| r.cpu_client_s),
        cpu_server_s_per_gb: per_gb(|r| r.cpu_server_s),
        retrans: median(ok.iter().map(|r| r.retrans as f64).collect()),
        spurious: (stack == Stack::Ours).then(|| {
            median(
                ok.iter()
                    .filter_map(|r| r.spurious.map(|s| s as f64))
                    .collect(),
            )
        }),
        rx_held_max: ok.iter().map(|r| r.rx_held_max).max().unwrap_or(0),
        kernel_max_inq: ok.iter().filter_map(|r| r.kernel_max_inq).max(),
    }
}

/// Per-cell figures of both stacks, in plan order.
pub fn summarize(plan: &Plan, records: &[RunRecord]) -> Vec<CellResult> {
    plan.cells
        .iter()
        .map(|c| {
            let of = |s: Stack| -> Vec<&RunRecord> {
                records
                    .iter()
                    .filter(|r| r.cell == c.id && r.stack == s)
                    .collect()
            };
            CellResult {
                cell: c.clone(),
                kernel: summary(Stack::Kernel, &of(Stack::Kernel)),
                ours: summary(Stack::Ours, &of(Stack::Ours)),
            }
        })
        .collect()
}
