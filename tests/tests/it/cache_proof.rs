//! The job cache's key of record is what nvcc compiled (the preprocessed
//! text): what the direct check (stats, folders, probes) cannot see is seen
//! by a proof, which `OCC_CACHE=verify` and `CI` take for every hit; and a
//! header that shadows a toolkit header, or appears in a folder the
//! toolkit's profile adds, is seen even without one. Each test builds
//! in-process with the real nvcc, through a wrapper, a launcher or a
//! scratch toolkit, or with the toolkit's own headers, which a replay has
//! not; the cache's rules are in `occ-build/src/leaf/cache.rs`'s module
//! doc. That a header created in any folder the include search looks in
//! is seen, and that a touch or a new file beside a source compiles
//! nothing, is tested on nvcc 13.5's recorded runs in `replay.rs`.

use occ_build::Build;
use occ_tests::surroundings::{scratch_toolkit, script};
use occ_tests::{build_env, Scratch};

/// A kernel whose static shared memory is `N * 64` floats, `N` from
/// whatever header its `__has_include` of a macro finds (1 without one).
const MACRO_HAS_INCLUDE: &str = "#define OPT_H \"opt.cuh\"\n#if __has_include(OPT_H)\n\
    #include OPT_H\n#endif\n#ifndef N\n#define N 1\n#endif\n\
    extern \"C\" __global__ void k(float* p) {\n  __shared__ float t[N * 64];\n  \
    t[threadIdx.x % (N * 64)] = p[threadIdx.x];\n  __syncthreads();\n  \
    p[threadIdx.x] = t[(threadIdx.x * 7) % (N * 64)];\n}\n";

/// The kernel's static shared memory on sm_80, from a build with `env`.
fn smem(b: &Build, env: &[(&str, Option<&str>)]) -> (u32, usize, Vec<String>) {
    let report = b
        .try_compile_with(&build_env(env))
        .unwrap_or_else(|e| panic!("the build failed: {e}"));
    let manifest = report.manifest().expect("manifest");
    let smem = manifest.kernels[0].archs["sm_80"]
        .resources
        .facts
        .static_smem;
    let warnings = report.directives().warnings().to_vec();
    (smem, report.nvcc_runs, warnings)
}

#[test]
fn an_out_dir_outside_the_crate_root_keeps_the_direct_check_holding() {
    // A workspace member: the target folder beside the crate, named through
    // `..` as cargo may name it; nothing changed, so no proof runs either.
    let s = Scratch::new();
    s.write("member/kernels/k.cu", MACRO_HAS_INCLUDE);
    let log = s.path().join("nvcc.log");
    let nvcc = script(
        &s.path().join("nvcc-log"),
        &format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            occ_tests::nvcc().display()
        ),
    );
    let root = s.path().join("member");
    let b = occ_tests::kernels_build(&root, &root.join("../target/out"), ["sm_80"]);
    let env = [("NVCC", Some(nvcc.to_str().expect("utf-8")))];
    assert_eq!(smem(&b, &env).1, 1);
    let logged = || std::fs::read_to_string(&log).unwrap_or_default();
    let before = logged().lines().count();
    assert!(before > 0, "the wrapper logs nvcc's calls");
    assert_eq!(smem(&b, &env).1, 0);
    let proofs: Vec<String> = logged()
        .lines()
        .skip(before)
        .filter(|l| l.starts_with("-E "))
        .map(str::to_string)
        .collect();
    assert!(proofs.is_empty(), "an unchanged job was proven: {proofs:?}");
}

#[test]
fn a_header_that_shadows_a_toolkit_header_is_seen_by_quotes_and_angle_brackets() {
    for (include, dir) in [("\"cuda_fp16.h\"", "kernels"), ("<cuda_fp16.h>", "inc")] {
        let s = Scratch::new();
        s.write(
            "kernels/k.cu",
            &MACRO_HAS_INCLUDE.replace("#ifndef N", &format!("#include {include}\n#ifndef N")),
        );
        std::fs::create_dir_all(s.path().join("inc")).expect("inc");
        let mut b = s.build(["sm_80"]);
        b.include("inc");
        assert_eq!(smem(&b, &[]).0, 256, "{include}");
        s.write(
            &format!("{dir}/cuda_fp16.h"),
            "#pragma once\n#define N 3\n#include_next <cuda_fp16.h>\n",
        );
        assert_eq!(
            smem(&b, &[]).0,
            3 * 256,
            "{dir}/cuda_fp16.h shadows the toolkit's for #include {include}"
        );
    }
}

