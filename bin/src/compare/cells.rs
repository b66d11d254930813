//! The comparison plan: which workloads run over which links ([`Cell`]), and the cells of a
//! full and a quick run ([`plan`]).

use super::path_ceiling::CeilingSpec;
use crate::relay_args::{clean_relay_link, DEFAULT_REORDER_DEPTH};
use bth_io::sim::{LinkConfig, LinkConfigError, Spray, SprayMode};
use bth_perf::units::human_size;
use bth_perf::{PerfConfig, PerfOp};
use bth_testbed::topology::DEFAULT_MTU;
use serde::Serialize;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    /// The client sends messages back to back (ours: `depth` outstanding SENDs; kernel: the
    /// socket buffer is the queue).
    Bulk,
    /// The client sends a message and waits for an 8-byte reply before the next.
    RequestResponse,
}

/// Bulk messages from this size up are "large" (the MTU sweep's and relay cells' size).
pub const BULK_LARGE: u32 = 1 << 20;

/// Kernel TCP's largest send buffer: `net.ipv4.tcp_wmem`'s maximum, Linux's default (4 MiB),
/// which the namespaces `bth-compare` creates start with. Its socket buffer lets kernel TCP
/// keep up to this much written and not yet acknowledged (the runs record what it did keep:
/// `KernelDetail::kernel_max_outq`).
pub const KERNEL_SNDBUF_MAX: u64 = 4 << 20;

/// The most work requests our client keeps outstanding in a bulk cell: 256, so small messages
/// stop here. At 4 KiB that is 1 MiB, above the 649 KiB kernel TCP kept outstanding in the run
/// of 2026-11-28 05:08 (`bth-perf local --framing seq -s 4096 -t 64|256`: "nothing more to send"
/// 74–78 % of the sender's busy time with 64, 17–21 % with 256, the same throughput); at 64 B,
/// 16 KiB against the kernel's 33 KiB, where the per-message cost, not what is queued, bounds
/// both (75 % "nothing more to send" with 256 and 91 % with 64, the same throughput). Not more:
/// each outstanding message of a few bytes is a packet of its own in per-segment framing, and
/// the receiving device's queue holds 500 (`EndpointConfig::rx_queue`, which sizes the window
/// in full segments).
pub const BULK_MAX_DEPTH: usize = 256;

