//! # occ-model: the pure core of occ
//!
//! Everything occ knows about CUDA kernels that needs no process, no file
//! system and no environment, in six modules:
//!
//! - [`compiler`]: what the compiler wrote, read (ptxas's log, PTX,
//!   nvdisasm's line tables, names; one job's text made its contribution);
//! - [`model`]: NVIDIA's rules (the per-arch facts, occupancy exactly as
//!   `cuda_occupancy.h` computes it) and the decisions made with them
//!   (suggested block sizes, declared launches and the one rule that
//!   decides a launch, cliffs, register-cap sweeps);
//! - [`assemble`]: the one assembly of a build's manifest from its jobs'
//!   contributions, build.rs's launches and the lock's measurements;
//! - [`schema`]: the files occ writes and reads back (`manifest.json`,
//!   `occ.lock`, measurements);
//! - [`compare`]: how a build compares with its lock;
//! - [`render`]: the views (text tables, Markdown, SARIF, `kernels.rs`).
//!
//! `occ-build` (the build-script shell) runs nvcc and feeds this crate text;
//! `occ-macros` and `cargo occ` read manifests with it. Its purity is checked:
//! `clippy.toml` bans file, process and environment calls here, and a test
//! greps the sources for them.
//!
//! ```
//! use occ_model::{model::arch, model::occupancy::{occupancy, KernelResources, BlockLaunch}};
//!
//! let sm80 = arch::lookup("sm_80").unwrap();
//! let k = KernelResources { registers: 32, ..KernelResources::default() };
//! let occ = occupancy(sm80, &k, &BlockLaunch::new(256)).unwrap();
//! assert_eq!(occ.active_blocks_per_sm, 8);
//! ```
#![deny(missing_docs)]

/// The identity of this occ-model's code (a hash of its sources, made by
/// its build script): whatever a build keeps that occ-model worked out —
/// a job's parsed contribution, the source lines read from nvdisasm — is
/// keyed by it, so a changed parser never serves what an older one made.
pub const CODE: &str = env!("OCC_MODEL_CODE");

pub mod assemble;
mod code_hash;
pub mod compare;
pub mod compiler;
mod error;
pub mod model;
#[cfg(test)]
mod proptests;
pub mod render;
pub mod schema;
mod work;

pub use error::{Error, Result};
