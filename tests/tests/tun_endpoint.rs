//! The io_uring TUN driver serving a whole `tcp_bth::Endpoint` between two network
//! namespaces (`bth_tests::dualns`): one driver per namespace, each serving one endpoint with
//! any number of connections over IPv4 and IPv6; refused and unanswered connects; a SYN
//! flood against a server with an established QP; the driver's end (every read and write
//! cancelled and reaped before its buffers are freed); and the fallbacks an older kernel gets.

use bth_io::tun::{DriverStats, Features, Shutdown};
use bth_io::turn::{App, PacketIo, TurnStats};
use bth_tests::dualns::{
    open_driver, open_driver_mtu, open_driver_with, DualNs, Side as Addrs, A, B,
};
use bth_tests::netns::Netns;
use bth_tests::qpwork::{Plan, Side, PORT};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tcp_bth::wire::IpPair;
use tcp_bth::{Config, ConnectionError, Endpoint, EndpointConfig};

const LIMIT: Duration = Duration::from_secs(60);

/// What one side's thread hands back.
struct Served<T> {
    app: T,
    ep: Endpoint,
    run: Result<TurnStats, String>,
    driver: DriverStats,
    shutdown: Shutdown,
    /// From `go` to the end of the run.
    elapsed: Duration,
}

/// A side started in its namespace: its driver is up, its app waits for `go`.
struct Started<T> {
    go: mpsc::Sender<()>,
    thread: JoinHandle<Served<T>>,
}

/// One side: its endpoint's settings, the connection template it listens on [`PORT`] with
/// (if any), its application.
type Spec<T> = (EndpointConfig, Option<Config>, T);

fn start<T: App + Send + 'static>(
    ns: &DualNs,
    side_a: bool,
    spec: Spec<T>,
    features: Features,
    mtu: u32,
) -> Started<T> {
    let (ep_cfg, listen, mut app) = spec;
    let (name, me) = ns.side(side_a);
    let (ready_tx, ready_rx) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let mut d = match open_driver_mtu(&name, &me, features, mtu) {
            Ok(d) => d,
            Err(e) => {
                let _ = ready_tx.send(Err(e.to_string()));
                panic!("driver in {name}: {e}");
            }
        };
        // Listening before the peer may send its first SYN.
        let mut ep = Endpoint::new(ep_cfg);
        ep.set_max_packet(d.max_packet());
        if let Some(template) = listen {
            ep.listen(PORT, template).expect("listen");
        }
        let _ = ready_tx.send(Ok(()));
        go_rx.recv().expect("go");
        let t0 = Instant::now();
        let run = d.serve(&mut ep, &mut app, LIMIT).map_err(|e| e.to_string());
        let elapsed = t0.elapsed();
        let driver = d.stats();
        let shutdown = d.close();
        Served {
            app,
            ep,
            run,
            driver,
            shutdown,
            elapsed,
        }
    });
    ready_rx
        .recv()
        .expect("side thread died")
        .expect("driver set-up");
    Started { go, thread }
}

fn finish<T>(s: Started<T>) -> JoinHandle<Served<T>> {
    s.go.send(()).expect("side thread gone");
    s.thread
}

fn join<T>(h: JoinHandle<Served<T>>) -> Served<T> {
    h.join().expect("side thread panicked")
}

/// Both sides up, then both go: neither side's first SYN meets a namespace without its TUN.
fn run_two<TA: App + Send + 'static, TB: App + Send + 'static>(
    ns: &DualNs,
    a: Spec<TA>,
    b: Spec<TB>,
) -> (Served<TA>, Served<TB>) {
    run_two_with(ns, a, b, Features::ALL, 1500)
}

/// [`run_two`] with drivers using only the io_uring `features` given, on TUN devices of MTU
/// `mtu` (the namespaces' veth pair must carry it).
fn run_two_with<TA: App + Send + 'static, TB: App + Send + 'static>(
    ns: &DualNs,
    a: Spec<TA>,
    b: Spec<TB>,
    features: Features,
    mtu: u32,
) -> (Served<TA>, Served<TB>) {
    let a = start(ns, true, a, features, mtu);
    let b = start(ns, false, b, features, mtu);
    let (a, b) = (finish(a), finish(b));
    (join(a), join(b))
}

fn ep_cfg(me: &Addrs) -> EndpointConfig {
    EndpointConfig {
        local: me.locals(),
        ..EndpointConfig::default()
    }
}