/// Our client's outstanding SENDs in a bulk cell of `size`-byte messages: as many bytes as
/// kernel TCP's socket buffer lets it queue ([`KERNEL_SNDBUF_MAX`]) and one message more,
/// at least two, at most [`BULK_MAX_DEPTH`]. One more because kernel TCP refills its buffer
/// as each ACK frees room while ours posts a message only when a whole one completes; with
/// exactly 4 MiB posted at 1 MiB our sender had everything in flight and "nothing more to
/// send" 94–95 % of its busy time, with 5 or more it was held by the receive window instead
/// (`bth-perf local --framing seq -s 1048576 -n 3000 -t 4|6|8`, 2026-11-28 05:10), moving the
/// same. Before 2026-11-28 05:30 1 MiB and larger kept two, smaller sizes 16.
pub fn bulk_depth(size: u32) -> usize {
    let n = KERNEL_SNDBUF_MAX.div_ceil(u64::from(size.max(1))) + 1;
    (n.min(BULK_MAX_DEPTH as u64) as usize).max(2)
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
    /// The relay as a bottleneck: a rate limit with a drop-tail queue of `queue_kib` in front
    /// of it (each direction), no other impairment. What an incast overruns. The relay counts
    /// the packets its full queue refused, so cells on it run each run in a topology of its
    /// own ([`Link::per_run_topology`]) to tell whose drops they were.
    Bottleneck {
        rate_mbps: u32,
        queue_kib: u32,
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
                reorder_depth_us: 0,
            } => Some(
                // The control: the usual depth's draws, no delay.
                relay()
                    .with_loss(loss)
                    .with_reorder(reorder, relay().reorder_depth)
                    .with_reorder_in_place(true),
            ),
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
            Link::Bottleneck {
                rate_mbps,
                queue_kib,
            } => Some(
                relay()
                    .with_bandwidth_bps(u64::from(rate_mbps) * 1_000_000)
                    .with_queue_limit_bytes((queue_kib as usize) << 10),
            ),
        })
    }

    /// Whether each run needs a topology of its own: the relay's counters (queue drops) are
    /// read when it stops, so they belong to one run only if the relay carried only that run.
    pub fn per_run_topology(&self) -> bool {
        matches!(self, Link::Bottleneck { .. })
    }

    /// The control of a reordering relay link: `reorder` of the packets drawn, counted and cut
    /// out of their super-packets as on [`Link::relay`]`(reorder, 0.0)`, from the same seed,
    /// but not delayed (`LinkConfig::reorder_in_place`): a depth of 0 µs (id `-d0us`).
    pub fn reorder_control(reorder: f64) -> Link {
        Link::Relay {
            reorder,
            loss: 0.0,
            reorder_depth_us: 0,
        }
    }

    /// The relay with no impairment at the usual reordering depth: what `--relay` alone gives.
    pub fn is_clean_relay(&self) -> bool {
        *self == Link::relay(0.0, 0.0)
    }

    /// Relay links whose bulk cells measure the path's ceiling (raw packets through the relay)
    /// in the full plan: the clean relay and every spraying link, the ones where no packet is
    /// lost on purpose, so raw packets say what the path itself carries (the spraying target,
    /// ≥ 1.5× kernel TCP, is only reachable below it). Not the relay's own ceiling
    /// (`ceiling::relay_ceiling`, kernel TCP over veth and through the relay).
    pub fn measures_ceiling(&self) -> bool {
        matches!(self, Link::Spray { .. }) || self.is_clean_relay()
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
                let depth = if reorder > 0.0 && reorder_depth_us == 0 {
                    " (in place: the control, same cuts, no delay)".to_string()
                } else if reorder > 0.0 {
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
            Link::Bottleneck {
                rate_mbps,
                queue_kib,
            } => format!("relay bottleneck {rate_mbps} Mbit/s, {queue_kib} KiB drop-tail queue"),
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
            Link::Bottleneck {
                rate_mbps,
                queue_kib,
            } => format!("relay-{rate_mbps}mbit-q{queue_kib}KiB"),
        }
    }
}

/// One workload on one link.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub id: String,
    pub workload: Workload,
    pub size: u32,
    /// Messages per connection.
    pub count: u64,
    /// Connections at once, each running the whole workload: ours, QPs on one driver and one
    /// endpoint per side (`perf::drive::run_many`); kernel, sockets served by one thread per
    /// side. Throughput is their aggregate.
    pub qps: u32,
    /// Ours: senders keep within the receiver's grant (`tcp_bth::Config::admission`, on by
    /// default); the incast cells run with it off too (id suffix `-noadm`).
    pub admission: bool,
    /// Ours: the bytes the receiver admits per connection (its `admission_allowance` and
    /// `admission_cap`); `None`: the stack's defaults.
    pub admit: Option<u32>,
    /// Our client's outstanding work requests (bulk); 1 for request/response.
    pub depth: usize,
    pub link: Link,
    /// Our stack runs as a plain TCP byte stream (`tcp_bth` off on both sides), the fallback
    /// a peer without the option gets: received data then waits in the stack's receive queue
    /// and out-of-order store, which the rx-held column measures.
    pub plain: bool,
    /// The MTU of every device of the cell's topology (veth or relay, the stacks' TUN
    /// devices): kernel TCP takes its MSS from it, ours MTU − 40 (id suffix `-mtuN` unless
    /// 1500).
    pub mtu: u32,
    /// Each run also measures the path's ceiling at the cell's MTU (raw packets from one
    /// stack TUN device to the other, no TCP: `path_ceiling`), before kernel and ours.
    pub ceiling: Option<CeilingSpec>,
    /// Ours (and the ceiling's devices): the stack's TUN devices offload TCP checksums
    /// (`Offload::Checksum`, as kernel TCP over veth); `--no-csum-offload` turns it off.
    pub csum_offload: bool,
    /// Through the relay: the relay thread on a core of its own and both stacks' threads
    /// (and the ceiling's) on the others, for kernel TCP and ours alike (`--pin-relay`,
    /// [`bth_testbed::pinning`]); off by default, the scheduler places every thread.
    pub pin_relay: bool,
    /// Kernel TCP's congestion control, set on every socket of the cell (`TCP_CONGESTION`),
    /// whatever the machine's default: [`DEFAULT_KERNEL_CC`] unless `--kernel-cc` says
    /// otherwise.
    pub kernel_cc: String,
}

