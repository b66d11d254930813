//! `bth-compare` through its library: the plan, rendering a synthetic result set, and (with
//! CAP_NET_ADMIN) one small real cell end to end over every stack: kernel TCP, ours
//! (per-segment framing) and ours S (S framing with segmentation offload).

use bth_tools::compare::{
    self, render, AckClock, CeilingSpec, Cell, Link, RunRecord, Stack, Workload,
};

fn quick_plan_is_small_and_interleaves_every_stack() {
    let p = compare::plan(true);
    assert_eq!(p.runs, 2);
    assert!(!p.cells.is_empty() && p.cells.len() <= 6);
    // Kernel, ours and ours S in every cell, but no ours S in the plain one (no framing).
    let plain = p.cells.iter().filter(|c| c.plain).count();
    assert_eq!(plain, 1);
    assert_eq!(p.total_runs(), (p.cells.len() * 3 - plain) * 2);
    assert_eq!(p.ours_seq_runs(), (p.cells.len() - plain) * 2);
    for c in &p.cells {
        let stacks = c.stacks();
        assert_eq!(&stacks[..2], [Stack::Kernel, Stack::Ours]);
        assert_eq!(stacks.contains(&Stack::OursSeq), !c.plain, "{}", c.id);
    }
    let ids: std::collections::HashSet<_> = p.cells.iter().map(|c| c.id.clone()).collect();
    assert_eq!(ids.len(), p.cells.len(), "cell ids are unique");
    assert!(p.cells.iter().all(|c| c.bytes() <= 64 << 20));
    assert!(p
        .cells
        .iter()
        .any(|c| matches!(c.link, Link::Relay { reorder, .. } if reorder > 0.0)));
    // Our fallback byte stream runs beside BTH through reordering, where it must stage data.
    assert!(p
        .cells
        .iter()
        .any(|c| c.plain && matches!(c.link, Link::Relay { reorder, .. } if reorder > 0.0)));
    let d = p.describe();
    assert!(d.contains(&format!("{} runs", p.total_runs())), "{d}");
    for c in &p.cells {
        assert!(d.contains(&c.id));
    }
    let full = compare::plan(false);
    for s in compare::SIZES {
        assert!(full
            .cells
            .iter()
            .any(|c| c.size == s && c.workload == Workload::Bulk && c.link == Link::Veth));
    }
    for (reorder, loss) in compare::IMPAIRMENTS {
        assert!(full
            .cells
            .iter()
            .any(|c| c.link == Link::relay(reorder, loss)));
    }
    // The reordering-depth sweep; relay cells at the usual depth keep their old ids.
    for d in compare::REORDER_DEPTHS_US {
        let id = format!("bulk-1MiB-relay-r10-l0-d{d}us");
        assert!(full.cells.iter().any(|c| c.id == id), "{id}");
        assert!(full.describe().contains(&id));
    }
    assert!(full.cells.iter().any(|c| c.id == "bulk-1MiB-relay-r10-l0"));
    let ids: std::collections::HashSet<_> = full.cells.iter().map(|c| c.id.clone()).collect();
    assert_eq!(ids.len(), full.cells.len(), "cell ids are unique");
}

