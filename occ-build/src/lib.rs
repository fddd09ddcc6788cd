//! occ-build: CUDA occupancy as a build-time fact.
#![deny(missing_docs)]

pub mod arch;
pub mod names;
pub mod occupancy;
pub mod ptx;
pub mod ptxas;
pub mod tune;
