//! The impairment relay's settings as command-line options (`bth-perf server --relay-*`): every
//! field of the relay's [`LinkConfig`] a run may want to change, with the defaults the relay
//! has always had (10 µs one way, no rate limit, reordered packets held back up to 100 µs, the
//! same as `bth-compare`'s relay cells), checked before any namespace is created.

use bth_io::sim::{LinkConfig, LinkConfigError, Spray, SprayMode, MAX_PATHS};
use clap::{Args, ValueEnum};
use std::time::Duration;

/// One-way delay of the relay when `--relay-delay` is not given.
pub const DEFAULT_DELAY: Duration = Duration::from_micros(10);
/// Hold-back of a reordered packet when `--relay-reorder-depth` is not given.
pub const DEFAULT_REORDER_DEPTH: Duration = Duration::from_micros(100);
/// Delay spread of the sprayed paths when `--relay-spread` is not given.
pub const DEFAULT_SPREAD: Duration = Duration::from_micros(100);

/// The relay's link with every default and no impairment: what `--relay` alone gives.
pub fn clean_relay_link(seed: u64) -> LinkConfig {
    LinkConfig::default()
        .with_delay(DEFAULT_DELAY)
        // The relay is meant to add impairments, not a bottleneck: the TUN devices and the
        // relay thread are the only limits unless --relay-rate sets one.
        .with_bandwidth_bps(0)
        .with_reorder(0.0, DEFAULT_REORDER_DEPTH)
        .with_seed(seed)
}

/// How the relay sprays packets over its paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SprayArg {
    /// Packet n takes path n mod N.
    #[value(name = "rr", alias = "round-robin")]
    RoundRobin,
    /// Each packet takes a path drawn at random.
    Random,
}

/// The relay options, flattened into a tool's arguments.
#[derive(Args, Debug, Clone, Default, PartialEq)]
pub struct RelayArgs {
    /// Join the namespaces through the userspace impairment relay instead of veth, even with no
    /// impairment (a clean relay adds only its delay). Any other --relay-* option except
    /// --relay-seed implies it.
    #[arg(long)]
    pub relay: bool,
    /// Relay: one-way delay added to every packet, in µs (both directions) [default: 10].
    #[arg(long, value_name = "µs")]
    pub relay_delay: Option<u64>,
    /// Relay: probability (0 to 1) that a packet is lost, on every path [default: 0].
    #[arg(long, value_name = "P")]
    pub relay_loss: Option<f64>,
    /// Relay: probability (0 to 1) that a packet is held back by a random extra delay of up to
    /// --relay-reorder-depth, so that packets sent after it overtake it [default: 0].
    #[arg(long, value_name = "P")]
    pub relay_reorder: Option<f64>,
    /// Relay: largest extra delay of a held-back packet, in µs; needs --relay-reorder
    /// [default: 100].
    #[arg(long, value_name = "µs")]
    pub relay_reorder_depth: Option<u64>,
    /// Relay: probability (0 to 1) that a packet is delivered twice [default: 0].
    #[arg(long, value_name = "P")]
    pub relay_duplicate: Option<f64>,
    /// Relay: probability (0 to 1) that one bit of a packet is flipped (the receiver's
    /// checksum should then drop it) [default: 0].
    #[arg(long, value_name = "P")]
    pub relay_corrupt: Option<f64>,
    /// Relay: probability (0 to 1) that two aligned 16-bit words of a data packet's payload
    /// are swapped, a corruption the TCP checksum cannot see: per-segment framing's ICRC
    /// drops the segment, S framing (no ICRC) places it and --verify finds it [default: 0].
    #[arg(long, value_name = "P")]
    pub relay_swap: Option<f64>,
    /// Relay: bottleneck rate in Mbit/s, with a 4 MiB drop-tail queue before it; 0 means no
    /// limit [default: 0].
    #[arg(long, value_name = "Mbit/s")]
    pub relay_rate: Option<u64>,
    /// Relay: spray packets over N paths (1 to 16; 2 or more spray) after the bottleneck, as packet-spraying
    /// fabrics do (Ultra Ethernet, SRD, adaptive routing); path delays are spread evenly from 0
    /// to --relay-spread, so packets are reordered by up to the spread. 1 means one path, no
    /// spraying [default: 1].
    #[arg(long, value_name = "N")]
    pub relay_paths: Option<usize>,
    /// Relay: difference between the slowest and the fastest path's delay, in µs; needs
    /// --relay-paths 2 or more [default: 100].
    #[arg(long, value_name = "µs")]
    pub relay_spread: Option<u64>,
    /// Relay: how packets are spread over the paths; needs --relay-paths 2 or more
    /// [default: rr].
    #[arg(long, value_name = "MODE")]
    pub relay_spray: Option<SprayArg>,
    /// Relay: probability (0 to 1) that a packet is lost on its path, on top of --relay-loss
    /// (a flapping link on every path); needs --relay-paths 2 or more [default: 0].
    #[arg(long, value_name = "P")]
    pub relay_path_loss: Option<f64>,
    /// Relay: seed of the random impairments (the same seed, the same pattern per packet).
    #[arg(long, default_value_t = 1)]
    pub relay_seed: u64,
}

