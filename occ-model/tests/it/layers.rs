//! occ-model's layers go one way: the manifest schema
//! (`schema::manifest`, with `SCHEMA_VERSION`), the analyses that fill
//! it, and the views on top (`render::text_table`: text tables and the
//! before/after diff; `render::markdown`; `render::ci`: SARIF and workflow
//! commands). The six public modules are namespaces (folders whose
//! `mod.rs` only declares modules), so the layers are checked between
//! the modules inside them. A view may import anything; nothing below
//! a view imports one, and no two modules import each other in a circle.
//! occ-build's modules form no circle either. Imports are `crate::m`,
//! `crate::{m, n::{..}}` and `crate::Name` for a name `lib.rs` re-exports
//! from `m`, in code (not comments or strings); a self-test shows the
//! checker finds a cycle made each way. Like `purity.rs`, this reads
//! `src/` (tests left out) and runs in every `cargo test`.

// The test itself reads the sources.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use crate::source::{library, rs_files};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The views: text for people and tools, made from what the analyses found.
const VIEWS: &[&str] = &["render::text_table", "render::markdown", "render::ci"];

/// occ-model's `src/`.
fn own_src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Each module of occ-model's `src/`, as [`modules_of`] gives them.
fn modules() -> BTreeMap<String, String> {
    modules_of(&own_src())
}

/// Each module of a crate's `src` (by file stem, or folder for a module of
/// several files, at any depth) with its library text ([`library`]: inline
/// test modules and comments blanked). A folder whose `mod.rs` only
/// declares modules ([`is_namespace`], as occ-build's `stage/` and
/// `leaf/`) groups modules rather than being one: each of its files and
/// folders is a module of its own, named `folder::name`.
fn modules_of(src: &Path) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for (name, path) in entries(src) {
        if path.is_dir() && is_namespace(&path) {
            let tests = test_only(&path);
            for (child, path) in entries(&path) {
                if child != "mod" && !tests.contains(&child) {
                    add_module(&mut out, src, &format!("{name}::{child}"), &path);
                }
            }
        } else if name != "lib" && name != "proptests" {
            add_module(&mut out, src, &name, &path);
        }
    }
    out
}

/// The `.rs` files and the folders of `dir`, each with its name (a file's
/// stem).
fn entries(dir: &Path) -> Vec<(String, std::path::PathBuf)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read a source folder") {
        let path = entry.expect("dir entry").path();
        let Some(stem) = path.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
            continue;
        };
        if path.is_dir() || path.extension().is_some_and(|e| e == "rs") {
            out.push((stem, path));
        }
    }
    out
}

/// The modules a namespace declares for its tests only (`#[cfg(test)] mod
/// linear;`): test code, as the crate's `proptests` is, not a layer.
fn test_only(dir: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(dir.join("mod.rs")).unwrap_or_default();
    library(&text)
        .split(';')
        .map(str::trim)
        .filter_map(|s| s.strip_prefix("#[cfg(test)]"))
        .filter_map(|s| s.trim().strip_prefix("mod "))
        .map(|name| name.trim().to_string())
        .collect()
}

/// Whether a folder only groups modules: its `mod.rs` holds nothing but
/// `mod` declarations (and attributes on them).
fn is_namespace(dir: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(dir.join("mod.rs")) else {
        return false;
    };
    library(&text)
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .all(|statement| {
            let statement = statement.trim_start_matches("#[cfg(test)]").trim();
            ["mod ", "pub mod ", "pub(crate) mod "]
                .iter()
                .any(|p| statement.starts_with(p))
        })
}

