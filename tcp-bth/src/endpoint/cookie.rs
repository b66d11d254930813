//! SYN cookies (RFC 4987 §3.6): when the SYN queue is full, the endpoint answers a SYN without
//! keeping state and rebuilds the connection from the peer's ACK.
//!
//! What the endpoint must remember lives in two numbers the peer returns: our ISS (the ACK
//! acknowledges ISS + 1) and, when the SYN carried timestamps, our TSval (echoed in TSecr), as
//! Linux's `cookie_init_timestamp` does with the low bits of its TSval.
//!
//! * ISS = `slot` (5 bits: 64-second time slots) ‖ MAC. The MAC, a keyed SipHash over the
//!   4-tuple, the peer's ISN, the slot and the TSval bits, makes the cookie unforgeable
//!   off-path and binds the options to the connection.
//! * TSval bits: the peer's first MSN (16) ‖ largest message class (4) ‖ window scale (4,
//!   15 = none) ‖ SACK ‖ tcp_bth hello ‖ RFC 7323 timestamps ‖ MSS index (3) ‖ S framing
//!   offered (amendment 3) ‖ 0. The
//!   peer's first MSN and its message limit are what a tcp_bth hello adds to a SYN; the limit
//!   is rounded down to a power of two (we may send less than the peer accepts, never more).
//! * Without timestamps only the MSS index fits (in the ISS, beside a 24-bit MAC): no window
//!   scaling, no SACK, plain TCP, as with Linux's cookies without timestamps. A tcp_bth SYN
//!   always gets timestamps: our SYN-ACK's hello folds them (T=1), so the peer's ACK echoes
//!   them, whether the SYN's hello folded its own or (amendment 4) had T=0 beside the RFC 7323
//!   option.
//!
//! A cookie is valid for the slot it was made in and the one after (64 to 128 s).

use crate::conn::PeerSyn;
use crate::isn::IsnKey;
use crate::wire::{IpPair, MAX_MESSAGE_LEN};
use std::hash::Hasher;
use std::time::Duration;

/// MSS values a cookie can carry (the largest not above the peer's is used): Ethernet with
/// and without options, RoCE's 4 KiB MTU, jumbo frames, and 64 KiB-class MTUs.
const MSS_TABLE: [u16; 8] = [536, 1200, 1440, 1460, 4056, 8960, 16344, 64960];

/// Smallest message limit a cookie can carry: 2^9 bytes (class 0) … 2^23 (class 14);
/// class 15 is the largest the option allows ([`MAX_MESSAGE_LEN`]).
const MIN_CLASS_SHIFT: u32 = 9;

fn slot(now: Duration) -> u32 {
    (now.as_secs() / 64) as u32 & 0x1F
}

fn mss_index(mss: u16) -> u32 {
    MSS_TABLE.iter().rposition(|&m| m <= mss).unwrap_or(0) as u32
}

fn class_len(class: u32) -> u32 {
    if class >= 15 {
        MAX_MESSAGE_LEN
    } else {
        1 << (class + MIN_CLASS_SHIFT)
    }
}

/// The largest class whose length is not above `mbo`; None below the smallest.
fn class_of(mbo: u32) -> Option<u32> {
    (0..16).rev().find(|&c| class_len(c) <= mbo)
}

/// A cookie to put in a SYN-ACK: our ISS and, with timestamps, the TSval to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cookie {
    /// Our ISS: time slot and MAC (and, without timestamps, the MSS index).
    pub iss: u32,
    /// The TSval our SYN-ACK carries, holding the SYN's options; `None` when the SYN had
    /// neither timestamps nor a tcp_bth hello.
    pub tsval: Option<u32>,
}

/// Why no cookie can answer a SYN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoCookie {
    /// The peer's message limit is below the smallest class.
    MessageLimitTooSmall,
}

