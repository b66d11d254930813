//! The placer: routes each validated segment to its message by class and MSN, and places it.

use crate::cqe::Cqe;
use crate::mr::{Access, MemoryRegions};
use crate::msg::{place_any, place_new_unit, place_segment, Books, Dest, MsgTrack};
use crate::outcome::{Counters, DropReason, PlaceOutcome};
use crate::unfilled::Unfilled;
use crate::window::{Locate, MsnWindow, MAX_WINDOW};
use bth_wire::{Inbound, MsgClass, ReadRequest, MAX_MESSAGE_LEN};
use std::collections::VecDeque;

/// What a connection's receive side needs to know from the handshake and the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementConfig {
    /// The peer's first MSN (from its hello), the same for the send, write and read-request
    /// classes. READ responses echo *our* request MSNs: that class is anchored by the first
    /// [`Placement::expect_read_response`] instead.
    pub first_msn: u16,
    /// Receives that may be posted at once (capped at 2^15 by MSN arithmetic).
    pub max_posted_recvs: usize,
    /// Largest message accepted (what our hello announced); at most 2^24 - 1.
    pub max_message_len: u32,
}

impl PlacementConfig {
    /// A configuration for a peer whose first MSN is `first_msn`, with 1024 posted receives at
    /// most and the largest message the offset field allows (`MAX_MESSAGE_LEN`).
    pub const fn new(first_msn: u16) -> PlacementConfig {
        PlacementConfig {
            first_msn,
            max_posted_recvs: 1024,
            max_message_len: MAX_MESSAGE_LEN,
        }
    }
}

impl Default for PlacementConfig {
    fn default() -> Self {
        PlacementConfig::new(0)
    }
}

/// Bounds on the state a peer can make grow, and the rkey seed. The defaults suit tests and
/// simulations; see [`Placement::with_limits`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementLimits {
    /// WRITE and READ-request messages tracked at once, and READs outstanding at once
    /// (capped at 2^15).
    pub max_inflight: usize,
    /// Coverage ranges all incomplete messages may hold together.
    pub max_ranges: usize,
    /// Completions queued before in-order completion pauses until the owner polls (at least 1).
    pub max_completions: usize,
    /// Seed for rkey keys (see [`MemoryRegions::with_seed`]); give a random one to face a real
    /// peer.
    pub rkey_seed: u64,
}

impl Default for PlacementLimits {
    fn default() -> Self {
        PlacementLimits {
            max_inflight: 1024,
            max_ranges: 65536,
            max_completions: 4096,
            rkey_seed: 0,
        }
    }
}

/// A posted receive: the buffer for one SEND MSN.
#[derive(Debug)]
pub(crate) struct PostedRecv {
    pub wr_id: u64,
    pub buf: Vec<u8>,
    pub track: MsgTrack,
}

/// A READ this side issued, waiting for its response bytes.
#[derive(Debug)]
pub(crate) struct PendingRead {
    pub wr_id: u64,
    pub sink: Vec<u8>,
    pub track: MsgTrack,
}

/// The receive side of one connection.
pub struct Placement {
    pub(crate) cfg: PlacementConfig,
    pub(crate) limits: PlacementLimits,
    pub(crate) regions: MemoryRegions,
    pub(crate) send: MsnWindow<PostedRecv>,
    /// Entries are created when a segment of that MSN first arrives (None before).
    pub(crate) write: MsnWindow<Option<Box<MsgTrack>>>,
    /// Whether the READ request with that MSN has been seen (answered or refused).
    pub(crate) read_req: MsnWindow<bool>,
    pub(crate) reads: MsnWindow<PendingRead>,
    pub(crate) reads_anchored: bool,
    pub(crate) cq: VecDeque<Cqe>,
    pub(crate) books: Books,
    /// Unfilled bytes of the posted receives and of the READ sinks.
    pub(crate) recv_unfilled: Unfilled,
    pub(crate) sink_unfilled: Unfilled,
    pub(crate) flushed: bool,
}

impl Placement {
    /// A receive side with default [`PlacementLimits`].
    pub fn new(cfg: PlacementConfig) -> Placement {
        Placement::with_limits(cfg, PlacementLimits::default())
    }

    /// Out-of-range values are clamped rather than refused (see the field docs).
    pub fn with_limits(mut cfg: PlacementConfig, mut limits: PlacementLimits) -> Placement {
        cfg.max_posted_recvs = cfg.max_posted_recvs.min(MAX_WINDOW);
        cfg.max_message_len = cfg.max_message_len.min(MAX_MESSAGE_LEN);
        limits.max_inflight = limits.max_inflight.min(MAX_WINDOW);
        limits.max_completions = limits.max_completions.max(1);
        let first = cfg.first_msn;
        Placement {
            regions: MemoryRegions::with_seed(limits.rkey_seed),
            send: MsnWindow::new(first),
            write: MsnWindow::new(first),
            read_req: MsnWindow::new(first),
            reads: MsnWindow::new(first),
            reads_anchored: false,
            cq: VecDeque::new(),
            books: Books {
                max_ranges: limits.max_ranges,
                max_message_len: cfg.max_message_len,
                ..Books::default()
            },
            recv_unfilled: Unfilled::default(),
            sink_unfilled: Unfilled::default(),
            flushed: false,
            cfg,
            limits,
        }
    }

