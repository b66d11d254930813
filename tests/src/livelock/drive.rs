//! The driver: posts a [`Workload`]'s steps on a simulated pair, steps the pair one event at a
//! time, checks every byte that lands, and hands the monitor a [`Sample`] after every event.

use super::{limits, Alarm, Limits, Monitor, Sample, Side, Step, Workload};
use crate::{configs, established, quiet_link};
use bth_framer::WorkRequest;
use bth_io::sim::workload::filled;
use bth_io::sim::{Direction, DriverModel, Pair, SimLink};
use bth_placement::MrHandle;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;
use tcp_bth::{Connection, Mode, WcOp};

// Children of this module, so that they see the harness's state: checking what lands, and
// describing a failure.
#[path = "report.rs"]
mod report;
#[path = "verify.rs"]
mod verify;
use verify::register;

/// Steps of the pair at one instant after which the clock counts as stopped. Events fall due
/// at the instant they were set for only when a timer is set for "now" while handling it; a
/// handful is normal, hundreds are not (and `Pair::step` itself gives up at 10,000, which
/// would otherwise look like "nothing more to do" and let the clock jump on).
const SAME_INSTANT_LIMIT: u32 = 1000;

/// Virtual time the work has after the last step to finish (a healthy run needs seconds).
const FINISH: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Too many segments without progress ([`Alarm::Livelock`]).
    Livelock,
    /// Outstanding work without progress for too long ([`Alarm::Stall`]).
    Stall,
    /// The pair's clock stopped: events kept falling due at one instant
    /// (`SAME_INSTANT_LIMIT`).
    ClockStopped,
    /// Progress went on, but the work was not done `FINISH` after the last step.
    Unfinished,
    /// Bytes or a completion differ from what was posted.
    Wrong,
    /// A connection failed.
    ConnectionFailed,
    /// The stack refused a work request or bytes the workload posted.
    Refused,
    /// The stack panicked (a debug assertion, say) while the pair was stepped or served.
    Panicked,
}

/// Why a run failed, with everything needed to tell a stack defect from a harness one.
pub struct Failure {
    pub kind: FailureKind,
    pub report: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.report)
    }
}

impl std::fmt::Debug for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// What a run that held did.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub virtual_time: Duration,
    /// Segments both ends sent, segments they retransmitted, packets the link (and the
    /// drivers' queues) dropped: what the run went through.
    pub segments: u64,
    pub retransmits: u64,
    pub dropped: u64,
    pub ops_verified: u64,
    pub bytes_verified: u64,
    /// The most segments sent between two instants of progress, and the bound.
    pub max_quiet_segments: u64,
    pub quiet_bound: u64,
    pub max_quiet_time: Duration,
}

/// A work request posted and not yet completed (or a WRITE with immediate expected).
#[derive(Debug, Clone, Copy)]
struct Posted {
    op: WcOp,
    id: u64,
    len: u32,
    /// WRITE: offset in the peer's target region; READ: in the peer's source region.
    offset: u64,
    /// Its bytes are counted as verified at this completion (once per message: at the
    /// receiver for SENDs and WRITEs with immediate, at the requester for plain WRITEs and
    /// READs).
    counted_here: bool,
}

/// A receive for one of the peer's SENDs.
#[derive(Debug, Clone, Copy)]
struct Recv {
    id: u64,
    len: u32,
    imm: Option<u32>,
    /// When the workload posts it.
    due: Duration,
}

/// What one end of the pair has outstanding, and the progress seen there.
#[derive(Debug, Default)]
struct End {
    /// Work requests this end posted, by wr_id, until they complete.
    posted: BTreeMap<u64, Posted>,
    /// Receives to post, in the order of the peer's SENDs.
    to_post: VecDeque<Recv>,
    /// Receives posted, in order: each SEND's completion must be the front one's.
    posted_recvs: VecDeque<Recv>,
    /// The peer's WRITEs with immediate, by immediate, until they complete here.
    imm_writes: BTreeMap<u32, Posted>,
    /// Consumes nothing (no reads, no receives posted) before this.
    paused_until: Duration,
    /// Plain: every byte the peer sent here, and how many were read.
    stream: Vec<u8>,
    read: usize,
    /// BTH: the peer's WRITEs land in `target`, its READs read `source`.
    target: Option<MrHandle>,
    target_used: u64,
    source: Option<MrHandle>,
    source_bytes: Vec<u8>,
    /// SND.UNA last seen, bytes acknowledged since the start, new bytes at this receiver.
    una: u32,
    acked: u64,
    rx_high: u64,
}

