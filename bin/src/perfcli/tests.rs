//! The command line without a network: option parsing and the plan it makes, the sweep, the
//! table and JSON output, `--tun-addr`.

use super::args::{ArgsError, PerfArgs, DEFAULT_ITERS_BW, DEFAULT_ITERS_LAT};
use super::host::{Family, HostError, TunAddr};
use super::json::JsonRow;
use super::sweep::{sweep_iters, sweep_sizes, SWEEP_MIN_ITERS};
use super::table::{bw_row, header, lat_row, title, Banner};
use bth_perf::{PerfConfig, PerfError, PerfOp, PerfReport};
use clap::Parser;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

#[derive(Parser, Debug)]
struct Cli {
    #[command(flatten)]
    perf: PerfArgs,
}

fn parse(args: &[&str]) -> Result<PerfArgs, clap::Error> {
    Cli::try_parse_from(std::iter::once("bth-perf").chain(args.iter().copied())).map(|c| c.perf)
}

fn plan(args: &[&str]) -> Result<Vec<PerfConfig>, ArgsError> {
    parse(args).expect("parses").plan().map(|p| p.rows)
}

#[test]
fn perftest_short_and_long_options_parse() {
    let a = parse(&[
        "-s",
        "4096",
        "-n",
        "300",
        "-q",
        "1",
        "-t",
        "8",
        "-r",
        "32",
        "-b",
        "--op",
        "write-imm",
        "--verify",
        "--report-gbits",
        "--json",
        "-p",
        "5000",
        "-m",
        "4000",
    ])
    .unwrap();
    assert_eq!(
        (a.size, a.iters, a.qps, a.tx_depth, a.rx_depth),
        (4096, Some(300), 1, Some(8), Some(32))
    );
    assert!(a.bidirectional && a.verify && a.report_gbits && a.json && !a.plain && !a.lat);
    assert_eq!((a.op, a.port, a.mtu), (PerfOp::WriteImm, 5000, 4000));
    let long = parse(&[
        "--size",
        "4096",
        "--iters",
        "300",
        "--qps",
        "1",
        "--tx-depth",
        "8",
        "--rx-depth",
        "32",
        "--bidirectional",
        "--op",
        "write-imm",
        "--verify",
        "--report-gbits",
        "--json",
        "--port",
        "5000",
        "--mtu",
        "4000",
    ])
    .unwrap();
    assert_eq!(a, long);
    // The old names still work.
    let old = parse(&["--count", "300", "--depth", "8"]).unwrap();
    assert_eq!((old.iters, old.tx_depth), (Some(300), Some(8)));
    let d = parse(&["-D", "2.5", "-a", "--lat", "--plain"]).unwrap();
    assert_eq!(d.duration, Some(2.5));
    assert!(d.all && d.lat && d.plain);
}

#[test]
fn contradictory_or_malformed_options_are_refused_by_the_parser() {
    for bad in [
        &["-a", "-s", "64"][..],
        &["-D", "1", "-n", "10"],
        &["--op", "atomic"],
        &["-s", "big"],
        &["-n", "-3"],
        &["--frobnicate"],
    ] {
        assert!(parse(bad).is_err(), "{bad:?} parsed");
    }
}

#[test]
fn the_plan_has_perftests_defaults() {
    let bw = plan(&[]).unwrap();
    assert_eq!(bw.len(), 1);
    let r = &bw[0];
    assert_eq!(
        (r.op, r.size, r.count),
        (PerfOp::Send, 65536, DEFAULT_ITERS_BW)
    );
    assert_eq!((r.tx_depth, r.rx_depth, r.qps), (16, 16, 1));
    assert!(!r.mode.verify && !r.mode.bidir && !r.mode.lat && !r.mode.sweep && !r.trace);
    let lat = plan(&["--lat"]).unwrap();
    assert_eq!(
        (lat[0].count, lat[0].tx_depth, lat[0].mode.lat),
        (DEFAULT_ITERS_LAT, 1, true)
    );
    // The receive depth follows a deeper TX depth.
    let deep = plan(&["-t", "64"]).unwrap();
    assert_eq!((deep[0].tx_depth, deep[0].rx_depth), (64, 64));
    let timed = plan(&["-D", "3"]).unwrap();
    assert_eq!(timed[0].duration, Some(Duration::from_secs(3)));
    let limit = parse(&["-D", "300"]).unwrap().plan().unwrap().limit;
    assert!(limit >= Duration::from_secs(360), "{limit:?}");
}

