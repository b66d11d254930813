//! `bth-perf local`: both sides on this machine, in two network namespaces joined by a veth
//! pair or the impairment relay (`--relay-*`), the server's thread in the first and the
//! client's in the second, as `bth_perf::tunpair` runs them.

use super::args::{PerfArgs, Plan};
use super::error::{PerfRunError, RunOutcome};
use super::output::{all_ok, json_side, Printer};
use super::progress;
use super::run::{servers_closed, Row, SideRun, Who};
use super::table::Banner;
use crate::relay_args::{describe_link, RelayArgs};
use bth_io::tun::devstats;
use bth_perf::drive::Port;
use bth_perf::tunpair::stack_tun_mtu;
use bth_perf::ServersClosed;
use bth_testbed::ready::{join_both, spawn_set_up};
use bth_testbed::topology::{self, TwoNs};
use std::io;
use std::net::SocketAddr;

/// What one side's thread returns: its rows, and the packets its own TUN device dropped
/// (None if they could not be read).
type SideResult = io::Result<(Vec<Row>, Option<u64>)>;

/// One side's thread: its TUN device in its namespace, then its rows. Returns once the
/// device is up (the client is started once the server's is), or with why it could not be.
fn side(
    ns: String,
    server: bool,
    args: PerfArgs,
    plan: Plan,
    closed: Vec<ServersClosed>,
) -> io::Result<std::thread::JoinHandle<SideResult>> {
    let addr = if server {
        topology::A_STACK
    } else {
        topology::B_STACK
    };
    let (mtu, offload) = (args.mtu, args.offload());
    spawn_set_up(
        if server { "bth-server" } else { "bth-client" },
        move || stack_tun_mtu(&ns, server, mtu, offload).and_then(|tun| Port::open(tun, addr)),
        move |mut port| {
            let printer = Printer::of(&args);
            let who = if server {
                Who::Server
            } else {
                Who::Client(SocketAddr::from((topology::A_STACK, args.port)))
            };
            let run = SideRun {
                who,
                tcp_port: args.port,
                plan: &plan,
                // One bar, the client's.
                bars: !server && progress::wanted(args.json),
                in_process: Some(&closed),
            };
            // The client's rows make the table; the server's are summed in its footer.
            let rows = run.run(&mut port, |row| {
                if !server {
                    printer.row(row)
                }
            });
            // Read here: the device lives in this thread's namespace and goes with the port.
            Ok((rows, port.device_drops().ok().map(|d| d.total())))
        },
    )
}

