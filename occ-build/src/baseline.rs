//! The committed baseline, `occ.lock`, and the regression gate.
//!
//! The lock records, per kernel × arch, what the gate compares (registers,
//! static shared memory, spills, stack, the best block size, the occupancy
//! there and its limiters) plus what `kernels.rs` and `#[launch_config]` need
//! when no nvcc is available (names, launch bounds, barriers, headroom). It is
//! pretty JSON with `"schema"` first, kernels sorted by symbol, archs sorted,
//! paths relative to the crate: a stable, diff-friendly subset of the
//! manifest.
//!
//! Each build writes its candidate lock to `$OUT_DIR/occ/occ.lock.new` and
//! compares it with the committed lock: lower occupancy, new spills, more
//! spilled bytes, registers up by more than a threshold, or a kernel gone
//! fail the build with a before/after table; improvements and new kernels are
//! one warning each. `cargo occ bless` copies the candidate over the lock;
//! `OCC_BLESS=1 cargo build` writes it directly; neither writes when `CI` is
//! set. The lock is watched (`rerun-if-changed`) once it exists: cargo
//! treats a watched missing file as always stale, so a crate with no lock yet
//! does not watch it, and a lock created by `cargo occ bless` is picked up by
//! the next build that reruns the script.

use crate::env::Env;
use crate::error::{Error, Result};
use crate::manifest::{self, Best, Kernel, KernelArch, LaunchBounds, Manifest};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The schema version of `occ.lock`.
pub const LOCK_SCHEMA: u32 = 1;

/// The default lock file name, next to the crate's `Cargo.toml`.
pub const DEFAULT_LOCK_FILE: &str = "occ.lock";

/// The candidate lock a build leaves in `$OUT_DIR/occ` for `cargo occ bless`.
pub const CANDIDATE_FILE: &str = "occ.lock.new";

/// The gate settings a build leaves in `$OUT_DIR/occ` for `cargo occ check`
/// and `cargo occ bless` (the lock's path and the thresholds).
pub const GATE_FILE: &str = "gate.json";

/// The default register threshold: registers may grow by this many per
/// thread before the gate fails (an occupancy drop fails regardless).
pub const DEFAULT_REGISTER_THRESHOLD: u32 = 8;

/// The committed baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lock {
    /// Schema version ([`LOCK_SCHEMA`]).
    pub schema: u32,
    /// The cargo package.
    pub package: String,
    /// The nvcc version that produced the numbers.
    pub nvcc: String,
    /// Target archs in build order.
    pub archs: Vec<String>,
    /// Kernels, sorted by symbol then source.
    pub kernels: Vec<LockKernel>,
}

/// One kernel in the lock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockKernel {
    /// The symbol (mangled name).
    pub name: String,
    /// The demangled name with parameters.
    pub demangled: String,
    /// The demangled name without parameters.
    pub base_name: String,
    /// The unqualified name without template arguments.
    pub short_name: String,
    /// The Rust identifier of its module in `kernels.rs`.
    pub ident: String,
    /// The `.cu` file, relative to the crate.
    pub source: String,
    /// Per arch.
    pub archs: BTreeMap<String, LockArch>,
}

/// One kernel on one arch in the lock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockArch {
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block, bytes.
    pub static_smem: u32,
    /// Spill stores, bytes.
    pub spill_stores: u32,
    /// Spill loads, bytes.
    pub spill_loads: u32,
    /// Stack frame, bytes.
    pub stack_frame: u32,
    /// Cumulative stack, bytes, when known.
    pub cumulative_stack: Option<u32>,
    /// Named barriers, when ptxas reported them.
    pub barriers: Option<u32>,
    /// Launch bounds from the PTX.
    pub launch_bounds: LaunchBounds,
    /// The `-maxrregcount` the kernel was built with (`Build::max_registers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maxrregcount: Option<u32>,
    /// The best launch (block size, occupancy, limiters, headroom).
    pub best: Best,
}

