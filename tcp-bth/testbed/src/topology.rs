//! Two network namespaces joined either by a veth pair or by the userspace impairment relay,
//! each with a route to a TUN subnet behind the other, so our stack (on a TUN device in one
//! namespace) reaches our stack or kernel TCP in the other. Tools only: this shells out to `ip`
//! (and to `tc`, from the same iproute2, to take the TUN devices' qdisc off: `no_qdisc`).
//!
//! ```text
//!  ns A                                                     ns B
//!  stack 10.99.1.2 | tun 10.99.1.1/24                       tun 10.99.2.1/24 | stack 10.99.2.2
//!  kernel 10.99.0.1 | veth or relay TUN 10.99.0.1/30 ==== 10.99.0.2/30 | kernel 10.99.0.2
//! ```
//!
//! One MTU ([`TwoNs::mtu`]) holds for every device of the topology: the veth pair or the
//! relay's two TUN devices, and the stack's TUN devices ([`TwoNs::stack_tun`]). Kernel TCP
//! between the namespaces takes its MSS from it; our stack's connections take theirs from the
//! device they run on (`perf::drive::Port`).

use crate::interrupt::{on_interrupt, Registered, Undo};
use crate::pinning::Pinned;
use bth_io::sim::LinkConfig;
use bth_io::tun::{devstats, enter_netns, Offload, Relay, RelayStats, TunConfig, TunDevice};
use nix::unistd::Pid;
use std::io;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Namespace A's end of the link (veth or relay TUN device, `/30`); kernel TCP in A binds here.
pub const A_LINK: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
/// Namespace B's end of the link (veth or relay TUN device, `/30`); kernel TCP in B binds here.
pub const B_LINK: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);
/// The kernel's address on the stack's TUN device in namespace A (`10.99.1.0/24`).
pub const A_TUN: Ipv4Addr = Ipv4Addr::new(10, 99, 1, 1);
/// Our stack's address in namespace A, behind its TUN device.
pub const A_STACK: Ipv4Addr = Ipv4Addr::new(10, 99, 1, 2);
/// The kernel's address on the stack's TUN device in namespace B (`10.99.2.0/24`).
pub const B_TUN: Ipv4Addr = Ipv4Addr::new(10, 99, 2, 1);
/// Our stack's address in namespace B, behind its TUN device.
pub const B_STACK: Ipv4Addr = Ipv4Addr::new(10, 99, 2, 2);

/// The MTU of a topology unless one is asked for (Ethernet's).
pub const DEFAULT_MTU: u32 = 1500;
/// The smallest MTU a topology takes: IPv4's minimum datagram every host must accept.
pub const MIN_MTU: u32 = 576;
/// The largest: an IPv4 packet's total length is 16 bits (the io_uring driver's limit).
pub use bth_io::tun::MAX_MTU;

/// `mtu` if a topology can run at it, or why not.
pub fn check_mtu(mtu: u32) -> Result<u32, String> {
    if (MIN_MTU..=MAX_MTU).contains(&mtu) {
        Ok(mtu)
    } else {
        Err(format!(
            "MTU {mtu}: expected {MIN_MTU} to {MAX_MTU} bytes (IPv4's minimum datagram to the \
             largest IPv4 packet)"
        ))
    }
}

/// Parse one MTU (a command-line value): a whole number of bytes in range ([`check_mtu`]).
pub fn parse_mtu(s: &str) -> Result<u32, String> {
    let mtu = s
        .trim()
        .parse::<u32>()
        .map_err(|_| format!("MTU {s:?}: expected a whole number of bytes, e.g. 1500 or 9000"))?;
    check_mtu(mtu)
}

/// `ip args…`, its error naming the command and what it printed (or that iproute2 is missing).
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

/// `ip netns add ns`, saying what to do when a namespace of that name is already there (most
/// likely left by a run that was killed: a signal the tool handles deletes its namespaces).
/// Registered for deletion on an interrupt before it is made, so an interrupt that arrives
/// meanwhile either deletes it or holds this call until the process exits.
fn add_netns(ns: &str) -> io::Result<Registered> {
    if netns_exists(ns) {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "network namespace {ns} already exists (left by a run that was killed? \
                 `ip netns del {ns}` deletes it), or use other names (`bth-perf local --prefix`)"
            ),
        ));
    }
    let undo = on_interrupt(Undo::DeleteNetns(ns.to_string()));
    ip(&["netns", "add", ns])?;
    Ok(undo)
}

