//! Tests that need something from the machine (CAP_NET_ADMIN for namespaces and TUN, tcpdump,
//! tshark) and say so where a reader sees it.
//!
//! libtest decides `#[ignore]` at compile time, but whether this process may create a network
//! namespace is known only when it runs (root, or root under `capsh --drop=cap_net_admin`, from
//! the same build). So the test binaries that hold such tests use a libtest-compatible harness
//! (`harness = false` with [`libtest_mimic`]) and [`test_main!`](crate::test_main!): a test
//! whose needs are missing is reported by cargo as `ignored (needs …)` and counted in the
//! summary line's `ignored`; under `CI=true` it fails instead, because CI must run everything.
//!
//! Usage, in a test file declared with `harness = false` in tests/Cargo.toml:
//!
//! ```text
//! fn pure_test() { assert!(true) }
//! fn over_tun() { /* ... */ }
//! bth_tests::test_main!(pure_test, over_tun [NetAdmin], capture [NetAdmin, Tcpdump, Tshark]);
//! ```

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::process::Command;

/// Something a test needs from the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// CAP_NET_ADMIN and CAP_SYS_ADMIN (namespaces, TUN, veth), /dev/net/tun and iproute2's `ip`.
    NetAdmin,
    /// The `tcpdump` command.
    Tcpdump,
    /// The `tshark` command.
    Tshark,
}

fn command_works(cmd: &str, arg: &str) -> bool {
    Command::new(cmd)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success())
}

impl Need {
    /// Why this need is not met here, or `None` when it is.
    pub fn missing(self) -> Option<String> {
        match self {
            Need::NetAdmin => bth_io::tun::net_admin_missing().or_else(|| {
                (!command_works("ip", "-V")).then(|| "needs the ip command (iproute2)".into())
            }),
            Need::Tcpdump => (!command_works("tcpdump", "--version"))
                .then(|| "needs tcpdump (apt-get install tcpdump)".into()),
            Need::Tshark => (!command_works("tshark", "--version"))
                .then(|| "needs tshark (apt-get install tshark)".into()),
        }
    }
}

/// Whether this run is CI's (`CI=true`, as CI systems set it): missing needs are failures.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The first unmet need's reason, or `None`.
pub fn unmet(needs: &[Need]) -> Option<String> {
    needs.iter().find_map(|n| n.missing())
}

/// One test with its needs: checked when the test runs (not when it is filtered out).
pub fn trial(name: &str, needs: &'static [Need], test: fn()) -> Trial {
    Trial::ignorable_test(name, move || match unmet(needs) {
        None => {
            test();
            Ok(Completion::Completed)
        }
        Some(why) if in_ci() => Err(Failed::from(format!(
            "{why}; CI=true turns a missing capability into a failure (CI must run every test)"
        ))),
        Some(why) => Ok(Completion::ignored_with(why)),
    })
}

/// Run the trials as libtest would (same arguments, same output and summary line).
pub fn run(trials: Vec<Trial>) -> ! {
    libtest_mimic::run(&Arguments::from_args(), trials).exit()
}

/// `main` for a `harness = false` test file: `test_main!(a, b [NetAdmin], c [NetAdmin, Tshark])`.
/// Each name is a `fn()` that panics on failure, like a `#[test]` function.
#[macro_export]
macro_rules! test_main {
    ($( $test:ident $([ $($need:ident),* ])? ),* $(,)?) => {
        fn main() {
            $crate::gate::run(vec![$(
                $crate::gate::trial(
                    stringify!($test),
                    &[$($($crate::gate::Need::$need),*)?],
                    $test,
                )
            ),*]);
        }
    };
}
