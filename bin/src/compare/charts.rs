//! The SVG charts of a comparison, drawn with plotters' SVG backend. Text goes into the SVG as
//! `<text>` elements and plotters (built without its `ttf`/`ab_glyph` features) only estimates
//! its size, so drawing needs no font files or fontconfig: the viewer's sans-serif renders it.
//! A logarithmic x axis has its ticks at the data's x values (the sizes, depths, path counts
//! measured), not at plotters' powers of ten; sizes read as people read them
//! ([`human_size`]: `64 B`, `4 KiB`, `9000 B`).

use super::{
    CellResult, Link, Stack, Summary, Workload, RELAY_REORDER_DEPTH_US, REORDER_DEPTH_SWEEP_RATE,
    SPRAY_SPREAD_US,
};
use bth_perf::units::{human_size, human_size_f64};
use bth_testbed::topology::DEFAULT_MTU;
use plotters::drawing::DrawingAreaErrorKind;
use plotters::prelude::*;
use std::io;
use std::path::{Path, PathBuf};

type Series = Vec<(f64, f64)>;

/// Each series' colour, the same on every chart: kernel TCP blue, ours red, ours S purple,
/// the ceiling green, the ceiling under our ACK clock orange, the GSO ceiling brown.
fn colour(name: &str) -> RGBColor {
    match name {
        KERNEL => RGBColor(0x1f, 0x77, 0xb4),
        OURS => RGBColor(0xd6, 0x27, 0x28),
        CEILING => RGBColor(0x2c, 0xa0, 0x2c),
        CEILING_ACKED => RGBColor(0xff, 0x7f, 0x0e),
        OURS_SEQ => RGBColor(0x94, 0x67, 0xbd),
        CEILING_GSO => RGBColor(0x8c, 0x56, 0x4b),
        _ => RGBColor(0x7f, 0x7f, 0x7f),
    }
}

/// The stacks' series names.
const KERNEL: &str = "kernel TCP";
const OURS: &str = "tcp-bth (ours)";
const OURS_SEQ: &str = "tcp-bth S framing + GSO (ours S)";

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
    // The legend goes to the upper corner away from the highest point.
    let top = pts
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map_or(x0, |p| p.0);
    let right_half = if log_x {
        top.ln() - x0.ln() > x1.ln() - top.ln()
    } else {
        top - x0 > x1 - top
    };
    let legend_at = if right_half {
        SeriesLabelPosition::UpperLeft
    } else {
        SeriesLabelPosition::UpperRight
    };
    let mut ticks: Vec<f64> = pts.iter().map(|p| p.0).collect();
    ticks.sort_by(f64::total_cmp);
    ticks.dedup();
    let root = SVGBackend::new(path, (760, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
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
            // A series with no point (a ceiling no cell measured) gets no legend entry.
            for (name, s) in series.iter().filter(|(_, s)| !s.is_empty()) {
                let c = colour(name);
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
                .position(legend_at.clone())
                .draw()
                .map_err(err)?;
        }};
    }
    if log_x {
        let x = (x0..x1).log_scale().with_key_points(ticks);
        draw!(b.build_cartesian_2d(x, 0.0..y1).map_err(err)?);
    } else {
        draw!(b.build_cartesian_2d(x0..x1, 0.0..y1).map_err(err)?);
    }
    root.present().map_err(err)?;
    Ok(())
}

/// Plain-mode cells are our fallback, not the proposal: kept out of the charts; so are cells
/// of several connections, which would put a second point at the x of their one-connection
/// cell, and cells at another MTU than 1500 (the MTU chart's alone).
pub(super) fn charted(c: &CellResult) -> bool {
    !c.cell.plain && c.cell.qps == 1 && c.cell.mtu == DEFAULT_MTU
}

