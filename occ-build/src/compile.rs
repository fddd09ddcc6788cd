//! Stage 4: one nvcc job per (file, arch): run it (in parallel, under
//! cargo's jobserver), or reuse its last result when the cache (`cache.rs`) says
//! nothing that can change it has changed.
//!
//! Each job leaves `<job>.cubin` and `<job>.ptx` in `$OUT_DIR/occ` and its
//! record (key, inputs, log) in `cache/<job>.json`. nvcc writes into a
//! scratch folder of this run; the outputs are renamed into place, then the
//! record is written, last.
//!
//! A host-code library job ([`JobKind::Library`], `hostlib.rs`) is one
//! `nvcc -c` of a file for every arch: it leaves `<stem>.o` and, per arch,
//! the same `<stem>.<arch>.cubin` and `.ptx` a device-only job leaves, under
//! one record (`cache/<stem>.lib.json`) whose outputs are all of them; its
//! result comes back as one [`JobOutput`] per arch.

use crate::cache::{self, Input, NvccVars, Output, Record, Stat, Toolkit};
use crate::error::{Error, Result};
use crate::inputs::Inputs;
use crate::toolkit::Nvcc;
use occ_model::params::{self, Signatures};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

/// Stage 4: runs (or reuses) every job, under cargo's jobserver when the
/// build script has one; results come back in the order of `jobs`.
pub(crate) fn run(
    nvcc: &Nvcc,
    toolkit: &Toolkit,
    inputs: &Inputs,
    jobs: &[Job],
) -> Result<Vec<JobOutput>> {
    let out = &inputs.out_dir;
    for dir in [out.join("tmp"), out.join("cache"), out.to_path_buf()] {
        remove_stale_scratch(&dir);
    }
    let jobserver = jobserver_client();
    Runner {
        nvcc,
        toolkit,
        vars: &inputs.nvcc_vars,
        root: &inputs.root,
        out,
        jobs: inputs.parallel,
        jobserver: jobserver.as_ref(),
    }
    .run_all(jobs)
}

/// The identity of the toolkit the jobs run ([`Toolkit::identify`], with the
/// first job's arguments), cached in `$OUT_DIR/occ/cache/toolkit.json`.
/// Creates the output folders.
pub(crate) fn toolkit(nvcc: &Nvcc, inputs: &Inputs, jobs: &[Job]) -> Result<Toolkit> {
    let out = &inputs.out_dir;
    for dir in [out.to_path_buf(), out.join("cache"), out.join("tmp")] {
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
    }
    // The first job's arguments without its arch: the programs nvcc runs
    // do not depend on it, and an arch this nvcc cannot build is the job's
    // error to report, not the dry run's.
    let args = match jobs.first() {
        Some(job) => {
            let mut args = nvcc_args(job, &out.join("tmp").join(&job.name));
            while let Some(i) = args.iter().position(|a| a == "-gencode") {
                args.drain(i..(i + 2).min(args.len()));
            }
            args
        }
        None => Vec::new(),
    };
    Toolkit::identify(
        nvcc,
        &inputs.nvcc_vars,
        inputs.path_var.as_deref(),
        &args,
        &inputs.root,
        &out.join("cache").join("toolkit.json"),
    )
}

/// Removes what killed builds left in `dir`: scratch folders and
/// half-written files named `<name>.tmp<pid>.<n>` whose process is gone
/// (two live builds into one `OUT_DIR` keep theirs), and in `tmp/` the
/// canonical per-job folders no run owns.
fn remove_stale_scratch(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let me = std::process::id();
    let in_tmp = dir.file_name().is_some_and(|n| n == "tmp");
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name
            .rsplit_once(".tmp")
            .and_then(|(_, rest)| rest.split_once('.'))
            .and_then(|(p, n)| n.parse::<u64>().ok().and(p.parse::<u32>().ok()));
        let stale = match pid {
            Some(pid) if pid == me => false,
            Some(pid) => !process_alive(pid),
            None => in_tmp,
        };
        if stale {
            let path = entry.path();
            let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
        }
    }
}

fn process_alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        Path::new(&format!("/proc/{pid}")).exists()
    } else {
        // No cheap portable check: keep it (a later build on Linux or a
        // `cargo clean` removes it).
        true
    }
}

fn jobserver_client() -> Option<jobserver::Client> {
    // SAFETY: cargo passes the jobserver's file descriptors to the build
    // script; nothing else in this process uses or closes them.
    unsafe { jobserver::Client::from_env() }
}

