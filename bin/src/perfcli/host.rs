//! `bth-perf server` and `client` on a real host: our stack on a TUN device in the current
//! network namespace. The stack has an address of its own (`--tun-addr ADDR/PREFIX`); the
//! kernel side of the device gets another address of the same prefix, so the kernel routes
//! the whole prefix into the device; with IPv4 forwarding on, packets from another host for
//! that prefix are forwarded into it too. That host needs a route for the prefix via this
//! one (see `bth-perf --help`).

use bth_io::tun::{Offload, TunConfig, TunDevice};
use bth_testbed::interrupt::{on_interrupt, Registered, Undo};
use std::fmt;
use std::io;
use std::net::Ipv4Addr;
use std::str::FromStr;
use thiserror::Error;

const IP_FORWARD: &str = "/proc/sys/net/ipv4/ip_forward";

/// `ADDR/PREFIX`: the stack's address and the prefix routed into the TUN device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunAddr {
    pub addr: Ipv4Addr,
    pub prefix: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HostError {
    #[error("{0:?}: expected ADDR/PREFIX, e.g. 10.99.1.2/24")]
    Syntax(String),
    #[error("/{0}: the prefix must be 1 to 30 (the stack and the kernel need an address each)")]
    Prefix(u8),
    #[error(
        "{0} is the network or broadcast address of its prefix: the stack needs a host address"
    )]
    NotHost(TunAddr),
    #[error("--tun-kernel-addr {kernel} must be another address of {tun}")]
    KernelAddr { kernel: Ipv4Addr, tun: TunAddr },
}

impl fmt::Display for TunAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl FromStr for TunAddr {
    type Err = HostError;
    fn from_str(s: &str) -> Result<TunAddr, HostError> {
        let syntax = || HostError::Syntax(s.to_string());
        let (a, p) = s.split_once('/').ok_or_else(syntax)?;
        let addr: Ipv4Addr = a.parse().map_err(|_| syntax())?;
        let prefix: u8 = p.parse().map_err(|_| syntax())?;
        if !(1..=30).contains(&prefix) {
            return Err(HostError::Prefix(prefix));
        }
        let t = TunAddr { addr, prefix };
        let host = u32::from(addr) & !t.mask();
        if host == 0 || host == !t.mask() {
            return Err(HostError::NotHost(t));
        }
        Ok(t)
    }
}

impl TunAddr {
    fn mask(&self) -> u32 {
        u32::MAX << (32 - self.prefix)
    }

    /// The network, `a.b.c.0/24`: what the other host routes via this one.
    pub fn network(&self) -> String {
        let net = Ipv4Addr::from(u32::from(self.addr) & self.mask());
        format!("{net}/{}", self.prefix)
    }

    fn contains(&self, a: Ipv4Addr) -> bool {
        u32::from(a) & self.mask() == u32::from(self.addr) & self.mask()
    }

    /// The kernel side's address: `given` if it is another host address of the prefix, else
    /// the first host address that is not the stack's.
    pub fn kernel_side(&self, given: Option<Ipv4Addr>) -> Result<Ipv4Addr, HostError> {
        let net = u32::from(self.addr) & self.mask();
        match given {
            Some(k) => {
                let host = u32::from(k) & !self.mask();
                if k == self.addr || !self.contains(k) || host == 0 || host == !self.mask() {
                    return Err(HostError::KernelAddr {
                        kernel: k,
                        tun: *self,
                    });
                }
                Ok(k)
            }
            None if Ipv4Addr::from(net + 1) == self.addr => Ok(Ipv4Addr::from(net + 2)),
            None => Ok(Ipv4Addr::from(net + 1)),
        }
    }
}

/// Create the TUN device `name` in this thread's namespace, its kernel side at `kernel` in
/// `tun`'s prefix.
pub fn host_tun(
    name: &str,
    tun: &TunAddr,
    kernel: Ipv4Addr,
    mtu: u32,
    offload: Offload,
) -> io::Result<TunDevice> {
    TunDevice::create(&TunConfig {
        name: name.to_string(),
        addr: kernel,
        prefix: tun.prefix,
        // IPv4 only for now: the endpoint and driver carry IPv6, but --tun-addr takes an
        // IPv4 prefix.
        addr6: None,
        mtu,
        offload,
    })
}

/// IPv4 forwarding turned on for the run, and back off when dropped if it was off.
pub struct IpForward {
    was_on: bool,
    /// Turns forwarding back off on an interrupt too ([`bth_testbed::interrupt`]).
    _on_interrupt: Option<Registered>,
}

impl IpForward {
    pub fn enable() -> io::Result<IpForward> {
        let was = std::fs::read_to_string(IP_FORWARD)
            .map_err(|e| io::Error::new(e.kind(), format!("{IP_FORWARD}: {e}")))?;
        let was_on = was.trim() == "1";
        let mut undo = None;
        if !was_on {
            // Registered first: a signal between the write and the guard still turns it off.
            undo = Some(on_interrupt(Undo::Restore {
                path: IP_FORWARD.into(),
                value: "0".into(),
            }));
            std::fs::write(IP_FORWARD, "1")
                .map_err(|e| io::Error::new(e.kind(), format!("writing 1 to {IP_FORWARD}: {e}")))?;
        }
        Ok(IpForward {
            was_on,
            _on_interrupt: undo,
        })
    }

    /// Whether forwarding was already on (nothing to restore).
    pub fn was_on(&self) -> bool {
        self.was_on
    }
}

impl Drop for IpForward {
    fn drop(&mut self) {
        if !self.was_on {
            let _ = std::fs::write(IP_FORWARD, "0");
        }
    }
}