/// Connections for IPv4 and IPv6 alike: the default MSS is for IPv4, and an IPv6
/// connection lowers it by 20 bytes itself (its header is 20 bytes longer).
fn conn_cfg() -> Config {
    Config::default()
}

/// No error, every message of every accepted QP verified, a clean run and a clean end, with
/// every io_uring feature of the kernel in use.
fn check(name: &str, s: &Served<Side>, qps: u64, plan: Plan) {
    verified(name, s, qps, plan);
    let d = &s.driver;
    assert!(d.multishot_read && d.coop_taskrun, "{name}: {d:?}");
    // One multishot read stands for all 128 receive buffers.
    assert_eq!(s.shutdown.reads, 1, "{name}: the read was armed");
    // At MTU 1500 no payload reaches the driver's 2 KiB gathering threshold: every byte is
    // copied once into its transmit buffer.
    assert_eq!(one_copy_per_byte(name, s), 0, "{name}");
    in_order(name, s);
}

/// No error, every message of every accepted QP verified, a clean end.
fn verified(name: &str, s: &Served<Side>, qps: u64, plan: Plan) {
    assert!(s.run.is_ok(), "{name}: {:?}", s.run);
    assert_eq!(s.app.verified, qps * u64::from(plan.messages), "{name}");
    assert!(s.shutdown.all_reaped(), "{name}: {:?}", s.shutdown);
    assert!(s.driver.packets_in > 0 && s.driver.packets_out > 0);
    assert_eq!(s.driver.read_errors + s.driver.writes_refused, 0, "{name}");
}

/// Every payload byte was copied at most once in user space on each side: on send, into its
/// segment straight in the driver's transmit buffer (payloads under 2 KiB) or not at all
/// (larger ones, written from the application's buffer: `gathered`), the driver copying
/// nothing; on receive, from the received segment into the posted buffer. Checksums were left
/// to the device and trusted from it. Returns the payload bytes sent gathered.
fn one_copy_per_byte(name: &str, s: &Served<Side>) -> u64 {
    assert_eq!(s.driver.bytes_copied, 0, "{name}: a packet was copied");
    assert_eq!(s.ep.stats().tx_payload_copied, 0, "{name}");
    let (mut sent, mut tx_copied, mut gathered, mut placed, mut rx_copied) = (0, 0, 0, 0, 0);
    for h in s.ep.handles() {
        let c = s.ep.conn(h).expect("a listed handle");
        let st = c.stats();
        sent += st.bytes_sent + st.bytes_retransmitted;
        tx_copied += st.tx_payload_copied;
        gathered += st.tx_payload_gathered;
        let p = c.placement_counters();
        placed += p.bytes_placed;
        rx_copied += p.bytes_copied;
    }
    assert!(sent + placed > 0, "{name}: no payload moved");
    assert_eq!(
        tx_copied + gathered,
        sent,
        "{name}: send-side copies per payload byte sent"
    );
    assert_eq!(
        gathered > 0,
        s.driver.packets_gathered > 0,
        "{name}: the driver's gathered writes and the connections' gathered bytes disagree"
    );
    assert_eq!(
        rx_copied, placed,
        "{name}: receive-side copies per byte placed"
    );
    let d = &s.driver;
    assert!(
        d.csum_offloaded > 0 && d.csum_trusted > 0,
        "{name}: checksum offload unused: {d:?}"
    );
    gathered
}

/// The kernel took the io-wq worker limit (Linux 5.15's IORING_REGISTER_IOWQ_MAX_WORKERS),
/// which keeps the writes in order, so on this clean path no segment arrived older than one
/// before it. (These workloads did not show the reordering of io-wq workers even without the
/// limit; 24 request/responses of 16 MiB did.)
fn in_order(name: &str, s: &Served<Side>) {
    let d = &s.driver;
    assert!(
        d.ordered_writes,
        "{name}: writes may leave out of order: {d:?}"
    );
    for h in s.ep.handles() {
        let st = s.ep.conn(h).expect("a listed handle").stats();
        assert_eq!(st.paws_drops, 0, "{name}: segments arrived out of order");
    }
}

/// Both sides' errors at once: the first failure usually ends the other side's run too.
fn no_errors(a: &Served<Side>, b: &Served<Side>) {
    assert!(
        a.app.errors.is_empty() && b.app.errors.is_empty(),
        "A: {:?}\nB: {:?}",
        a.app.errors,
        b.app.errors
    );
}

