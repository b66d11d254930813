//! Initial sequence numbers per RFC 6528: ISN = M + F(local ip, local port, remote ip, remote
//! port, secret), M a 4 µs timer and F a keyed hash (SipHash-2-4), so ISNs are neither a counter
//! nor predictable by an off-path attacker who does not know the secret.

use crate::wire::IpPair;
use siphasher::sip::SipHasher24;
use std::hash::Hasher;
use std::time::Duration;

/// Secret key for F (and for the rkey seed and the timestamp offset). [`Config::default`]
/// draws a fresh random one ([`IsnKey::random`]); a fixed key belongs only in tests and
/// simulations that must repeat.
///
/// [`Config::default`]: crate::Config
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct IsnKey(pub [u8; 16]);

impl std::fmt::Debug for IsnKey {
    /// The key is a secret: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IsnKey(..)")
    }
}

impl IsnKey {
    /// 128 random bits from the operating system, through the standard library's
    /// `RandomState` (seeded from the OS random source once per thread; each instance has a
    /// distinct key), so the core needs no I/O dependency for it. Two SipHash outputs under
    /// secret keys are unpredictable without those keys.
    pub fn random() -> IsnKey {
        use std::hash::BuildHasher;
        let mut out = [0u8; 16];
        for (i, half) in out.chunks_mut(8).enumerate() {
            let v = std::collections::hash_map::RandomState::new().hash_one(i);
            half.copy_from_slice(&v.to_le_bytes());
        }
        IsnKey(out)
    }
}

/// A keyed hasher over `domain` and the 4-tuple: the input every per-connection secret
/// (ISN, TSval offset, SYN cookie) starts from.
pub(crate) fn tuple_hasher(
    key: &IsnKey,
    domain: u8,
    ip: IpPair,
    local_port: u16,
    remote_port: u16,
) -> SipHasher24 {
    let mut h = SipHasher24::new_with_key(&key.0);
    h.write_u8(domain);
    match ip {
        IpPair::V4 { src, dst } => {
            h.write(&src);
            h.write(&dst);
        }
        IpPair::V6 { src, dst } => {
            h.write(&src);
            h.write(&dst);
        }
    }
    h.write_u16(local_port);
    h.write_u16(remote_port);
    h
}

fn tuple_hash(key: &IsnKey, domain: u8, ip: IpPair, local_port: u16, remote_port: u16) -> u64 {
    tuple_hasher(key, domain, ip, local_port, remote_port).finish()
}

/// The ISN of the connection `ip`/`local_port`/`remote_port` opened at `now`: F's keyed
/// hash of the 4-tuple plus M, `now` in 4 µs ticks (RFC 6528 §3).
pub fn isn(key: &IsnKey, now: Duration, ip: IpPair, local_port: u16, remote_port: u16) -> u32 {
    let f = tuple_hash(key, 0, ip, local_port, remote_port) as u32;
    let m = (now.as_micros() / 4) as u32;
    m.wrapping_add(f)
}

/// Per-connection offset added to the TSval clock (as Linux randomizes its `ts_offset`):
/// TSvals then reveal neither the host's uptime nor a clock shared across
/// connections.
pub fn ts_offset(key: &IsnKey, ip: IpPair, local_port: u16, remote_port: u16) -> u32 {
    tuple_hash(key, 1, ip, local_port, remote_port) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP: IpPair = IpPair::V4 {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
    };

    #[test]
    fn depends_on_key_and_tuple_and_advances_with_time() {
        let k1 = IsnKey([1; 16]);
        let k2 = IsnKey([2; 16]);
        let t = Duration::from_secs(5);
        assert_ne!(isn(&k1, t, IP, 1, 2), isn(&k2, t, IP, 1, 2));
        assert_ne!(isn(&k1, t, IP, 1, 2), isn(&k1, t, IP, 1, 3));
        let later = isn(&k1, t + Duration::from_micros(400), IP, 1, 2);
        assert_eq!(later.wrapping_sub(isn(&k1, t, IP, 1, 2)), 100);
    }
}