/// Kernel TCP's congestion control in the comparison: CUBIC, our stack's default
/// (`tcp_bth::Config::congestion`), so both stacks answer loss with the same algorithm. A
/// machine's default may be another (this one's is BBR, which does not treat random loss as
/// congestion); the runs before 2026-11-24 04:40 took the default.
pub const DEFAULT_KERNEL_CC: &str = "cubic";

impl Cell {
    pub fn new(workload: Workload, size: u32, count: u64, link: Link) -> Cell {
        let depth = match workload {
            Workload::RequestResponse => 1,
            Workload::Bulk => bulk_depth(size),
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
            qps: 1,
            admission: true,
            admit: None,
            mtu: DEFAULT_MTU,
            ceiling: None,
            csum_offload: true,
            pin_relay: false,
            kernel_cc: DEFAULT_KERNEL_CC.into(),
        }
    }

    /// Kernel TCP with another congestion control (`--kernel-cc`).
    pub fn with_kernel_cc(mut self, name: &str) -> Cell {
        self.kernel_cc = name.into();
        self
    }

    /// What the stack's TUN devices offload: checksums (`--no-csum-offload`: nothing).
    pub fn offload(&self) -> bth_io::tun::Offload {
        bth_io::tun::Offload::checksum_if(self.csum_offload)
    }

    /// What the stack TUN devices of a run of `stack` offload: for ours in S framing and the
    /// GSO ceiling, TCP segmentation too (`Offload::Segmentation`: its connections write
    /// super-segments of up to 64 KiB, and the receiving device hands the peer's over whole),
    /// unless checksum offload is off, which TSO needs; [`Cell::offload`] for every other
    /// stack. Ours
    /// per-segment keeps checksum offload alone, as before S framing existed: its segments'
    /// options differ segment by segment, so it never writes a super-segment and the kernel
    /// never merges its segments into one, and so keeps the receive buffers of an MTU (TSO
    /// would make them 64 KiB each) and its figures comparable with earlier runs.
    pub fn offload_for(&self, stack: super::Stack) -> bth_io::tun::Offload {
        use bth_io::tun::Offload;
        match (stack, self.offload()) {
            (super::Stack::OursSeq | super::Stack::CeilingGso, Offload::Checksum) => {
                Offload::Segmentation
            }
            (_, o) => o,
        }
    }

    /// The runs of one round of this cell, in order: the path's ceiling, bare, under our ACK
    /// clock and with GSO super-packets (not without checksum offload, which TSO needs), if
    /// the cell measures it; kernel TCP; ours per-segment; ours in S framing, except in a
    /// plain cell (a byte stream has no framing, and no super-segments: that row would run
    /// ours (plain) again).
    pub fn stacks(&self) -> Vec<super::Stack> {
        use super::Stack::*;
        let mut v = match self.ceiling {
            Some(_) => vec![Ceiling, CeilingAcked],
            None => Vec::new(),
        };
        if self.ceiling.is_some() && self.csum_offload {
            v.push(CeilingGso);
        }
        v.extend([Kernel, Ours]);
        if !self.plain {
            v.push(OursSeq);
        }
        v
    }

    /// The same cell at another MTU (id suffix `-mtu{mtu}`; none at 1500).
    pub fn with_mtu(mut self, mtu: u32) -> Cell {
        if mtu != self.mtu {
            if self.mtu == DEFAULT_MTU {
                self.id += &format!("-mtu{mtu}");
            } else {
                let old = format!("-mtu{}", self.mtu);
                let new = if mtu == DEFAULT_MTU {
                    String::new()
                } else {
                    format!("-mtu{mtu}")
                };
                self.id = self.id.replace(&old, &new);
            }
            self.mtu = mtu;
        }
        self
    }

