//! Support for occ's integration tests: finding the installed nvcc, the
//! fixtures, scratch folders, scratch crates that use occ as a new user
//! would, in-process builds, and `cargo occ` run as a process.
//!
//! CUDA sources live as files under `tests/fixtures/cu/<test>/`; a test takes
//! one with `include_str!` or copies a folder of them with
//! [`Scratch::copy_cu`]. Golden files (snapshots) are described in
//! `tests/README.md`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod surroundings;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The nvcc that `scripts/cuda-toolkit` installed (or NVCC/CUDA_HOME/PATH).
/// Panics with the fix when there is none: the live tests need a real nvcc.
pub fn nvcc() -> PathBuf {
    let env = occ_shell::Env::new();
    match occ_shell::toolkit::find_nvcc(&env, None, Some(&workspace_root())) {
        Ok(found) => found.path,
        Err(e) => panic!("the live tests need nvcc: {e}"),
    }
}

/// The CUDA include folder beside that nvcc.
pub fn cuda_include() -> PathBuf {
    nvcc()
        .parent()
        .and_then(Path::parent)
        .map(|home| home.join("include"))
        .unwrap_or_default()
}

/// `tests/fixtures/<rel>`.
pub fn fixture_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel)
}

/// `tests/fixtures/<rel>` as text.
pub fn fixture(rel: &str) -> String {
    let path = fixture_path(rel);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read fixture {}: {e}", path.display()))
}

/// Whether this is the full, corpus-scale run (`OCC_TEST_FULL=1`, which
/// `scripts/release-check` sets) rather than the sample that CI and
/// `scripts/test` run. The tests sized by it (`lineinfo`, `differential`)
/// say what their sample leaves to the full run; each sample still fails
/// for the bug its full run caught (BENCHMARKS.md, "The test suite").
pub fn full_run() -> bool {
    std::env::var("OCC_TEST_FULL").is_ok_and(|v| v == "1")
}

/// A temporary folder holding files.
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    /// A new empty folder under the system temp dir.
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("occ-test-")
            .tempdir()
            .expect("create a temp dir");
        Scratch { dir }
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a file (creating folders), returning its path.
    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create folders");
        }
        std::fs::write(&path, text).expect("write file");
        path
    }

    /// Reads a file below the folder.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(rel)).expect("read file")
    }

    /// Copies every file of the fixture folder `tests/fixtures/cu/<case>`
    /// into the folder `dest` (relative to this one, created when missing).
    pub fn copy_cu(&self, case: &str, dest: &str) {
        let from = fixture_path("cu").join(case);
        let entries = std::fs::read_dir(&from)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", from.display()));
        for entry in entries {
            let path = entry.expect("fixture entry").path();
            if path.is_file() {
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
                self.write(&format!("{dest}/{name}"), &text);
            }
        }
    }

    /// An in-process build of `kernels/*.cu` in this folder into `out/`,
    /// for `archs`; run it with `try_compile_with(&build_env(..))`.
    pub fn build<const N: usize>(&self, archs: [&str; N]) -> occ_build::Build {
        kernels_build(self.path(), &self.path().join("out"), archs)
    }
}

/// An in-process build of `kernels/*.cu` below `root` into `out`, for `archs`
/// ([`build_of`] with that glob).
pub fn kernels_build<const N: usize>(
    root: &Path,
    out: &Path,
    archs: [&str; N],
) -> occ_build::Build {
    build_of(root, out, "kernels/*.cu", archs)
}

/// The one way the suite sets up an in-process build: the crate below
/// `root`, into `out` (relative to `root`, or absolute), for `archs`, of
/// `sources`: a glob (it holds `*`, `?` or `[`) such as `kernels/*.cu`
/// (every match, and its folder watched for new files) or one file such as
/// `kernels/k.cu` (`.file()`: no folder watched, so only the job cache and
/// the memo can notice a header that appears beside it). Run it with
/// `try_compile_with(&build_env(..))`; add options with its setters.
pub fn build_of<const N: usize>(
    root: &Path,
    out: impl AsRef<Path>,
    sources: &str,
    archs: [&str; N],
) -> occ_build::Build {
    let mut b = occ_build::Build::new();
    b.root(root).out_dir(root.join(out)).archs(archs);
    if sources.contains(['*', '?', '[']) {
        b.glob(sources);
    } else {
        b.file(sources);
    }
    b
}

