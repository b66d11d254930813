//! `bth-perf server --tun-addr` and `bth-perf client` as two processes, in two network
//! namespaces standing for two hosts ("hostA" and "hostB", unique names per run, deleted
//! even when the test fails), joined by a routed veth: 192.168.X.1/30 and 192.168.X.2/30,
//! each namespace with a route to the other's TUN prefix via the other's veth address and IPv4
//! forwarding on, as the README tells users to set up two real hosts. The namespaces, link,
//! addresses and routes are made here with `ip`, not by bth-perf's own set-up code, so the
//! test checks the commands the README gives.
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
    fn new() -> Hosts {
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
        let (a_link, b_link) = (format!("192.168.{x}.1"), format!("192.168.{x}.2"));
        ip_in(&a, &["addr", "add", &format!("{a_link}/30"), "dev", &va]);
        ip_in(&b, &["addr", "add", &format!("{b_link}/30"), "dev", &vb]);
        ip_in(&a, &["link", "set", &va, "up"]);
        ip_in(&b, &["link", "set", &vb, "up"]);
        let (a_net, b_net) = (format!("10.{x}.1.0/24"), format!("10.{x}.2.0/24"));
        // The README's lines for two hosts: each routes the other's TUN prefix via the other.
        ip_in(&a, &["route", "add", &b_net, "via", &b_link]);
        ip_in(&b, &["route", "add", &a_net, "via", &a_link]);
        for ns in [&a, &b] {
            ns.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])
                .expect("ip_forward");
        }
        Hosts {
            a,
            b,
            server: format!("10.{x}.1.2"),
            server_tun: format!("10.{x}.1.2/24"),
            client_tun: format!("10.{x}.2.2/24"),
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
        let mut args = vec![
            "client",
            &self.server,
            "--tun-addr",
            &self.client_tun,
            "--timeout",
            "60",
        ];
        args.extend_from_slice(extra);
        Hosts::command(&self.b, &args)
            .output()
            .expect("run bth-perf client")
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
    let hosts = Hosts::new();
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

/// A client whose server never answers says so: the handshake got no answer, with what to
/// check, rather than only that the run timed out.
fn a_client_without_a_server_says_the_handshake_got_no_answer() {
    let hosts = Hosts::new();
    let out = Hosts::command(
        &hosts.b,
        &[
            "client",
            &hosts.server,
            "--tun-addr",
            &hosts.client_tun,
            "--timeout",
            "2",
            "-n",
            "10",
        ],
    )
    .output()
    .expect("run bth-perf client");
    assert!(!out.status.success(), "{}", describe(&out));
    // The row's error is in the report (stdout); stderr has the summary line.
    let err = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        err.contains("not done within 2s")
            && err.contains(&format!(
                "{}:4791 never answered the handshake",
                hosts.server
            )),
        "{err}"
    );
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

/// The help explains the two-host set-up and how the peak is computed.
fn help_explains_the_cross_host_setup() {
    let out = Command::new(BIN).arg("--help").output().expect("run");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for want in [
        "ip route add 10.99.2.0/24 via 192.168.0.2",
        "bth-perf client 10.99.1.2",
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
    a_client_without_a_server_says_the_handshake_got_no_answer[NetAdmin],
    two_hosts_verified_send_on_eight_qps_both_ways[NetAdmin],
    two_hosts_refuse_different_options[NetAdmin],
    a_connection_count_out_of_range_is_refused_clearly,
    help_explains_the_cross_host_setup,
);
