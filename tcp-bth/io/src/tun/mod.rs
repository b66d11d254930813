//! The real data path: a TUN device (IFF_TUN | IFF_NO_PI) driven through io_uring.
//!
//! The kernel routes IP packets (IPv4 and IPv6) for the stack's addresses into the TUN device;
//! the driver reads them and hands each whole packet to a sans-IO
//! [`Endpoint`](tcp_bth::Endpoint), which routes it to one of its connections, and writes the
//! packets the endpoint emits back into the device ([`Driver`], the real data path's
//! [`PacketIo`](crate::turn::PacketIo)). Set-up uses ioctls through nix/libc only, no
//! external commands. Our stack's devices use no segmentation offload: every packet the kernel
//! or a capture sees is a real MSS-sized segment with its own BTH (see docs/datapath.md). Only
//! the impairment relay opts in ([`TunConfig::offload`]), to carry the kernel's GSO
//! super-packets ([`gso`]).

pub mod devstats;
mod driver;
pub mod gso;
mod relay;

pub use driver::{Driver, DriverStats, Features, Shutdown, MAX_MTU};
pub use relay::{Relay, RelayIo, RelayStats};

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const IFNAMSIZ: usize = 16;
// _IOW('T', 202, int)
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

/// How to set up a TUN interface: its own (kernel-side) addresses and prefixes, and its MTU.
#[derive(Debug, Clone)]
pub struct TunConfig {
    /// Interface name, 1 to 15 bytes; a pattern such as `tun%d` lets the kernel choose
    /// ([`TunDevice::name`] says what it chose).
    pub name: String,
    /// The interface's IPv4 address (the kernel's side of the device); `0.0.0.0` for none
    /// (an IPv6-only device: `addr6` gives its address, and `prefix` is not used).
    pub addr: Ipv4Addr,
    /// IPv4 prefix length, at most 32: the kernel routes the prefix into the device.
    pub prefix: u8,
    /// An IPv6 address and prefix length for the interface as well (the kernel then routes
    /// the prefix into the device, and the driver carries IPv6 packets like IPv4 ones).
    /// A TUN device has no link layer, so the address is usable at once (no DAD).
    pub addr6: Option<(Ipv6Addr, u8)>,
    /// Interface MTU in bytes; [`Driver`] accepts at most [`MAX_MTU`].
    pub mtu: u32,
    /// What the device offloads ([`Offload`]).
    pub offload: Offload,
}

/// What a TUN device leaves to the other side of it. With anything but `None` the device is
/// opened with `IFF_VNET_HDR`: every packet read or written starts with a little-endian
/// `struct virtio_net_hdr` ([`gso::VnetHdr`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Offload {
    /// Plain IP packets, every checksum complete (what captures for tshark checks use).
    #[default]
    None,
    /// Checksums only (`TUN_F_CSUM`): a packet written with `NEEDS_CSUM` leaves its TCP
    /// checksum to whoever delivers it (no one, on a path that ends in another TUN device),
    /// and a packet read may say `DATA_VALID` (checked already) or `NEEDS_CSUM`. Every packet
    /// is still one segment. Our stack's driver.
    Checksum,
    /// Checksums and TCP segmentation (`TUN_F_TSO4 | TUN_F_TSO6`): the kernel hands over
    /// super-packets of up to 64 KiB, and takes them from us (GSO). The relay's devices, and
    /// our stack's where a connection may send super-segments (S framing; `bth-perf`'s
    /// default, `--no-gso` turns it off).
    Segmentation,
}

impl Offload {
    /// The stack's choice: checksum offload when `on`, none otherwise (`--no-csum-offload`).
    pub fn checksum_if(on: bool) -> Offload {
        if on {
            Offload::Checksum
        } else {
            Offload::None
        }
    }
}

/// An open, configured, up TUN interface in the calling thread's network namespace.
#[derive(Debug)]
pub struct TunDevice {
    fd: OwnedFd,
    name: String,
    mtu: u32,
    offload: Offload,
    /// Packets the device queues towards our reader before it drops (`txqueuelen`).
    queue_len: u32,
}

fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    if name.is_empty() || name.len() >= IFNAMSIZ || name.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("interface name {name:?} must be 1..15 bytes"),
        ));
    }
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in r.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(r)
}

