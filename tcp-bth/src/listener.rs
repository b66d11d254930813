//! A sans-IO listening socket: turns SYNs into connections with bounded state.
//!
//! A SYN creates a half-open [`Connection`] (SYN-RECEIVED) in the **SYN queue**, keyed by the
//! peer's address and port; segments from that peer go to it; once its handshake completes it
//! moves to the **accept backlog**, from which [`Listener::accept`] takes it. Both are bounded
//! ([`ListenerConfig`]), so a SYN flood cannot make the listener's memory grow:
//!
//! * SYN queue full → the **oldest** half-open entry is evicted to make room (counted in
//!   [`ListenerStats::syn_evicted`]). A flooder's entries never complete, so they age out first;
//!   a legitimate handshake survives as long as it completes before `syn_queue` newer SYNs
//!   arrive (at 100k SYN/s and the default 1024 entries: about 10 ms, far above a datacenter
//!   RTT). Entries also expire after [`ListenerConfig::syn_timeout`].
//! * accept backlog full → the just-completed connection is aborted with an RST
//!   ([`ListenerStats::backlog_drops`]).
//! * segments to send wait in a bounded queue; the oldest is dropped when it is full
//!   ([`ListenerStats::tx_drops`]) — TCP retransmits what matters.
//!
//! Each connection's ISN comes from the keyed hash of its 4-tuple (RFC 6528, [`crate::isn`]), so
//! connections from different ports get unrelated ISNs.

use crate::config::Config;
use crate::conn::{Connection, State};
use crate::wire::{IpPair, TcpRepr};
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// Bounds of a [`Listener`].
#[derive(Debug, Clone)]
pub struct ListenerConfig {
    /// Half-open connections held at once.
    pub syn_queue: usize,
    /// Established connections waiting for [`Listener::accept`].
    pub backlog: usize,
    /// A half-open connection older than this is dropped.
    pub syn_timeout: Duration,
    /// Segments waiting for [`Listener::poll_transmit`].
    pub max_tx_queue: usize,
}

impl Default for ListenerConfig {
    fn default() -> Self {
        ListenerConfig {
            syn_queue: 1024,
            backlog: 128,
            syn_timeout: Duration::from_secs(3),
            max_tx_queue: 4096,
        }
    }
}

/// Counters; never reset.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ListenerStats {
    pub segments_in: u64,
    /// SYNs that created a half-open connection.
    pub syns: u64,
    /// Half-open connections evicted because the SYN queue was full.
    pub syn_evicted: u64,
    /// Half-open connections dropped after `syn_timeout` (or closed by their own timers).
    pub syn_expired: u64,
    /// Handshakes completed and queued for accept.
    pub established: u64,
    /// Completed handshakes refused because the accept backlog was full.
    pub backlog_drops: u64,
    /// Segments for no half-open connection that are not SYNs, or not parseable.
    pub unmatched: u64,
    /// Outgoing segments dropped because the transmit queue was full.
    pub tx_drops: u64,
}

/// The peer's address and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct PeerKey {
    addr: [u8; 16],
    port: u16,
}

fn peer_key(ip: IpPair, port: u16) -> PeerKey {
    let mut addr = [0u8; 16];
    match ip {
        IpPair::V4 { src, .. } => addr[12..].copy_from_slice(&src),
        IpPair::V6 { src, .. } => addr = src,
    }
    PeerKey { addr, port }
}

struct HalfOpen {
    conn: Connection,
    born: Duration,
}

pub struct Listener {
    template: Config,
    cfg: ListenerConfig,
    pending: HashMap<PeerKey, HalfOpen>,
    /// Eviction order (oldest first); entries whose `born` no longer matches are stale.
    order: VecDeque<(PeerKey, Duration)>,
    ready: VecDeque<Connection>,
    tx: VecDeque<(IpPair, Vec<u8>)>,
    stats: ListenerStats,
}

impl Listener {
    /// Listen on `template.local_port`; every accepted connection gets a copy of `template` with
    /// the addresses and remote port of its SYN.
    pub fn new(template: Config, cfg: ListenerConfig) -> Listener {
        let cfg = ListenerConfig {
            syn_queue: cfg.syn_queue.max(1),
            max_tx_queue: cfg.max_tx_queue.max(1),
            ..cfg
        };
        Listener {
            template,
            cfg,
            pending: HashMap::new(),
            order: VecDeque::new(),
            ready: VecDeque::new(),
            tx: VecDeque::new(),
            stats: ListenerStats::default(),
        }
    }

    pub fn stats(&self) -> ListenerStats {
        self.stats
    }

    /// Half-open connections held now (≤ `syn_queue`).
    pub fn syn_queue_len(&self) -> usize {
        self.pending.len()
    }

    /// Completed connections waiting for accept (≤ `backlog`).
    pub fn backlog_len(&self) -> usize {
        self.ready.len()
    }

    /// Segments waiting to be sent (≤ `max_tx_queue`).
    pub fn tx_queue_len(&self) -> usize {
        self.tx.len()
    }

