//! Two [`Endpoint`]s joined by a [`SimLink`] that carries whole IP packets, on a virtual clock:
//! the deterministic test bed for many connections between two hosts.
//!
//! Each end is served in driver turns by [`turn::turn`], the function the TUN driver runs, so
//! the simulator exercises the real driver loop (receive, timers, app, transmit) rather than a
//! model of it. The turn's [`PacketIo`] is one end of the link: it receives what the link
//! delivered to that end up to now and sends into the link. Waiting is the `Net`'s job: after
//! both ends had their turn it moves the clock to the next event (a link arrival, an
//! endpoint's timer, a busy end becoming free under the [`DriverModel`]). With the same
//! configurations (their keys and the link's seed included) a run repeats bit for bit.

use super::clock::{DriverModel, Ends};
use super::link::{Direction, LinkConfig, SimLink};
use super::pair::{pair_configs, Tap, A_IP, B_IP};
use crate::turn::{self, App, PacketIo, TurnStats};
use std::collections::VecDeque;
use std::io;
use std::time::Duration;
use tcp_bth::isn::IsnKey;
use tcp_bth::wire::IpPair;
use tcp_bth::{Config, Endpoint, EndpointConfig};

/// Endpoint configurations for A (at [`A_IP`]) and B (at [`B_IP`]) whose secrets come from
/// `seed`: [`EndpointConfig::default`] draws a random key, which would make ephemeral ports
/// and SYN cookies differ from run to run.
pub fn net_configs(seed: u64) -> (EndpointConfig, EndpointConfig) {
    let end = |ip: [u8; 4], peer: [u8; 4], tag: u8| {
        let mut key = [tag; 16];
        key[..8].copy_from_slice(&seed.to_le_bytes());
        EndpointConfig {
            key: IsnKey(key),
            local: vec![IpPair::V4 { src: ip, dst: peer }],
            ..EndpointConfig::default()
        }
    };
    (end(A_IP, B_IP, 0xA), end(B_IP, A_IP, 0xB))
}

/// The connection configuration A connects with (to B's port [`B_PORT`](super::pair::B_PORT),
/// from an ephemeral port) and the template B listens with, both from [`pair_configs`].
pub fn net_conn_configs(seed: u64) -> (Config, Config) {
    let (mut a, b) = pair_configs(seed);
    a.local_port = 0;
    (a, b)
}

/// Two endpoints, A and B, joined by a [`SimLink`] on a virtual clock: see the
/// [module docs](self). Nothing runs until [`step`](Self::step) or a `run`.
pub struct Net {
    /// End A: sends [`Direction::AtoB`].
    pub a: Endpoint,
    /// End B: sends [`Direction::BtoA`].
    pub b: Endpoint,
    /// The link between them; what A sends goes [`Direction::AtoB`].
    pub link: SimLink,
    /// Virtual time now: 1 ms at [`new`](Self::new), moved by [`step`](Self::step) (or by the
    /// caller, between [`turns_now`](Self::turns_now) calls).
    pub now: Duration,
    /// Serve each end in costed turns ([`DriverModel`]); None: a turn costs no time.
    pub driver: Option<DriverModel>,
    /// Sees every IP packet as it is handed to the link (before impairment); see
    /// [`pcap_ip_tap`](super::pcap_ip_tap).
    pub tap: Option<Tap>,
    /// Time each end's driver spent in turns, by [`Direction::index`] of what it sends.
    pub busy: [Duration; 2],
    /// Each end's turn counters, by [`Direction::index`].
    pub turns: [TurnStats; 2],
    /// Packets the link delivered: a cost measure for the harness.
    pub events: u64,
    /// The path's MTU, below what the ends were configured for (None: no limit): a packet
    /// longer than this is dropped where it enters the link and answered with an ICMP packet
    /// too big (fragmentation needed for IPv4), as a router with a smaller next hop does.
    pub path_mtu: Option<usize>,
    /// ICMP packet-too-big messages sent for `path_mtu`.
    pub ptb_sent: u64,
    /// An end that vanished (by the direction it sends: a host killed or unplugged): nothing
    /// it sends leaves, nothing sent to it arrives, and nobody says so.
    pub gone: Option<Direction>,
    ends: Ends,
    /// What each end's app said at its latest turn.
    done: [bool; 2],
    buf: Vec<u8>,
}

/// An app that does nothing: for phases driven from outside, between steps.
fn idle(_: &mut Endpoint, _: Duration) -> bool {
    true
}

impl Net {
    /// Endpoints A and B over a link with `link`. Nothing runs until [`step`](Self::step).
    pub fn new(a: EndpointConfig, b: EndpointConfig, link: LinkConfig) -> Net {
        Net {
            a: Endpoint::new(a),
            b: Endpoint::new(b),
            link: SimLink::new(link),
            now: Duration::from_millis(1),
            driver: None,
            tap: None,
            busy: [Duration::ZERO; 2],
            turns: [TurnStats::default(); 2],
            events: 0,
            path_mtu: None,
            ptb_sent: 0,
            gone: None,
            ends: Ends::default(),
            done: [false; 2],
            buf: Vec::with_capacity(65536),
        }
    }