/// What one job compiles.
#[derive(Debug, Clone)]
pub struct Job {
    /// The source, relative to the crate root (`/` separators).
    pub source: String,
    /// The target arch as given to nvcc (`sm_90a`).
    pub arch: String,
    /// The stem of every file this job writes (`kernels_saxpy.sm_90a`).
    pub name: String,
    /// Extra nvcc arguments (includes, defines, flags), in order.
    pub args: Vec<String>,
    /// What nvcc makes of the file.
    pub kind: JobKind,
}

/// What a job compiles a file into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobKind {
    /// `nvcc --cubin` for one arch: the cubin, the PTX and the ptxas log.
    Device,
    /// `nvcc -c` for every arch at once, for a host-code library: the
    /// object with the host code and the fatbin, and each arch's cubin, PTX
    /// and ptxas log. The job's `arch` is the archs joined by `,`.
    Library {
        /// The archs, in build order.
        archs: Vec<String>,
        /// The stem of the per-arch files (`kernels_moe`: `kernels_moe.sm_80.cubin`).
        stem: String,
    },
}

/// What one job produced.
#[derive(Debug, Clone)]
pub struct JobOutput {
    /// The job.
    pub job: Job,
    /// nvcc's stderr and stdout (the ptxas `-v` log).
    pub log: String,
    /// The PTX text.
    pub ptx: String,
    /// Every file nvcc read, as absolute paths (the source and its headers).
    pub deps: Vec<PathBuf>,
    /// The user's folders its `#include`s search (the source's, each `-I`).
    pub search: Vec<PathBuf>,
    /// Why this result is not cached (an input changed while nvcc ran).
    pub unstable: Option<String>,
    /// Whether nvcc ran (false: reused from the cache).
    pub ran: bool,
    /// The object of a host-code library job (`$OUT_DIR/occ/<stem>.o`),
    /// on each of its per-arch outputs.
    pub object: Option<PathBuf>,
    /// The kernels' signatures (host stubs, declarations), from nvcc's
    /// intermediate files or the job's record.
    pub signatures: Signatures,
}

/// The settings shared by all jobs of a build.
#[derive(Debug)]
pub(crate) struct Runner<'a> {
    /// The nvcc to run.
    pub nvcc: &'a Nvcc,
    /// The toolkit's identity.
    pub toolkit: &'a Toolkit,
    /// The variables nvcc reads itself, as this build read them.
    pub vars: &'a NvccVars,
    /// The crate root: nvcc runs there, and sources are relative to it.
    pub root: &'a Path,
    /// `$OUT_DIR/occ`.
    pub out: &'a Path,
    /// How many jobs may run at once (besides the jobserver).
    pub jobs: usize,
    /// Cargo's jobserver, when the build script got one.
    pub jobserver: Option<&'a jobserver::Client>,
}

