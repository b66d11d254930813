//! perftest's output: a header block describing the run, then one table row per message size,
//! bandwidth (`#bytes #iterations BW peak BW average MsgRate`) or latency (`#bytes
//! #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%`).

use bth_perf::{PerfConfig, PerfOp, PerfReport};

pub const RULE: &str =
    "---------------------------------------------------------------------------------------";

/// perftest's MB: 2^20 bytes.
const MB: f64 = 1_048_576.0;

/// What the header describes besides the first row's configuration.
pub struct Banner<'a> {
    /// "client" or "server".
    pub role: &'a str,
    pub rows: &'a [PerfConfig],
    pub mtu: u32,
    /// "10.99.2.2 -> 10.99.1.2:4791" or similar.
    pub connection: String,
}

fn test_name(op: PerfOp) -> &'static str {
    match op {
        PerfOp::Send => "Send",
        PerfOp::Write => "RDMA_Write",
        PerfOp::WriteImm => "RDMA_Write with immediate",
        PerfOp::Read => "RDMA_Read",
        PerfOp::Mixed => "Mixed Send / RDMA_Write with immediate / RDMA_Read",
        PerfOp::SendRecv => "Send request/response",
    }
}

fn on_off(b: bool) -> &'static str {
    if b {
        "ON"
    } else {
        "OFF"
    }
}

/// The header block, ending with a rule.
pub fn header(b: &Banner) -> String {
    let Some(cfg) = b.rows.first() else {
        return String::new();
    };
    let kind = if cfg.mode.lat { "Latency" } else { "BW" };
    let size = match (b.rows.first(), b.rows.last()) {
        (Some(f), Some(l)) if b.rows.len() > 1 => {
            format!("{} - {}[B] (-a, {} sizes)", f.size, l.size, b.rows.len())
        }
        _ => format!("{}[B]", cfg.size),
    };
    let length = match cfg.duration {
        Some(d) => format!(" Duration        : {}[sec]", d.as_secs_f64()),
        None if b.rows.len() > 1 => " Iterations      : per row, see the table".to_string(),
        None => format!(" Iterations      : {}", cfg.count),
    };
    let mode = match (cfg.mode.plain, cfg.framing) {
        (true, _) => "plain TCP byte stream (--plain)",
        (false, tcp_bth::Framing::PerSegment) => "tcp_bth (BTH option)",
        (false, tcp_bth::Framing::Seq) => {
            "tcp_bth (BTH option), S framing asked (--framing seq: runs when the peer asks too)"
        }
    };
    [
        RULE.to_string(),
        format!(
            "                    {} {kind} Test (tcp-bth, {})",
            test_name(cfg.op),
            b.role
        ),
        format!(" Operation       : {}", cfg.op),
        format!(" Number of qps   : {}", cfg.qps),
        format!(" Mode            : {mode}"),
        format!(" Connection      : {}", b.connection),
        format!(" Mtu             : {}[B]", b.mtu),
        format!(" TX depth        : {}", cfg.tx_depth),
        format!(" RX depth        : {}", cfg.rx_depth),
        format!(" Message size    : {size}"),
        length,
        format!(" Bidirectional   : {}", on_off(cfg.mode.bidir)),
        format!(" Verify          : {}", on_off(cfg.mode.verify)),
        RULE.to_string(),
    ]
    .join("\n")
}

/// Left-aligned columns, each as wide as its title (at least 8, for the sizes of `-a`) plus
/// three spaces.
fn columns(titles: &[&str], cells: &[String]) -> String {
    let mut line = String::from(" ");
    for (t, c) in titles.iter().zip(cells) {
        line += &format!("{c:<w$}", w = t.len().max(8).max(c.len()) + 3);
    }
    line.trim_end().to_string()
}

fn bw_titles(gbits: bool) -> [&'static str; 5] {
    if gbits {
        [
            "#bytes",
            "#iterations",
            "BW peak[Gb/sec]",
            "BW average[Gb/sec]",
            "MsgRate[Mpps]",
        ]
    } else {
        [
            "#bytes",
            "#iterations",
            "BW peak[MB/sec]",
            "BW average[MB/sec]",
            "MsgRate[Mpps]",
        ]
    }
}

const LAT_TITLES: [&str; 9] = [
    "#bytes",
    "#iterations",
    "t_min[usec]",
    "t_max[usec]",
    "t_typical[usec]",
    "t_avg[usec]",
    "t_stdev[usec]",
    "99% percentile[usec]",
    "99.9% percentile[usec]",
];

/// The table's title line.
pub fn title(lat: bool, gbits: bool) -> String {
    let titles: &[&str] = if lat { &LAT_TITLES } else { &bw_titles(gbits) };
    let cells: Vec<String> = titles.iter().map(|t| t.to_string()).collect();
    columns(titles, &cells)
}

/// Bandwidth in the table's unit, from bytes per second.
pub fn bw_unit(bytes_per_sec: f64, gbits: bool) -> f64 {
    if gbits {
        bytes_per_sec * 8.0 / 1e9
    } else {
        bytes_per_sec / MB
    }
}

/// Peak and average bandwidth of a row in bytes per second. The peak is the best 10-ms
/// window; a side that saw too little to tell (a run under 10 ms, or the server of a plain
/// WRITE run, which learns of the messages only at the end) shows its average.
pub fn bw(r: &PerfReport) -> (f64, f64) {
    let avg = r.bytes_per_sec();
    (r.timeline.peak().unwrap_or(avg), avg)
}

/// One bandwidth row.
pub fn bw_row(size: u32, r: &PerfReport, gbits: bool) -> String {
    let (peak, avg) = bw(r);
    let cells = [
        size.to_string(),
        r.messages.to_string(),
        format!("{:.2}", bw_unit(peak, gbits)),
        format!("{:.2}", bw_unit(avg, gbits)),
        format!("{:.6}", r.msgs_per_sec() / 1e6),
    ];
    columns(&bw_titles(gbits), &cells)
}

/// One latency row; without latencies (nothing completed) the figures are dashes.
pub fn lat_row(size: u32, r: &PerfReport) -> String {
    let mut cells = vec![size.to_string(), r.latencies.len().to_string()];
    match r.latency_stats() {
        Some(s) => cells.extend(
            [
                s.min_us,
                s.max_us,
                s.typical_us,
                s.avg_us,
                s.stdev_us,
                s.p99_us,
                s.p999_us,
            ]
            .map(|v| format!("{v:.2}")),
        ),
        None => cells.extend(std::iter::repeat_n("-".to_string(), 7)),
    }
    columns(&LAT_TITLES, &cells)
}
