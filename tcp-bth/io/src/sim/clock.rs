//! The virtual clock and the driver model that [`Pair`](super::Pair) (two bare connections)
//! and [`Net`](super::Net) (two endpoints) share: where each end's arrivals wait for its next
//! turn, when a costed turn ends, and which instant the clock moves to next.

use super::link::SimLink;
use std::collections::VecDeque;
use std::time::Duration;

/// How a driver serves its connection, as on the TUN path: a turn takes every segment that
/// has arrived, fires due timers and sends everything the connection will send; segments that
/// arrive meanwhile wait for the next turn. A turn costs `per_turn` plus `per_segment` for
/// each segment in and out. Without it (`Pair::driver` = None) an end handles each arrival
/// the instant it lands, which no real driver does: a whole burst of segments then never
/// arrives in one turn, and the simulator missed what one ACK per turn did to loss recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverModel {
    pub per_turn: Duration,
    pub per_segment: Duration,
}

impl DriverModel {
    /// Close to the io_uring TUN driver on this project's 2-core test machine: it carries a
    /// clean relay transfer at roughly 0.8 Gbit/s, about 14 µs per full segment for both ends
    /// together, and reaps batches of segments per turn.
    pub const TUN: DriverModel = DriverModel {
        per_turn: Duration::from_micros(20),
        per_segment: Duration::from_micros(5),
    };
}

/// Both ends' drivers, by [`Direction::index`](super::Direction::index) of what they send.
#[derive(Debug, Default)]
pub(super) struct Ends {
    /// What the link delivered to each end, waiting for its next turn.
    pub inbox: [VecDeque<Vec<u8>>; 2],
    /// When each end's current turn ends.
    busy_until: [Duration; 2],
    /// Steps taken without the clock moving: a livelock guard.
    stalled: u32,
}

impl Ends {
    /// Move what the link delivers by `now` to the inbox of the end it arrives at; returns
    /// how many packets.
    pub fn deliver(&mut self, link: &mut SimLink, now: Duration) -> u64 {
        let mut n = 0;
        while let Some((dir, pkt)) = link.poll(now) {
            n += 1;
            // AtoB arrives at B (index 1), BtoA at A (index 0).
            self.inbox[dir.reverse().index()].push_back(pkt);
        }
        n
    }

    /// Whether end `i` may take a turn at `now`: always without a model, else once its last
    /// turn is over.
    pub fn free(&self, i: usize, model: Option<DriverModel>, now: Duration) -> bool {
        model.is_none() || now >= self.busy_until[i]
    }

    /// End `i`'s turn at `now` moved `work` packets: under a model it is busy for the turn's
    /// cost, which `busy` accumulates. A turn that moved nothing costs nothing.
    pub fn charge(
        &mut self,
        i: usize,
        model: Option<DriverModel>,
        busy: &mut [Duration; 2],
        now: Duration,
        work: u64,
    ) {
        if let (Some(d), true) = (model, work > 0) {
            let cost = d.per_turn + d.per_segment * u32::try_from(work).unwrap_or(u32::MAX);
            self.busy_until[i] = now + cost;
            busy[i] += cost;
        }
    }

    /// Move `now` to the next instant anything happens, if that is by `deadline`: a link
    /// `arrival`, an end's timer (once that end is free), or a busy end becoming free
    /// (arrivals may wait for it, and so may work the application posted meanwhile, which no
    /// event announces). Returns false when nothing more will happen before `deadline`.
    pub fn advance(
        &mut self,
        now: &mut Duration,
        deadline: Duration,
        arrival: Option<Duration>,
        timers: [Option<Duration>; 2],
    ) -> bool {
        let t0 = *now;
        let free_at = |i: usize| timers[i].map(|t| t.max(self.busy_until[i]));
        let busy = |i: usize| (self.busy_until[i] > t0).then_some(self.busy_until[i]);
        let next = [arrival, free_at(0), free_at(1), busy(0), busy(1)]
            .into_iter()
            .flatten()
            .min();
        match next {
            Some(t) if t <= deadline => {
                *now = t.max(t0);
                if *now == t0 {
                    // A deadline already due (set while handling this instant) runs at this
                    // instant, but never forever.
                    self.stalled += 1;
                    return self.stalled < 10_000;
                }
                self.stalled = 0;
                true
            }
            _ => false,
        }
    }
}
