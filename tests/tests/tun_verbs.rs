//! Verbs over the io_uring TUN data path, between two namespaces this test creates (our stack
//! in each, `bth_testbed::topology::TwoNs`): zero-length SEND and RDMA WRITE with immediate run by
//! the perf apps (every immediate checked, in order), over veth and through the impairment
//! relay; and the error completions an IB RC user relies on (a SEND longer than the receive, a
//! WRITE with a bad rkey, a SEND that finds no receive within the RNR timeout), each on both
//! sides, by small scripted apps (`bth_perf::tunpair::run_apps`). The same rules on the
//! simulated link: tests/tests/verbs_status.rs.

use bth_framer::WorkRequest;
use bth_io::sim::LinkConfig;
use bth_perf::tunpair::{client_config, run_apps, server_config, ConnApp, Side};
use bth_perf::{PerfConfig, PerfOp};
use bth_placement::{Access, WcStatus};
use bth_testbed::topology::TwoNs;
use bth_tests::tunpair::{impaired_link, run_perf};
use bth_tests::{assert_peer_nak, pattern};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tcp_bth::wire::{MsgClass, NakCode};
use tcp_bth::{Completion, Config, Connection, ConnectionError, Mode, WcOp};

static N: AtomicU32 = AtomicU32::new(0);

/// Namespaces with a name no other test of this run uses; deleted when dropped (also when the
/// test panics).
fn namespaces(relay: Option<LinkConfig>) -> TwoNs {
    let prefix = format!(
        "bv{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    );
    TwoNs::create(&prefix, relay).expect("namespaces")
}

/// Zero-length messages per run.
const ZERO_LENGTH_COUNT: u64 = 20_000;

/// `count` zero-length messages of `op` with verify: every one arrives once, in order, with
/// its immediate and length 0 (the server checks both), and none is lost or added.
fn zero_length(op: PerfOp, relay: Option<LinkConfig>) {
    let cfg = PerfConfig {
        op,
        size: 0,
        count: ZERO_LENGTH_COUNT,
        tx_depth: 16,
        rx_depth: 16,
        mode: bth_perf::RunMode::verified(),
        seed: 5,
        ..PerfConfig::default()
    };
    let mut ns = namespaces(relay);
    let (c, s) = run_perf(&ns, &cfg);
    let relay = ns.stop_relay();
    assert!(c.errors.is_empty(), "client errors: {:?}", c.errors);
    assert!(s.errors.is_empty(), "server errors: {:?}", s.errors);
    let n = cfg.count;
    assert_eq!((c.messages, c.bytes), (n, 0), "client");
    assert_eq!((s.messages, s.bytes), (n, 0), "server");
    assert_eq!(s.verified, n, "every immediate checked at the server");
    let order: Vec<u64> = s.arrived.iter().map(|a| a.0).collect();
    assert!(
        order.iter().copied().eq(0..n),
        "the server saw the messages in order"
    );
    let how = match relay {
        Some(r) => {
            let dropped = r.a_to_b.dropped() + r.b_to_a.dropped();
            assert!(dropped > 0, "the relay dropped nothing: {r:?}");
            format!("relay ({dropped} dropped)")
        }
        None => "veth".into(),
    };
    println!(
        "{how}: {n} zero-length {op} in {:?} ({:.0} messages/s, p50 {:?})",
        c.elapsed,
        c.msgs_per_sec(),
        c.percentile(0.5).unwrap_or_default()
    );
}

fn zero_length_send_with_imm_over_veth() {
    zero_length(PerfOp::Send, None);
}

fn zero_length_write_with_imm_over_veth() {
    zero_length(PerfOp::WriteImm, None);
}

fn zero_length_send_with_imm_through_the_impairment_relay() {
    zero_length(PerfOp::Send, Some(impaired_link()));
}

fn zero_length_write_with_imm_through_the_impairment_relay() {
    zero_length(PerfOp::WriteImm, Some(impaired_link()));
}

/// A scripted side: once the connection speaks tcp_bth, every driver turn polls its
/// completions and then runs `turn` with them; done when `turn` says so.
struct Script<F> {
    turn: F,
    completions: Vec<Completion>,
    /// Driver time of the first turn in tcp_bth mode, and of the first turn that saw the
    /// connection failed.
    started: Option<Duration>,
    failed: Option<Duration>,
}

impl<F: FnMut(&mut Connection, &[Completion]) -> bool + Send + 'static> ConnApp for Script<F> {
    fn step(&mut self, c: &mut Connection, now: Duration) -> bool {
        if !matches!(c.mode(), Mode::Bth { .. }) {
            // Plain would be a set-up error: stop, and let the checks say so.
            return c.mode() == Mode::Plain;
        }
        self.started.get_or_insert(now);
        self.completions
            .extend(std::iter::from_fn(|| c.poll_completion()));
        if c.error().is_some() {
            self.failed.get_or_insert(now);
        }
        (self.turn)(c, &self.completions)
    }
}