impl End {
    fn has_work(&self) -> bool {
        !self.posted.is_empty()
            || !self.to_post.is_empty()
            || !self.posted_recvs.is_empty()
            || !self.imm_writes.is_empty()
            || self.read < self.stream.len()
    }

    /// The workload holds something back at this end: a pause with something to consume, or
    /// a receive it posts later on purpose.
    fn holds(&self, now: Duration) -> bool {
        let paused =
            self.paused_until > now && (self.read < self.stream.len() || !self.to_post.is_empty());
        paused || self.to_post.front().is_some_and(|r| r.due > now)
    }
}

fn conn(p: &mut Pair, side: Side) -> &mut Connection {
    match side {
        Side::A => &mut p.a,
        Side::B => p.b(),
    }
}

fn conn_ref(p: &Pair, side: Side) -> &Connection {
    match side {
        Side::A => &p.a,
        Side::B => p.b.as_ref().expect("B exists once established"),
    }
}

const SIDES: [Side; 2] = [Side::A, Side::B];

/// Run `w` under its [`limits`].
pub fn run(w: &Workload) -> Result<Summary, Failure> {
    run_with(w, limits(w))
}

/// Run `w` under `limits`: every step, then until all work is done.
pub fn run_with(w: &Workload, limits: Limits) -> Result<Summary, Failure> {
    let mut h = Harness::new(w, limits);
    for (i, step) in w.steps.iter().enumerate() {
        h.step = Some(i);
        h.apply(step)?;
    }
    h.step = None;
    let deadline = h.p.now + FINISH;
    if !h.run_until(deadline, true)? {
        let what = format!("work not done {FINISH:?} of virtual time after the last step");
        return Err(h.fail(FailureKind::Unfinished, what));
    }
    // Nothing is pending, so every message and byte was checked once: a cross-check of the
    // harness's own bookkeeping.
    if h.bytes_verified != h.bytes_posted {
        let what = format!(
            "{} bytes verified of {} posted",
            h.bytes_verified, h.bytes_posted
        );
        return Err(h.fail(FailureKind::Wrong, what));
    }
    Ok(Summary {
        virtual_time: h.p.now - h.start,
        segments: h.segments(),
        retransmits: SIDES
            .iter()
            .map(|&s| conn_ref(&h.p, s).recovery_stats().retransmits)
            .sum(),
        dropped: [Direction::AtoB, Direction::BtoA]
            .map(|d| h.p.link.stats(d).dropped())
            .iter()
            .chain(h.p.rx_dropped().iter())
            .sum(),
        ops_verified: h.ops_verified,
        bytes_verified: h.bytes_verified,
        max_quiet_segments: h.mon.max_quiet_segments,
        quiet_bound: limits.quiet_segments,
        max_quiet_time: h.mon.max_quiet_time,
    })
}

struct Harness<'w> {
    w: &'w Workload,
    p: Pair,
    mon: Monitor,
    ends: [End; 2],
    /// The step being applied (None: the run after the last).
    step: Option<usize>,
    next_id: u64,
    completions: u64,
    bytes_read: u64,
    ops_verified: u64,
    bytes_verified: u64,
    /// Payload bytes of every SEND, WRITE, READ and plain send posted.
    bytes_posted: u64,
    start: Duration,
}

