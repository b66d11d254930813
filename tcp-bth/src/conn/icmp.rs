//! ICMP errors about this connection's packets (RFC 5927, RFC 1122 §4.2.3.9, RFC 1191/8201),
//! handled as Linux handles them (`tcp_v4_err`, `tcp_v6_err`). The endpoint parses the ICMP
//! message and finds the connection by the quoted header (`endpoint/icmp.rs`); here the quoted
//! sequence number is checked against what we have in flight, so a blind attacker must guess
//! it, as for an RST:
//! - destination unreachable while opening is a hard error: the connect fails at once (a SYN
//!   to a network the host has no route to used to wait through every SYN retry, 15 s and
//!   more, while the host's kernel answered each SYN within microseconds);
//! - destination unreachable once established is a soft error: routes come back, so the
//!   connection carries on, and the error is reported if the connection later times out;
//! - packet too big (ICMPv4 fragmentation needed, ICMPv6 packet too big) lowers the MSS; the
//!   segments in flight that no longer fit are cut to the new size and retransmitted at once,
//!   without a congestion response (Linux's `tcp_simple_retransmit`): the path dropped them
//!   for their size, not for congestion.

use super::*;
use thiserror::Error;

/// What an ICMP error said about one of our packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IcmpError {
    /// Destination unreachable (ICMPv4 type 3 other than code 4; ICMPv6 type 1).
    Unreachable(Unreachable),
    /// The path carries packets of at most `mtu` bytes (ICMPv4 type 3 code 4, fragmentation
    /// needed and DF set; ICMPv6 type 2, packet too big).
    PacketTooBig {
        /// The next-hop MTU the message reported, in bytes (IP header included).
        mtu: u32,
    },
}

/// Why the destination was unreachable, as the ICMP code said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Unreachable {
    /// No route to the network (ICMPv4 codes 0, 6, 11; ICMPv6 code 0).
    #[error("network unreachable")]
    Network,
    /// The host did not answer (ICMPv4 codes 1, 7, 12; ICMPv6 code 3).
    #[error("host unreachable")]
    Host,
    /// The host does not speak TCP (ICMPv4 code 2).
    #[error("protocol unreachable")]
    Protocol,
    /// Nothing listens on the port (ICMPv4 code 3; ICMPv6 code 4).
    #[error("port unreachable")]
    Port,
    /// A filter refused the packet (ICMPv4 codes 9, 10, 13; ICMPv6 codes 1, 5, 6).
    #[error("administratively prohibited")]
    Prohibited,
    /// Another code (source route failed, beyond scope, precedence).
    #[error("unreachable (ICMP type {icmp_type}, code {code})")]
    Other {
        /// The ICMP type (3 for ICMPv4, 1 for ICMPv6).
        icmp_type: u8,
        /// The ICMP code.
        code: u8,
    },
}

/// The smallest path MTU taken from an ICMP message, by family: a forged "packet too big"
/// must not shrink segments to a few bytes (Linux clamps to `min_pmtu`, 552 for IPv4; IPv6
/// links carry at least 1280, RFC 8200 §5).
const MIN_PMTU_V4: u32 = 552;
const MIN_PMTU_V6: u32 = 1280;

impl Connection {
    /// An ICMP error quoting one of this connection's packets, whose TCP sequence number was
    /// `seq`. Ignored (and counted) unless `seq` is one we sent and have not had
    /// acknowledged (RFC 5927 §4.1).
    pub fn handle_icmp(&mut self, now: Duration, err: IcmpError, seq: u32) {
        self.on_icmp(now, err, seq);
        self.note_events();
    }

    fn on_icmp(&mut self, now: Duration, err: IcmpError, seq: u32) {
        let opening = matches!(self.state, State::SynSent | State::SynReceived);
        let in_flight = match self.state {
            State::Closed => false,
            _ if opening => seq == self.snd.iss(),
            _ => {
                // Keepalive and persist probes go out one below SND.UNA: an error about one
                // of those is about a packet we sent too (Linux ignores it; then a peer gone
                // from an idle connection is reported without the reason the path gave).
                let probing = self.keepalive_probes > 0 || self.persist_backoff > 0;
                let first = self.snd.una() as i64 - i64::from(probing);
                let off = self.snd.off_of(seq);
                off >= first && off <= self.snd.max() as i64
            }
        };
        if !in_flight {
            self.stats.icmp_ignored += 1;
            return;
        }
        self.stats.icmp_errors += 1;
        match err {
            IcmpError::Unreachable(why) if opening => self.fail(ConnectionError::Unreachable(why)),
            IcmpError::Unreachable(why) => self.soft_error = Some(why),
            IcmpError::PacketTooBig { mtu } => self.on_path_mtu(now, mtu),
        }
    }

    /// The path's MTU is `mtu`: lower the MSS to fit, and resend what no longer fits.
    fn on_path_mtu(&mut self, now: Duration, mtu: u32) {
        let (floor, headers) = match self.cfg.ip {
            crate::wire::IpPair::V4 { .. } => (MIN_PMTU_V4, 40),
            crate::wire::IpPair::V6 { .. } => (MIN_PMTU_V6, 40 + u32::from(IPV6_EXTRA_HEADER)),
        };
        let mss = (mtu.max(floor) - headers).min(u32::from(MAX_MSS)) as u16;
        if mss >= self.cfg.mss.min(self.neg.peer_mss) {
            // Not smaller than what we send already (a stale or forged message).
            return;
        }
        self.cfg.mss = mss.max(MIN_MSS);
        self.stats.pmtu_reductions += 1;
        let payload = u64::from(self.payload_mss());
        let cut = self.snd.rec.resegment(payload);
        if cut > 0 {
            // Resent now, from the lost queue; the timers stay as they are.
            self.stats.pmtu_resegmented += cut;
            self.arm_rto(now);
        }
    }
}
