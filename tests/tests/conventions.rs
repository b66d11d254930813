//! Conventions of the library crates that no compiler lint holds as written: every public
//! error enum is `#[non_exhaustive]`, so a new reason is not a breaking change for callers
//! (clippy's `exhaustive_enums` would flag every public enum, wire-format ones that callers
//! are meant to match exhaustively included). The workspace's `[workspace.lints]` holds the
//! rest (`Cargo.toml`).

use std::path::{Path, PathBuf};

/// The library crates' source folders, from the workspace root.
const LIBRARIES: [&str; 7] = [
    "tcp-bth/wire/src",
    "tcp-bth/src",
    "tcp-bth/io/src",
    "tcp-bth/capture/src",
    "framer/src",
    "placement/src",
    "cc/src",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Public error enums (`pub enum …Error`) of `src` whose attributes above them lack
/// `#[non_exhaustive]`: (line number, name).
fn exhaustive_error_enums(src: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = src.lines().collect();
    let mut found = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(rest) = l.trim_start().strip_prefix("pub enum ") else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.ends_with("Error") {
            continue;
        }
        // The attributes and doc comments directly above the item.
        let above = lines[..i]
            .iter()
            .rev()
            .take_while(|a| {
                let a = a.trim_start();
                a.starts_with("#[") || a.starts_with("//") || a.starts_with(')')
            })
            .any(|a| a.contains("#[non_exhaustive]"));
        if !above {
            found.push((i + 1, name));
        }
    }
    found
}

#[test]
fn public_error_enums_of_the_libraries_are_non_exhaustive() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in LIBRARIES {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 50, "found only {} files", files.len());
    let mut bad = Vec::new();
    let mut seen = 0;
    for f in &files {
        let src = std::fs::read_to_string(f).expect("read source");
        seen += src.matches("pub enum ").count();
        for (line, name) in exhaustive_error_enums(&src) {
            bad.push(format!("{}:{line} {name}", f.display()));
        }
    }
    assert!(seen > 20, "found only {seen} public enums");
    assert!(
        bad.is_empty(),
        "public error enums without #[non_exhaustive]:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_check_finds_an_exhaustive_error_enum_and_passes_a_marked_one() {
    let src = "/// Why.\n#[derive(Debug)]\npub enum BadError {\n    A,\n}\n\n\
               /// Why.\n#[derive(Debug)]\n#[non_exhaustive]\npub enum GoodError {\n    A,\n}\n\n\
               pub enum Opcode {\n    A,\n}\n";
    assert_eq!(
        exhaustive_error_enums(src),
        vec![(3, "BadError".to_string())]
    );
}
