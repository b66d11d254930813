//! Our stack against our stack over the io_uring TUN data path, in a two-namespace topology
//! (`bth_tools::topology::TwoNs`): server in namespace A, client in B. The runner itself is
//! `bth_tools::tunpair::run_pair`, shared with `bth-compare`.

use bth_tools::perf::{PerfConfig, PerfReport};
use bth_tools::topology::TwoNs;
use std::time::Duration;

/// Run one perf exchange; returns (client report, server report). Panics on set-up failures.
pub fn run_perf(ns: &TwoNs, cfg: &PerfConfig) -> (PerfReport, PerfReport) {
    let r = bth_tools::tunpair::run_pair(ns, cfg, Duration::from_secs(600)).expect("perf run");
    (r.client.report, r.server.report)
}
