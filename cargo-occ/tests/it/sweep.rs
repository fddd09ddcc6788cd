//! Live tests of register-cap sweeps (`cargo occ sweep --json`, whose runner
//! lives in cargo-occ, and the `occ_model::model::sweep` model) and
//! `Build::max_registers`, against ptxas run by the test itself.

use crate::occ;
use occ_build::Build;
use occ_model::model::sweep::{self, KernelSweep, Method};
use occ_model::schema::manifest::Manifest;
use occ_tests::{build_env, nvcc, Scratch};
use std::path::Path;
use std::process::Command;

/// n-body forces, 8 bodies per step: about 56 registers uncapped on sm_80;
/// ptxas fits it into 40 without spilling but spills at 32.
const FORCES: &str = include_str!("../../../tests/fixtures/cu/sweep/forces.cu");

/// The same body with `__launch_bounds__(256)` (`.maxntid`), which makes
/// ptxas ignore `-maxrregcount`.
fn bounded_forces() -> String {
    FORCES.replace("void forces8", "void __launch_bounds__(256) bounded8")
}

const SAXPY: &str = include_str!("../../../tests/fixtures/cu/sweep/saxpy.cu");

fn build(s: &Scratch, setup: impl FnOnce(&mut Build)) -> Manifest {
    let mut b = s.build(["sm_80"]);
    setup(&mut b);
    match b.try_compile_with(&build_env(&[])) {
        Ok(report) => report.manifest().expect("manifest").clone(),
        Err(e) => panic!("build failed: {e}"),
    }
}

/// Registers and spill bytes (stores, loads) of `kernel`, read by this test
/// from `nvcc -Xptxas -v` output with `extra` flags: not our parser.
fn by_hand(source: &Path, kernel: &str, extra: &[&str]) -> (u32, u64, u64) {
    let mut cmd = Command::new(nvcc());
    cmd.args(["-cubin", "-arch=sm_80", "-Xptxas", "-v", "-o", "/dev/null"])
        .args(extra)
        .arg(source);
    resources_by_hand(cmd, kernel)
}

/// Registers and spill bytes of `kernel` in the `-v` log of `cmd`, read with
/// plain string handling.
fn resources_by_hand(mut cmd: Command, kernel: &str) -> (u32, u64, u64) {
    let out = cmd.output().expect("run nvcc/ptxas");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    let lines: Vec<&str> = log.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.contains(&format!("Compiling entry function '{kernel}'")))
        .unwrap_or_else(|| panic!("no {kernel} in\n{log}"));
    let mut spills = (0, 0);
    for line in &lines[start + 1..] {
        if line.contains("bytes spill stores") {
            let nums: Vec<u64> = line
                .split(|c: char| !c.is_ascii_digit())
                .filter(|w| !w.is_empty())
                .map(|w| w.parse().unwrap())
                .collect();
            spills = (nums[1], nums[2]);
        }
        if let Some(rest) = line.split("Used ").nth(1) {
            let regs: u32 = rest.split(' ').next().unwrap().parse().unwrap();
            return (regs, spills.0, spills.1);
        }
    }
    panic!("no Used line for {kernel} in\n{log}");
}

/// `f` over `items` on two threads (the machines running these are small),
/// results in order.
fn in_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let half = items.len().div_ceil(2);
    std::thread::scope(|scope| {
        let (a, b) = items.split_at(half);
        let f = &f;
        let second = scope.spawn(move || b.iter().map(f).collect::<Vec<R>>());
        let mut out: Vec<R> = a.iter().map(f).collect();
        out.extend(second.join().expect("by-hand thread"));
        out
    })
}

/// The ptxas beside the installed nvcc (what `cargo occ sweep` runs).
fn ptxas() -> std::path::PathBuf {
    nvcc().with_file_name("ptxas")
}

/// `cargo occ sweep NAME --arch sm_80 --method M --json` on the build in
/// `s/out/occ`, with the installed nvcc.
fn sweep_of(s: &Scratch, m: &Manifest, name: &str, method: Method) -> KernelSweep {
    let method = match method {
        Method::Auto => "auto",
        Method::Maxrregcount => "maxrregcount",
        Method::Maxnreg => "maxnreg",
    };
    let manifest = s.path().join("out/occ/manifest.json");
    let manifest = manifest.to_str().expect("utf-8 path");
    let args = [
        "sweep",
        name,
        "--arch",
        "sm_80",
        "--method",
        method,
        "--json",
        "--manifest",
        manifest,
    ];
    let nvcc = nvcc();
    let (code, out, err) = occ(s.path(), &args, &[("NVCC", nvcc.to_str())], None).parts();
    assert!(code == 0, "cargo occ sweep failed:\n{err}");
    let sweep: sweep::Sweep = serde_json::from_str(&out).expect("sweep JSON");
    assert_eq!(sweep.package, m.package);
    assert_eq!(sweep.kernels.len(), 1);
    sweep.kernels.into_iter().next().unwrap()
}

