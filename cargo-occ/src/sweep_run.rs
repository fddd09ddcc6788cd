//! The sweep runner: ptxas at each register cap the model proposes
//! ([`occ_model::model::sweep::caps`]), in parallel threads, parsed into
//! [`occ_model::model::sweep::Sweep`] points. The CLI's only process pool.

use anyhow::{anyhow, Context, Result};
use occ_model::model::sweep::{
    caps, overrides_global_cap, point, with_maxnreg, KernelSweep, Method, Sweep, SweepPoint,
    SWEEP_SCHEMA,
};
use occ_model::schema::manifest::{Kernel, KernelArch, LaunchBounds, Lookup, Manifest};
use occ_model::{compiler::ptx, compiler::ptxas, model::arch};
use occ_shell::process::{Cmd, Programs, Real};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long one ptxas run of the sweep may take before it is stopped
/// (`--ptxas-timeout`, `OCC_PTXAS_TIMEOUT`): ptxas takes well under a
/// second for most kernels and minutes for none that nvcc builds in
/// reasonable time.
pub const DEFAULT_PTXAS_TIMEOUT: Duration = Duration::from_secs(60);

/// The ptxas beside an nvcc (`bin/ptxas`).
pub fn ptxas_beside(nvcc: &Path) -> PathBuf {
    let name = if cfg!(windows) { "ptxas.exe" } else { "ptxas" };
    nvcc.with_file_name(name)
}

/// What one ptxas run produced.
#[derive(Debug, Clone)]
struct Run {
    record: ptxas::KernelRecord,
    diagnostics: Vec<String>,
    overridden: bool,
}

/// A scratch folder for PTX copies, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How the sweep runs ptxas: how many at a time, and how long each may take.
#[derive(Debug, Clone, Copy)]
pub struct Runner {
    /// ptxas runs at a time.
    pub jobs: usize,
    /// The longest one run may take; it is killed then, and the sweep stops.
    pub timeout: Duration,
}

/// Sweeps one kernel on one arch: ptxas on `ptx_path` without a cap and at
/// each of `caps` (highest first), `runner.jobs` runs at a time. A run past
/// `runner.timeout` is killed and stops the sweep with an error naming the
/// kernel, the cap and the ptxas.
pub fn sweep_kernel(
    ptxas_path: &Path,
    ptx_path: &Path,
    kernel: &Kernel,
    arch: &str,
    caps: &[u32],
    method: Method,
    runner: Runner,
) -> Result<KernelSweep> {
    let k = kernel.archs.get(arch).ok_or_else(|| {
        anyhow!(format!(
            "kernel {} has no build for {arch} (it has {}); pick one with --arch",
            kernel.base_name,
            kernel.archs.keys().cloned().collect::<Vec<_>>().join(", ")
        ))
    })?;
    let ptx_text = std::fs::read_to_string(ptx_path).with_context(|| {
        format!(
            "cannot read {} (rebuild the crate to recreate it)",
            ptx_path.display()
        )
    })?;
    let bounds = launch_bounds(&ptx_text, kernel, ptx_path)?;
    let method = method.resolve(&bounds);
    let notes = notes(method, &bounds, k);
    let scratch = Scratch(std::env::temp_dir().join(format!(
        "occ-sweep-{}-{}",
        std::process::id(),
        occ_model::compiler::names::short_hash(&format!(
            "{}{arch}{}",
            kernel.name,
            ptx_path.display()
        ))
    )));
    std::fs::create_dir_all(&scratch.0)
        .with_context(|| format!("cannot create {}", scratch.0.display()))?;
    // Index 0 is the baseline.
    let settings: Vec<Option<u32>> = std::iter::once(None)
        .chain(caps.iter().copied().map(Some))
        .collect();
    let stop = AtomicBool::new(false);
    let job = PtxasJob {
        stop: &stop,
        timeout: runner.timeout,
        ptxas_path,
        ptx_path,
        ptx_text: &ptx_text,
        scratch: &scratch.0,
        kernel,
        arch,
        build_cap: k.facts.maxrregcount,
        method,
    };
    let runs = run_all(&job, &settings, runner.jobs)?;
    let mut points = Vec::with_capacity(runs.len());
    for (cap, run) in settings.iter().zip(runs) {
        points.push(point(
            arch,
            &k.facts,
            *cap,
            &run.record,
            run.overridden,
            run.diagnostics,
        )?);
    }
    let baseline = mark(&mut points);
    Ok(KernelSweep {
        name: kernel.name.clone(),
        base_name: kernel.base_name.clone(),
        source: kernel.source.clone(),
        arch: arch.to_string(),
        method,
        notes,
        baseline,
        points,
    })
}

