//! `bth`: the tcp-bth command-line entry point.

mod demo;

use clap::{Parser, Subcommand};
use demo::DemoArgs;
use std::process::ExitCode;
use tcp_bth::wire::{Bth, IpPair, TcpOptions, TcpRepr};

#[derive(Parser)]
#[command(
    name = "bth",
    version,
    about = "tcp-bth: TCP with RDMA message framing in the tcp_bth option",
    long_about = "tcp-bth carries a compact RDMA Base Transport Header (opcode, message sequence \
                  number, message byte offset, segment number, ICRC, timestamps, immediate data) \
                  in TCP option 254 / ExID 0xEFAB, so every segment says where its bytes belong."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Transfer a mixed message workload between two endpoints over the simulated link and
    /// verify every byte.
    ///
    /// Endpoint A posts SENDs, RDMA WRITEs with immediate and RDMA READs to endpoint B; the link
    /// between them loses, reorders, duplicates and corrupts packets as asked. Time is virtual
    /// (deterministic: the same seed gives the same run), so goodput is in simulated time.
    Demo(DemoArgs),
    /// Netcat over our stack: `bth nc HOST PORT` connects, `bth nc -l PORT` serves one
    /// connection; stdin to the connection, the connection to stdout.
    #[command(long_about = bth_tools::nc::LONG_ABOUT, after_long_help = bth_tools::nc::EXAMPLES)]
    Nc(bth_tools::nc::NcArgs),
    /// Decode a tcp_bth option, a TCP option area, or a whole TCP segment given as hex.
    ///
    /// Without a flag the bytes are one option (kind 254, the tcp_bth option); with --segment
    /// they are a TCP header (+ payload); with --options a TCP option area.
    /// Spaces, colons and a leading 0x are ignored. An S-framed data option (amendment 3) shows
    /// its anchor and message length by name, and no ICRC (it has none); with --segment and
    /// --isn also the segment's stream offset and placement offset. With --segment, a
    /// per-segment option whose ICRC does not match the segment's payload is printed with
    /// "icrc MISMATCH" and the command exits with status 1 (as for a bad TCP checksum with
    /// --ip, which refuses the segment). A SYN's hello may have T=0 (amendment 4): it has
    /// no timestamp fields, its SYN carries the RFC 7323 timestamp option beside it (shown
    /// with --options or --segment).
    Decode {
        /// Hex bytes, e.g. "fe10efab0004010200000000deadbeef".
        hex: String,
        /// Input is a whole TCP segment (header, options, payload).
        #[arg(long, conflicts_with = "options")]
        segment: bool,
        /// Input is a TCP option area (what follows the 20-byte header).
        #[arg(long)]
        options: bool,
        /// With --segment: verify the TCP checksum against these addresses, SRC,DST, both IPv4
        /// or both IPv6 (e.g. 10.0.0.1,10.0.0.2 or 2001:db8::1,2001:db8::2). `--ipv4` is
        /// another name for it.
        #[arg(
            long = "ip",
            alias = "ipv4",
            value_name = "SRC,DST",
            requires = "segment"
        )]
        ip: Option<String>,
        /// With --segment: the sequence number of the sender's SYN, to place an S-framed
        /// segment: stream offset = SEQ - ISN - 1, placement offset = (stream offset - anchor)
        /// mod 2^24.
        #[arg(long, value_name = "ISN", requires = "segment")]
        isn: Option<u32>,
    },
}

fn main() -> ExitCode {
    let cli: Cli = bth_tools::cli::parse();
    let result = match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Nc(args) => return bth_tools::nc::main(&args),
        Command::Decode {
            hex,
            segment,
            options,
            ip,
            isn,
        } => decode(&hex, segment, options, ip.as_deref(), isn),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bth: {e}");
            ExitCode::FAILURE
        }
    }
}

fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let cleaned: String = s
        .trim()
        .trim_start_matches("0x")
        .chars()
        .filter(|c| !c.is_whitespace() && *c != ':')
        .collect();
    hex::decode(&cleaned).map_err(|e| format!("not hex: {e}"))
}

fn parse_ip_pair(s: &str) -> Result<IpPair, String> {
    let (a, b) = s
        .split_once(',')
        .ok_or("--ip wants SRC,DST, e.g. 10.0.0.1,10.0.0.2 or 2001:db8::1,2001:db8::2")?;
    let ip = |x: &str| {
        x.trim()
            .parse::<std::net::IpAddr>()
            .map_err(|e| format!("--ip: {x}: {e}"))
    };
    let (src, dst) = (ip(a)?, ip(b)?);
    IpPair::from_addrs(src, dst)
        .ok_or_else(|| format!("--ip: {src} and {dst} are of different families"))
}

fn decode(
    hex: &str,
    segment: bool,
    options: bool,
    ip: Option<&str>,
    isn: Option<u32>,
) -> Result<(), String> {
    let bytes = parse_hex(hex)?;
    if segment {
        let ip = ip.map(parse_ip_pair).transpose()?;
        let seg = TcpRepr::parse(&bytes, ip).map_err(|e| format!("segment refused: {e}"))?;
        print!("{}", bth_capture::describe::segment(&seg));
        if ip.is_some() {
            println!("checksum      ok");
        }
        match &seg.options.bth {
            // S-framed data: bytes 8-11 are the message length (shown above), not an ICRC.
            Some(b) if !b.carries_icrc() => {
                let sf = bth_capture::SeqFraming::new(b, seg.seq, isn);
                match (sf.stream_offset, sf.placement()) {
                    (Some(at), Some(off)) => {
                        println!("stream_offset {at}");
                        println!("placement     {off} (of {} bytes)", sf.msg_len);
                    }
                    _ => println!("placement     unknown (--isn gives the sender's ISN)"),
                }
            }
            Some(b) => {
                let want = b.compute_icrc(seg.payload);
                let ok = want == b.icrc;
                println!("icrc          {}", if ok { "ok" } else { "MISMATCH" });
                if !ok {
                    // Decoded and printed in full, but the segment is not good: a receiver
                    // drops it, so the command fails.
                    return Err(format!(
                        "ICRC mismatch: the option carries {:#010x}, its fields and the \
                         payload give {want:#010x} (a receiver drops this segment)",
                        b.icrc
                    ));
                }
            }
            None => {}
        }
    } else if options {
        let o = TcpOptions::parse(&bytes).map_err(|e| format!("options refused: {e}"))?;
        let text = bth_capture::describe::options(&o);
        if text.is_empty() {
            // Only padding (NOP, EOL) or nothing: say so rather than print nothing.
            println!("no options (only padding)");
        } else {
            println!("{}", text.trim_end_matches('\n'));
        }
    } else {
        let b = Bth::from_bytes(&bytes).map_err(|e| {
            // Without a flag the input is one option; other input usually means a flag is missing.
            let hint = match bytes.first() {
                Some(254) | None => "",
                Some(_) => " (an option area: --options; a TCP segment: --segment)",
            };
            format!("option refused: {e}{hint}")
        })?;
        print!("{}", bth_capture::describe::bth(&b));
    }
    Ok(())
}
