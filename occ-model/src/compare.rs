//! The regression gate's judgement: a build's lock (the candidate) against
//! the committed one. Pure: which kernels got worse, better, new or gone,
//! and the before/after table. The policy (when to fail, bless, or write)
//! lives in occ-build's gate.

use crate::error::{Error, Result};
use crate::lock::{Lock, LockKernel, LOCK_SCHEMA};
use crate::manifest::{self, Resources};
use crate::table::percent;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The gate settings a build leaves in `$OUT_DIR/occ` for `cargo occ check`
/// and `cargo occ bless` (the lock's path and the thresholds).
pub const GATE_FILE: &str = "gate.json";

/// The default register threshold: registers may grow by this many per
/// thread before the gate fails (an occupancy drop fails regardless).
pub const DEFAULT_REGISTER_THRESHOLD: u32 = 8;

/// Register thresholds of the gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Registers per thread may grow by this many before the gate fails.
    pub registers: u32,
    /// Per-kernel overrides, keyed by any name [`crate::manifest::Manifest::lookup`] accepts
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
    /// Parses `gate.json`, checking its schema.
    pub fn from_json(text: &str, path: &Path) -> Result<GateSettings> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| Error::Corrupt {
            path: path.to_path_buf(),
            detail: format!("not valid JSON ({e}); rebuild to regenerate it"),
        })?;
        manifest::check_schema(&value, path, LOCK_SCHEMA)?;
        serde_json::from_value(value).map_err(|e| Error::Corrupt {
            path: path.to_path_buf(),
            detail: format!("not occ gate settings ({e}); rebuild to regenerate it"),
        })
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
    pub before: Option<Resources>,
    /// The numbers of this build (`None` for a kernel gone).
    pub after: Option<Resources>,
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

fn judge(before: &Resources, after: &Resources, threshold: u32) -> (Option<Verdict>, Vec<String>) {
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
    let cells = |a: &Resources| {
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
    let mut out = crate::table::align(&rows);
    for note in notes {
        out.push_str("  ");
        out.push_str(&note);
        out.push('\n');
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::manifest::{Best, Kernel, LaunchBounds};

    pub(crate) fn arch(registers: u32, warps: u32, spills: u32) -> Resources {
        Resources {
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

    pub(crate) fn lock(kernels: &[(&str, Resources)]) -> Lock {
        Lock {
            schema: LOCK_SCHEMA,
            package: "p".into(),
            nvcc: "V13.5".into(),
            archs: vec!["sm_80".into()],
            kernels: kernels
                .iter()
                .map(|(name, a)| Kernel {
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
}