/// The kernel's launch bounds as its PTX entry states them.
fn launch_bounds(ptx_text: &str, kernel: &Kernel, ptx_path: &Path) -> Result<LaunchBounds> {
    let bounds = ptx::parse_entries(ptx_text)
        .into_iter()
        .find(|e| e.name == kernel.name)
        .map(|e| LaunchBounds {
            max_threads: e.maxntid,
            req_threads: e.reqntid,
            min_blocks_per_sm: e.minnctapersm,
            max_registers: e.maxnreg,
            ..LaunchBounds::default()
        })
        .ok_or_else(|| {
            anyhow!(format!(
                "{} has no entry {}; rebuild the crate so that the manifest and the PTX agree",
                ptx_path.display(),
                kernel.name
            ))
        })?;
    Ok(bounds)
}

/// What the sweep's rows cannot say: a kernel whose launch bounds make
/// ptxas ignore `-maxrregcount` (its caps go into the PTX), and a build
/// cap the uncapped row keeps.
fn notes(method: Method, bounds: &LaunchBounds, k: &KernelArch) -> Vec<String> {
    let mut notes = Vec::new();
    if method == Method::Maxnreg && overrides_global_cap(bounds) {
        let mut what = Vec::new();
        if let Some(n) = bounds.max_registers {
            what.push(format!(".maxnreg {n}"));
        }
        if bounds.max_threads.is_some() || bounds.req_threads.is_some() {
            what.push("__launch_bounds__: .maxntid/.reqntid".to_string());
        }
        if let Some(n) = bounds.min_blocks_per_sm {
            what.push(format!(".minnctapersm {n}"));
        }
        notes.push(format!(
            "ptxas ignores -maxrregcount for this kernel ({}), so the caps were written \
             into the PTX as .maxnreg; Build::max_registers (-maxrregcount) would not change it",
            what.join(", ")
        ));
    }

    if let Some(c) = k.facts.maxrregcount {
        notes.push(format!(
            "the build caps this kernel's file with -maxrregcount {c} (as ptxas applied it); the uncapped row uses it too"
        ));
    }
    notes
}

/// Runs ptxas at each setting, `jobs` at a time; the first failure stops
/// the others. The runs come back in the order of `settings`.
fn run_all(job: &PtxasJob<'_>, settings: &[Option<u32>], jobs: usize) -> Result<Vec<Run>> {
    let stop = job.stop;
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Run>>>> =
        Mutex::new(settings.iter().map(|_| None).collect());
    let workers = jobs.clamp(1, settings.len());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(cap) = settings.get(i) else { break };
                // `None`: stopped because another run failed.
                let Some(run) = job.run(*cap).transpose() else {
                    break;
                };
                if run.is_err() {
                    stop.store(true, Ordering::SeqCst);
                }
                if let Ok(mut slots) = results.lock() {
                    slots[i] = Some(run);
                }
            });
        }
    });
    let slots = results
        .into_inner()
        .map_err(|_| anyhow!("a ptxas worker thread panicked"))?;
    let mut runs = Vec::with_capacity(slots.len());
    let mut unfinished = false;
    for slot in slots {
        match slot {
            Some(run) => runs.push(run?),
            None => unfinished = true,
        }
    }
    if unfinished {
        return Err(anyhow!("a ptxas run did not finish"));
    }
    Ok(runs)
}

/// Takes the baseline (the first point, marked applied) out of `points`
/// and marks the others: free (more occupancy, no spills) and the first
/// that spills more than the baseline.
fn mark(points: &mut Vec<SweepPoint>) -> SweepPoint {
    let mut baseline = points.remove(0);
    baseline.applied = true;
    let mut spilled = false;
    for p in points.iter_mut() {
        p.free = p.spill_bytes == 0 && p.occupancy > baseline.occupancy;
        if !spilled && p.spill_bytes > baseline.spill_bytes {
            p.first_spill = true;
            spilled = true;
        }
    }
    baseline
}

