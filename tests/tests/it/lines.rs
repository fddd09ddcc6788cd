//! Stage 5½ with the real nvcc and nvdisasm: spills and register pressure
//! by source line.
//!
//! - A template device function inlined from a header names the header's
//!   line and its loop (tests/fixtures/cu/lines, found by their `occ-test:`
//!   comments), on every arch it spills on; exactly the kernel × archs
//!   whose registers matter (spills, a register limit, a cliff near) have
//!   lines, their sites add up to ptxas's spill bytes, over the spilling
//!   fixtures of the suite, and nvdisasm over their code alone (`-fun`)
//!   finds what it finds over the whole cubin.
//! - `.deny_spills()` names the line in its error, the summary warning and
//!   `report.txt` too, relative to the crate under a non-ASCII folder; a
//!   spill regression against the lock names it as well.
//! - A toolkit without nvdisasm (the real one, hard-linked without it)
//!   builds today's manifest with one note, watching the folder nvdisasm
//!   would be installed into; installed, it gives lines and is watched.
//!
//! That a warm build reads the records and writes the same manifest, byte
//! for byte, as a cold one, and that a changed record is recomputed, is
//! tested on nvcc 13.5's recorded runs in `replay.rs`.

use occ_model::compiler::lines::{source_lines, LifeRanges, LineInfo, SourceLines};
use occ_model::model::cliff::registers_matter;
use occ_model::schema::manifest::Manifest;
use occ_tests::{build_env, build_of, fixture, nvcc, Scratch};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The 1-based line of `text` that carries `marker`.
fn line_of(text: &str, marker: &str) -> u32 {
    let i = text
        .lines()
        .position(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("no `{marker}` in the fixture"));
    u32::try_from(i + 1).expect("a short file")
}

/// Exactly the kernel × archs whose registers matter have lines (the
/// others are never disassembled), and their sites add up to ptxas's spill
/// bytes.
fn sites_add_up(m: &Manifest) {
    for k in &m.kernels {
        for (arch, a) in &k.archs {
            assert_eq!(
                a.lines.is_some(),
                registers_matter(a),
                "{} on {arch}: lines where registers matter, only there: {:?}",
                k.name,
                a.lines
            );
            let Some(lines) = &a.lines else { continue };
            let stores: u32 = lines.spills.iter().map(|s| s.stores).sum();
            let loads: u32 = lines.spills.iter().map(|s| s.loads).sum();
            assert_eq!(
                (stores, loads),
                (a.facts.spill_stores, a.facts.spill_loads),
                "{} on {arch}: {lines:?}",
                k.name
            );
            assert!(
                lines.peak_pressure.is_some(),
                "{} on {arch}: no peak",
                k.name
            );
        }
    }
}