    /// The same cell with the path's ceiling measured in each run (`spec`).
    pub fn with_ceiling(mut self, spec: CeilingSpec) -> Cell {
        self.ceiling = Some(spec);
        self
    }

    /// The same workload over `qps` connections at once (id suffix `-q{qps}`), each sending
    /// `count / qps` messages (rounded up), so the cell moves about the bytes of the
    /// one-connection cell and takes about its time: aggregate throughput at equal work.
    pub fn with_qps(mut self, qps: u32) -> Cell {
        let qps = qps.max(1);
        if qps > 1 {
            self.count = self.count.div_ceil(u64::from(qps)).max(1);
            self.qps = qps;
            self.id += &format!("-q{qps}");
            // The one-connection cell measures the ceiling; its path is this one's.
            self.ceiling = None;
        }
        self
    }

    /// Incast over TUN: `qps` client connections (one client host) each send `count` messages
    /// of `size` bytes, `INCAST_DEPTH` outstanding, at once into one server through `link`;
    /// the server admits `admit` bytes per connection; our senders honour the grant or not
    /// (`admission`, id suffix `-noadm` when off). Kernel TCP runs the same sockets through
    /// the same link.
    pub fn incast(
        qps: u32,
        size: u32,
        count: u64,
        link: Link,
        admit: u32,
        admission: bool,
    ) -> Cell {
        let mut c = Cell::new(Workload::Bulk, size, count, link);
        c.id = format!("incast-tun-q{qps}-{}-{}", size_label(size), link.id());
        if !admission {
            c.id += "-noadm";
        }
        c.qps = qps;
        c.depth = INCAST_DEPTH;
        c.admission = admission;
        c.admit = Some(admit);
        c
    }

    /// Whether this is an incast cell (reported in a table of its own, with relay drops).
    pub fn is_incast(&self) -> bool {
        self.admit.is_some() && self.link.per_run_topology()
    }

    /// The same cell with our stack in plain byte-stream mode (id suffix `-plain`).
    pub fn plain(mut self) -> Cell {
        self.plain = true;
        self.id += "-plain";
        self
    }

