//! The async API over the io_uring TUN data path: the application of `bin/examples/async_qp.rs`
//! (the code a user copies), unchanged from its run over the simulated link in `async_api.rs`,
//! between two network namespaces, over IPv4 and over IPv6.

#[path = "../../bin/examples/async_app/mod.rs"]
mod app;

use bth_io::api::tun_endpoint;
use bth_io::tun::Driver;
use bth_tests::dualns::{open_driver, DualNs, A, B};
use std::time::{Duration, Instant};
use tcp_bth::{Config, Endpoint, EndpointConfig};

const PORT: u16 = 4791;

/// A driver in namespace `ns` for side `me` (opened on a thread of its own: it enters `ns`).
fn driver(ns: String, me: bth_tests::dualns::Side) -> Driver {
    std::thread::spawn(move || open_driver(&ns, &me))
        .join()
        .expect("driver thread")
        .expect("driver")
}

fn over(v6: bool) {
    let ns = DualNs::create(if v6 { "as6" } else { "as4" }).expect("namespaces");
    let (na, a_addrs) = ns.side(true);
    let (nb, b_addrs) = ns.side(false);
    let ea = Endpoint::new(EndpointConfig {
        local: a_addrs.locals(),
        ..EndpointConfig::default()
    });
    let mut eb = Endpoint::new(EndpointConfig {
        local: b_addrs.locals(),
        ..EndpointConfig::default()
    });
    eb.listen(PORT, Config::default()).expect("listen");
    let (a, thread_a) = tun_endpoint(driver(na, A), ea);
    let (b, thread_b) = tun_endpoint(driver(nb, B), eb);
    let cfg = Config {
        ip: A.to(&B, v6),
        remote_port: PORT,
        ..Config::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let started = Instant::now();
    let (client, server) = rt.block_on(async {
        let server = tokio::spawn(app::server(b, 32, 50_000));
        let client = tokio::time::timeout(Duration::from_secs(60), app::client(a, cfg, 32, 50_000))
            .await
            .expect("the client finished within 60 s");
        // The server's end bounded too: a client done while the server still waits must fail
        // the test by name, not hang it.
        let server = tokio::time::timeout(Duration::from_secs(30), server)
            .await
            .expect("the server finished within 30 s of the client")
            .unwrap();
        (client, server)
    });
    let (client, server) = match (client, server) {
        (Ok(c), Ok(s)) => (c, s),
        (c, s) => {
            let (a, b) = (thread_a.stop().err(), thread_b.stop().err());
            panic!("client {c:?}, server {s:?} (driver threads: A {a:?}, B {b:?})")
        }
    };
    assert_eq!(server.messages, 33, "32 SENDs and the WRITE checked");
    assert_eq!(server.bytes, 32 * 50_000 + app::REGION as u64 / 2);
    assert_eq!(client.bytes, app::REGION as u64 / 2);
    let (ep_a, _, turns_a) = thread_a.stop().expect("driver A");
    let (ep_b, _, turns_b) = thread_b.stop().expect("driver B");
    println!(
        "v6={v6}: {:?}; A {} turns, {} packets out; B {} turns, {} packets out; \
         endpoint B {:?}",
        started.elapsed(),
        turns_a.turns,
        turns_a.packets_out,
        turns_b.turns,
        turns_b.packets_out,
        ep_b.stats()
    );
    assert_eq!(ep_a.stats().rst_sent + ep_b.stats().rst_sent, 0);
}

fn the_example_application_runs_over_tun_ipv4() {
    over(false);
}

fn the_example_application_runs_over_tun_ipv6() {
    over(true);
}

bth_tests::test_main!(
    the_example_application_runs_over_tun_ipv4[NetAdmin],
    the_example_application_runs_over_tun_ipv6[NetAdmin],
);