fn rate(side: &Side, driver: &DriverStats, elapsed: Duration) -> String {
    let gbps = side.bytes as f64 * 8.0 / elapsed.as_secs_f64() / 1e9;
    format!(
        "{} bytes received in {elapsed:?} ({gbps:.2} Gbit/s), {} packets in / {} out, {} enters",
        side.bytes, driver.packets_in, driver.packets_out, driver.enters
    )
}

fn rates(a: &Served<Side>, b: &Served<Side>) {
    println!("A: {}", rate(&a.app, &a.driver, a.elapsed));
    println!("B: {}", rate(&b.app, &b.driver, b.elapsed));
}

/// `n` QPs each way (ids from 0 on A, from 100 on B; QP `q` over IPv6 when `v6(q)`), every
/// byte checked on both sides.
fn qps_both_ways(tag: &str, plan: Plan, n: u32, v6: fn(u32) -> bool) -> [Served<Side>; 2] {
    let [a, b] = run_qps(tag, plan, n, v6, Features::ALL, 1500);
    check("A", &a, n.into(), plan);
    check("B", &b, n.into(), plan);
    [a, b]
}

/// [`qps_both_ways`] with drivers using only the io_uring `features` given, on a path of MTU
/// `mtu` (connections' MSS from it), unchecked but for errors.
fn run_qps(
    tag: &str,
    plan: Plan,
    n: u32,
    v6: fn(u32) -> bool,
    features: Features,
    mtu: u32,
) -> [Served<Side>; 2] {
    let ns = DualNs::create_mtu(tag, mtu).expect("namespaces");
    // The tools' MSS for the MTU (an IPv6 connection takes 20 more off itself).
    let conn_cfg = || Config {
        mss: bth_perf::drive::mss_for_mtu(mtu),
        ..conn_cfg()
    };
    let qps = |first: u32, me: &Addrs, peer: &Addrs| -> Vec<(u32, IpPair)> {
        (first..first + n)
            .map(|q| (q, me.to(peer, v6(q))))
            .collect()
    };
    let a = Side::new(plan, conn_cfg(), qps(0, &A, &B), n as usize);
    let b = Side::new(plan, conn_cfg(), qps(100, &B, &A), n as usize);
    let (a, b) = run_two_with(
        &ns,
        (ep_cfg(&A), Some(conn_cfg()), a),
        (ep_cfg(&B), Some(conn_cfg()), b),
        features,
        mtu,
    );
    no_errors(&a, &b);
    rates(&a, &b);
    [a, b]
}

fn eight_qps_each_way_over_ipv4() {
    let plan = Plan {
        messages: 40,
        max_size: 64 << 10,
        depth: 4,
    };
    let [a, b] = qps_both_ways("e8", plan, 8, |_| false);
    // 16 connections on each endpoint: 8 opened, 8 accepted.
    assert_eq!((a.ep.len(), b.ep.len()), (16, 16));
    assert_eq!(a.ep.stats().established, 8);
}

/// At MTU 9000 a segment carries up to 8,920 bytes (IPv4) or 8,900 (IPv6): every payload of
/// 2 KiB or more leaves from the application's own buffer in a gathered write (`writev`, no
/// user-space copy), the shorter ones (a message's last segment) are copied into the
/// transmit buffer; every byte verified on arrival, each counted once either way.
fn jumbo_segments_leave_from_the_applications_buffers() {
    let plan = Plan {
        messages: 32,
        max_size: 256 << 10,
        depth: 4,
    };
    let n = 2;
    let [a, b] = run_qps("j9", plan, n, |q| q % 2 == 1, Features::ALL, 9000);
    for (name, s) in [("A", &a), ("B", &b)] {
        verified(name, s, n.into(), plan);
        let sent: u64 =
            s.ep.handles()
                .map(|h| s.ep.conn(h).expect("handle").stats().bytes_sent)
                .sum();
        let gathered = one_copy_per_byte(name, s);
        assert!(
            gathered * 10 >= sent * 9,
            "{name}: {gathered} of {sent} bytes gathered; messages of up to 256 KiB in segments of 8.9 KB"
        );
        assert!(s.driver.packets_gathered > 0, "{name}: {:?}", s.driver);
    }
}

