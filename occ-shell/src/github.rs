//! GitHub Actions: the markdown step summary and the paths annotations
//! name.
//!
//! Under GitHub Actions (`GITHUB_ACTIONS=true`) the build appends the
//! report's Markdown ([`occ_model::render::markdown`]) to the file
//! `GITHUB_STEP_SUMMARY` names, and `cargo occ check` appends its own and
//! prints each spill, regression and near-cliff warning as a workflow
//! command (`::error file=…,line=…::…`, [`occ_model::render::ci`]).
//!
//! Why the build prints no workflow commands: the runner takes a command
//! only from a line that starts with `::` (after leading blanks) on the
//! step's stdout or stderr. Cargo shows a build script's
//! `cargo::warning=` lines as `warning: pkg@0.1.0: …` (not at the start of
//! the line), shows its `cargo::error=` lines likewise, and shows the
//! script's own stdout and stderr only when the script exits non-zero,
//! which occ-build never does (it fails a build with `cargo::error=`).
//! So a build script's workflow commands never reach the runner (checked
//! with cargo 1.95); `cargo occ check`, a process of the step itself, is
//! where annotations come from.

use crate::env::Env;
use crate::error::{Error, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What GitHub Actions tells a step (read only under `GITHUB_ACTIONS=true`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Actions {
    /// `GITHUB_STEP_SUMMARY`: the file a step appends its Markdown summary to.
    pub summary: Option<PathBuf>,
    /// `GITHUB_WORKSPACE`: the checkout, which annotation paths are relative to.
    pub workspace: Option<PathBuf>,
}

impl Actions {
    /// The settings when `GITHUB_ACTIONS` is `true`, else `None` (then the
    /// other variables are not read, so a local build does not watch them).
    pub fn from_env(env: &Env) -> Option<Actions> {
        if env.var("GITHUB_ACTIONS").as_deref().map(str::trim) != Some("true") {
            return None;
        }
        Some(Actions {
            summary: env.var_os("GITHUB_STEP_SUMMARY").map(PathBuf::from),
            workspace: env.var_os("GITHUB_WORKSPACE").map(PathBuf::from),
        })
    }

    /// Appends `markdown` (and a blank line) to the step summary, if the
    /// step has one.
    pub fn append_summary(&self, markdown: &str) -> Result<()> {
        let Some(path) = &self.summary else {
            return Ok(());
        };
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| {
                Error::io(
                    format!("cannot open GITHUB_STEP_SUMMARY {}", path.display()),
                    e,
                )
            })?;
        file.write_all(format!("{markdown}\n").as_bytes())
            .map_err(|e| {
                Error::io(
                    format!("cannot write GITHUB_STEP_SUMMARY {}", path.display()),
                    e,
                )
            })
    }

    /// `source` (relative to `crate_root`) as the repository names it: see
    /// [`repo_path`], with the workspace as the first base.
    pub fn path(&self, crate_root: &Path, source: &str) -> String {
        repo_path(crate_root, source, self.workspace.as_deref())
    }
}

/// `source` (relative to `crate_root`, `/` separators) relative to the
/// repository: to `workspace` when the crate lies in it, else to the
/// nearest folder above the crate holding `.git`, else to the crate.
pub fn repo_path(crate_root: &Path, source: &str, workspace: Option<&Path>) -> String {
    let full = crate_root.join(source);
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let root = canonical(crate_root);
    let git = root.ancestors().find(|d| d.join(".git").exists());
    let bases = workspace
        .map(canonical)
        .into_iter()
        .chain(git.map(Path::to_path_buf));
    for base in bases {
        if let Ok(rel) = canonical(&full).strip_prefix(&base) {
            return crate::files::relative(Path::new(""), rel);
        }
    }
    source.to_string()
}

/// A reader of the crate's `.cu` files for [`occ_model::render::ci::alerts`]
/// (`None` for a file it cannot read).
pub fn source_reader(crate_root: &Path) -> impl Fn(&str) -> Option<String> + '_ {
    move |source| std::fs::read_to_string(crate_root.join(source)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_are_read_only_under_github_actions() {
        let env = Env::with_overrides(vec![
            ("GITHUB_ACTIONS".into(), Some("false".into())),
            ("GITHUB_STEP_SUMMARY".into(), Some("/tmp/s.md".into())),
        ]);
        assert_eq!(Actions::from_env(&env), None);
        assert_eq!(env.read_vars(), ["GITHUB_ACTIONS"]);
        let env = Env::with_overrides(vec![
            ("GITHUB_ACTIONS".into(), Some("true".into())),
            ("GITHUB_STEP_SUMMARY".into(), Some("/tmp/s.md".into())),
            ("GITHUB_WORKSPACE".into(), None),
        ]);
        let a = Actions::from_env(&env).expect("under actions");
        assert_eq!(a.summary.as_deref(), Some(Path::new("/tmp/s.md")));
        assert_eq!(env.read_vars().len(), 3);
    }

    #[test]
    fn paths_are_relative_to_the_workspace_holding_the_crate() {
        let dir = std::env::temp_dir().join(format!("occ-github-{}", std::process::id()));
        let krate = dir.join("crates/app");
        std::fs::create_dir_all(krate.join("kernels")).expect("folders");
        assert_eq!(
            repo_path(&krate, "kernels/a.cu", Some(&dir)),
            "crates/app/kernels/a.cu"
        );
        std::fs::create_dir_all(dir.join("crates/.git")).expect(".git");
        assert_eq!(repo_path(&krate, "kernels/a.cu", None), "app/kernels/a.cu");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
