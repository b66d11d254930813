//! One side's connection counters as `bth-perf` prints them and sends them to the peer at the
//! end of a run: loss recovery (what this side sent and how it repaired it,
//! [`RecoveryStats`]), ACKs, and segments dropped on arrival, by cause. From
//! [`tcp_bth::Stats`] and [`tcp_bth::RecoveryStats`], regrouped: the drops by cause in one
//! struct, the ACKs sent derived from segments and super-segments.
//!
//! Each side of a run reports the counters of its own connection: what *it* sent and how it
//! repaired the losses of what it sent. Which side that is depends on the operation: SEND and
//! WRITE data leaves the client, but in an RDMA READ the responder (the server) sends the data,
//! so a lossy READ run shows its retransmissions on the server's side and almost none on the
//! client's. A report of one side alone therefore says nothing about the other direction;
//! `bth-perf` prints each side's counters in that side's own output, `bth-compare` records
//! both sides of every run.

use serde::Serialize;
use std::ops::AddAssign;
use tcp_bth::{Connection, RecoveryStats};

/// Segments this side's connection dropped on arrival, by cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Drops {
    /// Refused by the segment parser (checksum, header, options).
    pub malformed: u64,
    /// BTH segments whose ICRC did not match.
    pub icrc: u64,
    /// Data segments whose BTH did not describe a valid message fragment.
    pub bad_bth: u64,
    /// Failed the timestamp check (PAWS).
    pub paws: u64,
    /// Outside the receive window (RFC 9293 §3.10.7.4), late pure ACKs excepted.
    pub out_of_window: u64,
    /// SENDs with no receive buffer posted for them.
    pub receiver_not_ready: u64,
    /// The out-of-order range table was full.
    pub ooo_table_full: u64,
    /// Placement did not take them (its windows or range limits).
    pub placement_refused: u64,
    /// At or beyond a request about to be refused.
    pub behind_refused_request: u64,
}

impl Drops {
    /// Every drop, whatever the cause.
    pub fn total(&self) -> u64 {
        let mut d = *self;
        d.fields_mut().iter().map(|f| **f).sum()
    }

    fn fields_mut(&mut self) -> [&mut u64; 9] {
        [
            &mut self.malformed,
            &mut self.icrc,
            &mut self.bad_bth,
            &mut self.paws,
            &mut self.out_of_window,
            &mut self.receiver_not_ready,
            &mut self.ooo_table_full,
            &mut self.placement_refused,
            &mut self.behind_refused_request,
        ]
    }
}

/// One connection's counters, as `bth-perf` prints them and sends them to the peer at close
/// (all counts since the connection opened).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ConnCounters {
    /// Loss recovery of what this side sent. Only the first six fields (segments sent to tail
    /// loss probes) travel to the peer; the others arrive as 0.
    pub recovery: RecoveryStats,
    /// Segments handed to the connection, malformed ones included.
    pub segments_in: u64,
    /// Segments the connection built: data, SYN, FIN, ACKs and RSTs (`Stats::segments_out`).
    pub segments_out: u64,
    /// Segments sent without payload: ACKs, credit and grant updates, SYN and FIN.
    pub acks_sent: u64,
    /// ACKs sent that were built the moment they fell due rather than at the end of a driver
    /// turn.
    pub acks_immediate: u64,
    /// ACKs sent with a D-SACK block (a duplicate arrived).
    pub dsacks_sent: u64,
    /// D-SACK blocks received from the peer.
    pub dsacks_received: u64,
    /// Recovery episodes undone because every retransmission proved spurious.
    pub undos: u64,
    /// NAKs sent (each fails the QP: the peer's request was refused).
    pub naks_sent: u64,
    /// NAKs received from the peer.
    pub naks_received: u64,
    /// Segments dropped on arrival, by cause.
    pub drops: Drops,
    /// Payload bytes sent (retransmissions included) copied into their segments, and handed
    /// to the data path as the application's own buffers with no copy (the TUN driver's
    /// gathered writes, payloads of 2 KiB and more).
    pub payload_copied: u64,
    /// See `payload_copied`: the bytes sent with no copy.
    pub payload_gathered: u64,
    /// Payload bytes copied once when posted into a buffer of the connection's (READ
    /// responses, sends from registered regions), and those of them copied again into their
    /// segments (0 where the driver gathers: `Stats::tx_payload_staged_copied`).
    pub payload_staged: u64,
    /// See `payload_staged`: those copied a second time.
    pub payload_staged_copied: u64,
    /// Pure ACKs that the peer's data overtook, taken for their SACK and credit.
    pub late_acks: u64,
    /// Of the PAWS drops: pure ACKs a later ACK of the peer's overtook
    /// (`Stats::paws_overtaken_acks`).
    pub paws_overtaken_acks: u64,
    /// ACKs built when they fell due and dropped unsent: more than a driver turn's worth
    /// waited, and a later one said more (`Stats::acks_superseded`).
    pub acks_superseded: u64,
    /// Super-segments written (segmentation offload, S framing only) and the segments they
    /// stand for; super-segments read whole (a device with TSO).
    pub gso_sent: u64,
    /// The segments `gso_sent` stood for.
    pub gso_segments: u64,
    /// Super-segments read whole.
    pub super_segments_in: u64,
}

