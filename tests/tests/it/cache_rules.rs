//! The job cache's rules, seen from outside: a warm build must equal a cold
//! build of the same inputs. Each test makes a warm build stale the way a user (or a
//! killed build) would, then compares it with a cold build into an empty
//! `OUT_DIR`: `manifest.json`, `kernels.rs` and every device-code file, byte
//! for byte.

use occ_build::Build;
use occ_tests::surroundings::{
    assert_same_outputs, manifest_registers, printed_registers, reswap, scratch_toolkit, script,
    script_ok, BuildScript, HEAVY, LIGHT, SWITCHED,
};
use occ_tests::{build_env, build_of, text, Scratch, ScratchCrate};
use std::path::{Path, PathBuf};

fn occ_dir(s: &Scratch, out: &str) -> PathBuf {
    s.path().join(out).join("occ")
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn a_source_saved_while_nvcc_runs_is_not_cached_under_the_new_bytes() {
    let s = Scratch::new();
    s.write("kernels/k.cu", LIGHT);
    let heavy = s.write("heavy.cu.txt", HEAVY);
    let saved = s.path().join("saved");
    // The user's editor saves the new version while nvcc compiles the old
    // one: after nvcc has read it, before occ looks at the source again.
    let launcher = script(
        &s.path().join("save-during-nvcc.sh"),
        &format!(
            "\"$@\"\nrc=$?\nif [ ! -e '{saved}' ]; then cp '{heavy}' kernels/k.cu; touch '{saved}'; fi\nexit $rc",
            saved = saved.display(),
            heavy = heavy.display()
        ),
    );
    let env = build_env(&[("OCC_NVCC_LAUNCHER", Some(path_str(&launcher)))]);
    build_of(s.path(), "out", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&env)
        .expect("first build");
    assert!(saved.exists(), "the launcher did not save the new source");
    build_of(s.path(), "out", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&env)
        .expect("warm build");
    build_of(s.path(), "cold", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&env)
        .expect("cold build");
    assert_same_outputs(
        &occ_dir(&s, "out"),
        &occ_dir(&s, "cold"),
        "k.cu saved while nvcc ran",
    );
}

/// A scale crate whose kernel is heavy when `HEAVY_KERNEL` is defined.
fn switched_crate(name: &str) -> ScratchCrate {
    let s = ScratchCrate::scale(name, ".file(\"kernels/k.cu\").arch(\"sm_80\")");
    s.write("kernels/k.cu", SWITCHED);
    s.write("kernels/common.cuh", "#pragma once\n");
    s
}

/// `cargo run` with no nvcc variable, then with `var=value`, then without
/// again: the printed registers must follow (light, heavy, light).
fn nvcc_variable_is_honoured(name: &str, var: &str, value: &str) {
    let s = switched_crate(name);
    let light = printed_registers(&s.output(&["run", "-q"], &[]));
    let with = printed_registers(&s.output(&["run", "-q"], &[(var, Some(value))]));
    assert!(
        with > light,
        "{var}={value} (which nvcc reads) was ignored: {with} registers with it, {light} without; \
         cargo must rerun the build script and occ must not serve the cached job"
    );
    let back = printed_registers(&s.output(&["run", "-q"], &[]));
    assert_eq!(back, light, "unsetting {var} was ignored");
}

#[test]
fn a_change_of_nvcc_prepend_flags_rebuilds() {
    nvcc_variable_is_honoured("around-prepend", "NVCC_PREPEND_FLAGS", "-DHEAVY_KERNEL");
}

#[test]
fn a_change_of_nvcc_ccbin_rebuilds() {
    // A host compiler whose preprocessor defines HEAVY_KERNEL (nvcc runs the
    // host preprocessor for device code too).
    let dir = Scratch::new();
    let gxx = script(
        &dir.path().join("heavy-g++"),
        "exec g++ -DHEAVY_KERNEL \"$@\"",
    );
    nvcc_variable_is_honoured("around-ccbin", "NVCC_CCBIN", path_str(&gxx));
}

/// `kernels/k.cu` includes `common.cuh`, found in `inc` today.
fn shadow_scratch(includes: &[&str]) -> (Scratch, Build) {
    let s = Scratch::new();
    s.write("kernels/k.cu", SWITCHED);
    for dir in includes {
        std::fs::create_dir_all(s.path().join(dir)).expect("create include folder");
    }
    s.write(
        &format!("{}/common.cuh", includes.last().expect("an include folder")),
        "#pragma once\n",
    );
    let mut b = build_of(s.path(), "out", "kernels/k.cu", ["sm_80"]);
    for dir in includes {
        b.include(s.path().join(dir));
    }
    (s, b)
}

#[test]
fn a_shadowing_header_next_to_the_source_is_seen() {
    let (s, b) = shadow_scratch(&["inc"]);
    let env = build_env(&[]);
    b.try_compile_with(&env).expect("first build");
    s.write(
        "kernels/common.cuh",
        "#pragma once\n#define HEAVY_KERNEL 1\n",
    );
    b.try_compile_with(&env).expect("warm build");
    b.clone()
        .out_dir(s.path().join("cold"))
        .try_compile_with(&env)
        .expect("cold build");
    assert_same_outputs(
        &occ_dir(&s, "out"),
        &occ_dir(&s, "cold"),
        "kernels/common.cuh added, shadowing inc/common.cuh",
    );
}

#[test]
fn a_shadowing_header_in_an_earlier_include_folder_is_seen() {
    let (s, b) = shadow_scratch(&["inc1", "inc2"]);
    let env = build_env(&[]);
    b.try_compile_with(&env).expect("first build");
    s.write("inc1/common.cuh", "#pragma once\n#define HEAVY_KERNEL 1\n");
    b.try_compile_with(&env).expect("warm build");
    b.clone()
        .out_dir(s.path().join("cold"))
        .try_compile_with(&env)
        .expect("cold build");
    assert_same_outputs(
        &occ_dir(&s, "out"),
        &occ_dir(&s, "cold"),
        "inc1/common.cuh added, shadowing inc2/common.cuh",
    );
}

/// A header edit that keeps the file's size reruns its includer: a cache
/// that judged headers by size would miss it (the differential test's
/// sample meets that only late in its walk: BENCHMARKS.md, section 11).
#[test]
fn a_header_edit_of_the_same_size_is_seen() {
    let s = Scratch::new();
    s.write("kernels/k.cu", SWITCHED);
    let light = "#define LIGHT_KERNEL\n";
    let heavy = "#define HEAVY_KERNEL\n";
    assert_eq!(light.len(), heavy.len());
    s.write("kernels/common.cuh", light);
    let env = build_env(&[]);
    build_of(s.path(), "warm", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&env)
        .expect("first build");
    let before = manifest_registers(&occ_dir(&s, "warm"), "sm_80");
    s.write("kernels/common.cuh", heavy);
    build_of(s.path(), "warm", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&env)
        .expect("warm build");
    build_of(s.path(), "cold", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&env)
        .expect("cold build");
    assert_same_outputs(
        &occ_dir(&s, "warm"),
        &occ_dir(&s, "cold"),
        "a header edited to the same size",
    );
    let after = manifest_registers(&occ_dir(&s, "warm"), "sm_80");
    assert!(
        after > before,
        "HEAVY_KERNEL must cost registers: {before} -> {after}"
    );
}

#[test]
fn cargo_reruns_for_a_header_added_to_an_earlier_include_folder() {
    let s = ScratchCrate::scale(
        "around-shadow-inc",
        ".file(\"kernels/k.cu\").include(\"inc1\").include(\"inc2\").arch(\"sm_80\")",
    );
    s.write("kernels/k.cu", SWITCHED);
    std::fs::create_dir_all(s.path().join("inc1")).expect("inc1");
    s.write("inc2/common.cuh", "#pragma once\n");
    let light = printed_registers(&s.output(&["run", "-q"], &[]));
    s.write("inc1/common.cuh", "#pragma once\n#define HEAVY_KERNEL 1\n");
    let after = printed_registers(&s.output(&["run", "-q"], &[]));
    assert!(
        after > light,
        "inc1/common.cuh now shadows inc2/common.cuh and makes the kernel heavy, \
         but cargo run still reports {after} registers (before: {light})"
    );
}

/// The files below `dir` whose name holds `.tmp` (a temporary of a write).
fn temp_files(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.file_name()
                .is_some_and(|n| n.to_string_lossy().contains(".tmp"))
            {
                found.push(p.display().to_string());
            }
            if p.is_dir() {
                stack.push(p);
            }
        }
    }
    found.sort();
    found
}

