//! A verified message workload over a simulated pair: A posts SENDs, RDMA WRITEs with immediate
//! and RDMA READs to B; every byte that lands is compared with what was sent. Used by
//! `bth demo` and the integrity tests.

use super::link::LinkConfig;
use super::pair::{pair_configs, DriverModel, Pair};
pub use super::pattern::{fill, filled, matches_fill};
use bth_framer::{WorkRequest, WrOp};
use bth_placement::{Access, WcStatus};
use bytes::Bytes;
use std::io;
use std::path::PathBuf;
use std::time::Duration;
use tcp_bth::{CallError, Completion, Connection, ConnectionError, Mode, State, WcOp};

/// What a planned message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A SEND into a receive buffer B keeps posted.
    Send,
    /// An RDMA WRITE with immediate into B's target MR.
    WriteImm,
    /// An RDMA READ from B's source MR into a buffer of A's.
    Read,
}

/// A workload [`run`]. Default: 300 messages of 1 byte to 4 MiB, SEND:WRITE:READ 2:1:1,
/// 16 receives deep, seed 1, [`LinkConfig::default`], 600 s limit, CUBIC, per-segment
/// framing, no capture, no driver model.
#[derive(Debug, Clone)]
pub struct WorkloadConfig {
    /// Messages A posts.
    pub messages: usize,
    /// Smallest message in bytes (at least 1); sizes are log-uniform up to `max_size`.
    pub min_size: u32,
    /// Largest message in bytes.
    pub max_size: u32,
    /// Relative weights of SEND, WRITE_WITH_IMM, READ.
    pub mix: [u32; 3],
    /// Receive buffers B keeps posted ahead of the SENDs (the credit A sees).
    pub recv_depth: usize,
    /// Seed of the plan, the payloads and the ISN keys; the link has its own (`link.seed`).
    pub seed: u64,
    /// The simulated link between A and B.
    pub link: LinkConfig,
    /// Virtual time allowed for the whole run.
    pub time_limit: Duration,
    /// Congestion control of both ends.
    pub congestion: bth_cc::Algorithm,
    /// Write every segment both ends hand to the link (before impairment, handshake and close
    /// included) to this pcap file; see [`bth_capture`].
    pub capture: Option<std::path::PathBuf>,
    /// Serve each end in driver turns ([`DriverModel`]); None: every arrival handled at once.
    pub driver: Option<DriverModel>,
    /// Both ends ask for this framing (S is used only when both do).
    pub framing: tcp_bth::Framing,
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        WorkloadConfig {
            messages: 300,
            min_size: 1,
            max_size: 4 << 20,
            mix: [2, 1, 1],
            recv_depth: 16,
            seed: 1,
            link: LinkConfig::default(),
            time_limit: Duration::from_secs(600),
            congestion: bth_cc::Algorithm::Cubic,
            capture: None,
            driver: None,
            framing: tcp_bth::Framing::PerSegment,
        }
    }
}

