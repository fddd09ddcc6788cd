//! Register-cap sweeps: reassemble a kernel's PTX with ptxas at each register
//! cap that changes its occupancy, and report registers, spills, stack and
//! occupancy at each (`cargo occ sweep`).
//!
//! - [`caps`][]: the caps worth trying, from the model: for each occupancy
//!   level the tuner ([`analyze::best_launch`], the same one the manifest
//!   uses) can reach with fewer registers, the most registers per thread that
//!   reach it. A kernel already at 100% gets none. Nothing here is a fixed list.
//! - [`sweep_kernel`][]: runs `ptxas -arch=<arch> -v -e <kernel>` on the PTX
//!   once without a cap and once per cap, in parallel threads, and parses each
//!   log with [`ptxas::parse_log`].
//! - [`Sweep`][] / [`KernelSweep`][] / [`SweepPoint`][]: the result, as serde
//!   types; `cargo occ sweep --json` prints a [`Sweep`]. To plot it, take each
//!   kernel's `points` and draw `occupancy` and `spill_bytes` against `cap`
//!   (the `baseline` point is the uncapped build).
//!
//! ## How the cap is applied ([`Method`])
//!
//! `-maxrregcount N` (what nvcc's flag and [`crate::Build::max_registers`]
//! do) is a *global* cap: an entry-specific limit in the PTX overrides it.
//! `.maxnreg` (`__maxnreg__`) and `.minnctapersm` override it with an `I2`
//! line (`Overriding global maxrregcount N with entry-specific value M`);
//! `.maxntid` alone (`__launch_bounds__(256)`) overrides it **silently**.
//! [`Method::Auto`] therefore uses `--maxrregcount` only for kernels without
//! those directives, and for the others rewrites the entry's `.maxnreg` in a
//! copy of the PTX ([`Method::Maxnreg`]), which ptxas always honours. Each
//! point also records whether ptxas kept to the cap ([`SweepPoint::applied`]).
//!
//! The sweep reassembles the PTX of the uncapped build. `nvcc -maxrregcount N`
//! also hands the cap to cicc (`-maxreg`), which can change the PTX a little,
//! so a build with [`crate::Build::max_registers`] can differ from the sweep's
//! point by a register or a few spill bytes; the manifest of that build has
//! its real numbers.

use crate::error::{Error, Result};
use crate::manifest::{Best, Kernel, KernelArch, LaunchBounds, Manifest};
use crate::{analyze, ptx, ptxas};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The schema version of [`Sweep`] JSON.
pub const SCHEMA_VERSION: u32 = 1;

/// The lowest cap tried: ptxas raises smaller caps to the ABI minimum anyway.
pub const MIN_CAP: u32 = 16;

/// How a register cap reaches ptxas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// `--maxrregcount` where nothing in the PTX overrides it, else `.maxnreg`.
    #[default]
    Auto,
    /// `ptxas --maxrregcount N`: what nvcc's `-maxrregcount` does.
    Maxrregcount,
    /// `.maxnreg N` written into the entry of a copy of the PTX.
    Maxnreg,
}

impl Method {
    /// The method [`Method::Auto`] picks for a kernel with these directives.
    pub fn resolve(self, bounds: &LaunchBounds) -> Method {
        match self {
            Method::Auto if overrides_global_cap(bounds) => Method::Maxnreg,
            Method::Auto => Method::Maxrregcount,
            other => other,
        }
    }
}

/// Whether a PTX entry with these directives ignores `--maxrregcount`
/// (`.maxnreg`, `.maxntid`, `.reqntid` or `.minnctapersm`).
pub fn overrides_global_cap(bounds: &LaunchBounds) -> bool {
    bounds.max_registers.is_some()
        || bounds.max_threads.is_some()
        || bounds.req_threads.is_some()
        || bounds.min_blocks_per_sm.is_some()
}

/// A sweep of one or more kernels: what `cargo occ sweep --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    /// Schema version ([`SCHEMA_VERSION`]).
    pub schema: u32,
    /// The package of the manifest.
    pub package: String,
    /// The ptxas that ran.
    pub ptxas: String,
    /// One entry per kernel × arch.
    pub kernels: Vec<KernelSweep>,
}

