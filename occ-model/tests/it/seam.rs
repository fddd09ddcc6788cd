//! occ starts every program through one seam (ARCHITECTURE.md, "Every
//! program through one trait"): occ-shell's `process.rs` is the only module
//! of occ-build, occ-shell and cargo-occ that constructs a
//! `std::process::Command` or starts a process, so that the rules above it
//! can be tested on recorded outputs (`Replay`). `occ-build/clippy.toml`
//! bans `Command::new`; this test catches the rest (a `use
//! std::process::Command`, a spawn on a command another crate made) in
//! library and test code alike, and cargo-occ's `src/` (its tests run
//! programs of their own). The exceptions, each with its reason: cc's
//! (`hostlib.rs` alone may use the `cc` crate, which probes the host
//! compiler itself and runs MSVC's `lib.exe`; the comments there say why)
//! and those of [`OUTSIDE`]. Checked from here, beside `layers.rs`, which reads
//! occ-build too.

// The test itself reads the sources.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use crate::source::{code_only, rs_files};
use std::path::Path;

/// What only the seam may write, with why.
const SPAWNS: &[(&str, &str)] = &[
    ("process::Command", "a std::process::Command"),
    ("Command::new", "a std::process::Command"),
    ("process::Stdio", "a process's pipes"),
    ("process::Child", "a running process"),
    ("CommandExt", "a std::process::Command"),
    (".spawn()", "a process started"),
    (".output()", "a process started"),
    (".status()", "a process started"),
];

/// cargo-occ's programs started outside the seam: (its source, the
/// program `Command::new` is given there, why). A file named here may start
/// that program and no other: a `Command::new` of anything else (a CUDA
/// tool above all: nvcc, ptxas, nvdisasm, cuobjdump, fatbinary, the host
/// compiler) fails. No CUDA tool is here.
const OUTSIDE: &[(&str, &str, &str)] = &[(
    "cargo-occ/toolkit.rs",
    "python",
    "`cargo occ toolkit install` runs pip, whose output goes straight to the terminal while \
     it downloads (a `Cmd`'s is caught); pip installs the CUDA tools and is none of them",
)];

/// The programs `Command::new` is given in `code` (comments and strings
/// blanked), as written: `python`, `&nvcc.path`.
fn programs(code: &str) -> Vec<String> {
    code.split("Command::new(")
        .skip(1)
        .map(|rest| {
            let mut depth = 0;
            let end = rest
                .find(|c| {
                    match c {
                        '(' => depth += 1,
                        ')' if depth == 0 => return true,
                        ')' => depth -= 1,
                        _ => {}
                    }
                    false
                })
                .unwrap_or(rest.len());
            rest[..end].trim().to_string()
        })
        .collect()
}

/// The hits of `SPAWNS` in a cargo-occ source less those [`OUTSIDE`]
/// allows: a file named there may spawn, but start only its program.
fn cli_hits(name: &str, text: &str) -> Vec<String> {
    let allowed: Vec<&str> = OUTSIDE
        .iter()
        .filter(|(file, _, _)| *file == name)
        .map(|(_, program, _)| *program)
        .collect();
    if allowed.is_empty() {
        return hits(name, text);
    }
    let mut hits = Vec::new();
    for (n, line) in code_only(text).lines().enumerate() {
        for p in programs(line) {
            if !allowed.contains(&p.as_str()) {
                hits.push(format!(
                    "{name}:{}: a std::process::Command of `{p}`, not the seam's",
                    n + 1
                ));
            }
        }
    }
    hits
}

/// The hits of `SPAWNS` (and of `cc::` outside `hostlib.rs`) in one
/// source, as `file:line: what: code`.
fn hits(name: &str, text: &str) -> Vec<String> {
    let code = code_only(text);
    let mut hits = Vec::new();
    // A `use std::process::{...}` group may span lines.
    let flat = code.replace('\n', " ");
    for group in flat.split("process::{").skip(1) {
        let group = group.split('}').next().unwrap_or("");
        let words: Vec<&str> = group
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .collect();
        if ["Command", "Stdio", "Child"]
            .iter()
            .any(|w| words.contains(w))
        {
            hits.push(format!("{name}: `use std::process::{{{group}}}`"));
        }
    }
    for (n, line) in code.lines().enumerate() {
        for (needle, what) in SPAWNS {
            if line.contains(needle) {
                hits.push(format!("{name}:{}: {what}: {}", n + 1, line.trim()));
            }
        }
        if !name.ends_with("hostlib.rs") && names_cc(line) {
            hits.push(format!(
                "{name}:{}: the cc crate (it starts programs itself): {}",
                n + 1,
                line.trim()
            ));
        }
    }
    hits
}

