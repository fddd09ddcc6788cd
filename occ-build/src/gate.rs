//! Stages 6 and 8: the gates, and the policy around the lock.
//!
//! - `spills`: a spilling kernel is one warning, or an error when the
//!   build says [`Build::deny_spills`].
//! - `baseline`: the build's candidate lock against the committed
//!   `occ.lock` (judged by the pure [`occ_model::compare`]). Lower
//!   occupancy, new spills, more spilled bytes, registers up by more than a
//!   threshold, or a kernel gone fail the build with a before/after table;
//!   improvements and new kernels are one warning each.
//! - Bless policy: the candidate goes to `$OUT_DIR/occ/occ.lock.new` and the
//!   settings to `gate.json` (for `cargo occ bless/check`); only
//!   `OCC_BLESS=1` writes the lock, and never when `CI` is set. The lock is
//!   watched (`rerun-if-changed`) once it exists: cargo treats a watched
//!   missing file as always stale, so a crate with no lock yet does not
//!   watch it, and a lock created by `cargo occ bless` is picked up by the
//!   next build that reruns the script. Both writers use [`write_lock`]:
//!   through a symlinked lock, never over a read-only one.
//! - A lock of another package (its `package` differs) is refused by name,
//!   not reported kernel by kernel as gone.

use crate::builder::Build;
use crate::cargo::Directives;
use crate::compile::write_atomic;
use crate::env::Env;
use crate::error::{Error, Result};
use crate::inputs::Inputs;
use crate::manifest::{self, Manifest};
use occ_model::compare::{
    self, GateSettings, Thresholds, Verdict, DEFAULT_REGISTER_THRESHOLD, GATE_FILE,
};
use occ_model::lock::{Lock, CANDIDATE_FILE, LOCK_SCHEMA};
use std::path::{Path, PathBuf};

/// Spilling kernels: [`Error::Spills`] under [`Build::deny_spills`];
/// otherwise the build's one summary line names them (`summary`).
pub(crate) fn spills(build: &Build, manifest: &Manifest) -> Result<()> {
    let mut lines = Vec::new();
    for kernel in &manifest.kernels {
        for (arch, k) in &kernel.archs {
            if k.spills() {
                lines.push(format!(
                    "{} on {arch}: {} bytes spill stores, {} bytes spill loads ({})",
                    kernel.base_name, k.spill_stores, k.spill_loads, kernel.source
                ));
            }
        }
    }
    if lines.is_empty() {
        return Ok(());
    }
    if build.deny_spills {
        return Err(Error::Spills { kernels: lines });
    }
    Ok(())
}

/// The register thresholds a build sets.
fn thresholds(build: &Build) -> Thresholds {
    Thresholds {
        registers: build
            .register_threshold
            .unwrap_or(DEFAULT_REGISTER_THRESHOLD),
        kernels: build.kernel_register_thresholds.clone(),
    }
}

