//! `cargo occ explain` as a process on a real build (the real nvcc): launch
//! bounds with their min blocks, spills shown even at full occupancy (with
//! the lines they are at and the peak register pressure), and the text to
//! write in the source to apply a register cap.

use crate::occ;
use occ_model::schema::manifest::KernelArch;
use occ_model::schema::manifest::Manifest;
use occ_tests::{build_env, kernels_build, Scratch};
use std::path::PathBuf;

/// `heavy`: `__launch_bounds__(1024, 2)`, capped at 32 registers, spills;
/// `wide`: the same body without bounds, limited by its registers.
const KERNELS: &str = include_str!("../../../tests/fixtures/cu/explain/k.cu");

/// The kernels built in-process for sm_80; the manifest and its path.
fn build(s: &Scratch) -> (Manifest, PathBuf) {
    s.write("kernels/k.cu", KERNELS);
    let report = kernels_build(s.path(), &s.path().join("out"), ["sm_80"])
        .try_compile_with(&build_env(&[]))
        .unwrap_or_else(|e| panic!("build failed: {e}"));
    (
        report.manifest().expect("manifest").clone(),
        report.out_dir.join("manifest.json"),
    )
}

/// `cargo occ explain KERNEL --arch sm_80 --manifest FILE`: exit code, stdout.
fn explain(s: &Scratch, manifest: &std::path::Path, kernel: &str) -> (i32, String) {
    let mf = manifest.to_str().expect("utf-8 path");
    let args = ["explain", kernel, "--arch", "sm_80", "--manifest", mf];
    let (code, out, _) = occ(s.path(), &args, &[], None).parts();
    (code, out)
}

fn arch<'m>(m: &'m Manifest, kernel: &str) -> &'m KernelArch {
    &m.kernels
        .iter()
        .find(|k| k.name == kernel)
        .unwrap_or_else(|| panic!("no {kernel} in the manifest"))
        .archs["sm_80"]
}

/// The line of `out` that starts (after its indent) with `prefix`.
fn line<'o>(out: &'o str, prefix: &str) -> &'o str {
    out.lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?} in\n{out}"))
}

#[test]
fn launch_bounds_spills_and_source_caps_are_all_shown() {
    let s = Scratch::new();
    let (m, mf) = build(&s);

    // heavy: the bounds' min blocks are shown, and full occupancy does not
    // hide the spills ptxas reported.
    let heavy = arch(&m, "heavy");
    let bounds = &heavy.facts.launch_bounds;
    assert_eq!(
        (bounds.max_threads_per_block(), bounds.min_blocks_per_sm),
        (Some(1024), Some(2)),
        "test premise: {heavy:?}"
    );
    assert!(heavy.facts.spill_bytes() > 0, "test premise: {heavy:?}");
    assert_eq!(
        heavy.best.as_ref().expect("a best launch").occupancy,
        1.0,
        "test premise: {heavy:?}"
    );
    let (code, out) = explain(&s, &mf, "heavy");
    assert_eq!(code, 0, "{out}");
    let lb = line(&out, "launch bounds:");
    assert!(lb.contains("__launch_bounds__(1024, 2)"), "{lb}");
    assert!(
        lb.contains("1024 threads") && lb.contains("2 blocks"),
        "{lb}"
    );
    let spills = line(&out, "spills:");
    for bytes in [heavy.facts.spill_stores, heavy.facts.spill_loads] {
        assert!(spills.contains(&format!("{bytes} B")), "{spills}");
    }
    // Where: the line that spills most first (the build's nvdisasm), and
    // the peak register pressure.
    let lines = heavy.lines.as_ref().expect("the build located the spills");
    let worst = lines.worst().expect("a spill site");
    let first = line(&out, "at kernels/");
    assert!(
        first.starts_with(&format!("at {}:{}", worst.file, worst.line))
            && first.ends_with(&format!(
                "{} B stores, {} B loads",
                worst.stores, worst.loads
            )),
        "{first} for {worst:?}"
    );
    let peak = lines.peak_pressure.as_ref().expect("a peak");
    assert_eq!(
        line(&out, "peak register pressure:"),
        format!(
            "peak register pressure: {} live at {}:{}",
            peak.registers, peak.file, peak.line
        )
    );
    assert!(!out.contains("nothing to gain"), "{out}");
    // The way out of the spills: fewer min blocks let ptxas use more
    // registers (1 block of 1024 threads: the register file's 64 per thread).
    assert!(
        out.contains("__launch_bounds__(1024, 1)") && out.contains("64 registers"),
        "{out}"
    );

    // wide: registers limit it; the hint says what to write for the cap.
    let wide = arch(&m, "wide");
    assert_eq!(
        wide.best.as_ref().expect("a best launch").limiters,
        ["registers"],
        "test premise: {wide:?}"
    );
    assert!(wide.facts.launch_bounds.max_threads_per_block().is_none());
    let (code, out) = explain(&s, &mf, "wide");
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("launch bounds:"), "{out}");
    assert!(!out.contains("spills:"), "{out}");
    let regs = line(&out, "registers: use at most");
    let cap: u32 = regs
        .trim_start_matches("registers: use at most ")
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no cap in {regs}"));
    assert!(cap < wide.facts.registers, "{regs}");
    assert!(regs.contains(&format!("__maxnreg__({cap})")), "{regs}");
    assert!(
        regs.contains(&format!("Build::max_registers(\"wide\", {cap})")),
        "{regs}"
    );
    let best = wide.best.as_ref().expect("a best launch");
    let block = best.block_size;
    let target = best.active_blocks_per_sm + 1;
    assert!(
        out.contains(&format!("__launch_bounds__({block}, {target})")),
        "{out}"
    );
}

