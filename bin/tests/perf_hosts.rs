//! `bth-perf server --tun-addr` and `bth-perf client` as two processes, in two network
//! namespaces standing for two hosts ("hostA" and "hostB", unique names per run, deleted
//! even when the test fails), joined by a routed veth: 192.168.X.1/30 and 192.168.X.2/30,
//! each namespace with a route to the other's TUN prefix via the other's veth address and IPv4
//! forwarding on, as the README tells users to set up two real hosts. The namespaces, link,
//! addresses and routes are made here with `ip`, not by bth-perf's own set-up code, so the
//! test checks the commands the README gives. The verified run also goes over IPv6, as the
//! README's IPv6 variant has it: veth fd98:X::1/64 and fd98:X::2/64, `--tun-addr`
//! fd99:X:1::2/64 and fd99:X:2::2/64, `ip -6 route` and IPv6 forwarding.
//!
//! Also what an interrupted side leaves its peer: SIGTERM or Ctrl-C mid-run aborts the
//! connection with RST before the process exits, so the other side reports the reset at once.
//!
//! Without root the two-host tests are reported `ignored (needs …)` (a failure under
//! CI=true); the checks of the command line alone run anywhere.

use bth_tests::netns::Netns;
use serde_json::Value;
use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_bth-perf");
static N: AtomicU32 = AtomicU32::new(0);

/// Two "hosts" joined by a routed veth, with their TUN prefixes routed via each other.
struct Hosts {
    a: Netns,
    b: Netns,
    /// The server's stack address (on host A), and the client's --tun-addr (on host B).
    server: String,
    server_tun: String,
    client_tun: String,
}

fn ip_in(ns: &Netns, args: &[&str]) {
    let mut full = vec!["ip"];
    full.extend_from_slice(args);
    ns.exec(&full)
        .unwrap_or_else(|e| panic!("ip {} in {}: {e}", args.join(" "), ns.name));
}

impl Hosts {
    /// IPv4 hosts (the README's main set-up).
    fn new() -> Hosts {
        Hosts::of(false)
    }

    /// IPv6 hosts: every address IPv6 (the README's IPv6 variant).
    fn ipv6() -> Hosts {
        Hosts::of(true)
    }

    fn of(v6: bool) -> Hosts {
        let n = N.fetch_add(1, Ordering::SeqCst);
        // One subnet per run and test; namespaces keep them apart anyway.
        let x = (std::process::id() + n) % 200 + 20;
        let a = Netns::new("hostA").expect("namespace hostA");
        let b = Netns::new("hostB").expect("namespace hostB");
        let (va, vb) = (
            format!("bpa{}x{n}", std::process::id() % 100_000),
            format!("bpb{}x{n}", std::process::id() % 100_000),
        );
        // Created in host A's namespace, so it goes away with it.
        ip_in(
            &a,
            &["link", "add", &va, "type", "veth", "peer", "name", &vb],
        );
        ip_in(&a, &["link", "set", &vb, "netns", &b.name]);
        if v6 {
            // A fresh veth's addresses (its link-local one too, which neighbour discovery
            // goes out from) stay tentative for a second of duplicate address detection
            // unless it is off: no other host is on this link.
            for (ns, v) in [(&a, &va), (&b, &vb)] {
                ns.exec(&["sysctl", "-qw", &format!("net.ipv6.conf.{v}.accept_dad=0")])
                    .expect("accept_dad");
            }
        }
        let (a_link, b_link, link_prefix) = if v6 {
            (format!("fd98:{x}::1"), format!("fd98:{x}::2"), 64)
        } else {
            (format!("192.168.{x}.1"), format!("192.168.{x}.2"), 30)
        };
        let nodad: &[&str] = if v6 { &["nodad"] } else { &[] };
        for (ns, v, addr) in [(&a, &va, &a_link), (&b, &vb, &b_link)] {
            let cidr = format!("{addr}/{link_prefix}");
            let mut args = vec!["addr", "add", &cidr, "dev", v];
            args.extend_from_slice(nodad);
            ip_in(ns, &args);
        }
        ip_in(&a, &["link", "set", &va, "up"]);
        ip_in(&b, &["link", "set", &vb, "up"]);
        let (a_net, b_net) = if v6 {
            (format!("fd99:{x}:1::/64"), format!("fd99:{x}:2::/64"))
        } else {
            (format!("10.{x}.1.0/24"), format!("10.{x}.2.0/24"))
        };
        // The README's lines for two hosts: each routes the other's TUN prefix via the other
        // (`ip -6 route` for IPv6).
        let family: &[&str] = if v6 { &["-6"] } else { &[] };
        for (ns, net, via) in [(&a, &b_net, &b_link), (&b, &a_net, &a_link)] {
            let mut args = family.to_vec();
            args.extend_from_slice(&["route", "add", net, "via", via]);
            ip_in(ns, &args);
        }
        let forwarding = if v6 {
            "net.ipv6.conf.all.forwarding=1"
        } else {
            "net.ipv4.ip_forward=1"
        };
        for ns in [&a, &b] {
            ns.exec(&["sysctl", "-qw", forwarding]).expect("forwarding");
        }
        if v6 {
            Hosts {
                a,
                b,
                server: format!("fd99:{x}:1::2"),
                server_tun: format!("fd99:{x}:1::2/64"),
                client_tun: format!("fd99:{x}:2::2/64"),
            }
        } else {
            Hosts {
                a,
                b,
                server: format!("10.{x}.1.2"),
                server_tun: format!("10.{x}.1.2/24"),
                client_tun: format!("10.{x}.2.2/24"),
            }
        }
    }