#[test]
fn occ_build_occ_shell_and_cargo_occ_start_every_program_through_the_seam() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    if !workspace.join("occ-build/Cargo.toml").is_file() {
        return; // a packaged occ-model: no occ-build beside it
    }
    let mut found = Vec::new();
    let mut seam = None;
    // occ-build, and occ-shell, whose `process` is the seam.
    for krate in ["occ-build", "occ-shell"] {
        let src = workspace.join(krate).join("src");
        let files = rs_files(&src);
        assert!(files.len() > 5, "{krate}'s sources: {files:?}");
        for file in &files {
            let text = std::fs::read_to_string(file).expect("read source");
            let name = format!(
                "{krate}/{}",
                file.strip_prefix(&src).unwrap_or(file).to_string_lossy()
            );
            if name == "occ-shell/process.rs" {
                seam = Some(hits(&name, &text));
                continue;
            }
            found.extend(hits(&name, &text));
        }
    }
    // cargo-occ's sources, less its starts outside the seam.
    let src = workspace.join("cargo-occ/src");
    let files = rs_files(&src);
    assert!(files.len() > 5, "cargo-occ's sources: {files:?}");
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read source");
        let name = format!(
            "cargo-occ/{}",
            file.strip_prefix(&src).unwrap_or(file).to_string_lossy()
        );
        found.extend(cli_hits(&name, &text));
    }
    for (file, program, _) in OUTSIDE {
        let path = workspace.join(file.replacen('/', "/src/", 1));
        let text = std::fs::read_to_string(&path).expect("read a source OUTSIDE names");
        assert!(
            programs(&code_only(&text)).iter().any(|p| p == program),
            "{file} no longer starts `{program}`: take it out of OUTSIDE"
        );
    }
    // The seam itself is seen doing what the others may not: the scan reads.
    let seam = seam.expect("occ-shell/src/process.rs, the seam");
    assert!(
        seam.iter().any(|h| h.contains("Command::new")),
        "the scan does not see process.rs's Command::new: {seam:?}"
    );
    assert!(
        found.is_empty(),
        "occ-build, occ-shell or cargo-occ starts programs outside the seam (run them \
         through occ_shell::process::Programs, as compile.rs and sweep_run.rs do):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_seam_check_can_fail() {
    let cases = [
        "fn f() { std::process::Command::new(\"nvcc\").output(); }",
        "use std::process::{\n  Command,\n  Stdio };",
        "fn f(c: &mut Cmd) { c.spawn(); }",
        "fn f() { let b = cc::Build::new(); }",
        "#[cfg(test)]\nmod tests {\n fn t() { x.status(); }\n}",
    ];
    for case in cases {
        assert!(!hits("a.rs", case).is_empty(), "not seen: {case}");
    }
    // A name in a message or comment starts nothing; cc is hostlib's.
    assert!(hits("a.rs", "// Command::new\nconst M: &str = \".spawn()\";").is_empty());
    assert!(hits("hostlib.rs", "let cc = cc::Build::new();").is_empty());
    assert!(hits("a.rs", "let id = std::process::id();").is_empty());
}

#[test]
fn cargo_occ_may_start_only_what_outside_names() {
    let pip = "let s = std::process::Command::new(python)\n  .arg(\"-m\")\n  .status();";
    assert!(cli_hits("cargo-occ/toolkit.rs", pip).is_empty());
    // A CUDA tool beside it, in that file or another, is seen.
    let nvcc = "let o = std::process::Command::new(&nvcc.path).arg(\"-E\").output();";
    let both = format!("{pip}\n{nvcc}");
    let seen = cli_hits("cargo-occ/toolkit.rs", &both);
    assert_eq!(
        seen,
        ["cargo-occ/toolkit.rs:4: a std::process::Command of `&nvcc.path`, not the seam's"]
    );
    assert!(!cli_hits("cargo-occ/sweep_run.rs", nvcc).is_empty());
    assert!(!cli_hits("cargo-occ/cudarc.rs", pip).is_empty());
    assert_eq!(
        programs("Command::new(ptxas_beside(&nvcc)).arg(x); Command::new(cargo)"),
        ["ptxas_beside(&nvcc)", "cargo"]
    );
}

/// Whether `line` names the cc crate (`cc::`, not the tail of another
/// path such as `occ::table`).
fn names_cc(line: &str) -> bool {
    line.match_indices("cc::").any(|(at, _)| {
        !line[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

#[test]
fn cc_is_told_from_paths_that_end_in_cc() {
    assert!(names_cc("let b = cc::Build::new();") && names_cc("(cc::Build::new())"));
    assert!(!names_cc("let k: occ::table::Kernel;") && !names_cc("my_cc::x"));
}
