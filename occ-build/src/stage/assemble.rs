//! Stage 5: what each job contributed ([`occ_model::compiler::analyze::contribution`]:
//! its kernels as the compiler left them, with its cubin's hash, worked
//! out when the job ran and kept with its record), and the
//! one assembly of the manifest ([`occ_model::assemble`]) from those, or,
//! without nvcc, from the committed lock's records. build.rs's launches
//! of today are declared, the lock's measurements of the kernels × archs
//! built are attached, and each kernel × arch is made whole, once.

use crate::leaf::directives::Directives;
use crate::leaf::error::{Error, Result};
use crate::leaf::job::JobOutput;
use crate::stage::inputs::Inputs;
use occ_model::assemble::{self, Assembly, Contribution, Judged};
use occ_model::schema::lock::Lock;
use occ_model::schema::manifest::{DeviceCode, Manifest, Origin};

/// What each job contributed (parsed when it ran, or kept with its
/// record), in the order of `outputs`.
pub(crate) fn contributions(outputs: &[JobOutput]) -> Vec<Contribution> {
    outputs.iter().map(|o| o.contribution.clone()).collect()
}

/// Every number of a live build ([`assemble::judge`]), before its source
/// lines are located; `lock` is the committed lock, whose measurements of
/// the kernels × archs built are attached; `others`, the other parts of
/// this run (`parts::theirs`), whose kernels join this part's.
pub(crate) fn judge(
    inputs: &Inputs,
    nvcc_version: &str,
    jobs: &[Contribution],
    lock: Option<&Lock>,
    device_code: &[DeviceCode],
    others: Option<&Manifest>,
) -> Result<Judged> {
    let measured = lock.map_or(&[][..], |l| &l.measured[..]);
    Ok(assemble::judge(&Assembly {
        package: &inputs.package,
        origin: Origin::Nvcc,
        nvcc: nvcc_version,
        archs: &inputs.archs,
        jobs,
        launches: &inputs.launches,
        dynamic_smem: &inputs.dynamic_smem,
        measured,
        device_code,
        others,
    })?)
}

/// The manifest of a build without nvcc: the lock's numbers for the
/// build's archs, no device code, and one warning that says so; with the
/// other parts of this run (`others`) as a build with nvcc has them.
pub(crate) fn from_lock(
    inputs: &Inputs,
    lock: &Lock,
    reason: &str,
    device_code: &[DeviceCode],
    others: Option<&Manifest>,
    directives: &mut Directives,
) -> Result<Manifest> {
    lacking(inputs, lock)?;
    let archs = lock.recorded(&inputs.archs, &inputs.lock_path)?;
    // This part's kernels only: the lock holds every part's.
    let jobs = lock.contributions(&archs, &inputs.sources, &inputs.lock_path)?;
    // The declarations are build.rs's of today, not the lock's.
    let manifest = assemble::manifest(&Assembly {
        package: &lock.package,
        origin: Origin::Lock,
        nvcc: &lock.nvcc,
        archs: &archs,
        jobs: &jobs,
        launches: &inputs.launches,
        dynamic_smem: &inputs.dynamic_smem,
        measured: &lock.measured,
        device_code,
        others,
    })?;
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
    let known: std::collections::HashSet<&str> =
        lock.kernels.iter().map(|k| k.source.as_str()).collect();
    let unknown: Vec<&String> = inputs
        .sources
        .iter()
        .filter(|s| !known.contains(s.as_str()))
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

/// Refuses a build without nvcc for archs the lock has no numbers of: one
/// it does not record at all, or one it lacks of some kernel of this
/// part's sources (recorded by another part, or a lock blessed before the
/// arch was added here), naming every such arch in one error
/// ([`Error::LockLacksArchs`]) rather than dropping the rows.
fn lacking(inputs: &Inputs, lock: &Lock) -> Result<()> {
    let archs = if inputs.archs.is_empty() {
        &lock.archs
    } else {
        &inputs.archs
    };
    let mut lacks = Vec::new();
    for arch in archs {
        if !lock.archs.contains(arch) {
            lacks.push((arch.clone(), "all kernels".to_string()));
            continue;
        }
        let kernels: Vec<&str> = lock
            .kernels
            .iter()
            .filter(|k| inputs.sources.contains(&k.source) && !k.archs.contains_key(arch))
            .map(|k| k.base_name.as_str())
            .collect();
        if let Some(first) = kernels.first() {
            let more = match kernels.len() - 1 {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            lacks.push((arch.clone(), format!("{first}{more}")));
        }
    }
    if lacks.is_empty() {
        return Ok(());
    }
    Err(Error::LockLacksArchs {
        lock: inputs.display(&inputs.lock_path),
        archs: lacks,
    })
}
