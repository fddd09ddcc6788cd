//! `cargo occ` where a build is not a plain one: a build that stood on the
//! lock (it works, and `check` says nothing was checked), blessing through a
//! symlinked or into a read-only lock, `report` after a failed build and
//! `check`/`bless` after a gate failure or an unfinished build, a huge
//! input to `parse`, a hung ptxas under `sweep`, a results file whose
//! compute capability names no arch, `diff` of two packages' locks, SARIF
//! without a lock, and a closed stdout. Most run on builds written by hand
//! (`hand_build`, no nvcc).

use crate::{occ, occ_with, Setup};
use occ_model::compare::GateSettings;
use occ_model::schema::lock::{Lock, LOCK_SCHEMA};
use occ_model::schema::manifest::{Manifest, Origin};
use occ_tests::surroundings::{scratch_toolkit, script, HEAVY, LIGHT};
use occ_tests::{build_env, Scratch};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn manifest(s: &Scratch) -> String {
    s.path().join("out/occ/manifest.json").display().to_string()
}

/// A crate whose lock was blessed with nvcc and whose last build stood on
/// the lock (`OCC_NO_NVCC=1`).
fn lock_mode_build() -> Scratch {
    let s = Scratch::new();
    s.write("kernels/k.cu", LIGHT);
    s.build(["sm_80"])
        .try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]))
        .expect("bless");
    std::fs::remove_dir_all(s.path().join("out")).expect("clean");
    s.build(["sm_80"])
        .try_compile_with(&build_env(&[("OCC_NO_NVCC", Some("1"))]))
        .expect("a build from the lock");
    s
}

fn lock_mode_command_works(args: &[&str]) {
    let s = lock_mode_build();
    let m = manifest(&s);
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--manifest", &m]);
    let (code, out) = occ(s.path(), &all, &[], None).code_and_text();
    assert_eq!(
        code,
        0,
        "`cargo occ {}` on a build from occ.lock failed:\n{out}",
        args.join(" ")
    );
}

#[test]
fn report_works_on_a_build_from_the_lock() {
    lock_mode_command_works(&["report"]);
}

/// A build that stood on the lock checked nothing, so
/// `cargo occ check` must not pass it (it did, "nothing to compare", exit 0).
#[test]
fn check_of_a_build_from_the_lock_says_nothing_was_checked() {
    let s = lock_mode_build();
    let m = manifest(&s);
    let (code, out) = occ(s.path(), &["check", "--manifest", &m], &[], None).code_and_text();
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("nothing was checked") && out.contains("nvcc"),
        "{out}"
    );
}

#[test]
fn explain_works_on_a_build_from_the_lock() {
    lock_mode_command_works(&["explain", "scale"]);
}

const OTHER: &str = "extern \"C\" __global__ void other(int* p) { p[threadIdx.x] += 1; }\n";

/// A blessed crate, then a build with a new kernel (its candidate waits in
/// `OUT_DIR` for `cargo occ bless`).
fn crate_with_candidate() -> Scratch {
    let s = Scratch::new();
    s.write("kernels/k.cu", LIGHT);
    s.build(["sm_80"])
        .try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]))
        .expect("bless");
    s.write("kernels/other.cu", OTHER);
    s.build(["sm_80"])
        .try_compile_with(&build_env(&[]))
        .expect("a build with a new kernel");
    s
}

/// `cargo occ bless` counts one kernel in the singular ("1 kernels", said
/// the new-user review).
#[test]
fn bless_of_one_kernel_says_1_kernel() {
    let s = Scratch::new();
    s.write("kernels/k.cu", LIGHT);
    s.build(["sm_80"])
        .try_compile_with(&build_env(&[]))
        .expect("a build without a lock");
    let (code, out) =
        occ(s.path(), &["bless", "--manifest", &manifest(&s)], &[], None).code_and_text();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("(1 kernel, sm_80); commit it"), "{out}");
}