/// Why the `--relay-*` options cannot make a link.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RelayArgsError {
    /// `--relay-path-loss` outside [0, 1] (or NaN).
    #[error("--relay-path-loss must be within [0, 1], got {0}")]
    PathLoss(f64),
    /// `--relay-paths` of 0 or more than the link takes.
    #[error("--relay-paths must be 1 (no spraying) to {MAX_PATHS}, got {0}")]
    Paths(usize),
    /// A spraying option without `--relay-paths` of 2 or more.
    #[error("{flag} applies to sprayed paths: add --relay-paths 2 to {MAX_PATHS}")]
    NeedsPaths { flag: &'static str },
    /// `--relay-reorder-depth` without a reorder probability to use it.
    #[error("--relay-reorder-depth sets how far --relay-reorder holds packets back: add --relay-reorder P")]
    DepthWithoutReorder,
    /// `--relay-rate` beyond what fits in bit/s.
    #[error("--relay-rate {0} Mbit/s is too large")]
    Rate(u64),
    /// The link refused the values (a probability outside [0, 1], too many paths, …); the
    /// message names the option that set the value.
    #[error("{opt}: {err}", opt = option_for(.0), err = .0)]
    Link(#[from] LinkConfigError),
}

/// The option that sets the value a [`LinkConfigError`] is about, so the message names what
/// the user typed rather than the link's field.
fn option_for(e: &LinkConfigError) -> &'static str {
    match e {
        LinkConfigError::Probability { field, .. } => match *field {
            "loss" => "--relay-loss",
            "reorder" => "--relay-reorder",
            "duplicate" => "--relay-duplicate",
            "corrupt" => "--relay-corrupt",
            "swap" => "--relay-swap",
            _ => "relay",
        },
        LinkConfigError::ZeroReorderDepth { .. } => "--relay-reorder-depth",
        LinkConfigError::PathCount { .. } => "--relay-paths",
        LinkConfigError::PathLoss { .. } => "--relay-path-loss",
        // A reason added later: the link's own words name it.
        _ => "relay",
    }
}

impl RelayArgs {
    /// Whether any option asks for the relay.
    pub fn wanted(&self) -> bool {
        let RelayArgs {
            relay,
            relay_delay,
            relay_loss,
            relay_reorder,
            relay_reorder_depth,
            relay_duplicate,
            relay_corrupt,
            relay_swap,
            relay_rate,
            relay_paths,
            relay_spread,
            relay_spray,
            relay_path_loss,
            relay_seed: _,
        } = self;
        *relay
            || relay_delay.is_some()
            || relay_loss.is_some()
            || relay_reorder.is_some()
            || relay_reorder_depth.is_some()
            || relay_duplicate.is_some()
            || relay_corrupt.is_some()
            || relay_swap.is_some()
            || relay_rate.is_some()
            || relay_paths.is_some()
            || relay_spread.is_some()
            || relay_spray.is_some()
            || relay_path_loss.is_some()
    }