/// Compares with the lock: writes the candidate and the gate settings into
/// `$OUT_DIR/occ`, then fails on regressions, warns on improvements and new
/// kernels of the sources in `scope` (this `Build`'s: the candidate also
/// holds the other parts', see `parts`), and writes the lock only on
/// `OCC_BLESS` outside CI.
pub(crate) fn baseline(
    build: &Build,
    inputs: &Inputs,
    candidate: &Lock,
    scope: &[String],
    directives: &mut Directives,
) -> Result<()> {
    let out = &inputs.out_dir;
    let text = candidate.to_text();
    write_atomic(&out.join(CANDIDATE_FILE), text.as_bytes())?;
    let settings = GateSettings {
        schema: LOCK_SCHEMA,
        lock_file: inputs.lock_path.clone(),
        thresholds: thresholds(build),
    };
    write_atomic(
        &out.join(GATE_FILE),
        manifest::to_json_pretty(&settings).as_bytes(),
    )?;
    let lock_name = inputs.display(&inputs.lock_path);
    let blessing = inputs.bless && !inputs.ci;
    if inputs.bless && inputs.ci {
        directives.warn(format!(
            "occ: OCC_BLESS is ignored because CI is set; {lock_name} is never written in CI"
        ));
    }
    let write = |directives: &mut Directives, what: &str| -> Result<()> {
        let current = std::fs::read_to_string(&inputs.lock_path).unwrap_or_default();
        if current != text {
            write_lock(&inputs.lock_path, &text)?;
            directives.watch(&inputs.lock_path);
            directives.warn(format!(
                "occ: OCC_BLESS=1: wrote {lock_name} ({what}); commit it"
            ));
        }
        Ok(())
    };
    let Some(lock) = &inputs.lock else {
        if blessing {
            return write(directives, "new baseline");
        }
        directives.warn(format!(
            "occ: no {lock_name} yet; record the baseline with `cargo occ bless` (or OCC_BLESS=1 cargo build) and commit it"
        ));
        return Ok(());
    };
    if !lock.package.is_empty()
        && !candidate.package.is_empty()
        && lock.package != candidate.package
    {
        if blessing {
            return write(
                directives,
                &format!("replaced the lock of package `{}`", lock.package),
            );
        }
        return Err(Error::Corrupt {
            path: inputs.lock_path.clone(),
            detail: format!(
                "is the lock of package `{}`, not of `{}`; point .lock_file() at this crate's own lock, \
                 or, if the package was renamed, accept it with `cargo occ bless` (or OCC_BLESS=1 cargo build)",
                lock.package, candidate.package
            ),
        });
    }
    let diff = compare::compare(lock, candidate, &settings.thresholds);
    if blessing {
        let regressions = diff.regressions().count();
        let what = if regressions > 0 {
            format!("accepted {regressions} regression(s)")
        } else {
            "updated".into()
        };
        return write(directives, &what);
    }
    if diff.has_regressions() {
        // Every change, good and bad, so that a regression shows what it bought.
        let table = compare::render_diff(&diff, &Verdict::ALL);
        let hint = if inputs.ci {
            format!("fix the kernels, or bless on a developer machine (`cargo occ bless`) and commit {lock_name}")
        } else {
            format!("if this is intended, accept it with `cargo occ bless` (or OCC_BLESS=1 cargo build) and commit {lock_name}")
        };
        return Err(Error::Regression {
            report: format!("occupancy regression against {lock_name}:\n{table}{hint}"),
        });
    }
    for f in diff
        .findings
        .iter()
        .filter(|f| matches!(f.verdict, Verdict::Improvement | Verdict::New))
        .filter(|f| scope.contains(&f.source))
    {
        let what = if f.verdict == Verdict::New {
            "is not in"
        } else {
            "improved on"
        };
        directives.warn(format!(
            "occ: {} on {} {what} {lock_name} ({}); run `cargo occ bless` to record it",
            f.kernel,
            f.arch,
            f.reasons.join(", ")
        ));
    }
    for f in diff
        .moved()
        .filter(|f| f.verdict == Verdict::Changed && scope.contains(&f.source))
    {
        directives.warn(format!(
            "occ: {} on {} moved from {} to {} with the same numbers; run `cargo occ bless` to record the new source",
            f.kernel,
            f.arch,
            f.moved_from.as_deref().unwrap_or_default(),
            f.source
        ));
    }
    if !diff.dropped_archs.is_empty() {
        directives.warn(format!(
            "occ: {lock_name} records {} which this build does not build; run `cargo occ bless` to drop them",
            diff.dropped_archs.join(", ")
        ));
    }
    Ok(())
}

/// Writes `text` as the lock at `path`, the one way both `OCC_BLESS=1`
/// and `cargo occ bless` write it: through a symlink (the file it points
/// to is replaced, atomically, and the link stays), keeping the file's
/// permissions, and never over a read-only lock ([`Error::LockReadOnly`]:
/// the permission bits are checked, so running as root does not override
/// them).
pub fn write_lock(path: &Path, text: &str) -> Result<()> {
    let target = resolve_links(path)?;
    let permissions = match std::fs::metadata(&target) {
        Ok(m) => {
            if m.permissions().readonly() {
                return Err(Error::LockReadOnly { path: target });
            }
            Some(m.permissions())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io(format!("cannot read {}", target.display()), e)),
    };
    write_atomic(&target, text.as_bytes())?;
    if let Some(p) = permissions {
        std::fs::set_permissions(&target, p).map_err(|e| {
            Error::io(
                format!("cannot set the permissions of {}", target.display()),
                e,
            )
        })?;
    }
    Ok(())
}

/// The file `path` names after following every symlink (a dangling link
/// names the file it would create).
fn resolve_links(path: &Path) -> Result<PathBuf> {
    let mut current = path.to_path_buf();
    // A loop of links ends here instead of spinning.
    for _ in 0..40 {
        match std::fs::symlink_metadata(&current) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = std::fs::read_link(&current).map_err(|e| {
                    Error::io(format!("cannot read the symlink {}", current.display()), e)
                })?;
                current = match current.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            _ => return Ok(current),
        }
    }
    Err(Error::io(
        format!("cannot follow the symlink {}", path.display()),
        std::io::Error::other("too many levels of symbolic links"),
    ))
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

/// Reads a lock file; `Ok(None)` when it does not exist.
pub fn read_lock(path: &Path) -> Result<Option<Lock>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(Lock::from_text(&text, path)?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(format!("cannot read {}", path.display()), e)),
    }
}

/// Reads `gate.json`; `Ok(None)` when missing.
pub fn read_settings(path: &Path) -> Result<Option<GateSettings>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(GateSettings::from_json(&text, path)?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(format!("cannot read {}", path.display()), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
