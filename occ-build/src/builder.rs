//! [`Build`]: the build-script API, in the shape of `cc::Build`.

use crate::baseline::{self, GateSettings, Lock, Thresholds, Verdict};
use crate::cargo::{self, Directives};
use crate::compile::{self, Job, Runner};
use crate::env::Env;
use crate::error::{Error, Result};
use crate::manifest::Manifest;
use crate::{analyze, arch, emit, sweep, toolkit};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Compiles `.cu` files with nvcc for each target arch and records every
/// kernel's resources and occupancy. `new()` does no I/O; the work happens in
/// [`Build::try_compile`] (or [`Build::compile`] in a build script).
#[derive(Debug, Clone, Default)]
pub struct Build {
    files: Vec<PathBuf>,
    globs: Vec<String>,
    includes: Vec<PathBuf>,
    defines: Vec<(String, Option<String>)>,
    flags: Vec<String>,
    archs: Vec<String>,
    nvcc: Option<PathBuf>,
    deny_spills: bool,
    max_registers: Vec<(String, u32)>,
    debug: bool,
    out_dir: Option<PathBuf>,
    root: Option<PathBuf>,
    package: Option<String>,
    quiet: bool,
    lock_file: Option<PathBuf>,
    register_threshold: Option<u32>,
    kernel_register_thresholds: BTreeMap<String, u32>,
}

/// What a successful build produced.
#[derive(Debug, Clone)]
pub struct Report {
    /// The manifest written to `$OUT_DIR/occ/manifest.json`.
    pub manifest: Manifest,
    /// `$OUT_DIR/occ`.
    pub out_dir: PathBuf,
    /// How many nvcc jobs ran (the rest were unchanged and reused).
    pub nvcc_runs: usize,
    /// The cargo directives of the build (printed by [`Build::compile`]).
    pub directives: Directives,
}

impl Build {
    /// A build with nothing configured. Does no I/O and reads no environment.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a `.cu` file (relative paths are from the crate root).
    pub fn file(&mut self, path: impl AsRef<Path>) -> &mut Self {
        self.files.push(path.as_ref().to_path_buf());
        self
    }

    /// Adds several `.cu` files.
    pub fn files<P: AsRef<Path>>(&mut self, paths: impl IntoIterator<Item = P>) -> &mut Self {
        for path in paths {
            self.file(path);
        }
        self
    }

    /// Adds every file matching a glob pattern (`kernels/**/*.cu`), relative to
    /// the crate root; matched in sorted order when the build runs. A pattern
    /// that matches nothing is an error.
    pub fn glob(&mut self, pattern: impl Into<String>) -> &mut Self {
        self.globs.push(pattern.into());
        self
    }

    /// Adds an include directory (`-I`).
    pub fn include(&mut self, dir: impl AsRef<Path>) -> &mut Self {
        self.includes.push(dir.as_ref().to_path_buf());
        self
    }