    /// Server and client with these options, to their ends: (client, server).
    fn run(&self, server: &[&str], client: &[&str]) -> (Output, Output) {
        let mut s = self.server(server);
        let c = self.client(client);
        let s = s
            .wait(Duration::from_secs(90))
            .expect("the server did not exit");
        (c, s)
    }

    fn command(ns: &Netns, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &ns.name, BIN]).args(args);
        c
    }

    /// `bth-perf server` in host A, started; its TUN device is up when this returns.
    fn server(&self, extra: &[&str]) -> Killed {
        let mut args = vec!["server", "--tun-addr", &self.server_tun, "--timeout", "60"];
        args.extend_from_slice(extra);
        let child = Hosts::command(&self.a, &args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn bth-perf server");
        let mut server = Killed(Some(child));
        // The device appears once the server is ready for the client's SYN.
        let until = Instant::now() + Duration::from_secs(20);
        while self.a.exec(&["ip", "link", "show", "bth0"]).is_err() {
            if let Some(out) = server.exited() {
                panic!("the server exited early: {}", describe(&out));
            }
            assert!(
                Instant::now() < until,
                "the server's TUN device never came up"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    /// `bth-perf client` in host B, run to its end.
    fn client(&self, extra: &[&str]) -> Output {
        Hosts::command(&self.b, &self.client_args(extra))
            .output()
            .expect("run bth-perf client")
    }

    /// `bth-perf client` in host B, started (its output piped, for [`Killed::wait`]).
    fn spawn_client(&self, extra: &[&str]) -> Killed {
        let child = Hosts::command(&self.b, &self.client_args(extra))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn bth-perf client");
        Killed(Some(child))
    }

    fn client_args<'a>(&'a self, extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec![
            "client",
            &self.server,
            "--tun-addr",
            &self.client_tun,
            "--timeout",
            "60",
        ];
        args.extend_from_slice(extra);
        args
    }
}

/// A child process killed (and reaped) when dropped, so a failing test leaves none behind
/// (and its namespace can go).
struct Killed(Option<Child>);

impl Killed {
    /// Its output if it has exited.
    fn exited(&mut self) -> Option<Output> {
        let child = self.0.as_mut()?;
        child.try_wait().ok().flatten()?;
        self.wait(Duration::ZERO)
    }

    /// Wait up to `limit` for it to exit; its output.
    fn wait(&mut self, limit: Duration) -> Option<Output> {
        let until = Instant::now() + limit;
        let child = self.0.as_mut()?;
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(50)),
                _ => return None,
            }
        };
        let mut child = self.0.take()?;
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        if let Some(mut o) = child.stdout.take() {
            let _ = o.read_to_end(&mut stdout);
        }
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_end(&mut stderr);
        }
        Some(Output {
            status,
            stdout,
            stderr,
        })
    }
}

