//! `bth nc` as a process, over its TUN device, in a network namespace each test creates
//! (unique names per run, deleted even when the test fails):
//!
//! - our client to a kernel server (a `TcpListener` bound to the kernel side's address of our
//!   TUN device; the namespace allows binding it before the device exists), and a kernel
//!   client to our `bth nc -l`: the kernel ignores the tcp_bth option, so both run plain TCP;
//! - two of ours, each on its own TUN device of one namespace, the kernel forwarding between
//!   them: they speak tcp_bth, per-segment and seq framed.
//!
//! Every test pipes a few MiB of patterned bytes each way, checks both directions byte for
//! byte, that `bth nc` exits 0 after the orderly close, and the negotiated-mode line on its
//! stderr. Without root (CAP_NET_ADMIN) they are reported `ignored (needs …)`, a failure
//! under CI=true; the command-line checks run anywhere.

use bth_io::tun::enter_netns;
use bth_tests::netns::{accept_within, Netns};
use bth_tests::pattern;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_bth");
/// The kernel side of our TUN device, and our stack behind it (`--tun-addr 10.99.3.2/24`).
const KERNEL: Ipv4Addr = Ipv4Addr::new(10, 99, 3, 1);
const STACK: Ipv4Addr = Ipv4Addr::new(10, 99, 3, 2);
/// Longest a test waits for anything (a process, a connection).
const LIMIT: Duration = Duration::from_secs(60);

/// A running `bth nc`: its stdin fed from a thread (then closed: EOF), stdout and stderr
/// collected by threads. Killed if dropped still running.
struct Nc {
    child: Child,
    feed: Option<JoinHandle<()>>,
    out: Option<JoinHandle<Vec<u8>>>,
    err: Option<JoinHandle<String>>,
}

/// What a finished `bth nc` left.
struct Ended {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: String,
}

impl Nc {
    /// `bth nc ARGS` in `ns`, `input` on its stdin.
    fn spawn(ns: &Netns, args: &[&str], input: Vec<u8>) -> Nc {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &ns.name, BIN, "nc"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn bth nc");
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        Nc {
            child,
            // A write error is bth nc gone early: its status and stderr tell why.
            feed: Some(std::thread::spawn(move || {
                let _ = stdin.write_all(&input);
            })),
            out: Some(std::thread::spawn(move || {
                let mut v = Vec::new();
                stdout.read_to_end(&mut v).expect("read stdout");
                v
            })),
            err: Some(std::thread::spawn(move || {
                let mut s = String::new();
                stderr.read_to_string(&mut s).expect("read stderr");
                s
            })),
        }
    }

    /// Whether it has exited.
    fn exited(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_some()
    }

