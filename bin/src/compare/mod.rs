//! `bth-compare`: the same message workload over Linux kernel TCP (tokio sockets, length-prefixed
//! messages) and over our stack (the `perf` apps on the io_uring TUN path), between the two
//! namespaces of [`TwoNs`], runs of the stacks interleaved per cell (A B C A B C).
//!
//! Our stack runs twice in each cell of `tcp_bth` ([`Stack::Ours`] per-segment framing,
//! [`Stack::OursSeq`] S framing, spec amendment 3, on TUN devices with TSO so it writes
//! super-segments of up to 64 KiB), beside kernel TCP, the three interleaved per run.
//!
//! Library side of the tool: plan building ([`plan`], [`mtu_plan`]), running ([`run_cell`]),
//! summaries ([`summarize`]) and rendering ([`render`]), so tests can check the plan and the
//! rendering without root and run one small cell end to end with it. A cell may also measure
//! the path's ceiling at its MTU ([`path_ceiling`]: raw packets, no TCP; [`gso_ceiling`]:
//! TCP-shaped GSO super-packets), reported beside the stacks with their ratios
//! ([`render::mtu_markdown`]).

pub mod ceiling;
mod cells;
mod charts;
pub mod extra;
pub mod gso_ceiling;
pub mod kernel;
mod machine_cpu;
mod mtu;
mod only;
mod ours;
pub mod path_ceiling;
pub mod render;
pub mod simulated;

pub use ceiling::{ceiling_cell, relay_ceiling, RelayCeiling};
pub use cells::{
    bulk_depth, incast_cells, jumbo_relay_links, plan, size_label, Cell, Link, Plan, Workload,
    BULK_LARGE, BULK_MAX_DEPTH, DEFAULT_KERNEL_CC, IMPAIRMENTS, INCAST_ADMIT, INCAST_DEPTH,
    INCAST_LINK, JUMBO_RELAY_MTUS, KERNEL_SNDBUF_MAX, RELAY_REORDER_DEPTH_US, REORDER_DEPTHS_US,
    REORDER_DEPTH_SWEEP_RATE, SIZES, SPRAY_PATHS, SPRAY_SPREAD_US,
};
pub use mtu::{count_at, mtu_plan, sweep_cells, FULL_MTUS, MTU_SWEEP_SIZE};
pub use only::Only;
pub use path_ceiling::{AckClock, CeilingSpec, PathCeiling};

use bth_io::tun::devstats;
use bth_perf::tunpair::ThreadCounters;
use bth_perf::PathSummary;
use bth_testbed::pinning::{Pinned, PinnedCpus};
use bth_testbed::topology::{RelayShare, TwoNs};
use serde::Serialize;
use std::io;
use std::time::Duration;
use tcp_bth::RecoveryStats;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stack {
    Kernel,
    /// Our stack in per-segment framing (every segment its own BTH; the default), on TUN
    /// devices with checksum offload only ([`Cell::offload`]): one segment per packet.
    Ours,
    /// Our stack in S framing (`tcp_bth::Framing::Seq`, spec amendment 3), the same workload
    /// as [`Stack::Ours`] otherwise, on TUN devices with TSO (`Offload::Segmentation`,
    /// [`Cell::offload_for`]): a connection writes super-segments of up to 64 KiB of one
    /// message, which the kernel carries whole over veth (the receiving device has TSO too)
    /// or cuts where the path needs single segments. Not run in plain cells (a byte stream
    /// has no framing): [`Cell::stacks`].
    OursSeq,
    /// No TCP: raw MTU-sized packets from one stack TUN device to the other through the
    /// cell's topology, the path's ceiling ([`path_ceiling`]).
    Ceiling,
    /// The same, with a small packet sent back for every second packet received: the path's
    /// ceiling under our ACK clock ([`path_ceiling::OURS_ACK_CLOCK`]).
    CeilingAcked,
    /// No TCP either: TCP-shaped GSO super-packets of up to 64 KiB, cut into MTU-sized
    /// segments of our payload size, through stack TUN devices with TSO, as ours S writes
    /// them ([`gso_ceiling`]): the path's ceiling for super-segments.
    CeilingGso,
}

impl Stack {
    pub fn name(self) -> &'static str {
        match self {
            Stack::Kernel => "kernel",
            Stack::Ours => "ours",
            Stack::OursSeq => "ours_seq",
            Stack::Ceiling => "ceiling",
            Stack::CeilingAcked => "ceiling_acked",
            Stack::CeilingGso => "ceiling_gso",
        }
    }

    /// One of our stack's two rows (per-segment or S framing).
    pub fn is_ours(self) -> bool {
        matches!(self, Stack::Ours | Stack::OursSeq)
    }

    /// The framing our stack asks for in this row (both sides ask: the handshake settles
    /// it); per-segment for every other stack, which has none.
    pub fn framing(self) -> tcp_bth::Framing {
        match self {
            Stack::OursSeq => tcp_bth::Framing::Seq,
            _ => tcp_bth::Framing::PerSegment,
        }
    }

    /// A letter for names built per run (a per-run topology's namespaces).
    fn letter(self) -> char {
        match self {
            Stack::Kernel => 'k',
            Stack::Ours => 'o',
            Stack::OursSeq => 's',
            Stack::Ceiling => 'c',
            Stack::CeilingAcked => 'a',
            Stack::CeilingGso => 'g',
        }
    }

    /// A probe of the path rather than a TCP stack ([`path_ceiling`]).
    pub fn is_ceiling(self) -> bool {
        matches!(
            self,
            Stack::Ceiling | Stack::CeilingAcked | Stack::CeilingGso
        )
    }

    /// What the probe's receiver sends back: our ACK clock for [`Stack::CeilingAcked`],
    /// nothing for every other stack.
    pub fn ack_clock(self) -> AckClock {
        match self {
            Stack::CeilingAcked => path_ceiling::OURS_ACK_CLOCK,
            _ => AckClock::None,
        }
    }
}

