//! The virtual clock and the driver model that [`Pair`](super::Pair) (two bare connections)
//! and [`Net`](super::Net) (two endpoints) share: where each end's arrivals wait for its next
//! turn, when a costed turn ends, and which instant the clock moves to next.

use super::link::SimLink;
use std::collections::VecDeque;
use std::time::Duration;

/// How a driver serves its connection, as on the TUN path: a turn takes the segments that
/// have arrived (at most `turn_reads`), fires due timers and sends everything the connection
/// will send; segments that arrive meanwhile wait for the next turn, in a queue of at most
/// `rx_queue` packets (beyond it they are dropped, as a TUN device drops when its reader falls
/// behind; counted in `Ends::rx_dropped`). A turn costs `per_turn` plus `per_segment` for each
/// segment in and out. Without it (`Pair::driver` = None) an end handles each arrival the
/// instant it lands, which no real driver does: a whole burst of segments then never arrives
/// in one turn, and the simulator missed what one ACK per turn did to loss recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverModel {
    /// Fixed cost of a turn that moved at least one packet (one that moved none costs nothing).
    pub per_turn: Duration,
    /// Cost added per packet the turn received or sent.
    pub per_segment: Duration,
    /// Packets waiting for an end's driver at most: its device's queue and the receive
    /// buffers it has posted. None: unbounded.
    pub rx_queue: Option<usize>,
    /// Packets one turn takes at most: the receive buffers a turn can reap. None: all.
    pub turn_reads: Option<usize>,
}

impl DriverModel {
    /// Close to the io_uring TUN driver on this project's 2-core test machine: it carries a
    /// clean relay transfer at roughly 0.8 Gbit/s, about 14 µs per full segment for both ends
    /// together, and reaps batches of segments per turn. Every arrival waits for the next
    /// turn, however many, and a turn takes them all ([`TUN_QUEUED`](Self::TUN_QUEUED) bounds
    /// both as the TUN path does).
    pub const TUN: DriverModel = DriverModel {
        per_turn: Duration::from_micros(20),
        per_segment: Duration::from_micros(5),
        rx_queue: None,
        turn_reads: None,
    };

    /// [`TUN`](Self::TUN) with the TUN path's queue and read bound: a TUN device queues 500
    /// packets (`txqueuelen`) before it drops, and the driver lends 128 receive buffers to its
    /// read (`tun::driver`), so a turn reaps at most 128. Under `TUN` a receiver that fell
    /// behind took turns of thousands of segments and superseded most of the ACKs they called
    /// for (`Stats::acks_superseded`): on the clean relay cell of `bth-compare` it sent one ACK
    /// per 10.5 segments where the real path sends one per two, and it never dropped, where
    /// the real path's receiving device drops about 100–200 packets a run. Under this model it
    /// sends one per two and drops at its queue (210 on that cell). Its throughput is not
    /// calibrated: `per_segment` was fitted under `TUN`'s fewer ACKs, and with it this model
    /// moves 0.72–0.95× the real path in 13 of the 14 relay cells and 1.53× under 1 % loss
    /// (`docs/stack.md`, "The simulator's driver model").
    pub const TUN_QUEUED: DriverModel = DriverModel {
        rx_queue: Some(500 + 128),
        turn_reads: Some(128),
        ..DriverModel::TUN
    };
}

/// Both ends' drivers, by [`Direction::index`](super::Direction::index) of what they send.
#[derive(Debug, Default)]
pub(super) struct Ends {
    /// What the link delivered to each end, waiting for its next turn.
    pub inbox: [VecDeque<Vec<u8>>; 2],
    /// Packets dropped because an end's queue was full ([`DriverModel::rx_queue`]).
    pub rx_dropped: [u64; 2],
    /// When each end's current turn ends.
    busy_until: [Duration; 2],
    /// Steps taken without the clock moving: a livelock guard.
    stalled: u32,
}

impl Ends {
    /// Move what the link delivers by `now` to the inbox of the end it arrives at, or drop it
    /// there when the model's queue is full; returns how many packets arrived.
    pub fn deliver(
        &mut self,
        link: &mut SimLink,
        now: Duration,
        model: Option<DriverModel>,
    ) -> u64 {
        let cap = model.and_then(|m| m.rx_queue).unwrap_or(usize::MAX);
        let mut n = 0;
        while let Some((dir, pkt)) = link.poll(now) {
            n += 1;
            // AtoB arrives at B (index 1), BtoA at A (index 0).
            let i = dir.reverse().index();
            if self.inbox[i].len() >= cap {
                self.rx_dropped[i] += 1;
            } else {
                self.inbox[i].push_back(pkt);
            }
        }
        n
    }

    /// Packets one turn of a driver under `model` may take.
    pub fn turn_reads(model: Option<DriverModel>) -> usize {
        model.and_then(|m| m.turn_reads).unwrap_or(usize::MAX)
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
