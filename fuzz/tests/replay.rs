//! Replays the committed seed corpus of every fuzz target without sanitizers, as ordinary tests:
//! fuzz/corpus/bth_option through `check_bth_option`, fuzz/corpus/tcp_segment through
//! `check_tcp_segment`, fuzz/corpus/conn_receive through `conn::run`, fuzz/corpus/endpoint_input through
//! `endpoint::run` — so a change to the stack
//! that breaks an invariant on a known input fails here, without cargo-fuzz or a nightly flag.
//!
//! `cd fuzz && cargo test --release --test replay -- --nocapture` (fuzz/run-ci.sh runs it; the
//! fuzz crate is not a member of the root workspace, so `cargo test --workspace` does not).
//!
//! `CONN_FUZZ_REPLAY=<file>` replays just that file through `conn_receive` instead of its corpus
//! (the parser corpora still replay in full); add `CONN_FUZZ_TRACE=1` to print B's sequence state.

use std::path::{Path, PathBuf};

/// Every file of fuzz/corpus/`target`, sorted; panics (fails the test) when the directory is
/// missing, unreadable or holds no file.
fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| {
        panic!(
            "corpus directory {} cannot be read ({e}): the committed seed corpus of `{target}` \
             is missing (regenerate it with `cargo run --release --bin gen_corpus` in fuzz/)",
            dir.display()
        )
    });
    let mut files: Vec<PathBuf> = entries
        .map(|e| {
            e.unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
                .path()
        })
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "corpus directory {} holds no file: nothing to replay for `{target}`",
        dir.display()
    );
    files
}

/// Runs `check` on every file of the corpus of `target`, naming the file if it panics.
fn replay(target: &str, check: fn(&[u8])) {
    let files = corpus(target);
    for f in &files {
        let data = std::fs::read(f).unwrap_or_else(|e| panic!("reading {}: {e}", f.display()));
        let r = std::panic::catch_unwind(|| check(&data));
        if let Err(e) = r {
            eprintln!("{target}: {} failed", f.display());
            std::panic::resume_unwind(e);
        }
    }
    eprintln!(
        "{target}: replayed {} files from corpus/{target}",
        files.len()
    );
}

/// The single-file mode: `CONN_FUZZ_REPLAY=<file>`.
fn single_file() -> Option<PathBuf> {
    std::env::var_os("CONN_FUZZ_REPLAY").map(PathBuf::from)
}

// The parser corpora replay in full whatever CONN_FUZZ_REPLAY says (they take milliseconds);
// `cargo test --test replay replay_conn_receive_corpus` runs only the single-file replay.
#[test]
fn replay_bth_option_corpus() {
    replay("bth_option", bth_fuzz::check_bth_option);
}

#[test]
fn replay_tcp_segment_corpus() {
    replay("tcp_segment", bth_fuzz::check_tcp_segment);
}

#[test]
fn replay_endpoint_input_corpus() {
    replay("endpoint_input", bth_fuzz::endpoint::run);
}

#[test]
fn replay_conn_receive_corpus() {
    if let Some(f) = single_file() {
        eprintln!("conn_receive: replaying {}", f.display());
        let data = std::fs::read(&f)
            .unwrap_or_else(|e| panic!("CONN_FUZZ_REPLAY={}: cannot read it: {e}", f.display()));
        bth_fuzz::conn::run(&data);
        return;
    }
    replay("conn_receive", bth_fuzz::conn::run);
}
