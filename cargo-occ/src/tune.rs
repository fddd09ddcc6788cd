//! `cargo occ tune`: the launches worth timing (`--plan`, from the model,
//! no GPU), and `import FILE`, which merges a results file timed on a GPU
//! into occ.lock's `measured` section.

use crate::locate::{unknown_kernel, Locate};
use anyhow::{anyhow, Context};
use occ_model::compiler::analyze::model_of;
use occ_model::model::arch;
use occ_model::model::suggest::{self, CandidateWhy, DynamicSmem, ShapedCandidate, TuneRequest};
use occ_model::render::text_table::{align, percent};
use occ_model::schema::lock::{Lock, OtherCubin};
use occ_model::schema::manifest::{Kernel, Lookup};
use occ_model::schema::measured::{candidates_hash, Results, NOISY};
use std::path::PathBuf;

/// Arguments of `cargo occ tune`.
#[derive(Debug, Clone, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct TuneArgs {
    /// Print the block sizes worth timing per kernel × arch, with the occupancy at each
    /// (block shapes of the same dimensionality for a 2-D or 3-D declared launch).
    #[arg(long)]
    pub plan: bool,
    /// Only this kernel (its symbol, name, short name or Rust identifier).
    #[arg(long)]
    pub kernel: Option<String>,
    /// Only this arch.
    #[arg(long)]
    pub arch: Option<String>,
    /// The site's `max_block_size`.
    #[arg(long, value_name = "N")]
    pub max_block_size: Option<u32>,
    /// The site's `block_multiple`.
    #[arg(long, value_name = "N")]
    pub block_multiple: Option<u32>,
    /// The site's `dynamic_smem` (bytes per block; default: the declared launch's rule, else 0).
    #[arg(long, value_name = "BYTES", conflicts_with = "smem_per_thread")]
    pub dynamic_smem: Option<u32>,
    /// The site's `smem_per_thread` (bytes per thread).
    #[arg(long, value_name = "BYTES")]
    pub smem_per_thread: Option<u32>,
    /// The site's `smem_fixed` (bytes per block on top of `--smem-per-thread`).
    #[arg(long, value_name = "BYTES", requires = "smem_per_thread")]
    pub smem_fixed: Option<u32>,
    #[command(flatten)]
    pub locate: Locate,
    #[command(subcommand)]
    pub action: Option<TuneAction>,
}

/// `cargo occ tune import`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum TuneAction {
    /// Merge a results file (timed on a GPU) into occ.lock's `measured` section.
    Import(ImportArgs),
}

/// Arguments of `cargo occ tune import`.
#[derive(Debug, Clone, clap::Args)]
pub struct ImportArgs {
    /// The results file (occ-tune.json).
    pub file: PathBuf,
    /// Write this lock file (default: the one the build used, normally occ.lock beside Cargo.toml).
    #[arg(long, value_name = "FILE")]
    pub lock: Option<PathBuf>,
    /// Keep measurements of another cubin than the one occ.lock records (refused by default):
    /// builds call them stale and `tuned` sites use the model's block until that cubin is blessed.
    #[arg(long)]
    pub allow_stale: bool,
    #[command(flatten)]
    pub locate: Locate,
}

/// Runs `cargo occ tune`.
pub fn run(args: TuneArgs) -> anyhow::Result<i32> {
    match &args.action {
        Some(TuneAction::Import(import_args)) => import(import_args),
        None if args.plan => plan(&args),
        None => {
            eprintln!(
                "error: `cargo occ tune` needs `--plan` (the block sizes worth timing) or `import FILE` (a results file timed on a GPU)"
            );
            Ok(2)
        }
    }
}

/// The site's request for one kernel × arch: the flags, else the declared
/// launch's dynamic shared memory; a `.reqntid` kernel has one block size.
fn request(args: &TuneArgs, k: &occ_model::schema::manifest::KernelArch) -> TuneRequest {
    let dynamic_smem = match (args.dynamic_smem, args.smem_per_thread) {
        (Some(bytes), _) => DynamicSmem::Fixed(bytes),
        (None, Some(per_thread)) => DynamicSmem::PerThread {
            per_thread,
            fixed: args.smem_fixed.unwrap_or(0),
        },
        (None, None) => k
            .declared
            .as_ref()
            .map_or(DynamicSmem::Fixed(0), |d| d.launch.dynamic_smem),
    };
    let req = TuneRequest {
        dynamic_smem,
        max_block_size: args.max_block_size,
        block_multiple: args.block_multiple,
        ..TuneRequest::default()
    };
    occ_model::model::declared::within_bounds(&k.facts.launch_bounds, req)
}