/// Builds `kernels/k.cu` light, then heavy with the build script's file
/// size limit lowered to `limit` bytes after nvcc ran (as a disk that fills
/// up then would: what nvcc wrote is in place, every later write of more
/// than `limit` bytes fails), then light again; returns the crate, its build
/// script and the warm `OUT_DIR`. With `must_fail`, the heavy build must
/// fail (occ renames nvcc's outputs into place, so a large limit may leave
/// it nothing too large to write).
fn build_killed_while_replacing_outputs(
    name: &str,
    limit: u32,
    must_fail: bool,
) -> (ScratchCrate, BuildScript, PathBuf) {
    let s = ScratchCrate::scale(name, ".file(\"kernels/k.cu\").arch(\"sm_80\")");
    s.write("kernels/k.cu", LIGHT);
    let bs = BuildScript::compile(&s);
    let warm = s.path().join("warm");
    let out = bs.run(&warm, &[]);
    assert!(script_ok(&out), "first build: {}", text(&out));
    s.write("kernels/k.cu", HEAVY);
    let full_disk = script(
        &s.path().join("disk-fills-after-nvcc.sh"),
        &format!("\"$@\"\nrc=$?\nprlimit --pid $PPID --fsize={limit}\nexit $rc"),
    );
    let out = bs.run(&warm, &[("OCC_NVCC_LAUNCHER", Some(path_str(&full_disk)))]);
    if must_fail {
        assert!(
            !script_ok(&out),
            "the build with a full disk should have failed: {}",
            text(&out)
        );
    }
    s.write("kernels/k.cu", LIGHT);
    (s, bs, warm)
}