    /// Defines a preprocessor macro (`-DNAME` or `-DNAME=VALUE`).
    pub fn define<'a>(&mut self, name: &str, value: impl Into<Option<&'a str>>) -> &mut Self {
        self.defines
            .push((name.to_string(), value.into().map(str::to_string)));
        self
    }

    /// Adds a raw nvcc flag (passed as one argument, never through a shell).
    pub fn flag(&mut self, flag: impl Into<String>) -> &mut Self {
        self.flags.push(flag.into());
        self
    }

    /// Adds a target arch (`sm_80`, `sm_90a`, `sm_100f`, or just `80`).
    pub fn arch(&mut self, arch: impl Into<String>) -> &mut Self {
        self.archs.push(arch.into());
        self
    }

    /// Adds several target archs.
    pub fn archs<S: Into<String>>(&mut self, archs: impl IntoIterator<Item = S>) -> &mut Self {
        for arch in archs {
            self.arch(arch);
        }
        self
    }

    /// Uses this nvcc instead of searching for one.
    pub fn nvcc(&mut self, path: impl AsRef<Path>) -> &mut Self {
        self.nvcc = Some(path.as_ref().to_path_buf());
        self
    }

    /// Makes a spilling kernel an error instead of a warning.
    pub fn deny_spills(&mut self) -> &mut Self {
        self.deny_spills = true;
        self
    }

    /// Caps registers per thread at `max` for the `.cu` file `target` (its
    /// path relative to the crate, or its file name), or for the file that
    /// holds the kernel `target` (any name `cargo occ` accepts): nvcc gets
    /// `-maxrregcount max` for that file, so the cap applies to **every
    /// kernel in the file**. Kernels with `__launch_bounds__` or
    /// `__maxnreg__` ignore it (ptxas prefers their own limit). The cap is
    /// recorded per kernel as `maxrregcount` in the manifest. Pick a cap with
    /// `cargo occ sweep`.
    pub fn max_registers(&mut self, target: impl Into<String>, max: u32) -> &mut Self {
        self.max_registers.push((target.into(), max));
        self
    }

    /// Compiles device code with `-G` (debug; changes registers and spills).
    pub fn debug(&mut self, debug: bool) -> &mut Self {
        self.debug = debug;
        self
    }

    /// Writes into this folder instead of `$OUT_DIR` (tools and tests).
    pub fn out_dir(&mut self, dir: impl AsRef<Path>) -> &mut Self {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Takes relative paths from this folder instead of `$CARGO_MANIFEST_DIR`.
    pub fn root(&mut self, dir: impl AsRef<Path>) -> &mut Self {
        self.root = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Does not print the report table to stderr.
    pub fn quiet(&mut self, quiet: bool) -> &mut Self {
        self.quiet = quiet;
        self
    }

    /// The baseline file, relative to the crate root (default `occ.lock`).
    /// See [`crate::baseline`].
    pub fn lock_file(&mut self, path: impl AsRef<Path>) -> &mut Self {
        self.lock_file = Some(path.as_ref().to_path_buf());
        self
    }

    /// How many registers per thread a kernel may grow by, compared with the
    /// lock, before the build fails (default
    /// [`baseline::DEFAULT_REGISTER_THRESHOLD`]). An occupancy drop fails
    /// regardless.
    pub fn register_threshold(&mut self, registers: u32) -> &mut Self {
        self.register_threshold = Some(registers);
        self
    }

    /// The register threshold of one kernel (by symbol, base name, short
    /// name or Rust identifier), overriding [`Build::register_threshold`].
    pub fn kernel_register_threshold(&mut self, kernel: &str, registers: u32) -> &mut Self {
        self.kernel_register_thresholds
            .insert(kernel.to_string(), registers);
        self
    }

    /// Runs the build in a build script: prints the cargo directives and, on
    /// failure, each line of the error as `cargo::error=` (cargo then fails the
    /// build). Never panics. Returns the report when the build succeeded.
    pub fn compile(&self) -> Option<Report> {
        let (result, directives) = self.execute(&Env::new());
        directives.print();
        match result {
            Ok(report) => Some(report),
            Err(error) => {
                cargo::print_error(&format!("occ: {error}"));
                None
            }
        }
    }

    /// Runs the build and returns what it made. Prints nothing.
    pub fn try_compile(&self) -> Result<Report> {
        self.try_compile_with(&Env::new())
    }

    /// [`Build::try_compile`] with a given environment reader.
    pub fn try_compile_with(&self, env: &Env) -> Result<Report> {
        self.execute(env).0
    }

    /// Runs the build; returns its result and the cargo directives gathered,
    /// also on failure (the files and variables read are still watched, so
    /// fixing them reruns the build script). This is what [`Build::compile`] prints.
    pub fn execute(&self, env: &Env) -> (Result<Report>, Directives) {
        let mut directives = Directives::default();
        let result = self.run(env, &mut directives);
        directives.rerun_if_env_changed.extend(env.read_vars());
        let result = result.map(|(manifest, out_dir, nvcc_runs)| Report {
            manifest,
            out_dir,
            nvcc_runs,
            directives: directives.clone(),
        });
        (result, directives)
    }

    fn run(&self, env: &Env, directives: &mut Directives) -> Result<(Manifest, PathBuf, usize)> {
        let root = match &self.root {
            Some(root) => root.clone(),
            None => env_path(env, "CARGO_MANIFEST_DIR")?,
        };
        let out_dir = match &self.out_dir {
            Some(dir) => dir.clone(),
            None => env_path(env, "OUT_DIR")?,
        }
        .join("occ");
        let package = self
            .package
            .clone()
            .or_else(|| env.var("CARGO_PKG_NAME"))
            .unwrap_or_default();

        let archs = self.resolve_archs(env)?;
        let sources = self.resolve_sources(&root, directives)?;
        // Read these now so that they are watched even when nvcc is missing.
        let ccbin = env.var("NVCC_CCBIN");
        let lock_path = root.join(
            self.lock_file
                .as_deref()
                .unwrap_or(Path::new(baseline::DEFAULT_LOCK_FILE)),
        );
        let bless = env.flag("OCC_BLESS");
        let ci = baseline::is_ci(env);
        let docs_rs = env.var_os("DOCS_RS").is_some();
        let no_nvcc = env.flag("OCC_NO_NVCC");
        let lock = Lock::read(&lock_path)?;
        if lock.is_some() {
            // A missing file would rerun the build script on every build.
            directives.watch(&lock_path);
        }
        let found = if docs_rs || no_nvcc {
            let why = if docs_rs {
                "DOCS_RS is set"
            } else {
                "OCC_NO_NVCC is set"
            };
            Err(Error::NvccNotFound {
                looked: vec![format!("{why}: not looking for nvcc")],
            })
        } else {
            toolkit::find_nvcc(env, self.nvcc.as_deref(), Some(&root))
        };
        let nvcc = match (found, &lock) {
            (Ok(nvcc), _) => nvcc,
            (Err(Error::NvccNotFound { looked }), Some(lock)) => {
                let manifest = lock.to_manifest(&archs, &lock_path)?;
                let why = looked.last().cloned().unwrap_or_default();
                directives.warn(format!(
                    "occ: no nvcc ({why}); using the numbers recorded in {} (nvcc {}) instead of live ones; \
                     kernels.rs has no CUBIN/PTX device code in this build; install CUDA or set NVCC to build it",
                    relative(&root, &lock_path),
                    lock.nvcc
                ));
                emit::write_all(&manifest, &out_dir)?;
                return Ok((manifest, out_dir, 0));
            }
            (Err(Error::NvccNotFound { mut looked }), None) => {
                looked.push(format!(
                    "{}: none (a committed lock lets the crate build without nvcc; see `cargo occ bless`)",
                    relative(&root, &lock_path)
                ));
                return Err(Error::NvccNotFound { looked });
            }
            (Err(e), _) => return Err(e),
        };

        let mut args: Vec<String> = Vec::new();
        if let Some(ccbin) = ccbin {
            args.push("-ccbin".into());
            args.push(ccbin);
        }
        if self.debug {
            args.push("-G".into());
        }
        for dir in &self.includes {
            args.push(format!("-I{}", dir.display()));
        }
        for (name, value) in &self.defines {
            args.push(match value {
                Some(v) => format!("-D{name}={v}"),
                None => format!("-D{name}"),
            });
        }
        args.extend(self.flags.iter().cloned());

        let names = job_names(&sources);
        // Register caps by file; kernels are placed by the last manifest.
        let previous = Manifest::read(&out_dir.join(crate::manifest::FILE_NAME)).ok();
        let (caps, pending) = sweep::file_caps(&self.max_registers, &sources, previous.as_ref());
        let make_jobs = |caps: &std::collections::BTreeMap<String, u32>| {
            let mut jobs = Vec::new();
            for (source, name) in sources.iter().zip(&names) {
                for arch in &archs {
                    let mut args = args.clone();
                    if let Some(cap) = caps.get(source) {
                        args.extend(["-maxrregcount".to_string(), cap.to_string()]);
                    }
                    jobs.push(Job {
                        source: source.clone(),
                        arch: arch.clone(),
                        name: format!("{name}.{arch}"),
                        args,
                    });
                }
            }
            jobs
        };
        let mut jobs = make_jobs(&caps);
        let jobserver = jobserver_client();
        let parallel = env
            .var("NUM_JOBS")
            .and_then(|n| n.parse::<usize>().ok())
            .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
            .unwrap_or(1);
        let runner = Runner {
            nvcc: &nvcc,
            nvcc_id: compile::file_id(&nvcc.path),
            root: &root,
            out: &out_dir,
            jobs: parallel,
            jobserver: jobserver.as_ref(),
        };
        let run_all = |jobs: &[Job]| {
            runner.run_all(jobs).map_err(|e| match e {
                Error::UnsupportedArch { arch, detail, .. } => Error::UnsupportedArch {
                    arch,
                    nvcc_version: nvcc
                        .version()
                        .unwrap_or_else(|_| nvcc.path.display().to_string()),
                    detail,
                },
                other => other,
            })
        };
        let mut outputs = run_all(&jobs)?;
        if !pending.is_empty() || (previous.is_some() && !self.max_registers.is_empty()) {
            // Place each kernel by this build; where the last manifest did
            // not place it (or placed it elsewhere), build again with the cap.
            let found = analyze::build_manifest(&package, "", &archs, &outputs)?;
            let (placed, unknown) = sweep::file_caps(&self.max_registers, &sources, Some(&found));
            if let Some((target, _)) = unknown.first() {
                return Err(sweep::unknown_cap_target(target, &found));
            }
            if placed != caps {
                jobs = make_jobs(&placed);
                outputs = run_all(&jobs)?;
            }
        }
        for output in &outputs {
            for dep in &output.deps {
                directives.watch(dep);
            }
        }
        let nvcc_runs = outputs.iter().filter(|o| o.ran).count();
        let version = nvcc_version_cached(&nvcc, &out_dir)?;
        let manifest = analyze::build_manifest(&package, &version, &archs, &outputs)?;
        self.gate_spills(&manifest, directives)?;
        emit::write_all(&manifest, &out_dir)?;
        let gate = Gate {
            root: &root,
            lock_path: &lock_path,
            lock: lock.as_ref(),
            bless,
            ci,
        };
        self.gate_baseline(&manifest, &out_dir, &gate, directives)?;
        Ok((manifest, out_dir, nvcc_runs))
    }

    fn thresholds(&self) -> Thresholds {
        Thresholds {
            registers: self
                .register_threshold
                .unwrap_or(baseline::DEFAULT_REGISTER_THRESHOLD),
            kernels: self.kernel_register_thresholds.clone(),
        }
    }

    /// Compares with the lock: writes the candidate and the gate settings
    /// into `out`, then fails on regressions, warns on improvements and new
    /// kernels, and writes the lock only on `OCC_BLESS` outside CI.
    fn gate_baseline(
        &self,
        manifest: &Manifest,
        out: &Path,
        gate: &Gate<'_>,
        directives: &mut Directives,
    ) -> Result<()> {
        let candidate = Lock::from_manifest(manifest);
        let text = candidate.to_text();
        compile::write_atomic(&out.join(baseline::CANDIDATE_FILE), text.as_bytes())?;
        let settings = GateSettings {
            schema: baseline::LOCK_SCHEMA,
            lock_file: gate.lock_path.to_path_buf(),
            thresholds: self.thresholds(),
        };
        compile::write_atomic(
            &out.join(baseline::GATE_FILE),
            crate::manifest::to_json_pretty(&settings).as_bytes(),
        )?;
        let lock_name = relative(gate.root, gate.lock_path);
        let write_lock = gate.bless && !gate.ci;
        if gate.bless && gate.ci {
            directives.warn(format!(
                "occ: OCC_BLESS is ignored because CI is set; {lock_name} is never written in CI"
            ));
        }
        let write = |directives: &mut Directives, what: &str| -> Result<()> {
            let current = std::fs::read_to_string(gate.lock_path).unwrap_or_default();
            if current != text {
                compile::write_atomic(gate.lock_path, text.as_bytes())?;
                directives.watch(gate.lock_path);
                directives.warn(format!(
                    "occ: OCC_BLESS=1: wrote {lock_name} ({what}); commit it"
                ));
            }
            Ok(())
        };
        let Some(lock) = gate.lock else {
            if write_lock {
                return write(directives, "new baseline");
            }
            directives.warn(format!(
                "occ: no {lock_name} yet; record the baseline with `cargo occ bless` (or OCC_BLESS=1 cargo build) and commit it"
            ));
            return Ok(());
        };
        let diff = baseline::compare(lock, &candidate, &settings.thresholds);
        if write_lock {
            let regressions = diff.regressions().count();
            let what = if regressions > 0 {
                format!("accepted {regressions} regression(s)")
            } else {
                "updated".into()
            };
            return write(directives, &what);
        }
        if diff.has_regressions() {
            let table = baseline::render_diff(&diff, &[Verdict::Regression]);
            let hint = if gate.ci {
                format!("fix the kernels, or bless on a developer machine (`cargo occ bless`) and commit {lock_name}")
            } else {
                format!("if this is intended, accept it with `cargo occ bless` (or OCC_BLESS=1 cargo build) and commit {lock_name}")
            };
            return Err(Error::Regression {
                report: format!("occupancy regression against {lock_name}:\n{table}{hint}"),
            });
        }
        for f in diff
            .findings
            .iter()
            .filter(|f| matches!(f.verdict, Verdict::Improvement | Verdict::New))
        {
            let what = if f.verdict == Verdict::New {
                "is not in"
            } else {
                "improved on"
            };
            directives.warn(format!(
                "occ: {} on {} {what} {lock_name} ({}); run `cargo occ bless` to record it",
                f.kernel,
                f.arch,
                f.reasons.join(", ")
            ));
        }
        if !diff.dropped_archs.is_empty() {
            directives.warn(format!(
                "occ: {lock_name} records {} which this build does not build; run `cargo occ bless` to drop them",
                diff.dropped_archs.join(", ")
            ));
        }
        Ok(())
    }

    fn gate_spills(&self, manifest: &Manifest, directives: &mut Directives) -> Result<()> {
        let mut lines = Vec::new();
        for kernel in &manifest.kernels {
            for (arch, k) in &kernel.archs {
                if k.spills() {
                    lines.push(format!(
                        "{} on {arch}: {} bytes spill stores, {} bytes spill loads ({})",
                        kernel.base_name, k.spill_stores, k.spill_loads, kernel.source
                    ));
                }
            }
        }
        if lines.is_empty() {
            return Ok(());
        }
        if self.deny_spills {
            return Err(Error::Spills { kernels: lines });
        }
        for line in lines {
            directives.warn(format!("kernel spills registers: {line}"));
        }
        Ok(())
    }

    fn resolve_archs(&self, env: &Env) -> Result<Vec<String>> {
        // Read both, so that both are watched.
        let occ_archs = env.var("OCC_ARCHS");
        let compute_cap = env.var("CUDA_COMPUTE_CAP");
        let (origin, list): (&str, Vec<String>) = if let Some(v) = occ_archs {
            ("OCC_ARCHS", split_list(&v))
        } else if let Some(v) = compute_cap {
            ("CUDA_COMPUTE_CAP", split_list(&v))
        } else {
            (".arch()", self.archs.clone())
        };
        if list.is_empty() {
            return Err(Error::NoArch);
        }
        let mut out: Vec<String> = Vec::new();
        for name in list {
            let canonical = arch::canonical_name(&name).map_err(|_| Error::UnknownArch {
                origin: origin.to_string(),
                name: name.clone(),
                known: arch::all().iter().map(|a| a.name.to_string()).collect(),
            })?;
            if !out.contains(&canonical) {
                out.push(canonical);
            }
        }
        Ok(out)
    }

    fn resolve_sources(&self, root: &Path, directives: &mut Directives) -> Result<Vec<String>> {
        let mut sources: BTreeSet<String> = BTreeSet::new();
        let mut ordered: Vec<String> = Vec::new();
        let mut add = |rel: String, sources: &mut BTreeSet<String>| {
            if sources.insert(rel.clone()) {
                ordered.push(rel);
            }
        };
        for file in &self.files {
            let full = root.join(file);
            directives.watch(&full);
            std::fs::metadata(&full)
                .map_err(|e| Error::MissingSource {
                    path: file.clone(),
                    reason: e.to_string(),
                })
                .and_then(|m| {
                    if m.is_file() {
                        Ok(())
                    } else {
                        Err(Error::MissingSource {
                            path: file.clone(),
                            reason: "not a file".into(),
                        })
                    }
                })?;
            add(relative(root, &full), &mut sources);
        }
        for pattern in &self.globs {
            let full = root.join(pattern).display().to_string();
            let paths = glob::glob(&full).map_err(|e| {
                Error::Other(format!(
                    "bad glob pattern `{pattern}`: {e}; see the glob crate's syntax"
                ))
            })?;
            let mut matched: Vec<PathBuf> = paths
                .filter_map(|p| p.ok())
                .filter(|p| p.is_file())
                .collect();
            matched.sort();
            if matched.is_empty() {
                return Err(Error::NoSources {
                    what: pattern.clone(),
                });
            }
            // Watch the folder too, so a new file reruns the build.
            if let Some(dir) = Path::new(&full).parent() {
                let dir = dir.display().to_string();
                if !dir.contains(['*', '?', '[']) {
                    directives.watch(Path::new(&dir));
                }
            }
            for path in matched {
                directives.watch(&path);
                add(relative(root, &path), &mut sources);
            }
        }
        if ordered.is_empty() {
            return Err(Error::NoSources {
                what: String::new(),
            });
        }
        Ok(ordered)
    }
}

/// Where the lock is and what the build may do with it.
struct Gate<'a> {
    root: &'a Path,
    lock_path: &'a Path,
    lock: Option<&'a Lock>,
    bless: bool,
    ci: bool,
}