/// The candidates of one kernel × arch: block shapes of the declared
/// launch's dimensionality (a 32x8 launch: 32 × y), else 1-D block sizes.
fn candidates(
    arch: &arch::Arch,
    k: &occ_model::schema::manifest::KernelArch,
    req: &TuneRequest,
) -> Result<Vec<ShapedCandidate>, occ_model::model::occupancy::OccupancyError> {
    match k.declared.as_ref().map(|d| d.launch.block) {
        Some(block @ [_, y, z]) if y > 1 || z > 1 => {
            suggest::shaped_candidates(arch, &model_of(&k.facts), req, block)
        }
        _ => Ok(suggest::candidates(arch, &model_of(&k.facts), req)?
            .into_iter()
            .map(|c| ShapedCandidate {
                block: [c.block_size, 1, 1],
                candidate: c,
            })
            .collect()),
    }
}

/// A block as the plan prints it, in `dims` dimensions: `256`,
/// `32x8 (256)`, `32x1 (32)`, `8x8x4 (256)`.
fn shape(block: [u32; 3], dims: usize) -> String {
    let threads = block.iter().product::<u32>();
    match (block, dims) {
        ([x, _, _], ..=1) => x.to_string(),
        ([x, y, _], 2) => format!("{x}x{y} ({threads})"),
        ([x, y, z], _) => format!("{x}x{y}x{z} ({threads})"),
    }
}

fn why(w: &[CandidateWhy]) -> String {
    w.iter()
        .map(|w| match w {
            CandidateWhy::PlateauMin => "plateau start",
            CandidateWhy::PlateauMax => "plateau end",
            CandidateWhy::Usual => "usual",
            CandidateWhy::MaxOccupancy => "max occupancy (the model's choice)",
            CandidateWhy::Declared => "declared launch",
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `cargo occ tune --plan`: the block sizes worth timing per kernel × arch,
/// with the occupancy at each. Long because it is the command's whole
/// text, printed in order.
fn plan(args: &TuneArgs) -> anyhow::Result<i32> {
    let found = args.locate.find()?;
    let m = &found.manifest;
    let kernels: Vec<&Kernel> = match &args.kernel {
        Some(q) => match m.lookup(q) {
            Lookup::Found(k) => vec![k],
            _ => return Err(unknown_kernel(m, q)),
        },
        None => m.kernels.iter().collect(),
    };
    let only_arch = match &args.arch {
        Some(a) => Some(arch::canonical_name(a).map_err(|e| anyhow!("{e}"))?),
        None => None,
    };
    let mut printed = 0;
    for kernel in kernels {
        for arch_name in &m.archs {
            if only_arch.as_ref().is_some_and(|a| a != arch_name) {
                continue;
            }
            let Some(k) = kernel.archs.get(arch_name) else {
                continue;
            };
            let target = arch::parse_target(arch_name).map_err(|e| anyhow!("{e}"))?;
            let req = request(args, k);
            let cands = candidates(target.arch, k, &req)
                .map_err(|e| anyhow!("{} on {arch_name}: {e}", kernel.base_name))?;
            let sizes: Vec<u32> = cands.iter().map(|c| c.candidate.block_size).collect();
            println!(
                "{} on {arch_name} ({}): {} candidate{} [{}]",
                kernel.base_name,
                kernel.source,
                cands.len(),
                if cands.len() == 1 { "" } else { "s" },
                candidates_hash(&sizes)
            );
            if cands.is_empty() {
                println!("  no block size can launch with these options");
            } else {
                let mut rows = vec![[
                    "  block".to_string(),
                    "smem".into(),
                    "blocks/SM".into(),
                    "warps/SM".into(),
                    "occupancy".into(),
                    "limited by".into(),
                    "why".into(),
                ]];
                let dims = k.declared.as_ref().map_or(1, |d| {
                    d.launch
                        .block
                        .iter()
                        .rposition(|&n| n > 1)
                        .map_or(1, |i| i + 1)
                });
                for ShapedCandidate {
                    block,
                    candidate: c,
                } in &cands
                {
                    rows.push([
                        format!("  {}", shape(*block, dims)),
                        c.dynamic_smem.to_string(),
                        c.occupancy.active_blocks_per_sm.to_string(),
                        c.occupancy.active_warps_per_sm.to_string(),
                        percent(c.occupancy.occupancy),
                        c.occupancy.binding_limiters().to_string(),
                        why(&c.why),
                    ]);
                }
                print!("{}", align(&rows));
            }
            printed += 1;
        }
    }
    if printed == 0 {
        eprintln!("error: no kernel × arch matches; `cargo occ report` lists them");
        return Ok(2);
    }
    Ok(0)
}

fn import(args: &ImportArgs) -> anyhow::Result<i32> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let results = match Results::from_json(&text, &args.file) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(2);
        }
    };
    for w in import_warnings(&results) {
        eprintln!("warning: {w}");
    }
    let found = args.locate.find()?;
    let (path, lock) = found.lock(args.lock.as_deref())?;
    let Some(mut lock): Option<Lock> = lock else {
        eprintln!(
            "error: {} does not exist yet; run `cargo occ bless` first, then import the measurements",
            path.display()
        );
        return Ok(2);
    };
    let before = lock.to_text();
    let other = if args.allow_stale {
        OtherCubin::Keep
    } else {
        OtherCubin::Refuse
    };
    let done = match lock.import_with(&results, other) {
        Ok(done) => done,
        Err(e) => {
            eprintln!("error: cannot import {}: {e}", args.file.display());
            return Ok(2);
        }
    };
    if !done.other_cubin.is_empty() {
        eprintln!(
            "warning: kept (--allow-stale) {} of another cubin than occ.lock's: {}; builds call {} stale and `tuned` sites use the model's block until that code is built and blessed",
            occ_model::render::units::count(done.other_cubin.len(), "measurement"),
            done.other_cubin.join(", "),
            if done.other_cubin.len() == 1 { "it" } else { "them" }
        );
    }
    let after = lock.to_text();
    if after == before {
        println!("{} is up to date", path.display());
        return Ok(0);
    }
    occ_shell::files::write_lock(&path, &after)?;
    println!(
        "wrote {}: {} measurement{} added, {} replaced (on {}); commit it",
        path.display(),
        done.added,
        if done.added == 1 { "" } else { "s" },
        done.replaced,
        results.device.name
    );
    Ok(0)
}

