//! Per-message state and the placement of one segment into its message's destination. Every
//! class that carries payload (SEND, WRITE, READ response) goes through [`place_new_unit`] and,
//! for anything that path does not take, [`place_any`] ([`place_segment`] is the two in turn),
//! so the checks and the one-copy rule live in one place.

use crate::coverage::Coverage;
use crate::cqe::WcStatus;
use crate::mr::MemoryRegions;
use crate::outcome::{Counters, DropReason, PlaceOutcome};
use bth_wire::copy::copy_payload;
use bth_wire::{Inbound, MsgClass, Reth};

/// What one message has received so far.
#[derive(Debug, Default)]
pub(crate) struct MsgTrack {
    pub cov: Coverage,
    /// Known once the LAST/ONLY segment has arrived: its end.
    pub len: Option<u32>,
    /// The immediate of the LAST/ONLY segment (first one seen wins).
    pub imm: Option<u32>,
    pub failed: Option<WcStatus>,
    /// Nothing more is expected: all bytes present, or failed in a way that ends it at once.
    /// The completion is still held back until every earlier MSN of the class completed.
    pub finished: bool,
}

impl MsgTrack {
    pub fn status(&self) -> WcStatus {
        self.failed.unwrap_or(WcStatus::Success)
    }

    /// Does a segment ending at `end` contradict what earlier segments said about the length?
    fn contradicts(&self, last: bool, end: u32) -> bool {
        match (self.len, last) {
            (Some(len), true) => len != end,
            (Some(len), false) => end > len,
            (None, true) => self.cov.max_end() > end,
            (None, false) => false,
        }
    }

    #[inline(always)]
    fn update_finished(&mut self) {
        if !self.finished && self.len.is_some_and(|l| self.cov.is_complete(l)) {
            self.finished = true;
        }
    }

    /// Fail and finish immediately: used when the message's end can no longer be trusted.
    fn fail_now(&mut self, status: WcStatus) {
        self.failed.get_or_insert(status);
        self.finished = true;
    }
}

/// Connection-wide books every placement updates.
#[derive(Debug, Default)]
pub(crate) struct Books {
    pub counters: Counters,
    /// Coverage ranges held by all live messages together.
    pub ranges_in_use: usize,
    pub max_ranges: usize,
    pub max_message_len: u32,
}

impl Books {
    pub fn release(&mut self, track: &MsgTrack) {
        self.ranges_in_use = self.ranges_in_use.saturating_sub(track.cov.range_count());
    }

    pub fn duplicate(&mut self, seg: &Inbound<'_>) -> PlaceOutcome {
        self.counters.duplicate_segments += 1;
        self.counters.duplicate_bytes += seg.payload.len() as u64;
        PlaceOutcome::Duplicate
    }
}

