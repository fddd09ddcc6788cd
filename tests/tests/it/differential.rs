//! The differential test of occ's cache: a seeded random sequence
//! of steps over a scratch crate (edit a source, edit, add, delete or shadow
//! a header, change a define, a flag, `NVCC_APPEND_FLAGS` or
//! `NVCC_PREPEND_FLAGS`, swap ptxas for a wrapper that changes its output,
//! kill a build midway, touch a file, do nothing). After each step the warm
//! build (the persistent `OUT_DIR`) must equal a cold build (an empty
//! `OUT_DIR`) of the same inputs, byte for byte: `manifest.json`,
//! `kernels.rs` and every device-code file.
//!
//! The crate's build script is compiled once by cargo and then run directly
//! with the environment cargo gives it. Cargo would rerun it only when a
//! file or variable it printed as `rerun-if-changed`/`rerun-if-env-changed`
//! changed; so when a step changes nothing watched, the test does not rerun
//! it either, and the last warm output must still equal the cold one (else
//! cargo would serve stale output).
//!
//! Steps and checks aimed where errors stay silent: source lines
//! toggled (`DIFF_LINES`); a second `Build` (`.name("two")`) over another
//! file, or over the same file, which must fail in warm and cold builds
//! alike, naming both (`DIFF_SECOND`); a check that a build from the lock
//! (`OCC_NO_NVCC`, the warm candidate blessed, with a measurement imported
//! against an earlier build, so sometimes stale) has the same numbers,
//! hashes and verdict on each measurement as the warm build; and every
//! few cold builds, the same inputs built in a second folder, whose
//! manifest, `kernels.rs` and candidate lock (and, without source lines,
//! device code) must equal the warm build's.
//!
//! The include search's mutations: a header created in
//! every folder the preprocessor searches (the source's, each `-I`, the
//! toolkit's include folder) that a `__has_include` of a macro finds
//! (`OptHeader`), a header that shadows a toolkit header by quotes or
//! angle brackets and goes on with `#include_next` (`ShadowToolkit`), and a
//! variable the toolkit's `nvcc.profile` expands into its include folders
//! (`DIFF_PROFILE_INC`).
//!
//! `OCC_DIFF_SEED` and `OCC_DIFF_STEPS` choose the run; a failure prints the
//! seed and the steps that led to it. `OCC_DIFF_LAUNCHER` (e.g. a path to
//! sccache) runs every build's nvcc through that launcher, with sccache's
//! `SCCACHE_*` variables passed on (`scripts/sccache-dist-check` runs a
//! sample so). CI's sample is the first 60 steps of
//! the fixed seed (every kind of step comes up, and it fails for a header
//! edit the cache misses: BENCHMARKS.md); the full run (`OCC_TEST_FULL=1`,
//! `scripts/release-check`) takes 200, and `scripts/differential` thousands.
//! Cold builds are memoised by the full input state (nvcc is deterministic).

use occ_model::schema::lock::Lock;
use occ_model::schema::manifest::Manifest;
use occ_tests::surroundings::{outputs, reswap, scratch_toolkit, script_ok, BuildScript};
use occ_tests::{text, Scratch, ScratchCrate};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const PACKAGE: &str = "occ-differential";
/// The seed of CI's sample and of the full run.
const SEED: u64 = 0x0cc1_4d82;
/// Steps of CI's sample and of the full run.
const SAMPLE_STEPS: u64 = 60;
const FULL_STEPS: u64 = 200;

const BUILD_RS: &str = r#"fn main() {
    println!("cargo::rerun-if-env-changed=DIFF_DEFINES");
    println!("cargo::rerun-if-env-changed=DIFF_FLAGS");
    println!("cargo::rerun-if-env-changed=DIFF_LINES");
    println!("cargo::rerun-if-env-changed=DIFF_SECOND");
    let mut b = occ_build::Build::new();
    b.file("kernels/a.cu")
        .file("kernels/b.cu")
        .include("inc0")
        .include("inc")
        .arch("sm_80");
    let defines = std::env::var("DIFF_DEFINES").unwrap_or_default();
    for d in defines.split(',').filter(|d| !d.is_empty()) {
        match d.split_once('=') {
            Some((k, v)) => b.define(k, Some(v)),
            None => b.define(d, None),
        };
    }
    for f in std::env::var("DIFF_FLAGS").unwrap_or_default().split_whitespace() {
        b.flag(f);
    }
    if std::env::var("DIFF_LINES").as_deref() == Ok("0") {
        b.source_lines(false);
    }
    b.compile();
    let second = match std::env::var("DIFF_SECOND").as_deref() {
        Ok("other") => "kernels/c.cu",
        Ok("same") => "kernels/b.cu",
        _ => return,
    };
    let mut two = occ_build::Build::new();
    two.name("two").file(second).arch("sm_80");
    if std::env::var("DIFF_LINES").as_deref() == Ok("0") {
        two.source_lines(false);
    }
    two.compile();
}
"#;

