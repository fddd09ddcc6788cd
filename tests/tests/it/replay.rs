//! The rules of the build memo, the job cache, the disassembly cache and
//! the gate, tested on nvcc 13.5's recorded outputs instead of a live
//! nvcc: each test builds in-process with its programs run by
//! `occ_shell::Replay`
//! (through `Env::with_programs`), which serves the runs recorded in
//! `tests/fixtures/nvcc-13.5/replay/<test>/` and panics, naming the
//! command, on one it lacks. Nothing here fakes nvcc's numbers: the
//! fixtures are what nvcc 13.5 printed and wrote for these very builds.
//!
//! `OCC_RECORD=1` runs the same tests with the real nvcc and records
//! their runs anew (`occ_shell::Recorder`); the fixtures' README
//! has the command. These are the tests of those rules: they run where
//! no toolkit is installed, and fail when a rule breaks. The live tests
//! beside them (`memo.rs`, `cache_proof.rs`, `cache_rules.rs`,
//! `gate_scope.rs`, `lines.rs`, `baseline.rs`) keep what a replay cannot
//! show: a launcher or wrapper that changes what nvcc runs, a scratch
//! toolkit, cargo's own reruns, killed builds and full disks.
//!
//! The crates pre-include the fixtures' stand-in `cuda_runtime.h` from
//! their root and pass `-Xcompiler -nostdinc`, so that every file nvcc
//! reads is in the crate (a replay machine has no toolkit headers).

use occ_build::{Build, ErrorKind, Launch, Report};
use occ_shell::build_state::{last_build, BuildState};
use occ_shell::process::{Cmd, Output, Programs};
use occ_shell::{Env, Folders, Recorder, Replay};
use occ_tests::{build_env_with, fixture, fixture_path, Scratch};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// Whether this run records the fixtures with the real nvcc.
fn recording() -> bool {
    std::env::var("OCC_RECORD").is_ok_and(|v| v == "1")
}

/// Counts the nvdisasm runs and the nvcc runs that compile a job (`-Xptxas -v`, not the
/// toolkit's `--dryrun` of the same arguments), as a counting
/// `OCC_NVCC_LAUNCHER` would, around the replay or the recorder.
#[derive(Debug)]
struct Counted {
    inner: Arc<dyn Programs>,
    compiles: Mutex<usize>,
    disassembled: Mutex<usize>,
}

impl Programs for Counted {
    fn output(&self, cmd: &Cmd) -> std::io::Result<Output> {
        let args = cmd.get_args();
        if args.iter().any(|a| a == "-Xptxas") && !args.iter().any(|a| a == "--dryrun") {
            *self.compiles.lock().expect("count") += 1;
        }
        if cmd.get_program().ends_with("nvdisasm") {
            *self.disassembled.lock().expect("count") += 1;
        }
        self.inner.output(cmd)
    }
}

/// A scratch crate whose builds' programs are replayed from (or, with
/// `OCC_RECORD=1`, recorded into) the fixture folder of `test`.
struct Crate {
    s: Scratch,
    /// The toolkit a replay names: `bin/nvcc`, `bin/nvdisasm` and
    /// `bin/fatbinary` as empty files, for the build to find (never run),
    /// and nvcc 13.5's `bin/nvcc.profile` (recorded with the runs).
    _toolkit: Option<Scratch>,
    nvcc: PathBuf,
    programs: Arc<Counted>,
    recorder: Option<Arc<Recorder>>,
    test: &'static str,
}

