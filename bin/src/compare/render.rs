//! Rendering a comparison: the Markdown tables (every cell; the incast cells; the path's
//! ceiling beside the stacks per MTU), the JSON file of raw runs, the SVG charts ([`charts`],
//! in `charts.rs`). Each table has a row for ours in S framing ([`Stack::OursSeq`]) below
//! ours' wherever the cell ran it, with its own ratios.

pub use super::charts::charts;
use super::{path_ceiling, CellResult, Plan, RunRecord, Stack, Summary, Workload};
use bth_perf::units::{bytes, human_size, micros};
use serde::Serialize;

fn opt_us(v: Option<f64>) -> String {
    v.map_or("–".into(), micros)
}

/// Which congestion control each stack ran, from the run records (each distinct name once).
pub fn congestion_line(records: &[super::RunRecord]) -> String {
    let names = |ours: bool| {
        let mut v: Vec<&str> = records
            .iter()
            .filter(|r| r.stack.is_ours() == ours && !r.stack.is_ceiling())
            .filter_map(|r| r.congestion())
            .collect();
        v.sort_unstable();
        v.dedup();
        if v.is_empty() {
            "–".to_string()
        } else {
            v.join(", ")
        }
    };
    format!(
        "congestion control: kernel TCP {} (set on every socket, TCP_CONGESTION), ours {}\n",
        names(false),
        names(true)
    )
}

/// Where the relay cells' threads ran if they were pinned (`--pin-relay`; each distinct
/// placement once), or nothing.
pub fn pinning_line(records: &[super::RunRecord]) -> String {
    let mut pinned: Vec<String> = records
        .iter()
        .filter_map(|r| r.relay_pinned.as_ref().map(|p| p.describe()))
        .collect();
    pinned.sort_unstable();
    pinned.dedup();
    if pinned.is_empty() {
        String::new()
    } else {
        format!("relay cells pinned (--pin-relay): {}\n", pinned.join("; "))
    }
}

fn stack_name(c: &CellResult, s: &Summary) -> &'static str {
    match s.stack {
        Stack::Kernel => "kernel",
        Stack::Ours if c.cell.plain => "ours (plain)",
        Stack::Ours if !c.cell.admission => "ours (no admission)",
        Stack::Ours => "ours",
        Stack::OursSeq if !c.cell.admission => "ours S (no admission)",
        Stack::OursSeq => "ours S",
        Stack::Ceiling => "ceiling (raw packets, no TCP)",
        Stack::CeilingAcked => "ceiling, an ACK back per 2 packets (no TCP)",
        Stack::CeilingGso => "ceiling, 64 KiB GSO super-packets (no TCP)",
    }
}

/// Our two rows of a cell with each one's ratio over kernel TCP ([`ratio`]): ours
/// (per-segment framing) and, where the cell ran it, ours S (S framing, super-segments).
fn ours_rows(c: &CellResult) -> Vec<(&Summary, String)> {
    let mut v = vec![(&c.ours, ratio(c.ours_over_kernel, c.ours_over_kernel_runs))];
    if let Some(seq) = &c.ours_seq {
        v.push((
            seq,
            ratio(c.ours_seq_over_kernel, c.ours_seq_over_kernel_runs),
        ));
    }
    v
}

fn runs(s: &Summary) -> String {
    if s.runs_failed > 0 {
        format!("{} ({} failed)", s.runs_ok, s.runs_failed)
    } else {
        s.runs_ok.to_string()
    }
}

fn row(c: &CellResult, s: &Summary, ratio: String) -> String {
    let name = stack_name(c, s);
    let runs = runs(s);
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
    let name = match s.kernel_max_outq {
        Some(q) if c.cell.workload == Workload::Bulk => format!("{name} (outq {})", bytes(q)),
        _ => name.to_string(),
    };
    format!(
        "| {} | {name} | {runs} | {:.3} | {:.0} | {} | {} | {} | {:.2} / {:.2} / {} | {} | {held} | {retrans} | {detections} | {} | {ratio} |\n",
        c.cell.id,
        s.gbps,
        s.msgs_per_sec,
        opt_us(s.p50_us),
        opt_us(s.p99_us),
        opt_us(s.p999_us),
        s.cpu_client_s_per_gb,
        s.cpu_server_s_per_gb,
        machine_cpu(s),
        share_of_core(s.relay_busy),
        opt_count(s.device_drops),
    )
}