/// `--mtu` takes 576 to 65535 bytes (jumbo frames and 64 KiB packets included), and refuses
/// anything else at parse time, saying the range; the plan checks it again for arguments
/// built in code.
#[test]
fn mtu_takes_576_to_65535_and_refuses_the_rest_clearly() {
    for ok in ["576", "1500", "4096", "9000", "65000", "65535"] {
        let a = parse(&["--mtu", ok]).unwrap_or_else(|e| panic!("--mtu {ok}: {e}"));
        assert_eq!(a.mtu.to_string(), ok);
        assert_eq!(a.plan().map(|p| p.rows.len()), Ok(1), "--mtu {ok}");
    }
    assert_eq!(parse(&[]).unwrap().mtu, 1500);
    for bad in ["575", "65536", "0", "-1", "9k", ""] {
        let arg = format!("--mtu={bad}");
        let e = parse(&[&arg]).expect_err(bad).to_string();
        assert!(
            e.contains("576 to 65535") || e.contains("whole number of bytes"),
            "{arg}: {e}"
        );
    }
    let mut a = parse(&[]).unwrap();
    a.mtu = 100_000;
    let e = a.plan().unwrap_err();
    assert!(matches!(e, ArgsError::Mtu(_)), "{e}");
    assert!(
        e.to_string()
            .contains("--mtu: MTU 100000: expected 576 to 65535"),
        "{e}"
    );
}

#[test]
fn options_that_cannot_run_are_refused_with_a_reason() {
    assert_eq!(plan(&["-q", "8"]).map(|r| r.len()), Ok(1));
    let e = plan(&["-q", "0"]).unwrap_err();
    assert_eq!(e, ArgsError::Qps(0));
    assert!(e.to_string().contains("expected 1 to 1024"), "{e}");
    assert_eq!(plan(&["-q", "1025"]), Err(ArgsError::Qps(1025)));
    assert_eq!(plan(&["--lat", "-t", "4"]), Err(ArgsError::LatDepth(4)));
    assert_eq!(plan(&["--lat", "-t", "1"]).map(|r| r.len()), Ok(1));
    assert_eq!(plan(&["--lat", "-b"]), Err(ArgsError::LatBidir));
    assert_eq!(plan(&["--lat", "--plain"]), Err(ArgsError::LatPlain));
    assert_eq!(plan(&["-D", "0"]), Err(ArgsError::Duration(0.0)));
    assert!(matches!(
        plan(&["-b", "--op", "sendrecv"]),
        Err(ArgsError::Perf(PerfError::BidirUnsupported { .. }))
    ));
    assert_eq!(
        plan(&["--op", "read", "-s", "0"]),
        Err(ArgsError::Perf(PerfError::ZeroSize { op: PerfOp::Read }))
    );
    assert_eq!(
        plan(&["--op", "write", "--verify", "-D", "1"]),
        Err(ArgsError::Perf(PerfError::VerifiedWriteNeedsCount))
    );
    assert!(matches!(
        plan(&["-s", "16777216"]),
        Err(ArgsError::Perf(PerfError::SizeTooLarge { .. }))
    ));
    assert_eq!(
        plan(&["-t", "0"]),
        Err(ArgsError::Perf(PerfError::Zero { what: "--tx-depth" }))
    );
}

#[test]
fn the_sweep_is_every_power_of_two_from_2_bytes_to_8_mib() {
    let sizes = sweep_sizes();
    assert_eq!(sizes.len(), 23);
    assert_eq!((sizes[0], sizes[22]), (2, 8 << 20));
    assert!(sizes.windows(2).all(|w| w[1] == 2 * w[0]));
    let rows = plan(&["-a"]).unwrap();
    assert_eq!(rows.iter().map(|r| r.size).collect::<Vec<_>>(), sizes);
    assert!(rows.iter().all(|r| r.mode.sweep));
    // Without -n the large sizes run fewer messages; -n applies to every row.
    assert_eq!(sweep_iters(2, DEFAULT_ITERS_BW), DEFAULT_ITERS_BW);
    assert_eq!(sweep_iters(1 << 20, DEFAULT_ITERS_BW), 256);
    assert_eq!(sweep_iters(8 << 20, DEFAULT_ITERS_BW), 32);
    assert_eq!(sweep_iters(16 << 20, DEFAULT_ITERS_BW), SWEEP_MIN_ITERS);
    assert!(plan(&["-a", "-n", "7"])
        .unwrap()
        .iter()
        .all(|r| r.count == 7));
}

