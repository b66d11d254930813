//! `bth-perf`: throughput and latency of tcp-bth over the io_uring TUN data path, between two
//! network namespaces (like ib_send_bw / iperf3).

use bth_tools::perf::drive::{run_one, Port, Role};
use bth_tools::perf::{Client, PerfConfig, PerfOp, PerfReport, Server};
use bth_tools::relay_args::{describe_link, RelayArgs};
use bth_tools::topology::{self, TwoNs};
use clap::{Args, Parser, Subcommand};
use std::net::SocketAddrV4;
use std::process::ExitCode;
use std::time::Duration;
use tcp_bth::Config;

#[derive(Parser)]
#[command(
    name = "bth-perf",
    version,
    about = "Measure tcp-bth over the io_uring TUN data path between two network namespaces",
    long_about = "Measure tcp-bth over the io_uring TUN data path between two network namespaces.\n\n\
        `bth-perf server` creates the namespaces <PREFIX>-a and <PREFIX>-b (joined by a veth pair, \
        or by the userspace impairment relay with --relay or any other --relay-* option: delay, \
        loss, reordering, duplication, corruption, a rate limit and multipath spraying; see \
        `bth-perf server --help`), puts our stack on a TUN device in <PREFIX>-a and waits for one \
        client run; it deletes the namespaces when it exits. `bth-perf client` (same workload flags) runs our stack in <PREFIX>-b, connects, and \
        prints Gbit/s, messages/s and latency percentiles.\n\n\
        Each side prints the loss-recovery counters of its own connection when the run ends \
        (`client: recovery: …` and `server: recovery: …`: data segments sent, retransmitted, found \
        spurious, RACK loss detections, RTOs, tail loss probes). They count what that side \
        sent: SEND and WRITE data leaves the client, but in a READ the server sends the data, \
        so a READ run's retransmissions are in the server's output. Needs root (CAP_NET_ADMIN) \
        and iproute2."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Set up the namespaces and serve one run.
    Server(ServerArgs),
    /// Connect to the server and run the workload.
    Client(Workload),
}

#[derive(Args, Clone)]
struct Workload {
    /// send; write (plain RDMA WRITE: no completion at the server; the client SENDs a done
    /// message after the last WRITE, then with --verify the server checks every message at its
    /// own offset); write-imm (RDMA WRITE with immediate: the server sees each message); read;
    /// mixed (SEND, WRITE with immediate and READ in turn); or sendrecv (request/response).
    #[arg(long, default_value = "send")]
    op: PerfOp,
    /// Message size in bytes (0..=16777215; 0, a zero-length message with immediate, for send
    /// and write-imm only).
    #[arg(long, default_value_t = 65536)]
    size: u32,
    /// Number of messages.
    #[arg(long, default_value_t = 2000)]
    count: u64,
    /// Work requests kept outstanding.
    #[arg(long, default_value_t = 16)]
    depth: usize,
    /// Check every byte received (plain write: needs count × size ≤ 4 GiB of server memory).
    #[arg(long)]
    verify: bool,
    /// Plain TCP byte stream (no tcp_bth option): both sides must agree.
    #[arg(long)]
    plain: bool,
    /// Namespace name prefix.
    #[arg(long, default_value = "bthperf")]
    prefix: String,
    /// TCP port of the server.
    #[arg(long, default_value_t = 4791)]
    port: u16,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
}

#[derive(Args)]
struct ServerArgs {
    #[command(flatten)]
    w: Workload,
    #[command(flatten)]
    relay: RelayArgs,
}

fn perf_config(w: &Workload) -> Result<PerfConfig, String> {
    if w.size > tcp_bth::wire::MAX_MESSAGE_LEN {
        return Err("--size must be 0..=16777215".into());
    }
    if w.depth == 0 || w.count == 0 {
        return Err("--depth and --count must be positive".into());
    }
    let cfg = PerfConfig {
        op: w.op,
        size: w.size,
        count: w.count,
        tx_depth: w.depth,
        rx_depth: w.depth,
        verify: w.verify,
        seed: 1,
        plain: w.plain,
        ..PerfConfig::default()
    };
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(cfg)
}