impl Default for Scratch {
    fn default() -> Self {
        Self::new()
    }
}

/// The target folder shared by every scratch crate of the test suite, so
/// occ-build and its dependencies compile once.
pub fn scratch_target_dir() -> PathBuf {
    workspace_root().join("target").join("scratch")
}

/// A wrapper script for `OCC_NVCC_LAUNCHER` that records every nvcc call
/// (its arguments, one line per call) in `log` and then runs the real nvcc.
pub fn counting_launcher(dir: &Path, log: &Path) -> PathBuf {
    surroundings::script(
        &dir.join("count-nvcc.sh"),
        &format!("echo \"$*\" >> '{}'\nexec \"$@\"", log.display()),
    )
}

/// The lines a counting launcher recorded (empty when none ran).
pub fn launches(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// `cargo` with the environment of a new user's shell: no variables of the
/// outer cargo that would leak into the scratch build, no `CI` or
/// `GITHUB_ACTIONS`, none of nvcc's own flag variables (`NVCC_APPEND_FLAGS`,
/// `NVCC_PREPEND_FLAGS`, `NVCC_CCBIN`: a test that wants one sets it), and
/// `NVCC` set to the installed nvcc (a scratch crate lies outside the
/// workspace and its `.cuda/`).
pub fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    for (key, _) in std::env::vars() {
        if key.starts_with("CARGO_") && key != "CARGO_HOME" && key != "CARGO_NET_OFFLINE"
            || key == "RUSTFLAGS"
            || key.starts_with("OCC_")
            || key == "OUT_DIR"
        {
            cmd.env_remove(key);
        }
    }
    // A scratch build behaves the same on a laptop and in CI: a test that
    // wants CI's rules (the lock never written, annotations) sets them.
    cmd.env_remove("CI").env_remove("GITHUB_ACTIONS");
    for key in ["NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS", "NVCC_CCBIN"] {
        cmd.env_remove(key);
    }
    cmd.env("CARGO_TARGET_DIR", scratch_target_dir());
    // A new user points occ at their CUDA install; ours is the one the
    // toolkit script installed.
    cmd.env("NVCC", nvcc());
    cmd
}

/// The `[dependencies]` line for a workspace crate, by path.
pub fn path_dep(name: &str) -> String {
    format!(
        "{name} = {{ path = {:?} }}",
        workspace_root().join(name).display().to_string()
    )
}

/// The build script of most scratch crates: every `kernels/*.cu` for sm_80
/// and sm_90.
pub const BUILD_RS: &str = r#"fn main() {
    occ_build::Build::new().glob("kernels/*.cu").archs(["sm_80", "sm_90"]).compile();
}
"#;

/// A crate made as a new user makes one: outside the workspace (its own
/// `[workspace]`), depending on occ's crates by path, built with plain
/// `cargo` ([`cargo`]) into the shared [`scratch_target_dir`]. The one
/// builder of a scratch crate the tests build with cargo; [`ScratchCrate::scale`]
/// is the crate most cache and no-nvcc tests use.
///
/// ```no_run
/// # use occ_tests::{ScratchCrate, BUILD_RS};
/// let krate = ScratchCrate::new("newuser")
///     .build_dep("occ-build")
///     .build_rs(BUILD_RS)
///     .cu("new_user", "kernels")
///     .file("src/main.rs", "fn main() {}\n");
/// let stdout = krate.run("first build");
/// # let _ = stdout;
/// ```
pub struct ScratchCrate {
    dir: Scratch,
    name: String,
    deps: Vec<String>,
    build_deps: Vec<String>,
}