/// A report of `messages` messages of `size` bytes in `ms` milliseconds.
fn report(size: u32, messages: u64, ms: u64) -> PerfReport {
    PerfReport {
        messages,
        bytes: messages * u64::from(size),
        elapsed: Duration::from_millis(ms),
        ..PerfReport::default()
    }
}

#[test]
fn the_bandwidth_table_has_perftests_columns_and_units() {
    assert_eq!(
        title(false, false),
        " #bytes     #iterations   BW peak[MB/sec]   BW average[MB/sec]   MsgRate[Mpps]"
    );
    assert!(title(false, true).contains("BW peak[Gb/sec]   BW average[Gb/sec]"));
    // 1000 messages of 1 MiB in 1 s: 1000 MB/sec (perftest's MB is 2^20 bytes), 8.39 Gb/sec,
    // 0.001 Mpps. A run under 10 ms has no peak window: the peak shows the average.
    let r = report(1 << 20, 1000, 1000);
    let row = bw_row(1 << 20, &r, false);
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells, ["1048576", "1000", "1000.00", "1000.00", "0.001000"]);
    let g: Vec<String> = bw_row(1 << 20, &r, true)
        .split_whitespace()
        .map(String::from)
        .collect();
    assert_eq!(g[2..4], ["8.39", "8.39"]);
    // Columns line up under their titles.
    let t = title(false, false);
    let at = |s: &str, w: &str| s.find(w).unwrap();
    assert_eq!(at(&row, "1000.00"), at(&t, "BW peak"));
    assert_eq!(at(&row, "0.001000"), at(&t, "MsgRate"));
}

#[test]
fn the_latency_table_has_perftests_columns() {
    assert_eq!(
        title(true, false),
        " #bytes     #iterations   t_min[usec]   t_max[usec]   t_typical[usec]   \
         t_avg[usec]   t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]"
    );
    let mut r = report(64, 4, 1);
    r.latencies = [10, 20, 30, 40].map(Duration::from_micros).to_vec();
    let cells: Vec<String> = lat_row(64, &r)
        .split_whitespace()
        .map(String::from)
        .collect();
    assert_eq!(
        cells,
        ["64", "4", "10.00", "40.00", "30.00", "25.00", "11.18", "40.00", "40.00"]
    );
    // Nothing completed: dashes, not a panic.
    let empty = lat_row(64, &PerfReport::default());
    assert_eq!(empty.split_whitespace().filter(|c| *c == "-").count(), 7);
}

#[test]
fn the_header_describes_the_run() {
    let rows = plan(&["-s", "4096", "-b", "--verify", "-t", "8"]).unwrap();
    let h = header(&Banner {
        role: "client",
        rows: &rows,
        mtu: 1500,
        connection: "10.99.2.2 -> 10.99.1.2:4791".into(),
    });
    for want in [
        "Send BW Test (tcp-bth, client)",
        "Operation       : send",
        "Number of qps   : 1",
        "Mode            : tcp_bth (BTH option)",
        "Mtu             : 1500[B]",
        "TX depth        : 8",
        "RX depth        : 16",
        "Message size    : 4096[B]",
        "Iterations      : 5000",
        "Bidirectional   : ON",
        "Verify          : ON",
        "10.99.2.2 -> 10.99.1.2:4791",
    ] {
        assert!(h.contains(want), "{want:?} not in\n{h}");
    }
    let sweep = plan(&["-a", "--lat", "-D", "1", "--op", "read"]).unwrap();
    let h = header(&Banner {
        role: "server",
        rows: &sweep,
        mtu: 4000,
        connection: String::new(),
    });
    assert!(
        h.contains("RDMA_Read Latency Test (tcp-bth, server)"),
        "{h}"
    );
    assert!(h.contains("2 - 8388608[B] (-a, 23 sizes)"), "{h}");
    assert!(h.contains("Duration        : 1[sec]"), "{h}");
}