/// One kernel on one arch at every cap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelSweep {
    /// Mangled name.
    pub name: String,
    /// Demangled name without parameters.
    pub base_name: String,
    /// The `.cu` file, relative to the crate.
    pub source: String,
    /// Target arch (`sm_80`).
    pub arch: String,
    /// How the caps were applied ([`Method::Auto`] never appears here).
    pub method: Method,
    /// Why [`Method::Auto`] chose `.maxnreg`, or other notes about the sweep.
    pub notes: Vec<String>,
    /// The uncapped build (`cap` is `None`).
    pub baseline: SweepPoint,
    /// One point per cap, highest cap first.
    pub points: Vec<SweepPoint>,
}

/// ptxas's result at one register cap and the occupancy it gives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// The cap asked for; `None` for the uncapped baseline.
    pub cap: Option<u32>,
    /// Registers per thread ptxas used.
    pub registers: u32,
    /// Spill stores, bytes.
    pub spill_stores: u64,
    /// Spill loads, bytes.
    pub spill_loads: u64,
    /// Spill stores + loads, bytes (the number to plot).
    pub spill_bytes: u64,
    /// Stack per thread, bytes (cumulative stack, else the frame).
    pub stack: u64,
    /// Best launch at these registers (block size, occupancy, limiters).
    pub best: Best,
    /// Occupancy at the best block size, 0..=1 (the number to plot).
    pub occupancy: f64,
    /// Whether ptxas kept to the cap (registers ≤ cap and no override line).
    pub applied: bool,
    /// Higher occupancy than the baseline with zero spills.
    pub free: bool,
    /// The highest cap whose spills exceed the baseline's.
    pub first_spill: bool,
    /// ptxas notes and warnings for the run (`Overriding ...`), verbatim.
    pub diagnostics: Vec<String>,
}

/// The ptxas beside an nvcc (`bin/ptxas`).
pub fn ptxas_beside(nvcc: &Path) -> PathBuf {
    let name = if cfg!(windows) { "ptxas.exe" } else { "ptxas" };
    nvcc.with_file_name(name)
}

/// The caps worth trying for a kernel on an arch: for each occupancy level
/// the tuner reaches with fewer registers than `k.registers` (down to
/// [`MIN_CAP`]), the most registers per thread that reach it; highest first.
/// Empty when fewer registers cannot raise occupancy (already 100%, or
/// something else limits it).
pub fn caps(arch: &str, k: &KernelArch) -> Result<Vec<u32>> {
    let occupancy_at = |registers: u32| -> Result<f64> {
        let trial = KernelArch {
            registers,
            ..k.clone()
        };
        analyze::best_launch(arch, &trial)
            .map(|b| b.occupancy)
            .map_err(|detail| {
                Error::Other(format!(
                    "cannot model {registers} registers on {arch}: {detail}"
                ))
            })
    };
    let mut out = Vec::new();
    let mut above = occupancy_at(k.registers)?;
    for r in (MIN_CAP..k.registers).rev() {
        if above >= 1.0 {
            break;
        }
        let here = occupancy_at(r)?;
        if here > above {
            out.push(r);
        }
        above = here;
    }
    Ok(out)
}

/// Writes `.maxnreg cap` into the entry `kernel` of `ptx`, replacing any
/// `.maxnreg` it has. `None` when the PTX has no such entry.
pub fn with_maxnreg(ptx_text: &str, kernel: &str, cap: u32) -> Option<String> {
    let header = find_entry(ptx_text, kernel)?;
    let body = header + ptx_text[header..].find('{')?;
    let directives = &ptx_text[header..body];
    // The parameter list ends at the last `)` before the body.
    let params_end = header + directives.rfind(')').map_or(0, |i| i + 1);
    let mut kept = String::new();
    for line in ptx_text[params_end..body].split_inclusive('\n') {
        if !line.trim_start().starts_with(".maxnreg") {
            kept.push_str(line);
        }
    }
    let mut out = String::with_capacity(ptx_text.len() + 16);
    out.push_str(&ptx_text[..params_end]);
    if !kept.starts_with('\n') {
        out.push('\n');
    }
    out.push_str(&format!(".maxnreg {cap}"));
    if !kept.starts_with('\n') {
        out.push('\n');
    }
    out.push_str(&kept);
    out.push_str(&ptx_text[body..]);
    Some(out)
}