#[cfg(unix)]
#[test]
fn bless_writes_through_a_symlinked_lock() {
    let s = crate_with_candidate();
    std::fs::create_dir_all(s.path().join("locks")).expect("locks");
    std::fs::rename(s.path().join("occ.lock"), s.path().join("locks/real.lock")).expect("move");
    std::os::unix::fs::symlink("locks/real.lock", s.path().join("occ.lock")).expect("link");
    let (code, out) =
        occ(s.path(), &["bless", "--manifest", &manifest(&s)], &[], None).code_and_text();
    assert_eq!(code, 0, "{out}");
    let is_link = std::fs::symlink_metadata(s.path().join("occ.lock"))
        .expect("occ.lock")
        .file_type()
        .is_symlink();
    assert!(
        is_link,
        "cargo occ bless replaced the symlink occ.lock with a plain file"
    );
    assert!(
        s.read("locks/real.lock").contains("\"other\""),
        "the lock the symlink points to was not updated"
    );
}

#[cfg(unix)]
#[test]
fn bless_refuses_a_read_only_lock() {
    use std::os::unix::fs::PermissionsExt;
    let s = crate_with_candidate();
    let lock = s.path().join("occ.lock");
    let before = s.read("occ.lock");
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o444)).expect("chmod");
    let (code, out) =
        occ(s.path(), &["bless", "--manifest", &manifest(&s)], &[], None).code_and_text();
    assert_eq!(
        s.read("occ.lock"),
        before,
        "cargo occ bless overwrote a read-only occ.lock"
    );
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("read-only"),
        "the refusal must say the lock is read-only: {out}"
    );
}

#[test]
fn report_after_a_failed_build_says_so() {
    let s = Scratch::new();
    s.write("kernels/k.cu", LIGHT);
    s.build(["sm_80"])
        .try_compile_with(&build_env(&[]))
        .expect("first build");
    s.write(
        "kernels/k.cu",
        "extern \"C\" __global__ void scale(float* p) { p[0] = undefined_name; }\n",
    );
    assert!(s
        .build(["sm_80"])
        .try_compile_with(&build_env(&[]))
        .is_err());
    let (code, out) = occ(
        s.path(),
        &["report", "--manifest", &manifest(&s)],
        &[],
        None,
    )
    .code_and_text();
    let lower = out.to_ascii_lowercase();
    assert!(
        lower.contains("fail") || lower.contains("stale"),
        "`cargo occ report` (exit {code}) shows the numbers of the build before the failed one \
         without saying so:\n{out}"
    );
}

#[test]
fn parse_does_not_hold_its_whole_input_in_memory() {
    // 1 GiB of zeros under a 512 MiB address-space limit.
    let s = Scratch::new();
    let ran = occ_with(
        s.path(),
        &["parse", "-"],
        &[],
        Setup {
            stdin_of: Some(&["head", "-c", "1073741824", "/dev/zero"]),
            memory_kib: Some(524288),
            ..Setup::default()
        },
    );
    assert!(
        (0..=2).contains(&ran.code) && !ran.err.contains("memory"),
        "cargo occ parse of 1 GiB of zeros under a 512 MiB memory limit: exit {}, signal {:?}\n{}",
        ran.code,
        ran.signal,
        ran.err
    );
}

#[test]
fn sweep_times_out_a_hung_ptxas() {
    let s = Scratch::new();
    s.write("kernels/k.cu", LIGHT);
    s.build(["sm_80"])
        .try_compile_with(&build_env(&[]))
        .expect("build");
    let tk = s.path().join("toolkit");
    let nvcc = scratch_toolkit(&tk, &[("bin/ptxas", "")]);
    let pids = s.path().join("hung-pids");
    script(
        &tk.join("bin/ptxas"),
        &format!("echo $$ >> '{}'\nexec sleep 900", pids.display()),
    );
    let limit = Duration::from_secs(120);
    let ran = occ_with(
        s.path(),
        &["sweep", "--manifest", &manifest(&s)],
        &[
            ("NVCC", nvcc.to_str()),
            // The limit a user sets (the default is a minute, which this test
            // would spend waiting); it must still be the hung ptxas that ends.
            ("OCC_PTXAS_TIMEOUT", Some("5")),
        ],
        Setup {
            kill_after: Some(limit),
            ..Setup::default()
        },
    );
    for pid in std::fs::read_to_string(&pids).unwrap_or_default().lines() {
        let _ = Command::new("kill").arg("-9").arg(pid.trim()).status();
    }
    assert!(
        !ran.killed,
        "cargo occ sweep still waited on a hung ptxas after {limit:?}"
    );
    let err = ran.err.to_ascii_lowercase();
    assert!(ran.code != 0, "a sweep whose ptxas hung cannot succeed");
    assert!(
        err.contains("ptxas") && (err.contains("timed out") || err.contains("timeout")),
        "the message must say ptxas timed out: {err}"
    );
}