#[test]
fn a_header_template_spills_at_the_header_line_and_the_sites_add_up() {
    let s = Scratch::new();
    s.copy_cu("lines", "kernels");
    for case in ["sweep", "explain", "macro_new_user"] {
        s.copy_cu(case, &format!("kernels/{case}"));
    }
    let mut build = s.build(["sm_75", "sm_80", "sm_90", "sm_120"]);
    build.glob("kernels/*/*.cu");
    let report = build
        .try_compile_with(&build_env(&[]))
        .unwrap_or_else(|e| panic!("build: {e}"));
    let m = report.manifest().expect("manifest");
    sites_add_up(m);
    let spilling = m
        .kernels
        .iter()
        .flat_map(|k| k.archs.values())
        .filter(|a| a.facts.spills())
        .count();
    assert!(spilling >= 8, "only {spilling} spilling kernel x archs");

    let header = fixture("cu/lines/spill.cuh");
    let (spills, loop_line) = (
        line_of(&header, "occ-test: header spills"),
        line_of(&header, "occ-test: header loop"),
    );
    let churner = m
        .kernels
        .iter()
        .find(|k| k.short_name == "churner")
        .expect("churner");
    let mut spilled_on = Vec::new();
    for (arch, a) in &churner.archs {
        let lines = a.lines.as_ref().expect("lines");
        if !a.facts.spills() {
            continue;
        }
        spilled_on.push(arch.clone());
        let worst = lines.worst().expect("a site");
        assert_eq!(
            (worst.file.as_str(), worst.line, worst.loop_line),
            ("kernels/spill.cuh", spills, Some(loop_line)),
            "churner on {arch}: {lines:?}"
        );
        assert!(
            lines.spills.iter().all(|s| s.file == "kernels/spill.cuh"),
            "churner on {arch}: {lines:?}"
        );
    }
    // Two blocks of 1024 threads exceed sm_75's and sm_120's threads per
    // SM: ptxas ignores the minimum there and allows 64 registers (sm_75
    // still spills 16 B, sm_120 nothing).
    assert_eq!(spilled_on, ["sm_75", "sm_80", "sm_90"]);

    // The report: where each kernel spills (the table's section) and every
    // site; the summary warning names the line too.
    let report_txt = s.read("out/occ/report.txt");
    let base = &churner.base_name;
    let at = format!("at kernels/spill.cuh:{spills} (loop at :{loop_line})");
    assert!(
        report_txt.contains("where they spill:\n")
            && report_txt.contains(&format!("  {base} on sm_80: {at}")),
        "{report_txt}"
    );
    assert!(
        report_txt.contains("spill sites (nvdisasm)\n"),
        "{report_txt}"
    );
    let sites = report_txt
        .lines()
        .filter(|l| l.starts_with(base.as_str()) && l.contains("kernels/spill.cuh:"))
        .count();
    assert!(sites >= 3, "{report_txt}");
    assert!(
        report
            .directives()
            .warnings()
            .iter()
            .any(|w| w.contains(" registers: ") && w.contains(" at kernels/")),
        "{:?}",
        report.directives().warnings()
    );

    // calm's registers do not matter anywhere: no lines, and no nvdisasm
    // run over its code.
    let calm = m.kernels.iter().find(|k| k.name == "calm").expect("calm");
    for (arch, a) in &calm.archs {
        assert!(!registers_matter(a), "calm on {arch}: {a:?}");
        assert!(a.lines.is_none(), "calm on {arch}: {:?}", a.lines);
    }
    // Its registers matter on sm_120 (two blocks of 1024 threads, no
    // spill): its lines are its peak pressure alone, in the header's loop.
    let a = &churner.archs["sm_120"];
    let lines = a.lines.as_ref().expect("churner on sm_120: lines");
    assert!(lines.spills.is_empty(), "churner on sm_120: {lines:?}");
    let peak = lines.peak_pressure.as_ref().expect("a peak");
    assert!(
        peak.file == "kernels/spill.cuh"
            && (loop_line..=spills + 2).contains(&peak.line)
            && peak.registers <= a.facts.registers,
        "churner on sm_120: {peak:?}"
    );

    // nvdisasm ran once over the located kernels' code alone (`-fun -plr`),
    // the line table read from the cubin (`LineInfo::from_cubin`): what it
    // found is what `nvdisasm -g` and `-plr` over the whole cubin find.
    let root = s.path().display().to_string();
    let canonical = s.path().canonicalize().expect("canonical root");
    let roots = [root.as_str(), canonical.to_str().expect("utf-8")];
    let mut whole: BTreeMap<String, BTreeMap<String, SourceLines>> = BTreeMap::new();
    let mut compared = 0;
    for k in &m.kernels {
        for (arch, a) in &k.archs {
            let Some(lines) = &a.lines else { continue };
            let path = s
                .path()
                .join("out/occ")
                .join(a.cubin.as_deref().unwrap_or_default());
            let bytes = std::fs::read(&path).expect("read the cubin");
            assert!(
                LineInfo::from_cubin(&bytes).is_some(),
                "{}: its line table must be read (else nvdisasm -g runs)",
                path.display()
            );
            let functions = whole
                .entry(a.cubin.clone().unwrap_or_default())
                .or_insert_with(|| {
                    whole_cubin(
                        &s.path()
                            .join("out/occ")
                            .join(a.cubin.as_deref().unwrap_or_default()),
                        &roots,
                    )
                });
            assert_eq!(
                Some(lines),
                functions.get(&k.name),
                "{} on {arch}: -fun and the whole cubin disagree",
                k.name
            );
            compared += 1;
        }
    }
    // Every spilling kernel × arch, and churner on sm_120 at least.
    assert!(
        compared > spilling,
        "only {compared} kernel x archs compared ({spilling} spill)"
    );
}

/// [`SourceLines`] of every function of `cubin`, from nvdisasm run over
/// all of it, read as stage 5½ reads its output.
fn whole_cubin(cubin: &Path, roots: &[&str]) -> BTreeMap<String, SourceLines> {
    let nvdisasm = nvcc().with_file_name("nvdisasm");
    let run = |args: &[&str]| -> String {
        let out = std::process::Command::new(&nvdisasm)
            .args(args)
            .arg(cubin)
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", nvdisasm.display()));
        assert!(
            out.status.success(),
            "nvdisasm {args:?} {}",
            cubin.display()
        );
        String::from_utf8(out.stdout).expect("utf-8")
    };
    let mut info = LineInfo::default();
    for line in run(&["-c", "-g"]).lines() {
        info.line(line);
    }
    let mut ranges = LifeRanges::default();
    for line in run(&["-c", "-plr", "-lrm", "count"]).lines() {
        ranges.line(line);
    }
    source_lines(&info, &ranges, roots)
}

