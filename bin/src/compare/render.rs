//! Rendering a comparison: the Markdown table, the JSON file of raw runs, the SVG charts.

use super::{size_label, CellResult, Link, Plan, RunRecord, Summary, Workload};
use plotters::drawing::DrawingAreaErrorKind;
use plotters::prelude::*;
use serde::Serialize;
use std::io;
use std::path::Path;

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
    let retrans = match s.spurious {
        Some(sp) => format!("{:.0} ({sp:.0} spurious)", s.retrans),
        None => format!("{:.0}", s.retrans),
    };
    let held = match s.kernel_max_inq {
        Some(inq) => format!("{} (inq {})", bytes(s.rx_held_max), bytes(inq)),
        None => bytes(s.rx_held_max),
    };
    format!(
        "| {} | {name} | {runs} | {:.3} | {:.0} | {} | {} | {} | {:.2} / {:.2} | {held} | {retrans} | {ratio} |\n",
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
pub fn markdown(results: &[CellResult]) -> String {
    let mut s = String::from(
        "| cell | stack | runs | Gbit/s | msg/s | p50 | p99 | p99.9 | CPU s/GB client / server | rx held outside posted buffers (max) | retrans | ours/kernel Gbit/s |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
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

type Series = Vec<(f64, f64)>;

fn line_chart(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    log_x: bool,
    series: &[(&str, Series)],
    x_label: &dyn Fn(&f64) -> String,
) -> io::Result<()> {
    let err =
        |e: DrawingAreaErrorKind<io::Error>| io::Error::other(format!("{}: {e}", path.display()));
    let pts: Vec<&(f64, f64)> = series.iter().flat_map(|(_, s)| s).collect();
    if pts.is_empty() {
        return Ok(());
    }
    let (mut x0, mut x1) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    if x0 == x1 {
        x0 -= 1.0;
        x1 += 1.0;
    }
    let y1 = pts.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-9) * 1.15;
    let root = SVGBackend::new(path, (760, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let colors = [RGBColor(0x1f, 0x77, 0xb4), RGBColor(0xd6, 0x27, 0x28)];
    let mut b = ChartBuilder::on(&root);
    b.caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60);
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(x_desc)
                .y_desc(y_desc)
                .x_label_formatter(x_label)
                .draw()
                .map_err(err)?;
            for (i, (name, s)) in series.iter().enumerate() {
                let c = colors[i % colors.len()];
                chart
                    .draw_series(LineSeries::new(s.iter().copied(), c.stroke_width(2)))
                    .map_err(err)?
                    .label(*name)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                    });
                chart
                    .draw_series(s.iter().map(|&p| Circle::new(p, 3, c.filled())))
                    .map_err(err)?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperRight)
                .draw()
                .map_err(err)?;
        }};
    }
    if log_x {
        draw!(b
            .build_cartesian_2d((x0..x1).log_scale(), 0.0..y1)
            .map_err(err)?);
    } else {
        draw!(b.build_cartesian_2d(x0..x1, 0.0..y1).map_err(err)?);
    }
    root.present().map_err(err)?;
    Ok(())
}

fn series(
    results: &[CellResult],
    keep: impl Fn(&CellResult) -> Option<f64>,
    y: impl Fn(&Summary) -> Option<f64>,
) -> [(&'static str, Series); 2] {
    let mut k = Vec::new();
    let mut o = Vec::new();
    // Plain-mode cells are our fallback, not the proposal: kept out of the charts.
    for c in results.iter().filter(|c| !c.cell.plain) {
        let Some(x) = keep(c) else { continue };
        if c.kernel.runs_ok > 0 {
            if let Some(v) = y(&c.kernel) {
                k.push((x, v));
            }
        }
        if c.ours.runs_ok > 0 {
            if let Some(v) = y(&c.ours) {
                o.push((x, v));
            }
        }
    }
    [("kernel TCP", k), ("tcp-bth (ours)", o)]
}

/// Reordering rate of a relay cell without loss.
fn reorder_of(c: &CellResult, w: Workload) -> Option<f64> {
    match c.cell.link {
        Link::Relay { reorder, loss } if loss == 0.0 && c.cell.workload == w => {
            Some(reorder * 100.0)
        }
        _ => None,
    }
}

/// Write the charts into `dir`; returns the files written (charts without data are skipped).
pub fn charts(results: &[CellResult], dir: &Path) -> io::Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut out = Vec::new();
    let size_x = |v: &f64| size_label(v.round() as u32);
    let pct_x = |v: &f64| format!("{v}%");
    let bulk_veth = |c: &CellResult| {
        (c.cell.link == Link::Veth && c.cell.workload == Workload::Bulk)
            .then_some(f64::from(c.cell.size))
    };
    let s = series(results, bulk_veth, |s| Some(s.gbps));
    if s.iter().any(|(_, v)| v.len() > 1) {
        let p = dir.join("throughput-vs-size.svg");
        line_chart(
            &p,
            "Bulk one-way throughput vs message size (veth)",
            "message size",
            "Gbit/s",
            true,
            &s,
            &size_x,
        )?;
        out.push(p);
    }
    let s = series(results, |c| reorder_of(c, Workload::Bulk), |s| Some(s.gbps));
    if s.iter().any(|(_, v)| !v.is_empty()) {
        let size = results
            .iter()
            .find(|c| reorder_of(c, Workload::Bulk).is_some())
            .map_or(String::new(), |c| size_label(c.cell.size));
        let p = dir.join("throughput-vs-reorder.svg");
        line_chart(
            &p,
            &format!("Bulk {size} throughput vs reordering (relay)"),
            "packets reordered",
            "Gbit/s",
            false,
            &s,
            &pct_x,
        )?;
        out.push(p);
    }
    let s = series(
        results,
        |c| reorder_of(c, Workload::RequestResponse),
        |s| s.p99_us,
    );
    if s.iter().any(|(_, v)| !v.is_empty()) {
        let size = results
            .iter()
            .find(|c| reorder_of(c, Workload::RequestResponse).is_some())
            .map_or(String::new(), |c| size_label(c.cell.size));
        let p = dir.join("p99-vs-reorder.svg");
        line_chart(
            &p,
            &format!("Request/response {size} p99 round trip vs reordering (relay)"),
            "packets reordered",
            "p99 latency (µs)",
            false,
            &s,
            &pct_x,
        )?;
        out.push(p);
    }
    Ok(out)
}
