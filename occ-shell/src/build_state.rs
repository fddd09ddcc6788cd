//! The build's state, kept in `$OUT_DIR/occ/status.json`: whether the last
//! build finished (not its report, which occ-build writes to `report.txt`).
//!
//! A build marks itself `running` as soon as it knows its `$OUT_DIR/occ`
//! and `finished` after its last stage. A build that fails (or is killed)
//! leaves `running`, so `cargo occ` can say that the manifest it reads may
//! be an earlier build's; one that the baseline gate failed, after it wrote
//! its numbers, is `gate_failed`: its numbers are current, and the next step
//! is to change the kernel or bless them, not to fix the build. The marker is written atomically and is not an
//! input of anything: cargo does not watch it and no cache key holds it.

use crate::error::Result;
use crate::files::write_atomic;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The marker's file name inside `$OUT_DIR/occ`.
pub const STATUS_FILE: &str = "status.json";

/// A file inside `$OUT_DIR/occ` that a build with no lock yet watches
/// (`rerun-if-changed`) in the lock's stead, and that `cargo occ bless`
/// touches when it writes the lock: cargo reruns a build script on every
/// build while a file it watches is missing, so the missing lock itself
/// cannot be watched, and without this the builds after a bless would keep
/// their "no occ.lock yet" warning and not gate until a source changed.
pub const BLESS_STAMP: &str = "bless.stamp";

/// The marker's schema version.
const STATUS_SCHEMA: u32 = 1;

/// How the last build of an `$OUT_DIR/occ` ended, as its marker says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildState {
    /// The build started and has not finished: it failed, was stopped, or
    /// is still running.
    Running,
    /// The build ran every stage.
    Finished,
    /// The build wrote its numbers (`manifest.json`, the candidate lock,
    /// `gate.json`), then the baseline gate failed it (a regression against
    /// the lock): the numbers are this build's.
    GateFailed,
}

#[derive(Debug, Serialize, Deserialize)]
struct Status {
    schema: u32,
    build: BuildState,
}

/// Marks the build in `occ_dir` as `state`.
pub fn mark(occ_dir: &Path, state: BuildState) -> Result<()> {
    let status = Status {
        schema: STATUS_SCHEMA,
        build: state,
    };
    write_atomic(
        &occ_dir.join(STATUS_FILE),
        occ_model::schema::manifest::to_json_pretty(&status).as_bytes(),
    )
}

/// How the last build in `occ_dir` ended; `None` when there is no marker
/// (a build by an occ-build without one) or it cannot be read.
pub fn last_build(occ_dir: &Path) -> Option<BuildState> {
    let text = std::fs::read_to_string(occ_dir.join(STATUS_FILE)).ok()?;
    let status: Status = serde_json::from_str(&text).ok()?;
    (status.schema == STATUS_SCHEMA).then_some(status.build)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_round_trips_and_a_missing_one_is_none() {
        let dir = std::env::temp_dir().join(format!("occ-status-{}", std::process::id()));
        assert_eq!(last_build(&dir), None);
        mark(&dir, BuildState::Running).expect("mark running");
        assert_eq!(last_build(&dir), Some(BuildState::Running));
        mark(&dir, BuildState::Finished).expect("mark finished");
        assert_eq!(last_build(&dir), Some(BuildState::Finished));
        mark(&dir, BuildState::GateFailed).expect("mark gate_failed");
        assert_eq!(last_build(&dir), Some(BuildState::GateFailed));
        assert!(std::fs::read_to_string(dir.join(STATUS_FILE))
            .expect("marker")
            .contains("\"gate_failed\""));
        std::fs::write(dir.join(STATUS_FILE), "not json").expect("write");
        assert_eq!(last_build(&dir), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
