//! `cargo occ report|check|bless|explain` as processes, on a real build made
//! with the real nvcc, found both by `--manifest` and the way cargo users
//! call it (the newest `target/*/build/<pkg>-*/out/occ`).

use crate::occ;
use occ_tests::{build_env, kernels_build, Scratch, ScratchCrate};
use std::path::{Path, PathBuf};

/// `light`, and `tiled` with 32 KB of static shared memory.
const KERNELS: &str = include_str!("../../../tests/fixtures/cu/gate_cli/k.cu");

/// Builds the kernels in-process; returns `$OUT_DIR/occ`.
fn build(s: &Scratch, out: &Path) -> occ_build::Result<PathBuf> {
    kernels_build(s.path(), out, ["sm_80", "sm_90"])
        .try_compile_with(&build_env(&[]))
        .map(|r| r.out_dir)
}

/// A package `cliuser` with `kernels/k.cu`, for the CLI to find its builds.
fn crate_with_kernels() -> ScratchCrate {
    ScratchCrate::new("cliuser")
        .file("src/lib.rs", "")
        .file("kernels/k.cu", KERNELS)
}

#[test]
fn report_formats_and_explain_read_the_manifest() {
    let s = crate_with_kernels();
    let occ_dir = build(&s, &s.path().join("out")).expect("build");
    let manifest_file = occ_dir.join("manifest.json");
    let m = occ_shell::files::read_manifest(&manifest_file).expect("manifest");
    let mf = manifest_file.to_str().expect("utf-8 path");

    let (code, table, err) = occ(s.path(), &["report", "--manifest", mf], &[], None).parts();
    assert_eq!(code, 0, "{err}");
    // One line per kernel x arch, each with its registers and best block.
    for k in &m.kernels {
        for (arch, a) in &k.archs {
            let line = table
                .lines()
                .find(|l| l.starts_with(&k.base_name) && l.contains(arch.as_str()))
                .unwrap_or_else(|| panic!("no line for {} {arch}\n{table}", k.base_name));
            let cells: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(cells[2], a.facts.registers.to_string(), "{line}");
            assert_eq!(cells[3], a.facts.static_smem.to_string(), "{line}");
            assert!(
                cells.contains(
                    &a.best
                        .as_ref()
                        .expect("a best launch")
                        .block_size
                        .to_string()
                        .as_str()
                ),
                "{line}"
            );
        }
    }

    let (code, md, _) = occ(
        s.path(),
        &["report", "--manifest", mf, "--format", "markdown"],
        &[],
        None,
    )
    .parts();
    assert_eq!(code, 0);
    assert!(md.contains("| kernel | arch |"), "{md}");
    // Every row in the full table, after the summary and the notable rows.
    let all = md
        .split("<details><summary>All ")
        .nth(1)
        .unwrap_or_default();
    assert_eq!(
        all.lines().filter(|l| l.starts_with("| `")).count(),
        4,
        "{md}"
    );

    let (code, js, _) = occ(
        s.path(),
        &["report", "--manifest", mf, "--format", "json"],
        &[],
        None,
    )
    .parts();
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&js).expect("json report");
    assert_eq!(v["schema"], 2);
    assert_eq!(v["rows"].as_array().map(Vec::len), Some(4));

    let html_file = s.path().join("r.html");
    let hf = html_file.to_str().expect("utf-8");
    let (code, _, err) = occ(
        s.path(),
        &["report", "--manifest", mf, "--format", "html", "-o", hf],
        &[],
        None,
    )
    .parts();
    assert_eq!(code, 0, "{err}");
    let html = std::fs::read_to_string(&html_file).expect("html");
    // Three inline charts per kernel x arch, nothing loaded from elsewhere.
    assert_eq!(html.matches("<svg").count(), 3 * 4);
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
    assert!(html.contains("vs registers, "));

    // explain: each limit's block count, the limiters marked; the tiled
    // kernel (32 KB static smem, at most 128 threads) is limited by shared
    // memory, so the what-if names the bytes to shed.
    let tiled = &m
        .kernels
        .iter()
        .find(|k| k.name == "tiled")
        .expect("tiled")
        .archs["sm_80"];
    let best = tiled.best.as_ref().expect("a best launch");
    assert_eq!(best.limiters, ["shared memory"], "test premise: {tiled:?}");
    let (code, out, err) = occ(
        s.path(),
        &["explain", "tiled", "--arch", "sm_80", "--manifest", mf],
        &[],
        None,
    )
    .parts();
    assert_eq!(code, 0, "{err}");
    let blocks = best.active_blocks_per_sm.to_string();
    for line in out.lines().map(str::trim_start) {
        for limit in ["warps", "registers", "shared memory", "blocks", "barriers"] {
            if let Some(rest) = line.strip_prefix(limit) {
                if rest.starts_with("  ") {
                    let is_limiter = best.limiters.iter().any(|l| l == limit);
                    assert_eq!(line.contains("limits occupancy"), is_limiter, "{line}");
                    if is_limiter {
                        assert_eq!(
                            rest.split_whitespace().next(),
                            Some(blocks.as_str()),
                            "{line}"
                        );
                    }
                }
            }
        }
    }
    assert!(out.contains("shared memory: use at most"), "{out}");
    // Unknown kernel: did-you-mean, non-zero exit.
    let (code, _, err) = occ(
        s.path(),
        &["explain", "tiledd", "--manifest", mf],
        &[],
        None,
    )
    .parts();
    assert_ne!(code, 0);
    assert!(err.contains("did you mean `tiled`"), "{err}");
}

