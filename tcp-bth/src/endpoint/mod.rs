//! The sans-IO endpoint: every connection of one host (or one TUN device), the listening
//! ports, the SYN queue and the replies to segments that belong to no connection.
//!
//! Shaped after quinn-proto's `Endpoint`: the driver hands in whole IP packets
//! ([`Endpoint::handle`]) and the current time; the endpoint routes each segment by its 4-tuple
//! to a [`Connection`], or creates one (a SYN to a listening port), or answers it (an RST, a
//! SYN cookie's SYN-ACK). The driver takes IP packets out ([`Endpoint::poll_transmit`]) and
//! asks when the next timer is due ([`Endpoint::poll_timeout`]). The application reaches its
//! connections through [`ConnectionHandle`]s: [`Endpoint::connect`], [`Endpoint::accept`],
//! [`Endpoint::conn_mut`].
//!
//! * **SYN queue** (absorbing the old `Listener`): a SYN to a listening port creates a
//!   half-open connection (SYN-RECEIVED); at most [`EndpointConfig::syn_queue`] exist at once,
//!   each for at most [`EndpointConfig::syn_timeout`] (30 s). Completed, it waits in the accept queue
//!   (at most [`EndpointConfig::backlog`]; beyond, it is reset).
//! * **SYN cookies** (RFC 4987) when the SYN queue is full: the SYN-ACK's ISS and TSval carry
//!   what the SYN offered ([`cookie`]), and the peer's ACK rebuilds the connection. A SYN
//!   flood therefore costs no state, and established connections keep being served.
//! * **RST for segments to no connection** (RFC 9293 §3.10.7.1), rate-limited.
//! * **ISNs** per connection from RFC 6528's keyed hash with the endpoint's random key.
//!
//! Cost per packet does not grow with the number of connections: a hash lookup by 4-tuple,
//! a queue of connections with output ([`Endpoint::poll_transmit`] visits only those), and a
//! heap of timer deadlines.

pub mod cookie;
pub mod icmp;
mod ip;
mod reply;
#[cfg(test)]
mod rx_queue_tests;
mod table;
#[cfg(test)]
pub(crate) mod tests;

pub use ip::{emit as emit_ip, parse as parse_ip, IpDrop};
pub use table::ConnectionHandle;

use crate::config::Config;
use crate::conn::GatherLimits;
use crate::conn::{Connection, PeerSyn, State};
use crate::isn::IsnKey;
use crate::wire::{checksum, ChecksumFill, IpPair, TcpRepr, TcpSegment};
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;
use table::{Phase, Table};
use thiserror::Error;

/// Settings of an [`Endpoint`].
#[derive(Debug, Clone)]
pub struct EndpointConfig {
    /// Half-open connections held at once; SYNs beyond get cookies (or are dropped).
    pub syn_queue: usize,
    /// Established connections waiting for [`Endpoint::accept`].
    pub backlog: usize,
    /// A half-open connection older than this is dropped. Long enough for several SYN-ACK
    /// retransmissions (1, 2, 4, 8 s after the first): a handshake whose ACK was lost must
    /// not be forgotten while the peer holds its end open (Linux keeps one about 63 s).
    pub syn_timeout: Duration,
    /// Answer SYNs with cookies when the SYN queue is full (otherwise drop them).
    pub syn_cookies: bool,
    /// Connections held at once (half-open, waiting, accepted and connecting).
    pub max_connections: usize,
    /// RSTs sent per second at most, for segments to no connection (a burst of a tenth of a
    /// second's worth is allowed): a scan must not turn the endpoint into an amplifier.
    pub rst_per_sec: u32,
    /// Segments of the endpoint's own (RSTs, cookie SYN-ACKs) waiting to be sent.
    pub max_tx_queue: usize,
    /// Secret for SYN cookies and ephemeral ports ([`IsnKey::random`] by default).
    pub key: IsnKey,
    /// Our addresses; packets to others are dropped and counted. Empty: any.
    pub local: Vec<IpPair>,
    /// The longest IP packet the data path carries (a driver's transmit buffer: the TUN
    /// driver's `max_packet`). `connect` and `listen` refuse a `Config` whose
    /// [`largest_packet`](Config::largest_packet) is longer, rather than let its connections
    /// stall. Default: no limit (`usize::MAX`).
    pub max_packet: usize,
    /// The queue of the device this endpoint reads its packets from, when the driver knows
    /// it (a TUN device's `txqueuelen`: the kernel drops what arrives while it is full). Each
    /// connection's receive window is held to its share of it, so that what the peers may
    /// have in flight towards us fits the queue and no packet is dropped there for want of
    /// room ([`RxQueue`]). None: windows are `Config::recv_window` alone.
    pub rx_queue: Option<RxQueue>,
}

