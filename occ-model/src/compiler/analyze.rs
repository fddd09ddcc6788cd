//! From nvcc's outputs to the manifest: parse each job's ptxas log and PTX,
//! name each kernel, and run the tuner on each kernel × arch. Pure: the
//! build shell reads the files and hands over their text.

use crate::error::{Error, Result};
use crate::model::occupancy::KernelResources;
use crate::schema::manifest::{CodeLaunch, Compiled, Contribution, Facts, LaunchBounds};
use crate::{compiler::names, compiler::params, compiler::ptx, compiler::ptxas};
use std::collections::BTreeMap;

/// The resources the occupancy model needs, from the compiler's numbers
/// (a job's, or a manifest's or lock's record's `facts`).
pub fn model_of(f: &Facts) -> KernelResources {
    KernelResources {
        registers: f.registers,
        static_smem: f.static_smem,
        barriers: f.barriers.unwrap_or(1),
        max_threads_per_block: f.launch_bounds.max_threads_per_block(),
        ..KernelResources::default()
    }
}

/// What one nvcc job (one `.cu` file for one arch) left, as text.
#[derive(Debug, Clone, Copy)]
pub struct JobText<'a> {
    /// The source, relative to the crate root (`/` separators).
    pub source: &'a str,
    /// The target arch as given to nvcc (`sm_90a`).
    pub arch: &'a str,
    /// The stem of the job's device code files (`<name>.cubin`, `<name>.ptx`).
    pub name: &'a str,
    /// The job's extra nvcc arguments (for `-maxrregcount`).
    pub args: &'a [String],
    /// nvcc's stderr and stdout (the ptxas `-v` log).
    pub log: &'a str,
    /// The PTX text.
    pub ptx: &'a str,
    /// What nvcc's intermediate files said about the kernels' signatures.
    pub signatures: &'a params::Signatures,
    /// The `<<<...>>>` launches of the source's host code, read from the
    /// job's preprocessed text ([`crate::compiler::launches::read`]).
    pub launches: &'a [CodeLaunch],
}

/// What one job contributes to a build: each kernel its PTX defines, named,
/// with its parameters and the numbers ptxas gave it, checked against the
/// object (`accounted`). `cubin_hash` is [`crate::schema::measured::cubin_hash`]
/// of the job's cubin (`None` when it has none). Called once, when the job
/// runs; the result is kept with the job's record.
///
/// Long because it joins the job's log, PTX and signatures per kernel in
/// one pass.
pub fn contribution(job: JobText<'_>, cubin_hash: Option<&str>) -> Result<Contribution> {
    let parse_error = |detail: String| Error::Parse {
        file: job.source.to_string(),
        arch: job.arch.to_string(),
        detail,
    };
    let log = ptxas::parse_log(job.log).map_err(|e| parse_error(e.to_string()))?;
    let entries: BTreeMap<String, ptx::PtxEntry> = ptx::parse_entries(job.ptx)
        .into_iter()
        .map(|e| (e.name.clone(), e))
        .collect();
    accounted(job.source, job.arch, &log, &entries)?;
    // Demangled once per job, when a kernel with C linkage needs them.
    let stubs = std::cell::OnceCell::new();
    // By symbol: a kernel the log names twice is its last record.
    let mut kernels: BTreeMap<&str, Compiled> = BTreeMap::new();
    for record in &log.kernels {
        if record.arch.as_deref().is_some_and(|a| a != job.arch) {
            continue;
        }
        let directives = entries.get(&record.name);
        let narrow = |v: u64, what: &str| {
            u32::try_from(v).map_err(|_| {
                parse_error(format!(
                    "{what} of {} is {v}, more than occ can hold",
                    record.name
                ))
            })
        };
        // `accounted` has ruled out a kernel without its count.
        let registers = record.registers.ok_or_else(|| {
            parse_error(format!("no `Used N registers` line for {}", record.name))
        })?;
        let facts = Facts {
            registers,
            static_smem: narrow(record.static_smem, "static smem")?,
            spill_stores: narrow(record.spill_stores, "spill stores")?,
            spill_loads: narrow(record.spill_loads, "spill loads")?,
            stack_frame: narrow(record.stack_frame, "stack frame")?,
            cumulative_stack: record
                .cumulative_stack
                .map(|v| narrow(v, "stack"))
                .transpose()?,
            barriers: record.barriers,
            launch_bounds: directives.map(launch_bounds).unwrap_or_default(),
            maxrregcount: register_cap(record, job.args),
        };
        let n = names::kernel_name(&record.name);
        let ptx_params = directives.map(|d| d.params.as_slice()).unwrap_or_default();
        let stubs = stubs.get_or_init(|| params::StubNames::of(job.signatures));
        let params =
            params::kernel_params(&record.name, &n.short, ptx_params, job.signatures, stubs);
        kernels.insert(
            &record.name,
            Compiled {
                name: record.name.clone(),
                demangled: n.demangled,
                base_name: n.base,
                short_name: n.short,
                params,
                facts,
                cmem: record
                    .cmem
                    .iter()
                    .map(|(bank, bytes)| (bank.to_string(), *bytes))
                    .collect(),
                warnings: warnings(record),
                cubin: Some(format!("{}.cubin", job.name)),
                ptx: Some(format!("{}.ptx", job.name)),
                cubin_hash: cubin_hash.map(str::to_string),
            },
        );
    }
    Ok(Contribution {
        source: job.source.to_string(),
        arch: job.arch.to_string(),
        kernels: kernels.into_values().collect(),
        launches: job.launches.to_vec(),
    })
}