impl LockArch {
    /// Spilled bytes (stores + loads).
    pub fn spill_bytes(&self) -> u32 {
        self.spill_stores.saturating_add(self.spill_loads)
    }
}

impl Lock {
    /// The lock's view of a manifest.
    pub fn from_manifest(m: &Manifest) -> Lock {
        let mut kernels: Vec<LockKernel> = m
            .kernels
            .iter()
            .map(|k| LockKernel {
                name: k.name.clone(),
                demangled: k.demangled.clone(),
                base_name: k.base_name.clone(),
                short_name: k.short_name.clone(),
                ident: k.ident.clone(),
                source: k.source.clone(),
                archs: k
                    .archs
                    .iter()
                    .map(|(arch, a)| {
                        (
                            arch.clone(),
                            LockArch {
                                registers: a.registers,
                                static_smem: a.static_smem,
                                spill_stores: a.spill_stores,
                                spill_loads: a.spill_loads,
                                stack_frame: a.stack_frame,
                                cumulative_stack: a.cumulative_stack,
                                maxrregcount: a.maxrregcount,
                                barriers: a.barriers,
                                launch_bounds: a.launch_bounds.clone(),
                                best: a.best.clone(),
                            },
                        )
                    })
                    .collect(),
            })
            .collect();
        kernels.sort_by(|a, b| a.name.cmp(&b.name).then(a.source.cmp(&b.source)));
        Lock {
            schema: LOCK_SCHEMA,
            package: m.package.clone(),
            nvcc: m.nvcc.clone(),
            archs: m.archs.clone(),
            kernels,
        }
    }

    /// A manifest made from the lock alone, for builds without nvcc: only
    /// the archs in `archs` (all of the lock's when empty), no device code
    /// (empty `cubin`/`ptx`), no warnings or constant banks, and `nvcc`
    /// set to `lock`. Errors name an arch the lock lacks.
    pub fn to_manifest(&self, archs: &[String], path: &Path) -> Result<Manifest> {
        let archs: Vec<String> = if archs.is_empty() {
            self.archs.clone()
        } else {
            archs.to_vec()
        };
        for arch in &archs {
            if !self.archs.contains(arch) {
                return Err(Error::Corrupt {
                    path: path.to_path_buf(),
                    detail: format!(
                        "has no numbers for {arch} (it records {}); without nvcc the build can only use \
                         recorded archs: build with nvcc and run `cargo occ bless`, or drop {arch}",
                        self.archs.join(", ")
                    ),
                });
            }
        }
        let kernels = self
            .kernels
            .iter()
            .map(|k| Kernel {
                name: k.name.clone(),
                demangled: k.demangled.clone(),
                base_name: k.base_name.clone(),
                short_name: k.short_name.clone(),
                ident: k.ident.clone(),
                source: k.source.clone(),
                archs: k
                    .archs
                    .iter()
                    .filter(|(arch, _)| archs.contains(arch))
                    .map(|(arch, a)| {
                        (
                            arch.clone(),
                            KernelArch {
                                registers: a.registers,
                                barriers: a.barriers,
                                static_smem: a.static_smem,
                                cmem: BTreeMap::new(),
                                stack_frame: a.stack_frame,
                                cumulative_stack: a.cumulative_stack,
                                maxrregcount: a.maxrregcount,
                                spill_stores: a.spill_stores,
                                spill_loads: a.spill_loads,
                                launch_bounds: a.launch_bounds.clone(),
                                warnings: Vec::new(),
                                best: a.best.clone(),
                                cubin: String::new(),
                                ptx: String::new(),
                            },
                        )
                    })
                    .collect(),
            })
            .collect();
        Ok(Manifest {
            schema: manifest::SCHEMA_VERSION,
            package: self.package.clone(),
            nvcc: "lock".into(),
            archs,
            kernels,
        })
    }

    /// The lock's text: pretty JSON, schema first, trailing newline.
    pub fn to_text(&self) -> String {
        manifest::to_json_pretty(self)
    }

