//! The MTU sweep: bulk 1 MiB SEND over veth at each MTU, every device of the topology at that
//! MTU (`TwoNs::create_mtu`), with the path's ceiling measured in the same topology
//! ([`path_ceiling`](super::path_ceiling)) — ceiling, kernel TCP and ours side by side, and
//! ours/ceiling beside ours/kernel (`render::mtu_markdown`, the `throughput-vs-mtu` chart).
//! `bth-compare --mtu 1500,9000,65000` runs it alone ([`mtu_plan`]); the full plan has it at
//! [`FULL_MTUS`] ([`sweep_cells`]).

use super::path_ceiling::{measure, payload_per_packet, CeilingSpec};
use super::{Cell, Link, Plan, RunRecord, Stack, StackDetail, Workload};
use bth_testbed::topology::TwoNs;
use std::io;

/// The MTUs of the full plan: Ethernet's, RoCE's 4096, jumbo frames, and 65000 (near the
/// largest IPv4 packet; the cookie MSS table of the core has 64960 = 65000 − 40).
pub const FULL_MTUS: [u32; 4] = [1500, 4096, 9000, 65_000];

/// The sweep's message size: 1 MiB, bulk.
pub const MTU_SWEEP_SIZE: u32 = 1 << 20;

/// Messages per run at MTU 1500: the full plan's bulk 1 MiB count, and `--quick`'s. Larger
/// MTUs move more ([`count_at`]).
const COUNT: u64 = 256;
const QUICK_COUNT: u64 = 32;

/// Messages per run at `mtu` for `count` at 1500: twice as many from 4096, four times from
/// 9000 and eight times from 32000, so that a run of ours lasts about as long at every MTU
/// (0.5–1.1 s in the run of 06:32). With 256 at every MTU a run of ours took 0.2 s at 9000 and 0.07 s at 65000,
/// and kernel TCP's about 0.05 s: one stall of this shared machine (one run at 9000 moved
/// 5.6 Gbit/s against 10.1 and 10.4) weighed on a whole run. `--quick` keeps its count.
pub fn count_at(mtu: u32, count: u64) -> u64 {
    let scale = match mtu {
        m if m >= 32_000 => 8,
        m if m >= 8_000 => 4,
        m if m >= 4_000 => 2,
        _ => 1,
    };
    count * scale
}

/// The ceiling's warm-up and window: 1 s measured after 0.2 s (`--quick`: 0.3 s after 0.1 s).
pub(super) const CEILING: CeilingSpec = CeilingSpec {
    warmup_ms: 200,
    measure_ms: 1000,
};
const QUICK_CEILING: CeilingSpec = CeilingSpec {
    warmup_ms: 100,
    measure_ms: 300,
};

/// The sweep's cells: bulk 1 MiB over veth at each MTU of `mtus` (duplicates run once),
/// `count` messages a run at MTU 1500 and more at larger ones ([`count_at`]; `quick`: `count`
/// at every MTU), the path's ceiling measured in each run.
pub fn sweep_cells(mtus: &[u32], count: u64, quick: bool) -> Vec<Cell> {
    let spec = if quick { QUICK_CEILING } else { CEILING };
    let mut cells: Vec<Cell> = Vec::new();
    for &mtu in mtus {
        let n = if quick { count } else { count_at(mtu, count) };
        let c = Cell::new(Workload::Bulk, MTU_SWEEP_SIZE, n, Link::Veth)
            .with_mtu(mtu)
            .with_ceiling(spec);
        if !cells.iter().any(|x| x.id == c.id) {
            cells.push(c);
        }
    }
    cells
}

/// `bth-compare --mtu …`: the sweep alone at `mtus` (3 runs, or 2 with `quick`, which also
/// moves fewer bytes and measures the ceiling for less time).
pub fn mtu_plan(mtus: &[u32], quick: bool) -> Plan {
    let count = if quick { QUICK_COUNT } else { COUNT };
    Plan {
        quick,
        runs: if quick { 2 } else { 3 },
        cells: sweep_cells(mtus, count, quick),
    }
}