impl Runner<'_> {
    /// Runs (or reuses) every job; results come back in the order of `jobs`.
    /// Stops at the first failure, reporting the earliest failing job.
    pub fn run_all(&self, jobs: &[Job]) -> Result<Vec<JobOutput>> {
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<Option<Result<Vec<JobOutput>>>>> =
            Mutex::new((0..jobs.len()).map(|_| None).collect());
        let workers = self.jobs.clamp(1, jobs.len().max(1));
        std::thread::scope(|scope| {
            for worker in 0..workers {
                let next = &next;
                let results = &results;
                scope.spawn(move || loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(job) = jobs.get(i) else { break };
                    // Worker 0 runs on the token cargo gave this build script;
                    // the others take one from the jobserver per nvcc run.
                    let _token = if worker > 0 {
                        self.jobserver.and_then(|c| c.acquire().ok())
                    } else {
                        None
                    };
                    let result = self.run_one(job);
                    let failed = result.is_err();
                    if let Ok(mut slots) = results.lock() {
                        slots[i] = Some(result);
                    }
                    if failed {
                        // Let no new job start; the ones running finish.
                        next.store(usize::MAX / 2, Ordering::SeqCst);
                    }
                });
            }
        });
        let slots = results.into_inner().map_err(|_| Error::WorkerPanicked)?;
        let mut out = Vec::with_capacity(jobs.len());
        for slot in slots {
            match slot {
                Some(Ok(outputs)) => out.extend(outputs),
                Some(Err(e)) => return Err(e),
                None => {}
            }
        }
        Ok(out)
    }

    fn paths(&self, job: &Job) -> JobPaths {
        JobPaths {
            files: match &job.kind {
                JobKind::Device => vec![(
                    job.arch.clone(),
                    format!("{}.cubin", job.name),
                    format!("{}.ptx", job.name),
                )],
                JobKind::Library { archs, stem } => archs
                    .iter()
                    .map(|a| {
                        (
                            a.clone(),
                            format!("{stem}.{a}.cubin"),
                            format!("{stem}.{a}.ptx"),
                        )
                    })
                    .collect(),
            },
            object: match &job.kind {
                JobKind::Device => None,
                JobKind::Library { stem, .. } => Some(format!("{stem}.o")),
            },
            record: self.out.join("cache").join(format!("{}.json", job.name)),
            tmp: self.out.join("tmp").join(&job.name),
        }
    }

    /// The key of a job: the toolkit, the launcher, nvcc's arguments (with
    /// the job's canonical scratch folder, fixed per job name), the source
    /// and arch, and the variables nvcc reads.
    fn key(&self, job: &Job, args: &[String]) -> String {
        cache::hash_bytes(&[
            self.toolkit.id.as_bytes(),
            // Two checkouts sharing a target dir get the same OUT_DIR.
            self.root.join(&job.source).to_string_lossy().as_bytes(),
            format!("{:?}", self.nvcc.launcher).as_bytes(),
            format!("{args:?}").as_bytes(),
            job.source.as_bytes(),
            job.arch.as_bytes(),
            format!("{:?}", self.vars).as_bytes(),
        ])
    }

    fn run_one(&self, job: &Job) -> Result<Vec<JobOutput>> {
        let mut paths = self.paths(job);
        let args = nvcc_args(job, &paths.tmp);
        let key = self.key(job, &args);
        // One build at a time checks and commits a job: a second build into
        // the same OUT_DIR waits here, then reuses the first one's result
        // instead of replacing its outputs under its record.
        let _lock = JobLock::take(&paths.record);
        if let Some(output) = self.cached(job, &key, &paths) {
            return Ok(output);
        }
        // A scratch folder of this run alone: two builds into the same
        // OUT_DIR at once (or a killed one's leftovers) never share one.
        paths.tmp = unique_sibling(&paths.tmp);
        let run_args = nvcc_args(job, &paths.tmp);
        // occ starts nvcc without a shell, but nvcc itself hands file names
        // to `sh`, in double quotes, when it runs the host compiler: a `$`, a
        // backquote or a double quote in one would run as a command or break
        // the line (nvcc 13.5; spaces, `;`, `&`, `'`, `|`, `()` are safe).
        if let Some(arg) = run_args.iter().find(|a| a.contains(['$', '`', '"'])) {
            return Err(Error::ShellUnsafeArgument {
                file: job.source.clone(),
                arch: job.arch.clone(),
                argument: arg.clone(),
            });
        }
        // A host-code library's `-c` run hands each arch's cubin to
        // `fatbinary` as `--image3=…,file=<name>`: a comma in the file's name
        // splits that list (nvcc 13.5: "is not in 'keyword=value' format").
        if matches!(job.kind, JobKind::Library { .. }) && job.source.contains(',') {
            return Err(Error::CommaInLibrarySource {
                file: job.source.clone(),
            });
        }
        let source = self.root.join(&job.source);
        // The snapshot before nvcc: the source's bytes now.
        let started = SystemTime::now();
        let before = Input::read(&source).ok_or_else(|| Error::MissingSource {
            path: PathBuf::from(&job.source),
            reason: "it disappeared before nvcc could read it".into(),
        })?;
        let _ = std::fs::remove_dir_all(&paths.tmp);
        std::fs::create_dir_all(&paths.tmp)
            .map_err(|e| Error::io(format!("cannot create {}", paths.tmp.display()), e))?;
        let result = self.compile(job, &run_args, &paths, &key, &before, started);
        let _ = std::fs::remove_dir_all(&paths.tmp);
        result
    }

    /// Runs nvcc for `job` in `paths.tmp`, puts its outputs in place and,
    /// when no input changed while it ran, writes the job's record.
    fn compile(
        &self,
        job: &Job,
        run_args: &[String],
        paths: &JobPaths,
        key: &str,
        before: &Input,
        started: SystemTime,
    ) -> Result<Vec<JobOutput>> {
        let mut cmd = self.nvcc.command();
        cache::nvcc_vars(&mut cmd, self.vars);
        let output = cmd
            .args(run_args)
            .current_dir(self.root)
            .output()
            .map_err(|e| match &self.nvcc.launcher {
                Some(launcher) => Error::LauncherNotRunnable {
                    launcher: launcher.clone(),
                    reason: e.to_string(),
                },
                None => Error::NvccNotRunnable {
                    nvcc: self.nvcc.path.clone(),
                    reason: e.to_string(),
                },
            })?;
        let mut log = String::from_utf8_lossy(&output.stderr).into_owned();
        log.push_str(&String::from_utf8_lossy(&output.stdout));
        if !output.status.success() {
            return Err(nvcc_failure(self.nvcc, job, &log, output.status));
        }
        // What nvcc left, by the name each file takes in `$OUT_DIR/occ`,
        // and each arch's PTX text.
        let no_ptx = |arch: &str| Error::NoPtx {
            file: job.source.clone(),
            arch: arch.to_string(),
            dir: paths.tmp.clone(),
            launcher: self.nvcc.launcher.clone(),
        };
        let mut moves: Vec<(PathBuf, String)> = Vec::new();
        let mut ptx = Vec::new();
        for (arch, cubin, ptx_name) in &paths.files {
            let (cubin_tmp, ptx_tmp) = match &job.kind {
                JobKind::Device => (
                    paths.tmp.join("out.cubin"),
                    find_ptx(&paths.tmp, &job.source).ok_or_else(|| no_ptx(arch))?,
                ),
                JobKind::Library { .. } => {
                    crate::hostlib::kept_files(&paths.tmp, &job.source, arch)
                        .ok_or_else(|| no_ptx(arch))?
                }
            };
            ptx.push(
                std::fs::read_to_string(&ptx_tmp)
                    .map_err(|e| Error::io(format!("cannot read {}", ptx_tmp.display()), e))?,
            );
            moves.push((cubin_tmp, cubin.clone()));
            moves.push((ptx_tmp, ptx_name.clone()));
        }
        if let Some(object) = &paths.object {
            moves.push((paths.tmp.join("out.o"), object.clone()));
        }
        let source = self.root.join(&job.source);
        // A library job preprocesses the file once for the host and once
        // per arch (`#ifdef __CUDA_ARCH__` may include other headers): its
        // inputs are those of every `.ii`.
        let all = matches!(job.kind, JobKind::Library { .. });
        let mut deps: Vec<PathBuf> = Vec::new();
        let mut signatures = Signatures::default();
        for ii in find_preprocessed(&paths.tmp, all) {
            let Ok(bytes) = std::fs::read(&ii) else {
                continue;
            };
            deps.extend(deps_from_preprocessed(&bytes, self.root));
            signatures.decls.extend(params::scan_decls(&bytes));
        }
        signatures
            .decls
            .sort_by(|a, b| (&a.name, &a.params).cmp(&(&b.name, &b.params)));
        signatures.decls.dedup();
        signatures.stubs = find_stubs(&paths.tmp);
        deps.sort();
        deps.dedup();
        if !deps.contains(&source) {
            // No preprocessed file (an unusual launcher or flags): the
            // source alone is known.
            deps.push(source.clone());
            deps.sort();
        }
        // The snapshot after nvcc: every input's bytes and stat now.
        let inputs: Vec<Option<Input>> = deps.iter().map(|d| Input::read(d)).collect();
        let changed: Vec<&PathBuf> = deps
            .iter()
            .zip(&inputs)
            .filter(|(path, input)| match input {
                None => true,
                Some(i) => {
                    i.stat.not_older_than(started) || (**path == source && i.hash != before.hash)
                }
            })
            .map(|(path, _)| path)
            .collect();
        // The include search as it stands now: a shadowing header that
        // exists now but was no input appeared while nvcc ran.
        let search = cache::search_dirs(self.root, &source, &self.search_args(run_args));
        let top = self.toolkit.top.as_deref();
        let (mut probes, appeared) = cache::shadow_probes(self.root, &deps, &search, top, started);
        probes.extend(cache::has_include_probes(self.root, &deps, &search, top));
        let unstable = changed.first().copied().or(appeared.first()).map(|p| {
            format!(
                "occ: {} changed while nvcc compiled {} for {}; its numbers are refreshed on the next build",
                p.strip_prefix(self.root).unwrap_or(p).display(),
                job.source,
                job.arch
            )
        });
        let mut outputs = Vec::new();
        for (from, to) in &moves {
            let dest = self.out.join(to);
            std::fs::rename(from, &dest)
                .map_err(|e| Error::io(format!("cannot write {}", dest.display()), e))?;
            let stat = Stat::of(&dest).ok_or_else(|| {
                Error::io(
                    format!("cannot read {}", dest.display()),
                    std::io::Error::from(std::io::ErrorKind::NotFound),
                )
            })?;
            outputs.push(Output {
                file: to.clone(),
                stat,
            });
        }
        if unstable.is_none() {
            let mut record = Record::new(
                key.to_string(),
                inputs.into_iter().flatten().collect(),
                probes,
                outputs,
                log.clone(),
            );
            record.signatures = signatures.clone();
            let text = serde_json::to_vec(&record).map_err(|e| {
                Error::io(
                    format!("cannot write {}", paths.record.display()),
                    std::io::Error::other(e),
                )
            })?;
            write_atomic(&paths.record, &text)?;
        } else {
            // The old record's outputs were just replaced: it cannot match
            // again, but leave nothing that looks like a result.
            let _ = std::fs::remove_file(&paths.record);
        }
        // The same folders the probes used: occ's own arguments add no -I.
        let mut outputs = self.outputs(job, paths, &log, ptx, deps, search, unstable, true)?;
        for o in &mut outputs {
            o.signatures = signatures.clone();
        }
        Ok(outputs)
    }

    /// A job's result as the per-arch outputs the manifest is assembled
    /// from: itself for a device-only job, one per arch (its share of the
    /// log, its PTX) for a library job.
    #[allow(clippy::too_many_arguments)]
    fn outputs(
        &self,
        job: &Job,
        paths: &JobPaths,
        log: &str,
        ptx: Vec<String>,
        deps: Vec<PathBuf>,
        search: Vec<PathBuf>,
        unstable: Option<String>,
        ran: bool,
    ) -> Result<Vec<JobOutput>> {
        let (archs, logs) = match &job.kind {
            JobKind::Device => (vec![job.arch.clone()], vec![log.to_string()]),
            JobKind::Library { archs, .. } => {
                let logs = crate::ptxas::split_by_arch(log, archs).ok_or_else(|| Error::Parse {
                    file: job.source.clone(),
                    arch: job.arch.clone(),
                    detail: format!(
                        "the ptxas log of the multi-arch nvcc run does not have one run per arch \
                         of {}",
                        archs.join(", ")
                    ),
                })?;
                (archs.clone(), logs)
            }
        };
        let object = paths.object.as_ref().map(|o| self.out.join(o));
        Ok(archs
            .into_iter()
            .zip(logs)
            .zip(ptx)
            .zip(&paths.files)
            .map(|(((arch, log), ptx), (_, cubin, _))| JobOutput {
                job: match &job.kind {
                    JobKind::Device => job.clone(),
                    // The arch's share, named as its own job would be.
                    JobKind::Library { .. } => Job {
                        source: job.source.clone(),
                        arch,
                        name: cubin.trim_end_matches(".cubin").to_string(),
                        args: job.args.clone(),
                        kind: JobKind::Device,
                    },
                },
                log,
                ptx,
                deps: deps.clone(),
                search: search.clone(),
                unstable: unstable.clone(),
                ran,
                object: object.clone(),
                signatures: Signatures::default(),
            })
            .collect())
    }

    /// The arguments as nvcc sees them for its include search:
    /// `NVCC_PREPEND_FLAGS`, `args`, `NVCC_APPEND_FLAGS`.
    fn search_args(&self, args: &[String]) -> Vec<String> {
        let var = |name: &str| -> Vec<String> {
            self.vars
                .iter()
                .filter(|(n, _)| *n == name)
                .filter_map(|(_, v)| v.as_deref())
                .flat_map(|v| v.split_whitespace().map(str::to_string))
                .collect()
        };
        let mut all = var("NVCC_PREPEND_FLAGS");
        all.extend(args.iter().cloned());
        all.extend(var("NVCC_APPEND_FLAGS"));
        all
    }

    fn cached(&self, job: &Job, key: &str, paths: &JobPaths) -> Option<Vec<JobOutput>> {
        let record = Record::read(&paths.record)?;
        if !record.valid(key, self.out) {
            return None;
        }
        let ptx = paths
            .files
            .iter()
            .map(|(_, _, ptx)| std::fs::read_to_string(self.out.join(ptx)).ok())
            .collect::<Option<Vec<String>>>()?;
        let source = self.root.join(&job.source);
        let search = cache::search_dirs(self.root, &source, &self.search_args(&job.args));
        let deps = record.inputs.into_iter().map(|i| i.path).collect();
        let mut outputs = self
            .outputs(job, paths, &record.log, ptx, deps, search, None, false)
            .ok()?;
        for o in &mut outputs {
            o.signatures = record.signatures.clone();
        }
        Some(outputs)
    }
}

