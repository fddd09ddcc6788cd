//! The stages of a build, one module each, in the order `pipeline::run`
//! calls them (ARCHITECTURE.md has the same list):
//!
//! 1. `inputs`: paths, archs, sources, the lock's text, env settings.
//! 2. `nvcc_or_lock`: a live nvcc, or the committed lock (and why).
//! 3. `hostlib` (a host-code library's settings), `plan` (one nvcc job per
//!    source and arch); 3½ `memo` (nothing changed: stop).
//! 4. `compile`: run the jobs, or reuse their cached results.
//! 5. `device_code` (what `kernels.rs` embeds), `assemble` (the one
//!    assembly); 5½ `disasm` (source lines from nvdisasm).
//! 6. `gate` (spills, stale measurements), `hostlib` (the archive).
//! 7. `device_code` (the blobs), `outputs` (`manifest.json`, `kernels.rs`);
//!    7½ `parts` (several `Build`s of one script).
//! 8. `gate` (the baseline: `occ.lock`).
//! 9. `report` (`report.txt`, the warnings, the step summary), `memo`.
//!
//! A stage may use the leaves (`crate::leaf`) and the configuration
//! (`crate::builder`), and another stage's types where it reads what that
//! stage made; no stage imports `pipeline`.

pub(crate) mod assemble;
pub(crate) mod compile;
pub(crate) mod device_code;
pub(crate) mod disasm;
pub(crate) mod gate;
pub(crate) mod hostlib;
pub(crate) mod inputs;
pub(crate) mod memo;
pub(crate) mod nvcc_or_lock;
pub(crate) mod outputs;
pub(crate) mod parts;
pub(crate) mod plan;
pub(crate) mod report;