impl Crate {
    fn new(test: &'static str) -> Crate {
        let s = Scratch::new();
        s.write("cuda_runtime.h", &fixture("nvcc-13.5/cuda_runtime.h"));
        let (toolkit, nvcc) = if recording() {
            let nvcc = occ_tests::nvcc();
            let profile = std::fs::read(nvcc.with_file_name("nvcc.profile")).expect("nvcc.profile");
            std::fs::write(fixture_path("nvcc-13.5/nvcc.profile"), profile)
                .expect("save nvcc.profile");
            (None, nvcc)
        } else {
            let t = Scratch::new();
            for tool in ["nvcc", "nvdisasm", "fatbinary"] {
                t.write(&format!("bin/{tool}"), "");
            }
            // The variables its profile expands are passed to every nvcc run.
            t.write("bin/nvcc.profile", &fixture("nvcc-13.5/nvcc.profile"));
            let nvcc = t.path().join("bin/nvcc");
            (Some(t), nvcc)
        };
        let folders = Folders {
            root: s.path().to_path_buf(),
            out: s.path().join("out"),
            toolkit: nvcc
                .parent()
                .and_then(Path::parent)
                .expect("<toolkit>/bin/nvcc")
                .to_path_buf(),
        };
        let (inner, recorder): (Arc<dyn Programs>, _) = if recording() {
            let r = Arc::new(Recorder::new(folders));
            (r.clone(), Some(r))
        } else {
            let dir = fixture_path("nvcc-13.5/replay").join(test);
            let replay = Replay::new(&dir, folders)
                .unwrap_or_else(|e| panic!("no fixture {} ({e})", dir.display()));
            (Arc::new(replay), None)
        };
        Crate {
            s,
            _toolkit: toolkit,
            nvcc,
            programs: Arc::new(Counted {
                inner,
                compiles: Mutex::new(0),
                disassembled: Mutex::new(0),
            }),
            recorder,
            test,
        }
    }

    /// `kernels/*.cu` for `archs`, with the fixtures' flags.
    fn build<const N: usize>(&self, archs: [&str; N]) -> Build {
        self.build_for(&archs)
    }

    /// [`Crate::build`] for archs given as a slice.
    fn build_for(&self, archs: &[&str]) -> Build {
        let mut b = occ_tests::kernels_build(self.s.path(), &self.s.path().join("out"), []);
        b.archs(archs.iter().copied())
            .flag("-Xcompiler")
            .flag("-nostdinc");
        b
    }

    /// The environment of an in-process build, its programs replayed.
    fn env(&self, extra: &[(&str, Option<&str>)]) -> Env {
        build_env_with(&self.nvcc, extra).with_programs(self.programs.clone())
    }

    /// How many nvcc runs compiled a job so far.
    fn compiles(&self) -> usize {
        *self.programs.compiles.lock().expect("count")
    }

    /// How many nvdisasm runs so far.
    fn disassembled(&self) -> usize {
        *self.programs.disassembled.lock().expect("count")
    }

    fn out(&self) -> PathBuf {
        self.s.path().join("out").join("occ")
    }
}

impl Drop for Crate {
    fn drop(&mut self) {
        if let Some(recorder) = &self.recorder {
            if !std::thread::panicking() {
                let dir = fixture_path("nvcc-13.5/replay").join(self.test);
                recorder.save(&dir).expect("save the recording");
            }
        }
    }
}

// ---------------------------------------------------------------------
// The build memo (more, live, in memo.rs)

const STAGED: &str = "#include \"common.cuh\"\n\
extern \"C\" __global__ void staged(float* p) {\n\
  __shared__ float s[SMEM];\n\
  s[threadIdx.x % SMEM] = p[threadIdx.x];\n\
  __syncthreads();\n\
  p[threadIdx.x] = s[(threadIdx.x + 1) % SMEM];\n\
}\n";

/// One kernel whose shared memory its header sets, for
/// sm_80, judged at blocks of 256 threads.
fn staged(test: &'static str) -> Crate {
    let c = Crate::new(test);
    c.s.write("kernels/staged.cu", STAGED);
    c.s.write("kernels/common.cuh", "#define SMEM 256\n");
    c
}

fn run_staged(c: &Crate, extra: &[(&str, Option<&str>)]) -> occ_build::Result<Report> {
    let mut b = c.build(["sm_80"]);
    b.launch("staged", Launch::block(256));
    b.try_compile_with(&c.env(extra))
}

/// Every file below `dir` with its modification time.
fn mtimes(dir: &Path) -> Vec<(PathBuf, SystemTime)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).expect("list").flatten() {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).expect("stat");
            if meta.is_dir() {
                todo.push(path);
            } else {
                out.push((path, meta.modified().expect("mtime")));
            }
        }
    }
    out.sort();
    out
}

