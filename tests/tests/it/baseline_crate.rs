//! The baseline flow of a new user's crate, end to end with the real nvcc and
//! plain `cargo build`: no lock yet, `OCC_BLESS=1`, a kernel that grows
//! registers failing the build (also under `CI=true`, which never writes the
//! lock), blessing it, and a clean build with nvcc unfindable that builds
//! from the lock alone.

use occ_tests::{text, ScratchCrate, BUILD_RS};
use std::path::Path;
use std::process::Output;

/// The kernel `scale` as first written, and grown: 64 values live at once,
/// more than full occupancy's 32 registers per thread.
const LIGHT: &str = include_str!("../../fixtures/cu/baseline_crate/light.cu");
const HEAVY: &str = include_str!("../../fixtures/cu/baseline_crate/heavy.cu");

const MAIN: &str = r#"mod kernels {
    include!(concat!(env!("OUT_DIR"), "/occ/kernels.rs"));
}

fn main() {
    use kernels::*;
    let (sm80, sm90) = (scale::KERNEL.on("sm_80").unwrap(), scale::KERNEL.on("sm_90").unwrap());
    let best = |a: &occ::table::KernelArch| a.best.expect("launchable");
    println!("{} {} {}", sm80.registers, best(sm80).block_size, best(sm90).occupancy);
}
"#;

fn scratch_crate() -> ScratchCrate {
    ScratchCrate::new("gateuser")
        .dep("occ")
        .build_dep("occ-build")
        .build_rs(BUILD_RS)
        .file("kernels/scale.cu", LIGHT)
        .file(
            "kernels/other.cu",
            include_str!("../../fixtures/cu/baseline_crate/other.cu"),
        )
        .file("src/main.rs", MAIN)
}

/// `cargo <args>` in the crate (`CI` unset, as by every scratch cargo), then
/// `env` set.
fn run(s: &ScratchCrate, args: &[&str], env: &[(&str, &str)]) -> Output {
    s.cargo(args)
        .envs(env.iter().copied())
        .output()
        .expect("run cargo")
}

fn json(s: &ScratchCrate, rel: &str) -> serde_json::Value {
    serde_json::from_str(&s.read(rel)).expect("valid JSON")
}

/// `scale`'s record on `arch` in a lock document, read as occ reads it
/// (the lock records the registers; the best launch follows from them).
fn scale_on(lock: &serde_json::Value, arch: &str) -> occ_model::schema::manifest::Resources {
    let lock = occ_model::schema::lock::Lock::from_text(&lock.to_string(), Path::new("occ.lock"))
        .expect("a lock occ reads");
    let kernel = lock
        .kernels
        .into_iter()
        .find(|k| k.name == "scale")
        .expect("scale in the lock");
    kernel
        .archs
        .get(arch)
        .cloned()
        .expect("the arch in the lock")
}

/// `(registers, occupancy)` of `scale` on `arch` in a lock document.
fn scale_numbers(lock: &serde_json::Value, arch: &str) -> (u64, f64) {
    let a = scale_on(lock, arch);
    let best = a.best.expect("a best launch");
    (u64::from(a.facts.registers), best.occupancy)
}

/// The `$OUT_DIR/occ` of the scratch crate's latest build.
fn candidate(s: &ScratchCrate) -> serde_json::Value {
    let build = occ_tests::scratch_target_dir().join("debug").join("build");
    let mut newest: Option<(std::time::SystemTime, std::path::PathBuf)> = None;
    for entry in std::fs::read_dir(build).expect("build dir").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(&format!("{}-", s.name())) {
            continue;
        }
        let file = entry.path().join("out/occ/occ.lock.new");
        if let Ok(t) = std::fs::metadata(&file).and_then(|m| m.modified()) {
            if newest.as_ref().is_none_or(|(n, _)| t > *n) {
                newest = Some((t, file));
            }
        }
    }
    let (_, file) = newest.expect("a candidate lock in OUT_DIR");
    serde_json::from_str(&std::fs::read_to_string(file).expect("read candidate")).expect("json")
}

