#!/usr/bin/env bash
# Fuzz step for CI, in three parts; any failing fails the script.
# 1. Replay the committed seed corpus of every target as ordinary tests (`cargo test --release
#    --test replay`, no sanitizers). The fuzz crate is not a member of the root workspace, so
#    `cargo test --workspace` never runs them; a missing or empty corpus directory fails too.
# 2. The livelock detector for longer (issue #35, tests/tests/livelock.rs): random workloads
#    over the simulated pair in both modes, in batches of 256 from a fresh seed
#    (LIVELOCK_SEED, default the current Unix time, printed) for LIVELOCK_SECONDS of wall time
#    (75 by default, plus the time the last batch takes to finish; the test binary is the one
#    `cargo test --workspace` built). A failure prints the report, the shrunk workload and the
#    BTH_LIVELOCK_SEED / BTH_LIVELOCK_CASES that reproduce it, and fails the script after the
#    fuzz runs (docs/reliability.md, "Livelock detector").
# 3. A bounded fuzz run: build the cargo-fuzz targets, then run each for FUZZ_SECONDS (20 by
#    default) on a temporary copy of its committed seed corpus (so the repository is not
#    modified). Fails if any target crashes (libFuzzer exits non-zero and leaves the reproducer in
#    fuzz/artifacts/<target>/).
#
# Only a stable toolchain is installed here: RUSTC_BOOTSTRAP=1 lets stable rustc accept the
# nightly flags cargo-fuzz passes (-Zsanitizer=address). CARGO_CACHE_RUSTC_INFO=0 stops cargo
# from reusing a cached failed `rustc --print` probe from a run without RUSTC_BOOTSTRAP.
set -euo pipefail
cd "$(dirname "$0")"

export RUSTC_BOOTSTRAP=1
export CARGO_CACHE_RUSTC_INFO=0
secs="${FUZZ_SECONDS:-20}"
targets=(bth_option tcp_segment conn_receive endpoint_input)

# Every file of corpus/<target>/ through its target's checks; a missing or empty corpus fails.
echo "fuzz: replaying the committed corpus (cargo test --release --test replay)"
if ! cargo test --release --test replay -- --nocapture >"${TMPDIR:-/tmp}/fuzz-replay.log" 2>&1; then
    echo "fuzz: corpus replay FAILED (cd fuzz && cargo test --release --test replay -- --nocapture); log tail:"
    tail -n 40 "${TMPDIR:-/tmp}/fuzz-replay.log"
    exit 1
fi
grep -E 'replayed [0-9]+ files|^test result' "${TMPDIR:-/tmp}/fuzz-replay.log" || true

status=0

# The livelock detector, in the root workspace (the test profile, with the stack's debug
# assertions on), run from there with RUSTC_BOOTSTRAP unset as `cargo test` runs it.
livelock_secs="${LIVELOCK_SECONDS:-75}"
livelock_seed="${LIVELOCK_SEED:-$(date +%s)}"
livelock_log="${TMPDIR:-/tmp}/fuzz-livelock.log"
echo "fuzz: livelock detector for ${livelock_secs}s from seed ${livelock_seed}"
if ! (cd .. && env -u RUSTC_BOOTSTRAP RUST_BACKTRACE=0 BTH_LIVELOCK_SECONDS="$livelock_secs" \
    BTH_LIVELOCK_SEED="$livelock_seed" cargo test -p bth-tests --test livelock \
    random_workloads_make_progress_until_done -- --exact --nocapture) >"$livelock_log" 2>&1; then
    # From the test's own panic (the report, the shrunk workload, how to reproduce it) on; the
    # panics of the cases tried while shrinking come before it.
    echo "fuzz: livelock detector FAILED (seed ${livelock_seed}; full log $livelock_log):"
    sed -n '/panicked at tests\/tests\/livelock.rs/,$p' "$livelock_log" | head -n 60 | grep . \
        || tail -n 60 "$livelock_log"
    status=1
else
    grep -E '^[0-9]+ workloads' "$livelock_log" || true
fi

# Without cargo-fuzz only the replay and the livelock detector run: a failure under CI=true, a
# message elsewhere.
if ! cargo fuzz --version >/dev/null 2>&1; then
    if [ "${CI:-}" = true ]; then
        echo "FAILED fuzz runs: cargo-fuzz is not installed (cargo install cargo-fuzz --locked)"
        exit 1
    fi
    echo "SKIPPED fuzz runs: cargo-fuzz is not installed (cargo install cargo-fuzz --locked); the corpus replay and the livelock detector above ran"
    exit "$status"
fi

if ! cargo fuzz build -O >"${TMPDIR:-/tmp}/fuzz-build.log" 2>&1; then
    echo "fuzz: build failed"; tail -n 30 "${TMPDIR:-/tmp}/fuzz-build.log"; exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for t in "${targets[@]}"; do
    mkdir -p "$tmp/$t"
    cp corpus/"$t"/* "$tmp/$t/"
    echo "fuzz: $t for ${secs}s"
    if ! cargo fuzz run -O "$t" "$tmp/$t" -- -max_total_time="$secs" -print_final_stats=1 \
        >"$tmp/$t.log" 2>&1; then
        echo "fuzz: $t FAILED (reproducer under fuzz/artifacts/$t/); log tail:"
        tail -n 40 "$tmp/$t.log"
        status=1
    else
        grep -E '^#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units' "$tmp/$t.log" || true
    fi
done
exit "$status"
