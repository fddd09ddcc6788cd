//! The build memo (`occ-build/src/stage/memo.rs`) with the real nvcc:
//! blessing writes the lock a later build stands on, and a part built
//! after one the memo served holds both parts' kernels. The memo's rules
//! themselves (a build that would change nothing writes nothing and
//! prints what the last one printed; an edited header, a deleted output,
//! a changed lock, a gate failure make it do the full work) are tested on
//! nvcc 13.5's recorded runs in `replay.rs`.

use occ_build::{Build, Launch, Report};
use occ_tests::{build_env, Scratch};
use std::path::PathBuf;

const KERNEL: &str = "#include \"common.cuh\"\n\
extern \"C\" __global__ void staged(float* p) {\n\
  __shared__ float s[SMEM];\n\
  s[threadIdx.x % SMEM] = p[threadIdx.x];\n\
  __syncthreads();\n\
  p[threadIdx.x] = s[(threadIdx.x + 1) % SMEM];\n\
}\n";

/// A crate of one kernel whose shared memory its header sets, built for
/// sm_80.
struct Crate {
    s: Scratch,
}

impl Crate {
    fn new() -> Crate {
        let s = Scratch::new();
        s.write("kernels/staged.cu", KERNEL);
        s.write("kernels/common.cuh", "#define SMEM 256\n");
        Crate { s }
    }

    /// Judged at blocks of 256 threads, where shared memory decides the
    /// occupancy.
    fn build(&self) -> Build {
        let mut b = self.s.build(["sm_80"]);
        b.launch("staged", Launch::block(256));
        b
    }

    fn env(&self, extra: &[(&str, Option<&str>)]) -> occ_shell::Env {
        build_env(extra)
    }

    fn run(&self, extra: &[(&str, Option<&str>)]) -> occ_build::Result<Report> {
        self.build().try_compile_with(&self.env(extra))
    }

    fn out(&self) -> PathBuf {
        self.s.path().join("out").join("occ")
    }
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
    assert!(
        kernels_rs.contains("pub mod staged {") && kernels_rs.contains("pub mod b {"),
        "{kernels_rs}"
    );
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