impl Killed {
    /// Send `signal` to it (`ip netns exec` execs bth-perf in place: the child's pid is
    /// bth-perf's).
    fn signal(&self, signal: libc::c_int) {
        let child = self.0.as_ref().expect("a child not yet reaped");
        // SAFETY: kill(2) on our own child's pid, not yet reaped (so not reused).
        let r = unsafe { libc::kill(child.id() as libc::pid_t, signal) };
        assert_eq!(r, 0, "kill: {}", std::io::Error::last_os_error());
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

use bth_tests::describe_output as describe;

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", describe(o)))
}

const COUNT: u64 = 300;
const QPS: u64 = 8;

/// A verified SEND run between the two hosts over 8 QPs at once, both directions (`-q 8 -b
/// --verify`): both processes exit 0, every byte each side received was checked there, and
/// each side heard the same from the other.
fn two_hosts_verified_send_on_eight_qps_both_ways() {
    verified_send_on_eight_qps_both_ways(&Hosts::new());
}

/// The same run with every address IPv6: the README's IPv6 variant (`--tun-addr` and the
/// server address IPv6, `ip -6 route`, IPv6 forwarding).
fn two_hosts_verified_send_on_eight_qps_both_ways_over_ipv6() {
    let hosts = Hosts::ipv6();
    verified_send_on_eight_qps_both_ways(&hosts);
}

fn verified_send_on_eight_qps_both_ways(hosts: &Hosts) {
    let opts = [
        "--op", "send", "-s", "65536", "-n", "300", "-q", "8", "-b", "--verify", "--json",
    ];
    let (client, server) = hosts.run(&opts, &opts);
    assert!(client.status.success(), "client: {}", describe(&client));
    assert!(server.status.success(), "server: {}", describe(&server));
    let (c, s) = (json(&client), json(&server));
    let (cr, sr) = (&c["rows"][0], &s["rows"][0]);
    assert_eq!(
        (c["ok"].as_bool(), s["ok"].as_bool()),
        (Some(true), Some(true))
    );
    assert_eq!(
        (c["qps"].as_u64(), s["qps"].as_u64()),
        (Some(QPS), Some(QPS))
    );
    let each_way = QPS * COUNT;
    for (name, side) in [("client", cr), ("server", sr)] {
        assert_eq!(
            side["iterations"],
            2 * each_way,
            "{name}: messages both ways"
        );
        assert_eq!(
            side["verified"], each_way,
            "{name}: every message it received checked"
        );
        assert_eq!(side["bytes_total"], 2 * each_way * 65536, "{name}");
        assert_eq!(
            side["peer"]["verified"], each_way,
            "{name}: the peer said so"
        );
        assert_eq!(side["peer"]["errors"], 0, "{name}");
        assert_eq!(side["errors"].as_array().map(Vec::len), Some(0), "{side}");
    }
}

/// Different options on the two sides: the server refuses, and both say which option and
/// both values; both exit with an error instead of hanging.
fn two_hosts_refuse_different_options() {
    let hosts = Hosts::new();
    let (client, server) = hosts.run(&["-s", "65536", "-n", "100"], &["-s", "4096", "-n", "100"]);
    let why = "client asked for --size 4096, this server runs --size 65536";
    assert!(!client.status.success(), "client: {}", describe(&client));
    assert!(!server.status.success(), "server: {}", describe(&server));
    let (c, s) = (describe(&client), describe(&server));
    assert!(
        c.contains(&format!("the server refused the run: {why}")),
        "client: {c}"
    );
    assert!(
        s.contains(&format!("refused the client: {why}")),
        "server: {s}"
    );
}

/// A client whose server's host has no route to the server's address (no server runs there)
/// fails at once with the ICMP error that host's kernel answers its SYN with, within
/// microseconds: before ICMP was handled it waited through its SYN retries (4 SYNs, 15 s) or,
/// here, its --timeout, and then blamed the handshake.
fn a_client_whose_server_is_unreachable_fails_at_once_with_the_icmp_error() {
    let hosts = Hosts::new();
    let started = Instant::now();
    let out = Hosts::command(
        &hosts.b,
        &[
            "client",
            &hosts.server,
            "--tun-addr",
            &hosts.client_tun,
            "--timeout",
            "10",
            "-n",
            "10",
        ],
    )
    .output()
    .expect("run bth-perf client");
    let took = started.elapsed();
    assert!(!out.status.success(), "{}", describe(&out));
    // The row's error is in the report (stdout); stderr has the summary line.
    let err = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        err.contains("error: destination unreachable: network unreachable (ICMP"),
        "{err}"
    );
    // The whole command (TUN device, routes, the handshake's one SYN) in well under the
    // first SYN retransmission (1 s).
    assert!(took < Duration::from_secs(1), "took {took:?}: {err}");
}

