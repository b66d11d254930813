//! Kernel interop over the io_uring TUN data path, inside a namespace this test creates: a
//! Linux TCP client talks to our stack, and our stack talks to a Linux TCP server. The kernel
//! ignores our BTH SYN option, so both connections fall back to plain TCP; bulk data both ways
//! is checked byte for byte and both close in order.

use bth_io::tun::{enter_netns, Driver, Offload, TunConfig, TunDevice};
use bth_tests::netns::{accept_within, Netns};
use bth_tests::{drain_bytes, pattern};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::Duration;
use tcp_bth::wire::IpPair;
use tcp_bth::{Config, Connection, ConnectionHandle, Endpoint, EndpointConfig, Mode, State};

const TUN_ADDR: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
const STACK_ADDR: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);

fn tun_in(ns: &str) -> Driver {
    enter_netns(ns).expect("enter netns");
    let tun = TunDevice::create(&TunConfig {
        name: "tbth0".into(),
        addr: TUN_ADDR,
        prefix: 24,
        addr6: None,
        mtu: 1500,
        offload: Offload::None,
    })
    .expect("create TUN");
    Driver::open(tun).expect("io_uring driver")
}

/// Which side of the handshake [`run_one`] plays.
enum Side {
    Connect(Config),
    /// Accept the first connection to `cfg.local_port`, then stop listening.
    Listen(Config),
}

/// One connection of an endpoint at [`STACK_ADDR`] served by `d` until `app` is done (or
/// `limit` passes): `app` gets it every turn once it exists. Returns the connection.
fn run_one(
    d: &mut Driver,
    side: Side,
    limit: Duration,
    mut app: impl FnMut(&mut Connection, Duration) -> bool,
) -> Connection {
    let mut ep = Endpoint::new(EndpointConfig {
        local: vec![IpPair::V4 {
            src: STACK_ADDR.octets(),
            dst: [0; 4],
        }],
        max_packet: d.max_packet(),
        rx_queue: d.rx_queue(),
        ..EndpointConfig::default()
    });
    let (mut handle, mut listening): (Option<ConnectionHandle>, _) = (None, None);
    match side {
        Side::Connect(cfg) => handle = Some(ep.connect(d.now(), cfg).expect("connect")),
        Side::Listen(cfg) => {
            listening = Some(cfg.local_port);
            ep.listen(cfg.local_port, cfg).expect("listen");
        }
    }
    let mut one = |ep: &mut Endpoint, now: Duration| {
        if handle.is_none() {
            handle = ep.accept();
            if let (Some(_), Some(port)) = (handle, listening) {
                ep.stop_listening(port);
            }
        }
        match handle.and_then(|h| ep.conn_mut(h)) {
            Some(c) => app(c, now),
            None => false,
        }
    };
    d.serve(&mut ep, &mut one, limit).expect("run to the end");
    handle.and_then(|h| ep.release(h)).expect("a connection")
}

/// Our side of a plain-TCP exchange: receive `expect` bytes, send `reply`, close in order.
fn serve_exchange(
    c: &mut tcp_bth::Connection,
    got: &mut Vec<u8>,
    expect: usize,
    reply: &[u8],
    sent: &mut bool,
) -> bool {
    if c.mode() != Mode::Plain {
        return false;
    }
    drain_bytes(c, got);
    if got.len() >= expect && !*sent {
        c.send_bytes(reply).expect("queue reply");
        *sent = true;
    }
    if *sent && c.send_backlog() == 0 && c.peer_finished() {
        c.close();
    }
    matches!(c.state(), State::TimeWait | State::Closed)
}

