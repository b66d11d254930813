//! Two sides that disagree, over the simulator: on `--plain` (one side with it, the other
//! without), and on options with several connections at once (`-q`). Both sides must end
//! within a second of simulated time, each naming the cause once (and how to fix it), with no
//! error of a connection that merely followed the first refusal (a hello that waited out the
//! RNR timeout for a server that never posted its receives, a peer's RST).

use super::drive::{Conns, Role};
use super::mismatch::{SERVER_NOT_PLAIN, SERVER_PLAIN};
use super::tests::{cfg, SIZE};
use super::*;
use bth_io::sim::pair::B_PORT;
use bth_io::sim::{net_configs, net_conn_configs, pair_configs, LinkConfig, Net, Pair};
use std::cell::Cell;
use std::net::SocketAddrV4;
use std::time::Duration;

/// What the tests allow a disagreement, start to end, on either side.
const WITHIN: Duration = Duration::from_secs(1);

/// One side's report and how long it took, from the client's first turn to the app's end.
struct Ended {
    report: PerfReport,
    took: Duration,
}

/// Client in A, server in B over the simulated pair, each offering tcp_bth unless it runs
/// `--plain` (as bth-perf opens its connections), until both are done.
fn run_pair(client: PerfConfig, server: PerfConfig) -> (Ended, Ended) {
    let (mut a, mut b) = pair_configs(5);
    a.bth = !client.mode.plain;
    b.bth = !server.mode.plain;
    let mut p = Pair::new(a, b, LinkConfig::default());
    let (mut cl, mut sv) = (Client::new(client), Server::new(server));
    let start = p.now;
    let (mut c_end, mut s_end) = (None, None);
    let deadline = start + Duration::from_secs(10);
    while c_end.is_none() || s_end.is_none() {
        let now = p.now;
        if c_end.is_none() && cl.step(&mut p.a, now) {
            c_end = Some(now);
        }
        if let (None, Some(b)) = (s_end, p.b.as_mut()) {
            if sv.step(b, now) {
                s_end = Some(now);
            }
        }
        // The apps look at least every millisecond, as a driver's idle wait lets them (the
        // wire alone would jump to the next timer: TIME-WAIT's, a minute on).
        let next = deadline.min(now + Duration::from_millis(1));
        if !p.step(next) {
            p.now = next;
        }
        assert!(
            p.now < deadline,
            "not over by {:?}: client {:?} {:?}, server {:?} {:?}",
            p.now,
            p.a,
            cl.report().errors,
            p.b,
            sv.report().errors
        );
    }
    let took = |end: Option<Duration>| end.expect("ended") - start;
    (
        Ended {
            report: cl.into_report(),
            took: took(c_end),
        },
        Ended {
            report: sv.into_report(),
            took: took(s_end),
        },
    )
}

fn plain(mut c: PerfConfig) -> PerfConfig {
    c.mode.plain = true;
    c
}

/// Both ended within [`WITHIN`], each with exactly `client` and `server` as its errors.
fn check(c: &Ended, s: &Ended, client: &[PerfError], server: &[PerfError]) {
    println!(
        "client after {:?}: {}\nserver after {:?}: {}",
        c.took,
        list(&c.report.errors),
        s.took,
        list(&s.report.errors)
    );
    assert_eq!(c.report.errors, client, "client");
    assert_eq!(s.report.errors, server, "server");
    assert!(c.took <= WITHIN, "client took {:?}", c.took);
    assert!(s.took <= WITHIN, "server took {:?}", s.took);
    assert_eq!(c.report.messages + s.report.messages, 0, "nothing ran");
}

fn list(errors: &[PerfError]) -> String {
    let v: Vec<String> = errors.iter().map(ToString::to_string).collect();
    v.join(" | ")
}

/// `--plain` on the server only: the client's SYN offered tcp_bth and the server's SYN-ACK had
/// none. The server sees the offer in the handshake and refuses at once on the byte stream; the
/// client sends its hello framed, gets the refusal and the server's FIN, and says the server
/// runs --plain. It used to reset at once (`peer does not speak tcp_bth`), and the server,
/// never handed a connection, waited out its --timeout and said no client had connected.
#[test]
fn plain_on_the_server_only_is_named_on_both_sides_at_once() {
    let (c, s) = run_pair(cfg(PerfOp::Send), plain(cfg(PerfOp::Send)));
    check(
        &c,
        &s,
        &[PerfError::PeerNotBth { confirmed: true }],
        &[PerfError::ClientBth],
    );
    let (client, server) = (
        c.report.errors[0].to_string(),
        s.report.errors[0].to_string(),
    );
    assert_eq!(
        client,
        "the server runs --plain (its SYN-ACK carried no tcp_bth option); run both sides with \
         or without --plain"
    );
    assert!(
        server.starts_with("a client connected with tcp_bth"),
        "{server}"
    );
    assert!(
        server.ends_with("run both sides with or without --plain"),
        "{server}"
    );
}

