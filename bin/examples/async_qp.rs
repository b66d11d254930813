//! `cargo run --release --example async_qp`: the async API in one program. The server and the
//! client (`async_app/mod.rs`, the code to copy) run as two tasks over the simulated link with
//! 1 % loss and reordering; every byte is checked where it arrives.
//!
//! `sudo target/release/examples/async_qp --tun` runs the same application code over the
//! io_uring TUN data path instead: two network namespaces (`asyncqp-a`, `asyncqp-b`, deleted
//! at the end), the server's stack on a TUN device in one, the client's in the other.

#[path = "async_app/mod.rs"]
mod app;

use bth_io::api::{sim_endpoints, tun_endpoint, AsyncEndpoint};
use bth_io::sim::LinkConfig;
use bth_io::tun::Driver;
use bth_testbed::topology::{self, TwoNs};
use std::io;
use std::time::Duration;
use tcp_bth::wire::IpPair;
use tcp_bth::{Config, Endpoint, EndpointConfig};

const MESSAGES: u64 = 64;
const LEN: usize = 100_000;
const PORT: u16 = 4791;

/// A driver on our stack's TUN device in namespace `ns` (opened on a thread of its own,
/// because creating the device moves the calling thread into `ns`).
fn tun_driver(ns: String, side_a: bool) -> io::Result<Driver> {
    std::thread::spawn(move || Driver::open(topology::stack_tun(&ns, side_a)?))
        .join()
        .map_err(|_| io::Error::other("driver thread panicked"))?
}

async fn run(client: AsyncEndpoint, server: AsyncEndpoint, cfg: Config) -> Result<(), String> {
    let s = tokio::spawn(app::server(server, MESSAGES, LEN));
    let c = app::client(client, cfg, MESSAGES, LEN)
        .await
        .map_err(|e| format!("client: {e}"))?;
    let s = s
        .await
        .map_err(|e| format!("server task: {e}"))?
        .map_err(|e| format!("server: {e}"))?;
    println!(
        "server checked {} messages ({} bytes); client read back {} bytes intact",
        s.messages, s.bytes, c.bytes
    );
    Ok(())
}

async fn over_tun() -> Result<(), String> {
    let ns = TwoNs::create("asyncqp", None).map_err(|e| format!("namespaces: {e}"))?;
    let mut server_ep = Endpoint::new(EndpointConfig::default());
    server_ep
        .listen(PORT, Config::default())
        .map_err(|e| format!("listen: {e}"))?;
    let da = tun_driver(ns.a.clone(), true).map_err(|e| format!("server TUN: {e}"))?;
    let db = tun_driver(ns.b.clone(), false).map_err(|e| format!("client TUN: {e}"))?;
    let (server, _server_thread) = tun_endpoint(da, server_ep);
    let (client, _client_thread) = tun_endpoint(db, Endpoint::new(EndpointConfig::default()));
    let cfg = Config {
        ip: IpPair::V4 {
            src: topology::B_STACK.octets(),
            dst: topology::A_STACK.octets(),
        },
        remote_port: PORT,
        ..Config::default()
    };
    println!(
        "over the io_uring TUN path: client {} -> server {}:{PORT}",
        topology::B_STACK,
        topology::A_STACK
    );
    run(client, server, cfg).await
}

#[tokio::main]
async fn main() {
    let r = if std::env::args().any(|a| a == "--tun") {
        over_tun().await
    } else {
        let link = LinkConfig::default()
            .with_loss(0.01)
            .with_reorder(0.1, Duration::from_micros(50))
            .with_seed(7);
        let (a, b, cfg) = sim_endpoints(link, 7);
        println!("over the simulated link (1 % loss, 10 % reordering)");
        run(a, b, cfg).await
    };
    if let Err(e) = r {
        eprintln!("async_qp: {e}");
        std::process::exit(1);
    }
}
