//! `cargo run --release --example async_qp`: the async API in one program. The server and the
//! client (`async_app/mod.rs`, the code to copy) run as two tasks over the simulated link with
//! 1 % loss and reordering; every byte is checked where it arrives.

#[path = "async_app/mod.rs"]
mod app;

use std::time::Duration;
use tcp_bth_io::api::sim_endpoints;
use tcp_bth_io::sim::LinkConfig;

#[tokio::main]
async fn main() {
    let link = LinkConfig::default()
        .with_loss(0.01)
        .with_reorder(0.1, Duration::from_micros(50))
        .with_seed(7);
    let (a, b, cfg) = sim_endpoints(link, 7);
    let server = tokio::spawn(app::server(b, 64, 100_000));
    let client = app::client(a, cfg, 64, 100_000).await;
    match (client, server.await) {
        (Ok(c), Ok(Ok(s))) => {
            println!(
                "server checked {} messages ({} bytes); client read back {} bytes intact",
                s.messages, s.bytes, c.bytes
            );
        }
        (c, s) => {
            eprintln!("async_qp failed: client {c:?}, server {s:?}");
            std::process::exit(1);
        }
    }
}