/// nvcc's arguments for `job`, with its scratch files in `tmp`.
fn nvcc_args(job: &Job, tmp: &Path) -> Vec<String> {
    if let JobKind::Library { archs, .. } = &job.kind {
        let mut args = vec!["-c".to_string()];
        args.extend(crate::hostlib::gencodes(archs));
        args.extend(
            [
                "-Xptxas",
                "-v",
                // The PTX, cubin and preprocessed sources of every arch.
                "-keep",
                "--keep-dir",
            ]
            .map(str::to_string),
        );
        args.push(tmp.display().to_string());
        args.push("-o".to_string());
        args.push(tmp.join("out.o").display().to_string());
        args.extend(job.args.iter().cloned());
        args.push(job.source.clone());
        return args;
    }
    let virt = job.arch.replacen("sm_", "compute_", 1);
    let mut args = vec![
        "--cubin".to_string(),
        "-gencode".to_string(),
        format!("arch={virt},code={}", job.arch),
        "-Xptxas".to_string(),
        "-v".to_string(),
        // -keep leaves the PTX and the preprocessed source; the line
        // markers of the latter name every file read, so no `-MD` (which
        // costs nvcc a second preprocessor pass, ~15 % of a job).
        "-keep".to_string(),
        "--keep-dir".to_string(),
        tmp.display().to_string(),
        "-o".to_string(),
        tmp.join("out.cubin").display().to_string(),
    ];
    args.extend(job.args.iter().cloned());
    args.push(job.source.clone());
    args
}

