#!/usr/bin/env bash
# Fuzz step for CI, in two parts; either failing fails the script.
# 1. Replay the committed seed corpus of every target as ordinary tests (`cargo test --release
#    --test replay`, no sanitizers). The fuzz crate is not a member of the root workspace, so
#    `cargo test --workspace` never runs them; a missing or empty corpus directory fails too.
# 2. A bounded fuzz run: build the cargo-fuzz targets, then run each for FUZZ_SECONDS (20 by
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

# Without cargo-fuzz only the replay runs: a failure under CI=true, a message elsewhere.
if ! cargo fuzz --version >/dev/null 2>&1; then
    if [ "${CI:-}" = true ]; then
        echo "FAILED fuzz runs: cargo-fuzz is not installed (cargo install cargo-fuzz --locked)"
        exit 1
    fi
    echo "SKIPPED fuzz runs: cargo-fuzz is not installed (cargo install cargo-fuzz --locked); the corpus replay above ran"
    exit 0
fi

if ! cargo fuzz build -O >"${TMPDIR:-/tmp}/fuzz-build.log" 2>&1; then
    echo "fuzz: build failed"; tail -n 30 "${TMPDIR:-/tmp}/fuzz-build.log"; exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
status=0
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