#[test]
fn free_caps_spilling_caps_and_ptxas_agree() {
    let s = Scratch::new();
    let src = s.write("kernels/forces.cu", FORCES);
    s.write("kernels/saxpy.cu", SAXPY);
    let m = build(&s, |_| {});
    let k = sweep_of(&s, &m, "forces8", Method::Auto);
    assert_eq!(k.method, Method::Maxrregcount);

    // Baseline: what nvcc gives without a cap.
    let (regs, st, ld) = by_hand(&src, "forces8", &[]);
    assert_eq!(
        (
            k.baseline.registers,
            k.baseline.spill_stores,
            k.baseline.spill_loads
        ),
        (regs, st, ld)
    );
    assert!(k.baseline.occupancy < 1.0, "{k:#?}");

    // Every cap: the numbers equal nvcc -maxrregcount N run by hand.
    assert!(k.points.len() >= 3, "want at least three caps: {k:#?}");
    let hands = in_parallel(&k.points, |p| {
        let n = p.cap.unwrap().to_string();
        by_hand(&src, "forces8", &["-maxrregcount", &n])
    });
    let mut checked = 0;
    for (p, hand) in k.points.iter().zip(hands) {
        let cap = p.cap.unwrap();
        assert_eq!(
            (p.registers, p.spill_stores, p.spill_loads),
            hand,
            "cap {cap}"
        );
        assert!(p.registers <= cap && p.applied, "cap {cap}: {p:#?}");
        assert!(
            p.occupancy > k.baseline.occupancy || p.registers < cap,
            "cap {cap}"
        );
        checked += 1;
    }
    assert!(checked >= 3);

    // Caps come from the model: strictly decreasing, each below the baseline.
    let caps: Vec<u32> = k.points.iter().map(|p| p.cap.unwrap()).collect();
    assert!(caps.windows(2).all(|w| w[0] > w[1]), "{caps:?}");
    assert!(caps[0] < k.baseline.registers);

    // Free: higher occupancy with zero spills; some cap is free here, and
    // the lowest (32) spills: ptxas by hand says so.
    assert!(k.points.iter().any(|p| p.free), "{k:#?}");
    for p in &k.points {
        assert_eq!(
            p.free,
            p.spill_bytes == 0 && p.occupancy > k.baseline.occupancy
        );
    }
    let first = k
        .points
        .iter()
        .position(|p| p.first_spill)
        .expect("a cap that spills");
    assert!(k.points[first].spill_bytes > 0);
    assert!(k.points[..first].iter().all(|p| p.spill_bytes == 0));
    assert_eq!(k.points.iter().filter(|p| p.first_spill).count(), 1);
    let (_, st32, ld32) = by_hand(&src, "forces8", &["-maxrregcount", "32"]);
    assert!(st32 + ld32 > 0, "expected 32 registers to spill");

    // Already at 100%: nothing to try.
    let sax = sweep_of(&s, &m, "saxpy", Method::Auto);
    assert_eq!(sax.baseline.occupancy, 1.0);
    assert!(sax.points.is_empty(), "{sax:#?}");
    assert_eq!(
        sax.baseline.registers,
        by_hand(&s.path().join("kernels/saxpy.cu"), "saxpy", &[]).0
    );

    // The JSON round-trips.
    let sweep = sweep::Sweep {
        schema: sweep::SWEEP_SCHEMA,
        package: String::new(),
        ptxas: String::new(),
        kernels: vec![k.clone()],
    };
    let text = serde_json::to_string(&sweep).unwrap();
    let back: sweep::Sweep = serde_json::from_str(&text).unwrap();
    assert_eq!(back, sweep);
}