/// An exclusive advisory lock on `cache/<job>.lock`, released on drop.
///
/// Cargo never runs two build scripts in one `OUT_DIR`, but two builds
/// given the same `OUT_DIR` by hand (or a script run twice) may. Where the
/// file system has no locks (some network mounts) the job runs unlocked:
/// a record whose outputs were replaced under it then fails its output
/// check and the job runs again, which costs time but is never stale.
struct JobLock(Option<std::fs::File>);

impl JobLock {
    fn take(record: &Path) -> JobLock {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(record.with_extension("lock"))
            .ok()
            .filter(|f| f.lock().is_ok());
        JobLock(file)
    }
}

impl Drop for JobLock {
    fn drop(&mut self) {
        if let Some(file) = &self.0 {
            let _ = file.unlock();
        }
    }
}

struct JobPaths {
    /// Per arch: the arch, its `<job>.cubin` and `<job>.ptx` in `$OUT_DIR/occ`.
    files: Vec<(String, String, String)>,
    /// A library job's `<stem>.o`, in `$OUT_DIR/occ`.
    object: Option<String>,
    /// `cache/<job>.json`.
    record: PathBuf,
    /// The job's scratch folder.
    tmp: PathBuf,
}

/// Writes a file through a temporary sibling and a rename, and only when its
/// content changes (so the modification time of unchanged output stays).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
    }
    let tmp = unique_sibling(path);
    std::fs::write(&tmp, bytes).map_err(|e| {
        // A full disk leaves a truncated file: never leave it behind.
        let _ = std::fs::remove_file(&tmp);
        Error::io(format!("cannot write {}", path.display()), e)
    })?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(format!("cannot write {}", path.display()), e)
    })
}

