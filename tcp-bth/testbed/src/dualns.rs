//! Two network namespaces joined by a veth pair, IPv4 and IPv6, each with a TUN subnet behind
//! it where one of our stacks lives; the kernels forward between veth and TUN. Names unique
//! per run; both namespaces are deleted when this is dropped (also when a test panics).
//!
//! ```text
//!  ns A                                              ns B
//!  stack 10.98.1.2 fd98:1::2 | tun 10.98.1.1/24      tun 10.98.2.1/24 | stack 10.98.2.2
//!        fd98:1::1/64                                fd98:2::1/64       fd98:2::2
//!  veth 10.98.0.1/30 fd98::1/64  ===============  10.98.0.2/30 fd98::2/64 veth
//! ```

use crate::netns::Netns;
use bth_io::tun::{enter_netns, Driver, Features, Offload, TunConfig, TunDevice};
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::Command;
use std::time::{Duration, Instant};
use tcp_bth::wire::IpPair;

/// One side's addresses.
#[derive(Debug, Clone, Copy)]
pub struct Side {
    /// The kernel's IPv4 address on this side's TUN device (`10.98.N.1/24`).
    pub tun4: Ipv4Addr,
    /// Our stack's IPv4 address, behind the TUN device (`10.98.N.2`).
    pub stack4: Ipv4Addr,
    /// The kernel's IPv6 address on this side's TUN device (`fd98:N::1/64`).
    pub tun6: Ipv6Addr,
    /// Our stack's IPv6 address, behind the TUN device (`fd98:N::2`).
    pub stack6: Ipv6Addr,
}

/// Side A's addresses: TUN subnets `10.98.1.0/24` and `fd98:1::/64`.
pub const A: Side = Side {
    tun4: Ipv4Addr::new(10, 98, 1, 1),
    stack4: Ipv4Addr::new(10, 98, 1, 2),
    tun6: Ipv6Addr::new(0xfd98, 1, 0, 0, 0, 0, 0, 1),
    stack6: Ipv6Addr::new(0xfd98, 1, 0, 0, 0, 0, 0, 2),
};

/// Side B's addresses: TUN subnets `10.98.2.0/24` and `fd98:2::/64`.
pub const B: Side = Side {
    tun4: Ipv4Addr::new(10, 98, 2, 1),
    stack4: Ipv4Addr::new(10, 98, 2, 2),
    tun6: Ipv6Addr::new(0xfd98, 2, 0, 0, 0, 0, 0, 1),
    stack6: Ipv6Addr::new(0xfd98, 2, 0, 0, 0, 0, 0, 2),
};

impl Side {
    /// Address pair from this side's stack to `peer`'s, IPv4 or IPv6.
    pub fn to(&self, peer: &Side, v6: bool) -> IpPair {
        if v6 {
            IpPair::V6 {
                src: self.stack6.octets(),
                dst: peer.stack6.octets(),
            }
        } else {
            IpPair::V4 {
                src: self.stack4.octets(),
                dst: peer.stack4.octets(),
            }
        }
    }

    /// The stack's own addresses (for `EndpointConfig::local`).
    pub fn locals(&self) -> Vec<IpPair> {
        vec![self.to(self, false), self.to(self, true)]
    }
}

/// The two namespaces; dropping this deletes them.
pub struct DualNs {
    /// Namespace A (`{tag}a`), with veth end `10.98.0.1` and side [`A`]'s TUN subnet routed.
    pub a: Netns,
    /// Namespace B (`{tag}b`), with veth end `10.98.0.2` and side [`B`]'s TUN subnet routed.
    pub b: Netns,
}

/// One end of the veth pair: its name, IPv4 and IPv6 address, and the next hops toward the
/// other side.
struct End {
    veth: &'static str,
    v4: &'static str,
    v6: &'static str,
    via4: &'static str,
    via6: &'static str,
}

const END_A: End = End {
    veth: "tepv0",
    v4: "10.98.0.1/30",
    v6: "fd98::1/64",
    via4: "10.98.0.2",
    via6: "fd98::2",
};

const END_B: End = End {
    veth: "tepv1",
    v4: "10.98.0.2/30",
    v6: "fd98::2/64",
    via4: "10.98.0.1",
    via6: "fd98::1",
};

