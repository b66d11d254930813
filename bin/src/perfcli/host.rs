//! `bth-perf server` and `client` on a real host: our stack on a TUN device in the current
//! network namespace. The stack has an address of its own (`--tun-addr ADDR/PREFIX`, IPv4 or
//! IPv6); the kernel side of the device gets another address of the same prefix, so the
//! kernel routes the whole prefix into the device; with forwarding on for the family
//! (IPv4's `ip_forward`, IPv6's `conf/all/forwarding`), packets from another host for that
//! prefix are forwarded into it too. That host needs a route for the prefix via this one
//! (`ip route add`, `ip -6 route add` for IPv6; see `bth-perf --help`).

use bth_io::tun::{Offload, TunConfig, TunDevice};
use bth_testbed::interrupt::{on_interrupt, Registered, Undo};
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;
use thiserror::Error;

/// IPv4 or IPv6: the family of a `--tun-addr`, and so of every address of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    /// The family of `a`.
    pub fn of(a: IpAddr) -> Family {
        match a {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }

    fn bits(self) -> u8 {
        match self {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }

    /// The longest prefix with room for the stack's address and the kernel's: IPv4's /30
    /// (its network and broadcast addresses are no host's), IPv6's /126 (its network address
    /// is the subnet-router anycast address, which a forwarding kernel takes).
    pub fn max_prefix(self) -> u8 {
        self.bits() - 2
    }

    /// The file that turns forwarding on for the family.
    pub fn forwarding_path(self) -> &'static str {
        match self {
            Family::V4 => "/proc/sys/net/ipv4/ip_forward",
            Family::V6 => "/proc/sys/net/ipv6/conf/all/forwarding",
        }
    }

    /// The iproute2 command that adds a route of the family: `ip route`, `ip -6 route`.
    pub fn ip_route(self) -> &'static str {
        match self {
            Family::V4 => "ip route",
            Family::V6 => "ip -6 route",
        }
    }

    /// A client's `--tun-addr` of the family, for messages.
    fn client_example(self) -> &'static str {
        match self {
            Family::V4 => "10.99.2.2/24",
            Family::V6 => "2001:db8:99:2::2/64",
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        })
    }
}

/// IPv6's minimum link MTU (RFC 8200): below it the kernel turns IPv6 off on the device.
pub const IPV6_MIN_MTU: u32 = 1280;

/// `ADDR/PREFIX`: the stack's address and the prefix routed into the TUN device, IPv4 or
/// IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunAddr {
    pub addr: IpAddr,
    pub prefix: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HostError {
    #[error("{0:?}: expected ADDR/PREFIX, e.g. 10.99.1.2/24 or 2001:db8:99:1::2/64")]
    Syntax(String),
    #[error(
        "/{prefix}: an {family} prefix must be 1 to {} (the stack and the kernel need an \
         address each)",
        .family.max_prefix()
    )]
    Prefix { prefix: u8, family: Family },
    #[error("{0} is the {what} of its prefix: the stack needs a host address", what = not_host(.0))]
    NotHost(TunAddr),
    #[error("{addr} is {why}: the stack needs a unicast address another host can route to")]
    Unusable { addr: IpAddr, why: &'static str },
    #[error("--tun-kernel-addr {kernel} must be another address of {tun}")]
    KernelAddr { kernel: IpAddr, tun: TunAddr },
    #[error(
        "--tun-kernel-addr {kernel} is {} but --tun-addr {tun} is {}: the kernel side takes \
         another address of the stack's prefix",
        family(.kernel),
        .tun.family()
    )]
    KernelFamily { kernel: IpAddr, tun: TunAddr },
    #[error(
        "the server address {server} is {want} but this client's --tun-addr {tun}{given} is \
         {have}: a run is IPv4 or IPv6 throughout (give --tun-addr an {want} ADDR/PREFIX, e.g. \
         {example}, routed to this host from the server's)",
        want = family(.server),
        given = if *.default { " (the default)" } else { "" },
        have = .tun.family(),
        example = family(.server).client_example()
    )]
    ServerFamily {
        server: IpAddr,
        tun: TunAddr,
        /// `tun` is the default, not given.
        default: bool,
    },
    #[error("--mtu {0}: IPv6 needs an MTU of at least {IPV6_MIN_MTU}")]
    Ipv6Mtu(u32),
}

