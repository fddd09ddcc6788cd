//! occ-shell's file helpers, as the stages use them (`crate::leaf::files::…`):
//! the same functions, those that can fail returning occ-build's error, so
//! that a stage can end on one (`write_atomic(..)`) as on its own.
//!
//! A leaf: it imports nothing of the crate but its error.

use crate::leaf::error::Result;
use std::path::Path;

pub(crate) use occ_shell::files::{lexical, relative, remove_stale_scratch};

/// [`occ_shell::files::write_atomic`]: writes through a temporary sibling
/// and a rename, only when the content changes.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    Ok(occ_shell::files::write_atomic(path, bytes)?)
}

/// [`occ_shell::files::scratch_dir`]: a new folder beside `path`, for one
/// run alone (`<name>.tmp<pid>.<random>`).
pub(crate) fn scratch_dir(path: &Path) -> Result<std::path::PathBuf> {
    Ok(occ_shell::files::scratch_dir(path)?)
}

/// [`occ_shell::files::scratch_file`]: a new file beside `path`, removed
/// when dropped unless persisted.
pub(crate) fn scratch_file(path: &Path) -> Result<occ_shell::files::ScratchFile> {
    Ok(occ_shell::files::scratch_file(path)?)
}

/// [`occ_shell::files::write_lock`]: the one writer of `occ.lock`.
pub(crate) fn write_lock(path: &Path, text: &str) -> Result<()> {
    Ok(occ_shell::files::write_lock(path, text)?)
}

/// [`occ_shell::files::read_manifest`].
pub(crate) fn read_manifest(path: &Path) -> Result<occ_model::schema::manifest::Manifest> {
    Ok(occ_shell::files::read_manifest(path)?)
}