/// Adds the library text of module `name` (the file `path`, or every file
/// of the folder `path`) to `out`.
fn add_module(out: &mut BTreeMap<String, String>, src: &Path, name: &str, path: &Path) {
    let files = if path.is_dir() {
        rs_files(path)
    } else {
        vec![path.to_path_buf()]
    };
    // In a namespace's file, one `super::` is the namespace.
    let namespace = name.rsplit_once("::").map(|(ns, _)| ns);
    {
        for file in files {
            let text = std::fs::read_to_string(&file).expect("read a source");
            // `super::` climbs one module: from a file of the root folder or
            // a folder's `mod.rs` once to `crate::`, from `m/x.rs` twice,
            // from `m/x/y.rs` three times.
            let folders = file
                .strip_prefix(src)
                .map_or(0, |rel| rel.components().count() - 1);
            let is_mod = file.file_name().is_some_and(|n| n == "mod.rs");
            let up = "super::".repeat(folders + usize::from(!is_mod));
            let mut code = library(&text).replace(&up, "crate::");
            if let (Some(ns), false) = (namespace, path.is_dir()) {
                code = code.replace("super::", &format!("crate::{ns}::"));
            }
            out.entry(name.to_string()).or_default().push_str(&code);
        }
    }
}

/// The names a crate's `lib.rs` re-exports from its modules (`pub use
/// error::{Error, Result};` → `Error` and `Result` are `error`'s; a
/// `pub(crate) use` or plain `use` too), so that `crate::Error` counts as an
/// import of `error`.
fn reexports(src: &Path, known: &BTreeSet<String>) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(src.join("lib.rs")).expect("read lib.rs");
    let mut out = BTreeMap::new();
    for statement in library(&text).split(';') {
        let statement = statement.trim();
        let Some(path) = ["pub use ", "pub(crate) use ", "use "]
            .iter()
            .find_map(|p| statement.strip_prefix(p))
        else {
            continue;
        };
        let path = path
            .trim_start_matches("crate::")
            .trim_start_matches("self::");
        let Some(module) = module_of(path, known) else {
            continue;
        };
        let rest = &path[module.len()..];
        for name in top_level(rest.trim_start_matches("::")) {
            let name = name.rsplit("::").next().unwrap_or("").trim();
            let name = name.rsplit(" as ").next().unwrap_or(name).trim();
            if !name.is_empty() && !known.contains(name) {
                out.insert(name.to_string(), module.to_string());
            }
        }
    }
    out
}

/// The known module a path starts with: `m` of `m::x`, or `ns::m` of
/// `ns::m::x` when `ns` is a namespace folder ([`modules_of`]).
fn module_of<'a>(path: &'a str, known: &BTreeSet<String>) -> Option<&'a str> {
    let word_end = |s: &str| {
        s.find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(s.len())
    };
    let first = &path[..word_end(path)];
    if known.contains(first) {
        return Some(first);
    }
    let rest = path[first.len()..].strip_prefix("::")?;
    let end = first.len() + 2 + word_end(rest);
    known.contains(&path[..end]).then(|| &path[..end])
}

/// The top-level items of a `use` group: `{b, c::{d, e}}` → `b` and
/// `c::{d, e}`; a path without braces is one item.
fn top_level(tree: &str) -> Vec<&str> {
    let tree = tree.trim();
    let Some(inner) = tree.strip_prefix('{') else {
        return vec![tree];
    };
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&inner[start..i]);
                return items
                    .into_iter()
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .collect();
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
        .into_iter()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// The modules a module's code names: `crate::m`, `crate::{m, n::{..}}`,
/// `crate::ns::m` and `crate::ns::{m, ..}` for a module of a namespace
/// folder, and `crate::Name` for a name `lib.rs` re-exports from `m`.
fn imports(
    code: &str,
    known: &BTreeSet<String>,
    reexported: &BTreeMap<String, String>,
) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        for item in top_level(rest) {
            named(item, known, reexported, &mut found);
        }
    }
    found
}

/// Adds the module one item of a `use` group (or a path) names to `found`.
fn named(
    item: &str,
    known: &BTreeSet<String>,
    reexported: &BTreeMap<String, String>,
    found: &mut BTreeSet<String>,
) {
    if let Some(module) = module_of(item, known) {
        found.insert(module.to_string());
        return;
    }
    let first = item
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .next()
        .unwrap_or("");
    let namespace = format!("{first}::");
    let group = item[first.len()..].trim_start_matches("::");
    if group.starts_with('{') && known.iter().any(|m| m.starts_with(&namespace)) {
        for sub in top_level(group) {
            named(&format!("{namespace}{sub}"), known, reexported, found);
        }
    } else if let Some(module) = reexported.get(first) {
        found.insert(module.clone());
    }
}

