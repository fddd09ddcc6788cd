//! The job types every stage after planning shares: what one nvcc job
//! compiles ([`Job`], [`JobKind`], made by `plan`) and what it produced
//! ([`JobOutput`], made by `compile`, read by `assemble`, `device_code`,
//! `hostlib` and the pipeline).
//!
//! A leaf: it imports no stage.

use occ_model::schema::manifest::Contribution;
use std::path::PathBuf;

/// What one job compiles.
#[derive(Debug, Clone)]
pub struct Job {
    /// The source, relative to the crate root (`/` separators).
    pub source: String,
    /// The target arch as given to nvcc (`sm_90a`).
    pub arch: String,
    /// The stem of every file this job writes (`kernels_saxpy.sm_90a`).
    pub name: String,
    /// Extra nvcc arguments (includes, defines, flags), in order.
    pub args: Vec<String>,
    /// What nvcc makes of the file.
    pub kind: JobKind,
}

/// What a job compiles a file into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobKind {
    /// `nvcc --cubin` for one arch: the cubin, the PTX and the ptxas log.
    Device,
    /// `nvcc -c` for every arch at once, for a host-code library: the
    /// object with the host code and the fatbin, and each arch's cubin, PTX
    /// and ptxas log. The job's `arch` is the archs joined by `,`.
    Library {
        /// The archs, in build order.
        archs: Vec<String>,
        /// The stem of the per-arch files (`kernels_moe`: `kernels_moe.sm_80.cubin`).
        stem: String,
    },
}

/// What one job produced.
#[derive(Debug, Clone)]
pub struct JobOutput {
    /// The job.
    pub job: Job,
    /// nvcc's stderr and stdout (the ptxas `-v` log).
    pub log: String,
    /// What the job contributed on this arch (its kernels as the compiler
    /// left them), parsed when it ran, or from its record.
    pub contribution: Contribution,
    /// Every file nvcc read, as absolute paths (the source and its headers).
    pub deps: Vec<PathBuf>,
    /// The user's folders its `#include`s search (the source's, each `-I`).
    pub search: Vec<PathBuf>,
    /// Why this result is not cached (an input changed while nvcc ran).
    pub unstable: Option<String>,
    /// Why the cached result was not used though every stat said it held
    /// (preprocessing disproved it), as a warning.
    pub disproved: Option<String>,
    /// Whether nvcc ran (false: reused from the cache).
    pub ran: bool,
    /// The object of a host-code library job (`$OUT_DIR/occ/<stem>.o`),
    /// on each of its per-arch outputs.
    pub object: Option<PathBuf>,
}

impl Job {
    /// The stem of every file this job leaves in `$OUT_DIR/occ`: its name,
    /// and a library job's per-arch stems (`<stem>.<arch>`).
    pub fn file_stems(&self) -> Vec<String> {
        let mut stems: Vec<String> = match &self.kind {
            JobKind::Library { archs, stem } => {
                archs.iter().map(|a| format!("{stem}.{a}")).collect()
            }
            JobKind::Device => Vec::new(),
        };
        stems.push(self.name.clone());
        stems
    }
}
