//! The baseline gate in-process with the real nvcc: thresholds, warnings for
//! improvements and new kernels, kernels gone, a custom lock file name, the
//! files and variables watched, and builds from the lock without nvcc; flags
//! changed since the lock named first; spills gone credited; blessing
//! through a symlinked or into a read-only lock; the messages for a bad or
//! foreign lock. A kernel's identity across a moved file or a rename, and
//! a lock with an entry twice, are tested on nvcc 13.5's recorded runs in
//! `replay.rs`.

use occ_build::{ErrorKind, Report};
use occ_model::compare::GATE_FILE;
use occ_model::schema::lock::{Lock, CANDIDATE_FILE};
use occ_tests::{build_env, build_of, Scratch};

const SMALL: &str = include_str!("../../fixtures/cu/baseline/small.cu");
/// More live values than SMALL, still few registers.
const GROWN: &str = include_str!("../../fixtures/cu/baseline/grown.cu");
const KEEP: &str = include_str!("../../fixtures/cu/baseline/keep.cu");
const EXTRA: &str = include_str!("../../fixtures/cu/baseline/extra.cu");

const ARCHS: [&str; 2] = ["sm_80", "sm_90"];

fn warnings(r: &Report) -> &[String] {
    r.directives().warnings()
}

fn grow_registers(r: &Report, arch: &str) -> (u32, u32) {
    let k = r
        .manifest()
        .expect("manifest")
        .kernels
        .iter()
        .find(|k| k.name == "grow")
        .expect("grow");
    (
        k.archs[arch].facts.registers,
        k.archs[arch]
            .best
            .as_ref()
            .expect("a best launch")
            .active_warps_per_sm,
    )
}

#[test]
fn register_threshold_global_and_per_kernel() {
    let s = Scratch::new();
    s.write("kernels/grow.cu", SMALL);
    s.write("kernels/keep.cu", KEEP);
    let first = s
        .build(ARCHS)
        .try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]))
        .expect("bless build");
    assert!(s.path().join("occ.lock").exists());
    s.write("kernels/grow.cu", GROWN);
    // Measure the growth with a build that has no lock to compare with.
    let probe = s
        .build(ARCHS)
        .lock_file("none.lock")
        .try_compile_with(&build_env(&[]))
        .expect("probe");
    let growth = ["sm_80", "sm_90"]
        .map(|a| grow_registers(&probe, a).0 as i64 - grow_registers(&first, a).0 as i64);
    let max_growth = growth.iter().copied().max().unwrap_or(0);
    assert!(
        max_growth > 0,
        "the test kernel must grow registers: {growth:?}"
    );
    for a in ["sm_80", "sm_90"] {
        assert_eq!(
            grow_registers(&probe, a).1,
            grow_registers(&first, a).1,
            "occupancy must not change, or the threshold is not what fails"
        );
    }
    let max_growth = max_growth as u32;
    let e = s
        .build(ARCHS)
        .register_threshold(max_growth - 1)
        .try_compile_with(&build_env(&[]))
        .expect_err("growth past the threshold fails");
    assert_eq!(e.kind(), ErrorKind::Gate, "{e}");
    assert!(e.to_string().contains("cargo occ bless"), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("regression: registers up past the threshold"),
        "{msg}"
    );
    let row = msg
        .lines()
        .find(|l| l.starts_with("  grow "))
        .unwrap_or_else(|| panic!("no row of grow: {msg}"));
    assert!(
        row.contains(&format!("threshold {}", max_growth - 1)),
        "{row}"
    );
    assert!(msg.contains(".register_threshold(n)"), "{msg}");
    // The per-kernel setting wins over the global one.
    s.build(ARCHS)
        .register_threshold(0)
        .kernel_register_threshold("grow", max_growth)
        .try_compile_with(&build_env(&[]))
        .expect("within the kernel's threshold");
    let e = s
        .build(ARCHS)
        .register_threshold(100)
        .kernel_register_threshold("grow", max_growth - 1)
        .try_compile_with(&build_env(&[]))
        .expect_err("past the kernel's threshold");
    assert!(
        e.to_string()
            .lines()
            .any(|l| l.starts_with("  grow ")
                && l.contains(&format!("threshold {}", max_growth - 1))),
        "{e}"
    );
    // gate.json tells the CLI the same thresholds.
    let gate: serde_json::Value =
        serde_json::from_str(&s.read(&format!("out/occ/{GATE_FILE}"))).expect("gate.json");
    assert_eq!(gate["thresholds"]["registers"], 100);
    assert_eq!(gate["thresholds"]["kernels"]["grow"], max_growth - 1);
}

