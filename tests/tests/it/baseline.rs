//! The baseline gate in-process with the real nvcc: thresholds, warnings for
//! improvements and new kernels, kernels gone, a custom lock file name, the
//! files and variables watched, and builds from the lock without nvcc.

use occ_build::{ErrorKind, Report};
use occ_model::compare::GATE_FILE;
use occ_model::lock::{Lock, CANDIDATE_FILE};
use occ_tests::{build_env, Scratch};

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
        k.archs[arch].registers,
        k.archs[arch].best.active_warps_per_sm,
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
            occ_model::manifest::Origin::Lock
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
                assert_eq!(ka.registers, kb.registers);
                assert_eq!(ka.best, kb.best);
                assert_eq!(ka.launch_bounds, kb.launch_bounds);
                assert!(ka.cubin.is_empty());
            }
        }
        let rs = s2.read("out/occ/kernels.rs");
        assert!(
            !rs.contains("::CUBIN;") && !rs.contains("include_bytes"),
            "{rs}"
        );
        assert!(
            rs.contains("registers: ") && rs.contains("bytes: &[]"),
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
}
