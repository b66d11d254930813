//! The run's on/off switches, held once: the command line sets them ([`PerfConfig::mode`]),
//! the hello carries them in one byte, and the server compares them with its own
//! ([`check::Options::mode`]).
//!
//! [`PerfConfig::mode`]: crate::PerfConfig::mode
//! [`check::Options::mode`]: crate::check::Options::mode

/// The switches both sides of a run must share.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunMode {
    /// Both sides send (`-b`): the server runs a requester as well, the client a responder.
    pub bidir: bool,
    /// Check every byte (`--verify`; costs a pattern fill and a compare per message).
    pub verify: bool,
    /// Plain TCP byte stream (`--plain`): the connection is opened without tcp_bth, the client
    /// writes `count * size` bytes and the server reads them. No per-message latency.
    pub plain: bool,
    /// Latency mode (`--lat`): one message outstanding (the depth is what changes).
    pub lat: bool,
    /// Part of a size sweep (`-a`).
    pub sweep: bool,
}

/// Each switch's bit in the hello's flags byte.
const BIDIR: u8 = 1;
const VERIFY: u8 = 2;
const PLAIN: u8 = 4;
const LAT: u8 = 8;
const SWEEP: u8 = 16;

impl RunMode {
    /// Only `--verify`: every byte checked, one direction, bandwidth mode.
    pub fn verified() -> RunMode {
        RunMode {
            verify: true,
            ..RunMode::default()
        }
    }

    /// The switches as the hello carries them, one bit each.
    pub(crate) fn to_bits(self) -> u8 {
        let bit = |on: bool, b: u8| if on { b } else { 0 };
        bit(self.bidir, BIDIR)
            | bit(self.verify, VERIFY)
            | bit(self.plain, PLAIN)
            | bit(self.lat, LAT)
            | bit(self.sweep, SWEEP)
    }

    /// The switches a hello's flags byte carries (unknown bits ignored).
    pub(crate) fn from_bits(bits: u8) -> RunMode {
        RunMode {
            bidir: bits & BIDIR != 0,
            verify: bits & VERIFY != 0,
            plain: bits & PLAIN != 0,
            lat: bits & LAT != 0,
            sweep: bits & SWEEP != 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RunMode;

    #[test]
    fn every_mode_survives_the_flags_byte() {
        for bits in 0..32u8 {
            let m = RunMode::from_bits(bits);
            assert_eq!(m.to_bits(), bits);
            assert_eq!(RunMode::from_bits(m.to_bits()), m);
        }
    }
}