impl ConnCounters {
    /// The counters of `c` now.
    pub fn of(c: &Connection) -> ConnCounters {
        let s = c.stats();
        let recovery = c.recovery_stats();
        ConnCounters {
            recovery,
            segments_in: s.segments_in,
            segments_out: s.segments_out,
            // Data packets: segments sent, less those a super-segment stood for, plus it.
            acks_sent: s.segments_out.saturating_sub(
                recovery.segments_sent - s.gso_segments.min(recovery.segments_sent) + s.gso_sent,
            ),
            acks_immediate: s.acks_immediate,
            dsacks_sent: s.dsacks_sent,
            dsacks_received: s.dsacks_received,
            undos: s.undos,
            naks_sent: s.naks_sent,
            naks_received: s.naks_received,
            drops: Drops {
                malformed: s.malformed,
                icrc: s.icrc_errors,
                bad_bth: s.bad_bth,
                paws: s.paws_drops,
                out_of_window: s.out_of_window,
                receiver_not_ready: s.receiver_not_ready,
                ooo_table_full: s.ooo_table_full,
                placement_refused: s.placement_refused,
                behind_refused_request: s.behind_refused_request,
            },
            payload_copied: s.tx_payload_copied,
            payload_gathered: s.tx_payload_gathered,
            payload_staged: s.tx_payload_staged,
            payload_staged_copied: s.tx_payload_staged_copied,
            late_acks: s.late_acks,
            paws_overtaken_acks: s.paws_overtaken_acks,
            acks_superseded: s.acks_superseded,
            gso_sent: s.gso_sent,
            gso_segments: s.gso_segments,
            super_segments_in: s.super_segments_in,
        }
    }

    /// Every counter, in the order of the statistics message (the first [`RECOVERY_WORDS`] are
    /// `recovery`'s). New counters go at the end:
    /// a peer that sends fewer leaves the rest at 0.
    fn fields_mut(&mut self) -> Vec<&mut u64> {
        let r = &mut self.recovery;
        let mut v = vec![
            &mut r.segments_sent,
            &mut r.retransmits,
            &mut r.spurious_retransmits,
            &mut r.rack_losses,
            &mut r.rto_losses,
            &mut r.tlp_probes,
            &mut self.segments_in,
            &mut self.segments_out,
            &mut self.acks_sent,
            &mut self.acks_immediate,
            &mut self.dsacks_sent,
            &mut self.dsacks_received,
            &mut self.undos,
            &mut self.naks_sent,
            &mut self.naks_received,
        ];
        v.extend(self.drops.fields_mut());
        v.extend([
            &mut self.payload_copied,
            &mut self.payload_gathered,
            &mut self.late_acks,
            &mut self.paws_overtaken_acks,
            &mut self.acks_superseded,
            &mut self.payload_staged,
            &mut self.payload_staged_copied,
            &mut self.gso_sent,
            &mut self.gso_segments,
            &mut self.super_segments_in,
        ]);
        v
    }

    pub(crate) fn to_words(self) -> Vec<u64> {
        let mut c = self;
        c.fields_mut().into_iter().map(|f| *f).collect()
    }

    pub(crate) fn from_words(words: &[u64]) -> ConnCounters {
        let mut c = ConnCounters::default();
        for (f, w) in c.fields_mut().into_iter().zip(words) {
            *f = *w;
        }
        c
    }