/// What an import takes as it is but the user should know: measurements of
/// code built for another arch than the device's (an `sm_80` cubin timed on
/// an `sm_86` GPU is baked for every GPU that runs the `sm_80` cubin), and
/// timings whose runs spread more than [`NOISY`].
pub fn import_warnings(results: &Results) -> Vec<String> {
    let device_arch = format!("sm_{}", results.device.compute_capability.replace('.', ""));
    let mut out = Vec::new();
    let other: Vec<String> = results
        .measurements
        .iter()
        .filter(|m| m.arch.trim_end_matches(['a', 'f']) != device_arch)
        .map(|m| format!("{} ({})", m.kernel, m.arch))
        .collect();
    if !other.is_empty() {
        out.push(format!(
            "{} measured on {} ({device_arch}) for another arch: {}; the build bakes them for every GPU that runs that code",
            occ_model::render::units::count(other.len(), "kernel"),
            results.device.name,
            other.join(", ")
        ));
    }
    let noisy: Vec<String> = results
        .measurements
        .iter()
        .flat_map(|m| {
            m.timings.iter().filter(|t| t.noise > NOISY).map(move |t| {
                format!(
                    "{} at {} ({:.0} %)",
                    m.kernel,
                    t.block_size,
                    t.noise * 100.0
                )
            })
        })
        .collect();
    if !noisy.is_empty() {
        out.push(format!(
            "{} spread more than {:.0} % of the median: {}; a busy GPU or too few runs, so the fastest block may be chance (measure again on an idle GPU)",
            occ_model::render::units::count(noisy.len(), "timing"),
            NOISY * 100.0,
            noisy.join(", ")
        ));
    }
    out
}

