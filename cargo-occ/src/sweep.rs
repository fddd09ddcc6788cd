//! `cargo occ sweep [KERNEL] [--arch sm_XX] [--manifest FILE] [--json]`:
//! reassemble each kernel's PTX with ptxas at every register cap that changes
//! its occupancy, and print registers, spills, stack and occupancy per cap.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use occ_build::env::Env;
use occ_build::manifest::{self, Manifest};
use occ_build::sweep::{self, KernelSweep, Method, SweepPoint};

/// Arguments of `cargo occ sweep`.
#[derive(Debug, Clone, clap::Args)]
pub struct SweepArgs {
    /// Only this kernel (mangled, demangled, base or short name).
    pub kernel: Option<String>,
    /// Target arch (default: the first arch of the build).
    #[arg(long)]
    pub arch: Option<String>,
    /// The manifest to read (default: the newest build of the package in the
    /// current folder, `target/*/build/<pkg>-*/out/occ/manifest.json`).
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// How caps reach ptxas: `auto` (`--maxrregcount`, or `.maxnreg` where
    /// launch bounds override it), `maxrregcount`, `maxnreg`.
    #[arg(long, default_value = "auto", value_parser = parse_method)]
    pub method: Method,
    /// Print JSON (the `occ_build::sweep::Sweep` type) instead of tables.
    #[arg(long)]
    pub json: bool,
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
    let manifest_path = match &args.manifest {
        Some(p) if p.is_file() => p.clone(),
        Some(p) => bail!(
            "no manifest at {}; pass the manifest.json of a build ($OUT_DIR/occ/manifest.json), or leave out --manifest to use the newest build of the package here",
            p.display()
        ),
        None => find_manifest(&cwd)?,
    };
    let manifest = Manifest::read(&manifest_path)?;
    let dir = manifest_path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let nvcc = occ_build::toolkit::find_nvcc(&Env::new(), None, Some(&cwd))?;
    let ptxas = sweep::ptxas_beside(&nvcc.path);
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
    let result = sweep::sweep_manifest(
        &manifest,
        &dir,
        &ptxas,
        args.kernel.as_deref(),
        args.arch.as_deref(),
        args.method,
        jobs,
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

/// The newest `manifest.json` of the package in `dir` (or above it) under the
/// cargo target folder.
fn find_manifest(dir: &Path) -> anyhow::Result<PathBuf> {
    let (crate_dir, package) = package_of(dir)?;
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(t) => PathBuf::from(t),
        None => crate_dir
            .ancestors()
            .map(|d| d.join("target"))
            .find(|t| t.is_dir())
            .with_context(|| {
                format!(
                    "no target folder in {} or above it; run `cargo build` first, or pass --manifest",
                    crate_dir.display()
                )
            })?,
    };
    let mut best: Option<(std::time::SystemTime, PathBuf)> = None;
    for pattern in [
        format!(
            "{}/*/build/{package}-*/out/occ/manifest.json",
            target.display()
        ),
        format!(
            "{}/*/*/build/{package}-*/out/occ/manifest.json",
            target.display()
        ),
    ] {
        for path in glob_paths(&pattern) {
            // `<pkg>-<16 hex digits>`, not another package with this prefix.
            let hash_ok = path
                .ancestors()
                .nth(3)
                .and_then(|d| d.file_name())
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix(&format!("{package}-")))
                .is_some_and(|h| h.chars().all(|c| c.is_ascii_hexdigit()));
            if !hash_ok {
                continue;
            }
            let Ok(modified) = std::fs::metadata(&path).and_then(|m| m.modified()) else {
                continue;
            };
            if best.as_ref().is_none_or(|(t, _)| modified > *t) {
                best = Some((modified, path));
            }
        }
    }
    best.map(|(_, p)| p).with_context(|| {
        format!(
            "no occ manifest for package {package} under {}; run `cargo build` in {} first, or pass --manifest",
            target.display(),
            crate_dir.display()
        )
    })
}

fn glob_paths(pattern: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    // A pattern with a bad character matches nothing.
    if let Ok(paths) = glob::glob(pattern) {
        out.extend(paths.filter_map(Result::ok));
    }
    out
}

/// The folder of the nearest `Cargo.toml` with a `[package]`, and its name.
fn package_of(dir: &Path) -> anyhow::Result<(PathBuf, String)> {
    for d in dir.ancestors() {
        let toml = d.join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&toml) else {
            continue;
        };
        if let Some(name) = package_name(&text) {
            return Ok((d.to_path_buf(), name));
        }
    }
    bail!(
        "no Cargo.toml with a [package] in {} or above it; run this in a crate that builds kernels with occ-build, or pass --manifest",
        dir.display()
    )
}

/// `name = "..."` of the `[package]` table.
fn package_name(toml: &str) -> Option<String> {
    let mut in_package = false;
    for line in toml.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_package = line == "[package]";
            continue;
        }
        if in_package {
            if let Some(rest) = line.strip_prefix("name") {
                let value = rest.trim_start().strip_prefix('=')?.trim();
                return Some(value.trim_matches('"').trim_matches('\'').to_string());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_name_is_read_from_the_package_table() {
        let toml =
            "[workspace]\nname = \"no\"\n[package]\nname = \"example-app\"\nversion = \"0.1.0\"\n";
        assert_eq!(package_name(toml).as_deref(), Some("example-app"));
        assert_eq!(package_name("[workspace]\nmembers = []\n"), None);
    }
}
