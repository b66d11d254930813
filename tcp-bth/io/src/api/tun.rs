//! The async API on a real data path: a thread runs the driver turns (the io_uring TUN
//! driver, or any [`PacketIo`] that waits in real time) around one [`Endpoint`] and serves
//! [`AsyncEndpoint`] handles through [`ApiApp`].

use super::serve::{ApiApp, Wake};
use super::AsyncEndpoint;
use crate::turn::{turn, PacketIo, TurnStats};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tcp_bth::Endpoint;

/// Longest the thread sleeps while a caller waits on something, when the data path cannot
/// be woken by a command (no [`PacketIo::waker`]): a bound on the added latency.
const POLL_BUSY: Duration = Duration::from_micros(200);
/// Longest it sleeps with nobody waiting.
const POLL_IDLE: Duration = Duration::from_millis(2);

struct ThreadWake {
    stop: AtomicBool,
    io: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl Wake for ThreadWake {
    fn wake(&self) {
        if let Some(w) = &self.io {
            w();
        }
    }
}

/// The driver thread behind a [`tun_endpoint`].
pub struct DriverThread<I> {
    wake: Arc<ThreadWake>,
    join: Option<JoinHandle<io::Result<(Endpoint, I, TurnStats)>>>,
}

impl<I> DriverThread<I> {
    /// Stop the thread; hands back the endpoint (its connections and counters), the data
    /// path and the turn counters.
    pub fn stop(mut self) -> io::Result<(Endpoint, I, TurnStats)> {
        self.wake.stop.store(true, Ordering::Release);
        self.wake.wake();
        let join = self.join.take().expect("joined once");
        join.join()
            .map_err(|_| io::Error::other("the driver thread panicked"))?
    }
}

impl<I> Drop for DriverThread<I> {
    fn drop(&mut self) {
        self.wake.stop.store(true, Ordering::Release);
        self.wake.wake();
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

/// Serve `ep` over `io` on a new thread; the handle opens and accepts connections.
pub fn tun_endpoint<I: PacketIo + Send + 'static>(
    mut io: I,
    mut ep: Endpoint,
) -> (AsyncEndpoint, DriverThread<I>) {
    let wake = Arc::new(ThreadWake {
        stop: AtomicBool::new(false),
        io: io.waker(),
    });
    let (mut app, handle) = ApiApp::new(wake.clone());
    // Connections opened through the handle are checked against what the data path carries.
    ep.set_max_packet(io.max_packet().min(ep.config().max_packet));
    if ep.config().rx_queue.is_none() {
        ep.set_rx_queue(io.rx_queue());
    }
    let woken = io.waker().is_some();
    let w = wake.clone();
    let join = std::thread::spawn(move || {
        let mut stats = TurnStats::default();
        let mut buf = Vec::with_capacity(65536);
        while !w.stop.load(Ordering::Acquire) {
            let now = io.now();
            turn(&mut ep, &mut io, &mut app, now, &mut buf, &mut stats);
            let cap = match (woken, app.waiting()) {
                (true, _) => Duration::from_secs(1),
                (false, true) => POLL_BUSY,
                (false, false) => POLL_IDLE,
            };
            let wake_at = ep.poll_timeout().map_or(now + cap, |t| t.min(now + cap));
            io.wait(Some(wake_at))?;
        }
        Ok((ep, io, stats))
    });
    (
        handle,
        DriverThread {
            wake,
            join: Some(join),
        },
    )
}
