//! `-lineinfo`, which occ-build compiles with so that nvdisasm can name the
//! source line of each instruction, leaves the machine code alone: over a
//! corpus of kernels (the CUB device algorithms of tests/corpus, example-app's
//! kernels, the trybuild kernels and every fixture `.cu` that compiles),
//! `cuobjdump -sass` of a fatbin built with it lists the same instructions, in
//! the same order, for every function and arch as one built without it, and
//! ptxas reports the same resources for every kernel.
//!
//! What does change is the size of the device code (a line table per cubin
//! and `.loc` lines in the PTX); the test prints it. What occ-build embeds
//! has that taken out again (`occ_model::compiler::shipped`), and the same corpus
//! proves it exact: every cubin built with `-lineinfo`, less its line
//! sections, has the code, constants, resources and symbols of the one
//! built without (`cubin_hash`), the same SASS as `cuobjdump -sass` reads
//! it, no line table left for nvdisasm and no path of the build; its PTX,
//! less `.loc` and `.file`, is the PTX built without, line for line.
//!
//! The full run (`OCC_TEST_FULL=1`, `scripts/release-check`) builds the CUB
//! corpus for three archs and every small source for six (or both cluster
//! archs). The sample that CI runs compares every source too, the CUB corpus
//! on sm_90 and each small source on one of the six archs in turn (the
//! fixture of overlaid sections on all three archs that overlay), so every
//! arch is still compared; it costs about a quarter, and it fails for a flag
//! that changes the SASS as the full run does (BENCHMARKS.md).
//!
//! cuobjdump and nvdisasm cost about half a second for each cubin they read,
//! whatever its size (packing many into one fatbin does not help), so each
//! cubin is read as few times as the checks need: the plain and `-lineinfo`
//! fatbins once, the cut cubin once by each tool.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::parser_support::cuda_tool;
use occ_model::compiler::ptxas::parse_log;
use occ_model::schema::measured::cubin_hash;
use occ_tests::workspace_root;

/// The small sources: one arch of each generation from Turing to Blackwell.
const ARCHS: [&str; 6] = ["sm_75", "sm_80", "sm_90", "sm_100", "sm_110", "sm_120"];
/// The fixture of what the cut of line sections must keep where ptxas
/// lays sections over others: every arch that does so, in the sample too.
const OVERLAID: &str = "tests/fixtures/cu/shipped/globals.cu";
const OVERLAID_ARCHS: [&str; 3] = ["sm_100", "sm_110", "sm_120"];
/// The CUB corpus (about a minute of ptxas per arch): Turing, Hopper, Blackwell.
const CUB_ARCHS: [&str; 3] = ["sm_75", "sm_90", "sm_120"];
/// Cluster kernels: Hopper and newer only.
const CLUSTER_ARCHS: [&str; 2] = ["sm_90", "sm_120"];
/// The CUB corpus in the sample.
const CUB_SAMPLE_ARCHS: [&str; 1] = ["sm_90"];
/// The fewest kernel × archs each run compares: a floor that a corpus which
/// quietly stopped compiling (or a sample that shrank) falls below.
const FULL_KERNELS: usize = 500;
const SAMPLE_KERNELS: usize = 150;

/// Fixtures that do not compile on their own, on purpose, with why; each
/// must fail both ways (else the list is stale).
const NOT_ALONE: &[(&str, &str)] = &[
    (
        "tests/fixtures/src/rdc_main.cu",
        "needs -rdc and rdc_helper.cu",
    ),
    (
        "tests/fixtures/cu/bad_input/named.cu",
        "includes a header its test writes",
    ),
    (
        "tests/fixtures/cu/new_user/broken.cu",
        "a compile error on purpose",
    ),
    (
        "tests/fixtures/cu/pipeline/bad.cu",
        "a compile error on purpose",
    ),
    (
        "tests/fixtures/src/errors/include.cu",
        "a missing header on purpose (nvcc_text's error fixtures)",
    ),
    (
        "tests/fixtures/src/errors/smem.cu",
        "too much static shared memory on purpose (nvcc_text's error fixtures)",
    ),
    (
        "tests/fixtures/src/errors/template.cu",
        "a template error on purpose (nvcc_text's error fixtures)",
    ),
];