fn family(a: &IpAddr) -> Family {
    Family::of(*a)
}

/// What the address of a [`HostError::NotHost`] is instead.
fn not_host(t: &TunAddr) -> &'static str {
    match t.family() {
        Family::V4 if t.host_part(t.addr) == 0 => "network address",
        Family::V4 => "broadcast address",
        Family::V6 => "network address (the subnet-router anycast address)",
    }
}

/// Why `a` cannot be the stack's address, if it cannot.
fn unusable(a: IpAddr) -> Option<&'static str> {
    if a.is_loopback() {
        return Some("a loopback address");
    }
    if a.is_multicast() {
        return Some("a multicast address");
    }
    match a {
        IpAddr::V4(v4) if v4.is_broadcast() => Some("the broadcast address"),
        IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80 => {
            Some("an IPv6 link-local address, which no other host routes to")
        }
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => {
            Some("an IPv4-mapped IPv6 address (give the IPv4 address itself)")
        }
        _ => None,
    }
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
        let addr: IpAddr = a.parse().map_err(|_| syntax())?;
        let prefix: u8 = p.parse().map_err(|_| syntax())?;
        let family = Family::of(addr);
        if !(1..=family.max_prefix()).contains(&prefix) {
            return Err(HostError::Prefix { prefix, family });
        }
        if let Some(why) = unusable(addr) {
            return Err(HostError::Unusable { addr, why });
        }
        let t = TunAddr { addr, prefix };
        if !t.is_host(addr) {
            return Err(HostError::NotHost(t));
        }
        Ok(t)
    }
}

