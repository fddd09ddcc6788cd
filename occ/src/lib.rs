//! occ for the application side: launch the kernels that `occ-build`
//! compiled, at the launches `#[launch_config]` baked.
//!
//! - [`table`]: the types of the generated `kernels.rs` table.
//! - [`select`]: which device code runs on a GPU, the one rule.
//! - [`LaunchConfig`], [`grid_for`], [`grid_for_2d`], and [`Baked`], the
//!   per-arch launches a `#[launch_config]` site references.
#![deny(missing_docs)]

pub mod launch;
pub mod select;
pub mod table;

pub use launch::{grid_for, grid_for_2d, Baked, BakedArch, Dim, LaunchConfig};

/// `#[launch_config(kernel = "…")]`: bake the best launch of a kernel into
/// the host code at compile time (the `occ-macros` crate).
#[cfg(feature = "macros")]
pub use occ_macros::launch_config;