#[test]
fn check_and_bless_find_the_newest_build_of_the_package() {
    let s = crate_with_kernels();
    let target = s.path().join("target");
    // Two builds of the package, as cargo lays them out; the newer one counts.
    let old = target.join("debug/build/cliuser-00000000000000aa/out");
    let new = target.join("debug/build/cliuser-00000000000000bb/out");
    let lookalike = target.join("debug/build/cliuser-extra-00000000000000cc/out");
    build(&s, &old).expect("first build");
    let t = target.to_str().expect("utf-8");
    let env = [("CARGO_TARGET_DIR", Some(t))];

    // No lock: check is an input error (2).
    let (code, _, err) = occ(s.path(), &["check"], &env, None).parts();
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cargo occ bless"), "{err}");
    // Bless refuses under CI.
    let (code, _, err) = occ(s.path(), &["bless"], &[env[0], ("CI", Some("true"))], None).parts();
    assert_eq!(code, 2, "{err}");
    assert!(!s.path().join("occ.lock").exists());
    let (code, out, err) = occ(s.path(), &["bless"], &env, None).parts();
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("wrote"), "{out}");
    assert_eq!(
        s.read("occ.lock"),
        std::fs::read_to_string(old.join("occ/occ.lock.new")).expect("candidate")
    );
    let (code, out, err) = occ(s.path(), &["check"], &env, None).parts();
    assert_eq!(code, 0, "{out}{err}");

    // The tile grows past what two blocks can share: a newer build regresses.
    s.write("kernels/k.cu", &KERNELS.replace("8192", "12288"));
    let e = build(&s, &new).expect_err("the build gate fails");
    let regressed_row = |text: &str| {
        text.lines()
            .any(|l| l.starts_with("  tiled ") && l.contains("sm_80") && l.contains("kernels/k.cu"))
    };
    assert!(
        e.to_string().contains("regression: occupancy down") && regressed_row(&e.to_string()),
        "{e}"
    );
    // An older-looking build of another package must not be picked.
    std::fs::create_dir_all(lookalike.join("occ")).expect("mkdir");
    let (code, out, err) = occ(s.path(), &["check"], &env, None).parts();
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("regression: occupancy down") && regressed_row(&out),
        "{out}"
    );
    let locked = s.read("occ.lock");
    // `--manifest` of the old build: no regression there.
    let old_manifest = old.join("occ/manifest.json");
    let (code, _, _) = occ(
        s.path(),
        &["check", "--manifest", old_manifest.to_str().expect("utf-8")],
        &env,
        None,
    )
    .parts();
    assert_eq!(code, 0);
    // Bless adopts the newest build; check passes again.
    let (code, _, err) = occ(s.path(), &["bless"], &env, None).parts();
    assert_eq!(code, 0, "{err}");
    assert_ne!(s.read("occ.lock"), locked);
    let (code, out, err) = occ(s.path(), &["check"], &env, None).parts();
    assert_eq!(code, 0, "{out}{err}");
    // Usage errors are 2.
    let (code, _, _) = occ(s.path(), &["check", "--bogus"], &env, None).parts();
    assert_eq!(code, 2);
}

#[test]
fn check_names_every_arch_and_kernel_it_could_not_check_and_is_not_ok() {
    let s = crate_with_kernels();
    let occ_dir = |out: &str, archs: [&str; 2]| {
        kernels_build(s.path(), &s.path().join(out), archs)
            .try_compile_with(&build_env(&[]))
            .expect("build")
            .out_dir
    };
    let first = occ_dir("out1", ["sm_80", "sm_90"]);
    let manifest = |dir: &Path| dir.join("manifest.json").display().to_string();
    let (code, _, err) = occ(
        s.path(),
        &["bless", "--manifest", &manifest(&first)],
        &[],
        None,
    )
    .parts();
    assert_eq!(code, 0, "{err}");
    // Another arch, and a kernel the lock has never seen.
    s.write(
        "kernels/extra.cu",
        "extern \"C\" __global__ void extra(float* p) { p[threadIdx.x] += 1.0f; }\n",
    );
    let second = occ_dir("out2", ["sm_80", "sm_86"]);
    let (code, out, err) = occ(
        s.path(),
        &["check", "--manifest", &manifest(&second)],
        &[],
        None,
    )
    .parts();
    assert_eq!(code, 1, "unchecked kernel x archs are not ok: {out}{err}");
    assert!(!out.contains("ok, no regression"), "{out}");
    assert!(
        out.contains("not ok:")
            && out.contains("no baseline for sm_86 (any kernel)")
            && out.contains("extra (sm_80)")
            && out.contains("sm_90 in the lock but not built")
            && out.contains("OCC_ARCHS=sm_80,sm_90")
            && out.contains("cargo occ bless"),
        "{out}"
    );
    // The SARIF log holds results at source lines: what was not checked
    // is said on stderr, and the exit status is the same.
    let args = [
        "check",
        "--manifest",
        &manifest(&second),
        "--format",
        "sarif",
    ];
    let (code, _, err) = occ(s.path(), &args, &[], None).parts();
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not ok:") && err.contains("sm_86"), "{err}");
}