#[test]
fn a_regressions_error_holds_only_what_got_worse_and_every_other_change_is_a_warning() {
    // `grow` grows its registers (past a threshold of 0: a regression),
    // `down` sheds them (an improvement). The error, which cargo prints
    // line by line as `error:`, holds the regression alone; the
    // improvement is a warning, as on a build that passes.
    let s = Scratch::new();
    let down = |text: &str| text.replace("grow", "down");
    s.write("kernels/grow.cu", SMALL);
    s.write("kernels/down.cu", &down(GROWN));
    s.build(ARCHS)
        .try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]))
        .expect("bless");
    s.write("kernels/grow.cu", GROWN);
    s.write("kernels/down.cu", &down(SMALL));
    let e = s
        .build(ARCHS)
        .register_threshold(0)
        .try_compile_with(&build_env(&[]))
        .expect_err("grow regressed");
    let msg = e.to_string();
    assert!(
        msg.contains("regression: registers up past the threshold"),
        "{msg}"
    );
    assert!(
        !msg.contains("improvement") && !msg.lines().any(|l| l.starts_with("  down ")),
        "an improvement in the error: {msg}"
    );
    let w = e.directives().warnings();
    assert!(
        w.iter()
            .any(|l| l.contains("improved on occ.lock") && l.contains(": down;")),
        "{w:#?}"
    );
    // Within the threshold, grow's change passes; the build says so as
    // `cargo occ check` does (it lists it), one warning for the kind.
    let r = s
        .build(ARCHS)
        .register_threshold(100)
        .try_compile_with(&build_env(&[]))
        .expect("within the threshold");
    let w = warnings(&r);
    let changed: Vec<&String> = w
        .iter()
        .filter(|l| l.contains("registers up within the threshold"))
        .collect();
    assert!(
        !changed.is_empty()
            && changed
                .iter()
                .all(|l| l.contains(": grow;") && l.contains("cargo occ bless")),
        "{w:#?}"
    );
}

