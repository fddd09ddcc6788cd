//! The build memo (`occ-build/src/memo.rs`): a build that would change
//! nothing writes nothing and prints what the last one printed; anything
//! its outputs depend on that changed makes it do the full work.

use occ_build::{Build, ErrorKind, Launch, Report};
use occ_shell::status::{last_build, BuildState};
use occ_tests::{build_env, counting_launcher, launches, Scratch};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

const KERNEL: &str = "#include \"common.cuh\"\n\
extern \"C\" __global__ void staged(float* p) {\n\
  __shared__ float s[SMEM];\n\
  s[threadIdx.x % SMEM] = p[threadIdx.x];\n\
  __syncthreads();\n\
  p[threadIdx.x] = s[(threadIdx.x + 1) % SMEM];\n\
}\n";

/// A crate of one kernel whose shared memory its header sets, built for
/// sm_80 with nvcc's runs counted in `nvcc.log`.
struct Crate {
    s: Scratch,
    log: PathBuf,
    launcher: PathBuf,
}

impl Crate {
    fn new() -> Crate {
        let s = Scratch::new();
        s.write("kernels/staged.cu", KERNEL);
        s.write("kernels/common.cuh", "#define SMEM 256\n");
        let log = s.path().join("nvcc.log");
        let launcher = counting_launcher(s.path(), &log);
        Crate { s, log, launcher }
    }

    /// Judged at blocks of 256 threads, where shared memory decides the
    /// occupancy.
    fn build(&self) -> Build {
        let mut b = self.s.build(["sm_80"]);
        b.launch("staged", Launch::block(256));
        b
    }

    fn env(&self, extra: &[(&str, Option<&str>)]) -> occ_shell::Env {
        let mut vars = vec![("OCC_NVCC_LAUNCHER", self.launcher.to_str())];
        vars.extend_from_slice(extra);
        build_env(&vars)
    }

    fn run(&self, extra: &[(&str, Option<&str>)]) -> occ_build::Result<Report> {
        self.build().try_compile_with(&self.env(extra))
    }

    fn out(&self) -> PathBuf {
        self.s.path().join("out").join("occ")
    }

    fn nvcc_runs(&self) -> usize {
        launches(&self.log).len()
    }
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

#[test]
fn an_unchanged_build_writes_nothing_and_prints_the_same() {
    let c = Crate::new();
    c.run(&[("OCC_BLESS", Some("1"))]).expect("bless");
    // The lock is new to this build: it does the full work and records.
    let full = c.run(&[]).expect("build");
    let before = mtimes(c.s.path());
    let runs = c.nvcc_runs();
    // What cargo reruns the script for: a touched source, same bytes.
    touch(&c.s.path().join("kernels/staged.cu"));
    let before_touch: Vec<_> = before
        .iter()
        .filter(|(p, _)| !p.ends_with("kernels/staged.cu"))
        .cloned()
        .collect();
    let again = c.run(&[]).expect("rebuild");
    assert_eq!(c.nvcc_runs(), runs, "no nvcc run");
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
        let again = c.run(&[]).expect("rebuild");
        assert_eq!(again.nvcc_runs, 0);
        assert_eq!(
            but_parts(c.s.path()),
            before,
            "served by the memo: no file written but parts.json"
        );
    }
}

#[test]
fn an_edited_header_is_compiled_again() {
    let c = Crate::new();
    let first = c.run(&[]).expect("build");
    let smem = |r: &Report| r.manifest().expect("manifest").kernels[0].archs["sm_80"].static_smem;
    assert_eq!(smem(&first), 256 * 4);
    let runs = c.nvcc_runs();
    c.s.write("kernels/common.cuh", "#define SMEM 512\n");
    let second = c.run(&[]).expect("rebuild");
    assert_eq!(c.nvcc_runs(), runs + 1, "the job runs again");
    assert_eq!(smem(&second), 512 * 4);
    assert!(c.s.read("out/occ/kernels.rs").contains("static_smem: 2048"));
}

#[test]
fn a_deleted_output_is_written_again() {
    let c = Crate::new();
    c.run(&[]).expect("build");
    let kernels_rs = c.out().join("kernels.rs");
    let text = std::fs::read_to_string(&kernels_rs).expect("kernels.rs");
    std::fs::remove_file(&kernels_rs).expect("delete");
    c.run(&[]).expect("rebuild");
    assert_eq!(
        std::fs::read_to_string(&kernels_rs).expect("kernels.rs again"),
        text
    );
}