    /// Number the peer's classes (send, write, read request) from `first_msn`, the MSN its
    /// hello announced, when that was not known at construction (receives may be posted before
    /// the handshake). Only before the first segment: afterwards it would renumber messages
    /// already tracked, so it returns false and changes nothing.
    pub fn anchor_peer_msn(&mut self, first_msn: u16) -> bool {
        if self.books.counters.segments > 0 {
            return false;
        }
        self.cfg.first_msn = first_msn;
        self.send.head = first_msn;
        self.write.head = first_msn;
        self.read_req.head = first_msn;
        true
    }

    /// The configuration in force: clamped, and with any later
    /// [`anchor_peer_msn`](Self::anchor_peer_msn) applied.
    pub fn config(&self) -> &PlacementConfig {
        &self.cfg
    }

    /// The connection's registered memory regions (what WRITEs and READ requests name by rkey).
    pub fn regions(&self) -> &MemoryRegions {
        &self.regions
    }

    /// The registered memory regions, to register, deregister or write locally.
    pub fn regions_mut(&mut self) -> &mut MemoryRegions {
        &mut self.regions
    }

    /// The limits in force, after clamping.
    pub fn limits(&self) -> &PlacementLimits {
        &self.limits
    }

    /// A copy of the connection's running totals (segments, bytes placed, drops, ...).
    pub fn counters(&self) -> Counters {
        self.books.counters
    }

    /// Coverage ranges currently held (bounded by `max_ranges` plus one per message).
    pub fn ranges_in_use(&self) -> usize {
        self.books.ranges_in_use
    }

    /// Whether [`flush`](Self::flush) has run: posts are refused and segments dropped.
    pub fn is_flushed(&self) -> bool {
        self.flushed
    }

    /// Place one data segment. Never panics and never writes outside the segment's target,
    /// whatever the segment says. The segment's own consistency (class matches opcode, offset
    /// matches position, length within 24 bits) was checked once, by `Inbound::from_bth`;
    /// placement checks it against the message and the target.
    pub fn place(&mut self, seg: &Inbound<'_>) -> PlaceOutcome {
        self.books.counters.segments += 1;
        match self.place_usual(seg) {
            Some(new_bytes) => PlaceOutcome::Placed { new_bytes },
            None => self.place_other(seg),
        }
    }

    /// The usual segment, a whole new unit of a SEND to a posted receive
    /// ([`place_new_unit`]), on a lane of its own ahead of the dispatch by class. Kept apart
    /// so that it compiles to a short run of checks and stores ahead of the copy, with nothing
    /// spilled around it: the copy of a 1448-byte segment in cache takes about 40 ns, and every
    /// store beside it shows in the ratio to memcpy (`docs/placement.md`, "Measured"). WRITEs
    /// take the same short path behind the dispatch. None with nothing changed for anything
    /// else.
    #[inline(always)]
    fn place_usual(&mut self, seg: &Inbound<'_>) -> Option<u32> {
        if seg.class != MsgClass::Send || self.flushed {
            return None;
        }
        let Locate::At(k) = self.send.locate(seg.msn) else {
            return None;
        };
        let p = self.send.entries.get_mut(k)?;
        let n = place_new_unit(
            &mut p.track,
            seg,
            &mut Dest::Buffer(&mut p.buf),
            &mut self.books,
        )?;
        self.recv_unfilled.filled(n);
        if p.track.finished {
            self.drain(MsgClass::Send, false);
        }
        Some(n)
    }

    /// Every segment [`place_usual`](Self::place_usual) did not take.
    #[inline(never)]
    fn place_other(&mut self, seg: &Inbound<'_>) -> PlaceOutcome {
        if self.flushed {
            self.books.counters.after_flush += 1;
            return PlaceOutcome::Dropped(DropReason::Flushed);
        }
        // Each class completes what a segment finished: the front of a window can only change
        // when one of its messages finishes (or when the owner polls, flushes or fails a READ,
        // which complete what they free themselves).
        match seg.class {
            MsgClass::Send => self.place_send(seg),
            MsgClass::Write => self.place_write(seg),
            MsgClass::ReadRequest => {
                let out = self.place_read_request(seg);
                self.drain(MsgClass::ReadRequest, false);
                out
            }
            MsgClass::ReadResponse => self.place_read_response(seg),
        }
    }