#[test]
fn improvements_new_and_gone_kernels() {
    let s = Scratch::new();
    s.write("kernels/grow.cu", GROWN);
    s.write("kernels/keep.cu", KEEP);
    s.build(ARCHS)
        .lock_file("gpu/occ.lock")
        .try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]))
        .expect("bless");
    let lock_text = s.read("gpu/occ.lock");
    assert!(
        !s.path().join("occ.lock").exists(),
        "the custom name is used"
    );
    // Fewer registers and a new kernel: passes, one warning per kind, asking
    // to bless, naming the kernels and the report with all of them.
    s.write("kernels/grow.cu", SMALL);
    s.write("kernels/extra.cu", EXTRA);
    let r = s
        .build(ARCHS)
        .lock_file("gpu/occ.lock")
        .try_compile_with(&build_env(&[]))
        .expect("improvements pass");
    let w = warnings(&r);
    let improved: Vec<&String> = w
        .iter()
        .filter(|l| l.contains("improved on gpu/occ.lock"))
        .collect();
    // One line per kind of improvement (the archs may improve differently).
    assert!(
        (1..=2).contains(&improved.len()) && improved.iter().all(|l| l.contains(": grow;")),
        "{w:#?}"
    );
    let new: Vec<&String> = w
        .iter()
        .filter(|l| l.contains("not in gpu/occ.lock"))
        .collect();
    assert_eq!(new.len(), 1, "{w:#?}");
    assert!(
        new[0].contains("1 kernel is not in gpu/occ.lock (sm_80, sm_90): extra;"),
        "{w:#?}"
    );
    assert!(w.iter().all(|l| !l.contains("keep")), "{w:#?}");
    assert!(improved
        .iter()
        .chain(&new)
        .all(|l| l.contains("cargo occ bless") && l.contains("report.txt")));
    let report = s.read("out/occ/report.txt");
    assert!(
        report.contains("differences from gpu/occ.lock")
            && report.contains("new: new kernel (2 kernel x archs)"),
        "{report}"
    );
    assert_eq!(
        s.read("gpu/occ.lock"),
        lock_text,
        "warnings do not write the lock"
    );
    // The lock and the variables are watched.
    let watched = r.directives().rerun_if_changed();
    assert!(
        watched.iter().any(|p| p.ends_with("gpu/occ.lock")),
        "{watched:?}"
    );
    for var in ["OCC_BLESS", "CI", "DOCS_RS", "OCC_NO_NVCC"] {
        assert!(r.directives().rerun_if_env_changed().contains(var), "{var}");
    }
    // The candidate equals what bless would write.
    let candidate = Lock::from_text(&s.read(&format!("out/occ/{CANDIDATE_FILE}")), "c".as_ref())
        .expect("candidate");
    // It also records the build's flags (none here), which the manifest
    // does not hold.
    assert_eq!(
        candidate.flags,
        Some(std::collections::BTreeMap::from([(
            String::new(),
            Vec::new()
        )]))
    );
    assert_eq!(
        candidate,
        Lock {
            flags: candidate.flags.clone(),
            ..Lock::from_manifest(r.manifest().expect("manifest"))
        }
    );
    // A kernel gone fails, naming it.
    std::fs::remove_file(s.path().join("kernels/keep.cu")).expect("rm");
    let e = s
        .build(ARCHS)
        .lock_file("gpu/occ.lock")
        .try_compile_with(&build_env(&[]))
        .expect_err("a kernel gone fails");
    let msg = e.to_string();
    assert!(
        msg.contains("regression: kernel gone (2 kernel x archs)"),
        "{msg}"
    );
    assert!(
        msg.lines().any(|l| l.starts_with("  keep ")
            && l.contains("sm_80")
            && l.contains("kernels/keep.cu")),
        "{msg}"
    );
    assert!(msg.contains("cargo occ bless"), "{msg}");
    // CI: same failure, different hint, lock untouched even with OCC_BLESS.
    let e = s
        .build(ARCHS)
        .lock_file("gpu/occ.lock")
        .try_compile_with(&build_env(&[
            ("CI", Some("true")),
            ("OCC_BLESS", Some("1")),
        ]))
        .expect_err("CI never blesses");
    assert!(e.to_string().contains("kernel gone"), "{e}");
    assert_eq!(s.read("gpu/occ.lock"), lock_text);
}