/// The receiving device's queue ([`EndpointConfig::rx_queue`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxQueue {
    /// Packets it holds.
    pub packets: u32,
    /// It hands over super-segments whole (TSO on a TUN device), so a queued packet may hold
    /// up to 64 KiB of a connection that sends them (S framing, plain); otherwise one
    /// segment.
    pub whole_super_segments: bool,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            syn_queue: 1024,
            backlog: 1024,
            syn_timeout: Duration::from_secs(30),
            syn_cookies: true,
            max_connections: 65536,
            rst_per_sec: 10_000,
            max_tx_queue: 4096,
            key: IsnKey::random(),
            local: Vec::new(),
            max_packet: usize::MAX,
            rx_queue: None,
        }
    }
}

/// Counters; never reset.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct EndpointStats {
    /// IP packets handed in (`handle`, `handle_verified`).
    pub packets_in: u64,
    /// IP packets written out (`poll_transmit*`).
    pub packets_out: u64,
    /// IP packets whose header did not parse: dropped before TCP.
    pub ip_malformed: u64,
    /// Neither TCP nor an ICMP error about our packets.
    pub not_tcp: u64,
    /// ICMP errors (destination unreachable, packet too big) handed to the connection whose
    /// packet they quote, which checks the sequence number (`Stats::icmp_errors`).
    pub icmp_in: u64,
    /// ICMP errors quoting a packet of no connection of ours.
    pub icmp_unmatched: u64,
    /// ICMP errors refused: bad checksum, or a quoted packet not ours or not TCP.
    pub icmp_malformed: u64,
    /// IP fragments: dropped (this stack sends with DF set and reassembles nothing).
    pub fragments: u64,
    /// Packets to an address not in `EndpointConfig::local`: dropped.
    pub not_local: u64,
    /// Segments that do not parse as TCP or fail their checksum, for no connection.
    pub tcp_malformed: u64,
    /// SYNs that created a half-open connection.
    pub syns: u64,
    /// SYNs answered with a cookie.
    pub cookies_sent: u64,
    /// Cookies an ACK returned valid: connections rebuilt from them.
    pub cookies_accepted: u64,
    /// Valid cookies whose ACK the rebuilt connection did not accept (nothing kept).
    pub cookies_failed: u64,
    /// SYNs dropped: queue full without cookies, no cookie possible, or the table full.
    pub syns_dropped: u64,
    /// Half-open connections that timed out or closed before completing.
    pub syn_expired: u64,
    /// Handshakes completed and queued for accept.
    pub established: u64,
    /// Handshakes completed and reset because the accept queue was full (`backlog`).
    pub backlog_drops: u64,
    /// Segments to no connection.
    pub unmatched: u64,
    /// RSTs sent in answer to those.
    pub rst_sent: u64,
    /// RSTs the rate limit held back (`EndpointConfig::rst_per_sec`).
    pub rst_limited: u64,
    /// Endpoint segments dropped because their queue was full.
    pub tx_drops: u64,
    /// Payload bytes of queued segments (those a released connection still had to send)
    /// copied into the transmit buffer: a second copy of bytes its connection already
    /// counted, beside `Stats::tx_payload_copied`. Zero unless connections are released
    /// with data unsent.
    pub tx_payload_copied: u64,
}