/// `path` with a suffix unique to this process and call (`.tmp<pid>.<n>`):
/// a temporary name no other thread or process writes to.
pub(crate) fn unique_sibling(path: &Path) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".tmp{}.{n}", std::process::id()));
    PathBuf::from(name)
}

fn find_ptx(dir: &Path, source: &str) -> Option<PathBuf> {
    let stem = Path::new(source)
        .file_stem()?
        .to_string_lossy()
        .into_owned();
    let direct = dir.join(format!("{stem}.ptx"));
    if direct.is_file() {
        return Some(direct);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ptx"))
        .collect();
    found.sort();
    found.into_iter().next()
}

/// The device-side preprocessed source that `-keep` leaves (`<stem>.cpp1.ii`),
/// or with `all` every preprocessed source (a library job's host side,
/// `<stem>.cpp4.ii`, and each arch's `<stem>.compute_XX.cpp1.ii`).
/// The host stubs' mangled names in the `.cudafe1.stub.c` files nvcc
/// left in `dir` (`occ_model::params::scan_stubs`).
fn find_stubs(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut stubs: Vec<String> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".cudafe1.stub.c"))
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .flat_map(|text| params::scan_stubs(&text))
        .collect();
    stubs.sort();
    stubs.dedup();
    stubs
}