#[test]
fn a_variable_the_toolkits_profile_expands_is_part_of_every_jobs_key() {
    let s = Scratch::new();
    s.write("kernels/k.cu", MACRO_HAS_INCLUDE);
    s.write("one/opt.cuh", "#define N 1\n");
    s.write("two/opt.cuh", "#define N 2\n");
    let nvcc = scratch_toolkit(&s.path().join("toolkit"), &[]);
    let profile = s.path().join("toolkit/bin/nvcc.profile");
    let mut text = std::fs::read_to_string(&profile).expect("profile");
    text.push_str("INCLUDES        +=  \"-I$(OCC_TEST_INC)\" $(_SPACE_)\n");
    std::fs::write(&profile, text).expect("profile");
    let nvcc = nvcc.to_str().expect("utf-8");
    let one = s.path().join("one");
    let two = s.path().join("two");
    let env = |dir: &std::path::Path| {
        vec![
            ("NVCC", Some(nvcc.to_string())),
            ("OCC_TEST_INC", Some(dir.display().to_string())),
        ]
    };
    let run = |dir: &std::path::Path| {
        let env = env(dir);
        let env: Vec<(&str, Option<&str>)> = env.iter().map(|(k, v)| (*k, v.as_deref())).collect();
        let report = s
            .build(["sm_80"])
            .try_compile_with(&build_env(&env))
            .unwrap_or_else(|e| panic!("the build failed: {e}"));
        let smem = report.manifest().expect("manifest").kernels[0].archs["sm_80"]
            .resources
            .facts
            .static_smem;
        (smem, report.directives().clone())
    };
    let (first, directives) = run(&one);
    assert_eq!(first, 256);
    assert!(
        directives.rerun_if_env_changed().contains("OCC_TEST_INC"),
        "the profile's variable is watched: {:?}",
        directives.rerun_if_env_changed()
    );
    assert_eq!(run(&two).0, 2 * 256, "OCC_TEST_INC changed");
    // A header created in the folder the profile adds.
    let three = s.path().join("three");
    s.write("three/.keep", "");
    assert_eq!(run(&three).0, 256, "no opt.cuh in the profile's folder");
    s.write("three/opt.cuh", "#define N 5\n");
    assert_eq!(
        run(&three).0,
        5 * 256,
        "a header created in the profile's folder"
    );
}

/// An `NVCC` wrapper that adds `-DN=<the contents of n.txt>`: a setting
/// from outside every file nvcc reads, which no stat covers (the cache's
/// module doc assumes a wrapper picks its flags the same way each run).
fn wrapper(s: &Scratch) -> String {
    let n = s.path().join("n.txt");
    let path = script(
        &s.path().join("nvcc-wrapper"),
        &format!(
            "#!/bin/sh\nexec '{}' \"$@\" -DN=$(cat '{}')\n",
            occ_tests::nvcc().display(),
            n.display()
        ),
    );
    path.display().to_string()
}

#[test]
fn verify_proves_every_hit_and_says_which_assumption_failed() {
    let s = Scratch::new();
    s.write(
        "kernels/k.cu",
        &MACRO_HAS_INCLUDE.replace("#ifndef N\n#define N 1\n#endif\n", ""),
    );
    s.write("n.txt", "1");
    let nvcc = wrapper(&s);
    let b = s.build(["sm_80"]);
    let direct = [("NVCC", Some(nvcc.as_str()))];
    // Blessed, so that a CI build has a baseline to check.
    let bless = [direct[0], ("OCC_BLESS", Some("1"))];
    assert_eq!(smem(&b, &bless).0, 256);
    s.write("n.txt", "2");
    // What the direct check assumes does not hold: it trusts the result.
    let (stale, runs, _) = smem(&b, &direct);
    assert_eq!(
        (stale, runs),
        (256, 0),
        "the direct check vouches for the old result"
    );
    for (n, proven) in [
        (2, ("OCC_CACHE", Some("verify"))),
        (3, ("CI", Some("true"))),
    ] {
        s.write("n.txt", &n.to_string());
        let (smem, runs, warnings) = smem(&b, &[direct[0], proven]);
        assert_eq!(
            (smem, runs),
            (n * 256, 1),
            "{proven:?} proves the hit and compiles again"
        );
        assert!(
            warnings.iter().any(|w| {
                w.contains("the cached result of kernels/k.cu for sm_80 did not hold")
                    && w.contains("preprocess differently")
            }),
            "{proven:?}: one warning names the job and the failed assumption: {warnings:?}"
        );
    }
}

#[test]
fn an_unknown_occ_cache_value_is_one_clear_error() {
    let s = Scratch::new();
    s.write("kernels/k.cu", MACRO_HAS_INCLUDE);
    let err = s
        .build(["sm_80"])
        .try_compile_with(&build_env(&[("OCC_CACHE", Some("always"))]))
        .expect_err("OCC_CACHE=always");
    let text = err.to_string();
    assert!(
        text.contains("OCC_CACHE is `always`") && text.contains("`verify`"),
        "{text}"
    );
}

#[test]
fn a_launcher_that_hides_nvccs_stderr_fails_naming_the_launcher_not_an_empty_table() {
    let s = Scratch::new();
    s.write("kernels/k.cu", MACRO_HAS_INCLUDE);
    let quiet = script(
        &s.path().join("quiet.sh"),
        "#!/bin/sh\nexec \"$@\" 2>/dev/null\n",
    );
    let err = s
        .build(["sm_80"])
        .try_compile_with(&build_env(&[(
            "OCC_NVCC_LAUNCHER",
            Some(quiet.to_str().expect("utf-8")),
        )]))
        .expect_err("a launcher that hid the ptxas log");
    let text = err.to_string();
    assert!(
        text.contains("the ptxas log of kernels/k.cu for sm_80 does not account for its kernels")
            && text.contains("(k)")
            && text.contains("OCC_NVCC_LAUNCHER"),
        "{text}"
    );
}