#[test]
fn a_json_row_carries_the_table_and_the_counters() {
    let cfg = PerfConfig::default();
    let mut r = report(65536, 100, 1000);
    r.verified = 100;
    r.latencies = vec![Duration::from_micros(5)];
    let v = serde_json::to_value(JsonRow::of(&cfg, &r, Some("timed out"))).unwrap();
    assert_eq!(v["bytes"], 65536);
    assert_eq!(v["iterations"], 100);
    assert_eq!(v["verified"], 100);
    assert_eq!(v["bw_average_mb_s"], 6.25);
    assert_eq!(v["latency"]["typical_us"], 5.0);
    assert_eq!(v["counters"]["recovery"]["retransmits"], 0);
    assert_eq!(v["counters"]["drops"]["icrc"], 0);
    assert_eq!(v["errors"][0], "timed out");
    assert!(v["peer"].is_null());
}

fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("an address")
}

/// `2001:db8:99:<net>::<host>`.
fn v6(net: u16, host: u16) -> IpAddr {
    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0x99, net, 0, 0, 0, host))
}

#[test]
fn tun_addresses_parse_and_leave_room_for_the_kernel_side() {
    let t: TunAddr = "10.99.1.2/24".parse().unwrap();
    assert_eq!((t.addr, t.prefix), (v4(10, 99, 1, 2), 24));
    assert_eq!(t.family(), Family::V4);
    assert_eq!(t.network(), "10.99.1.0/24");
    assert_eq!(t.kernel_side(None), Ok(v4(10, 99, 1, 1)));
    let first: TunAddr = "10.99.1.1/24".parse().unwrap();
    assert_eq!(first.kernel_side(None), Ok(v4(10, 99, 1, 2)));
    assert_eq!(
        t.kernel_side(Some(v4(10, 99, 1, 200))),
        Ok(v4(10, 99, 1, 200))
    );
    for bad in [
        t.addr,
        v4(10, 99, 2, 1),
        v4(10, 99, 1, 255),
        v4(10, 99, 1, 0),
    ] {
        assert!(matches!(
            t.kernel_side(Some(bad)),
            Err(HostError::KernelAddr { .. })
        ));
    }
    for (s, err) in [
        ("10.99.1.2", HostError::Syntax("10.99.1.2".into())),
        ("10.99.1/24", HostError::Syntax("10.99.1/24".into())),
        ("10.99.1.2/x", HostError::Syntax("10.99.1.2/x".into())),
        (
            "10.99.1.2/31",
            HostError::Prefix {
                prefix: 31,
                family: Family::V4,
            },
        ),
        (
            "10.99.1.2/0",
            HostError::Prefix {
                prefix: 0,
                family: Family::V4,
            },
        ),
    ] {
        assert_eq!(s.parse::<TunAddr>(), Err(err), "{s}");
    }
    assert!(matches!(
        "10.99.1.0/24".parse::<TunAddr>(),
        Err(HostError::NotHost(_))
    ));
    assert!(matches!(
        "10.99.1.255/24".parse::<TunAddr>(),
        Err(HostError::NotHost(_))
    ));
    // The smallest prefix with room for both: /30, its two host addresses.
    let narrow: TunAddr = "10.99.1.2/30".parse().unwrap();
    assert_eq!(narrow.kernel_side(None), Ok(v4(10, 99, 1, 1)));
    assert_eq!(
        "10.99.1.2/31".parse::<TunAddr>().unwrap_err().to_string(),
        "/31: an IPv4 prefix must be 1 to 30 (the stack and the kernel need an address each)"
    );
    assert_eq!(
        "10.99.1.255/24".parse::<TunAddr>().unwrap_err().to_string(),
        "10.99.1.255/24 is the broadcast address of its prefix: the stack needs a host address"
    );
}