    /// Wait for it to exit (killed after [`LIMIT`]).
    fn finish(mut self) -> Ended {
        let until = Instant::now() + LIMIT;
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                break s;
            }
            if Instant::now() > until {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let err = self.err.take().unwrap().join().unwrap_or_default();
                panic!("bth nc did not exit within {LIMIT:?}; stderr:\n{err}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        self.feed.take().unwrap().join().unwrap();
        Ended {
            status,
            stdout: self.out.take().unwrap().join().unwrap(),
            stderr: self.err.take().unwrap().join().unwrap(),
        }
    }
}

impl Drop for Nc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Wait until device `dev` exists in `ns` (the listener `nc` set it up), failing if `nc`
/// exits first.
fn wait_for_device(ns: &Netns, dev: &str, nc: &mut Nc) {
    let until = Instant::now() + Duration::from_secs(20);
    while ns.exec(&["ip", "link", "show", dev]).is_err() {
        assert!(!nc.exited(), "bth nc exited before its TUN device came up");
        assert!(Instant::now() < until, "TUN device {dev} never came up");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A kernel TCP exchange on `s`: send `data` (then FIN) from a thread while reading to the
/// peer's FIN; returns what was read.
fn kernel_exchange(s: TcpStream, data: Vec<u8>) -> Vec<u8> {
    s.set_read_timeout(Some(LIMIT)).unwrap();
    s.set_write_timeout(Some(LIMIT)).unwrap();
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        w.write_all(&data).expect("kernel side: write");
        w.shutdown(Shutdown::Write).expect("kernel side: FIN");
    });
    let mut got = Vec::new();
    (&s).read_to_end(&mut got).expect("kernel side: read");
    writer.join().unwrap();
    got
}

/// Check an exchange: exit 0, the bytes both ways, and the mode line on stderr: `prefix`
/// (e.g. `bth nc: connection from 10.99.3.1:`, the peer's port unknown), then `: mode`.
#[allow(clippy::too_many_arguments)]
fn check(
    who: &str,
    e: &Ended,
    got: &[u8],
    sent: &[u8],
    peer_got: &[u8],
    peer_sent: &[u8],
    prefix: &str,
    mode: &str,
) {
    assert!(
        e.status.success(),
        "{who}: bth nc failed ({}):\n{}",
        e.status,
        e.stderr
    );
    assert!(
        peer_got == sent,
        "{who}: bytes from our stdin differ at the peer ({} of {})",
        peer_got.len(),
        sent.len()
    );
    assert!(
        got == peer_sent,
        "{who}: bytes from the peer differ on our stdout ({} of {})",
        got.len(),
        peer_sent.len()
    );
    let end = format!(": {mode}");
    assert!(
        e.stderr
            .lines()
            .any(|l| l.starts_with(prefix) && l.ends_with(&end)),
        "{who}: no line \"{prefix}…: {mode}\" on stderr:\n{}",
        e.stderr
    );
}

fn our_client_to_a_kernel_server() {
    let ns = Netns::new("ncks").expect("netns");
    // The kernel side's address exists once bth nc made its device: let the listener bind it
    // before.
    ns.exec(&["sysctl", "-qw", "net.ipv4.ip_nonlocal_bind=1"])
        .expect("ip_nonlocal_bind");
    let (to_kernel, to_us) = (pattern(11, 4 << 20), pattern(12, 3 << 20));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let kernel = {
        let (name, reply) = (ns.name.clone(), to_us.clone());
        std::thread::spawn(move || {
            enter_netns(&name).expect("enter netns");
            let l = TcpListener::bind((KERNEL, 8080)).expect("bind the kernel side's address");
            ready_tx.send(()).unwrap();
            let s = accept_within(&l, LIMIT).expect("our client connects");
            kernel_exchange(s, reply)
        })
    };
    ready_rx.recv().expect("the kernel server is listening");
    let t0 = Instant::now();
    let nc = Nc::spawn(
        &ns,
        &["--tun-name", "ncc0", "-v", &KERNEL.to_string(), "8080"],
        to_kernel.clone(),
    );
    let e = nc.finish();
    let kernel_got = kernel.join().expect("kernel server");
    check(
        "our client",
        &e,
        &e.stdout,
        &to_kernel,
        &kernel_got,
        &to_us,
        "bth nc: connected to 10.99.3.1:8080",
        "plain TCP (the peer did not answer the tcp_bth option), timestamps on",
    );
    eprintln!("{}({:?})", e.stderr, t0.elapsed());
    drop(ns);
}

fn a_kernel_client_to_our_server() {
    let ns = Netns::new("nckc").expect("netns");
    let (to_kernel, to_us) = (pattern(21, 3 << 20), pattern(22, 4 << 20));
    let t0 = Instant::now();
    let mut nc = Nc::spawn(
        &ns,
        &["-l", "--tun-name", "ncs0", "-v", "-w", "30", "8080"],
        to_kernel.clone(),
    );
    wait_for_device(&ns, "ncs0", &mut nc);
    let kernel = {
        let (name, data) = (ns.name.clone(), to_us.clone());
        std::thread::spawn(move || {
            enter_netns(&name).expect("enter netns");
            let at = SocketAddr::from((STACK, 8080));
            let s = TcpStream::connect_timeout(&at, Duration::from_secs(10))
                .expect("connect to our stack");
            kernel_exchange(s, data)
        })
    };
    let kernel_got = kernel.join().expect("kernel client");
    let e = nc.finish();
    check(
        "our server",
        &e,
        &e.stdout,
        &to_kernel,
        &kernel_got,
        &to_us,
        "bth nc: connection from 10.99.3.1:",
        "plain TCP (the peer did not offer the tcp_bth option), timestamps on",
    );
    eprintln!("{}({:?})", e.stderr, t0.elapsed());
    drop(ns);
}

/// Two of ours in one namespace, each on its own TUN device (10.99.4.2/24 listening, the
/// client at 10.99.3.2/24), the kernel forwarding between the devices; `framing` asked by
/// both; `line`: the mode both must say.
fn two_of_ours(framing: &str, line: &str) {
    let ns = Netns::new("ncbb").expect("netns");
    // On before either starts, so neither turns it off while the other runs.
    ns.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])
        .expect("ip_forward");
    let (to_server, to_client) = (pattern(31, 4 << 20), pattern(32, (3 << 20) + 5));
    let t0 = Instant::now();
    let mut server = Nc::spawn(
        &ns,
        &[
            "-l",
            "-v",
            "-w",
            "30",
            "--framing",
            framing,
            "--tun-addr",
            "10.99.4.2/24",
            "--tun-name",
            "ncs1",
            "9000",
        ],
        to_client.clone(),
    );
    wait_for_device(&ns, "ncs1", &mut server);
    let client = Nc::spawn(
        &ns,
        &[
            "-v",
            "--framing",
            framing,
            "--tun-addr",
            "10.99.3.2/24",
            "--tun-name",
            "ncc1",
            "10.99.4.2",
            "9000",
        ],
        to_server.clone(),
    );
    let c = client.finish();
    let s = server.finish();
    check(
        "client",
        &c,
        &c.stdout,
        &to_server,
        &s.stdout,
        &to_client,
        "bth nc: connected to 10.99.4.2:9000",
        line,
    );
    check(
        "server",
        &s,
        &s.stdout,
        &to_client,
        &c.stdout,
        &to_server,
        "bth nc: connection from 10.99.3.2:",
        line,
    );
    // Messages, not a byte stream: the closing summary counts them.
    assert!(c.stderr.contains(" messages sent, "), "{}", c.stderr);
    eprintln!("{}{}({:?})", c.stderr, s.stderr, t0.elapsed());
    drop(ns);
}

