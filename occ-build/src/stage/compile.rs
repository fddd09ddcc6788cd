//! Stage 4: one nvcc job per (file, arch): run it (in parallel, under
//! cargo's jobserver), or reuse its last result when the cache says nothing
//! that can change it has changed.
//!
//! This module runs nvcc in a scratch folder of the run and gathers the
//! files it left (cubin, PTX, preprocessed sources, host stubs); the cache
//! (`cache.rs`) decides reuse and commits a result ([`cache::commit`]: the
//! snapshot after nvcc, the outputs into `$OUT_DIR/occ`, the record last).
//! What nvcc printed is read by the pure `nvcc_text`.
//!
//! A host-code library job (`JobKind::Library`, `hostlib.rs`) is one
//! `nvcc -c` of a file for every arch: it leaves `<stem>.o` and, per arch,
//! the same `<stem>.<arch>.cubin` and `.ptx` a device-only job leaves, under
//! one record (`cache/<stem>.lib.json`) whose outputs are all of them; its
//! result comes back as one `JobOutput` per arch.

use crate::leaf::cache::{self, NvccVars, ToolkitId};
use crate::leaf::error::{Error, Result};
use crate::leaf::files::{remove_stale_scratch, scratch_dir};
use crate::leaf::job::{Job, JobKind, JobOutput};
use crate::leaf::nvcc_args;
use crate::leaf::nvcc_text::{self, deps_from_preprocessed, Failure};
use crate::process::{Cmd, Programs, Status};
use crate::stage::inputs::Inputs;
use crate::toolkit::Nvcc;
use occ_model::compiler::analyze::{self, JobText};
use occ_model::compiler::launches;
use occ_model::compiler::params::{self, Signatures};
use occ_model::schema::manifest::CodeLaunch;
use occ_model::schema::manifest::Contribution;
use occ_model::schema::measured;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Stage 4: runs (or reuses) every job, under cargo's jobserver when the
/// build script has one; results come back in the order of `jobs`.
pub(crate) fn run(
    nvcc: &Nvcc,
    toolkit: &ToolkitId,
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
        programs: &*inputs.programs,
        toolkit,
        toolkit_dirs: toolkit.include_dirs(),
        vars: &inputs.nvcc_vars,
        root: &inputs.root,
        out,
        jobs: inputs.parallel,
        jobserver: jobserver.as_ref(),
        verify: inputs.verify,
        walked: Mutex::default(),
    }
    .run_all(jobs)
}

/// The identity of the toolkit the jobs run ([`ToolkitId::identify`], with the
/// first job's arguments), cached in `$OUT_DIR/occ/cache/toolkit.json`.
/// Creates the output folders.
pub(crate) fn toolkit_id(nvcc: &Nvcc, inputs: &Inputs, jobs: &[Job]) -> Result<ToolkitId> {
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
            let mut args = nvcc_args::for_job(job, &nvcc_args::scratch(out, job));
            while let Some(i) = args.iter().position(|a| a == "-gencode") {
                args.drain(i..(i + 2).min(args.len()));
            }
            args
        }
        None => Vec::new(),
    };
    ToolkitId::identify(
        nvcc,
        &*inputs.programs,
        &inputs.nvcc_vars,
        inputs.path_var.as_deref(),
        &args,
        &inputs.root,
        &out.join("cache").join("toolkit.json"),
    )
}

fn jobserver_client() -> Option<jobserver::Client> {
    // SAFETY: cargo passes the jobserver's file descriptors to the build
    // script; nothing else in this process uses or closes them.
    unsafe { jobserver::Client::from_env() }
}

/// The settings shared by all jobs of a build.
#[derive(Debug)]
pub(crate) struct Runner<'a> {
    /// The nvcc to run.
    pub nvcc: &'a Nvcc,
    /// What runs it.
    pub programs: &'a dyn Programs,
    /// The toolkit's identity.
    pub toolkit: &'a ToolkitId,
    /// The toolkit's include folders ([`ToolkitId::include_dirs`]).
    pub toolkit_dirs: Vec<PathBuf>,
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
    /// Whether every cached result is proven by preprocessing before it is
    /// used (`OCC_CACHE=verify`, and always under `CI`).
    pub verify: bool,
    /// The folders below each search folder ([`cache::subfolders`]),
    /// walked once per build.
    pub walked: Mutex<std::collections::HashMap<PathBuf, Option<Vec<PathBuf>>>>,
}

