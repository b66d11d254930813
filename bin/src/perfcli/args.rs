//! perftest's options as `bth-perf` takes them ([`PerfArgs`]), and the plan they make: one
//! [`PerfConfig`] per table row ([`Plan`]), checked before anything is set up.

use super::sweep::{sweep_iters, sweep_sizes};
use bth_io::tun::Offload;
use bth_perf::{PerfConfig, PerfError, PerfOp, RunMode};
use bth_testbed::topology::{check_mtu, parse_mtu, DEFAULT_MTU};
use clap::Args;
use std::time::Duration;
use thiserror::Error;

/// Messages per row in bandwidth mode when `-n` is not given (perftest's default).
pub const DEFAULT_ITERS_BW: u64 = 5000;
/// Messages per row in latency mode when `-n` is not given (perftest's default).
pub const DEFAULT_ITERS_LAT: u64 = 1000;
/// Work requests outstanding when `-t` is not given (bandwidth mode).
pub const DEFAULT_TX_DEPTH: usize = 16;
/// Receive buffers posted when `-r` is not given: at least the TX depth.
pub const DEFAULT_RX_DEPTH: usize = 16;
/// The longest `-D` taken, in seconds (a day).
const MAX_DURATION_S: f64 = 86_400.0;

/// The workload and report options, the same on `server`, `client` and `local`.
#[derive(Args, Debug, Clone, PartialEq)]
pub struct PerfArgs {
    /// Operation: send (SEND with immediate); write (plain RDMA WRITE: the server gets no
    /// completion per message; with --verify it checks every message at its own offset when
    /// the client's done message arrives); write-imm (RDMA WRITE with immediate); read (RDMA
    /// READ); mixed (SEND, WRITE with immediate and READ in turn); sendrecv (request/response:
    /// each SEND waits for the server's 8-byte reply).
    #[arg(long, default_value = "send", value_name = "OP")]
    pub op: PerfOp,
    /// Message size in bytes, 0 to 16777215 (0, a zero-length message with immediate, for
    /// send and write-imm only).
    #[arg(short = 's', long, default_value_t = 65536)]
    pub size: u32,
    /// Sweep the message size over the powers of two from 2 B to 8 MiB, one table row (and
    /// one connection) each. Without -n, each size runs min(default, max(16, 256 MiB / size))
    /// messages, so the large sizes do not take minutes.
    #[arg(short = 'a', long, conflicts_with = "size")]
    pub all: bool,
    /// Messages per row (per direction with -b) [default: 5000, 1000 with --lat].
    #[arg(short = 'n', long, visible_alias = "count", value_name = "N")]
    pub iters: Option<u64>,
    /// Run each row for this many seconds (fractions allowed) instead of a message count:
    /// new messages are posted until the time is up, then the outstanding ones finish.
    #[arg(short = 'D', long, value_name = "SECONDS", conflicts_with = "iters")]
    pub duration: Option<f64>,
    /// Connections (queue pairs) per row, all at once on one driver and endpoint; each runs
    /// the whole workload and the table sums them. Checked against the server's.
    #[arg(short = 'q', long, default_value_t = 1, value_name = "N")]
    pub qps: u32,
    /// Work requests kept outstanding per connection [default: 16; 1 with --lat].
    #[arg(short = 't', long, visible_alias = "depth", value_name = "N")]
    pub tx_depth: Option<usize>,
    /// Receive buffers kept posted for the peer's SENDs [default: the TX depth, at least 16].
    #[arg(short = 'r', long, value_name = "N")]
    pub rx_depth: Option<usize>,
    /// Both sides send: the server runs the same workload towards the client at the same time
    /// (not with sendrecv, --plain or --lat). Rows then count both directions.
    #[arg(short = 'b', long)]
    pub bidirectional: bool,
    /// Plain TCP byte stream (no tcp_bth option): both sides must agree.
    #[arg(long)]
    pub plain: bool,
    /// How data segments say where their bytes belong: per-segment (each its own offset,
    /// index and ICRC) or seq (one option per message, offsets from sequence numbers, no
    /// ICRC: spec amendment 3). Negotiated in the handshake: seq runs only when both sides
    /// ask for it; the header says which ran.
    #[arg(long, default_value = "per-segment", value_parser = crate::cli::parse_framing)]
    pub framing: tcp_bth::Framing,
    /// Check every byte (plain write: needs iters × size ≤ 4 GiB of server memory).
    #[arg(long)]
    pub verify: bool,
    /// Latency mode: one message at a time, perftest's latency table (min, max, typical =
    /// median, average, standard deviation, 99 % and 99.9 %) of each message's time from
    /// post to completion. That is a full round trip (the ACK, the READ response or the reply),
    /// where perftest's send/write latency tests print half a ping-pong.
    #[arg(long)]
    pub lat: bool,
    /// Bandwidth columns in Gbit/s (10^9 bit/s) instead of MB/sec (2^20 bytes/s, as perftest).
    #[arg(long)]
    pub report_gbits: bool,
    /// Print one JSON object on stdout instead of the tables (no progress bar).
    #[arg(long)]
    pub json: bool,
    /// TCP port of the server.
    #[arg(short = 'p', long, default_value_t = 4791)]
    pub port: u16,
    /// MTU in bytes, 576 to 65535: of the stack's TUN device, and with `local` of every
    /// device between the namespaces too (veth pair, or the relay's TUN devices), so kernel
    /// forwarding never fragments. Our connections' MSS is MTU − 40; a data segment carries
    /// the tcp_bth option's 40 bytes less payload.
    #[arg(short = 'm', long, default_value_t = DEFAULT_MTU, value_parser = parse_mtu)]
    pub mtu: u32,
    /// Open the stack's TUN devices without checksum offload: every TCP checksum is computed
    /// on send and checked on receive (by default they are left partial, `NEEDS_CSUM`, and
    /// trusted when the kernel vouches for them, as kernel TCP over veth does). Use it when
    /// a capture of the path is to be checked with tshark.
    #[arg(long)]
    pub no_csum_offload: bool,
    /// No segmentation offload on the stack's TUN devices: by default they have TSO, so a
    /// connection in S framing (--framing seq) writes super-segments of up to 64 KiB of one
    /// message, which the kernel cuts into segments or, where the receiving device has TSO
    /// too, carries whole, and the stack reads super-packets whole. Per-segment framing
    /// always writes one segment per packet (its options differ segment by segment). Also
    /// implied by --no-csum-offload.
    #[arg(long)]
    pub no_gso: bool,
    /// Give up on a row (connection) after this many seconds (at least the duration + 60 s).
    #[arg(long, default_value_t = 120, value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
}

