//! One report for a run of several connections (`-q N`): each connection has its own app and
//! report; the run's figures are their sum, as perftest reports a multi-QP run.

use super::PerfReport;

/// The sum of the connections' reports: messages, bytes, verified messages and counters
/// added; latencies merged (sorted); per-millisecond bytes added on the common driver clock;
/// elapsed the longest; errors of all; the peer's counters added over the connections that
/// sent them; the path samples of all.
pub fn aggregate(reports: &[PerfReport]) -> PerfReport {
    let mut sum = PerfReport::default();
    for r in reports {
        sum.seq_framed |= r.seq_framed;
        sum.messages += r.messages;
        sum.bytes += r.bytes;
        sum.verified += r.verified;
        sum.elapsed = sum.elapsed.max(r.elapsed);
        sum.latencies.extend_from_slice(&r.latencies);
        sum.errors.extend(r.errors.iter().cloned());
        sum.posted.extend_from_slice(&r.posted);
        sum.arrived.extend_from_slice(&r.arrived);
        sum.counters += r.counters;
        if let Some(p) = r.peer {
            *sum.peer.get_or_insert_with(Default::default) += p;
        }
        sum.timeline.merge(&r.timeline);
        sum.path.merge(&r.path);
    }
    sum.recovery = sum.counters.recovery;
    sum.latencies.sort();
    sum
}