/// The kernel list comes from the object: the PTX's entries (the cubin
/// is ptxas's output of that PTX) are the job's kernels, and the log must
/// hold lines for every one of them and for no other
/// ([`Error::Unaccounted`]), each with its resource lines (`Used N
/// registers`, `N bytes stack frame, N bytes spill stores, ...`); a log
/// that lost its lines (a launcher that hid or filtered nvcc's stderr) is
/// an error, never an empty kernel table or a kernel of 0 registers.
fn accounted(
    file: &str,
    arch: &str,
    log: &ptxas::Log,
    entries: &BTreeMap<String, ptx::PtxEntry>,
) -> Result<()> {
    let logged: std::collections::BTreeSet<&str> = log
        .kernels
        .iter()
        .filter(|k| k.arch.as_deref().is_none_or(|a| a == arch))
        .map(|k| k.name.as_str())
        .collect();
    let missing: Vec<String> = entries
        .keys()
        .filter(|name| !logged.contains(name.as_str()))
        .cloned()
        .collect();
    let extra: Vec<String> = logged
        .iter()
        .filter(|name| !entries.contains_key(**name))
        .map(|name| name.to_string())
        .collect();
    let uncounted: Vec<String> = log
        .kernels
        .iter()
        .filter(|k| {
            k.arch.as_deref().is_none_or(|a| a == arch) && !(k.registers.is_some() && k.framed)
        })
        .map(|k| k.name.clone())
        .collect();
    if missing.is_empty() && extra.is_empty() && uncounted.is_empty() {
        return Ok(());
    }
    Err(Error::Unaccounted(Box::new(crate::error::Unaccounted {
        file: file.to_string(),
        arch: arch.to_string(),
        missing,
        extra,
        uncounted,
    })))
}

/// The one rule that assigns kernels their Rust identifiers: each kernel of
/// `keys` (`(symbol, source)`, in any order, each once however often
/// given) by its unique Rust identifier ([`names::unique_idents`]; the
/// same `extern "C"` name in two files gets the file's hash). Depends only
/// on the set of kernels. The assembly calls it once over every kernel of
/// a build (`crate::assemble`), and reading a lock over the lock's.
pub fn idents<'k>(
    keys: impl IntoIterator<Item = (&'k str, &'k str)>,
) -> BTreeMap<(&'k str, &'k str), String> {
    let keys: std::collections::BTreeSet<(&str, &str)> = keys.into_iter().collect();
    let unique = names::unique_idents(keys.iter().map(|(name, _)| *name));
    let mut taken: std::collections::BTreeSet<String> = Default::default();
    keys.into_iter()
        .map(|key @ (name, source)| {
            let mut ident = unique
                .get(name)
                .cloned()
                .unwrap_or_else(|| names::rust_ident(name));
            // `device_code` was a module of kernels.rs (kept so idents stay);
            // the same extern "C" name in two files gets the file's hash.
            if ident == "device_code" || taken.contains(&ident) {
                ident = format!("{ident}_{}", names::short_hash(source));
            }
            taken.insert(ident.clone());
            (key, ident)
        })
        .collect()
}

