//! Finding the latest build's `$OUT_DIR/occ` of a package: the newest
//! `target/**/build/<package>-<hash>/out/occ/manifest.json`, with the target
//! folder and packages from `cargo metadata`; what the last build's
//! `status.json` says about its numbers (an unfinished build, a failure at
//! the gate) goes to stderr.

use anyhow::{bail, Context, Result};
use occ_model::compare::{GateSettings, GATE_FILE};
use occ_model::schema::lock::Lock;
use occ_model::schema::manifest::Manifest;
use occ_shell::build_state::{self, BuildState};
use occ_shell::files;
use occ_shell::process::{Cmd, Programs, Real};
use std::path::{Path, PathBuf};

/// Where to find the manifest (shared by report, check, bless, explain).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Locate {
    /// Read this manifest.json instead of the latest build's.
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,
    /// The Cargo.toml of the package (default: the package in the current folder).
    #[arg(long, value_name = "PATH")]
    pub manifest_path: Option<PathBuf>,
    /// The package whose build to read (default: the one in the current folder).
    #[arg(short, long, value_name = "NAME")]
    pub package: Option<String>,
}

/// A located build.
#[derive(Debug)]
pub struct Located {
    /// `$OUT_DIR/occ`.
    pub occ_dir: PathBuf,
    /// The manifest.
    pub manifest: Manifest,
    /// The lock this build compares with, from `gate.json` (if the build wrote one).
    pub gate: Option<GateSettings>,
    /// How the last build ended, as its `status.json` says (`None`: an
    /// occ-build that writes none, or a folder written by hand).
    pub state: Option<BuildState>,
}

impl Located {
    /// The committed lock (`None` when there is none yet).
    pub fn lock(&self, explicit: Option<&Path>) -> Result<(PathBuf, Option<Lock>)> {
        let path = match (explicit, &self.gate) {
            (Some(p), _) => p.to_path_buf(),
            (None, Some(g)) => g.lock_file.clone(),
            (None, None) => bail!(
                "{} has no {GATE_FILE}, so the lock file is unknown; pass --lock FILE, or rebuild with this occ-build",
                self.occ_dir.display()
            ),
        };
        let lock = files::read_lock(&path)?;
        Ok((path, lock))
    }

    /// Says on stderr what the last build's state means for its numbers:
    /// nothing for a finished build.
    pub fn say_state(&self) {
        let package = &self.manifest.package;
        match self.state {
            Some(BuildState::GateFailed) => eprintln!(
                "note: the last build of {package} failed at occ's gate (a regression against the lock); \
                 the numbers below are current, that build's own: change the kernel, or accept them \
                 with `cargo occ bless`"
            ),
            // An occ-build that does not mark the gate's failure leaves
            // `running` for it too.
            Some(BuildState::Running) => eprintln!(
                "warning: the last build of {package} did not finish. If it failed at occ's gate (a \
                 regression against the lock), the numbers below are its own: change the kernel, or \
                 accept them with `cargo occ bless`; if it failed before (a compile error) or was \
                 stopped, they may be an earlier build's: fix the build and run `cargo build` again"
            ),
            Some(BuildState::Finished) | None => {}
        }
    }
}

impl Locate {
    /// Finds and reads the build, and says what its state means
    /// ([`Located::say_state`]).
    pub fn find(&self) -> Result<Located> {
        let found = self.read()?;
        found.say_state();
        Ok(found)
    }

