//! trybuild cases of `#[launch_config]`: pass cases for every option (each
//! checks the baked values against occ-build's tuner run on the manifest's
//! resources) and compile-fail cases for every error, with reviewed
//! `.stderr` files (`TRYBUILD=overwrite` to bless).
//!
//! The manifest is real: `tests/ui/kernels/ui.cu` built with occ-build and
//! the installed nvcc for sm_80 and sm_90, with one launch declared the
//! way a build.rs does (`transpose_tiled` at 32x8). trybuild's generated
//! crate has no build script, so `OCC_MANIFEST` points the macro at it.
//! One test function,
//! because the environment variable is process-wide.
//!
//! `ui/launch/` are the typed launchers of `kernels.rs` (a wrong count, a
//! wrong scalar, a wrong element type, an integer for a pointer, a shared
//! borrow for a written buffer), included through `OCC_UI_KERNELS_RS`.

use occ_model::schema::manifest::Manifest;
use occ_tests::{build_env, nvcc, workspace_root};
use std::path::Path;

/// The 1-based line of `tests/ui/kernels/loop.cu` that carries `marker`.
fn fixture_line(text: &str, marker: &str) -> u32 {
    let i = text
        .lines()
        .position(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("no `{marker}` in tests/ui/kernels/loop.cu"));
    u32::try_from(i + 1).expect("a short file")
}

/// `loopspill` spills most at the line marked `occ-test: spills`, inside
/// the loop marked `occ-test: loop`, on both archs, every kernel whose
/// registers matter (and only those) has lines, and their sites add up to
/// ptxas's spill bytes: those two lines.
fn spill_lines_match_the_fixture(m: &Manifest) -> (u32, u32) {
    let root = workspace_root().join("tests/ui");
    let text = std::fs::read_to_string(root.join("kernels/loop.cu")).expect("read loop.cu");
    let (spills, loop_line) = (
        fixture_line(&text, "occ-test: spills"),
        fixture_line(&text, "occ-test: loop"),
    );
    for k in &m.kernels {
        for (arch, a) in &k.archs {
            // Lines exactly where the registers matter (stage 5½ locates
            // no other kernel).
            assert_eq!(
                a.lines.is_some(),
                occ_model::model::cliff::registers_matter(a),
                "{} on {arch}: {:?}",
                k.name,
                a.lines
            );
            let Some(lines) = &a.lines else { continue };
            let (stores, loads) = lines
                .spills
                .iter()
                .fold((0, 0), |(s, l), site| (s + site.stores, l + site.loads));
            assert_eq!(
                (stores, loads),
                (a.facts.spill_stores, a.facts.spill_loads),
                "{} on {arch}: the sites do not add up to ptxas's bytes: {lines:?}",
                k.name
            );
            let peak = lines.peak_pressure.as_ref().expect("a peak");
            assert!(
                peak.registers <= a.facts.registers,
                "{} on {arch}: {peak:?}",
                k.name
            );
            // A file of the crate is named relative to it (a toolkit
            // header absolutely).
            let crate_root = root.display().to_string();
            for file in lines.spills.iter().map(|s| &s.file).chain([&peak.file]) {
                assert!(
                    file.starts_with("kernels/")
                        || (file.starts_with('/') && !file.starts_with(&crate_root)),
                    "{} on {arch}: {file}",
                    k.name
                );
            }
        }
    }
    let kernel = m
        .kernels
        .iter()
        .find(|k| k.name == "loopspill")
        .expect("loopspill in the manifest");
    for (arch, a) in &kernel.archs {
        let worst = a
            .lines
            .as_ref()
            .and_then(|l| l.worst())
            .expect("a spill site");
        assert_eq!(
            (worst.file.as_str(), worst.line, worst.loop_line),
            ("kernels/loop.cu", spills, Some(loop_line)),
            "loopspill on {arch}"
        );
    }
    (spills, loop_line)
}

#[test]
fn ui() {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("occ-ui");
    let report = occ_build::Build::new()
        .root(workspace_root().join("tests/ui"))
        .file("kernels/ui.cu")
        .file("kernels/loop.cu")
        .archs(["sm_80", "sm_90"])
        .launch("transpose_tiled", occ_build::Launch::block_2d(32, 8))
        .nvcc(nvcc())
        .out_dir(&out)
        // Not the gate's subject: built without `CI` (and its lock rules).
        .try_compile_with(&build_env(&[]))
        .unwrap_or_else(|e| panic!("building the ui kernels failed: {e}"));
    let manifest = report.out_dir.join(occ_model::schema::manifest::FILE_NAME);
    assert!(manifest.is_file(), "{}", manifest.display());
    let (spills, loop_line) = spill_lines_match_the_fixture(report.manifest().expect("manifest"));

    // A cargo-run test has no OUT_DIR of its own, but be sure none leaks in.
    std::env::remove_var("OUT_DIR");
    std::env::set_var("OCC_MANIFEST", &manifest);
    {
        let t = trybuild::TestCases::new();
        t.pass("ui/pass/*.rs");
        t.compile_fail("ui/*.rs");
    }
    // The error trybuild checked names the fixture's lines.
    let stderr = std::fs::read_to_string(workspace_root().join("tests/ui/spill-line.stderr"))
        .expect("read spill-line.stderr");
    let at = format!("at kernels/loop.cu:{spills} (loop at :{loop_line})");
    assert!(
        stderr.contains(&at),
        "spill-line.stderr does not say `{at}`:\n{stderr}"
    );
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
        // Not the gate's subject: built without `CI` (and its lock rules).
        .try_compile_with(&build_env(&[]))
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
