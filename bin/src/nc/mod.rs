//! `bth nc`: netcat over our stack, so any ordinary TCP application can talk to it. `bth nc
//! HOST PORT` connects, `bth nc -l PORT` accepts one connection; stdin goes onto the
//! connection and the connection to stdout, byte for byte, and stdin's end is a half-close
//! (FIN), after which the tool reads on until the peer closes too.
//!
//! The stack runs on a TUN device in the current network namespace, as `bth-perf server` and
//! `client` do ([`crate::perfcli::host`]). It offers the tcp_bth option (a listener takes it):
//! with a peer that does not answer it, a kernel TCP application, the connection is plain TCP
//! (with RFC 7323 timestamps); with one that does, another `bth nc`, each chunk of stdin is a
//! SEND message into a receive buffer the other side posted ([`pump`]). stderr says which mode
//! the handshake settled ([`pump::mode_line`]).
//!
//! The driver's turn loop never blocks on stdin or stdout: a thread reads one and another
//! writes the other ([`stdio`]), each waking the loop when it has made progress.

pub mod pump;
pub mod stdio;

#[cfg(test)]
mod tests;

use crate::perfcli::host::{host_tun, HostError, IpForward, TunAddr};
use bth_io::tun::{Driver, Offload};
use bth_io::turn::{PacketIo, RunError};
use bth_perf::drive::mss_for_mtu;
use bth_testbed::interrupt;
use bth_testbed::topology::{parse_mtu, DEFAULT_MTU};
use clap::Args;
use pump::{mode_line, Moved, Offer, Pump, PumpError, Side};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;
use std::process::ExitCode;
use std::time::Duration;
use stdio::{Reader, Writer};
use tcp_bth::wire::IpPair;
use tcp_bth::{Config, Connection, Endpoint, EndpointConfig, Framing, RecoveryStats, Stats};
use thiserror::Error;

/// The stack's address and prefix when `--tun-addr` is not given.
pub const DEFAULT_TUN: &str = "10.99.3.2/24";

/// How long a client waits for its connection to open when `-w` is not given.
pub const DEFAULT_CONNECT_WAIT: u64 = 10;

/// Data (or our FIN) unacknowledged this long ends the connection with RST
/// (`Config::user_timeout`, Linux's `TCP_USER_TIMEOUT`): a peer that vanished is reported
/// within a minute instead of after the retransmissions' quarter of an hour.
pub const USER_TIMEOUT: Duration = Duration::from_secs(60);

/// `bth nc --help`, after the options.
pub const LONG_ABOUT: &str = "\
Netcat over our stack: connect to HOST PORT, or with -l accept one connection on PORT. stdin \
goes onto the connection and the connection to stdout, byte for byte. At stdin's end bth nc \
sends FIN (a half-close) and reads on until the peer closes too; a peer that closes first \
still gets stdin until its end (Ctrl-D on a terminal). It exits 0 after the orderly close of \
both directions, and 1 with a message on a reset, a timeout or a refused connection.

Our stack runs on a TUN device in the current network namespace: --tun-addr ADDR/PREFIX \
(default 10.99.3.2/24) is the stack's address and the prefix the kernel routes into the \
device, whose kernel side takes another address of it (10.99.3.1 by default). A kernel TCP \
application on this host reaches our stack at the stack's address; our stack reaches a kernel \
server at the kernel side's address, or at any address this host routes (forwarding is turned \
on for the run, as bth-perf does, and back off at the end if it was off; another host needs a \
route for the prefix via this one). HOST is an IP address: no name is resolved.

bth nc offers the tcp_bth option on its SYN (a listener takes it). A peer that does not answer \
it, any kernel TCP application (nc, curl, python), gets plain TCP with RFC 7323 timestamps. \
Another bth nc answers it: then each chunk of stdin (up to 64 KiB, as read) is one SEND \
message into a receive buffer the other side posted, and each message received goes to stdout \
in order. stderr says which mode the handshake settled:

  bth nc: connected to 10.99.3.1:8080: plain TCP (the peer did not answer the tcp_bth option), timestamps on
  bth nc: connection from 10.99.3.2:41000: tcp_bth, per-segment framing

Needs root (CAP_NET_ADMIN) for the TUN device.";

