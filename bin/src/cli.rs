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

fn allow_negative(c: Command) -> Command {
    c.allow_negative_numbers(true)
        .mut_subcommands(allow_negative)
}