/// The Markdown table: three rows per cell (kernel; ours, per-segment framing; ours S, S
/// framing with segmentation offload, absent from plain cells), on each of ours' rows its
/// ratio over kernel TCP (with the range of the single runs' ratios: `ratio`);
/// incast cells are left to [`incast_markdown`].
/// Retransmissions are shown as the median total, then each side's median (what the client
/// and what the server sent again: in request/response the server's are replies); our RACK
/// loss detections, RTOs and tail loss probes are both sides' together. "Dropped by devices"
/// is the median of the packets the network devices dropped in a run (`RunRecord::device_drops`);
/// "relay busy" the median share of a core the relay's thread used during a run's transfer
/// (the ceiling's: during its run; `RunRecord::relay_busy`; "–" over veth).
pub fn markdown(results: &[CellResult]) -> String {
    let mut s = String::from(
        "| cell | stack | runs | Gbit/s | msg/s | p50 | p99 | p99.9 | CPU s/GB client / server / machine (softirq) | relay busy | rx held outside posted buffers (max) | retrans (client / server) | RACK / RTO / TLP | dropped by devices | ours/kernel Gbit/s |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for c in results.iter().filter(|c| !c.cell.is_incast()) {
        s += &row(c, &c.kernel, String::new());
        for (sm, ratio) in ours_rows(c) {
            s += &row(c, sm, ratio);
        }
    }
    s
}