/// Instruction text per (arch, function), as `cuobjdump -sass` prints it.
type Sass = BTreeMap<(String, String), Vec<String>>;

fn sass(text: &str) -> Sass {
    let mut out = Sass::new();
    let mut arch = String::new();
    let mut function: Option<String> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(a) = t.strip_prefix("code for ") {
            arch = a.trim().to_string();
        } else if let Some(f) = t.strip_prefix("Function : ") {
            function = Some(f.trim().to_string());
        } else if let Some(rest) = t.strip_prefix("/*") {
            // `/*0040*/   ISETP.GE.AND P0, PT, R0, c[0x0][0x170], PT ;   /* 0x... */`;
            // the encoding's second half is a line of its own.
            let Some((offset, rest)) = rest.split_once("*/") else {
                continue;
            };
            if !offset.chars().all(|c| c.is_ascii_hexdigit()) {
                continue;
            }
            let instr = rest.split(" ;").next().unwrap_or(rest).trim();
            let Some(f) = &function else {
                panic!("an instruction before any function: {line}");
            };
            out.entry((arch.clone(), f.clone()))
                .or_default()
                .push(instr.to_string());
        }
    }
    out
}

/// The resources ptxas reports, per (kernel, arch).
fn resources(log: &str) -> BTreeMap<(String, String), String> {
    let log = parse_log(log).unwrap_or_else(|e| panic!("{e}"));
    log.kernels
        .iter()
        .map(|k| {
            (
                (k.name.clone(), k.arch.clone().unwrap_or_default()),
                format!(
                    "{:?} registers, {:?} barriers, {} smem, {:?} cmem, {} stack frame, {:?} cumulative, \
                     {} spill stores, {} spill loads, {} gmem",
                    k.registers,
                    k.barriers,
                    k.static_smem,
                    k.cmem,
                    k.stack_frame,
                    k.cumulative_stack,
                    k.spill_stores,
                    k.spill_loads,
                    k.gmem
                ),
            )
        })
        .collect()
}

/// One build of `src` for `archs`: its SASS, resources and fatbin size; or
/// nvcc's output when it fails.
fn build(src: &Path, archs: &[&str], line_info: bool, out: &Path) -> Result<Built, String> {
    let fatbin = out.join(if line_info { "li.fatbin" } else { "no.fatbin" });
    let keep = out.join(if line_info { "keep-li" } else { "keep-no" });
    std::fs::create_dir_all(&keep).expect("create the keep folder");
    let mut cmd = Command::new(cuda_tool("nvcc"));
    cmd.args(["-fatbin", "--threads", "2", "-Xptxas", "-v", "-o"])
        .arg(&fatbin)
        .arg("-keep")
        .arg("-keep-dir")
        .arg(&keep);
    if line_info {
        cmd.arg("-lineinfo");
    }
    for arch in archs {
        let n = arch.trim_start_matches("sm_");
        cmd.arg("-gencode")
            .arg(format!("arch=compute_{n},code=sm_{n}"));
    }
    let out = cmd.arg(src).output().expect("run nvcc");
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return Err(log);
    }
    let dump = Command::new(cuda_tool("cuobjdump"))
        .arg("-sass")
        .arg(&fatbin)
        .output()
        .expect("run cuobjdump");
    assert!(
        dump.status.success(),
        "cuobjdump -sass {}",
        fatbin.display()
    );
    let size = std::fs::metadata(&fatbin).map(|m| m.len()).unwrap_or(0);
    Ok((
        sass(&String::from_utf8_lossy(&dump.stdout)),
        resources(&log),
        size,
    ))
}

