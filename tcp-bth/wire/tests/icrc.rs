//! The ICRC routine against an independent bitwise CRC32C (Castagnoli, reflected polynomial
//! 0x82F63B78), over payloads cut into parts at every kind of boundary: the folding
//! implementation works on wide blocks, so short inputs, odd lengths and splits inside a
//! block are where it could differ.

use bth_wire::bth::{icrc, icrc_parts};
use proptest::prelude::*;

fn reference(bytes: impl IntoIterator<Item = u8>) -> u32 {
    let mut crc = !0u32;
    for b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn check_value() {
    assert_eq!(reference(*b"123456789"), 0xE306_9283);
    assert_eq!(icrc(b"1234", b"56789"), 0xE306_9283);
    assert_eq!(icrc(b"", b""), 0);
}

proptest! {
    #[test]
    fn equals_the_bitwise_crc_over_any_parts(
        header in proptest::collection::vec(any::<u8>(), 8),
        payload in proptest::collection::vec(any::<u8>(), 0..5000),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let want = reference(header.iter().chain(&payload).copied());
        prop_assert_eq!(icrc(&header, &payload), want);
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(payload.len() + 1)).collect();
        at.sort_unstable();
        let mut parts = Vec::new();
        let mut from = 0;
        for a in at.into_iter().chain([payload.len()]) {
            parts.push(&payload[from..a]);
            from = a;
        }
        prop_assert_eq!(icrc_parts(&header, &parts), want);
    }
}
