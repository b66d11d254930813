//! The one driver loop: every data path (the io_uring TUN device, the simulated link) serves a
//! sans-IO [`Endpoint`] in the same turns.
//!
//! A turn takes every packet that has arrived, fires the endpoint's due timers, lets the
//! application act (post work, poll completions), then sends what the endpoint will send while
//! the data path has room. What does not fit stays inside the endpoint's connections (they
//! build segments only when asked), so a driver never holds a backlog of its own. Between
//! turns the driver waits for a packet or the endpoint's next deadline ([`PacketIo::wait`]):
//! the TUN driver blocks in `io_uring_enter`, the simulator moves its virtual clock.

use std::io;
use std::sync::Arc;
use std::time::Duration;
use tcp_bth::{Endpoint, RxQueue};

/// Where a driver's IP packets come from and go to.
pub trait PacketIo {
    /// The driver's clock (what the endpoint is given as `now`).
    fn now(&self) -> Duration;
    /// Hand every packet that has arrived since the last call to `f`, each with whether the
    /// data path vouched for its TCP checksum (checksum offload), so the endpoint need not.
    fn receive(&mut self, f: &mut dyn FnMut(&[u8], bool));
    /// Whether one more packet can be queued now.
    fn can_send(&self) -> bool;
    /// Queue one IP packet (only called when [`can_send`](Self::can_send) said yes).
    fn send(&mut self, packet: &[u8]);
    /// Queue the endpoint's next packet, if it has one (only called when
    /// [`can_send`](Self::can_send) said yes); false when it had none. A data path with
    /// buffers of its own has the endpoint build the packet straight into one, so the payload
    /// is copied once on the way out; this default builds it in `scratch` and hands it to
    /// [`send`](Self::send).
    fn transmit(&mut self, ep: &mut Endpoint, now: Duration, scratch: &mut Vec<u8>) -> bool {
        if ep.poll_transmit(now, scratch).is_none() {
            return false;
        }
        self.send(scratch);
        true
    }
    /// Push out what was queued and wait until a packet arrives or `deadline` passes (never
    /// past it; `None`: the driver's own bound).
    fn wait(&mut self, deadline: Option<Duration>) -> io::Result<()>;
    /// The longest IP packet the data path carries (what its buffers hold); no limit by
    /// default. A driver loop gives it to the endpoint
    /// ([`Endpoint::set_max_packet`](tcp_bth::Endpoint::set_max_packet)).
    fn max_packet(&self) -> usize {
        usize::MAX
    }
    /// The queue packets wait in for us before the data path drops them, if it has one of
    /// known length. A driver loop gives it to the endpoint
    /// ([`Endpoint::set_rx_queue`](tcp_bth::Endpoint::set_rx_queue)), which holds every
    /// connection's receive window to its share.
    fn rx_queue(&self) -> Option<RxQueue> {
        None
    }
    /// Packets queued and not yet handed to the network (0 when everything has left).
    fn in_flight(&self) -> usize {
        0
    }
    /// A way for another thread to end a [`wait`](Self::wait) early (the async API wakes its
    /// driver when a command arrives); None if waits cannot be interrupted.
    fn waker(&self) -> Option<Arc<dyn Fn() + Send + Sync>> {
        None
    }
}

/// The application's part of a turn: act on the endpoint's connections; true when done.
pub trait App {
    /// Act on `ep` at `now` (the driver's clock), on the driver's thread, between the turn's
    /// receive and its transmit; true once the app is done.
    fn turn(&mut self, ep: &mut Endpoint, now: Duration) -> bool;
}

impl<F: FnMut(&mut Endpoint, Duration) -> bool> App for F {
    fn turn(&mut self, ep: &mut Endpoint, now: Duration) -> bool {
        self(ep, now)
    }
}

/// Counters of the turns a driver ran.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TurnStats {
    /// Turns run.
    pub turns: u64,
    /// Packets the data path handed to the endpoint.
    pub packets_in: u64,
    /// Packets sent into the data path.
    pub packets_out: u64,
    /// Turns that ended with segments left unsent because the data path was full.
    pub send_stalls: u64,
    /// Most packets sent in one turn.
    pub largest_batch: usize,
}

/// One turn at `now`; returns what the app said (done or not).
pub fn turn(
    ep: &mut Endpoint,
    io: &mut dyn PacketIo,
    app: &mut dyn App,
    now: Duration,
    buf: &mut Vec<u8>,
    stats: &mut TurnStats,
) -> bool {
    stats.turns += 1;
    io.receive(&mut |pkt, verified| {
        stats.packets_in += 1;
        if verified {
            ep.handle_verified(now, pkt);
        } else {
            ep.handle(now, pkt);
        }
    });
    if ep.poll_timeout().is_some_and(|t| t <= now) {
        ep.handle_timeout(now);
    }
    let done = app.turn(ep, now);
    let mut batch = 0;
    while io.can_send() {
        if !io.transmit(ep, now, buf) {
            break;
        }
        batch += 1;
    }
    if !io.can_send() {
        stats.send_stalls += 1;
    }
    stats.packets_out += batch as u64;
    stats.largest_batch = stats.largest_batch.max(batch);
    done
}

/// Why [`run`] stopped without the app being done.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// `limit` (the value) passed before the app was done and everything queued had left.
    #[error("the application was not done within {0:?}")]
    TimedOut(Duration),
    /// The data path's wait failed (a fatal TUN read error, a closed driver).
    #[error("data path: {0}")]
    Io(#[from] io::Error),
}

/// Turns until the app is done and everything queued has left the data path, or `limit`
/// of the driver's time passes.
pub fn run(
    ep: &mut Endpoint,
    io: &mut dyn PacketIo,
    app: &mut dyn App,
    limit: Duration,
) -> Result<TurnStats, RunError> {
    let mut stats = TurnStats::default();
    let mut buf = Vec::with_capacity(65536);
    let deadline = io.now() + limit;
    let mut done = false;
    loop {
        let now = io.now();
        if now >= deadline {
            return Err(RunError::TimedOut(limit));
        }
        if !done {
            done = turn(ep, io, app, now, &mut buf, &mut stats);
        } else {
            // The app is done; what it queued still goes out, timers still run.
            turn(
                ep,
                io,
                &mut |_: &mut Endpoint, _| true,
                now,
                &mut buf,
                &mut stats,
            );
        }
        if done && io.in_flight() == 0 && !ep.has_output() {
            return Ok(stats);
        }
        let wake = ep.poll_timeout().map_or(deadline, |t| t.min(deadline));
        io.wait(Some(wake))?;
    }
}
