//! One nvcc job per (file, arch): run it (in parallel, under cargo's
//! jobserver), or reuse its last result when nothing it read has changed.
//!
//! Each job leaves in `$OUT_DIR/occ`: `<job>.cubin`, `<job>.ptx`, and in
//! `cache/`: the ptxas log, the dependency list and the input key. Outputs are
//! written to a scratch folder and renamed into place; the key is written
//! last, so a killed build reruns the job next time instead of trusting
//! half-written files.

use crate::error::{Error, Result};
use crate::inputs::Inputs;
use crate::toolkit::Nvcc;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Stage 4: runs (or reuses) every job, under cargo's jobserver when the
/// build script has one; results come back in the order of `jobs`.
pub(crate) fn run(nvcc: &Nvcc, inputs: &Inputs, jobs: &[Job]) -> Result<Vec<JobOutput>> {
    let jobserver = jobserver_client();
    Runner {
        nvcc,
        nvcc_id: file_id(&nvcc.path),
        root: &inputs.root,
        out: &inputs.out_dir,
        jobs: inputs.parallel,
        jobserver: jobserver.as_ref(),
    }
    .run_all(jobs)
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
    /// Whether nvcc ran (false: reused from the cache).
    pub ran: bool,
}

/// The settings shared by all jobs of a build.
#[derive(Debug)]
pub struct Runner<'a> {
    /// The nvcc to run.
    pub nvcc: &'a Nvcc,
    /// A fingerprint of that nvcc (its path, size and modification time).
    pub nvcc_id: String,
    /// The crate root: nvcc runs there, and sources are relative to it.
    pub root: &'a Path,
    /// `$OUT_DIR/occ`.
    pub out: &'a Path,
    /// How many jobs may run at once (besides the jobserver).
    pub jobs: usize,
    /// Cargo's jobserver, when the build script got one.
    pub jobserver: Option<&'a jobserver::Client>,
}

/// A fingerprint of an executable: its path, size and modification time.
pub fn file_id(path: &Path) -> String {
    match std::fs::metadata(path) {
        Ok(meta) => {
            let mtime = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            format!("{}:{}:{}", path.display(), meta.len(), mtime)
        }
        Err(_) => path.display().to_string(),
    }
}

impl Runner<'_> {
    /// Runs (or reuses) every job; results come back in the order of `jobs`.
    /// Stops at the first failure, reporting the earliest failing job.
    pub fn run_all(&self, jobs: &[Job]) -> Result<Vec<JobOutput>> {
        for dir in [
            self.out.to_path_buf(),
            self.out.join("cache"),
            self.out.join("tmp"),
        ] {
            std::fs::create_dir_all(&dir)
                .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
        }
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<Option<Result<JobOutput>>>> =
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
                Some(Ok(output)) => out.push(output),
                Some(Err(e)) => return Err(e),
                None => {}
            }
        }
        Ok(out)
    }

    fn paths(&self, job: &Job) -> JobPaths {
        let cache = self.out.join("cache");
        JobPaths {
            cubin: self.out.join(format!("{}.cubin", job.name)),
            ptx: self.out.join(format!("{}.ptx", job.name)),
            log: cache.join(format!("{}.log", job.name)),
            deps: cache.join(format!("{}.d", job.name)),
            key: cache.join(format!("{}.key", job.name)),
            tmp: self.out.join("tmp").join(&job.name),
        }
    }

    /// nvcc's arguments for `job`, with its scratch files in `tmp`.
    fn nvcc_args(&self, job: &Job, tmp: &Path) -> Vec<String> {
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

    /// The key of a job's inputs: nvcc, its arguments, and the bytes of the
    /// source and of every file the last run read.
    fn key(&self, job: &Job, args: &[String], deps: &[PathBuf]) -> Option<String> {
        let mut h = DefaultHasher::new();
        self.nvcc_id.hash(&mut h);
        self.nvcc.launcher.hash(&mut h);
        // `args` name the job's canonical scratch folder (fixed per job
        // name), not the per-run one, so the key does not change per run.
        args.hash(&mut h);
        let mut files: Vec<PathBuf> = deps.to_vec();
        files.push(self.root.join(&job.source));
        files.sort();
        files.dedup();
        for file in files {
            let bytes = std::fs::read(&file).ok()?;
            file.hash(&mut h);
            bytes.hash(&mut h);
        }
        Some(format!("{:016x}", h.finish()))
    }

    fn run_one(&self, job: &Job) -> Result<JobOutput> {
        let mut paths = self.paths(job);
        let args = self.nvcc_args(job, &paths.tmp);
        if let Some(output) = self.cached(job, &args, &paths) {
            return Ok(output);
        }
        // A scratch folder of this run alone: two builds into the same
        // OUT_DIR at once (or a killed one's leftovers) never share one.
        paths.tmp = unique_sibling(&paths.tmp);
        let run_args = self.nvcc_args(job, &paths.tmp);
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
        let _ = std::fs::remove_dir_all(&paths.tmp);
        std::fs::create_dir_all(&paths.tmp)
            .map_err(|e| Error::io(format!("cannot create {}", paths.tmp.display()), e))?;
        let output = self
            .nvcc
            .command()
            .args(&run_args)
            .current_dir(self.root)
            .output()
            .map_err(|e| Error::NvccNotRunnable {
                nvcc: self.nvcc.path.clone(),
                reason: e.to_string(),
            })?;
        let mut log = String::from_utf8_lossy(&output.stderr).into_owned();
        log.push_str(&String::from_utf8_lossy(&output.stdout));
        if !output.status.success() {
            let _ = std::fs::remove_dir_all(&paths.tmp);
            return Err(nvcc_failure(self.nvcc, job, &log, output.status.code()));
        }
        let ptx_tmp = find_ptx(&paths.tmp, &job.source).ok_or_else(|| Error::NoPtx {
            file: job.source.clone(),
            arch: job.arch.clone(),
            dir: paths.tmp.clone(),
        })?;
        let ptx = std::fs::read_to_string(&ptx_tmp)
            .map_err(|e| Error::io(format!("cannot read {}", ptx_tmp.display()), e))?;
        let mut deps = find_preprocessed(&paths.tmp)
            .and_then(|ii| std::fs::read(ii).ok())
            .map(|bytes| deps_from_preprocessed(&bytes, self.root))
            .unwrap_or_default();
        if deps.is_empty() {
            // No preprocessed file (an unusual launcher or flags): watch the
            // source alone; the key still covers it.
            deps.push(self.root.join(&job.source));
        }
        let key = self.key(job, &args, &deps);
        let dep_list: String = deps.iter().map(|d| format!("{}\n", d.display())).collect();
        write_atomic(&paths.cubin, &read(&paths.tmp.join("out.cubin"))?)?;
        write_atomic(&paths.ptx, ptx.as_bytes())?;
        write_atomic(&paths.log, log.as_bytes())?;
        write_atomic(&paths.deps, dep_list.as_bytes())?;
        if let Some(key) = key {
            write_atomic(&paths.key, key.as_bytes())?;
        }
        let _ = std::fs::remove_dir_all(&paths.tmp);
        Ok(JobOutput {
            job: job.clone(),
            log,
            ptx,
            deps,
            ran: true,
        })
    }

    fn cached(&self, job: &Job, args: &[String], paths: &JobPaths) -> Option<JobOutput> {
        let stored = std::fs::read_to_string(&paths.key).ok()?;
        let deps: Vec<PathBuf> = std::fs::read_to_string(&paths.deps)
            .ok()?
            .lines()
            .map(PathBuf::from)
            .collect();
        if self.key(job, args, &deps)? != stored.trim() || !paths.cubin.is_file() {
            return None;
        }
        Some(JobOutput {
            job: job.clone(),
            log: std::fs::read_to_string(&paths.log).ok()?,
            ptx: std::fs::read_to_string(&paths.ptx).ok()?,
            deps,
            ran: false,
        })
    }
}

