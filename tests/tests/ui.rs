//! trybuild cases of `#[launch_config]`: pass cases for every option (each
//! checks the baked values against occ-build's tuner run on the manifest's
//! resources) and compile-fail cases for every error, with reviewed
//! `.stderr` files (`TRYBUILD=overwrite` to bless).
//!
//! The manifest is real: `tests/ui/kernels/ui.cu` built with occ-build and
//! the installed nvcc for sm_80 and sm_90. trybuild's generated crate has no
//! build script, so `OCC_MANIFEST` points the macro at it. One test function,
//! because the environment variable is process-wide.
//!
//! `ui/launch/` are the typed launchers of `kernels.rs` (a wrong count, a
//! wrong scalar, a wrong element type, an integer for a pointer, a shared
//! borrow for a written buffer), included through `OCC_UI_KERNELS_RS`.

use occ_tests::{nvcc, workspace_root};
use std::path::Path;

#[test]
fn ui() {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("occ-ui");
    let report = occ_build::Build::new()
        .root(workspace_root().join("tests/ui"))
        .file("kernels/ui.cu")
        .archs(["sm_80", "sm_90"])
        .nvcc(nvcc())
        .out_dir(&out)
        .try_compile()
        .unwrap_or_else(|e| panic!("building the ui kernels failed: {e}"));
    let manifest = report.out_dir.join(occ_build::manifest::FILE_NAME);
    assert!(manifest.is_file(), "{}", manifest.display());

    // A cargo-run test has no OUT_DIR of its own, but be sure none leaks in.
    std::env::remove_var("OUT_DIR");
    std::env::set_var("OCC_MANIFEST", &manifest);
    {
        let t = trybuild::TestCases::new();
        t.pass("ui/pass/*.rs");
        t.compile_fail("ui/*.rs");
    }
    let fixtures = workspace_root().join("tests/ui/other-manifests");
    for (file, case) in [
        ("schema-99.json", "newer-schema.rs"),
        ("schema-0.json", "older-schema.rs"),
    ] {
        std::env::set_var("OCC_MANIFEST", fixtures.join(file));
        let t = trybuild::TestCases::new();
        t.compile_fail(format!("ui/other-manifests/{case}"));
    }
    std::env::set_var("OCC_MANIFEST", fixtures.join("missing.json"));
    {
        let t = trybuild::TestCases::new();
        t.compile_fail("ui/other-manifests/override-missing.rs");
    }
    std::env::remove_var("OCC_MANIFEST");
    {
        let t = trybuild::TestCases::new();
        t.compile_fail("ui/other-manifests/no-build-script.rs");
    }

    // The typed launchers of kernels.rs (occ's `cudarc` feature): the same
    // kernels, embedding nothing (trybuild's crate has no OUT_DIR for blobs).
    // Inside the test crate (git-ignored), so that trybuild writes the
    // generated file's path as `$DIR/...` in the expected output.
    let launch_out = workspace_root().join("tests/ui/launch/out");
    let report = occ_build::Build::new()
        .root(workspace_root().join("tests/ui"))
        .file("kernels/ui.cu")
        .archs(["sm_80", "sm_90"])
        .embed(occ_build::Embed::Nothing)
        .nvcc(nvcc())
        .out_dir(&launch_out)
        .try_compile()
        .unwrap_or_else(|e| panic!("building the ui kernels failed: {e}"));
    let kernels_rs = report.out_dir.join("kernels.rs");
    assert!(kernels_rs.is_file(), "{}", kernels_rs.display());
    std::env::set_var("OCC_UI_KERNELS_RS", &kernels_rs);
    {
        let t = trybuild::TestCases::new();
        t.pass("ui/launch/pass/*.rs");
        t.compile_fail("ui/launch/*.rs");
    }
    std::env::remove_var("OCC_UI_KERNELS_RS");
}