fn env_path(env: &Env, var: &str) -> Result<PathBuf> {
    env.var_os(var)
        .map(PathBuf::from)
        .ok_or_else(|| Error::Env {
            var: var.to_string(),
            detail: "is not set".into(),
        })
}

fn split_list(value: &str) -> Vec<String> {
    value
        .split([',', ' ', ';'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// `root/kernels/a.cu` → `kernels/a.cu` (with `/`), or the path as given
/// when it lies outside the crate.
fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// A file-name-safe, unique stem per source: `kernels/a.cu` → `kernels_a`.
fn job_names(sources: &[String]) -> Vec<String> {
    let sanitize = |s: &str| {
        let stem = s.strip_suffix(".cu").unwrap_or(s);
        stem.chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect::<String>()
    };
    let plain: Vec<String> = sources.iter().map(|s| sanitize(s)).collect();
    plain
        .iter()
        .zip(sources)
        .map(|(name, source)| {
            if plain.iter().filter(|n| *n == name).count() > 1 {
                format!("{name}_{}", crate::names::short_hash(source))
            } else {
                name.clone()
            }
        })
        .collect()
}

fn jobserver_client() -> Option<jobserver::Client> {
    // SAFETY: called once, before any other code of this process could have
    // closed or reused the jobserver file descriptors cargo passed us.
    unsafe { jobserver::Client::from_env() }
}

/// `nvcc --version`, cached in `$OUT_DIR/occ/cache` under the nvcc's fingerprint
/// so an unchanged rebuild starts no process for it.
fn nvcc_version_cached(nvcc: &toolkit::Nvcc, out: &Path) -> Result<String> {
    let id = compile::file_id(&nvcc.path);
    let cache = out.join("cache").join("nvcc-version");
    if let Ok(text) = std::fs::read_to_string(&cache) {
        if let Some((stored_id, version)) = text.split_once('\n') {
            if stored_id == id {
                return Ok(version.trim().to_string());
            }
        }
    }
    let version = toolkit::short_version(&nvcc.version()?).to_string();
    compile::write_atomic(&cache, format!("{id}\n{version}\n").as_bytes())?;
    Ok(version)
}