impl<'w> Harness<'w> {
    fn new(w: &'w Workload, limits: Limits) -> Harness<'w> {
        let (a, b) = configs(w.seed, |a, b| {
            for (c, window) in [(a, w.recv_window[0]), (b, w.recv_window[1])] {
                c.bth = w.bth;
                c.recv_window = window;
                // A SEND waits for credit as long as it takes (IB's rnr_retry = 7): a late
                // receive whose credit update is lost, then the probe's answer, legitimately
                // ends a connection under the default 10 s, and this test is about liveness.
                c.rnr_timeout = None;
            }
        });
        // The handshake on a quiet link, so that every seed starts established; then the
        // workload's link.
        let mut p = established(a, b, quiet_link());
        p.link = SimLink::new(w.link.config(w.seed));
        p.driver = w.driver_turns.then_some(DriverModel::TUN_QUEUED);
        let mut ends: [End; 2] = Default::default();
        let want_bth = matches!(p.a.mode(), Mode::Bth { .. });
        assert_eq!(want_bth, w.bth, "negotiated {:?}", p.a.mode());
        if w.bth {
            for side in SIDES {
                register(&mut p, &mut ends[side.index()], w, side);
            }
        }
        for side in SIDES {
            ends[side.index()].una = conn(&mut p, side).seq_state().0;
        }
        let start = p.now;
        let mut h = Harness {
            w,
            // Replaced below by one starting at the first real sample.
            mon: Monitor::new(
                limits,
                &Sample {
                    now: start,
                    segments: 0,
                    progress: 0,
                    pending: false,
                    held: false,
                },
            ),
            p,
            ends,
            step: None,
            next_id: 1,
            completions: 0,
            bytes_read: 0,
            ops_verified: 0,
            bytes_verified: 0,
            bytes_posted: 0,
            start,
        };
        let first = h.sample();
        h.mon = Monitor::new(limits, &first);
        h
    }

    fn segments(&self) -> u64 {
        SIDES
            .iter()
            .map(|&s| conn_ref(&self.p, s).stats().segments_out)
            .sum()
    }

    /// Post one step (an idle runs the pair for its length).
    fn apply(&mut self, step: &Step) -> Result<(), Failure> {
        let now = self.p.now;
        let seed = self.w.seed;
        let id = self.next_id;
        self.next_id += 1;
        if let Step::Send { len, .. }
        | Step::Write { len, .. }
        | Step::Read { len, .. }
        | Step::Bytes { len, .. } = *step
        {
            self.bytes_posted += u64::from(len);
        }
        let posted = |op, len, offset, counted_here| Posted {
            op,
            id,
            len,
            offset,
            counted_here,
        };
        match *step {
            Step::Send {
                from,
                len,
                imm,
                recv_lag_us,
            } => {
                let imm = imm.then_some(id as u32);
                let data = filled(seed, id, len as usize);
                let r = conn(&mut self.p, from).post_send(WorkRequest::send(id, data, imm));
                r.map_err(|e| self.fail(FailureKind::Refused, format!("SEND refused: {e:?}")))?;
                self.ends[from.index()]
                    .posted
                    .insert(id, posted(WcOp::Send, len, 0, false));
                let due = now + Duration::from_micros(recv_lag_us);
                let recv = Recv { id, len, imm, due };
                self.ends[from.peer().index()].to_post.push_back(recv);
            }
            Step::Write { from, len, imm } => {
                let to = &mut self.ends[from.peer().index()];
                let target = to.target.expect("a workload with WRITEs registers targets");
                let offset = to.target_used;
                to.target_used += u64::from(len);
                let imm = imm.then_some(id as u32);
                if let Some(imm) = imm {
                    to.imm_writes
                        .insert(imm, posted(WcOp::RecvRdmaWithImm, len, offset, true));
                }
                let data = filled(seed, id, len as usize);
                let wr = WorkRequest::write(id, target.rkey, target.addr + offset, data, imm);
                let r = conn(&mut self.p, from).post_send(wr);
                r.map_err(|e| self.fail(FailureKind::Refused, format!("WRITE refused: {e:?}")))?;
                self.ends[from.index()]
                    .posted
                    .insert(id, posted(WcOp::RdmaWrite, len, offset, imm.is_none()));
            }
            Step::Read { from, len, offset } => {
                let src = self.ends[from.peer().index()].source;
                let src = src.expect("a workload with READs registers sources");
                let addr = src.addr + u64::from(offset);
                let sink = vec![0u8; len as usize];
                let r = conn(&mut self.p, from).post_read(id, src.rkey, addr, sink);
                r.map_err(|e| self.fail(FailureKind::Refused, format!("READ refused: {e:?}")))?;
                let p = posted(WcOp::RdmaRead, len, u64::from(offset), true);
                self.ends[from.index()].posted.insert(id, p);
            }
            Step::Bytes { from, len } => {
                let data = filled(seed, id, len as usize);
                match conn(&mut self.p, from).send_bytes(&data) {
                    Ok(n) if n == data.len() => {}
                    r => {
                        let what = format!("send_bytes of {len} bytes: {r:?}");
                        return Err(self.fail(FailureKind::Refused, what));
                    }
                }
                self.ends[from.peer().index()]
                    .stream
                    .extend_from_slice(&data);
            }
            Step::Pause { side, us } => {
                let e = &mut self.ends[side.index()];
                e.paused_until = e.paused_until.max(now + Duration::from_micros(us));
            }
            Step::Idle { us } => {
                self.run_until(now + Duration::from_micros(us), false)?;
            }
        }
        Ok(())
    }

    /// Step the pair until `until` (or, with `stop_when_done`, until no work is left);
    /// returns whether the work is done.
    fn run_until(&mut self, until: Duration, stop_when_done: bool) -> Result<bool, Failure> {
        loop {
            // Handle this instant (arrivals, timers, what the ends send), and only then let
            // the application and the monitor see it: an application that read what arrived
            // only when the clock next moved would read late (by up to the idle's length).
            let mut same_instant = 0;
            while self.guarded(|h| h.p.step(h.p.now))? {
                same_instant += 1;
                if same_instant > SAME_INSTANT_LIMIT {
                    let what = "the pair's clock stopped: events kept falling due at one instant";
                    return Err(self.fail(FailureKind::ClockStopped, what.into()));
                }
            }
            let s = self.guarded(Harness::look)??;
            if (stop_when_done && !s.pending) || self.p.now >= until {
                return Ok(!s.pending);
            }
            // Send what the application's actions call for, then move the clock to the next
            // event, stopping at the workload's next action (a pause ends, a late receive is
            // due) so that it happens on time even when the pair has nothing to do before.
            let horizon = self.next_action().map_or(until, |t| t.min(until));
            if !self.guarded(|h| h.p.step(horizon))? && self.p.now < horizon {
                // Nothing happens before the horizon: the clock jumps there.
                self.p.now = horizon;
            }
        }
    }

    /// Run `f`, turning a panic (the stack's assertions fire in this profile) into a failure
    /// that describes the pair as the panic left it.
    fn guarded<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> Result<T, Failure> {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(self)));
        r.map_err(|e| {
            let msg = (e.downcast_ref::<String>().map(String::as_str))
                .or_else(|| e.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            let what = format!("panic: {msg} (the stack's backtrace was printed where it fired)");
            self.fail(FailureKind::Panicked, what)
        })
    }

