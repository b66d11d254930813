//! The `--relay-*` options as a user types them: parsed by clap, turned into the relay's link.

use super::*;
use crate::compare::Link;
use clap::{CommandFactory, Parser};

#[derive(Parser, Debug)]
struct Cli {
    #[command(flatten)]
    relay: RelayArgs,
}

fn parse(args: &[&str]) -> Result<Option<LinkConfig>, RelayArgsError> {
    let argv = std::iter::once("tool").chain(args.iter().copied());
    Cli::try_parse_from(argv)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
        .relay
        .link_config()
}

const US: Duration = Duration::from_micros(1);

#[test]
fn no_relay_option_means_veth() {
    assert_eq!(parse(&[]), Ok(None));
    // The seed alone chooses nothing.
    assert_eq!(parse(&["--relay-seed", "5"]), Ok(None));
}

#[test]
fn defaults_are_the_relay_bth_compare_uses() {
    assert_eq!(parse(&["--relay"]), Ok(Some(clean_relay_link(1))));
    let link = parse(&[
        "--relay-reorder",
        "0.1",
        "--relay-loss",
        "0.01",
        "--relay-seed",
        "4",
    ]);
    let compare = Link::relay(0.1, 0.01).link_config(4).expect("a valid link");
    assert_eq!(link, Ok(compare));
    // bth-compare's spraying cells, from the command line.
    let link = parse(&["--relay-paths", "4", "--relay-spread", "200"]);
    let compare = Link::spray(4).link_config(1).expect("a valid link");
    assert_eq!(link, Ok(compare));
}

#[test]
fn every_setting_reaches_the_link() {
    let link = parse(&[
        "--relay-delay",
        "25",
        "--relay-loss",
        "0.02",
        "--relay-reorder",
        "0.3",
        "--relay-reorder-depth",
        "40",
        "--relay-duplicate",
        "0.001",
        "--relay-corrupt",
        "0.0005",
        "--relay-rate",
        "2500",
        "--relay-paths",
        "4",
        "--relay-spread",
        "60",
        "--relay-spray",
        "random",
        "--relay-path-loss",
        "0.01",
        "--relay-seed",
        "9",
    ])
    .unwrap()
    .unwrap();
    assert_eq!(link.delay, 25 * US);
    assert_eq!((link.loss, link.reorder), (0.02, 0.3));
    assert_eq!(link.reorder_depth, 40 * US);
    assert_eq!((link.duplicate, link.corrupt), (0.001, 0.0005));
    assert_eq!(link.bandwidth_bps, 2_500_000_000);
    assert_eq!(link.seed, 9);
    let expected = Spray::even(4, 60 * US, SprayMode::Random)
        .unwrap()
        .with_path_loss(0.01);
    assert_eq!(link.spray.as_ref(), Some(&expected));
    let d = describe_link(&link);
    for part in [
        "25 µs one way",
        "2500 Mbit/s",
        "reorder 30% up to 40 µs",
        "sprayed random over 4 paths, spread 60 µs",
        "path loss 1%",
        "seed 9",
    ] {
        assert!(d.contains(part), "{part:?} missing from {d:?}");
    }
}

#[test]
fn spraying_defaults_to_round_robin_over_a_100_us_spread() {
    let link = parse(&["--relay-paths", "8"]).unwrap().unwrap();
    let spray = link.spray.expect("spraying");
    assert_eq!(spray.mode, SprayMode::RoundRobin);
    assert_eq!(spray.paths.len(), 8);
    assert_eq!(spray.spread(), DEFAULT_SPREAD);
    assert_eq!(
        parse(&["--relay-paths", "2", "--relay-spray", "round-robin"])
            .unwrap()
            .unwrap()
            .spray
            .map(|s| s.mode),
        Some(SprayMode::RoundRobin)
    );
    assert_eq!(parse(&["--relay-paths", "1"]).unwrap().unwrap().spray, None);
}

