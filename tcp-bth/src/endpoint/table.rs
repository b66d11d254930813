//! The endpoint's connections: a slab addressed by generation-checked handles, the 4-tuple
//! index, the queue of connections that may have output, and the heap of timer deadlines.
//!
//! Per packet the endpoint does a hash lookup; per transmit it visits only connections that
//! were touched since their output was last drained; per timeout it pops due deadlines. So
//! a thousand idle connections cost nothing while one is busy.

use super::RxQueue;
use crate::conn::Connection;
use crate::conn::{Gather, GatherLimits, Out, RxShare};
use crate::wire::{ChecksumFill, IpPair};
use bytes::Bytes;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::time::Duration;

/// The fewest packets of the receiving device's queue a connection's window is sized to,
/// however many share it: a window of a few segments still moves data.
pub const MIN_QUEUE_SHARE: u32 = 4;

/// A connection of an [`Endpoint`](super::Endpoint). Stale once the connection is released:
/// the slot's generation moves on, so a stale handle finds nothing instead of another
/// connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionHandle {
    index: u32,
    generation: u32,
}

impl ConnectionHandle {
    /// Position in the endpoint's table (dense: useful to index per-connection app state).
    pub fn index(self) -> usize {
        self.index as usize
    }
}

/// Where a connection stands with respect to the application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// SYN-RECEIVED, in the SYN queue.
    HalfOpen,
    /// Established, in the accept queue.
    Waiting,
    /// Handed out by `accept`.
    Accepted,
    /// Opened by `connect`.
    Own,
}

/// (our address pair, our port, the peer's port).
pub(super) type Key = (IpPair, u16, u16);

struct Slot {
    conn: Connection,
    key: Key,
    phase: Phase,
    born: Duration,
    /// In `dirty`: its output may not be drained, its deadline not filed.
    dirty: bool,
    /// The deadline filed in the heap.
    armed: Option<Duration>,
}

pub(super) struct Table {
    slots: Vec<Option<Slot>>,
    generations: Vec<u32>,
    free: Vec<u32>,
    by_tuple: HashMap<Key, ConnectionHandle>,
    /// The tuple `find` resolved last, and its handle. Consecutive packets mostly belong to
    /// one connection (a flight of data, a run of ACKs), and the index's hash (SipHash over
    /// the 40-byte key, kept because peers choose the tuples) was about 1 % of a busy stack
    /// thread. Cleared whenever the index changes.
    last_found: Option<(Key, ConnectionHandle)>,
    dirty: VecDeque<ConnectionHandle>,
    heap: BinaryHeap<Reverse<(Duration, ConnectionHandle)>>,
    half_open: usize,
    len: usize,
    syn_timeout: Duration,
    /// The latest time `poll_transmit` was given (for output drained on `release`).
    last_now: Duration,
    /// The receiving device's queue, shared out among the connections
    /// ([`EndpointConfig::rx_queue`](super::EndpointConfig::rx_queue)).
    rx_queue: Option<RxQueue>,
}

impl Table {
    pub fn new(syn_timeout: Duration) -> Table {
        Table {
            slots: Vec::new(),
            generations: Vec::new(),
            free: Vec::new(),
            by_tuple: HashMap::new(),
            last_found: None,
            dirty: VecDeque::new(),
            heap: BinaryHeap::new(),
            half_open: 0,
            len: 0,
            syn_timeout,
            last_now: Duration::ZERO,
            rx_queue: None,
        }
    }

    pub fn set_rx_queue(&mut self, q: Option<RxQueue>) {
        self.rx_queue = q;
    }

