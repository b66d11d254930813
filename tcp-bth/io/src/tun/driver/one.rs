//! One connection over the driver, for callers written before the endpoint: connect or accept
//! exactly one, hand the application that connection every turn, return it at the end. It is
//! an [`Endpoint`](tcp_bth::Endpoint) underneath, served by the same turn as everything else.

use super::Driver;
use crate::turn::RunError;
use std::io;
use std::time::Duration;
use tcp_bth::wire::IpPair;
use tcp_bth::{Config, Connection, ConnectionHandle, EndpointConfig};

/// Which side of the handshake [`Driver::run`] plays.
pub enum Endpoint {
    Connect(Config),
    /// Accept the first connection to `cfg.local_port` (then stop listening: later SYNs are
    /// refused); `cfg.ip` is taken from the peer's SYN.
    Listen(Config),
}

impl Driver {
    /// Run one connection until `app` says it is done (or `limit` passes). `app` runs every
    /// turn once the connection exists (at once for `Connect`; once the handshake completed
    /// for `Listen`) with it and the current time: post work, poll completions there. Returns
    /// the connection (with completions not yet polled) once the app is done and everything
    /// queued has been written.
    pub fn run(
        &mut self,
        endpoint: Endpoint,
        limit: Duration,
        mut app: impl FnMut(&mut Connection, Duration) -> bool,
    ) -> io::Result<Connection> {
        let mut ep = tcp_bth::Endpoint::new(EndpointConfig {
            local: self
                .local
                .map(|a| IpPair::V4 {
                    src: a.octets(),
                    dst: [0; 4],
                })
                .into_iter()
                .collect(),
            max_packet: self.max_packet(),
            rx_queue: self.rx_queue(),
            ..EndpointConfig::default()
        });
        let mut handle: Option<ConnectionHandle> = None;
        let mut listening = None;
        match endpoint {
            Endpoint::Connect(cfg) => {
                let h = ep
                    .connect(self.now(), cfg)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                handle = Some(h);
            }
            Endpoint::Listen(cfg) => {
                listening = Some(cfg.local_port);
                ep.listen(cfg.local_port, cfg)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            }
        }
        let mut one = |ep: &mut tcp_bth::Endpoint, now: Duration| {
            if handle.is_none() {
                handle = ep.accept();
                if let (Some(_), Some(port)) = (handle, listening) {
                    ep.stop_listening(port);
                }
            }
            match handle.and_then(|h| ep.conn_mut(h)) {
                Some(c) => app(c, now),
                None => false,
            }
        };
        match self.serve(&mut ep, &mut one, limit) {
            Ok(_) => {}
            Err(RunError::TimedOut(limit)) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("not done within {limit:?}"),
                ))
            }
            Err(RunError::Io(e)) => return Err(e),
        }
        handle
            .and_then(|h| ep.release(h))
            .ok_or_else(|| io::Error::other("no connection"))
    }
}
