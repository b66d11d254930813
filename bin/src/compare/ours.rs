//! Our stack's side of a comparison: the cell's connections as perf apps over the io_uring
//! TUN path (`tunpair::QpsRun`: one driver and endpoint per side, however many connections),
//! every connection's messages verified, their figures summed into one [`RunRecord`]. The
//! same for both of our rows: [`Stack::Ours`] asks for per-segment framing, [`Stack::OursSeq`]
//! for S framing (its devices have TSO: `Cell::offload_for`, set by `run_cell`).

use super::{Cell, OursDetail, RunRecord, Stack, StackDetail, Workload};
use bth_perf::tunpair::{Admission, PairRun, QpsRun};
use bth_perf::{aggregate, PerfConfig, PerfReport};
use bth_testbed::topology::TwoNs;
use std::io;
use std::time::{Duration, Instant};

/// How long one run of ours may take before it counts as failed.
const LIMIT: Duration = Duration::from_secs(180);

/// One connection's one-way (bulk) or round-trip (request/response) latencies, and the
/// instants its first message was posted and its last one completed.
fn timings(cell: &Cell, p: &PairRun) -> (Vec<Duration>, Instant, Instant) {
    let (c, s) = (&p.client, &p.server);
    let at = |base: Instant, t: Duration| base + t;
    let start = c.report.posted.first().map_or(c.base, |&t| at(c.base, t));
    match cell.workload {
        Workload::RequestResponse => (c.report.latencies.clone(), start, start + c.report.elapsed),
        Workload::Bulk => {
            // One way: posted at the client to complete at the server, on one clock.
            let lat = s
                .report
                .arrived
                .iter()
                .filter_map(|&(i, t)| {
                    let p = *c.report.posted.get(i as usize)?;
                    Some(at(s.base, t).saturating_duration_since(at(c.base, p)))
                })
                .collect();
            let end = s.report.arrived.iter().map(|&(_, t)| at(s.base, t)).max();
            (lat, start, end.unwrap_or(start))
        }
    }
}

/// One run of ours (`stack`: [`Stack::Ours`] or [`Stack::OursSeq`]) in `cell`: its
/// connections at once, every message verified, in the framing `stack` asks for, which every
/// connection must have run.
pub(super) fn run(ns: &TwoNs, cell: &Cell, stack: Stack, run: usize) -> io::Result<RunRecord> {
    let q = QpsRun {
        cfg: PerfConfig {
            framing: stack.framing(),
            ..cell.perf_config()
        },
        qps: cell.qps,
        admission: Admission {
            enforce: cell.admission,
            admit: cell.admit,
        },
    };
    let r = q.run(ns, LIMIT)?;
    let mut rec = RunRecord::empty(&cell.id, stack, run);
    let (mut latencies, mut start, mut end) = (Vec::new(), None::<Instant>, None::<Instant>);
    let mut ooo = 0;
    // S framing runs only where both hellos asked for it (plain: no framing at all).
    let want_seq = stack == Stack::OursSeq && !cell.plain;
    for p in &r.pairs {
        let (c, s) = (&p.client.report, &p.server.report);
        if let Some(e) = c.errors.iter().chain(&s.errors).next() {
            return Err(io::Error::other(e.clone()));
        }
        if (c.seq_framed, s.seq_framed) != (want_seq, want_seq) {
            return Err(io::Error::other(format!(
                "S framing: asked {want_seq}, ran client {} / server {}",
                c.seq_framed, s.seq_framed
            )));
        }
        let verified = c.verified + s.verified;
        if verified != c.messages {
            return Err(io::Error::other(format!(
                "{verified} of {} messages verified",
                c.messages
            )));
        }
        let (lat, st, en) = timings(cell, p);
        latencies.extend(lat);
        start = Some(start.map_or(st, |x| x.min(st)));
        end = Some(end.map_or(en, |x| x.max(en)));
        rec.messages += c.messages;
        rec.verified += verified;
        rec.bytes += c.bytes;
        // Each connection's largest, added: an upper bound on what was held at once.
        rec.rx_held_max += p.server.held_max;
        ooo += p.server.ooo_placed;
    }
    // Each side's counters summed over its connections.
    let sum = |side: fn(&PairRun) -> &PerfReport| {
        let reports: Vec<PerfReport> = r.pairs.iter().map(|p| side(p).clone()).collect();
        aggregate(&reports)
    };
    let (client, server) = (sum(|p| &p.client.report), sum(|p| &p.server.report));
    let (cr, sr) = (client.recovery, server.recovery);
    rec.elapsed_s = end
        .zip(start)
        .map_or(0.0, |(e, s)| e.saturating_duration_since(s).as_secs_f64());
    rec.cpu_client_s = r.client_cpu.as_secs_f64();
    rec.cpu_server_s = r.server_cpu.as_secs_f64();
    rec.retrans = cr.retransmits + sr.retransmits;
    rec.client_retrans = cr.retransmits;
    rec.server_retrans = sr.retransmits;
    // The stacks' own TUN devices (gone when the run ends, so read by each side's thread);
    // `run_cell` adds the topology's devices.
    rec.device_drops = r.device_drops;
    // A tcp_bth data segment carries the MSS less the option area.
    let option_area = tcp_bth::wire::MAX_OPTIONS_LEN as u32;
    rec.seg_payload = (!cell.plain)
        .then(|| {
            r.pairs
                .first()
                .map(|p| u32::from(p.client.mss).saturating_sub(option_area))
        })
        .flatten();
    let (cc, sc) = (client.counters, server.counters);
    rec.detail = Some(StackDetail::Ours(Box::new(OursDetail {
        client_thread: r.client_thread,
        server_thread: r.server_thread,
        spurious: cr.spurious_retransmits + sr.spurious_retransmits,
        client_recovery: cr,
        server_recovery: sr,
        client_path: client.path.summary(),
        server_path: server.path.summary(),
        ooo_placed: ooo,
        grant_holds: r.grant_holds,
        gso_sent: cc.gso_sent + sc.gso_sent,
        gso_segments: cc.gso_segments + sc.gso_segments,
        super_segments_in: cc.super_segments_in + sc.super_segments_in,
        seq_framed: want_seq,
        congestion: r.congestion.into(),
    })));
    rec.fill_rates(latencies);
    Ok(rec)
}