/// The report's section of measured launches beside the modelled ones:
/// per kernel × arch × bucket, the fastest measured block and its time,
/// the max-occupancy block and its time, the speed-up, and the time at
/// each candidate. Empty when the build has no measurements.
///
/// Long because the table is written top to bottom in the order it reads.
pub fn measured_section(m: &occ_model::schema::manifest::Manifest, gpu: Option<&str>) -> String {
    if m.measured.is_empty() {
        return String::new();
    }
    let other_gpu = |device: &str| gpu.is_some_and(|g| !g.eq_ignore_ascii_case(device.trim()));
    let table = occ_model::render::text_table::measured_table(m).unwrap_or_default();
    let mut times = String::new();
    for r in occ_model::render::measured::measured_rows(m) {
        let each: Vec<String> = r
            .timings
            .iter()
            .map(|(block, t)| format!("{block} {t:.2}"))
            .collect();
        times.push_str(&format!(
            "  {} on {} ({}): {} us\n",
            occ_model::compiler::names::table_name(&r.kernel),
            r.arch,
            r.bucket,
            each.join(", ")
        ));
    }
    // GPUs of one arch differ (SM count, clocks, memory): a measurement
    // taken on another GPU than the one the build is for is said so.
    let mut elsewhere: Vec<String> = m
        .measured
        .iter()
        .filter(|e| other_gpu(&e.device))
        .map(|e| format!("{} on {} (measured on {})", e.kernel, e.arch, e.device))
        .collect();
    elsewhere.dedup();
    let note = match (gpu, elsewhere.is_empty()) {
        (Some(g), false) => format!(
            "note: the GPU this build is for is {g} (--gpu / OCC_GPU), and these were measured on \
             another: {}; timings differ between GPUs of one arch: measure on {g} \
             (example-app --tune style) and run `cargo occ tune import`\n",
            elsewhere.join(", ")
        ),
        _ => String::new(),
    };
    format!(
        "\nMeasured launches (occ.lock, cargo occ tune import):\n{table}\nTime at each candidate (block size, median):\n{times}{note}"
    )
}

#[cfg(test)]
mod import_tests {
    use super::*;
    use occ_model::schema::measured::{Device, Measurement, Timing, RESULTS_SCHEMA};

    #[test]
    fn a_measurement_of_another_gpu_than_the_builds_is_said_so() {
        // GPUs of one arch differ.
        let m = occ_model::schema::manifest::Manifest {
            schema: occ_model::schema::manifest::SCHEMA_VERSION,
            package: "app".into(),
            origin: occ_model::schema::manifest::Origin::Lock,
            nvcc: "13.5".into(),
            archs: vec!["sm_80".into()],
            kernels: Vec::new(),
            device_code: Vec::new(),
            measured: results("sm_80", "8.0", 0.01).to_measured(),
            launches: Vec::new(),
        };
        let plain = measured_section(&m, None);
        assert!(plain.contains("GPU (8.0, 1 SMs)"), "{plain}");
        assert!(!plain.contains("note:"), "{plain}");
        assert!(!measured_section(&m, Some("gpu")).contains("note:"));
        let other = measured_section(&m, Some("NVIDIA A30"));
        assert!(
            other.contains("the GPU this build is for is NVIDIA A30")
                && other.contains("k on sm_80 (measured on GPU)"),
            "{other}"
        );
    }

    fn results(arch: &str, cc: &str, noise: f64) -> Results {
        let timing = |block_size| Timing {
            block_size,
            median_us: 2.0,
            runs: 20,
            noise,
        };
        Results {
            schema: RESULTS_SCHEMA,
            package: "app".into(),
            device: Device {
                name: "GPU".into(),
                compute_capability: cc.into(),
                sm_count: 1,
                clock_khz: None,
                memory_clock_khz: None,
            },
            toolkit: "13.5".into(),
            measurements: vec![Measurement {
                kernel: "k".into(),
                source: "kernels/k.cu".into(),
                arch: arch.into(),
                bucket: "default".into(),
                cubin_hash: String::new(),
                candidates_hash: candidates_hash(&[128, 256]),
                max_occupancy: None,
                timings: vec![timing(128), timing(256)],
            }],
        }
    }

    #[test]
    fn another_arch_and_noisy_runs_are_named() {
        assert!(import_warnings(&results("sm_90", "9.0", 0.01)).is_empty());
        assert!(import_warnings(&results("sm_90a", "9.0", 0.0)).is_empty());
        let w = import_warnings(&results("sm_80", "8.6", 0.01));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("k (sm_80)") && w[0].contains("(sm_86)"),
            "{w:?}"
        );
        let w = import_warnings(&results("sm_90", "9.0", 0.2));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("2 timings") && w[0].contains("k at 128 (20 %)"),
            "{w:?}"
        );
    }
}