#[test]
fn invalid_combinations_are_errors() {
    assert_eq!(
        parse(&["--relay-paths", "0"]),
        Err(RelayArgsError::Paths(0))
    );
    assert_eq!(
        parse(&["--relay-paths", "17"]),
        Err(RelayArgsError::Paths(17))
    );
    for flag in ["--relay-spread", "--relay-path-loss", "--relay-spray"] {
        let value = if flag == "--relay-spray" { "rr" } else { "0" };
        assert_eq!(
            parse(&[flag, value]),
            Err(RelayArgsError::NeedsPaths { flag })
        );
        assert_eq!(
            parse(&["--relay-paths", "1", flag, value]),
            Err(RelayArgsError::NeedsPaths { flag })
        );
    }
    assert_eq!(
        parse(&["--relay-reorder-depth", "50"]),
        Err(RelayArgsError::DepthWithoutReorder)
    );
    assert!(matches!(
        parse(&["--relay-reorder", "0.1", "--relay-reorder-depth", "0"]),
        Err(RelayArgsError::Link(
            LinkConfigError::ZeroReorderDepth { .. }
        ))
    ));
    assert!(matches!(
        parse(&["--relay-loss", "1.5"]),
        Err(RelayArgsError::Link(LinkConfigError::Probability {
            field: "loss",
            ..
        }))
    ));
    assert_eq!(
        parse(&["--relay-paths", "3", "--relay-path-loss=-1"]),
        Err(RelayArgsError::PathLoss(-1.0))
    );
    assert_eq!(
        parse(&["--relay-rate", &u64::MAX.to_string()]),
        Err(RelayArgsError::Rate(u64::MAX))
    );
    // The message names the option the user typed, not the link's field.
    for (args, option) in [
        (&["--relay-loss", "1.5"][..], "--relay-loss: "),
        (&["--relay-corrupt", "2"], "--relay-corrupt: "),
        (&["--relay-duplicate", "3"], "--relay-duplicate: "),
        (&["--relay-reorder", "4"], "--relay-reorder: "),
        (
            &["--relay-reorder", "0.1", "--relay-reorder-depth", "0"],
            "--relay-reorder-depth: ",
        ),
        (
            &["--relay-paths", "40"],
            "--relay-paths must be 1 (no spraying) to 16",
        ),
        (
            &["--relay-paths", "3", "--relay-path-loss=-1"],
            "--relay-path-loss must be within [0, 1], got -1",
        ),
    ] {
        let e = parse(args).expect_err("refused").to_string();
        assert!(e.starts_with(option), "{args:?}: {e}");
    }
    // Messages name the flag to fix.
    let e = RelayArgsError::NeedsPaths {
        flag: "--relay-spread",
    }
    .to_string();
    assert!(
        e.contains("--relay-spread") && e.contains("--relay-paths 2 to 16"),
        "{e}"
    );
    // What clap refuses, it refuses with an error, not a panic.
    for bad in [
        &["--relay-spray", "zigzag"][..],
        &["--relay-paths=-2"],
        &["--relay-delay", "1.5"],
    ] {
        let argv = std::iter::once("tool").chain(bad.iter().copied());
        assert!(Cli::try_parse_from(argv).is_err(), "{bad:?}");
    }
}

#[test]
fn help_explains_every_option() {
    let help = Cli::command().render_long_help().to_string();
    assert!(help.lines().any(|l| l.trim() == "--relay"), "{help}");
    for flag in [
        "--relay-delay <µs>",
        "--relay-loss <P>",
        "--relay-reorder <P>",
        "--relay-reorder-depth <µs>",
        "--relay-duplicate <P>",
        "--relay-corrupt <P>",
        "--relay-rate <Mbit/s>",
        "--relay-paths <N>",
        "--relay-spread <µs>",
        "--relay-spray <MODE>",
        "--relay-path-loss <P>",
        "--relay-seed <RELAY_SEED>",
    ] {
        assert!(help.contains(flag), "{flag:?} missing from:\n{help}");
    }
    assert!(help.contains("rr") && help.contains("random"), "{help}");
    assert!(help.contains("[default: 10]") && help.contains("[default: 100]"));
}
