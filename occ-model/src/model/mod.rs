//! NVIDIA's rules and the decisions made with them: the per-arch facts
//! (`arch`), occupancy exactly as `cuda_occupancy.h` (`occupancy`), the
//! best block size and what-if answers (`suggest`), declared launches and
//! the one decision path every reader takes (`declared::decide`),
//! occupancy cliffs (`cliff`) and register-cap sweeps (`sweep`).

pub mod arch;
pub mod cliff;
pub mod declared;
pub mod occupancy;
pub mod suggest;
pub mod sweep;
