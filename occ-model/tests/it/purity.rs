//! occ-model is the pure core: no file system, no processes, no environment,
//! no network, no threads' worth of I/O. clippy's `disallowed-methods` (see
//! `occ-model/clippy.toml`) catches calls; this test catches the rest, such as
//! a `use std::fs` or a path that clippy's list does not name, and runs in
//! every `cargo test`. It reads library code as `source::library` gives it:
//! inline test modules, comments and literals blanked, code after a test
//! module kept.

// The test itself reads the sources; the purity rules are for src/.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use crate::source::{library as library_part, rs_files};
use std::path::Path;

/// What src/ may not mention, with why.
const FORBIDDEN: &[(&str, &str)] = &[
    ("std::fs", "file system"),
    ("std::process", "processes"),
    ("std::env", "environment"),
    ("std::net", "network"),
    ("std::io::stdin", "standard input"),
    ("std::io::stdout", "standard output"),
    ("std::io::stderr", "standard error"),
    ("println!", "standard output"),
    ("eprintln!", "standard error"),
    ("print!", "standard output"),
    ("eprint!", "standard error"),
    ("env!(", "build environment"),
    ("option_env!(", "build environment"),
    ("include_str!(", "files at compile time"),
    ("include_bytes!(", "files at compile time"),
];

/// The one read of the build environment src/ makes, with why: `CODE`, the
/// hash of occ-model's own sources that its build script makes (in
/// `lib.rs`). It is fixed by src/ itself, so what occ-model returns still
/// follows from its inputs alone; builds key what it parsed by it.
const ALLOWED: (&str, &str) = ("lib.rs", "pub const CODE: &str = env!(");

/// Whether a `use std::{...}` group names a forbidden module (`fs`, `env`,
/// `process`, `net`, or `io`'s streams), in any layout or rename.
fn forbidden_group(code: &str) -> Option<&'static str> {
    let group = code.split("std::{").nth(1)?;
    let words: Vec<&str> = group
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .collect();
    ["fs", "env", "process", "net", "stdin", "stdout", "stderr"]
        .into_iter()
        .find(|m| words.contains(m))
}

#[test]
fn the_model_does_no_io() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = rs_files(&src);
    assert!(files.len() >= 10, "found only {files:?}");
    let mut hits = Vec::new();
    for file in &files {
        if file.ends_with("proptests.rs") {
            continue; // compiled only under #[cfg(test)]
        }
        let text = std::fs::read_to_string(file).expect("read source");
        let library = library_part(&text);
        // A `use std::{...}` group may span lines: join each one first.
        let flat = library.replace('\n', " ");
        for group in flat.split("use std::{").skip(1) {
            let group = group.split('}').next().unwrap_or("");
            if let Some(m) = forbidden_group(&format!("std::{{{group}}}")) {
                hits.push(format!("{}: {m} in `use std::{{{group}}}`", file.display()));
            }
        }
        for (n, line) in library.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if file.ends_with(ALLOWED.0) && code.trim_start().starts_with(ALLOWED.1) {
                continue;
            }
            for (needle, what) in FORBIDDEN {
                if code.contains(needle) {
                    hits.push(format!(
                        "{}:{}: {what}: {}",
                        file.display(),
                        n + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        hits.is_empty(),
        "occ-model must stay pure (do I/O in occ-build, occ-macros or cargo-occ):\n{}",
        hits.join("\n")
    );
}

#[test]
fn the_check_can_fail() {
    // The scanner sees what it must: a line of library code with a call.
    let text = "fn f() { let _ = std::fs::read(\"x\"); }\n#[cfg(test)]\nmod tests {\n std::env::var(\"X\"); }";
    let lib = library_part(text);
    assert!(lib.contains("std::fs"));
    assert!(!lib.contains("std::env"));
    // A test-module declaration does not hide what follows it.
    let text = "#[cfg(test)]\nmod proptests;\npub fn z() { std::env::var(\"HOME\"); }";
    assert!(library_part(text).contains("std::env"));
    // Nor does a test module hide the code after it, and a hit keeps its line.
    let text = "#[cfg(test)]\nmod tests {\n fn t() { if true { std::fs::read(\"x\"); } }\n}\npub fn z() { std::env::var(\"HOME\"); }";
    let lib = library_part(text);
    assert!(!lib.contains("std::fs"), "{lib}");
    assert!(
        lib.lines()
            .nth(4)
            .is_some_and(|l| l.starts_with("pub fn z() { std::env::var(")),
        "{lib}"
    );
    // A message that names a module is no use of it.
    assert!(!library_part("const M: &str = \"std::fs\";").contains("std::fs"));
    // Grouped and renamed imports are seen.
    assert_eq!(forbidden_group("std::{env as e, fs as f}"), Some("fs"));
    assert_eq!(forbidden_group("std::{collections::BTreeMap, fmt}"), None);
}