/// `--plain` on the client only: its SYN had no tcp_bth option. The server sees that in the
/// handshake and refuses at once, in the byte stream's framing the --plain client reads, so
/// the client prints the cause too. It used to see only "connection reset by peer".
#[test]
fn plain_on_the_client_only_is_named_on_both_sides_at_once() {
    let (c, s) = run_pair(plain(cfg(PerfOp::Send)), cfg(PerfOp::Send));
    check(
        &c,
        &s,
        &[PerfError::Refused {
            reason: SERVER_NOT_PLAIN.into(),
        }],
        &[PerfError::ClientPlain],
    );
    assert_eq!(
        s.report.errors[0].to_string(),
        "a client connected without tcp_bth (plain TCP): it runs --plain and this server does \
         not; run both sides with or without --plain"
    );
    let client = c.report.errors[0].to_string();
    assert!(
        client.starts_with("the server refused the run: this server runs without --plain"),
        "{client}"
    );
}

/// The other options, as before: refused by the server, both sides name every one.
#[test]
fn other_options_are_refused_on_both_sides_at_once() {
    let mut client = cfg(PerfOp::Send);
    client.size = 4096;
    let (c, s) = run_pair(client, cfg(PerfOp::Send));
    let reason = format!("client asked for --size 4096, this server runs --size {SIZE}");
    check(
        &c,
        &s,
        &[PerfError::Refused {
            reason: reason.clone(),
        }],
        &[PerfError::OptionsDiffer { reason }],
    );
}

/// A --plain server facing a tcp_bth client of a bth-perf that does not look at the handshake
/// (the refusal a server of ours would send, here from the option check of the client's framed
/// hello) is covered by the same path: the client's hello says "no --plain". Its refusal text
/// names the cause too.
#[test]
fn the_plain_servers_refusal_names_the_cause() {
    assert!(SERVER_PLAIN.contains("this client's SYN offered tcp_bth"));
    assert!(SERVER_PLAIN.ends_with("run both sides with or without --plain"));
}

/// `qps` clients in A and `server_qps` servers in B on one endpoint each (as `bth-perf -q`
/// runs them: [`Conns`], the driver's own loop), over the simulated network. Returns each
/// side's reports and when each side was done (all its apps).
fn run_qps(
    client: PerfConfig,
    server: PerfConfig,
) -> ((Vec<PerfReport>, Duration), (Vec<PerfReport>, Duration)) {
    let (ea, eb) = net_configs(9);
    let mut net = Net::new(ea, eb, LinkConfig::default());
    let (mut a, mut b) = net_conn_configs(9);
    a.bth = !client.mode.plain;
    b.bth = !server.mode.plain;
    net.b.listen(B_PORT, b.clone()).expect("listen");
    let mut clients: Vec<Client> = (0..client.qps)
        .map(|i| Client::for_qp(client.clone(), i))
        .collect();
    let mut servers: Vec<Server> = (0..server.qps)
        .map(|_| Server::new(server.clone()))
        .collect();
    let remote = SocketAddrV4::new(bth_io::sim::pair::B_IP.into(), B_PORT);
    let start = net.now;
    let (c_end, s_end) = (Cell::new(None), Cell::new(None));
    {
        let mut cc = Conns::new(Role::Connect(remote.into()), a, &mut clients, |_| {});
        let mut sc = Conns::new(Role::Listen, b, &mut servers, |_| {});
        let mut c_app = |ep: &mut tcp_bth::Endpoint, now: Duration| {
            let done = bth_io::turn::App::turn(&mut cc, ep, now);
            if done && c_end.get().is_none() {
                c_end.set(Some(now));
            }
            done
        };
        let mut s_app = |ep: &mut tcp_bth::Endpoint, now: Duration| {
            let done = bth_io::turn::App::turn(&mut sc, ep, now);
            if done && s_end.get().is_none() {
                s_end.set(Some(now));
            }
            done
        };
        let deadline = start + Duration::from_secs(10);
        loop {
            // As in `run_pair`: the apps look at least every millisecond.
            let next = deadline.min(net.now + Duration::from_millis(1));
            if !net.step(&mut c_app, &mut s_app, next) {
                net.now = next;
            }
            if c_end.get().is_some() && s_end.get().is_some() {
                break;
            }
            assert!(net.now < deadline, "not over by {:?}", net.now);
        }
    }
    let (c_end, s_end) = (
        c_end.get().expect("client done"),
        s_end.get().expect("done"),
    );
    (
        (reports(clients), c_end - start),
        (reports(servers), s_end - start),
    )
}