#[test]
fn launch_bounds_override_maxrregcount_and_maxnreg_does_not() {
    let s = Scratch::new();
    s.write("kernels/bounded.cu", &bounded_forces());
    let m = build(&s, |_| {});
    let ptx = m.kernels[0].archs["sm_80"].ptx.as_deref();
    let ptx_path = s
        .path()
        .join("out/occ")
        .join(ptx.expect("a live build's PTX"));
    let ptx = std::fs::read_to_string(&ptx_path).unwrap();
    // Forced --maxrregcount: ptxas ignores it (silently, for .maxntid alone).
    // (nvcc -maxrregcount also hands the cap to cicc, which changes the PTX a
    // little, so the check is against ptxas on the same PTX.)
    let forced = sweep_of(&s, &m, "bounded8", Method::Maxrregcount);
    let mut cmd = Command::new(ptxas());
    cmd.args([
        "-arch=sm_80",
        "-v",
        "--maxrregcount",
        "32",
        "-o",
        "/dev/null",
    ])
    .arg(&ptx_path);
    let hand = resources_by_hand(cmd, "bounded8");
    let at32 = forced
        .points
        .iter()
        .find(|p| p.cap == Some(32))
        .expect("cap 32");
    assert_eq!((at32.registers, at32.spill_stores, at32.spill_loads), hand);
    assert!(
        hand.0 > 32,
        "ptxas kept to the cap despite .maxntid: {hand:?}"
    );
    assert!(!at32.applied);
    assert!(forced.points.iter().all(|p| !p.free || p.applied));
    // Auto writes .maxnreg; ptxas keeps to it. Check against ptxas run here
    // on the build's PTX with `.maxnreg N` added after `.maxntid` by hand.
    let auto = sweep_of(&s, &m, "bounded8", Method::Auto);
    assert_eq!(auto.method, Method::Maxnreg);
    assert!(!auto.notes.is_empty());
    assert!(auto.points.len() >= 3, "{auto:#?}");
    assert_eq!(ptx.matches(".maxntid 256, 1, 1").count(), 1);
    let hands = in_parallel(&auto.points, |p| {
        let cap = p.cap.unwrap();
        let edited = ptx.replace(
            ".maxntid 256, 1, 1",
            &format!(".maxntid 256, 1, 1\n.maxnreg {cap}"),
        );
        let file = s.write(&format!("hand/maxnreg{cap}.ptx"), &edited);
        let mut cmd = Command::new(ptxas());
        cmd.args(["-arch=sm_80", "-v", "-o", "/dev/null"])
            .arg(&file);
        resources_by_hand(cmd, "bounded8")
    });
    for (p, hand) in auto.points.iter().zip(hands) {
        let cap = p.cap.unwrap();
        assert!(p.applied && p.registers <= cap, "{p:#?}");
        assert_eq!(
            (p.registers, p.spill_stores, p.spill_loads),
            hand,
            "cap {cap}"
        );
    }
}

#[test]
fn max_registers_caps_the_file_of_a_kernel_and_is_recorded() {
    let s = Scratch::new();
    let src = s.write("kernels/forces.cu", FORCES);
    s.write("kernels/saxpy.cu", SAXPY);
    let m = build(&s, |b| {
        b.max_registers("forces8", 40);
    });
    let hand = by_hand(&src, "forces8", &["-maxrregcount", "40"]);
    let k = m.kernels.iter().find(|k| k.name == "forces8").unwrap();
    let a = &k.archs["sm_80"];
    assert_eq!(
        (
            a.facts.registers,
            u64::from(a.facts.spill_stores),
            u64::from(a.facts.spill_loads)
        ),
        hand
    );
    assert_eq!(a.facts.maxrregcount, Some(40));
    let sax = m.kernels.iter().find(|k| k.name == "saxpy").unwrap();
    assert_eq!(sax.archs["sm_80"].facts.maxrregcount, None);
    // A sweep of that build starts from the capped build.
    let swept = sweep_of(&s, &m, "forces8", Method::Auto);
    assert_eq!(
        (
            swept.baseline.registers,
            swept.baseline.spill_stores,
            swept.baseline.spill_loads
        ),
        hand
    );
    assert!(swept.notes.iter().any(|n| n.contains("-maxrregcount 40")));
    // Second build: the cap is placed from the last manifest; same result.
    let again = build(&s, |b| {
        b.max_registers("forces8", 40);
    });
    assert_eq!(again, m);
    // The kernel moves to another file, its old file stays: the cap follows it.
    s.write(
        "kernels/forces.cu",
        include_str!("../../../tests/fixtures/cu/sweep/other.cu"),
    );
    let moved = s.write("kernels/moved.cu", FORCES);
    let after_move = build(&s, |b| {
        b.max_registers("forces8", 40);
    });
    let k = after_move
        .kernels
        .iter()
        .find(|k| k.name == "forces8")
        .unwrap();
    assert_eq!(k.source, "kernels/moved.cu");
    assert_eq!(k.archs["sm_80"].facts.maxrregcount, Some(40));
    let other = after_move
        .kernels
        .iter()
        .find(|k| k.name == "other")
        .unwrap();
    assert_eq!(other.archs["sm_80"].facts.maxrregcount, None);
    assert_eq!(
        k.archs["sm_80"].facts.registers,
        by_hand(&moved, "forces8", &["-maxrregcount", "40"]).0
    );
    std::fs::remove_file(&moved).unwrap();
    s.write("kernels/forces.cu", FORCES);
    // By file name; an unknown target is an error naming it.
    let by_file = build(&s, |b| {
        b.max_registers("forces.cu", 48);
    });
    let a = &by_file
        .kernels
        .iter()
        .find(|k| k.name == "forces8")
        .unwrap()
        .archs["sm_80"];
    assert_eq!(a.facts.maxrregcount, Some(48));
    assert_eq!(
        a.facts.registers,
        by_hand(&src, "forces8", &["-maxrregcount", "48"]).0
    );
    let mut b = Build::new();
    b.root(s.path())
        .out_dir(s.path().join("out2"))
        .glob("kernels/*.cu")
        .arch("sm_80")
        .max_registers("forces9", 40);
    let err = b.try_compile_with(&build_env(&[])).unwrap_err().to_string();
    assert!(err.contains("forces9") && err.contains("forces8"), "{err}");
}