/// What became of a job's record ([`Runner::reuse`]).
enum Reuse {
    /// Its result holds: the job's outputs.
    Hit(Vec<JobOutput>),
    /// The job runs again; with why, when every stat had said the result
    /// held and preprocessing disproved it.
    Miss(Option<String>),
}

impl Runner<'_> {
    /// Runs (or reuses) every job; results come back in the order of `jobs`.
    /// Stops at the first failure, reporting the earliest failing job.
    pub fn run_all(&self, jobs: &[Job]) -> Result<Vec<JobOutput>> {
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<Option<Result<Vec<JobOutput>>>>> =
            Mutex::new((0..jobs.len()).map(|_| None).collect());
        let workers = self.jobs.clamp(1, jobs.len().max(1));
        let tokens = crate::leaf::tokens::Tokens::new(self.jobserver);
        std::thread::scope(|scope| {
            for worker in 0..workers {
                let next = &next;
                let results = &results;
                let tokens = &tokens;
                scope.spawn(move || loop {
                    // Worker 0 runs on the token cargo gave this build script;
                    // the others take one from the jobserver per nvcc run,
                    // before the job (`tokens`).
                    let Some(_token) = tokens.before_next(worker, next, jobs.len()) else {
                        break;
                    };
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(job) = jobs.get(i) else { break };
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
            record: cache::record_path(self.out, &job.name),
            tmp: nvcc_args::scratch(self.out, job),
        }
    }

    /// The key of a job ([`cache::job_key`]).
    fn key(&self, job: &Job) -> String {
        cache::job_key(self.toolkit, self.nvcc, self.vars, self.root, self.out, job)
    }

    fn run_one(&self, job: &Job) -> Result<Vec<JobOutput>> {
        let mut paths = self.paths(job);
        let key = self.key(job);
        // One build at a time checks and commits a job: a second build into
        // the same OUT_DIR waits here, then reuses the first one's result
        // instead of replacing its outputs under its record.
        let _lock = cache::JobLock::take(&paths.record);
        let mut disproved = None;
        if let Some(record) = cache::Record::read(&paths.record).filter(|r| r.fits(&key, self.out))
        {
            match self.reuse(job, &key, &paths, record) {
                Reuse::Hit(outputs) => return Ok(outputs),
                Reuse::Miss(why) => disproved = why,
            }
        }
        // A scratch folder of this run alone: two builds into the same
        // OUT_DIR at once (or a killed one's leftovers) never share one.
        paths.tmp = scratch_dir(&paths.tmp)?;
        let run_args = nvcc_args::for_job(job, &paths.tmp);
        nvcc_args::check(job, &run_args)?;
        let source = self.root.join(&job.source);
        let before = cache::Before::take(&source).ok_or_else(|| Error::MissingSource {
            path: PathBuf::from(&job.source),
            reason: "it disappeared before nvcc could read it".into(),
        })?;
        let _ = std::fs::remove_dir_all(&paths.tmp);
        std::fs::create_dir_all(&paths.tmp)
            .map_err(|e| Error::io(format!("cannot create {}", paths.tmp.display()), e))?;
        let disproved = disproved.map(|why| {
            format!(
                "occ: the cached result of {} for {} did not hold ({why}); compiled it again",
                job.source, job.arch
            )
        });
        let result = self.compile(job, &run_args, &paths, &key, &before, disproved);
        let _ = std::fs::remove_dir_all(&paths.tmp);
        result
    }

    /// Whether a record's result may be used, by the rule of the cache's
    /// module doc: by stats alone, unless every hit is proven
    /// ([`Runner::verify`]) or a stat changed with no input's bytes; then by
    /// preprocessing the job again and comparing the text with the one
    /// its result was compiled from.
    fn reuse(&self, job: &Job, key: &str, paths: &JobPaths, record: cache::Record) -> Reuse {
        let direct = record.direct();
        // A host-code library's texts (the host's and each arch's) come
        // from one multi-arch run that `nvcc -E` cannot repeat: without a
        // proof, it runs again.
        let provable = matches!(job.kind, JobKind::Device) && record.preprocessed.is_some();
        match direct {
            cache::Direct::Holds if !self.verify => {
                let deps = record.inputs.iter().map(|i| i.path.clone()).collect();
                return self.cached(job, paths, record, deps);
            }
            cache::Direct::Changed => return Reuse::Miss(None),
            _ if !provable => return Reuse::Miss(None),
            _ => {}
        }
        // nvcc -E failing is the compile's to report.
        let Some(proof) = self.preprocess(job, paths) else {
            return Reuse::Miss(None);
        };
        if record.preprocessed.as_deref() != Some(proof.hash.as_str()) {
            let why =
                (direct == cache::Direct::Holds).then(|| record.disproof(&proof.deps, self.root));
            return Reuse::Miss(why);
        }
        if direct == cache::Direct::Unsure {
            let source = self.root.join(&job.source);
            let search = cache::search_dirs(self.root, &source, &self.search_args(&job.args));
            let (below, unwalked) = self.subfolders(&search);
            let run = cache::Finished {
                key,
                root: self.root,
                source: &source,
                deps: &proof.deps,
                search: &search,
                toolkit_top: self.toolkit.top.as_deref(),
                toolkit_dirs: &self.toolkit_dirs,
                subfolders: &below,
                unwalked: &unwalked,
                moves: &[],
                out: self.out,
                record: &paths.record,
                log: &record.log,
                contributions: &record.contributions,
                preprocessed: Some(&proof.hash),
            };
            // A record not rewritten costs the next build a proof.
            let _ = cache::refresh(&proof.before, &run, record.outputs.clone());
        }
        self.cached(job, paths, record, proof.deps)
    }

    /// Preprocesses a device job's source as its compile did
    /// (`nvcc_args::preprocess`) in a scratch folder of its own: the
    /// text's hash and the files it read (absolute, sorted). `None` when
    /// nvcc failed.
    fn preprocess(&self, job: &Job, paths: &JobPaths) -> Option<Proof> {
        let tmp = scratch_dir(&paths.tmp).ok()?;
        let source = self.root.join(&job.source);
        let proof = (|| {
            let before = cache::Before::take(&source)?;
            let text = tmp.join("proof.ii");
            let mut cmd = Cmd::new(&self.nvcc.path);
            cache::nvcc_vars(&mut cmd, self.vars);
            cmd.args(nvcc_args::preprocess(job, &text))
                .current_dir(self.root)
                .writes(&tmp);
            let status = self.programs.output(&cmd).ok()?.status;
            let bytes = std::fs::read(&text).ok().filter(|_| status.success())?;
            let mut deps = deps_from_preprocessed(&bytes, self.root);
            if !deps.contains(&source) {
                deps.push(source.clone());
                deps.sort();
            }
            Some(Proof {
                hash: cache::hash_bytes(&[&bytes]),
                deps,
                before,
            })
        })();
        let _ = std::fs::remove_dir_all(&tmp);
        proof
    }

    /// Runs nvcc for `job` in `paths.tmp`, gathers the files it left and
    /// hands them to the cache to commit ([`cache::commit`]); `disproved`
    /// says why the job's cached result did not hold, when preprocessing
    /// disproved it.
    fn compile(
        &self,
        job: &Job,
        run_args: &[String],
        paths: &JobPaths,
        key: &str,
        before: &cache::Before,
        disproved: Option<String>,
    ) -> Result<Vec<JobOutput>> {
        let log = self.run_nvcc(job, run_args, &paths.tmp)?;
        let kept = self.gather(job, paths)?;
        let contributions = self.contribute(job, paths, &log, &kept)?;
        let source = self.root.join(&job.source);
        // The same folders the probes use: occ's own arguments add no -I.
        let search = cache::search_dirs(self.root, &source, &self.search_args(run_args));
        let (below, unwalked) = self.subfolders(&search);
        let changed = cache::commit(
            before,
            &cache::Finished {
                key,
                root: self.root,
                source: &source,
                deps: &kept.deps,
                search: &search,
                toolkit_top: self.toolkit.top.as_deref(),
                toolkit_dirs: &self.toolkit_dirs,
                subfolders: &below,
                unwalked: &unwalked,
                moves: &kept.moves,
                out: self.out,
                record: &paths.record,
                log: &log,
                contributions: &contributions,
                preprocessed: kept.preprocessed.as_deref(),
            },
        )?;
        let unstable = changed.map(|p| {
            format!(
                "occ: {} changed while nvcc compiled {} for {}; its numbers are refreshed on the next build",
                p.strip_prefix(self.root).unwrap_or(&p).display(),
                job.source,
                job.arch
            )
        });
        self.outputs(
            job,
            paths,
            Gathered {
                log,
                contributions,
                deps: kept.deps,
                search,
                unstable,
                disproved,
                ran: true,
            },
        )
    }

    /// What the job contributed on each of its archs, in the order of
    /// `paths.files` ([`analyze::contribution`]: parsed once, here, and kept
    /// with the record), each with the hash of the cubin nvcc just left.
    fn contribute(
        &self,
        job: &Job,
        paths: &JobPaths,
        log: &str,
        kept: &Kept,
    ) -> Result<Vec<Contribution>> {
        let (_, logs) = arch_logs(job, log.to_string())?;
        paths
            .files
            .iter()
            .zip(logs)
            .zip(&kept.ptx)
            .map(|(((arch, cubin, _), log), ptx)| {
                let text = JobText {
                    source: &job.source,
                    arch,
                    name: cubin.trim_end_matches(".cubin"),
                    args: &job.args,
                    log: &log,
                    ptx,
                    signatures: &kept.signatures,
                    launches: &kept.launches,
                };
                let hash = kept
                    .moves
                    .iter()
                    .find(|(_, to)| to == cubin)
                    .and_then(|(from, _)| std::fs::read(from).ok())
                    .map(|bytes| measured::cubin_hash(&bytes));
                Ok(analyze::contribution(text, hash.as_deref())?)
            })
            .collect()
    }

    /// Runs nvcc; its log (stderr, then stdout) when it succeeded.
    fn run_nvcc(&self, job: &Job, run_args: &[String], tmp: &Path) -> Result<String> {
        let mut cmd = self.nvcc.cmd();
        cache::nvcc_vars(&mut cmd, self.vars);
        cmd.args(run_args).current_dir(self.root).writes(tmp);
        let output = self
            .programs
            .output(&cmd)
            .map_err(|e| match &self.nvcc.launcher {
                Some(launcher) => Error::LauncherNotRunnable {
                    launcher: launcher.clone(),
                    reason: e.to_string(),
                },
                None => Error::Shell(occ_shell::Error::NvccNotRunnable {
                    nvcc: self.nvcc.path.clone(),
                    reason: e.to_string(),
                }),
            })?;
        let mut log = String::from_utf8_lossy(&output.stderr).into_owned();
        log.push_str(&String::from_utf8_lossy(&output.stdout));
        if !output.status.success() {
            return Err(nvcc_failure(
                self.nvcc,
                self.programs,
                job,
                &log,
                output.status,
            ));
        }
        Ok(log)
    }

    /// What nvcc left in `paths.tmp`: each file with the name it takes in
    /// `$OUT_DIR/occ`, each arch's PTX text, every input the preprocessed
    /// sources name and the kernels' signatures.
    fn gather(&self, job: &Job, paths: &JobPaths) -> Result<Kept> {
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
                    crate::stage::hostlib::kept_files(&paths.tmp, &job.source, arch)
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
        // A library job preprocesses the file once for the host and once
        // per arch (`#ifdef __CUDA_ARCH__` may include other headers): its
        // inputs are those of every `.ii`.
        let all = matches!(job.kind, JobKind::Library { .. });
        let (deps, signatures, preprocessed, launches) =
            read_preprocessed(&paths.tmp, all, self.root, &job.source);
        Ok(Kept {
            moves,
            ptx,
            deps,
            signatures,
            launches,
            preprocessed: preprocessed.filter(|_| !all),
        })
    }

    /// A job's result as the per-arch outputs the manifest is assembled
    /// from: itself for a device-only job, one per arch (its share of the
    /// log, its PTX) for a library job.
    fn outputs(&self, job: &Job, paths: &JobPaths, g: Gathered) -> Result<Vec<JobOutput>> {
        let (archs, logs) = arch_logs(job, g.log)?;
        let object = paths.object.as_ref().map(|o| self.out.join(o));
        Ok(archs
            .into_iter()
            .zip(logs)
            .zip(g.contributions)
            .zip(&paths.files)
            .map(|(((arch, log), contribution), (_, cubin, _))| JobOutput {
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
                contribution,
                deps: g.deps.clone(),
                search: g.search.clone(),
                unstable: g.unstable.clone(),
                disproved: g.disproved.clone(),
                ran: g.ran,
                object: object.clone(),
            })
            .collect())
    }

    /// The folders below the search folders `search` ([`cache::subfolders`]),
    /// each walked once per build, and the search folders too big to walk.
    fn subfolders(&self, search: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let (mut below, mut unwalked) = (Vec::new(), Vec::new());
        for dir in search {
            let known = self.walked.lock().ok().and_then(|w| w.get(dir).cloned());
            let walked = known.unwrap_or_else(|| {
                let walked = cache::subfolders(dir, self.out);
                if let Ok(mut all) = self.walked.lock() {
                    all.insert(dir.clone(), walked.clone());
                }
                walked
            });
            match walked {
                Some(folders) => below.extend(folders),
                None => unwalked.push(dir.clone()),
            }
        }
        (below, unwalked)
    }

    /// The arguments as nvcc sees them for its include search:
    /// `NVCC_PREPEND_FLAGS`, `args`, `NVCC_APPEND_FLAGS`, then the host
    /// compiler's include variables' folders (searched after `-I`), as
    /// `-I` arguments.
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
        for name in ["CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH"] {
            let dirs = self.vars.iter().filter(|(n, _)| n == name);
            for value in dirs.filter_map(|(_, v)| v.as_deref()) {
                let dirs = value.split(':').filter(|d| !d.is_empty());
                all.extend(dirs.map(|d| format!("-I{d}")));
            }
        }
        all
    }

    /// The outputs of a record whose result holds, with `deps` the files
    /// it read; a miss when its PTX cannot be read.
    fn cached(
        &self,
        job: &Job,
        paths: &JobPaths,
        record: cache::Record,
        deps: Vec<PathBuf>,
    ) -> Reuse {
        // A record of another layout of the job (its archs) is no hit.
        if record.contributions.len() != paths.files.len() {
            return Reuse::Miss(None);
        }
        let source = self.root.join(&job.source);
        let search = cache::search_dirs(self.root, &source, &self.search_args(&job.args));
        let gathered = Gathered {
            log: record.log,
            contributions: record.contributions,
            deps,
            search,
            unstable: None,
            disproved: None,
            ran: false,
        };
        match self.outputs(job, paths, gathered) {
            Ok(outputs) => Reuse::Hit(outputs),
            Err(_) => Reuse::Miss(None),
        }
    }
}

/// A job's archs and each one's share of nvcc's log: the one arch and the
/// whole log of a device job; a library job's log split by arch.
fn arch_logs(job: &Job, log: String) -> Result<(Vec<String>, Vec<String>)> {
    match &job.kind {
        JobKind::Device => Ok((vec![job.arch.clone()], vec![log])),
        JobKind::Library { archs, .. } => {
            let logs = occ_model::compiler::ptxas::split_by_arch(&log, archs).ok_or_else(|| {
                Error::LibraryLogSplit {
                    file: job.source.clone(),
                    archs: archs.clone(),
                }
            })?;
            Ok((archs.clone(), logs))
        }
    }
}

/// A job preprocessed again ([`Runner::preprocess`]).
struct Proof {
    /// The hash of the text.
    hash: String,
    /// The files it read, absolute and sorted.
    deps: Vec<PathBuf>,
    /// The snapshot taken before nvcc started.
    before: cache::Before,
}

/// What nvcc left in a job's scratch folder ([`Runner::gather`]).
struct Kept {
    /// Each file to put in place, with its name in `$OUT_DIR/occ`.
    moves: Vec<(PathBuf, String)>,
    /// Each arch's PTX text, in the order of the job's archs.
    ptx: Vec<String>,
    /// Every input, absolute and sorted (the source at least).
    deps: Vec<PathBuf>,
    /// The kernels' signatures.
    signatures: Signatures,
    /// The `<<<...>>>` launches of the source's host code.
    launches: Vec<CodeLaunch>,
    /// The hash of the device-side preprocessed text (`None` for a
    /// host-code library, and when nvcc left no text).
    preprocessed: Option<String>,
}

/// A job's result before it is split per arch: from a run of nvcc or from
/// the job's record.
struct Gathered {
    /// nvcc's log.
    log: String,
    /// What the job contributed, per arch.
    contributions: Vec<Contribution>,
    /// Every input.
    deps: Vec<PathBuf>,
    /// The user's include search folders.
    search: Vec<PathBuf>,
    /// Why the result is not cached, if so.
    unstable: Option<String>,
    /// Why the job's cached result was not used, when preprocessing
    /// disproved it.
    disproved: Option<String>,
    /// Whether nvcc ran.
    ran: bool,
}

/// The inputs (absolute, sorted, the source among them) and the kernels'
/// declarations the preprocessed sources in `dir` name, the host stubs
/// nvcc left there, the hash of the preprocessed texts (`None`: there
/// were none, so nothing a proof could match), and the `<<<...>>>`
/// launches the source's own text writes (`launches::read`): from the
/// host side's text where there is one (a library's `.cpp4.ii`), else
/// from the device side's, which the assembly checks across archs.
fn read_preprocessed(
    dir: &Path,
    all: bool,
    root: &Path,
    source: &str,
) -> (Vec<PathBuf>, Signatures, Option<String>, Vec<CodeLaunch>) {
    let mut deps: Vec<PathBuf> = Vec::new();
    let mut signatures = Signatures::default();
    let mut texts: Vec<Vec<u8>> = Vec::new();
    let mut launches = Vec::new();
    let absolute = root.join(source).display().to_string();
    for ii in find_preprocessed(dir, all) {
        let Ok(bytes) = std::fs::read(&ii) else {
            continue;
        };
        deps.extend(deps_from_preprocessed(&bytes, root));
        signatures.decls.extend(params::scan_decls(&bytes));
        if !all || ii.to_string_lossy().ends_with(".cpp4.ii") {
            let text = String::from_utf8_lossy(&bytes);
            launches = launches::read(&text, source, &[source, absolute.as_str()]);
        }
        texts.push(bytes);
    }
    signatures
        .decls
        .sort_by(|a, b| (&a.name, &a.params).cmp(&(&b.name, &b.params)));
    signatures.decls.dedup();
    signatures.stubs = find_stubs(dir);
    deps.sort();
    deps.dedup();
    let source = root.join(source);
    if !deps.contains(&source) {
        // No preprocessed file (an unusual launcher or flags): the
        // source alone is known.
        deps.push(source);
        deps.sort();
    }
    let parts: Vec<&[u8]> = texts.iter().map(Vec::as_slice).collect();
    let hash = (!parts.is_empty()).then(|| cache::hash_bytes(&parts));
    (deps, signatures, hash, launches)
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

/// The host stubs' mangled names in the `.cudafe1.stub.c` files nvcc
/// left in `dir` (`occ_model::compiler::params::scan_stubs`).
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

/// The device-side preprocessed source that `-keep` leaves (`<stem>.cpp1.ii`),
/// or with `all` every preprocessed source (a library job's host side,
/// `<stem>.cpp4.ii`, and each arch's `<stem>.compute_XX.cpp1.ii`).
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

/// Turns a failed nvcc run into the error a user can act on (the log's
/// class from [`nvcc_text::classify`]).
fn nvcc_failure(
    nvcc: &Nvcc,
    programs: &dyn Programs,
    job: &Job,
    log: &str,
    status: Status,
) -> Error {
    let Some(code) = status.code else {
        return Error::NvccKilled {
            file: job.source.clone(),
            arch: job.arch.clone(),
            signal: status.signal,
        };
    };
    match nvcc_text::classify(log) {
        Failure::HostCompiler { detail } => Error::HostCompiler {
            compiler: nvcc_text::ccbin(&job.args)
                .unwrap_or_else(|| "nvcc's default (gcc)".to_string()),
            detail,
        },
        Failure::DiskFull { line } => Error::DiskFull {
            file: job.source.clone(),
            arch: job.arch.clone(),
            detail: line,
        },
        Failure::UnsupportedArch { line } => Error::UnsupportedArch {
            arch: job.arch.clone(),
            nvcc_version: nvcc
                .version_with(programs)
                .unwrap_or_else(|_| nvcc.path.display().to_string()),
            detail: line,
        },
        Failure::Diagnostics(lines) if lines.is_empty() => match &nvcc.launcher {
            Some(launcher) => Error::LauncherFailed {
                launcher: launcher.clone(),
                file: job.source.clone(),
                arch: job.arch.clone(),
                code: Some(code),
            },
            None => Error::Compile {
                file: job.source.clone(),
                arch: job.arch.clone(),
                diagnostics: vec![format!(
                    "nvcc exited with status {code} and printed nothing"
                )],
            },
        },
        Failure::Diagnostics(diagnostics) => Error::Compile {
            file: job.source.clone(),
            arch: job.arch.clone(),
            diagnostics,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An exit status with `code`.
    fn exit_status(code: i32) -> Status {
        Status {
            code: Some(code),
            signal: None,
        }
    }

    /// What a run of nvcc gave (or could not start), the same to every
    /// command: what the seam lets a test choose without a process.
    #[derive(Debug)]
    struct Gives(Option<Status>);

    impl Programs for Gives {
        fn output(&self, _: &Cmd) -> std::io::Result<crate::process::Output> {
            match self.0 {
                Some(status) => Ok(crate::process::Output {
                    status,
                    stdout: Vec::new(),
                    stderr: Vec::new(),
                }),
                None => Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no such file",
                )),
            }
        }
    }

    /// `run_nvcc` of a job with `programs`, nvcc wrapped by `launcher`.
    fn run_with(programs: &dyn Programs, launcher: Option<&str>) -> Result<String> {
        let nvcc = Nvcc {
            path: PathBuf::from("/toolkit/bin/nvcc"),
            origin: "test".into(),
            launcher: launcher.map(PathBuf::from),
        };
        let toolkit: ToolkitId =
            serde_json::from_str(r#"{"probe":"","tools":[],"dryrun":"","top":null,"id":""}"#)
                .expect("a toolkit");
        let runner = Runner {
            nvcc: &nvcc,
            programs,
            toolkit: &toolkit,
            toolkit_dirs: Vec::new(),
            vars: &Vec::new(),
            root: Path::new("/crate"),
            out: Path::new("/crate/out/occ"),
            jobs: 1,
            jobserver: None,
            verify: false,
            walked: Mutex::default(),
        };
        let job = Job {
            source: "k.cu".into(),
            arch: "sm_80".into(),
            name: "k.sm_80".into(),
            args: vec![],
            kind: JobKind::Device,
        };
        runner.run_nvcc(&job, &[], Path::new("/crate/out/occ/tmp/k.sm_80"))
    }

    #[test]
    fn nvcc_or_its_launcher_that_cannot_start_or_is_killed_is_named() {
        let err = run_with(&Gives(None), None).unwrap_err();
        assert!(
            matches!(err, Error::Shell(occ_shell::Error::NvccNotRunnable { ref nvcc, .. }) if nvcc == Path::new("/toolkit/bin/nvcc")),
            "{err}"
        );
        // Through a launcher, the launcher is what did not start.
        let err = run_with(&Gives(None), Some("/bin/sccache")).unwrap_err();
        assert!(
            matches!(err, Error::LauncherNotRunnable { ref launcher, .. } if launcher == Path::new("/bin/sccache")),
            "{err}"
        );
        let killed = Status {
            code: None,
            signal: Some(9),
        };
        let err = run_with(&Gives(Some(killed)), None).unwrap_err();
        assert!(
            matches!(err, Error::NvccKilled { signal: Some(9), ref arch, .. } if arch == "sm_80"),
            "{err}"
        );
        // A launcher that exits 1 having printed nothing is named.
        let err = run_with(&Gives(Some(exit_status(1))), Some("/bin/sccache")).unwrap_err();
        assert!(
            matches!(err, Error::LauncherFailed { code: Some(1), .. }),
            "{err}"
        );
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
            &crate::process::Real,
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
            &crate::process::Real,
            &job,
            "k.cu(3): error: identifier \"x\" is undefined\n",
            exit_status(1),
        );
        assert!(err.to_string().contains("k.cu(3): error"), "{err}");
    }
}