    /// Each connection's share of the receiving device's queue: three quarters of it (the
    /// rest for ACKs and for what the kernel sends the device itself) divided among the
    /// connections past their handshake, at least [`MIN_QUEUE_SHARE`] packets each. Half-open
    /// connections take none: a SYN flood must not close everyone's window.
    fn rx_share(&self) -> Option<RxShare> {
        let q = self.rx_queue?;
        let conns = (self.len - self.half_open).max(1) as u32;
        Some(RxShare {
            packets: (q.packets / 4 * 3 / conns).max(MIN_QUEUE_SHARE),
            whole_super_segments: q.whole_super_segments,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    pub fn half_open(&self) -> usize {
        self.half_open
    }

    fn slot(&self, h: ConnectionHandle) -> Option<&Slot> {
        let i = h.index as usize;
        if self.generations.get(i) != Some(&h.generation) {
            return None;
        }
        self.slots[i].as_ref()
    }

    fn slot_mut(&mut self, h: ConnectionHandle) -> Option<&mut Slot> {
        let i = h.index as usize;
        if self.generations.get(i) != Some(&h.generation) {
            return None;
        }
        self.slots[i].as_mut()
    }

    pub fn find(
        &mut self,
        ip: IpPair,
        local_port: u16,
        remote_port: u16,
    ) -> Option<ConnectionHandle> {
        let key = (ip, local_port, remote_port);
        if let Some((k, h)) = self.last_found {
            if k == key {
                return Some(h);
            }
        }
        let h = self.by_tuple.get(&key).copied();
        if let Some(h) = h {
            self.last_found = Some((key, h));
        }
        h
    }

    pub fn insert(
        &mut self,
        conn: Connection,
        key: Key,
        phase: Phase,
        now: Duration,
    ) -> ConnectionHandle {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(None);
                self.generations.push(0);
                (self.slots.len() - 1) as u32
            }
        };
        let h = ConnectionHandle {
            index,
            generation: self.generations[index as usize],
        };
        self.slots[index as usize] = Some(Slot {
            conn,
            key,
            phase,
            born: now,
            dirty: true,
            armed: None,
        });
        self.dirty.push_back(h);
        self.by_tuple.insert(key, h);
        self.last_found = None;
        self.len += 1;
        if phase == Phase::HalfOpen {
            self.half_open += 1;
        }
        h
    }

    pub fn remove(&mut self, h: ConnectionHandle) -> Option<Connection> {
        self.slot(h)?;
        let i = h.index as usize;
        let slot = self.slots[i].take()?;
        self.generations[i] = self.generations[i].wrapping_add(1);
        self.free.push(h.index);
        self.by_tuple.remove(&slot.key);
        self.last_found = None;
        self.len -= 1;
        if slot.phase == Phase::HalfOpen {
            self.half_open -= 1;
        }
        Some(slot.conn)
    }

    pub fn get(&self, h: ConnectionHandle) -> Option<&Connection> {
        self.slot(h).map(|s| &s.conn)
    }

    /// The connection, marked as possibly having output and a new deadline.
    pub fn touch(&mut self, h: ConnectionHandle) -> Option<&mut Connection> {
        let share = self.rx_share();
        let s = self.slot_mut(h)?;
        s.conn.set_rx_share(share);
        if !s.dirty {
            s.dirty = true;
            self.dirty.push_back(h);
        }
        self.slot_mut(h).map(|s| &mut s.conn)
    }

    pub fn get_mut(&mut self, h: ConnectionHandle) -> Option<&mut Connection> {
        self.touch(h)
    }

    pub fn phase(&self, h: ConnectionHandle) -> Option<Phase> {
        self.slot(h).map(|s| s.phase)
    }

    pub fn born(&self, h: ConnectionHandle) -> Option<Duration> {
        self.slot(h).map(|s| s.born)
    }

    /// False if `h` is stale.
    pub fn set_phase(&mut self, h: ConnectionHandle, phase: Phase) -> bool {
        let Some(s) = self.slot_mut(h) else {
            return false;
        };
        let was = std::mem::replace(&mut s.phase, phase);
        if was == Phase::HalfOpen && phase != Phase::HalfOpen {
            self.half_open -= 1;
        }
        // Its deadline no longer includes the SYN queue's expiry.
        self.touch(h);
        true
    }

    /// Connections the application holds.
    pub fn handles(&self) -> impl Iterator<Item = ConnectionHandle> + '_ {
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            let s = s.as_ref()?;
            matches!(s.phase, Phase::Accepted | Phase::Own).then_some(ConnectionHandle {
                index: i as u32,
                generation: self.generations[i],
            })
        })
    }

    fn deadline(&self, s: &Slot) -> Option<Duration> {
        let t = s.conn.poll_timeout();
        if s.phase == Phase::HalfOpen {
            let expiry = s.born + self.syn_timeout;
            return Some(t.map_or(expiry, |t| t.min(expiry)));
        }
        t
    }

    /// File `h`'s deadline if it changed.
    fn rearm(&mut self, h: ConnectionHandle) {
        let Some(s) = self.slot(h) else { return };
        let d = self.deadline(s);
        let s = self.slot_mut(h).expect("checked above");
        if s.armed != d {
            s.armed = d;
            if let Some(t) = d {
                self.heap.push(Reverse((t, h)));
            }
        }
    }

    pub fn last_now(&self) -> Duration {
        self.last_now
    }

    /// The next segment of any touched connection, with its address pair. Round-robin, one
    /// segment per connection at a time: a connection with a full window to send must not
    /// hold back the others' ACKs and retransmissions while the data path has little room.
    ///
    /// The segment is written into `packet` behind room for the connection's IP header
    /// (`ip::header_len`); returns the address pair and the segment's length.
    /// The next segment of a connection with output, behind its IP header in `packet`:
    /// its address pair and the bytes written there (header only, with its payload's slices
    /// in `gather`'s vector, when the caller gathers and the segment has a payload).
    pub fn poll_transmit(
        &mut self,
        now: Duration,
        packet: &mut [u8],
        fill: ChecksumFill,
        mut gather: Option<(&mut Vec<Bytes>, GatherLimits)>,
    ) -> Option<(IpPair, usize, u16)> {
        self.last_now = self.last_now.max(now);
        let share = self.rx_share();
        while let Some(h) = self.dirty.pop_front() {
            let Some(s) = self.slot_mut(h) else {
                continue;
            };
            s.conn.set_rx_share(share);
            let ip = s.conn.config().ip;
            let seg = packet
                .get_mut(super::ip::header_len(ip)..)
                .unwrap_or_default();
            let into = gather.as_mut().map(|(parts, limits)| Gather {
                parts,
                limits: *limits,
            });
            let n = s.conn.poll_transmit_out(
                now,
                Out {
                    buf: seg,
                    fill,
                    gather: into,
                },
            );
            if let Some(n) = n {
                // A gathered payload longer than the connection's segments is a super-segment
                // for the data path to hand over whole, cut into segments of this size.
                let mss = s.conn.gso_size();
                self.dirty.push_back(h);
                let gathered: usize = gather
                    .as_ref()
                    .map_or(0, |(p, _)| p.iter().map(Bytes::len).sum());
                let gso = if gathered > mss as usize {
                    mss as u16
                } else {
                    0
                };
                return Some((ip, n, gso));
            }
            s.dirty = false;
            self.rearm(h);
        }
        None
    }

    fn is_current(&self, t: Duration, h: ConnectionHandle) -> bool {
        self.slot(h).is_some_and(|s| s.armed == Some(t))
    }

    pub fn poll_timeout(&mut self) -> Option<Duration> {
        let touched: Vec<ConnectionHandle> = self.dirty.iter().copied().collect();
        for h in touched {
            self.rearm(h);
        }
        // Stale entries (a deadline that moved, a connection released) wait in the heap until
        // they reach the top or the heap is rebuilt.
        if self.heap.len() > 2 * self.len + 1024 {
            let all = std::mem::take(&mut self.heap).into_vec();
            let live = all
                .into_iter()
                .filter(|Reverse((t, h))| self.is_current(*t, *h));
            self.heap = live.collect();
        }
        while let Some(&Reverse((t, h))) = self.heap.peek() {
            if self.is_current(t, h) {
                return Some(t);
            }
            self.heap.pop();
        }
        None
    }

    /// Connections whose deadline is at or before `now`; their deadlines are unfiled (the
    /// caller touches them, which files the next).
    pub fn due(&mut self, now: Duration) -> Vec<ConnectionHandle> {
        let mut out = Vec::new();
        while let Some(&Reverse((t, h))) = self.heap.peek() {
            if t > now {
                break;
            }
            self.heap.pop();
            if self.is_current(t, h) {
                if let Some(s) = self.slot_mut(h) {
                    s.armed = None;
                }
                out.push(h);
            }
        }
        out
    }
}
