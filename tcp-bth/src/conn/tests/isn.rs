//! Keys are secret by default: two default configurations never share the key behind ISNs,
//! rkeys and the TSval offset (it used to be the constant `[0x5a; 16]` in every tool).

use super::*;
use bth_placement::Access;

#[test]
fn default_keys_differ_and_so_do_isns_and_rkeys() {
    let (a1, b1) = (Config::default(), Config::default());
    assert_ne!(a1.isn_key, b1.isn_key);
    let now = Duration::from_secs(1);
    let mut c1 = Connection::connect(a1, now);
    let mut c2 = Connection::connect(b1, now);
    // Same 4-tuple, same time: only the key can tell them apart.
    assert_ne!(c1.snd.iss(), c2.snd.iss());
    // An rkey is a slot index and an 8-bit key (as IB's), so one pair of first rkeys collides
    // once in 256 runs; eight registrations each all alike would be once in 2^64.
    let rkeys = |c: &mut Connection| -> Vec<u32> {
        (0..8)
            .map(|_| {
                c.register_mr(vec![0; 64], Access::REMOTE_READ)
                    .unwrap()
                    .rkey
            })
            .collect()
    };
    assert_ne!(
        rkeys(&mut c1),
        rkeys(&mut c2),
        "rkeys of two hosts must not be guessable from one another"
    );
    assert_ne!(c1.rcv.ts_offset, c2.rcv.ts_offset);
}

#[test]
fn random_keys_look_random() {
    let keys: Vec<[u8; 16]> = (0..64).map(|_| crate::isn::IsnKey::random().0).collect();
    let mut distinct = keys.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), keys.len(), "64 keys, all different");
    // Roughly half the bits set over all keys (8192 bits): far from 0 or all ones.
    let ones: u32 = keys.iter().flatten().map(|b| b.count_ones()).sum();
    assert!((3500..4700).contains(&ones), "{ones} of 8192 bits set");
}

#[test]
fn the_key_is_never_printed() {
    let k = crate::isn::IsnKey([0xAB; 16]);
    assert!(!format!("{k:?} {:?}", Config::default()).contains("171"));
}
