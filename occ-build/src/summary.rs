//! The end of a build: the full table to a stable file, and at most one
//! cargo warning that says what is notable.
//!
//! The table (`cargo occ report`'s) goes to `$OUT_DIR/occ/report.txt` and,
//! when `$OUT_DIR` lies in cargo's target folder, to
//! `<target>/<profile>/occ/<package>/report.txt`, a path that does not
//! change between builds. The warning is printed only when something asks
//! for attention — a spilling kernel — and names the first few of them;
//! a build with nothing notable prints nothing. (The gate's own findings
//! come from [`crate::gate`].)

use crate::cargo::Directives;
use crate::compile::write_atomic;
use crate::error::Result;
use crate::manifest::Manifest;
use crate::table;
use std::path::{Path, PathBuf};

/// The report file's name.
pub const REPORT_FILE: &str = "report.txt";

/// How many spilling kernels the warning names before it counts the rest.
const NAMED: usize = 3;

/// Writes the table and raises the summary warning, if any; returns the
/// stable path of the table.
pub(crate) fn write(
    manifest: &Manifest,
    out_dir: &Path,
    directives: &mut Directives,
) -> Result<PathBuf> {
    let text = format!(
        "occupancy of {} ({} kernels x {} archs, nvcc {})\n\n{}",
        manifest.package,
        manifest.kernels.len(),
        manifest.archs.len(),
        manifest.nvcc,
        table::table(manifest)
    );
    write_atomic(&out_dir.join(REPORT_FILE), text.as_bytes())?;
    let stable = stable_path(out_dir, &manifest.package);
    let shown = match &stable {
        Some(path) => {
            write_atomic(path, text.as_bytes())?;
            path.clone()
        }
        None => out_dir.join(REPORT_FILE),
    };
    if let Some(line) = line(manifest, &shown) {
        directives.warn(line);
    }
    Ok(shown)
}

/// `<target>/<profile>/occ/<package>/report.txt` for an `out_dir` of
/// `<target>/<profile>/build/<package>-<hash>/out/occ`.
fn stable_path(out_dir: &Path, package: &str) -> Option<PathBuf> {
    let build = out_dir.parent()?.parent()?.parent()?;
    if build.file_name()? != "build" || package.is_empty() {
        return None;
    }
    Some(build.parent()?.join("occ").join(package).join(REPORT_FILE))
}

/// The summary warning, when something is notable.
fn line(manifest: &Manifest, report: &Path) -> Option<String> {
    let mut spilling: Vec<(String, Vec<String>, u32)> = Vec::new();
    for k in &manifest.kernels {
        let archs: Vec<String> = k
            .archs
            .iter()
            .filter(|(_, a)| a.spills())
            .map(|(arch, _)| arch.clone())
            .collect();
        if !archs.is_empty() {
            let bytes = k.archs.values().map(|a| a.spill_bytes()).max().unwrap_or(0);
            spilling.push((k.base_name.clone(), archs, bytes));
        }
    }
    if spilling.is_empty() {
        return None;
    }
    let named: Vec<String> = spilling
        .iter()
        .take(NAMED)
        .map(|(name, archs, bytes)| format!("{name} ({bytes} B on {})", archs.join(", ")))
        .collect();
    let more = match spilling.len().saturating_sub(NAMED) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    let lowest = lowest(manifest)
        .map(|(name, arch, occ, limiter)| {
            format!(
                "; lowest occupancy {} ({name} on {arch}: {limiter})",
                table::percent(occ)
            )
        })
        .unwrap_or_default();
    Some(format!(
        "occ: {} kernels x {} archs; {} spill registers: {}{more}{lowest}; table: {}",
        manifest.kernels.len(),
        manifest.archs.len(),
        spilling.len(),
        named.join(", "),
        report.display()
    ))
}

/// The kernel × arch with the lowest occupancy, with its binding limiters.
fn lowest(manifest: &Manifest) -> Option<(String, String, f64, String)> {
    manifest
        .kernels
        .iter()
        .flat_map(|k| k.archs.iter().map(move |(arch, a)| (k, arch, a)))
        .min_by(|x, y| x.2.best.occupancy.total_cmp(&y.2.best.occupancy))
        .map(|(k, arch, a)| {
            (
                k.base_name.clone(),
                arch.clone(),
                a.best.occupancy,
                a.best.limiters.join(" + "),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stable_path_is_beside_cargos_build_folder() {
        let out = Path::new("/w/target/debug/build/app-0123abcd/out/occ");
        assert_eq!(
            stable_path(out, "app"),
            Some(PathBuf::from("/w/target/debug/occ/app/report.txt"))
        );
        assert_eq!(stable_path(Path::new("/tmp/x/out/occ"), "app"), None);
        assert_eq!(stable_path(out, ""), None);
    }
}
