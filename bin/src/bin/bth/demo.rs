//! `bth demo`: the verified transfer over the simulated link.

use bth_io::sim::workload::{self, WorkloadConfig};
use bth_io::sim::LinkConfig;
use clap::Args;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Number of messages.
    #[arg(long, default_value_t = 300)]
    messages: usize,
    /// Smallest message in bytes.
    #[arg(long, default_value_t = 1)]
    min_size: u32,
    /// Largest message in bytes (at most 16777215).
    #[arg(long, default_value_t = 4 << 20)]
    max_size: u32,
    /// Relative weights of SEND, WRITE_WITH_IMM and READ, e.g. 2,1,1.
    #[arg(long, default_value = "2,1,1", value_parser = parse_mix)]
    mix: [u32; 3],
    /// Packet loss probability per packet (0..1).
    #[arg(long, default_value_t = 0.01)]
    loss: f64,
    /// Probability that a packet is reordered (delayed by up to --reorder-depth-us).
    #[arg(long, default_value_t = 0.2)]
    reorder: f64,
    /// Largest extra delay of a reordered packet, in microseconds.
    #[arg(long, default_value_t = 100)]
    reorder_depth_us: u64,
    /// Packet duplication probability.
    #[arg(long, default_value_t = 0.005)]
    duplicate: f64,
    /// Probability that one bit of a packet is flipped.
    #[arg(long, default_value_t = 0.001)]
    corrupt: f64,
    /// Probability that two aligned 16-bit words of a data packet's payload are swapped: a
    /// corruption the TCP checksum cannot see (per-segment framing's ICRC catches it; S
    /// framing, which has none, places the damaged bytes and the demo's check finds them).
    #[arg(long, default_value_t = 0.0)]
    swap: f64,
    /// One-way delay in microseconds.
    #[arg(long, default_value_t = 500)]
    delay_us: u64,
    /// Link bandwidth in Gbit/s.
    #[arg(long, default_value_t = 10.0)]
    bandwidth_gbps: f64,
    /// Receive buffers kept posted ahead of incoming SENDs.
    #[arg(long, default_value_t = 16)]
    recv_depth: usize,
    /// Congestion control: newreno or cubic.
    #[arg(long, default_value = "cubic")]
    cc: bth_cc::Algorithm,
    /// Seed for the workload and the link impairments.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How data segments say where their bytes belong: per-segment (each its own offset,
    /// index and ICRC) or seq (one option for a whole message, offsets from sequence numbers,
    /// no ICRC: the form segmentation offload can carry; spec amendment 3).
    #[arg(long, default_value = "per-segment", value_parser = bth_tools::cli::parse_framing)]
    framing: tcp_bth::Framing,
    /// Write every segment both endpoints send (as handed to the link, before loss,
    /// reordering or corruption) to this pcap file (link type RAW, virtual time stamps).
    /// Read it with `bth-dump FILE`, tcpdump, or tshark with docs/wireshark/tcp_bth.lua.
    #[arg(long, value_name = "FILE")]
    pcap: Option<std::path::PathBuf>,
}

fn parse_mix(s: &str) -> Result<[u32; 3], String> {
    let v: Vec<u32> = s
        .split(',')
        .map(|x| x.trim().parse::<u32>().map_err(|e| format!("{x}: {e}")))
        .collect::<Result<_, _>>()?;
    match v[..] {
        [a, b, c] if a + b + c > 0 => Ok([a, b, c]),
        _ => Err("expected three weights like 2,1,1 (not all zero)".into()),
    }
}

