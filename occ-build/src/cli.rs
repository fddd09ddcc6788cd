//! What `cargo occ` (and occ's own tests) share with the build, so that
//! both follow one rule: finding nvcc and occ's toolkit dir, the pinned
//! wheel list, reading the files a build leaves in `$OUT_DIR/occ`
//! (manifest, candidate lock, `gate.json`, `status.json`), reading and
//! writing the committed `occ.lock`, the environment reader, a build run
//! with a given one ([`WithEnv`]), and GitHub Actions' settings.
//!
//! A build script needs none of this: [`Build`](crate::Build) is its API.
//! This module is public so that occ's own crates can use it (cargo-occ;
//! the fuzz targets and tests, which also render `kernels.rs` with
//! [`kernels_rs`]); it follows occ-build's version like the rest of the
//! crate, and the structs only occ-build makes are `#[non_exhaustive]`, so a
//! field can be added.

pub use crate::cargo::Directives;
pub use crate::env::{is_ci, Env};
pub use crate::files::{read_lock, read_manifest, read_settings, write_lock};
pub use crate::github::{repo_path, source_reader, Actions};
pub use crate::process::{Cmd, Output, Programs, Real, Status};
#[cfg(feature = "replay")]
pub use crate::replay::{Folders, Recorder, Replay};
pub use crate::status::{last_build, BuildState, BLESS_STAMP};
pub use crate::toolkit::{find_nvcc, short_version, toolkit_dir, Nvcc, ToolkitDir};
pub use crate::wheels::{wheel_sets, WheelSet, WHEELS};
pub use occ_model::kernels_rs::kernels_rs;

/// A [`Build`](crate::Build) run with a given environment reader instead of
/// the process's, printing nothing: how occ's tests and tools run a build
/// in a scratch crate. A build script calls `compile()` or `try_compile()`.
pub trait WithEnv {
    /// `try_compile` with `env` for the environment.
    fn try_compile_with(&self, env: &Env) -> crate::Result<crate::Report>;
    /// Runs the build; returns its result and the cargo directives
    /// gathered, also on failure (the files and variables read are still
    /// watched). This is what `compile()` prints.
    fn execute(&self, env: &Env) -> (crate::Result<crate::Report>, Directives);
    /// `resolved_archs` with `env` for the environment; prints nothing (the
    /// variables read are in [`Env::read_vars`]).
    fn resolved_archs_with(&self, env: &Env) -> crate::Result<Vec<occ_model::arch::Target>>;
}

impl WithEnv for crate::Build {
    fn try_compile_with(&self, env: &Env) -> crate::Result<crate::Report> {
        self.run_with(env).0
    }

    fn execute(&self, env: &Env) -> (crate::Result<crate::Report>, Directives) {
        self.run_with(env)
    }

    fn resolved_archs_with(&self, env: &Env) -> crate::Result<Vec<occ_model::arch::Target>> {
        crate::inputs::targets(self, env)
    }
}