fn script<F: FnMut(&mut Connection, &[Completion]) -> bool>(turn: F) -> Script<F> {
    Script {
        turn,
        completions: Vec::new(),
        started: None,
        failed: None,
    }
}

/// Run a server and a client script over veth; each side's run is bounded by 30 s.
fn run_scripts<S, C>(
    server: Script<S>,
    client_cfg: Config,
    client: Script<C>,
) -> (Side<Script<S>>, Side<Script<C>>)
where
    Script<S>: ConnApp + Send + 'static,
    Script<C>: ConnApp + Send + 'static,
{
    let ns = namespaces(None);
    let limit = Duration::from_secs(30);
    run_apps(
        &ns,
        (server_config(true), server),
        (client_cfg, client),
        limit,
    )
    .expect("run")
}

/// (wr_id, op, status) of each completion.
fn summary(c: &[Completion]) -> Vec<(u64, WcOp, WcStatus)> {
    c.iter().map(|c| (c.wr_id, c.op, c.status)).collect()
}

/// After a failure, new work of every kind is accepted and completes at once, flushed, buffers
/// handed back.
fn posts_complete_flushed(c: &mut Connection) {
    while c.poll_completion().is_some() {}
    c.post_send(WorkRequest::send(90, b"late".to_vec(), Some(9)))
        .unwrap();
    c.post_recv(91, vec![1; 33]).unwrap();
    c.post_read(92, 0x100, 0x1000, vec![2; 44]).unwrap();
    let got: Vec<_> = std::iter::from_fn(|| c.poll_completion())
        .map(|c| (c.wr_id, c.status, c.buf))
        .collect();
    let flush = WcStatus::WrFlushError;
    assert_eq!(
        got,
        [
            (90, flush, None),
            (91, flush, Some(vec![1; 33])),
            (92, flush, Some(vec![2; 44])),
        ]
    );
}