/// The NUL-terminated name in an ifreq (what TUNSETIFF wrote back).
fn ifr_name(r: &libc::ifreq) -> String {
    let bytes: Vec<u8> = r
        .ifr_name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn check(rc: libc::c_int, what: &str) -> io::Result<()> {
    if rc < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(())
}

fn sockaddr_in(a: Ipv4Addr) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(a.octets()),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in and sockaddr have the same size; the kernel reads it per sa_family.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

impl TunDevice {
    /// Create the interface, give it `addr/prefix`, set the MTU and bring it up.
    /// Needs CAP_NET_ADMIN.
    pub fn create(cfg: &TunConfig) -> io::Result<TunDevice> {
        let path = CString::new("/dev/net/tun").expect("no NUL");
        // SAFETY: a plain open(2) of a NUL-terminated path.
        let raw = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        check(raw, "open /dev/net/tun")?;
        // SAFETY: raw is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut req = ifreq(&cfg.name)?;
        let mut flags = libc::IFF_TUN | libc::IFF_NO_PI;
        if cfg.offload != Offload::None {
            flags |= libc::IFF_VNET_HDR;
        }
        req.ifr_ifru.ifru_flags = flags as libc::c_short;
        // SAFETY: TUNSETIFF reads the ifreq and writes the interface's name back into it (a
        // pattern such as "tun%d" becomes the name the kernel chose): it needs a pointer to
        // memory we own and may write, hence `&mut`.
        check(
            unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req) },
            "TUNSETIFF",
        )?;
        let name = ifr_name(&req);
        if cfg.offload != Offload::None {
            enable_offload(&fd, cfg.offload)?;
        }
        let queue_len = configure(&name, cfg)?;
        if let Some((addr, prefix)) = cfg.addr6 {
            configure6(&name, addr, prefix)?;
        }
        Ok(TunDevice {
            fd,
            name,
            mtu: cfg.mtu,
            offload: cfg.offload,
            queue_len,
        })
    }

    /// Packets the kernel queues for our reader before it drops what comes next (the
    /// device's `txqueuelen`, 500 unless changed, read when it was made).
    pub fn queue_len(&self) -> u32 {
        self.queue_len
    }

    /// What the device offloads ([`TunConfig::offload`]): anything but `None` means packets
    /// carry a virtio-net header.
    pub fn offload(&self) -> Offload {
        self.offload
    }

    /// The interface's name, as the kernel set it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The MTU it was created with ([`TunConfig::mtu`]).
    pub fn mtu(&self) -> u32 {
        self.mtu
    }

    /// The packets the kernel dropped at this device ([`devstats`]); call from a thread in
    /// the device's namespace (the one that created it). Transmit drops are packets toward
    /// our reader that found the device's queue full.
    pub fn drops(&self) -> io::Result<devstats::DeviceDrops> {
        devstats::device_drops(&self.name)
    }

    /// The TUN descriptor, still owned by this device (do not close it).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Set `O_NONBLOCK`: a read with no packet waiting then fails with `WouldBlock`.
    pub fn set_nonblocking(&self) -> io::Result<()> {
        let fd = self.fd.as_raw_fd();
        // SAFETY: fcntl(2) flag get/set on a descriptor we own.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        check(flags, "F_GETFL")?;
        check(
            unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) },
            "F_SETFL",
        )
    }
}

/// The virtio-net header's size and byte order, then the offloads: checksum (`TUN_F_CSUM`,
/// which TSO needs) and, for [`Offload::Segmentation`], TSO for IPv4 and IPv6. Not
/// `TUN_F_TSO_ECN`: the kernel then segments ECN-marked (CWR) super-packets itself, and
/// [`gso::GsoPacket`] refuses the ECN GSO type.
fn enable_offload(fd: &OwnedFd, what: Offload) -> io::Result<()> {
    let fd = fd.as_raw_fd();
    let size = gso::VNET_HDR_LEN as libc::c_int;
    // SAFETY: TUNSETVNETHDRSZ reads one int we own.
    check(
        unsafe { libc::ioctl(fd, libc::TUNSETVNETHDRSZ, &size) },
        "TUNSETVNETHDRSZ",
    )?;
    // Little-endian whatever the host: VnetHdr parses it that way.
    let le: libc::c_int = 1;
    // SAFETY: TUNSETVNETLE reads one int we own.
    check(
        unsafe { libc::ioctl(fd, libc::TUNSETVNETLE, &le) },
        "TUNSETVNETLE",
    )?;
    let offloads = match what {
        Offload::Segmentation => libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6,
        _ => libc::TUN_F_CSUM,
    };
    // SAFETY: TUNSETOFFLOAD takes its flags by value, not through a pointer.
    check(
        unsafe { libc::ioctl(fd, libc::TUNSETOFFLOAD, libc::c_ulong::from(offloads)) },
        "TUNSETOFFLOAD",
    )
}

/// `SIOCGIFTXQLEN` (linux/sockios.h), which the libc crate does not name.
const SIOCGIFTXQLEN: libc::c_ulong = 0x8942;