/// One run of one stack in one cell: everything the report needs, raw. The figures every
/// stack has are fields of the record; what only one stack records is in [`RunRecord::detail`].
/// A ceiling run ([`Stack::Ceiling`], [`Stack::CeilingAcked`]) counts packets as messages (the
/// GSO ceiling's, [`Stack::CeilingGso`], the segments its super-packets stand for) and
/// payload-equivalent bytes ([`PathCeiling::payload_bytes`]) as bytes; its CPU is the sender's
/// (client) and the receiver's (server); its other figures are in its detail's `path`.
///
/// In the JSON file a run is one object: these fields, then its detail's fields beside them
/// (`stack` says which stack's they are; a failed run has none).
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    pub cell: String,
    /// The stack that ran, or the probe of the path. Kept beside [`RunRecord::detail`], which
    /// cannot stand for it: ours' two rows share a detail (they differ in framing), so do the
    /// three ceilings, and a failed run has none.
    pub stack: Stack,
    pub run: usize,
    /// Why the run failed: the error's message, as the report and its JSON file record it.
    pub error: Option<String>,
    pub messages: u64,
    /// Messages whose every byte was checked at the receiver and matched what was sent.
    pub verified: u64,
    pub bytes: u64,
    pub elapsed_s: f64,
    pub gbps: f64,
    pub msgs_per_sec: f64,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
    pub cpu_client_s: f64,
    pub cpu_server_s: f64,
    /// Retransmitted segments, both directions: `client_retrans + server_retrans`.
    pub retrans: u64,
    /// Retransmitted segments of each side's connection, i.e. of what that side sent (kernel:
    /// `tcpi_total_retrans` of its socket; ours: [`RecoveryStats::retransmits`]). The server's are
    /// replies in request/response and the client's ACKs only in bulk.
    pub client_retrans: u64,
    pub server_retrans: u64,
    /// Receive-side bytes held outside posted buffers (max over the run). Ours: the receiving
    /// connection's staging structures (`Connection::rx_held`: byte-stream queue and
    /// out-of-order store; both 0 with `tcp_bth`, where segments are placed directly); kernel:
    /// SO_MEMINFO rmem_alloc of the receiving socket.
    pub rx_held_max: u64,
    /// The whole machine's CPU seconds over the run, setup and teardown included, from
    /// `/proc/stat` (`compare::machine_cpu`): both sides, the relay and softirq work alike; and of it,
    /// softirq. None if `/proc/stat` could not be read.
    pub machine_cpu_s: Option<f64>,
    pub machine_softirq_s: Option<f64>,
    /// Packets the relay's full queue refused during this run, both directions (bottleneck
    /// cells only: each of their runs has a relay of its own, `Link::per_run_topology`).
    pub relay_queue_drops: Option<u64>,
    /// Relay cells: the relay thread's CPU time during the run ([`relay_cpu_s`]) as a share of
    /// a core over the transfer (`elapsed_s`) for the stacks, and over the run's wall time for
    /// the ceiling (whose packets flow through its warm-up too): 1.0 is a whole core. Near 1.0
    /// the relay, not the stack, bounded the run. None over veth.
    ///
    /// Before 2026-11-25 it was over the run's wall time for every stack. Ours' runs then
    /// spent about 0.6 s beyond a transfer of about as long (the client's TIME-WAIT linger of
    /// three RTOs, `perf::side`), so ours' figure read about half the relay's load during the
    /// transfer (0.39–0.46 against 0.85–0.97, measured on the clean relay and 4-path spraying
    /// cells); kernel TCP's runs have almost none, and read the same either way.
    ///
    /// [`relay_cpu_s`]: Self::relay_cpu_s
    pub relay_busy: Option<f64>,
    /// Relay cells: the relay thread's CPU time, user and system, from just before the stack's
    /// run started to just after it ended (setup included). None over veth.
    pub relay_cpu_s: Option<f64>,
    /// Relay cells with `--pin-relay`: the cores the relay's and the stacks' threads ran on.
    /// None when the scheduler placed them.
    pub relay_pinned: Option<PinnedCpus>,
    /// Packets the network devices dropped during this run (`/proc/net/dev` receive and
    /// transmit drops, every device but `lo`, both namespaces, read just before and just after
    /// the run, devices present in both readings): the topology's veth or relay TUN devices,
    /// and for ours the stacks' own TUN devices (read by their threads as the run ends),
    /// whose transmit drops are packets toward a receiver that found its queue full. None if
    /// they could not be read.
    pub device_drops: Option<u64>,
    /// Payload bytes in one full data segment from the client: kernel, `tcpi_snd_mss` (its
    /// MSS less the options it sends; None if `TCP_INFO` could not be read); ours,
    /// `Config::mss` less the `tcp_bth` option area (tcp_bth runs only: None in plain cells);
    /// the ceiling, [`path_ceiling::payload_per_packet`].
    pub seg_payload: Option<u32>,
    /// What only this run's stack records ([`StackDetail`]: the variant of [`Self::stack`]'s
    /// kind); None for a failed run, which recorded none of it. Its fields stand beside the
    /// others in the JSON file.
    #[serde(flatten)]
    pub detail: Option<StackDetail>,
    /// Per-message latencies, sorted (bulk: one way, client post to server completion;
    /// request/response: round trip). Not written to the JSON file.
    #[serde(skip)]
    pub latencies: Vec<Duration>,
}

