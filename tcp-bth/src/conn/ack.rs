//! When the receiver acknowledges (RFC 1122 §4.2.3.2, RFC 5681 §4.2, RFC 2883 D-SACK).
//!
//! A driver hands the connection a batch of segments per turn and asks for output after it;
//! acknowledging "at the next `poll_transmit`" therefore meant one ACK per turn (11 segments
//! per ACK was measured on the TUN path), and one lost ACK lost the feedback of a whole flight.
//! So an ACK that is due *now* is built now, carrying the cumulative point and SACK blocks of
//! this moment, and queued for the next `poll_transmit`:
//!
//! - at least every second full-sized segment (bytes since the last ACK ≥ 2 × the largest
//!   segment seen, as Linux's `rcv_mss` rule);
//! - at once on data that opens the first hole (none was open), on data that fills (part of)
//!   a hole, and on a duplicate (which the ACK reports as a D-SACK block). Out-of-order data
//!   while a hole is already open follows the every-second-segment rule: on sprayed paths
//!   nearly every segment lands beyond a new hole, and an ACK per segment doubled the segments
//!   both ends handle (simulator with driver turns, 4 paths over 200 µs: 1.10 Gbit/s with an
//!   ACK per new hole, 1.34 without) while telling the sender little the ACK one segment
//!   later does not; the sender's RACK needs timely delivery information, not a duplicate
//!   ACK per segment;
//! - at the end of the turn for the last segment of a message (IB requesters set AckReq there:
//!   the sender's completion waits for this ACK) and for credit changes;
//! - otherwise after at most [`Config::ack_delay`](crate::Config::ack_delay).
//!
//! Any segment that carries our ACK (data included) resets the count and the delay.

use super::*;
use crate::wire::{ChecksumFill, TCP_HEADER_MAX};
use arrayvec::ArrayVec;
use std::collections::VecDeque;

/// Pure ACKs built and not yet taken by `poll_transmit`: room for a driver turn of 512
/// segments. A driver that stops polling must not make this grow: past this many, the oldest
/// is dropped (a later ACK carries more, only the ACK clock gets coarser).
pub(super) const MAX_PENDING_ACKS: usize = 256;

/// What the arrival of one data segment looked like to the receive side.
#[derive(Debug, Clone, Copy)]
pub(super) struct Arrival {
    /// RCV.NXT before the segment.
    pub nxt_before: u64,
    /// Out-of-order data was held before the segment (a hole was open).
    pub hole_before: bool,
    /// Stream offsets of the segment's payload.
    pub start: u64,
    pub end: u64,
    /// The segment ends a message (BTH `*_LAST` / `*_ONLY` opcodes).
    pub message_end: bool,
}

#[derive(Debug, Default)]
pub(super) struct AckState {
    /// Payload bytes accepted since a segment last carried our ACK.
    unacked_bytes: u64,
    /// Largest payload seen in one segment: what "full-sized" means for this peer.
    rcv_mss: u64,
    /// RFC 2883: a duplicate range the next ACK reports as its first SACK block.
    pub dsack: Option<(u64, u64)>,
    /// Built ACKs, each with what it carries that a later ACK would not repeat on its own:
    /// our credit (R=1) and a D-SACK block.
    pending: VecDeque<Pending>,
}

/// A pure ACK as built: a header and nothing else, so no heap allocation per ACK.
pub(super) type BuiltAck = ArrayVec<u8, TCP_HEADER_MAX>;

/// A built ACK waiting for `poll_transmit`.
#[derive(Debug)]
struct Pending {
    seg: BuiltAck,
    credit: bool,
    dsack: Option<(u64, u64)>,
}

impl AckState {
    pub fn take_pending(&mut self) -> Option<BuiltAck> {
        self.pending.pop_front().map(|p| p.seg)
    }

    /// Built ACKs not taken yet.
    #[cfg(test)]
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

impl Connection {
    /// The ACK policy for one accepted data segment.
    pub(super) fn on_data_arrival(&mut self, now: Duration, a: Arrival) {
        let len = a.end.saturating_sub(a.start);
        // A super-segment (segmentation offload coalesced on the way, or a TSO-capable
        // device's read) stands for many segments: "full-sized" stays a segment's size, at
        // most our MSS, as Linux measures `rcv_mss` from `gso_size` rather than the length.
        self.ack.rcv_mss = self.ack.rcv_mss.max(len.min(u64::from(self.cfg.mss)));
        self.ack.unacked_bytes += len;
        let first_hole = a.start > a.nxt_before && !a.hole_before;
        let fills_hole = a.hole_before && self.rcv.nxt > a.nxt_before;
        let two_full = self.ack.unacked_bytes >= 2 * self.ack.rcv_mss;
        if first_hole || fills_hole || self.ack.dsack.is_some() || two_full {
            self.ack_now(now);
        } else if a.message_end {
            self.owed.ack = true;
        } else if !self.timers.is_set(Timer::AckDelay) {
            self.timers.set(Timer::AckDelay, now + self.cfg.ack_delay);
        }
    }

    /// A duplicate `[start, end)` arrived: the next ACK reports it (RFC 2883), and goes at
    /// once (`on_data_arrival`, or the caller for a segment wholly below the window).
    pub(super) fn note_duplicate(&mut self, start: u64, end: u64) {
        if end > start {
            self.stats.dsacks_sent += 1;
            self.ack.dsack = Some((start, end));
        }
    }

    /// Build a pure ACK of this moment and queue it for `poll_transmit`.
    pub(super) fn ack_now(&mut self, now: Duration) {
        if self.ack.pending.len() >= MAX_PENDING_ACKS {
            if let Some(old) = self.ack.pending.pop_front() {
                self.stats.acks_superseded += 1;
                // What it carried that the next ACK would not must still travel: its credit,
                // and its D-SACK unless a newer duplicate takes the one block.
                self.owed.credit |= old.credit;
                if self.ack.dsack.is_none() {
                    self.ack.dsack = old.dsack;
                }
            }
        }
        let credit = self.owed.credit;
        // Building the ACK takes the D-SACK (`output.rs`): remember which it was.
        let dsack = self.ack.dsack;
        let mut buf = [0u8; TCP_HEADER_MAX];
        let n = self.pure_ack(now, &mut output::Out::new(&mut buf, ChecksumFill::Full));
        let mut seg = BuiltAck::new();
        seg.try_extend_from_slice(&buf[..n])
            .expect("a pure ACK is a header only");
        self.owed.ack = false;
        self.ack.pending.push_back(Pending { seg, credit, dsack });
    }

    /// A segment carrying our ACK is going out: nothing is owed until more data arrives.
    pub(super) fn on_ack_carried(&mut self) {
        self.ack.unacked_bytes = 0;
        self.timers.stop(Timer::AckDelay);
    }

    /// The delayed-ACK bound expired.
    pub(super) fn on_ack_delay(&mut self) {
        self.owed.ack = true;
    }
}
