//! occ-model's integration tests, in one test binary: the code hash over
//! real cubins, and the check that the model stays pure.

mod cubin_hash;
mod purity;