#[test]
fn without_nvcc_the_lock_stands_in() {
    let s = Scratch::new();
    s.write("kernels/grow.cu", SMALL);
    s.write("kernels/keep.cu", KEEP);
    // No lock and no nvcc: the error says a lock would help.
    let e = s
        .build(ARCHS)
        .try_compile_with(&build_env(&[("OCC_NO_NVCC", Some("1"))]))
        .expect_err("nothing to build from");
    assert!(e.to_string().contains("occ.lock: none"), "{e}");
    let live = s
        .build(ARCHS)
        .try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]))
        .expect("bless");
    for (switch, value) in [("OCC_NO_NVCC", "1"), ("DOCS_RS", "1")] {
        let s2 = Scratch::new();
        s2.write("kernels/grow.cu", SMALL);
        s2.write("kernels/keep.cu", KEEP);
        std::fs::copy(s.path().join("occ.lock"), s2.path().join("occ.lock")).expect("copy");
        let r = s2
            .build(ARCHS)
            .try_compile_with(&build_env(&[
                (switch, Some(value)),
                ("NVCC", Some("/nonexistent/nvcc")),
            ]))
            .expect("builds from the lock");
        assert_eq!(r.nvcc_runs, 0);
        assert_eq!(
            r.manifest().expect("manifest").origin,
            occ_model::schema::manifest::Origin::Lock
        );
        assert_eq!(
            r.manifest().expect("manifest").nvcc,
            live.manifest().expect("manifest").nvcc
        );
        let w = warnings(&r);
        assert_eq!(w.len(), 1, "{w:#?}");
        assert!(w[0].contains(switch) && w[0].contains("occ.lock"), "{w:#?}");
        // Same kernels and numbers as the live build; no device code.
        assert_eq!(
            r.manifest().expect("manifest").kernels.len(),
            live.manifest().expect("manifest").kernels.len()
        );
        for (a, b) in r
            .manifest()
            .expect("manifest")
            .kernels
            .iter()
            .zip(&live.manifest().expect("manifest").kernels)
        {
            assert_eq!(
                (&a.name, &a.ident, &a.source),
                (&b.name, &b.ident, &b.source)
            );
            for (arch, ka) in &a.archs {
                let kb = &b.archs[arch];
                assert_eq!(ka.facts.registers, kb.facts.registers);
                assert_eq!(ka.best, kb.best);
                assert_eq!(ka.facts.launch_bounds, kb.facts.launch_bounds);
                assert!(ka.cubin.is_none());
            }
        }
        let rs = s2.read("out/occ/kernels.rs");
        assert!(
            !rs.contains("::CUBIN;") && !rs.contains("include_bytes"),
            "{rs}"
        );
        // The lock's numbers (compared above through the manifests) in the
        // packed table, every blob empty.
        assert!(
            rs.contains("pub const HAS_DEVICE_CODE: bool = false;")
                && rs.contains("::occ::table::Table::new(")
                && rs.contains("bytes: &[]"),
            "{rs}"
        );
        // Self-contained: no blob file, so nothing from OUT_DIR.
        assert!(
            !rs.contains("device_code.rs") && !rs.contains("__device_code!"),
            "{rs}"
        );
        assert!(s2.path().join("out/occ/manifest.json").exists());
    }
    // An arch the lock lacks cannot come from it.
    let e = s
        .build(ARCHS)
        .arch("sm_100")
        .try_compile_with(&build_env(&[("OCC_NO_NVCC", Some("1"))]))
        .expect_err("sm_100 is not recorded");
    assert!(e.to_string().contains("no numbers for sm_100"), "{e}");
    // Nor numbers of other flags: a `.define()` since the bless may change
    // every one of them, and without nvcc nothing can tell.
    let e = s
        .build(ARCHS)
        .define("TILE", "64")
        .try_compile_with(&build_env(&[("OCC_NO_NVCC", Some("1"))]))
        .expect_err("the lock's numbers are of other flags");
    assert_eq!(e.kind(), ErrorKind::Lock, "{e}");
    assert!(
        e.to_string()
            .contains("were built with the nvcc flags none, and this build gives -DTILE=64")
            && e.to_string().contains("cargo occ bless"),
        "{e}"
    );
}