/// Everything a ptxas run of the sweep needs but the cap.
struct PtxasJob<'a> {
    /// Set when a run failed: the others stop.
    stop: &'a AtomicBool,
    /// The longest one run may take.
    timeout: Duration,
    ptxas_path: &'a Path,
    ptx_path: &'a Path,
    ptx_text: &'a str,
    scratch: &'a Path,
    kernel: &'a Kernel,
    arch: &'a str,
    /// The `-maxrregcount` of the build, for the baseline.
    build_cap: Option<u32>,
    method: Method,
}

impl PtxasJob<'_> {
    /// One ptxas run; `Ok(None)` when it was stopped because another failed.
    ///
    /// Long because one ptxas run is followed from start to end in order:
    /// the PTX it reads (rewritten with `.maxnreg` when needed), the process
    /// (through the seam, `Programs::until`), the timeout that stops it, and
    /// its log.
    fn run(&self, cap: Option<u32>) -> Result<Option<Run>> {
        let PtxasJob {
            stop,
            timeout,
            ptxas_path,
            ptx_path,
            ptx_text,
            scratch,
            kernel,
            arch,
            build_cap,
            method,
        } = *self;
        let mut cmd = Cmd::new(ptxas_path);
        cmd.arg(format!("-arch={arch}"))
            .arg("-v")
            .arg("-e")
            .arg(&kernel.name);
        let stem = cap.map_or("base".to_string(), |c| c.to_string());
        let cubin = scratch.join(format!("{stem}.cubin"));
        cmd.arg("-o").arg(&cubin).writes(&cubin);
        let input = match (cap, method) {
            (Some(c), Method::Maxnreg) => {
                let text = with_maxnreg(ptx_text, &kernel.name, c).ok_or_else(|| {
                    anyhow!(format!(
                    "{} has no entry {}; rebuild the crate so that the manifest and the PTX agree",
                    ptx_path.display(),
                    kernel.name
                ))
                })?;
                let path = scratch.join(format!("maxnreg{c}.ptx"));
                std::fs::write(&path, text)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                path
            }
            (Some(c), _) => {
                cmd.arg("--maxrregcount").arg(c.to_string());
                ptx_path.to_path_buf()
            }
            (None, _) => {
                // The baseline is the build as it was, with its file's cap.
                if let Some(c) = build_cap {
                    cmd.arg("--maxrregcount").arg(c.to_string());
                }
                ptx_path.to_path_buf()
            }
        };
        cmd.arg(&input);
        let what = match cap {
            Some(c) => format!("{} for {arch} at cap {c}", kernel.base_name),
            None => format!("{} for {arch} (no cap)", kernel.base_name),
        };
        // Output goes to files, not pipes: a hung ptxas (or a child of it)
        // holding a pipe open cannot block the sweep.
        let log_path = scratch.join(format!("{stem}.log"));
        let log_file = std::fs::File::create(&log_path)
            .with_context(|| format!("cannot create {}", log_path.display()))?;
        let started = Instant::now();
        let mut stopped = false;
        let status = Real
            .until(&cmd, log_file, &mut || {
                stopped = stop.load(Ordering::SeqCst);
                stopped || started.elapsed() >= timeout
            })
            .map_err(|e| {
                anyhow!(format!(
                "cannot run {} ({e}); it should lie beside nvcc: set NVCC or CUDA_HOME to a full CUDA toolkit",
                ptxas_path.display()
            ))
            })?;
        let Some(status) = status else {
            if stopped {
                return Ok(None);
            }
            return Err(anyhow!(format!(
                "ptxas timed out on {what} after {} s and was stopped ({}); raise the limit with \
                 --ptxas-timeout SECS (or OCC_PTXAS_TIMEOUT=SECS), or check that this ptxas works",
                timeout.as_secs_f64(),
                ptxas_path.display()
            )));
        };
        let log = std::fs::read(&log_path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .with_context(|| format!("cannot read {}", log_path.display()))?;
        if !status.success() {
            let lines: Vec<&str> = log
                .lines()
                .filter(|l| !l.starts_with("ptxas info"))
                .take(20)
                .collect();
            return Err(anyhow!(format!(
            "ptxas failed on {what} ({}):\n{}\ncheck that this ptxas is as new as the nvcc that built the PTX",
            ptx_path.display(),
            lines.join("\n")
        )));
        }
        let parsed = ptxas::parse_log(&log).map_err(|e| {
            anyhow!(
                "cannot read the ptxas output for {} ({arch}): {e}; this is an occ bug or a ptxas \
                 version it does not know: please report it with the line above",
                kernel.source
            )
        })?;
        let record = parsed
        .kernels
        .into_iter()
        .find(|r| r.name == kernel.name)
        .ok_or_else(|| {
            anyhow!(format!(
                "ptxas printed no resources for {what}; run `{} -arch={arch} -v -e {} {}` to see why",
                ptxas_path.display(),
                kernel.name,
                input.display()
            ))
        })?;
        let diagnostics: Vec<String> = parsed
            .diagnostics
            .iter()
            .filter(|d| d.severity >= ptxas::Severity::Warning || d.overriding().is_some())
            .map(|d| d.message.clone())
            .collect();
        let overridden = parsed
            .diagnostics
            .iter()
            .any(|d| d.overriding() == Some(ptxas::Overriding::GlobalMaxrregcount));
        Ok(Some(Run {
            record,
            diagnostics,
            overridden,
        }))
    }
}