/// `tests/ui/kernels/loop.cu` built as `kernels/<name>` with spills
/// denied: the error's message, and the words that must name its spill
/// (` bytes spill loads at kernels/<name>:<line> (loop at :<line>)`).
fn denied_loop_spill(name: &str) -> (String, String) {
    let s = Scratch::new();
    let text =
        std::fs::read_to_string(occ_tests::workspace_root().join("tests/ui/kernels/loop.cu"))
            .expect("read tests/ui/kernels/loop.cu");
    s.write(&format!("kernels/{name}"), &text);
    let err = s
        .build(["sm_80"])
        .deny_spills()
        .try_compile_with(&build_env(&[]))
        .expect_err("loopspill spills");
    let at = format!(
        " bytes spill loads at kernels/{name}:{} (loop at :{})",
        line_of(&text, "occ-test: spills"),
        line_of(&text, "occ-test: loop")
    );
    (err.to_string(), at)
}

#[test]
fn deny_spills_names_the_line() {
    let (message, at) = denied_loop_spill("loop.cu");
    let line = message
        .lines()
        .find(|l| l.trim_start().starts_with("loopspill on sm_80: "))
        .unwrap_or_else(|| panic!("no loopspill line in:\n{message}"));
    assert!(line.contains(&at), "`{at}` not in `{line}`");
    assert!(line.contains(", peak pressure "), "{line}");
}

#[test]
fn a_spill_in_a_file_with_a_non_ascii_name_is_named_as_the_file_is() {
    // ptxas splits the PTX's escaped `.file` name at its last backslash
    // (`hot \303` / `274.cu`), so nvdisasm prints `hot \303/274.cu` for
    // `hot ü.cu`: decoded as such, it read `kernels/hot �/274.cu`.
    let (message, at) = denied_loop_spill("hot ü€.cu");
    assert!(message.contains(&at), "`{at}` not in:\n{message}");
}

/// Recreates the toolkit `from` at `to` without the files of its `bin/`
/// named in `skip`: `bin/`'s files as copies (nvcc finds its tools beside
/// its own path, and occ looks for nvdisasm there), every other entry as a
/// symlink.
/// Never a hard link: a hard link changes the real file's ctime, which the
/// job cache's toolkit identity covers, so tests running at the same time
/// would see a new toolkit and rerun their jobs.
fn toolkit_without(from: &Path, to: &Path, skip: &[&str]) {
    std::fs::create_dir_all(to.join("bin")).expect("create");
    for entry in std::fs::read_dir(from).expect("list").flatten() {
        let name = entry.file_name();
        if name != "bin" {
            std::os::unix::fs::symlink(entry.path(), to.join(&name)).expect("symlink");
            continue;
        }
        for tool in std::fs::read_dir(entry.path()).expect("list bin").flatten() {
            let (src, dst) = (tool.path(), to.join("bin").join(tool.file_name()));
            if skip.iter().any(|s| tool.file_name() == *s) {
                continue;
            }
            if tool.file_type().expect("file type").is_symlink() {
                let target = std::fs::read_link(&src).expect("read link");
                std::os::unix::fs::symlink(target, &dst).expect("symlink");
            } else if src.is_dir() {
                std::os::unix::fs::symlink(&src, &dst).expect("symlink");
            } else {
                std::fs::copy(&src, &dst).expect("copy");
            }
        }
    }
}

