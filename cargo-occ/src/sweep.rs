//! `cargo occ sweep [KERNEL] [--arch sm_XX] [--manifest FILE] [--json]`:
//! reassemble each kernel's PTX with ptxas at every register cap that changes
//! its occupancy, and print registers, spills, stack and occupancy per cap,
//! and what to write in the source to apply each cap.

use crate::locate::Locate;
use crate::source::{has_bounds, min_blocks_for, written};
use crate::sweep_run;
use anyhow::{bail, Context};
use occ_model::model::arch;
use occ_model::model::sweep::{KernelSweep, Method, SweepPoint};
use occ_model::schema::manifest::{self, LaunchBounds, Manifest};
use occ_shell::Env;

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
    /// Print JSON (the `occ_model::model::sweep::Sweep` type) instead of tables.
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
    let nvcc = occ_shell::toolkit::find_nvcc(&Env::new(), None, Some(&cwd))?;
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
            print!("{}", table(k, &bounds_of(&manifest, k)));
        }
    }
    Ok(0)
}

/// The launch bounds the manifest records for the kernel and arch of `k`
/// (none when the manifest lacks them).
fn bounds_of(m: &Manifest, k: &KernelSweep) -> LaunchBounds {
    m.kernels
        .iter()
        .find(|mk| mk.name == k.name)
        .and_then(|mk| mk.archs.get(&k.arch))
        .map(|a| a.facts.launch_bounds.clone())
        .unwrap_or_default()
}

/// What to write in the source to apply `cap` to a kernel with `bounds`:
/// `__launch_bounds__(T, M)` where some min blocks `M` gives exactly that
/// cap, else `__maxnreg__(cap)`.
fn source_for(a: Option<&arch::Arch>, bounds: &LaunchBounds, cap: u32) -> String {
    let by_bounds = bounds
        .max_threads_per_block()
        .filter(|_| bounds.max_registers.is_none())
        .zip(a)
        .and_then(|(t, a)| min_blocks_for(a, t, cap).map(|m| (t, m)));
    match by_bounds {
        Some((t, m)) => format!("__launch_bounds__({t}, {m})"),
        None => format!("__maxnreg__({cap})"),
    }
}

/// The note under a sweep with caps: how each cap's source text applies.
fn source_note(k: &KernelSweep, bounds: &LaunchBounds) -> String {
    let now = written(bounds).unwrap_or_default();
    if bounds.max_registers.is_some() && !has_bounds(bounds) {
        format!("  in the source: write the cap's __maxnreg__(N) in place of {now}\n")
    } else if has_bounds(bounds) {
        format!(
            "  in the source: __launch_bounds__(T, M) caps registers through its min blocks M; \
             nvcc refuses __maxnreg__ beside __launch_bounds__, so a cap's __maxnreg__(N) \
             replaces {now}, and Build::max_registers (-maxrregcount) would not apply\n"
        )
    } else {
        format!(
            "  in the source: __maxnreg__(N) on the kernel, or Build::max_registers({:?}, N) \
             in build.rs (-maxrregcount, for every kernel in its file)\n",
            k.base_name
        )
    }
}

/// The table of one kernel's sweep; `bounds` are its directives, for the
/// source text of each cap.
pub fn table(k: &KernelSweep, bounds: &LaunchBounds) -> String {
    let a = arch::lookup(&k.arch).ok();
    let how = match k.method {
        Method::Maxnreg => "caps as .maxnreg",
        _ => "caps as --maxrregcount",
    };
    let mut out = format!("{} ({}) on {}, {how}\n", k.base_name, k.source, k.arch);
    for note in &k.notes {
        out.push_str(&format!("  note: {note}\n"));
    }
    out.push_str(&format!(
        "  {:>5}  {:>4}  {:>13}  {:>5}  {:>5}  {:>17}  {:<26}  limiter\n",
        "cap", "regs", "spill st/ld", "stack", "block", "occupancy", "in the source"
    ));
    let row = |p: &SweepPoint| {
        let cap = p.cap.map_or("none".to_string(), |c| c.to_string());
        let occ = format!(
            "{:.1}% ({} warps)",
            p.occupancy * 100.0,
            p.best.as_ref().map_or(0, |b| b.active_warps_per_sm)
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
        let source = match p.cap {
            Some(c) => source_for(a, bounds, c),
            None => written(bounds).unwrap_or_else(|| "-".to_string()),
        };
        format!(
            "  {:>5}  {:>4}  {:>13}  {:>5}  {:>5}  {:>17}  {:<26}  {:<14}  {}\n",
            cap,
            p.registers,
            format!("{}/{}", p.spill_stores, p.spill_loads),
            p.stack,
            p.best
                .as_ref()
                .map_or_else(|| "-".into(), |b| b.block_size.to_string()),
            occ,
            source,
            p.best
                .as_ref()
                .map_or_else(|| manifest::CANNOT_LAUNCH.into(), |b| b.limiters.join(", ")),
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
    if !k.points.is_empty() {
        out.push_str(&source_note(k, bounds));
    }
    out
}