fn touch(path: &Path) {
    let file = std::fs::File::options()
        .write(true)
        .open(path)
        .expect("open");
    file.set_modified(SystemTime::now()).expect("touch");
}

/// A build that would change nothing writes nothing, runs no nvcc and
/// prints what the last one printed, in a later run of the build script
/// too.
#[test]
fn memo_an_unchanged_build_writes_nothing_and_prints_the_same() {
    let c = staged("memo_unchanged");
    run_staged(&c, &[("OCC_BLESS", Some("1"))]).expect("bless");
    // The lock is new to this build: it does the full work and records.
    let full = run_staged(&c, &[]).expect("build");
    let before = mtimes(c.s.path());
    let runs = c.compiles();
    // What cargo reruns the script for: a touched source, same bytes.
    touch(&c.s.path().join("kernels/staged.cu"));
    let before_touch: Vec<_> = before
        .iter()
        .filter(|(p, _)| !p.ends_with("kernels/staged.cu"))
        .cloned()
        .collect();
    let again = run_staged(&c, &[]).expect("rebuild");
    assert_eq!(c.compiles(), runs, "no nvcc run");
    let after: Vec<_> = mtimes(c.s.path())
        .into_iter()
        .filter(|(p, _)| !p.ends_with("kernels/staged.cu"))
        .collect();
    assert_eq!(after, before_touch, "no file written");
    assert_eq!(again.directives().lines(), full.directives().lines());
    assert_eq!(again.nvcc_runs, 0);
    assert_eq!(
        again.manifest().expect("manifest"),
        full.manifest().expect("manifest")
    );
    assert_eq!(last_build(&c.out()), Some(BuildState::Finished));
    // A later run of the build script (another process: `parts.json`
    // names another run, which a build its memo served rewrites) is
    // served by the memo too, and so is the run after it.
    let parts = c.out().join("parts.json");
    let text = std::fs::read_to_string(&parts).expect("parts.json");
    let run = text
        .split("\"run\":\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("the run")
        .to_string();
    std::fs::write(&parts, text.replace(&run, "1-1")).expect("another run's parts");
    let but_parts = |dir: &Path| -> Vec<(PathBuf, SystemTime)> {
        mtimes(dir)
            .into_iter()
            .filter(|(p, _)| !p.ends_with("parts.json"))
            .collect()
    };
    for _ in 0..2 {
        let before = but_parts(c.s.path());
        let again = run_staged(&c, &[]).expect("rebuild");
        assert_eq!(again.nvcc_runs, 0);
        assert_eq!(c.compiles(), runs, "no nvcc run");
        assert_eq!(
            but_parts(c.s.path()),
            before,
            "served by the memo: no file written but parts.json"
        );
    }
}

/// An edited header is compiled again.
#[test]
fn memo_an_edited_header_is_compiled_again() {
    let c = staged("memo_edited_header");
    let first = run_staged(&c, &[]).expect("build");
    let smem = |r: &Report| {
        r.manifest().expect("manifest").kernels[0].archs["sm_80"]
            .facts
            .static_smem
    };
    assert_eq!(smem(&first), 256 * 4);
    let before = c.s.read("out/occ/kernels.rs");
    let runs = c.compiles();
    c.s.write("kernels/common.cuh", "#define SMEM 512\n");
    let second = run_staged(&c, &[]).expect("rebuild");
    assert_eq!(c.compiles(), runs + 1, "the job runs again");
    assert_eq!(smem(&second), 512 * 4);
    // kernels.rs is written again with the new number (its packed rows
    // hold the kernel's numbers as space-separated decimals).
    let after = c.s.read("out/occ/kernels.rs");
    assert!(
        !before.contains(" 2048 ") && after.contains(" 2048 ") && after != before,
        "{after}"
    );
}

/// An output deleted since the last build is written again.
#[test]
fn memo_a_deleted_output_is_written_again() {
    let c = staged("memo_deleted_output");
    run_staged(&c, &[]).expect("build");
    let kernels_rs = c.out().join("kernels.rs");
    let text = std::fs::read_to_string(&kernels_rs).expect("kernels.rs");
    std::fs::remove_file(&kernels_rs).expect("delete");
    run_staged(&c, &[]).expect("rebuild");
    assert_eq!(
        std::fs::read_to_string(&kernels_rs).expect("kernels.rs again"),
        text
    );
}

/// Blesses the lock, then builds once more so that the memo is recorded
/// against it.
fn blessed_staged(test: &'static str) -> Crate {
    let c = staged(test);
    run_staged(&c, &[("OCC_BLESS", Some("1"))]).expect("bless");
    run_staged(&c, &[]).expect("build");
    c
}

/// A lock changed since the last build is judged again.
#[test]
fn memo_a_changed_lock_is_judged_again() {
    let c = blessed_staged("memo_changed_lock");
    // The lock says the kernel used one register: today's build is a
    // regression against it.
    let lock = c.s.path().join("occ.lock");
    let text = std::fs::read_to_string(&lock).expect("lock");
    let at = text.find("\"registers\": ").expect("registers") + "\"registers\": ".len();
    let end = at + text[at..].find(',').expect("a number");
    let edited = format!("{}1{}", &text[..at], &text[end..]);
    assert_ne!(edited, text, "{text}");
    std::fs::write(&lock, edited).expect("edit the lock");
    let e = run_staged(&c, &[]).expect_err("a regression against the lock");
    assert_eq!(e.kind(), ErrorKind::Gate, "{e}");
    assert!(e.to_string().contains("cargo occ bless"), "{e}");
}

/// A build the gate failed fails again, not served as the last good one.
#[test]
fn memo_a_gate_failure_fails_again() {
    let c = blessed_staged("memo_gate_failure");
    c.s.write("kernels/common.cuh", "#define SMEM 12288\n");
    let e = run_staged(&c, &[]).expect_err("more shared memory: fewer blocks");
    assert_eq!(e.kind(), ErrorKind::Gate, "{e}");
    assert!(e.to_string().contains("cargo occ bless"), "{e}");
    assert_eq!(last_build(&c.out()), Some(BuildState::GateFailed));
    // Nothing changed since: the same failure, not the last good build.
    let e = run_staged(&c, &[]).expect_err("still a regression");
    assert_eq!(e.kind(), ErrorKind::Gate, "{e}");
    assert!(e.to_string().contains("cargo occ bless"), "{e}");
}

// ---------------------------------------------------------------------
// The job cache (more, live, in cache_proof.rs and cache_rules.rs)

/// A kernel with static shared memory `N * 64` floats, `N`
/// from whatever header its `__has_include` of a macro finds (1 without).
const MACRO_HAS_INCLUDE: &str = "#define OPT_H \"opt.cuh\"\n#if __has_include(OPT_H)\n\
    #include OPT_H\n#endif\n#ifndef N\n#define N 1\n#endif\n\
    extern \"C\" __global__ void k(float* p) {\n  __shared__ float t[N * 64];\n  \
    t[threadIdx.x % (N * 64)] = p[threadIdx.x];\n  __syncthreads();\n  \
    p[threadIdx.x] = t[(threadIdx.x * 7) % (N * 64)];\n}\n";

/// The kernel's static shared memory on sm_80, the jobs compiled and the
/// warnings of a build with `env`.
fn smem(c: &Crate, env: &[(&str, Option<&str>)]) -> (u32, usize, Vec<String>) {
    let report = c
        .build(["sm_80"])
        .try_compile_with(&c.env(env))
        .unwrap_or_else(|e| panic!("the build failed: {e}"));
    let manifest = report.manifest().expect("manifest");
    let smem = manifest.kernels[0].archs["sm_80"]
        .resources
        .facts
        .static_smem;
    (
        smem,
        report.nvcc_runs,
        report.directives().warnings().to_vec(),
    )
}

/// A touch or a new file beside a source compiles nothing; an edit
/// compiles.
#[test]
fn cache_a_touch_or_a_new_file_beside_a_source_compiles_nothing_and_an_edit_compiles() {
    let c = Crate::new("cache_touch_new_file_edit");
    let source = c.s.write("kernels/k.cu", MACRO_HAS_INCLUDE);
    assert_eq!(smem(&c, &[]).1, 1);
    // A touch (re-hashed) and a new file beside the source (its folder
    // changed: a proof by preprocessing) change no byte nvcc compiles.
    let f = std::fs::File::options()
        .append(true)
        .open(&source)
        .expect("open");
    f.set_modified(SystemTime::now()).expect("touch");
    c.s.write("kernels/notes.txt", "unrelated");
    assert_eq!(smem(&c, &[]).1, 0, "nothing nvcc compiles changed");
    assert_eq!(c.compiles(), 1, "nvcc compiled once in all");
    c.s.write(
        "kernels/k.cu",
        &MACRO_HAS_INCLUDE.replace("define N 1", "define N 2"),
    );
    let (smem, runs, _) = smem(&c, &[]);
    assert_eq!((smem, runs), (512, 1), "a changed source compiles");
}

/// A header the `__has_include` of a macro finds, created in any folder
/// the include search looks in, is seen without a proof: beside the
/// source, in a `-I` folder (which the one beside the source shadows), in
/// a subfolder that holds no input, behind a symbolic link.
#[test]
fn cache_a_header_a_macro_has_include_finds_is_seen_in_every_searched_folder() {
    let smem_of = |c: &Crate, b: &Build| {
        let report = b
            .try_compile_with(&c.env(&[]))
            .unwrap_or_else(|e| panic!("the build failed: {e}"));
        report.manifest().expect("manifest").kernels[0].archs["sm_80"]
            .resources
            .facts
            .static_smem
    };
    let c = Crate::new("cache_has_include_folders");
    c.s.write("kernels/k.cu", MACRO_HAS_INCLUDE);
    std::fs::create_dir_all(c.s.path().join("inc")).expect("inc");
    let mut b = c.build(["sm_80"]);
    b.include("inc");
    assert_eq!(smem_of(&c, &b), 256);
    // Beside the source, then (a new value) in the `-I` folder, whose
    // header the one beside the source shadows until it is removed.
    c.s.write("kernels/opt.cuh", "#define N 4\n");
    assert_eq!(
        smem_of(&c, &b),
        4 * 256,
        "a header created beside the source"
    );
    c.s.write("inc/opt.cuh", "#define N 2\n");
    assert_eq!(smem_of(&c, &b), 4 * 256, "the source's folder comes first");
    std::fs::remove_file(c.s.path().join("kernels/opt.cuh")).expect("remove");
    assert_eq!(
        smem_of(&c, &b),
        2 * 256,
        "the -I folder's header, once alone"
    );
    // In a subfolder that already exists and holds no input.
    let in_gen = MACRO_HAS_INCLUDE.replace("\"opt.cuh\"", "\"gen/opt.cuh\"");
    let c = Crate::new("cache_has_include_subfolder");
    c.s.write("kernels/k.cu", &in_gen);
    c.s.write("kernels/gen/.keep", "");
    assert_eq!(smem_of(&c, &c.build(["sm_80"])), 256);
    c.s.write("kernels/gen/opt.cuh", "#define N 8\n");
    assert_eq!(
        smem_of(&c, &c.build(["sm_80"])),
        8 * 256,
        "a header created in a subfolder"
    );
    // Behind a symbolic link to a folder elsewhere.
    let c = Crate::new("cache_has_include_link");
    c.s.write("kernels/k.cu", &in_gen);
    c.s.write("elsewhere/.keep", "");
    std::os::unix::fs::symlink(c.s.path().join("elsewhere"), c.s.path().join("kernels/gen"))
        .expect("link");
    assert_eq!(smem_of(&c, &c.build(["sm_80"])), 256);
    c.s.write("elsewhere/opt.cuh", "#define N 2\n");
    assert_eq!(
        smem_of(&c, &c.build(["sm_80"])),
        2 * 256,
        "a header created behind a link"
    );
}

/// A variable nvcc reads itself (`NVCC_APPEND_FLAGS`) is watched, so that
/// cargo reruns the build script for it, and is part of the job's key,
/// set and unset. (`NVCC_PREPEND_FLAGS` and `NVCC_CCBIN` are tested
/// through cargo, live, in cache_rules.rs.)
#[test]
fn cache_nvcc_append_flags_are_part_of_the_jobs_key() {
    let c = Crate::new("cache_nvcc_append_flags");
    // surroundings.rs's kernel with 16 values live at once, not 64 (a smaller
    // fixture; as many more registers as the test needs).
    let switched = occ_tests::surroundings::SWITCHED.replace("#define N 64", "#define N 16");
    assert_ne!(switched, occ_tests::surroundings::SWITCHED);
    c.s.write("kernels/k.cu", &switched);
    c.s.write("kernels/common.cuh", "#pragma once\n");
    let registers = |env: &[(&str, Option<&str>)]| {
        let mut b = c.build(["sm_80"]);
        // No nvdisasm over the heavy kernel: a smaller fixture.
        b.source_lines(false);
        let report = b
            .try_compile_with(&c.env(env))
            .unwrap_or_else(|e| panic!("the build failed: {e}"));
        let watched = report.directives().rerun_if_env_changed().clone();
        let registers = report.manifest().expect("manifest").kernels[0].archs["sm_80"]
            .resources
            .facts
            .registers;
        (registers, watched)
    };
    let var = "NVCC_APPEND_FLAGS";
    let (light, watched) = registers(&[]);
    // Cargo reruns the build script for a variable it prints.
    assert!(watched.contains(var), "{var} is not watched: {watched:?}");
    let (with, _) = registers(&[(var, Some("-DHEAVY_KERNEL"))]);
    assert!(
        with > light,
        "{var} (which nvcc reads) was ignored: {with} registers with it, {light} without"
    );
    let (back, _) = registers(&[]);
    assert_eq!(back, light, "unsetting {var} was ignored");
}

// ---------------------------------------------------------------------
// The gate's scope (more, live, in gate_scope.rs)

const ALPHA: &str = "extern \"C\" __global__ void alpha(float* p) { p[threadIdx.x] *= 2.0f; }\n";
const BETA: &str = "extern \"C\" __global__ void beta(int* p) { p[threadIdx.x] += 1; }\n";

/// A crate with `alpha`, blessed for sm_80.
fn blessed_alpha(test: &'static str) -> Crate {
    let c = Crate::new(test);
    c.s.write("kernels/a.cu", ALPHA);
    c.build(["sm_80"])
        .try_compile_with(&c.env(&[("OCC_BLESS", Some("1"))]))
        .expect("bless");
    c
}

/// The result of a build with `env`, and its warnings.
fn gated(c: &Crate, env: &[(&str, Option<&str>)]) -> (Result<(), String>, Vec<String>) {
    // A failed build's warnings are on its error, as its other directives.
    match c.build(["sm_80"]).try_compile_with(&c.env(env)) {
        Ok(report) => (Ok(()), report.directives().warnings().to_vec()),
        Err(e) => (Err(e.to_string()), e.directives().warnings().to_vec()),
    }
}

/// Under `CI`, an arch the lock does not record fails the build, naming
/// it and how to bless; outside CI it is a warning.
#[test]
fn gate_under_ci_an_arch_the_lock_does_not_record_fails_naming_it() {
    let c = blessed_alpha("gate_new_arch");
    let archs = ("OCC_ARCHS", Some("sm_80,sm_86"));
    let (result, _) = gated(&c, &[archs]);
    assert!(
        result.is_ok(),
        "outside CI a new arch is a warning: {result:?}"
    );
    let err = gated(&c, &[archs, ("CI", Some("true"))])
        .0
        .expect_err("CI with an arch occ.lock has no baseline for");
    assert!(
        err.contains("no baseline for sm_86 (any kernel)")
            && err.contains("cargo occ bless")
            && err.contains("OCC_ARCHS=sm_80,sm_86"),
        "{err}"
    );
    // The lock's own arch alone is checked and passes.
    let (result, _) = gated(&c, &[("CI", Some("true"))]);
    assert!(result.is_ok(), "{result:?}");
}

/// Under `CI`, a kernel the lock does not record fails the build, naming
/// it.
#[test]
fn gate_under_ci_a_kernel_the_lock_does_not_record_fails_naming_it() {
    let c = blessed_alpha("gate_new_kernel");
    c.s.write("kernels/b.cu", BETA);
    let err = gated(&c, &[("CI", Some("true"))])
        .0
        .expect_err("CI with a kernel not blessed");
    assert!(
        err.contains("no baseline for 1 new kernel: beta (sm_80)"),
        "{err}"
    );
}

/// Under `CI`, a crate without a lock fails; outside CI it warns.
#[test]
fn gate_under_ci_a_crate_without_a_lock_fails_and_outside_ci_it_warns() {
    let c = Crate::new("gate_no_lock");
    c.s.write("kernels/a.cu", ALPHA);
    let (result, warnings) = gated(&c, &[]);
    assert!(result.is_ok(), "{result:?}");
    assert!(
        warnings.iter().any(|w| w.contains("no occ.lock yet")),
        "{warnings:?}"
    );
    let err = gated(&c, &[("CI", Some("true"))])
        .0
        .expect_err("CI without a lock");
    assert!(err.contains("no occ.lock, and CI is set"), "{err}");
}

// ---------------------------------------------------------------------
// The disassembly cache (more, live, in lines.rs)

/// A warm build reads the disassembly's records (no nvcc or nvdisasm
/// run) and writes the same manifest, byte for byte, as the cold one; a
/// record that no longer matches is recomputed, to the same bytes; an
/// arch dropped takes its record with it.
#[test]
fn lines_a_warm_build_reads_the_records_and_writes_the_same_manifest() {
    let c = Crate::new("lines_warm_records");
    c.s.copy_cu("lines", "kernels");
    // 36 values a thread, not 48: it still spills at 32 registers, and
    // nvdisasm's text (the fixture) is smaller.
    let tmpl = c.s.read("kernels/tmpl.cu");
    assert!(tmpl.contains("churner<48>"), "{tmpl}");
    c.s.write(
        "kernels/tmpl.cu",
        &tmpl.replace("churner<48>", "churner<36>"),
    );
    let build = |archs: &[&str]| c.build_for(archs).try_compile_with(&c.env(&[]));
    let cold = build(&["sm_80", "sm_90"]).unwrap_or_else(|e| panic!("cold build: {e}"));
    let manifest = c.s.read("out/occ/manifest.json");
    assert!(manifest.contains("\"lines\""), "{manifest}");
    let records = c.s.path().join("out/occ/cache/lines");
    let record = records.join("kernels_tmpl.sm_80.json");
    let stamp = |p: &Path| {
        std::fs::metadata(p)
            .and_then(|m| m.modified())
            .expect("mtime")
    };
    let written = stamp(&record);
    let mut names: Vec<String> = std::fs::read_dir(&records)
        .expect("the records")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["kernels_tmpl.sm_80.json", "kernels_tmpl.sm_90.json"]
    );

    // Warm: nvcc and nvdisasm do not run; the same bytes.
    let disassembled = c.disassembled();
    let warm = build(&["sm_80", "sm_90"]).unwrap_or_else(|e| panic!("warm build: {e}"));
    assert_eq!(warm.nvcc_runs, 0);
    assert_eq!(c.disassembled(), disassembled, "nvdisasm ran");
    assert_eq!(c.s.read("out/occ/manifest.json"), manifest);
    assert_eq!(stamp(&record), written, "the record was rewritten");
    assert_eq!(
        warm.manifest().expect("manifest"),
        cold.manifest().expect("manifest")
    );

    // The memo misses (an output deleted; the warm
    // build above was the memo's) and the jobs' results hold: the records
    // are read, nvdisasm does not run.
    std::fs::remove_file(c.out().join("kernels.rs")).expect("delete kernels.rs");
    build(&["sm_80", "sm_90"]).unwrap_or_else(|e| panic!("memo missed: {e}"));
    assert_eq!(
        c.disassembled(),
        disassembled,
        "nvdisasm ran though its records held"
    );
    assert_eq!(c.s.read("out/occ/manifest.json"), manifest);

    // A record that no longer matches (another key) is recomputed, to the same bytes.
    let text = std::fs::read_to_string(&record).expect("read the record");
    let key_at = text.find("\"key\":\"").expect("a key") + 7;
    let mut changed = text.clone();
    changed.replace_range(key_at..key_at + 4, "0000");
    std::fs::write(&record, &changed).expect("write the record");
    std::fs::remove_file(records.join("kernels_tmpl.sm_90.json")).expect("remove a record");
    build(&["sm_80", "sm_90"]).unwrap_or_else(|e| panic!("rebuild: {e}"));
    assert_eq!(c.s.read("out/occ/manifest.json"), manifest);
    assert_eq!(std::fs::read_to_string(&record).expect("read"), text);

    // An arch dropped: its record goes.
    build(&["sm_80"]).unwrap_or_else(|e| panic!("sm_80 build: {e}"));
    assert!(!records.join("kernels_tmpl.sm_90.json").exists());
    assert!(record.exists());
}

