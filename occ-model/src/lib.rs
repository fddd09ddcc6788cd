//! # occ-model: the pure core of occ
//!
//! Everything occ knows about CUDA kernels that needs no process, no file
//! system and no environment: the per-arch limits ([`arch`]), occupancy
//! exactly as NVIDIA's `cuda_occupancy.h` computes it ([`occupancy`]), the
//! model's block-size suggestions ([`suggest`]), declared launches and the
//! one rule that decides a launch ([`declared`]), the readers of ptxas's `-v` log ([`ptxas`])
//! and of PTX directives ([`ptx`]), kernel names ([`names`]), the
//! manifest and lock schemas ([`manifest`], [`lock`]), where spills and
//! register pressure are in the source ([`lines`], from nvdisasm's text), how a build compares
//! with its lock ([`compare`]), what a register-cap sweep tries ([`sweep`]),
//! and the step from nvcc's output text to a manifest ([`analyze`]).
//!
//! `occ-build` (the build-script shell) runs nvcc and feeds this crate text;
//! `occ-macros` and `cargo occ` read manifests with it. Its purity is checked:
//! `clippy.toml` bans file, process and environment calls here, and a test
//! greps the sources for them.
//!
//! ```
//! use occ_model::{arch, occupancy::{occupancy, KernelResources, BlockLaunch}};
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

pub mod analyze;
pub mod arch;
pub mod assemble;
pub mod ci;
pub mod cliff;
mod code_hash;
pub mod compare;
pub mod declared;
pub mod error;
pub mod kernels_rs;
pub mod lines;
pub mod lock;
pub mod manifest;
pub mod markdown;
pub mod measured;
pub mod names;
pub mod occupancy;
pub mod params;
#[cfg(test)]
mod proptests;
pub mod ptx;
pub mod ptxas;
pub mod shipped;
pub mod suggest;
pub mod sweep;
pub mod text_table;
pub mod units;

pub use error::{Error, Result};