/// Blesses the lock, then builds once more so that the memo is recorded
/// against it.
fn blessed() -> Crate {
    let c = Crate::new();
    c.run(&[("OCC_BLESS", Some("1"))]).expect("bless");
    c.run(&[]).expect("build");
    c
}

#[test]
fn a_changed_lock_is_judged_again() {
    let c = blessed();
    // The lock says the kernel used one register: today's build is a
    // regression against it.
    let lock = c.s.path().join("occ.lock");
    let text = std::fs::read_to_string(&lock).expect("lock");
    let at = text.find("\"registers\": ").expect("registers") + "\"registers\": ".len();
    let end = at + text[at..].find(',').expect("a number");
    let edited = format!("{}1{}", &text[..at], &text[end..]);
    assert_ne!(edited, text, "{text}");
    std::fs::write(&lock, edited).expect("edit the lock");
    let e = c.run(&[]).expect_err("a regression against the lock");
    assert_eq!(e.kind(), ErrorKind::Gate, "{e}");
    assert!(e.to_string().contains("cargo occ bless"), "{e}");
}

#[test]
fn a_gate_failure_fails_again() {
    let c = blessed();
    c.s.write("kernels/common.cuh", "#define SMEM 12288\n");
    let e = c.run(&[]).expect_err("more shared memory: fewer blocks");
    assert_eq!(e.kind(), ErrorKind::Gate, "{e}");
    assert!(e.to_string().contains("cargo occ bless"), "{e}");
    assert_eq!(last_build(&c.out()), Some(BuildState::GateFailed));
    // Nothing changed since: the same failure, not the last good build.
    let e = c.run(&[]).expect_err("still a regression");
    assert_eq!(e.kind(), ErrorKind::Gate, "{e}");
    assert!(e.to_string().contains("cargo occ bless"), "{e}");
}

#[test]
fn a_blessed_lock_is_written() {
    let c = Crate::new();
    let first = c.run(&[]).expect("build");
    assert!(
        first
            .directives()
            .warnings()
            .iter()
            .any(|w| w.contains("no occ.lock yet")),
        "{:?}",
        first.directives().warnings()
    );
    let lock = c.s.path().join("occ.lock");
    assert!(!lock.exists());
    c.run(&[("OCC_BLESS", Some("1"))]).expect("bless");
    assert!(lock.is_file(), "OCC_BLESS=1 writes the lock");
    let after = c.run(&[]).expect("build on the lock");
    assert!(
        !after
            .directives()
            .warnings()
            .iter()
            .any(|w| w.contains("no occ.lock yet")),
        "{:?}",
        after.directives().warnings()
    );
}

#[test]
fn a_part_after_a_reused_one_holds_both() {
    let c = Crate::new();
    c.s.write(
        "other/b.cu",
        "extern \"C\" __global__ void b(int* p) { p[0] = 2; }\n",
    );
    let part_b = || {
        let mut b = Build::new();
        b.root(c.s.path())
            .out_dir(c.s.path().join("out"))
            .file("other/b.cu")
            .arch("sm_80")
            .name("b");
        b
    };
    c.run(&[]).expect("build");
    // Served by its memo: the default part is registered without its
    // manifest, which part b reads from manifest.json.
    let status = c.out().join("status.json");
    let written = std::fs::metadata(&status)
        .and_then(|m| m.modified())
        .expect("status");
    c.run(&[]).expect("rebuild");
    assert_eq!(
        std::fs::metadata(&status)
            .and_then(|m| m.modified())
            .expect("status"),
        written,
        "the default part was served by its memo"
    );
    let both = part_b().try_compile_with(&c.env(&[])).expect("part b");
    let written = std::fs::metadata(&status)
        .and_then(|m| m.modified())
        .expect("status");
    let names = |r: &Report| -> Vec<String> {
        let mut n: Vec<String> = r
            .manifest()
            .expect("manifest")
            .kernels
            .iter()
            .map(|k| k.name.clone())
            .collect();
        n.sort();
        n
    };
    assert_eq!(names(&both), ["b", "staged"]);
    let kernels_rs = c.s.read("out/occ/kernels.rs");
    assert!(kernels_rs.contains("\"staged\"") && kernels_rs.contains("\"b\""));
    // Several parts share the outputs: the default part does its work.
    let again = c.run(&[]).expect("the default part again");
    assert_ne!(
        std::fs::metadata(&status)
            .and_then(|m| m.modified())
            .expect("status"),
        written,
        "the default part ran"
    );
    assert_eq!(names(&again), ["b", "staged"]);
}