pub fn run(a: &DemoArgs) -> Result<(), String> {
    if a.min_size == 0 || a.max_size > tcp_bth::wire::MAX_MESSAGE_LEN || a.min_size > a.max_size {
        return Err(format!(
            "sizes must satisfy 1 <= --min-size <= --max-size <= {}",
            tcp_bth::wire::MAX_MESSAGE_LEN
        ));
    }
    if !a.bandwidth_gbps.is_finite() || a.bandwidth_gbps <= 0.0 {
        return Err("--bandwidth-gbps must be positive".into());
    }
    if a.messages == 0 {
        return Err("--messages 0: a demo needs at least one message".into());
    }
    if let Some(p) = &a.pcap {
        // Before the run, not after it: a path that cannot be written fails at once.
        std::fs::File::create(p).map_err(|e| format!("--pcap {}: {e}", p.display()))?;
    }
    let link = LinkConfig::default()
        .with_delay(Duration::from_micros(a.delay_us))
        .with_bandwidth_bps((a.bandwidth_gbps * 1e9) as u64)
        .with_loss(a.loss)
        .with_reorder(a.reorder, Duration::from_micros(a.reorder_depth_us.max(1)))
        .with_duplicate(a.duplicate)
        .with_corrupt(a.corrupt)
        .with_swap(a.swap)
        .with_seed(a.seed);
    link.validate().map_err(|e| e.to_string())?;
    let cfg = WorkloadConfig {
        messages: a.messages,
        min_size: a.min_size,
        max_size: a.max_size,
        mix: a.mix,
        recv_depth: a.recv_depth.max(1),
        seed: a.seed,
        link,
        congestion: a.cc,
        capture: a.pcap.clone(),
        framing: a.framing,
        ..WorkloadConfig::default()
    };
    println!(
        "tcp-bth demo: {} messages of {}..{} bytes (SEND:WRITE_IMM:READ = {}:{}:{}), {} µs delay, {} Gbit/s,",
        a.messages, cfg.min_size, a.max_size, a.mix[0], a.mix[1], a.mix[2], a.delay_us, a.bandwidth_gbps
    );
    println!(
        "link loss {:.2}%, reorder {:.1}% (up to {} µs), duplicate {:.2}%, corrupt {:.2}%, cc {}, framing {}, seed {}",
        a.loss * 100.0,
        a.reorder * 100.0,
        a.reorder_depth_us,
        a.duplicate * 100.0,
        a.corrupt * 100.0,
        a.cc,
        bth_tools::cli::framing_name(a.framing),
        a.seed
    );
    let wall = Instant::now();
    let r = workload::run(&cfg).map_err(|e| format!("transfer failed: {e}"))?;
    let wall = wall.elapsed();
    let framing = if r.seq_framed {
        "seq (S, amendment 3), negotiated by both hellos"
    } else {
        "per-segment"
    };
    let rows: Vec<(&str, String)> = vec![
        ("framing", framing.to_string()),
        (
            "messages verified",
            format!("{} / {}", r.verified, r.messages),
        ),
        (
            "message bytes",
            format!(
                "{} ({:.1} MiB)",
                r.message_bytes,
                r.message_bytes as f64 / 1048576.0
            ),
        ),
        (
            "virtual time",
            format!("{:.3} ms", r.virtual_time.as_secs_f64() * 1e3),
        ),
        (
            "goodput (virtual time)",
            format!("{:.3} Gbit/s", r.goodput_gbps()),
        ),
        ("segments sent", r.segments_sent.to_string()),
        (
            "retransmissions",
            format!(
                "{} ({:.2}% of segments), of which spurious {}",
                r.retransmits,
                100.0 * r.retransmits as f64 / r.segments_sent.max(1) as f64,
                r.spurious_retransmits
            ),
        ),
        (
            "tail loss probes / RTOs",
            format!("{} / {}", r.tlp_probes, r.rto_events),
        ),
        (
            "out-of-order segments placed directly",
            r.ooo_placed.to_string(),
        ),
        (
            "bytes copied per payload byte",
            format!(
                "{:.3}",
                r.bytes_copied as f64 / r.bytes_placed.max(1) as f64
            ),
        ),
        (
            "corrupted segments caught (checksum / ICRC)",
            format!("{} / {}", r.malformed, r.icrc_errors),
        ),
        (
            "link: dropped / reordered / duplicated / corrupted",
            format!(
                "{} / {} / {} / {}",
                r.link_dropped, r.link_reordered, r.link_duplicated, r.link_corrupted
            ),
        ),
        (
            "link: payload words swapped (checksum-neutral)",
            r.link_swapped.to_string(),
        ),
        (
            "orderly close",
            if r.closed_cleanly { "yes" } else { "NO" }.to_string(),
        ),
        ("wall time", format!("{:.2} s", wall.as_secs_f64())),
    ];
    let w = rows
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    println!();
    for (k, v) in rows {
        println!("  {k:<w$}  {v}");
    }
    if let Some(p) = &a.pcap {
        println!();
        println!("  capture written to {} (bth-dump {0})", p.display());
    }
    if r.verified != r.messages {
        return Err(format!(
            "only {} of {} messages verified",
            r.verified, r.messages
        ));
    }
    Ok(())
}
