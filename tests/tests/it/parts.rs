//! Several `Build`s of one build script (parts, `Build::name`) into one
//! `OUT_DIR` and one `occ.lock`, with the real nvcc: the gate's verdict
//! does not depend on the order of the parts; a part that fails its
//! spills gate is not hidden by a later part's bless; a build from the
//! lock (no nvcc) applies `deny_spills` as a build with nvcc does and
//! refuses, naming them, the archs the lock has no numbers of.
//!
//! Each scratch crate is one "run" of a build script: the parts of one
//! test process into one `OUT_DIR` are one run (`stage/parts.rs`).

use occ_build::{Build, ErrorKind};
use occ_tests::{build_env, build_of, Scratch};

/// A kernel with `n` values live at once: its registers grow with `n`.
fn kernel(name: &str, n: u32) -> String {
    format!(
        "extern \"C\" __global__ void {name}(float* p, int n) {{\n  float v[{n}];\n#pragma unroll\n  \
         for (int i = 0; i < {n}; ++i) v[i] = p[(threadIdx.x + i * 131) % n];\n  float acc = 0.0f;\n\
         #pragma unroll\n  for (int i = 0; i < {n}; ++i)\n#pragma unroll\n    for (int j = 0; j < {n}; ++j) \
         acc += v[i] * v[(i * 7 + j) % {n}] * (float)(i ^ j);\n  p[threadIdx.x] = acc;\n}}\n"
    )
}

/// A crate with the parts `a` (`a/a.cu`: kernel `ka` of `n_a` values) and
/// `b` (`b/b.cu`: kernel `kb`, light).
fn two_parts(n_a: u32) -> Scratch {
    let s = Scratch::new();
    s.write("a/a.cu", &kernel("ka", n_a));
    s.write("b/b.cu", &kernel("kb", 2));
    s
}

/// The part `name` of `s`: its one file, for `archs`.
fn part<const N: usize>(s: &Scratch, name: &str, archs: [&str; N]) -> Build {
    let mut b = build_of(s.path(), "out", &format!("{name}/{name}.cu"), archs);
    b.name(name);
    b
}

/// Part `a` of `s`, spilling: 64 values live under a cap of 16 registers.
fn spilling_a(s: &Scratch) -> Build {
    let mut a = part(s, "a", ["sm_80"]);
    a.max_registers("a/a.cu", 16);
    a
}

/// Kernel `ka`'s registers and resident warps at its best launch on sm_80, as the last build
/// into `s` wrote them.
fn registers(s: &Scratch) -> (u32, u32) {
    let path = s.path().join("out/occ/manifest.json");
    let m =
        occ_model::schema::manifest::Manifest::from_json(&s.read("out/occ/manifest.json"), &path)
            .expect("manifest");
    let k = &m.kernels.iter().find(|k| k.name == "ka").expect("ka").archs["sm_80"];
    (
        k.facts.registers,
        k.best.as_ref().expect("a best launch").active_warps_per_sm,
    )
}

#[test]
fn the_gate_gives_the_same_verdict_whatever_the_order_of_the_builds() {
    // Part a tolerates more registers than the default threshold; part b
    // does not. Part a's kernel gains registers at the same occupancy.
    let verdicts: Vec<(String, Result<(), String>)> = [["a", "b"], ["b", "a"]]
        .iter()
        .map(|order| {
            let s = two_parts(2);
            let build = |name: &str| {
                let mut b = part(&s, name, ["sm_80"]);
                if name == "a" {
                    b.register_threshold(200);
                }
                b
            };
            for name in order {
                build(name)
                    .try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]))
                    .expect("bless");
            }
            let before = registers(&s);
            s.write("a/a.cu", &kernel("ka", 8));
            // A later run of the build script.
            let s2 = Scratch::new();
            for file in ["a/a.cu", "b/b.cu", "occ.lock"] {
                s2.write(file, &s.read(file));
            }
            let mut result = Ok(());
            for name in order {
                let mut b = part(&s2, name, ["sm_80"]);
                if *name == "a" {
                    b.register_threshold(200);
                }
                if let Err(e) = b.try_compile_with(&build_env(&[])) {
                    result = Err(format!("{name}: {e}"));
                }
            }
            // The kernel did gain registers past the default threshold, at
            // the same occupancy.
            let after = registers(&s2);
            assert!(after.0 > before.0 + 8, "{before:?} -> {after:?}");
            assert_eq!(before.1, after.1, "{before:?} -> {after:?}");
            (order.join(","), result)
        })
        .collect();
    assert_eq!(verdicts[0].1, verdicts[1].1, "{verdicts:#?}");
    assert_eq!(
        verdicts[0].1,
        Ok(()),
        "part a's own threshold judges part a"
    );
}