/// What a run did. The figures the run produced are counted as it ran; `messages` and
/// `message_bytes` are what the plan (from the configuration) asked for.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The connection runs S framing (amendment 3): both ends asked for it and negotiated it.
    pub seq_framed: bool,
    /// Messages planned (all completed, since the run succeeded).
    pub messages: usize,
    /// Their bytes together.
    pub message_bytes: u64,
    /// Virtual time from the start of the handshake to the last completion.
    pub virtual_time: Duration,
    /// Data segments sent, retransmissions included, both ends.
    pub segments_sent: u64,
    /// Of those, retransmissions, both ends.
    pub retransmits: u64,
    /// Retransmissions proven needless (D-SACK or timestamps), both ends.
    pub spurious_retransmits: u64,
    /// Tail loss probes sent, both ends.
    pub tlp_probes: u64,
    /// Retransmission timeouts, both ends.
    pub rto_events: u64,
    /// RACK loss detections (events that marked segments lost), both ends.
    pub rack_losses: u64,
    /// Segments declared lost that arrived before their retransmission, both ends.
    pub false_losses: u64,
    /// Recovery episodes whose reduction was undone, both ends.
    pub undos: u64,
    /// Segments B sent (its ACKs, in a workload where A sends the data).
    pub b_segments_out: u64,
    /// Time A's and B's drivers spent in turns up to the last completion (zero without a
    /// [`DriverModel`]): busy / `virtual_time` is each end's load.
    pub driver_busy: [Duration; 2],
    /// Segments placed directly while an earlier hole was open, both ends.
    pub ooo_placed: u64,
    /// Payload bytes that reached their final place, both ends.
    pub bytes_placed: u64,
    /// Payload bytes written into receive buffers and MRs, both ends (equal to
    /// `bytes_placed` when each byte is copied once).
    pub bytes_copied: u64,
    /// BTH segments dropped for a wrong ICRC, both ends.
    pub icrc_errors: u64,
    /// Segments the parser refused (checksum, header, options), both ends.
    pub malformed: u64,
    /// SEND segments refused because no receive buffer was posted for their MSN, both ends.
    pub receiver_not_ready: u64,
    /// Packets the link dropped (loss and full queue), both directions.
    pub link_dropped: u64,
    /// Of `link_dropped`, segments from A to B (A's data; B's ACKs go the other way).
    pub link_dropped_a_to_b: u64,
    /// Packets dropped at an end because its driver's queue was full
    /// ([`DriverModel::rx_queue`](super::pair::DriverModel::rx_queue)), both ends: what the
    /// real path counts as device drops.
    pub driver_dropped: u64,
    /// Packets with one bit flipped by the link, both directions.
    pub link_corrupted: u64,
    /// Packets whose payload words the link swapped (checksum-neutral corruption).
    pub link_swapped: u64,
    /// Packets the link drew for reordering, both directions.
    pub link_reordered: u64,
    /// Extra copies the link made, both directions.
    pub link_duplicated: u64,
    /// Messages whose bytes were checked and matched: SENDs and WRITEs at B, READs at A.
    pub verified: usize,
    /// Both directions closed in order afterwards (A in TIME-WAIT, B closed) within 60 s of
    /// virtual time.
    pub closed_cleanly: bool,
}

impl Report {
    /// `message_bytes` over `virtual_time`, in Gbit/s (0 when no time passed).
    pub fn goodput_gbps(&self) -> f64 {
        let secs = self.virtual_time.as_secs_f64();
        if secs == 0.0 {
            return 0.0;
        }
        self.message_bytes as f64 * 8.0 / secs / 1e9
    }
}