/// `bth nc --help`'s examples.
pub const EXAMPLES: &str = "\
Examples (as root; the kernel side's address 10.99.3.1 exists only while bth nc runs, so a \
kernel server listens on every address):

  Our client, a kernel server:
    nc -l 8080 > got.bin                     # or: python3 -m http.server 8080
    bth nc 10.99.3.1 8080 < file.bin
    printf 'GET / HTTP/1.0\\r\\n\\r\\n' | bth nc 10.99.3.1 8080

  A kernel client, our server:
    bth nc -l 8080 > got.bin
    nc -N 10.99.3.2 8080 < file.bin          # -N: FIN at the file's end (OpenBSD nc)

  Two of ours speak tcp_bth: host A (192.168.0.1) and host B (192.168.0.2), each routing the
  other's prefix:
    A:  ip route add 10.99.4.0/24 via 192.168.0.2
        bth nc -l 9000 > got.bin
    B:  ip route add 10.99.3.0/24 via 192.168.0.1
        bth nc --tun-addr 10.99.4.2/24 10.99.3.2 9000 < file.bin

  The handshake on the wire (our SYN's option shows as exp-efab):
    tcpdump -ni bth0 -vv";

/// `bth nc`'s options.
#[derive(Args, Debug, Clone, PartialEq)]
#[command(override_usage = "bth nc [OPTIONS] HOST PORT\n       bth nc -l [OPTIONS] PORT")]
pub struct NcArgs {
    /// Listen: accept one connection on PORT at the stack's address (--tun-addr), serve it,
    /// and exit (further SYNs are refused with RST).
    #[arg(short = 'l', long)]
    pub listen: bool,
    /// HOST PORT to connect to (HOST an IPv4 or IPv6 address, of --tun-addr's family), or with
    /// -l the PORT to listen on.
    #[arg(value_names = ["HOST", "PORT"], num_args = 1..=2, required = true)]
    pub target: Vec<String>,
    /// The client's own TCP port [default: an ephemeral one].
    #[arg(short = 'p', long, value_name = "PORT", conflicts_with = "listen")]
    pub source_port: Option<u16>,
    /// Plain TCP: no tcp_bth option offered (a client) or taken (a listener).
    #[arg(long)]
    pub plain: bool,
    /// How tcp_bth data segments say where their bytes belong: per-segment (each its own
    /// offset, index and ICRC) or seq (one option per message, offsets from sequence numbers:
    /// spec amendment 3). Runs only when both sides ask for it.
    #[arg(long, default_value = "per-segment", value_parser = crate::cli::parse_framing)]
    pub framing: Framing,
    /// Give up when the connection has not opened within SECONDS [default: 10 for a client;
    /// a listener waits until a client comes].
    #[arg(short = 'w', long = "wait", value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub wait: Option<u64>,
    /// Say more on stderr: the TUN device and forwarding, and at the end the bytes each way,
    /// segments and retransmissions.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Our stack's address and the prefix routed into the TUN device, ADDR/PREFIX, IPv4 or
    /// IPv6 (e.g. 2001:db8:99:3::2/64) [default: 10.99.3.2/24]. A client's is of HOST's
    /// family.
    #[arg(long, value_name = "ADDR/PREFIX")]
    pub tun_addr: Option<TunAddr>,
    /// Name of the TUN device created for the run (removed when bth nc exits).
    #[arg(long, default_value = "bth0", value_name = "NAME")]
    pub tun_name: String,
    /// The kernel side's address on the TUN device, of --tun-addr's family [default: the first
    /// other host address of the prefix, e.g. 10.99.3.1 for 10.99.3.2/24].
    #[arg(long, value_name = "ADDR")]
    pub tun_kernel_addr: Option<IpAddr>,
    /// MTU of the TUN device, 576 to 65535; our MSS is MTU − 40.
    #[arg(short = 'm', long, default_value_t = DEFAULT_MTU, value_parser = parse_mtu)]
    pub mtu: u32,
    /// No checksum or segmentation offload on the TUN device: every TCP checksum is computed
    /// and checked (for a capture tshark is to check).
    #[arg(long)]
    pub no_offload: bool,
}

/// What `bth nc` is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Connect to this address.
    Connect(SocketAddr),
    /// Accept one connection on this port.
    Listen(u16),
}