    /// Parses a lock, checking its schema.
    pub fn from_text(text: &str, path: &Path) -> Result<Lock> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| Error::Corrupt {
            path: path.to_path_buf(),
            detail: format!(
                "not valid JSON ({e}); restore it from version control, or delete it and run `cargo occ bless`"
            ),
        })?;
        manifest::check_schema(&value, path, LOCK_SCHEMA)?;
        let lock: Lock = serde_json::from_value(value).map_err(|e| Error::Corrupt {
            path: path.to_path_buf(),
            detail: format!(
                "not an occ lock ({e}); restore it from version control, or delete it and run `cargo occ bless`"
            ),
        })?;
        lock.validate().map_err(|detail| Error::Corrupt {
            path: path.to_path_buf(),
            detail: format!(
                "{detail}; restore it from version control, or delete it and run `cargo occ bless`"
            ),
        })?;
        Ok(lock)
    }

    /// Checks what a build without nvcc turns into Rust: kernel identifiers
    /// and arch names become module names in `kernels.rs`.
    fn validate(&self) -> std::result::Result<(), String> {
        for kernel in &self.kernels {
            if !manifest::is_rust_ident(&kernel.ident) {
                return Err(format!(
                    "kernel {:?} has ident {:?}, which is not a Rust identifier",
                    kernel.name, kernel.ident
                ));
            }
            if let Some(arch) = kernel.archs.keys().find(|a| !manifest::is_arch_key(a)) {
                return Err(format!(
                    "kernel {:?} has an arch named {arch:?}, which is not an arch name like sm_90a",
                    kernel.name
                ));
            }
        }
        match self.archs.iter().find(|a| !manifest::is_arch_key(a)) {
            Some(arch) => Err(format!(
                "arch list holds {arch:?}, which is not an arch name like sm_90a"
            )),
            None => Ok(()),
        }
    }

    /// Reads a lock file; `Ok(None)` when it does not exist.
    pub fn read(path: &Path) -> Result<Option<Lock>> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::from_text(&text, path).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(format!("cannot read {}", path.display()), e)),
        }
    }

    fn find(&self, name: &str, source: &str) -> Option<&LockKernel> {
        self.kernels
            .iter()
            .find(|k| k.name == name && k.source == source)
    }
}

/// Register thresholds of the gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Registers per thread may grow by this many before the gate fails.
    pub registers: u32,
    /// Per-kernel overrides, keyed by any name [`Manifest::lookup`] accepts
    /// (symbol, base name, short name, Rust identifier).
    pub kernels: BTreeMap<String, u32>,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            registers: DEFAULT_REGISTER_THRESHOLD,
            kernels: BTreeMap::new(),
        }
    }
}

impl Thresholds {
    /// The register threshold of one kernel.
    pub fn for_kernel(&self, k: &LockKernel) -> u32 {
        [&k.name, &k.base_name, &k.short_name, &k.ident]
            .iter()
            .find_map(|n| self.kernels.get(n.as_str()).copied())
            .unwrap_or(self.registers)
    }
}

/// What a build leaves in `$OUT_DIR/occ/gate.json` for the CLI.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateSettings {
    /// Schema version ([`LOCK_SCHEMA`]).
    pub schema: u32,
    /// The lock file this build compares with (absolute: `$OUT_DIR` is local).
    pub lock_file: PathBuf,
    /// The register thresholds.
    pub thresholds: Thresholds,
}

impl GateSettings {
    /// Reads `gate.json`; `Ok(None)` when missing.
    pub fn read(path: &Path) -> Result<Option<GateSettings>> {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let value: serde_json::Value =
                    serde_json::from_str(&text).map_err(|e| Error::Corrupt {
                        path: path.to_path_buf(),
                        detail: format!("not valid JSON ({e}); rebuild to regenerate it"),
                    })?;
                manifest::check_schema(&value, path, LOCK_SCHEMA)?;
                serde_json::from_value(value)
                    .map(Some)
                    .map_err(|e| Error::Corrupt {
                        path: path.to_path_buf(),
                        detail: format!("not occ gate settings ({e}); rebuild to regenerate it"),
                    })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(format!("cannot read {}", path.display()), e)),
        }
    }
}