/// Why a run failed. `message` fields are indices into [`plan`]'s list, which are also the
/// `wr_id`s A posted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkloadError {
    /// The capture file could not be created or completed.
    #[error("capture {}: {source}", path.display())]
    Capture {
        /// The capture file.
        path: PathBuf,
        /// What failed.
        source: io::Error,
    },
    /// The connection was not established within 30 s of virtual time.
    #[error("handshake did not complete")]
    Handshake,
    /// The handshake fell back to plain TCP: A is not in BTH mode.
    #[error("tcp_bth was not negotiated")]
    NotNegotiated,
    /// B refused to register one of its memory regions.
    #[error(transparent)]
    Register(CallError),
    /// A refused a SEND or RDMA WRITE.
    #[error("post {message}: {source}")]
    Post {
        /// Index of the message (its `wr_id`).
        message: usize,
        /// Why A refused it.
        source: CallError,
    },
    /// A refused an RDMA READ.
    #[error("post read {message}: {source}")]
    PostRead {
        /// Index of the message (its `wr_id`).
        message: usize,
        /// Why A refused it.
        source: CallError,
    },
    /// The run did not complete every message within its virtual time limit. `a_error` and
    /// `b_error` are the connections' errors, if they ended.
    #[error(
        "not finished after {time_limit:?} of virtual time: A completed \
         {a_completed}/{a_expected}, B {b_completed}/{b_expected}; A {a_error:?}, B {b_error:?}"
    )]
    Stalled {
        /// The run's [`WorkloadConfig::time_limit`].
        time_limit: Duration,
        /// Completions A polled.
        a_completed: usize,
        /// Completions A expects: one per message.
        a_expected: usize,
        /// Completions B polled.
        b_completed: usize,
        /// Completions B expects: one per SEND and WRITE.
        b_expected: usize,
        /// A's connection error, if it ended.
        a_error: Option<ConnectionError>,
        /// B's connection error, if it ended.
        b_error: Option<ConnectionError>,
    },
    /// A completion at A with an error status.
    #[error("A completion {op:?} {wr_id:?} failed: {status:?}")]
    FailedAtA {
        /// The WR's operation.
        op: WcOp,
        /// Its `wr_id` (the message index).
        wr_id: u64,
        /// The CQE's error status.
        status: WcStatus,
    },
    /// A completion at B with an error status.
    #[error("B completion {0:?} failed")]
    FailedAtB(Completion),
    /// B completed an operation it never receives (only receives and WRITEs with immediate).
    #[error("unexpected completion at B: {0:?}")]
    UnexpectedAtB(WcOp),
    /// A WRITE-with-immediate completion at B without its immediate (which names the message).
    #[error("write completion without immediate")]
    NoImmediate,
    /// A completion at B names a message the plan does not have.
    #[error("completion for unknown message {0}")]
    UnknownMessage(usize),
    /// A completion at A names a work request A never posted.
    #[error("completion for unknown WR {0}")]
    UnknownWr(usize),
    /// A message completed at B with another length than was sent.
    #[error("message {message}: {got} bytes, sent {sent}")]
    Length {
        /// Index of the message.
        message: usize,
        /// Bytes the CQE reports.
        got: u32,
        /// Bytes A sent.
        sent: u32,
    },
    /// Receive completions at B not in MSN order.
    #[error("receive completions out of MSN order: {prev} then {next}")]
    MsnOrder {
        /// MSN of the previous receive completion.
        prev: u16,
        /// MSN of this one, not after `prev`.
        next: u16,
    },
    /// A receive completion at B without its buffer.
    #[error("receive completion without its buffer")]
    NoRecvBuffer,
    /// An RDMA READ completion at A without its sink buffer.
    #[error("READ completion without its sink")]
    NoReadSink,
    /// B's WRITE target region is no longer registered.
    #[error("target region vanished")]
    TargetVanished,
    /// The bytes that landed differ from the bytes sent: at B for a SEND or WRITE, at A for a
    /// READ.
    #[error("{}", mismatch(*kind, *message))]
    Mismatch {
        /// What the message was.
        kind: Kind,
        /// Index of the message.
        message: usize,
    },
}

fn mismatch(kind: Kind, i: usize) -> String {
    match kind {
        Kind::Send => format!("SEND message {i} differs from what was sent"),
        Kind::WriteImm => format!("WRITE message {i} differs from what was sent"),
        Kind::Read => format!("READ {i} returned different bytes"),
    }
}

/// One planned message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// SEND, WRITE with immediate or READ.
    pub kind: Kind,
    /// Message length in bytes.
    pub size: u32,
    /// WRITE: offset in B's target region; READ: offset in B's source region.
    pub offset: u64,
}

/// The messages a run posts, in posting order (deterministic from the config's seed).
pub fn plan(cfg: &WorkloadConfig) -> Vec<Plan> {
    let mut rng = cfg.seed ^ 0xD1B5_4A32_D192_ED03;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let total: u32 = cfg.mix.iter().sum::<u32>().max(1);
    let (lo, hi) = (
        f64::from(cfg.min_size.max(1)),
        f64::from(cfg.max_size.max(cfg.min_size).max(1)),
    );
    let mut write_off = 0u64;
    (0..cfg.messages)
        .map(|_| {
            let pick = (next() % u64::from(total)) as u32;
            let kind = if pick < cfg.mix[0] {
                Kind::Send
            } else if pick < cfg.mix[0] + cfg.mix[1] {
                Kind::WriteImm
            } else {
                Kind::Read
            };
            // Log-uniform sizes: as many tiny messages as huge ones.
            let u = (next() >> 11) as f64 / (1u64 << 53) as f64;
            let size = (lo * (hi / lo).powf(u)).round().clamp(lo, hi) as u32;
            let offset = match kind {
                Kind::WriteImm => {
                    let o = write_off;
                    write_off += u64::from(size);
                    o
                }
                Kind::Read => next() % 4096,
                Kind::Send => 0,
            };
            Plan { kind, size, offset }
        })
        .collect()
}