/// Which of the two processes a test interrupts.
#[derive(Clone, Copy)]
enum Interrupted {
    Client,
    Server,
}

/// How long after the signal the other side may take to say its peer reset the connection.
/// The interrupted side's driver loop sees the signal within a turn (a few milliseconds) and
/// writes the RST at once; what it replaces was silence, ended only by the other side's
/// --timeout (60 s here) or its retransmissions giving up (minutes).
const RESET_HEARD_WITHIN: Duration = Duration::from_secs(2);

/// A 30-second SEND run (`-D 30`) between the two hosts, server and client, both still
/// running a second after the client's start. Data moves within milliseconds of it; the
/// second makes sure of it (a run not yet connected would report no reset and no keepalive,
/// and the tests would fail, not pass).
fn a_second_into_a_long_run(hosts: &Hosts) -> (Killed, Killed) {
    let opts = ["--op", "send", "-s", "65536", "-D", "30"];
    let mut server = hosts.server(&opts);
    let mut client = hosts.spawn_client(&opts);
    std::thread::sleep(Duration::from_secs(1));
    for (side, p) in [("server", &mut server), ("client", &mut client)] {
        if let Some(out) = p.exited() {
            panic!(
                "the {side} exited a second into its run: {}",
                describe(&out)
            );
        }
    }
    (server, client)
}

/// A 30-second SEND run (`-D 30`) between the two hosts; one second into it, `signal` goes to
/// the `which` side. That side must abort its connection with RST before it exits (with
/// 128 + the signal's number and saying so), so the other side reports the peer's reset
/// within [`RESET_HEARD_WITHIN`], long before the run or its time limit would have ended.
fn interrupt_mid_run(which: Interrupted, signal: libc::c_int, name: &str) {
    let hosts = Hosts::new();
    let (mut server, mut client) = a_second_into_a_long_run(&hosts);
    let (sent, other, peer_name) = match which {
        Interrupted::Client => (&mut client, &mut server, "server"),
        Interrupted::Server => (&mut server, &mut client, "client"),
    };
    sent.signal(signal);
    let start = Instant::now();
    let heard = other.wait(Duration::from_secs(10));
    let took = start.elapsed();
    let interrupted = sent
        .wait(Duration::from_secs(10))
        .expect("the interrupted side did not exit within 10 s of the signal");
    let err = String::from_utf8_lossy(&interrupted.stderr);
    assert_eq!(
        interrupted.status.code(),
        Some(128 + signal),
        "{}",
        describe(&interrupted)
    );
    assert!(err.contains(&format!("interrupted by {name}")), "{err}");
    assert!(
        err.contains("aborted 1 connection with RST"),
        "{}",
        describe(&interrupted)
    );
    let heard = heard.unwrap_or_else(|| {
        panic!(
            "the {peer_name} was still running 10 s after the signal (it never heard the \
             reset); the interrupted side: {}",
            describe(&interrupted)
        )
    });
    let said = describe(&heard);
    assert!(said.contains("connection reset by peer"), "{said}");
    assert!(!heard.status.success(), "{said}");
    assert!(
        took <= RESET_HEARD_WITHIN,
        "the {peer_name} took {took:?} to end after the signal: {said}"
    );
}

/// SIGTERM to the client mid-run: the server hears the reset at once.
fn sigterm_to_the_client_resets_the_servers_connection() {
    interrupt_mid_run(Interrupted::Client, libc::SIGTERM, "SIGTERM");
}