/// A named network namespace (`ip netns add`) of that name exists.
fn netns_exists(ns: &str) -> bool {
    std::path::Path::new(&format!("/run/netns/{ns}")).exists()
}

/// `ip netns exec ns args…`, its error naming the command and what it printed.
pub fn in_ns(ns: &str, args: &[&str]) -> io::Result<()> {
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

/// The stack-side TUN for namespace `ns` at [`DEFAULT_MTU`]: call from the thread that will
/// drive it.
pub fn stack_tun(ns: &str, side_a: bool) -> io::Result<TunDevice> {
    stack_tun_mtu(ns, side_a, DEFAULT_MTU, Offload::Checksum)
}

/// [`stack_tun`] with another MTU and offload (a topology's: [`TwoNs::mtu`],
/// [`TwoNs::offload`]).
pub fn stack_tun_mtu(ns: &str, side_a: bool, mtu: u32, offload: Offload) -> io::Result<TunDevice> {
    enter_netns(ns)?;
    let name = if side_a { "tbtha" } else { "tbthb" };
    let tun = TunDevice::create(&TunConfig {
        name: name.into(),
        addr: if side_a { A_TUN } else { B_TUN },
        prefix: 24,
        addr6: None,
        mtu,
        offload,
    })?;
    no_qdisc(ns, name)?;
    Ok(tun)
}

/// Take the queueing discipline off one of the topology's TUN devices (`noqueue`, what a veth
/// device has from the start). The kernel gives a TUN device `pfifo_fast`, but the TUN driver
/// never stops its queue: when its ring of packets for the reader is full it drops the packet
/// itself, so the qdisc never holds one and only costs a lock and an enqueue on every packet
/// forwarded into the device. Measured in the 4-path spraying cell at 1500, nine alternated
/// rounds of five runs a stack: ours 1.64 → 1.70 Gbit/s by the rounds' medians (faster in 7
/// of 9 pairs), kernel TCP 1.21 and 1.22 (`docs/datapath.md`, `docs/results/noqueue/`).
fn no_qdisc(ns: &str, dev: &str) -> io::Result<()> {
    in_ns(
        ns,
        &["tc", "qdisc", "replace", "dev", dev, "root", "noqueue"],
    )
}

/// The topology; dropping it stops the relay and deletes both namespaces.
pub struct TwoNs {
    /// Namespace A's name (`{prefix}-a`), holding [`A_LINK`] and [`A_TUN`]'s subnet.
    pub a: String,
    /// Namespace B's name (`{prefix}-b`), holding [`B_LINK`] and [`B_TUN`]'s subnet.
    pub b: String,
    /// The MTU of every device: veth or relay TUN devices, and the stack's TUN devices.
    pub mtu: u32,
    /// What the stack's TUN devices offload: checksums unless told otherwise
    /// (`--no-csum-offload`); captures checked with tshark set `Offload::None`.
    pub offload: Offload,
    /// The relay thread: its stop flag, its handle and its thread id (for [`TwoNs::pin`]).
    relay: Option<(Arc<AtomicBool>, JoinHandle<io::Result<RelayStats>>, Pid)>,
    owned: bool,
    /// The namespaces this created, deleted on an interrupt too ([`crate::interrupt`]).
    _on_interrupt: Vec<Registered>,
}

impl TwoNs {
    /// Create namespaces `{prefix}-a` and `{prefix}-b`, joined by a veth pair, or by the relay
    /// with `relay: Some(link)`, at [`DEFAULT_MTU`].
    pub fn create(prefix: &str, relay: Option<LinkConfig>) -> io::Result<TwoNs> {
        TwoNs::create_mtu(prefix, relay, DEFAULT_MTU)
    }

    /// The stack's TUN devices (made after this) with `offload`.
    pub fn with_offload(mut self, offload: Offload) -> TwoNs {
        self.offload = offload;
        self
    }

    /// [`create`](Self::create) with every device at `mtu` ([`check_mtu`]'s range).
    pub fn create_mtu(prefix: &str, relay: Option<LinkConfig>, mtu: u32) -> io::Result<TwoNs> {
        let mtu = check_mtu(mtu).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let (a, b) = (format!("{prefix}-a"), format!("{prefix}-b"));
        let undo_a = add_netns(&a)?;
        let mut t = TwoNs {
            a: a.clone(),
            b: b.clone(),
            mtu,
            offload: Offload::Checksum,
            relay: None,
            owned: true,
            _on_interrupt: vec![undo_a],
        };
        t._on_interrupt.push(add_netns(&b)?);
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
                let mtu = mtu.to_string();
                in_ns(&a, &["ip", "link", "set", "bthv0", "mtu", &mtu, "up"])?;
                in_ns(&b, &["ip", "link", "set", "bthv1", "mtu", &mtu, "up"])?;
            }
            Some(link) => {
                let stop = Arc::new(AtomicBool::new(false));
                let (na, nb, st) = (a.clone(), b.clone(), stop.clone());
                let (tid_tx, tid_rx) = std::sync::mpsc::channel();
                let set_up = move || {
                    let mk = |ns: &str, name: &str, addr| {
                        enter_netns(ns)?;
                        TunDevice::create(&TunConfig {
                            name: name.into(),
                            addr,
                            prefix: 30,
                            addr6: None,
                            mtu,
                            // The kernel's GSO super-packets, split only where the
                            // link treats their segments differently.
                            offload: Offload::Segmentation,
                        })
                    };
                    let (ra, rb) = (mk(&na, "bthr0", A_LINK)?, mk(&nb, "bthr1", B_LINK)?);
                    no_qdisc(&na, "bthr0")?;
                    no_qdisc(&nb, "bthr1")?;
                    let _ = tid_tx.send(nix::unistd::gettid());
                    Relay::new(ra, rb, link)
                };
                let run = move |mut relay: Relay| relay.run(&st);
                // Named, so profiles and `top -H` tell the relay from the stacks' threads.
                let h = crate::ready::spawn_set_up("bth-relay", set_up, run)?;
                // Sent before the set-up returned, which spawn_set_up waited for.
                let tid = tid_rx
                    .try_recv()
                    .map_err(|_| io::Error::other("the relay thread did not say its id"))?;
                t.relay = Some((stop, h, tid));
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

    /// Use namespaces someone else created (e.g. `bth-perf client` joining the server's), at
    /// the MTU they were created with.
    pub fn existing(prefix: &str, mtu: u32) -> io::Result<TwoNs> {
        let t = TwoNs {
            a: format!("{prefix}-a"),
            b: format!("{prefix}-b"),
            mtu,
            offload: Offload::Checksum,
            relay: None,
            owned: false,
            _on_interrupt: Vec::new(),
        };
        for ns in [&t.a, &t.b] {
            if !netns_exists(ns) {
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

    /// The stack's TUN device in namespace A (`side_a`) or B at the topology's MTU: call from
    /// the thread that will drive it.
    pub fn stack_tun(&self, side_a: bool) -> io::Result<TunDevice> {
        let ns = if side_a { &self.a } else { &self.b };
        stack_tun_mtu(ns, side_a, self.mtu, self.offload)
    }

    /// The drop counters of every network device of both namespaces (receive and transmit,
    /// every device but `lo`: [`devstats::namespace_drops`], read from a thread in each
    /// namespace, names prefixed with the namespace's); None if either could not be read.
    /// [`devstats::drops_between`] turns two readings into what was dropped in between.
    pub fn device_drops(&self) -> Option<Vec<(String, u64)>> {
        let read = |ns: String| {
            std::thread::spawn(move || {
                enter_netns(&ns)?;
                let devs = devstats::namespace_drops()?;
                let named = devs.into_iter().map(|(d, n)| (format!("{ns}/{d}"), n));
                Ok::<_, io::Error>(named.collect::<Vec<_>>())
            })
            .join()
            .ok()
            .and_then(Result::ok)
        };
        let (mut a, b) = (read(self.a.clone())?, read(self.b.clone())?);
        a.extend(b);
        Some(a)
    }

    /// CPU time (user and system) the relay's thread has used since it started; None without
    /// a relay, or once it has stopped ([`thread_cpu_time`]).
    fn relay_cpu(&self) -> Option<Duration> {
        let (_, h, _) = self.relay.as_ref()?;
        if h.is_finished() {
            return None;
        }
        thread_cpu_time(h)
    }

    /// Start measuring the relay's share of a core ([`RelayMark::share`]); a mark without a
    /// relay measures nothing.
    pub fn relay_mark(&self) -> RelayMark {
        RelayMark {
            cpu: self.relay_cpu(),
            at: Instant::now(),
        }
    }

    /// Whether a relay thread (ours, in this process) joins the namespaces, rather than a veth
    /// pair: a third busy thread on the machine while traffic flows.
    pub fn has_relay(&self) -> bool {
        self.relay.is_some()
    }

    /// Give the relay thread a core of its own and the calling thread (and every thread it
    /// spawns from now on: both stacks' and the ceiling's) the others, until the guard is
    /// dropped ([`crate::pinning`]). None without a relay or with fewer than two CPUs; an
    /// error if the relay thread has already ended.
    pub fn pin(&self) -> io::Result<Option<Pinned>> {
        match &self.relay {
            Some((_, h, _)) if h.is_finished() => Err(io::Error::other(
                "the relay thread has ended: nothing to pin",
            )),
            Some((_, _, tid)) => crate::pinning::pin(*tid),
            None => Ok(None),
        }
    }

    /// Stop the relay (if any) and return what it saw.
    pub fn stop_relay(&mut self) -> Option<RelayStats> {
        let (stop, h, _) = self.relay.take()?;
        stop.store(true, Ordering::Relaxed);
        h.join().ok().and_then(|r| r.ok())
    }
}

/// The relay thread's CPU time and the clock at one moment ([`TwoNs::relay_mark`]).
#[derive(Debug, Clone, Copy)]
pub struct RelayMark {
    cpu: Option<Duration>,
    at: Instant,
}

/// What the relay's thread used between a mark and now: on a 2-core machine the relay is a
/// third busy thread beside the two stacks', and near a whole core it bounded the run.
#[derive(Debug, Clone, Copy)]
pub struct RelayShare {
    /// CPU time the relay thread used since the mark (user and system).
    pub cpu: Duration,
    /// Wall-clock time since the mark.
    pub wall: Duration,
}

impl RelayShare {
    /// CPU time over wall time: 1.0 is a whole core.
    pub fn of_a_core(&self) -> f64 {
        self.cpu.as_secs_f64() / self.wall.as_secs_f64().max(1e-9)
    }
}

impl RelayMark {
    /// Since the mark, for `ns`'s relay; None without one (or if it stopped meanwhile).
    pub fn share(&self, ns: &TwoNs) -> Option<RelayShare> {
        let (before, now) = (self.cpu?, ns.relay_cpu()?);
        Some(RelayShare {
            cpu: now.saturating_sub(before),
            wall: self.at.elapsed(),
        })
    }
}

/// CPU time another thread of this process has used, from its CPU-time clock
/// (`pthread_getcpuclockid`, nanoseconds); None if the kernel refuses it. `h` must be a thread
/// that has not been joined (its handle is borrowed here, so it has not been).
pub fn thread_cpu_time<T>(h: &JoinHandle<T>) -> Option<Duration> {
    use std::os::unix::thread::JoinHandleExt;
    let mut clock: libc::clockid_t = 0;
    // SAFETY: the pthread_t comes from a live, unjoined JoinHandle, and `clock` is a valid
    // out-pointer.
    if unsafe { libc::pthread_getcpuclockid(h.as_pthread_t(), &mut clock) } != 0 {
        return None;
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a clock id just obtained and a valid out-pointer.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(Duration::new(
        u64::try_from(ts.tv_sec).ok()?,
        u32::try_from(ts.tv_nsec).ok()?,
    ))
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