fn find_preprocessed(dir: &Path, all: bool) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.to_string_lossy();
            name.ends_with(".cpp1.ii") || (all && name.ends_with(".ii"))
        })
        .collect();
    found.sort();
    if !all {
        found.truncate(1);
    }
    found
}

/// Every file a preprocessed source (`.ii`) was made from, from its line
/// markers, as absolute paths (relative ones are taken from `root`),
/// sorted: the main file (the first marker's) and every file the
/// preprocessor entered (`# 1 "kernels/common.cuh" 1`: flag 1). A marker
/// without flag 1 that names a new file comes from a `#line` directive
/// (generated sources name their grammar or template that way), which reads
/// no file; `<built-in>` and the like are skipped. The same set as nvcc's
/// `-MD` gives, without its second preprocessor pass.
pub fn deps_from_preprocessed(text: &[u8], root: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut main_seen = false;
    let mut rest = text;
    loop {
        let line_end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        let line = &rest[..line_end];
        if let Some((name, flags)) = marker(line) {
            if !name.starts_with(b"<")
                && (!main_seen || flags.split(|b| *b == b' ').any(|f| f == b"1"))
            {
                main_seen = true;
                let path = PathBuf::from(unescape(name));
                out.push(if path.is_absolute() {
                    path
                } else {
                    root.join(path)
                });
            }
        }
        if line_end >= rest.len() {
            break;
        }
        rest = &rest[line_end + 1..];
    }
    out.sort();
    out.dedup();
    out
}

/// `# 12 "file" 1 3` (or `#line 12 "file"`) → (`file`, still escaped; the
/// flags after it).
fn marker(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let rest = line.strip_prefix(b"#")?;
    let rest = rest.strip_prefix(b"line").unwrap_or(rest);
    let rest = rest.strip_prefix(b" ")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let rest = rest[digits..].strip_prefix(b" \"")?;
    let mut i = 0;
    while i < rest.len() {
        match rest[i] {
            b'\\' => i += 2,
            b'"' => {
                let flags = rest.get(i + 1..).unwrap_or(b"");
                return Some((&rest[..i], flags.trim_ascii()));
            }
            _ => i += 1,
        }
    }
    None
}