fn ipv6_and_ipv4_qps_share_one_driver() {
    let plan = Plan {
        messages: 24,
        max_size: 32 << 10,
        depth: 4,
    };
    // Three QPs over IPv6 and one over IPv4 each way, on the same endpoints and rings.
    let sides = qps_both_ways("v6", plan, 4, |q| q % 4 != 3);
    for s in &sides {
        let v6 =
            s.ep.handles()
                .filter(|&h| matches!(s.ep.conn(h).map(|c| c.config().ip), Some(IpPair::V6 { .. })))
                .count();
        assert_eq!(v6, 6, "3 opened and 3 accepted over IPv6");
    }
}

/// The paths a kernel older than 5.15 takes, on this one: no multishot read (one
/// `READ_FIXED` per receive buffer), no cooperative task running, no io-wq worker limit
/// (writes may be handed to several workers and leave out of order). Two QPs each way,
/// every byte checked; the driver says which features it used.
fn the_fallbacks_for_older_kernels_carry_verified_traffic() {
    let plan = Plan {
        messages: 24,
        max_size: 64 << 10,
        depth: 4,
    };
    let [a, b] = run_qps("fb", plan, 2, |_| false, Features::NONE, 1500);
    for (name, s) in [("A", &a), ("B", &b)] {
        verified(name, s, 2, plan);
        assert_eq!(one_copy_per_byte(name, s), 0, "{name}");
        let d = &s.driver;
        // What the driver says it set up (these follow from what it asked for)...
        assert!(
            !d.multishot_read && !d.coop_taskrun && !d.ordered_writes,
            "{name}: a feature was used though turned off: {d:?}"
        );
        // ... and what shows it ran the fallback reads: one fixed read per receive buffer,
        // each cancelled and reaped at the end, and no multishot read to re-arm.
        assert_eq!(d.read_rearms, 0, "{name}: no multishot read to re-arm");
        assert!(s.shutdown.reads > 1, "{name}: {:?}", s.shutdown);
    }
}

/// A's endpoint with no listener: B's connects to it are refused (RST); a connect to an
/// address in A's TUN subnet that no stack owns is dropped there and times out after its
/// SYN retries.
fn connects_to_nobody_fail_with_a_clear_error() {
    let ns = DualNs::create("no").expect("namespaces");
    let b_done = Arc::new(AtomicBool::new(false));
    let a_app = {
        let b_done = b_done.clone();
        move |_: &mut Endpoint, _: Duration| b_done.load(Ordering::Relaxed)
    };
    let nobody = IpPair::V4 {
        src: B.stack4.octets(),
        dst: [10, 98, 1, 3],
    };
    let targets = [B.to(&A, false), nobody, B.to(&A, true)];
    let mut handles = Vec::new();
    let b_app = {
        let b_done = b_done.clone();
        move |ep: &mut Endpoint, now: Duration| {
            if handles.is_empty() {
                for ip in targets {
                    let cfg = Config {
                        ip,
                        remote_port: PORT,
                        max_retries: 2,
                        min_rto: Duration::from_millis(20),
                        max_rto: Duration::from_millis(100),
                        ..conn_cfg()
                    };
                    handles.push(ep.connect(now, cfg).expect("connect"));
                }
            }
            let done = handles
                .iter()
                .all(|&h| ep.conn(h).is_some_and(|c| c.error().is_some()));
            b_done.store(done, Ordering::Relaxed);
            done
        }
    };
    let (a, b) = run_two(&ns, (ep_cfg(&A), None, a_app), (ep_cfg(&B), None, b_app));
    assert!(a.run.is_ok() && b.run.is_ok(), "{:?} {:?}", a.run, b.run);
    let st = a.ep.stats();
    assert!(
        st.rst_sent >= 2,
        "A answered both SYNs to no listener: {st:?}"
    );
    assert!(st.not_local >= 1, "A dropped the SYN to 10.98.1.3: {st:?}");
    assert!(
        b.elapsed < Duration::from_secs(5),
        "B gave up in {:?}",
        b.elapsed
    );
    let errs: Vec<_> =
        b.ep.handles()
            .filter_map(|h| b.ep.conn(h)?.error())
            .collect();
    assert_eq!(errs.len(), 3, "{errs:?}");
    let refused = errs
        .iter()
        .filter(|e| **e == ConnectionError::Refused)
        .count();
    let timed_out = errs
        .iter()
        .filter(|e| matches!(e, ConnectionError::TimedOut { retries: 2, .. }))
        .count();
    assert_eq!((refused, timed_out), (2, 1), "{errs:?}");
    println!(
        "refused twice (IPv4, IPv6) and timed out once in {:?}",
        b.elapsed
    );
}