/// The MTU chart's series: Gbit/s of the ceiling (bare, under our ACK clock and with GSO
/// super-packets), kernel TCP, ours and ours S at each MTU whose veth cell measured the
/// ceiling (the relay cells' ceilings are the paths chart's).
fn mtu_series(results: &[CellResult]) -> [(&'static str, Series); 6] {
    let (mut ceil, mut acked, mut k, mut o) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut seq, mut gso) = (Vec::new(), Vec::new());
    let swept = |c: &&CellResult| !c.cell.plain && c.cell.qps == 1 && c.cell.link == Link::Veth;
    for c in results.iter().filter(swept) {
        let Some(ceiling) = &c.ceiling else { continue };
        let x = f64::from(c.cell.mtu);
        let rows = [
            Some((ceiling, &mut ceil)),
            c.ceiling_acked.as_ref().map(|a| (a, &mut acked)),
            c.ceiling_gso.as_ref().map(|g| (g, &mut gso)),
            Some((&c.kernel, &mut k)),
            Some((&c.ours, &mut o)),
            c.ours_seq.as_ref().map(|s| (s, &mut seq)),
        ];
        for (s, into) in rows.into_iter().flatten() {
            if s.runs_ok > 0 {
                into.push((x, s.gbps));
            }
        }
    }
    [
        (KERNEL, k),
        (OURS, o),
        (OURS_SEQ, seq),
        (CEILING, ceil),
        (CEILING_ACKED, acked),
        (CEILING_GSO, gso),
    ]
}

/// The ceiling series' names.
const CEILING: &str = "ceiling: raw packets, no TCP";
const CEILING_ACKED: &str = "ceiling with an ACK back per 2 packets";
const CEILING_GSO: &str = "ceiling: 64 KiB GSO super-packets, no TCP";