/// Why `bth nc` failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum NcError {
    /// The command line asks for something that cannot be.
    #[error("{0}")]
    Usage(String),
    /// `--tun-addr` and the addresses do not fit together.
    #[error(transparent)]
    Host(#[from] HostError),
    /// Setting up the TUN device, forwarding or the stack failed.
    #[error("{what}: {err}")]
    Setup {
        /// What was being set up.
        what: String,
        /// Why it failed.
        err: io::Error,
    },
    /// The connection failed, or the data could not be moved.
    #[error("{at}: {err}")]
    Connection {
        /// "connection to PEER" or "connection from PEER".
        at: String,
        /// Why.
        err: PumpError,
    },
    /// Our SYN went unanswered for the whole wait.
    #[error(
        "no answer from {peer} within {secs} s (does something listen there, and does this host \
         route {peer}'s replies back to {stack}?)"
    )]
    NoAnswer {
        /// The server.
        peer: SocketAddr,
        /// Our stack's address.
        stack: IpAddr,
        /// The wait (`-w`).
        secs: u64,
    },
    /// No client came within the wait.
    #[error("no connection to {at} within {secs} s")]
    NoClient {
        /// Where we listened.
        at: SocketAddr,
        /// The wait (`-w`).
        secs: u64,
    },
    /// Writing stdout failed.
    #[error("writing stdout: {0}")]
    Stdout(io::Error),
    /// The driver's data path failed.
    #[error("data path: {0}")]
    DataPath(String),
}

impl NcError {
    fn setup(what: impl Into<String>) -> impl FnOnce(io::Error) -> NcError {
        let what = what.into();
        move |err| NcError::Setup { what, err }
    }
}

impl NcArgs {
    /// HOST PORT, or with -l PORT.
    pub fn target(&self) -> Result<Target, NcError> {
        let port = |s: &str| {
            s.parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| NcError::Usage(format!("PORT {s:?}: expected 1 to 65535")))
        };
        match (self.listen, self.target.as_slice()) {
            (true, [p]) => Ok(Target::Listen(port(p)?)),
            (true, _) => Err(NcError::Usage(
                "with -l give only PORT: the stack listens at its own address (--tun-addr)".into(),
            )),
            (false, [h, p]) => {
                let h = h.trim_start_matches('[').trim_end_matches(']');
                let ip: IpAddr = h.parse().map_err(|_| {
                    NcError::Usage(format!(
                        "HOST {h:?}: expected an IPv4 or IPv6 address (bth nc resolves no names)"
                    ))
                })?;
                Ok(Target::Connect(SocketAddr::new(ip, port(p)?)))
            }
            (false, _) => Err(NcError::Usage(
                "expected HOST PORT (or -l PORT to listen)".into(),
            )),
        }
    }

    /// The connection's settings (addresses and ports set by the caller).
    pub fn config(&self) -> Config {
        Config {
            bth: !self.plain,
            framing: self.framing,
            mss: mss_for_mtu(self.mtu),
            max_message_len: pump::MSG_MAX as u32,
            // Flow control, not a failure: a reader slower than its writer (stdout into a
            // pager) holds the writer's SENDs back, as a TCP window would.
            rnr_timeout: None,
            user_timeout: Some(USER_TIMEOUT),
            local_port: self.source_port.unwrap_or(0),
            ..Config::default()
        }
    }

    /// `--tun-addr`, or [`DEFAULT_TUN`].
    pub fn tun(&self) -> Result<TunAddr, NcError> {
        match self.tun_addr {
            Some(t) => Ok(t),
            None => Ok(DEFAULT_TUN.parse()?),
        }
    }

    fn offload(&self) -> Offload {
        if self.no_offload {
            Offload::None
        } else {
            Offload::Segmentation
        }
    }
}

/// Run `bth nc`, say why it failed on stderr: the process's status.
pub fn main(args: &NcArgs) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bth nc: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The peer's address of `c`.
fn peer_of(c: &Connection) -> SocketAddr {
    let cfg = c.config();
    let ip = match cfg.ip {
        IpPair::V4 { dst, .. } => IpAddr::from(dst),
        IpPair::V6 { dst, .. } => IpAddr::from(dst),
    };
    SocketAddr::new(ip, cfg.remote_port)
}

