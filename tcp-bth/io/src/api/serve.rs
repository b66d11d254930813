//! [`ApiApp`]: the application part of a driver turn that serves the async API's handles.

use super::state::EndState;
use super::{ApiError, AsyncEndpoint, AsyncQp, EpCmd, Link, Reply};
use crate::turn::App;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tcp_bth::{ConnError, ConnectionHandle, Endpoint, State};
use tokio::sync::mpsc;

/// How a handle wakes its driver after queueing a command (the TUN driver may be blocked in
/// `io_uring_enter`; the simulator's task may be waiting for work).
pub trait Wake: Send + Sync + 'static {
    fn wake(&self);
}

/// Serves [`AsyncEndpoint`] and [`AsyncQp`] commands inside a driver's turns.
pub struct ApiApp {
    rx: mpsc::UnboundedReceiver<EpCmd>,
    link: Link,
    qps: HashMap<ConnectionHandle, EndState>,
    connecting: Vec<(ConnectionHandle, Reply<AsyncQp>)>,
    accepting: VecDeque<Reply<AsyncQp>>,
}

impl ApiApp {
    /// The app and the endpoint handle that talks to it; `wake` wakes the driver.
    pub fn new(wake: Arc<dyn Wake>) -> (ApiApp, AsyncEndpoint) {
        let (tx, rx) = mpsc::unbounded_channel();
        let link = Link { tx, wake };
        let app = ApiApp {
            rx,
            link: link.clone(),
            qps: HashMap::new(),
            connecting: Vec::new(),
            accepting: VecDeque::new(),
        };
        (app, AsyncEndpoint { link })
    }

    /// Whether a caller waits on something (a connect, an accept, a work request).
    pub fn waiting(&self) -> bool {
        !self.connecting.is_empty() || !self.accepting.is_empty() || !self.qps.is_empty()
    }

    fn qp(&self, handle: ConnectionHandle) -> AsyncQp {
        AsyncQp {
            link: self.link.clone(),
            handle,
        }
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

    /// Connects that finished: established, or failed.
    fn settle_connects(&mut self, ep: &Endpoint) {
        let mut i = 0;
        while i < self.connecting.len() {
            let h = self.connecting[i].0;
            let outcome = match ep.conn(h) {
                None => Some(Err(ApiError::Gone)),
                Some(c) if c.state() == State::Established => Some(Ok(())),
                Some(c) => match c.error() {
                    Some(e) => Some(Err(ApiError::Ended(e))),
                    None if c.state() == State::Closed => {
                        Some(Err(ApiError::Refused(ConnError::NotEstablished)))
                    }
                    None => None,
                },
            };
            match outcome {
                None => i += 1,
                Some(res) => {
                    let (h, r) = self.connecting.swap_remove(i);
                    let _ = r.send(res.map(|()| self.qp(h)));
                }
            }
        }
    }

    /// Hand established connections to waiting `accept` calls.
    fn settle_accepts(&mut self, ep: &mut Endpoint) {
        while !self.accepting.is_empty() {
            let Some(h) = ep.accept() else { return };
            let r = self.accepting.pop_front().expect("checked non-empty");
            if let Err(Ok(_)) = r.send(Ok(self.qp(h))) {
                // The caller gave up waiting: the connection has no owner, so close it.
                if let Some(c) = ep.conn_mut(h) {
                    c.abort();
                }
            }
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
            if c.has_completion() {
                let c = ep.conn_mut(h).expect("present above");
                while let Some(comp) = c.poll_completion() {
                    st.complete(comp);
                }
            }
            if let Some(e) = ep.conn(h).and_then(|c| c.error()) {
                st.fail_all(ApiError::Ended(e));
            }
            st.pending()
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
        false
    }
}