/// After [`build_killed_while_replacing_outputs`], the next warm build
/// equals a cold one.
fn warm_equals_cold_after_a_full_disk(name: &str, limit: u32, must_fail: bool) {
    let (s, bs, warm) = build_killed_while_replacing_outputs(name, limit, must_fail);
    let out = bs.run(&warm, &[]);
    assert!(script_ok(&out), "warm build: {}", text(&out));
    let cold = s.path().join("cold");
    let out = bs.run(&cold, &[]);
    assert!(script_ok(&out), "cold build: {}", text(&out));
    assert_same_outputs(
        &warm.join("occ"),
        &cold.join("occ"),
        "a build that died while writing its outputs, then the source reverted",
    );
}

#[test]
fn a_build_killed_while_replacing_outputs_leaves_no_mixed_job() {
    // 63ddf56 wrote the ~150 KB cubin and failed on the ~260 KB PTX.
    warm_equals_cold_after_a_full_disk("around-killed-mixed", 200_000, false);
}

#[test]
fn a_full_disk_before_the_record_reruns_the_job() {
    // Every write of more than 4 KB fails: the job's record and the
    // manifest are not written, though nvcc's outputs are in place.
    warm_equals_cold_after_a_full_disk("around-killed-record", 4096, true);
}

#[test]
fn a_failed_write_leaves_no_truncated_temp_file() {
    let (_s, bs, warm) = build_killed_while_replacing_outputs("around-killed-temp", 4096, true);
    let out = bs.run(&warm, &[]);
    assert!(script_ok(&out), "next build: {}", text(&out));
    let left = temp_files(&warm);
    assert!(
        left.is_empty(),
        "the write that failed left temporary files behind: {left:?}"
    );
}

/// Builds with the nvcc of a scratch toolkit, changes `tool` there to run
/// with `extra`, and compares the warm build with a cold one.
fn toolkit_change_is_seen(tool: &str, extra: &str) {
    let s = Scratch::new();
    s.write("kernels/k.cu", HEAVY);
    let tk = s.path().join("toolkit");
    let nvcc = scratch_toolkit(&tk, &[(tool, "")]);
    let env = build_env(&[("NVCC", Some(path_str(&nvcc)))]);
    build_of(s.path(), "out", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&env)
        .expect("first build");
    reswap(&tk, tool, extra);
    build_of(s.path(), "out", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&env)
        .expect("warm build");
    build_of(s.path(), "cold", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&env)
        .expect("cold build");
    assert_ne!(
        manifest_registers(&occ_dir(&s, "cold"), "sm_80"),
        0,
        "cold build has no registers"
    );
    assert_same_outputs(
        &occ_dir(&s, "out"),
        &occ_dir(&s, "cold"),
        &format!("{tool} now runs with `{extra}`"),
    );
}