/// `ip` as seen from us (`src` local).
fn mac(key: &IsnKey, ip: IpPair, ports: (u16, u16), irs: u32, slot: u32, bits: u32) -> u32 {
    let mut h = crate::isn::tuple_hasher(key, 2, ip, ports.0, ports.1);
    h.write_u32(irs);
    h.write_u32(slot);
    h.write_u32(bits);
    h.finish() as u32
}

/// Encode `syn` for the connection `ip`/`ports` (ours first).
pub fn make(
    key: &IsnKey,
    now: Duration,
    ip: IpPair,
    ports: (u16, u16),
    syn: &PeerSyn,
) -> Result<Cookie, NoCookie> {
    let s = slot(now);
    let mss = mss_index(syn.mss);
    let with_ts = syn.timestamps || syn.bth.is_some();
    if !with_ts {
        let m = mac(key, ip, ports, syn.irs, s, mss) & 0xFF_FFFF;
        return Ok(Cookie {
            iss: s << 27 | mss << 24 | m,
            tsval: None,
        });
    }
    let (msn, class, bth) = match syn.bth {
        Some((msn, mbo)) => {
            let class = class_of(mbo).ok_or(NoCookie::MessageLimitTooSmall)?;
            (u32::from(msn), class, 1)
        }
        None => (0, 0, 0),
    };
    let ws = syn.window_scale.map_or(15, |w| u32::from(w.min(14)));
    let bits = msn << 16
        | class << 12
        | ws << 8
        | u32::from(syn.sack_permitted) << 7
        | bth << 6
        | u32::from(syn.timestamps && syn.bth.is_none()) << 5
        | mss << 2
        | u32::from(syn.seq_framed && syn.bth.is_some()) << 1;
    let m = mac(key, ip, ports, syn.irs, s, bits) & 0x7FF_FFFF;
    Ok(Cookie {
        iss: s << 27 | m,
        tsval: Some(bits),
    })
}