/// `a` as a number (IPv4's 32 bits in the low ones).
fn to_bits(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

impl TunAddr {
    /// IPv4 or IPv6.
    pub fn family(&self) -> Family {
        Family::of(self.addr)
    }

    /// The bits of an address below the prefix.
    fn host_mask(&self) -> u128 {
        let below = u32::from(self.family().bits().saturating_sub(self.prefix));
        1u128.checked_shl(below).map_or(u128::MAX, |b| b - 1)
    }

    fn host_part(&self, a: IpAddr) -> u128 {
        to_bits(a) & self.host_mask()
    }

    /// The address of the prefix whose host part is `host`.
    fn with_host(&self, host: u128) -> IpAddr {
        let bits = (to_bits(self.addr) & !self.host_mask()) | host;
        match self.family() {
            // The prefix's bits and a host part within 32 bits: no truncation.
            Family::V4 => IpAddr::V4(Ipv4Addr::from(bits as u32)),
            Family::V6 => IpAddr::V6(Ipv6Addr::from(bits)),
        }
    }

    /// The network, `a.b.c.0/24` or `2001:db8:99:1::/64`: what the other host routes via
    /// this one.
    pub fn network(&self) -> String {
        format!("{}/{}", self.with_host(0), self.prefix)
    }

    fn contains(&self, a: IpAddr) -> bool {
        Family::of(a) == self.family() && self.with_host(self.host_part(a)) == a
    }

    /// Whether `a` is a host address of the prefix: in it, and (IPv4) neither its network
    /// nor its broadcast address, or (IPv6) not its subnet-router anycast address.
    fn is_host(&self, a: IpAddr) -> bool {
        let host = self.host_part(a);
        let broadcast = self.family() == Family::V4 && host == self.host_mask();
        self.contains(a) && host != 0 && !broadcast
    }

    /// The kernel side's address: `given` if it is another host address of the prefix, else
    /// the first host address that is not the stack's.
    pub fn kernel_side(&self, given: Option<IpAddr>) -> Result<IpAddr, HostError> {
        match given {
            Some(k) if Family::of(k) != self.family() => Err(HostError::KernelFamily {
                kernel: k,
                tun: *self,
            }),
            Some(k) if k == self.addr || !self.is_host(k) => Err(HostError::KernelAddr {
                kernel: k,
                tun: *self,
            }),
            Some(k) => Ok(k),
            None if self.host_part(self.addr) == 1 => Ok(self.with_host(2)),
            None => Ok(self.with_host(1)),
        }
    }

    /// That a client of this stack may connect to `server`: an address of the same family.
    /// `default`: this is the default `--tun-addr`, not one given (the message says so).
    pub fn check_server(&self, server: IpAddr, default: bool) -> Result<(), HostError> {
        if Family::of(server) == self.family() {
            Ok(())
        } else {
            Err(HostError::ServerFamily {
                server,
                tun: *self,
                default,
            })
        }
    }

    /// That a device of MTU `mtu` carries this family: IPv6 needs [`IPV6_MIN_MTU`].
    pub fn check_mtu(&self, mtu: u32) -> Result<(), HostError> {
        if self.family() == Family::V6 && mtu < IPV6_MIN_MTU {
            return Err(HostError::Ipv6Mtu(mtu));
        }
        Ok(())
    }
}

/// Create the TUN device `name` in this thread's namespace, its kernel side at `kernel` in
/// `tun`'s prefix: an IPv4 device for an IPv4 `tun`, an IPv6-only one for an IPv6 one.
pub fn host_tun(
    name: &str,
    tun: &TunAddr,
    kernel: IpAddr,
    mtu: u32,
    offload: Offload,
) -> io::Result<TunDevice> {
    let (addr, prefix, addr6) = match (tun.addr, kernel) {
        (IpAddr::V4(_), IpAddr::V4(k)) => (k, tun.prefix, None),
        // No IPv4 address on the device (`TunConfig::addr` 0.0.0.0).
        (IpAddr::V6(_), IpAddr::V6(k)) => (Ipv4Addr::UNSPECIFIED, 0, Some((k, tun.prefix))),
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the kernel side's {kernel} is not of {tun}'s family"),
            ))
        }
    };
    TunDevice::create(&TunConfig {
        name: name.to_string(),
        addr,
        prefix,
        addr6,
        mtu,
        offload,
    })
}

/// Forwarding of one family turned on for the run, and back off when dropped if it was off.
pub struct IpForward {
    family: Family,
    was_on: bool,
    /// Turns forwarding back off on an interrupt too ([`bth_testbed::interrupt`]).
    _on_interrupt: Option<Registered>,
}

impl IpForward {
    /// Turn `family`'s forwarding on ([`Family::forwarding_path`]) if it is off.
    pub fn enable(family: Family) -> io::Result<IpForward> {
        let path = family.forwarding_path();
        let was = std::fs::read_to_string(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
        let was_on = was.trim() == "1";
        let mut undo = None;
        if !was_on {
            // Registered first: a signal between the write and the guard still turns it off.
            undo = Some(on_interrupt(Undo::Restore {
                path: path.into(),
                value: "0".into(),
            }));
            std::fs::write(path, "1")
                .map_err(|e| io::Error::new(e.kind(), format!("writing 1 to {path}: {e}")))?;
        }
        Ok(IpForward {
            family,
            was_on,
            _on_interrupt: undo,
        })
    }

    /// Whether forwarding was already on (nothing to restore).
    pub fn was_on(&self) -> bool {
        self.was_on
    }

    /// The family whose forwarding this is.
    pub fn family(&self) -> Family {
        self.family
    }
}

impl Drop for IpForward {
    fn drop(&mut self) {
        if !self.was_on {
            let _ = std::fs::write(self.family.forwarding_path(), "0");
        }
    }
}