/// example-app's committed lock: five kernels on sm_80, sm_86 and sm_90.
pub(crate) const EXAMPLE_LOCK: &str = include_str!("../../../example-app/occ.lock");

/// A build of example-app written by hand, with no nvcc: its lock as the
/// manifest of an nvcc build (changed by `edit`) in `out/occ`, with the
/// candidate lock and `gate.json` (naming `occ.lock` in the folder) beside
/// it; `occ.lock` itself when `lock`; `status.json` saying `status` when
/// given. Returns the folder and the manifest's path.
pub(crate) fn hand_build(
    edit: impl FnOnce(&mut Manifest),
    lock: bool,
    status: Option<&str>,
) -> (Scratch, String) {
    let s = Scratch::new();
    let lock_path = s.path().join("occ.lock");
    let mut m = Lock::from_text(EXAMPLE_LOCK, &lock_path)
        .and_then(|l| occ_model::assemble::lock_manifest(&l, &[], &lock_path))
        .expect("example-app's lock");
    m.origin = Origin::Nvcc;
    for k in &mut m.kernels {
        let stem = Path::new(&k.source)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        for (arch, a) in &mut k.archs {
            a.cubin = Some(format!("{stem}.{arch}.cubin"));
            a.ptx = Some(format!("{stem}.{arch}.ptx"));
        }
    }
    edit(&mut m);
    let manifest = s.write("out/occ/manifest.json", &m.to_json());
    s.write("out/occ/occ.lock.new", &Lock::from_manifest(&m).to_text());
    let gate = GateSettings {
        schema: LOCK_SCHEMA,
        lock_file: lock_path,
        thresholds: Default::default(),
        crate_root: Some(s.path().to_path_buf()),
        deny_spills: false,
    };
    s.write(
        "out/occ/gate.json",
        &occ_model::schema::manifest::to_json_pretty(&gate),
    );
    if lock {
        s.write("occ.lock", EXAMPLE_LOCK);
    }
    if let Some(state) = status {
        s.write(
            "out/occ/status.json",
            &format!("{{\n  \"schema\": 1,\n  \"build\": \"{state}\"\n}}\n"),
        );
    }
    (s, manifest.display().to_string())
}

#[test]
fn tune_import_refuses_a_compute_capability_that_names_no_arch() {
    let (s, m) = hand_build(|_| {}, true, None);
    let manifest = occ_shell::files::read_manifest(Path::new(&m)).expect("manifest");
    let mut results = occ_tests::recorded_results(
        &manifest,
        "saxpy",
        "sm_80",
        "n=1M",
        &[(128, 2.0), (256, 3.0)],
        0.01,
    );
    results.device.compute_capability = "abc".into();
    let file = s.write("occ-tune.json", &results.to_json());
    let file = file.display().to_string();
    let (code, out) = occ(
        s.path(),
        &["tune", "import", &file, "--manifest", &m],
        &[],
        None,
    )
    .code_and_text();
    assert_eq!(
        s.read("occ.lock"),
        EXAMPLE_LOCK,
        "a results file of compute capability \"abc\" was imported:\n{out}"
    );
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("occ-tune.json")
            && out.contains("compute_capability")
            && out.contains("\"abc\""),
        "the error must name the file, the field and its value: {out}"
    );
}