/// The server posts an 8 KiB and a 100-byte receive; the client SENDs 1000 bytes, then 5000
/// bytes, then 10. Server: the first receive succeeds with the bytes, the second completes
/// `LocalLengthError` with its buffer, error `LocalLength`. Client: the first SEND succeeds,
/// the second completes `RemoteInvalidRequest` (the server's RST carries a NAK), the third
/// flushes, error `PeerNak(InvalidRequest)` naming the second's MSN. Then posts on either side
/// complete flushed.
fn send_longer_than_the_receive_over_tun() {
    let first = pattern(1, 1000);
    let mut posted = false;
    let server = script(move |c: &mut Connection, _: &[Completion]| {
        if !posted {
            c.post_recv(10, vec![0u8; 8192]).unwrap();
            c.post_recv(11, vec![0u8; 100]).unwrap();
            posted = true;
        }
        c.error().is_some()
    });
    let mut posted = false;
    let client = script(move |c: &mut Connection, done: &[Completion]| {
        if !posted {
            c.post_send(WorkRequest::send(1, pattern(1, 1000).to_vec(), None))
                .unwrap();
            c.post_send(WorkRequest::send(2, pattern(2, 5000).to_vec(), None))
                .unwrap();
            c.post_send(WorkRequest::send(3, pattern(3, 10).to_vec(), None))
                .unwrap();
            posted = true;
        }
        c.error().is_some() && done.len() >= 3
    });
    let (mut s, mut c) = run_scripts(server, client_config(true), client);
    let sc = &s.app.completions;
    assert_eq!(
        summary(sc),
        [
            (10, WcOp::Recv, WcStatus::Success),
            (11, WcOp::Recv, WcStatus::LocalLengthError)
        ]
    );
    assert_eq!(sc[0].byte_len, 1000);
    assert_eq!(&sc[0].buf.as_ref().unwrap()[..1000], &first[..]);
    assert_eq!(sc[1].buf.as_ref().map(Vec::len), Some(100));
    assert_eq!(s.conn.error(), Some(ConnectionError::LocalLength));
    assert_eq!(
        summary(&c.app.completions),
        [
            (1, WcOp::Send, WcStatus::Success),
            (2, WcOp::Send, WcStatus::RemoteInvalidRequest),
            (3, WcOp::Send, WcStatus::WrFlushError)
        ]
    );
    let long_msn = c.app.completions[1].msn;
    assert_peer_nak(&c.conn, NakCode::InvalidRequest, MsgClass::Send, long_msn);
    assert_eq!(
        (s.conn.stats().naks_sent, c.conn.stats().naks_received),
        (1, 1)
    );
    posts_complete_flushed(&mut s.conn);
    posts_complete_flushed(&mut c.conn);
}

/// The server registers a 64 KiB region and SENDs its rkey and address (12 bytes); the client
/// WRITEs 4000 bytes there with immediate, then 3000 bytes with the rkey's key byte changed,
/// then SENDs. Client: the first WRITE succeeds, the bad one completes `RemoteAccessError`
/// (NAK RemoteAccess, WRITE class), the SEND flushes. Server: the good WRITE's completion (imm,
/// 4000 bytes, in place), error `RemoteAccess`, nothing else written.
fn write_with_a_bad_rkey_over_tun() {
    let data = pattern(4, 4000);
    let mut region = None;
    let server = script(move |c: &mut Connection, _: &[Completion]| {
        if region.is_none() {
            let mr = c.register_mr(
                vec![0u8; 64 * 1024],
                Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            );
            let mr = mr.unwrap();
            let mut hello = mr.rkey.to_be_bytes().to_vec();
            hello.extend_from_slice(&mr.addr.to_be_bytes());
            c.post_send(WorkRequest::send(1, hello.to_vec(), None))
                .unwrap();
            region = Some(mr);
        }
        c.error().is_some()
    });
    let (mut hello_posted, mut posted) = (false, false);
    let good = data.clone();
    let client = script(move |c: &mut Connection, done: &[Completion]| {
        if !hello_posted {
            c.post_recv(100, vec![0u8; 12]).unwrap();
            hello_posted = true;
        }
        let hello = done.iter().find(|x| x.wr_id == 100 && x.is_success());
        if let (false, Some(h)) = (posted, hello) {
            let b = h.buf.as_ref().expect("hello buffer");
            let rkey = u32::from_be_bytes(b[..4].try_into().unwrap());
            let addr = u64::from_be_bytes(b[4..12].try_into().unwrap());
            c.post_send(WorkRequest::write(1, rkey, addr, good.to_vec(), Some(77)))
                .unwrap();
            c.post_send(WorkRequest::write(
                2,
                rkey ^ 1,
                addr,
                pattern(5, 3000).to_vec(),
                None,
            ))
            .unwrap();
            c.post_send(WorkRequest::send(3, b"after".to_vec(), None))
                .unwrap();
            posted = true;
        }
        c.error().is_some() && done.len() >= 4
    });
    let (s, c) = run_scripts(server, client_config(true), client);
    assert_eq!(
        summary(&c.app.completions),
        [
            (100, WcOp::Recv, WcStatus::Success),
            (1, WcOp::RdmaWrite, WcStatus::Success),
            (2, WcOp::RdmaWrite, WcStatus::RemoteAccessError),
            (3, WcOp::Send, WcStatus::WrFlushError)
        ]
    );
    let bad_msn = c.app.completions[2].msn;
    assert_peer_nak(&c.conn, NakCode::RemoteAccess, MsgClass::Write, bad_msn);
    let sc = &s.app.completions;
    assert_eq!(
        summary(sc),
        [
            (1, WcOp::Send, WcStatus::Success),
            (0, WcOp::RecvRdmaWithImm, WcStatus::Success)
        ]
    );
    assert_eq!((sc[1].imm, sc[1].byte_len), (Some(77), 4000));
    assert_eq!(s.conn.error(), Some(ConnectionError::RemoteAccess));
    let rkey = u32::from_be_bytes(
        c.app.completions[0].buf.as_ref().unwrap()[..4]
            .try_into()
            .unwrap(),
    );
    let mr = s.conn.mr_bytes(rkey).expect("the region stays registered");
    assert_eq!(&mr[..4000], &data[..]);
    assert!(
        mr[4000..].iter().all(|&x| x == 0),
        "the bad WRITE wrote nothing"
    );
}

