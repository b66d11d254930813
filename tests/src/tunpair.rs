//! Our stack against our stack over the io_uring TUN data path, in a two-namespace topology
//! (`bth_tools::topology::TwoNs`): server in namespace A, client in B.

use bth_tools::topology::{self, TwoNs};
use std::time::Duration;
use tcp_bth::perf::{Client, PerfConfig, PerfReport, Server};
use tcp_bth::tun::{Driver, Endpoint};
use tcp_bth::wire::IpPair;
use tcp_bth::{Config, Mode};

/// Run one perf exchange; returns (client report, server report). Panics on set-up failures.
pub fn run_perf(ns: &TwoNs, cfg: &PerfConfig) -> (PerfReport, PerfReport) {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let server = {
        let (name, cfg) = (ns.a.clone(), cfg.clone());
        std::thread::spawn(move || {
            let tun = topology::stack_tun(&name, true).expect("tun a");
            let mut d = Driver::new(tun, topology::A_STACK).expect("driver a");
            ready_tx.send(()).unwrap();
            let bth = !cfg.plain;
            let mut s = Server::new(cfg);
            let conn_cfg = Config {
                local_port: 4791,
                bth,
                ..Config::default()
            };
            let c = d
                .run(
                    Endpoint::Listen(conn_cfg),
                    Duration::from_secs(600),
                    |c, now| s.step(c, now),
                )
                .expect("server run");
            assert_eq!(matches!(c.mode(), Mode::Bth { .. }), bth);
            s.report
        })
    };
    ready_rx.recv().unwrap();
    let client = {
        let (name, cfg) = (ns.b.clone(), cfg.clone());
        std::thread::spawn(move || {
            let tun = topology::stack_tun(&name, false).expect("tun b");
            let mut d = Driver::new(tun, topology::B_STACK).expect("driver b");
            let conn_cfg = Config {
                local_port: 40001,
                remote_port: 4791,
                bth: !cfg.plain,
                ip: IpPair::V4 {
                    src: topology::B_STACK.octets(),
                    dst: topology::A_STACK.octets(),
                },
                ..Config::default()
            };
            let mut cl = Client::new(cfg);
            d.run(
                Endpoint::Connect(conn_cfg),
                Duration::from_secs(600),
                |c, now| cl.step(c, now),
            )
            .expect("client run");
            cl.report
        })
    };
    let c = client.join().expect("client thread");
    let s = server.join().expect("server thread");
    (c, s)
}