/// Run the workload; Err says what went wrong (a verification failure names the message).
pub fn run(cfg: &WorkloadConfig) -> Result<Report, WorkloadError> {
    let plans = plan(cfg);
    let (mut a_cfg, mut b_cfg) = pair_configs(cfg.seed);
    a_cfg.congestion = cfg.congestion;
    b_cfg.congestion = cfg.congestion;
    a_cfg.framing = cfg.framing;
    b_cfg.framing = cfg.framing;
    let a_to_b = a_cfg.ip;
    let mut pair = Pair::new(a_cfg, b_cfg, cfg.link.clone());
    pair.driver = cfg.driver;
    let capture = match &cfg.capture {
        Some(path) => {
            let w = bth_capture::PcapWriter::create(path).map_err(|e| capture_error(path, e))?;
            let (tap, handle) = super::pcap_tap(w, a_to_b);
            pair.tap = Some(tap);
            Some((path, handle))
        }
        None => None,
    };
    let started = pair.now;
    if !pair.establish(Duration::from_secs(30)) {
        return Err(WorkloadError::Handshake);
    }
    if !matches!(pair.a.mode(), Mode::Bth { .. }) {
        return Err(WorkloadError::NotNegotiated);
    }
    let seq_framed = pair.a.seq_framed() && pair.b().seq_framed();
    let seed = cfg.seed;

    // B's memory: a WRITE target and a READ source.
    let write_total: u64 = plans
        .iter()
        .filter(|p| p.kind == Kind::WriteImm)
        .map(|p| u64::from(p.size))
        .sum();
    let read_max = plans
        .iter()
        .filter(|p| p.kind == Kind::Read)
        .map(|p| p.offset + u64::from(p.size))
        .max()
        .unwrap_or(0);
    let target = pair
        .b()
        .register_mr(
            vec![0u8; write_total.max(1) as usize],
            Access::REMOTE_WRITE | Access::LOCAL_WRITE,
        )
        .map_err(|e| WorkloadError::Register(e.kind))?;
    let mut source_bytes = vec![0u8; read_max.max(1) as usize];
    fill(seed, u64::MAX, &mut source_bytes);
    let source = pair
        .b()
        .register_mr(source_bytes.clone(), Access::REMOTE_READ)
        .map_err(|e| WorkloadError::Register(e.kind))?;

    // A posts everything; B keeps `recv_depth` receive buffers posted for the SENDs.
    let sends: Vec<usize> = (0..plans.len())
        .filter(|&i| plans[i].kind == Kind::Send)
        .collect();
    let mut next_recv = 0;
    let mut recvs_done = 0usize;
    let mut message_bytes = 0u64;
    for (i, p) in plans.iter().enumerate() {
        message_bytes += u64::from(p.size);
        let wr_id = i as u64;
        match p.kind {
            Kind::Send | Kind::WriteImm => {
                let mut data = vec![0u8; p.size as usize];
                fill(seed, wr_id, &mut data);
                let op = if p.kind == Kind::Send {
                    WrOp::Send { imm: None }
                } else {
                    WrOp::RdmaWrite {
                        rkey: target.rkey,
                        remote_addr: target.addr + p.offset,
                        imm: Some(i as u32),
                    }
                };
                pair.a
                    .post_send(WorkRequest {
                        wr_id,
                        op,
                        sg_list: vec![Bytes::from(data)],
                    })
                    .map_err(|e| WorkloadError::Post {
                        message: i,
                        source: e.kind,
                    })?;
            }
            Kind::Read => {
                pair.a
                    .post_read(
                        wr_id,
                        source.rkey,
                        source.addr + p.offset,
                        vec![0u8; p.size as usize],
                    )
                    .map_err(|e| WorkloadError::PostRead {
                        message: i,
                        source: e.kind,
                    })?;
            }
        }
    }

    let mut a_done = 0usize;
    let mut b_done = 0usize;
    let b_expected = plans.iter().filter(|p| p.kind != Kind::Read).count();
    let mut failure: Option<WorkloadError> = None;
    let mut verified = 0usize;
    let mut last_recv_msn: Option<u16> = None;
    let finished = pair.run_until(cfg.time_limit, |p| {
        let b = p.b.as_mut().expect("established");
        while let Some(c) = b.poll_completion() {
            b_done += 1;
            recvs_done += usize::from(c.op == WcOp::Recv);
            if let Err(e) = check_b(&c, &plans, seed, b, target.rkey, &mut last_recv_msn) {
                failure.get_or_insert(e);
            } else {
                verified += 1;
            }
        }
        // After the completions: a receive completed in this call is replaced at once, not
        // after the next event (which may be a 200 ms persist timer when the link is idle).
        while next_recv < sends.len() && next_recv - recvs_done < cfg.recv_depth {
            let i = sends[next_recv];
            if b.post_recv(i as u64, vec![0u8; plans[i].size as usize])
                .is_err()
            {
                break;
            }
            next_recv += 1;
        }
        while let Some(c) = p.a.poll_completion() {
            a_done += 1;
            if let Err(e) = check_a(&c, &plans, &source_bytes) {
                failure.get_or_insert(e);
            } else if c.op == WcOp::RdmaRead {
                verified += 1;
            }
        }
        failure.is_some() || (a_done == plans.len() && b_done == b_expected)
    });
    if let Some(f) = failure {
        return Err(f);
    }
    if !finished {
        return Err(WorkloadError::Stalled {
            time_limit: cfg.time_limit,
            a_completed: a_done,
            a_expected: plans.len(),
            b_completed: b_done,
            b_expected,
            a_error: pair.a.error(),
            b_error: pair.b().error(),
        });
    }
    let virtual_time = pair.now - started;
    let driver_busy = pair.busy;

    // Orderly close in both directions.
    pair.a.close();
    pair.run_until(Duration::from_secs(60), |p| {
        let b = p.b.as_mut().expect("b");
        if b.state() == State::CloseWait {
            b.close();
        }
        p.a.state() == State::TimeWait && b.state() == State::Closed
    });
    let closed_cleanly = pair.a.state() == State::TimeWait && pair.b().state() == State::Closed;
    if let Some((path, handle)) = capture {
        pair.tap = None;
        handle.finish().map_err(|e| capture_error(path, e))?;
    }

    let (a, b) = (&pair.a, pair.b.as_ref().expect("b"));
    let (ra, rb) = (a.recovery_stats(), b.recovery_stats());
    let pc = b.placement_counters();
    let pa = a.placement_counters();
    let (la, lb) = (
        pair.link.stats(super::link::Direction::AtoB),
        pair.link.stats(super::link::Direction::BtoA),
    );
    Ok(Report {
        seq_framed,
        messages: plans.len(),
        message_bytes,
        virtual_time,
        segments_sent: ra.segments_sent + rb.segments_sent,
        retransmits: ra.retransmits + rb.retransmits,
        spurious_retransmits: ra.spurious_retransmits + rb.spurious_retransmits,
        tlp_probes: ra.tlp_probes + rb.tlp_probes,
        rto_events: ra.rto_losses + rb.rto_losses,
        rack_losses: ra.rack_losses + rb.rack_losses,
        false_losses: ra.false_losses + rb.false_losses,
        undos: a.stats().undos + b.stats().undos,
        b_segments_out: b.stats().segments_out,
        driver_busy,
        ooo_placed: a.stats().ooo_placed + b.stats().ooo_placed,
        bytes_placed: pc.bytes_placed + pa.bytes_placed,
        bytes_copied: pc.bytes_copied + pa.bytes_copied,
        icrc_errors: a.stats().icrc_errors + b.stats().icrc_errors,
        malformed: a.stats().malformed + b.stats().malformed,
        receiver_not_ready: a.stats().receiver_not_ready + b.stats().receiver_not_ready,
        link_dropped: la.dropped_loss + lb.dropped_loss + la.dropped_queue + lb.dropped_queue,
        link_dropped_a_to_b: la.dropped_loss + la.dropped_queue,
        driver_dropped: pair.rx_dropped().iter().sum(),
        link_corrupted: la.corrupted + lb.corrupted,
        link_swapped: la.swapped + lb.swapped,
        link_reordered: la.reordered + lb.reordered,
        link_duplicated: la.duplicated + lb.duplicated,
        verified,
        closed_cleanly,
    })
}