#[test]
fn ipv6_tun_addresses_parse_and_leave_room_for_the_kernel_side() {
    let t: TunAddr = "2001:db8:99:1::2/64".parse().unwrap();
    assert_eq!((t.addr, t.prefix), (v6(1, 2), 64));
    assert_eq!(t.family(), Family::V6);
    assert_eq!(t.to_string(), "2001:db8:99:1::2/64");
    assert_eq!(t.network(), "2001:db8:99:1::/64");
    // The kernel side defaults to the first other host address of the prefix, as for IPv4.
    assert_eq!(t.kernel_side(None), Ok(v6(1, 1)));
    let first: TunAddr = "2001:db8:99:1::1/64".parse().unwrap();
    assert_eq!(first.kernel_side(None), Ok(v6(1, 2)));
    assert_eq!(t.kernel_side(Some(v6(1, 0x200))), Ok(v6(1, 0x200)));
    // IPv6 has no broadcast address: the prefix's last address is a host's.
    let last = IpAddr::V6(Ipv6Addr::new(
        0x2001, 0xdb8, 0x99, 1, 0xffff, 0xffff, 0xffff, 0xffff,
    ));
    assert_eq!(t.kernel_side(Some(last)), Ok(last));
    // Not the stack's, not outside the prefix, not the network (subnet-router anycast) one.
    for bad in [t.addr, v6(2, 1), v6(1, 0)] {
        assert_eq!(
            t.kernel_side(Some(bad)),
            Err(HostError::KernelAddr {
                kernel: bad,
                tun: t
            })
        );
    }
    // Prefixes other than /64, the host part crossing segment boundaries.
    let wide: TunAddr = "fd99:1::2/48".parse().unwrap();
    assert_eq!(wide.network(), "fd99:1::/48");
    assert_eq!(wide.kernel_side(None), Ok(ip("fd99:1::1")));
    let narrow: TunAddr = "fd99:1::2/126".parse().unwrap();
    assert_eq!(narrow.network(), "fd99:1::/126");
    assert_eq!(narrow.kernel_side(None), Ok(ip("fd99:1::1")));
    let odd: TunAddr = "fd99:1:2:3:4:5:6:7/67".parse().unwrap();
    assert_eq!(odd.network(), "fd99:1:2:3::/67");
    assert_eq!(odd.kernel_side(None), Ok(ip("fd99:1:2:3::1")));
    for (s, err) in [
        (
            "2001:db8:99:1::2",
            HostError::Syntax("2001:db8:99:1::2".into()),
        ),
        (
            "2001:db8:99:1::g/64",
            HostError::Syntax("2001:db8:99:1::g/64".into()),
        ),
        (
            "2001:db8:99:1::2/127",
            HostError::Prefix {
                prefix: 127,
                family: Family::V6,
            },
        ),
        (
            "2001:db8:99:1::2/0",
            HostError::Prefix {
                prefix: 0,
                family: Family::V6,
            },
        ),
    ] {
        assert_eq!(s.parse::<TunAddr>(), Err(err), "{s}");
    }
    assert!(matches!(
        "2001:db8:99:1::/64".parse::<TunAddr>(),
        Err(HostError::NotHost(_))
    ));
    assert_eq!(
        "2001:db8:99:1::/64"
            .parse::<TunAddr>()
            .unwrap_err()
            .to_string(),
        "2001:db8:99:1::/64 is the network address (the subnet-router anycast address) of its \
         prefix: the stack needs a host address"
    );
    for s in [
        "::1/64",
        "ff02::2/64",
        "fe80::2/64",
        "::ffff:10.99.1.2/96",
        "127.0.0.2/8",
    ] {
        assert!(
            matches!(s.parse::<TunAddr>(), Err(HostError::Unusable { .. })),
            "{s}"
        );
    }
    assert_eq!(
        "fe80::2/64".parse::<TunAddr>().unwrap_err().to_string(),
        "fe80::2 is an IPv6 link-local address, which no other host routes to: the stack needs \
         a unicast address another host can route to"
    );
    // An IPv6 device needs IPv6's minimum MTU; IPv4 does not.
    assert_eq!(t.check_mtu(1280), Ok(()));
    assert_eq!(t.check_mtu(1279), Err(HostError::Ipv6Mtu(1279)));
    let t4: TunAddr = "10.99.1.2/24".parse().unwrap();
    assert_eq!(t4.check_mtu(576), Ok(()));
}