/// A kernel's ptxas warnings, typed, each once (a warning of its run can
/// also name it), in log order.
fn warnings(record: &ptxas::KernelRecord) -> Vec<ptxas::Warning> {
    let mut out: Vec<ptxas::Warning> = Vec::new();
    for w in record
        .diagnostics
        .iter()
        .filter_map(ptxas::Diagnostic::warning)
    {
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// The register cap `-maxrregcount` set for a kernel, as ptxas applied it,
/// not as asked: ptxas's note for the kernel (`Overriding maximum register
/// limit 256 for 'k' with  24 of maxrregcount option`), else the cap its
/// run's warning adjusted the request to (`… adjusting per thread register
/// count of 16 to lower bound of 24`; a kernel whose own bounds override
/// the cap gets no note), else none when ptxas ignored a too-big request,
/// else the request (a ptxas that prints neither). `None` without
/// `-maxrregcount`.
pub fn register_cap(record: &ptxas::KernelRecord, args: &[String]) -> Option<u32> {
    let requested = maxrregcount(args)?;
    if let Some(cap) = record
        .diagnostics
        .iter()
        .find_map(ptxas::Diagnostic::register_cap)
    {
        return Some(cap);
    }
    let mut ignored = false;
    for w in record
        .diagnostics
        .iter()
        .filter_map(ptxas::Diagnostic::warning)
    {
        match w.kind {
            ptxas::WarningKind::RegisterCapAdjusted { applied, .. } => return Some(applied),
            ptxas::WarningKind::RegisterCapIgnored { .. } => ignored = true,
            _ => {}
        }
    }
    (!ignored).then_some(requested)
}

/// The last `-maxrregcount N` (`-maxrregcount=N`, `--maxrregcount …`) in
/// nvcc arguments: the one nvcc applies.
pub fn maxrregcount(args: &[String]) -> Option<u32> {
    let mut found = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let name = arg.trim_start_matches('-');
        if name == "maxrregcount" {
            found = iter.next().and_then(|v| v.parse().ok()).or(found);
        } else if let Some(v) = name.strip_prefix("maxrregcount=") {
            found = v.parse().ok().or(found);
        }
    }
    found
}

fn launch_bounds(e: &ptx::PtxEntry) -> LaunchBounds {
    LaunchBounds {
        max_threads: e.maxntid,
        req_threads: e.reqntid,
        min_blocks_per_sm: e.minnctapersm,
        max_registers: e.maxnreg,
        max_cluster_rank: e.maxclusterrank,
        cluster_dims: e.reqnctapercluster,
        explicit_cluster: e.explicitcluster,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::manifest::{Manifest, Origin, Warning, WarningKind};

    #[test]
    fn identifiers_depend_on_the_set_of_kernels_alone() {
        let keys = [
            ("scale", "kernels/b.cu"),
            ("scale", "kernels/a.cu"),
            ("device_code", "kernels/a.cu"),
            ("_Z3addPf", "kernels/a.cu"),
        ];
        let ids = idents(keys);
        // The same `extern "C"` name in two files: the second (by source)
        // gets its file's hash, as does a kernel named `device_code`.
        assert_eq!(ids[&("scale", "kernels/a.cu")], "scale");
        let hashed = format!("scale_{}", names::short_hash("kernels/b.cu"));
        assert_eq!(ids[&("scale", "kernels/b.cu")], hashed);
        let code = format!("device_code_{}", names::short_hash("kernels/a.cu"));
        assert_eq!(ids[&("device_code", "kernels/a.cu")], code);
        // Any order, any repetition: the same names.
        let mut again: Vec<(&str, &str)> = keys.iter().rev().copied().collect();
        again.extend(keys);
        assert_eq!(idents(again), ids);
    }

    /// The manifest of one job of `kernels.cu` on `arch`, given `args`,
    /// with the PTX of the run that printed `log` (tests/fixtures/regen.sh).
    fn manifest(arch: &str, log: &str, args: &[&str]) -> Manifest {
        let ptx = match arch {
            "sm_80" => include_str!("../../../tests/fixtures/ptx-13.5-kernels-sm_80.ptx"),
            _ => include_str!("../../../tests/fixtures/ptx-13.5-kernels-sm_90.ptx"),
        };
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let signatures = params::Signatures::default();
        let job = JobText {
            source: "kernels/kernels.cu",
            arch,
            name: "kernels",
            args: &args,
            log,
            ptx,
            signatures: &signatures,
            launches: &[],
        };
        let jobs = [contribution(job, None).unwrap()];
        crate::assemble::manifest(&crate::assemble::Assembly {
            package: "p",
            origin: Origin::Nvcc,
            nvcc: "V13.5.37",
            archs: &[arch.to_string()],
            jobs: &jobs,
            launches: &[],
            dynamic_smem: &[],
            measured: &[],
            device_code: &[],
            others: None,
        })
        .unwrap()
    }

    /// nvcc 13.5, `-cubin -arch=sm_80 -maxrregcount=16 -Xptxas -v
    /// kernels.cu` (tests/fixtures/regen.sh): ptxas raises the cap to 24.
    #[test]
    fn the_cap_recorded_is_the_one_ptxas_applied_with_its_warning() {
        let log = include_str!("../../../tests/fixtures/ptxas-13.5-maxrregcount16-sm_80.log");
        let m = manifest("sm_80", log, &["-maxrregcount", "16"]);
        let adjusted = Warning {
            kind: WarningKind::RegisterCapAdjusted {
                requested: 16,
                applied: 24,
            },
            text:
                "For profile sm_80 adjusting per thread register count of 16 to lower bound of 24"
                    .into(),
        };
        assert_eq!(m.kernels.len(), 13);
        for k in &m.kernels {
            let a = &k.archs["sm_80"];
            // Every kernel, also those whose launch bounds override the cap
            // (no note names them): the cap the file got is 24.
            assert_eq!(a.facts.maxrregcount, Some(24), "{}", k.name);
            assert_eq!(a.warnings.first(), Some(&adjusted), "{}", k.name);
            // Each warning once, though the run's and the kernel's name it.
            let mut once = a.warnings.clone();
            once.dedup();
            assert_eq!(once, a.warnings);
        }
        let recursive = m
            .kernels
            .iter()
            .find(|k| k.name == "_Z15calls_recursivePi")
            .unwrap();
        assert_eq!(
            recursive.archs["sm_80"]
                .warnings
                .iter()
                .map(|w| &w.kind)
                .collect::<Vec<_>>(),
            [&adjusted.kind, &WarningKind::StackUnknown]
        );
        // Without -maxrregcount, no cap, whatever the log says.
        let m = manifest("sm_80", log, &[]);
        assert!(m
            .kernels
            .iter()
            .all(|k| k.archs["sm_80"].facts.maxrregcount.is_none()));
    }

    /// nvcc 13.5, `-cubin -arch=sm_90 -maxrregcount=300 -Xptxas -v
    /// kernels.cu` (tests/fixtures/regen.sh): ptxas caps at 255 the kernels
    /// it names and ignores the rest.
    #[test]
    fn a_cap_above_the_maximum_is_the_maximum_or_none() {
        let log = include_str!("../../../tests/fixtures/ptxas-13.5-maxrregcount300-sm_90.log");
        let m = manifest("sm_90", log, &["-maxrregcount=300"]);
        let cap = |name: &str| {
            m.kernels.iter().find(|k| k.name == name).unwrap().archs["sm_90"]
                .facts
                .maxrregcount
        };
        assert_eq!(cap("saxpy"), Some(255));
        assert_eq!(cap("_Z9lb_kernelPf"), None);
    }
}