    /// Internal bookkeeping entries (≤ 2 × `syn_queue` + 1): the eviction order list.
    pub fn order_len(&self) -> usize {
        self.order.len()
    }

    /// One received segment. `ip` is as received: `src` the peer, `dst` us.
    pub fn handle_segment(&mut self, now: Duration, ip: IpPair, bytes: &[u8]) {
        self.stats.segments_in += 1;
        let Ok(seg) = TcpRepr::parse(bytes, Some(ip)) else {
            self.stats.unmatched += 1;
            return;
        };
        if seg.dst_port != self.template.local_port {
            self.stats.unmatched += 1;
            return;
        }
        let key = peer_key(ip, seg.src_port);
        if let Some(h) = self.pending.get_mut(&key) {
            h.conn.handle_segment(now, bytes);
            self.after_input(now, key);
            return;
        }
        let f = seg.flags;
        if !f.syn() || f.ack() || f.rst() {
            self.stats.unmatched += 1;
            return;
        }
        let mut cfg = self.template.clone();
        cfg.ip = ip.reversed();
        let Some(conn) = Connection::accept(cfg, now, bytes) else {
            self.stats.unmatched += 1;
            return;
        };
        while self.pending.len() >= self.cfg.syn_queue {
            self.evict_oldest();
        }
        self.stats.syns += 1;
        self.pending.insert(key, HalfOpen { conn, born: now });
        self.order.push_back((key, now));
        self.compact_order();
        self.after_input(now, key);
    }

    fn evict_oldest(&mut self) {
        while let Some((k, born)) = self.order.pop_front() {
            if self.pending.get(&k).is_some_and(|h| h.born == born) {
                self.pending.remove(&k);
                self.stats.syn_evicted += 1;
                return;
            }
        }
        // Order list exhausted (cannot happen while pending is non-empty): drop anything.
        if let Some(k) = self.pending.keys().next().copied() {
            self.pending.remove(&k);
            self.stats.syn_evicted += 1;
        }
    }

    fn compact_order(&mut self) {
        if self.order.len() > 2 * self.cfg.syn_queue {
            let pending = &self.pending;
            self.order
                .retain(|(k, born)| pending.get(k).is_some_and(|h| h.born == *born));
        }
    }

    fn push_tx(&mut self, ip: IpPair, seg: Vec<u8>) {
        if self.tx.len() >= self.cfg.max_tx_queue {
            self.tx.pop_front();
            self.stats.tx_drops += 1;
        }
        self.tx.push_back((ip, seg));
    }

    /// Drain the connection's output; promote or drop it by its state.
    fn after_input(&mut self, now: Duration, key: PeerKey) {
        let Some(mut h) = self.pending.remove(&key) else {
            return;
        };
        let ip = h.conn.config().ip;
        while let Some(seg) = h.conn.poll_transmit(now) {
            self.push_tx(ip, seg);
        }
        match h.conn.state() {
            State::SynReceived => {
                self.pending.insert(key, h);
            }
            State::Closed => self.stats.syn_expired += 1,
            _ => {
                if self.ready.len() >= self.cfg.backlog {
                    self.stats.backlog_drops += 1;
                    h.conn.abort();
                    while let Some(seg) = h.conn.poll_transmit(now) {
                        self.push_tx(ip, seg);
                    }
                } else {
                    self.stats.established += 1;
                    self.ready.push_back(h.conn);
                }
            }
        }
    }

    /// The next established connection, oldest first.
    pub fn accept(&mut self) -> Option<Connection> {
        self.ready.pop_front()
    }

    /// Next segment to send, with the address pair to send it on (`src` us, `dst` the peer).
    pub fn poll_transmit(&mut self, _now: Duration) -> Option<(IpPair, Vec<u8>)> {
        self.tx.pop_front()
    }

    /// Earliest deadline among half-open connections (SYN-ACK retransmission, expiry).
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.pending
            .values()
            .map(|h| {
                let expiry = h.born + self.cfg.syn_timeout;
                h.conn.poll_timeout().map_or(expiry, |t| t.min(expiry))
            })
            .min()
    }

    pub fn handle_timeout(&mut self, now: Duration) {
        let timeout = self.cfg.syn_timeout;
        let expired: Vec<PeerKey> = self
            .pending
            .iter()
            .filter(|(_, h)| now >= h.born + timeout)
            .map(|(k, _)| *k)
            .collect();
        for k in expired {
            self.pending.remove(&k);
            self.stats.syn_expired += 1;
        }
        let due: Vec<PeerKey> = self
            .pending
            .iter()
            .filter(|(_, h)| h.conn.poll_timeout().is_some_and(|t| t <= now))
            .map(|(k, _)| *k)
            .collect();
        for k in due {
            if let Some(h) = self.pending.get_mut(&k) {
                h.conn.handle_timeout(now);
            }
            self.after_input(now, k);
        }
        self.compact_order();
    }
}