#[test]
fn a_part_that_fails_its_spills_gate_is_not_hidden_by_a_later_parts_bless() {
    let s = two_parts(64);
    let bless = build_env(&[("OCC_BLESS", Some("1"))]);
    let e = spilling_a(&s)
        .deny_spills()
        .try_compile_with(&bless)
        .expect_err("a spills");
    assert_eq!(e.kind(), ErrorKind::Gate, "{e}");
    let b = part(&s, "b", ["sm_80"])
        .try_compile_with(&bless)
        .expect("b itself passes");
    assert!(
        !s.path().join("occ.lock").exists(),
        "a lock blessed without part a's failure: {:?}",
        b.directives().warnings()
    );
    assert!(
        b.directives()
            .warnings()
            .iter()
            .any(|w| w.contains("not written") && w.contains("`a`")),
        "{:?}",
        b.directives().warnings()
    );
}

#[test]
fn a_build_from_the_lock_applies_deny_spills_as_a_build_with_nvcc_does() {
    let s = two_parts(64);
    spilling_a(&s)
        .try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]))
        .expect("bless the spilling kernel");
    let with_nvcc = spilling_a(&s)
        .deny_spills()
        .try_compile_with(&build_env(&[]))
        .expect_err("spills denied with nvcc");
    let from_lock = spilling_a(&s)
        .deny_spills()
        .try_compile_with(&build_env(&[("OCC_NO_NVCC", Some("1"))]))
        .expect_err("spills denied from the lock");
    assert_eq!(from_lock.kind(), ErrorKind::Gate, "{from_lock}");
    assert_eq!(from_lock.kind(), with_nvcc.kind());
    assert!(from_lock.to_string().contains("ka on sm_80"), "{from_lock}");
}

#[test]
fn a_build_from_the_lock_names_every_arch_the_lock_lacks() {
    // Part b records sm_80 and sm_90, part a sm_80 only: the lock's archs
    // are both, but it has no sm_90 numbers of part a's kernel.
    let s = two_parts(2);
    let bless = build_env(&[("OCC_BLESS", Some("1"))]);
    part(&s, "a", ["sm_80"])
        .try_compile_with(&bless)
        .expect("a");
    part(&s, "b", ["sm_80", "sm_90"])
        .try_compile_with(&bless)
        .expect("b");
    let no_nvcc = build_env(&[("OCC_NO_NVCC", Some("1"))]);
    let s2 = Scratch::new();
    for file in ["a/a.cu", "b/b.cu", "occ.lock"] {
        s2.write(file, &s.read(file));
    }
    let e = part(&s2, "a", ["sm_80", "sm_90"])
        .try_compile_with(&no_nvcc)
        .expect_err("no sm_90 numbers of ka");
    let text = e.to_string();
    assert!(text.contains("sm_90") && text.contains("ka"), "{text}");
    // Two archs the lock has no numbers of at all: one message names both.
    let e = part(&s2, "b", ["sm_80", "sm_86", "sm_89"])
        .try_compile_with(&no_nvcc)
        .expect_err("no sm_86, sm_89");
    let text = e.to_string();
    assert!(text.contains("sm_86") && text.contains("sm_89"), "{text}");
}
