//! The payload copy every side of the stack makes once per byte (send: message to transmit
//! buffer; receive: packet to posted buffer), in pieces of at most [`PIECE`] bytes.
//!
//! Why pieces: glibc's `memcpy` switches to `rep movsb` above a few KiB, and on this
//! project's measurement machine (AMD EPYC) `rep movsb` runs about 12 times slower when the
//! destination lies 1 to 31 bytes past the source modulo 4 KiB: 3 GB/s instead of 35–38 for
//! a 64,920-byte copy in cache, and the same for 8,920 bytes. Where a segment's payload lands
//! relative to where it comes from depends on the application's buffer address and the
//! segment's offset in the message, so some segments of some messages fall in that window,
//! and which ones changes from run to run. Copied in pieces of 2 KiB, `memcpy` stays in its
//! vector loop, which has no such window and was as fast at every other offset (35–39 GB/s);
//! a copy of up to 2 KiB (every segment at MTU 1500) is one call, as before.
//! (`docs/datapath.md`, "Where each payload byte is copied".)

/// The largest piece copied by one `memcpy` call: at or below glibc's default `rep movsb`
/// threshold on x86-64 (2 KiB with SSE2, more with AVX2; glibc switches above it, and the
/// tunable `glibc.cpu.x86_rep_movsb_threshold` can move it).
pub const PIECE: usize = 2048;

/// Copy `src` into `dst` (of the same length, as `copy_from_slice`; panics otherwise), in
/// pieces of at most [`PIECE`] bytes. Always inlined: on placement's short path an outlined
/// call cost about 4 % (`docs/placement.md`, "Measured"), and inlined the compiler can drop the
/// length assertion where the caller has just cut `dst` to `src`'s length.
#[inline(always)]
pub fn copy_payload(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy_payload: lengths differ");
    if src.len() <= PIECE {
        dst.copy_from_slice(src);
        return;
    }
    for (d, s) in dst.chunks_mut(PIECE).zip(src.chunks(PIECE)) {
        d.copy_from_slice(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_every_byte_at_every_length_around_the_piece_size() {
        let src: Vec<u8> = (0..3 * PIECE + 7).map(|i| (i * 31 + 5) as u8).collect();
        for len in [0, 1, PIECE - 1, PIECE, PIECE + 1, 2 * PIECE, 3 * PIECE + 7] {
            // An odd destination offset, so the pieces do not line up with anything.
            let mut dst = vec![0u8; len + 3];
            copy_payload(&mut dst[3..], &src[..len]);
            assert_eq!(&dst[3..], &src[..len], "{len}");
            assert_eq!(
                &dst[..3],
                &[0, 0, 0],
                "{len}: nothing before the destination"
            );
        }
    }

    #[test]
    #[should_panic(expected = "lengths differ")]
    fn lengths_must_agree() {
        copy_payload(&mut [0u8; 4], &[1u8; 5]);
    }
}