    /// The application's turn at this instant ([`service`](Self::service)), then the
    /// monitor's.
    fn look(&mut self) -> Result<Sample, Failure> {
        self.service()?;
        let s = self.sample();
        if let Err(alarm) = self.mon.observe(&s) {
            let kind = match alarm {
                Alarm::Livelock { .. } => FailureKind::Livelock,
                Alarm::Stall { .. } => FailureKind::Stall,
            };
            return Err(self.fail(kind, alarm.to_string()));
        }
        Ok(s)
    }

    fn next_action(&self) -> Option<Duration> {
        let now = self.p.now;
        self.ends
            .iter()
            .flat_map(|e| [Some(e.paused_until), e.to_post.front().map(|r| r.due)])
            .flatten()
            .filter(|&t| t > now)
            .min()
    }

    /// What the application does at this instant: take and check completions, post the
    /// receives that are due, read bytes; fail if a connection has failed.
    fn service(&mut self) -> Result<(), Failure> {
        for side in SIDES {
            if let Some(e) = conn(&mut self.p, side).error() {
                let what = format!("{side:?}'s connection failed: {e:?}");
                return Err(self.fail(FailureKind::ConnectionFailed, what));
            }
            while let Some(c) = conn(&mut self.p, side).poll_completion() {
                self.completion(side, c)?;
            }
            let now = self.p.now;
            if self.ends[side.index()].paused_until > now {
                continue;
            }
            while let Some(r) = self.ends[side.index()]
                .to_post
                .pop_front_if(|r| r.due <= now)
            {
                // Some receives longer than their SEND: the completion says the SEND's length.
                let buf = vec![0u8; r.len as usize + (r.id % 4) as usize * 100];
                if let Err(err) = conn(&mut self.p, side).post_recv(r.id, buf) {
                    let what = format!("{side:?}: post_recv refused: {:?}", err.kind);
                    return Err(self.fail(FailureKind::Refused, what));
                }
                self.ends[side.index()].posted_recvs.push_back(r);
            }
            self.read(side)?;
        }
        Ok(())
    }

    /// The monitor's view of this instant; updates the progress counters of both ends.
    fn sample(&mut self) -> Sample {
        let now = self.p.now;
        let mut progress = self.completions + self.bytes_read;
        let mut pending = false;
        let mut held = false;
        for side in SIDES {
            let c = conn_ref(&self.p, side);
            let e = &mut self.ends[side.index()];
            let una = c.seq_state().0;
            let moved = una.wrapping_sub(e.una);
            assert!(
                moved < 1 << 31,
                "{side:?}: SND.UNA went back from {} to {una}",
                e.una
            );
            e.acked += u64::from(moved);
            e.una = una;
            // New bytes at this receiver. Placement counts only bytes it had not placed; the
            // plain path counts in-order bytes, and the out-of-order store (which can hold an
            // overlapping byte twice) is at most a window: its high-water mark cannot grow
            // without new bytes arriving.
            let rx = match c.mode() {
                Mode::Bth { .. } => c.placement_counters().bytes_placed,
                _ => c.stats().bytes_received + c.rx_held().ooo_store,
            };
            e.rx_high = e.rx_high.max(rx);
            progress += e.acked + e.rx_high;
            pending |= e.has_work() || c.send_backlog() > 0;
            held |= e.holds(now);
        }
        Sample {
            now,
            segments: self.segments(),
            progress,
            pending,
            held,
        }
    }
}