/// `cargo occ sweep --arch sm_80 --manifest ...` as text, with the
/// installed nvcc.
fn sweep_text(s: &Scratch) -> String {
    let manifest = s.path().join("out/occ/manifest.json");
    let manifest = manifest.to_str().expect("utf-8 path");
    let args = ["sweep", "--arch", "sm_80", "--manifest", manifest];
    let nvcc = nvcc();
    let (code, text, err) = occ(s.path(), &args, &[("NVCC", nvcc.to_str())], None).parts();
    assert!(code == 0, "cargo occ sweep failed:\n{text}{err}");
    text
}

/// The `in the source` cell of the row for `cap` in `kernel`'s table.
fn source_cell(text: &str, kernel: &str, cap: u32) -> String {
    let table: Vec<&str> = text
        .split("\n\n")
        .find(|t| t.starts_with(kernel))
        .unwrap_or_else(|| panic!("no table for {kernel} in\n{text}"))
        .lines()
        .collect();
    let row = table
        .iter()
        .find(|l| l.split_whitespace().next() == Some(cap.to_string().as_str()))
        .unwrap_or_else(|| panic!("no row for cap {cap} in\n{}", table.join("\n")));
    let start = row
        .find("__")
        .unwrap_or_else(|| panic!("no source text in {row}"));
    row[start..]
        .split_once(')')
        .map(|(text, _)| format!("{text})"))
        .unwrap_or_else(|| panic!("no source text in {row}"))
}

#[test]
fn the_table_says_what_to_write_in_the_source_and_nvcc_keeps_to_it() {
    let s = Scratch::new();
    let free_src = FORCES;
    let bounded_src = bounded_forces();
    s.write("kernels/forces.cu", free_src);
    s.write("kernels/bounded.cu", &bounded_src);
    let m = build(&s, |_| {});
    let text = sweep_text(&s);
    let free = sweep_of(&s, &m, "forces8", Method::Auto);
    let bounded = sweep_of(&s, &m, "bounded8", Method::Auto);
    assert!(!free.points.is_empty() && !bounded.points.is_empty());

    // Without bounds: `__maxnreg__(cap)` on the kernel, or the file's cap.
    assert!(
        text.contains("__maxnreg__(N) on the kernel, or Build::max_registers(\"forces8\", N)"),
        "{text}"
    );
    // With `__launch_bounds__(256)`: nvcc refuses `__maxnreg__` beside it, so
    // the note says so and the cells use the min-blocks argument where one
    // gives the cap exactly.
    assert!(
        text.contains("nvcc refuses __maxnreg__ beside __launch_bounds__"),
        "{text}"
    );
    let mut cells = Vec::new();
    for p in &free.points {
        let cap = p.cap.unwrap();
        let cell = source_cell(&text, "forces8", cap);
        assert_eq!(cell, format!("__maxnreg__({cap})"));
        cells.push(("forces8", cap, cell));
    }
    let mut by_bounds = 0;
    for p in &bounded.points {
        let cap = p.cap.unwrap();
        let cell = source_cell(&text, "bounded8", cap);
        if cell.starts_with("__launch_bounds__(256, ") {
            by_bounds += 1;
        } else {
            assert_eq!(cell, format!("__maxnreg__({cap})"));
        }
        cells.push(("bounded8", cap, cell));
    }
    assert!(by_bounds > 0, "no cap written as launch bounds:\n{text}");

    // Each cell, written into the source in place of the kernel's own
    // directive, keeps nvcc at or below the cap.
    let hands = in_parallel(&cells, |(kernel, cap, cell)| {
        let source = if *kernel == "forces8" {
            free_src.replace("void forces8", &format!("void {cell} forces8"))
        } else {
            bounded_src.replace("__launch_bounds__(256)", cell)
        };
        let file = s.write(&format!("hand/{kernel}{cap}.cu"), &source);
        (by_hand(&file, kernel, &[]), *cap, cell.clone())
    });
    for ((regs, _, _), cap, cell) in hands {
        assert!(regs <= cap, "{cell}: {regs} registers above the cap {cap}");
    }
}