#[test]
fn a_changed_ptxas_is_seen() {
    toolkit_change_is_seen("bin/ptxas", "-O0");
}

#[test]
fn a_changed_cicc_is_seen() {
    toolkit_change_is_seen("nvvm/bin/cicc", "-O0");
}

#[test]
fn a_changed_nvcc_profile_is_seen() {
    let s = Scratch::new();
    s.write("kernels/k.cu", HEAVY);
    let tk = s.path().join("toolkit");
    let nvcc = scratch_toolkit(&tk, &[]);
    let env = build_env(&[("NVCC", Some(path_str(&nvcc)))]);
    build_of(s.path(), "out", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&env)
        .expect("first build");
    let profile = tk.join("bin/nvcc.profile");
    let text = std::fs::read_to_string(&profile).expect("nvcc.profile");
    assert!(text.contains("PTXAS_FLAGS"), "{text}");
    std::fs::write(
        &profile,
        text.replace("PTXAS_FLAGS     +=", "PTXAS_FLAGS     += -O0"),
    )
    .expect("edit nvcc.profile");
    build_of(s.path(), "out", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&env)
        .expect("warm build");
    build_of(s.path(), "cold", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&env)
        .expect("cold build");
    assert_same_outputs(
        &occ_dir(&s, "out"),
        &occ_dir(&s, "cold"),
        "nvcc.profile now passes -O0 to ptxas",
    );
}

#[test]
fn an_nvcc_wrapper_whose_real_nvcc_changes_is_seen() {
    let s = Scratch::new();
    s.write("kernels/k.cu", HEAVY);
    let plain = scratch_toolkit(&s.path().join("tk-plain"), &[]);
    let slow = scratch_toolkit(&s.path().join("tk-O0"), &[("bin/ptxas", "-O0")]);
    let current = s.path().join("current");
    std::os::unix::fs::symlink(s.path().join("tk-plain"), &current).expect("link current");
    let wrapper = script(
        &s.path().join("nvcc-wrapper"),
        &format!("exec '{}/bin/nvcc' \"$@\"", current.display()),
    );
    let env = build_env(&[("NVCC", Some(path_str(&wrapper)))]);
    build_of(s.path(), "out", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&env)
        .expect("first build");
    let _ = (&plain, &slow);
    std::fs::remove_file(&current).expect("unlink current");
    std::os::unix::fs::symlink(s.path().join("tk-O0"), &current).expect("relink current");
    build_of(s.path(), "out", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&env)
        .expect("warm build");
    build_of(s.path(), "cold", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&env)
        .expect("cold build");
    assert_same_outputs(
        &occ_dir(&s, "out"),
        &occ_dir(&s, "cold"),
        "the NVCC wrapper now runs another toolkit's nvcc",
    );
}

const GENERATED: &str = "#line 1 \"gen/kernels.cu.in\"\nextern \"C\" __global__ void scale(float* p, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) p[i] *= 2.0f;\n}\n";

#[test]
fn a_line_directive_naming_a_missing_file_keeps_the_cache() {
    let s = Scratch::new();
    s.write("kernels/k.cu", GENERATED);
    let env = build_env(&[]);
    let first = build_of(s.path(), "out", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&env)
        .expect("first build");
    assert_eq!(first.nvcc_runs, 1);
    let again = build_of(s.path(), "out", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&env)
        .expect("second build");
    assert_eq!(
        again.nvcc_runs, 0,
        "nothing changed, yet nvcc ran again (the #line names gen/kernels.cu.in, which does not exist)"
    );
}