fn reports<R: app::Role>(apps: Vec<PerfApp<R>>) -> Vec<PerfReport> {
    apps.into_iter().map(PerfApp::into_report).collect()
}

/// The errors of a side's connections, all together.
fn errors_of(reports: &[PerfReport]) -> Vec<PerfError> {
    aggregate(reports).errors
}

fn qps(mut c: PerfConfig, n: u32) -> PerfConfig {
    c.qps = n;
    c
}

/// Every disagreement with 8 connections on both sides: each side's run ends within a second,
/// with the cause named once, whatever the other connections did (refused too, or reset by a
/// client that stood down once it had its answer).
#[test]
fn eight_connections_that_disagree_end_at_once_with_one_reason_per_side() {
    let base = qps(cfg(PerfOp::Send), 8);
    let mut small = base.clone();
    small.size = 4096;
    let size_reason = format!("client asked for --size 4096, this server runs --size {SIZE}");
    let cases: Vec<(&str, PerfConfig, PerfConfig, PerfError, PerfError)> = vec![
        (
            "--size",
            small,
            base.clone(),
            PerfError::Refused {
                reason: size_reason.clone(),
            },
            PerfError::OptionsDiffer {
                reason: size_reason,
            },
        ),
        (
            "--plain on the server",
            base.clone(),
            plain(base.clone()),
            PerfError::PeerNotBth { confirmed: true },
            PerfError::ClientBth,
        ),
        (
            "--plain on the client",
            plain(base.clone()),
            base.clone(),
            PerfError::Refused {
                reason: SERVER_NOT_PLAIN.into(),
            },
            PerfError::ClientPlain,
        ),
    ];
    for (what, client, server, c_err, s_err) in cases {
        let ((c, c_took), (s, s_took)) = run_qps(client, server);
        println!("{what}: client after {c_took:?}, server after {s_took:?}");
        assert_eq!(errors_of(&c), [c_err], "{what}: client");
        assert_eq!(errors_of(&s), [s_err], "{what}: server");
        assert!(c_took <= WITHIN, "{what}: client took {c_took:?}");
        assert!(s_took <= WITHIN, "{what}: server took {s_took:?}");
    }
}

/// A client of `client_qps` connections against a server of `server_qps`: the first refusal
/// ends both runs at once, with one reason each.
fn first_refusal_ends_both(client_qps: u32, server_qps: u32) {
    let ((c, c_took), (s, s_took)) = run_qps(
        qps(cfg(PerfOp::Send), client_qps),
        qps(cfg(PerfOp::Send), server_qps),
    );
    let reason =
        format!("client asked for --qps {client_qps}, this server runs --qps {server_qps}");
    println!("client after {c_took:?}, server after {s_took:?}");
    assert_eq!(
        errors_of(&c),
        [PerfError::Refused {
            reason: reason.clone()
        }]
    );
    assert_eq!(errors_of(&s), [PerfError::OptionsDiffer { reason }]);
    assert!(c_took <= WITHIN, "client took {c_took:?}");
    assert!(s_took <= WITHIN, "server took {s_took:?}");
}

/// `-q 8` against a server of `-q 1`: the server has one app, so seven hellos find no posted
/// receive. The first refusal ends the client's run: the other seven stand down at once
/// (they used to wait out the RNR timeout, 10 s, and report "receiver not ready" each).
#[test]
fn more_connections_than_the_server_runs_end_with_the_first_refusal() {
    first_refusal_ends_both(8, 1);
}

/// `-q 1` against a server of `-q 8`: seven of the server's connections never come. The
/// refusal of the one that does ends the server's run (it used to wait out its --timeout).
#[test]
fn fewer_connections_than_the_server_runs_end_with_the_first_refusal() {
    first_refusal_ends_both(1, 8);
}

/// Runs that agree are not touched by any of it: 4 connections each way, every message.
#[test]
fn connections_that_agree_all_run() {
    let run = qps(cfg(PerfOp::Send), 4);
    let ((c, _), (s, _)) = run_qps(run.clone(), run);
    let (c, s) = (aggregate(&c), aggregate(&s));
    assert!(c.errors.is_empty() && s.errors.is_empty(), "{c:?} {s:?}");
    assert_eq!(
        (c.messages, s.messages),
        (4 * tests::COUNT, 4 * tests::COUNT)
    );
}
