//! The files occ has written read back and write the same bytes: the
//! golden `manifest.json` and `occ.lock` of `tests/tests/it/golden.rs`
//! and example-app's committed `occ.lock`. A change of a schema type that
//! moves, renames or drops a field shows here without nvcc. A test reads
//! the files; the model it checks does not.
#![allow(clippy::disallowed_methods)]

use occ_model::schema::lock::Lock;
use occ_model::schema::manifest::Manifest;
use std::path::{Path, PathBuf};

/// A file of the workspace, by its path from the workspace root.
fn workspace_file(path: &str) -> (PathBuf, String) {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
    let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()));
    (full, text)
}

/// The text of an insta snapshot, less its header.
fn snapshot(name: &str) -> (PathBuf, String) {
    let (path, text) = workspace_file(&format!("tests/tests/it/snapshots/{name}"));
    let body = text
        .splitn(3, "---\n")
        .nth(2)
        .unwrap_or_else(|| panic!("{}: no insta header", path.display()));
    (path, body.to_string())
}

#[test]
fn the_golden_manifest_reads_back_and_writes_the_same_bytes() {
    let (path, text) = snapshot("it__golden__manifest.json.snap");
    let manifest = Manifest::from_json(&text, &path).expect("the golden manifest");
    assert!(!manifest.kernels.is_empty());
    assert_eq!(manifest.to_json().trim_end(), text.trim_end());
}

#[test]
fn the_golden_lock_and_example_apps_lock_write_the_same_bytes() {
    for (path, text) in [
        snapshot("it__golden__occ.lock.new.snap"),
        workspace_file("example-app/occ.lock"),
    ] {
        let lock = Lock::from_text(&text, &path).expect("a lock occ wrote");
        assert!(!lock.kernels.is_empty(), "{}", path.display());
        assert_eq!(
            lock.to_text().trim_end(),
            text.trim_end(),
            "{}",
            path.display()
        );
    }
}
