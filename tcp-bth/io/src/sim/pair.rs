//! Two connections joined by a [`SimLink`], driven by a virtual clock: the deterministic test
//! bed for the stack. Every event (packet arrival, timer) happens at an exact virtual instant,
//! so a seed reproduces a run bit for bit.

use super::clock::Ends;
use super::link::{Direction, LinkConfig, SimLink};
use std::time::Duration;
use tcp_bth::wire::IpPair;
use tcp_bth::{Config, Connection, State};

/// Addresses and ports of the two ends.
pub const A_IP: [u8; 4] = [10, 77, 0, 1];
/// Address of end B.
pub const B_IP: [u8; 4] = [10, 77, 0, 2];
/// Port of end A, the active opener.
pub const A_PORT: u16 = 40000;
/// Port B listens on.
pub const B_PORT: u16 = 4791;

/// Configuration of end A (the active opener) and end B (the listener) for a pair.
pub fn pair_configs(seed: u64) -> (Config, Config) {
    let mut a = Config {
        ip: IpPair::V4 {
            src: A_IP,
            dst: B_IP,
        },
        local_port: A_PORT,
        remote_port: B_PORT,
        ..Config::default()
    };
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    a.isn_key = tcp_bth::isn::IsnKey(key);
    let mut b = a.clone();
    b.ip = a.ip.reversed();
    b.local_port = B_PORT;
    b.remote_port = 0;
    key[8] = 0xB;
    b.isn_key = tcp_bth::isn::IsnKey(key);
    (a, b)
}

pub use super::clock::DriverModel;

/// Two bare connections, A (the active opener) and B (made by A's SYN), joined by a
/// [`SimLink`] on a virtual clock: see the [module docs](self).
pub struct Pair {
    /// End A: connects at [`new`](Self::new), sends [`Direction::AtoB`].
    pub a: Connection,
    /// Created when B's listener sees A's SYN.
    pub b: Option<Connection>,
    b_cfg: Config,
    /// The link between them.
    pub link: SimLink,
    /// Virtual time now: 1 ms at [`new`](Self::new), moved by [`step`](Self::step).
    pub now: Duration,
    /// Events processed (packets delivered + timers fired), a cost measure for the harness.
    pub events: u64,
    /// Sees every segment as it is handed to the link (before impairment), e.g. for a capture.
    pub tap: Option<Tap>,
    /// Serve each end in driver turns (see [`DriverModel`]); None: every arrival at once.
    pub driver: Option<DriverModel>,
    /// Time each end's driver spent in turns (by [`Direction::index`] of what it sends): with
    /// a [`DriverModel`], busy / elapsed is how loaded that end was.
    pub busy: [Duration; 2],
    ends: Ends,
}

/// A packet observer: (time, direction, packet bytes): TCP segments on a [`Pair`], whole IP
/// packets on a `Net`.
pub type Tap = Box<dyn FnMut(Duration, Direction, &[u8]) + Send>;

impl Pair {
    /// A connects to B over a link with `link_cfg`. Nothing runs until [`step`](Self::step).
    pub fn new(a_cfg: Config, b_cfg: Config, link_cfg: LinkConfig) -> Pair {
        let now = Duration::from_millis(1);
        Pair {
            a: Connection::connect(a_cfg, now),
            b: None,
            b_cfg,
            link: SimLink::new(link_cfg),
            now,
            events: 0,
            tap: None,
            driver: None,
            busy: [Duration::ZERO; 2],
            ends: Ends::default(),
        }
    }

    /// End B. Panics before A's SYN has arrived (the `b` field is `None` until then).
    pub fn b(&mut self) -> &mut Connection {
        self.b.as_mut().expect("B exists once A's SYN arrived")
    }

    /// Run until `done` holds, nothing is left to happen, or `limit` of virtual time passes.
    /// Returns whether `done` held.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Pair) -> bool) -> bool {
        let deadline = self.now + limit;
        loop {
            if done(self) {
                return true;
            }
            if !self.step(deadline) {
                return done(self);
            }
        }
    }

    /// Process everything due now, send what the ends want to send, then advance the clock to
    /// the next event. Returns false when nothing more will happen before `deadline`.
    pub fn step(&mut self, deadline: Duration) -> bool {
        let now = self.now;
        self.events += self.ends.deliver(&mut self.link, now, self.driver);
        for end in Direction::ALL {
            self.turn(end, now);
        }
        let timers = [
            self.a.poll_timeout(),
            self.b.as_ref().and_then(|b| b.poll_timeout()),
        ];
        let arrival = self.link.next_arrival();
        self.ends.advance(&mut self.now, deadline, arrival, timers)
    }

    /// One driver turn of end `end` (A sends AtoB, B sends BtoA) if it is free at `now`.
    fn turn(&mut self, end: Direction, now: Duration) {
        let i = end.index();
        if !self.ends.free(i, self.driver, now) {
            return;
        }
        let mut work = 0u64;
        let reads = Ends::turn_reads(self.driver);
        for _ in 0..reads {
            let Some(pkt) = self.ends.inbox[i].pop_front() else {
                break;
            };
            work += 1;
            match end {
                Direction::AtoB => self.a.handle_segment(now, &pkt),
                Direction::BtoA => match self.b.as_mut() {
                    Some(b) => b.handle_segment(now, &pkt),
                    None => self.b = Connection::accept(self.b_cfg.clone(), now, &pkt),
                },
            }
        }
        let conn = match end {
            Direction::AtoB => Some(&mut self.a),
            Direction::BtoA => self.b.as_mut(),
        };
        let Some(c) = conn else { return };
        if c.poll_timeout().is_some_and(|t| t <= now) {
            c.handle_timeout(now);
        }
        while let Some(p) = c.poll_transmit(now) {
            work += 1;
            if let Some(tap) = self.tap.as_mut() {
                tap(now, end, &p);
            }
            self.link.send(now, end, p);
        }
        self.ends.charge(i, self.driver, &mut self.busy, now, work);
    }

    /// Packets each end's driver queue dropped ([`DriverModel::rx_queue`]), by
    /// [`Direction::index`] of what that end sends.
    pub fn rx_dropped(&self) -> [u64; 2] {
        self.ends.rx_dropped
    }

    /// Handshake; true when both ends are established.
    pub fn establish(&mut self, limit: Duration) -> bool {
        self.run_until(limit, |p| {
            p.a.state() == State::Established
                && p.b
                    .as_ref()
                    .is_some_and(|b| b.state() == State::Established)
        })
    }
}