#[test]
fn a_toolkit_without_nvdisasm_builds_without_lines_and_one_note() {
    let real = nvcc();
    let home = real
        .parent()
        .and_then(Path::parent)
        .expect("the toolkit's folder")
        .to_path_buf();
    assert!(
        home.join("bin/nvdisasm").is_file(),
        "the suite's toolkit has nvdisasm"
    );
    let toolkit: PathBuf = Path::new(env!("CARGO_TARGET_TMPDIR")).join("occ-no-nvdisasm");
    let _ = std::fs::remove_dir_all(&toolkit);
    toolkit_without(&home, &toolkit, &["nvdisasm"]);
    let nvcc = toolkit.join("bin/nvcc");

    let s = Scratch::new();
    s.copy_cu("lines", "kernels");
    s.copy_cu("sweep", "kernels/sweep");
    let mut build = s.build(["sm_80", "sm_90"]);
    build.glob("kernels/*/*.cu");
    let nvcc_var = nvcc.display().to_string();
    let report = build
        .try_compile_with(&build_env(&[("NVCC", Some(&nvcc_var))]))
        .unwrap_or_else(|e| panic!("build: {e}"));
    let m = report.manifest().expect("manifest");
    assert!(m.kernels.len() >= 4);
    assert!(m
        .kernels
        .iter()
        .flat_map(|k| k.archs.values())
        .all(|a| a.lines.is_none()));
    assert!(!s.read("out/occ/manifest.json").contains("\"lines\""));
    let notes: Vec<&String> = report
        .directives()
        .warnings()
        .iter()
        .filter(|w| w.contains("nvdisasm"))
        .collect();
    assert_eq!(notes.len(), 1, "{:?}", report.directives().warnings());
    assert!(
        notes[0].contains("no nvdisasm") && notes[0].contains("install"),
        "{}",
        notes[0]
    );
    // nvdisasm is watched as nvcc is. Without it, the
    // folder it would be installed into is watched, so that cargo reruns
    // the script once it appears; with it, the program itself.
    let bin = toolkit.join("bin");
    let watched = |r: &occ_build::Report, p: &Path| {
        r.directives()
            .rerun_if_changed()
            .contains(&p.display().to_string())
    };
    assert!(
        watched(&report, &bin),
        "the folder nvdisasm would appear in must be watched: {:?}",
        report.directives().rerun_if_changed()
    );
    std::fs::copy(home.join("bin/nvdisasm"), bin.join("nvdisasm")).expect("install nvdisasm");
    let report = build
        .try_compile_with(&build_env(&[("NVCC", Some(&nvcc_var))]))
        .unwrap_or_else(|e| panic!("build with nvdisasm: {e}"));
    assert!(
        report
            .manifest()
            .expect("manifest")
            .kernels
            .iter()
            .flat_map(|k| k.archs.values())
            .any(|a| a.lines.is_some()),
        "nvdisasm installed since: the build must find lines"
    );
    assert!(
        watched(&report, &bin.join("nvdisasm")),
        "nvdisasm must be watched: {:?}",
        report.directives().rerun_if_changed()
    );
    let _ = std::fs::remove_dir_all(&toolkit);
}

#[test]
fn a_spill_regression_names_the_source_line() {
    let s = Scratch::new();
    s.write("kernels/k.cu", occ_tests::surroundings::LIGHT);
    let capped = |root: &Path| {
        let mut b = build_of(root, "out", "kernels/k.cu", ["sm_80"]);
        b.max_registers("kernels/k.cu", 16);
        b
    };
    capped(s.path())
        .try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]))
        .expect("bless");
    s.write("kernels/k.cu", occ_tests::surroundings::HEAVY);
    let e = capped(s.path())
        .try_compile_with(&build_env(&[]))
        .expect_err("new spills regress");
    let msg = e.to_string();
    assert!(msg.contains("new spills"), "{msg}");
    let place = msg
        .lines()
        .find(|l| {
            l.trim_start()
                .starts_with("- scale on sm_80 spills at kernels/k.cu:")
        })
        .unwrap_or_else(|| panic!("the spill's source line must be named: {msg}"));
    let line: u32 = place
        .split("kernels/k.cu:")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a line number: {place}"));
    let lines = occ_tests::surroundings::HEAVY.lines().count() as u32;
    assert!((1..=lines).contains(&line), "{place}");
}

#[test]
fn a_crate_under_a_non_ascii_folder_names_its_spill_lines_relative() {
    // nvdisasm writes the folder's bytes as octal escapes (`j\303\274rgen`).
    let s = Scratch::new();
    let root = s.path().join("jürgen/sp ace");
    s.copy_cu("lines", "jürgen/sp ace/kernels");
    let e = build_of(&root, "out", "kernels/tmpl.cu", ["sm_80"])
        .deny_spills()
        .try_compile_with(&build_env(&[]))
        .expect_err("the fixture's kernel spills");
    let msg = e.to_string();
    assert!(
        msg.contains(" at kernels/"),
        "spill sites relative to the crate: {msg}"
    );
    assert!(
        !msg.contains("\\3") && !msg.contains("/303/"),
        "no escaped bytes: {msg}"
    );
    assert!(
        !msg.contains(&*root.to_string_lossy()),
        "no absolute path: {msg}"
    );
}