// ---------------------------------------------------------------------
// The gate against occ.lock (more, live, in baseline.rs)

/// A crate with `alpha` in `a.cu` and `beta` in `b.cu`, blessed for sm_80.
fn two_kernels(test: &'static str) -> Crate {
    let c = Crate::new(test);
    c.s.write("kernels/a.cu", ALPHA);
    c.s.write("kernels/b.cu", BETA);
    c.build(["sm_80"])
        .try_compile_with(&c.env(&[("OCC_BLESS", Some("1"))]))
        .expect("bless");
    c
}

/// A file moved with the same kernels passes the gate.
#[test]
fn gate_a_moved_file_with_the_same_kernels_passes() {
    let c = two_kernels("gate_moved_file");
    std::fs::rename(
        c.s.path().join("kernels/b.cu"),
        c.s.path().join("kernels/c.cu"),
    )
    .expect("move");
    if let Err(e) = gated(&c, &[]).0 {
        panic!("b.cu moved to c.cu, no kernel changed, yet the gate failed: {e}");
    }
}

/// A renamed kernel's verdict shows the name gone and the new one.
#[test]
fn gate_a_renamed_kernel_shows_its_new_name() {
    let c = two_kernels("gate_renamed_kernel");
    c.s.write("kernels/b.cu", &BETA.replace("beta", "renamed_kernel"));
    let msg = gated(&c, &[])
        .0
        .expect_err("beta renamed to renamed_kernel");
    assert!(
        msg.contains("beta") && msg.contains("renamed_kernel"),
        "the verdict must show the kernel gone (beta) and the new one (renamed_kernel): {msg}"
    );
}