struct JobPaths {
    cubin: PathBuf,
    ptx: PathBuf,
    log: PathBuf,
    deps: PathBuf,
    key: PathBuf,
    tmp: PathBuf,
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::io(format!("cannot read {}", path.display()), e))
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
    std::fs::write(&tmp, bytes)
        .map_err(|e| Error::io(format!("cannot write {}", tmp.display()), e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(format!("cannot write {}", path.display()), e)
    })
}

/// `path` with a suffix unique to this process and call (`.tmp<pid>.<n>`):
/// a temporary name no other thread or process writes to.
fn unique_sibling(path: &Path) -> PathBuf {
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

/// The device-side preprocessed source that `-keep` leaves (`<stem>.cpp1.ii`).
fn find_preprocessed(dir: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".cpp1.ii"))
        .collect();
    found.sort();
    found.into_iter().next()
}

/// Every file a preprocessed source (`.ii`) was made from, from its line
/// markers (`# 12 "kernels/common.cuh" 2`), as absolute paths (relative ones
/// are taken from `root`), sorted; `<built-in>` and the like are skipped. The
/// same set as nvcc's `-MD` gives, without its second preprocessor pass.
pub fn deps_from_preprocessed(text: &[u8], root: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut last: &[u8] = b"";
    let mut rest = text;
    loop {
        let line_end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        let line = &rest[..line_end];
        if let Some(name) = marker_file(line) {
            if name != last && !name.starts_with(b"<") {
                last = name;
                let name = unescape(name);
                let path = PathBuf::from(name);
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

/// `# 12 "file" 2` (or `#line 12 "file"`) → `file`, still escaped.
fn marker_file(line: &[u8]) -> Option<&[u8]> {
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
            b'"' => return Some(&rest[..i]),
            _ => i += 1,
        }
    }
    None
}

/// Undoes the preprocessor's `\\` and `\"` escapes.
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
fn nvcc_failure(nvcc: &Nvcc, job: &Job, log: &str, code: Option<i32>) -> Error {
    let lower = log.to_ascii_lowercase();
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
        assert_eq!(
            deps,
            vec![
                PathBuf::from("/crate/inc/x.cuh"),
                PathBuf::from("/crate/kernels/common.cuh"),
                PathBuf::from("/crate/kernels/k.cu"),
                PathBuf::from("/opt/a \"q\" \\b.h"),
                PathBuf::from("/usr/include/stdc-predef.h"),
            ]
        );
    }

    #[test]
    fn unsupported_arch_is_recognised() {
        let job = Job {
            source: "k.cu".into(),
            arch: "sm_52".into(),
            name: "k.sm_52".into(),
            args: vec![],
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
            Some(1),
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
            Some(1),
        );
        assert!(err.to_string().contains("k.cu(3): error"), "{err}");
    }
}