/// One ceiling run in `ns` (the cell's topology, at its MTU) as a run record: packets as
/// messages (each checked by length, header and sequence number; the GSO probe's segments),
/// payload-equivalent bytes; `stack` says which probe ([`Stack::ack_clock`],
/// [`Stack::CeilingGso`]).
pub(super) fn run_ceiling(
    ns: &TwoNs,
    cell: &Cell,
    stack: Stack,
    run: usize,
) -> io::Result<RunRecord> {
    let spec = cell
        .ceiling
        .ok_or_else(|| io::Error::other(format!("{} measures no ceiling", cell.id)))?;
    let c = match stack {
        Stack::CeilingGso => super::gso_ceiling::measure_gso(ns, &spec)?,
        _ => measure(ns, &spec, stack.ack_clock())?,
    };
    if c.packets == 0 {
        return Err(io::Error::other("no packet arrived in the measured window"));
    }
    let mut r = RunRecord {
        messages: c.packets,
        verified: c.packets,
        bytes: c.payload_bytes(),
        elapsed_s: c.elapsed_s,
        cpu_client_s: c.sender_cpu_s,
        cpu_server_s: c.receiver_cpu_s,
        seg_payload: Some(payload_per_packet(c.mtu)),
        ..RunRecord::empty(&cell.id, stack, run)
    };
    r.fill_rates(Vec::new());
    r.detail = Some(StackDetail::Ceiling { path: c });
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::super::{plan, summarize, Plan};
    use super::*;
    use crate::compare::{AckClock, PathCeiling};

    #[test]
    fn the_sweep_has_one_ceiling_cell_per_mtu_and_the_full_plan_has_it() {
        let p = mtu_plan(&[1500, 9000, 65_000, 9000], false);
        let ids: Vec<&str> = p.cells.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "bulk-1MiB-veth",
                "bulk-1MiB-veth-mtu9000",
                "bulk-1MiB-veth-mtu65000"
            ]
        );
        assert!(p
            .cells
            .iter()
            .all(|c| c.ceiling.is_some() && c.size == 1 << 20));
        assert_eq!(
            p.cells.iter().map(|c| c.mtu).collect::<Vec<_>>(),
            [1500, 9000, 65_000]
        );
        // Per run of a cell: the ceiling bare, under our ACK clock and with GSO
        // super-packets, kernel, ours, ours S.
        assert_eq!(p.total_runs(), 3 * 3 * 6);
        assert_eq!(p.ours_seq_runs(), 3 * 3);
        assert_eq!(p.ceiling_runs(), 3 * 3 * 3);
        // Without checksum offload (TSO needs it) no GSO ceiling runs.
        let mut no_csum = p.clone();
        for c in &mut no_csum.cells {
            c.csum_offload = false;
            assert!(!c.stacks().contains(&Stack::CeilingGso));
            assert_eq!(c.offload_for(Stack::OursSeq), c.offload());
        }
        assert_eq!(no_csum.ceiling_runs(), 3 * 3 * 2);
        assert_eq!(
            p.cells[0].offload_for(Stack::CeilingGso),
            bth_io::tun::Offload::Segmentation
        );
        assert_eq!(
            p.cells[0].offload_for(Stack::Ours),
            bth_io::tun::Offload::Checksum
        );
        let d = p.describe();
        assert!(
            d.contains("MTU 9000 B") && d.contains("path's ceiling"),
            "{d}"
        );
        // Larger MTUs move more a run (a run lasts about as long); --quick does not.
        let counts: Vec<u64> = p.cells.iter().map(|c| c.count).collect();
        assert_eq!(counts, [COUNT, 4 * COUNT, 8 * COUNT]);
        let q = mtu_plan(&[4096], true);
        assert_eq!((q.runs, q.cells[0].count), (2, QUICK_COUNT));
        assert!(q.describe().contains("MTU 4 KiB"), "{}", q.describe());

        // The full plan: its 1500-byte cell is bulk-1MiB-veth with the ceiling, once over
        // veth at each MTU.
        let full = plan(false);
        for mtu in FULL_MTUS {
            let c: Vec<&Cell> = full
                .cells
                .iter()
                .filter(|c| c.mtu == mtu && c.ceiling.is_some() && c.link == Link::Veth)
                .collect();
            assert_eq!(c.len(), 1, "MTU {mtu}");
            assert_eq!(c[0].size, 1 << 20);
        }
        // Through the relay: the clean relay and every spraying cell, bulk, nothing else
        // (no cell that loses or reorders packets on purpose, no request/response cell).
        let relayed: Vec<&str> = full
            .cells
            .iter()
            .filter(|c| c.ceiling.is_some() && c.link != Link::Veth)
            .map(|c| c.id.as_str())
            .collect();
        assert_eq!(
            relayed,
            [
                "bulk-1MiB-relay-r0-l0",
                "bulk-1MiB-relay-spray2-200us",
                "bulk-1MiB-relay-spray4-200us",
                "bulk-1MiB-relay-spray8-200us",
                "bulk-1MiB-relay-spray16-200us",
                "bulk-1MiB-relay-r0-l0-mtu9000",
                "bulk-1MiB-relay-spray4-200us-mtu9000",
                "bulk-1MiB-relay-r0-l0-mtu65000",
                "bulk-1MiB-relay-spray4-200us-mtu65000",
            ]
        );
        assert_eq!(
            full.ceiling_runs(),
            (FULL_MTUS.len() + relayed.len()) * full.runs * 3
        );
        assert!(full
            .cells
            .iter()
            .any(|c| c.id == "bulk-1MiB-veth" && c.ceiling.is_some()));
        // `--qps` leaves the ceiling to the one-connection cell.
        let q = mtu_plan(&[9000], false).with_qps(&[1, 2]);
        assert_eq!(q.cells.len(), 2);
        assert!(q.cells[0].ceiling.is_some() && q.cells[1].ceiling.is_none());
        assert_eq!(q.cells[1].id, "bulk-1MiB-veth-mtu9000-q2");
    }

    #[test]
    fn summaries_give_ours_over_ceiling_and_over_kernel() {
        let cells = mtu_plan(&[1500, 9000], true).cells;
        let mut runs = Vec::new();
        for c in &cells {
            for run in 0..2 {
                runs.push(RunRecord::synthetic(&c.id, Stack::Ceiling, run, 8.0));
                runs.push(RunRecord::synthetic(&c.id, Stack::CeilingAcked, run, 5.0));
                runs.push(RunRecord::synthetic(&c.id, Stack::CeilingGso, run, 12.0));
                runs.push(RunRecord::synthetic(&c.id, Stack::Kernel, run, 4.0));
                runs.push(RunRecord::synthetic(&c.id, Stack::Ours, run, 2.0));
                runs.push(RunRecord::synthetic(&c.id, Stack::OursSeq, run, 6.0));
            }
        }
        let plan = Plan {
            quick: true,
            runs: 2,
            cells,
        };
        let r = summarize(&plan, &runs);
        for c in &r {
            assert_eq!(c.ceiling.as_ref().map(|s| s.runs_ok), Some(2));
            assert_eq!(c.ours_over_ceiling, Some(0.25));
            assert_eq!(c.ceiling_acked.as_ref().map(|s| s.runs_ok), Some(2));
            assert_eq!(c.ours_over_ceiling_acked, Some(0.4));
            assert_eq!(c.ours_over_kernel, Some(0.5));
            // Ours S beside ours: its own over each, and over ours.
            assert_eq!(c.ours_seq.as_ref().map(|s| s.runs_ok), Some(2));
            assert_eq!(c.ours_seq_over_ceiling, Some(0.75));
            assert_eq!(c.ours_seq_over_ceiling_acked, Some(1.2));
            assert_eq!(c.ceiling_gso.as_ref().map(|s| s.runs_ok), Some(2));
            assert_eq!(c.ours_seq_over_ceiling_gso, Some(0.5));
            assert_eq!(c.ours_over_ceiling_gso, Some(2.0 / 12.0));
            assert_eq!(c.ours_seq_over_kernel, Some(1.5));
            assert_eq!(c.ours_seq_over_kernel_runs, Some((1.5, 1.5)));
            assert_eq!(c.ours_seq_over_ours, Some(3.0));
        }
        // A cell without the ceiling has no ceiling ratio.
        let plain = Plan {
            quick: true,
            runs: 1,
            cells: vec![Cell::new(Workload::Bulk, 4096, 1, Link::Veth)],
        };
        let one = vec![
            RunRecord::synthetic(&plain.cells[0].id, Stack::Kernel, 0, 4.0),
            RunRecord::synthetic(&plain.cells[0].id, Stack::Ours, 0, 1.0),
        ];
        let r = summarize(&plain, &one);
        assert!(r[0].ceiling.is_none() && r[0].ours_over_ceiling.is_none());
        assert!(r[0].ceiling_acked.is_none() && r[0].ours_over_ceiling_acked.is_none());
        assert!(r[0].ceiling_gso.is_none() && r[0].ours_seq_over_ceiling_gso.is_none());
        assert_eq!(r[0].ratio(), Some(0.25));
        // A cell that runs ours S has its row even with no run of it: 0 runs, no ratio.
        let seq = r[0].ours_seq.as_ref().expect("ours S's summary");
        assert_eq!((seq.runs_ok, seq.runs_failed), (0, 0));
        assert!(r[0].ours_seq_over_kernel.is_none() && r[0].ours_seq_over_ours.is_none());
        assert_eq!(crate::compare::render::mtu_markdown(&r), "");
    }

    #[test]
    fn the_mtu_table_has_six_rows_per_mtu_and_the_ratios_on_ours_and_ours_s() {
        let cells = mtu_plan(&[1500, 65_000], true).cells;
        let mut runs = Vec::new();
        for c in &cells {
            for (stack, gbps, acks) in [
                (Stack::Ceiling, 10.0, AckClock::None),
                (Stack::CeilingAcked, 8.0, AckClock::Every(2)),
            ] {
                let mut ceiling = RunRecord::synthetic(&c.id, stack, 0, gbps);
                ceiling.seg_payload = Some(payload_per_packet(c.mtu));
                let path = PathCeiling {
                    mtu: c.mtu,
                    packets: 1000,
                    ip_bytes: 1000 * u64::from(c.mtu),
                    lost: 3,
                    foreign: 0,
                    elapsed_s: 0.001,
                    sender_cpu_s: 0.0,
                    receiver_cpu_s: 0.0,
                    acks,
                    acks_sent: if acks == AckClock::None { 0 } else { 500 },
                    acks_received: if acks == AckClock::None { 0 } else { 499 },
                    gso_size: None,
                    super_packets: 0,
                };
                ceiling.detail = Some(StackDetail::Ceiling { path });
                runs.push(ceiling);
            }
            // The GSO ceiling: 1000 segments in 20 super-packets read whole.
            let mut gso = RunRecord::synthetic(&c.id, Stack::CeilingGso, 0, 20.0);
            gso.seg_payload = Some(payload_per_packet(c.mtu));
            let path = PathCeiling {
                mtu: c.mtu,
                packets: 1000,
                ip_bytes: 1000 * u64::from(c.mtu),
                lost: 0,
                foreign: 0,
                elapsed_s: 0.001,
                sender_cpu_s: 0.0,
                receiver_cpu_s: 0.0,
                acks: AckClock::None,
                acks_sent: 0,
                acks_received: 0,
                gso_size: Some(payload_per_packet(c.mtu)),
                super_packets: 20,
            };
            gso.detail = Some(StackDetail::Ceiling { path });
            runs.push(gso);
            runs.push(RunRecord::synthetic(&c.id, Stack::Kernel, 0, 4.0));
            let mut ours = RunRecord::synthetic(&c.id, Stack::Ours, 0, 1.0);
            ours.seg_payload = Some(c.mtu - 80);
            runs.push(ours);
            let mut seq = RunRecord::synthetic(&c.id, Stack::OursSeq, 0, 5.0);
            seq.seg_payload = Some(c.mtu - 80);
            runs.push(seq);
        }
        let plan = Plan {
            quick: true,
            runs: 1,
            cells,
        };
        let t = crate::compare::render::mtu_markdown(&summarize(&plan, &runs));
        let rows: Vec<&str> = t.lines().collect();
        assert_eq!(rows.len(), 2 + 6 * 2, "{t}");
        assert!(
            rows[0].contains(
                "| ours/ceiling | ours/ceiling with ACKs | ours/GSO ceiling | ours/kernel |"
            ),
            "{t}"
        );
        let want = [
            "| 1500 B | bulk-1MiB-veth | ceiling (raw packets, no TCP) | 1 | 10.000 | 12.000 | 1250 (3) | 1420 B |",
            "| 1500 B | bulk-1MiB-veth | ceiling, an ACK back per 2 packets (no TCP) | 1 | 8.000 | 12.000 | 1000 (3; 500000 back) | 1420 B |",
            "| 1500 B | bulk-1MiB-veth | kernel | 1 | 4.000 | – | – | – |",
            "| 1500 B | bulk-1MiB-veth | ceiling, 64 KiB GSO super-packets (no TCP) | 1 | 20.000 | 12.000 | 2500 (0; 20000 whole) | 1420 B |",
            "| 1500 B | bulk-1MiB-veth | ours | 1 | 1.000 | – | – | 1420 B | 2.00 / 1.00 | – | 0.10× | 0.12× | 0.05× | 0.25× |",
            "| 1500 B | bulk-1MiB-veth | ours S | 1 | 5.000 | – | – | 1420 B | 2.00 / 1.00 | – | 0.50× | 0.62× | 0.25× | 1.25× |",
            "| 65000 B | bulk-1MiB-veth-mtu65000 | ceiling (raw packets, no TCP) | 1 | 10.000 | 520.000 |",
            "| 65000 B | bulk-1MiB-veth-mtu65000 | ours | 1 | 1.000 | – | – | 64920 B |",
        ];
        for w in want {
            assert!(rows.iter().any(|r| r.starts_with(w)), "{w}\n{t}");
        }
        // The ratios stand on ours' rows only.
        for r in &rows[2..] {
            let ours = r.contains("| ours |") || r.contains("| ours S |");
            assert_eq!(r.matches('×').count(), if ours { 4 } else { 0 }, "{r}");
        }
    }
}
