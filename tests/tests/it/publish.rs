//! What crates.io and docs.rs need from the workspace, checked from `cargo
//! metadata` and `cargo package --list` (no build, a few seconds):
//!
//! - exactly occ-model, occ-shell, occ-build, occ-macros, occ and cargo-occ
//!   are publishable;
//!   every other member says `publish = false`;
//! - each publishable crate has a description, license, repository, readme
//!   (a file in the package that links to the repository), keywords and
//!   categories within crates.io's limits, the MSRV, and its dependencies on
//!   the other crates carry a version;
//! - each library crate builds its docs on one target on docs.rs;
//! - each package holds its README and both license files, and cargo-occ's
//!   holds none of its tests (they need the unpublished occ-tests);
//! - a crate built with occ-build (example-app) packages its `occ.lock` and
//!   kernels, which docs.rs and users' builds need;
//! - every `[profile.*.package.<name>]` of the root manifest names a crate
//!   that `cargo install --path cargo-occ` builds, so the install prints no
//!   "did not match any packages" warning; the oracle's own crate is
//!   optimised from `.cargo/config.toml` instead.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

const PUBLISHED: [&str; 6] = [
    "cargo-occ",
    "occ",
    "occ-build",
    "occ-macros",
    "occ-model",
    "occ-shell",
];

/// crates.io's category slugs that occ uses; a typo is rejected at publish.
const CATEGORIES: [&str; 6] = [
    "command-line-utilities",
    "development-tools",
    "development-tools::build-utils",
    "development-tools::cargo-plugins",
    "hardware-support",
    "parser-implementations",
];

fn cargo(args: &[&str]) -> String {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(args)
        .current_dir(occ_tests::workspace_root())
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "cargo {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("cargo prints UTF-8")
}

fn metadata(no_deps: bool) -> Value {
    let mut args = vec!["metadata", "--format-version", "1", "--locked"];
    if no_deps {
        args.push("--no-deps");
    }
    serde_json::from_str(&cargo(&args)).expect("cargo metadata prints JSON")
}

/// The workspace members by name.
fn members(meta: &Value) -> BTreeMap<String, Value> {
    meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| (p["name"].as_str().expect("name").to_string(), p.clone()))
        .collect()
}

