//! `cargo occ bless`: adopt the numbers of the last build as the baseline.

use crate::locate::Locate;
use anyhow::{bail, Context};
use occ_model::compare::{self, Verdict};
use occ_model::schema::lock::{Lock, CANDIDATE_FILE};
use occ_model::schema::manifest::Origin;
use occ_shell::build_state::{BuildState, BLESS_STAMP};
use occ_shell::{files, Env};
use std::path::PathBuf;

/// Arguments of `cargo occ bless`.
#[derive(Debug, Clone, clap::Args)]
pub struct BlessArgs {
    #[command(flatten)]
    pub locate: Locate,
    /// Write this lock file (default: the one the build used, normally occ.lock beside Cargo.toml).
    #[arg(long, value_name = "FILE")]
    pub lock: Option<PathBuf>,
}

/// Copies `$OUT_DIR/occ/occ.lock.new` of the latest build over the lock;
/// refused after a build that did not finish (`status.json` says
/// `running`: a failed nvcc build leaves the previous candidate), since
/// that candidate may be an earlier build's.
pub fn run(args: BlessArgs) -> anyhow::Result<i32> {
    if occ_shell::is_ci(&Env::new()) {
        eprintln!("error: CI is set; occ.lock is never written in CI: bless on a developer machine and commit it");
        return Ok(2);
    }
    let found = args.locate.read()?;
    if found.state == Some(BuildState::Running) {
        // Its candidate may be an earlier build's: "up to date" would
        // bless numbers the sources no longer give.
        eprintln!(
            "error: the last build of {} did not finish (it failed before occ's gate, was stopped, or is \
             still running), so its candidate lock may be an earlier build's; nothing was blessed: fix \
             the build and run `cargo build` again, then `cargo occ bless`",
            found.manifest.package
        );
        return Ok(2);
    }
    found.say_state();
    let candidate_path = found.occ_dir.join(CANDIDATE_FILE);
    let text = std::fs::read_to_string(&candidate_path).with_context(|| {
        format!(
            "cannot read {}; rebuild with this occ-build (`cargo build`) first",
            candidate_path.display()
        )
    })?;
    let candidate = Lock::from_text(&text, &candidate_path)?;
    if found.manifest.origin == Origin::Lock {
        bail!("the last build had no nvcc and used the lock itself; build with nvcc, then bless");
    }
    let (path, old) = found.lock(args.lock.as_deref())?;
    match &old {
        Some(old) if old.to_text() == text => {
            println!("{} is up to date", path.display());
            return Ok(0);
        }
        Some(old) => {
            let diff = compare::compare(old, &candidate, &Default::default());
            print!(
                "{}",
                occ_model::render::text_table::render_diff(&diff, &Verdict::ALL)
            );
        }
        None => {}
    }
    files::write_lock(&path, &text)?;
    // The build that had no lock watches this stamp in its stead: touched,
    // the next build reruns its script and gates against the new lock.
    let stamp = found.occ_dir.join(BLESS_STAMP);
    if stamp.is_file() {
        let _ = std::fs::write(&stamp, b"");
    }
    println!(
        "wrote {} ({}, {}); commit it",
        path.display(),
        occ_model::render::units::count(candidate.kernels.len(), "kernel"),
        candidate.archs.join(", ")
    );
    Ok(0)
}