fn kernel_client_to_our_server() {
    let ns = Netns::new("kc").expect("netns");
    let name = ns.name.clone();
    let to_us = pattern(1, 2 << 20);
    let to_kernel = pattern(2, 1 << 20);
    let (ready_tx, ready_rx) = mpsc::channel();
    let server = {
        let (name, expect, reply) = (name.clone(), to_us.len(), to_kernel.clone());
        std::thread::spawn(move || {
            let mut d = tun_in(&name);
            ready_tx.send(()).unwrap();
            let cfg = Config {
                local_port: 5000,
                ..Config::default()
            };
            let (mut got, mut sent) = (Vec::new(), false);
            let conn = run_one(
                &mut d,
                Side::Listen(cfg),
                Duration::from_secs(60),
                |c, _| serve_exchange(c, &mut got, expect, &reply, &mut sent),
            );
            (got, conn.mode(), d.stats)
        })
    };
    ready_rx.recv().unwrap();
    let client = {
        let (name, data) = (name.clone(), to_us.clone());
        std::thread::spawn(move || {
            enter_netns(&name).unwrap();
            let addr = SocketAddr::from((STACK_ADDR, 5000));
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).unwrap();
            // Both directions bounded: a stalled peer fails the test instead of hanging it.
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            s.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
            s.write_all(&data).unwrap();
            let mut reply = Vec::new();
            s.shutdown(std::net::Shutdown::Write).unwrap();
            s.read_to_end(&mut reply).unwrap();
            reply
        })
    };
    let reply = client.join().expect("kernel client");
    let (got, mode, stats) = server.join().expect("our server");
    assert_eq!(mode, Mode::Plain, "kernel peer must make us fall back");
    assert!(
        got == to_us,
        "bytes from the kernel differ ({} of {})",
        got.len(),
        to_us.len()
    );
    assert!(
        reply == to_kernel,
        "bytes to the kernel differ ({} of {})",
        reply.len(),
        to_kernel.len()
    );
    assert!(stats.packets_in > 0 && stats.enters > 0);
    drop(ns);
}

fn our_client_to_kernel_server() {
    let ns = Netns::new("ks").expect("netns");
    let name = ns.name.clone();
    let to_kernel = pattern(3, 2 << 20);
    let to_us = pattern(4, 1 << 20);
    let (ready_tx, ready_rx) = mpsc::channel();
    let kernel = {
        let (name, reply, expect) = (name.clone(), to_us.clone(), to_kernel.len());
        std::thread::spawn(move || {
            // The listener needs the TUN's address: wait until our side created the device.
            let () = ready_rx.recv().unwrap();
            enter_netns(&name).unwrap();
            let l = TcpListener::bind((TUN_ADDR, 6000)).unwrap();
            let mut s = accept_within(&l, Duration::from_secs(30)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            s.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
            let mut got = vec![0u8; expect];
            s.read_exact(&mut got).unwrap();
            s.write_all(&reply).unwrap();
            s.shutdown(std::net::Shutdown::Write).unwrap();
            let mut rest = Vec::new();
            s.read_to_end(&mut rest).unwrap();
            got
        })
    };
    let ours = {
        let (name, data, expect) = (name.clone(), to_kernel.clone(), to_us.len());
        std::thread::spawn(move || {
            let mut d = tun_in(&name);
            ready_tx.send(()).unwrap();
            // Give the kernel thread a moment to bind before the SYN goes out.
            std::thread::sleep(Duration::from_millis(200));
            let cfg = Config {
                local_port: 41000,
                remote_port: 6000,
                ip: IpPair::V4 {
                    src: STACK_ADDR.octets(),
                    dst: TUN_ADDR.octets(),
                },
                ..Config::default()
            };
            let (mut got, mut queued, mut closed) = (Vec::new(), false, false);
            let conn = run_one(
                &mut d,
                Side::Connect(cfg),
                Duration::from_secs(60),
                |c, _| {
                    if c.mode() == Mode::Plain && !queued {
                        c.send_bytes(&data).unwrap();
                        queued = true;
                    }
                    drain_bytes(c, &mut got);
                    if queued && got.len() >= expect && c.send_backlog() == 0 && !closed {
                        c.close();
                        closed = true;
                    }
                    closed && matches!(c.state(), State::TimeWait | State::Closed)
                },
            );
            (got, conn.mode())
        })
    };
    let (got, mode) = ours.join().expect("our client");
    let kernel_got = kernel.join().expect("kernel server");
    assert_eq!(mode, Mode::Plain);
    assert!(kernel_got == to_kernel, "bytes to the kernel differ");
    assert!(
        got == to_us,
        "bytes from the kernel differ ({} of {})",
        got.len(),
        to_us.len()
    );
    drop(ns);
}

bth_tests::test_main!(
    kernel_client_to_our_server[NetAdmin],
    our_client_to_kernel_server[NetAdmin],
);
