//! `bth-compare`: the same message workload over Linux kernel TCP and over tcp-bth (io_uring
//! TUN path) between two network namespaces, interleaved runs, a Markdown table, a JSON file of
//! every run and SVG charts.

use bth_testbed::topology::parse_mtu;
use bth_tools::compare::{self, render, RunRecord};
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "bth-compare",
    version,
    about = "Compare tcp-bth with kernel TCP on the same message workloads",
    long_about = "Compare tcp-bth with kernel TCP on the same message workloads.\n\n\
        For each cell (workload, message size, link) it creates two network namespaces (joined \
        by veth, or by the userspace impairment relay for the reordering, reordering-depth, loss \
        and spraying cells), then runs kernel TCP (tokio sockets, 4-byte length prefix + \
        payload) and our stack (perf apps on the io_uring TUN path) alternately through the same \
        link, and deletes the namespaces. Our stack runs twice in each cell: ours, per-segment \
        framing (every segment its own BTH), and ours S, S framing (spec amendment 3) on stack \
        TUN devices with TSO, so its connections write super-segments of up to 64 KiB of one \
        message that the kernel carries whole or cuts (not in plain cells: a byte stream has \
        no framing); every table has an ours S row beside ours with its own ratios, and the \
        JSON file its runs as \"stack\": \"ours_seq\" (with super-segments written and read \
        whole: gso_sent, gso_segments, super_segments_in). Relay cell ids name the link: relay-r10-l0 is 10 % \
        reordered and 0 % lost, -d500us a reordered packet held back up to 500 µs instead of \
        100, relay-spray4-200us every packet sprayed round-robin over 4 paths whose extra \
        delays are spread evenly over 0..200 µs.\n\n\
        Prints a Markdown table (retransmissions of the client's and the server's connection \
        apart; for our stack also RACK loss detections, RTOs and tail loss probes; for relay \
        cells the relay thread's share of a core during each run's transfer, \"relay busy\": on 2 cores \
        the relay is a third busy thread, near 100 % that thread bounded the run; it also runs \
        the kernel's receive processing of what it writes, kernel TCP's own for kernel runs), writes \
        every raw run as JSON (our runs with each side's full recovery counters) and SVG \
        charts: throughput vs message size, vs reordering rate, vs reordering depth and vs \
        number of sprayed paths, p99 vs reordering. The full run (no --quick; --only relay-ceiling \
        or --only incast for just these) ends with two more rows: the relay's own ceiling \
        (kernel TCP over veth and through the clean relay) and the incast scenario of \
        receiver-driven admission in the simulator (16 senders into one receiver, admission \
        off and on). The full plan also has bulk-64KiB-veth-q8 (8 of our QPs on one driver and \
        endpoint against 8 kernel sockets; --qps runs every cell so) and the same incast over \
        TUN (incast-tun-*: 16 client connections into one server through the relay as a \
        500 Mbit/s bottleneck with a 256 KiB drop-tail queue, ours with admission off and on, \
        kernel TCP beside it; a table of its own with the relay's queue drops per run). \
        Every bulk relay cell of ours that ran (MTU 1500, one connection, tcp_bth) is run \
        again in the deterministic simulator on the same link (seed, delay, loss, reordering, \
        paths) with the same messages and TUN-like driver turns, in a table of real against \
        simulated Gbit/s: whether the simulator reproduces the real path.\n\n\
        MTU: every device of a cell's topology (veth or relay, both stacks' TUN devices) has \
        the cell's MTU (1500 unless its id ends in -mtuN); kernel TCP takes its MSS from it, \
        ours MTU - 40. The full plan sweeps bulk 1 MiB SEND over veth at MTU 1500, 4096, 9000 \
        and 65000, and --mtu 1500,9000,65000 runs only that sweep at the MTUs given. It also \
        runs the clean relay, 10 % reordering, 1 % loss and 4-path spraying again at MTU 9000 \
        and 65000 (ids ending in -mtu9000, -mtu65000), where per-packet costs weigh less. Each \
        sweep cell also measures the path's ceiling in the same topology: the same io_uring \
        driver on A's stack TUN device writes raw MTU-sized IPv4 packets (protocol 253) as fast \
        as it can, the kernel forwards them over veth into B's TUN device, B's driver counts \
        them (1 s after 0.2 s of warm-up; --quick 0.3 s after 0.1 s). Its Gbit/s counts what \
        our stack would carry in as many packets (MTU - 80 payload bytes each), so it compares \
        with the stacks' payload Gbit/s; its IP Gbit/s counts whole packets. In the full plan \
        the bulk cells through the clean relay and the spraying cells (at every MTU) measure it \
        too, through the relay, its receiver sleeping between packets as the stacks' drivers do (polling, it \
        would take the core the relay needs). Each such cell measures it twice: bare, and \
        with an ACK clock (B's driver also writes a 52-byte packet back to A for every second \
        packet it reads, as our receiver acknowledges every second full-sized segment, and \
        A's driver reads them), which is what the path leaves a stack that acknowledges so. \
        A third probe, the GSO ceiling, writes TCP-shaped GSO super-packets instead (IPv4, a \
        60-byte TCP header, as many whole segments of MTU - 80 payload bytes as fit in 64 KiB, \
        gso_size MTU - 80, NEEDS_CSUM) through the same devices with TSO, so B reads them \
        whole: what the path leaves ours S (its sender writes with write(2); the driver sets no \
        GSO header on packets it is handed). A table of its own gives the three ceilings, \
        kernel, ours and ours S per cell with ours/ceiling, ours/ceiling with ACKs, ours/GSO \
        ceiling and ours/kernel on each of ours' rows; throughput-vs-mtu.svg charts the veth \
        sweep's six, throughput-vs-paths.svg has the relay's ceilings beside the stacks.\n\n\
        In the main table ours/kernel is the ratio of the medians and, in brackets, the \
        smallest and largest ratio of single runs (run i of ours over run i of kernel TCP, \
        which ran next to it): how reliably the ratio holds on a noisy machine; on ours S's \
        row, ours S over kernel TCP.\n\n\
        Needs root (CAP_NET_ADMIN) and iproute2 (ip, and tc to take the TUN devices' qdisc \
        off), except with --dry-run; --dry-run lists every \
        cell. Each run of ours records each side's thread's page faults and context switches \
        (client_thread, server_thread in the JSON file). Experiment: BTH_BUSY_POLL_US=N makes \
        our TUN driver poll its ring rather than sleep for N microseconds after each packet \
        arrives (default 0, off; docs/datapath.md)."
)]
struct Cli {
    /// A small subset (6 cells, one of them spraying; 2 runs per stack, small byte counts):
    /// seconds.
    #[arg(long)]
    quick: bool,
    /// Print the plan and exit (no root needed).
    #[arg(long)]
    dry_run: bool,
    /// Runs per stack per cell (default: 3, or 2 with --quick).
    #[arg(long)]
    runs: Option<usize>,
    /// Only these cells: a whole cell id selects that cell alone, any other pattern every cell
    /// whose id contains it; several, comma-separated, select the union (e.g.
    /// `--only bulk-1MiB-veth,spray4`). `incast-tun`: the incast cells over TUN; `incast`:
    /// those and the simulator's incast tables; `relay-ceiling`: the relay's own ceiling.
    /// --dry-run lists the ids.
    #[arg(long, value_name = "PATTERNS", value_parser = compare::Only::parse)]
    only: Option<compare::Only>,
    /// Run every cell with each of these connection counts, e.g. `--qps 1,8`: N of our QPs
    /// (one driver and one endpoint per side) against N kernel sockets, the cell's messages
    /// shared out among them (cell id suffix `-qN`). Works with --quick and --only.
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    qps: Vec<u32>,
    /// Instead of the plan: the MTU sweep at these MTUs (bytes, 576 to 65535), e.g. `--mtu
    /// 1500,9000,65000`. Per MTU, every device of the topology at that MTU: the path's
    /// ceilings (raw packets through the same TUN devices and veth, no TCP; with ACKs; GSO
    /// super-packets), kernel TCP, ours and ours S, bulk 1 MiB SEND over veth, with
    /// ours/ceiling and ours/kernel. Works with --quick (fewer bytes, shorter ceiling),
    /// --runs, --only and --dry-run.
    #[arg(long, value_delimiter = ',', value_name = "BYTES,...", value_parser = parse_mtu)]
    mtu: Vec<u32>,
    /// Our stack's TUN devices (and the ceiling's) without checksum offload: every TCP
    /// checksum computed on send and checked on receive. By default they are left partial
    /// (`NEEDS_CSUM`) and trusted when the kernel vouches for them, as kernel TCP over veth
    /// does. TSO needs checksum offload: without it ours S writes one segment per packet and
    /// the GSO ceiling does not run.
    #[arg(long)]
    no_csum_offload: bool,
    /// Relay cells (and the relay's own ceiling): pin the relay thread to a core of its own
    /// (the last CPU this process may use) and every thread of both stacks (and of the path's
    /// ceiling) to the others, for kernel TCP and ours alike. Not the same work moves for
    /// both: the relay's TUN writes run the kernel's receive path, so kernel TCP's receive
    /// processing runs on the relay's core, ours on the stacks' cores. Off by default: the
    /// scheduler places the three busy threads, and on 2 cores the relay then competes with
    /// both ends (docs/results.md, "Pinning the relay"). Each run's record says where its
    /// threads ran (`relay_pinned`). No effect over veth or with one CPU.
    #[arg(long)]
    pin_relay: bool,
    /// Where to write the JSON file of every run.
    #[arg(long, default_value = "bth-compare.json")]
    json: PathBuf,
    /// Directory for the SVG charts.
    #[arg(long, default_value = "bth-compare-charts")]
    charts: PathBuf,
    /// Relay seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Kernel TCP's congestion control, set on every kernel socket (`TCP_CONGESTION`) whatever
    /// the machine's default: by default CUBIC, as our stack runs, so both answer loss with
    /// the same algorithm. `--kernel-cc bbr` compares with BBR, which does not treat random
    /// loss as congestion. Must be one of the kernel's
    /// (/proc/sys/net/ipv4/tcp_available_congestion_control).
    #[arg(long, value_name = "NAME", default_value = compare::DEFAULT_KERNEL_CC)]
    kernel_cc: String,
    /// Instead of the table: the relay's own ceiling, kernel TCP bulk over veth and through a
    /// clean relay alternately (`--runs` each, default 3), N MiB per run in 1 MiB messages.
    #[arg(long, value_name = "N")]
    relay_ceiling: Option<u64>,
}