/// The server posts no receive; the client (RNR timeout 500 ms) SENDs twice. The first
/// completes `RnrRetryExceeded` no sooner than 500 ms after the client started (and well within
/// a second more), the second flushes, the client's error names the first's MSN, and the
/// server sees the client's RST: `Reset`.
fn send_without_a_receive_ends_in_rnr_retry_exceeded_over_tun() {
    let rnr = Duration::from_millis(500);
    let server = script(|c: &mut Connection, _: &[Completion]| c.error().is_some());
    let mut msn = None;
    let client = script(move |c: &mut Connection, done: &[Completion]| {
        if msn.is_none() {
            msn = Some(
                c.post_send(WorkRequest::send(1, pattern(6, 100).to_vec(), None))
                    .unwrap(),
            );
            c.post_send(WorkRequest::send(2, pattern(7, 100).to_vec(), None))
                .unwrap();
        }
        c.error().is_some() && done.len() >= 2
    });
    let client_cfg = Config {
        rnr_timeout: Some(rnr),
        ..client_config(true)
    };
    let (s, c) = run_scripts(server, client_cfg, client);
    assert_eq!(
        summary(&c.app.completions),
        [
            (1, WcOp::Send, WcStatus::RnrRetryExceeded),
            (2, WcOp::Send, WcStatus::WrFlushError)
        ]
    );
    let msn = c.app.completions[0].msn;
    assert_eq!(
        c.conn.error(),
        Some(ConnectionError::RnrRetryExceeded { msn })
    );
    assert_eq!(s.conn.error(), Some(ConnectionError::Reset));
    let waited = c.app.failed.unwrap() - c.app.started.unwrap();
    assert!(
        waited >= rnr && waited < rnr + Duration::from_secs(1),
        "gave up after {waited:?}"
    );
    println!("RNR retry exceeded after {waited:?} (timeout {rnr:?})");
}

bth_tests::test_main!(
    zero_length_send_with_imm_over_veth[NetAdmin],
    zero_length_write_with_imm_over_veth[NetAdmin],
    zero_length_send_with_imm_through_the_impairment_relay[NetAdmin],
    zero_length_write_with_imm_through_the_impairment_relay[NetAdmin],
    send_longer_than_the_receive_over_tun[NetAdmin],
    write_with_a_bad_rkey_over_tun[NetAdmin],
    send_without_a_receive_ends_in_rnr_retry_exceeded_over_tun[NetAdmin],
);