/// A's application for the flood test: the receiving side, watched each turn.
struct Watched {
    side: Side,
    qp_up: Arc<AtomicBool>,
    max_syn_queue: usize,
    max_conns: usize,
    cookies_when_done: u64,
}

impl App for Watched {
    fn turn(&mut self, ep: &mut Endpoint, now: Duration) -> bool {
        if ep.stats().established > 0 {
            self.qp_up.store(true, Ordering::Relaxed);
        }
        self.max_syn_queue = self.max_syn_queue.max(ep.syn_queue_len());
        self.max_conns = self.max_conns.max(ep.len());
        let done = self.side.turn(ep, now);
        if done {
            self.cookies_when_done = ep.stats().cookies_sent;
        }
        done
    }
}

/// SYNs to A's port from spoofed addresses in B's subnet, through a raw socket in B's
/// namespace, from once the QP is up until `stop`. Returns how many were sent.
fn flood(ns: String, qp_up: Arc<AtomicBool>, stop: Arc<AtomicBool>) -> JoinHandle<u64> {
    std::thread::spawn(move || {
        bth_io::tun::enter_netns(&ns).expect("enter B");
        // SAFETY: socket(2) with constant arguments; the descriptor is closed below.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) };
        assert!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
        let dst = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(A.stack4.octets()),
            },
            sin_zero: [0; 8],
        };
        // The flood's SYNs: built by an endpoint that never hears back.
        let mut gen = Endpoint::new(EndpointConfig::default());
        let (mut sent, mut buf, mut n) = (0u64, Vec::new(), 0u32);
        while !qp_up.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(1));
        }
        while !stop.load(Ordering::Relaxed) {
            for _ in 0..64 {
                n = n.wrapping_add(1);
                let cfg = Config {
                    ip: IpPair::V4 {
                        src: [10, 98, 2, 10 + (n % 240) as u8],
                        dst: A.stack4.octets(),
                    },
                    remote_port: PORT,
                    ..Config::default()
                };
                let Ok(h) = gen.connect(Duration::ZERO, cfg) else {
                    continue;
                };
                if gen.poll_transmit(Duration::ZERO, &mut buf).is_some() {
                    // SAFETY: buf and dst are valid for the lengths given for the call.
                    let r = unsafe {
                        libc::sendto(
                            fd,
                            buf.as_ptr().cast(),
                            buf.len(),
                            0,
                            (&dst as *const libc::sockaddr_in).cast(),
                            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
                        )
                    };
                    sent += u64::from(r > 0);
                }
                gen.release(h);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        // SAFETY: fd is ours and not used after this.
        unsafe { libc::close(fd) };
        sent
    })
}

/// Stops the flood however the test ends.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn an_established_qp_is_served_through_a_syn_flood() {
    let ns = DualNs::create("fl").expect("namespaces");
    let plan = Plan {
        messages: 200,
        max_size: 64 << 10,
        depth: 8,
    };
    let syn_queue = 4;
    let (qp_up, stop) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let a_app = Watched {
        side: Side::new(plan, conn_cfg(), Vec::new(), 1),
        qp_up: qp_up.clone(),
        max_syn_queue: 0,
        max_conns: 0,
        cookies_when_done: 0,
    };
    let a_cfg = EndpointConfig {
        syn_queue,
        backlog: 4,
        ..ep_cfg(&A)
    };
    let b_app = Side::new(plan, conn_cfg(), vec![(7, B.to(&A, false))], 0);
    let flooder = flood(ns.b.name.clone(), qp_up, stop.clone());
    let stop_guard = StopOnDrop(stop);
    let (a, b) = run_two(
        &ns,
        (a_cfg, Some(conn_cfg()), a_app),
        (ep_cfg(&B), None, b_app),
    );
    drop(stop_guard);
    let syns = flooder.join().expect("flood thread");
    let w = &a.app;
    assert!(w.side.errors.is_empty(), "A: {:?}", w.side.errors);
    assert!(b.app.errors.is_empty(), "B: {:?}", b.app.errors);
    assert!(a.run.is_ok() && b.run.is_ok(), "{:?} {:?}", a.run, b.run);
    assert_eq!(w.side.verified, u64::from(plan.messages));
    let st = a.ep.stats();
    assert!(
        w.cookies_when_done > 0,
        "the flood reached A while the QP ran: {st:?}"
    );
    assert!(
        w.max_syn_queue <= syn_queue,
        "SYN queue {}",
        w.max_syn_queue
    );
    // The QP, the half-open ones and nothing per flooded SYN beyond the queue.
    assert!(
        w.max_conns <= 1 + syn_queue,
        "{} connections held",
        w.max_conns
    );
    assert!(a.shutdown.all_reaped() && b.shutdown.all_reaped());
    println!(
        "{syns} SYNs sent, {} cookies, {} SYNs queued; QP: {}",
        st.cookies_sent,
        st.syns,
        rate(&w.side, &a.driver, a.elapsed)
    );
}