/// What held ours' sender back, per cell and row of ours that recorded it (empty if none
/// did): each state's median share of the sender's busy time ([`super::Summary::sender_held`]).
/// A state that holds it most of the time in front of a long queue (the `path` figures'
/// smoothed RTT far above the minimum) sets the queue's length, not the rate
/// (`docs/results.md`, "What held ours' sender back").
pub fn limits_markdown(results: &[CellResult]) -> String {
    let rows: Vec<String> = results
        .iter()
        .flat_map(|c| ours_rows(c).into_iter().map(move |(sm, _)| (c, sm)))
        .filter_map(|(c, sm)| {
            let shares = sm.sender_held?;
            let cols: Vec<String> = shares
                .iter()
                .map(|v| format!("{:.0} %", v * 100.0))
                .collect();
            Some(format!(
                "| {} | {} | {} |\n",
                c.cell.id,
                stack_name(c, sm),
                cols.join(" | ")
            ))
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let names = bth_perf::LimitsSummary::STATES;
    let mut s = format!(
        "| cell | stack | {} |\n|---|---|{}\n",
        names.join(" | "),
        "---|".repeat(names.len())
    );
    s.extend(rows);
    s
}

/// A thread's CPU time over wall time, as a share of one core ("–" where there is none).
fn share_of_core(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{:.0} %", v * 100.0))
}

/// The ratio of the medians, and in brackets the range of the single runs' ratios
/// ([`CellResult::ours_over_kernel_runs`]) where there are two runs or more of each.
fn ratio(median: Option<f64>, runs: Option<(f64, f64)>) -> String {
    match (median, runs) {
        (Some(r), Some((lo, hi))) => format!("{r:.2}× ({lo:.2}–{hi:.2})"),
        (r, _) => times(r),
    }
}

fn times(r: Option<f64>) -> String {
    r.map_or("–".into(), |r| format!("{r:.2}×"))
}

/// The path's ceiling beside the stacks, per cell that measured it (empty if none did): the
/// MTU sweep over veth and the relay cells that lose nothing on purpose. Six rows a cell —
/// ceiling, ceiling with ACKs, ceiling with GSO super-packets, kernel, ours, ours S — with
/// ours/ceiling, ours/ceiling with ACKs, ours/GSO ceiling and ours/kernel on each of ours'
/// rows (ours S: its own over each). Gbit/s is payload for every row: the stacks' message
/// bytes, the ceiling's packets (the GSO ceiling's segments) × the payload of one full-MTU
/// segment of ours; IP Gbit/s and packets/s (with the packets the path lost, and the GSO
/// ceiling's super-packets read whole) are the ceilings' own; "relay busy" is each row's, as
/// in [`markdown`].
pub fn mtu_markdown(results: &[CellResult]) -> String {
    let mut s = String::new();
    for c in results {
        let Some(ceiling) = &c.ceiling else { continue };
        if s.is_empty() {
            s += "| MTU | cell | row | runs | Gbit/s (payload) | IP Gbit/s | packets/s (packets lost in the window; ACK packets/s back; super-packets/s read whole) | payload per full segment | CPU s/GB send / receive (ceilings: each thread's share of a core, and what bounded the probe) | relay busy | ours/ceiling | ours/ceiling with ACKs | ours/GSO ceiling | ours/kernel |\n\
                  |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
        }
        let mtu = human_size(u64::from(c.cell.mtu));
        let none = || ["", "", "", ""].map(String::from);
        let rows = [
            Some((ceiling, none())),
            c.ceiling_acked.as_ref().map(|a| (a, none())),
            c.ceiling_gso.as_ref().map(|g| (g, none())),
            Some((&c.kernel, none())),
            Some((
                &c.ours,
                [
                    times(c.ours_over_ceiling),
                    times(c.ours_over_ceiling_acked),
                    times(c.ours_over_ceiling_gso),
                    times(c.ours_over_kernel),
                ],
            )),
            c.ours_seq.as_ref().map(|seq| {
                (
                    seq,
                    [
                        times(c.ours_seq_over_ceiling),
                        times(c.ours_seq_over_ceiling_acked),
                        times(c.ours_seq_over_ceiling_gso),
                        times(c.ours_seq_over_kernel),
                    ],
                )
            }),
        ];
        for (sm, ratios) in rows.into_iter().flatten() {
            let ceiling_only = |v: Option<String>| v.unwrap_or_else(|| "–".into());
            let acks = sm
                .acks_per_sec
                .map_or(String::new(), |a| format!("; {a:.0} back"));
            let whole = sm
                .super_packets_per_sec
                .map_or(String::new(), |w| format!("; {w:.0} whole"));
            let pps = sm
                .lost
                .map(|lost| format!("{:.0} ({lost:.0}{acks}{whole})", sm.msgs_per_sec));
            let bound = sm.cores.map_or(String::new(), |(snd, rcv)| {
                let why = path_ceiling::bound(snd, rcv, sm.relay_busy, sm.lost.unwrap_or(0.0));
                format!(" (cores {snd:.2} / {rcv:.2}: {why})")
            });
            s += &format!(
                "| {mtu} | {} | {} | {} | {:.3} | {} | {} | {} | {:.2} / {:.2}{bound} | {} | {} | {} | {} | {} |\n",
                c.cell.id,
                stack_name(c, sm),
                runs(sm),
                sm.gbps,
                ceiling_only(sm.ip_gbps.map(|g| format!("{g:.3}"))),
                ceiling_only(pps),
                sm.seg_payload.map_or("–".into(), |p| format!("{p} B")),
                sm.cpu_client_s_per_gb,
                sm.cpu_server_s_per_gb,
                share_of_core(sm.relay_busy),
                ratios[0],
                ratios[1],
                ratios[2],
                ratios[3],
            );
        }
    }
    s
}

/// Machine-wide CPU s/GB with its softirq share, or "–".
fn machine_cpu(s: &Summary) -> String {
    match (s.cpu_machine_s_per_gb, s.softirq_s_per_gb) {
        (Some(m), Some(si)) => format!("{m:.2} ({si:.2})"),
        _ => "–".into(),
    }
}

fn opt_count(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.0}"))
}

/// The incast cells' table (empty if there are none), kernel, ours and ours S per cell:
/// aggregate throughput, message
/// completion times (post at the client to completion at the server), the relay's queue
/// drops in the run, retransmissions, RTOs and grant holds (ours), medians over runs.
pub fn incast_markdown(results: &[CellResult]) -> String {
    let cells: Vec<&CellResult> = results.iter().filter(|c| c.cell.is_incast()).collect();
    if cells.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "| cell | stack | runs | Gbit/s | p50 | p99 | p99.9 | relay queue drops | retrans (client / server) | RTOs | grant holds | ours/kernel Gbit/s |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for c in cells {
        let rows = std::iter::once((&c.kernel, String::new())).chain(ours_rows(c));
        for (sm, ratio) in rows {
            s += &format!(
                "| {} | {} | {} | {:.3} | {} | {} | {} | {} | {:.0} ({:.0} / {:.0}) | {} | {} | {ratio} |\n",
                c.cell.id,
                stack_name(c, sm),
                runs(sm),
                sm.gbps,
                opt_us(sm.p50_us),
                opt_us(sm.p99_us),
                opt_us(sm.p999_us),
                opt_count(sm.relay_queue_drops),
                sm.retrans,
                sm.client_retrans,
                sm.server_retrans,
                opt_count(sm.rto_losses),
                opt_count(sm.grant_holds),
            );
        }
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
