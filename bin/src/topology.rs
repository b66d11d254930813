//! Two network namespaces joined either by a veth pair or by the userspace impairment relay,
//! each with a route to a TUN subnet behind the other, so our stack (on a TUN device in one
//! namespace) reaches our stack or kernel TCP in the other. Tools only: this shells out to `ip`.
//!
//! ```text
//!  ns A                                                     ns B
//!  stack 10.99.1.2 | tun 10.99.1.1/24                       tun 10.99.2.1/24 | stack 10.99.2.2
//!  kernel 10.99.0.1 | veth or relay TUN 10.99.0.1/30 ==== 10.99.0.2/30 | kernel 10.99.0.2
//! ```

use std::io;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use tcp_bth_io::sim::LinkConfig;
use tcp_bth_io::tun::{enter_netns, Offload, Relay, RelayStats, TunConfig, TunDevice};

pub const A_LINK: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
pub const B_LINK: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);
pub const A_TUN: Ipv4Addr = Ipv4Addr::new(10, 99, 1, 1);
pub const A_STACK: Ipv4Addr = Ipv4Addr::new(10, 99, 1, 2);
pub const B_TUN: Ipv4Addr = Ipv4Addr::new(10, 99, 2, 1);
pub const B_STACK: Ipv4Addr = Ipv4Addr::new(10, 99, 2, 2);

pub fn ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip").args(args).output().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("ip {}: {e} (is iproute2 installed?)", args.join(" ")),
        )
    })?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

fn in_ns(ns: &str, args: &[&str]) -> io::Result<()> {
    let mut full = vec!["netns", "exec", ns];
    full.extend_from_slice(args);
    ip(&full)
}

fn sh_in_ns(ns: &str, script: &str) -> io::Result<()> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "sh", "-c", script])
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{script} in {ns}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// The stack-side TUN for namespace `ns`: call from the thread that will drive it.
pub fn stack_tun(ns: &str, side_a: bool) -> io::Result<TunDevice> {
    stack_tun_mtu(ns, side_a, 1500)
}

/// [`stack_tun`] with another MTU.
pub fn stack_tun_mtu(ns: &str, side_a: bool, mtu: u32) -> io::Result<TunDevice> {
    enter_netns(ns)?;
    TunDevice::create(&TunConfig {
        name: if side_a { "tbtha" } else { "tbthb" }.into(),
        addr: if side_a { A_TUN } else { B_TUN },
        prefix: 24,
        addr6: None,
        mtu,
        offload: Offload::None,
    })
}

/// The topology; dropping it stops the relay and deletes both namespaces.
pub struct TwoNs {
    pub a: String,
    pub b: String,
    relay: Option<(Arc<AtomicBool>, JoinHandle<io::Result<RelayStats>>)>,
    owned: bool,
}

impl TwoNs {
    /// Create namespaces `{prefix}-a` and `{prefix}-b`, joined by a veth pair, or by the relay
    /// with `relay: Some(link)`.
    pub fn create(prefix: &str, relay: Option<LinkConfig>) -> io::Result<TwoNs> {
        let (a, b) = (format!("{prefix}-a"), format!("{prefix}-b"));
        ip(&["netns", "add", &a])?;
        let mut t = TwoNs {
            a: a.clone(),
            b: b.clone(),
            relay: None,
            owned: true,
        };
        ip(&["netns", "add", &b])?;
        for ns in [&a, &b] {
            in_ns(ns, &["ip", "link", "set", "lo", "up"])?;
            sh_in_ns(ns, "echo 1 > /proc/sys/net/ipv4/ip_forward")?;
        }
        match relay {
            None => {
                ip(&[
                    "link", "add", "bthv0", "netns", &a, "type", "veth", "peer", "name", "bthv1",
                    "netns", &b,
                ])?;
                in_ns(&a, &["ip", "addr", "add", "10.99.0.1/30", "dev", "bthv0"])?;
                in_ns(&b, &["ip", "addr", "add", "10.99.0.2/30", "dev", "bthv1"])?;
                in_ns(&a, &["ip", "link", "set", "bthv0", "up"])?;
                in_ns(&b, &["ip", "link", "set", "bthv1", "up"])?;
            }
            Some(link) => {
                let (tx, rx) = std::sync::mpsc::channel();
                let stop = Arc::new(AtomicBool::new(false));
                let (na, nb, st) = (a.clone(), b.clone(), stop.clone());
                // Named, so profiles and `top -H` tell the relay from the stacks' threads.
                let relay_thread = std::thread::Builder::new().name("bth-relay".into());
                let h = relay_thread.spawn(move || -> io::Result<RelayStats> {
                    let mk = |ns: &str, name: &str, addr| {
                        enter_netns(ns)?;
                        TunDevice::create(&TunConfig {
                            name: name.into(),
                            addr,
                            prefix: 30,
                            addr6: None,
                            mtu: 1500,
                            // The kernel's GSO super-packets, split only where the
                            // link treats their segments differently.
                            offload: Offload::Segmentation,
                        })
                    };
                    let ra = mk(&na, "bthr0", A_LINK);
                    let rb = ra.and_then(|ra| Ok((ra, mk(&nb, "bthr1", B_LINK)?)));
                    let relay = rb.and_then(|(ra, rb)| Relay::new(ra, rb, link));
                    let mut relay = match relay {
                        Ok(r) => {
                            let _ = tx.send(Ok(()));
                            r
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e.to_string()));
                            return Err(e);
                        }
                    };
                    relay.run(&st)
                })?;
                rx.recv()
                    .map_err(|_| io::Error::other("relay thread died"))?
                    .map_err(io::Error::other)?;
                t.relay = Some((stop, h));
            }
        }
        in_ns(
            &a,
            &["ip", "route", "add", "10.99.2.0/24", "via", "10.99.0.2"],
        )?;
        in_ns(
            &b,
            &["ip", "route", "add", "10.99.1.0/24", "via", "10.99.0.1"],
        )?;
        Ok(t)
    }

    /// Use namespaces someone else created (e.g. `bth-perf client` joining the server's).
    pub fn existing(prefix: &str) -> io::Result<TwoNs> {
        let t = TwoNs {
            a: format!("{prefix}-a"),
            b: format!("{prefix}-b"),
            relay: None,
            owned: false,
        };
        for ns in [&t.a, &t.b] {
            if !std::path::Path::new(&format!("/run/netns/{ns}")).exists() {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "network namespace {ns} does not exist (start `bth-perf server` first)"
                    ),
                ));
            }
        }
        Ok(t)
    }

    /// Stop the relay (if any) and return what it saw.
    pub fn stop_relay(&mut self) -> Option<RelayStats> {
        let (stop, h) = self.relay.take()?;
        stop.store(true, Ordering::Relaxed);
        h.join().ok().and_then(|r| r.ok())
    }
}

impl Drop for TwoNs {
    fn drop(&mut self) {
        self.stop_relay();
        if self.owned {
            let _ = ip(&["netns", "del", &self.a]);
            let _ = ip(&["netns", "del", &self.b]);
        }
    }
}
