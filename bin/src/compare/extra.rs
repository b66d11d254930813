//! Rows of the full run that are not stack-against-stack cells: the relay's own ceiling (so a
//! reader can tell a relay cell that measures the relay from one that measures the stacks) and
//! the incast scenario of receiver-driven admission, which runs in the simulator (N senders
//! into one receiver through one shared bottleneck queue; over TUN it needs the Endpoint).

use super::{ceiling_cell, relay_ceiling};
use bth_io::sim::incast::{self, IncastConfig, IncastError, IncastOp};
use std::fmt::Write as _;

/// The relay ceiling row: kernel TCP (on `kernel_cc`), 1 MiB messages, the bulk relay cells'
/// byte count, over veth and through the clean relay (pinned with `pin_relay`), `runs` times
/// each.
pub fn ceiling_section(prefix: &str, runs: usize, kernel_cc: &str, pin_relay: bool) -> String {
    let mut cell = ceiling_cell(1 << 20, 128).with_kernel_cc(kernel_cc);
    cell.pin_relay = pin_relay;
    match relay_ceiling(prefix, &cell, None, runs) {
        Ok(c) => format!("{}\n", c.describe()),
        Err(e) => format!("relay ceiling: failed: {e}\n"),
    }
}

/// The incast tables (simulator, deterministic): WRITE with immediate and SEND, admission off
/// then on, with the configuration they ran.
pub fn incast_section() -> Result<String, IncastError> {
    let mut out = String::new();
    for op in [IncastOp::WriteImm, IncastOp::Send] {
        let cfg = IncastConfig {
            op,
            ..IncastConfig::default()
        };
        let reports = incast::compare(&cfg)?;
        let _ = writeln!(
            out,
            "incast {op:?} (simulator): {} senders x {} messages of {} bytes, {} outstanding \
             per sender, {} Gbit/s bottleneck, {} KiB drop-tail queue, {} µs one way, {} \
             bytes admitted per sender, seed {}\n",
            cfg.senders,
            cfg.messages,
            cfg.message_len,
            cfg.window,
            cfg.link.bandwidth_bps / 1_000_000_000,
            cfg.link.queue_limit_bytes >> 10,
            cfg.link.delay.as_micros(),
            cfg.admit,
            cfg.link.seed,
        );
        out += &incast::table(&reports);
        out.push('\n');
    }
    Ok(out)
}
