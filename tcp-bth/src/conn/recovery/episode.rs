//! A loss-recovery episode (RFC 3708, RFC 4015): its retransmissions, which of them the peer
//! proved spurious (D-SACK, Eifel), and whether its congestion window reduction is undone.

use super::Recovery;
use std::time::Duration;

/// A loss-recovery episode (from the first loss marked until the recovery point is acked).
#[derive(Debug, Clone, Copy)]
pub(super) struct Episode {
    /// Retransmissions not (yet) proven spurious.
    pub(super) unproven: u32,
    pub(super) retransmissions: u32,
    /// Segments marked lost that arrived without a retransmission.
    pub(super) false_losses: u32,
    /// False once a retransmission could not be tracked (too many): no undo then.
    pub(super) complete: bool,
}

impl Recovery {
    /// A loss episode starts (the caller reduced cwnd): count its retransmissions from here.
    pub fn start_episode(&mut self) {
        self.episode = Some(Episode {
            unproven: 0,
            retransmissions: 0,
            false_losses: 0,
            complete: true,
        });
        self.retransmitted.clear();
        self.retransmitted_count = 0;
    }

    /// The episode's recovery ended (its recovery point was acknowledged). Its record of
    /// retransmissions stays until the next episode: the D-SACK that proves the last of them
    /// spurious typically arrives just after (the late original filled the hole and ended
    /// recovery; the retransmission arrives next, as a duplicate).
    pub fn end_episode(&mut self) {
        // RFC 8985 §6.2 step 4: a widened window decays after 16 episodes without D-SACK.
        if self.reo_wnd_mult > 1 || !self.reo_measured.is_zero() {
            self.reo_wnd_persist = self.reo_wnd_persist.saturating_sub(1);
            if self.reo_wnd_persist == 0 {
                self.reo_wnd_mult = 1;
                self.stats.reo_wnd_mult = 1;
                self.reo_measured = Duration::ZERO;
                self.stats.reo_measured = Duration::ZERO;
            }
        }
    }

    /// `[start, end)` arrived twice. If it is one of our tracked retransmissions, that one
    /// was spurious (true); false if it is not one (a copy the network made, or proven
    /// already).
    pub(super) fn prove_spurious(&mut self, start: u64, end: u64) -> bool {
        // The retransmission covering [start, end): the last one starting at or before it.
        let Some((&s, &(e, n))) = self.retransmitted.range(..=start).next_back() else {
            return false;
        };
        if end > e {
            return false;
        }
        if n > 1 {
            self.retransmitted.insert(s, (e, n - 1));
        } else {
            self.retransmitted.remove(&s);
        }
        self.retransmitted_count -= 1;
        self.stats.spurious_retransmits += 1;
        if let Some(e) = self.episode.as_mut() {
            e.unproven = e.unproven.saturating_sub(1);
        }
        true
    }

    /// Linux's `tcp_may_undo`: the episode's reduction was not needed once every segment it
    /// declared lost has arrived on its own — every retransmission proven spurious, none
    /// still waiting to be retransmitted, and at least one proof. Then the episode ends.
    pub(super) fn try_undo(&mut self) -> bool {
        let Some(e) = self.episode else {
            return false;
        };
        let proven = e.complete && e.unproven == 0 && (e.retransmissions > 0 || e.false_losses > 0);
        if !proven || self.next_lost().is_some() {
            return false;
        }
        self.episode = None;
        true
    }
}
