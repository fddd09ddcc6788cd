//! The gate's scope is explicit: a crate is another crate's dependency
//! (not gated) only where cargo put it, never because of a stray marker
//! file a copy carries; a dependency is never gated, with or without
//! nvcc, in-process or from git through cargo. That under `CI` every
//! kernel × arch the build makes has a baseline in `occ.lock` or the
//! build fails naming what has none, and that a crate without a lock
//! fails, is tested on nvcc 13.5's recorded runs in `replay.rs`.

use occ_tests::surroundings::{blessed_light_crate, without_nvcc, HEAVY, LIGHT};
use occ_tests::{build_env, build_of, text, Scratch, ScratchCrate};
use std::path::Path;

const ALPHA: &str = "extern \"C\" __global__ void alpha(float* p) { p[threadIdx.x] *= 2.0f; }\n";

/// The result of a build with `env`, and its warnings.
fn run(root: &Path, env: &[(&str, Option<&str>)]) -> (Result<(), String>, Vec<String>) {
    // A failed build's warnings are on its error, as its other directives.
    match build_of(root, "out", "kernels/*.cu", ["sm_80"]).try_compile_with(&build_env(env)) {
        Ok(report) => (Ok(()), report.directives().warnings().to_vec()),
        Err(e) => (Err(e.to_string()), e.directives().warnings().to_vec()),
    }
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

#[test]
fn a_dependency_is_never_gated_with_or_without_nvcc() {
    let s = blessed_light_crate();
    s.write("kernels/k.cu", HEAVY);
    let e = build_of(s.path(), "out", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&build_env(&[("CI", Some("true"))]))
        .expect_err("the crate's own CI build gates the heavier kernel");
    assert!(e.to_string().contains("scale"), "{e}");
    // The same crate where cargo unpacks a registry crate.
    let home = Scratch::new();
    let root = home
        .path()
        .join("registry/src/index.crates.io-0/light-0.1.0");
    for file in ["kernels/k.cu", "occ.lock"] {
        std::fs::create_dir_all(root.join(file).parent().expect("folder")).expect("mkdir");
        std::fs::copy(s.path().join(file), root.join(file)).expect("copy");
    }
    let ci = [
        ("CI", Some("true")),
        ("CARGO_HOME", Some(home.path().to_str().expect("utf-8"))),
    ];
    build_of(&root, "out", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&build_env(&ci))
        .expect("a dependency's lock never fails its dependent's build");
    let nowhere = s.path().join("no-toolkit");
    let r = build_of(&root, "out", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&build_env(&without_nvcc(&nowhere, &ci)))
        .expect("a dependency stands on its lock in its dependent's CI");
    assert_eq!(
        r.manifest().expect("manifest").origin,
        occ_model::schema::manifest::Origin::Lock
    );
}

/// The same through cargo: a crate whose kernel got heavier than its
/// committed lock, used from git by another crate, in that crate's CI.
#[test]
fn a_git_dependency_is_not_gated_in_its_dependents_ci() {
    let dep = ScratchCrate::new("occ-gitdep")
        .dep("occ")
        .build_dep("occ-build")
        .build_rs(
            "fn main() {\n    occ_build::Build::new().file(\"kernels/k.cu\").arch(\"sm_80\").compile();\n}\n",
        )
        .file("kernels/k.cu", LIGHT)
        .file(
            "src/lib.rs",
            "//! A kernel crate.\ninclude!(concat!(env!(\"OUT_DIR\"), \"/occ/kernels.rs\"));\n",
        );
    let mut bless = dep.cargo(&["build", "--quiet"]);
    occ_tests::succeed(bless.env("OCC_BLESS", "1"), "bless the dependency");
    dep.write("kernels/k.cu", HEAVY);
    let mut own_ci = dep.cargo(&["build", "--quiet"]);
    occ_tests::fail(own_ci.env("CI", "true"), "the dependency's own CI gates it");
    let git = |args: &[&str]| {
        occ_tests::succeed(
            std::process::Command::new("git")
                .args(args)
                .current_dir(dep.path())
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@t")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@t"),
            "git",
        )
    };
    dep.write(".gitignore", "target/\nout/\n");
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "kernels"]);
    let user = ScratchCrate::new("occ-gituser").dep_line(&format!(
        "occ-gitdep = {{ git = \"file://{}\" }}",
        dep.path().display()
    ));
    user.write(
        "src/main.rs",
        "fn main() {\n    println!(\"{}\", occ_gitdep::KERNELS.len());\n}\n",
    );
    for (what, env) in [
        ("with nvcc", vec![("CI", Some("true"))]),
        ("without nvcc", {
            let mut env = without_nvcc(user.path(), &[("CI", Some("true"))]);
            // cargo itself needs the real PATH and HOME (its registry).
            env.retain(|(k, _)| !matches!(*k, "PATH" | "HOME"));
            env
        }),
    ] {
        let out = user.output(&["build", "--quiet"], &env);
        assert!(
            out.status.success(),
            "the dependent's CI build {what} failed on its dependency's lock:\n{}",
            text(&out)
        );
    }
}