/// A crate's modules with what each imports (itself left out).
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules_of(src);
    let known: BTreeSet<String> = modules.keys().cloned().collect();
    let reexported = reexports(src, &known);
    modules
        .iter()
        .map(|(name, code)| {
            let mut to = imports(code, &known, &reexported);
            to.remove(name);
            (name.clone(), to)
        })
        .collect()
}

#[test]
fn nothing_below_a_view_imports_one() {
    let graph = graph(&own_src());
    for view in VIEWS {
        assert!(graph.contains_key(*view), "no module {view}: update VIEWS");
    }
    let mut wrong = Vec::new();
    for (name, imports) in &graph {
        if VIEWS.contains(&name.as_str()) {
            continue;
        }
        for import in imports {
            if VIEWS.contains(&import.as_str()) {
                wrong.push(format!("{name} imports the view {import}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn no_module_imports_itself_through_others() {
    let src = own_src();
    // The re-exports are read (lib.rs declares a test module before them).
    let known: BTreeSet<String> = modules_of(&src).into_keys().collect();
    assert_eq!(
        reexports(&src, &known).get("Error").map(String::as_str),
        Some("error")
    );
    no_cycles(&graph(&src));
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
    let src = root.join("src");
    let known: BTreeSet<String> = modules_of(&src).into_keys().collect();
    assert_eq!(
        reexports(&src, &known).get("Build").map(String::as_str),
        Some("builder")
    );
    let graph = graph(&src);
    assert!(graph.len() > 10, "occ-build's modules: {:?}", graph.keys());
    no_cycles(&graph);
    // The folders show the layers: the stages (`stage/`) below the doors
    // (`pipeline`, `with_env`), importing only stages, leaves, the
    // configuration (`builder`) and the public error (`failure`, for a
    // public method such as `Build::resolved_archs`); the leaves (`leaf/`)
    // import only leaves.
    assert!(
        graph["pipeline"].contains("stage::compile") && graph["pipeline"].contains("leaf::job"),
        "the namespaces are not read: {:?}",
        graph["pipeline"]
    );
    let mut wrong = Vec::new();
    for (name, imports) in &graph {
        for import in imports {
            let leaf_up = name.starts_with("leaf::") && !import.starts_with("leaf::");
            let stage_up = name.starts_with("stage::")
                && !(import.starts_with("stage::")
                    || import.starts_with("leaf::")
                    || import == "builder"
                    || import == "failure");
            if leaf_up || stage_up {
                wrong.push(format!("{name} imports {import}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// occ-shell's modules (what occ-build and cargo-occ share) form no circle
/// either; checked as occ-build's are.
#[test]
fn occ_shell_imports_no_module_through_others() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../occ-shell");
    if !root.join("Cargo.toml").is_file() {
        return;
    }
    let graph = graph(&root.join("src"));
    assert!(graph.len() > 5, "occ-shell's modules: {:?}", graph.keys());
    no_cycles(&graph);
}

/// Panics naming the first import cycle of `graph`.
fn no_cycles(graph: &BTreeMap<String, BTreeSet<String>>) {
    if let Some(cycle) = cycle(graph) {
        panic!("an import cycle: {cycle}");
    }
}

/// The first import cycle of `graph`, as `a -> b -> a`.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<String> {
    // From each module, walk what it imports; reaching it again is a cycle.
    for start in graph.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<(String, Vec<String>)> = vec![(start.clone(), vec![start.clone()])];
        while let Some((at, path)) = stack.pop() {
            for next in graph.get(&at).into_iter().flatten() {
                let mut path = path.clone();
                path.push(next.clone());
                if next == start {
                    return Some(path.join(" -> "));
                }
                if seen.insert(next.clone()) {
                    stack.push((next.clone(), path));
                }
            }
        }
    }
    None
}

#[test]
fn the_checker_sees_a_cycle_through_a_nested_group_or_a_reexport() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("layers-self-test");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    let src = dir.as_path();
    let write = |name: &str, text: &str| std::fs::write(src.join(name), text).expect("write");
    write(
        "lib.rs",
        "mod a;\nmod b;\nmod c;\npub use c::{Thing, Other as O};\n",
    );
    write(
        "a.rs",
        "// crate::c in a comment is no import\nuse crate::{x::{Y, Z}, b};\nconst U: &str = \"http://crate::c\";\n",
    );
    write("b.rs", "use crate::Thing;\n");
    write("c.rs", "pub struct Thing;\npub struct Other;\n");
    let g = graph(src);
    assert_eq!(g["a"], ["b".to_string()].into(), "{g:?}");
    assert_eq!(g["b"], ["c".to_string()].into(), "{g:?}");
    assert_eq!(cycle(&g), None);
    write(
        "c.rs",
        "use crate::a;\npub struct Thing;\npub struct Other;\n",
    );
    let g = graph(src);
    assert!(
        cycle(&g).is_some_and(|c| c.contains("a -> b -> c -> a")
            || c.contains("b -> c -> a -> b")
            || c.contains("c -> a -> b -> c")),
        "{g:?}"
    );
    // The same cycle through `super::` in a root file, and through code
    // after a test module.
    write(
        "c.rs",
        "#[cfg(test)]\nmod tests {\n    use crate::b;\n}\nfn f() { super::a::g(); }\npub struct Thing;\npub struct Other;\n",
    );
    let g = graph(src);
    assert_eq!(g["c"], ["a".to_string()].into(), "{g:?}");
    assert!(cycle(&g).is_some(), "{g:?}");
    // And through a name lib.rs brings in with a `pub(crate) use` after a
    // test module declared without braces.
    write(
        "lib.rs",
        "mod a;\nmod b;\nmod c;\n#[cfg(test)]\nmod proptests;\npub(crate) use c::Thing;\n",
    );
    write("c.rs", "fn f() { crate::a::g(); }\npub struct Thing;\n");
    assert!(cycle(&graph(src)).is_some());
    // And from a file two folders down a module, by `super::` climbing to
    // the root.
    write("c.rs", "pub struct Thing;\n");
    assert_eq!(cycle(&graph(src)), None);
    std::fs::remove_file(src.join("c.rs")).expect("remove c.rs");
    std::fs::create_dir_all(src.join("c/deep")).expect("a nested folder");
    write("c/mod.rs", "mod deep;\npub struct Thing;\n");
    write("c/deep/mod.rs", "mod x;\n");
    write("c/deep/x.rs", "fn f() { super::super::super::a::g(); }\n");
    let g = graph(src);
    assert_eq!(g["c"], ["a".to_string()].into(), "{g:?}");
    assert!(cycle(&g).is_some(), "{g:?}");
}

#[test]
fn the_schema_is_one_module() {
    // Every type the manifest serializes is defined in manifest.rs (the
    // analyses re-export the ones they fill); the schema imports no
    // analysis and no view.
    let modules = modules();
    let allowed: BTreeSet<&str> = ["error", "compiler::names"].into();
    let schema_imports = &graph(&own_src())["schema::manifest"];
    let extra: Vec<&String> = schema_imports
        .iter()
        .filter(|m| !allowed.contains(m.as_str()))
        .collect();
    assert!(extra.is_empty(), "manifest imports {extra:?}");
    // Each with the analysis that fills it, which must not define it again.
    for (ty, filler) in [
        ("Param", "compiler::params"),
        ("SourceLines", "compiler::lines"),
        ("SpillSite", "compiler::lines"),
        ("PressurePoint", "compiler::lines"),
        ("Declared", "model::declared"),
        ("Launch", "model::declared"),
        ("Cliffs", "model::cliff"),
        ("Measured", "schema::measured"),
        ("DynamicSmem", "model::suggest"),
    ] {
        let defines = |code: &str| {
            code.contains(&format!("pub struct {ty} ")) || code.contains(&format!("pub enum {ty} "))
        };
        assert!(
            defines(&modules["schema::manifest"]),
            "manifest.rs does not define {ty}"
        );
        assert!(!defines(&modules[filler]), "{filler}.rs defines {ty} again");
    }
}