/// Ctrl-C (SIGINT) to the server mid-run: the client hears the reset at once.
fn ctrl_c_to_the_server_resets_the_clients_connection() {
    interrupt_mid_run(Interrupted::Server, libc::SIGINT, "SIGINT");
}

/// One side of a `-D 30` SEND run killed mid-run (SIGKILL: no RST, its TUN device simply
/// gone); the other must end within `within` saying `why`, and name the ICMP net unreachable
/// that the dead side's host answers with (the route into the dead device went with it).
/// Before keepalive and the user timeout, a server waited out its whole --timeout (116 s in
/// a recorded run) and then blamed the message size.
fn kill_mid_run(killed: Interrupted, why: &str, within: Duration) {
    let hosts = Hosts::new();
    let (mut server, mut client) = a_second_into_a_long_run(&hosts);
    let (dead, alive) = match killed {
        Interrupted::Client => (&mut client, &mut server),
        Interrupted::Server => (&mut server, &mut client),
    };
    dead.signal(libc::SIGKILL);
    let start = Instant::now();
    let out = alive
        .wait(Duration::from_secs(30))
        .expect("still running 30 s after its peer was killed");
    let took = start.elapsed();
    let said = describe(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains(why), "{said}");
    assert!(said.contains("network unreachable by ICMP"), "{said}");
    assert!(took < within, "took {took:?}: {said}");
}

/// The server, receiving, is told nothing more: keepalive notices (2 s of silence, then three
/// probes a second apart: bin/src/perfcli/run.rs).
fn a_killed_client_is_noticed_by_the_server_within_seconds() {
    kill_mid_run(
        Interrupted::Client,
        "keepalive: no answer to 3 probes, the peer is gone",
        Duration::from_secs(8),
    );
}

/// The client, sending, has data outstanding: the user timeout (10 s) notices.
fn a_killed_server_is_noticed_by_the_client_by_its_user_timeout() {
    kill_mid_run(
        Interrupted::Server,
        "user timeout: data unacknowledged for 10s",
        Duration::from_secs(13),
    );
}

/// The kernel's own segmentation as the judge of S framing (amendment 3): the client writes
/// super-segments (its device has TSO), the server's device has none (`--no-gso`), so the
/// kernel cuts every super-segment into segments on its way there, each carrying a copy of
/// the one option. Every message arrives verified and nothing is refused on arrival: the
/// copied option is right for every segment cut from it.
fn the_kernel_cuts_s_super_segments_into_segments_the_server_places() {
    let hosts = Hosts::new();
    let opts = [
        "--op",
        "send",
        "-s",
        "1048576",
        "-n",
        "64",
        "--verify",
        "--framing",
        "seq",
        "--json",
    ];
    let mut server_opts = opts.to_vec();
    server_opts.push("--no-gso");
    let mut server = hosts.server(&server_opts);
    let client = hosts.client(&opts);
    let server = server
        .wait(Duration::from_secs(30))
        .expect("the server ends with the run");
    assert!(client.status.success(), "{}", describe(&client));
    assert!(server.status.success(), "{}", describe(&server));
    let row = |o: &Output| -> Value {
        let v: Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", describe(o)));
        v["rows"][0].clone()
    };
    let (c, s) = (row(&client), row(&server));
    assert_eq!(
        (c["seq_framed"].as_bool(), s["seq_framed"].as_bool()),
        (Some(true), Some(true))
    );
    assert!(c["counters"]["gso_sent"].as_u64().unwrap() > 0, "{c}");
    // Cut by the kernel: none arrived whole, every byte placed, nothing dropped on arrival.
    assert_eq!(s["counters"]["super_segments_in"].as_u64(), Some(0), "{s}");
    assert_eq!(s["verified"].as_u64(), Some(64), "{s}");
    let drops = &s["counters"]["drops"];
    for cause in ["malformed", "icrc", "bad_bth"] {
        assert_eq!(drops[cause].as_u64(), Some(0), "{cause}: {s}");
    }
}

/// A connection count outside 1..=1024 is refused before anything is set up (no root
/// needed to see it), saying why.
fn a_connection_count_out_of_range_is_refused_clearly() {
    for q in ["0", "1025"] {
        let out = Command::new(BIN)
            .args(["server", "-q", q])
            .output()
            .expect("run bth-perf");
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("-q {q}: expected 1 to 1024")),
            "{err}"
        );
    }
}