/// What one kind of stack alone records in a run ([`RunRecord::detail`]). Written untagged,
/// its fields flattened into the run's JSON object: the run's `stack` says which it is.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum StackDetail {
    /// [`Stack::Kernel`].
    Kernel(KernelDetail),
    /// [`Stack::Ours`] and [`Stack::OursSeq`] (boxed: many times the others' size).
    Ours(Box<OursDetail>),
    /// The probes of the path: [`Stack::Ceiling`], [`Stack::CeilingAcked`],
    /// [`Stack::CeilingGso`].
    Ceiling {
        /// What the receiver counted.
        path: PathCeiling,
    },
}

/// Kernel TCP's own figures of a run.
#[derive(Debug, Clone, Serialize)]
pub struct KernelDetail {
    /// Largest SIOCINQ (unread in-order payload bytes) on the receiving socket.
    pub kernel_max_inq: u64,
    /// Largest SIOCOUTQ (bytes written and not yet acknowledged: what its socket buffer let
    /// it queue) on the sending socket, sampled after a write at most every 200 µs (several
    /// connections: each one's largest, added). Our bulk cells keep at least this many bytes
    /// outstanding ([`cells::bulk_depth`]).
    pub kernel_max_outq: u64,
    /// The congestion control every socket ran, read back from each (`TCP_CONGESTION`, the
    /// cell's `kernel_cc`).
    pub congestion: String,
}

/// Our stack's own figures of a run (either framing).
#[derive(Debug, Clone, Serialize)]
pub struct OursDetail {
    /// Each side's thread's minor page faults and voluntary and involuntary context switches
    /// over the run (`getrusage(RUSAGE_THREAD)`), to tell a run whose CPU per byte stands out
    /// from the others.
    pub client_thread: ThreadCounters,
    pub server_thread: ThreadCounters,
    /// Retransmissions later found unnecessary, both sides.
    pub spurious: u64,
    /// Every loss-recovery counter of each side's connection at the end of the run (segments
    /// sent, retransmissions, spurious ones, RACK loss detections, RTOs, tail loss probes).
    /// The kernel's `TCP_INFO` has no such split.
    pub client_recovery: RecoveryStats,
    pub server_recovery: RecoveryStats,
    /// Each side's smoothed RTT, congestion window and bytes in flight, sampled at least a
    /// millisecond apart while it had data in flight and weighted by time
    /// ([`bth_perf::PathSamples`]; the receiver of a bulk run has little: its control messages).
    pub client_path: PathSummary,
    pub server_path: PathSummary,
    /// Segments placed directly while an earlier hole was open (receiver side).
    pub ooo_placed: u64,
    /// How often the senders held data back for the receiver's grant (`Stats::grant_holds`
    /// of the client's connections, summed).
    pub grant_holds: u64,
    /// Both sides' connections together: super-segments written (segmentation offload: S
    /// framing on devices with TSO; 0 per-segment), the segments they stood for, and
    /// super-segments read whole (the receiving device has TSO).
    pub gso_sent: u64,
    pub gso_segments: u64,
    pub super_segments_in: u64,
    /// Every connection ran S framing (both hellos asked for it): true in
    /// [`Stack::OursSeq`]'s runs, false in [`Stack::Ours`]'.
    pub seq_framed: bool,
    /// The congestion control the stack ran: `tcp_bth::Config::congestion` of the perf apps
    /// (the stack's default).
    pub congestion: String,
}

impl RunRecord {
    /// A run that failed with `e`: its message is what the report records.
    fn failed(cell: &Cell, stack: Stack, run: usize, e: &io::Error) -> RunRecord {
        RunRecord {
            error: Some(e.to_string()),
            ..RunRecord::empty(&cell.id, stack, run)
        }
    }

    /// A run of `stack` in cell `cell` with nothing counted yet, and no detail.
    fn empty(cell: &str, stack: Stack, run: usize) -> RunRecord {
        RunRecord {
            cell: cell.to_string(),
            stack,
            run,
            error: None,
            messages: 0,
            verified: 0,
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
            client_retrans: 0,
            server_retrans: 0,
            rx_held_max: 0,
            machine_cpu_s: None,
            machine_softirq_s: None,
            relay_queue_drops: None,
            relay_busy: None,
            relay_cpu_s: None,
            relay_pinned: None,
            device_drops: None,
            seg_payload: None,
            detail: None,
            latencies: Vec::new(),
        }
    }

