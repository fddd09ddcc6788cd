//! occ-model's layers go one way: the manifest schema (`manifest`, with
//! `SCHEMA_VERSION`), the analyses that fill it, and the views on top
//! (`table`: text tables and the before/after diff; `markdown`; `ci`:
//! SARIF and workflow commands). A view may import anything; nothing below
//! a view imports one, and no two modules import each other in a circle.
//! occ-build's modules form no circle either. Like `purity.rs`, this
//! reads `src/` (tests left out) and runs in every
//! `cargo test`.

// The test itself reads the sources.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The views: text for people and tools, made from what the analyses found.
const VIEWS: &[&str] = &["table", "markdown", "ci"];

/// occ-model's `src/`.
fn own_src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Each module of occ-model's `src/`, as [`modules_of`] gives them.
fn modules() -> BTreeMap<String, String> {
    modules_of(&own_src())
}

/// Each module of a crate's `src` (by file stem, or folder for a module of
/// several files) with its library text: before the first inline test
/// module, comments dropped.
fn modules_of(src: &Path) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for entry in std::fs::read_dir(src).expect("read src/") {
        let path = entry.expect("dir entry").path();
        let Some(stem) = path.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
            continue;
        };
        let files: Vec<std::path::PathBuf> = if path.is_dir() {
            std::fs::read_dir(&path)
                .expect("read a module folder")
                .map(|e| e.expect("dir entry").path())
                .filter(|p| p.extension().is_some_and(|e| e == "rs"))
                .collect()
        } else if path.extension().is_some_and(|e| e == "rs") {
            vec![path]
        } else {
            continue;
        };
        if stem == "lib" || stem == "proptests" {
            continue;
        }
        for file in files {
            let text = std::fs::read_to_string(&file).expect("read a source");
            out.entry(stem.clone())
                .or_default()
                .push_str(&library(&text));
        }
    }
    out
}

/// A source's library code: before its inline test module, comments dropped.
fn library(text: &str) -> String {
    let library = [
        "#[cfg(test)]\nmod tests",
        "#[cfg(test)]\npub(crate) mod tests",
    ]
    .iter()
    .filter_map(|m| text.find(m))
    .min()
    .map_or(text, |i| &text[..i]);
    library
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// The modules a module's code names: `crate::m` and `crate::{m, ..}`.
fn imports(code: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        let names: Vec<&str> = match rest.strip_prefix('{') {
            Some(group) => group
                .split('}')
                .next()
                .unwrap_or("")
                .split(',')
                .map(|n| n.trim().split("::").next().unwrap_or(""))
                .collect(),
            None => vec![rest
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .unwrap_or("")],
        };
        found.extend(
            names
                .into_iter()
                .filter(|n| known.contains(*n))
                .map(str::to_string),
        );
    }
    found
}

#[test]
fn nothing_below_a_view_imports_one() {
    let modules = modules();
    let known: BTreeSet<String> = modules.keys().cloned().collect();
    for view in VIEWS {
        assert!(known.contains(*view), "no module {view}: update VIEWS");
    }
    let mut wrong = Vec::new();
    for (name, code) in &modules {
        if VIEWS.contains(&name.as_str()) {
            continue;
        }
        for import in imports(code, &known) {
            if VIEWS.contains(&import.as_str()) {
                wrong.push(format!("{name} imports the view {import}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn no_module_imports_itself_through_others() {
    no_cycles(&modules());
}

/// occ-build's modules form no circle either (ARCHITECTURE.md, "Leaves
/// first"). Checked from here, where the checker is; outside the workspace
/// (a packaged occ-model) there is no occ-build beside it to read.
#[test]
fn occ_build_imports_no_module_through_others() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../occ-build");
    if !root.join("Cargo.toml").is_file() {
        return;
    }
    let modules = modules_of(&root.join("src"));
    assert!(
        modules.len() > 10,
        "occ-build's modules: {:?}",
        modules.keys()
    );
    no_cycles(&modules);
}

/// Panics naming the first import cycle among `modules`.
fn no_cycles(modules: &BTreeMap<String, String>) {
    let known: BTreeSet<String> = modules.keys().cloned().collect();
    let edges: BTreeMap<&str, BTreeSet<String>> = modules
        .iter()
        .map(|(name, code)| {
            let mut to = imports(code, &known);
            to.remove(name);
            (name.as_str(), to)
        })
        .collect();
    // From each module, walk what it imports; reaching it again is a cycle.
    for start in edges.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<(String, Vec<String>)> =
            vec![(start.to_string(), vec![start.to_string()])];
        while let Some((at, path)) = stack.pop() {
            for next in &edges[at.as_str()] {
                let mut path = path.clone();
                path.push(next.clone());
                assert!(next != start, "an import cycle: {}", path.join(" -> "));
                if seen.insert(next.clone()) {
                    stack.push((next.clone(), path));
                }
            }
        }
    }
}

#[test]
fn the_schema_is_one_module() {
    // Every type the manifest serializes is defined in manifest.rs (the
    // analyses re-export the ones they fill); the schema imports no
    // analysis and no view.
    let modules = modules();
    let known: BTreeSet<String> = modules.keys().cloned().collect();
    let allowed: BTreeSet<&str> = ["error", "lines", "names", "params"].into();
    let schema_imports = imports(&modules["manifest"], &known);
    let extra: Vec<&String> = schema_imports
        .iter()
        .filter(|m| !allowed.contains(m.as_str()))
        .collect();
    assert!(extra.is_empty(), "manifest imports {extra:?}");
    // Each with the analysis that fills it, which must not define it again.
    for (ty, filler) in [
        ("Declared", "launch"),
        ("Launch", "launch"),
        ("Cliffs", "cliff"),
        ("Measured", "measured"),
        ("DynamicSmem", "tune"),
    ] {
        let defines = |code: &str| {
            code.contains(&format!("pub struct {ty} ")) || code.contains(&format!("pub enum {ty} "))
        };
        assert!(
            defines(&modules["manifest"]),
            "manifest.rs does not define {ty}"
        );
        assert!(!defines(&modules[filler]), "{filler}.rs defines {ty} again");
    }
}
