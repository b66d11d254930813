//! [`ApiApp`]: the application part of a driver turn that serves the async API's handles.

use super::state::EndState;
use super::{ApiError, AsyncEndpoint, AsyncQp, EpCmd, Link, Reply};
use crate::turn::App;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tcp_bth::{CallError, Connection, ConnectionHandle, Endpoint, State};
use tokio::sync::mpsc;

/// How a handle wakes its driver after queueing a command (the TUN driver may be blocked in
/// `io_uring_enter`; the simulator's task may be waiting for work).
pub trait Wake: Send + Sync + 'static {
    /// Make the driver run a turn soon: end its current wait, or the next one. Called from
    /// the caller's task or thread after each command is queued; must not block.
    fn wake(&self);
}

/// How long a closed connection stays in the endpoint before it is released: a failed one
/// repeats its RST (and NAK) to whatever the peer still sends, and a late command on its
/// handle still finds it.
const CLOSED_LINGER: Duration = Duration::from_secs(1);

/// Serves [`AsyncEndpoint`] and [`AsyncQp`] commands inside a driver's turns.
pub struct ApiApp {
    rx: mpsc::UnboundedReceiver<EpCmd>,
    /// For the handles of new QPs. Weak, so the channel closes when every handle is gone.
    tx: mpsc::WeakUnboundedSender<EpCmd>,
    wake: Arc<dyn Wake>,
    qps: HashMap<ConnectionHandle, EndState>,
    /// Every connection handed to a caller, and since when it has been closed.
    owned: HashMap<ConnectionHandle, Option<Duration>>,
    connecting: Vec<(ConnectionHandle, Reply<AsyncQp>)>,
    accepting: VecDeque<Reply<AsyncQp>>,
}

/// Where a connection stands for callers waiting on it.
fn peer_finished(c: &Connection) -> bool {
    matches!(
        c.state(),
        State::CloseWait | State::LastAck | State::Closing | State::TimeWait | State::Closed
    )
}

impl ApiApp {
    /// The app and the endpoint handle that talks to it; `wake` wakes the driver.
    pub fn new(wake: Arc<dyn Wake>) -> (ApiApp, AsyncEndpoint) {
        let (tx, rx) = mpsc::unbounded_channel();
        let app = ApiApp {
            rx,
            tx: tx.downgrade(),
            wake: wake.clone(),
            qps: HashMap::new(),
            owned: HashMap::new(),
            connecting: Vec::new(),
            accepting: VecDeque::new(),
        };
        (
            app,
            AsyncEndpoint {
                link: Link { tx, wake },
            },
        )
    }

    /// Whether a caller waits on something (a connect, an accept, a work request).
    pub fn waiting(&self) -> bool {
        !self.connecting.is_empty() || !self.accepting.is_empty() || !self.qps.is_empty()
    }

    /// Every handle is gone and nothing waits: the driver may stop.
    pub fn finished(&self) -> bool {
        self.rx.is_closed() && self.rx.is_empty() && !self.waiting()
    }

    /// A handle for `handle`, or None when no handle exists any more (nobody to give it to).
    fn qp(&self, handle: ConnectionHandle) -> Option<AsyncQp> {
        let tx = self.tx.upgrade()?;
        Some(AsyncQp {
            link: Link {
                tx,
                wake: self.wake.clone(),
            },
            handle,
        })
    }

    fn apply(&mut self, ep: &mut Endpoint, now: Duration, cmd: EpCmd) {
        match cmd {
            EpCmd::Connect(cfg, r) => match ep.connect(now, cfg) {
                Ok(h) => self.connecting.push((h, r)),
                Err(e) => {
                    let _ = r.send(Err(ApiError::Connect(e)));
                }
            },
            EpCmd::Accept(r) => self.accepting.push_back(r),
            EpCmd::Qp(h, cmd) => match ep.conn_mut(h) {
                Some(c) => self.qps.entry(h).or_default().apply(c, cmd),
                None => cmd.refuse(ApiError::Gone),
            },
        }
    }

