//! Kernel interop over the io_uring TUN data path, inside a namespace this test creates: a
//! Linux TCP client talks to our stack, and our stack talks to a Linux TCP server. The kernel
//! ignores our BTH SYN option, so both connections fall back to plain TCP, with RFC 7323
//! timestamps (wire spec amendment 4: our SYN carries the timestamp option beside a hello
//! without them); bulk data both ways is checked byte for byte and both close in order. A
//! capture on the TUN device shows the fallback's options segment by segment.

use bth_capture::{analyze_file, Segment};
use bth_io::tun::{enter_netns, Driver, Offload, TunConfig, TunDevice};
use bth_tests::netns::{accept_within, Netns};
use bth_tests::tcpdump::{self, CaptureFile, Tcpdump};
use bth_tests::{drain_bytes, pattern};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;
use tcp_bth::wire::{IpPair, Opcode, TcpFlags, TcpOptions};
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
            (got, conn.mode(), conn.timestamps(), d.stats)
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
    let (got, mode, timestamps, stats) = server.join().expect("our server");
    assert_eq!(mode, Mode::Plain, "kernel peer must make us fall back");
    assert!(
        timestamps,
        "the kernel's SYN offered timestamps, and our SYN-ACK took them"
    );
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

/// Our client (port 41000) to a kernel server (port 6000) in namespace `ns`: it sends
/// `to_kernel`, the kernel answers `to_us`, both close in order. `tun_up` runs on this thread
/// once our TUN device exists and before our SYN goes out (a capture starts there). Checks
/// every byte both ways; returns our connection as it ended.
fn our_client_to_kernel(
    ns: &Netns,
    to_kernel: Vec<u8>,
    to_us: Vec<u8>,
    tun_up: impl FnOnce(),
) -> Connection {
    let name = ns.name.clone();
    let (ready_tx, ready_rx) = mpsc::channel();
    let (bind_tx, bind_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel();
    let kernel = {
        let (name, reply, expect) = (name.clone(), to_us.clone(), to_kernel.len());
        std::thread::spawn(move || {
            // The listener needs the TUN's address: wait until our side created the device.
            let () = bind_rx.recv().unwrap();
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
            let () = go_rx.recv().unwrap();
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
            (got, conn)
        })
    };
    ready_rx.recv().expect("our side created the TUN device");
    bind_tx.send(()).unwrap();
    tun_up();
    go_tx.send(()).unwrap();
    let (got, conn) = ours.join().expect("our client");
    let kernel_got = kernel.join().expect("kernel server");
    assert!(kernel_got == to_kernel, "bytes to the kernel differ");
    assert!(
        got == to_us,
        "bytes from the kernel differ ({} of {})",
        got.len(),
        to_us.len()
    );
    conn
}

fn our_client_to_kernel_server() {
    let ns = Netns::new("ks").expect("netns");
    let conn = our_client_to_kernel(&ns, pattern(3, 2 << 20), pattern(4, 1 << 20), || {});
    assert_eq!(conn.mode(), Mode::Plain);
    // Amendment 4: our SYN's RFC 7323 option beside the hello, echoed by the kernel.
    assert!(conn.timestamps(), "the fallback keeps timestamps");
    drop(ns);
}

/// Fallback keeps timestamps (wire spec amendment 4), on the wire: tcpdump on our TUN device
/// while our client talks to a kernel server. Our SYN carries the tcp_bth hello without
/// timestamps (T=0, 16 bytes) and the RFC 7323 timestamp option beside it; the kernel's
/// SYN-ACK carries the timestamp option (echoing our SYN's TSval) and not ours; every segment
/// of the plain connection that follows, data both ways included, carries RFC 7323
/// timestamps and no tcp_bth option. Read by our decoder (what bth-dump prints) and by tshark
/// with the Lua dissector; the handshake and the first data segment each way are printed.
fn fallback_keeps_timestamps_in_a_capture() {
    let ns = Netns::new("kt").expect("netns");
    let file = CaptureFile(
        std::env::temp_dir().join(format!("bth-kernel-ts-{}.pcap", std::process::id())),
    );
    let mut dump = None;
    let conn = our_client_to_kernel(&ns, pattern(5, 256 << 10), pattern(6, 128 << 10), || {
        // IPv4 20 + TCP with options 60: headers whole, the payload cut.
        dump = Some(Tcpdump::start(&ns.name, "tbth0", &file.0, 128));
    });
    let said = dump.expect("tcpdump started").stop();
    drop(ns);
    tcpdump::assert_complete(&said);
    assert_eq!(conn.mode(), Mode::Plain);
    assert!(conn.timestamps(), "our side negotiated timestamps");

    // Our decoder.
    let a = analyze_file(&file.0).expect("read the capture");
    assert!(a.error.is_none(), "{:?}", a.error);
    let ours = SocketAddr::from((STACK_ADDR, 41000));
    let kernel = SocketAddr::from((TUN_ADDR, 6000));
    let segs: Vec<(u64, &Segment)> = a
        .records
        .iter()
        .filter_map(|(d, _)| Some((d.frame, d.segment()?)))
        .filter(|(_, s)| (s.src == ours || s.src == kernel) && (s.dst == ours || s.dst == kernel))
        .collect();
    let options = |f: u64, s: &Segment| -> TcpOptions {
        s.options
            .clone()
            .unwrap_or_else(|e| panic!("frame {f}: options refused: {e}"))
    };
    let (f, syn) = *segs
        .iter()
        .find(|(_, s)| s.flags == TcpFlags::SYN && s.src == ours)
        .expect("our SYN in the capture");
    let o = options(f, syn);
    let hello = o.bth.expect("the tcp_bth hello on our SYN");
    assert_eq!(
        (hello.opcode, hello.timestamps),
        (Opcode::Hello, None),
        "T=0"
    );
    let syn_ts = o.timestamps.expect("the RFC 7323 option on our SYN");
    assert_eq!(syn_ts.tsecr, 0);
    assert_eq!(
        syn.header_len,
        20 + 36,
        "35 option bytes and one of padding"
    );
    let (f, syn_ack) = *segs
        .iter()
        .find(|(_, s)| s.flags == TcpFlags::SYN | TcpFlags::ACK && s.src == kernel)
        .expect("the kernel's SYN-ACK in the capture");
    let o = options(f, syn_ack);
    assert_eq!(o.bth, None, "the kernel ignores our option");
    assert_eq!(
        o.timestamps.map(|t| t.tsecr),
        Some(syn_ts.tsval),
        "the kernel's SYN-ACK echoes our SYN's TSval"
    );
    let mut data = [0u64; 2];
    for &(f, s) in &segs {
        if s.flags.rst() {
            continue;
        }
        let o = options(f, s);
        assert!(
            o.timestamps.is_some(),
            "frame {f} from {} has no timestamps",
            s.src
        );
        if s.payload_len > 0 {
            assert_eq!(o.bth, None, "frame {f}: a plain connection's data");
            data[usize::from(s.src == kernel)] += 1;
        }
    }
    eprintln!(
        "{} segments, data segments with timestamps: {} ours, {} the kernel's",
        segs.len(),
        data[0],
        data[1]
    );
    assert!(data[0] > 0 && data[1] > 0, "data both ways: {data:?}");
    // tcpdump's own reading of the handshake, for the record.
    let out = Command::new("tcpdump")
        .args(["-n", "-c", "3", "-r"])
        .arg(&file.0)
        .output()
        .expect("tcpdump -r");
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("tcpdump:\n{text}");
    assert!(
        text.lines().take(2).all(|l| l.contains("TS val")),
        "SYN and SYN-ACK with timestamps: {text}"
    );

    // tshark, with the Lua dissector for our option.
    let lua = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/wireshark/tcp_bth.lua");
    let fields = [
        "frame.number",
        "ip.src",
        "tcp.flags.syn",
        "tcp.flags.ack",
        "tcp.len",
        "tcp.option_kind",
        "tcp.options.timestamp.tsval",
        "tcp.options.timestamp.tsecr",
        "tcp_bth.opcode",
        "tcp_bth.t",
        "tcp_bth.len",
        "tcp_bth.tsval",
    ];
    let out = Command::new("tshark")
        .args(["-n", "-X", &format!("lua_script:{lua}"), "-r"])
        .arg(&file.0)
        .args(["-T", "fields", "-E", "separator=|"])
        .args(fields.iter().flat_map(|f| ["-e", f]))
        .output()
        .expect("tshark");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('|').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == fields.len()), "{text}");
    let yes = |v: &str| v == "1" || v.eq_ignore_ascii_case("true");
    let kinds =
        |r: &[&str]| -> Vec<u32> { r[5].split(',').filter_map(|k| k.parse().ok()).collect() };
    let ours_ip = STACK_ADDR.to_string();
    let mut shown = [false; 2];
    eprintln!("tshark: {}", fields.join(" | "));
    for r in &rows {
        let from_us = r[1] == ours_ip;
        let (syn, ack, len) = (yes(r[2]), yes(r[3]), r[4].parse::<u32>().unwrap_or(0));
        if syn && !ack {
            assert!(from_us, "{r:?}");
            let k = kinds(r);
            assert!(
                k.contains(&254) && k.contains(&8),
                "our SYN: option kinds {k:?}"
            );
            assert!(
                !r[6].is_empty() && r[7] == "0",
                "our SYN's TS option: {r:?}"
            );
            assert!(
                !yes(r[9]) && r[10] == "16" && r[11].is_empty(),
                "T=0 hello: {r:?}"
            );
            eprintln!("  our SYN:           {}", r.join(" | "));
        } else if syn {
            let k = kinds(r);
            assert!(
                !from_us && k.contains(&8) && !k.contains(&254),
                "SYN-ACK: {r:?}"
            );
            assert!(r[8].is_empty(), "no tcp_bth on the kernel's SYN-ACK: {r:?}");
            eprintln!("  kernel's SYN-ACK:  {}", r.join(" | "));
        } else if len > 0 {
            assert!(!r[6].is_empty() && !r[7].is_empty(), "data with TS: {r:?}");
            assert!(
                r[8].is_empty() && !kinds(r).contains(&254),
                "plain data: {r:?}"
            );
            let i = usize::from(!from_us);
            if !shown[i] {
                shown[i] = true;
                let who = if from_us {
                    "our data:    "
                } else {
                    "kernel's data:"
                };
                eprintln!("  {who}     {}", r.join(" | "));
            }
        }
    }
    assert_eq!(shown, [true, true], "tshark saw data both ways");
}

bth_tests::test_main!(
    kernel_client_to_our_server[NetAdmin],
    our_client_to_kernel_server[NetAdmin],
    fallback_keeps_timestamps_in_a_capture[NetAdmin, Tcpdump, Tshark],
);