    /// Bytes the cell moves per run, all connections together.
    pub fn bytes(&self) -> u64 {
        self.count * u64::from(self.size) * u64::from(self.qps)
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
            mode: bth_perf::RunMode {
                verify: true,
                plain: self.plain,
                ..bth_perf::RunMode::default()
            },
            seed: 1,
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

/// The relay cells again at these MTUs ([`jumbo_relay_links`]): at MTU 1500 the relay's
/// per-packet cost bounds both stacks (its thread is a core, and ours crosses it one segment
/// at a time where kernel TCP's 64 KiB GSO packets make a 45th of the packets); at 9000 it
/// carries a sixth of the packets per byte, at 65000 a 46th, so recovery shows with that cost
/// mostly out of the way.
pub const JUMBO_RELAY_MTUS: [u32; 2] = [9000, 65000];

/// The links of the jumbo relay cells: the clean relay, 10 % reordering, 1 % loss and 4-path
/// spraying, each as its MTU-1500 cell.
pub fn jumbo_relay_links() -> [Link; 4] {
    [
        Link::relay(0.0, 0.0),
        Link::relay(0.10, 0.0),
        Link::relay(0.0, 0.01),
        Link::spray(4),
    ]
}

/// Messages of the jumbo relay cells: four times the MTU-1500 relay cells' 128, so a run
/// (512 MiB) at 10–20 Gbit/s still lasts a few hundred ms.
const JUMBO_RELAY_COUNT: u64 = 4 * RELAY_BULK_COUNT;

/// Delay spread of the spraying cells: the slowest path is this much longer than the fastest
/// (20 × the relay's one-way delay), so a packet can be overtaken by everything sent in the
/// next 200 µs.
pub const SPRAY_SPREAD_US: u32 = 200;

/// Messages each connection of an incast cell keeps outstanding: two, as the simulator's
/// incast (`IncastConfig::window`), so a sender posts its next message when one completes.
pub const INCAST_DEPTH: usize = 2;

/// The incast bottleneck: 500 Mbit/s, below what either stack moves through the clean relay,
/// so the relay's queue and not a stack is the limit; a 256 KiB drop-tail queue (4 ms at that
/// rate), which 16 connections with 2 × 64 KiB outstanding each overrun eight times over.
pub const INCAST_LINK: Link = Link::Bottleneck {
    rate_mbps: 500,
    queue_kib: 256,
};

/// Bytes the incast's server admits per connection: 16 × 12 KiB plus headers stays below the
/// 256 KiB queue (the simulator's incast scales the same way: 16 × 24 KiB into 512 KiB).
pub const INCAST_ADMIT: u32 = 12 << 10;

/// The incast cells: `qps` connections of `count` 64 KiB messages each through
/// [`INCAST_LINK`], ours with admission off, then on (kernel TCP in both, for reference).
pub fn incast_cells(qps: u32, count: u64) -> Vec<Cell> {
    [false, true]
        .into_iter()
        .map(|adm| Cell::incast(qps, 64 << 10, count, INCAST_LINK, INCAST_ADMIT, adm))
        .collect()
}

/// Bulk cells over the relay move this message size, as the impairment sweep does.
const RELAY_BULK_SIZE: u32 = 1 << 20;
const RELAY_BULK_COUNT: u64 = 128;

/// The cells: message sizes over veth (bulk and request/response), the MTU sweep (bulk 1 MiB
/// over veth at [`FULL_MTUS`](super::FULL_MTUS), each with the path's ceiling; its 1500-byte
/// cell is the size sweep's bulk-1MiB-veth), the impairment sweep over the relay (bulk 1 MiB
/// and request/response 4 KiB), the reordering-depth sweep and the spraying sweep (bulk
/// 1 MiB), and the jumbo relay cells (bulk 1 MiB at [`JUMBO_RELAY_MTUS`]); the bulk cells
/// through the clean relay and the spraying ones measure the path's ceiling through the relay
/// too ([`Link::measures_ceiling`]). `quick` is a small subset.
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
    // The MTU sweep with the path's ceiling at each MTU: its 1500-byte cell is bulk-1MiB-veth.
    let sweep = super::mtu::sweep_cells(&super::mtu::FULL_MTUS, bulk_count(1 << 20), false);
    for c in sweep {
        match cells.iter_mut().find(|x| x.id == c.id) {
            Some(same) => same.ceiling = c.ceiling,
            None => cells.push(c),
        }
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
    // The control of the 10 % reordering cell: the same draws and cuts, no delay (#36).
    let control = Link::reorder_control(0.10);
    cells.push(Cell::new(Bulk, RELAY_BULK_SIZE, RELAY_BULK_COUNT, control));
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
    for mtu in JUMBO_RELAY_MTUS {
        for link in jumbo_relay_links() {
            cells.push(Cell::new(Bulk, RELAY_BULK_SIZE, JUMBO_RELAY_COUNT, link).with_mtu(mtu));
        }
    }
    // The path's ceiling through the relay where it loses nothing on purpose: the clean relay
    // and the spraying links, at every MTU.
    for c in cells.iter_mut() {
        if c.workload == Bulk && c.link.measures_ceiling() {
            c.ceiling = Some(super::mtu::CEILING);
        }
    }
    // Our fallback byte stream beside BTH, in order and with holes: what staging costs.
    cells.push(Cell::new(Bulk, 1 << 20, 256, Link::Veth).plain());
    cells.push(Cell::new(Bulk, RELAY_BULK_SIZE, RELAY_BULK_COUNT, relay((0.10, 0.0))).plain());
    // Eight QPs on one driver and endpoint against eight kernel sockets, at the bytes of the
    // one-connection 64 KiB cell (`--qps` runs every cell so).
    cells.push(Cell::new(Bulk, 65536, bulk_count(65536), Link::Veth).with_qps(8));
    // 16 senders into one receiver through one bottleneck queue, admission off and on.
    cells.extend(incast_cells(16, 32));
    Plan {
        quick,
        runs: 3,
        cells,
    }
}

impl Plan {
    /// Every cell at each connection count of `qps` (`--qps 1,8`: each cell once with one
    /// connection and once with eight, [`Cell::with_qps`]), in that order per cell. Cells that
    /// already run several connections (incast) stay as they are.
    pub fn with_qps(mut self, qps: &[u32]) -> Plan {
        if qps.is_empty() {
            return self;
        }
        let mut cells = Vec::new();
        for c in self.cells {
            if c.qps > 1 {
                cells.push(c);
                continue;
            }
            cells.extend(qps.iter().map(|&n| c.clone().with_qps(n)));
        }
        // A count given twice, or a cell the plan already has at that count, runs once.
        let mut seen = std::collections::HashSet::new();
        cells.retain(|c| seen.insert(c.id.clone()));
        self.cells = cells;
        self
    }

    /// Runs of the plan: every stack's in every cell (kernel, ours per-segment, ours in S
    /// framing but in plain cells: [`Cell::stacks`]), and the path ceiling's (bare and under
    /// our ACK clock) where a cell measures it.
    pub fn total_runs(&self) -> usize {
        self.cells.iter().map(|c| c.stacks().len()).sum::<usize>() * self.runs
    }

    /// Runs of ours in S framing in the plan (every cell but the plain ones).
    pub fn ours_seq_runs(&self) -> usize {
        self.cells.iter().filter(|c| !c.plain).count() * self.runs
    }

    /// Runs of the path's ceiling (no TCP; bare, under our ACK clock and with GSO
    /// super-packets) in the plan.
    pub fn ceiling_runs(&self) -> usize {
        let probes = |c: &Cell| c.stacks().iter().filter(|s| s.is_ceiling()).count();
        self.cells.iter().map(probes).sum::<usize>() * self.runs
    }

    /// Human-readable plan (`--dry-run`).
    pub fn describe(&self) -> String {
        let ceiling = match self.ceiling_runs() {
            0 => String::new(),
            n => format!(
                " + {n} runs of the path's ceiling (a run of such a cell: ceiling, the ceiling \
                 with an ACK back per 2 packets, the ceiling with GSO super-packets, then \
                 kernel, ours, ours S)"
            ),
        };
        let cc = self
            .cells
            .first()
            .map_or(super::DEFAULT_KERNEL_CC, |c| &c.kernel_cc);
        let plain = self.cells.iter().filter(|c| c.plain).count();
        let seq = match plain {
            0 => String::new(),
            1 => " (1 plain cell without ours S)".into(),
            n => format!(" ({n} plain cells without ours S)"),
        };
        let mut s = format!(
            "{} cells x {} runs per stack x 3 stacks{seq}{ceiling} = {} runs, interleaved \
             kernel/ours/ours S per cell (ours: per-segment framing; ours S: S framing with \
             segmentation offload, super-segments of up to 64 KiB); kernel TCP on {cc}\n",
            self.cells.len(),
            self.runs,
            self.total_runs()
        );
        if self
            .cells
            .iter()
            .any(|c| c.pin_relay && c.link != Link::Veth)
        {
            s += "relay cells: the relay thread pinned to a core of its own, both stacks' \
                  threads to the others (--pin-relay)\n";
        }
        for c in &self.cells {
            let mtu = match c.mtu {
                DEFAULT_MTU => String::new(),
                m => format!(", MTU {}", human_size(u64::from(m))),
            };
            let ceiling = c.ceiling.map_or(String::new(), |spec| {
                format!("; and the path's ceiling, {}", spec.describe())
            });
            s += &format!(
                "  {:<50} {:>16} x {:>6} x {:>2} QPs = {:>10} bytes, depth {:>2}, {}{mtu}{}{ceiling}\n",
                c.id,
                format!("{:?}", c.workload),
                c.count,
                c.qps,
                c.bytes(),
                c.depth,
                c.link.label(),
                match (c.admit, c.admission) {
                    (None, _) => String::new(),
                    (Some(a), on) => format!(
                        "; receiver admits {a} bytes per QP, ours {}",
                        if on {
                            "with admission"
                        } else {
                            "without admission"
                        }
                    ),
                }
            );
        }
        s
    }
}