    fn out_of_window(&mut self) -> PlaceOutcome {
        self.books.counters.out_of_window += 1;
        PlaceOutcome::Dropped(DropReason::OutOfWindow)
    }

    fn place_send(&mut self, seg: &Inbound<'_>) -> PlaceOutcome {
        match self.send.locate(seg.msn) {
            Locate::Behind => self.books.duplicate(seg),
            Locate::At(k) => match self.send.entries.get_mut(k) {
                Some(p) => {
                    let before = p.track.cov.covered();
                    // `place_usual` has tried the short path already.
                    let out =
                        place_any(&mut p.track, seg, Dest::Buffer(&mut p.buf), &mut self.books);
                    self.recv_unfilled.placed(before, p.track.cov.covered());
                    if p.track.finished {
                        self.drain(MsgClass::Send, false);
                    }
                    out
                }
                None => self.out_of_window(),
            },
            // Within what the queue could hold: the peer ran past our credit.
            Locate::Ahead(k) if k < self.cfg.max_posted_recvs => {
                self.books.counters.receiver_not_ready += 1;
                PlaceOutcome::ReceiverNotReady
            }
            Locate::Ahead(_) => self.out_of_window(),
        }
    }

    fn place_write(&mut self, seg: &Inbound<'_>) -> PlaceOutcome {
        let Some(reth) = seg.reth else {
            self.books.counters.invalid += 1;
            return PlaceOutcome::Dropped(DropReason::Invalid);
        };
        let k = match self.write.locate(seg.msn) {
            Locate::Behind => return self.books.duplicate(seg),
            Locate::At(k) => k,
            Locate::Ahead(k) if k < self.limits.max_inflight => k,
            Locate::Ahead(_) => return self.out_of_window(),
        };
        while self.write.entries.len() <= k {
            self.write.entries.push_back(None);
        }
        match self.write.entries.get_mut(k) {
            Some(slot) => {
                let track = slot.get_or_insert_with(Box::default);
                let out = place_segment(
                    track,
                    seg,
                    Dest::Region(&mut self.regions, reth),
                    &mut self.books,
                );
                if track.finished {
                    self.drain(MsgClass::Write, false);
                }
                out
            }
            None => self.out_of_window(),
        }
    }

    fn place_read_request(&mut self, seg: &Inbound<'_>) -> PlaceOutcome {
        let k = match self.read_req.locate(seg.msn) {
            Locate::Behind => return self.books.duplicate(seg),
            Locate::At(k) => k,
            Locate::Ahead(k) if k < self.limits.max_inflight => k,
            Locate::Ahead(_) => return self.out_of_window(),
        };
        while self.read_req.entries.len() <= k {
            self.read_req.entries.push_back(false);
        }
        let Some(state) = self.read_req.entries.get_mut(k) else {
            return self.out_of_window();
        };
        if *state {
            // Answered (or refused) already: a retransmitted request must not be answered twice.
            return self.books.duplicate(seg);
        }
        let counters = &mut self.books.counters;
        let req = match ReadRequest::parse(seg.payload) {
            Ok(req) if seg.offset == 0 && seg.last => req,
            _ => {
                *state = true;
                counters.invalid += 1;
                return PlaceOutcome::Dropped(DropReason::Invalid);
            }
        };
        match self
            .regions
            .check_remote(req.rkey, req.addr, u64::from(req.len), Access::REMOTE_READ)
        {
            Ok(()) => {
                *state = true;
                counters.read_requests += 1;
                PlaceOutcome::ReadRequested(req)
            }
            Err(e) => {
                *state = true;
                counters.access_errors += 1;
                PlaceOutcome::AccessError(e)
            }
        }
    }

    fn place_read_response(&mut self, seg: &Inbound<'_>) -> PlaceOutcome {
        let located = if self.reads_anchored {
            self.reads.locate(seg.msn)
        } else {
            Locate::Ahead(0)
        };
        match located {
            Locate::Behind => self.books.duplicate(seg),
            Locate::At(k) => match self.reads.entries.get_mut(k) {
                Some(r) => {
                    let before = r.track.cov.covered();
                    let out = place_segment(
                        &mut r.track,
                        seg,
                        Dest::Buffer(&mut r.sink),
                        &mut self.books,
                    );
                    self.sink_unfilled.placed(before, r.track.cov.covered());
                    if r.track.finished {
                        self.drain(MsgClass::ReadResponse, false);
                    }
                    out
                }
                None => self.unknown_read(),
            },
            Locate::Ahead(_) => self.unknown_read(),
        }
    }

    fn unknown_read(&mut self) -> PlaceOutcome {
        self.books.counters.unknown_read_responses += 1;
        PlaceOutcome::Dropped(DropReason::UnknownRead)
    }
}