/// Sweeps the kernels of a manifest (all, or those `filter` finds with
/// [`Manifest::lookup`]) on `arch` (default: the manifest's first arch).
/// `manifest_dir` is the folder of the manifest (`$OUT_DIR/occ`), where the
/// PTX files it names lie.
pub fn sweep_manifest(
    manifest: &Manifest,
    manifest_dir: &Path,
    ptxas_path: &Path,
    filter: Option<&str>,
    arch: Option<&str>,
    method: Method,
    runner: Runner,
) -> Result<Sweep> {
    let kernels: Vec<&Kernel> = match filter {
        None => manifest.kernels.iter().collect(),
        Some(query) => match manifest.lookup(query) {
            Lookup::Found(k) => vec![k],
            Lookup::Ambiguous(candidates) => {
                return Err(anyhow!(format!(
                "kernel `{query}` is ambiguous; it matches {}; give the name of the one you mean",
                occ_model::schema::manifest::describe_candidates(&candidates)
            )))
            }
            Lookup::Unknown(close) => {
                let hint = if close.is_empty() {
                    String::new()
                } else {
                    format!("; did you mean `{}`?", close.join("`, `"))
                };
                return Err(anyhow!(format!(
                    "unknown kernel `{query}` in the manifest of {}{hint}",
                    manifest.package
                )));
            }
        },
    };
    let arch = match arch {
        Some(a) => arch::canonical_name(a).map_err(|e| anyhow!(e.to_string()))?,
        None => manifest
            .archs
            .first()
            .cloned()
            .ok_or_else(|| anyhow!("the manifest lists no arch; rebuild the crate"))?,
    };
    let mut out = Vec::new();
    for kernel in kernels {
        let Some(k) = kernel.archs.get(&arch) else {
            if filter.is_some() {
                return Err(anyhow!(format!(
                    "kernel {} was not built for {arch}; built for {}",
                    kernel.base_name,
                    kernel.archs.keys().cloned().collect::<Vec<_>>().join(", ")
                )));
            }
            continue;
        };
        let Some(ptx) = &k.ptx else {
            return Err(anyhow!(format!(
                "kernel {} has no PTX on {arch}: the build stood on occ.lock (no nvcc); \
                 build with nvcc and run `cargo occ sweep` again",
                kernel.base_name
            )));
        };
        let caps = caps(&arch, &k.facts)?;
        out.push(sweep_kernel(
            ptxas_path,
            &manifest_dir.join(ptx),
            kernel,
            &arch,
            &caps,
            method,
            runner,
        )?);
    }
    Ok(Sweep {
        schema: SWEEP_SCHEMA,
        package: manifest.package.clone(),
        ptxas: ptxas_path.display().to_string(),
        kernels: out,
    })
}
