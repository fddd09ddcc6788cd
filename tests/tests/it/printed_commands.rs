//! Every command occ prints works today: the crates are
//! not on crates.io yet, so no README, crate doc, script, test snapshot
//! or message string of the workspace may suggest `cargo install
//! cargo-occ` without `--path` or `--git`, or an occ crate as
//! `version = "0.1"` (the `cargo install --locked --git
//! https://github.com/occ-rs/occ cargo-occ` and `git = "…"` forms work).
//!
//! Read: every `.md`, `.rs`, `.stderr`, `.toml` and `.sh` file and every
//! file of `scripts/`, less `target/`, dot folders, CHANGELOG.md and
//! BENCHMARKS.md (history, which quotes what was printed then) and plain
//! `//` comments in Rust (they may say what not to print). A string
//! literal's `\"` counts as `"`.

use occ_tests::workspace_root;
use std::path::{Path, PathBuf};

const OCC_CRATES: [&str; 5] = ["occ", "occ-build", "occ-macros", "occ-model", "occ-shell"];

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" {
                files(&path, out);
            }
            continue;
        }
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        let in_scripts = path.parent().and_then(Path::file_name) == Some("scripts".as_ref());
        if matches!(ext, "md" | "rs" | "stderr" | "toml" | "sh") || in_scripts && ext.is_empty() {
            out.push(path);
        }
    }
}

/// Why `line` suggests a command that fails today, if it does.
fn fails_today(line: &str) -> Option<&'static str> {
    let line = line.replace("\\\"", "\"");
    if line.contains("cargo install")
        && line.contains("cargo-occ")
        && !line.contains("--path")
        && !line.contains("--git")
    {
        return Some("`cargo install cargo-occ` (not on crates.io: --git or --path)");
    }
    if line.contains("path =") || line.contains("git =") {
        return None;
    }
    for krate in OCC_CRATES {
        for form in [
            format!("{krate} = \"0.1\""),
            format!("{krate} = {{ version = \"0.1\""),
        ] {
            let hit = line.match_indices(&form).any(|(at, _)| {
                !line[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
            });
            if hit {
                return Some("an occ crate from crates.io (not there yet: git = or path =)");
            }
        }
    }
    None
}

#[test]
fn no_printed_command_needs_crates_io() {
    let root = workspace_root();
    let mut all = Vec::new();
    files(&root, &mut all);
    assert!(all.len() > 50, "{} files", all.len());
    let me = root.join("tests/tests/it/printed_commands.rs");
    let mut bad = Vec::new();
    for path in all {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path == me || name == "CHANGELOG.md" || name == "BENCHMARKS.md" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let rust = name.ends_with(".rs");
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if rust
                && code.starts_with("//")
                && !code.starts_with("///")
                && !code.starts_with("//!")
            {
                continue;
            }
            if let Some(why) = fails_today(line) {
                let rel = path.strip_prefix(&root).unwrap_or(&path);
                bad.push(format!(
                    "{}:{}: {why}\n    {}",
                    rel.display(),
                    n + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "commands that fail today:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_rule_catches_what_it_should() {
    for line in [
        "cargo install cargo-occ",
        "cargo install --locked cargo-occ   # the CLI",
        "occ = \"0.1\"",
        "occ-build = \"0.1\"",
        "occ = { version = \"0.1\", features = [\"cudarc\"] }",
        "    occ-build = \\\"0.1\\\"\\n",
    ] {
        assert!(fails_today(line).is_some(), "{line}");
    }
    for line in [
        "cargo install --locked --git https://github.com/occ-rs/occ cargo-occ",
        "cargo install --locked --path <occ checkout>/cargo-occ",
        "occ = { git = \"https://github.com/occ-rs/occ\", features = [\"cudarc\"] }",
        "occ-model = { path = \"occ-model\", version = \"0.1.0\" }",
        "jobserver = \"0.1\"",
        "cargo install sccache --locked",
    ] {
        assert_eq!(fails_today(line), None, "{line}");
    }
}

#[test]
fn the_guides_pip_line_installs_every_pinned_wheel() {
    // The guide's install by hand (`docs/GUIDE.md`, "Get nvcc") against the
    // pinned list the build's own error message prints.
    let guide = std::fs::read_to_string(workspace_root().join("docs/GUIDE.md")).expect("guide");
    let at = guide
        .find("python3 -m pip install --no-deps --target")
        .expect("the guide's pip line");
    let block = &guide[at..at + guide[at..].find("```").expect("its block's end")];
    for set in occ_shell::wheels::wheel_sets().iter().filter(|s| !s.legacy) {
        for req in &set.requirements {
            assert!(
                block.contains(req),
                "the guide's pip line lacks {req}:\n{block}"
            );
        }
    }
}