impl ScratchCrate {
    /// The scale crate: depends on occ and, to build, occ-build; its build
    /// script runs `build` (the body of a chain on `occ_build::Build::new()`,
    /// e.g. `.glob("kernels/*.cu").arch("sm_80")`) and its binary prints
    /// `scale`'s sm_80 registers as `registers=N`
    /// ([`surroundings::printed_registers`]). The kernels are the test's to
    /// write.
    pub fn scale(name: &str, build: &str) -> Self {
        ScratchCrate::new(name)
            .dep("occ")
            .build_dep("occ-build")
            .build_rs(&format!(
                "fn main() {{\n    occ_build::Build::new(){build}.compile();\n}}\n"
            ))
            .file(
                "src/main.rs",
                "mod kernels {\n    include!(concat!(env!(\"OUT_DIR\"), \"/occ/kernels.rs\"));\n}\n\n\
                 fn main() {\n    println!(\"registers={}\", kernels::scale::KERNEL.on(\"sm_80\").expect(\"sm_80\").registers);\n}\n",
            )
    }

    /// A crate named `name` with a `Cargo.toml` and nothing else.
    pub fn new(name: &str) -> Self {
        let krate = ScratchCrate {
            dir: Scratch::new(),
            name: name.to_string(),
            deps: Vec::new(),
            build_deps: Vec::new(),
        };
        krate.write_manifest();
        krate
    }

    fn write_manifest(&self) {
        let mut toml = format!(
            "[package]\nname = \"{}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
            self.name
        );
        for (section, deps) in [
            ("dependencies", &self.deps),
            ("build-dependencies", &self.build_deps),
        ] {
            if !deps.is_empty() {
                toml += &format!("\n[{section}]\n{}\n", deps.join("\n"));
            }
        }
        self.dir.write("Cargo.toml", &toml);
    }

    /// Adds the workspace crate `name` to `[dependencies]`, by path.
    pub fn dep(mut self, name: &str) -> Self {
        self.deps.push(path_dep(name));
        self.write_manifest();
        self
    }

    /// Adds the workspace crate `name` to `[dependencies]`, by path, with
    /// `features`.
    pub fn dep_with(mut self, name: &str, features: &[&str]) -> Self {
        let line = path_dep(name);
        let features: Vec<String> = features.iter().map(|f| format!("{f:?}")).collect();
        self.deps.push(line.replacen(
            " }",
            &format!(", features = [{}] }}", features.join(", ")),
            1,
        ));
        self.write_manifest();
        self
    }

    /// Adds a line of its own to `[dependencies]` (a git dependency, a
    /// crate from the registry).
    pub fn dep_line(mut self, line: &str) -> Self {
        self.deps.push(line.to_string());
        self.write_manifest();
        self
    }

    /// Adds the workspace crate `name` to `[build-dependencies]`, by path.
    pub fn build_dep(mut self, name: &str) -> Self {
        self.build_deps.push(path_dep(name));
        self.write_manifest();
        self
    }

    /// Writes `build.rs`.
    pub fn build_rs(self, text: &str) -> Self {
        self.file("build.rs", text)
    }

    /// Writes a file of the crate.
    pub fn file(self, rel: &str, text: &str) -> Self {
        self.dir.write(rel, text);
        self
    }

    /// Copies the fixture folder `tests/fixtures/cu/<case>` into `dest`.
    pub fn cu(self, case: &str, dest: &str) -> Self {
        self.dir.copy_cu(case, dest);
        self
    }

    /// The package name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `cargo <args>` in the crate, with the environment of [`cargo`].
    pub fn cargo(&self, args: &[&str]) -> Command {
        let mut cmd = cargo();
        cmd.args(args).current_dir(self.path());
        cmd
    }

    /// `cargo <args>` in the crate with `env` set on top (`None`: unset);
    /// its output, whatever the status.
    pub fn output(&self, args: &[&str], env: &[(&str, Option<&str>)]) -> Output {
        let mut cmd = self.cargo(args);
        for (k, v) in env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        cmd.output()
            .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
    }