/// Most connections one run opens (`-q`): each costs the server its receive buffers.
pub const MAX_QPS: u32 = 1024;

/// Why the options cannot make a run.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ArgsError {
    #[error("-q {0}: expected 1 to {MAX_QPS} connections")]
    Qps(u32),
    #[error("--lat runs one message at a time: drop --tx-depth {0}")]
    LatDepth(usize),
    #[error("--lat measures one direction: drop --bidirectional")]
    LatBidir,
    #[error("--lat needs tcp_bth: a byte stream (--plain) has no per-message completions")]
    LatPlain,
    #[error("--duration {0}: expected seconds above 0, at most {MAX_DURATION_S}")]
    Duration(f64),
    #[error("--mtu: {0}")]
    Mtu(String),
    #[error(transparent)]
    Perf(#[from] PerfError),
}

/// What a side runs: one connection's configuration per row, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub rows: Vec<PerfConfig>,
    pub qps: u32,
    /// Give up on a row after this long.
    pub limit: Duration,
}

impl PerfArgs {
    /// What the stack's TUN devices offload (`--no-csum-offload`).
    pub fn offload(&self) -> Offload {
        match (self.no_csum_offload, self.no_gso) {
            (true, _) => Offload::None,
            (false, true) => Offload::Checksum,
            (false, false) => Offload::Segmentation,
        }
    }

    /// The switches the options set, as both sides must share them.
    pub fn mode(&self) -> RunMode {
        RunMode {
            bidir: self.bidirectional,
            verify: self.verify,
            plain: self.plain,
            lat: self.lat,
            sweep: self.all,
        }
    }

    /// The rows to run, or why not.
    pub fn plan(&self) -> Result<Plan, ArgsError> {
        if !(1..=MAX_QPS).contains(&self.qps) {
            return Err(ArgsError::Qps(self.qps));
        }
        check_mtu(self.mtu).map_err(ArgsError::Mtu)?;
        if self.lat {
            if let Some(t) = self.tx_depth.filter(|&t| t != 1) {
                return Err(ArgsError::LatDepth(t));
            }
            if self.bidirectional {
                return Err(ArgsError::LatBidir);
            }
            if self.plain {
                return Err(ArgsError::LatPlain);
            }
        }
        let duration = match self.duration {
            None => None,
            Some(s) if s > 0.0 && s <= MAX_DURATION_S => Some(Duration::from_secs_f64(s)),
            Some(s) => return Err(ArgsError::Duration(s)),
        };
        let tx_depth = self
            .tx_depth
            .unwrap_or(if self.lat { 1 } else { DEFAULT_TX_DEPTH });
        let rx_depth = self.rx_depth.unwrap_or(tx_depth.max(DEFAULT_RX_DEPTH));
        let default_iters = if self.lat {
            DEFAULT_ITERS_LAT
        } else {
            DEFAULT_ITERS_BW
        };
        let sizes = if self.all {
            sweep_sizes()
        } else {
            vec![self.size]
        };
        let rows = sizes
            .into_iter()
            .map(|size| {
                let count = match (self.iters, self.all) {
                    (Some(n), _) => n,
                    (None, true) => sweep_iters(size, default_iters),
                    (None, false) => default_iters,
                };
                let cfg = PerfConfig {
                    op: self.op,
                    size,
                    count,
                    duration,
                    tx_depth,
                    rx_depth,
                    mode: self.mode(),
                    seed: 1,
                    framing: self.framing,
                    qps: self.qps,
                    // Per-message times only matter to bth-compare; a long -D run would
                    // hold 16 bytes per message.
                    trace: false,
                };
                cfg.validate()?;
                Ok(cfg)
            })
            .collect::<Result<Vec<_>, ArgsError>>()?;
        let mut limit = Duration::from_secs(self.timeout);
        if let Some(d) = duration {
            limit = limit.max(d + Duration::from_secs(60));
        }
        Ok(Plan {
            rows,
            qps: self.qps,
            limit,
        })
    }
}
