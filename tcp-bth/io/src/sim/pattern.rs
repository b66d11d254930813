//! The verification pattern every tool and test sends and checks: [`fill`] writes it,
//! [`filled`] builds a message of it without zeroing memory first, [`matches_fill`] checks received
//! bytes against it without building the expected message. Kernel TCP's application in
//! `bth-compare` uses the same functions, so both stacks' applications do the same work.

/// Words of one block of the pattern.
const BLOCK_WORDS: usize = 512;
/// Bytes of one block.
const BLOCK: usize = BLOCK_WORDS * 8;

/// The 4 KiB block of the splitmix64 stream seeded by `seed` and `i`.
fn block(seed: u64, i: u64) -> [u64; BLOCK_WORDS] {
    let mut x = seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut block = [0u64; BLOCK_WORDS];
    for w in &mut block {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        *w = z ^ (z >> 31);
    }
    block
}

/// Block number `b` of the message, or its first `chunk.len()` bytes, into `chunk`.
fn write_chunk(block: &[u64; BLOCK_WORDS], b: usize, chunk: &mut [u8]) {
    let salt = (b as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    let last = (chunk.len() / 8) % BLOCK_WORDS;
    let mut words = chunk.chunks_exact_mut(8);
    for (dst, w) in (&mut words).zip(block) {
        dst.copy_from_slice(&(w ^ salt).to_le_bytes());
    }
    let tail = words.into_remainder();
    let n = tail.len();
    if n > 0 {
        let w = block[last] ^ salt;
        tail.copy_from_slice(&w.to_le_bytes()[..n]);
    }
}

/// Deterministic payload bytes for message `i`: a 4 KiB block of the splitmix64 stream seeded
/// by `seed` and `i`, repeated with block `b` XORed with a word derived from `b`, so every byte
/// depends on the message and on its offset (a segment placed in another message or at another
/// offset does not match) while the cost per byte is a copy and an XOR, not two 64-bit
/// multiplications: checking every byte of a run at 64 KiB MTU took a third of its CPU with
/// the splitmix stream itself.
pub fn fill(seed: u64, i: u64, buf: &mut [u8]) {
    let blk = block(seed, i);
    for (b, chunk) in buf.chunks_mut(BLOCK).enumerate() {
        write_chunk(&blk, b, chunk);
    }
}

/// Message `i` of `len` bytes, as [`fill`] writes it, built in one pass (no zeroing first:
/// `vec![0; len]` and then `fill` cost a memset per message, 6.7 % of a verified run's
/// profile at MTU 9000).
pub fn filled(seed: u64, i: u64, len: usize) -> Vec<u8> {
    let blk = block(seed, i);
    let mut v = Vec::with_capacity(len);
    let mut tmp = [0u8; BLOCK];
    let mut b = 0;
    while v.len() < len {
        let n = (len - v.len()).min(BLOCK);
        write_chunk(&blk, b, &mut tmp[..n]);
        v.extend_from_slice(&tmp[..n]);
        b += 1;
    }
    v
}

/// Whether `got` is message `i` of `got.len()` bytes: one pass over `got`, each word compared
/// with the pattern's as it is computed. (Building the expected message and comparing took
/// three passes, a memset, the fill and the memcmp; building each 4 KiB block on the stack and
/// comparing it took two, 13 % of the receiving thread at MTU 65000.)
pub fn matches_fill(seed: u64, i: u64, got: &[u8]) -> bool {
    let blk = block(seed, i);
    got.chunks(BLOCK)
        .enumerate()
        .all(|(b, chunk)| chunk_matches(&blk, b, chunk))
}

/// Whether `chunk` is block number `b` of the message, or its first `chunk.len()` bytes
/// ([`write_chunk`]'s bytes, compared without writing them).
fn chunk_matches(block: &[u64; BLOCK_WORDS], b: usize, chunk: &[u8]) -> bool {
    let salt = (b as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    let last = (chunk.len() / 8) % BLOCK_WORDS;
    let mut words = chunk.chunks_exact(8);
    // OR of every word's difference: no branch per word, so the loop vectorizes.
    let mut diff = 0u64;
    for (src, w) in (&mut words).zip(block) {
        let got = u64::from_le_bytes(src.try_into().expect("8-byte chunk"));
        diff |= got ^ w ^ salt;
    }
    let tail = words.remainder();
    diff == 0 && tail == &(block[last] ^ salt).to_le_bytes()[..tail.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_depends_on_the_message_and_the_offset() {
        let mut a = vec![0u8; 3 * 4096 + 5];
        fill(7, 3, &mut a);
        // The same call gives the same bytes; a prefix is the same as a shorter fill.
        let mut again = vec![0u8; a.len()];
        fill(7, 3, &mut again);
        assert_eq!(a, again);
        let mut short = vec![0u8; 4096 + 3];
        fill(7, 3, &mut short);
        assert_eq!(short[..], a[..short.len()]);
        // Another message, another seed: other bytes, word for word.
        for (seed, i) in [(7, 4), (8, 3)] {
            let mut b = vec![0u8; a.len()];
            fill(seed, i, &mut b);
            assert!(a.chunks(8).zip(b.chunks(8)).all(|(x, y)| x != y));
        }
        // Another offset: no 4 KiB block repeats another, nor does any 1448-byte segment.
        for (k, blk) in a.chunks(4096).enumerate().skip(1) {
            assert_ne!(blk, &a[..blk.len()], "block {k}");
        }
        for off in (1448..a.len() - 1448).step_by(1448) {
            assert_ne!(a[off..off + 1448], a[..1448], "offset {off}");
        }
    }

    #[test]
    fn filled_and_matches_agree_with_fill_at_every_length() {
        for len in [0, 1, 7, 8, 9, 4095, 4096, 4097, 3 * 4096 + 5, 70_000] {
            let mut want = vec![0u8; len];
            fill(11, 5, &mut want);
            assert_eq!(filled(11, 5, len), want, "{len}");
            assert!(matches_fill(11, 5, &want), "{len}");
            if len > 0 {
                // One flipped bit anywhere, another message or another seed: no match.
                for at in [0, len / 2, len - 1] {
                    let mut bad = want.clone();
                    bad[at] ^= 0x10;
                    assert!(!matches_fill(11, 5, &bad), "{len} at {at}");
                }
                assert!(!matches_fill(11, 6, &want), "{len}");
                assert!(!matches_fill(12, 5, &want), "{len}");
            }
        }
    }
}