    /// The relay's link, `None` for veth (no relay option given), or why the options do not
    /// fit together.
    pub fn link_config(&self) -> Result<Option<LinkConfig>, RelayArgsError> {
        if !self.wanted() {
            return Ok(None);
        }
        let us = Duration::from_micros;
        let mut link = clean_relay_link(self.relay_seed)
            .with_loss(self.relay_loss.unwrap_or(0.0))
            .with_duplicate(self.relay_duplicate.unwrap_or(0.0))
            .with_corrupt(self.relay_corrupt.unwrap_or(0.0))
            .with_swap(self.relay_swap.unwrap_or(0.0));
        if let Some(d) = self.relay_delay {
            link = link.with_delay(us(d));
        }
        if self.relay_reorder_depth.is_some() && self.relay_reorder.unwrap_or(0.0) == 0.0 {
            return Err(RelayArgsError::DepthWithoutReorder);
        }
        let depth = self.relay_reorder_depth.map_or(DEFAULT_REORDER_DEPTH, us);
        link = link.with_reorder(self.relay_reorder.unwrap_or(0.0), depth);
        if let Some(mbps) = self.relay_rate {
            let bps = mbps
                .checked_mul(1_000_000)
                .ok_or(RelayArgsError::Rate(mbps))?;
            link = link.with_bandwidth_bps(bps);
        }
        match self.relay_paths.unwrap_or(1) {
            n @ 0 => return Err(RelayArgsError::Paths(n)),
            n if n > MAX_PATHS => return Err(RelayArgsError::Paths(n)),
            1 => {
                for (flag, given) in [
                    ("--relay-spread", self.relay_spread.is_some()),
                    ("--relay-spray", self.relay_spray.is_some()),
                    ("--relay-path-loss", self.relay_path_loss.is_some()),
                ] {
                    if given {
                        return Err(RelayArgsError::NeedsPaths { flag });
                    }
                }
            }
            n => {
                let mode = match self.relay_spray.unwrap_or(SprayArg::RoundRobin) {
                    SprayArg::RoundRobin => SprayMode::RoundRobin,
                    SprayArg::Random => SprayMode::Random,
                };
                let path_loss = self.relay_path_loss.unwrap_or(0.0);
                // One value for every path: say so, not which path the link checked first.
                if !(0.0..=1.0).contains(&path_loss) {
                    return Err(RelayArgsError::PathLoss(path_loss));
                }
                let spread = self.relay_spread.map_or(DEFAULT_SPREAD, us);
                let spray = Spray::even(n, spread, mode)?.with_path_loss(path_loss);
                link = link.with_spray(spray);
            }
        }
        link.validate()?;
        Ok(Some(link))
    }
}

/// One line describing a relay link, for the tools' banners.
pub fn describe_link(link: &LinkConfig) -> String {
    let pct = |p: f64| p * 100.0;
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mut s = format!("relay: {} µs one way", us(link.delay));
    if link.bandwidth_bps > 0 {
        s += &format!(", {} Mbit/s", link.bandwidth_bps / 1_000_000);
    }
    s += &format!(", loss {}%", pct(link.loss));
    if link.reorder > 0.0 {
        s += &format!(
            ", reorder {}% up to {} µs",
            pct(link.reorder),
            us(link.reorder_depth)
        );
    }
    for (what, p) in [("duplicate", link.duplicate), ("corrupt", link.corrupt)] {
        if p > 0.0 {
            s += &format!(", {what} {}%", pct(p));
        }
    }
    if let Some(spray) = &link.spray {
        let mode = match spray.mode {
            SprayMode::RoundRobin => "round-robin",
            SprayMode::Random => "random",
        };
        s += &format!(
            ", sprayed {mode} over {} paths, spread {} µs",
            spray.paths.len(),
            us(spray.spread())
        );
        if let Some(p) = spray.paths.iter().map(|p| p.loss).find(|&l| l > 0.0) {
            s += &format!(", path loss {}%", pct(p));
        }
    }
    s + &format!(", seed {}", link.seed)
}

#[cfg(test)]
mod tests;
