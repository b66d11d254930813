//! `bth-dump`: print the tcp_bth segments of a pcap/pcapng capture, one line each, and a
//! summary. Decoding is `bth_capture`; this is the command line over it.

mod format;

use bth_capture::{Analyzer, CaptureReader};
use clap::Parser;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

const COUNTS: &str = "\
Each line: frame number, time, source > destination, TCP flags (S F R P U E W, `.` = ACK), seq,
ack, window (unscaled), payload length, `TS val V ecr E` when the segment carries the RFC 7323
timestamp option (plain TCP, a plain-form pure ACK, or a SYN beside a hello without timestamps:
spec amendment 4, so a fallback to plain TCP keeps timestamps), then after `|` the BTH: opcode,
and for data `msn`,
`off` (byte offset in the message), `seg` (segment index); for the one segment of a zero-length
message `zero-length msn N (1 pad byte)` (offset field 0xFFFFFF, the payload byte is padding);
for the SYN hello `first-msn` and `max-msg`; on segments with R set `credit-msn` and `grant`
(4 KiB units); an ACKNOWLEDGE with R clear shows as `ack completed-msn N` (newest SEND
completed in order) or, on the RST that ends a connection, as `NAK <code> for <opcode> msn N`
(code invalid-request, remote-access-error or remote-operational-error; the opcode and MSN name
the failed message); then the flags M, R, A (and S on the hello, ACKs, credit updates and
NAKs of an S-framed connection), the immediate, rkey and remote address when present, and
`icrc ok` / `ICRC BAD`. A data segment in S framing (sequence-anchored, spec amendment 3)
shows as `SEND_ONLY S msn 4 anchor 0x0012ab off 2896 len 65536`: the anchor is the option's
offset field (the stream offset of the message's first byte mod 2^24), `len` the message
length (bytes 8-11 of the option, where per-segment framing has the ICRC), and `off` the
placement offset of its first payload byte, ((SEQ - ISN - 1) mod 2^32 - anchor) mod 2^24, with
the ISN from its sender's SYN in the capture; `off unknown` when that SYN is not in the file.
Such a segment has no ICRC: `icrc n/a` (the TCP checksum is its check), never an ICRC error.
A line ends with [out-of-order] or [retransmission] and with any error found. JSON records
carry the same as fields: `opt_tsval` and `opt_tsecr` (the RFC 7323 option), `t` (the BTH
folds the timestamps, then in `tsval` and `tsecr`; false on a SYN's hello that leaves them to the
RFC 7323 option), `syndrome` (ACKNOWLEDGE with R clear: 0 = ACK, 0x61-0x63 = NAK),
`nak` and `nak_opcode`, `s` (the S flag), `icrc_status` (ok, bad, unverified, n/a), and on
data segments `zero_length` and `framing` (per-segment or seq); an S-framed data segment has
`anchor`, `stream_off` and `place_off` (null when the SYN was not seen) and `msg_len` in place
of `offset` and `icrc`, and no `icrc_ok`.

Definitions used in the summary:
  packets            packet records in the file
  TCP segments       packets that decode as TCP (checksum errors included)
  BTH segments       TCP segments carrying a well-formed tcp_bth option (kind 254, ExID 0xEFAB)
  data segments      BTH segments with payload whose opcode belongs to a message: SEND_*,
                     RDMA_WRITE_*, RDMA_READ_REQUEST, RDMA_READ_RESPONSE_*
  messages           distinct (direction, class, MSN) among data segments; the class is the
                     MSN counter (send, write, read request, read response; see docs/design.md).
                     A zero-length message counts, with 0 bytes (its pad byte is not data)
  out-of-order       a segment with payload whose TCP sequence number is below the highest
                     sequence number + length already seen in the same direction, i.e. it
                     comes after data that follows it in the stream. In a capture taken at the
                     sender (e.g. `bth demo --pcap`) only retransmissions are out of order; at
                     a receiver, reordering on the path shows up here too
  retransmissions    a segment with payload carrying at least one byte already seen in the
                     same direction (a retransmission is usually also out of order)
  ICRC errors        BTH segments whose ICRC does not match their option header and payload
                     (S-framed data segments carry none and never count)
  S data segments    data segments in S framing (amendment 3): no ICRC, placed from their
                     sequence numbers
  S offsets unknown  S data segments whose sender's SYN is not in the capture: their placement
                     offset is unknown (shown as `off unknown`)
  checksum errors    TCP checksum (over the IP pseudo header) or IPv4 header checksum wrong.
                     A TCP checksum field holding just the pseudo-header sum is a packet
                     captured on its sending host before checksum offload filled it in: shown
                     as [checksum offloaded], not an error
  malformed          link, IP or TCP header that cannot be parsed, options refused (e.g. a
                     tcp_bth option whose length disagrees with its flags and opcode), or a
                     BTH breaking a protocol rule (FIRST/ONLY not at offset 0, a READ request
                     payload that is not 16 bytes, an S-framed segment whose placement offset
                     plus payload passes its message length)
  not TCP            other packets (ARP, UDP, ICMP, IP fragments, unsupported link types):
                     counted and skipped
  truncated          packets the capture's snap length cut short: decoded as far as they go,
                     checksum and ICRC not verified (not decoded if cut inside the headers)
Sequence numbers are per direction (source address:port > destination address:port) and
unwrapped across 2^32.

Exit status: 0 when the file was read to its end (whatever it contains), 1 when it cannot be
read or ends in the middle of a record (the summary of what came before is still printed),
and with --strict also 1 when any checksum, ICRC or malformed-packet error was found.";

#[derive(Parser)]
#[command(
    name = "bth-dump",
    version,
    about = "Decode the tcp_bth option in a pcap/pcapng capture: one line per TCP segment, then a summary",
    long_about = "Reads a pcap or pcapng capture (link types RAW IP, Ethernet with VLAN tags, \
                  Linux cooked v1/v2, BSD loopback) and prints one line per TCP segment: time, \
                  source > destination, TCP flags, seq, ack, window, payload length, and the \
                  decoded tcp_bth option (opcode, MSN, message offset, segment number, M/R/A/S \
                  flags, immediate, rkey and remote address, and whether the ICRC matches the \
                  payload; for S framing the anchor, the message length and the placement \
                  offset computed from the sequence number and the SYN). TCP checksums are \
                  verified. Packets that do not parse are reported \
                  and counted, never fatal. Capture with `bth demo --pcap FILE`, or with \
                  tcpdump on the interface the traffic crosses.",
    after_long_help = COUNTS
)]
struct Cli {
    /// Capture file (pcap or pcapng).
    file: PathBuf,
    /// Print only the summary.
    #[arg(long)]
    summary_only: bool,
    /// Print JSON: one object per packet (one per line), then {"summary": {...}}.
    #[arg(long)]
    json: bool,
    /// Print only segments carrying a tcp_bth option (the summary still counts everything).
    #[arg(long)]
    bth_only: bool,
    /// Also print a table of the messages seen: direction, class, MSN, segments, bytes, length.
    #[arg(long)]
    messages: bool,
    /// Print every option of each segment on its own lines (as `bth decode --segment` does).
    #[arg(long, short)]
    verbose: bool,
    /// Time stamps relative to the first packet instead of as recorded.
    #[arg(long, short)]
    relative: bool,
    /// Exit with status 1 if any checksum, ICRC or malformed-packet error was found.
    #[arg(long)]
    strict: bool,
}