/// How one kernel × arch changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Worse: fails the build.
    Regression,
    /// Better: a warning asking to bless.
    Improvement,
    /// Not in the lock: a warning asking to bless.
    New,
    /// Different but neither better nor worse (e.g. registers within the threshold).
    Changed,
}

/// One kernel × arch that differs from the lock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The kernel's base name.
    pub kernel: String,
    /// The kernel's source file.
    pub source: String,
    /// The arch.
    pub arch: String,
    /// The verdict.
    pub verdict: Verdict,
    /// Why, one phrase each (`occupancy 100.0% -> 50.0%`).
    pub reasons: Vec<String>,
    /// The locked numbers (`None` for a new kernel).
    pub before: Option<LockArch>,
    /// The numbers of this build (`None` for a kernel gone).
    pub after: Option<LockArch>,
}

/// The result of comparing a build with the lock.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Diff {
    /// Every kernel × arch that differs, regressions first.
    pub findings: Vec<Finding>,
    /// Archs in the lock that this build did not build (not a regression).
    pub dropped_archs: Vec<String>,
}

impl Diff {
    /// The regressions.
    pub fn regressions(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.verdict == Verdict::Regression)
    }

    /// Whether any kernel regressed.
    pub fn has_regressions(&self) -> bool {
        self.regressions().next().is_some()
    }
}

/// Occupancy as a percentage with one decimal, as every report prints it.
pub fn percent(occupancy: f64) -> String {
    format!("{:.1}%", occupancy * 100.0)
}

/// Compares a candidate (this build) with the committed lock.
pub fn compare(lock: &Lock, candidate: &Lock, thresholds: &Thresholds) -> Diff {
    let mut findings = Vec::new();
    let built: Vec<&String> = candidate.archs.iter().collect();
    for after_k in &candidate.kernels {
        let before_k = lock.find(&after_k.name, &after_k.source);
        for (arch, after) in &after_k.archs {
            let before = before_k.and_then(|k| k.archs.get(arch));
            let Some(before) = before else {
                if lock.archs.contains(arch) || before_k.is_none() {
                    findings.push(Finding {
                        kernel: after_k.base_name.clone(),
                        source: after_k.source.clone(),
                        arch: arch.clone(),
                        verdict: Verdict::New,
                        reasons: vec!["new kernel".into()],
                        before: None,
                        after: Some(after.clone()),
                    });
                } else {
                    findings.push(Finding {
                        kernel: after_k.base_name.clone(),
                        source: after_k.source.clone(),
                        arch: arch.clone(),
                        verdict: Verdict::New,
                        reasons: vec![format!("new arch {arch}")],
                        before: None,
                        after: Some(after.clone()),
                    });
                }
                continue;
            };
            let threshold = thresholds.for_kernel(after_k);
            let (verdict, reasons) = judge(before, after, threshold);
            if let Some(verdict) = verdict {
                findings.push(Finding {
                    kernel: after_k.base_name.clone(),
                    source: after_k.source.clone(),
                    arch: arch.clone(),
                    verdict,
                    reasons,
                    before: Some(before.clone()),
                    after: Some(after.clone()),
                });
            }
        }
    }
    for before_k in &lock.kernels {
        let after_k = candidate.find(&before_k.name, &before_k.source);
        for (arch, before) in &before_k.archs {
            if !built.contains(&arch) {
                continue;
            }
            if after_k.is_some_and(|k| k.archs.contains_key(arch)) {
                continue;
            }
            findings.push(Finding {
                kernel: before_k.base_name.clone(),
                source: before_k.source.clone(),
                arch: arch.clone(),
                verdict: Verdict::Regression,
                reasons: vec!["kernel gone".into()],
                before: Some(before.clone()),
                after: None,
            });
        }
    }
    findings.sort_by(|a, b| {
        a.verdict
            .cmp(&b.verdict)
            .then(a.kernel.cmp(&b.kernel))
            .then(a.source.cmp(&b.source))
            .then(a.arch.cmp(&b.arch))
    });
    let dropped_archs = lock
        .archs
        .iter()
        .filter(|a| !candidate.archs.contains(a))
        .cloned()
        .collect();
    Diff {
        findings,
        dropped_archs,
    }
}