    /// The endpoint that sends `end`.
    pub fn endpoint(&mut self, end: Direction) -> &mut Endpoint {
        match end {
            Direction::AtoB => &mut self.a,
            Direction::BtoA => &mut self.b,
        }
    }

    /// Turns until both apps said they are done (at their latest turn), nothing is left to
    /// happen, or `limit` of virtual time passes. Returns whether both were done.
    pub fn run(&mut self, a: &mut dyn App, b: &mut dyn App, limit: Duration) -> bool {
        let deadline = self.now + limit;
        self.done = [false; 2];
        loop {
            let more = self.step(a, b, deadline);
            if self.done == [true; 2] {
                return true;
            }
            if !more {
                return false;
            }
        }
    }

    /// Run without apps until `done` holds (checked between steps, where it may act on both
    /// endpoints), nothing is left to happen, or `limit` passes. Returns whether `done` held.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Net) -> bool) -> bool {
        let deadline = self.now + limit;
        loop {
            if done(self) {
                return true;
            }
            if !self.step(&mut idle, &mut idle, deadline) {
                return done(self);
            }
        }
    }

    /// Deliver what the link has for now, give each free end a turn (its app `a` or `b`
    /// included), then advance the clock to the next event. Returns false when nothing more
    /// will happen before `deadline`.
    pub fn step(&mut self, a: &mut dyn App, b: &mut dyn App, deadline: Duration) -> bool {
        self.turns_now(a, b);
        let timers = [self.a.poll_timeout(), self.b.poll_timeout()];
        let arrival = self.link.next_arrival();
        self.ends.advance(&mut self.now, deadline, arrival, timers)
    }

    /// Deliver what the link has for now and give each free end a turn, without moving the
    /// clock: for drivers that decide themselves when virtual time moves (the async API's).
    pub fn turns_now(&mut self, a: &mut dyn App, b: &mut dyn App) {
        let now = self.now;
        self.events += self.ends.deliver(&mut self.link, now, self.driver);
        self.turn(Direction::AtoB, a, now);
        self.turn(Direction::BtoA, b, now);
    }

    /// One driver turn of the end that sends `end`, if it is free at `now`.
    fn turn(&mut self, end: Direction, app: &mut dyn App, now: Duration) {
        let i = end.index();
        if !self.ends.free(i, self.driver, now) {
            return;
        }
        let ep = match end {
            Direction::AtoB => &mut self.a,
            Direction::BtoA => &mut self.b,
        };
        let stats = &mut self.turns[i];
        let before = stats.packets_in + stats.packets_out;
        let mut io = LinkEnd {
            link: &mut self.link,
            inbox: &mut self.ends.inbox[i],
            reads: Ends::turn_reads(self.driver),
            tap: self.tap.as_mut(),
            end,
            now,
            path_mtu: self.path_mtu,
            ptb_sent: &mut self.ptb_sent,
            gone: self.gone,
        };
        self.done[i] = turn::turn(ep, &mut io, app, now, &mut self.buf, stats);
        let work = stats.packets_in + stats.packets_out - before;
        self.ends.charge(i, self.driver, &mut self.busy, now, work);
    }
}

/// One end of the link as a turn's data path.
struct LinkEnd<'a> {
    link: &'a mut SimLink,
    inbox: &'a mut VecDeque<Vec<u8>>,
    /// Packets this turn may take ([`DriverModel::turn_reads`]).
    reads: usize,
    tap: Option<&'a mut Tap>,
    /// What this end sends.
    end: Direction,
    now: Duration,
    path_mtu: Option<usize>,
    ptb_sent: &'a mut u64,
    gone: Option<Direction>,
}

impl PacketIo for LinkEnd<'_> {
    fn now(&self) -> Duration {
        self.now
    }

    fn receive(&mut self, f: &mut dyn FnMut(&[u8], bool)) {
        for _ in 0..self.reads {
            let Some(p) = self.inbox.pop_front() else {
                break;
            };
            // The link may corrupt packets: every checksum is checked.
            f(&p, false);
        }
    }

    /// The link takes every packet: its drop-tail queue decides what is lost.
    fn can_send(&self) -> bool {
        true
    }

    fn send(&mut self, packet: &[u8]) {
        if let Some(tap) = self.tap.as_mut() {
            tap(self.now, self.end, packet);
        }
        if self.gone.is_some() {
            // One end is gone: this packet is from it, or to it.
            return;
        }
        if let Some(mtu) = self.path_mtu.filter(|&m| packet.len() > m) {
            // The packet goes no further; its sender hears why, over the link's other way.
            let error = tcp_bth::IcmpError::PacketTooBig { mtu: mtu as u32 };
            if let Some(icmp) = tcp_bth::endpoint::icmp::emit(packet, error) {
                *self.ptb_sent += 1;
                self.link.send(self.now, self.end.reverse(), icmp);
            }
            return;
        }
        self.link.send(self.now, self.end, packet.to_vec());
    }

    /// Never called by [`turn::turn`]; [`turn::run`] cannot drive one end of a two-ended
    /// simulation (the clock belongs to both), so it is told so instead of spinning.
    fn wait(&mut self, _deadline: Option<Duration>) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the simulated net moves its own clock: drive it with Net::step",
        ))
    }
}

#[cfg(test)]
#[path = "net_tests.rs"]
mod tests;