#[test]
fn diff_refuses_locks_of_two_packages() {
    let s = Scratch::new();
    let old = s.write("old.lock", EXAMPLE_LOCK);
    let renamed = EXAMPLE_LOCK.replacen(
        "\"package\": \"example-app\"",
        "\"package\": \"other-app\"",
        1,
    );
    assert_ne!(renamed, EXAMPLE_LOCK);
    let new = s.write("new.lock", &renamed);
    let (old, new) = (old.display().to_string(), new.display().to_string());
    for args in [[&old, &new], [&new, &old]] {
        let (code, out) = occ(s.path(), &["diff", args[0], args[1]], &[], None).code_and_text();
        assert_eq!(
            code, 2,
            "`cargo occ diff` compared the locks of two packages:\n{out}"
        );
        assert!(
            out.contains("`example-app`") && out.contains("`other-app`"),
            "the refusal must name both packages: {out}"
        );
    }
}

#[test]
fn check_sarif_without_a_lock_has_the_spill_results() {
    let (s, m) = hand_build(
        |m| {
            let saxpy = m.kernels.iter_mut().find(|k| k.name == "saxpy");
            if let Some(a) = saxpy.and_then(|k| k.archs.get_mut("sm_80")) {
                a.resources.facts.spill_stores = 16;
                a.resources.facts.spill_loads = 16;
            }
        },
        false,
        None,
    );
    let (code, out, err) = occ(
        s.path(),
        &["check", "--format", "sarif", "--manifest", &m],
        &[],
        None,
    )
    .parts();
    assert_eq!(code, 2, "no lock is an input error\n{out}\n{err}");
    assert!(
        err.contains("no lock"),
        "stderr must say there is no lock: {err}"
    );
    let log: serde_json::Value = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("stdout is no SARIF log ({e}):\n{out}\nstderr: {err}"));
    let results = log["runs"][0]["results"].as_array().expect("results");
    assert!(
        results.iter().any(|r| r["ruleId"] == "occ/spill"
            && r["message"]["text"]
                .as_str()
                .is_some_and(|t| t.contains("saxpy") && t.contains("sm_80"))),
        "{out}"
    );
    assert!(
        results.iter().all(|r| r["ruleId"] == "occ/spill"),
        "without a lock there is nothing to regress against: {out}"
    );
}

#[test]
fn after_a_gate_failure_check_and_bless_say_the_numbers_are_current() {
    let (s, m) = hand_build(|_| {}, true, Some("gate_failed"));
    for cmd in ["check", "bless"] {
        let (code, out) = occ(s.path(), &[cmd, "--manifest", &m], &[], None).code_and_text();
        assert_eq!(code, 0, "{out}");
        let lower = out.to_ascii_lowercase();
        assert!(
            !lower.contains("did not finish") && !lower.contains("fix the build"),
            "`cargo occ {cmd}` after a gate failure: {out}"
        );
        assert!(
            lower.contains("failed at occ's gate") && lower.contains("current"),
            "`cargo occ {cmd}` must say the build failed at the gate on these numbers: {out}"
        );
    }
}

#[test]
fn after_an_unfinished_build_the_warning_gives_both_next_steps() {
    // A build that did not finish may have failed at the gate (its numbers
    // are current: change the kernel or bless) or before (fix the build).
    let (s, m) = hand_build(|_| {}, true, Some("running"));
    let (_, out) = occ(s.path(), &["check", "--manifest", &m], &[], None).code_and_text();
    assert!(
        out.contains("fix the build") && out.contains("cargo occ bless"),
        "{out}"
    );
}