    /// Finds and reads the build, saying nothing.
    pub fn read(&self) -> Result<Located> {
        let occ_dir = match &self.manifest {
            Some(file) => file
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from(".")),
            None => self.newest_occ_dir()?,
        };
        let manifest_file = self
            .manifest
            .clone()
            .unwrap_or_else(|| occ_dir.join(occ_model::schema::manifest::FILE_NAME));
        let manifest = files::read_manifest(&manifest_file)?;
        let state = build_state::last_build(&occ_dir);
        let gate = files::read_settings(&occ_dir.join(GATE_FILE))?;
        Ok(Located {
            occ_dir,
            manifest,
            gate,
            state,
        })
    }

    /// Long because each place a build may have left its folder is tried in order,
    /// with the reason kept for the error.
    fn newest_occ_dir(&self) -> Result<PathBuf> {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Cmd::new(cargo);
        cmd.args(["metadata", "--no-deps", "--format-version", "1"]);
        if let Some(path) = &self.manifest_path {
            cmd.arg("--manifest-path").arg(path);
        }
        let out = Real
            .output(&cmd)
            .context("cannot run `cargo metadata`; is cargo on PATH?")?;
        if !out.status.success() {
            bail!(
                "`cargo metadata` failed: {}; run from a cargo package, or pass --manifest-path or --manifest",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let meta: serde_json::Value =
            serde_json::from_slice(&out.stdout).context("cannot read `cargo metadata` output")?;
        let target = meta["target_directory"]
            .as_str()
            .map(PathBuf::from)
            .context("`cargo metadata` gave no target_directory")?;
        let packages: Vec<(String, PathBuf)> = meta["packages"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|p| {
                        let name = p["name"].as_str()?.to_string();
                        let dir = Path::new(p["manifest_path"].as_str()?)
                            .parent()?
                            .to_path_buf();
                        Some((name, dir))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let names: Vec<String> = if let Some(p) = &self.package {
            if !packages.iter().any(|(n, _)| n == p) {
                let known: Vec<&str> = packages.iter().map(|(n, _)| n.as_str()).collect();
                bail!(
                    "no package `{p}` here (packages: {}); check --package",
                    known.join(", ")
                );
            }
            vec![p.clone()]
        } else {
            let here = match &self.manifest_path {
                Some(path) => std::fs::canonicalize(path)
                    .ok()
                    .and_then(|p| p.parent().map(Path::to_path_buf))
                    .unwrap_or_default(),
                None => std::env::current_dir().unwrap_or_default(),
            };
            let mut containing: Vec<&(String, PathBuf)> = packages
                .iter()
                .filter(|(_, dir)| here.starts_with(dir))
                .collect();
            containing.sort_by_key(|(_, dir)| std::cmp::Reverse(dir.components().count()));
            match containing.first() {
                Some((name, _)) => vec![name.clone()],
                None => packages.iter().map(|(n, _)| n.clone()).collect(),
            }
        };
        let mut found: Vec<(std::time::SystemTime, String, PathBuf)> = Vec::new();
        for build in build_dirs(&target) {
            let Ok(entries) = std::fs::read_dir(&build) else {
                continue;
            };
            for entry in entries.flatten() {
                let dir_name = entry.file_name().to_string_lossy().into_owned();
                let Some(pkg) = names.iter().find(|n| is_build_dir_of(&dir_name, n)) else {
                    continue;
                };
                let occ = entry.path().join("out").join("occ");
                let manifest = occ.join(occ_model::schema::manifest::FILE_NAME);
                if let Ok(time) = std::fs::metadata(&manifest).and_then(|m| m.modified()) {
                    found.push((time, pkg.clone(), occ));
                }
            }
        }
        found.sort_by_key(|f| std::cmp::Reverse(f.0));
        let Some((_, pkg, newest)) = found.first() else {
            bail!(
                "no occ build of {} under {}; run `cargo build` first, or pass --manifest FILE",
                names.join(", "),
                target.display()
            );
        };
        let others: Vec<&String> = found.iter().map(|f| &f.1).filter(|p| *p != pkg).collect();
        if self.package.is_none() && !others.is_empty() {
            let mut all: Vec<&String> = found.iter().map(|f| &f.1).collect();
            all.sort();
            all.dedup();
            bail!(
                "several packages have occ builds ({}); pick one with --package",
                all.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        Ok(newest.clone())
    }
}

/// The build folder (`$OUT_DIR/occ`) behind the folder a build's warnings
/// and errors name, `<target>/<profile>/occ/<package>/` (or its
/// `report.txt`): the newest `<target>/<profile>/build/<package>-<hash>/out/occ`
/// that holds a manifest. `None` when `named` is not such a folder or no
/// build of the package is there.
pub fn behind_report(named: &Path) -> Option<PathBuf> {
    let named = if named.file_name()? == "report.txt" {
        named.parent()?
    } else {
        named
    };
    // `.` and `..` are resolved by the file system, not by name.
    let named = std::fs::canonicalize(named).ok()?;
    let package = named.file_name()?.to_str()?;
    let occ = named.parent()?;
    if occ.file_name()? != "occ" {
        return None;
    }
    let entries = std::fs::read_dir(occ.parent()?.join("build")).ok()?;
    entries
        .flatten()
        .filter(|e| is_build_dir_of(&e.file_name().to_string_lossy(), package))
        .map(|e| e.path().join("out").join("occ"))
        .filter_map(|dir| {
            let manifest = dir.join(occ_model::schema::manifest::FILE_NAME);
            let time = std::fs::metadata(manifest)
                .and_then(|m| m.modified())
                .ok()?;
            Some((time, dir))
        })
        .max_by_key(|(time, _)| *time)
        .map(|(_, dir)| dir)
}

/// `target/<profile>/build` and `target/<triple>/<profile>/build`.
fn build_dirs(target: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(level1) = std::fs::read_dir(target) else {
        return out;
    };
    for a in level1.flatten() {
        let build = a.path().join("build");
        if build.is_dir() {
            out.push(build);
        }
        if let Ok(level2) = std::fs::read_dir(a.path()) {
            for b in level2.flatten() {
                let build = b.path().join("build");
                if build.is_dir() && b.file_name() != "build" {
                    out.push(build);
                }
            }
        }
    }
    out
}

/// `example-app-0123456789abcdef` is a build dir of `example-app`, not of `example`.
fn is_build_dir_of(dir: &str, package: &str) -> bool {
    dir.strip_prefix(package)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|hash| !hash.is_empty() && hash.chars().all(|c| c.is_ascii_hexdigit()))
}

/// Prints a kernel-lookup failure with did-you-mean.
pub fn unknown_kernel(m: &Manifest, query: &str) -> anyhow::Error {
    match m.lookup(query) {
        occ_model::schema::manifest::Lookup::Ambiguous(candidates) => anyhow::anyhow!(
            "kernel `{query}` is ambiguous; it matches {}; give the name of the one you mean",
            occ_model::schema::manifest::describe_candidates(&candidates)
        ),
        occ_model::schema::manifest::Lookup::Unknown(names) if !names.is_empty() => {
            anyhow::anyhow!(
                "unknown kernel `{query}`; did you mean `{}`?",
                names.join("`, `")
            )
        }
        _ => anyhow::anyhow!(
            "unknown kernel `{query}`; `cargo occ report` lists the kernels of the build"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_dir_names_match_only_their_package() {
        assert!(is_build_dir_of(
            "example-app-0123456789abcdef",
            "example-app"
        ));
        assert!(!is_build_dir_of("example-app-0123456789abcdef", "example"));
        assert!(!is_build_dir_of("example-app", "example-app"));
    }
}