/// Check the cookie an ACK returns (`ack` its acknowledgement number, `tsecr` its echoed
/// timestamp if it has one, `seq` its sequence number) and rebuild what the SYN offered.
pub fn check(
    key: &IsnKey,
    now: Duration,
    ip: IpPair,
    ports: (u16, u16),
    seq: u32,
    ack: u32,
    tsecr: Option<u32>,
) -> Option<PeerSyn> {
    let iss = ack.wrapping_sub(1);
    let irs = seq.wrapping_sub(1);
    let s = iss >> 27;
    let age = slot(now).wrapping_sub(s) & 0x1F;
    if age > 1 {
        return None;
    }
    if let Some(bits) = tsecr {
        if mac(key, ip, ports, irs, s, bits) & 0x7FF_FFFF == iss & 0x7FF_FFFF && bits & 1 == 0 {
            let ws = (bits >> 8) & 0xF;
            let bth = (bits >> 6) & 1 == 1;
            return Some(PeerSyn {
                irs,
                mss: MSS_TABLE[((bits >> 2) & 7) as usize],
                window_scale: (ws != 15).then_some(ws as u8),
                sack_permitted: (bits >> 7) & 1 == 1,
                bth: bth.then_some(((bits >> 16) as u16, class_len((bits >> 12) & 0xF))),
                seq_framed: bth && (bits >> 1) & 1 == 1,
                timestamps: (bits >> 5) & 1 == 1,
            });
        }
    }
    let mss = (iss >> 24) & 7;
    (mac(key, ip, ports, irs, s, mss) & 0xFF_FFFF == iss & 0xFF_FFFF).then_some(PeerSyn {
        irs,
        mss: MSS_TABLE[mss as usize],
        window_scale: None,
        sack_permitted: false,
        bth: None,
        seq_framed: false,
        timestamps: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP: IpPair = IpPair::V4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
    };
    const KEY: IsnKey = IsnKey([7; 16]);

    fn syn(bth: Option<(u16, u32)>, ts: bool) -> PeerSyn {
        PeerSyn {
            irs: 0xDEAD_BEEF,
            mss: 1460,
            window_scale: Some(7),
            sack_permitted: true,
            bth,
            seq_framed: false,
            timestamps: ts,
        }
    }

    fn round_trip(s: &PeerSyn, made: Duration, back: Duration) -> Option<PeerSyn> {
        let c = make(&KEY, made, IP, (4791, 40000), s).unwrap();
        check(
            &KEY,
            back,
            IP,
            (4791, 40000),
            s.irs.wrapping_add(1),
            c.iss.wrapping_add(1),
            c.tsval,
        )
    }

    #[test]
    fn a_bth_hello_comes_back_with_its_msn_and_a_limit_not_above_its_own() {
        let s = syn(Some((0xBEEF, 1_000_000)), false);
        let back = round_trip(&s, Duration::from_secs(10), Duration::from_secs(11)).unwrap();
        assert_eq!(back.bth, Some((0xBEEF, 1 << 19)));
        assert_eq!(back.window_scale, Some(7));
        assert!(back.sack_permitted && !back.timestamps);
        assert_eq!((back.irs, back.mss), (s.irs, 1460));
        let max = syn(Some((1, MAX_MESSAGE_LEN)), false);
        let back = round_trip(&max, Duration::ZERO, Duration::ZERO).unwrap();
        assert_eq!(back.bth, Some((1, MAX_MESSAGE_LEN)));
        assert!(!back.seq_framed);
        // An offer of S framing (amendment 3) comes back too.
        let seq = PeerSyn {
            seq_framed: true,
            ..s
        };
        let back = round_trip(&seq, Duration::ZERO, Duration::ZERO).unwrap();
        assert!(back.seq_framed);
        assert_eq!(back.bth, Some((0xBEEF, 1 << 19)));
    }

    #[test]
    fn plain_syns_with_and_without_timestamps() {
        let t = Duration::from_secs(100);
        let back = round_trip(&syn(None, true), t, t).unwrap();
        assert!(back.timestamps && back.bth.is_none() && back.sack_permitted);
        let back = round_trip(&syn(None, false), t, t).unwrap();
        assert_eq!(back.window_scale, None);
        assert!(!back.sack_permitted && !back.timestamps);
        assert_eq!(back.mss, 1460);
    }

    #[test]
    fn a_cookie_expires_and_cannot_be_altered() {
        let s = syn(Some((3, 65536)), false);
        assert!(round_trip(&s, Duration::ZERO, Duration::from_secs(127)).is_some());
        assert!(round_trip(&s, Duration::ZERO, Duration::from_secs(128)).is_none());
        let c = make(&KEY, Duration::ZERO, IP, (4791, 40000), &s).unwrap();
        let t = Duration::ZERO;
        let ok = |ack: u32, tsecr: Option<u32>, port: u16| {
            check(&KEY, t, IP, (4791, port), s.irs.wrapping_add(1), ack, tsecr).is_some()
        };
        assert!(ok(c.iss.wrapping_add(1), c.tsval, 40000));
        // Other options, another ISS, another port: all refused.
        assert!(!ok(
            c.iss.wrapping_add(1),
            c.tsval.map(|v| v ^ 1 << 7),
            40000
        ));
        assert!(!ok(c.iss.wrapping_add(2), c.tsval, 40000));
        assert!(!ok(c.iss.wrapping_add(1), c.tsval, 40001));
        let other = IsnKey([8; 16]);
        let forged = check(
            &other,
            t,
            IP,
            (4791, 40000),
            s.irs.wrapping_add(1),
            c.iss.wrapping_add(1),
            c.tsval,
        );
        assert!(forged.is_none());
    }

    #[test]
    fn a_message_limit_below_the_smallest_class_gets_no_cookie() {
        let s = syn(Some((0, 100)), false);
        assert_eq!(
            make(&KEY, Duration::ZERO, IP, (1, 2), &s),
            Err(NoCookie::MessageLimitTooSmall)
        );
    }
}