fn print_report(role: &str, r: &PerfReport) {
    println!(
        "{role}: {} messages, {} bytes in {:.3} s: {:.3} Gbit/s, {:.0} messages/s",
        r.messages,
        r.bytes,
        r.elapsed.as_secs_f64(),
        r.gbps(),
        r.msgs_per_sec()
    );
    if let (Some(p50), Some(p99), Some(p999)) =
        (r.percentile(0.5), r.percentile(0.99), r.percentile(0.999))
    {
        println!("{role}: latency p50 {p50:?}  p99 {p99:?}  p99.9 {p999:?} (post to completion)");
    }
    if r.verified > 0 {
        println!("{role}: {} messages verified byte for byte", r.verified);
    }
    // This side's own sending: in a READ the server sends the data, so its retransmissions
    // are in the server's output, not the client's.
    println!("{role}: recovery: {}", r.recovery);
    for e in r.errors.iter().take(5) {
        println!("{role}: error: {e}");
    }
}

fn run_server(a: &ServerArgs) -> Result<(), String> {
    let cfg = perf_config(&a.w)?;
    let relay = a.relay.link_config().map_err(|e| e.to_string())?;
    if let Some(link) = &relay {
        println!("server: {}", describe_link(link));
    }
    let mut ns = TwoNs::create(&a.w.prefix, relay).map_err(|e| e.to_string())?;
    println!(
        "server: namespaces {} and {} ready; stack at {}:{} (run `bth-perf client` now)",
        ns.a,
        ns.b,
        topology::A_STACK,
        a.w.port
    );
    let tun = topology::stack_tun(&ns.a, true).map_err(|e| e.to_string())?;
    let mut port = Port::open(tun, topology::A_STACK).map_err(|e| e.to_string())?;
    let conn_cfg = Config {
        local_port: a.w.port,
        bth: !a.w.plain,
        ..Config::default()
    };
    let mut server = Server::new(cfg);
    let timeout = Duration::from_secs(a.w.timeout);
    let res = run_one(&mut port, Role::Listen, conn_cfg, timeout, &mut server);
    if let Some(s) = ns.stop_relay() {
        println!(
            "relay: dropped {} / reordered {} / duplicated {} packets",
            s.a_to_b.dropped() + s.b_to_a.dropped(),
            s.a_to_b.reordered + s.b_to_a.reordered,
            s.a_to_b.duplicated + s.b_to_a.duplicated
        );
        for (dir, paths) in [("a->b", &s.a_to_b_paths), ("b->a", &s.b_to_a_paths)] {
            if !paths.is_empty() {
                let per: Vec<String> = paths
                    .iter()
                    .map(|p| format!("{} ({} lost)", p.sent, p.dropped_loss))
                    .collect();
                println!("relay: {dir} packets per path: {}", per.join(", "));
            }
        }
    }
    let conn = res.map_err(|e| e.to_string())?;
    // The driver transmits after the app's last turn: take the final counters.
    server.report_mut().record_recovery(&conn);
    print_report("server", server.report());
    if server.report().errors.is_empty() {
        Ok(())
    } else {
        Err("the run had errors".into())
    }
}

fn run_client(w: &Workload) -> Result<(), String> {
    let cfg = perf_config(w)?;
    let ns = TwoNs::existing(&w.prefix).map_err(|e| e.to_string())?;
    let tun = topology::stack_tun(&ns.b, false).map_err(|e| e.to_string())?;
    let mut port = Port::open(tun, topology::B_STACK).map_err(|e| e.to_string())?;
    let conn_cfg = Config {
        bth: !w.plain,
        local_port: 40000 + (std::process::id() % 20000) as u16,
        ..Config::default()
    };
    let mut client = Client::new(cfg);
    let server = SocketAddrV4::new(topology::A_STACK, w.port);
    let timeout = Duration::from_secs(w.timeout);
    let conn = run_one(
        &mut port,
        Role::Connect(server),
        conn_cfg,
        timeout,
        &mut client,
    )
    .map_err(|e| e.to_string())?;
    client.report_mut().record_recovery(&conn);
    print_report("client", client.report());
    let stats = port.stats();
    println!(
        "client: {} io_uring enters for {} packets out",
        stats.enters, stats.packets_out
    );
    if client.report().errors.is_empty() {
        Ok(())
    } else {
        Err("the run had errors".into())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match &cli.cmd {
        Cmd::Server(a) => run_server(a),
        Cmd::Client(w) => run_client(w),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bth-perf: {e}");
            ExitCode::FAILURE
        }
    }
}