/// Where a message's bytes go.
pub(crate) enum Dest<'a> {
    /// A posted receive buffer or READ sink, indexed by message offset.
    Buffer(&'a mut [u8]),
    /// A registered region, at the address the segment's RETH names for its first byte.
    Region(&'a mut MemoryRegions, Reth),
}

/// Insert into a message's coverage, keeping the connection's range count up to date.
fn insert(
    cov: &mut Coverage,
    ranges_in_use: &mut usize,
    start: u32,
    end: u32,
    new: impl FnMut(u32, u32),
) -> u32 {
    let before = cov.range_count();
    let added = cov.insert(start, end, new);
    *ranges_in_use = ranges_in_use
        .saturating_sub(before)
        .saturating_add(cov.range_count());
    added
}

/// The one place placement writes payload bytes, and the counter of what it wrote. It counts
/// at the copy itself, not from what coverage reports as new, so a second or repeated copy of
/// the same bytes shows up as `bytes_copied > bytes_placed` (tests check both against their own
/// arithmetic of the unique bytes sent).
#[derive(Default)]
struct CopyMeter {
    bytes: u64,
}

impl CopyMeter {
    fn copy(&mut self, dst: &mut [u8], src: &[u8]) {
        copy_payload(dst, src);
        self.bytes += src.len() as u64;
    }

    /// Copy the payload bytes of the new sub-range `[a, b)` (message offsets) into `dst`, where
    /// `dst[0]` is message offset `base` and `payload[0]` is message offset `start`. Indices are
    /// checked, so a broken invariant skips the copy (and shows up as bytes_copied !=
    /// bytes_placed) instead of panicking.
    fn copy_new(&mut self, dst: &mut [u8], base: u32, payload: &[u8], start: u32, a: u32, b: u32) {
        let (Some(da), Some(db), Some(sa), Some(sb)) = (
            a.checked_sub(base),
            b.checked_sub(base),
            a.checked_sub(start),
            b.checked_sub(start),
        ) else {
            return;
        };
        if let (Some(d), Some(s)) = (
            dst.get_mut(da as usize..db as usize),
            payload.get(sa as usize..sb as usize),
        ) {
            self.copy(d, s);
        }
    }
}

impl Dest<'_> {
    /// The `n` bytes a segment at message offset `start` would fill, if every bounds, rkey and
    /// rights check passes; None otherwise (the long path then says which failed).
    #[inline(always)]
    fn target(&mut self, start: u32, n: u32) -> Option<&mut [u8]> {
        match self {
            Dest::Buffer(buf) => {
                buf.get_mut(start as usize..(start as usize).checked_add(n as usize)?)
            }
            Dest::Region(regions, reth) => regions
                .remote_write_target(reth.rkey, reth.addr, u64::from(n))
                .ok(),
        }
    }
}

/// Place one pre-validated segment (`offset + len` within 24 bits; empty only as the one
/// segment of a zero-length message) of a message.
#[inline]
pub(crate) fn place_segment(
    track: &mut MsgTrack,
    seg: &Inbound<'_>,
    mut dest: Dest<'_>,
    books: &mut Books,
) -> PlaceOutcome {
    match place_new_unit(track, seg, &mut dest, books) {
        Some(new_bytes) => PlaceOutcome::Placed { new_bytes },
        None => place_any(track, seg, dest, books),
    }
}

/// The usual segment on a short path of its own: one whole unit of its message's grid that
/// has not arrived before, not the message's last segment, of a message that has not failed,
/// within its target. Per segment this is most of the receive side's work beside the copy, and
/// the copy of a 1448-byte segment in cache takes about 40 ns, so every instruction here shows
/// in the ratio to memcpy (`docs/placement.md`, "Measured"). It refuses nothing: anything it
/// does not take returns None with nothing changed, and [`place_any`] decides, so it makes
/// every check of that path that could refuse such a segment: length against what the
/// message said, the size limit, the fragmentation budget, the target's bounds and rights.
#[inline(always)]
pub(crate) fn place_new_unit(
    track: &mut MsgTrack,
    seg: &Inbound<'_>,
    dest: &mut Dest<'_>,
    books: &mut Books,
) -> Option<u32> {
    let start = seg.offset;
    let n = seg.payload.len() as u32;
    let end = start.checked_add(n)?;
    // READ responses are bound by their sink, not the size limit, but are rare enough to
    // take the long path whenever they pass it.
    if seg.last
        || track.failed.is_some()
        || end > books.max_message_len
        || track.len.is_some_and(|len| end > len)
    {
        return None;
    }
    let dst = dest.target(start, n)?;
    let new_run_allowed = books.ranges_in_use < books.max_ranges;
    let runs = track.cov.insert_unit(start, n, new_run_allowed)?;
    // Booked before the copy, which is the last thing this path does, so that none of these
    // stores queues behind the copy's (`docs/placement.md`, "Measured").
    books.ranges_in_use = books.ranges_in_use.saturating_add_signed(runs);
    track.update_finished();
    books.counters.bytes_placed += u64::from(n);
    // The one copy of these bytes, counted where it is made (as `CopyMeter` does).
    books.counters.bytes_copied += u64::from(n);
    copy_payload(dst, seg.payload);
    Some(n)
}

