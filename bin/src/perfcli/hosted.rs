//! `bth-perf server` and `bth-perf client`: one side each, on two hosts (or two namespaces
//! a test set up), our stack on a TUN device in the current namespace.

use super::args::PerfArgs;
use super::error::{PerfRunError, RunOutcome};
use super::host::{host_tun, IpForward, TunAddr};
use super::output::{all_ok, Printer};
use super::progress;
use super::run::{SideRun, Who};
use super::table::Banner;
use bth_perf::drive::Port;
use clap::Args;
use std::net::{IpAddr, SocketAddr};

/// The stack's address on the server's host when `--tun-addr` is not given.
pub const SERVER_TUN: &str = "10.99.1.2/24";
/// The stack's address on the client's host when `--tun-addr` is not given.
pub const CLIENT_TUN: &str = "10.99.2.2/24";

/// The TUN device of `server` and `client`.
#[derive(Args, Debug, Clone, PartialEq)]
pub struct HostArgs {
    /// Our stack's address and the prefix routed into the TUN device, ADDR/PREFIX, IPv4 or
    /// IPv6 (e.g. 2001:db8:99:1::2/64) [default: 10.99.1.2/24 for the server, 10.99.2.2/24
    /// for the client]. The other host needs a route for PREFIX via this host (`ip -6 route`
    /// for IPv6); a client's must be of its server address's family.
    #[arg(long, value_name = "ADDR/PREFIX")]
    pub tun_addr: Option<TunAddr>,
    /// Name of the TUN device created for the run (removed when bth-perf exits).
    #[arg(long, default_value = "bth0", value_name = "NAME")]
    pub tun_name: String,
    /// The kernel side's address on the TUN device, of --tun-addr's family [default: the first
    /// other host address of the prefix, e.g. 10.99.1.1 for 10.99.1.2/24, 2001:db8:99:1::1
    /// for 2001:db8:99:1::2/64].
    #[arg(long, value_name = "ADDR")]
    pub tun_kernel_addr: Option<IpAddr>,
}

/// Run one side; [`RunOutcome::Passed`] when every row ran and succeeded.
pub fn run_host(
    server: Option<IpAddr>,
    args: &PerfArgs,
    host: &HostArgs,
) -> Result<RunOutcome, PerfRunError> {
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
    let tun: TunAddr = match host.tun_addr {
        Some(t) => t,
        None => default.parse()?,
    };
    if let Some(s) = server {
        tun.check_server(s, host.tun_addr.is_none())?;
    }
    let kernel = tun.kernel_side(host.tun_kernel_addr)?;
    tun.check_mtu(args.mtu)?;
    let family = tun.family();
    let forward =
        IpForward::enable(family).map_err(PerfRunError::setup(format!("{family} forwarding")))?;
    let dev = host_tun(&host.tun_name, &tun, kernel, args.mtu, args.offload())
        .map_err(PerfRunError::setup(format!("TUN device {}", host.tun_name)))?;
    let mut port = Port::open(dev, tun.addr).map_err(PerfRunError::setup("stack"))?;
    let stack = SocketAddr::new(tun.addr, args.port);
    let printer = Printer::of(args);
    let note = |s: String| printer.note(&s);
    note(format!(
        "{role}: stack at {} behind TUN {} (kernel side {kernel}/{}); {family} forwarding {}",
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
        "{role}: the {peer}'s host needs `{} add {} via <this host's address>`",
        family.ip_route(),
        tun.network()
    ));
    let (who, connection) = match server {
        None => {
            note(format!(
                "server: waiting for `bth-perf client {}` (port {})",
                tun.addr, args.port
            ));
            (Who::Server, format!("{stack} <- client"))
        }
        Some(s) => {
            let server = SocketAddr::new(s, args.port);
            (Who::Client(server), format!("{} -> {server}", tun.addr))
        }
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
    Ok(RunOutcome::of(all_ok(plan.rows.len(), &rows)))
}
