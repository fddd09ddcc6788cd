//! `cargo occ sweep [KERNEL] [--arch sm_XX] [--manifest FILE] [--json]`:
//! reassemble each kernel's PTX with ptxas at every register cap that changes
//! its occupancy, and print registers, spills, stack and occupancy per cap.

use crate::locate::Locate;
use crate::sweep_run;
use anyhow::{bail, Context};
use occ_build::env::Env;
use occ_build::manifest;
use occ_build::sweep::{KernelSweep, Method, SweepPoint};

/// Arguments of `cargo occ sweep`.
#[derive(Debug, Clone, clap::Args)]
pub struct SweepArgs {
    /// Only this kernel (mangled, demangled, base or short name).
    pub kernel: Option<String>,
    /// Target arch (default: the first arch of the build).
    #[arg(long)]
    pub arch: Option<String>,
    /// Which build to read (default: the newest build of the package here).
    #[command(flatten)]
    pub locate: Locate,
    /// How caps reach ptxas: `auto` (`--maxrregcount`, or `.maxnreg` where
    /// launch bounds override it), `maxrregcount`, `maxnreg`.
    #[arg(long, default_value = "auto", value_parser = parse_method)]
    pub method: Method,
    /// Print JSON (the `occ_build::sweep::Sweep` type) instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Stop a ptxas run that takes longer than this many seconds (the sweep then fails).
    #[arg(long, value_name = "SECS", env = "OCC_PTXAS_TIMEOUT", default_value_t = sweep_run::DEFAULT_PTXAS_TIMEOUT.as_secs_f64(), value_parser = parse_timeout)]
    pub ptxas_timeout: f64,
}

fn parse_timeout(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 && secs <= 1e9 => Ok(secs),
        _ => Err(format!(
            "`{s}` is not a number of seconds above 0; give one such as 60 or 0.5"
        )),
    }
}

fn parse_method(s: &str) -> Result<Method, String> {
    match s {
        "auto" => Ok(Method::Auto),
        "maxrregcount" => Ok(Method::Maxrregcount),
        "maxnreg" => Ok(Method::Maxnreg),
        other => Err(format!(
            "unknown method `{other}`; use auto, maxrregcount or maxnreg"
        )),
    }
}

/// Runs `cargo occ sweep`; returns the exit code.
pub fn run(args: SweepArgs) -> anyhow::Result<i32> {
    let cwd = std::env::current_dir().context("cannot read the current folder")?;
    let located = args.locate.find()?;
    let (manifest, dir) = (located.manifest, located.occ_dir);
    let nvcc = occ_build::toolkit::find_nvcc(&Env::new(), None, Some(&cwd))?;
    let ptxas = sweep_run::ptxas_beside(&nvcc.path);
    if !ptxas.is_file() {
        bail!(
            "no ptxas beside {} (looked for {}); point NVCC or CUDA_HOME at a full CUDA toolkit",
            nvcc.path.display(),
            ptxas.display()
        );
    }
    let jobs = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let result = sweep_run::sweep_manifest(
        &manifest,
        &dir,
        &ptxas,
        args.kernel.as_deref(),
        args.arch.as_deref(),
        args.method,
        sweep_run::Runner {
            jobs,
            timeout: std::time::Duration::from_secs_f64(args.ptxas_timeout),
        },
    )?;
    if args.json {
        print!("{}", manifest::to_json_pretty(&result));
    } else {
        for (i, k) in result.kernels.iter().enumerate() {
            if i > 0 {
                println!();
            }
            print!("{}", table(k));
        }
    }
    Ok(0)
}

/// The table of one kernel's sweep.
pub fn table(k: &KernelSweep) -> String {
    let how = match k.method {
        Method::Maxnreg => "caps as .maxnreg",
        _ => "caps as --maxrregcount",
    };
    let mut out = format!("{} ({}) on {}, {how}\n", k.base_name, k.source, k.arch);
    for note in &k.notes {
        out.push_str(&format!("  note: {note}\n"));
    }
    out.push_str(&format!(
        "  {:>5}  {:>4}  {:>13}  {:>5}  {:>5}  {:>17}  limiter\n",
        "cap", "regs", "spill st/ld", "stack", "block", "occupancy"
    ));
    let row = |p: &SweepPoint| {
        let cap = p.cap.map_or("none".to_string(), |c| c.to_string());
        let occ = format!(
            "{:.1}% ({} warps)",
            p.occupancy * 100.0,
            p.best.active_warps_per_sm
        );
        let mut marks = Vec::new();
        if p.free {
            marks.push("free".to_string());
        }
        if p.first_spill {
            marks.push("first spill".to_string());
        }
        if !p.applied {
            marks.push("cap not applied (overridden)".to_string());
        }
        format!(
            "  {:>5}  {:>4}  {:>13}  {:>5}  {:>5}  {:>17}  {:<14}  {}\n",
            cap,
            p.registers,
            format!("{}/{}", p.spill_stores, p.spill_loads),
            p.stack,
            p.best.block_size,
            occ,
            p.best.limiters.join(", "),
            marks.join(", ")
        )
        .trim_end()
        .to_string()
            + "\n"
    };
    out.push_str(&row(&k.baseline));
    if k.points.is_empty() {
        out.push_str("  (no cap raises occupancy: ");
        out.push_str(if k.baseline.occupancy >= 1.0 {
            "already at 100%)\n"
        } else {
            "registers do not limit it)\n"
        });
    }
    for p in &k.points {
        out.push_str(&row(p));
    }
    out
}