fn str_list(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn manifest_dir(pkg: &Value) -> PathBuf {
    Path::new(pkg["manifest_path"].as_str().expect("manifest_path"))
        .parent()
        .expect("manifest folder")
        .to_path_buf()
}

#[test]
fn exactly_the_four_crates_are_publishable() {
    let meta = metadata(true);
    let publishable: BTreeSet<&str> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        // `publish` is null for "any registry", `[]` for `publish = false`.
        .filter(|p| p["publish"].is_null())
        .map(|p| p["name"].as_str().expect("name"))
        .collect();
    assert_eq!(publishable, BTreeSet::from(PUBLISHED));
    let members = members(&meta);
    for name in ["example-app", "occ-tests"] {
        assert_eq!(
            members[name]["publish"],
            serde_json::json!([]),
            "{name} must say publish = false"
        );
    }
}

#[test]
fn publishable_crates_have_crates_io_metadata() {
    let meta = metadata(true);
    let members = members(&meta);
    let repo = "https://github.com/occ-rs/occ";
    let mut problems = Vec::new();
    for name in PUBLISHED {
        let pkg = &members[name];
        let mut problem = |what: String| problems.push(format!("{name}: {what}"));
        for field in [
            "description",
            "license",
            "repository",
            "readme",
            "rust_version",
        ] {
            if pkg[field].as_str().is_none_or(str::is_empty) {
                problem(format!("no {field}"));
            }
        }
        if pkg["repository"].as_str() != Some(repo) {
            problem(format!("repository is {}, not {repo}", pkg["repository"]));
        }
        let keywords = str_list(&pkg["keywords"]);
        if keywords.is_empty() || keywords.len() > 5 {
            problem(format!(
                "{} keywords (crates.io takes 1 to 5)",
                keywords.len()
            ));
        }
        for k in &keywords {
            let ok = k.len() <= 20
                && k.starts_with(|c: char| c.is_ascii_alphabetic())
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+'));
            if !ok {
                problem(format!("keyword {k:?} is not one crates.io takes"));
            }
        }
        let categories = str_list(&pkg["categories"]);
        if categories.is_empty() || categories.len() > 5 {
            problem(format!("{} categories (1 to 5)", categories.len()));
        }
        for c in &categories {
            if !CATEGORIES.contains(c) {
                problem(format!("category {c:?} is not in the known list"));
            }
        }
        if let Some(readme) = pkg["readme"].as_str() {
            let path = manifest_dir(pkg).join(readme);
            match std::fs::read_to_string(&path) {
                Ok(text) => {
                    if !text.starts_with(&format!("# {name}\n")) {
                        problem(format!("{readme} does not open with `# {name}`"));
                    }
                    if !text.contains(repo) {
                        problem(format!("{readme} does not link to {repo}"));
                    }
                }
                Err(e) => problem(format!("cannot read {}: {e}", path.display())),
            }
        }
        let is_lib = pkg["targets"].as_array().is_some_and(|targets| {
            targets.iter().any(|t| {
                str_list(&t["kind"])
                    .iter()
                    .any(|k| *k == "lib" || *k == "proc-macro")
            })
        });
        if is_lib {
            let targets = str_list(&pkg["metadata"]["docs"]["rs"]["targets"]);
            if targets != ["x86_64-unknown-linux-gnu"] {
                problem(format!(
                    "package.metadata.docs.rs.targets is {targets:?}, not one target"
                ));
            }
        }
        for dep in pkg["dependencies"].as_array().expect("dependencies") {
            let dep_name = dep["name"].as_str().expect("dependency name");
            let normal = dep["kind"].is_null() || dep["kind"] == "build";
            if normal && PUBLISHED.contains(&dep_name) && dep["req"] == "*" {
                problem(format!("its dependency {dep_name} has no version"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `cargo package --list` for a member: the files its package would hold.
fn package_list(name: &str) -> BTreeSet<String> {
    cargo(&["package", "--list", "--allow-dirty", "--locked", "-p", name])
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn packages_hold_readme_and_licenses() {
    let mut problems = Vec::new();
    for name in PUBLISHED {
        let files = package_list(name);
        for file in ["README.md", "LICENSE-MIT", "LICENSE-APACHE", "Cargo.toml"] {
            if !files.contains(file) {
                problems.push(format!("{name}: the package has no {file}"));
            }
        }
        if name == "cargo-occ" {
            if let Some(test) = files.iter().find(|f| f.starts_with("tests/")) {
                problems.push(format!("cargo-occ: the package holds {test}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_crate_built_with_occ_packages_its_lock_and_kernels() {
    let files = package_list("example-app");
    assert!(files.contains("occ.lock"), "no occ.lock in {files:?}");
    assert!(files.contains("build.rs"), "no build.rs in {files:?}");
    assert!(
        files
            .iter()
            .any(|f| f.starts_with("kernels/") && f.ends_with(".cu")),
        "no kernels/*.cu in {files:?}"
    );
}

/// The names in `[profile.<p>.package.<name>]` headers of the root manifest.
fn profile_package_specs(manifest: &str) -> Vec<String> {
    manifest
        .lines()
        .filter_map(|line| {
            let header = line.trim().strip_prefix("[profile.")?.strip_suffix(']')?;
            let (_, spec) = header.split_once(".package.")?;
            Some(spec.trim_matches('"').to_string())
        })
        .collect()
}

#[test]
fn profile_overrides_name_crates_that_cargo_install_builds() {
    let root = occ_tests::workspace_root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("root Cargo.toml");
    let specs = profile_package_specs(&manifest);
    assert!(
        specs.iter().any(|s| s == "occ-model"),
        "the oracle's opt-level override for occ-model is gone: {specs:?}"
    );
    // The oracle's own crate is optimised from config, where cargo does not
    // check overrides against the packages being built.
    let config = std::fs::read_to_string(root.join(".cargo/config.toml")).unwrap_or_default();
    assert!(
        profile_package_specs(&config)
            .iter()
            .any(|s| s == "occ-oracle"),
        ".cargo/config.toml no longer optimises occ-oracle: the oracle test gets 2.5x slower"
    );
    // What `cargo install --path cargo-occ` resolves: cargo-occ and its
    // normal and build dependencies, never dev-dependencies.
    let meta = metadata(false);
    let nodes: BTreeMap<&str, &Value> = meta["resolve"]["nodes"]
        .as_array()
        .expect("resolve nodes")
        .iter()
        .map(|n| (n["id"].as_str().expect("id"), n))
        .collect();
    let name_of: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| {
            (
                p["id"].as_str().expect("id"),
                p["name"].as_str().expect("name"),
            )
        })
        .collect();
    let start = name_of
        .iter()
        .find(|(_, n)| **n == "cargo-occ")
        .map(|(id, _)| *id)
        .expect("cargo-occ in the resolve");
    let mut seen = BTreeSet::from([start]);
    let mut todo = vec![start];
    while let Some(id) = todo.pop() {
        for dep in nodes[id]["deps"].as_array().expect("deps") {
            let installed = dep["dep_kinds"]
                .as_array()
                .expect("dep_kinds")
                .iter()
                .any(|k| k["kind"].is_null() || k["kind"] == "build");
            let dep_id = dep["pkg"].as_str().expect("pkg");
            if installed && seen.insert(dep_id) {
                todo.push(dep_id);
            }
        }
    }
    let installed: BTreeSet<&str> = seen.iter().map(|id| name_of[id]).collect();
    let stray: Vec<&String> = specs
        .iter()
        .filter(|s| *s != "*" && !installed.contains(s.as_str()))
        .collect();
    assert!(
        stray.is_empty(),
        "`cargo install --path cargo-occ` would warn that the profile package specs {stray:?} \
         match no package; it builds only {installed:?}"
    );
}