#[test]
fn lock_bless_regression_ci_and_build_without_nvcc() {
    let s = scratch_crate();

    // 1. No lock yet: the build passes with one warning saying how to make one.
    let out = run(&s, &["build"], &[]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert_eq!(t.matches("no occ.lock yet").count(), 1, "{t}");
    assert!(t.contains("cargo occ bless"), "{t}");
    assert!(!s.path().join("occ.lock").exists());

    // 2. CI=true with OCC_BLESS=1 never writes it, and a CI build with no
    //    lock checked nothing: it fails, saying how to make one.
    let out = run(&s, &["build"], &[("OCC_BLESS", "1"), ("CI", "true")]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("no occ.lock, and CI is set"),
        "{}",
        text(&out)
    );
    assert!(
        !s.path().join("occ.lock").exists(),
        "CI must not write the lock"
    );

    // 3. OCC_BLESS=1 writes it, equal to the build's candidate.
    let out = run(&s, &["build"], &[("OCC_BLESS", "1")]);
    assert!(out.status.success(), "{}", text(&out));
    let lock_text = s.read("occ.lock");
    assert!(lock_text.starts_with("{\n  \"schema\": 3,"), "{lock_text}");
    assert!(
        !lock_text.contains(&*s.path().to_string_lossy()),
        "no absolute paths"
    );
    let before = json(&s, "occ.lock");
    assert_eq!(before, candidate(&s));
    let (regs_before, occ_before) = scale_numbers(&before, "sm_80");
    assert!(regs_before <= 32 && occ_before == 1.0, "{before}");

    // 4. The kernel now needs more registers: the build fails, under CI too,
    //    naming the kernel and its occupancy drop; the lock is untouched.
    s.write("kernels/scale.cu", HEAVY);
    for env in [
        &[][..],
        &[("CI", "true")][..],
        &[("CI", "true"), ("OCC_BLESS", "1")][..],
    ] {
        let out = run(&s, &["build"], env);
        let t = text(&out);
        assert!(!out.status.success(), "{env:?} must fail\n{t}");
        let after = candidate(&s);
        let (regs_after, occ_after) = scale_numbers(&after, "sm_80");
        assert!(
            regs_after > 32 && occ_after < occ_before,
            "the heavy kernel must lower occupancy: {after}"
        );
        let drop = format!("{:.1}% -> {:.1}%", occ_before * 100.0, occ_after * 100.0);
        // One header per cause, then the kernel's row with before -> after.
        assert!(t.contains("regression: occupancy down"), "{t}");
        assert!(
            t.lines().any(|l| l.contains("scale ")
                && l.contains("sm_80")
                && l.contains("kernels/scale.cu")
                && l.contains(&drop)),
            "{t}"
        );
        assert!(!t.contains("panicked"), "{t}");
        assert_eq!(s.read("occ.lock"), lock_text, "the lock is untouched");
    }

    // 5. OCC_BLESS=1 accepts it and writes the new numbers.
    let out = run(&s, &["build"], &[("OCC_BLESS", "1")]);
    assert!(out.status.success(), "{}", text(&out));
    let blessed = json(&s, "occ.lock");
    assert_ne!(blessed, before);
    assert_eq!(blessed, candidate(&s));
    let (regs, occ) = scale_numbers(&blessed, "sm_80");
    assert!(regs > 32 && occ < occ_before);
    let out = run(&s, &["build"], &[("CI", "true")]);
    assert!(
        out.status.success(),
        "the blessed build passes in CI: {}",
        text(&out)
    );

    // 6. A clean build with nvcc unfindable (no NVCC, no CUDA_HOME, PATH
    //    without it, the crate outside the workspace) builds from the lock.
    occ_tests::succeed(&mut s.cargo(&["clean", "-p", s.name()]), "cargo clean -p");
    let path: Vec<std::path::PathBuf> =
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .filter(|dir| !dir.join("nvcc").exists())
            .collect();
    let path = std::env::join_paths(path).expect("PATH");
    let no_nvcc = |args: &[&str]| {
        s.cargo(args)
            .env_remove("NVCC")
            .env_remove("CUDA_HOME")
            .env_remove("CUDA_PATH")
            .env_remove("CUDA_ROOT")
            .env("PATH", &path)
            .output()
            .expect("cargo")
    };
    let out = no_nvcc(&["build"]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert_eq!(
        t.matches("using the numbers recorded in occ.lock").count(),
        1,
        "{t}"
    );
    assert!(t.contains("no CUBIN/PTX"), "{t}");
    let out = no_nvcc(&["run", "--quiet"]);
    assert!(out.status.success(), "{}", text(&out));
    let (_, occ90) = scale_numbers(&blessed, "sm_90");
    let expected = format!(
        "{regs} {} {}",
        scale_on(&blessed, "sm_80")
            .best
            .map(|b| b.block_size)
            .unwrap_or_default(),
        occ90 as f32
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), expected, "{t}");
    assert_eq!(
        json(&s, "occ.lock"),
        blessed,
        "a lock build does not write the lock"
    );
}