impl DualNs {
    /// Create both namespaces (`{tag}a`, `{tag}b`, made unique per run), the veth pair between
    /// them at MTU 1500 with IPv4 and IPv6 addresses, forwarding and routes to each side's TUN
    /// subnet. Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and `ip` from iproute2.
    pub fn create(tag: &str) -> io::Result<DualNs> {
        DualNs::create_mtu(tag, 1500)
    }

    /// [`create`](Self::create) with the veth pair at `mtu` (the TUN devices take theirs
    /// from [`open_driver_mtu`]).
    pub fn create_mtu(tag: &str, mtu: u32) -> io::Result<DualNs> {
        let ns = DualNs {
            a: Netns::new(&format!("{tag}a"))?,
            b: Netns::new(&format!("{tag}b"))?,
        };
        // Before the devices exist (they take the namespace's defaults): forwarding, and no
        // duplicate address detection, which would hold IPv6 on the veth for a second or two.
        for n in [&ns.a, &ns.b] {
            n.exec(&[
                "sh",
                "-c",
                "echo 1 > /proc/sys/net/ipv4/ip_forward && \
                 echo 1 > /proc/sys/net/ipv6/conf/all/forwarding && \
                 echo 0 > /proc/sys/net/ipv6/conf/default/accept_dad",
            ])?;
        }
        crate::topology::ip(&[
            "link", "add", "tepv0", "netns", &ns.a.name, "type", "veth", "peer", "name", "tepv1",
            "netns", &ns.b.name,
        ])?;
        for (n, peer, e) in [(&ns.a, B, END_A), (&ns.b, A, END_B)] {
            let peer4 = format!("{}/24", Ipv4Addr::from(u32::from(peer.stack4) & !0xff));
            let peer6 = format!("{}/64", Ipv6Addr::from(u128::from(peer.stack6) & !0xffff));
            n.exec(&["ip", "addr", "add", e.v4, "dev", e.veth])?;
            n.exec(&["ip", "-6", "addr", "add", e.v6, "dev", e.veth, "nodad"])?;
            n.exec(&["ip", "link", "set", e.veth, "mtu", &mtu.to_string(), "up"])?;
            n.exec(&["ip", "route", "add", &peer4, "via", e.via4])?;
            n.exec(&["ip", "-6", "route", "add", &peer6, "via", e.via6])?;
        }
        for (n, e) in [(&ns.a, END_A), (&ns.b, END_B)] {
            wait_link_local(n, e.veth)?;
        }
        Ok(ns)
    }

    /// The namespace of side A (or B) and that side's addresses.
    pub fn side(&self, side_a: bool) -> (String, Side) {
        if side_a {
            (self.a.name.clone(), A)
        } else {
            (self.b.name.clone(), B)
        }
    }
}

/// A driver on a new TUN device (`tep0`) in namespace `ns` with both of `me`'s TUN addresses
/// and checksum offload (what the tools use unless told otherwise).
/// Call it from the thread that will run the driver: it moves that thread into `ns`.
pub fn open_driver(ns: &str, me: &Side) -> io::Result<Driver> {
    open_driver_with(ns, me, Features::ALL)
}

/// [`open_driver`] using only the io_uring `features` given (the others' fallbacks, as on an
/// older kernel).
pub fn open_driver_with(ns: &str, me: &Side, features: Features) -> io::Result<Driver> {
    open_driver_mtu(ns, me, features, 1500)
}

/// [`open_driver_with`] on a TUN device of MTU `mtu`.
pub fn open_driver_mtu(ns: &str, me: &Side, features: Features, mtu: u32) -> io::Result<Driver> {
    enter_netns(ns)?;
    let tun = TunDevice::create(&TunConfig {
        name: "tep0".into(),
        addr: me.tun4,
        prefix: 24,
        addr6: Some((me.tun6, 64)),
        mtu,
        offload: Offload::Checksum,
    })?;
    Driver::open_with(tun, features)
}

/// Wait until `veth` has its IPv6 link-local address. Neighbour solicitations go out from it:
/// a packet forwarded before it exists waits for the solicitation's retry, a second later.
fn wait_link_local(n: &Netns, veth: &str) -> io::Result<()> {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let out = Command::new("ip")
            .args([
                "netns", "exec", &n.name, "ip", "-6", "-o", "addr", "show", "dev", veth,
            ])
            .args(["scope", "link"])
            .output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        if text.contains("inet6") && !text.contains("tentative") {
            return Ok(());
        }
        if Instant::now() >= until {
            return Err(io::Error::other(format!(
                "{veth} in {} has no IPv6 link-local address after 5 s",
                n.name
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
