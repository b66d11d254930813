//! The comparison plan: which workloads run over which links ([`Cell`]), and the cells of a
//! full and a quick run ([`plan`]).

use crate::perf::{PerfConfig, PerfOp};
use crate::relay_args::{clean_relay_link, DEFAULT_REORDER_DEPTH};
use serde::Serialize;
use std::time::Duration;
use tcp_bth_io::sim::{LinkConfig, LinkConfigError, Spray, SprayMode};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    /// The client sends messages back to back (ours: `depth` outstanding SENDs; kernel: the
    /// socket buffer is the queue).
    Bulk,
    /// The client sends a message and waits for an 8-byte reply before the next.
    RequestResponse,
}

/// How far the relay delays a reordered packet at most, unless a cell says otherwise: 100 µs,
/// the value of every relay cell before the reordering-depth sweep (and `bth-perf server
/// --relay-reorder`'s default depth), so those cells keep their ids.
pub const RELAY_REORDER_DEPTH_US: u32 = DEFAULT_REORDER_DEPTH.as_micros() as u32;

/// How the two namespaces are joined.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Link {
    Veth,
    /// The userspace impairment relay: reordering and loss probabilities per packet; a
    /// reordered packet is held back by a random extra delay of up to `reorder_depth_us`, so
    /// the depth decides how many later packets overtake it.
    Relay {
        reorder: f64,
        loss: f64,
        reorder_depth_us: u32,
    },
    /// The relay spraying every packet round-robin over `paths` lossless paths whose extra
    /// delays are spread evenly from 0 to `spread_us` (`Spray::even`), as a fabric spraying
    /// per packet over uplinks of different lengths: reordering on every packet, by up to the
    /// spread. No other impairment.
    Spray {
        paths: u32,
        spread_us: u32,
    },
}

impl Link {
    /// A relay link with the usual reordering depth.
    pub fn relay(reorder: f64, loss: f64) -> Link {
        Link::Relay {
            reorder,
            loss,
            reorder_depth_us: RELAY_REORDER_DEPTH_US,
        }
    }

    /// The relay's link model: 10 µs one way, no bandwidth limit (`clean_relay_link`, what
    /// `bth-perf server --relay` gives), plus the cell's impairments; `None` for veth. An error only for a spray
    /// the link model refuses (fewer than 2 or more than 16 paths).
    pub fn link_config(&self, seed: u64) -> Result<Option<LinkConfig>, LinkConfigError> {
        // One definition of the clean relay for both tools, so `bth-perf server --relay-*`
        // reproduces any cell.
        let relay = || clean_relay_link(seed);
        Ok(match *self {
            Link::Veth => None,
            Link::Relay {
                reorder,
                loss,
                reorder_depth_us,
            } => Some(
                relay()
                    .with_loss(loss)
                    .with_reorder(reorder, Duration::from_micros(u64::from(reorder_depth_us))),
            ),
            Link::Spray { paths, spread_us } => {
                let spread = Duration::from_micros(u64::from(spread_us));
                let spray = Spray::even(paths as usize, spread, SprayMode::RoundRobin)?;
                Some(relay().with_spray(spray))
            }
        })
    }

    /// Spraying over `paths` paths with the sweep's spread, [`SPRAY_SPREAD_US`].
    pub fn spray(paths: u32) -> Link {
        Link::Spray {
            paths,
            spread_us: SPRAY_SPREAD_US,
        }
    }

    /// What `--dry-run` says about the link.
    pub fn label(&self) -> String {
        match *self {
            Link::Veth => "veth".into(),
            Link::Relay {
                reorder,
                loss,
                reorder_depth_us,
            } => {
                let depth = if reorder > 0.0 {
                    format!(" (up to {reorder_depth_us} µs)")
                } else {
                    String::new()
                };
                format!(
                    "relay reorder {}%{depth} loss {}%",
                    reorder * 100.0,
                    loss * 100.0
                )
            }
            Link::Spray { paths, spread_us } => {
                format!("relay spraying round-robin over {paths} paths, +0..{spread_us} µs")
            }
        }
    }

