//! `cargo occ check`: the regression gate outside `cargo build`.

use crate::locate::Locate;
use occ_build::compare::{self, Verdict};
use occ_build::lock::Lock;
use occ_build::manifest::Origin;
use std::path::PathBuf;

/// Arguments of `cargo occ check`.
#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "Exit status:\n  0  no regression (improvements and new kernels are listed)\n  1  a regression: occupancy down, new or more spills, registers up past the threshold, a kernel gone\n  2  usage or input error: no build found, no lock, unreadable files"
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

fn check(args: &CheckArgs) -> anyhow::Result<i32> {
    let found = args.locate.find()?;
    if found.manifest.origin == Origin::Lock {
        // A build that stood on the lock has its numbers, and no gate.json.
        let lock = args
            .lock
            .clone()
            .or_else(|| found.gate.as_ref().map(|g| g.lock_file.clone()));
        let lock = lock.map_or("occ.lock".to_string(), |p| p.display().to_string());
        println!(
            "note: the last build had no nvcc and used {lock}; nothing to compare: build with nvcc to check"
        );
        return Ok(0);
    }
    let (path, lock) = found.lock(args.lock.as_deref())?;
    let Some(lock) = lock else {
        anyhow::bail!(
            "no lock at {}; record one with `cargo occ bless` and commit it",
            path.display()
        );
    };
    let mut thresholds = found
        .gate
        .as_ref()
        .map(|g| g.thresholds.clone())
        .unwrap_or_default();
    if let Some(n) = args.register_threshold {
        thresholds.registers = n;
    }
    let candidate = Lock::from_manifest(&found.manifest);
    let diff = compare::compare(&lock, &candidate, &thresholds);
    let name = path.display();
    if diff.has_regressions() {
        print!(
            "occupancy regression against {name}:\n{}",
            compare::render_diff(&diff, &Verdict::ALL)
        );
        println!("if this is intended, accept it with `cargo occ bless` and commit {name}");
        return Ok(1);
    }
    let others = [Verdict::Improvement, Verdict::New, Verdict::Changed];
    if diff.findings.is_empty() {
        println!("ok: {} kernels match {name}", candidate.kernels.len());
    } else {
        print!(
            "ok, no regression; differences from {name}:\n{}",
            compare::render_diff(&diff, &others)
        );
        println!("run `cargo occ bless` to record them");
    }
    Ok(0)
}
