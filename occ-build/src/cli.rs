//! What `cargo occ` (and occ's own tests) share with the build, so that
//! both follow one rule: finding nvcc and occ's toolkit dir, the pinned
//! wheel list, reading and writing the files a build leaves in
//! `$OUT_DIR/occ` (manifest, candidate lock, `gate.json`, `status.json`)
//! and the committed `occ.lock`, the environment reader, and GitHub
//! Actions' settings.
//!
//! A build script needs none of this: [`Build`](crate::Build) is its API.
//! This module is public so that occ's own crates can use it (cargo-occ;
//! the fuzz targets and tests, which also render `kernels.rs` with
//! [`kernels_rs`]); it follows occ-build's version like the rest of the
//! crate, and the structs only occ-build makes are `#[non_exhaustive]`, so a
//! field can be added.

pub use crate::cargo::Directives;
pub use crate::emit::kernels_rs;
pub use crate::env::{is_ci, Env};
pub use crate::files::{read_lock, read_manifest, read_settings, write_lock};
pub use crate::github::{repo_path, source_reader, Actions};
pub use crate::status::{last_build, BuildState, BLESS_STAMP};
pub use crate::toolkit::{find_nvcc, short_version, toolkit_dir, Nvcc, ToolkitDir};
pub use crate::wheels::{wheel_sets, WheelSet, WHEELS};