    /// Four lines: loss recovery, segments and ACKs, drops by cause, copies on send.
    pub fn lines(&self) -> [String; 4] {
        let d = &self.drops;
        [
            format!("recovery: {}", self.recovery),
            format!(
                "segments: {} in, {} out ({} without payload: ACKs, credit, SYN/FIN; {} ACKs \
                 sent at once{}; {} late ACKs taken, overtaken by the peer's data){}; D-SACKs {} \
                 sent / {} received; {} undos; NAKs {} sent / {} received",
                self.segments_in,
                self.segments_out,
                self.acks_sent,
                self.acks_immediate,
                match self.acks_superseded {
                    0 => String::new(),
                    n => format!(", {n} more dropped unsent, a later ACK covering them"),
                },
                self.late_acks,
                match (self.gso_sent, self.super_segments_in) {
                    (0, 0) => String::new(),
                    (o, i) => format!(
                        "; super-segments: {o} out standing for {} segments, {i} in whole",
                        self.gso_segments
                    ),
                },
                self.dsacks_sent,
                self.dsacks_received,
                self.undos,
                self.naks_sent,
                self.naks_received
            ),
            format!(
                "drops on arrival: {} ({} malformed, {} ICRC, {} bad BTH, {} PAWS{}, {} out of \
                 window, {} receiver not ready, {} out-of-order table full, {} placement \
                 refused, {} behind a refused request)",
                d.total(),
                d.malformed,
                d.icrc,
                d.bad_bth,
                d.paws,
                match self.paws_overtaken_acks {
                    0 => String::new(),
                    n => format!(" (of them {n} ACKs a later ACK had overtaken, as Linux drops)"),
                },
                d.out_of_window,
                d.receiver_not_ready,
                d.ooo_table_full,
                d.placement_refused,
                d.behind_refused_request
            ),
            format!(
                "payload sent: {} bytes copied into segments, {} sent with no copy (gathered \
                 writes, from the application's buffers or the copy made at post); {} copied \
                 once at post (READ responses), {} of them copied again",
                self.payload_copied,
                self.payload_gathered,
                self.payload_staged,
                self.payload_staged_copied
            ),
        ]
    }
}

/// What a side sends the other at its close: its connection's counters and what its own
/// report says of the run so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PeerSummary {
    /// Messages its report counts as completed.
    pub messages: u64,
    /// Payload bytes of those messages.
    pub bytes: u64,
    /// Messages it checked byte for byte (the responder checks SENDs and WRITEs, the
    /// requester READs).
    pub verified: u64,
    /// Errors in its report.
    pub errors: u64,
    /// Its connection's counters.
    pub counters: ConnCounters,
}

impl PeerSummary {
    pub(crate) fn to_words(self) -> (Vec<u64>, Vec<u64>) {
        let head = vec![self.messages, self.bytes, self.verified, self.errors];
        (head, self.counters.to_words())
    }

    /// From the two word lists of the statistics message; missing words are 0.
    pub(crate) fn from_words(head: &[u64], counters: &[u64]) -> PeerSummary {
        let at = |i: usize| head.get(i).copied().unwrap_or(0);
        PeerSummary {
            messages: at(0),
            bytes: at(1),
            verified: at(2),
            errors: at(3),
            counters: ConnCounters::from_words(counters),
        }
    }
}

impl AddAssign for PeerSummary {
    fn add_assign(&mut self, o: PeerSummary) {
        self.messages += o.messages;
        self.bytes += o.bytes;
        self.verified += o.verified;
        self.errors += o.errors;
        self.counters += o.counters;
    }
}

/// How many of `recovery`'s fields the statistics message carries: the first words of
/// [`ConnCounters::fields_mut`].
const RECOVERY_WORDS: usize = 6;

impl AddAssign for ConnCounters {
    /// Sums (the counters of several connections of one run). The recovery counters through
    /// their own sum, which covers the fields the statistics message does not carry.
    fn add_assign(&mut self, other: ConnCounters) {
        self.recovery += other.recovery;
        let mut o = other;
        let own = self.fields_mut().into_iter().zip(o.fields_mut());
        for (a, b) in own.skip(RECOVERY_WORDS) {
            *a += *b;
        }
    }
}
