//! Two connections back to back, with no link model: every segment takes a fixed delay and
//! passes a filter that may drop or change it. The smallest driver there is, on a virtual
//! clock: the core's own unit tests and the integration tests use it to exercise the state
//! machine segment by segment (the simulated link with loss, reordering and bandwidth is
//! `bth_io::sim`).

use crate::{Config, Connection};
use std::fmt;
use std::time::Duration;

/// Which way a segment travels between endpoints A and B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    /// From endpoint A to endpoint B.
    AtoB,
    /// From endpoint B to endpoint A.
    BtoA,
}

impl Direction {
    /// Both directions, `AtoB` first.
    pub const ALL: [Direction; 2] = [Direction::AtoB, Direction::BtoA];

    /// The opposite direction.
    pub fn reverse(self) -> Direction {
        match self {
            Direction::AtoB => Direction::BtoA,
            Direction::BtoA => Direction::AtoB,
        }
    }

    /// 0 for `AtoB`, 1 for `BtoA`.
    pub fn index(self) -> usize {
        match self {
            Direction::AtoB => 0,
            Direction::BtoA => 1,
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::AtoB => "A->B",
            Direction::BtoA => "B->A",
        })
    }
}

/// Two connections wired back to back: every segment is handed to the filter, which may drop
/// it (return `None`) or change it, then delivered after `delay`.
pub struct BackToBack {
    /// Endpoint A (the active opener in [`established`](Self::established)).
    pub a: Connection,
    /// Endpoint B.
    pub b: Connection,
    /// The virtual clock.
    pub now: Duration,
    /// One-way delay of every segment (50 µs unless changed).
    pub delay: Duration,
    /// Segments each side sent, by [`Direction::index`] (counted before the filter).
    pub sent: [u64; 2],
    in_flight: Vec<(Duration, Direction, Vec<u8>)>,
}

impl BackToBack {
    /// `a` and `b` wired together as they are, the clock at `now`, nothing in flight.
    pub fn new(a: Connection, b: Connection, now: Duration) -> BackToBack {
        BackToBack {
            a,
            b,
            now,
            delay: Duration::from_micros(50),
            sent: [0; 2],
            in_flight: Vec::new(),
        }
    }

    /// A connects to B (B is created from A's SYN, as a listener would); returns once both
    /// are established. Panics if the handshake does not finish within a second.
    pub fn established(a_cfg: Config, b_cfg: Config, now: Duration) -> BackToBack {
        let mut a = Connection::connect(a_cfg, now);
        let syn = a.poll_transmit(now).expect("connect sends a SYN");
        let b = Connection::accept(b_cfg, now, &syn).expect("B accepts A's SYN");
        let mut w = BackToBack::new(a, b, now);
        w.sent[0] = 1;
        let ok = w.run(
            Duration::from_secs(1),
            |_, _, p| Some(p),
            |w| w.a.is_established() && w.b.is_established(),
        );
        assert!(ok, "handshake: {:?} {:?}", w.a, w.b);
        w
    }

    /// Deliver what is due, fire expired timers, send; then advance the clock to the next
    /// event. False when nothing at all is pending.
    pub fn step(
        &mut self,
        filter: &mut impl FnMut(Direction, Duration, Vec<u8>) -> Option<Vec<u8>>,
    ) -> bool {
        let now = self.now;
        let mut due: Vec<_> = Vec::new();
        self.in_flight.retain(|(t, d, p)| {
            if *t <= now {
                due.push((*d, p.clone()));
                false
            } else {
                true
            }
        });
        for (d, p) in due {
            match d {
                Direction::AtoB => self.b.handle_segment(now, &p),
                Direction::BtoA => self.a.handle_segment(now, &p),
            }
        }
        for c in [&mut self.a, &mut self.b] {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
        }
        for dir in Direction::ALL {
            let c = match dir {
                Direction::AtoB => &mut self.a,
                Direction::BtoA => &mut self.b,
            };
            while let Some(p) = c.poll_transmit(now) {
                self.sent[dir.index()] += 1;
                if let Some(p) = filter(dir, now, p) {
                    self.in_flight.push((now + self.delay, dir, p));
                }
            }
        }
        let next = self
            .in_flight
            .iter()
            .map(|x| x.0)
            .chain(self.a.poll_timeout())
            .chain(self.b.poll_timeout())
            .min();
        match next {
            Some(t) => {
                self.now = t.max(now + Duration::from_nanos(1));
                true
            }
            None => false,
        }
    }

    /// Put a segment on the wire to arrive at `at` (a copy the network made, or one a filter
    /// held back and lets go late).
    pub fn inject(&mut self, at: Duration, dir: Direction, p: Vec<u8>) {
        self.in_flight.push((at, dir, p));
    }

    /// Step until `done` holds or `limit` of virtual time has passed; returns `done`'s last
    /// answer.
    pub fn run(
        &mut self,
        limit: Duration,
        mut filter: impl FnMut(Direction, Duration, Vec<u8>) -> Option<Vec<u8>>,
        mut done: impl FnMut(&mut BackToBack) -> bool,
    ) -> bool {
        let end = self.now + limit;
        while self.now < end {
            if done(self) {
                return true;
            }
            if !self.step(&mut filter) {
                break;
            }
        }
        done(self)
    }

    /// Deliver everything until both sides are quiet or `limit` passes.
    pub fn settle(&mut self, limit: Duration) {
        let end = self.now + limit;
        while self.now < end && self.step(&mut |_, _, p| Some(p)) {}
    }

    /// Let `gap` pass with nothing on the wire (timers that fall due meanwhile fire at the
    /// next step, late, as after a suspended process).
    pub fn idle(&mut self, gap: Duration) {
        assert!(self.in_flight.is_empty(), "segments still in flight");
        self.now += gap;
    }
}
