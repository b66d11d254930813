//! Passive open: a connection from a received SYN, and the two halves of a SYN cookie
//! handshake (RFC 4987 §3.6), where the endpoint keeps no state between its SYN-ACK and the
//! peer's ACK (`crate::endpoint::cookie` encodes what it must remember into our ISS and TSval).

use super::*;
use crate::wire::{Bth, TcpOptions, TcpRepr, Timestamps};

/// What a SYN told us, as far as a SYN cookie can carry it (`crate::endpoint::cookie`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerSyn {
    /// The peer's ISN.
    pub irs: u32,
    /// Its MSS option (536 without one).
    pub mss: u16,
    /// Its window scale shift (RFC 7323), if it offered scaling.
    pub window_scale: Option<u8>,
    /// It offered SACK (RFC 2018).
    pub sack_permitted: bool,
    /// The peer sent a tcp_bth hello: its first MSN and its largest message.
    pub bth: Option<(u16, u32)>,
    /// Its hello offered S framing (amendment 3).
    pub seq_framed: bool,
    /// It carried the RFC 7323 timestamp option: a plain SYN's, or one beside a hello without
    /// timestamps (T=0, wire spec amendment 4).
    pub timestamps: bool,
}

impl PeerSyn {
    /// What `seg` (a SYN) offers.
    pub fn of(seg: &TcpRepr<'_>) -> PeerSyn {
        let o = &seg.options;
        PeerSyn {
            irs: seg.seq,
            mss: o.mss.unwrap_or(536),
            window_scale: o.window_scale,
            sack_permitted: o.sack_permitted,
            bth: o
                .bth
                .filter(|b| b.opcode == Opcode::Hello)
                .map(|h| (h.msn, h.mbo)),
            seq_framed: o
                .bth
                .is_some_and(|b| b.opcode == Opcode::Hello && b.seq_framed),
            timestamps: o.timestamps.is_some(),
        }
    }

    /// The options of a SYN that offered this, with the peer's TSval `tsval`. A hello is
    /// rebuilt with its timestamps folded (T=1) whichever form the SYN had: what the
    /// connection takes from either form is the same (`Connection::negotiate`).
    fn options(&self, tsval: u32) -> TcpOptions {
        let ts = Timestamps { tsval, tsecr: 0 };
        let mut o = TcpOptions {
            mss: Some(self.mss),
            window_scale: self.window_scale,
            sack_permitted: self.sack_permitted,
            ..Default::default()
        };
        match self.bth {
            Some((msn, mbo)) => {
                let mut hello = Bth::new(Opcode::Hello);
                hello.msn = msn;
                hello.mbo = mbo;
                hello.seq_framed = self.seq_framed;
                hello.timestamps = Some(ts);
                o.bth = Some(hello);
            }
            None if self.timestamps => o.timestamps = Some(ts),
            None => {}
        }
        o
    }
}

impl Connection {
    /// Passive open from a received SYN (header + payload, no IP header). `cfg.remote_port` is
    /// taken from the SYN. `None` if the segment is not a valid SYN.
    pub fn accept(cfg: Config, now: Duration, syn: &[u8]) -> Option<Connection> {
        let seg = TcpRepr::parse(syn, Some(cfg.ip.reversed())).ok()?;
        Connection::accept_with(cfg, now, &seg, None)
    }

    /// [`Connection::accept`] from a SYN already parsed (and its checksum checked, or vouched
    /// for by the data path), with our ISS given (a SYN cookie) or drawn from the
    /// connection's keyed hash.
    pub(crate) fn accept_with(
        mut cfg: Config,
        now: Duration,
        seg: &TcpRepr<'_>,
        iss: Option<u32>,
    ) -> Option<Connection> {
        let f = seg.flags;
        if !f.syn() || f.ack() || f.rst() || seg.dst_port != cfg.local_port {
            return None;
        }
        if let Some(b) = &seg.options.bth {
            if !b.icrc_ok(seg.payload) {
                return None;
            }
        }
        cfg.remote_port = seg.src_port;
        let offer_ts = cfg.timestamps;
        let mut c = match iss {
            Some(iss) => Connection::with_iss(cfg, State::SynReceived, iss),
            None => Connection::new(cfg, now, State::SynReceived),
        };
        c.rcv.irs = seg.seq;
        c.negotiate(now, &seg.options, offer_ts);
        c.snd.take_window(u64::from(seg.window), seg.seq, seg.ack);
        c.stats.segments_in += 1;
        Some(c)
    }

    /// Move our TSval clock so that it reads `tsval` at `now`. A SYN cookie's TSval carries
    /// the peer's SYN options, so it is not a clock reading: the SYN-ACK's clock is set to
    /// show it, and the connection rebuilt from the cookie continues from the value the peer
    /// echoes, so our later TSvals never fall behind what the peer has seen (PAWS).
    pub(crate) fn set_tsval(&mut self, now: Duration, tsval: u32) {
        let off = tsval.wrapping_sub(self.rcv.tsval(now));
        self.rcv.ts_offset = self.rcv.ts_offset.wrapping_add(off);
    }

    /// The SYN-RECEIVED connection of a SYN cookie, rebuilt when the peer's ACK returns it:
    /// our SYN-ACK counts as sent (once, without an RTT sample), and the ACK itself is the
    /// caller's to feed in next. `tsval` is our TSval the peer echoes, `peer_tsval` its own.
    pub(crate) fn from_cookie(
        mut cfg: Config,
        now: Duration,
        remote_port: u16,
        peer: PeerSyn,
        iss: u32,
        tsval: u32,
        peer_tsval: u32,
    ) -> Connection {
        cfg.remote_port = remote_port;
        let offer_ts = cfg.timestamps;
        let mut c = Connection::with_iss(cfg, State::SynReceived, iss);
        c.set_tsval(now, tsval);
        c.rcv.irs = peer.irs;
        c.negotiate(now, &peer.options(peer_tsval), offer_ts);
        c.snd.on_cookie_syn(peer.irs);
        c.syn = Syn::Sent {
            at: now,
            retransmitted: true,
        };
        c.stats.segments_in += 1;
        c
    }
}