/// What occ-build embeds of the `-lineinfo` build in `out` (its kept
/// cubins and PTX, less their line information) against the build without
/// it, whose SASS is `plain`: how many cubins were compared, and every
/// difference.
fn compare_shipped(out: &Path, archs: &[&str], plain_sass: &Sass) -> (usize, Vec<String>) {
    let (li, no) = (out.join("keep-li"), out.join("keep-no"));
    let mut names: Vec<String> = std::fs::read_dir(&no)
        .expect("list the kept files")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".cubin") || n.ends_with(".ptx"))
        .collect();
    names.sort();
    let folder = out.to_string_lossy().into_owned();
    let (mut cubins, mut problems) = (0, Vec::new());
    for name in names {
        let plain = std::fs::read(no.join(&name)).expect("read the plain file");
        let Ok(with) = std::fs::read(li.join(&name)) else {
            problems.push(format!("{name}: not built with -lineinfo"));
            continue;
        };
        if name.ends_with(".ptx") {
            // Line for line: `-lineinfo` adds blank lines to inline asm
            // blocks on some targets.
            let text = |t: &str| -> Vec<String> {
                t.lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(str::to_string)
                    .collect()
            };
            let shipped =
                occ_model::compiler::shipped::ptx_without_lines(&String::from_utf8_lossy(&with));
            if text(&shipped) != text(&String::from_utf8_lossy(&plain)) {
                problems.push(format!(
                    "{name}: the PTX less its lines is not the plain PTX"
                ));
            }
            continue;
        }
        cubins += 1;
        let Some(shipped) = occ_model::compiler::shipped::cubin_without_lines(&with) else {
            problems.push(format!("{name}: the line sections could not be cut out"));
            continue;
        };
        if cubin_hash(&shipped) != cubin_hash(&plain) {
            problems.push(format!("{name}: not the code of the plain cubin"));
        }
        if shipped
            .windows(folder.len())
            .any(|w| w == folder.as_bytes())
        {
            problems.push(format!("{name}: names the build's folder"));
        }
        let path = out.join(format!("shipped-{name}"));
        std::fs::write(&path, &shipped).expect("write the shipped cubin");
        // The plain cubin's SASS is its arch's part of the plain fatbin's,
        // read once already (cuobjdump costs half a second a cubin).
        // `x.cubin` for one arch, `x.compute_90.cubin` for several.
        let arch = match name
            .rsplit('.')
            .nth(1)
            .and_then(|n| n.strip_prefix("compute_"))
        {
            Some(n) => format!("sm_{n}"),
            None => archs[0].to_string(),
        };
        let plain_sass: Sass = plain_sass
            .iter()
            .filter(|((a, _), _)| *a == arch)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let dump = Command::new(cuda_tool("cuobjdump"))
            .arg("-sass")
            .arg(&path)
            .output()
            .expect("run cuobjdump");
        match dump
            .status
            .success()
            .then(|| sass(&String::from_utf8_lossy(&dump.stdout)))
        {
            Some(a) if a == plain_sass => {}
            None => problems.push(format!("{name}: cuobjdump cannot read it")),
            _ => problems.push(format!("{name}: its SASS is not the plain cubin's")),
        }
        let lines = Command::new(cuda_tool("nvdisasm"))
            .arg("-g")
            .arg(&path)
            .output()
            .expect("run nvdisasm");
        if !lines.status.success() || String::from_utf8_lossy(&lines.stdout).contains("//## File") {
            problems.push(format!("{name}: nvdisasm fails on it or still finds lines"));
        }
    }
    (cubins, problems)
}

fn cu_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            cu_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "cu") {
            out.push(path);
        }
    }
}

/// What one source gave: its name, the two builds (or nvcc's errors), and
/// the comparison of what occ-build would embed ([`compare_shipped`]).
type Pair = (
    String,
    Result<Built, String>,
    Result<Built, String>,
    (usize, Vec<String>),
);
type Built = (Sass, BTreeMap<(String, String), String>, u64);