fn check_b(
    c: &Completion,
    plans: &[Plan],
    seed: u64,
    b: &Connection,
    target_rkey: u32,
    last_recv_msn: &mut Option<u16>,
) -> Result<(), WorkloadError> {
    if c.status != WcStatus::Success {
        return Err(WorkloadError::FailedAtB(c.clone()));
    }
    let i = match c.op {
        WcOp::Recv => c.wr_id as usize,
        WcOp::RecvRdmaWithImm => c.imm.ok_or(WorkloadError::NoImmediate)? as usize,
        other => return Err(WorkloadError::UnexpectedAtB(other)),
    };
    let p = plans.get(i).ok_or(WorkloadError::UnknownMessage(i))?;
    if c.byte_len != p.size {
        return Err(WorkloadError::Length {
            message: i,
            got: c.byte_len,
            sent: p.size,
        });
    }
    let ok = |got: &[u8]| matches_fill(seed, i as u64, got);
    match c.op {
        WcOp::Recv => {
            if let Some(prev) = *last_recv_msn {
                if !tcp_bth::wire::msn_lt(prev, c.msn) {
                    return Err(WorkloadError::MsnOrder { prev, next: c.msn });
                }
            }
            *last_recv_msn = Some(c.msn);
            let buf = c.buf.as_ref().ok_or(WorkloadError::NoRecvBuffer)?;
            if !ok(&buf[..p.size as usize]) {
                return Err(WorkloadError::Mismatch {
                    kind: Kind::Send,
                    message: i,
                });
            }
        }
        _ => {
            let region = b
                .mr_bytes(target_rkey)
                .ok_or(WorkloadError::TargetVanished)?;
            let at = p.offset as usize;
            if !ok(&region[at..at + p.size as usize]) {
                return Err(WorkloadError::Mismatch {
                    kind: Kind::WriteImm,
                    message: i,
                });
            }
        }
    }
    Ok(())
}

fn check_a(c: &Completion, plans: &[Plan], source: &[u8]) -> Result<(), WorkloadError> {
    if c.status != WcStatus::Success {
        return Err(WorkloadError::FailedAtA {
            op: c.op,
            wr_id: c.wr_id,
            status: c.status,
        });
    }
    let i = c.wr_id as usize;
    let p = plans.get(i).ok_or(WorkloadError::UnknownWr(i))?;
    if c.op == WcOp::RdmaRead {
        let sink = c.buf.as_ref().ok_or(WorkloadError::NoReadSink)?;
        let at = p.offset as usize;
        if sink[..] != source[at..at + p.size as usize] {
            return Err(WorkloadError::Mismatch {
                kind: Kind::Read,
                message: i,
            });
        }
    }
    Ok(())
}

fn capture_error(path: &std::path::Path, source: io::Error) -> WorkloadError {
    WorkloadError::Capture {
        path: path.to_owned(),
        source,
    }
}