#[test]
fn flags_that_changed_since_the_lock_are_said_before_the_kernels() {
    let s = Scratch::new();
    s.write("kernels/k.cu", occ_tests::surroundings::SWITCHED);
    s.write("kernels/common.cuh", "");
    build_of(s.path(), "out", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]))
        .expect("bless");
    let lock = s.read("occ.lock");
    assert!(
        lock.contains("\"flags\""),
        "the lock records the flags: {lock}"
    );
    for (what, build, env) in [
        (
            "an nvcc flag variable",
            build_of(s.path(), "out", "kernels/k.cu", ["sm_80"]),
            vec![("NVCC_APPEND_FLAGS", Some("-DHEAVY_KERNEL"))],
        ),
        (
            "a define",
            {
                let mut b = build_of(s.path(), "out", "kernels/k.cu", ["sm_80"]);
                b.define("HEAVY_KERNEL", None);
                b
            },
            vec![],
        ),
    ] {
        let e = build
            .try_compile_with(&build_env(&env))
            .expect_err("the heavier kernel regresses");
        let msg = e.to_string();
        let said = msg
            .find("changed since the lock was blessed")
            .unwrap_or_else(|| panic!("{what}: the flags must be named: {msg}"));
        let kernel = msg.find("scale").expect("the kernel is named");
        assert!(
            said < kernel,
            "{what}: flags first, then the kernels: {msg}"
        );
        assert!(msg.contains("HEAVY_KERNEL`"), "{what}: {msg}");
    }
}

const ALPHA: &str = "extern \"C\" __global__ void alpha(float* p) { p[threadIdx.x] *= 2.0f; }\n";
const BETA: &str = "extern \"C\" __global__ void beta(int* p) { p[threadIdx.x] += 1; }\n";

/// The sweep tests' n-body forces (about 56 registers uncapped on sm_80,
/// spills at 32), with `__launch_bounds__(BOUNDS)`.
fn forces() -> String {
    include_str!("../../fixtures/cu/sweep/forces.cu")
        .replace("void forces8", "void __launch_bounds__(BOUNDS) forces8")
}

/// Builds with `OCC_BLESS=1`: writes `occ.lock`.
fn bless(s: &Scratch) {
    s.build(["sm_80"])
        .try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]))
        .expect("bless");
}

/// The message of a build that must fail, or a panic saying it built.
fn failure(s: &Scratch, what: &str) -> String {
    match s.build(["sm_80"]).try_compile_with(&build_env(&[])) {
        Ok(_) => panic!("{what}: the build passed"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn spills_gone_are_credited_in_the_verdict() {
    let s = Scratch::new();
    // 32 registers (1024 threads x 2 blocks) make it spill; 64 do not.
    s.write("kernels/k.cu", &forces().replace("BOUNDS", "1024, 2"));
    bless(&s);
    s.write("kernels/k.cu", &forces().replace("BOUNDS", "512, 2"));
    let msg = failure(&s, "spilling kernel given a heavier launch bound");
    // The row of forces8: kernel, arch, source, registers, smem, spills, ...
    let row: Vec<&str> = msg
        .lines()
        .find(|l| l.starts_with("  forces8 ") && l.contains("sm_80"))
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let header: Vec<&str> = msg
        .lines()
        .find(|l| l.starts_with("  kernel "))
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let spills = header.iter().position(|c| *c == "spills");
    let credited = spills
        .and_then(|i| row.get(i))
        .is_some_and(|cell| cell.ends_with("-> 0") && !cell.starts_with("0 "));
    assert!(
        credited,
        "the verdict must show the spills gone, not only the occupancy lost: {msg}"
    );
}

#[cfg(unix)]
#[test]
fn bless_writes_through_a_symlinked_lock() {
    let s = Scratch::new();
    s.write("kernels/a.cu", ALPHA);
    s.write("locks/real.lock", "");
    std::fs::remove_file(s.path().join("locks/real.lock")).expect("rm");
    bless(&s);
    std::fs::rename(s.path().join("occ.lock"), s.path().join("locks/real.lock")).expect("move");
    std::os::unix::fs::symlink("locks/real.lock", s.path().join("occ.lock")).expect("link");
    s.write("kernels/b.cu", BETA);
    bless(&s);
    let link = s.path().join("occ.lock");
    assert!(
        std::fs::symlink_metadata(&link)
            .expect("occ.lock")
            .file_type()
            .is_symlink(),
        "OCC_BLESS=1 replaced the symlink occ.lock with a plain file"
    );
    assert!(
        s.read("locks/real.lock").contains("\"beta\""),
        "the lock the symlink points to was not updated"
    );
}

#[cfg(unix)]
#[test]
fn bless_refuses_a_read_only_lock() {
    use std::os::unix::fs::PermissionsExt;
    let s = Scratch::new();
    s.write("kernels/a.cu", ALPHA);
    bless(&s);
    let lock = s.path().join("occ.lock");
    let before = s.read("occ.lock");
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o444)).expect("chmod");
    s.write("kernels/b.cu", BETA);
    let result = s
        .build(["sm_80"])
        .try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]));
    assert_eq!(
        s.read("occ.lock"),
        before,
        "OCC_BLESS=1 overwrote a read-only occ.lock"
    );
    let msg = result.map_or_else(|e| e.to_string(), |_| String::new());
    assert!(
        msg.contains("occ.lock") && msg.contains("read-only"),
        "the build must refuse a read-only lock, saying so: {msg:?}"
    );
}