/// Why [`Endpoint::connect`] or [`Endpoint::listen`] refused to open a connection or a
/// listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum OpenError {
    /// `connect` with a local port whose 4-tuple a connection already has.
    #[error("a connection with this 4-tuple exists")]
    TupleInUse,
    /// `connect` with local port 0, and every ephemeral port (49152..=65535) is in use toward
    /// this peer.
    #[error("no free local port toward this peer")]
    NoPort,
    /// `connect` when the endpoint holds `EndpointConfig::max_connections`.
    #[error("the endpoint holds its maximum number of connections")]
    TooManyConnections,
    /// `Config::mss` asks for longer packets than the data path carries
    /// (`EndpointConfig::max_packet`).
    #[error("Config::mss {mss} needs IP packets of up to {needs} bytes, but the data path carries {max}: set the MSS to at most {}", max.saturating_sub(80))]
    MssTooLarge {
        /// `Config::mss`.
        mss: u16,
        /// The longest IP packet it needs, in bytes (`Config::largest_packet`).
        needs: usize,
        /// `EndpointConfig::max_packet`, in bytes.
        max: usize,
    },
}

/// A packet [`Endpoint::poll_transmit`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// `src` us, `dst` the peer.
    pub ip: IpPair,
    /// The whole IP packet's length.
    pub len: usize,
    /// Bytes of it written into the caller's buffer: `len`, or with
    /// [`poll_transmit_gather`](Endpoint::poll_transmit_gather) the headers alone when the
    /// payload's slices were handed over instead.
    pub in_buf: usize,
    /// Where the TCP segment starts (the IP header's length): virtio-net's `csum_start`.
    pub tcp_offset: usize,
    /// How the TCP checksum was filled: what [`poll_transmit_into`](Endpoint::poll_transmit_into)
    /// was asked for. `Partial` leaves the sum over the segment to the device.
    pub checksum: ChecksumFill,
    /// Non-zero: the packet is a super-segment ([`GatherLimits::gso_payload`]) to be cut into
    /// segments of this many payload bytes (virtio-net's `gso_size`); its checksum is
    /// `Partial`.
    pub gso_size: u16,
}

/// Every connection of one host (or one TUN device), its listening ports and SYN queue: the
/// sans-IO endpoint a driver feeds IP packets (see [`crate::endpoint`]).
pub struct Endpoint {
    cfg: EndpointConfig,
    listeners: HashMap<u16, Config>,
    table: Table,
    accept_q: VecDeque<ConnectionHandle>,
    /// The endpoint's own segments (RST, cookie SYN-ACK), TCP bytes with their address pair.
    tx: VecDeque<(IpPair, Vec<u8>)>,
    rst: reply::RstLimiter,
    next_port: u16,
    /// The largest `Config::mss` of any connection or listener: sizes `poll_transmit`'s vector.
    largest_mss: u16,
    stats: EndpointStats,
}

impl Endpoint {
    /// An endpoint without connections or listeners (`syn_queue` and `max_tx_queue` at least
    /// 1).
    pub fn new(cfg: EndpointConfig) -> Endpoint {
        let cfg = EndpointConfig {
            syn_queue: cfg.syn_queue.max(1),
            max_tx_queue: cfg.max_tx_queue.max(1),
            ..cfg
        };
        let next_port = u16::from_le_bytes([cfg.key.0[0], cfg.key.0[1]]);
        let mut table = Table::new(cfg.syn_timeout);
        table.set_rx_queue(cfg.rx_queue);
        Endpoint {
            rst: reply::RstLimiter::new(cfg.rst_per_sec),
            table,
            cfg,
            listeners: HashMap::new(),
            accept_q: VecDeque::new(),
            tx: VecDeque::new(),
            next_port,
            largest_mss: 0,
            stats: EndpointStats::default(),
        }
    }

    /// The longest IP packet any connection of this endpoint builds: the longest IP and TCP
    /// headers and the largest MSS configured (a connection's payload is never below 64).
    fn max_packet_len(&self) -> usize {
        40 + crate::wire::TCP_HEADER_MAX + usize::from(self.largest_mss.max(64))
    }