/// Address, netmask, MTU, up — through the classic SIOCSIF* ioctls on an AF_INET socket; no
/// IPv4 address when `cfg.addr` is `0.0.0.0` (setting that one would give the device the
/// default route). Returns the device's queue length (`txqueuelen`).
fn configure(name: &str, cfg: &TunConfig) -> io::Result<u32> {
    if cfg.prefix > 32 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "prefix above 32",
        ));
    }
    // SAFETY: socket(2) with constant arguments.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    check(raw, "socket")?;
    // SAFETY: fresh descriptor we own.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let s = sock.as_raw_fd();
    let mut r = ifreq(name)?;
    // SAFETY (all ioctls below): each reads or writes an ifreq we own.
    if !cfg.addr.is_unspecified() {
        r.ifr_ifru.ifru_addr = sockaddr_in(cfg.addr);
        check(
            unsafe { libc::ioctl(s, libc::SIOCSIFADDR, &r) },
            "SIOCSIFADDR",
        )?;
        let mask = if cfg.prefix == 0 {
            0
        } else {
            u32::MAX << (32 - cfg.prefix)
        };
        r.ifr_ifru.ifru_netmask = sockaddr_in(Ipv4Addr::from(mask));
        check(
            unsafe { libc::ioctl(s, libc::SIOCSIFNETMASK, &r) },
            "SIOCSIFNETMASK",
        )?;
    }
    r.ifr_ifru.ifru_mtu = cfg.mtu as libc::c_int;
    check(
        unsafe { libc::ioctl(s, libc::SIOCSIFMTU, &r) },
        "SIOCSIFMTU",
    )?;
    check(
        unsafe { libc::ioctl(s, libc::SIOCGIFFLAGS, &mut r) },
        "SIOCGIFFLAGS",
    )?;
    // SAFETY: reading the union member SIOCGIFFLAGS just wrote.
    let flags = unsafe { r.ifr_ifru.ifru_flags };
    r.ifr_ifru.ifru_flags = flags | (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    check(
        unsafe { libc::ioctl(s, libc::SIOCSIFFLAGS, &r) },
        "SIOCSIFFLAGS",
    )?;
    check(
        unsafe { libc::ioctl(s, SIOCGIFTXQLEN as _, &mut r) },
        "SIOCGIFTXQLEN",
    )?;
    // SAFETY: reading the union member SIOCGIFTXQLEN just wrote.
    let qlen = unsafe { r.ifr_ifru.ifru_ifindex };
    Ok(qlen.max(0) as u32)
}

/// An IPv6 address on the interface: SIOCSIFADDR with a `struct in6_ifreq` on an AF_INET6
/// socket (what `ip -6 addr add` does through netlink), after the interface is up.
fn configure6(name: &str, addr: Ipv6Addr, prefix: u8) -> io::Result<()> {
    if prefix > 128 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "IPv6 prefix above 128",
        ));
    }
    let cname = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in interface name"))?;
    // SAFETY: if_nametoindex reads a NUL-terminated string we own.
    let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if index == 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("if_nametoindex {name}: {e}"),
        ));
    }
    // SAFETY: socket(2) with constant arguments.
    let raw = unsafe { libc::socket(libc::AF_INET6, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    check(raw, "socket(AF_INET6) (is IPv6 enabled?)")?;
    // SAFETY: fresh descriptor we own.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let req = libc::in6_ifreq {
        ifr6_addr: libc::in6_addr {
            s6_addr: addr.octets(),
        },
        ifr6_prefixlen: u32::from(prefix),
        ifr6_ifindex: index as libc::c_int,
    };
    // SAFETY: SIOCSIFADDR on an AF_INET6 socket reads one in6_ifreq we own.
    check(
        unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFADDR, &req) },
        "SIOCSIFADDR (IPv6)",
    )
}

/// Move the calling thread into the named network namespace (`/run/netns/NAME`, as created by
/// `ip netns add`). Affects only this thread.
pub fn enter_netns(name: &str) -> io::Result<()> {
    let f = File::open(format!("/run/netns/{name}"))
        .map_err(|e| io::Error::new(e.kind(), format!("/run/netns/{name}: {e}")))?;
    nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| io::Error::other(format!("setns {name}: {e}")))
}

/// Capability bits (linux/capability.h) the namespace and TUN set-up needs: CAP_NET_ADMIN for
/// TUNSETIFF, links and routes, CAP_SYS_ADMIN for `ip netns add` (it bind-mounts the namespace).
const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_ADMIN: u32 = 21;

/// Why this process cannot create TUN devices and network namespaces, or `None` when it can.
/// Reads the effective capability set, not the uid: root with capabilities dropped (e.g. under
/// `capsh --drop=cap_net_admin`) cannot, and says so.
pub fn net_admin_missing() -> Option<String> {
    let status = match std::fs::read_to_string("/proc/self/status") {
        Ok(s) => s,
        Err(e) => return Some(format!("cannot read /proc/self/status: {e}")),
    };
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok());
    let Some(cap_eff) = cap_eff else {
        return Some("no CapEff line in /proc/self/status".into());
    };
    let missing: Vec<&str> = [
        (CAP_NET_ADMIN, "CAP_NET_ADMIN"),
        (CAP_SYS_ADMIN, "CAP_SYS_ADMIN"),
    ]
    .into_iter()
    .filter(|(bit, _)| cap_eff & (1 << bit) == 0)
    .map(|(_, name)| name)
    .collect();
    if !missing.is_empty() {
        return Some(format!("needs {} (run as root)", missing.join(" and ")));
    }
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
    {
        Ok(_) => None,
        Err(e) => Some(format!("cannot open /dev/net/tun: {e}")),
    }
}

/// Whether this process may create TUN devices and namespaces: see [`net_admin_missing`].
pub fn have_net_admin() -> bool {
    net_admin_missing().is_none()
}