    /// `cargo run --quiet`, which must succeed (`what` names the step in the
    /// failure, with cargo's stdout and stderr); its stdout.
    pub fn run(&self, what: &str) -> String {
        let out = succeed(&mut self.cargo(&["run", "--quiet"]), what);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `cargo build`, which must fail; its stderr.
    pub fn build_fails(&self, what: &str) -> String {
        let out = fail(&mut self.cargo(&["build"]), what);
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

impl std::ops::Deref for ScratchCrate {
    type Target = Scratch;

    fn deref(&self) -> &Scratch {
        &self.dir
    }
}

/// A process's stdout, a newline, and its stderr.
pub fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `cmd`, which must succeed; the failure names `what` and shows the
/// process's stdout and stderr.
pub fn succeed(cmd: &mut Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {cmd:?} failed\n{}",
        text(&out)
    );
    out
}

/// Runs `cmd`, which must fail; the failure names `what` and shows the
/// process's stdout and stderr.
pub fn fail(cmd: &mut Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    assert!(
        !out.status.success(),
        "{what}: {cmd:?} must fail\n{}",
        text(&out)
    );
    out
}

/// `cargo occ` as cargo runs the subcommand (`cargo-occ occ <args>`): `bin`
/// is the test's `env!("CARGO_BIN_EXE_cargo-occ")`, `CI` and `GITHUB_ACTIONS` are unset, and `env`
/// is set on top.
pub fn cargo_occ(bin: &str, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(bin);
    cmd.arg("occ")
        .args(args)
        .current_dir(dir)
        .env_remove("CI")
        .env_remove("GITHUB_ACTIONS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// The `cuda_occupancy.h` oracle: the C++ harness of `tests/oracle/` built
/// against the installed header, and the device table it reads.
pub mod oracle {
    use occ_model::model::arch::Arch;
    use std::hash::{Hash, Hasher};
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::sync::OnceLock;

    /// Compiles `tests/oracle/harness.cpp` against the installed
    /// `cuda_occupancy.h` into `out_dir`, once per process, and returns the
    /// executable. Panics with the fix when the header or a C++ compiler is
    /// missing.
    ///
    /// The executable's name carries a hash of the harness, the header and
    /// the compiler, and it is written under a name of its own and then
    /// renamed into place: tests that run as processes of their own at once
    /// (cargo-nextest) may each compile it, and none runs a half-written or
    /// stale harness.
    pub fn harness(out_dir: &Path) -> &'static Path {
        static BIN: OnceLock<PathBuf> = OnceLock::new();
        BIN.get_or_init(|| {
            let src = super::workspace_root().join("tests/oracle/harness.cpp");
            let cuda_include = super::cuda_include();
            let header = cuda_include.join("cuda_occupancy.h");
            let header_text = std::fs::read(&header).unwrap_or_else(|e| {
                panic!(
                    "cannot read {}: {e}; run scripts/cuda-toolkit or set CUDA_HOME",
                    header.display()
                )
            });
            let source_text = std::fs::read(&src)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", src.display()));
            let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            (&header_text, &source_text, &cxx).hash(&mut hasher);
            std::fs::create_dir_all(out_dir).expect("create the harness folder");
            let out = out_dir.join(format!("occ-oracle-harness-{:016x}", hasher.finish()));
            if out.is_file() {
                return out;
            }
            let partial =
                out_dir.join(format!("occ-oracle-harness.{}.partial", std::process::id()));
            let status = Command::new(&cxx)
                .args(["-O2", "-std=c++14", "-Wall", "-Wno-unused-function", "-I"])
                .arg(&cuda_include)
                .arg(&src)
                .arg("-o")
                .arg(&partial)
                .status()
                .unwrap_or_else(|e| {
                    panic!("cannot run the C++ compiler `{cxx}`: {e}; install g++ or set CXX")
                });
            assert!(status.success(), "compiling {} failed", src.display());
            std::fs::rename(&partial, &out).expect("move the harness into place");
            out
        })
    }

    /// The device table the harness reads: a count line, then one line per
    /// `(major, minor, limits)` with the limits of `cudaOccDeviceProp`.
    pub fn device_table(devices: &[(u32, u32, &Arch)]) -> String {
        let mut s = format!("{}\n", devices.len());
        for (major, minor, a) in devices {
            s += &format!(
                "{major} {minor} {} {} {} {} {} {} {} {} {}\n",
                a.max_threads_per_block,
                a.max_threads_per_sm,
                a.max_regs_per_block,
                a.regs_per_sm,
                a.warp_size,
                a.smem_per_block,
                a.smem_per_sm,
                a.smem_per_block_optin,
                a.reserved_smem_per_block
            );
        }
        s
    }
}

/// An environment for in-process builds (`Build::try_compile_with`): every
/// variable occ-build reads that would change a build is unset (`OCC_ARCHS`,
/// `CUDA_COMPUTE_CAP`, `OCC_NVCC_LAUNCHER`, `NUM_JOBS`, `OCC_BLESS`,
/// `OCC_NO_NVCC`, `DOCS_RS`, `CI`, and the per-user toolkit dir's
/// `OCC_CUDA_DIR`, `XDG_CACHE_HOME`, `HOME`, so that a developer's own
/// install is not found), `NVCC` is the installed nvcc, and `extra`
/// sets or unsets (`None`) what a test needs on top.
pub fn build_env(extra: &[(&str, Option<&str>)]) -> occ_shell::Env {
    build_env_with(&nvcc(), extra)
}

/// [`build_env`] with `NVCC` set to `nvcc` (which need not run: a replay
/// serves its outputs, `tests/tests/it/replay.rs`) instead of the installed one.
pub fn build_env_with(nvcc: &Path, extra: &[(&str, Option<&str>)]) -> occ_shell::Env {
    use std::ffi::OsString;
    let mut vars: Vec<(String, Option<OsString>)> = [
        "OCC_ARCHS",
        "CUDA_COMPUTE_CAP",
        "OCC_NVCC_LAUNCHER",
        "NUM_JOBS",
        "OCC_BLESS",
        "OCC_NO_NVCC",
        "DOCS_RS",
        "CI",
        "GITHUB_ACTIONS",
        "OCC_CUDA_DIR",
        "XDG_CACHE_HOME",
        "HOME",
    ]
    .iter()
    .map(|name| (name.to_string(), None))
    .collect();
    vars.push(("NVCC".into(), Some(nvcc.as_os_str().to_os_string())));
    for (name, value) in extra {
        vars.retain(|(n, _)| n != name);
        vars.push((name.to_string(), value.map(OsString::from)));
    }
    occ_shell::Env::with_overrides(vars)
}

/// A results file of recorded times (not a measurement) for `kernel` of
/// `manifest` on `arch` and `bucket`, from a "recorded GPU" with that
/// arch's compute capability: each `(block size, median µs)` of `times`
/// with 30 runs and `noise`, against the manifest's cubin hash.
pub fn recorded_results(
    manifest: &occ_model::schema::manifest::Manifest,
    kernel: &str,
    arch: &str,
    bucket: &str,
    times: &[(u32, f64)],
    noise: f64,
) -> occ_model::schema::measured::Results {
    use occ_model::schema::measured::{self, Device, Measurement, Results, Timing};
    let k = manifest
        .kernels
        .iter()
        .find(|k| k.name == kernel)
        .unwrap_or_else(|| panic!("no kernel {kernel} in the manifest"));
    let digits = arch.trim_start_matches("sm_");
    let (major, minor) = digits.split_at(digits.len() - 1);
    let sizes: Vec<u32> = times.iter().map(|t| t.0).collect();
    Results {
        schema: measured::RESULTS_SCHEMA,
        package: manifest.package.clone(),
        device: Device {
            name: "recorded GPU".into(),
            compute_capability: format!("{major}.{minor}"),
            sm_count: 108,
            clock_khz: None,
            memory_clock_khz: None,
        },
        toolkit: manifest.nvcc.clone(),
        measurements: vec![Measurement {
            kernel: k.name.clone(),
            source: k.source.clone(),
            arch: arch.into(),
            bucket: bucket.into(),
            cubin_hash: k.archs[arch].cubin_hash.clone().unwrap_or_default(),
            candidates_hash: measured::candidates_hash(&sizes),
            max_occupancy: None,
            timings: times
                .iter()
                .map(|&(block_size, median_us)| Timing {
                    block_size,
                    median_us,
                    runs: 30,
                    noise,
                })
                .collect(),
        }],
    }
}
