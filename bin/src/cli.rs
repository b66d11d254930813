//! Command-line parsing shared by the tools.

use clap::{Command, Parser};

/// Parse `T` from the process's arguments, in every subcommand taking a value that starts with
/// `-` and a digit as a number: `--relay-loss -0.5` is then refused for its range, saying the
/// range, instead of as an unknown option `-0` (clap's default, which needed `--relay-loss=-0.5`
/// to get the same answer).
pub fn parse<T: Parser>() -> T {
    let matches = allow_negative(T::command()).get_matches();
    T::from_arg_matches(&matches).unwrap_or_else(|e| e.format(&mut T::command()).exit())
}

/// `--framing`: `per-segment` or `seq` (spec amendment 3).
pub fn parse_framing(s: &str) -> Result<tcp_bth::Framing, String> {
    match s {
        "per-segment" => Ok(tcp_bth::Framing::PerSegment),
        "seq" => Ok(tcp_bth::Framing::Seq),
        _ => Err(format!("{s}: expected per-segment or seq")),
    }
}

/// The name [`parse_framing`] takes for `f`.
pub fn framing_name(f: tcp_bth::Framing) -> &'static str {
    match f {
        tcp_bth::Framing::PerSegment => "per-segment",
        tcp_bth::Framing::Seq => "seq",
    }
}

fn allow_negative(c: Command) -> Command {
    // Only for arguments that take a value: clap asserts that of the setting.
    c.mut_args(|a| {
        let takes = a.get_action().takes_values();
        a.allow_negative_numbers(takes)
    })
    .mut_subcommands(allow_negative)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, FromArgMatches, Subcommand};

    #[derive(Parser, Debug)]
    struct Top {
        #[arg(long)]
        flag: bool,
        #[command(subcommand)]
        cmd: Sub,
    }

    #[derive(Subcommand, Debug)]
    enum Sub {
        Run {
            #[arg(long)]
            loss: f64,
            #[arg(long)]
            quiet: bool,
        },
    }

    /// Flags keep working (clap refuses the setting on an argument that takes no value, in a
    /// debug assertion: `bth decode --options` tripped it), and a subcommand's value may be
    /// negative.
    #[test]
    fn a_subcommands_value_may_be_negative_and_flags_are_left_alone() {
        let cmd = allow_negative(Top::command());
        cmd.clone().debug_assert();
        let m = cmd
            .try_get_matches_from(["top", "--flag", "run", "--loss", "-0.5", "--quiet"])
            .expect("parses");
        let t = Top::from_arg_matches(&m).expect("matches");
        assert!(t.flag);
        let Sub::Run { loss, quiet } = t.cmd;
        assert_eq!((loss, quiet), (-0.5, true));
        let plain = Top::command().try_get_matches_from(["top", "run", "--loss", "-0.5"]);
        assert!(plain.is_err(), "clap's default takes -0.5 for an option");
    }
}