fn two_of_ours_speak_tcp_bth() {
    two_of_ours("per-segment", "tcp_bth, per-segment framing");
}

fn two_of_ours_speak_tcp_bth_seq_framed() {
    two_of_ours(
        "seq",
        "tcp_bth, seq framing (one option per message, spec amendment 3)",
    );
}

/// `bth nc --help` shows both directions; a name for HOST is refused before anything is set
/// up (no root needed to get there).
fn the_command_line_is_checked_and_explained() {
    let out = Command::new(BIN).args(["nc", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{help}");
    for want in [
        "bth nc [OPTIONS] HOST PORT",
        "bth nc -l [OPTIONS] PORT",
        "bth nc 10.99.3.1 8080",
        "bth nc -l 8080",
        "tcpdump -ni bth0 -vv",
    ] {
        assert!(help.contains(want), "no {want:?} in:\n{help}");
    }
    let out = Command::new(BIN)
        .args(["nc", "localhost", "80"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("resolves no names"),
        "{err}"
    );
}

bth_tests::test_main!(
    the_command_line_is_checked_and_explained,
    our_client_to_a_kernel_server[NetAdmin],
    a_kernel_client_to_our_server[NetAdmin],
    two_of_ours_speak_tcp_bth[NetAdmin],
    two_of_ours_speak_tcp_bth_seq_framed[NetAdmin],
);