#[test]
fn bless_refuses_the_candidate_of_a_build_that_did_not_finish() {
    // nvcc failed: status.json says `running`, and the candidate beside it
    // is the last finished build's (here: one where saxpy spills).
    let (s, m) = hand_build(
        |m| {
            let saxpy = m.kernels.iter_mut().find(|k| k.name == "saxpy");
            if let Some(a) = saxpy.and_then(|k| k.archs.get_mut("sm_80")) {
                a.resources.facts.spill_stores = 8;
            }
        },
        true,
        Some("running"),
    );
    let (code, out) = occ(s.path(), &["bless", "--manifest", &m], &[], None).code_and_text();
    assert_eq!(
        code, 2,
        "bless took an unfinished build's candidate:\n{out}"
    );
    assert_eq!(s.read("occ.lock"), EXAMPLE_LOCK, "{out}");
    assert!(
        out.contains("did not finish")
            && out.contains("nothing was blessed")
            && out.contains("fix the build"),
        "{out}"
    );
    assert_eq!(
        out.lines()
            .filter(|l| l.starts_with("error:") || l.starts_with("warning:"))
            .count(),
        1,
        "one message: {out}"
    );
    // A candidate equal to the lock is not called "up to date" either.
    let (s, m) = hand_build(|_| {}, true, Some("running"));
    let (code, out) = occ(s.path(), &["bless", "--manifest", &m], &[], None).code_and_text();
    assert_eq!(code, 2, "{out}");
    assert!(!out.contains("up to date"), "{out}");
    // A finished build, or one that failed at occ's own gate, blesses.
    for state in ["finished", "gate_failed"] {
        let (s, m) = hand_build(|_| {}, true, Some(state));
        let (code, out) = occ(s.path(), &["bless", "--manifest", &m], &[], None).code_and_text();
        assert_eq!(code, 0, "{state}: {out}");
    }
}

#[test]
fn under_ci_check_after_an_unfinished_build_checks_nothing_and_fails() {
    // Its folder may hold an earlier build's numbers: a CI step that ran
    // `check` alone (or with `if: always()` for SARIF) must not look green.
    let (s, m) = hand_build(|_| {}, true, Some("running"));
    for format in ["text", "sarif"] {
        let (code, out) = occ(
            s.path(),
            &["check", "--format", format, "--manifest", &m],
            &[("CI", Some("true"))],
            None,
        )
        .code_and_text();
        assert_eq!(code, 2, "--format {format}: {out}");
        assert!(
            out.contains("nothing was checked") && out.contains("did not finish"),
            "--format {format}: {out}"
        );
        assert!(
            out.lines()
                .filter(|l| l.starts_with("error: nothing was checked"))
                .all(|l| !l.contains("  ")),
            "one sentence, no stray whitespace: {out}"
        );
    }
    // Outside CI a developer gets the warning and the comparison.
    let (code, out) = occ(s.path(), &["check", "--manifest", &m], &[], None).code_and_text();
    assert_eq!(code, 0, "{out}");
}

#[test]
fn a_real_gate_failure_is_not_called_an_unfinished_build() {
    let s = Scratch::new();
    s.write("kernels/k.cu", LIGHT);
    s.build(["sm_80"])
        .try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]))
        .expect("bless");
    s.write("kernels/k.cu", HEAVY);
    assert!(
        s.build(["sm_80"])
            .try_compile_with(&build_env(&[]))
            .is_err(),
        "the heavier kernel must fail the gate"
    );
    let (code, out) =
        occ(s.path(), &["check", "--manifest", &manifest(&s)], &[], None).code_and_text();
    assert_eq!(code, 1, "{out}");
    assert!(
        !out.contains("fix the build") && out.contains("failed at occ's gate"),
        "{out}"
    );
}

#[cfg(unix)]
#[test]
fn a_closed_stdout_ends_every_subcommand_quietly() {
    let (s, m) = hand_build(|_| {}, true, None);
    let cases: [&[&str]; 7] = [
        &["explain", "saxpy", "--manifest", &m],
        &["tune", "--plan", "--manifest", &m],
        &["report", "--manifest", &m],
        &["check", "--manifest", &m],
        &["diff", &m, &m],
        &[
            "calc",
            "--arch",
            "sm_80",
            "--regs",
            "40",
            "--threads",
            "256",
        ],
        &["report", "--help"],
    ];
    for args in cases {
        // The reading end is closed before cargo-occ writes a byte.
        let ran = occ_with(
            s.path(),
            args,
            &[],
            Setup {
                closed_stdout: true,
                ..Setup::default()
            },
        );
        let err = &ran.err;
        let quiet = ran.code == 0 || ran.signal == Some(13);
        assert!(
            quiet && !err.contains("panicked") && !err.contains("backtrace"),
            "`cargo occ {}` with a closed stdout: exit {}, signal {:?}\n{err}",
            args.join(" "),
            ran.code,
            ran.signal
        );
    }
}
