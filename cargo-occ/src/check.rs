//! `cargo occ check`: the regression gate outside `cargo build`, as text
//! or as a SARIF 2.1.0 log for GitHub code scanning; under GitHub Actions
//! also the step summary and one annotation per spill, regression and
//! near-cliff warning at its source line.

use crate::locate::{Locate, Located};
use occ_model::compare::{self, Diff, Verdict};
use occ_model::render::ci::{self, Alert};
use occ_model::render::markdown::{self, Baseline};
use occ_model::schema::lock::Lock;
use occ_model::schema::manifest::Origin;
use occ_shell::build_state::{self, BuildState};
use occ_shell::github::{self, Actions};
use occ_shell::Env;
use std::path::{Path, PathBuf};

/// Output formats of `cargo occ check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The verdict and the before/after table.
    Text,
    /// A SARIF 2.1.0 log (for github/codeql-action/upload-sarif): one result per spill, regression or near-cliff warning, at its source line; without a lock, the spills only.
    Sarif,
}

/// Arguments of `cargo occ check`.
#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "Exit status:\n  0  no regression, and every kernel x arch was checked (improvements are listed)\n  1  a regression (occupancy down, new or more spills, registers up past the threshold, a kernel gone), or a kernel x arch the lock has no baseline for (a new kernel, an arch the lock does not record): each is named\n  2  usage or input error: no build found, a build from the lock without nvcc or, under CI, a last build that did not finish (nothing was checked), no lock (the SARIF log then holds the spills only), unreadable files\n\nUnder GitHub Actions (GITHUB_ACTIONS=true) it also appends the Markdown report to $GITHUB_STEP_SUMMARY and prints each finding as a workflow command (::error file=..,line=..::), on stderr with --format sarif."
)]
pub struct CheckArgs {
    #[command(flatten)]
    pub locate: Locate,
    /// The lock to compare with (default: the one the build used, normally occ.lock beside Cargo.toml).
    #[arg(long, value_name = "FILE")]
    pub lock: Option<PathBuf>,
    /// Registers per thread a kernel may grow by (default: the build's setting).
    #[arg(long, value_name = "N")]
    pub register_threshold: Option<u32>,
    /// Warn when a change leaves a kernel N or fewer registers from an occupancy cliff (default: the build's setting, 2; 0: never).
    #[arg(long, value_name = "N")]
    pub cliff_margin: Option<u32>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

/// Runs the check; returns the exit status.
pub fn run(args: CheckArgs) -> anyhow::Result<i32> {
    match check(&args) {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            Ok(2)
        }
    }
}

/// Where the crate's `.cu` files are: the build's record, else the
/// folder of the lock.
fn crate_root(found: &Located, lock: Option<&Path>) -> PathBuf {
    found
        .gate
        .as_ref()
        .and_then(|g| g.crate_root.clone())
        .or_else(|| lock.and_then(Path::parent).map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The alerts of the build (and of its comparison), the SARIF log or the
/// annotations and step summary they make.
struct Report<'a> {
    found: &'a Located,
    root: PathBuf,
    actions: Option<Actions>,
}

impl Report<'_> {
    fn alerts(&self, diff: Option<&Diff>) -> Vec<Alert> {
        let deny = self.found.gate.as_ref().is_some_and(|g| g.deny_spills);
        ci::alerts(
            &self.found.manifest,
            diff,
            deny,
            &github::source_reader(&self.root),
        )
    }

    fn path(&self, file: &str) -> String {
        match &self.actions {
            Some(a) => a.path(&self.root, file),
            None => github::repo_path(&self.root, file, None),
        }
    }

    /// Prints the SARIF log (sarif) or nothing, then, under GitHub
    /// Actions, the annotations (on stderr beside a SARIF log) and the
    /// step summary.
    fn emit(&self, format: Format, diff: Option<&Diff>, baseline: Baseline) -> anyhow::Result<()> {
        let alerts = self.alerts(diff);
        if format == Format::Sarif {
            print!(
                "{}",
                ci::sarif(&alerts, env!("CARGO_PKG_VERSION"), &|f| self.path(f))
            );
        }
        if let Some(actions) = &self.actions {
            for a in &alerts {
                let line = ci::workflow_command(a, &self.path(&a.file));
                match format {
                    Format::Sarif => eprintln!("{line}"),
                    Format::Text => println!("{line}"),
                }
            }
            actions.append_summary(&markdown::markdown(&self.found.manifest, &baseline))?;
        }
        Ok(())
    }
}

/// Says `note` (nothing was checked) in every output the check writes and
/// returns exit status 2: a CI step that checked nothing must not look green.
fn nothing_checked(
    args: &CheckArgs,
    found: &Located,
    env: &Env,
    lock: Option<&Path>,
    note: String,
) -> anyhow::Result<i32> {
    let report = Report {
        root: crate_root(found, lock),
        found,
        actions: Actions::from_env(env),
    };
    report.emit(args.format, None, Baseline::NotCompared(note.clone()))?;
    eprintln!("error: {note}");
    Ok(2)
}