/// A blessed one-kernel crate whose `occ.lock` is then edited by `edit`.
fn with_lock(edit: impl FnOnce(&mut serde_json::Value)) -> Scratch {
    let s = Scratch::new();
    s.write("kernels/a.cu", ALPHA);
    bless(&s);
    let mut lock: serde_json::Value = serde_json::from_str(&s.read("occ.lock")).expect("lock JSON");
    edit(&mut lock);
    s.write(
        "occ.lock",
        &format!("{}\n", serde_json::to_string_pretty(&lock).expect("JSON")),
    );
    s
}

fn result_text(s: &Scratch) -> Result<(), String> {
    s.build(["sm_80"])
        .try_compile_with(&build_env(&[]))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[test]
fn a_lock_whose_schema_is_a_string_is_not_called_missing() {
    let s = with_lock(|l| l["schema"] = serde_json::json!("1"));
    let msg = result_text(&s).expect_err("a lock with \"schema\":\"1\" was accepted");
    assert!(
        msg.contains("schema") && !msg.contains("missing"),
        "the schema is present but a string; the message must not call it missing: {msg}"
    );
}

#[test]
fn a_lock_with_a_utf8_bom_is_read() {
    let s = Scratch::new();
    s.write("kernels/a.cu", ALPHA);
    bless(&s);
    let text = s.read("occ.lock");
    s.write("occ.lock", &format!("\u{feff}{text}"));
    if let Err(e) = result_text(&s) {
        panic!("occ.lock saved with a UTF-8 BOM (as some Windows editors do) failed: {e}");
    }
}

#[test]
fn a_lock_of_another_crate_names_its_package() {
    let s = with_lock(|l| {
        l["package"] = serde_json::json!("some-other-crate");
        l["kernels"][0]["name"] = serde_json::json!("theirs");
    });
    let err = s
        .build(["sm_80"])
        .try_compile_with(&build_env(&[("CARGO_PKG_NAME", Some("mine"))]))
        .expect_err("another crate's lock was accepted");
    let msg = err.to_string();
    assert!(
        msg.contains("some-other-crate"),
        "a lock of another crate must be named as such (its package), not reported kernel by kernel: {msg:?}"
    );
    // Its own cause, with both packages and the fixes, not a corrupt file.
    assert!(
        err.kind() == ErrorKind::Lock
            && msg.contains("is the lock of package `some-other-crate`, not of `mine`"),
        "{err:?}"
    );
    assert!(
        msg.contains(".lock_file()") && msg.contains("cargo occ bless"),
        "{msg}"
    );
}

#[test]
fn a_huge_occupancy_in_the_lock_does_not_print_inf() {
    let s = with_lock(|l| {
        let archs = l["kernels"][0]["archs"]
            .as_object_mut()
            .expect("archs object");
        for a in archs.values_mut() {
            a["best"]["occupancy"] = serde_json::json!(1e308);
        }
    });
    let msg = result_text(&s).expect_err("an occupancy of 1e308 in the lock was accepted");
    assert!(
        !msg.contains("inf%") && !msg.contains("NaN"),
        "an occupancy of 1e308 must be refused or printed as a number: {msg}"
    );
}