fn renders_a_synthetic_result_set() {
    let plan = compare::plan(true);
    let mut runs = Vec::new();
    for c in &plan.cells {
        for run in 0..plan.runs {
            runs.push(RunRecord::synthetic(
                &c.id,
                Stack::Kernel,
                run,
                4.0 + run as f64,
            ));
            runs.push(RunRecord::synthetic(
                &c.id,
                Stack::Ours,
                run,
                2.0 + run as f64,
            ));
            if !c.plain {
                runs.push(RunRecord::synthetic(
                    &c.id,
                    Stack::OursSeq,
                    run,
                    6.0 + 2.0 * run as f64,
                ));
            }
        }
    }
    // One failed run is reported, not averaged in.
    let mut bad = RunRecord::synthetic(&plan.cells[0].id, Stack::Ours, 9, 100.0);
    bad.error = Some("timed out".into());
    bad.detail = None;
    runs.push(bad);
    let results = compare::summarize(&plan, &runs);
    assert_eq!(results.len(), plan.cells.len());
    let r0 = &results[0];
    assert_eq!((r0.ours.runs_ok, r0.ours.runs_failed), (2, 1));
    assert!((r0.kernel.gbps - 4.5).abs() < 1e-9, "median of 4 and 5");
    assert!((r0.ratio().unwrap() - 2.5 / 4.5).abs() < 1e-9);
    assert!((r0.ours.cpu_client_s_per_gb - 2.0).abs() < 1e-9);
    assert_eq!(r0.ours.rx_held_max, 0);
    assert_eq!(r0.kernel.rx_held_max, 1 << 20);
    assert_eq!(r0.ours.p99_us, Some(990.0));
    // Ours S: its own summary and ratios (7 / 4.5 of the medians; 6/4 and 8/5 run by run).
    let seq = r0.ours_seq.as_ref().expect("ours S ran");
    assert_eq!((seq.stack, seq.runs_ok), (Stack::OursSeq, 2));
    assert!((seq.gbps - 7.0).abs() < 1e-9);
    assert!((r0.ours_seq_over_kernel.unwrap() - 7.0 / 4.5).abs() < 1e-9);
    assert_eq!(r0.ours_seq_over_kernel_runs, Some((1.5, 1.6)));
    assert!((r0.ours_seq_over_ours.unwrap() - 7.0 / 2.5).abs() < 1e-9);
    // Our recovery counters are both rows' (ours S's synthetic runs have them too).
    assert_eq!(seq.rack_losses, Some(1.0));
    let plain = results.iter().find(|c| c.cell.plain).expect("a plain cell");
    assert!(plain.ours_seq.is_none() && plain.ours_seq_over_kernel.is_none());

    let md = render::markdown(&results);
    // Three rows a cell, two in the plain one (no ours S).
    assert_eq!(md.lines().count(), 2 + 3 * plan.cells.len() - 1, "{md}");
    assert!(md.contains("| kernel |") && md.contains("| ours |"));
    assert!(md.contains("0.56×"), "{md}");
    assert!(md.contains("2 (1 failed)"), "{md}");
    // Both sides' retransmissions, and which detector repaired them (ours only).
    assert!(md.contains("| 3 (1 / 2; 1 spurious) | 1 / 1 / 1 |"), "{md}");
    assert!(md.contains("| 3 (1 / 2) | – |"), "{md}");
    // Ours S's row in each cell but the plain one, right below ours', with its ratio over
    // kernel TCP and the single runs' range.
    let id0 = &plan.cells[0].id;
    let rows: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with(&format!("| {id0} |")))
        .collect();
    assert_eq!(rows.len(), 3, "{md}");
    assert!(
        rows[2].starts_with(&format!("| {id0} | ours S | 2 | 7.000 |")),
        "{md}"
    );
    assert!(rows[2].ends_with("| 1.56× (1.50–1.60) |"), "{}", rows[2]);
    // Machine-wide CPU per GB beside each side's (1 GB a run), with its softirq share; and,
    // on kernel TCP's row of a bulk cell, what its socket buffer kept outstanding.
    assert!(
        rows[0].contains("| 2.00 / 1.00 / 1.50 (0.50) |"),
        "{}",
        rows[0]
    );
    assert!(
        rows[1].contains("| 2.00 / 1.00 / 4.00 (0.50) |"),
        "{}",
        rows[1]
    );
    assert_eq!(plan.cells[0].workload, Workload::Bulk);
    assert!(rows[0].contains("| kernel (outq 3.0 MiB) |"), "{}", rows[0]);
    assert_eq!(r0.kernel.cpu_machine_s_per_gb, Some(1.5));
    for c in &plan.cells {
        let want = usize::from(!c.plain);
        let n = md
            .lines()
            .filter(|l| l.starts_with(&format!("| {} | ours S |", c.id)))
            .count();
        assert_eq!(n, want, "{}: {md}", c.id);
    }

    let js = render::json(&plan, &runs, &results);
    assert!(js.starts_with('{') && js.ends_with('}'));
    assert_eq!(
        js.matches("\"elapsed_s\"").count(),
        runs.len(),
        "every raw run"
    );
    assert!(js.contains("\"stack\": \"kernel\"") && js.contains("\"error\": \"timed out\""));
    assert!(js.contains("\"server_recovery\": {") && js.contains("\"tlp_probes\": 1"));
    // Ours S's runs and summaries, by name, with their counters of super-segments: a run
    // and a summary (in `cells`) each say `"stack": "ours_seq"`.
    let seq_runs = (plan.cells.len() - 1) * plan.runs;
    assert_eq!(
        js.matches("\"stack\": \"ours_seq\"").count(),
        seq_runs + plan.cells.len() - 1,
        "{js}"
    );
    assert_eq!(js.matches("\"seq_framed\": true").count(), seq_runs);
    assert_eq!(js.matches("\"gso_sent\": 40").count(), seq_runs);
    for key in [
        "ours_seq_over_kernel",
        "ours_seq_over_kernel_runs",
        "ours_seq_over_ceiling",
        "ours_seq_over_ceiling_acked",
        "ours_seq_over_ours",
    ] {
        assert_eq!(
            js.matches(&format!("\"{key}\":")).count(),
            plan.cells.len(),
            "{key}"
        );
    }

    let dir = std::env::temp_dir().join(format!("bth-compare-test-{}", std::process::id()));
    let files = render::charts(&results, &dir).expect("charts");
    assert!(!files.is_empty());
    for f in &files {
        let svg = std::fs::read_to_string(f).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("kernel TCP") && svg.contains("(ours S)"),
            "{}",
            f.display()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn one_small_real_cell_end_to_end() {
    let mut plan = compare::plan(true);
    plan.cells.retain(|c| c.id == "bulk-4KiB-veth");
    plan.runs = 1;
    let cell = &mut plan.cells[0];
    cell.count = 300;
    let prefix = format!("bthcmpt{}", std::process::id());
    let runs = compare::run_cell(cell, 1, &prefix, 1, |_| {}).expect("topology");
    assert!(!std::path::Path::new(&format!("/run/netns/{prefix}-a")).exists());
    let stacks: Vec<Stack> = runs.iter().map(|r| r.stack).collect();
    assert_eq!(stacks, [Stack::Kernel, Stack::Ours, Stack::OursSeq]);
    for r in &runs {
        assert_eq!(r.error, None, "{:?}", r.stack);
        assert_eq!(r.messages, 300);
        assert_eq!(r.verified, 300, "{:?}", r.stack);
        assert_eq!(r.bytes, 300 * 4096);
        assert!(r.gbps > 0.0 && r.p99_us.is_some());
        assert!(r.cpu_client_s > 0.0 || r.cpu_server_s > 0.0);
        assert_eq!(r.retrans, r.client_retrans + r.server_retrans);
        // Both stacks run CUBIC, whatever the machine's default (kernel: read back from
        // every socket).
        assert_eq!(r.congestion(), Some(compare::DEFAULT_KERNEL_CC));
    }
    assert!(render::congestion_line(&runs).contains("kernel TCP cubic"));
    // Ours records each side's thread counters (the kernel's threads are not ours to count):
    // the server waited for the first packet at least, so it gave up the CPU.
    assert!(runs[0].ours().is_none() && runs[0].kernel().is_some());
    let ours = runs[1].ours().expect("ours' figures");
    // The sender's view of the path, sampled during the run.
    let path = ours.client_path;
    assert!(path.samples > 0 && path.srtt_mean_us.is_some(), "{path:?}");
    assert!(path
        .in_flight_mean_bytes
        .is_some_and(|b| b <= path.in_flight_max_bytes));
    let st = ours.server_thread;
    assert!(st.voluntary_switches > 0, "{st:?}");
    // Ours records both sides' counters; the client sent the data.
    let (cr, sr) = (ours.client_recovery, ours.server_recovery);
    assert!(
        cr.segments_sent > sr.segments_sent,
        "client {cr}; server {sr}"
    );
    assert_eq!(
        runs[1].rx_held_max, 0,
        "ours holds nothing outside posted buffers"
    );
    assert_ours_seq(&runs[1], &runs[2]);
    let results = compare::summarize(&plan, &runs);
    let md = render::markdown(&results);
    assert!(md.contains("| bulk-4KiB-veth | ours | 1 |"), "{md}");
    assert!(md.contains("| bulk-4KiB-veth | ours S | 1 |"), "{md}");
    assert!(results[0]
        .ours_seq_over_kernel
        .is_some_and(|r| r.is_finite() && r > 0.0));
}

/// Ours per-segment (`ours`) ran per-segment framing and wrote no super-segment; ours S
/// (`seq`) ran S framing on devices with TSO: its client wrote super-segments of several
/// segments each, the server's device handed them over whole, and every message was
/// verified as in ours' run.
fn assert_ours_seq(ours: &RunRecord, seq: &RunRecord) {
    assert_eq!((ours.stack, seq.stack), (Stack::Ours, Stack::OursSeq));
    assert_eq!(seq.error, None, "{seq:?}");
    assert!(seq.messages > 0 && seq.verified == seq.messages, "{seq:?}");
    let (o, s) = (
        ours.ours().expect("ours' figures"),
        seq.ours().expect("ours S's figures"),
    );
    assert!(!o.seq_framed);
    assert_eq!((o.gso_sent, o.super_segments_in), (0, 0));
    assert!(s.seq_framed, "{seq:?}");
    let (sent, stands_for) = (s.gso_sent, s.gso_segments);
    assert!(
        sent > 0 && stands_for >= 2 * sent,
        "{sent} super-segments standing for {stands_for} segments"
    );
    assert!(s.super_segments_in > 0, "{seq:?}");
}

/// Our stack as a plain byte stream, through the relay with reordering: received bytes wait in
/// the stack (stream queue, out-of-order store) and the rx-held column shows it.
fn one_small_plain_cell_shows_staged_bytes() {
    let mut plan = compare::plan(true);
    plan.cells.retain(|c| c.plain);
    plan.runs = 1;
    let cell = &mut plan.cells[0];
    assert!(matches!(cell.link, Link::Relay { reorder, .. } if reorder > 0.0));
    cell.count = 8;
    let prefix = format!("bthcmpp{}", std::process::id());
    let runs = compare::run_cell(cell, 1, &prefix, 1, |_| {}).expect("topology");
    // No ours S in a plain cell: a byte stream has no framing.
    assert_eq!(runs.len(), 2);
    let ours = &runs[1];
    assert_eq!(ours.stack, Stack::Ours);
    assert_eq!(ours.error, None);
    assert_eq!(ours.bytes, 8 << 20);
    assert!(
        ours.rx_held_max > 0,
        "plain mode stages received bytes: {ours:?}"
    );
    let results = compare::summarize(&plan, &runs);
    assert!(results[0].ours_seq.is_none());
    let md = render::markdown(&results);
    assert!(
        md.contains("| ours (plain) |") && !md.contains("| ours S"),
        "{md}"
    );
}

/// One small spraying cell over both stacks and the path's ceiling through the relay, pinned
/// (`--pin-relay`): the relay sprays round-robin over 4 paths, both stacks move every byte,
/// the ceiling's packets arrive (and its ACK clock's come back), ours records both sides' recovery counters, every run says
/// where its threads ran, and the test's thread gets its CPU mask back.
fn one_small_spray_cell_runs_both_stacks() {
    let mut plan = compare::plan(true);
    plan.cells
        .retain(|c| matches!(c.link, Link::Spray { paths: 4, .. }));
    plan.runs = 1;
    let cell = &mut plan.cells[0];
    cell.count = 8;
    cell.ceiling = Some(CeilingSpec {
        warmup_ms: 50,
        measure_ms: 150,
    });
    // And pinned (`--pin-relay`): each record says where its threads ran.
    cell.pin_relay = true;
    let prefix = format!("bthcmps{}", std::process::id());
    let runs = compare::run_cell(cell, 1, &prefix, 1, |_| {}).expect("topology");
    let stacks: Vec<Stack> = runs.iter().map(|r| r.stack).collect();
    assert_eq!(stacks, CEILING_CELL_RUN);
    let path = runs[0].path().expect("the ceiling's figures");
    assert!(path.packets > 0 && path.gbps() > 0.0, "{path:?}");
    assert_ack_clock(&runs[0], &runs[1]);
    for r in &runs {
        assert_eq!(r.error, None, "{:?}", r.stack);
        if !r.stack.is_ceiling() {
            assert_eq!(r.bytes, 8 << 20, "{:?}", r.stack);
        }
        // The relay is shared by the cell's runs: its CPU is read around each run.
        let busy = r.relay_busy.expect("a relay cell measures the relay's CPU");
        println!(
            "{:?}: relay busy {busy:.3}, relay CPU {:?} s, transfer {:.4} s",
            r.stack, r.relay_cpu_s, r.elapsed_s
        );
        assert!(
            busy > 0.0 && busy <= 1.05,
            "{:?}: relay busy {busy}",
            r.stack
        );
    }
    assert!(
        runs[4].ours().is_some(),
        "ours' recovery counters: {:?}",
        runs[4]
    );
    // Ours S through the sprayed relay: S framing, every message verified (the relay's
    // devices have TSO; it cuts super-segments into segments to spray them).
    let seq = runs[5].ours().expect("ours S's figures");
    assert!(seq.seq_framed, "{:?}", runs[5]);
    assert_eq!(runs[5].verified, runs[5].messages);
    // The GSO ceiling's segments arrive too, cut by the relay or whole.
    let gso = runs[2].path().expect("the GSO ceiling's figures");
    assert!(gso.packets > 0 && gso.gso_size == Some(1420), "{gso:?}");
    let cpus = bth_testbed::pinning::allowed_cpus().expect("this thread's CPU mask");
    if let Some(want) = bth_testbed::pinning::split(&cpus) {
        for r in &runs {
            assert_eq!(r.relay_pinned.as_ref(), Some(&want), "{:?}", r.stack);
        }
        assert!(render::pinning_line(&runs).contains("relay cells pinned"));
    }
    // The guard gave this thread its mask back.
    assert_eq!(bth_testbed::pinning::allowed_cpus().unwrap(), cpus);
    let results = compare::summarize(&plan, &runs);
    assert!(render::markdown(&results).contains("bulk-1MiB-relay-spray4-200us"));
    let t = render::mtu_markdown(&results);
    assert_eq!(t.matches("bulk-1MiB-relay-spray4-200us").count(), 6, "{t}");
    assert!(t.contains("| ours S |"), "{t}");
}

/// A run of a cell that measures the path's ceiling: the three ceilings (bare, under our ACK
/// clock, GSO super-packets), then the three stacks.
const CEILING_CELL_RUN: [Stack; 6] = [
    Stack::Ceiling,
    Stack::CeilingAcked,
    Stack::CeilingGso,
    Stack::Kernel,
    Stack::Ours,
    Stack::OursSeq,
];

/// The bare ceiling sends nothing back; the one under our ACK clock wrote about one ACK
/// packet per two it read in its window, and its sender read them.
fn assert_ack_clock(bare: &RunRecord, acked: &RunRecord) {
    let (b, a) = (
        bare.path().expect("the ceiling's figures"),
        acked.path().expect("the ACK-clocked ceiling's figures"),
    );
    assert_eq!(
        (b.acks, b.acks_sent, b.acks_received),
        (AckClock::None, 0, 0)
    );
    assert_eq!(a.acks, AckClock::Every(2));
    assert!(a.packets > 0, "{a:?}");
    // Half the packets read, within a turn's worth of ACKs owed at the window's edges.
    let half = a.packets / 2;
    assert!(
        a.acks_sent.abs_diff(half) <= 512,
        "{} ACKs written for {} packets read",
        a.acks_sent,
        a.packets
    );
    assert!(a.acks_received > 0, "{a:?}");
}

/// Every record of `runs` ran without error, moved `messages` messages and verified each.
fn assert_all_verified(runs: &[RunRecord], messages: u64) {
    for r in runs {
        assert_eq!(r.error, None, "{} {:?}", r.cell, r.stack);
        assert_eq!(r.messages, messages, "{} {:?}", r.cell, r.stack);
        assert_eq!(r.verified, r.messages, "{} {:?}", r.cell, r.stack);
        // Read around the run (and, for ours, by each side's thread before its TUN device
        // closed).
        assert!(
            r.device_drops.is_some(),
            "{} {:?}: device drops not read",
            r.cell,
            r.stack
        );
        assert!(
            r.gbps > 0.0 && r.p99_us.is_some(),
            "{} {:?}",
            r.cell,
            r.stack
        );
    }
}

/// `--qps 2`: two of our QPs on one driver and endpoint per side against two kernel sockets,
/// the cell's messages shared out, every byte verified on both stacks.
fn a_two_qp_cell_runs_both_stacks() {
    let mut plan = compare::plan(true).with_qps(&[2]);
    plan.cells.retain(|c| c.id == "bulk-4KiB-veth-q2");
    plan.runs = 1;
    let cell = &mut plan.cells[0];
    assert_eq!(cell.qps, 2);
    cell.count = 150;
    let prefix = format!("bthcmpq{}", std::process::id());
    let runs = compare::run_cell(cell, 1, &prefix, 1, |_| {}).expect("topology");
    let stacks: Vec<Stack> = runs.iter().map(|r| r.stack).collect();
    assert_eq!(stacks, [Stack::Kernel, Stack::Ours, Stack::OursSeq]);
    assert_all_verified(&runs, 300);
    assert!(
        runs[2].ours().is_some_and(|o| o.seq_framed),
        "{:?}",
        runs[2]
    );
    for r in &runs {
        assert_eq!(r.bytes, 300 * 4096);
        assert_eq!(r.relay_busy, None, "veth: no relay");
    }
    let results = compare::summarize(&plan, &runs);
    let md = render::markdown(&results);
    assert!(md.contains("| bulk-4KiB-veth-q2 | ours |"), "{md}");
    assert!(md.contains("| bulk-4KiB-veth-q2 | ours S |"), "{md}");
}

/// A small incast over TUN, admission off and on: four client connections into one server
/// through the relay's bottleneck, a topology per run so each run has its own relay drops;
/// with admission our senders wait for the server's grant, without it they never do.
fn a_small_incast_over_tun_counts_relay_drops_per_run() {
    let cells = compare::incast_cells(4, 8);
    let plan = compare::Plan {
        quick: true,
        runs: 1,
        cells: cells.clone(),
    };
    let mut runs = Vec::new();
    for (i, cell) in cells.iter().enumerate() {
        let prefix = format!("bthcmpi{}-{i}", std::process::id());
        let r = compare::run_cell(cell, 1, &prefix, 1, |_| {}).expect("topology");
        assert!(!std::path::Path::new(&format!("/run/netns/{prefix}k0-a")).exists());
        assert!(!std::path::Path::new(&format!("/run/netns/{prefix}s0-a")).exists());
        assert_eq!(r.len(), 3);
        assert_all_verified(&r, 4 * 8);
        for rec in &r {
            assert!(rec.relay_queue_drops.is_some(), "{rec:?}");
            // The relay forwarded every byte of the run, so its thread used some CPU, and
            // no more than the run's wall time (one thread; a little slack for the clock).
            let busy = rec
                .relay_busy
                .expect("a relay cell measures the relay's CPU");
            assert!(
                busy > 0.0 && busy <= 1.05,
                "{}: relay busy {busy}",
                rec.cell
            );
        }
        // Ours and ours S alike.
        for rec in &r[1..] {
            let holds = rec.ours().expect("ours counts grant holds").grant_holds;
            assert_eq!(
                holds > 0,
                cell.admission,
                "{} {:?}: {holds} grant holds",
                cell.id,
                rec.stack
            );
        }
        runs.extend(r);
    }
    let t = render::incast_markdown(&compare::summarize(&plan, &runs));
    for row in [
        "| ours (no admission) |",
        "| ours |",
        "| ours S (no admission) |",
        "| ours S |",
    ] {
        assert!(t.contains(row), "{row}: {t}");
    }
}

/// `bth-compare --mtu 1500,9000` in small: per MTU, in one topology whose every device has that
/// MTU, the path's ceiling (raw packets), kernel TCP and ours. Every figure is finite and
/// positive, every message (every ceiling packet) was verified, both stacks' segments are as
/// large as the MTU allows, the ACK-clocked ceiling sent and read its ACKs, the GSO ceiling's
/// super-packets crossed whole, ours S wrote super-segments, and the MTU table has the six rows
/// with the four ratios on each of ours'.
fn a_short_mtu_sweep_reports_ceiling_kernel_and_ours() {
    let mut plan = compare::mtu_plan(&[1500, 9000], true);
    plan.runs = 1;
    let mut runs = Vec::new();
    for (i, cell) in plan.cells.iter_mut().enumerate() {
        cell.count = 8;
        cell.ceiling = Some(CeilingSpec {
            warmup_ms: 50,
            measure_ms: 150,
        });
        let prefix = format!("bthcmpm{}-{i}", std::process::id());
        let r = compare::run_cell(cell, 1, &prefix, 1, |_| {}).expect("topology");
        assert!(!std::path::Path::new(&format!("/run/netns/{prefix}-a")).exists());
        let stacks: Vec<Stack> = r.iter().map(|r| r.stack).collect();
        assert_eq!(stacks, CEILING_CELL_RUN);
        assert_ack_clock(&r[0], &r[1]);
        for rec in &r {
            let who = format!("{} {:?}", rec.cell, rec.stack);
            assert_eq!(rec.error, None, "{who}");
            assert!(
                rec.gbps.is_finite() && rec.gbps > 0.0,
                "{who}: {}",
                rec.gbps
            );
            assert!(rec.elapsed_s.is_finite() && rec.elapsed_s > 0.0, "{who}");
            assert!(rec.messages > 0 && rec.verified == rec.messages, "{who}");
        }
        assert_all_verified(&r[3..], 8);
        let mtu = cell.mtu;
        let path = r[0].path().expect("the ceiling's figures");
        assert_eq!(path.mtu, mtu);
        assert!(path.packets > 0 && path.ip_bytes == path.packets * u64::from(mtu));
        assert!(path.ip_gbps() > path.gbps() && path.packets_per_sec() > 0.0);
        // One full segment of ours carries MTU − 40 (headers) − 40 (option area), as one of
        // the ceiling's packets counts; the kernel's MSS follows the veth's MTU.
        assert_eq!(r[0].seg_payload, Some(mtu - 80));
        assert_eq!(r[1].seg_payload, Some(mtu - 80), "the ACK-clocked ceiling");
        assert_eq!(r[2].seg_payload, Some(mtu - 80), "the GSO ceiling");
        assert_eq!(r[4].seg_payload, Some(mtu - 80), "ours");
        assert_eq!(r[5].seg_payload, Some(mtu - 80), "ours S");
        assert_ours_seq(&r[4], &r[5]);
        // The GSO ceiling: segments of ours' payload, MTU-sized once cut, and over veth
        // between two devices with TSO its super-packets arrive whole.
        let gso = r[2].path().expect("the GSO ceiling's figures");
        assert_eq!((gso.mtu, gso.gso_size), (mtu, Some(mtu - 80)));
        assert!(gso.packets > 0 && gso.ip_bytes == gso.packets * u64::from(mtu));
        assert!(
            gso.super_packets > 0 && gso.packets > gso.super_packets,
            "{gso:?}"
        );
        let k = r[3].seg_payload.expect("the kernel's MSS");
        assert!(
            (mtu - 80..=mtu - 40).contains(&k),
            "kernel MSS {k} at MTU {mtu}"
        );
        runs.extend(r);
    }
    let results = compare::summarize(&plan, &runs);
    for c in &results {
        for r in [
            c.ours_over_ceiling,
            c.ours_over_ceiling_acked,
            c.ours_over_kernel,
            c.ours_over_ceiling_gso,
            c.ours_seq_over_ceiling,
            c.ours_seq_over_ceiling_acked,
            c.ours_seq_over_ceiling_gso,
            c.ours_seq_over_kernel,
        ] {
            assert!(r.is_some_and(|r| r.is_finite() && r > 0.0), "{}", c.cell.id);
        }
    }
    let t = render::mtu_markdown(&results);
    assert_eq!(t.lines().count(), 2 + 6 * 2, "{t}");
    for mtu in ["| 1500 B |", "| 9000 B |"] {
        assert_eq!(t.matches(mtu).count(), 6, "{mtu}: {t}");
    }
    let ours_rows = t
        .lines()
        .filter(|l| l.contains("| ours |") || l.contains("| ours S |"));
    assert_eq!(ours_rows.clone().count(), 2 * 2, "{t}");
    for line in ours_rows {
        assert_eq!(line.matches('×').count(), 4, "{line}");
    }
    let js = render::json(&plan, &runs, &results);
    assert!(js.contains("\"ours_over_ceiling\"") && js.contains("\"stack\": \"ceiling\""));
    assert!(
        js.contains("\"ours_seq_over_ceiling_gso\"") && js.contains("\"stack\": \"ceiling_gso\"")
    );
    let dir = std::env::temp_dir().join(format!("bth-compare-mtu-{}", std::process::id()));
    let files = render::charts(&results, &dir).expect("charts");
    assert!(
        files.iter().any(|f| f.ends_with("throughput-vs-mtu.svg")),
        "{files:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Kernel TCP runs the congestion control the cell names, read back from its sockets; a name
/// the kernel does not have fails the kernel's run with an error that lists the ones it has,
/// and ours still runs.
fn the_kernel_congestion_control_is_the_cells_and_a_missing_one_is_a_clear_error() {
    let mut plan = compare::plan(true);
    plan.cells.retain(|c| c.id == "bulk-4KiB-veth");
    let cell = plan.cells[0].clone();
    let prefix = format!("bthcmpcc{}", std::process::id());
    let reno = Cell {
        count: 200,
        ..cell.clone().with_kernel_cc("reno")
    };
    let runs = compare::run_cell(&reno, 1, &prefix, 1, |_| {}).expect("topology");
    assert_eq!(runs[0].stack, Stack::Kernel);
    assert_eq!(runs[0].error, None);
    assert_eq!(runs[0].congestion(), Some("reno"));
    let bogus = Cell {
        count: 200,
        ..cell.with_kernel_cc("no-such-cc")
    };
    let runs = compare::run_cell(&bogus, 1, &prefix, 1, |_| {}).expect("topology");
    let e = runs[0].error.as_deref().expect("the kernel run fails");
    assert!(
        e.contains("no-such-cc") && e.contains("this kernel has"),
        "{e}"
    );
    assert_eq!(runs[0].congestion(), None);
    assert_eq!(runs[1].error, None, "ours does not depend on it");
    assert_eq!(runs[2].error, None, "nor does ours S");
    assert!(!std::path::Path::new(&format!("/run/netns/{prefix}-a")).exists());
}

bth_tests::test_main!(
    quick_plan_is_small_and_interleaves_every_stack,
    renders_a_synthetic_result_set,
    one_small_real_cell_end_to_end[NetAdmin],
    one_small_plain_cell_shows_staged_bytes[NetAdmin],
    one_small_spray_cell_runs_both_stacks[NetAdmin],
    a_two_qp_cell_runs_both_stacks[NetAdmin],
    a_small_incast_over_tun_counts_relay_drops_per_run[NetAdmin],
    a_short_mtu_sweep_reports_ceiling_kernel_and_ours[NetAdmin],
    the_kernel_congestion_control_is_the_cells_and_a_missing_one_is_a_clear_error[NetAdmin],
);