    /// The link's part of a cell id. Relay cells at the usual depth keep the ids they had
    /// before the depth was a parameter (`relay-r10-l0`), so runs recorded then still match.
    pub fn id(&self) -> String {
        match *self {
            Link::Veth => "veth".into(),
            Link::Relay {
                reorder,
                loss,
                reorder_depth_us,
            } => {
                let mut s = format!("relay-r{}-l{}", reorder * 100.0, loss * 100.0);
                if reorder_depth_us != RELAY_REORDER_DEPTH_US {
                    s += &format!("-d{reorder_depth_us}us");
                }
                s
            }
            Link::Spray { paths, spread_us } => format!("relay-spray{paths}-{spread_us}us"),
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
    pub fn new(workload: Workload, size: u32, count: u64, link: Link) -> Cell {
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
        Cell {
            id: format!("{w}-{}-{}", size_label(size), link.id()),
            workload,
            size,
            count,
            depth,
            link,
            plain: false,
        }
    }

    /// The same cell with our stack in plain byte-stream mode (id suffix `-plain`).
    pub fn plain(mut self) -> Cell {
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
            tx_depth: self.depth,
            rx_depth: self.depth,
            // Every byte of every run checked at the receiver (kernel runs check theirs too).
            verify: true,
            seed: 1,
            plain: self.plain,
            ..PerfConfig::default()
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

/// The reordering-depth sweep: 10 % of packets reordered, each held back by up to this many
/// µs; [`RELAY_REORDER_DEPTH_US`] is the impairment sweep's 10 % cell. The deeper, the more
/// later packets overtake a reordered one, and the longer a hole stays open before it fills.
/// From 2 to 100 times the relay's 10 µs one-way delay.
pub const REORDER_DEPTHS_US: [u32; 5] = [20, 50, 200, 500, 1000];

/// Reordering probability of the depth sweep.
pub const REORDER_DEPTH_SWEEP_RATE: f64 = 0.10;

/// The spraying sweep: this many paths, their extra delays spread evenly over
/// [`SPRAY_SPREAD_US`]. One path is the impairment sweep's 0 % relay cell.
pub const SPRAY_PATHS: [u32; 4] = [2, 4, 8, 16];

/// Delay spread of the spraying cells: the slowest path is this much longer than the fastest
/// (20 × the relay's one-way delay), so a packet can be overtaken by everything sent in the
/// next 200 µs.
pub const SPRAY_SPREAD_US: u32 = 200;

/// Bulk cells over the relay move this message size, as the impairment sweep does.
const RELAY_BULK_SIZE: u32 = 1 << 20;
const RELAY_BULK_COUNT: u64 = 128;

/// The cells: message sizes over veth (bulk and request/response), the impairment sweep over
/// the relay (bulk 1 MiB and request/response 4 KiB), the reordering-depth sweep and the
/// spraying sweep (bulk 1 MiB). `quick` is a small subset.
pub fn plan(quick: bool) -> Plan {
    use Workload::*;
    let relay = |(reorder, loss): (f64, f64)| Link::relay(reorder, loss);
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
                Cell::new(Bulk, 1 << 20, 16, Link::spray(4)),
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
        cells.push(Cell::new(
            Bulk,
            RELAY_BULK_SIZE,
            RELAY_BULK_COUNT,
            relay(imp),
        ));
    }
    for imp in IMPAIRMENTS {
        cells.push(Cell::new(RequestResponse, 4096, 3_000, relay(imp)));
    }
    for reorder_depth_us in REORDER_DEPTHS_US {
        let link = Link::Relay {
            reorder: REORDER_DEPTH_SWEEP_RATE,
            loss: 0.0,
            reorder_depth_us,
        };
        cells.push(Cell::new(Bulk, RELAY_BULK_SIZE, RELAY_BULK_COUNT, link));
    }
    for paths in SPRAY_PATHS {
        let link = Link::spray(paths);
        cells.push(Cell::new(Bulk, RELAY_BULK_SIZE, RELAY_BULK_COUNT, link));
    }
    // Our fallback byte stream beside BTH, in order and with holes: what staging costs.
    cells.push(Cell::new(Bulk, 1 << 20, 256, Link::Veth).plain());
    cells.push(Cell::new(Bulk, RELAY_BULK_SIZE, RELAY_BULK_COUNT, relay((0.10, 0.0))).plain());
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
