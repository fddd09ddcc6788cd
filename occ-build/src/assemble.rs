//! Stage 5: the manifest, from the jobs' output (parsed by the pure core,
//! [`occ_model::analyze`]) or, without nvcc, from the committed lock.
//!
//! Then `occ_model::launch::declare` applies build.rs's launches of today
//! (also over a lock), each cubin gets its `cubin_hash`, the lock's
//! measurements of the kernels × archs built are attached
//! (`Manifest::measured`), and nvcc's own warnings are deduplicated and capped.

use crate::cargo::Directives;
use crate::error::Result;
use crate::inputs::Inputs;
use crate::job::JobOutput;
use occ_model::analyze::{self, JobText};
use occ_model::lock::Lock;
use occ_model::manifest::Manifest;
use occ_model::measured;
use occ_model::{cliff, launch};

/// The manifest of a live build.
pub(crate) fn manifest(
    inputs: &Inputs,
    nvcc_version: &str,
    outputs: &[JobOutput],
) -> Result<Manifest> {
    let texts = outputs.iter().map(|o| JobText {
        source: &o.job.source,
        arch: &o.job.arch,
        name: &o.job.name,
        args: &o.job.args,
        log: &o.log,
        ptx: &o.ptx,
        signatures: &o.signatures,
    });
    let mut manifest =
        analyze::build_manifest(&inputs.package, nvcc_version, &inputs.archs, texts)?;
    launch::declare(&mut manifest, &inputs.launches)?;
    hash_cubins(&mut manifest, &inputs.out_dir);
    if let Some(lock) = &inputs.lock {
        manifest.measured = measured_of(lock, &manifest);
    }
    cliff::record(&mut manifest)?;
    Ok(manifest)
}

/// Records each kernel × arch's [`measured::cubin_hash`] of its cubin
/// (in `out_dir`), which a measurement is checked against; a cubin that
/// cannot be read gets none, so its measurements are taken as they are.
fn hash_cubins(manifest: &mut Manifest, out_dir: &std::path::Path) {
    let mut hashes: std::collections::BTreeMap<String, String> = Default::default();
    for kernel in &mut manifest.kernels {
        for ka in kernel.archs.values_mut() {
            if ka.cubin.is_empty() {
                continue;
            }
            let hash = hashes.entry(ka.cubin.clone()).or_insert_with(|| {
                std::fs::read(out_dir.join(&ka.cubin))
                    .map(|bytes| measured::cubin_hash(&bytes))
                    .unwrap_or_default()
            });
            ka.cubin_hash = hash.clone();
        }
    }
}

/// The lock's measurements of kernels × archs in `manifest`, each under
/// its kernel's source of today ([`Manifest::find`]: a moved file keeps
/// its measurements).
fn measured_of(lock: &Lock, manifest: &Manifest) -> Vec<measured::Measured> {
    measured::rebase(&lock.measured, |m| {
        manifest
            .find(&m.kernel, &m.source)
            .filter(|k| k.archs.contains_key(&m.arch))
            .map(|k| k.source.clone())
    })
}

/// The manifest of a build without nvcc: the lock's numbers for the
/// build's archs, no device code, and one warning that says so.
pub(crate) fn from_lock(
    inputs: &Inputs,
    lock: &Lock,
    reason: &str,
    directives: &mut Directives,
) -> Result<Manifest> {
    let mut manifest = lock.to_manifest(&inputs.archs, &inputs.lock_path)?;
    // The declarations are build.rs's of today, not the lock's.
    launch::declare(&mut manifest, &inputs.launches)?;
    manifest.measured = measured_of(lock, &manifest);
    cliff::record(&mut manifest)?;
    let todo = if inputs.no_nvcc.is_some() {
        "unset it to build with nvcc"
    } else {
        "install CUDA (`cargo occ toolkit install`) or set NVCC to build it"
    };
    directives.warn(format!(
        "occ: no nvcc ({reason}); using the numbers recorded in {} (nvcc {}) instead of live ones; \
         kernels.rs has no CUBIN/PTX device code in this build; {todo}",
        inputs.display(&inputs.lock_path),
        lock.nvcc
    ));
    // Sources the lock does not know have no kernels in this build: say so
    // once, rather than let code that names their kernels fail to compile.
    let unknown: Vec<&String> = inputs
        .sources
        .iter()
        .filter(|s| !lock.kernels.iter().any(|k| k.source == **s))
        .collect();
    if !unknown.is_empty() {
        directives.warn(format!(
            "occ: {} {} not in {} (no kernels, or added since it was blessed): their kernels are \
             missing from this build; build with nvcc and run `cargo occ bless`",
            unknown
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            if unknown.len() == 1 { "is" } else { "are" },
            inputs.display(&inputs.lock_path)
        ));
    }
    Ok(manifest)
}