fn judge(before: &LockArch, after: &LockArch, threshold: u32) -> (Option<Verdict>, Vec<String>) {
    let mut worse = Vec::new();
    let mut better = Vec::new();
    let (bo, ao) = (before.best.occupancy, after.best.occupancy);
    // Occupancy is a ratio of small integers; compare resident warps.
    let (bw, aw) = (
        before.best.active_warps_per_sm,
        after.best.active_warps_per_sm,
    );
    if aw < bw || (aw == bw && ao + 1e-9 < bo) {
        worse.push(format!("occupancy {} -> {}", percent(bo), percent(ao)));
    } else if aw > bw || ao > bo + 1e-9 {
        better.push(format!("occupancy {} -> {}", percent(bo), percent(ao)));
    }
    let (bs, as_) = (before.spill_bytes(), after.spill_bytes());
    if bs == 0 && as_ > 0 {
        worse.push(format!("new spills: {as_} bytes"));
    } else if as_ > bs {
        worse.push(format!("spills {bs} -> {as_} bytes"));
    } else if as_ < bs {
        better.push(format!("spills {bs} -> {as_} bytes"));
    }
    let (br, ar) = (before.registers, after.registers);
    if ar > br.saturating_add(threshold) {
        worse.push(format!(
            "registers {br} -> {ar} (+{}, threshold {threshold})",
            ar - br
        ));
    } else if ar < br {
        better.push(format!("registers {br} -> {ar}"));
    }
    if !worse.is_empty() {
        return (Some(Verdict::Regression), worse);
    }
    if !better.is_empty() {
        return (Some(Verdict::Improvement), better);
    }
    if before != after {
        let mut changed = Vec::new();
        if ar != br {
            changed.push(format!(
                "registers {br} -> {ar} (within threshold {threshold})"
            ));
        }
        if before.static_smem != after.static_smem {
            changed.push(format!(
                "static smem {} -> {} bytes",
                before.static_smem, after.static_smem
            ));
        }
        if before.best.block_size != after.best.block_size {
            changed.push(format!(
                "best block {} -> {}",
                before.best.block_size, after.best.block_size
            ));
        }
        if changed.is_empty() {
            changed.push("recorded details changed".into());
        }
        return (Some(Verdict::Changed), changed);
    }
    (None, Vec::new())
}

/// Whether `CI` says this is a CI run (set, non-empty, not `false`/`0`).
pub fn is_ci(env: &Env) -> bool {
    env.var("CI").is_some_and(|v| {
        !matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "" | "0" | "false" | "no" | "off"
        )
    })
}