/// The second Build's own file.
const C_CU: &str = "extern \"C\" __global__ void kc(int* p) { p[threadIdx.x] += 3; }\n";

/// The toolkit header both files include (by quotes in `a.cu`, by angle
/// brackets in `b.cu`), which a [`Step::ShadowToolkit`] header shadows.
const TOOLKIT_HEADER: &str = "vector_types.h";

fn a_cu(k: u64) -> String {
    format!(
        "#include \"common.cuh\"\n#if __has_include(\"util.cuh\")\n#include \"util.cuh\"\n#endif\n\
         #define OPT_H \"opt.cuh\"\n#if __has_include(OPT_H)\n#include OPT_H\n#endif\n\
         #if __has_include(\"profile.cuh\")\n#include \"profile.cuh\"\n#endif\n\
         #include \"{TOOLKIT_HEADER}\"\n\
         #ifndef UTIL\n#define UTIL 0\n#endif\n#ifndef BOOST\n#define BOOST 0\n#endif\n\
         #ifndef OPT\n#define OPT 0\n#endif\n#ifndef PROF\n#define PROF 0\n#endif\n\
         #ifndef TK\n#define TK 0\n#endif\n\
         #define NA ({k} + COMMON + UTIL + BOOST + OPT + PROF + TK)\n\
         extern \"C\" __global__ void ka(const float* in, float* out, int n) {{\n  float v[NA + 1];\n\
         #pragma unroll\n  for (int i = 0; i <= NA; ++i) v[i] = in[(threadIdx.x + i * 31) % n];\n  float acc = 0.f;\n\
         #pragma unroll\n  for (int i = 0; i <= NA; ++i)\n#pragma unroll\n    for (int j = 0; j <= NA; ++j) acc += v[i] * v[(i * 3 + j) % (NA + 1)];\n\
         out[threadIdx.x] = acc;\n}}\n"
    )
}

fn b_cu(k: u64) -> String {
    format!(
        "#include \"common.cuh\"\n#include <{TOOLKIT_HEADER}>\n#ifndef BOOST\n#define BOOST 0\n#endif\n\
         #ifndef TK\n#define TK 0\n#endif\n\
         #define SB ({k} * 64 + COMMON * 32 + BOOST * 16 + TK * 8 + 32)\n\
         extern \"C\" __global__ void kb(float* p) {{\n  __shared__ float t[SB];\n  t[threadIdx.x % SB] = p[threadIdx.x];\n  __syncthreads();\n  p[threadIdx.x] = t[(threadIdx.x * 7) % SB];\n}}\n"
    )
}

fn common(k: u64) -> String {
    format!("#pragma once\n#define COMMON {k}\n")
}

fn util(k: u64) -> String {
    format!("#pragma once\n#define UTIL {k}\n")
}

/// A header that shadows the toolkit's [`TOOLKIT_HEADER`] and goes on to it.
fn toolkit_shadow(k: u64) -> String {
    format!("#pragma once\n#define TK {k}\n#include_next <{TOOLKIT_HEADER}>\n")
}