/// Without `--block`, explain judges a kernel at its declared launch and
/// names what lifts it: the registers to drop and the launch bounds.
#[test]
fn the_declared_launch_is_explained_with_its_lift() {
    let s = Scratch::new();
    s.write(
        "kernels/k.cu",
        include_str!("../../../tests/fixtures/cu/declared/k.cu"),
    );
    let report = kernels_build(s.path(), &s.path().join("out"), ["sm_80"])
        .launch("fast_argmin_*", occ_build::Launch::block(1024))
        .try_compile_with(&build_env(&[]))
        .unwrap_or_else(|e| panic!("build failed: {e}"));
    let mf = report.out_dir.join("manifest.json");
    let k = arch(report.manifest().expect("manifest"), "fast_argmin_f32");
    let d = k.declared.as_ref().expect("declared");
    let hint = d
        .lift
        .as_ref()
        .and_then(|l| l.registers)
        .expect("test premise: 50% at 1024, fewer registers lift it");
    let (code, out) = explain(&s, &mf, "fast_argmin_f32");
    assert_eq!(code, 0, "{out}");
    let launch = line(&out, "launch:");
    assert!(
        launch.starts_with("launch: 1024 threads/block")
            && launch.contains("the declared launch 1024, by build.rs `fast_argmin_*`"),
        "{launch}"
    );
    assert!(
        line(&out, "occupancy:").starts_with("occupancy: 50.0%"),
        "{out}"
    );
    assert!(
        line(&out, "what if").contains("1 -> 2, occupancy 50.0% -> 100.0%"),
        "{out}"
    );
    let regs = line(&out, "registers: use at most");
    assert!(
        regs.starts_with(&format!(
            "registers: use at most {} per thread ({} fewer)",
            hint.max_registers, hint.drop
        )),
        "{regs}"
    );
    assert!(
        line(&out, "__launch_bounds__(1024, 2)").contains("reaches the target"),
        "{out}"
    );
    // `--block` still asks about another launch.
    let mfs = mf.to_str().expect("utf-8 path");
    let args = [
        "explain",
        "fast_argmin_f32",
        "--block",
        "256",
        "--manifest",
        mfs,
    ];
    let (code, out, _) = occ(s.path(), &args, &[], None).parts();
    assert_eq!(code, 0, "{out}");
    assert!(
        line(&out, "launch:").starts_with("launch: 256 threads/block"),
        "{out}"
    );
    assert!(!out.contains("declared launch"), "{out}");
}

/// A kernel whose launch the C++ host code declares is explained at that
/// launch, named by its line; a run-time launch is listed as such, and a
/// `.launch(..)` that contradicts the code says so.
#[test]
fn launches_of_the_cpp_host_code_are_explained_where_they_are() {
    let s = Scratch::new();
    s.write(
        "kernels/k.cu",
        include_str!("../../../tests/fixtures/cu/code_launches/k.cu"),
    );
    let report = kernels_build(s.path(), &s.path().join("out"), ["sm_80"])
        .launch("fill", occ_build::Launch::block(128))
        .try_compile_with(&build_env(&[]))
        .unwrap_or_else(|e| panic!("build failed: {e}"));
    let mf = report.out_dir.join("manifest.json");
    let (code, out) = explain(&s, &mf, "scale");
    assert_eq!(code, 0, "{out}");
    let launch = line(&out, "launch:");
    assert!(
        launch.starts_with("launch: 256 threads/block")
            && launch.contains("(launched at 256 from kernels/k.cu:29,"),
        "{launch}"
    );
    assert_eq!(
        line(&out, "launched at"),
        "launched at 256 from kernels/k.cu:29",
        "{out}"
    );
    let (_, out) = explain(&s, &mf, "rows_k<64>");
    assert!(
        line(&out, "launch:").contains("launched at 64 from kernels/k.cu:30"),
        "{out}"
    );
    let (_, out) = explain(&s, &mf, "saxpy");
    assert!(
        line(&out, "launch:").contains("(the best block size)"),
        "{out}"
    );
    assert_eq!(
        line(&out, "launched at"),
        "launched at run time from kernels/k.cu:31 (block `threads`)",
        "{out}"
    );
    let (_, out) = explain(&s, &mf, "fill");
    assert!(
        line(&out, "note:").contains(
            "build.rs `fill` declares fill at 128, but kernels/k.cu:32 \
                                      launches it at 512"
        ),
        "{out}"
    );
}
