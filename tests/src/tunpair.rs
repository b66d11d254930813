//! Our stack against our stack over the io_uring TUN data path, in a two-namespace topology
//! (`bth_testbed::topology::TwoNs`): server in namespace A, client in B. The runner itself is
//! `bth_perf::tunpair::run_pair`, shared with `bth-compare`.

use bth_io::sim::LinkConfig;
use bth_perf::{PerfConfig, PerfReport};
use bth_testbed::topology::TwoNs;
use std::time::Duration;

/// Run one perf exchange; returns (client report, server report). Panics on set-up failures.
pub fn run_perf(ns: &TwoNs, cfg: &PerfConfig) -> (PerfReport, PerfReport) {
    let r = bth_perf::tunpair::run_pair(ns, cfg, Duration::from_secs(600)).expect("perf run");
    (r.client.report, r.server.report)
}

/// The impairment relay's link for the TUN tests: 20 µs each way, 0.5% loss, 5% reordering
/// (up to 100 µs), 0.1% duplication.
pub fn impaired_link() -> LinkConfig {
    LinkConfig::default()
        .with_delay(Duration::from_micros(20))
        .with_bandwidth_bps(0)
        .with_loss(0.005)
        .with_reorder(0.05, Duration::from_micros(100))
        .with_duplicate(0.001)
        .with_seed(9)
}