fn main() -> ExitCode {
    let cli: Cli = bth_tools::cli::parse();
    // Before any thread: an interrupted run still aborts its connections with RST, then
    // deletes its namespaces (and turns forwarding back off).
    if let Err(e) = bth_testbed::interrupt::install("bth-compare") {
        eprintln!("bth-compare: warning: Ctrl-C will not clean up after the run ({e})");
    }
    if cli.qps.contains(&0) {
        eprintln!("bth-compare: --qps counts start at 1");
        return ExitCode::FAILURE;
    }
    let mut plan = if cli.mtu.is_empty() {
        compare::plan(cli.quick)
    } else {
        compare::mtu_plan(&cli.mtu, cli.quick)
    };
    // --only picks cells of the plan; --qps then runs each picked cell at each count.
    if let Some(only) = &cli.only {
        // The full run's extra sections answer to --only too ("relay-ceiling", "incast").
        let extras: &[&str] = if !cli.quick && cli.mtu.is_empty() {
            &["relay-ceiling", "incast"]
        } else {
            &[]
        };
        let ids: Vec<&str> = plan.cells.iter().map(|c| c.id.as_str()).collect();
        let unmatched = only.unmatched(&ids, extras);
        if !unmatched.is_empty() && cli.relay_ceiling.is_none() {
            eprintln!(
                "bth-compare: --only: {} matches no cell of this plan (--dry-run lists them)",
                unmatched.join(", ")
            );
            return ExitCode::FAILURE;
        }
        only.retain(&mut plan.cells);
    }
    let mut plan = plan.with_qps(&cli.qps);
    // Settings of the whole run, on every cell.
    for c in &mut plan.cells {
        c.kernel_cc = cli.kernel_cc.clone();
        c.csum_offload = !cli.no_csum_offload;
        c.pin_relay = cli.pin_relay;
    }
    if cli.runs == Some(0) {
        eprintln!("bth-compare: --runs 0: a cell needs at least one run per stack");
        return ExitCode::FAILURE;
    }
    if cli.relay_ceiling == Some(0) {
        eprintln!("bth-compare: --relay-ceiling 0: give the MiB each run moves (at least 1)");
        return ExitCode::FAILURE;
    }
    if let Some(r) = cli.runs {
        plan.runs = r;
    }
    if cli.dry_run {
        print!("{}", plan.describe());
        return ExitCode::SUCCESS;
    }
    if let Some(why) = bth_io::tun::net_admin_missing() {
        eprintln!("bth-compare: {why}; try --dry-run to see the plan without root");
        return ExitCode::FAILURE;
    }
    // A name the kernel does not have would fail every kernel run of the plan, one by one.
    if let Err(e) = compare::kernel::congestion_available(&cli.kernel_cc) {
        eprintln!("bth-compare: --kernel-cc: {e}");
        return ExitCode::FAILURE;
    }
    if let Some(mib) = cli.relay_ceiling {
        let mut cell = compare::ceiling_cell(1 << 20, mib).with_kernel_cc(&cli.kernel_cc);
        cell.pin_relay = cli.pin_relay;
        let prefix = format!("bthceil{}", std::process::id());
        return match compare::relay_ceiling(&prefix, &cell, None, cli.runs.unwrap_or(3)) {
            Ok(c) => {
                for (link, runs) in [("veth", &c.veth), ("relay", &c.relay)] {
                    for r in runs.iter() {
                        match &r.error {
                            Some(e) => eprintln!("{link} run {} failed: {e}", r.run),
                            None => println!("{link} run {}: {:.3} Gbit/s", r.run, r.gbps),
                        }
                    }
                }
                println!("{}", c.describe());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("bth-compare: relay ceiling: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let started = Instant::now();
    let bar = ProgressBar::new(plan.total_runs() as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {msg}")
            .expect("template")
            .progress_chars("=> "),
    );
    let mut records: Vec<RunRecord> = Vec::new();
    let pid = std::process::id();
    for (i, cell) in plan.cells.iter().enumerate() {
        bar.set_message(cell.id.clone());
        let prefix = format!("bthcmp{pid}-{i}");
        let res = compare::run_cell(cell, plan.runs, &prefix, cli.seed, |r| {
            bar.inc(1);
            if let Some(e) = &r.error {
                let who = r.stack.name();
                bar.println(format!("{} run {} ({who}) failed: {e}", r.cell, r.run));
            }
        });
        match res {
            Ok(mut r) => records.append(&mut r),
            Err(e) => {
                bar.finish_and_clear();
                eprintln!("bth-compare: setting up {}: {e}", cell.id);
                return ExitCode::FAILURE;
            }
        }
    }
    bar.finish_and_clear();
    let results = compare::summarize(&plan, &records);
    println!("{}", render::congestion_line(&records));
    let pinning = render::pinning_line(&records);
    if !pinning.is_empty() {
        println!("{pinning}");
    }
    if results.iter().any(|c| !c.cell.is_incast()) {
        println!("{}", render::markdown(&results));
    }
    let held = render::limits_markdown(&results);
    if !held.is_empty() {
        println!(
            "what held ours' sender back (each state's median share of the time the sending \
             side had data to send or in flight; a state that holds it in front of a long queue \
             sets the queue's length, not the rate):\n\n{held}"
        );
    }
    let mtu = render::mtu_markdown(&results);
    if !mtu.is_empty() {
        println!(
            "path ceiling, kernel TCP, ours and ours S: per MTU over veth, and through the relay where it \
             loses nothing on purpose (Gbit/s of payload; the ceiling's: what ours would carry in \
             as many packets, MTU - 80 bytes each). The ceiling is a probe, one flow-controlled \
             stream of MTU-sized packets, not a bound: kernel TCP's 64 KiB GSO packets pass it \
             over veth and through the clean relay, and ours can where the probe's receiver is \
             the slower side. The ceiling with ACKs is the same probe whose receiver also sends a \
             52-byte packet back for every second packet it reads, as our receiver's ACK policy \
             does (RFC 5681), still without TCP: what the path leaves a stack that acknowledges \
             so. The GSO ceiling writes TCP-shaped 64 KiB GSO super-packets of MTU-sized \
             segments through devices with TSO instead, as ours S writes its super-segments \
             (packets/s counts its segments): what the path leaves ours S:\n\n{mtu}"
        );
    }
    let incast = render::incast_markdown(&results);
    if !incast.is_empty() {
        println!("incast over TUN (relay bottleneck; per run a topology of its own):\n\n{incast}");
    }
    // The JSON's folder is made if missing: a run of minutes must not be lost to it.
    let parent = cli.json.parent().filter(|p| !p.as_os_str().is_empty());
    let written = parent
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&cli.json, render::json(&plan, &records, &results)));
    if let Err(e) = written {
        eprintln!("bth-compare: writing {}: {e}", cli.json.display());
        return ExitCode::FAILURE;
    }
    println!("raw runs: {}", cli.json.display());
    match render::charts(&results, &cli.charts) {
        Ok(files) if files.is_empty() => {
            // Created for nothing: leave no empty directory behind (fails if it held files).
            let _ = std::fs::remove_dir(&cli.charts);
            println!("charts: none (a chart needs two points or more of one kind; these cells give fewer)");
        }
        Ok(files) => {
            for f in files {
                println!("chart: {}", f.display());
            }
        }
        Err(e) => {
            eprintln!("bth-compare: charts: {e}");
            return ExitCode::FAILURE;
        }
    }
    // Every relay cell of ours that ran, again in the simulator on the same link.
    let simulated = compare::simulated::section(&results, cli.seed);
    if !simulated.is_empty() {
        println!("{simulated}");
    }
    // The full run's other rows: the relay's own ceiling, and the incast scenario (simulator).
    let wanted = |what: &str| {
        !cli.quick && cli.mtu.is_empty() && cli.only.as_ref().is_none_or(|o| o.wants_extra(what))
    };
    if wanted("relay-ceiling") {
        println!(
            "\n{}",
            compare::extra::ceiling_section(
                &format!("bthcmp{pid}-c"),
                plan.runs,
                &cli.kernel_cc,
                cli.pin_relay
            )
        );
    }
    if wanted("incast") {
        match compare::extra::incast_section() {
            Ok(t) => println!("\n{t}"),
            Err(e) => {
                eprintln!("bth-compare: incast: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!(
        "{} runs in {:.0} s",
        records.len(),
        started.elapsed().as_secs_f64()
    );
    ExitCode::SUCCESS
}