/// The byte offset of `.entry <kernel>` in a PTX text.
fn find_entry(ptx_text: &str, kernel: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = ptx_text[from..].find(".entry") {
        let at = from + i;
        let rest = ptx_text[at + ".entry".len()..].trim_start();
        if let Some(after) = rest.strip_prefix(kernel) {
            if after
                .chars()
                .next()
                .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
            {
                return Some(at);
            }
        }
        from = at + ".entry".len();
    }
    None
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

/// Sweeps one kernel on one arch: ptxas on `ptx_path` without a cap and at
/// each of `caps` (highest first), `jobs` runs at a time.
pub fn sweep_kernel(
    ptxas_path: &Path,
    ptx_path: &Path,
    kernel: &Kernel,
    arch: &str,
    caps: &[u32],
    method: Method,
    jobs: usize,
) -> Result<KernelSweep> {
    let k = kernel.archs.get(arch).ok_or_else(|| {
        Error::Other(format!(
            "kernel {} has no build for {arch} (it has {}); pick one with --arch",
            kernel.base_name,
            kernel.archs.keys().cloned().collect::<Vec<_>>().join(", ")
        ))
    })?;
    let ptx_text = std::fs::read_to_string(ptx_path).map_err(|e| {
        Error::io(
            format!(
                "cannot read {} (rebuild the crate to recreate it)",
                ptx_path.display()
            ),
            e,
        )
    })?;
    let bounds = ptx::parse_entries(&ptx_text)
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
            Error::Other(format!(
                "{} has no entry {}; rebuild the crate so that the manifest and the PTX agree",
                ptx_path.display(),
                kernel.name
            ))
        })?;
    let method = method.resolve(&bounds);
    let mut notes = Vec::new();
    if method == Method::Maxnreg && overrides_global_cap(&bounds) {
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

    if let Some(c) = k.maxrregcount {
        notes.push(format!(
            "the build gives this kernel's file -maxrregcount {c}; the uncapped row uses it too"
        ));
    }
    let scratch = Scratch(std::env::temp_dir().join(format!(
        "occ-sweep-{}-{}",
        std::process::id(),
        crate::names::short_hash(&format!("{}{arch}{}", kernel.name, ptx_path.display()))
    )));
    std::fs::create_dir_all(&scratch.0)
        .map_err(|e| Error::io(format!("cannot create {}", scratch.0.display()), e))?;

    // Index 0 is the baseline.
    let settings: Vec<Option<u32>> = std::iter::once(None)
        .chain(caps.iter().copied().map(Some))
        .collect();
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Run>>>> =
        Mutex::new(settings.iter().map(|_| None).collect());
    let workers = jobs.clamp(1, settings.len());
    let job = PtxasJob {
        ptxas_path,
        ptx_path,
        ptx_text: &ptx_text,
        scratch: &scratch.0,
        kernel,
        arch,
        build_cap: k.maxrregcount,
        method,
    };
    let job = &job;
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(cap) = settings.get(i) else { break };
                let run = job.run(*cap);
                if let Ok(mut slots) = results.lock() {
                    slots[i] = Some(run);
                }
            });
        }
    });
    let slots = results
        .into_inner()
        .map_err(|_| Error::Other("a ptxas worker thread panicked".into()))?;
    let mut runs = Vec::with_capacity(slots.len());
    for slot in slots {
        match slot {
            Some(run) => runs.push(run?),
            None => return Err(Error::Other("a ptxas run did not finish".into())),
        }
    }

    let mut points = Vec::with_capacity(runs.len());
    for (cap, run) in settings.iter().zip(runs) {
        points.push(point(arch, k, *cap, run)?);
    }
    let mut baseline = points.remove(0);
    baseline.applied = true;
    let mut spilled = false;
    for p in &mut points {
        p.free = p.spill_bytes == 0 && p.occupancy > baseline.occupancy;
        if !spilled && p.spill_bytes > baseline.spill_bytes {
            p.first_spill = true;
            spilled = true;
        }
    }
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