/// A driver with every read posted and a few writes queued, closed: each operation is
/// cancelled or completes, and every completion is reaped before the buffers go (dropping a
/// driver runs the same code; `close` also returns what it found).
fn closing_a_driver_reaps_every_read_and_write() {
    let ns = Netns::new("rp").expect("namespace");
    let name = ns.name.clone();
    // In a thread of its own: opening a driver moves the thread into the namespace.
    let t = std::thread::spawn(move || {
        let mut d = open_driver(&name, &A).expect("driver");
        // A few packets to the TUN's own address (the kernel answers or drops them).
        let mut gen = Endpoint::new(EndpointConfig::default());
        let mut buf = Vec::new();
        for _ in 0..4 {
            let cfg = Config {
                ip: IpPair::V4 {
                    src: A.stack4.octets(),
                    dst: A.tun4.octets(),
                },
                remote_port: 9,
                ..Config::default()
            };
            gen.connect(Duration::ZERO, cfg).expect("connect");
            gen.poll_transmit(Duration::ZERO, &mut buf).expect("SYN");
            assert!(d.can_send());
            d.send(&buf);
        }
        d.close()
    });
    let s = t.join().expect("driver thread");
    println!("{s:?}");
    // The multishot read (one operation for all 128 receive buffers) and 4 writes.
    assert_eq!((s.reads, s.writes), (1, 4));
    assert!(s.all_reaped(), "{s:?}");
    assert!(s.cancelled >= 1, "the read was cancelled: {s:?}");
}

/// A TUN device nobody reads: what the kernel routes into it fills its queue (500 packets),
/// and the rest shows as the device's transmit drops, as `TunDevice::drops` reads them from
/// the namespace (what `bth-compare` records per run).
fn a_device_with_no_reader_counts_what_it_drops() {
    let ns = Netns::new("dd").expect("namespace");
    let name = ns.name.clone();
    let t = std::thread::spawn(move || {
        let d = open_driver_with(&name, &A, Features::NONE).expect("driver");
        let tun = d.device();
        let before = tun.drops().expect("drops");
        // UDP datagrams to an address the kernel routes into the device; the driver's reads
        // are posted but never reaped, so once its 128 buffers are full the device queues,
        // then drops.
        let sock = std::net::UdpSocket::bind((A.tun4, 0)).expect("bind");
        let to = (A.stack4, 9);
        for _ in 0..2000 {
            sock.send_to(&[0u8; 64], to).expect("send");
        }
        let after = tun.drops().expect("drops");
        (before, after)
    });
    let (before, after) = t.join().expect("thread");
    println!("drops before {before:?}, after {after:?}");
    assert!(
        after.tx >= before.tx + 1000,
        "2000 datagrams into 128 reads and a queue of 500: {before:?} -> {after:?}"
    );
}

bth_tests::test_main!(
    eight_qps_each_way_over_ipv4[NetAdmin],
    ipv6_and_ipv4_qps_share_one_driver[NetAdmin],
    jumbo_segments_leave_from_the_applications_buffers[NetAdmin],
    connects_to_nobody_fail_with_a_clear_error[NetAdmin],
    an_established_qp_is_served_through_a_syn_flood[NetAdmin],
    closing_a_driver_reaps_every_read_and_write[NetAdmin],
    the_fallbacks_for_older_kernels_carry_verified_traffic[NetAdmin],
    a_device_with_no_reader_counts_what_it_drops[NetAdmin],
);