/// The before/after table of the findings, one block per kernel × arch.
pub fn render_diff(diff: &Diff, verdicts: &[Verdict]) -> String {
    let mut rows: Vec<[String; 8]> = vec![[
        "kernel".into(),
        "arch".into(),
        "".into(),
        "registers".into(),
        "smem".into(),
        "spills".into(),
        "occupancy".into(),
        "best block".into(),
    ]];
    let mut notes = Vec::new();
    let cells = |a: &LockArch| {
        [
            a.registers.to_string(),
            a.static_smem.to_string(),
            a.spill_bytes().to_string(),
            format!(
                "{} ({})",
                percent(a.best.occupancy),
                a.best.limiters.join(" + ")
            ),
            a.best.block_size.to_string(),
        ]
    };
    let dash = || {
        [
            "-".to_string(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
        ]
    };
    for f in diff
        .findings
        .iter()
        .filter(|f| verdicts.contains(&f.verdict))
    {
        let b = f.before.as_ref().map(cells).unwrap_or_else(dash);
        let a = f.after.as_ref().map(cells).unwrap_or_else(dash);
        let [b0, b1, b2, b3, b4] = b;
        let [a0, a1, a2, a3, a4] = a;
        rows.push([
            f.kernel.clone(),
            f.arch.clone(),
            "before".into(),
            b0,
            b1,
            b2,
            b3,
            b4,
        ]);
        rows.push([
            String::new(),
            String::new(),
            "after".into(),
            a0,
            a1,
            a2,
            a3,
            a4,
        ]);
        notes.push(format!(
            "{} on {} ({}): {}",
            f.kernel,
            f.arch,
            f.source,
            f.reasons.join(", ")
        ));
    }
    let mut out = crate::report::align(&rows);
    for note in notes {
        out.push_str("  ");
        out.push_str(&note);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arch(registers: u32, warps: u32, spills: u32) -> LockArch {
        LockArch {
            registers,
            static_smem: 0,
            spill_stores: spills,
            spill_loads: spills,
            stack_frame: 0,
            cumulative_stack: Some(0),
            maxrregcount: None,
            barriers: Some(0),
            launch_bounds: LaunchBounds::default(),
            best: Best {
                block_size: 256,
                active_blocks_per_sm: warps / 8,
                active_warps_per_sm: warps,
                occupancy: f64::from(warps) / 64.0,
                limiters: vec!["registers".into()],
                dynamic_smem_headroom: 0,
            },
        }
    }

    fn lock(kernels: &[(&str, LockArch)]) -> Lock {
        Lock {
            schema: LOCK_SCHEMA,
            package: "p".into(),
            nvcc: "V13.5".into(),
            archs: vec!["sm_80".into()],
            kernels: kernels
                .iter()
                .map(|(name, a)| LockKernel {
                    name: name.to_string(),
                    demangled: name.to_string(),
                    base_name: name.to_string(),
                    short_name: name.to_string(),
                    ident: name.to_string(),
                    source: "k.cu".into(),
                    archs: [("sm_80".to_string(), a.clone())].into_iter().collect(),
                })
                .collect(),
        }
    }

    fn verdicts(d: &Diff) -> Vec<(String, Verdict)> {
        d.findings
            .iter()
            .map(|f| (f.kernel.clone(), f.verdict))
            .collect()
    }

    #[test]
    fn equal_locks_give_no_findings() {
        let l = lock(&[("a", arch(32, 64, 0))]);
        assert!(compare(&l, &l, &Thresholds::default()).findings.is_empty());
    }

    #[test]
    fn occupancy_down_spills_and_gone_kernels_regress() {
        let before = lock(&[
            ("a", arch(32, 64, 0)),
            ("b", arch(32, 64, 0)),
            ("c", arch(32, 64, 4)),
            ("d", arch(32, 64, 0)),
        ]);
        let after = lock(&[
            ("a", arch(64, 32, 0)),
            ("b", arch(32, 64, 8)),
            ("c", arch(32, 64, 8)),
        ]);
        let d = compare(&before, &after, &Thresholds::default());
        let v = verdicts(&d);
        assert_eq!(
            v,
            [
                ("a".to_string(), Verdict::Regression),
                ("b".to_string(), Verdict::Regression),
                ("c".to_string(), Verdict::Regression),
                ("d".to_string(), Verdict::Regression),
            ]
        );
        assert!(d.findings[0].reasons[0].starts_with("occupancy 100.0% -> 50.0%"));
        assert!(d.findings[0].reasons[1].contains("registers 32 -> 64"));
        assert_eq!(d.findings[1].reasons, ["new spills: 16 bytes"]);
        assert_eq!(d.findings[2].reasons, ["spills 8 -> 16 bytes"]);
        assert_eq!(d.findings[3].reasons, ["kernel gone"]);
        let table = render_diff(&d, &[Verdict::Regression]);
        assert!(
            table.contains("before") && table.contains("after"),
            "{table}"
        );
        assert!(table.contains("a on sm_80 (k.cu): occupancy 100.0% -> 50.0%"));
    }

    #[test]
    fn register_threshold_is_global_and_per_kernel() {
        let before = lock(&[("a", arch(32, 64, 0)), ("b", arch(32, 64, 0))]);
        let after = lock(&[("a", arch(40, 64, 0)), ("b", arch(41, 64, 0))]);
        let d = compare(&before, &after, &Thresholds::default());
        assert_eq!(
            verdicts(&d),
            [
                ("b".to_string(), Verdict::Regression),
                ("a".to_string(), Verdict::Changed),
            ]
        );
        let mut t = Thresholds::default();
        t.kernels.insert("a".into(), 0);
        t.kernels.insert("b".into(), 9);
        let d = compare(&before, &after, &t);
        assert_eq!(
            verdicts(&d),
            [
                ("a".to_string(), Verdict::Regression),
                ("b".to_string(), Verdict::Changed),
            ]
        );
    }

    #[test]
    fn improvements_and_new_kernels_are_not_regressions() {
        let before = lock(&[("a", arch(64, 32, 8))]);
        let after = lock(&[("a", arch(32, 64, 0)), ("n", arch(16, 64, 0))]);
        let d = compare(&before, &after, &Thresholds::default());
        assert!(!d.has_regressions());
        assert_eq!(
            verdicts(&d),
            [
                ("a".to_string(), Verdict::Improvement),
                ("n".to_string(), Verdict::New),
            ]
        );
    }

    #[test]
    fn lock_text_round_trips_and_starts_with_the_schema() {
        let l = lock(&[("a", arch(32, 64, 0))]);
        let text = l.to_text();
        assert!(text.starts_with("{\n  \"schema\": 1,"), "{text}");
        assert!(text.ends_with("}\n"));
        assert_eq!(Lock::from_text(&text, Path::new("occ.lock")).ok(), Some(l));
        let err = Lock::from_text("{\"schema\": 99}", Path::new("occ.lock"));
        assert!(err.is_err_and(|e| e.to_string().contains("newer occ")));
    }

    #[test]
    fn ci_is_read_like_ci_systems_set_it() {
        let env = |v: Option<&str>| {
            Env::with_overrides(vec![("CI".into(), v.map(std::ffi::OsString::from))])
        };
        assert!(is_ci(&env(Some("true"))));
        assert!(is_ci(&env(Some("1"))));
        assert!(is_ci(&env(Some("woodpecker"))));
        assert!(!is_ci(&env(Some("false"))));
        assert!(!is_ci(&env(Some("0"))));
        assert!(!is_ci(&env(Some(""))));
        assert!(!is_ci(&env(None)));
    }

    #[test]
    fn a_lock_with_a_bad_ident_is_corrupt_not_a_panic() {
        // Found by the `lock` fuzz target: the ident feeds format_ident! in
        // kernels.rs when a build without nvcc stands on the lock.
        let text = include_str!("../../fuzz/seeds/occ.lock");
        let good = Lock::from_text(text, Path::new("occ.lock")).expect("the seed lock reads");
        let bad = text.replacen("\"ident\": \"saxpy\"", "\"ident\": \"sax)py\"", 1);
        assert_ne!(bad, text, "the seed has a saxpy kernel");
        let err = Lock::from_text(&bad, Path::new("occ.lock"))
            .expect_err("bad ident")
            .to_string();
        assert!(
            err.contains("sax)py") && err.contains("not a Rust identifier"),
            "{err}"
        );
        let bad_arch = text.replacen("\"sm_80\"", "\"sm 80\"", 1);
        assert!(Lock::from_text(&bad_arch, Path::new("occ.lock")).is_err());
        assert!(!good.kernels.is_empty());
    }
}
