//! Two bth-perf sides that disagree, over the io_uring TUN data path between two namespaces
//! (server in A, client in B, one thread each, as `bth-perf server` and `client` run them):
//! `--plain` on one side only, and a client of `-q 8` against a server of `-q 1`. Both sides
//! must end within moments of the client's first turn, each naming the cause once. The bound
//! here is generous (3 s, for a loaded 2-core machine); the time each took is printed.
//! `tcp-bth/perf/src/tests_mismatch.rs` checks the same in simulated time, within a second.

use bth_perf::drive::ConnApp;
use bth_perf::tunpair::{client_config, run_apps_many, server_config};
use bth_perf::{Client, PerfConfig, PerfError, PerfReport, RunMode, RunRefused, Server};
use bth_testbed::topology::TwoNs;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use tcp_bth::Connection;

static N: AtomicU32 = AtomicU32::new(0);

/// The bound on a refusal's real time, from the client's first turn to both sides' end.
const BOUND: Duration = Duration::from_secs(3);

/// An app with the real time of its first turn and of its end.
struct Timed<A> {
    app: A,
    first: Option<Instant>,
    end: Option<Instant>,
}

impl<A> Timed<A> {
    fn new(app: A) -> Timed<A> {
        Timed {
            app,
            first: None,
            end: None,
        }
    }
}

impl<A: ConnApp> ConnApp for Timed<A> {
    fn step(&mut self, c: &mut Connection, now: Duration) -> bool {
        self.first.get_or_insert_with(Instant::now);
        let done = self.app.step(c, now);
        if done {
            self.end.get_or_insert_with(Instant::now);
        }
        done
    }

    fn join_run(&mut self, run: &RunRefused) {
        self.app.join_run(run);
    }

    fn done_unopened(&self) -> bool {
        self.app.done_unopened()
    }
}

fn cfg(qps: u32, plain: bool) -> PerfConfig {
    PerfConfig {
        size: 4096,
        count: 100,
        qps,
        mode: RunMode {
            plain,
            ..RunMode::default()
        },
        ..PerfConfig::default()
    }
}

/// Run `client` (its `qps` connections) against `server` (its own); each side's errors, all
/// connections together, and the real time from the client's first turn to the last end.
fn run(client: PerfConfig, server: PerfConfig) -> (Vec<PerfError>, Vec<PerfError>, Duration) {
    let prefix = format!(
        "bm{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    );
    let ns = TwoNs::create(&prefix, None).expect("namespaces");
    let servers = (0..server.qps)
        .map(|_| Timed::new(Server::new(server.clone())))
        .collect();
    let clients = (0..client.qps)
        .map(|i| Timed::new(Client::for_qp(client.clone(), i)))
        .collect();
    let started = Instant::now();
    let (s, c) = run_apps_many(
        &ns,
        (server_config(!server.mode.plain), servers),
        (client_config(!client.mode.plain), clients),
        Duration::from_secs(30),
    )
    .expect("the run");
    let whole = started.elapsed();
    let first = c.apps.iter().filter_map(|a| a.first).min().expect("a turn");
    let last = c
        .apps
        .iter()
        .filter_map(|a| a.end)
        .chain(s.apps.iter().filter_map(|a| a.end))
        .max()
        .expect("an end");
    let errors = |reports: Vec<PerfReport>| bth_perf::aggregate(&reports).errors;
    let c_err = errors(c.apps.into_iter().map(|a| a.app.into_report()).collect());
    let s_err = errors(s.apps.into_iter().map(|a| a.app.into_report()).collect());
    let took = last.saturating_duration_since(first);
    println!(
        "refusal took {took:?} (the whole run with both TUN devices {whole:?})\n  client: {}\n  \
         server: {}",
        list(&c_err),
        list(&s_err)
    );
    (c_err, s_err, took)
}

fn list(errors: &[PerfError]) -> String {
    let v: Vec<String> = errors.iter().map(ToString::to_string).collect();
    v.join(" | ")
}

/// `--plain` on the server only: the client says the server runs --plain, the server that the
/// client connected with tcp_bth; both at once (the server used to wait out its --timeout).
fn plain_on_the_server_only_is_named_on_both_sides_at_once() {
    let (c, s, took) = run(cfg(1, false), cfg(1, true));
    assert_eq!(c, [PerfError::PeerNotBth { confirmed: true }]);
    assert_eq!(s, [PerfError::ClientBth]);
    assert!(took < BOUND, "took {took:?}");
}

/// `--plain` on the client only: the server refuses on the byte stream, the client prints why
/// (it used to see only "connection reset by peer").
fn plain_on_the_client_only_is_named_on_both_sides_at_once() {
    let (c, s, took) = run(cfg(1, true), cfg(1, false));
    assert!(
        matches!(&c[..], [PerfError::Refused { reason }] if reason.contains("--plain")),
        "{c:?}"
    );
    assert_eq!(s, [PerfError::ClientPlain]);
    assert!(took < BOUND, "took {took:?}");
}

/// A client of 8 connections against a server of 1: the server's refusal of the one it serves
/// ends the client's run, with no "receiver not ready" from the seven hellos nobody took (they
/// used to wait out the RNR timeout, 10 s).
fn more_connections_than_the_server_runs_end_with_the_first_refusal() {
    let (c, s, took) = run(cfg(8, false), cfg(1, false));
    let reason = "client asked for --qps 8, this server runs --qps 1".to_string();
    assert_eq!(
        c,
        [PerfError::Refused {
            reason: reason.clone()
        }]
    );
    assert_eq!(s, [PerfError::OptionsDiffer { reason }]);
    assert!(took < BOUND, "took {took:?}");
}

bth_tests::test_main!(
    plain_on_the_server_only_is_named_on_both_sides_at_once[NetAdmin],
    plain_on_the_client_only_is_named_on_both_sides_at_once[NetAdmin],
    more_connections_than_the_server_runs_end_with_the_first_refusal[NetAdmin],
);
