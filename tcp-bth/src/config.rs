//! Per-connection settings.

use crate::isn::IsnKey;
use crate::wire::IpPair;
use bth_cc::Algorithm;
use std::time::Duration;

/// One connection's settings: what its handshake offers, its timers and limits, and its
/// address and ports. [`Default`] is a loopback IPv4 tcp_bth connection with Linux-like timers.
#[derive(Debug, Clone)]
pub struct Config {
    /// Offer the tcp_bth option on SYN / accept it on SYN-ACK. Off: plain TCP.
    pub bth: bool,
    /// Our MSS: MTU − 40 (IPv4 and TCP fixed headers, RFC 6691); an IPv6 connection takes 20
    /// bytes more off it for its longer header, so one setting fits one MTU for both. Senders
    /// take their option bytes off it, so a BTH data segment carries MSS − 40 payload bytes.
    pub mss: u16,
    /// Receive window we advertise, in bytes (scaled by `window_scale`).
    pub recv_window: u32,
    /// Our window scale shift (RFC 7323), 0..=14.
    pub window_scale: u8,
    /// How tcp_bth data segments are framed: each with its own offset, index and ICRC, or the
    /// same option across a message (S, amendment 3), which segmentation offload can carry.
    /// Offered in the hello; S is used only when both ends ask for it.
    pub framing: Framing,
    /// Offer RFC 7323 timestamps on our SYN: on a plain-TCP SYN, and with `bth` beside a hello
    /// without timestamps (T=0, wire spec amendment 4), so that a peer without BTH, which
    /// ignores the hello, still negotiates timestamps (PAWS, RTT from echoes) when the
    /// connection falls back to plain TCP. A BTH connection folds them into its options (T=1)
    /// from the SYN-ACK on either way. Off with `bth`: the SYN's hello folds them (T=1, the
    /// form before amendment 4) and a fallback has none. A listener uses them on a plain
    /// connection only if the peer's SYN offered them too.
    pub timestamps: bool,
    /// Congestion control algorithm (`bth_cc`, built with the MSS).
    pub congestion: Algorithm,
    /// Longest a receiver holds back an ACK for data (RFC 1122 §4.2.3.2 allows 500 ms; a
    /// data-centre round trip is ~100 µs). Senders assume the peer uses the same bound: the
    /// tail loss probe waits for it (`timers.rs`).
    pub ack_delay: Duration,
    /// Floor of the retransmission timeout (RFC 6298 §2.4 says 1 s; 200 ms, as Linux).
    pub min_rto: Duration,
    /// Ceiling of the retransmission timeout, backoff included; also caps the persist wait.
    pub max_rto: Duration,
    /// Give up after this many consecutive retransmission timeouts.
    pub max_retries: u32,
    /// Give up opening after this many retransmitted SYNs (or SYN-ACKs): with the initial
    /// 1 s RTO doubling, 6 (Linux's `tcp_syn_retries`) fails after 127 s, 3 after 15 s.
    pub syn_retries: u32,
    /// 2*MSL for TIME-WAIT.
    pub time_wait: Duration,
    /// First MSN we use (announced in the hello).
    pub first_msn: u16,
    /// Largest message we accept (announced in the hello, at most 2^24-1).
    pub max_message_len: u32,
    /// Receives that may be posted at once (placement caps it below 2^15, MSN arithmetic).
    pub max_posted_recvs: usize,
    /// Bound on out-of-order ranges tracked by the receiver.
    pub max_ooo_ranges: usize,
    /// How long a SEND may wait for the peer to post a receive (message credit) before it
    /// completes with `RnrRetryExceeded` and the connection fails, as an IB requester does
    /// after its RNR retries. `None` waits forever (IB's `rnr_retry = 7`).
    pub rnr_timeout: Option<Duration>,
    /// Receiver-driven admission, sending side: keep the bytes sent beyond the peer's
    /// acknowledgement within the byte grant of its latest R=1 segment, besides cwnd and its
    /// window (`docs/stack.md`, "Receiver-driven admission"). Off, the grant is ignored (the
    /// comparison in the incast simulation); the receiving side advertises its grant either
    /// way, so the two settings interoperate.
    pub admission: bool,
    /// Receiver-driven admission, receiving side: bytes we admit beyond the unfilled bytes of
    /// our posted receives and READ sinks. It is for what lands in memory we cannot count per
    /// message: RDMA WRITE into registered regions, READ requests, zero-length pad bytes. It
    /// slides with what arrives, like a TCP window. 0 admits only what posted buffers hold: a
    /// peer's WRITEs then wait (persist probes) until receives are posted.
    pub admission_allowance: u32,
    /// Receiver-driven admission, receiving side: the most bytes we admit beyond RCV.NXT at
    /// once, whatever is posted. A receiver that keeps receives posted deep (so SENDs never
    /// wait for credit) can still bound the bytes in flight toward it, finer than whole
    /// messages: what an incast needs (`bth_io::sim::incast`). At least one 4 KiB unit,
    /// so a grant never closes for good. `None`: no cap.
    pub admission_cap: Option<u32>,
    /// Keepalive (RFC 9293 §3.8.4, RFC 1122 §4.2.3.6): after `idle` without a segment from
    /// the peer, with nothing of ours outstanding, probe it; a peer that answers none of
    /// `probes` probes is gone, and the connection ends with RST
    /// (`ConnectionError::KeepaliveTimedOut`). `None`, the default as RFC 1122 asks: off.
    pub keepalive: Option<Keepalive>,
    /// User timeout (RFC 5482; Linux's `TCP_USER_TIMEOUT`): the longest data (or our FIN) may
    /// stay sent and unacknowledged before the connection ends with RST
    /// (`ConnectionError::UserTimeout`), however many retransmissions that takes. `None`:
    /// only `max_retries` bounds it (about 15 minutes with the RTO backing off to `max_rto`).
    pub user_timeout: Option<Duration>,
    /// Secret for ISNs (RFC 6528), the rkey seed and the TSval offset: random by default.
    pub isn_key: IsnKey,
    /// Addresses the TCP checksum covers.
    pub ip: IpPair,
    /// Our TCP port.
    pub local_port: u16,
    /// The peer's TCP port (taken from the SYN on a passive open).
    pub remote_port: u16,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            bth: true,
            framing: Framing::PerSegment,
            mss: 1460,
            recv_window: 4 << 20,
            window_scale: 7,
            timestamps: true,
            congestion: Algorithm::Cubic,
            ack_delay: Duration::from_micros(200),
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            max_retries: 15,
            syn_retries: 6,
            time_wait: Duration::from_secs(60),
            first_msn: 0,
            max_message_len: crate::wire::MAX_MESSAGE_LEN,
            max_posted_recvs: 4096,
            max_ooo_ranges: 512,
            rnr_timeout: Some(Duration::from_secs(10)),
            admission: true,
            // 1 MiB: several bandwidth-delay products of a 100 Gbit/s, 20 µs path, so WRITE
            // streams are not slowed where nothing else limits them.
            admission_allowance: 1 << 20,
            admission_cap: None,
            keepalive: None,
            user_timeout: None,
            // Random per Config: ISNs, rkeys and timestamp offsets must not be predictable.
            isn_key: IsnKey::random(),
            ip: IpPair::V4 {
                src: [127, 0, 0, 1],
                dst: [127, 0, 0, 1],
            },
            local_port: 0,
            remote_port: 0,
        }
    }
}

