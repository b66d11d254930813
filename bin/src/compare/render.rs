//! Rendering a comparison: the Markdown table, the JSON file of raw runs, the SVG charts
//! ([`charts`], in `charts.rs`).

pub use super::charts::charts;
use super::{CellResult, Plan, RunRecord, Summary};
use serde::Serialize;

fn opt_us(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(us) if us >= 10_000.0 => format!("{:.1} ms", us / 1000.0),
        Some(us) if us >= 1000.0 => format!("{:.2} ms", us / 1000.0),
        Some(us) => format!("{us:.0} µs"),
    }
}

fn bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

fn row(c: &CellResult, s: &Summary, ratio: String) -> String {
    let name = match s.stack {
        super::Stack::Kernel => "kernel",
        super::Stack::Ours if c.cell.plain => "ours (plain)",
        super::Stack::Ours => "ours",
    };
    let runs = if s.runs_failed > 0 {
        format!("{} ({} failed)", s.runs_ok, s.runs_failed)
    } else {
        s.runs_ok.to_string()
    };
    let (total, cl, sv) = (s.retrans, s.client_retrans, s.server_retrans);
    let retrans = match s.spurious {
        Some(sp) => format!("{total:.0} ({cl:.0} / {sv:.0}; {sp:.0} spurious)"),
        None => format!("{total:.0} ({cl:.0} / {sv:.0})"),
    };
    let detections = match (s.rack_losses, s.rto_losses, s.tlp_probes) {
        (Some(rack), Some(rto), Some(tlp)) => format!("{rack:.0} / {rto:.0} / {tlp:.0}"),
        _ => "–".into(),
    };
    let held = match s.kernel_max_inq {
        Some(inq) => format!("{} (inq {})", bytes(s.rx_held_max), bytes(inq)),
        None => bytes(s.rx_held_max),
    };
    format!(
        "| {} | {name} | {runs} | {:.3} | {:.0} | {} | {} | {} | {:.2} / {:.2} | {held} | {retrans} | {detections} | {ratio} |\n",
        c.cell.id,
        s.gbps,
        s.msgs_per_sec,
        opt_us(s.p50_us),
        opt_us(s.p99_us),
        opt_us(s.p999_us),
        s.cpu_client_s_per_gb,
        s.cpu_server_s_per_gb,
    )
}

/// The Markdown table: two rows per cell (kernel, ours), the ratio ours/kernel on ours's row.
/// Retransmissions are shown as the median total, then each side's median (what the client
/// and what the server sent again: in request/response the server's are replies); our RACK
/// loss detections, RTOs and tail loss probes are both sides' together.
pub fn markdown(results: &[CellResult]) -> String {
    let mut s = String::from(
        "| cell | stack | runs | Gbit/s | msg/s | p50 | p99 | p99.9 | CPU s/GB client / server | rx held outside posted buffers (max) | retrans (client / server) | RACK / RTO / TLP | ours/kernel Gbit/s |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for c in results {
        s += &row(c, &c.kernel, String::new());
        let ratio = c.ratio().map_or("–".into(), |r| format!("{r:.2}×"));
        s += &row(c, &c.ours, ratio);
    }
    s
}

#[derive(Serialize)]
struct JsonOut<'a> {
    plan: &'a Plan,
    runs: &'a [RunRecord],
    cells: &'a [CellResult],
}

/// Every raw run, the plan and the per-cell summaries, as pretty JSON.
pub fn json(plan: &Plan, runs: &[RunRecord], cells: &[CellResult]) -> String {
    serde_json::to_string_pretty(&JsonOut { plan, runs, cells }).expect("serializable")
}
