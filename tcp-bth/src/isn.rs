//! Initial sequence numbers per RFC 6528: ISN = M + F(local ip, local port, remote ip, remote
//! port, secret), M a 4 µs timer and F a keyed hash (SipHash-2-4), so ISNs are neither a counter
//! nor predictable by an off-path attacker who does not know the secret.

use crate::wire::IpPair;
use siphasher::sip::SipHasher24;
use std::hash::Hasher;
use std::time::Duration;

/// Secret key for F; generate it randomly per host (the drivers do), never hard-code it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IsnKey(pub [u8; 16]);

pub fn isn(key: &IsnKey, now: Duration, ip: IpPair, local_port: u16, remote_port: u16) -> u32 {
    let mut h = SipHasher24::new_with_key(&key.0);
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
    let f = h.finish() as u32;
    let m = (now.as_micros() / 4) as u32;
    m.wrapping_add(f)
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
