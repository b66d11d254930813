//! One side's loss-recovery counters, as the perf reports and `bth-compare` record them.
//!
//! Each side of a run reports the counters of its own connection: what *it* sent and how it
//! repaired the losses of what it sent. Which side that is depends on the operation: SEND and
//! WRITE data leaves the client, but in an RDMA READ the responder (the server) sends the data,
//! so a lossy READ run shows its retransmissions on the server's side and almost none on the
//! client's. A report of one side alone therefore says nothing about the other direction;
//! `bth-perf` prints each side's counters in that side's own output, `bth-compare` records
//! both sides of every run.

use serde::Serialize;
use std::fmt;
use tcp_bth::Connection;
use tcp_bth::RecoveryStats;

/// A copy of [`RecoveryStats`] (same names, same meaning) that can be written to the JSON run
/// records; the core crate has no serde.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Recovery {
    /// Data segments sent, first transmissions and retransmissions (pure ACKs not counted).
    pub segments_sent: u64,
    /// Segments sent again: RACK and RTO repairs, and tail loss probes that resent the tail.
    pub retransmits: u64,
    /// Retransmissions later found unnecessary (the original arrived: the ACK echoed the
    /// original's timestamp).
    pub spurious_retransmits: u64,
    /// RACK loss detections that marked at least one segment lost (events, not segments).
    pub rack_losses: u64,
    /// Retransmission timeouts that fired (each marks everything outstanding lost).
    pub rto_losses: u64,
    /// Tail loss probes sent (new data or the tail again; only the latter is also a
    /// retransmission).
    pub tlp_probes: u64,
}

impl From<RecoveryStats> for Recovery {
    fn from(s: RecoveryStats) -> Recovery {
        Recovery {
            segments_sent: s.segments_sent,
            retransmits: s.retransmits,
            spurious_retransmits: s.spurious_retransmits,
            rack_losses: s.rack_losses,
            rto_losses: s.rto_losses,
            tlp_probes: s.tlp_probes,
        }
    }
}

impl Recovery {
    /// The counters of `c` now.
    pub fn of(c: &Connection) -> Recovery {
        c.recovery_stats().into()
    }
}

impl fmt::Display for Recovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} data segments sent, {} retransmitted ({} spurious); {} RACK loss detections, \
             {} RTOs, {} tail loss probes",
            self.segments_sent,
            self.retransmits,
            self.spurious_retransmits,
            self.rack_losses,
            self.rto_losses,
            self.tlp_probes
        )
    }
}
