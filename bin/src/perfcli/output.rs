//! What a side prints: the header and table rows as they come (or, with `--json`, one object
//! at the end), then its own counters and the peer's.

use super::args::PerfArgs;
use super::json::{JsonRow, JsonSide};
use super::run::Row;
use super::table::{self, Banner};
use bth_perf::{aggregate, PerfReport};

/// How rows are printed.
#[derive(Debug, Clone, Copy)]
pub struct Printer {
    pub json: bool,
    pub lat: bool,
    pub gbits: bool,
}

impl Printer {
    pub fn of(args: &PerfArgs) -> Printer {
        Printer {
            json: args.json,
            lat: args.lat,
            gbits: args.report_gbits,
        }
    }

    /// A line about the set-up: on stdout, or on stderr with `--json` (stdout holds the JSON
    /// object alone).
    pub fn note(&self, line: &str) {
        if self.json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }

    /// The header and the table's title (nothing with `--json`).
    pub fn start(&self, banner: &Banner) {
        if !self.json {
            println!("{}", table::header(banner));
            println!("{}", table::title(self.lat, self.gbits));
        }
    }

    /// One finished row.
    pub fn row(&self, row: &Row) {
        if self.json {
            return;
        }
        let r = &row.report;
        if self.lat {
            println!("{}", table::lat_row(row.cfg.size, r));
        } else {
            println!("{}", table::bw_row(row.cfg.size, r, self.gbits));
        }
    }

    /// The end of a side's output: the footer (`role`'s counters, then those the `peer` sent),
    /// or the JSON object.
    pub fn end(&self, role: &str, peer: &str, banner: &Banner, rows: &[Row]) {
        if self.json {
            let side = json_side(role, banner, rows);
            match serde_json::to_string_pretty(&side) {
                Ok(s) => println!("{s}"),
                Err(e) => eprintln!("bth-perf: JSON: {e}"),
            }
        } else {
            println!("{}", table::RULE);
            for l in footer(role, peer, rows) {
                println!("{l}");
            }
        }
    }
}

/// `role`'s summary, counters and errors, then what `peer` reported at its close.
pub fn footer(role: &str, peer: &str, rows: &[Row]) -> Vec<String> {
    let sum = sum(rows);
    // A READ moves data from its responder to its requester and completes only there: a side
    // that only answers READs counts no message.
    let reads_only = rows
        .iter()
        .all(|r| r.cfg.op == bth_perf::PerfOp::Read && !r.cfg.mode.bidir);
    let mut out = own(role, rows.len(), &sum);
    if reads_only && sum.messages == 0 {
        if let Some(first) = out.first_mut() {
            first.push_str(" (this side answered the peer's READs, counted where they complete)");
        }
    }
    out.extend(peer_lines(peer, &sum, reads_only));
    out.extend(errors(role, rows, &sum));
    out
}

/// The reports of `rows` summed.
fn sum(rows: &[Row]) -> PerfReport {
    let reports: Vec<_> = rows.iter().map(|r| r.report.clone()).collect();
    aggregate(&reports)
}

/// What `role` counted, and its connection counters.
fn own(role: &str, rows: usize, sum: &PerfReport) -> Vec<String> {
    let over = match rows {
        1 => String::new(),
        n => format!(" (sum over {n} connections, one per row)"),
    };
    let framing = if sum.seq_framed {
        "; S framing (both hellos asked for it)"
    } else {
        ""
    };
    let mut out = vec![format!(
        "{role}: {} messages, {} bytes; {} verified byte for byte here{over}{framing}",
        sum.messages, sum.bytes, sum.verified
    )];
    out.extend(sum.counters.lines().iter().map(|l| format!("{role}: {l}")));
    out.extend(sum.path.line().map(|l| format!("{role}: {l}")));
    out.extend(sum.path.limits_line().map(|l| format!("{role}: {l}")));
    out
}

/// What `peer` sent at its close.
fn peer_lines(peer: &str, sum: &PerfReport, reads_only: bool) -> Vec<String> {
    let Some(p) = sum.peer else {
        return vec![format!(
            "{peer}: sent no statistics (the run was refused or failed, or it was a --plain \
             run, whose client sends none)"
        )];
    };
    let served = if reads_only && p.messages == 0 {
        " (it answered this side's READs, which are counted here, where they complete)"
    } else {
        ""
    };
    let mut out = vec![format!(
        "{peer} (as it reported at its close): {} messages, {} bytes, {} verified, {} \
         errors{served}",
        p.messages, p.bytes, p.verified, p.errors
    )];
    out.extend(p.counters.lines().iter().map(|l| format!("{peer}: {l}")));
    out
}

/// `role`'s failed connections and errors (the first ten).
fn errors(role: &str, rows: &[Row], sum: &PerfReport) -> Vec<String> {
    let mut out = Vec::new();
    for row in rows {
        if let Some(f) = &row.failure {
            out.push(format!("{role}: error: {} bytes: {f}", row.cfg.size));
        }
    }
    for e in sum.errors.iter().take(10) {
        out.push(format!("{role}: error: {e}"));
    }
    if sum.errors.len() > 10 {
        out.push(format!("{role}: … {} errors in all", sum.errors.len()));
    }
    out
}

/// The server's lines after the client's footer in `local`: the client's footer has the
/// server's counters as it sent them, so only what the server knows alone: its errors.
pub fn local_server_footer(rows: &[Row]) -> Vec<String> {
    let sum = sum(rows);
    // The server's path samples are its own (the peer summary above carries counters only):
    // in a READ run the server sends the data.
    let mut out: Vec<String> = [sum.path.line(), sum.path.limits_line()]
        .into_iter()
        .flatten()
        .map(|l| format!("server: {l}"))
        .collect();
    out.extend(errors("server", rows, &sum));
    out
}

pub fn json_side(role: &str, banner: &Banner, rows: &[Row]) -> JsonSide {
    let first = banner.rows.first().cloned().unwrap_or_default();
    JsonSide {
        role: role.to_string(),
        op: first.op.to_string(),
        mode: if first.mode.plain { "plain" } else { "bth" },
        qps: first.qps,
        mtu: banner.mtu,
        tx_depth: first.tx_depth,
        rx_depth: first.rx_depth,
        bidirectional: first.mode.bidir,
        verify: first.mode.verify,
        lat: first.mode.lat,
        duration_s: first.duration.map(|d| d.as_secs_f64()),
        connection: banner.connection.clone(),
        rows: rows
            .iter()
            .map(|r| JsonRow::of(&r.cfg, &r.report, r.failure.as_deref()))
            .collect(),
        ok: all_ok(banner.rows.len(), rows),
    }
}

/// Whether every planned row ran and succeeded.
pub fn all_ok(planned: usize, rows: &[Row]) -> bool {
    rows.len() == planned && rows.iter().all(Row::ok)
}