fn unescape(name: &[u8]) -> String {
    let mut out = Vec::with_capacity(name.len());
    let mut i = 0;
    while i < name.len() {
        if name[i] == b'\\' && i + 1 < name.len() {
            i += 1;
        }
        out.push(name[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Turns a failed nvcc run into the error a user can act on.
fn nvcc_failure(nvcc: &Nvcc, job: &Job, log: &str, status: std::process::ExitStatus) -> Error {
    let code = status.code();
    if code.is_none() {
        #[cfg(unix)]
        let signal = std::os::unix::process::ExitStatusExt::signal(&status);
        #[cfg(not(unix))]
        let signal = None;
        return Error::NvccKilled {
            file: job.source.clone(),
            arch: job.arch.clone(),
            signal,
        };
    }
    let lower = log.to_ascii_lowercase();
    if lower.contains("failed to preprocess host compiler properties")
        || lower.contains("cannot find compiler")
        || lower.contains("host compiler targets unsupported")
        || lower.contains("unsupported gnu version")
        || lower.contains("unsupported clang version")
    {
        let detail: Vec<&str> = log
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("ptxas"))
            .take(4)
            .collect();
        let compiler = ccbin(&job.args).unwrap_or_else(|| "nvcc's default (gcc)".to_string());
        return Error::HostCompiler {
            compiler,
            detail: format!("nvcc said: {}", detail.join(" / ")),
        };
    }
    if let Some(line) = log.lines().find(|l| {
        let l = l.to_ascii_lowercase();
        l.contains("no space left on device") || l.contains("disk quota exceeded")
    }) {
        return Error::DiskFull {
            file: job.source.clone(),
            arch: job.arch.clone(),
            detail: line.trim().to_string(),
        };
    }
    if lower.contains("unsupported gpu architecture")
        || (lower.contains("is not defined for option") && lower.contains("gpu-name"))
    {
        let detail = log
            .lines()
            .find(|l| {
                let l = l.to_ascii_lowercase();
                l.contains("unsupported gpu architecture")
                    || l.contains("is not defined for option")
            })
            .unwrap_or("unsupported gpu architecture")
            .trim()
            .to_string();
        return Error::UnsupportedArch {
            arch: job.arch.clone(),
            nvcc_version: nvcc
                .version()
                .unwrap_or_else(|_| nvcc.path.display().to_string()),
            detail,
        };
    }
    let mut diagnostics: Vec<String> = log
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("ptxas info") && !l.starts_with("    "))
        .map(|l| l.trim_end().to_string())
        .collect();
    if diagnostics.is_empty() {
        if let Some(launcher) = &nvcc.launcher {
            return Error::LauncherFailed {
                launcher: launcher.clone(),
                file: job.source.clone(),
                arch: job.arch.clone(),
                code,
            };
        }
        diagnostics.push(format!(
            "nvcc exited with {} and printed nothing",
            code.map_or("a signal".to_string(), |c| format!("status {c}"))
        ));
    }
    const MAX: usize = 40;
    if diagnostics.len() > MAX {
        let more = diagnostics.len() - MAX;
        diagnostics.truncate(MAX);
        diagnostics.push(format!("... and {more} more lines"));
    }
    Error::Compile {
        file: job.source.clone(),
        arch: job.arch.clone(),
        diagnostics,
    }
}

/// The `-ccbin` of nvcc arguments, if any.
fn ccbin(args: &[String]) -> Option<String> {
    let mut iter = args.iter();
    let mut found = None;
    while let Some(a) = iter.next() {
        if a == "-ccbin" || a == "--compiler-bindir" {
            found = iter.next().cloned();
        } else if let Some(v) = a
            .strip_prefix("-ccbin=")
            .or_else(|| a.strip_prefix("--compiler-bindir="))
        {
            found = Some(v.to_string());
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deps_from_line_markers() {
        let text = b"# 1 \"kernels/k.cu\"\n# 1 \"<built-in>\"\n# 1 \"<command-line>\"\n\
            # 1 \"/usr/include/stdc-predef.h\" 1 3 4\n# 1 \"kernels/k.cu\"\nint x;\n\
            # 1 \"kernels/common.cuh\" 1\n#pragma once\n# 3 \"kernels/k.cu\" 2\n\
            # 7 \"/opt/a \\\"q\\\" \\\\b.h\" 1\n#line 4 \"inc/x.cuh\"\n";
        let deps = deps_from_preprocessed(text, Path::new("/crate"));
        // `#line 4 "inc/x.cuh"` names a file the preprocessor never read.
        assert_eq!(
            deps,
            vec![
                PathBuf::from("/crate/kernels/common.cuh"),
                PathBuf::from("/crate/kernels/k.cu"),
                PathBuf::from("/opt/a \"q\" \\b.h"),
                PathBuf::from("/usr/include/stdc-predef.h"),
            ]
        );
    }

    /// An exit status with `code`, from a real process.
    fn exit_status(code: i32) -> std::process::ExitStatus {
        std::process::Command::new("sh")
            .args(["-c", &format!("exit {code}")])
            .status()
            .expect("run sh")
    }

    #[test]
    fn unsupported_arch_is_recognised() {
        let job = Job {
            source: "k.cu".into(),
            arch: "sm_52".into(),
            name: "k.sm_52".into(),
            args: vec![],
            kind: JobKind::Device,
        };
        // No nvcc at that path: the message names the path instead of a version.
        let nvcc = Nvcc {
            path: PathBuf::from("/nonexistent/nvcc"),
            origin: "test".into(),
            launcher: None,
        };
        let err = nvcc_failure(
            &nvcc,
            &job,
            "nvcc fatal   : Unsupported gpu architecture 'compute_52'\n",
            exit_status(1),
        );
        assert!(
            matches!(err, Error::UnsupportedArch { ref arch, ref nvcc_version, .. }
                if arch == "sm_52" && nvcc_version == "/nonexistent/nvcc"),
            "{err}"
        );
        let err = nvcc_failure(
            &nvcc,
            &job,
            "k.cu(3): error: identifier \"x\" is undefined\n",
            exit_status(1),
        );
        assert!(err.to_string().contains("k.cu(3): error"), "{err}");
    }
}