    /// A made-up successful run, for tests of the summaries and the rendering (no network):
    /// `stack` in cell `cell` moving 1000 messages of 1 MB at `gbps`, latencies 1 µs to 1 ms
    /// (p50 500 µs, p99 990 µs, p99.9 999 µs), CPU 2 s client and 1 s server, machine-wide 1.5 s
    /// (kernel) or 4 s (the others) with 0.5 s softirq, no device drops, no relay; and the
    /// stack's detail. The stacks retransmit 3 segments (client 1, server 2; ours: 1 spurious;
    /// RACK, RTO and TLP once each, both sides together) and run CUBIC; kernel TCP holds
    /// 1 MiB outside posted buffers (4 KiB unread, 3 MiB outstanding); ours places 7 segments
    /// out of order and, in S framing, writes 40 super-segments of 1800 segments and reads 40
    /// whole. A ceiling run retransmits nothing; its path figures (1000 packets of 1500 bytes
    /// over the run, our ACK clock's and the GSO probe's own) need not add up to its bytes.
    #[doc(hidden)]
    pub fn synthetic(cell: &str, stack: Stack, run: usize, gbps: f64) -> RunRecord {
        let elapsed_s = 8.0 / gbps;
        let seq = stack == Stack::OursSeq;
        let detail = match stack {
            Stack::Kernel => StackDetail::Kernel(KernelDetail {
                kernel_max_inq: 4096,
                kernel_max_outq: 3 << 20,
                congestion: DEFAULT_KERNEL_CC.into(),
            }),
            Stack::Ours | Stack::OursSeq => StackDetail::Ours(Box::new(OursDetail {
                client_thread: ThreadCounters::default(),
                server_thread: ThreadCounters::default(),
                spurious: 1,
                client_recovery: RecoveryStats {
                    segments_sent: 100,
                    retransmits: 1,
                    spurious_retransmits: 1,
                    rack_losses: 0,
                    rto_losses: 0,
                    tlp_probes: 1,
                    ..RecoveryStats::default()
                },
                server_recovery: RecoveryStats {
                    segments_sent: 50,
                    retransmits: 2,
                    spurious_retransmits: 0,
                    rack_losses: 1,
                    rto_losses: 1,
                    tlp_probes: 0,
                    ..RecoveryStats::default()
                },
                client_path: PathSummary::default(),
                server_path: PathSummary::default(),
                ooo_placed: 7,
                grant_holds: 0,
                gso_sent: if seq { 40 } else { 0 },
                gso_segments: if seq { 1800 } else { 0 },
                super_segments_in: if seq { 40 } else { 0 },
                seq_framed: seq,
                congestion: DEFAULT_KERNEL_CC.into(),
            })),
            Stack::Ceiling | Stack::CeilingAcked | Stack::CeilingGso => {
                let (mtu, gso) = (1500, stack == Stack::CeilingGso);
                let acks = stack.ack_clock();
                let acked = acks != AckClock::None;
                StackDetail::Ceiling {
                    path: PathCeiling {
                        mtu,
                        packets: 1000,
                        ip_bytes: 1000 * u64::from(mtu),
                        lost: 0,
                        foreign: 0,
                        elapsed_s,
                        sender_cpu_s: 2.0,
                        receiver_cpu_s: 1.0,
                        acks,
                        acks_sent: if acked { 500 } else { 0 },
                        acks_received: if acked { 500 } else { 0 },
                        gso_size: gso.then(|| path_ceiling::payload_per_packet(mtu)),
                        super_packets: if gso { 20 } else { 0 },
                    },
                }
            }
        };
        let retrans = if stack.is_ceiling() { (0, 0) } else { (1, 2) };
        RunRecord {
            messages: 1000,
            verified: 1000,
            bytes: 1_000_000_000,
            elapsed_s,
            gbps,
            msgs_per_sec: 1000.0 * gbps / 8.0,
            p50_us: Some(500.0),
            p99_us: Some(990.0),
            p999_us: Some(999.0),
            cpu_client_s: 2.0,
            cpu_server_s: 1.0,
            retrans: retrans.0 + retrans.1,
            client_retrans: retrans.0,
            server_retrans: retrans.1,
            rx_held_max: if stack == Stack::Kernel { 1 << 20 } else { 0 },
            machine_cpu_s: Some(if stack == Stack::Kernel { 1.5 } else { 4.0 }),
            machine_softirq_s: Some(0.5),
            device_drops: Some(0),
            detail: Some(detail),
            latencies: (1..=1000).map(Duration::from_micros).collect(),
            ..RunRecord::empty(cell, stack, run)
        }
    }

    /// Our stack's figures of this run (ours per-segment or S; None for the other stacks and
    /// a failed run).
    pub fn ours(&self) -> Option<&OursDetail> {
        match &self.detail {
            Some(StackDetail::Ours(o)) => Some(o.as_ref()),
            _ => None,
        }
    }

    /// Kernel TCP's figures of this run (None for the other stacks and a failed run).
    pub fn kernel(&self) -> Option<&KernelDetail> {
        match &self.detail {
            Some(StackDetail::Kernel(k)) => Some(k),
            _ => None,
        }
    }

