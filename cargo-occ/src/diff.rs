//! `cargo occ diff OLD NEW`: two builds compared as the gate compares a
//! build with its lock ([`occ_model::compare`]), each side a lock
//! (`occ.lock`, a build's `occ.lock.new`), a build's `manifest.json`, a
//! build's `$OUT_DIR/occ` folder (its manifest), or the folder a build's
//! messages name, `target/<profile>/occ/<package>/` (the newest build of the
//! package behind it, [`crate::locate::behind_report`]). OLD is the
//! baseline. Each side is named as given, relative to the current folder
//! when it is below it, never by an absolute path ([`shown`]).

use crate::locate;
use anyhow::{anyhow, Context};
use occ_model::compare::{self, Thresholds, Verdict};
use occ_model::schema::lock::Lock;
use occ_model::schema::manifest::{self, Manifest};
use std::path::{Path, PathBuf};

/// Output formats of `cargo occ diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The before/after table, one header and one table per cause.
    Table,
    /// Markdown for a pull-request comment: one line per kind, the tables collapsed.
    Markdown,
    /// Every finding as JSON (`findings`, `dropped_archs`).
    Json,
}

/// Arguments of `cargo occ diff`.
#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "OLD and NEW: an occ.lock, a build's occ.lock.new or manifest.json, a build's $OUT_DIR/occ folder, or the folder its warnings name (target/debug/occ/<package>/).\n\nExit status:\n  0  NEW has no regression against OLD\n  1  NEW regressed: occupancy down, new or more spills, registers up past the threshold, a kernel gone\n  2  usage or input error: a file that cannot be read or is neither a lock nor a manifest, or OLD and NEW of two packages"
)]
pub struct DiffArgs {
    /// The baseline: a lock, a manifest or a build's occ folder (or the folder its warnings name, target/debug/occ/PACKAGE).
    pub old: PathBuf,
    /// The build to judge: a lock, a manifest or a build's occ folder (or the folder its warnings name, target/debug/occ/PACKAGE).
    pub new: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Registers per thread a kernel may grow by before it is a regression.
    #[arg(long, value_name = "N", default_value_t = compare::DEFAULT_REGISTER_THRESHOLD)]
    pub register_threshold: u32,
    /// Warn when NEW leaves a kernel N or fewer registers from an occupancy cliff (0: never).
    #[arg(long, value_name = "N", default_value_t = compare::DEFAULT_CLIFF_MARGIN)]
    pub cliff_margin: u32,
}

/// Prints the comparison; returns the exit status.
pub fn run(args: DiffArgs) -> anyhow::Result<i32> {
    let sides = read(&args.old).and_then(|old| Ok((old, read(&args.new)?)));
    let (old, new) = match sides {
        Ok(sides) => sides,
        Err(e) => {
            eprintln!("error: {e:#}");
            return Ok(2);
        }
    };
    // As the build's gate: another package's kernels are not this one's
    // gone and new kernels.
    if !old.package.is_empty() && !new.package.is_empty() && old.package != new.package {
        eprintln!(
            "error: {} is of package `{}` and {} of package `{}`; compare two builds or locks of one package",
            shown(&args.old),
            old.package,
            shown(&args.new),
            new.package
        );
        return Ok(2);
    }
    let thresholds = Thresholds {
        registers: args.register_threshold,
        cliff_margin: args.cliff_margin,
        ..Thresholds::default()
    };
    let diff = compare::compare(&old, &new, &thresholds);
    let (old_name, new_name) = (shown(&args.old), shown(&args.new));
    match args.format {
        Format::Table if diff.findings.is_empty() && diff.dropped_archs.is_empty() => {
            if !diff.settings.is_empty() {
                println!("changed: {}", compare::said(&diff.settings));
            }
            println!(
                "no difference in numbers: {}, the same in {} and {}",
                occ_model::render::text_table::count(new.kernels.len(), "kernel"),
                old_name,
                new_name
            )
        }
        Format::Table => {
            print!(
                "{}",
                occ_model::render::text_table::render_diff(&diff, &Verdict::ALL)
            );
            if !diff.dropped_archs.is_empty() {
                println!(
                    "archs in {old_name} only: {}",
                    diff.dropped_archs.join(", ")
                );
            }
        }
        Format::Markdown => {
            let mut md = format!(
                "### CUDA occupancy: `{}` against `{}`\n",
                new_name, old_name
            );
            if diff.findings.is_empty() {
                md.push_str("\nno difference\n");
            } else {
                md.push_str(&occ_model::render::markdown::changes(
                    &old_name,
                    &diff,
                    occ_model::render::markdown::MARKDOWN_BUDGET,
                ));
            }
            print!("{md}");
        }
        Format::Json => print!("{}", manifest::to_json_pretty(&diff)),
    }
    Ok(if diff.has_regressions() { 1 } else { 0 })
}