/// Longest a run may last: no limit in practice (the driver's deadline must be a time).
const FOREVER: Duration = Duration::from_secs(100 * 365 * 86_400);

/// The connection's counters at its end, for `-v`.
struct Ended {
    stats: Stats,
    recovery: RecoveryStats,
}

/// Run `bth nc` to its end: Ok after an orderly close both ways.
pub fn run(args: &NcArgs) -> Result<(), NcError> {
    let target = args.target()?;
    let tun = args.tun()?;
    if let Target::Connect(s) = target {
        tun.check_server(s.ip(), args.tun_addr.is_none())?;
    }
    let kernel = tun.kernel_side(args.tun_kernel_addr)?;
    tun.check_mtu(args.mtu)?;
    // Before any thread: Ctrl-C then resets the connection and puts forwarding back.
    interrupt::install("bth nc").map_err(NcError::setup("signal handling"))?;
    let family = tun.family();
    let forward =
        IpForward::enable(family).map_err(NcError::setup(format!("{family} forwarding")))?;
    let dev = host_tun(&args.tun_name, &tun, kernel, args.mtu, args.offload())
        .map_err(NcError::setup(format!("TUN device {}", args.tun_name)))?;
    let mut driver = Driver::open(dev).map_err(NcError::setup("io_uring driver"))?;
    let say = |s: String| eprintln!("bth nc: {s}");
    if args.verbose {
        say(format!(
            "stack at {} behind TUN {} (kernel side {kernel}/{}, MTU {}); {family} forwarding {}",
            tun.addr,
            args.tun_name,
            tun.prefix,
            args.mtu,
            if forward.was_on() {
                "was on"
            } else {
                "turned on for the run"
            }
        ));
    }
    let me = IpPair::from_addrs(tun.addr, tun.addr).expect("one family");
    let mut ep = Endpoint::new(EndpointConfig {
        local: vec![me],
        max_packet: driver.max_packet(),
        rx_queue: driver.rx_queue(),
        ..EndpointConfig::default()
    });
    let mut cfg = args.config();
    let (side, mut handle) = match target {
        Target::Listen(port) => {
            ep.listen(port, cfg)
                .map_err(|e| NcError::Usage(format!("listening on port {port}: {e}")))?;
            if args.verbose {
                say(format!("listening on {}", SocketAddr::new(tun.addr, port)));
            }
            (Side::Server, None)
        }
        Target::Connect(s) => {
            cfg.remote_port = s.port();
            cfg.ip = IpPair::from_addrs(tun.addr, s.ip()).expect("checked: one family");
            let h = ep
                .connect(driver.now(), cfg)
                .map_err(|e| NcError::Usage(format!("connecting to {s}: {e}")))?;
            (Side::Client, Some(h))
        }
    };
    let wake = driver.waker();
    let stdin = io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map_err(NcError::setup("stdin"))?;
    let stdout = io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map_err(NcError::setup("stdout"))?;
    let reader = Reader::spawn(std::fs::File::from(stdin), wake.clone())
        .map_err(NcError::setup("stdin thread"))?;
    let writer = Writer::spawn(std::fs::File::from(stdout), wake.clone())
        .map_err(NcError::setup("stdout thread"))?;
    let mut pump = Pump::new(reader, writer);
    let offer = Offer {
        plain: args.plain,
        framing: args.framing,
    };
    let wait = match (args.wait, side) {
        (Some(s), _) => Some(s),
        (None, Side::Client) => Some(DEFAULT_CONNECT_WAIT),
        (None, Side::Server) => None,
    };
    let deadline = wait.map(|s| driver.now() + Duration::from_secs(s));
    let listen_at = match target {
        Target::Listen(p) => SocketAddr::new(tun.addr, p),
        Target::Connect(_) => SocketAddr::new(tun.addr, 0),
    };
    let loop_guard = interrupt::driver_loop(wake);
    let mut aborted = None;
    let mut announced = false;
    let mut outcome: Option<Result<Ended, NcError>> = None;
    let at = |c: &Connection| match side {
        Side::Client => format!("connection to {}", peer_of(c)),
        Side::Server => format!("connection from {}", peer_of(c)),
    };
    let r = driver.serve(
        &mut ep,
        &mut |ep: &mut Endpoint, now: Duration| {
            if loop_guard.asked() {
                // Interrupted: RST before anything else of the turn.
                let c = handle.and_then(|h| ep.conn_mut(h));
                aborted.get_or_insert_with(|| c.map_or(0, abort));
                return true;
            }
            if handle.is_none() {
                handle = ep.accept();
                if let (Some(_), Target::Listen(port)) = (handle, target) {
                    // One connection: later SYNs get RST.
                    ep.stop_listening(port);
                }
            }
            let late = deadline.is_some_and(|d| now >= d);
            let secs = wait.unwrap_or(0);
            let Some(c) = handle.and_then(|h| ep.conn_mut(h)) else {
                if late {
                    outcome = Some(Err(NcError::NoClient {
                        at: listen_at,
                        secs,
                    }));
                }
                return late;
            };
            // An accepted connection has settled its mode: only ours waits for an answer.
            if c.mode() == tcp_bth::Mode::Pending && c.error().is_none() {
                if late {
                    c.abort();
                    let (peer, stack) = (peer_of(c), tun.addr);
                    outcome = Some(Err(NcError::NoAnswer { peer, stack, secs }));
                }
                return late;
            }
            if !announced {
                if let Some(line) = mode_line(c, side, offer) {
                    announced = true;
                    say(format!(
                        "{} {}: {line}",
                        match side {
                            Side::Client => "connected to",
                            Side::Server => "connection from",
                        },
                        peer_of(c)
                    ));
                }
            }
            match pump.step(c) {
                Ok(false) => false,
                Ok(true) => {
                    outcome = Some(Ok(Ended {
                        stats: c.stats(),
                        recovery: c.recovery_stats(),
                    }));
                    true
                }
                Err(err) => {
                    if c.error().is_none() {
                        c.abort();
                    }
                    outcome = Some(Err(NcError::Connection { at: at(c), err }));
                    true
                }
            }
        },
        FOREVER,
    );
    if loop_guard.asked() {
        // The signal thread prints what it did and ends the process.
        loop_guard.answer(aborted.unwrap_or(0), r.is_ok());
    }
    drop(loop_guard);
    let moved = pump.moved();
    let written = pump.into_sink().finish();
    drop(forward);
    let ended = match (r, outcome) {
        // The writer's own error says more than that it stopped taking bytes.
        (
            _,
            Some(Err(NcError::Connection {
                err: PumpError::Output,
                at,
            })),
        ) => {
            return Err(match written {
                Err(e) => NcError::Stdout(e),
                Ok(_) => NcError::Connection {
                    at,
                    err: PumpError::Output,
                },
            })
        }
        (_, Some(Err(e))) => return Err(e),
        (Err(RunError::Io(e)), _) => return Err(NcError::DataPath(e.to_string())),
        (Err(e), _) => return Err(NcError::DataPath(e.to_string())),
        (Ok(_), Some(Ok(ended))) => ended,
        (Ok(_), None) => return Err(NcError::DataPath("the loop ended early".into())),
    };
    written.map_err(NcError::Stdout)?;
    if args.verbose {
        say(summary(&moved, &ended));
    }
    Ok(())
}

/// Abort `c` if the peer may still think it open: how many RSTs that makes (0 or 1).
fn abort(c: &mut Connection) -> usize {
    let open = !matches!(
        c.state(),
        tcp_bth::State::Closed | tcp_bth::State::TimeWait | tcp_bth::State::LastAck
    ) && c.error().is_none();
    if open {
        c.abort();
    }
    usize::from(open)
}

/// `-v`'s closing line.
fn summary(moved: &Moved, e: &Ended) -> String {
    let messages = if moved.messages_sent + moved.messages_received > 0 {
        format!(
            " ({} messages sent, {} received)",
            moved.messages_sent, moved.messages_received
        )
    } else {
        String::new()
    };
    format!(
        "closed: {} bytes sent, {} received{messages}; {} segments out, {} in; {} \
         retransmissions ({} bytes)",
        moved.sent,
        moved.received,
        e.stats.segments_out,
        e.stats.segments_in,
        e.recovery.retransmits,
        e.stats.bytes_retransmitted
    )
}