    /// Hand `h` to the caller behind `r`; a caller that stopped waiting (or the last handle
    /// gone) leaves the connection without an owner, so it is aborted and released.
    fn hand_over(&mut self, ep: &mut Endpoint, h: ConnectionHandle, r: Reply<AsyncQp>) {
        let given = match self.qp(h) {
            Some(qp) => r.send(Ok(qp)).is_ok(),
            None => {
                let _ = r.send(Err(ApiError::DriverGone));
                false
            }
        };
        if given {
            self.owned.insert(h, None);
        } else {
            if let Some(c) = ep.conn_mut(h) {
                c.abort();
            }
            ep.release(h);
        }
    }

    /// Connects that finished: established (or already past it), or failed.
    fn settle_connects(&mut self, ep: &mut Endpoint) {
        let mut i = 0;
        while i < self.connecting.len() {
            let h = self.connecting[i].0;
            let outcome = match ep.conn(h) {
                None => Some(Err(ApiError::Gone)),
                Some(c) => match (c.error(), c.state()) {
                    (Some(e), _) => Some(Err(ApiError::Ended(e))),
                    (None, State::SynSent | State::SynReceived) => None,
                    (None, State::Closed) => {
                        Some(Err(ApiError::Refused(CallError::NotEstablished)))
                    }
                    (None, _) => Some(Ok(())),
                },
            };
            match outcome {
                None => i += 1,
                Some(res) => {
                    let (h, r) = self.connecting.swap_remove(i);
                    match res {
                        Ok(()) => self.hand_over(ep, h, r),
                        Err(e) => {
                            let _ = r.send(Err(e));
                            ep.release(h);
                        }
                    }
                }
            }
        }
    }

    /// Hand established connections to waiting `accept` calls.
    fn settle_accepts(&mut self, ep: &mut Endpoint) {
        while !self.accepting.is_empty() {
            let Some(h) = ep.accept() else { return };
            let r = self.accepting.pop_front().expect("checked non-empty");
            self.hand_over(ep, h, r);
        }
    }

    /// Completions and failures of every QP with callers waiting. A glance (`conn`) first:
    /// `conn_mut` marks a connection for the endpoint's next transmit pass.
    fn settle_qps(&mut self, ep: &mut Endpoint) {
        self.qps.retain(|&h, st| {
            let Some(c) = ep.conn(h) else {
                st.fail_all(ApiError::Gone);
                return false;
            };
            if c.has_completion() && st.can_take() {
                let c = ep.conn_mut(h).expect("present above");
                while st.can_take() {
                    let Some(comp) = c.poll_completion() else {
                        break;
                    };
                    st.complete(comp);
                }
            }
            let c = ep.conn(h).expect("present above");
            if let Some(e) = c.error() {
                st.fail_all(ApiError::Ended(e));
            } else if c.state() == State::Closed {
                // Closed in order: whatever still waits can no longer complete.
                st.fail_all(ApiError::Closed);
            } else if peer_finished(c) && !c.has_completion() {
                st.peer_finished();
            }
            st.pending()
        });
    }

    /// Release connections closed for [`CLOSED_LINGER`] that nobody waits on.
    fn release_closed(&mut self, ep: &mut Endpoint, now: Duration) {
        let qps = &self.qps;
        self.owned.retain(|&h, closed_at| {
            let Some(c) = ep.conn(h) else { return false };
            if c.state() != State::Closed || qps.contains_key(&h) {
                return true;
            }
            let since = *closed_at.get_or_insert(now);
            if now.saturating_sub(since) < CLOSED_LINGER {
                return true;
            }
            ep.release(h);
            false
        });
    }
}

impl App for ApiApp {
    /// Never done on its own: it serves as long as the driver runs.
    fn turn(&mut self, ep: &mut Endpoint, now: Duration) -> bool {
        while let Ok(cmd) = self.rx.try_recv() {
            self.apply(ep, now, cmd);
        }
        self.settle_connects(ep);
        self.settle_accepts(ep);
        self.settle_qps(ep);
        self.release_closed(ep, now);
        false
    }
}