fn main() -> ExitCode {
    let cli: Cli = bth_tools::cli::parse();
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    match run(&cli, &mut out).and_then(|code| out.flush().map(|_| code)) {
        Ok(code) => code,
        // The reader of our output went away (e.g. `| head`): not an error of ours.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bth-dump: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli, out: &mut impl Write) -> io::Result<ExitCode> {
    let mut reader = match CaptureReader::open(&cli.file) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bth-dump: {}: {e}", cli.file.display());
            return Ok(ExitCode::FAILURE);
        }
    };
    let mut an = Analyzer::new();
    let mut frame = 0;
    let mut t0: Option<Duration> = None;
    let mut read_error = None;
    while let Some(r) = reader.next_packet() {
        let p = match r {
            Ok(p) => p,
            Err(e) => {
                read_error = Some(e.to_string());
                break;
            }
        };
        frame += 1;
        // With the SYNs seen so far: an S-framed segment is placed from its sender's ISN.
        let (d, marks) = an.decode(frame, &p);
        if cli.summary_only {
            continue;
        }
        if cli.bth_only && d.segment().and_then(|s| s.bth()).is_none() {
            continue;
        }
        if cli.json {
            writeln!(out, "{}", format::json_record(&d, marks))?;
            continue;
        }
        let base = if cli.relative {
            *t0.get_or_insert(d.ts)
        } else {
            Duration::ZERO
        };
        writeln!(out, "{}", format::line(&d, marks, base))?;
        if cli.verbose {
            if let Some(Ok(o)) = d.segment().map(|s| &s.options) {
                for l in bth_capture::describe::options(o).lines() {
                    writeln!(out, "         {l}")?;
                }
            }
        }
    }
    let s = an.summary();
    if cli.json {
        writeln!(out, "{}", format::summary_json(s, read_error.as_deref()))?;
    } else {
        if !cli.summary_only {
            writeln!(out)?;
        }
        if cli.messages {
            writeln!(out, "{}", format::messages_text(an.messages()))?;
        }
        write!(out, "{}", format::summary_text(s, an.messages()))?;
    }
    out.flush()?;
    if let Some(e) = read_error {
        eprintln!(
            "bth-dump: {}: read stopped: {e} (summary covers the {frame} packets before)",
            cli.file.display()
        );
        return Ok(ExitCode::FAILURE);
    }
    let errors = s.checksum_errors + s.icrc_errors + s.malformed;
    if cli.strict && errors > 0 {
        eprintln!("bth-dump: {errors} checksum, ICRC or malformed-packet errors");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