    /// Accept connections on `port`; each gets a copy of `template` with its addresses and
    /// the peer's port. Refused (nothing changes) when the template's packets would be longer
    /// than the data path carries ([`OpenError::MssTooLarge`]).
    pub fn listen(&mut self, port: u16, template: Config) -> Result<(), OpenError> {
        self.check_packet_size(&template)?;
        self.largest_mss = self.largest_mss.max(template.mss);
        self.listeners.insert(
            port,
            Config {
                local_port: port,
                ..template
            },
        );
        Ok(())
    }

    fn check_packet_size(&self, cfg: &Config) -> Result<(), OpenError> {
        let needs = cfg.largest_packet();
        if needs > self.cfg.max_packet {
            return Err(OpenError::MssTooLarge {
                mss: cfg.mss,
                needs,
                max: self.cfg.max_packet,
            });
        }
        Ok(())
    }

    /// Stop accepting connections on `port`: SYNs to it are answered with an RST again.
    /// Connections it already made (half-open, waiting for accept, accepted) stay. Returns
    /// whether the port was listening.
    pub fn stop_listening(&mut self, port: u16) -> bool {
        self.listeners.remove(&port).is_some()
    }

    /// The endpoint's counters now (each connection has its own, [`Connection::stats`]).
    pub fn stats(&self) -> EndpointStats {
        self.stats
    }

    /// The configuration in force (`syn_queue` and `max_tx_queue` raised to 1, and as set
    /// since by [`set_max_packet`](Self::set_max_packet) and
    /// [`set_rx_queue`](Self::set_rx_queue)).
    pub fn config(&self) -> &EndpointConfig {
        &self.cfg
    }

    /// Set [`EndpointConfig::max_packet`] (a driver that serves an endpoint made elsewhere
    /// does, from its buffers). Connections and listeners already made are not checked again.
    pub fn set_max_packet(&mut self, max: usize) {
        self.cfg.max_packet = max;
    }

    /// Set [`EndpointConfig::rx_queue`] (a driver that serves an endpoint made elsewhere does,
    /// from its device). Every connection's window follows from its next segment on.
    pub fn set_rx_queue(&mut self, q: Option<RxQueue>) {
        self.cfg.rx_queue = q;
        self.table.set_rx_queue(q);
    }

    /// Connections held (of every phase).
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// No connection held.
    pub fn is_empty(&self) -> bool {
        self.table.len() == 0
    }

    /// Half-open connections now (≤ `syn_queue`).
    pub fn syn_queue_len(&self) -> usize {
        self.table.half_open()
    }

    /// Completed connections waiting for accept (≤ `backlog`).
    pub fn backlog_len(&self) -> usize {
        self.accept_q.len()
    }

    /// Endpoint segments waiting to be sent (≤ `max_tx_queue`).
    pub fn tx_queue_len(&self) -> usize {
        self.tx.len()
    }

    /// Open a connection (`cfg.ip`: `src` ours, `dst` the peer's). `cfg.local_port` 0 picks
    /// a free ephemeral port. The SYN goes out with the next [`poll_transmit`](Self::poll_transmit).
    pub fn connect(
        &mut self,
        now: Duration,
        mut cfg: Config,
    ) -> Result<ConnectionHandle, OpenError> {
        if self.table.len() >= self.cfg.max_connections {
            return Err(OpenError::TooManyConnections);
        }
        self.check_packet_size(&cfg)?;
        if cfg.local_port == 0 {
            cfg.local_port = self.free_port(cfg.ip, cfg.remote_port)?;
        } else if self
            .table
            .find(cfg.ip, cfg.local_port, cfg.remote_port)
            .is_some()
        {
            return Err(OpenError::TupleInUse);
        }
        self.largest_mss = self.largest_mss.max(cfg.mss);
        let (ip, lp, rp) = (cfg.ip, cfg.local_port, cfg.remote_port);
        let h = self
            .table
            .insert(Connection::connect(cfg, now), (ip, lp, rp), Phase::Own, now);
        Ok(h)
    }

    /// An ephemeral port (49152..=65535) free toward `remote`, from a secret starting point
    /// (RFC 6056 spirit: not guessable, not reused while in use).
    fn free_port(&mut self, ip: IpPair, remote_port: u16) -> Result<u16, OpenError> {
        const LOW: u16 = 49152;
        const COUNT: u16 = 16384;
        for _ in 0..COUNT {
            self.next_port = self.next_port.wrapping_add(1);
            let port = LOW + self.next_port % COUNT;
            if self.table.find(ip, port, remote_port).is_none() {
                return Ok(port);
            }
        }
        Err(OpenError::NoPort)
    }

