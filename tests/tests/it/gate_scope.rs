//! The gate's scope is explicit: under `CI` every kernel × arch the build
//! makes has a baseline in `occ.lock` or the build fails naming what has
//! none, a crate without a lock fails, and a crate is another crate's
//! dependency (not gated) only where cargo put it, never because of a stray
//! marker file a copy carries.

use occ_build::Build;
use occ_tests::{build_env, Scratch};
use std::path::Path;

const ALPHA: &str = "extern \"C\" __global__ void alpha(float* p) { p[threadIdx.x] *= 2.0f; }\n";
const BETA: &str = "extern \"C\" __global__ void beta(int* p) { p[threadIdx.x] += 1; }\n";

fn build(root: &Path) -> Build {
    occ_tests::kernels_build(root, &root.join("out"), ["sm_80"])
}

/// A crate with `alpha`, blessed for sm_80.
fn blessed() -> Scratch {
    let s = Scratch::new();
    s.write("kernels/a.cu", ALPHA);
    build(s.path())
        .try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]))
        .expect("bless");
    s
}

/// The result of a build with `env`, and its warnings.
fn run(root: &Path, env: &[(&str, Option<&str>)]) -> (Result<(), String>, Vec<String>) {
    // A failed build's warnings are on its error, as its other directives.
    match build(root).try_compile_with(&build_env(env)) {
        Ok(report) => (Ok(()), report.directives().warnings().to_vec()),
        Err(e) => (Err(e.to_string()), e.directives().warnings().to_vec()),
    }
}

#[test]
fn under_ci_an_arch_the_lock_does_not_record_fails_naming_it() {
    let s = blessed();
    let archs = ("OCC_ARCHS", Some("sm_80,sm_86"));
    let (result, _) = run(s.path(), &[archs]);
    assert!(
        result.is_ok(),
        "outside CI a new arch is a warning: {result:?}"
    );
    let err = run(s.path(), &[archs, ("CI", Some("true"))])
        .0
        .expect_err("CI with an arch occ.lock has no baseline for");
    assert!(
        err.contains("no baseline for sm_86 (any kernel)")
            && err.contains("cargo occ bless")
            && err.contains("OCC_ARCHS=sm_80,sm_86"),
        "{err}"
    );
    // The lock's own arch alone is checked and passes.
    let (result, _) = run(s.path(), &[("CI", Some("true"))]);
    assert!(result.is_ok(), "{result:?}");
}

#[test]
fn under_ci_a_kernel_the_lock_does_not_record_fails_naming_it() {
    let s = blessed();
    s.write("kernels/b.cu", BETA);
    let err = run(s.path(), &[("CI", Some("true"))])
        .0
        .expect_err("CI with a kernel not blessed");
    assert!(
        err.contains("no baseline for 1 new kernel: beta (sm_80)"),
        "{err}"
    );
}

#[test]
fn under_ci_a_crate_without_a_lock_fails_and_outside_ci_it_warns() {
    let s = Scratch::new();
    s.write("kernels/a.cu", ALPHA);
    let (result, warnings) = run(s.path(), &[]);
    assert!(result.is_ok(), "{result:?}");
    assert!(
        warnings.iter().any(|w| w.contains("no occ.lock yet")),
        "{warnings:?}"
    );
    let err = run(s.path(), &[("CI", Some("true"))])
        .0
        .expect_err("CI without a lock");
    assert!(err.contains("no occ.lock, and CI is set"), "{err}");
}

#[test]
fn a_stray_cargo_marker_does_not_make_a_crate_a_dependency() {
    // A fork copied out of cargo's registry carries `.cargo-ok` and a
    // vendored copy `.cargo-checksum.json`, here and in the folder above.
    let s = Scratch::new();
    s.write(".cargo-ok", "");
    s.write("fork/.cargo-ok", "{\"v\":1}");
    s.write(
        "fork/.cargo-checksum.json",
        "{\"files\":{},\"package\":null}",
    );
    s.write("fork/kernels/a.cu", ALPHA);
    let err = run(&s.path().join("fork"), &[("CI", Some("true"))])
        .0
        .expect_err("the fork's own CI is gated");
    assert!(err.contains("no occ.lock, and CI is set"), "{err}");
}

#[test]
fn a_crate_where_cargo_unpacks_registry_crates_is_a_dependency_and_says_so_under_ci() {
    let s = Scratch::new();
    let home = s.path().join("cargo-home");
    let root = home.join("registry/src/index.crates.io-1949cf8c6b5b557f/dep-0.1.0");
    std::fs::create_dir_all(root.join("kernels")).expect("registry folder");
    std::fs::write(root.join("kernels/a.cu"), ALPHA).expect("write");
    let home = home.to_str().expect("utf-8");
    let (result, warnings) = run(&root, &[("CI", Some("true")), ("CARGO_HOME", Some(home))]);
    assert!(result.is_ok(), "a dependency is never gated: {result:?}");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("is built as a dependency (unpacked by cargo from a registry")),
        "{warnings:?}"
    );
}

#[test]
fn a_crate_in_a_folder_a_cargo_config_names_as_a_directory_source_is_a_dependency() {
    let s = Scratch::new();
    s.write(
        ".cargo/config.toml",
        "[source.crates-io]\nreplace-with = \"vendored-sources\"\n\n\
         [source.vendored-sources]\ndirectory = \"vendor\"\n",
    );
    s.write("vendor/dep/kernels/a.cu", ALPHA);
    s.write("elsewhere/dep/kernels/a.cu", ALPHA);
    let ci = [("CI", Some("true"))];
    let (result, warnings) = run(&s.path().join("vendor/dep"), &ci);
    assert!(result.is_ok(), "{result:?}");
    assert!(
        warnings.iter().any(|w| w.contains("vendored:")),
        "{warnings:?}"
    );
    // The same crate outside that folder is its own.
    let (result, _) = run(&s.path().join("elsewhere/dep"), &ci);
    assert!(result.is_err(), "a copy elsewhere is gated");
}