fn point(arch: &str, k: &KernelArch, cap: Option<u32>, run: Run) -> Result<SweepPoint> {
    let r = &run.record;
    let narrow = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let trial = KernelArch {
        registers: r.registers,
        barriers: r.barriers,
        static_smem: narrow(r.static_smem),
        stack_frame: narrow(r.stack_frame),
        cumulative_stack: r.cumulative_stack.map(narrow),
        spill_stores: narrow(r.spill_stores),
        spill_loads: narrow(r.spill_loads),
        ..k.clone()
    };
    let best = analyze::best_launch(arch, &trial).map_err(|detail| Error::Occupancy {
        kernel: r.name.clone(),
        arch: arch.to_string(),
        detail,
    })?;
    Ok(SweepPoint {
        cap,
        registers: r.registers,
        spill_stores: r.spill_stores,
        spill_loads: r.spill_loads,
        spill_bytes: r.spill_stores.saturating_add(r.spill_loads),
        stack: r.stack_size(),
        occupancy: best.occupancy,
        best,
        applied: cap.is_none_or(|c| r.registers <= c) && !run.overridden,
        free: false,
        first_spill: false,
        diagnostics: run.diagnostics,
    })
}

/// Everything a ptxas run of the sweep needs but the cap.
struct PtxasJob<'a> {
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
    fn run(&self, cap: Option<u32>) -> Result<Run> {
        let PtxasJob {
            ptxas_path,
            ptx_path,
            ptx_text,
            scratch,
            kernel,
            arch,
            build_cap,
            method,
        } = *self;
        let mut cmd = Command::new(ptxas_path);
        cmd.stdin(Stdio::null())
            .arg(format!("-arch={arch}"))
            .arg("-v")
            .arg("-e")
            .arg(&kernel.name);
        let out_name = format!(
            "{}.cubin",
            cap.map_or("base".to_string(), |c| c.to_string())
        );
        cmd.arg("-o").arg(scratch.join(out_name));
        let input = match (cap, method) {
            (Some(c), Method::Maxnreg) => {
                let text = with_maxnreg(ptx_text, &kernel.name, c).ok_or_else(|| {
                    Error::Other(format!(
                    "{} has no entry {}; rebuild the crate so that the manifest and the PTX agree",
                    ptx_path.display(),
                    kernel.name
                ))
                })?;
                let path = scratch.join(format!("maxnreg{c}.ptx"));
                std::fs::write(&path, text)
                    .map_err(|e| Error::io(format!("cannot write {}", path.display()), e))?;
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
        let output = cmd.output().map_err(|e| {
        Error::Other(format!(
            "cannot run {} ({e}); it should lie beside nvcc: set NVCC or CUDA_HOME to a full CUDA toolkit",
            ptxas_path.display()
        ))
    })?;
        let mut log = String::from_utf8_lossy(&output.stderr).into_owned();
        log.push_str(&String::from_utf8_lossy(&output.stdout));
        let what = match cap {
            Some(c) => format!("{} for {arch} at cap {c}", kernel.base_name),
            None => format!("{} for {arch}", kernel.base_name),
        };
        if !output.status.success() {
            let lines: Vec<&str> = log
                .lines()
                .filter(|l| !l.starts_with("ptxas info"))
                .take(20)
                .collect();
            return Err(Error::Other(format!(
            "ptxas failed on {what} ({}):\n{}\ncheck that this ptxas is as new as the nvcc that built the PTX",
            ptx_path.display(),
            lines.join("\n")
        )));
        }
        let parsed = ptxas::parse_log(&log).map_err(|e| Error::Parse {
            file: kernel.source.clone(),
            arch: arch.to_string(),
            detail: e.to_string(),
        })?;
        let record = parsed
        .kernels
        .into_iter()
        .find(|r| r.name == kernel.name)
        .ok_or_else(|| {
            Error::Other(format!(
                "ptxas printed no resources for {what}; run `{} -arch={arch} -v -e {} {}` to see why",
                ptxas_path.display(),
                kernel.name,
                input.display()
            ))
        })?;
        let diagnostics: Vec<String> = parsed
            .diagnostics
            .iter()
            .filter(|d| {
                d.severity >= ptxas::Severity::Warning || d.message.starts_with("Overriding")
            })
            .map(|d| d.message.clone())
            .collect();
        let overridden = diagnostics
            .iter()
            .any(|m| m.starts_with("Overriding global maxrregcount"));
        Ok(Run {
            record,
            diagnostics,
            overridden,
        })
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
    jobs: usize,
) -> Result<Sweep> {
    let kernels: Vec<&Kernel> = match filter {
        None => manifest.kernels.iter().collect(),
        Some(query) => match manifest.lookup(query) {
            crate::manifest::Lookup::Found(k) => vec![k],
            crate::manifest::Lookup::Ambiguous(names) => {
                return Err(Error::Other(format!(
                    "kernel `{query}` is ambiguous: it names {}; give the mangled name",
                    names.join(", ")
                )))
            }
            crate::manifest::Lookup::Unknown(close) => {
                let hint = if close.is_empty() {
                    String::new()
                } else {
                    format!("; did you mean `{}`?", close.join("`, `"))
                };
                return Err(Error::Other(format!(
                    "unknown kernel `{query}` in the manifest of {}{hint}",
                    manifest.package
                )));
            }
        },
    };
    let arch =
        match arch {
            Some(a) => crate::arch::canonical_name(a).map_err(|e| Error::Other(e.to_string()))?,
            None => manifest.archs.first().cloned().ok_or_else(|| {
                Error::Other("the manifest lists no arch; rebuild the crate".into())
            })?,
        };
    let mut out = Vec::new();
    for kernel in kernels {
        let Some(k) = kernel.archs.get(&arch) else {
            if filter.is_some() {
                return Err(Error::Other(format!(
                    "kernel {} was not built for {arch}; built for {}",
                    kernel.base_name,
                    kernel.archs.keys().cloned().collect::<Vec<_>>().join(", ")
                )));
            }
            continue;
        };
        let caps = caps(&arch, k)?;
        out.push(sweep_kernel(
            ptxas_path,
            &manifest_dir.join(&k.ptx),
            kernel,
            &arch,
            &caps,
            method,
            jobs,
        )?);
    }
    Ok(Sweep {
        schema: SCHEMA_VERSION,
        package: manifest.package.clone(),
        ptxas: ptxas_path.display().to_string(),
        kernels: out,
    })
}

/// Register caps per source file for [`crate::Build::max_registers`]: each
/// target is a source (its path as the build has it, or its file name) or a
/// kernel that `known` (a manifest of the same sources) places in a file.
/// Returns the caps by source and the kernel targets `known` cannot place
/// (or places in no source of this build).
pub(crate) fn file_caps(
    targets: &[(String, u32)],
    sources: &[String],
    known: Option<&Manifest>,
) -> (std::collections::BTreeMap<String, u32>, Vec<(String, u32)>) {
    let mut caps = std::collections::BTreeMap::new();
    let mut pending = Vec::new();
    for (target, cap) in targets {
        let file = sources
            .iter()
            .find(|s| *s == target || s.rsplit('/').next() == Some(target.as_str()));
        let file = file
            .cloned()
            .or_else(|| match known.map(|m| m.lookup(target)) {
                Some(crate::manifest::Lookup::Found(k)) if sources.contains(&k.source) => {
                    Some(k.source.clone())
                }
                _ => None,
            });
        match file {
            Some(f) => {
                caps.insert(f, *cap);
            }
            None => pending.push((target.clone(), *cap)),
        }
    }
    (caps, pending)
}

/// The error for a [`crate::Build::max_registers`] target that names neither
/// a source nor a kernel of the build.
pub(crate) fn unknown_cap_target(target: &str, manifest: &Manifest) -> Error {
    let hint = match manifest.lookup(target) {
        crate::manifest::Lookup::Ambiguous(names) => {
            format!(
                "it names several kernels ({}); name the file instead",
                names.join(", ")
            )
        }
        crate::manifest::Lookup::Unknown(close) if !close.is_empty() => {
            format!("did you mean `{}`?", close.join("`, `"))
        }
        _ => "give a .cu file of the build or a kernel name".to_string(),
    };
    Error::Other(format!(
        "max_registers(\"{target}\", ..) names no source file and no kernel of this build; {hint}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel_arch(registers: u32) -> KernelArch {
        KernelArch {
            registers,
            barriers: Some(0),
            static_smem: 0,
            cmem: Default::default(),
            stack_frame: 0,
            cumulative_stack: None,
            spill_stores: 0,
            spill_loads: 0,
            launch_bounds: LaunchBounds::default(),
            warnings: vec![],
            best: Best {
                block_size: 0,
                active_blocks_per_sm: 0,
                active_warps_per_sm: 0,
                occupancy: 0.0,
                limiters: vec![],
                dynamic_smem_headroom: 0,
            },
            cubin: String::new(),
            ptx: String::new(),
            maxrregcount: None,
        }
    }

    #[test]
    fn full_occupancy_has_no_caps() {
        assert_eq!(caps("sm_80", &kernel_arch(16)).unwrap(), Vec::<u32>::new());
        assert_eq!(caps("sm_80", &kernel_arch(32)).unwrap(), Vec::<u32>::new());
    }

    #[test]
    fn each_cap_raises_the_model_occupancy() {
        let k = kernel_arch(200);
        let c = caps("sm_80", &k).unwrap();
        assert!(!c.is_empty());
        let occ = |r: u32| {
            analyze::best_launch("sm_80", &kernel_arch(r))
                .unwrap()
                .occupancy
        };
        let mut last = occ(200);
        for &cap in &c {
            assert!(occ(cap) > last, "cap {cap}");
            assert!(
                occ(cap + 1) < occ(cap),
                "cap {cap} is not the highest of its level"
            );
            last = occ(cap);
        }
        assert_eq!(last, 1.0);
        assert_eq!(*c.last().unwrap(), 32);
    }

    #[test]
    fn maxrregcount_is_read_from_nvcc_args() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(analyze::maxrregcount(&args(&["-O3"])), None);
        assert_eq!(
            analyze::maxrregcount(&args(&["-maxrregcount", "40", "-O3"])),
            Some(40)
        );
        assert_eq!(
            analyze::maxrregcount(&args(&["--maxrregcount=64", "-maxrregcount", "32"])),
            Some(32)
        );
    }

    #[test]
    fn maxnreg_is_written_and_replaced() {
        let ptx = ".visible .entry k2(\n\t.param .u64 a\n)\n.maxntid 256, 1, 1\n{\n\tret;\n}\n\
                   .visible .entry k(\n\t.param .u64 a\n)\n.maxnreg 40\n{\n\tret;\n}\n";
        let out = with_maxnreg(ptx, "k", 32).unwrap();
        let entries = ptx::parse_entries(&out);
        assert_eq!(entries[1].name, "k");
        assert_eq!(entries[1].maxnreg, Some(32));
        assert_eq!(entries[0].maxnreg, None);
        assert_eq!(out.matches(".maxnreg").count(), 1);
        let out = with_maxnreg(ptx, "k2", 64).unwrap();
        let entries = ptx::parse_entries(&out);
        assert_eq!(entries[0].maxnreg, Some(64));
        assert_eq!(entries[0].maxntid, Some([256, 1, 1]));
        assert_eq!(entries[1].maxnreg, Some(40));
        assert!(with_maxnreg(ptx, "k3", 1).is_none());
    }
}