/// A side as the output names it: the path as given when relative, else
/// relative to the current folder when below it, else its last components
/// from the build folder (`build/app-<hash>/out/occ`) or its file name
/// (`occ.lock`): no absolute path, which would differ on every machine.
pub(crate) fn shown(path: &Path) -> String {
    if path.is_relative() {
        return path.display().to_string();
    }
    if let Some(below) = std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(Path::to_path_buf))
    {
        return if below.as_os_str().is_empty() {
            ".".into()
        } else {
            below.display().to_string()
        };
    }
    let parts: Vec<_> = path.components().collect();
    let n = parts.len();
    // From `build/` of a cargo build folder, from the profile of the
    // folder a build's messages name (`debug/occ/app`), else the last
    // component.
    let from = parts
        .iter()
        .rposition(|c| c.as_os_str() == "build")
        .filter(|&i| n > i + 1)
        .or_else(|| (n >= 3 && parts[n - 2].as_os_str() == "occ").then(|| n - 3))
        .unwrap_or(n.saturating_sub(1));
    parts[from..]
        .iter()
        .collect::<PathBuf>()
        .display()
        .to_string()
}

/// One side as a lock: a lock file as it is, a manifest (or a build
/// folder's, or that of the build behind the folder its messages name) as
/// the lock it would bless.
fn read(path: &Path) -> anyhow::Result<Lock> {
    let name = shown(path);
    let file = if path.is_dir() && path.join(manifest::FILE_NAME).is_file() {
        path.join(manifest::FILE_NAME)
    } else if let Some(build) = locate::behind_report(path) {
        build.join(manifest::FILE_NAME)
    } else if path.is_dir() || path.file_name().is_some_and(|n| n == "report.txt") {
        return Err(anyhow!(
            "cannot read {name}: it holds no {} and names no build of its package; give a \
             build's $OUT_DIR/occ folder, the folder its warnings name \
             (target/debug/occ/<package>/), a manifest.json or a lock",
            manifest::FILE_NAME
        ));
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&file).with_context(|| format!("cannot read {name}"))?;
    let value: serde_json::Value = serde_json::from_str(text.trim_start_matches('\u{feff}'))
        .map_err(|e| anyhow!("{name} is not JSON ({e}); give an occ.lock or a manifest.json"))?;
    if value.get("origin").is_some() {
        let m = Manifest::from_json(&text, Path::new(&name))?;
        Ok(Lock::from_manifest(&m))
    } else {
        Ok(Lock::from_text(&text, Path::new(&name))?)
    }
}

#[cfg(test)]
mod tests {
    use super::shown;
    use std::path::Path;

    #[test]
    fn a_side_outside_the_current_folder_is_named_by_its_last_components() {
        let cases = [
            ("/elsewhere/target/debug/occ/app", "debug/occ/app"),
            (
                "/elsewhere/target/debug/build/app-0123/out/occ",
                "build/app-0123/out/occ",
            ),
            (
                "/elsewhere/target/debug/build/app-0123/out/occ/manifest.json",
                "build/app-0123/out/occ/manifest.json",
            ),
            ("/elsewhere/occ.lock", "occ.lock"),
            ("crate/occ.lock", "crate/occ.lock"),
        ];
        for (path, want) in cases {
            assert_eq!(shown(Path::new(path)), want, "{path}");
        }
    }
}
