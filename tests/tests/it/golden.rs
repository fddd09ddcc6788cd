//! Golden files of what a build writes: `kernels.rs`, `manifest.json` and the
//! candidate lock `occ.lock.new`, from an in-process build of
//! `tests/fixtures/cu/determinism` for sm_80 and sm_90 with the nvcc that
//! `scripts/cuda-toolkit` pins (13.5). The snapshots are in
//! `tests/tests/snapshots/`; tests/README.md says how to bless them.

use occ_tests::{build_env, Scratch};

/// The build's environment: the package name fixed (it is in every file),
/// the host compiler nvcc picks.
fn env() -> occ_shell::Env {
    build_env(&[("CARGO_PKG_NAME", Some("golden")), ("NVCC_CCBIN", None)])
}

#[test]
fn kernels_rs_manifest_and_lock_match_their_golden_files() {
    let s = Scratch::new();
    s.copy_cu("determinism", "kernels");
    let report = s
        .build(["sm_80", "sm_90"])
        .try_compile_with(&env())
        .unwrap_or_else(|e| panic!("build: {e}"));
    assert_eq!(report.manifest().expect("manifest").kernels.len(), 5);
    let scratch = s.path().display().to_string();
    // The names users and the CLI know them by (not occ-build's constants,
    // so a rename there shows here).
    for file in ["kernels.rs", "manifest.json", "occ.lock.new"] {
        let text = s.read(&format!("out/occ/{file}"));
        assert!(
            !text.contains(&scratch),
            "{file} names the build folder {scratch}:\n{text}"
        );
        insta::assert_snapshot!(file, text);
    }
}
