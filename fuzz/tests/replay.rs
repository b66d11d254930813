//! Replays the files named in `CONN_FUZZ_REPLAY` (or every file of fuzz/artifacts-known/) through
//! the `conn_receive` harness without sanitizers: `cargo test --test replay -- --nocapture`.
#[test]
fn replay() {
    let files: Vec<std::path::PathBuf> = match std::env::var_os("CONN_FUZZ_REPLAY") {
        Some(f) => vec![f.into()],
        None => std::fs::read_dir("artifacts-known")
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default(),
    };
    for f in files {
        eprintln!("replaying {}", f.display());
        tcp_bth_fuzz::conn::run(&std::fs::read(&f).unwrap());
    }
}