/// How data segments carry their place in the message ([`Config::framing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Framing {
    /// Every segment its own offset, segment index and ICRC (the proposal's form).
    #[default]
    PerSegment,
    /// Sequence-anchored (amendment 3): one option for the whole message, offsets from
    /// sequence numbers, the message length for the ICRC; no ICRC (the TCP checksum checks).
    Seq,
}

/// Keepalive settings ([`Config::keepalive`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// Silence from the peer before the first probe.
    pub idle: Duration,
    /// Between unanswered probes.
    pub interval: Duration,
    /// Unanswered probes before the connection ends.
    pub probes: u32,
}

impl Default for Keepalive {
    /// Linux's defaults: `tcp_keepalive_time` 2 h, `tcp_keepalive_intvl` 75 s,
    /// `tcp_keepalive_probes` 9.
    fn default() -> Keepalive {
        Keepalive {
            idle: Duration::from_secs(7200),
            interval: Duration::from_secs(75),
            probes: 9,
        }
    }
}

impl Config {
    /// The longest IP packet a connection with this configuration may build, in either
    /// family: the MSS (capped at the largest an IPv4 packet holds) with the longest TCP
    /// header (60 bytes) and a 20-byte IPv4 header. An IPv6 connection's header is 20 bytes
    /// longer and its MSS 20 bytes shorter (`Connection` lowers it), so the same bound holds.
    /// [`Endpoint::connect`](crate::Endpoint::connect) and
    /// [`listen`](crate::Endpoint::listen) refuse a configuration whose packets would not fit
    /// the data path's [`EndpointConfig::max_packet`](crate::EndpointConfig::max_packet).
    pub fn largest_packet(&self) -> usize {
        20 + crate::wire::TCP_HEADER_MAX + usize::from(self.mss.min(crate::conn::MAX_MSS))
    }
}