/// [`place_segment`] of any segment: every check, each with its outcome.
#[inline(never)]
pub(crate) fn place_any(
    track: &mut MsgTrack,
    seg: &Inbound<'_>,
    dest: Dest<'_>,
    books: &mut Books,
) -> PlaceOutcome {
    let start = seg.offset;
    let n = seg.payload.len() as u32;
    let end = start.saturating_add(n);

    // The announced size limit binds what the peer sends on its own; a READ response is as
    // long as we asked for, and its sink bounds it.
    let over_limit = end > books.max_message_len && seg.class != MsgClass::ReadResponse;
    if track.contradicts(seg.last, end) || over_limit {
        books.counters.invalid += 1;
        if !track.finished {
            track.fail_now(WcStatus::RemoteInvalidRequest);
        }
        return PlaceOutcome::Dropped(DropReason::Invalid);
    }
    // Budget first, before any state changes, so a refused segment leaves no trace.
    if start != 0
        && books.ranges_in_use >= books.max_ranges
        && track.cov.would_add_range(start, end)
    {
        books.counters.too_fragmented += 1;
        return PlaceOutcome::Dropped(DropReason::TooFragmented);
    }
    if seg.last {
        track.len = Some(end);
        if track.imm.is_none() {
            track.imm = seg.imm;
        }
    }

    if n == 0 {
        // A zero-length message: its one segment finishes it; no byte to place and, as in IB,
        // no rkey to check for a WRITE of no bytes. Every later copy is a duplicate.
        if track.finished {
            return books.duplicate(seg);
        }
        track.finished = true;
        return PlaceOutcome::Placed { new_bytes: 0 };
    }
    let Books {
        counters,
        ranges_in_use,
        ..
    } = books;
    if track.failed.is_some() {
        // Keep tracking coverage (without writing) so the failed message completes when its
        // last byte has arrived, like a successful one.
        insert(&mut track.cov, ranges_in_use, start, end, |_, _| {});
        counters.failed_message_segments += 1;
        track.update_finished();
        return PlaceOutcome::Dropped(DropReason::MessageFailed);
    }
    // No separate "already covered?" lookup: insertion reports what is new, and a segment with
    // nothing new is a duplicate. The target checks below cannot refuse bytes that are already
    // covered (they passed the same checks when they arrived), except a WRITE whose region has
    // since gone: that case asks coverage explicitly.
    let payload = seg.payload;
    let mut meter = CopyMeter::default();
    let added = match dest {
        Dest::Buffer(buf) => {
            if end as usize > buf.len() {
                track.failed = Some(WcStatus::LocalLengthError);
                counters.length_errors += 1;
                insert(&mut track.cov, ranges_in_use, start, end, |_, _| {});
                track.update_finished();
                return PlaceOutcome::LengthError;
            }
            insert(&mut track.cov, ranges_in_use, start, end, |a, b| {
                meter.copy_new(buf, 0, payload, start, a, b);
            })
        }
        Dest::Region(regions, reth) => {
            // The whole segment is checked before any byte of it is written.
            match regions.remote_write_target(reth.rkey, reth.addr, u64::from(n)) {
                Ok(dst) => insert(&mut track.cov, ranges_in_use, start, end, |a, b| {
                    meter.copy_new(dst, start, payload, start, a, b);
                }),
                Err(_) if track.cov.covers(start, end) => {
                    track.update_finished();
                    return books.duplicate(seg);
                }
                Err(e) => {
                    track.failed = Some(WcStatus::RemoteAccessError);
                    counters.access_errors += 1;
                    insert(&mut track.cov, ranges_in_use, start, end, |_, _| {});
                    track.update_finished();
                    return PlaceOutcome::AccessError(e);
                }
            }
        }
    };
    track.update_finished();
    // Credited before the duplicate check: a copy made for a segment that brought nothing new
    // must still show.
    counters.bytes_copied += meter.bytes;
    if added == 0 {
        return books.duplicate(seg);
    }
    counters.bytes_placed += u64::from(added);
    counters.duplicate_bytes += u64::from(n.saturating_sub(added));
    PlaceOutcome::Placed { new_bytes: added }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mr::Access;
    use bth_wire::{Bth, MessageKind, Opcode, Position};
    use proptest::prelude::*;

    const UNIT: u32 = 256;

    /// What a run of placements leaves that anyone can observe.
    fn observed(track: &MsgTrack, books: &Books, buf: &[u8]) -> String {
        format!(
            "{:?} {} {} {} {:?} {:?} {:?} {} {:?}",
            books.counters,
            books.ranges_in_use,
            track.cov.covered(),
            track.cov.range_count(),
            (track.cov.max_end(), track.len, track.imm),
            track.failed,
            track.finished,
            buf.iter().map(|&b| u64::from(b)).sum::<u64>(),
            buf.iter().position(|&b| b == 0),
        )
    }

    /// A SEND segment of `n` bytes at `offset`; `total` decides which is the last one (a
    /// different `total` in one run is a contradiction the long path must refuse).
    fn segment(offset: u32, n: u32, total: u32, payload: &[u8]) -> Inbound<'_> {
        let pos = Position::of(offset, n, total);
        let mut b = Bth::new(Opcode::for_data(MessageKind::Send, pos, false).unwrap());
        b.mbo = offset;
        Inbound::from_bth(&b, &payload[..n as usize]).unwrap()
    }

    /// The RDMA WRITE segment of the same bytes, its message's byte 0 at `addr`.
    fn write_segment(
        offset: u32,
        n: u32,
        total: u32,
        payload: &[u8],
        rkey: u32,
        addr: u64,
    ) -> Inbound<'_> {
        let pos = Position::of(offset, n, total);
        let mut b = Bth::new(Opcode::for_data(MessageKind::RdmaWrite, pos, false).unwrap());
        b.mbo = offset;
        b.ext = bth_wire::Extension::Reth(Reth {
            rkey,
            addr: addr.wrapping_add(u64::from(offset)),
        });
        Inbound::from_bth(&b, &payload[..n as usize]).unwrap()
    }

    /// A region of `len` bytes with `access`, registered alike in two sets of regions.
    fn region_pair(len: usize, access: Access) -> (MemoryRegions, MemoryRegions, u32, u64) {
        let (mut a, mut b) = (MemoryRegions::with_seed(7), MemoryRegions::with_seed(7));
        let h = a.register(vec![0u8; len], access).unwrap();
        let h2 = b.register(vec![0u8; len], access).unwrap();
        assert_eq!((h.rkey, h.addr), (h2.rkey, h2.addr));
        (a, b, h.rkey, h.addr)
    }

    proptest! {
        /// The short path changes nothing the long path would not: each segment of a random
        /// run (whole units and odd pieces, repeats, contradicting ends, a tight fragmentation
        /// budget, a buffer shorter than the message) gives the same outcome and leaves the
        /// same state and bytes as with the long path alone.
        #[test]
        fn short_path_agrees_with_the_long_path(
            cuts in proptest::collection::vec((0u32..8, prop_oneof![3 => Just(UNIT), 1 => 1u32..600], any::<bool>()), 1..40),
            // Units from 60 on cross into the bitmap's second word.
            base in prop_oneof![Just(0u32), Just(60u32)],
            short_by in prop_oneof![Just(0u32), 1u32..UNIT],
            max_ranges in 1usize..4,
            limit in prop_oneof![Just(7), Just(4)],
            buf_len in prop_oneof![3 => Just(8usize), 1 => 0usize..8],
            buf_short_by in 0usize..UNIT as usize,
        ) {
            let limit = (base + limit) * UNIT;
            let buf_len = match buf_len {
                8 => (base as usize + 8) * UNIT as usize,
                n => ((base as usize + n) * UNIT as usize).saturating_sub(buf_short_by),
            };
            // A message of six units, or ending inside its sixth; segments past its end, or
            // ending where it does not, contradict it, and with the lower size limit its last
            // two units lie beyond what the receiver announced.
            let len = (base + 6) * UNIT - short_by;
            let payload: Vec<u8> = (0..600u32).map(|i| (i % 251 + 1) as u8).collect();
            let books = || Books { max_ranges, max_message_len: limit, ..Books::default() };
            let (mut fast_books, mut long_books) = (books(), books());
            let (mut fast_track, mut long_track) = (MsgTrack::default(), MsgTrack::default());
            let (mut fast_buf, mut long_buf) = (vec![0u8; buf_len], vec![0u8; buf_len]);
            for (unit, n, ends_here) in cuts {
                let offset = (base + unit) * UNIT;
                let n = if offset + n > len && !ends_here { len.saturating_sub(offset).max(1) } else { n };
                let total = if ends_here { offset + n } else { len.max(offset + n) };
                let seg = segment(offset, n, total, &payload);
                let fast = place_segment(&mut fast_track, &seg, Dest::Buffer(&mut fast_buf), &mut fast_books);
                let long = place_any(&mut long_track, &seg, Dest::Buffer(&mut long_buf), &mut long_books);
                prop_assert_eq!(fast, long, "segment at {} of {}", offset, n);
                prop_assert_eq!(
                    observed(&fast_track, &fast_books, &fast_buf),
                    observed(&long_track, &long_books, &long_buf)
                );
            }
            prop_assert!(fast_buf == long_buf);
        }

        /// The same for RDMA WRITEs, whose target is a registered region: rkey, rights and
        /// bounds decide, and a failed check must leave the short path to the long one.
        #[test]
        fn short_path_agrees_with_the_long_path_for_writes(
            cuts in proptest::collection::vec((0u32..8, prop_oneof![3 => Just(UNIT), 1 => 1u32..600]), 1..40),
            region_len in prop_oneof![3 => Just(8 * UNIT as usize), 1 => 1usize..8 * UNIT as usize],
            writable in prop_oneof![3 => Just(true), 1 => Just(false)],
            wrong_rkey in prop_oneof![3 => Just(false), 1 => Just(true)],
            // The address the peer names: the region's, or anywhere (past it, wrapping u64).
            addr_off in prop_oneof![3 => Just(0u64), 1 => any::<u64>()],
        ) {
            let len = 6 * UNIT;
            let payload: Vec<u8> = (0..600u32).map(|i| (i % 251 + 1) as u8).collect();
            let access = if writable { Access::LOCAL_WRITE | Access::REMOTE_WRITE } else { Access::LOCAL_WRITE };
            let (mut fast_mr, mut long_mr, rkey, addr) = region_pair(region_len, access);
            let rkey = if wrong_rkey { rkey ^ 0x100 } else { rkey };
            let addr = addr.wrapping_add(addr_off);
            let books = || Books { max_ranges: 3, max_message_len: len, ..Books::default() };
            let (mut fast_books, mut long_books) = (books(), books());
            let (mut fast_track, mut long_track) = (MsgTrack::default(), MsgTrack::default());
            for (unit, n) in cuts {
                let offset = unit * UNIT;
                let n = n.min(len.saturating_sub(offset)).max(1);
                let seg = write_segment(offset, n, len.max(offset + n), &payload, rkey, addr);
                let reth = seg.reth.unwrap();
                let fast = place_segment(&mut fast_track, &seg, Dest::Region(&mut fast_mr, reth), &mut fast_books);
                let long = place_any(&mut long_track, &seg, Dest::Region(&mut long_mr, reth), &mut long_books);
                prop_assert_eq!(fast, long, "segment at {} of {}", offset, n);
                let bytes = |mr: &MemoryRegions| mr.bytes(rkey).map(<[u8]>::to_vec).unwrap_or_default();
                let (fast_bytes, long_bytes) = (bytes(&fast_mr), bytes(&long_mr));
                prop_assert_eq!(
                    observed(&fast_track, &fast_books, &fast_bytes),
                    observed(&long_track, &long_books, &long_bytes)
                );
                prop_assert!(fast_bytes == long_bytes);
            }
        }
    }
}
