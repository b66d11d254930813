//! The options both sides of a run must share, and the server's comparison of the client's
//! (from its hello) with its own: a run whose sides disagree would measure nothing sensible
//! (or hang: a server that expects 5,000 SENDs of 64 KiB gets 10 of 4 KiB), so the server
//! refuses it and tells the client which options differ, naming both values.

use super::{PerfConfig, PerfOp, RunMode};
use std::fmt;
use std::time::Duration;

/// The shared options, as the hello carries them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The operation (`--op`).
    pub op: PerfOp,
    /// Message size in bytes (`--size`).
    pub size: u32,
    /// Messages per requester; 0 when `duration` is set.
    pub count: u64,
    /// Compared to the millisecond (what the hello carries).
    pub duration: Option<Duration>,
    /// WRs each requester keeps outstanding (`--tx-depth`; saturates at `u32::MAX`).
    pub tx_depth: u32,
    /// Receive buffers kept posted for the peer's SENDs (`--rx-depth`; saturates at
    /// `u32::MAX`).
    pub rx_depth: u32,
    /// Connections of the run (`-q`).
    pub qps: u32,
    /// The switches (`-b`, `--verify`, `--plain`, `--lat`, `-a`).
    pub mode: RunMode,
}

impl Default for Options {
    fn default() -> Options {
        Options::of(&PerfConfig::default())
    }
}

impl Options {
    /// `cfg`'s options as its hello will carry them: `duration` cut to whole milliseconds,
    /// `count` 0 when a duration is set.
    pub fn of(cfg: &PerfConfig) -> Options {
        let depth = |d: usize| u32::try_from(d).unwrap_or(u32::MAX);
        // Whole milliseconds on the wire: compare what will be sent.
        let duration = cfg
            .duration
            .map(|d| Duration::from_millis(d.as_millis() as u64));
        Options {
            op: cfg.op,
            size: cfg.size,
            count: if duration.is_some() { 0 } else { cfg.count },
            duration,
            tx_depth: depth(cfg.tx_depth),
            rx_depth: depth(cfg.rx_depth),
            qps: cfg.qps,
            mode: cfg.mode,
        }
    }

    /// How long each requester runs, as the option that set it.
    fn length(&self) -> String {
        match self.duration {
            Some(d) => format!("--duration {}", d.as_secs_f64()),
            None => format!("--iters {}", self.count),
        }
    }
}

/// One option on which client and server differ, as each side's command line would say it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The client's value (`--size 4096`, `no --verify`).
    pub client: String,
    /// The server's value, in the same form.
    pub server: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "client asked for {}, this server runs {}",
            self.client, self.server
        )
    }
}

fn flag(name: &str, on: bool) -> String {
    if on {
        format!("--{name}")
    } else {
        format!("no --{name}")
    }
}

/// Every option on which `client` differs from `server`, in command-line order.
pub fn compare(client: &Options, server: &Options) -> Vec<Mismatch> {
    let sides = |f: &dyn Fn(&Options) -> String| (f(client), f(server));
    let fields: [(String, String); 11] = [
        sides(&|o| format!("--op {}", o.op)),
        sides(&|o| format!("--size {}", o.size)),
        sides(&|o| flag("all", o.mode.sweep)),
        sides(&Options::length),
        sides(&|o| format!("--qps {}", o.qps)),
        sides(&|o| format!("--tx-depth {}", o.tx_depth)),
        sides(&|o| format!("--rx-depth {}", o.rx_depth)),
        sides(&|o| flag("bidirectional", o.mode.bidir)),
        sides(&|o| flag("lat", o.mode.lat)),
        sides(&|o| flag("verify", o.mode.verify)),
        sides(&|o| flag("plain", o.mode.plain)),
    ];
    fields
        .into_iter()
        .filter(|(c, s)| c != s)
        .map(|(client, server)| Mismatch { client, server })
        .collect()
}

/// The server's reason for refusing `client`, or `None` when the options agree.
pub fn refusal(client: &Options, server: &Options) -> Option<String> {
    let m = compare(client, server);
    (!m.is_empty()).then(|| {
        m.iter()
            .map(Mismatch::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    })
}
