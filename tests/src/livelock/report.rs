//! A failure's report: what went wrong, where the run was, both ends' state.

use super::{conn_ref, Failure, FailureKind, Harness, Side, SIDES};
use bth_io::sim::Direction;

impl Harness<'_> {
    /// A failure of `kind`: `what`, then where the run was and both ends' state.
    pub(super) fn fail(&self, kind: FailureKind, what: String) -> Failure {
        let w = self.w;
        let step = match self.step {
            Some(i) => format!("step {i} of {} ({:?})", w.steps.len(), w.steps[i]),
            None => format!("after the last of {} steps", w.steps.len()),
        };
        let mut report = format!(
            "{what}\nat {:?} of virtual time, {step}; seed {}, {}, limits {:?}, most segments \
             without progress so far {}\n",
            self.p.now - self.start,
            w.seed,
            if w.bth { "tcp_bth" } else { "plain" },
            self.mon.limits(),
            self.mon.max_quiet_segments,
        );
        for side in SIDES {
            report += &self.describe(side);
        }
        for dir in [Direction::AtoB, Direction::BtoA] {
            report += &format!("link {dir:?}: {:?}\n", self.p.link.stats(dir));
        }
        Failure { kind, report }
    }

    fn describe(&self, side: Side) -> String {
        let c = conn_ref(&self.p, side);
        let e = &self.ends[side.index()];
        let (una, nxt, rcv_nxt) = c.seq_state();
        format!(
            "{side:?}: {:?} {:?} error {:?}; snd_una {una} snd_nxt {nxt} rcv_nxt {rcv_nxt}, \
             peer window {}, cwnd {}, rto {:?}, send backlog {}, {:?}\n  outstanding: {} \
             posted, {} receives to post, {} posted, {} WRITEs with immediate, {}/{} bytes \
             read, paused until {:?}\n  stats {:?}\n  recovery {:?}\n",
            c.state(),
            c.mode(),
            c.error(),
            c.peer_window(),
            c.cwnd(),
            c.rto(),
            c.send_backlog(),
            c.rx_held(),
            e.posted.len(),
            e.to_post.len(),
            e.posted_recvs.len(),
            e.imm_writes.len(),
            e.read,
            e.stream.len(),
            e.paused_until.saturating_sub(self.start),
            c.stats(),
            c.recovery_stats(),
        )
    }
}