/// xorshift64*: small, seeded, the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One step of a run, as printed in a reproduction recipe.
#[derive(Debug, Clone)]
enum Step {
    /// Write `kernels/<file>` with its constant.
    EditSource(&'static str, u64),
    /// Write a header (`inc/common.cuh`, `inc/util.cuh`).
    WriteHeader(&'static str, u64),
    /// Delete a header.
    DeleteHeader(&'static str),
    /// Add `common.cuh` beside the sources or in the earlier `-I` folder.
    Shadow(&'static str, u64),
    /// Remove that shadowing header.
    Unshadow(&'static str),
    /// Set (or, with `None`, unset) an environment variable.
    SetVar(&'static str, Option<String>),
    /// Swap ptxas for a wrapper passing these extra arguments ("" = none).
    SwapPtxas(&'static str),
    /// Start a warm build and SIGKILL it after this many milliseconds.
    Kill(u64),
    /// Touch a file without changing it.
    Touch(&'static str),
    /// Write `opt.cuh` (found by `__has_include(OPT_H)`) into a folder the
    /// include search looks in: the source's, an `-I` or the toolkit's.
    OptHeader(&'static str, u64),
    /// Remove that header.
    RemoveOpt(&'static str),
    /// Write a header beside the sources or in the first `-I` folder that
    /// shadows the toolkit's [`TOOLKIT_HEADER`].
    ShadowToolkit(&'static str, u64),
    /// Remove that header.
    UnshadowToolkit(&'static str),
    /// Check a build from the lock against the warm build (no input
    /// changes).
    LockMode,
    /// Nothing.
    Noop,
}

/// The folders [`Step::OptHeader`] writes into (`toolkit/include` is the
/// scratch toolkit's own include folder).
const SEARCHED: [&str; 4] = ["kernels", "inc0", "inc", "toolkit/include"];

fn draw(rng: &mut Rng) -> Step {
    match rng.below(20) {
        0 | 1 => Step::EditSource(["a.cu", "b.cu"][rng.below(2) as usize], rng.below(3)),
        2 => Step::WriteHeader(
            ["inc/common.cuh", "inc/util.cuh"][rng.below(2) as usize],
            rng.below(3),
        ),
        3 => Step::DeleteHeader("inc/util.cuh"),
        4 => Step::Shadow(["kernels", "inc0"][rng.below(2) as usize], 1 + rng.below(2)),
        5 => Step::Unshadow(["kernels", "inc0"][rng.below(2) as usize]),
        6 => Step::SetVar(
            "DIFF_DEFINES",
            [None, Some("BOOST=1"), Some("BOOST=2"), Some("BOOST")][rng.below(4) as usize]
                .map(str::to_string),
        ),
        7 => Step::SetVar(
            "DIFF_FLAGS",
            [
                None,
                Some("-maxrregcount=16"),
                Some("-maxrregcount=24"),
                Some("-lineinfo"),
            ][rng.below(4) as usize]
                .map(str::to_string),
        ),
        8 => Step::SetVar(
            ["NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS"][rng.below(2) as usize],
            [None, Some("-DBOOST=3"), Some("-maxrregcount=24")][rng.below(3) as usize]
                .map(str::to_string),
        ),
        9 => Step::SwapPtxas(["", "-O0", "-O1"][rng.below(3) as usize]),
        10 => Step::Kill(5 + rng.below(800)),
        11 => {
            Step::Touch(["kernels/a.cu", "inc/common.cuh", "kernels/b.cu"][rng.below(3) as usize])
        }
        12 => Step::SetVar(
            "DIFF_LINES",
            [None, Some("0")][rng.below(2) as usize].map(str::to_string),
        ),
        13 => Step::SetVar(
            "DIFF_SECOND",
            [None, Some("other"), Some("same")][rng.below(3) as usize].map(str::to_string),
        ),
        14 => Step::LockMode,
        15 => Step::OptHeader(SEARCHED[rng.below(4) as usize], rng.below(3)),
        16 => Step::RemoveOpt(SEARCHED[rng.below(4) as usize]),
        17 => match rng.below(3) {
            0 => Step::UnshadowToolkit(["kernels", "inc0"][rng.below(2) as usize]),
            _ => Step::ShadowToolkit(["kernels", "inc0"][rng.below(2) as usize], 1 + rng.below(2)),
        },
        18 => Step::SetVar(
            "DIFF_PROFILE_INC",
            [None, Some("prof1"), Some("prof2")][rng.below(3) as usize].map(str::to_string),
        ),
        _ => Step::Noop,
    }
}

/// The scratch crate and everything a build reads besides it.
struct World {
    crate_dir: ScratchCrate,
    toolkit: PathBuf,
    nvcc: PathBuf,
    vars: BTreeMap<&'static str, String>,
    ptxas: &'static str,
    /// `OCC_DIFF_LAUNCHER` and the launcher's variables, for every build.
    launcher: Vec<(&'static str, String)>,
}

/// What a step changed: paths (absolute) and variables.
#[derive(Default)]
struct Change {
    paths: Vec<PathBuf>,
    vars: Vec<&'static str>,
}

impl World {
    /// The world before the first step; every build runs nvcc through
    /// `launcher` (`launcher_env`, read once).
    fn new(launcher: Vec<(&'static str, String)>) -> World {
        let s = ScratchCrate::new(PACKAGE).dep("occ").build_dep("occ-build");
        s.write("build.rs", BUILD_RS);
        s.write("src/lib.rs", "");
        s.write("kernels/a.cu", &a_cu(2));
        s.write("kernels/b.cu", &b_cu(1));
        s.write("kernels/c.cu", C_CU);
        s.write("inc/common.cuh", &common(1));
        s.write("inc/util.cuh", &util(1));
        s.write("prof1/profile.cuh", "#define PROF 1\n");
        s.write("prof2/profile.cuh", "#define PROF 2\n");
        std::fs::create_dir_all(s.path().join("inc0")).expect("inc0");
        let toolkit = s.path().join("toolkit");
        let nvcc = scratch_toolkit(&toolkit, &[("bin/ptxas", "")]);
        // An include folder of its own, so that a step can add a header
        // to it, and a profile that adds a variable's folder to every
        // job's include search.
        own_folder(&toolkit.join("include"));
        let profile = toolkit.join("bin/nvcc.profile");
        let mut text = std::fs::read_to_string(&profile).expect("read nvcc.profile");
        text.push_str("INCLUDES        +=  $(DIFF_PROFILE_INC) $(_SPACE_)\n");
        std::fs::write(&profile, text).expect("write nvcc.profile");
        World {
            crate_dir: s,
            toolkit,
            nvcc,
            vars: BTreeMap::new(),
            ptxas: "",
            launcher,
        }
    }

    fn root(&self) -> &Path {
        self.crate_dir.path()
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        self.crate_dir.write(rel, text)
    }

    fn apply(&mut self, step: &Step) -> Change {
        let mut change = Change::default();
        match step {
            Step::EditSource(file, k) => {
                let text = if *file == "a.cu" { a_cu(*k) } else { b_cu(*k) };
                change
                    .paths
                    .push(self.write(&format!("kernels/{file}"), &text));
            }
            Step::WriteHeader(rel, k) => {
                let text = if rel.ends_with("common.cuh") {
                    common(*k)
                } else {
                    util(*k)
                };
                change.paths.push(self.write(rel, &text));
            }
            Step::DeleteHeader(rel) => {
                let path = self.root().join(rel);
                let _ = std::fs::remove_file(&path);
                change.paths.push(path);
            }
            Step::Shadow(dir, k) => {
                change
                    .paths
                    .push(self.write(&format!("{dir}/common.cuh"), &common(10 + k)));
            }
            Step::Unshadow(dir) => {
                let path = self.root().join(dir).join("common.cuh");
                let _ = std::fs::remove_file(&path);
                change.paths.push(path);
            }
            Step::SetVar(name, value) => {
                // The profile's variable names a folder of the crate.
                let value = match (*name, value) {
                    ("DIFF_PROFILE_INC", Some(dir)) => {
                        Some(format!("-I{}", self.root().join(dir).display()))
                    }
                    _ => value.clone(),
                };
                match value {
                    Some(v) => self.vars.insert(name, v),
                    None => self.vars.remove(name),
                };
                change.vars.push(name);
            }
            Step::SwapPtxas(extra) => {
                reswap(&self.toolkit, "bin/ptxas", extra);
                self.ptxas = extra;
                change.paths.push(self.toolkit.join("bin/ptxas"));
            }
            Step::OptHeader(dir, k) => {
                change.paths.push(self.write(
                    &format!("{dir}/opt.cuh"),
                    &format!("#define OPT {}\n", k + 1),
                ));
            }
            Step::RemoveOpt(dir) => {
                let path = self.root().join(dir).join("opt.cuh");
                let _ = std::fs::remove_file(&path);
                change.paths.push(path);
            }
            Step::ShadowToolkit(dir, k) => {
                change
                    .paths
                    .push(self.write(&format!("{dir}/{TOOLKIT_HEADER}"), &toolkit_shadow(*k)));
            }
            Step::UnshadowToolkit(dir) => {
                let path = self.root().join(dir).join(TOOLKIT_HEADER);
                let _ = std::fs::remove_file(&path);
                change.paths.push(path);
            }
            Step::Touch(rel) => {
                let path = self.root().join(rel);
                if let Ok(f) = std::fs::File::options().append(true).open(&path) {
                    let _ = f.set_modified(std::time::SystemTime::now());
                }
                change.paths.push(path);
            }
            Step::Kill(_) | Step::Noop | Step::LockMode => {}
        }
        change
    }

    /// The environment of a build: the scratch toolkit's nvcc and the
    /// variables set (every step variable not set is unset).
    fn env(&self) -> Vec<(&'static str, Option<&str>)> {
        let mut env: Vec<(&'static str, Option<&str>)> =
            vec![("NVCC", Some(self.nvcc.to_str().expect("utf-8 path")))];
        for name in [
            "DIFF_DEFINES",
            "DIFF_FLAGS",
            "DIFF_LINES",
            "DIFF_SECOND",
            "NVCC_APPEND_FLAGS",
            "NVCC_PREPEND_FLAGS",
            "DIFF_PROFILE_INC",
        ] {
            env.push((name, self.vars.get(name).map(String::as_str)));
        }

        for (name, value) in &self.launcher {
            env.push((name, Some(value.as_str())));
        }
        env
    }

    /// A hash of every input: the crate's files, the variables, the ptxas.
    fn state(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for dir in ["kernels", "inc", "inc0", "toolkit/include"] {
            let mut files: Vec<PathBuf> = std::fs::read_dir(self.root().join(dir))
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .collect();
            files.sort();
            for f in files {
                f.hash(&mut h);
                std::fs::read(&f).unwrap_or_default().hash(&mut h);
            }
        }
        self.vars.hash(&mut h);
        self.ptxas.hash(&mut h);
        h.finish()
    }
}

/// Makes `link` (a symlink to a folder) a folder of its own holding a
/// link to each of its entries, so that files can be added to it.
fn own_folder(link: &Path) {
    let target = std::fs::read_link(link).expect("a linked folder");
    std::fs::remove_file(link).expect("remove the link");
    std::fs::create_dir(link).expect("create the folder");
    for entry in std::fs::read_dir(&target)
        .expect("read the folder")
        .flatten()
    {
        std::os::unix::fs::symlink(entry.path(), link.join(entry.file_name()))
            .expect("link an entry");
    }
}

/// The files and variables the last warm run told cargo to watch.
#[derive(Default)]
struct Watched {
    paths: BTreeSet<PathBuf>,
    vars: BTreeSet<String>,
}

impl Watched {
    fn from_stdout(stdout: &[u8]) -> Watched {
        let mut w = Watched::default();
        for line in String::from_utf8_lossy(stdout).lines() {
            let line = line
                .strip_prefix("cargo::")
                .or_else(|| line.strip_prefix("cargo:"));
            let Some(line) = line else { continue };
            if let Some(p) = line.strip_prefix("rerun-if-changed=") {
                w.paths.insert(PathBuf::from(p));
            } else if let Some(v) = line.strip_prefix("rerun-if-env-changed=") {
                w.vars.insert(v.to_string());
            }
        }
        w
    }

    /// Whether cargo would rerun the build script for `change` (a path is
    /// covered by itself or a watched folder above it).
    fn covers(&self, change: &Change, root: &Path) -> bool {
        let path_watched = |p: &Path| {
            self.paths.iter().any(|w| {
                let w = if w.is_absolute() {
                    w.clone()
                } else {
                    root.join(w)
                };
                p == w || p.starts_with(&w)
            })
        };
        change.paths.iter().any(|p| path_watched(p))
            || change.vars.iter().any(|v| self.vars.contains(*v))
    }
}

struct Run {
    seed: u64,
    steps: Vec<Step>,
}

impl Run {
    fn recipe(&self, what: &str) -> String {
        let recipe: Vec<String> = self
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| format!("  {i:>4}: {s:?}"))
            .collect();
        format!(
            "differential cache test failed at step {} (OCC_DIFF_SEED={} OCC_DIFF_STEPS={}):\n{what}\n\
             steps so far:\n{}",
            self.steps.len().saturating_sub(1),
            self.seed,
            self.steps.len(),
            recipe.join("\n")
        )
    }

    fn fail(&self, what: &str) -> ! {
        panic!("{}", self.recipe(what));
    }
}

fn differ(warm: &BTreeMap<String, Vec<u8>>, cold: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    let names: BTreeSet<&String> = warm.keys().chain(cold.keys()).collect();
    names
        .into_iter()
        .filter(|n| warm.get(*n) != cold.get(*n))
        .map(|n| match (warm.get(n), cold.get(n)) {
            (None, _) => format!("{n}: only in the cold build"),
            (_, None) => format!("{n}: only in the warm build"),
            _ => format!("{n}: differs"),
        })
        .collect()
}

/// Copies the crate's inputs (sources, headers, build script) into `to`.
fn mirror_sync(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    for dir in ["kernels", "inc", "inc0"] {
        std::fs::create_dir_all(to.join(dir)).expect("mirror folder");
        for entry in std::fs::read_dir(from.join(dir))
            .into_iter()
            .flatten()
            .flatten()
        {
            std::fs::copy(entry.path(), to.join(dir).join(entry.file_name())).expect("copy");
        }
    }
}

/// The outputs that must not depend on the folder: all but the CLI's
/// settings (`gate.json` names the crate root), the report and the status;
/// with source lines, not the device code either (its line table names
/// the folder by design), nor `device_code.rs`, which names each blob by
/// the hash and length of its bytes.
fn folder_free(files: &BTreeMap<String, Vec<u8>>, lines_off: bool) -> BTreeMap<String, Vec<u8>> {
    files
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "gate.json" | "report.txt" | "status.json"))
        .filter(|(name, _)| {
            lines_off
                || !(name.ends_with(".cubin")
                    || name.ends_with(".ptx")
                    || name.ends_with(".fatbin")
                    || *name == "device_code.rs")
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn read_manifest(warm_dir: &Path) -> Manifest {
    let path = warm_dir.join("occ/manifest.json");
    let text = std::fs::read_to_string(&path).expect("warm manifest");
    Manifest::from_json(&text, &path).expect("warm manifest parses")
}

/// The warm build's candidate blessed (with a measurement of `ka` imported,
/// taken on the cubin of `earlier`, so stale when `ka` changed since) and
/// built from without nvcc: the same numbers and cubin hashes as the warm
/// build, and each measurement judged the same (which is what a `tuned`
/// site bakes).
fn lock_mode_agrees(
    script: &BuildScript,
    world: &World,
    warm_dir: &Path,
    earlier: Option<&Manifest>,
    run: &Run,
) {
    let warm = read_manifest(warm_dir);
    let candidate = warm_dir.join("occ/occ.lock.new");
    let blessed = std::fs::read_to_string(&candidate).expect("candidate lock");
    let mut lock = Lock::from_text(&blessed, &candidate).expect("candidate lock parses");
    if let Some(earlier) = earlier.filter(|m| m.kernels.iter().any(|k| k.name == "ka")) {
        let results = occ_tests::recorded_results(
            earlier,
            "ka",
            "sm_80",
            "default",
            &[(128, 2.0), (256, 1.0)],
            0.01,
        );
        lock.import(&results).expect("import a measurement");
    }
    let lock_path = world.root().join("occ.lock");
    std::fs::write(&lock_path, lock.to_text()).expect("write the lock");
    let dir = tempfile::tempdir().expect("lock-mode OUT_DIR");
    let mut env = world.env();
    env.push(("OCC_NO_NVCC", Some("1")));
    let out = script.run(dir.path(), &env);
    let _ = std::fs::remove_file(&lock_path);
    if !script_ok(&out) {
        run.fail(&format!("a build from the lock failed:\n{}", text(&out)));
    }
    let from_lock = read_manifest(dir.path());
    let numbers = |m: &Manifest| -> Vec<(String, String, occ_model::schema::manifest::Resources)> {
        m.kernels
            .iter()
            .flat_map(|k| {
                k.archs
                    .iter()
                    .map(|(arch, a)| (k.name.clone(), arch.clone(), a.resources.clone()))
            })
            .collect()
    };
    if numbers(&warm) != numbers(&from_lock) {
        run.fail("a build from the lock has other numbers than the nvcc build it was blessed from");
    }
    // A measurement's staleness in a build; `None`: the build has no such
    // kernel on sm_80, so nothing to compare its hash with.
    let staleness = |b: &Manifest, m: &occ_model::schema::manifest::Measured| {
        b.kernels
            .iter()
            .find(|k| k.name == m.kernel)
            .and_then(|k| k.archs.get("sm_80"))
            .map(|a| m.staleness(a.cubin_hash.as_deref()))
    };
    for m in &from_lock.measured {
        let with_nvcc = staleness(&warm, m);
        let without = staleness(&from_lock, m);
        if with_nvcc != without {
            run.fail(&format!(
                "the measurement of {} is {with_nvcc:?} with nvcc but {without:?} from the lock",
                m.kernel
            ));
        }
    }
}

/// The variables sccache's client reads to find its server (and to start
/// one), passed to the build script beside `OCC_NVCC_LAUNCHER`.
const LAUNCHER_VARS: [&str; 8] = [
    "SCCACHE_SERVER_PORT",
    "SCCACHE_SERVER_UDS",
    "SCCACHE_CONF",
    "SCCACHE_DIR",
    "SCCACHE_CACHE_SIZE",
    "SCCACHE_IDLE_TIMEOUT",
    "SCCACHE_LOG",
    "SCCACHE_ERROR_LOG",
];

/// `OCC_DIFF_LAUNCHER=sccache`: every build, warm and cold, runs nvcc
/// through it (`OCC_NVCC_LAUNCHER`), with the `LAUNCHER_VARS` that are set;
/// unset, no launcher.
fn launcher_env() -> Vec<(&'static str, String)> {
    #[allow(clippy::disallowed_methods)]
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let Some(launcher) = var("OCC_DIFF_LAUNCHER") else {
        return Vec::new();
    };
    let mut env = vec![("OCC_NVCC_LAUNCHER", launcher)];
    env.extend(
        LAUNCHER_VARS
            .iter()
            .filter_map(|&name| var(name).map(|v| (name, v))),
    );
    env
}

fn env_u64(name: &str) -> Option<u64> {
    #[allow(clippy::disallowed_methods)]
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

#[test]
fn warm_build_equals_cold_build_after_every_step() {
    let seed = env_u64("OCC_DIFF_SEED").unwrap_or(SEED);
    // OCC_DIFF_KEEP_GOING=1: on a mismatch, print it, start the warm
    // OUT_DIR afresh and go on; fail at the end (to survey every kind).
    let keep_going = env_u64("OCC_DIFF_KEEP_GOING").is_some_and(|v| v != 0);
    let mut failures: Vec<(usize, String)> = Vec::new();
    let count = env_u64("OCC_DIFF_STEPS").unwrap_or(if occ_tests::full_run() {
        FULL_STEPS
    } else {
        SAMPLE_STEPS
    });
    eprintln!("differential: OCC_DIFF_SEED={seed} OCC_DIFF_STEPS={count}");
    let launcher = launcher_env();
    if let Some((_, via)) = launcher.first() {
        eprintln!("differential: every build through OCC_NVCC_LAUNCHER={via}");
    }
    let started = Instant::now();
    let mut rng = Rng(seed.max(1));
    let mut world = World::new(launcher);
    let script = BuildScript::compile(&world.crate_dir);
    let warm_dir = world.root().join("warm");
    let mut run = Run {
        seed,
        steps: Vec::new(),
    };
    let mut colds: HashMap<u64, BTreeMap<String, Vec<u8>>> = HashMap::new();
    let mut cold_runs = 0;
    let mut warm_runs = 0;

    let first = script.run(&warm_dir, &world.env());
    if !script_ok(&first) {
        run.fail(&format!("the first build failed:\n{}", text(&first)));
    }
    let mut watched = Watched::from_stdout(&first.stdout);
    // The same crate in another folder (another depth), for cold builds.
    let mirror = Scratch::new();
    let mirror_root = mirror.path().join("elsewhere/deeper");
    let mirror_script = BuildScript {
        root: mirror_root.clone(),
        ..script.clone()
    };
    let mut last_failed = false;
    let mut earlier: Option<Manifest> = None;
    for _ in 0..count {
        let step = draw(&mut rng);
        run.steps.push(step.clone());
        let change = world.apply(&step);
        let env = world.env();
        // A second Build over b.cu: every build fails, naming both Builds.
        let refused = world.vars.get("DIFF_SECOND").map(String::as_str) == Some("same");
        let refusal = |out: &std::process::Output, what: &str| {
            let said = String::from_utf8_lossy(&out.stdout);
            if script_ok(out) || !said.contains("kernels/b.cu is compiled by two Builds") {
                run.fail(&format!(
                    "{what} of a second Build over kernels/b.cu must fail naming both:\n{}",
                    text(out)
                ));
            }
        };
        // Source lines off, and no flag that asks for line info itself
        // (`-lineinfo` keeps the line table, which names the folder).
        let lines_off = world.vars.get("DIFF_LINES").map(String::as_str) == Some("0")
            && !world.vars.values().any(|v| v.contains("lineinfo"));
        let cold = colds.entry(world.state()).or_insert_with(|| {
            cold_runs += 1;
            let dir = tempfile::tempdir().expect("cold OUT_DIR");
            let out = script.run(dir.path(), &env);
            if refused {
                refusal(&out, "a cold build");
            } else if !script_ok(&out) {
                run.fail(&format!("a cold build failed:\n{}", text(&out)));
            }
            let cold = outputs(&dir.path().join("occ"));
            if !refused && cold_runs % 6 == 1 {
                mirror_sync(world.root(), &mirror_root);
                let there = tempfile::tempdir().expect("mirror OUT_DIR");
                let out = mirror_script.run(there.path(), &env);
                if !script_ok(&out) {
                    run.fail(&format!(
                        "a build in a second folder failed:\n{}",
                        text(&out)
                    ));
                }
                let diff = differ(
                    &folder_free(&cold, lines_off),
                    &folder_free(&outputs(&there.path().join("occ")), lines_off),
                );
                if !diff.is_empty() {
                    run.fail(&format!(
                        "the same inputs in a second folder gave other outputs:\n  {}",
                        diff.join("\n  ")
                    ));
                }
            }
            cold
        });
        if let Step::LockMode = step {
            if !last_failed && !refused {
                lock_mode_agrees(&script, &world, &warm_dir, earlier.as_ref(), &run);
                earlier = Some(read_manifest(&warm_dir));
            }
        }
        let rerun = match step {
            Step::Kill(ms) => {
                let mut child = script
                    .command(&warm_dir, &env)
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .expect("start the build");
                std::thread::sleep(Duration::from_millis(ms));
                let _ = child.kill();
                let _ = child.wait();
                // A killed build script failed: cargo reruns it next time.
                true
            }
            // Cargo reruns a build script that failed.
            _ => last_failed || watched.covers(&change, world.root()),
        };
        if rerun {
            warm_runs += 1;
            let out = script.run(&warm_dir, &env);
            watched = Watched::from_stdout(&out.stdout);
            last_failed = refused;
            if refused {
                refusal(&out, "a warm build");
                continue;
            } else if !script_ok(&out) {
                run.fail(&format!("a warm build failed:\n{}", text(&out)));
            }
        }
        if refused {
            continue;
        }
        let warm = outputs(&warm_dir.join("occ"));
        let diff = differ(&warm, cold);
        if !diff.is_empty() {
            let why = if rerun {
                "the warm build differs from a cold build of the same inputs"
            } else {
                "the step changed nothing the build script told cargo to watch, so cargo would \
                 not rerun it, but a cold build of the new inputs differs from the last warm one \
                 (cargo would serve stale output)"
            };
            let what = format!("{why}:\n  {}", diff.join("\n  "));
            if !keep_going {
                run.fail(&what);
            }
            eprintln!(
                "differential: step {}: {step:?}: {what}",
                run.steps.len() - 1
            );
            failures.push((run.steps.len() - 1, run.recipe(&what)));
            let _ = std::fs::remove_dir_all(&warm_dir);
            let out = script.run(&warm_dir, &env);
            if !script_ok(&out) {
                run.fail(&format!("a fresh warm build failed:\n{}", text(&out)));
            }
            watched = Watched::from_stdout(&out.stdout);
        }
    }
    eprintln!(
        "differential: {count} steps in {:.1} s ({warm_runs} warm runs, {cold_runs} cold runs)",
        started.elapsed().as_secs_f64()
    );
    if seed == SEED && count >= SAMPLE_STEPS {
        sample_covers_every_kind_of_step(&run.steps);
    }
    if let Some((_, first)) = failures.first() {
        let at: Vec<String> = failures.iter().map(|(i, _)| i.to_string()).collect();
        panic!(
            "{} mismatches (at steps {}); the first:\n{first}",
            failures.len(),
            at.join(", ")
        );
    }
}

/// CI's sample (the first [`SAMPLE_STEPS`] of [`SEED`]) must take every kind
/// of step, and set every variable, that [`draw`] can give.
fn sample_covers_every_kind_of_step(steps: &[Step]) {
    let kinds: BTreeSet<String> = steps
        .iter()
        .map(|step| {
            let text = format!("{step:?}");
            let end = if text.starts_with("SetVar(") {
                text.find(',')
            } else {
                text.find('(')
            };
            text[..end.unwrap_or(text.len())].to_string()
        })
        .collect();
    let every: BTreeSet<String> = [
        "EditSource",
        "WriteHeader",
        "DeleteHeader",
        "Shadow",
        "Unshadow",
        "SetVar(\"DIFF_DEFINES\"",
        "SetVar(\"DIFF_FLAGS\"",
        "SetVar(\"NVCC_APPEND_FLAGS\"",
        "SetVar(\"NVCC_PREPEND_FLAGS\"",
        "SetVar(\"DIFF_LINES\"",
        "SetVar(\"DIFF_SECOND\"",
        "SwapPtxas",
        "Kill",
        "Touch",
        "OptHeader",
        "RemoveOpt",
        "ShadowToolkit",
        "UnshadowToolkit",
        "SetVar(\"DIFF_PROFILE_INC\"",
        "LockMode",
        "Noop",
    ]
    .iter()
    .map(|k| k.to_string())
    .collect();
    let missing: Vec<&String> = every.difference(&kinds).collect();
    assert!(
        missing.is_empty(),
        "the first {} steps of seed {SEED:#x} never take {missing:?}: raise SAMPLE_STEPS",
        steps.len()
    );
}
