//! Driving perf apps over the io_uring TUN data path. [`run_one`] is the only place the tools
//! call `tcp_bth_io::tun::Driver::run`: one connection per call, on a [`Port`] (a TUN device
//! and its driver) that can serve several calls in turn. When the driver learns to run many
//! connections at once, this file is what changes.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;
use tcp_bth::wire::IpPair;
use tcp_bth::{Config, Connection};
use tcp_bth_io::tun::{Driver, DriverStats, Endpoint, TunDevice};

/// An application on one connection: called once per driver turn with the connection and the
/// driver's time (post work, poll completions there); true when it is done.
pub trait App {
    fn step(&mut self, c: &mut Connection, now: Duration) -> bool;
}

impl<R: super::Role> App for super::PerfApp<R> {
    fn step(&mut self, c: &mut Connection, now: Duration) -> bool {
        super::PerfApp::step(self, c, now)
    }
}

impl<A: App + ?Sized> App for &mut A {
    fn step(&mut self, c: &mut Connection, now: Duration) -> bool {
        (**self).step(c, now)
    }
}

/// Which side of the handshake a connection plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Accept the first SYN for the connection's `local_port`.
    Listen,
    /// Connect to the stack at this address.
    Connect(SocketAddrV4),
}

/// A TUN device with its driver: our stack's address behind it.
pub struct Port {
    driver: Driver,
    local: Ipv4Addr,
}

impl Port {
    /// Set up the driver on `tun`, for a stack at `local` (the kernel routes `local` into the
    /// device).
    pub fn open(tun: TunDevice, local: Ipv4Addr) -> io::Result<Port> {
        Ok(Port {
            driver: Driver::new(tun, local)?,
            local,
        })
    }

    pub fn local(&self) -> Ipv4Addr {
        self.local
    }

    /// The driver's counters, over every connection run so far.
    pub fn stats(&self) -> DriverStats {
        self.driver.stats
    }
}

/// Run one connection of `role` on `port` until `app` says it is done or `limit` has passed.
/// `conn` gives the ports and options; for [`Role::Connect`] its addresses and remote port
/// are set here. Returns the connection as the driver left it (its final counters).
pub fn run_one(
    port: &mut Port,
    role: Role,
    mut conn: Config,
    limit: Duration,
    mut app: impl App,
) -> io::Result<Connection> {
    let endpoint = match role {
        Role::Listen => Endpoint::Listen(conn),
        Role::Connect(remote) => {
            conn.remote_port = remote.port();
            conn.ip = IpPair::V4 {
                src: port.local.octets(),
                dst: remote.ip().octets(),
            };
            Endpoint::Connect(conn)
        }
    };
    port.driver.run(endpoint, limit, |c, now| app.step(c, now))
}