/// A client given an IPv6 server address with an IPv4 --tun-addr (given, or the default) is
/// refused before anything is set up (no root needed to see it), saying why and what to give;
/// so is a kernel-side address of the other family.
fn mixed_address_families_are_refused_clearly() {
    let refused = |args: &[&str]| {
        let out = Command::new(BIN).args(args).output().expect("run bth-perf");
        assert!(!out.status.success(), "{args:?}: {}", describe(&out));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = refused(&["client", "2001:db8:99:1::2", "-n", "1"]);
    assert!(
        err.contains(
            "the server address 2001:db8:99:1::2 is IPv6 but this client's --tun-addr \
             10.99.2.2/24 (the default) is IPv4"
        ),
        "{err}"
    );
    assert!(
        err.contains("give --tun-addr an IPv6 ADDR/PREFIX, e.g. 2001:db8:99:2::2/64"),
        "{err}"
    );
    let err = refused(&["client", "10.99.1.2", "--tun-addr", "2001:db8:99:2::2/64"]);
    assert!(
        err.contains(
            "the server address 10.99.1.2 is IPv4 but this client's --tun-addr \
             2001:db8:99:2::2/64 is IPv6"
        ),
        "{err}"
    );
    let err = refused(&[
        "server",
        "--tun-addr",
        "2001:db8:99:1::2/64",
        "--tun-kernel-addr",
        "10.99.1.1",
    ]);
    assert!(
        err.contains(
            "--tun-kernel-addr 10.99.1.1 is IPv4 but --tun-addr 2001:db8:99:1::2/64 is IPv6"
        ),
        "{err}"
    );
}

/// The help explains the two-host set-up and how the peak is computed.
fn help_explains_the_cross_host_setup() {
    let out = Command::new(BIN).arg("--help").output().expect("run");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for want in [
        "ip route add 10.99.2.0/24 via 192.168.0.2",
        "bth-perf client 10.99.1.2",
        "ip -6 route add 2001:db8:99:2::/64 via 2001:db8::2",
        "bth-perf client 2001:db8:99:1::2 --tun-addr 2001:db8:99:2::2/64",
        "best 10-ms window",
        "local",
    ] {
        assert!(help.contains(want), "{want:?} not in --help");
    }
    for sub in ["server", "client", "local"] {
        let out = Command::new(BIN)
            .args([sub, "--help"])
            .output()
            .expect("run");
        let h = String::from_utf8_lossy(&out.stdout);
        for flag in [
            "--size",
            "--all",
            "--iters",
            "--duration",
            "--qps",
            "--tx-depth",
            "--rx-depth",
            "--bidirectional",
            "--op",
            "--plain",
            "--report-gbits",
            "--json",
            "--verify",
            "--lat",
        ] {
            assert!(h.contains(flag), "{sub} --help lacks {flag}");
        }
        assert_eq!(h.contains("--tun-addr"), sub != "local", "{sub}");
        assert_eq!(h.contains("--relay-loss"), sub == "local", "{sub}");
    }
}

bth_tests::test_main!(
    a_client_whose_server_is_unreachable_fails_at_once_with_the_icmp_error[NetAdmin],
    two_hosts_verified_send_on_eight_qps_both_ways[NetAdmin],
    two_hosts_verified_send_on_eight_qps_both_ways_over_ipv6[NetAdmin],
    two_hosts_refuse_different_options[NetAdmin],
    sigterm_to_the_client_resets_the_servers_connection[NetAdmin],
    ctrl_c_to_the_server_resets_the_clients_connection[NetAdmin],
    a_killed_client_is_noticed_by_the_server_within_seconds[NetAdmin],
    a_killed_server_is_noticed_by_the_client_by_its_user_timeout[NetAdmin],
    the_kernel_cuts_s_super_segments_into_segments_the_server_places[NetAdmin],
    a_connection_count_out_of_range_is_refused_clearly,
    mixed_address_families_are_refused_clearly,
    help_explains_the_cross_host_setup,
);