/// Kernel TCP's, ours' and ours S' figure `y` at the x `keep` gives each charted cell (no
/// point where a stack has no successful run, or no figure).
fn series(
    results: &[CellResult],
    keep: impl Fn(&CellResult) -> Option<f64>,
    y: impl Fn(&Summary) -> Option<f64>,
) -> [(&'static str, Series); 3] {
    let of = |stack: Stack| -> Series {
        results
            .iter()
            .filter(|c| charted(c))
            .filter_map(|c| Some((keep(c)?, c.of(stack)?)))
            .filter(|(_, s)| s.runs_ok > 0)
            .filter_map(|(x, s)| Some((x, y(s)?)))
            .collect()
    };
    [
        (KERNEL, of(Stack::Kernel)),
        (OURS, of(Stack::Ours)),
        (OURS_SEQ, of(Stack::OursSeq)),
    ]
}

/// [`series`] of Gbit/s and the path's ceiling (no TCP), bare, under our ACK clock and with
/// GSO super-packets, of the cells that measured it.
fn series_and_ceiling(
    results: &[CellResult],
    keep: impl Fn(&CellResult) -> Option<f64>,
) -> [(&'static str, Series); 6] {
    let [k, o, seq] = series(results, &keep, |s| Some(s.gbps));
    let probes = [Stack::Ceiling, Stack::CeilingAcked, Stack::CeilingGso];
    let [ceil, acked, gso] = probes.map(|stack| -> Series {
        results
            .iter()
            .filter(|c| charted(c))
            .filter_map(|c| Some((keep(c)?, c.of(stack)?)))
            .filter(|(_, s)| s.runs_ok > 0)
            .map(|(x, s)| (x, s.gbps))
            .collect()
    });
    [
        k,
        o,
        seq,
        (CEILING, ceil),
        (CEILING_ACKED, acked),
        (CEILING_GSO, gso),
    ]
}

/// Reordering rate of a relay cell without loss at the usual reordering depth.
fn reorder_of(c: &CellResult, w: Workload) -> Option<f64> {
    match c.cell.link {
        Link::Relay {
            reorder,
            loss,
            reorder_depth_us,
        } if loss == 0.0 && reorder_depth_us == RELAY_REORDER_DEPTH_US && c.cell.workload == w => {
            Some(reorder * 100.0)
        }
        _ => None,
    }
}

/// Reordering depth (µs) of a bulk relay cell of the depth sweep: the sweep's rate, no loss.
fn reorder_depth_of(c: &CellResult) -> Option<f64> {
    match c.cell.link {
        Link::Relay {
            reorder,
            loss,
            reorder_depth_us,
        } if loss == 0.0
            && reorder == REORDER_DEPTH_SWEEP_RATE
            && c.cell.workload == Workload::Bulk =>
        {
            Some(f64::from(reorder_depth_us))
        }
        _ => None,
    }
}

/// Number of paths of a bulk spraying cell with the sweep's spread. The 0 % relay cell is the
/// same link with one path (no spraying), so it is the sweep's point at 1 when its message
/// size is the sweep's.
fn paths_of(c: &CellResult, spray_size: Option<u32>) -> Option<f64> {
    if c.cell.workload != Workload::Bulk {
        return None;
    }
    match c.cell.link {
        Link::Spray { paths, spread_us } if spread_us == SPRAY_SPREAD_US => Some(f64::from(paths)),
        l if l.is_clean_relay() && spray_size == Some(c.cell.size) => Some(1.0),
        _ => None,
    }
}

/// The message size of the first cell `keep` takes, for a chart's title.
fn size_of(results: &[CellResult], keep: impl Fn(&CellResult) -> Option<f64>) -> String {
    results
        .iter()
        .find(|c| charted(c) && keep(c).is_some())
        .map_or(String::new(), |c| human_size(u64::from(c.cell.size)))
}

/// Write the charts into `dir`; returns the files written (charts without data are skipped).
pub fn charts(results: &[CellResult], dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut out = Vec::new();
    let size_x = |v: &f64| human_size_f64(*v);
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
    let s = mtu_series(results);
    if s.iter().any(|(_, v)| v.len() > 1) {
        let p = dir.join("throughput-vs-mtu.svg");
        line_chart(
            &p,
            &format!(
                "Bulk {} throughput vs MTU (veth): the stacks and the path's ceilings",
                human_size(u64::from(super::MTU_SWEEP_SIZE))
            ),
            "MTU (every device of the path)",
            "Gbit/s (payload)",
            true,
            &s,
            &size_x,
        )?;
        out.push(p);
    }
    let s = series(results, |c| reorder_of(c, Workload::Bulk), |s| Some(s.gbps));
    if s.iter().any(|(_, v)| !v.is_empty()) {
        let size = size_of(results, |c| reorder_of(c, Workload::Bulk));
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
    let s = series(results, reorder_depth_of, |s| Some(s.gbps));
    if s.iter().any(|(_, v)| v.len() > 1) {
        let size = size_of(results, reorder_depth_of);
        let p = dir.join("throughput-vs-reorder-depth.svg");
        let pct = REORDER_DEPTH_SWEEP_RATE * 100.0;
        line_chart(
            &p,
            &format!("Bulk {size} throughput vs reordering depth, {pct}% reordered (relay)"),
            "largest extra delay of a reordered packet",
            "Gbit/s",
            true,
            &s,
            &|v: &f64| format!("{v:.0} µs"),
        )?;
        out.push(p);
    }
    let spray_size = results
        .iter()
        .find(|c| charted(c) && paths_of(c, None).is_some())
        .map(|c| c.cell.size);
    let by_paths = |c: &CellResult| paths_of(c, spray_size);
    let s = series_and_ceiling(results, by_paths);
    if s.iter().any(|(_, v)| v.len() > 1) {
        let size = size_of(results, by_paths);
        let p = dir.join("throughput-vs-paths.svg");
        line_chart(
            &p,
            &format!(
                "Bulk {size} throughput vs paths sprayed over, +0..{SPRAY_SPREAD_US} µs (relay)"
            ),
            "paths (round-robin per packet; 1 = no spraying)",
            "Gbit/s",
            true,
            &s,
            &|v: &f64| format!("{v:.0}"),
        )?;
        out.push(p);
    }
    let s = series(
        results,
        |c| reorder_of(c, Workload::RequestResponse),
        |s| s.p99_us,
    );
    if s.iter().any(|(_, v)| !v.is_empty()) {
        let size = size_of(results, |c| reorder_of(c, Workload::RequestResponse));
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
