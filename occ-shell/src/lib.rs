//! # occ-shell: what occ's build script and its CLI share
//!
//! occ-build (the build-script helper) and cargo-occ (`cargo occ`) follow
//! one rule for each thing they both do, and this crate holds it:
//!
//! - [`toolkit`]: finding nvcc ([`toolkit::find_nvcc`]: `NVCC`,
//!   `CUDA_HOME`, ..., `.cuda/`, then occ's per-user toolkit dir,
//!   [`toolkit::toolkit_dir`]), and the places a build without one watches;
//! - [`wheels`]: the pinned list of NVIDIA's nvcc wheels that `cargo occ
//!   toolkit install` and `scripts/cuda-toolkit` install;
//! - [`env`](mod@env): the one environment reader, which remembers every variable
//!   read (occ-build prints each as `cargo::rerun-if-env-changed`);
//! - [`files`]: writes through a temporary sibling and a rename, and the
//!   readers and writer of occ's files (`manifest.json`, `occ.lock`,
//!   `gate.json`);
//! - [`build_state`]: `$OUT_DIR/occ/status.json`, whether the last build
//!   finished;
//! - [`github`]: GitHub Actions' step summary and the paths annotations
//!   name.
//!
//! A build script does not depend on this crate: `occ_build::Build` is its
//! API, and occ-build re-exports nothing of it. It follows the version of
//! occ's other crates, which are released together.
#![deny(missing_docs)]

pub mod build_state;
pub mod env;
pub mod error;
pub mod files;
pub mod github;
pub mod process;
#[cfg(any(test, feature = "replay"))]
mod replay;
pub mod toolkit;
pub mod wheels;

pub use env::{is_ci, Env};
pub use error::{Error, Result};
#[cfg(feature = "replay")]
pub use replay::{Folders, Recorder, Replay};