#[test]
fn lineinfo_leaves_the_sass_and_the_resources_unchanged() {
    let root = workspace_root();
    let full = occ_tests::full_run();
    let cub_archs: &[&str] = if full { &CUB_ARCHS } else { &CUB_SAMPLE_ARCHS };
    let mut sources: Vec<(PathBuf, &[&str])> =
        vec![(root.join("tests/corpus/cub_corpus.cu"), cub_archs)];
    let mut small = Vec::new();
    for dir in [
        "example-app/kernels",
        "tests/ui/kernels",
        "tests/fixtures/src",
        "tests/fixtures/cu",
    ] {
        cu_files(&root.join(dir), &mut small);
    }
    sources.extend(small.into_iter().enumerate().map(|(i, p)| {
        let archs: &[&str] = if p.ends_with("tests/fixtures/src/bounds.cu") {
            &CLUSTER_ARCHS
        } else {
            &ARCHS
        };
        // The sample: each source on one arch, the archs in turn.
        let archs = if p.ends_with(OVERLAID) {
            &OVERLAID_ARCHS
        } else if full {
            archs
        } else {
            &archs[i % archs.len()..][..1]
        };
        (p, archs)
    }));

    // A few sources at a time (each nvcc runs two ptxas threads).
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("occ-lineinfo");
    let workers = std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).clamp(1, 4));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: std::sync::Mutex<Vec<(usize, Pair)>> = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some((src, archs)) = sources.get(i) else {
                    break;
                };
                let out = scratch.join(i.to_string());
                std::fs::create_dir_all(&out).expect("create the scratch folder");
                let name = src.strip_prefix(&root).unwrap_or(src).display().to_string();
                let without = build(src, archs, false, &out);
                let with = build(src, archs, true, &out);
                let shipped = match (&without, &with) {
                    (Ok((plain, ..)), Ok(_)) => compare_shipped(&out, archs, plain),
                    _ => (0, Vec::new()),
                };
                let pair = (name, without, with, shipped);
                let _ = std::fs::remove_dir_all(&out);
                results.lock().expect("results").push((i, pair));
            });
        }
    });
    let mut results = results.into_inner().expect("results");
    results.sort_by_key(|(i, _)| *i);

    let mut mismatches = Vec::new();
    let (mut compared, mut functions, mut instructions, mut kernels) = (0, 0, 0, 0);
    let (mut bytes_without, mut bytes_with) = (0u64, 0u64);
    let mut shipped_cubins = 0;
    for (_, (name, without, with, (cubins, problems))) in results {
        shipped_cubins += cubins;
        mismatches.extend(problems.into_iter().map(|p| format!("{name}: shipped {p}")));
        let not_alone = NOT_ALONE.iter().find(|(file, _)| *file == name);
        let ((sass_without, res_without, size_without), (sass_with, res_with, size_with)) =
            match (without, with, not_alone) {
                (Ok(a), Ok(b), None) => (a, b),
                (Err(_), Err(_), Some(_)) => continue,
                (Ok(_), Ok(_), Some((_, why))) => {
                    panic!("{name} compiles: drop it from NOT_ALONE ({why})")
                }
                (Ok(_), Err(log), _) => panic!("{name} fails only with -lineinfo:\n{log}"),
                (Err(log), Ok(_), _) => panic!("{name} fails only without -lineinfo:\n{log}"),
                (Err(log), Err(_), None) => panic!("{name} does not compile:\n{log}"),
            };
        compared += 1;
        bytes_without += size_without;
        bytes_with += size_with;
        if sass_without.keys().ne(sass_with.keys()) {
            mismatches.push(format!("{name}: the functions differ"));
        }
        for (key, code) in &sass_without {
            functions += 1;
            instructions += code.len();
            match sass_with.get(key) {
                Some(other) if other == code => {}
                Some(other) => {
                    let at = code.iter().zip(other).position(|(a, b)| a != b);
                    mismatches.push(format!(
                        "{name} {} {}: {} vs {} instructions, first difference at {at:?}",
                        key.0,
                        key.1,
                        code.len(),
                        other.len()
                    ));
                }
                None => mismatches.push(format!(
                    "{name} {} {}: missing with -lineinfo",
                    key.0, key.1
                )),
            }
        }
        kernels += res_without.len();
        for (key, r) in &res_without {
            if res_with.get(key) != Some(r) {
                mismatches.push(format!(
                    "{name} {} {}: ptxas says {r} without -lineinfo, {:?} with it",
                    key.0,
                    key.1,
                    res_with.get(key)
                ));
            }
        }
    }
    eprintln!(
        "lineinfo: {compared} sources, {kernels} kernel x archs, {functions} functions, \
         {instructions} instructions identical; fatbins {bytes_without} B without -lineinfo, \
         {bytes_with} B with it; {shipped_cubins} cubins less their lines equal to the plain ones"
    );
    assert!(
        mismatches.is_empty(),
        "{} differences:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    assert!(compared >= 40, "only {compared} sources compiled");
    assert!(
        shipped_cubins >= compared,
        "only {shipped_cubins} cubins compared less their lines"
    );
    let floor = if full { FULL_KERNELS } else { SAMPLE_KERNELS };
    assert!(kernels >= floor, "only {kernels} kernel x archs");
}