/// A lock with the same entry twice is refused, saying so.
#[test]
fn gate_duplicate_lock_entries_are_refused() {
    let c = blessed_alpha("gate_duplicate_entries");
    let mut lock: serde_json::Value =
        serde_json::from_str(&c.s.read("occ.lock")).expect("lock JSON");
    let first = lock["kernels"][0].clone();
    lock["kernels"]
        .as_array_mut()
        .expect("kernels array")
        .push(first);
    c.s.write(
        "occ.lock",
        &format!("{}\n", serde_json::to_string_pretty(&lock).expect("JSON")),
    );
    let msg = gated(&c, &[])
        .0
        .expect_err("a lock with the same kernel twice was accepted");
    assert!(
        msg.contains("duplicate") || msg.contains("twice"),
        "the message must say an entry is duplicated: {msg}"
    );
}

// ---------------------------------------------------------------------
// The replay itself

/// A command the fixture lacks is refused loudly, naming it: here a
/// source never recorded.
#[test]
fn a_replay_refuses_a_build_it_has_no_record_of() {
    if recording() {
        return; // a real nvcc compiles anything
    }
    let c = Crate::new("memo_edited_header");
    c.s.write("kernels/staged.cu", STAGED);
    c.s.write("kernels/common.cuh", "#define SMEM 128\n");
    let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_staged(&c, &[])));
    let message = refused
        .err()
        .and_then(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        })
        .unwrap_or_default();
    assert!(
        message.contains("no recorded run of") || message.contains("panicked"),
        "{message}"
    );
}