/// Run both sides; [`RunOutcome::Passed`] when every row ran and succeeded on both.
/// With `pin_relay`, the relay's thread gets a core of its own and both sides' threads the
/// others ([`TwoNs::pin`]); refused without a relay.
pub fn run_local(
    args: &PerfArgs,
    relay: &RelayArgs,
    prefix: &str,
    pin_relay: bool,
) -> Result<RunOutcome, PerfRunError> {
    let plan = args.plan()?;
    let link = relay.link_config()?;
    if pin_relay && link.is_none() {
        return Err(PerfRunError::PinWithoutRelay);
    }
    let printer = Printer::of(args);
    let say = |s: String| printer.note(&s);
    if let Some(l) = &link {
        say(describe_link(l));
    }
    let via = match link {
        Some(_) => format!("relay, MTU {}", args.mtu),
        None => format!("veth, MTU {}", args.mtu),
    };
    let mut ns =
        TwoNs::create_mtu(prefix, link, args.mtu).map_err(PerfRunError::setup("namespaces"))?;
    let connection = format!(
        "{} -> {}:{} (namespaces {} and {}, {via})",
        topology::B_STACK,
        topology::A_STACK,
        args.port,
        ns.b,
        ns.a
    );
    let banner = Banner {
        role: "client",
        rows: &plan.rows,
        mtu: args.mtu,
        connection,
    };
    // Both sides' threads, spawned below, inherit the cores this leaves the caller.
    let pinned = if pin_relay {
        ns.pin().map_err(PerfRunError::setup("--pin-relay"))?
    } else {
        None
    };
    if pin_relay && pinned.is_none() {
        say("--pin-relay: this process may use one CPU only, nothing pinned".into());
    }
    let relay = ns.relay_mark();
    let devices_before = ns.device_drops();
    // Both sides are in this process: a row's client stops lingering in TIME-WAIT once the
    // row's servers have closed (`ServersClosed`).
    let closed = servers_closed(&plan);
    let side_of = |name: &String, server: bool, closed: Vec<ServersClosed>| {
        side(name.clone(), server, args.clone(), plan.clone(), closed)
    };
    let server = side_of(&ns.a, true, closed.clone()).map_err(PerfRunError::setup("server"))?;
    printer.start(&banner);
    let client = side_of(&ns.b, false, closed).map_err(PerfRunError::setup("client"))?;
    let ((s, server_drops), (c, client_drops)) =
        join_both((server, "server"), (client, "client")).map_err(PerfRunError::setup("run"))?;
    let relay = relay.share(&ns);
    let topology_drops = devices_before
        .zip(ns.device_drops())
        .map(|(b, a)| devstats::drops_between(&b, &a));
    if args.json {
        let both = serde_json::json!({
            "client": json_side("client", &banner, &c),
            "server": json_side("server", &banner, &s),
            // Packets dropped by each stack's TUN device and by the rest of the topology
            // (null: could not be read).
            "device_drops": {
                "client": client_drops,
                "server": server_drops,
                "topology": topology_drops,
            },
        });
        println!("{both:#}");
    } else {
        printer.end("client", "server", &banner, &c);
        for l in super::output::local_server_footer(&s) {
            println!("{l}");
        }
    }
    if let Some(r) = relay {
        say(format!(
            "relay: its thread used {:.2} s of CPU in the {:.2} s of the run ({:.0} % of a core)",
            r.cpu.as_secs_f64(),
            r.wall.as_secs_f64(),
            100.0 * r.of_a_core()
        ));
    }
    say(device_drops_line(
        client_drops,
        server_drops,
        topology_drops,
    ));
    if let Some(p) = pinned {
        say(format!("pinned (--pin-relay): {}", p.cpus.describe()));
    }
    if let Some(st) = ns.stop_relay() {
        let sprayed = !st.a_to_b_paths.is_empty() || !st.b_to_a_paths.is_empty();
        say(format!(
            "relay: dropped {} / reordered {} / duplicated {} packets{}{}",
            st.a_to_b.dropped() + st.b_to_a.dropped(),
            st.a_to_b.reordered + st.b_to_a.reordered,
            st.a_to_b.duplicated + st.b_to_a.duplicated,
            match (
                st.a_to_b.corrupted + st.b_to_a.corrupted,
                st.a_to_b.swapped + st.b_to_a.swapped
            ) {
                (0, 0) => String::new(),
                (c, s) => format!(
                    "; {c} with a bit flipped, {s} with payload words swapped (checksum-neutral)"
                ),
            },
            if sprayed {
                " (reordered: --relay-reorder's hold-backs; the spraying below \
            reorders by path delay and is not counted there)"
            } else {
                ""
            }
        ));
        for (dir, paths) in [("a->b", &st.a_to_b_paths), ("b->a", &st.b_to_a_paths)] {
            if !paths.is_empty() {
                let per: Vec<String> = paths
                    .iter()
                    .map(|p| format!("{} ({} lost)", p.sent, p.dropped_loss))
                    .collect();
                say(format!("relay: {dir} packets per path: {}", per.join(", ")));
            }
        }
    }
    Ok(RunOutcome::of(
        all_ok(plan.rows.len(), &c) && all_ok(plan.rows.len(), &s),
    ))
}

/// The packets the network devices dropped during the run: each stack's TUN device and the
/// rest of the topology (veth, the relay's devices). On a clean path these are what the
/// retransmissions answer: a TUN device queues 500 packets by default.
fn device_drops_line(client: Option<u64>, server: Option<u64>, topology: Option<u64>) -> String {
    let parts = [client, server, topology];
    let n = |v: Option<u64>| v.map_or_else(|| "unreadable".to_string(), |v| v.to_string());
    let sum: u64 = parts.iter().flatten().sum();
    let total = if parts.iter().all(Option::is_some) {
        sum.to_string()
    } else {
        format!("at least {sum}")
    };
    format!(
        "devices: {total} packets dropped (client's TUN device {}, server's {}, the other \
         devices of both namespaces, veth or the relay's TUN devices, {})",
        n(client),
        n(server),
        n(topology)
    )
}

#[cfg(test)]
mod tests {
    use super::device_drops_line;

    #[test]
    fn device_drops_line_sums_what_was_read_and_marks_what_was_not() {
        assert_eq!(
            device_drops_line(Some(3), Some(0), Some(736)),
            "devices: 739 packets dropped (client's TUN device 3, server's 0, the other \
             devices of both namespaces, veth or the relay's TUN devices, 736)"
        );
        assert_eq!(
            device_drops_line(Some(3), None, Some(1)),
            "devices: at least 4 packets dropped (client's TUN device 3, server's unreadable, \
             the other devices of both namespaces, veth or the relay's TUN devices, 1)"
        );
    }
}
