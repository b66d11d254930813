//! The impairment relay's own ceiling. A relay cell compares our stack with kernel TCP only as
//! long as the relay (one userspace thread, one `read(2)` and one `write(2)` per packet or GSO
//! super-packet) is not what limits both. [`relay_ceiling`] runs the same kernel TCP bulk
//! workload over veth and through a relay without impairments, alternating the two (veth,
//! relay, veth, relay, …) so that the machine's load drifts over both alike: kernel TCP over
//! veth is the baseline, and the ratio says how much of it the relay lets through. A relay
//! cell whose two stacks both sit near the relay's figure measures the relay, not the stacks.
//!
//! Kernel TCP is the probe because it is the faster stack here and needs no help from ours.
//! The relay's devices offload segmentation, so kernel TCP hands the relay super-packets of up
//! to 64 KiB; the relay's counters still count MSS-sized segments, so
//! [`RelayCeiling::relay_pps`] is the rate of 1500-byte packets the relay stood in for, not
//! its system calls. Our stack sends MTU-sized packets, one system call each: its ceiling
//! through the relay is that of plain packets (`bth-compare --relay-ceiling` does not
//! measure it).

use super::{median, run_kernel, Cell, Link, RunRecord, Stack, Workload};
use crate::relay_args::{clean_relay_link, describe_link};
use bth_io::sim::LinkConfig;
use bth_testbed::pinning::Pinned;
use bth_testbed::topology::TwoNs;
use std::io;

/// Kernel TCP over veth and through the relay, run by run.
#[derive(Debug, Clone)]
pub struct RelayCeiling {
    /// The workload both links carried.
    pub cell: Cell,
    /// The relay's link.
    pub link: LinkConfig,
    /// Kernel runs over veth (failed runs carry their error).
    pub veth: Vec<RunRecord>,
    /// Kernel runs through the relay.
    pub relay: Vec<RunRecord>,
    /// Packets (MSS-sized segments, whether or not carried in GSO super-packets) the relay
    /// delivered, both directions, over all its runs (connection set-up and teardown
    /// included).
    pub relay_packets: u64,
    /// Packets the relay dropped (none unless `link` has loss, or a rate limit and a full
    /// queue).
    pub relay_dropped: u64,
}

fn median_gbps(runs: &[RunRecord]) -> Option<f64> {
    let ok: Vec<f64> = runs
        .iter()
        .filter(|r| r.error.is_none())
        .map(|r| r.gbps)
        .collect();
    (!ok.is_empty()).then(|| median(ok))
}

impl RelayCeiling {
    /// Median kernel throughput over veth, Gbit/s (`None` if every run failed).
    pub fn veth_gbps(&self) -> Option<f64> {
        median_gbps(&self.veth)
    }

    /// Median kernel throughput through the relay, Gbit/s.
    pub fn relay_gbps(&self) -> Option<f64> {
        median_gbps(&self.relay)
    }

    /// Relay over veth throughput: near 1, the relay keeps up with kernel TCP on veth; well
    /// below 1, the relay is the ceiling of every relay cell.
    pub fn ratio(&self) -> Option<f64> {
        let (v, r) = (self.veth_gbps()?, self.relay_gbps()?);
        (v > 0.0).then(|| r / v)
    }

    /// Packets per second the relay delivered while its runs ran (both directions).
    pub fn relay_pps(&self) -> Option<f64> {
        let busy: f64 = self.relay.iter().map(|r| r.elapsed_s).sum();
        (busy > 0.0).then(|| self.relay_packets as f64 / busy)
    }

    /// One line for a report.
    pub fn describe(&self) -> String {
        let f = |x: Option<f64>, unit: &str| x.map_or("failed".into(), |x| format!("{x:.3}{unit}"));
        format!(
            "relay ceiling ({} x {} bytes, kernel TCP on {}): veth {}, relay {}, relay/veth {}, \
             relay {} packets/s ({})",
            self.cell.count,
            self.cell.size,
            self.cell.kernel_cc,
            f(self.veth_gbps(), " Gbit/s"),
            f(self.relay_gbps(), " Gbit/s"),
            f(self.ratio(), ""),
            self.relay_pps().map_or("-".into(), |p| format!("{p:.0}")),
            describe_link(&self.link),
        )
    }
}

/// The workload of a ceiling run: `count` messages of `size` bytes, bulk (the relay's
/// throughput is the question, not its latency).
pub fn ceiling_cell(size: u32, count: u64) -> Cell {
    let mut cell = Cell::new(Workload::Bulk, size, count, Link::Veth);
    cell.id = format!("relay-ceiling-{}", super::size_label(size));
    cell
}

/// Run `cell` with kernel TCP `runs` times over veth and `runs` times through a relay with
/// `link` (`None`: the relay's defaults without impairments, what `--relay` alone gives),
/// alternating. The topologies are `{prefix}v-a`/`-b` and `{prefix}r-a`/`-b`, deleted on
/// return, on error too. With `cell.pin_relay` the relay's runs are pinned (`TwoNs::pin`),
/// the veth runs not. Needs CAP_NET_ADMIN.
pub fn relay_ceiling(
    prefix: &str,
    cell: &Cell,
    link: Option<LinkConfig>,
    runs: usize,
) -> io::Result<RelayCeiling> {
    let link = link.unwrap_or_else(|| clean_relay_link(1));
    let veth = TwoNs::create(&format!("{prefix}v"), None)?;
    let mut relay = TwoNs::create(&format!("{prefix}r"), Some(link.clone()))?;
    let mut out = RelayCeiling {
        cell: cell.clone(),
        link,
        veth: Vec::new(),
        relay: Vec::new(),
        relay_packets: 0,
        relay_dropped: 0,
    };
    for run in 0..runs {
        let port = 5201 + run as u16;
        for (ns, into) in [(&veth, &mut out.veth), (&relay, &mut out.relay)] {
            let pinned = super::pin(ns, cell)?;
            let mut r = run_kernel(ns, cell, run, port)
                .unwrap_or_else(|e| RunRecord::failed(cell, Stack::Kernel, run, &e));
            r.relay_pinned = pinned.as_ref().map(Pinned::cpus);
            into.push(r);
        }
    }
    if let Some(s) = relay.stop_relay() {
        out.relay_packets = s.a_to_b.delivered + s.b_to_a.delivered;
        out.relay_dropped = s.a_to_b.dropped() + s.b_to_a.dropped();
    }
    Ok(out)
}