    /// The next connection whose handshake completed, oldest first.
    pub fn accept(&mut self) -> Option<ConnectionHandle> {
        while let Some(h) = self.accept_q.pop_front() {
            if self.table.set_phase(h, Phase::Accepted) {
                return Some(h);
            }
        }
        None
    }

    /// The connection behind `h`, to read; `None` for a released handle. Through `&self`, so
    /// unlike [`conn_mut`](Self::conn_mut) it does not mark the connection for the next
    /// transmit pass.
    pub fn conn(&self, h: ConnectionHandle) -> Option<&Connection> {
        self.table.get(h)
    }

    /// The connection behind `h`, for the application's calls. Whatever it changes is sent
    /// and timed by the next `poll_transmit` / `poll_timeout`.
    pub fn conn_mut(&mut self, h: ConnectionHandle) -> Option<&mut Connection> {
        self.table.get_mut(h)
    }

    /// Every connection the application holds (connected or accepted), in table order.
    pub fn handles(&self) -> impl Iterator<Item = ConnectionHandle> + '_ {
        self.table.handles()
    }

    /// Forget a connection and hand it back (for its counters). What it still had to send
    /// (an RST after `abort`, a last ACK) goes out with the endpoint's own segments. Its
    /// 4-tuple is free again: segments for it get the endpoint's RST. Keep a failed connection
    /// until its peer has seen the RST (and NAK) it sends, which it repeats to anything the
    /// peer sends.
    pub fn release(&mut self, h: ConnectionHandle) -> Option<Connection> {
        let now = self.table.last_now();
        let mut c = self.table.remove(h)?;
        let ip = c.config().ip;
        while let Some(seg) = c.poll_transmit(now) {
            self.push_tx(ip, seg);
        }
        Some(c)
    }

    /// One IP packet from the network.
    pub fn handle(&mut self, now: Duration, packet: &[u8]) {
        self.handle_packet(now, packet, false)
    }

    /// One IP packet whose TCP checksum the data path has already vouched for (a TUN device
    /// with checksum offload says `DATA_VALID`, or `NEEDS_CSUM` for a packet that never left
    /// the host): the checksum pass is skipped, everything else is checked as usual. The
    /// ICRC still covers every BTH segment's payload.
    pub fn handle_verified(&mut self, now: Duration, packet: &[u8]) {
        self.handle_packet(now, packet, true)
    }

    fn handle_packet(&mut self, now: Duration, packet: &[u8], verified: bool) {
        self.stats.packets_in += 1;
        let (pair, proto, payload) = match ip::parse_any(packet) {
            Ok(p) => p,
            Err(IpDrop::Malformed) => return self.stats.ip_malformed += 1,
            Err(IpDrop::NotTcp) => return self.stats.not_tcp += 1,
            Err(IpDrop::Fragment) => return self.stats.fragments += 1,
        };
        if !self.cfg.local.is_empty() && !self.is_local(pair) {
            self.stats.not_local += 1;
            return;
        }
        match proto {
            etherparse::IpNumber::TCP => self.on_segment(now, pair, payload, verified),
            _ => self.on_icmp(now, pair, proto, payload),
        }
    }

    /// An ICMP error about one of our packets goes to the connection that sent it, which
    /// checks the quoted sequence number (`conn/icmp.rs`). Errors for no connection (a
    /// half-open SYN cookie keeps no state to fail) and other ICMP messages are counted.
    fn on_icmp(&mut self, now: Duration, pair: IpPair, proto: etherparse::IpNumber, bytes: &[u8]) {
        let q = match icmp::parse(pair, proto, bytes) {
            Ok(q) => q,
            Err(icmp::IcmpDrop::NotAnError) => return self.stats.not_tcp += 1,
            Err(icmp::IcmpDrop::Malformed) => return self.stats.icmp_malformed += 1,
        };
        let Some(h) = self.table.find(q.ip, q.src_port, q.dst_port) else {
            self.stats.icmp_unmatched += 1;
            return;
        };
        self.stats.icmp_in += 1;
        if let Some(c) = self.table.touch(h) {
            c.handle_icmp(now, q.error, q.seq);
        }
        self.after_input(h);
    }

    fn is_local(&self, received: IpPair) -> bool {
        let dst = received.reversed();
        self.cfg.local.iter().any(|l| match (l, dst) {
            (IpPair::V4 { src, .. }, IpPair::V4 { src: d, .. }) => *src == d,
            (IpPair::V6 { src, .. }, IpPair::V6 { src: d, .. }) => *src == d,
            _ => false,
        })
    }

    /// One TCP segment; `ip` as received (`src` the peer).
    pub fn handle_segment(&mut self, now: Duration, ip: IpPair, tcp: &[u8]) {
        self.on_segment(now, ip, tcp, false)
    }

    fn on_segment(&mut self, now: Duration, ip: IpPair, tcp: &[u8], verified: bool) {
        // Routing needs the ports only: a segment for a connection is parsed (and its
        // checksum checked) once, by the connection, which counts what it refuses.
        let Ok(view) = TcpSegment::new_checked(tcp) else {
            self.stats.tcp_malformed += 1;
            return;
        };
        let ours = ip.reversed();
        if let Some(h) = self.table.find(ours, view.dst_port(), view.src_port()) {
            if let Some(c) = self.table.touch(h) {
                c.handle_segment_checked(now, tcp, verified);
            }
            self.after_input(h);
            return;
        }
        let Ok(seg) = TcpRepr::parse(tcp, (!verified).then_some(ip)) else {
            self.stats.tcp_malformed += 1;
            return;
        };
        match self.listeners.get(&seg.dst_port) {
            Some(t) if seg.flags.syn() && !seg.flags.ack() && !seg.flags.rst() => {
                let t = t.clone();
                self.on_syn(now, ours, t, &seg)
            }
            Some(t) if seg.flags.ack() && !seg.flags.syn() && !seg.flags.rst() => {
                let t = t.clone();
                if !self.on_cookie_ack(now, ours, t, &seg, tcp, verified) {
                    self.unmatched(now, ours, &seg);
                }
            }
            _ => self.unmatched(now, ours, &seg),
        }
    }

    fn on_syn(&mut self, now: Duration, ours: IpPair, mut cfg: Config, seg: &TcpRepr) {
        cfg.ip = ours;
        if self.table.len() >= self.cfg.max_connections {
            self.stats.syns_dropped += 1;
            return;
        }
        if self.table.half_open() < self.cfg.syn_queue {
            let Some(conn) = Connection::accept_with(cfg, now, seg, None) else {
                self.stats.syns_dropped += 1;
                return;
            };
            self.stats.syns += 1;
            let key = (ours, seg.dst_port, seg.src_port);
            let h = self.table.insert(conn, key, Phase::HalfOpen, now);
            self.after_input(h);
            return;
        }
        if !self.cfg.syn_cookies {
            self.stats.syns_dropped += 1;
            return;
        }
        // The cookie carries what our SYN-ACK will settle, not what the SYN offered: only a
        // SYN-ACK with timestamps gets them echoed (a tcp_bth SYN-ACK always has them, folded
        // into its hello, whether the SYN's hello folded them too or, amendment 4, had T=0
        // beside the RFC 7323 option; a plain one only if this listener uses them too).
        let mut peer = PeerSyn::of(seg);
        let bth = cfg.bth && peer.bth.is_some();
        if !bth {
            peer.bth = None;
        }
        peer.timestamps = !bth && cfg.timestamps && peer.timestamps;
        let ports = (seg.dst_port, seg.src_port);
        let Ok(c) = cookie::make(&self.cfg.key, now, ours, ports, &peer) else {
            self.stats.syns_dropped += 1;
            return;
        };
        let Some(mut conn) = Connection::accept_with(cfg, now, seg, Some(c.iss)) else {
            self.stats.syns_dropped += 1;
            return;
        };
        if let Some(v) = c.tsval {
            conn.set_tsval(now, v);
        }
        // The SYN-ACK leaves; the connection does not stay.
        if let Some(syn_ack) = conn.poll_transmit(now) {
            self.stats.cookies_sent += 1;
            self.push_tx(ours, syn_ack);
        }
    }

    /// An ACK to a listening port from no connection: a returning SYN cookie, or not.
    fn on_cookie_ack(
        &mut self,
        now: Duration,
        ours: IpPair,
        cfg: Config,
        seg: &TcpRepr,
        raw: &[u8],
        verified: bool,
    ) -> bool {
        if !self.cfg.syn_cookies || self.table.len() >= self.cfg.max_connections {
            return false;
        }
        let o = &seg.options;
        let ts = o.bth.and_then(|b| b.timestamps).or(o.timestamps);
        let ports = (seg.dst_port, seg.src_port);
        let tsecr = ts.map(|t| t.tsecr);
        let Some(peer) = cookie::check(&self.cfg.key, now, ours, ports, seg.seq, seg.ack, tsecr)
        else {
            return false;
        };
        let mut cfg = cfg;
        cfg.ip = ours;
        let iss = seg.ack.wrapping_sub(1);
        let (tsval, peer_tsval) = ts.map_or((0, 0), |t| (t.tsecr, t.tsval));
        let conn = Connection::from_cookie(cfg, now, seg.src_port, peer, iss, tsval, peer_tsval);
        self.stats.cookies_accepted += 1;
        let h = self.table.insert(
            conn,
            (ours, seg.dst_port, seg.src_port),
            Phase::HalfOpen,
            now,
        );
        if let Some(c) = self.table.touch(h) {
            c.handle_segment_checked(now, raw, verified);
        }
        self.after_input(h);
        true
    }

    fn unmatched(&mut self, now: Duration, ours: IpPair, seg: &TcpRepr) {
        self.stats.unmatched += 1;
        let Some(rst) = reply::rst_for(ours, seg) else {
            return;
        };
        if !self.rst.allow(now) {
            self.stats.rst_limited += 1;
            return;
        }
        self.stats.rst_sent += 1;
        self.push_tx(ours, rst);
    }

    fn push_tx(&mut self, ip: IpPair, seg: Vec<u8>) {
        if self.tx.len() >= self.cfg.max_tx_queue {
            self.tx.pop_front();
            self.stats.tx_drops += 1;
        }
        self.tx.push_back((ip, seg));
    }

    /// A half-open connection's handshake ended: queue it for accept, or drop it.
    fn after_input(&mut self, h: ConnectionHandle) {
        if self.table.phase(h) != Some(Phase::HalfOpen) {
            return;
        }
        let Some(state) = self.table.get(h).map(Connection::state) else {
            return;
        };
        match state {
            State::SynReceived => {}
            State::Closed => {
                self.stats.syn_expired += 1;
                self.drop_conn(h);
            }
            _ if self.accept_q.len() >= self.cfg.backlog => {
                self.stats.backlog_drops += 1;
                if let Some(c) = self.table.get_mut(h) {
                    c.abort();
                }
                self.drop_conn(h);
            }
            _ => {
                self.stats.established += 1;
                self.table.set_phase(h, Phase::Waiting);
                self.accept_q.push_back(h);
            }
        }
    }

    /// Remove a connection the application never saw, sending what it still has to send.
    fn drop_conn(&mut self, h: ConnectionHandle) {
        self.release(h);
    }

    /// The next IP packet to send, in a vector of its own (resized to fit): for tools, tests
    /// and the simulator. Drivers use [`poll_transmit_into`](Self::poll_transmit_into).
    pub fn poll_transmit(&mut self, now: Duration, buf: &mut Vec<u8>) -> Option<Transmit> {
        buf.resize(self.max_packet_len(), 0);
        let t = self.poll_transmit_into(now, buf, ChecksumFill::Full);
        buf.truncate(t.map_or(0, |t| t.len));
        t
    }

    /// Write the next IP packet to send, if any, straight into `buf` (a driver's transmit
    /// buffer; at least the MTU the connections' MSS was set from). Segments are built in
    /// place behind the IP header: their payload is copied once, from the application's
    /// buffer. With `ChecksumFill::Partial` the TCP checksum field holds the pseudo-header
    /// sum for a device with checksum offload to finish.
    pub fn poll_transmit_into(
        &mut self,
        now: Duration,
        buf: &mut [u8],
        fill: ChecksumFill,
    ) -> Option<Transmit> {
        self.transmit(now, buf, fill, None)
    }

    /// [`poll_transmit_into`](Self::poll_transmit_into) for a driver that writes a packet
    /// as gathered parts (`writev`): the IP and TCP headers go into `buf`, and a data
    /// segment's payload, as slices of the application's posted buffers (within `limits`),
    /// into `parts` (cleared first) instead of behind them
    /// (`Stats::tx_payload_gathered`). The packet is `buf[..in_buf]` followed by
    /// `parts`, `len` bytes in all; hold the parts until the write is done.
    pub fn poll_transmit_gather(
        &mut self,
        now: Duration,
        buf: &mut [u8],
        fill: ChecksumFill,
        parts: &mut Vec<Bytes>,
        limits: GatherLimits,
    ) -> Option<Transmit> {
        parts.clear();
        self.transmit(now, buf, fill, Some((parts, limits)))
    }

    fn transmit(
        &mut self,
        now: Duration,
        buf: &mut [u8],
        fill: ChecksumFill,
        mut gather: Option<(&mut Vec<Bytes>, GatherLimits)>,
    ) -> Option<Transmit> {
        let (ip, in_buf, gso_size) = match self.tx.pop_front() {
            // The endpoint's own segments (RSTs, cookie SYN-ACKs: a header only) and what a
            // released connection still had to send (which may carry payload).
            Some((ip, seg)) => {
                let at = ip::header_len(ip);
                let Some(dst) = buf.get_mut(at..at + seg.len()) else {
                    self.stats.tx_drops += 1;
                    return None;
                };
                dst.copy_from_slice(&seg);
                let payload = TcpSegment::new_checked(&*dst).map_or(0, |s| s.payload().len());
                self.stats.tx_payload_copied += payload as u64;
                // Built with a full checksum; a partial one is asked for all alike.
                if checksum::fill(ip, dst, fill).is_err() {
                    self.stats.tx_drops += 1;
                    return None;
                }
                (ip, seg.len(), 0)
            }
            None => self.table.poll_transmit(
                now,
                buf,
                fill,
                gather.as_mut().map(|(p, m)| (&mut **p, *m)),
            )?,
        };
        let gathered: usize = gather.map_or(0, |(p, _)| p.iter().map(|b| b.len()).sum());
        let seg_len = in_buf + gathered;
        if !ip::emit_header(ip, seg_len, buf) {
            self.stats.tx_drops += 1;
            return None;
        }
        self.stats.packets_out += 1;
        let tcp_offset = ip::header_len(ip);
        Some(Transmit {
            ip,
            len: tcp_offset + seg_len,
            in_buf: tcp_offset + in_buf,
            tcp_offset,
            checksum: fill,
            gso_size,
        })
    }

    /// Whether [`poll_transmit`](Self::poll_transmit) may have something: the endpoint's own
    /// segments, or connections touched since their output was last drained.
    pub fn has_output(&self) -> bool {
        !self.tx.is_empty() || self.table.has_dirty()
    }

    /// When [`handle_timeout`](Self::handle_timeout) must next run.
    pub fn poll_timeout(&mut self) -> Option<Duration> {
        self.table.poll_timeout()
    }

    /// Fire every timer due at `now`.
    pub fn handle_timeout(&mut self, now: Duration) {
        for h in self.table.due(now) {
            let expired = self.table.phase(h) == Some(Phase::HalfOpen)
                && self
                    .table
                    .born(h)
                    .is_some_and(|b| now >= b + self.cfg.syn_timeout);
            if expired {
                self.stats.syn_expired += 1;
                self.table.remove(h);
                continue;
            }
            if let Some(c) = self.table.touch(h) {
                if c.poll_timeout().is_some_and(|t| t <= now) {
                    c.handle_timeout(now);
                }
            }
            self.after_input(h);
        }
    }
}
