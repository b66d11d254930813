//! `--json`: the run as one JSON object on stdout, for scripts.

use super::table::bw;
use bth_perf::{ConnCounters, LatencyStats, PathSummary, PeerSummary, PerfConfig, PerfReport};
use serde::Serialize;

/// One row (one message size): what this side measured, and what the peer reported.
#[derive(Debug, Serialize)]
pub struct JsonRow {
    pub bytes: u32,
    pub iterations: u64,
    pub bytes_total: u64,
    pub elapsed_s: f64,
    /// MB = 2^20 bytes, as perftest.
    pub bw_peak_mb_s: f64,
    pub bw_average_mb_s: f64,
    pub bw_peak_gbit_s: f64,
    pub bw_average_gbit_s: f64,
    pub msg_rate_mpps: f64,
    pub verified: u64,
    /// The connection ran S framing (amendment 3): both hellos asked for it.
    pub seq_framed: bool,
    /// Post-to-completion latency of the messages this side posted (none at a server).
    pub latency: Option<LatencyStats>,
    pub counters: ConnCounters,
    /// This side's smoothed RTT, window and bytes in flight over the run.
    pub path: PathSummary,
    pub peer: Option<PeerSummary>,
    pub errors: Vec<String>,
}

impl JsonRow {
    pub fn of(cfg: &PerfConfig, r: &PerfReport, extra_error: Option<&str>) -> JsonRow {
        let (peak, avg) = bw(r);
        let mut errors: Vec<String> = r.errors.iter().map(ToString::to_string).collect();
        errors.extend(extra_error.map(str::to_string));
        JsonRow {
            bytes: cfg.size,
            iterations: r.messages,
            bytes_total: r.bytes,
            elapsed_s: r.elapsed.as_secs_f64(),
            bw_peak_mb_s: peak / 1_048_576.0,
            bw_average_mb_s: avg / 1_048_576.0,
            bw_peak_gbit_s: peak * 8.0 / 1e9,
            bw_average_gbit_s: avg * 8.0 / 1e9,
            msg_rate_mpps: r.msgs_per_sec() / 1e6,
            verified: r.verified,
            seq_framed: r.seq_framed,
            latency: r.latency_stats(),
            counters: r.counters,
            path: r.path.summary(),
            peer: r.peer,
            errors,
        }
    }
}

/// One side's run.
#[derive(Debug, Serialize)]
pub struct JsonSide {
    pub role: String,
    pub op: String,
    pub mode: &'static str,
    pub qps: u32,
    pub mtu: u32,
    pub tx_depth: usize,
    pub rx_depth: usize,
    pub bidirectional: bool,
    pub verify: bool,
    pub lat: bool,
    pub duration_s: Option<f64>,
    pub connection: String,
    pub rows: Vec<JsonRow>,
    /// Every row succeeded on this side (no errors, no failed connection).
    pub ok: bool,
}