#[test]
fn a_line_directive_naming_a_missing_file_keeps_cargo_fresh() {
    let s = ScratchCrate::scale("around-line", ".file(\"kernels/k.cu\").arch(\"sm_80\")");
    s.write("kernels/k.cu", GENERATED);
    let out = s.output(&["build"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let out = s.output(&["build"], &[]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        !t.contains("Compiling around-line"),
        "a second `cargo build` with nothing changed rebuilt the crate:\n{t}"
    );
}

#[test]
fn a_killed_build_leaves_no_scratch_folders_after_the_next_build() {
    let name = "around-killed-tmp";
    let s = ScratchCrate::scale(name, ".file(\"kernels/k.cu\").arch(\"sm_80\")");
    s.write("kernels/k.cu", LIGHT);
    let bs = BuildScript::compile(&s);
    let out_dir = s.path().join("warm");
    // The build script is killed while nvcc runs (its scratch folder exists).
    let killer = script(
        &s.path().join("kill-build.sh"),
        "kill -9 $PPID\nexec \"$@\"",
    );
    let out = bs.run(&out_dir, &[("OCC_NVCC_LAUNCHER", Some(path_str(&killer)))]);
    assert!(!out.status.success(), "the build was not killed");
    let tmp = out_dir.join("occ/tmp");
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(
        !left.is_empty(),
        "the killed build left no scratch folder to clean up"
    );
    let out = bs.run(&out_dir, &[]);
    assert!(script_ok(&out), "next build: {}", text(&out));
    let still: Vec<_> = left.iter().filter(|p| p.exists()).collect();
    assert!(
        still.is_empty(),
        "the next build left the killed build's scratch folders: {still:?}"
    );
}

/// The status change time of `path`, in nanoseconds.
fn ctime(path: &Path) -> i128 {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).unwrap_or_else(|e| panic!("stat {}: {e}", path.display()));
    i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec())
}

#[test]
fn scripts_cuda_toolkit_run_again_leaves_the_toolkit_as_it_was() {
    // The job cache keys the toolkit by each tool's stat, ctime included:
    // a `chmod +x` of every tool on each run of the script (found by a
    // candle benchmark) made every job of every crate compile again. An
    // installed toolkit as the script leaves it (its stamp), with a stand-in
    // nvcc (this checks the script, not nvcc's numbers) and one tool that
    // lost its executable bit, as some wheels do.
    use std::os::unix::fs::PermissionsExt;
    let s = Scratch::new();
    let root = occ_tests::workspace_root();
    let wheels = std::fs::read_to_string(root.join("occ-shell/toolkit-wheels.txt"))
        .expect("read occ-shell/toolkit-wheels.txt");
    let stamp: Vec<&str> = wheels
        .lines()
        .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
            ["default", "cu13", req] => Some(req),
            _ => None,
        })
        .collect();
    assert!(!stamp.is_empty(), "no default cu13 wheels");
    s.write("cuda/cu13/.stamp", &format!("{}\n", stamp.join("+")));
    let bin = "cuda/cu13/nvidia/cu13/bin";
    let nvcc = s.write(&format!("{bin}/nvcc"), "#!/bin/sh\necho one\necho two\n");
    let ptxas = s.write(&format!("{bin}/ptxas"), "");
    let lost = s.write(&format!("{bin}/cuobjdump"), "");
    for exe in [&nvcc, &ptxas] {
        std::fs::set_permissions(exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    std::fs::set_permissions(&lost, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let run = || {
        let out = std::process::Command::new(root.join("scripts/cuda-toolkit"))
            .env("OCC_CUDA_DIR", s.path().join("cuda"))
            .output()
            .expect("run scripts/cuda-toolkit");
        assert!(out.status.success(), "{}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("export CUDA_HOME="),
            "{}",
            text(&out)
        );
    };
    let before = (ctime(&nvcc), ctime(&ptxas));
    std::thread::sleep(std::time::Duration::from_millis(20));
    run();
    assert_eq!((ctime(&nvcc), ctime(&ptxas)), before, "tools touched");
    let mode = std::fs::metadata(&lost).expect("stat").permissions().mode();
    assert_eq!(mode & 0o111, 0o111, "the lost executable bit is set again");
    let fixed = ctime(&lost);
    std::thread::sleep(std::time::Duration::from_millis(20));
    run();
    assert_eq!(ctime(&lost), fixed, "the second run touched it again");
}