#[test]
fn mixed_address_families_are_refused() {
    let t6: TunAddr = "2001:db8:99:2::2/64".parse().unwrap();
    let t4: TunAddr = "10.99.2.2/24".parse().unwrap();
    // The kernel side's address is of the stack's family.
    assert_eq!(
        t6.kernel_side(Some(v4(10, 99, 2, 1))),
        Err(HostError::KernelFamily {
            kernel: v4(10, 99, 2, 1),
            tun: t6
        })
    );
    assert_eq!(
        t4.kernel_side(Some(v6(2, 1))).unwrap_err().to_string(),
        "--tun-kernel-addr 2001:db8:99:2::1 is IPv6 but --tun-addr 10.99.2.2/24 is IPv4: the \
         kernel side takes another address of the stack's prefix"
    );
    // A client's stack and its server are of one family.
    assert_eq!(t6.check_server(v6(1, 2), false), Ok(()));
    assert_eq!(t4.check_server(v4(10, 99, 1, 2), true), Ok(()));
    assert_eq!(
        t4.check_server(v6(1, 2), true).unwrap_err().to_string(),
        "the server address 2001:db8:99:1::2 is IPv6 but this client's --tun-addr 10.99.2.2/24 \
         (the default) is IPv4: a run is IPv4 or IPv6 throughout (give --tun-addr an IPv6 \
         ADDR/PREFIX, e.g. 2001:db8:99:2::2/64, routed to this host from the server's)"
    );
    assert_eq!(
        t6.check_server(v4(10, 99, 1, 2), false),
        Err(HostError::ServerFamily {
            server: v4(10, 99, 1, 2),
            tun: t6,
            default: false
        })
    );
    assert!(t6
        .check_server(v4(10, 99, 1, 2), false)
        .unwrap_err()
        .to_string()
        .contains("give --tun-addr an IPv4 ADDR/PREFIX, e.g. 10.99.2.2/24"));
}

#[test]
fn forwarding_and_routes_are_per_family() {
    assert_eq!(
        Family::V4.forwarding_path(),
        "/proc/sys/net/ipv4/ip_forward"
    );
    assert_eq!(
        Family::V6.forwarding_path(),
        "/proc/sys/net/ipv6/conf/all/forwarding"
    );
    assert_eq!(Family::V4.ip_route(), "ip route");
    assert_eq!(Family::V6.ip_route(), "ip -6 route");
}

/// With READs one way, the side that answers them counts no message; both footers say why
/// rather than leave "0 messages" unexplained, and a SEND run's footer says nothing of it.
#[test]
fn a_read_runs_footers_say_where_the_reads_are_counted() {
    use super::output::footer;
    use super::run::Row;
    use bth_perf::PeerSummary;
    let row = |op: PerfOp, messages: u64, peer_messages: u64| Row {
        cfg: PerfConfig {
            op,
            ..PerfConfig::default()
        },
        report: PerfReport {
            messages,
            peer: Some(PeerSummary {
                messages: peer_messages,
                ..PeerSummary::default()
            }),
            ..PerfReport::default()
        },
        failure: None,
    };
    let client = footer("client", "server", &[row(PerfOp::Read, 50, 0)]).join("\n");
    assert!(
        client.contains("0 errors (it answered this side's READs, which are counted here"),
        "{client}"
    );
    let server = footer("server", "client", &[row(PerfOp::Read, 0, 50)]).join("\n");
    assert!(
        server.contains("(this side answered the peer's READs, counted where they complete)"),
        "{server}"
    );
    let send = footer("client", "server", &[row(PerfOp::Send, 50, 0)]).join("\n");
    assert!(!send.contains("READs"), "{send}");
    // In `local`, the server's own path samples follow (the READ responder sends the data).
    let mut responder = row(PerfOp::Read, 0, 50);
    responder.report.path.samples = 5;
    responder.report.path.covered_us = 4000;
    responder.report.path.pipe_x_us = 4000 * 65536;
    responder.report.path.pipe_max = 65536;
    let local = super::output::local_server_footer(&[responder]).join("\n");
    assert!(local.starts_with("server: path: "), "{local}");
    assert!(local.contains("in flight mean 64.0 KiB"), "{local}");
    assert!(super::output::local_server_footer(&[row(PerfOp::Send, 50, 0)]).is_empty());
}

/// `local` shares one `ServersClosed` per row between its two sides, each counting that row's
/// `-q` server connections: a row's client stops lingering once its own servers have closed,
/// not an earlier row's.
#[test]
fn local_has_one_servers_closed_per_row_of_qps_connections() {
    let p = parse(&["-a", "-q", "3"]).unwrap().plan().unwrap();
    let closed = super::run::servers_closed(&p);
    assert_eq!(closed.len(), p.rows.len());
    assert!(closed.len() > 1);
    assert!(closed.iter().all(|c| !c.all()), "none closed yet");
}
