//! `bth-perf`: throughput and latency of tcp-bth over the io_uring TUN data path, shaped like
//! perftest (`ib_send_bw`, `ib_write_lat`, …): `server` and `client` on two hosts, or `local`
//! for both on one machine in two network namespaces.

use bth_tools::perfcli::args::PerfArgs;
use bth_tools::perfcli::error::RunOutcome;
use bth_tools::perfcli::hosted::{run_host, HostArgs};
use bth_tools::perfcli::local::run_local;
use bth_tools::relay_args::RelayArgs;
use clap::{Args, Parser, Subcommand};
use std::net::IpAddr;
use std::process::ExitCode;

const ABOUT: &str = "Measure tcp-bth over the io_uring TUN data path, like perftest";

const LONG_ABOUT: &str = "\
Measure tcp-bth over the io_uring TUN data path, like perftest (ib_send_bw, ib_write_lat, …).

Two hosts: `bth-perf server` on host A, `bth-perf client SERVER_ADDR` on host B. Each puts our \
stack on a TUN device in the current network namespace (`--tun-addr ADDR/PREFIX`: the stack's \
address, and the prefix the kernel routes into the device; defaults 10.99.1.2/24 on the \
server, 10.99.2.2/24 on the client) and turns forwarding on for the run (IPv4's, or IPv6's for \
an IPv6 --tun-addr), so packets from the other host are forwarded into the device. Each host \
needs a route for the other's prefix via the other host's address. With A at 192.168.0.1 and B \
at 192.168.0.2:

  host A:  sudo ip route add 10.99.2.0/24 via 192.168.0.2
           sudo bth-perf server --op write --size 65536 --verify
  host B:  sudo ip route add 10.99.1.0/24 via 192.168.0.1
           sudo bth-perf client 10.99.1.2 --op write --size 65536 --verify

IPv6 alike, every address of one family (A at 2001:db8::1, B at 2001:db8::2):

  host A:  sudo ip -6 route add 2001:db8:99:2::/64 via 2001:db8::2
           sudo bth-perf server --tun-addr 2001:db8:99:1::2/64 --verify
  host B:  sudo ip -6 route add 2001:db8:99:1::/64 via 2001:db8::1
           sudo bth-perf client 2001:db8:99:1::2 --tun-addr 2001:db8:99:2::2/64 --verify

(a firewall must let the forwarded TCP through: iptables -P FORWARD DROP, as Docker sets it, \
drops it; ip6tables the same for IPv6). One machine: `sudo bth-perf local [options]` creates two network namespaces joined \
by a veth pair (or the impairment relay, `--relay-*`), runs the server in one and the client in \
the other, and deletes them at the end.

Both sides take the same workload options; the client's hello carries them and the server \
refuses a run whose options differ from its own, naming each (`client asked for --size 4096, \
this server runs --size 65536`), so give both the same. Bandwidth mode prints perftest's table \
`#bytes #iterations BW peak BW average MsgRate`: BW average is the bytes this side completed \
over the time from the start of the run to its last message; BW peak is the best 10-ms window \
(bytes completed counted per millisecond, each message's bytes spread over the time since \
the previous one completed, windows of 10 consecutive milliseconds), or the \
average on a side that saw too little to tell; MB is 2^20 bytes (--report-gbits: Gbit/s, \
10^9). --lat prints the latency table. At the end each side prints its connection's counters \
(loss recovery: retransmissions, spurious ones, RACK losses, RTOs, tail loss probes; segments \
and ACKs sent; drops on arrival by cause; payload bytes sent copied into segments or sent from \
the application's buffers with no copy, as the TUN driver does for a segment's payload of 2 KiB \
or more: from MTU 2128 up, none at the default 1500), then what it saw of the path (path: \
smoothed RTT mean and maximum beside the smallest RTT, bytes in flight and congestion window, \
time-weighted over the time it had data in flight; a smoothed RTT far above the minimum is a \
queue) and what held its sender back (sender: the time it had data to send or in flight, and \
the shares of it spent sending or with the data path full, held by the congestion window, by \
the peer's window, credit or grant, or with nothing more to send: the application's turn, \
or the last ACKs or READ responses awaited), \
and those the peer sent it just before closing, with \
the messages the peer counted and verified. `local` also prints the packets the network devices \
dropped during the run (devices: each stack's TUN device, whose queue holds 500 packets, and \
the other devices of both namespaces): on a clean path they are what retransmissions answer. \
Needs root (CAP_NET_ADMIN; `local` also \
CAP_SYS_ADMIN and iproute2). Experiment: BTH_BUSY_POLL_US=N makes the TUN driver poll its ring \
rather than sleep for N microseconds after each packet arrives (default 0, off; \
docs/datapath.md).";

#[derive(Parser)]
#[command(name = "bth-perf", version, about = ABOUT, long_about = LONG_ABOUT)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// What `local` prints after the table, one line each (`bth-perf --help` says more).
const LOCAL_OUTPUT: &str = "\
After the table each side prints its counters and, when it had data in flight:
  path:    smoothed RTT (mean, max) beside the smallest RTT, bytes in flight and congestion
           window, time-weighted; a smoothed RTT far above the minimum is a queue. In flight
           is sampled at each turn's low point, after that turn's ACKs, so it reads below the
           window even while the window holds the sender.
  sender:  of the time it had data to send or in flight, the shares spent sending (or with
           the data path full), held by the congestion window, the peer's window, credit or
           grant, and with nothing more to send (the application's turn, or the last ACKs or
           READ responses awaited).
Then, for the run:
  devices: packets dropped by each stack's TUN device (queue of 500) and by the other devices
           of both namespaces (veth, or the relay's TUN devices); on a clean path these are
           what the retransmissions answer.
  relay:   with --relay-*, its share of a core, what it dropped, reordered and duplicated.";

#[derive(Subcommand)]
enum Cmd {
    /// Serve runs on this host: our stack on a TUN device in this network namespace.
    Server(ServerArgs),
    /// Run the workload against `bth-perf server` on another host.
    Client(ClientArgs),
    /// Both sides on this machine, in two network namespaces bth-perf creates and deletes.
    #[command(after_help = LOCAL_OUTPUT)]
    Local(LocalArgs),
}

#[derive(Args)]
struct ServerArgs {
    #[command(flatten)]
    host: HostArgs,
    #[command(flatten)]
    perf: PerfArgs,
}

#[derive(Args)]
struct ClientArgs {
    /// The server's stack address (its --tun-addr without the prefix), e.g. 10.99.1.2 or
    /// 2001:db8:99:1::2; this side's --tun-addr must be of the same family.
    server: IpAddr,
    #[command(flatten)]
    host: HostArgs,
    #[command(flatten)]
    perf: PerfArgs,
}

#[derive(Args)]
struct LocalArgs {
    /// Namespace name prefix: PREFIX-a (server) and PREFIX-b (client).
    #[arg(long, default_value = "bthperf")]
    prefix: String,
    #[command(flatten)]
    perf: PerfArgs,
    #[command(flatten)]
    relay: RelayArgs,
    /// With the relay: pin its thread to a core of its own (the last CPU this process may use)
    /// and both sides' threads to the others. Off by default: the scheduler places the three
    /// threads (on 2 cores the relay then competes with both ends). The forwarding into each
    /// side's TUN device runs in the relay's writes, on its core. Says where the threads ran
    /// at the end.
    #[arg(long)]
    pin_relay: bool,
}

fn main() -> ExitCode {
    let cli: Cli = bth_tools::cli::parse();
    // Before any thread: an interrupted run still aborts its connections with RST, then
    // deletes its namespaces (and turns forwarding back off).
    if let Err(e) = bth_testbed::interrupt::install("bth-perf") {
        eprintln!("bth-perf: warning: Ctrl-C will not clean up after the run ({e})");
    }
    let r = match &cli.cmd {
        Cmd::Server(a) => run_host(None, &a.perf, &a.host),
        Cmd::Client(a) => run_host(Some(a.server), &a.perf, &a.host),
        Cmd::Local(a) => run_local(&a.perf, &a.relay, &a.prefix, a.pin_relay),
    };
    match r {
        Ok(RunOutcome::Passed) => ExitCode::SUCCESS,
        Ok(RunOutcome::RowsFailed) => {
            eprintln!("bth-perf: the run had errors (see above)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("bth-perf: {e}");
            ExitCode::FAILURE
        }
    }
}
