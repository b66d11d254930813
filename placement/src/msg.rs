//! Per-message state and the placement of one segment into its message's destination. Every
//! class that carries payload (SEND, WRITE, READ response) goes through [`place_segment`], so the
//! checks and the one-copy rule live in one place.

use crate::coverage::Coverage;
use crate::cqe::WcStatus;
use crate::mr::MemoryRegions;
use crate::outcome::{Counters, DropReason, PlaceOutcome};
use tcp_bth_wire::copy::copy_payload;
use tcp_bth_wire::{Inbound, MsgClass, Reth};

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

/// Place one pre-validated segment (`offset + len` within 24 bits; empty only as the one
/// segment of a zero-length message) of a message.
pub(crate) fn place_segment(
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