/// Long because each output (text, SARIF, step summary, workflow commands) is
/// written from one comparison.
fn check(args: &CheckArgs) -> anyhow::Result<i32> {
    let found = args.locate.find()?;
    let env = Env::new();
    let text = args.format == Format::Text;
    if found.manifest.origin == Origin::Lock {
        // A build that stood on the lock has its numbers, and no gate.json.
        let lock = args
            .lock
            .clone()
            .or_else(|| found.gate.as_ref().map(|g| g.lock_file.clone()));
        let note = format!(
            "nothing was checked: the last build had no nvcc and took its numbers from {}, so \
             comparing them with it says nothing; build with nvcc (`cargo occ toolkit install`, \
             or NVCC=/path/to/nvcc), then run `cargo occ check` again",
            lock.as_ref()
                .map_or("occ.lock".to_string(), |p| p.display().to_string())
        );
        return nothing_checked(args, &found, &env, lock.as_deref(), note);
    }
    if occ_shell::is_ci(&env)
        && build_state::last_build(&found.occ_dir) == Some(BuildState::Running)
    {
        // The last build stopped before its gate (a compile error, a
        // build stopped): its folder may hold an earlier build's numbers.
        let note = format!(
            "nothing was checked: the last build of {} did not finish, so the numbers in {} may \
             be an earlier build's; fix the build (`cargo build`), then run `cargo occ check` again",
            found.manifest.package,
            found.occ_dir.display()
        );
        return nothing_checked(args, &found, &env, args.lock.as_deref(), note);
    }
    let (path, lock) = found.lock(args.lock.as_deref())?;
    let Some(lock) = lock else {
        // Nothing to compare with, but spills need no baseline: the SARIF
        // log, annotations and step summary still show them.
        let why = format!(
            "no lock at {}; record one with `cargo occ bless` and commit it",
            path.display()
        );
        let report = Report {
            root: crate_root(&found, Some(&path)),
            found: &found,
            actions: Actions::from_env(&env),
        };
        report.emit(args.format, None, Baseline::NotCompared(why.clone()))?;
        anyhow::bail!("{why}");
    };
    let mut thresholds = found
        .gate
        .as_ref()
        .map(|g| g.thresholds.clone())
        .unwrap_or_default();
    if let Some(n) = args.register_threshold {
        thresholds.registers = n;
    }
    if let Some(n) = args.cliff_margin {
        thresholds.cliff_margin = n;
    }
    // The build's own candidate also holds the flags it was built with.
    let mut candidate = Lock::from_manifest(&found.manifest);
    candidate.flags =
        std::fs::read_to_string(found.occ_dir.join(occ_model::schema::lock::CANDIDATE_FILE))
            .ok()
            .and_then(|text| Lock::from_text(&text, &found.occ_dir).ok())
            .and_then(|built| built.flags);
    let diff = compare::compare(&lock, &candidate, &thresholds);
    let name = path.display();
    let report = Report {
        root: crate_root(&found, Some(&path)),
        found: &found,
        actions: Actions::from_env(&env),
    };
    let lock_name = path
        .file_name()
        .map_or("the lock".into(), |n| n.to_string_lossy().into_owned());
    // What has no baseline was checked by nothing, nor were the lock's
    // archs the build did not make: never "ok".
    let mut unchecked = diff.unchecked(|_| true);
    unchecked.not_built = diff.dropped_archs.clone();
    let fix = if unchecked.not_built.is_empty() {
        format!("record them with `cargo occ bless` and commit {name}")
    } else {
        format!(
            "build every arch {name} records (OCC_ARCHS={}), then record what is new with \
             `cargo occ bless` and commit {name}",
            lock.archs.join(",")
        )
    };
    // The build fails on a measurement taken on other code: so does this.
    let stale = compare::stale_measurements_message(&lock_name, &diff.stale_measurements);
    if !text && !unchecked.is_empty() {
        // The SARIF log holds results at source lines only: say it here.
        eprintln!("not ok: {unchecked}; {fix}");
    }
    if let (false, Some(stale)) = (text, &stale) {
        eprintln!("not ok: {stale}");
    }
    let code = if diff.fails() || !unchecked.is_empty() {
        1
    } else {
        0
    };
    if text {
        if diff.has_regressions() {
            print!(
                "occupancy regression against {name}:\n{}",
                occ_model::render::text_table::render_diff(&diff, &Verdict::ALL)
            );
            if !unchecked.is_empty() {
                println!("not checked: {unchecked}; {fix}");
            }
            if let Some(stale) = &stale {
                println!("not ok: {stale}");
            }
            println!("if this is intended, accept it with `cargo occ bless` and commit {name}");
        } else if !unchecked.is_empty() {
            print!(
                "not ok: {unchecked}; differences from {name}:\n{}",
                occ_model::render::text_table::render_diff(&diff, &Verdict::ALL)
            );
            println!("{fix}");
            if let Some(stale) = &stale {
                println!("not ok: {stale}");
            }
        } else if let Some(stale) = &stale {
            println!("not ok: {stale}");
            if !diff.findings.is_empty() {
                print!(
                    "differences from {name}:\n{}",
                    occ_model::render::text_table::render_diff(&diff, &Verdict::ALL)
                );
            }
        } else if diff.findings.is_empty() {
            if !diff.settings.is_empty() {
                println!(
                    "changed since the lock was blessed: {}",
                    compare::said(&diff.settings)
                );
            }
            println!(
                "ok: {} match {name}",
                occ_model::render::text_table::count(candidate.kernels.len(), "kernel")
            );
        } else {
            let others = [Verdict::Improvement, Verdict::New, Verdict::Changed];
            print!(
                "ok, no regression; differences from {name}:\n{}",
                occ_model::render::text_table::render_diff(&diff, &others)
            );
            println!("run `cargo occ bless` to record them");
        }
    }
    report.emit(
        args.format,
        Some(&diff),
        Baseline::Compared {
            lock: lock_name,
            diff: diff.clone(),
        },
    )?;
    Ok(code)
}
