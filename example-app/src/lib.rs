//! example-app: five CUDA kernels built with occ-build, each held back by a
//! different limiter at its launch, launched with cudarc on a GPU and
//! described by an occupancy plan without one.
//!
//! - [`launches`]: each kernel's launch site and the limiter it claims;
//! - [`plan`]: the occupancy report per kernel × arch (no GPU needed);
//! - [`gpu`]: runs every kernel, checks it against a CPU reference, and
//!   compares occ's numbers with the driver's;
//! - [`sweep`]: occ's blocks per SM beside the driver's at many launches;
//! - [`tune`]: times each site's candidate launches on the GPU (`--tune`).

/// The constants and device code occ-build generated (`$OUT_DIR/occ/kernels.rs`).
#[allow(dead_code, missing_docs)]
pub mod kernels {
    include!(concat!(env!("OUT_DIR"), "/occ/kernels.rs"));
}

pub mod gpu;
pub mod launches;
pub mod plan;
pub mod sweep;
pub mod tune;

/// The manifest occ-build wrote for this crate's kernels.
pub const MANIFEST_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/occ/manifest.json"));

/// The parsed [`MANIFEST_JSON`].
pub fn manifest() -> anyhow::Result<occ_model::schema::manifest::Manifest> {
    occ_model::schema::manifest::Manifest::from_json(
        MANIFEST_JSON,
        std::path::Path::new("occ/manifest.json"),
    )
    .map_err(|e| anyhow::anyhow!("embedded manifest: {e}"))
}
