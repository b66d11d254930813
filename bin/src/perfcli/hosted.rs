//! `bth-perf server` and `bth-perf client`: one side each, on two hosts (or two namespaces
//! a test set up), our stack on a TUN device in the current namespace.

use super::args::PerfArgs;
use super::error::{Outcome, RunError};
use super::host::{host_tun, IpForward, TunAddr};
use super::output::{all_ok, Printer};
use super::progress;
use super::run::{SideRun, Who};
use super::table::Banner;
use bth_perf::drive::Port;
use clap::Args;
use std::net::{Ipv4Addr, SocketAddrV4};

/// The stack's address on the server's host when `--tun-addr` is not given.
pub const SERVER_TUN: &str = "10.99.1.2/24";
/// The stack's address on the client's host when `--tun-addr` is not given.
pub const CLIENT_TUN: &str = "10.99.2.2/24";

/// The TUN device of `server` and `client`.
#[derive(Args, Debug, Clone, PartialEq)]
pub struct HostArgs {
    /// Our stack's address and the prefix routed into the TUN device, ADDR/PREFIX [default:
    /// 10.99.1.2/24 for the server, 10.99.2.2/24 for the client]. The other host needs a
    /// route for PREFIX via this host.
    #[arg(long, value_name = "ADDR/PREFIX")]
    pub tun_addr: Option<TunAddr>,
    /// Name of the TUN device created for the run (removed when bth-perf exits).
    #[arg(long, default_value = "bth0", value_name = "NAME")]
    pub tun_name: String,
    /// The kernel side's address on the TUN device [default: the first other host address of
    /// the prefix, e.g. 10.99.1.1 for 10.99.1.2/24].
    #[arg(long, value_name = "ADDR")]
    pub tun_kernel_addr: Option<Ipv4Addr>,
}

/// Run one side; [`Outcome::Passed`] when every row ran and succeeded.
pub fn run_host(
    server: Option<Ipv4Addr>,
    args: &PerfArgs,
    host: &HostArgs,
) -> Result<Outcome, RunError> {
    let plan = args.plan()?;
    let (role, peer) = match server {
        None => ("server", "client"),
        Some(_) => ("client", "server"),
    };
    let default = if server.is_none() {
        SERVER_TUN
    } else {
        CLIENT_TUN
    };
    let tun = match host.tun_addr {
        Some(t) => t,
        None => default.parse()?,
    };
    let kernel = tun.kernel_side(host.tun_kernel_addr)?;
    let forward = IpForward::enable().map_err(RunError::setup("IPv4 forwarding"))?;
    let dev = host_tun(&host.tun_name, &tun, kernel, args.mtu, args.offload())
        .map_err(RunError::setup(format!("TUN device {}", host.tun_name)))?;
    let mut port = Port::open(dev, tun.addr).map_err(RunError::setup("stack"))?;
    let printer = Printer::of(args);
    let note = |s: String| printer.note(&s);
    note(format!(
        "{role}: stack at {} behind TUN {} (kernel side {kernel}/{}); IPv4 forwarding {}",
        tun.addr,
        host.tun_name,
        tun.prefix,
        if forward.was_on() {
            "was on"
        } else {
            "turned on for the run"
        }
    ));
    note(format!(
        "{role}: the {peer}'s host needs `ip route add {} via <this host's address>`",
        tun.network()
    ));
    let (who, connection) = match server {
        None => {
            note(format!(
                "server: waiting for `bth-perf client {}` (port {})",
                tun.addr, args.port
            ));
            (Who::Server, format!("{}:{} <- client", tun.addr, args.port))
        }
        Some(s) => (
            Who::Client(SocketAddrV4::new(s, args.port)),
            format!("{} -> {s}:{}", tun.addr, args.port),
        ),
    };
    let banner = Banner {
        role,
        rows: &plan.rows,
        mtu: args.mtu,
        connection,
    };
    printer.start(&banner);
    let side = SideRun {
        who,
        tcp_port: args.port,
        plan: &plan,
        bars: progress::wanted(args.json),
        in_process: None,
    };
    let rows = side.run(&mut port, |row| printer.row(row));
    printer.end(role, peer, &banner, &rows);
    drop(forward);
    Ok(Outcome::of(all_ok(plan.rows.len(), &rows)))
}
