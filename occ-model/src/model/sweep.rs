//! Register-cap sweeps, the pure part: which caps to try, the PTX rewrite
//! that applies one, and the result types. `cargo occ sweep` runs ptxas on
//! the PTX at each cap (its `sweep_run` module) and reports registers,
//! spills, stack and occupancy at each.
//!
//! - [`caps`][]: the caps worth trying, from the model: for each occupancy
//!   level the tuner ([`declared::best_launch`], the same one the manifest
//!   uses) can reach with fewer registers, the most registers per thread that
//!   reach it. A kernel already at 100% gets none. Nothing here is a fixed list.
//! - the runner (cargo-occ): `ptxas -arch=<arch> -v -e <kernel>` on the PTX
//!   once without a cap and once per cap, in parallel threads, each log
//!   parsed with [`ptxas::parse_log`] and turned into a [`point`].
//! - [`Sweep`][] / [`KernelSweep`][] / [`SweepPoint`][]: the result, as serde
//!   types; `cargo occ sweep --json` prints a [`Sweep`]. To plot it, take each
//!   kernel's `points` and draw `occupancy` and `spill_bytes` against `cap`
//!   (the `baseline` point is the uncapped build).
//!
//! ## How the cap is applied ([`Method`])
//!
//! `-maxrregcount N` (what nvcc's flag and `Build::max_registers` (occ-build)
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
//! so a build with `Build::max_registers` (occ-build) can differ from the sweep's
//! point by a register or a few spill bytes; the manifest of that build has
//! its real numbers.

use crate::error::{Error, Result};
use crate::model::declared;
use crate::schema::manifest::{Best, Facts, LaunchBounds};
use crate::{compiler::ptx, compiler::ptxas};
use serde::{Deserialize, Serialize};

/// The schema version of [`Sweep`] JSON.
pub const SWEEP_SCHEMA: u32 = 1;

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
    /// Schema version ([`SWEEP_SCHEMA`]).
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
    /// Best launch at these registers (block size, occupancy, limiters);
    /// `None` (`null`) when the kernel cannot launch at them.
    pub best: Option<Best>,
    /// Occupancy at the best block size, 0..=1 (the number to plot; 0
    /// when the kernel cannot launch).
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

/// The caps worth trying for a kernel on an arch: for each occupancy level
/// the tuner reaches with fewer registers than `k.registers` (down to
/// [`MIN_CAP`]), the most registers per thread that reach it; highest first.
/// Empty when fewer registers cannot raise occupancy (already 100%, or
/// something else limits it).
pub fn caps(arch: &str, k: &Facts) -> Result<Vec<u32>> {
    let occupancy_at = |registers: u32| -> Result<f64> {
        let trial = Facts {
            registers,
            ..k.clone()
        };
        declared::best_launch(arch, &trial)
            .map(|b| b.map_or(0.0, |b| b.occupancy))
            .map_err(|detail| Error::Occupancy {
                kernel: format!("a kernel at {registers} registers"),
                arch: arch.to_string(),
                detail,
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
/// `.maxnreg` it has. `None` when the PTX has no such entry. The entry is
/// found by [`ptx::entry_span`], which skips comments and strings.
pub fn with_maxnreg(ptx_text: &str, kernel: &str, cap: u32) -> Option<String> {
    let span = ptx::entry_span(ptx_text, kernel)?;
    let (params_end, body) = (span.params_end, span.body);
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

/// The sweep's point for ptxas's record `r` of a kernel whose uncapped
/// resources are `k`, at `cap`: the best launch at those registers.
/// `overridden`: ptxas said an entry-specific limit overrode the cap.
pub fn point(
    arch: &str,
    k: &Facts,
    cap: Option<u32>,
    r: &ptxas::KernelRecord,
    overridden: bool,
    diagnostics: Vec<String>,
) -> Result<SweepPoint> {
    let narrow = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let registers = r.registers.ok_or_else(|| Error::Occupancy {
        kernel: r.name.clone(),
        arch: arch.to_string(),
        detail: "its ptxas log at this cap has no `Used N registers` line".to_string(),
    })?;
    let trial = Facts {
        registers,
        barriers: r.barriers,
        static_smem: narrow(r.static_smem),
        stack_frame: narrow(r.stack_frame),
        cumulative_stack: r.cumulative_stack.map(narrow),
        spill_stores: narrow(r.spill_stores),
        spill_loads: narrow(r.spill_loads),
        ..k.clone()
    };
    let best = declared::best_launch(arch, &trial).map_err(|detail| Error::Occupancy {
        kernel: r.name.clone(),
        arch: arch.to_string(),
        detail,
    })?;
    Ok(SweepPoint {
        cap,
        registers,
        spill_stores: r.spill_stores,
        spill_loads: r.spill_loads,
        spill_bytes: r.spill_stores.saturating_add(r.spill_loads),
        stack: r.stack_size(),
        occupancy: best.as_ref().map_or(0.0, |b| b.occupancy),
        best,
        applied: cap.is_none_or(|c| registers <= c) && !overridden,
        free: false,
        first_spill: false,
        diagnostics,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel_arch(registers: u32) -> Facts {
        Facts {
            registers,
            barriers: Some(0),
            static_smem: 0,
            stack_frame: 0,
            cumulative_stack: None,
            spill_stores: 0,
            spill_loads: 0,
            launch_bounds: LaunchBounds::default(),
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
            declared::best_launch("sm_80", &kernel_arch(r))
                .unwrap()
                .expect("a best launch")
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
        assert_eq!(
            crate::compiler::analyze::maxrregcount(&args(&["-O3"])),
            None
        );
        assert_eq!(
            crate::compiler::analyze::maxrregcount(&args(&["-maxrregcount", "40", "-O3"])),
            Some(40)
        );
        assert_eq!(
            crate::compiler::analyze::maxrregcount(&args(&[
                "--maxrregcount=64",
                "-maxrregcount",
                "32"
            ])),
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

    #[test]
    fn maxnreg_skips_entries_in_comments_and_declarations() {
        // The naive `.find(".entry")` took the first two for `k`.
        let ptx = "// .visible .entry k( .param .u64 a ) { ret; }\n\
                   .extern .entry k(.param .u64 a);\n\
                   /* .entry k() { } */\n\
                   .visible .entry k(\n\t.param .u64 a\n)\n{\n\tret;\n}\n";
        let out = with_maxnreg(ptx, "k", 48).unwrap();
        let entries = ptx::parse_entries(&out);
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].maxnreg, Some(48));
        assert!(
            out.starts_with("// .visible .entry k( .param .u64 a ) { ret; }\n"),
            "{out}"
        );
        assert_eq!(out.matches(".maxnreg").count(), 1, "{out}");
    }
}
