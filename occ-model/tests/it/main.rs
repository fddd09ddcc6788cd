//! occ-model's integration tests, in one test binary: the code hash over
//! real cubins, the kernel list read from the object, the check that the
//! model stays pure, and the check that
//! its layers go one way, and the check that occ-build, occ-shell and
//! cargo-occ start programs only through the seam (all read the sources
//! through `source`).

mod cubin_hash;
mod kernel_list;
mod layers;
mod purity;
mod seam;
mod source;
mod written_bytes;