    /// What the receiver of a ceiling run counted (None for the stacks and a failed run).
    pub fn path(&self) -> Option<&PathCeiling> {
        match &self.detail {
            Some(StackDetail::Ceiling { path }) => Some(path),
            _ => None,
        }
    }

    /// The congestion control the stack ran (kernel TCP: read back from every socket; ours:
    /// its default). None for the ceiling and for a failed run.
    pub fn congestion(&self) -> Option<&str> {
        match &self.detail {
            Some(StackDetail::Kernel(k)) => Some(&k.congestion),
            Some(StackDetail::Ours(o)) => Some(&o.congestion),
            _ => None,
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

/// Value at quantile `q` of sorted `v` (the perf reports' definition).
pub use bth_perf::percentile;

fn run_kernel(ns: &TwoNs, cell: &Cell, run: usize, port: u16) -> io::Result<RunRecord> {
    let k = kernel::run(ns, cell, port)?;
    let mut r = RunRecord {
        messages: k.messages,
        verified: k.verified,
        bytes: k.bytes,
        elapsed_s: k.elapsed.as_secs_f64(),
        cpu_client_s: k.client_cpu.as_secs_f64(),
        cpu_server_s: k.server_cpu.as_secs_f64(),
        retrans: k.client_retrans + k.server_retrans,
        client_retrans: k.client_retrans,
        server_retrans: k.server_retrans,
        rx_held_max: k.max_rmem,
        seg_payload: k.client_mss,
        detail: Some(StackDetail::Kernel(KernelDetail {
            kernel_max_inq: k.max_inq,
            kernel_max_outq: k.max_outq,
            congestion: k.congestion,
        })),
        ..RunRecord::empty(&cell.id, Stack::Kernel, run)
    };
    r.fill_rates(k.latencies);
    Ok(r)
}

/// One run of `stack` in `ns`; a failure is recorded in the run.
fn run_stack(ns: &TwoNs, cell: &Cell, stack: Stack, run: usize) -> RunRecord {
    let r = match stack {
        Stack::Kernel => run_kernel(ns, cell, run, 5001 + run as u16),
        Stack::Ours | Stack::OursSeq => ours::run(ns, cell, stack, run),
        Stack::Ceiling | Stack::CeilingAcked | Stack::CeilingGso => {
            mtu::run_ceiling(ns, cell, stack, run)
        }
    };
    r.unwrap_or_else(|e| RunRecord::failed(cell, stack, run, &e))
}

/// Run every run of `cell` in a fresh topology named `{prefix}-a`/`-b` at the cell's MTU
/// (deleted on return, also on error), its stacks alternating ([`Cell::stacks`]: kernel, ours
/// per-segment, ours in S framing; a cell that measures the path's ceiling runs it first in
/// each run, bare, under our ACK clock and with GSO super-packets). Each run's stack TUN
/// devices get that stack's offload ([`Cell::offload_for`]: TSO for ours in S framing and the
/// GSO ceiling). A cell whose relay counts
/// drops ([`Link::per_run_topology`]) gets a topology per run instead (`{prefix}k0`,
/// `{prefix}o0`, `{prefix}s0`, …), so each run's record has the drops of that run alone.
/// `progress` is called after each run.
pub fn run_cell(
    cell: &Cell,
    runs: usize,
    prefix: &str,
    seed: u64,
    mut progress: impl FnMut(&RunRecord),
) -> io::Result<Vec<RunRecord>> {
    let link = cell.link.link_config(seed).map_err(io::Error::other)?;
    let mut shared = if !cell.link.per_run_topology() {
        Some(TwoNs::create_mtu(prefix, link.clone(), cell.mtu)?)
    } else {
        None
    };
    // Threads spawned while this guard lives inherit the stacks' cores.
    let pinned = match &shared {
        Some(ns) => pin(ns, cell)?,
        None => None,
    };
    let stacks = cell.stacks();
    let mut out = Vec::new();
    for run in 0..runs {
        for &stack in &stacks {
            let r = match &mut shared {
                Some(ns) => {
                    // The stack TUN devices open with each run: this run's offload.
                    ns.offload = cell.offload_for(stack);
                    let mut r = run_counting_drops(ns, cell, stack, run);
                    r.relay_pinned = pinned.as_ref().map(Pinned::cpus);
                    r
                }
                None => {
                    let name = format!("{prefix}{}{run}", stack.letter());
                    let mut ns = TwoNs::create_mtu(&name, link.clone(), cell.mtu)?
                        .with_offload(cell.offload_for(stack));
                    let pinned = pin(&ns, cell)?;
                    let mut r = run_counting_drops(&ns, cell, stack, run);
                    r.relay_pinned = pinned.as_ref().map(Pinned::cpus);
                    drop(pinned);
                    let relay = ns.stop_relay();
                    r.relay_queue_drops =
                        relay.map(|s| s.a_to_b.dropped_queue + s.b_to_a.dropped_queue);
                    r
                }
            };
            progress(&r);
            out.push(r);
        }
    }
    drop(pinned);
    drop(shared);
    Ok(out)
}

/// Pin `ns`'s relay and the calling thread if the cell asks for it (`--pin-relay`).
pub(crate) fn pin(ns: &TwoNs, cell: &Cell) -> io::Result<Option<Pinned>> {
    if cell.pin_relay {
        ns.pin()
    } else {
        Ok(None)
    }
}

/// The relay's share of a core in one run ([`RunRecord::relay_busy`]): over the transfer for
/// the stacks (their runs' setup and teardown move almost nothing through the relay), over the
/// run's wall time for the ceiling, or when no transfer time was measured (a failed run).
fn relay_busy(share: RelayShare, stack: Stack, transfer_s: f64) -> f64 {
    match stack {
        Stack::Kernel | Stack::Ours | Stack::OursSeq if transfer_s > 0.0 => {
            share.cpu.as_secs_f64() / transfer_s
        }
        _ => share.of_a_core(),
    }
}

/// [`run_stack`], with the packets the topology's devices dropped during the run added to
/// the record's device drops ([`add_drops`]), and the relay's share of a core over the run
/// ([`RunRecord::relay_busy`]).
fn run_counting_drops(ns: &TwoNs, cell: &Cell, stack: Stack, run: usize) -> RunRecord {
    let before = ns.device_drops();
    let relay = ns.relay_mark();
    let cpu = machine_cpu::CpuMark::now().ok();
    let mut r = run_stack(ns, cell, stack, run);
    if let Some(c) = cpu
        .zip(machine_cpu::CpuMark::now().ok())
        .map(|(a, b)| a.until(b))
    {
        r.machine_cpu_s = Some(c.busy_s);
        r.machine_softirq_s = Some(c.softirq_s);
    }
    if let Some(share) = relay.share(ns) {
        r.relay_cpu_s = Some(share.cpu.as_secs_f64());
        r.relay_busy = Some(relay_busy(share, stack, r.elapsed_s));
    }
    let during = before
        .zip(ns.device_drops())
        .map(|(b, a)| devstats::drops_between(&b, &a));
    r.device_drops = add_drops(r.device_drops, during, stack);
    r
}

/// A run's device drops: the topology's (`topology`, read around the run) and, for ours,
/// the stacks' own TUN devices (`stacks`, read by their threads, which the topology's
/// readings do not see: those devices open and close with the run); None if a part is
/// missing.
fn add_drops(stacks: Option<u64>, topology: Option<u64>, stack: Stack) -> Option<u64> {
    match stack {
        Stack::Ours | Stack::OursSeq => stacks.zip(topology).map(|(s, t)| s + t),
        _ => topology,
    }
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
    /// The same, machine-wide ([`RunRecord::machine_cpu_s`]), and of it softirq; None where
    /// no run could read `/proc/stat`.
    pub cpu_machine_s_per_gb: Option<f64>,
    pub softirq_s_per_gb: Option<f64>,
    /// Medians over runs: both sides together, then each side's own.
    pub retrans: f64,
    pub client_retrans: f64,
    pub server_retrans: f64,
    pub spurious: Option<f64>,
    /// Ours only, medians over runs of both sides together: RACK loss detections, RTOs
    /// and tail loss probes (which of the three timers repaired the losses).
    pub rack_losses: Option<f64>,
    pub rto_losses: Option<f64>,
    pub tlp_probes: Option<f64>,
    /// Max over runs.
    pub rx_held_max: u64,
    pub kernel_max_inq: Option<u64>,
    /// Max over runs ([`KernelDetail::kernel_max_outq`]).
    pub kernel_max_outq: Option<u64>,
    /// Medians over the runs that have them: the relay's queue drops (bottleneck cells) and
    /// our senders' grant holds.
    pub relay_queue_drops: Option<f64>,
    pub grant_holds: Option<f64>,
    /// Median over runs of the relay thread's share of a core ([`RunRecord::relay_busy`]).
    pub relay_busy: Option<f64>,
    /// Ours: what held the sender back, each state's median share of its busy time over the
    /// runs ([`bth_perf::LimitsSummary::STATES`]; per run the busier side, the one that
    /// sent the data); None for the other stacks.
    pub sender_held: Option<[f64; 6]>,
    /// Median over runs of the packets the network devices dropped.
    pub device_drops: Option<f64>,
    /// Payload bytes per full data segment (the first successful run's; they all agree).
    pub seg_payload: Option<u32>,
    /// Ceiling only, medians over runs: IP-level Gbit/s and packets lost on the path.
    pub ip_gbps: Option<f64>,
    pub lost: Option<f64>,
    /// The ceiling under our ACK clock only, median over runs: ACK packets the receiver wrote
    /// per second of the window.
    pub acks_per_sec: Option<f64>,
    /// The GSO ceiling only, median over runs: packets of several segments the receiver read
    /// whole per second of the window.
    pub super_packets_per_sec: Option<f64>,
    /// The ceilings only, medians over runs: the sending and the receiving thread's share of
    /// a core over the window ([`PathCeiling::sender_core`]), which say with the relay's and
    /// the packets lost what bounded the probe ([`path_ceiling::bound`]).
    pub cores: Option<(f64, f64)>,
}

/// Every stack's figures for one cell, and the path's ceiling where the cell measured it.
#[derive(Debug, Clone, Serialize)]
pub struct CellResult {
    pub cell: Cell,
    pub kernel: Summary,
    pub ours: Summary,
    /// Ours in S framing with segmentation offload ([`Stack::OursSeq`]); None where the cell
    /// does not run it (plain cells).
    pub ours_seq: Option<Summary>,
    pub ceiling: Option<Summary>,
    /// The path's ceiling under our ACK clock, where the cell measured the ceiling.
    pub ceiling_acked: Option<Summary>,
    /// The path's ceiling for GSO super-packets ([`Stack::CeilingGso`]), where the cell
    /// measured the ceiling (and checksum offload, which TSO needs, is on).
    pub ceiling_gso: Option<Summary>,
    /// ours / kernel median Gbit/s ([`CellResult::ratio`]).
    pub ours_over_kernel: Option<f64>,
    /// The smallest and the largest ours / kernel Gbit/s of single runs, run `i` of ours over
    /// run `i` of kernel TCP (the two ran one after the other), over the runs where both
    /// succeeded; None with fewer than two such pairs. On a noisy machine the ratio of the
    /// medians alone does not say whether a target it meets is met run after run.
    pub ours_over_kernel_runs: Option<(f64, f64)>,
    /// ours / ceiling median Gbit/s (payload-equivalent: [`PathCeiling::gbps`]).
    pub ours_over_ceiling: Option<f64>,
    /// ours / the ceiling under our ACK clock, median Gbit/s.
    pub ours_over_ceiling_acked: Option<f64>,
    /// ours / the ceiling for GSO super-packets, median Gbit/s.
    pub ours_over_ceiling_gso: Option<f64>,
    /// The same five of ours in S framing ([`CellResult::ours_seq`]).
    pub ours_seq_over_kernel: Option<f64>,
    pub ours_seq_over_kernel_runs: Option<(f64, f64)>,
    pub ours_seq_over_ceiling: Option<f64>,
    pub ours_seq_over_ceiling_acked: Option<f64>,
    pub ours_seq_over_ceiling_gso: Option<f64>,
    /// ours in S framing / ours per-segment, median Gbit/s: what S framing and its
    /// super-segments change on this path.
    pub ours_seq_over_ours: Option<f64>,
}

/// [`CellResult::ours_over_kernel_runs`] from one cell's runs of each stack.
fn paired_ratios(ours: &[&RunRecord], kernel: &[&RunRecord]) -> Option<(f64, f64)> {
    let ok = |r: &&&RunRecord| r.error.is_none() && r.gbps > 0.0;
    let v: Vec<f64> = ours
        .iter()
        .filter(ok)
        .filter_map(|o| {
            let k = kernel.iter().filter(ok).find(|k| k.run == o.run)?;
            Some(o.gbps / k.gbps)
        })
        .collect();
    let lo = v.iter().copied().reduce(f64::min)?;
    let hi = v.iter().copied().reduce(f64::max)?;
    (v.len() >= 2).then_some((lo, hi))
}

/// `ours` over `base` Gbit/s, when both have a figure.
fn gbps_ratio(ours: &Summary, base: &Summary) -> Option<f64> {
    (base.runs_ok > 0 && base.gbps > 0.0 && ours.runs_ok > 0).then(|| ours.gbps / base.gbps)
}

impl CellResult {
    /// ours / kernel throughput.
    pub fn ratio(&self) -> Option<f64> {
        self.ours_over_kernel
    }

    /// The summary of `stack` in this cell, if the cell has one.
    pub fn of(&self, stack: Stack) -> Option<&Summary> {
        match stack {
            Stack::Kernel => Some(&self.kernel),
            Stack::Ours => Some(&self.ours),
            Stack::OursSeq => self.ours_seq.as_ref(),
            Stack::Ceiling => self.ceiling.as_ref(),
            Stack::CeilingAcked => self.ceiling_acked.as_ref(),
            Stack::CeilingGso => self.ceiling_gso.as_ref(),
        }
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

/// Ours: median over `runs` of one recovery counter, client and server added.
fn both_sides(
    stack: Stack,
    runs: &[&&RunRecord],
    counter: fn(&RecoveryStats) -> u64,
) -> Option<f64> {
    stack.is_ours().then(|| {
        median(
            runs.iter()
                .filter_map(|r| r.ours())
                .map(|o| (counter(&o.client_recovery) + counter(&o.server_recovery)) as f64)
                .collect(),
        )
    })
}

/// Median of a counter over the runs that recorded it; `None` if none did.
fn median_of(runs: &[&&RunRecord], counter: fn(&RunRecord) -> Option<u64>) -> Option<f64> {
    median_f64(runs, |r| counter(r).map(|n| n as f64))
}

/// Median of a figure over the runs that have it; None if none has.
fn median_f64(runs: &[&&RunRecord], figure: impl Fn(&RunRecord) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = runs.iter().filter_map(|r| figure(r)).collect();
    (!v.is_empty()).then(|| median(v))
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
        cpu_machine_s_per_gb: median_f64(&ok, |r| {
            (r.bytes > 0).then_some(r.machine_cpu_s? / (r.bytes as f64 / 1e9))
        }),
        softirq_s_per_gb: median_f64(&ok, |r| {
            (r.bytes > 0).then_some(r.machine_softirq_s? / (r.bytes as f64 / 1e9))
        }),
        retrans: median(ok.iter().map(|r| r.retrans as f64).collect()),
        client_retrans: median(ok.iter().map(|r| r.client_retrans as f64).collect()),
        server_retrans: median(ok.iter().map(|r| r.server_retrans as f64).collect()),
        spurious: stack.is_ours().then(|| {
            median(
                ok.iter()
                    .filter_map(|r| r.ours().map(|o| o.spurious as f64))
                    .collect(),
            )
        }),
        rack_losses: both_sides(stack, &ok, |r| r.rack_losses),
        rto_losses: both_sides(stack, &ok, |r| r.rto_losses),
        tlp_probes: both_sides(stack, &ok, |r| r.tlp_probes),
        rx_held_max: ok.iter().map(|r| r.rx_held_max).max().unwrap_or(0),
        kernel_max_inq: ok
            .iter()
            .filter_map(|r| r.kernel())
            .map(|k| k.kernel_max_inq)
            .max(),
        kernel_max_outq: ok
            .iter()
            .filter_map(|r| r.kernel())
            .map(|k| k.kernel_max_outq)
            .max(),
        relay_queue_drops: median_of(&ok, |r| r.relay_queue_drops),
        grant_holds: median_of(&ok, |r| r.ours().map(|o| o.grant_holds)),
        relay_busy: median_f64(&ok, |r| r.relay_busy),
        sender_held: sender_held(&ok),
        device_drops: median_of(&ok, |r| r.device_drops),
        seg_payload: ok.iter().find_map(|r| r.seg_payload),
        ip_gbps: path_median(&ok, PathCeiling::ip_gbps),
        lost: path_median(&ok, |p| p.lost as f64),
        acks_per_sec: match stack {
            Stack::CeilingAcked => path_median(&ok, PathCeiling::acks_per_sec),
            _ => None,
        },
        super_packets_per_sec: match stack {
            Stack::CeilingGso => path_median(&ok, PathCeiling::super_packets_per_sec),
            _ => None,
        },
        cores: path_median(&ok, PathCeiling::sender_core)
            .zip(path_median(&ok, PathCeiling::receiver_core)),
    }
}

/// Each sender state's median share over the runs (see [`Summary::sender_held`]).
fn sender_held(runs: &[&&RunRecord]) -> Option<[f64; 6]> {
    let per_run: Vec<[f64; 6]> = runs
        .iter()
        .filter_map(|r| {
            let o = r.ours()?;
            let busier = [o.client_path, o.server_path]
                .into_iter()
                .max_by_key(|p| p.limits.busy_us)?;
            busier.limits.shares()
        })
        .collect();
    (!per_run.is_empty())
        .then(|| std::array::from_fn(|i| median(per_run.iter().map(|s| s[i]).collect())))
}

/// Median of a ceiling figure over the runs that measured one.
fn path_median(runs: &[&&RunRecord], f: fn(&PathCeiling) -> f64) -> Option<f64> {
    let v: Vec<f64> = runs.iter().filter_map(|r| r.path()).map(f).collect();
    (!v.is_empty()).then(|| median(v))
}

/// Per-cell figures of every stack, in plan order.
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
            let (kernel_runs, ours_runs) = (of(Stack::Kernel), of(Stack::Ours));
            let seq_runs = of(Stack::OursSeq);
            let (kernel, ours) = (
                summary(Stack::Kernel, &kernel_runs),
                summary(Stack::Ours, &ours_runs),
            );
            let ours_seq = c
                .stacks()
                .contains(&Stack::OursSeq)
                .then(|| summary(Stack::OursSeq, &seq_runs));
            // The probes of the path, where the cell measured it.
            let stacks = c.stacks();
            let probe = |s: Stack| stacks.contains(&s).then(|| summary(s, &of(s)));
            let (ceiling, ceiling_acked) = (probe(Stack::Ceiling), probe(Stack::CeilingAcked));
            let ceiling_gso = probe(Stack::CeilingGso);
            let over = |o: Option<&Summary>, base: Option<&Summary>| gbps_ratio(o?, base?);
            let seq = ours_seq.as_ref();
            CellResult {
                cell: c.clone(),
                ours_over_kernel: gbps_ratio(&ours, &kernel),
                ours_over_kernel_runs: paired_ratios(&ours_runs, &kernel_runs),
                ours_over_ceiling: over(Some(&ours), ceiling.as_ref()),
                ours_over_ceiling_acked: over(Some(&ours), ceiling_acked.as_ref()),
                ours_over_ceiling_gso: over(Some(&ours), ceiling_gso.as_ref()),
                ours_seq_over_kernel: over(seq, Some(&kernel)),
                ours_seq_over_kernel_runs: seq.and_then(|_| paired_ratios(&seq_runs, &kernel_runs)),
                ours_seq_over_ceiling: over(seq, ceiling.as_ref()),
                ours_seq_over_ceiling_acked: over(seq, ceiling_acked.as_ref()),
                ours_seq_over_ceiling_gso: over(seq, ceiling_gso.as_ref()),
                ours_seq_over_ours: over(seq, Some(&ours)),
                kernel,
                ours,
                ours_seq,
                ceiling,
                ceiling_acked,
                ceiling_gso,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_qps;
