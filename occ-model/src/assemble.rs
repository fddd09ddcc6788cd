//! The one assembly of a manifest. Every build, with nvcc or from the
//! committed lock, finishes its manifest here, in one pass over facts
//! recorded before it:
//!
//! - what each job contributed ([`Contribution`]: its kernels as the
//!   compiler left them, worked out once when the job ran by
//!   [`crate::compiler::analyze::contribution`] and kept with its record, or the
//!   lock's records for a build without nvcc, [`crate::schema::lock::Lock::contributions`]);
//! - build.rs's declared launches, the lock's measurements, the device
//!   code embedded, and the source lines nvdisasm located;
//! - the other parts of the run (the `Build`s of one build script into one
//!   `OUT_DIR`, [`Assembly::others`]), as their own assemblies made them:
//!   their kernels, device code and measurements join this build's, and
//!   every kernel's identifier is assigned here, once, over them all, so
//!   that the manifest assembled is the one written.
//!
//! Each kernel × arch is built once, whole: its best launch, its declared
//! launch, its cliffs at the launch it is judged at, its lines. Nothing is
//! filled in later.
//!
//! Source lines are wanted only where registers matter
//! ([`crate::model::cliff::registers_matter`]), which depends on the judged
//! launch, so the assembly has two steps: [`judge`] works out every
//! number, [`Judged::lines_wanted`] says which kernels' lines the shell
//! should locate, and [`Judged::finish`] makes the manifest with them.
//!
//! ```
//! use occ_model::assemble::{self, Assembly};
//! use occ_model::schema::manifest::Origin;
//! let archs = ["sm_80".to_string()];
//! let assembly = Assembly {
//!     package: "p",
//!     origin: Origin::Nvcc,
//!     nvcc: "V13.5.37",
//!     archs: &archs,
//!     jobs: &[],
//!     launches: &[],
//!     dynamic_smem: &[],
//!     measured: &[],
//!     device_code: &[],
//!     others: None,
//! };
//! let judged = assemble::judge(&assembly).unwrap();
//! assert!(judged.lines_wanted().is_empty());
//! let manifest = judged.finish(&Default::default());
//! assert!(manifest.kernels.is_empty());
//! assert_eq!(manifest, assemble::manifest(&assembly).unwrap());
//! ```

use crate::compiler::{analyze, launches};
use crate::error::{Error, Result};
use crate::model::declared::{self, Launch};
use crate::model::suggest::DynamicSmem;
use crate::schema::lock::Lock;
use crate::schema::manifest::{
    Cliffs, CodeLaunch, DeviceCode, Kernel, KernelArch, Manifest, Origin, Resources, SourceLines,
    SCHEMA_VERSION,
};
use crate::schema::measured::{self, Measured};
use crate::{compiler::names, model::cliff};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The schema's types this module assembles from (defined in [`crate::schema::manifest`]).
pub use crate::schema::manifest::{Compiled, Contribution};

/// Everything a build's manifest is made of.
#[derive(Debug, Clone, Copy)]
pub struct Assembly<'a> {
    /// The cargo package.
    pub package: &'a str,
    /// Where the numbers come from.
    pub origin: Origin,
    /// The nvcc version of the numbers.
    pub nvcc: &'a str,
    /// The archs, in build order.
    pub archs: &'a [String],
    /// What each job contributed.
    pub jobs: &'a [Contribution],
    /// build.rs's declared launches, `(pattern, launch)` in order.
    pub launches: &'a [(String, Launch)],
    /// build.rs's declared dynamic shared memory, `(pattern, rule)` in
    /// order (`Build::dynamic_smem`).
    pub dynamic_smem: &'a [(String, DynamicSmem)],
    /// The lock's measurements; those of kernels × archs of this build are
    /// kept, each under its kernel's source of today (a moved file keeps
    /// its measurements).
    pub measured: &'a [Measured],
    /// The device code embedded.
    pub device_code: &'a [DeviceCode],
    /// The other parts of this run of the build script, as their builds
    /// assembled them (`manifest.json`'s kernels of their sources, their
    /// device code and measurements): kept as they are but for each
    /// kernel's identifier, made unique over this build and them; a kernel
    /// of a source this build compiles is this build's. `None` for a
    /// build alone.
    pub others: Option<&'a Manifest>,
}

/// Source lines located by nvdisasm, by `(cubin, symbol)`.
pub type Lines = BTreeMap<(String, String), SourceLines>;

/// A build's numbers, all worked out, before its source lines are known.
#[derive(Debug, Clone)]
pub struct Judged {
    package: String,
    origin: Origin,
    nvcc: String,
    archs: Vec<String>,
    kernels: Vec<JudgedKernel>,
    device_code: Vec<DeviceCode>,
    measured: Vec<Measured>,
    /// The other parts' kernels, with their identifiers of this assembly.
    others: Vec<Kernel>,
    /// The C++ launches of every part's sources.
    launches: Vec<CodeLaunch>,
}

#[derive(Debug, Clone)]
struct JudgedKernel {
    compiled: Compiled,
    ident: String,
    source: String,
    archs: BTreeMap<String, JudgedArch>,
}

#[derive(Debug, Clone)]
struct JudgedArch {
    resources: Resources,
    cliffs: Option<Cliffs>,
    compiled: Compiled,
}

/// Works out every number of the build: each kernel's identifier (unique
/// over the build), and on each arch its best launch, its declared launch
/// (build.rs's pattern, else its `__launch_bounds__`/`.reqntid`) and its
/// cliffs there. Errors: a pattern that matches no kernel, two that give
/// a kernel different launches, a launch that cannot run a kernel.
pub fn judge(a: &Assembly<'_>) -> Result<Judged> {
    let own = group(a.jobs);
    let sources: BTreeSet<&str> = a.jobs.iter().map(|j| j.source.as_str()).collect();
    let others: Vec<&Kernel> = a
        .others
        .iter()
        .flat_map(|m| &m.kernels)
        .filter(|k| !sources.contains(k.source.as_str()) && !own.contains_key(&key_of(k)))
        .collect();
    let idents = idents_over(&own, &others);
    let names: Vec<[&str; 4]> = own
        .iter()
        .filter_map(|(key, archs)| {
            let k = archs.values().next()?;
            Some([
                k.name.as_str(),
                k.base_name.as_str(),
                k.short_name.as_str(),
                idents[key].as_str(),
            ])
        })
        .collect();
    declared::check_patterns("launch", &names, a.launches)?;
    declared::check_patterns("dynamic_smem", &names, a.dynamic_smem)?;
    let code = code_launches(a.jobs);
    let named = self::names(a.jobs);
    let named: Vec<&Kernel<()>> = named.iter().collect();
    let by_code = launches::by_kernel(&code, &named);
    let mut kernels = Vec::with_capacity(own.len());
    for (key @ (_, source), archs) in &own {
        let Some(first) = archs.values().next() else {
            continue;
        };
        let ident = idents[key].clone();
        let names = [
            first.name.clone(),
            first.base_name.clone(),
            first.short_name.clone(),
            ident.clone(),
        ];
        let by_build = declared::by_build(&first.base_name, &names, a.launches, Launch::in_words)?;
        let smem = declared::by_build(&first.base_name, &names, a.dynamic_smem, |d| {
            format!("{} of dynamic shared memory", d.describe())
        })?;
        let by_code = by_code
            .get(&(key.0.to_string(), key.1.to_string()))
            .map_or(&[][..], Vec::as_slice);
        let mut judged = BTreeMap::new();
        for (arch, compiled) in archs {
            judged.insert(
                arch.to_string(),
                judge_arch(arch, compiled, by_build, by_code, smem)?,
            );
        }
        kernels.push(JudgedKernel {
            compiled: (*first).clone(),
            ident,
            source: source.to_string(),
            archs: judged,
        });
    }
    let others: Vec<Kernel> = others
        .into_iter()
        .map(|k| Kernel {
            ident: idents[&key_of(k)].clone(),
            ..k.clone()
        })
        .collect();
    let measured = measured_of(a, &kernels, &others);
    let mut launches: Vec<CodeLaunch> = a
        .others
        .iter()
        .flat_map(|m| &m.launches)
        .filter(|l| !sources.contains(l.source.as_str()))
        .cloned()
        .chain(code)
        .collect();
    launches.sort();
    let (package, nvcc, origin, archs, device_code) = match a.others {
        // The first part gives the package and nvcc version; a part that
        // stood on the lock makes the whole from the lock.
        Some(m) => (
            m.package.clone(),
            m.nvcc.clone(),
            if m.origin == Origin::Lock {
                Origin::Lock
            } else {
                a.origin
            },
            union(&m.archs, a.archs),
            device_code(&m.device_code, a.device_code, &sources),
        ),
        None => (
            a.package.to_string(),
            a.nvcc.to_string(),
            a.origin,
            a.archs.to_vec(),
            a.device_code.to_vec(),
        ),
    };
    Ok(Judged {
        package,
        origin,
        nvcc,
        archs,
        kernels,
        device_code,
        measured,
        others,
        launches,
    })
}

/// The C++ launches of each source, one per place over its jobs (one per
/// arch): [`launches::merge`], so that a launch is constant only where
/// every arch's preprocessed text agrees.
fn code_launches(jobs: &[Contribution]) -> Vec<CodeLaunch> {
    let mut by_source: BTreeMap<&str, Vec<&[CodeLaunch]>> = BTreeMap::new();
    for job in jobs {
        by_source
            .entry(job.source.as_str())
            .or_default()
            .push(&job.launches);
    }
    by_source
        .values()
        .flat_map(|per_arch| launches::merge(per_arch))
        .collect()
}

/// The kernels of `jobs`, each once by `(symbol, source)` (the order of
/// the kernel table), with what each arch's job compiled: the grouping
/// of [`judge`] and of [`names`].
fn group(jobs: &[Contribution]) -> BTreeMap<(&str, &str), BTreeMap<&str, &Compiled>> {
    let mut by_key: BTreeMap<(&str, &str), BTreeMap<&str, &Compiled>> = BTreeMap::new();
    for job in jobs {
        for k in &job.kernels {
            by_key
                .entry((k.name.as_str(), job.source.as_str()))
                .or_default()
                .insert(job.arch.as_str(), k);
        }
    }
    by_key
}

/// Each kernel's identifier, unique over this build's kernels and the
/// other parts': [`analyze::idents`] over them all, the one place a
/// build's identifiers are assigned (a manifest's kernels are read, never
/// named again).
fn idents_over<'k, V>(
    own: &BTreeMap<(&'k str, &'k str), V>,
    others: &[&'k Kernel],
) -> BTreeMap<(&'k str, &'k str), String> {
    analyze::idents(own.keys().copied().chain(others.iter().map(|k| key_of(k))))
}

/// A kernel's key in the table: `(symbol, source)`.
fn key_of(k: &Kernel) -> (&str, &str) {
    (k.name.as_str(), k.source.as_str())
}

/// The archs of `first`, then those of `then` it lacks: build order.
fn union(first: &[String], then: &[String]) -> Vec<String> {
    let mut archs = first.to_vec();
    archs.extend(then.iter().filter(|a| !first.contains(a)).cloned());
    archs
}

/// The other parts' device code (less any of this build's sources), then
/// this build's, by source; within one, the build order of archs.
fn device_code(
    others: &[DeviceCode],
    own: &[DeviceCode],
    sources: &BTreeSet<&str>,
) -> Vec<DeviceCode> {
    let mine: BTreeSet<(&str, Option<&str>)> = own
        .iter()
        .map(|o| (o.source.as_str(), o.arch.as_deref()))
        .collect();
    let mut blobs: Vec<DeviceCode> = others
        .iter()
        .filter(|b| !sources.contains(b.source.as_str()))
        .filter(|b| !mine.contains(&(b.source.as_str(), b.arch.as_deref())))
        .cloned()
        .collect();
    blobs.extend(own.iter().cloned());
    blobs.sort_by(|a, b| a.source.cmp(&b.source));
    blobs
}

/// The measurements of the kernels × archs the table holds: the other
/// parts' of their kernels, and the lock's of this build's, each under
/// its kernel's source of today (a moved file keeps its measurements);
/// each key once.
fn measured_of(a: &Assembly<'_>, kernels: &[JudgedKernel], others: &[Kernel]) -> Vec<Measured> {
    let own = measured::rebase(a.measured, |m| {
        names::find_kernel(kernels, &m.kernel, &m.source, |k| {
            (k.compiled.name.as_str(), k.source.as_str())
        })
        .filter(|k| k.archs.contains_key(&m.arch))
        .map(|k| k.source.clone())
    });
    if a.others.is_none() {
        return own;
    }
    let mut all: Vec<Measured> = a
        .others
        .iter()
        .flat_map(|m| &m.measured)
        .filter(|m| {
            others.iter().any(|k| {
                k.name == m.kernel && k.source == m.source && k.archs.contains_key(&m.arch)
            })
        })
        .filter(|m| !own.iter().any(|o| o.key() == m.key()))
        .cloned()
        .collect();
    all.extend(own);
    measured::sort(&mut all);
    all
}

/// The kernels `jobs` contributed, each once, grouped and named as
/// [`judge`] groups and names them (its identifier unique over them), with
/// its parameters and the archs it was compiled for, before anything is
/// judged: what a register cap that names a kernel is placed by
/// ([`crate::schema::manifest::lookup`] finds it).
pub fn names(jobs: &[Contribution]) -> Vec<Kernel<()>> {
    let own = group(jobs);
    let idents = idents_over(&own, &[]);
    own.iter()
        .filter_map(|(key @ (_, source), archs)| {
            let k = archs.values().next()?;
            Some(Kernel {
                name: k.name.clone(),
                demangled: k.demangled.clone(),
                base_name: k.base_name.clone(),
                short_name: k.short_name.clone(),
                ident: idents[key].clone(),
                source: source.to_string(),
                params: k.params.clone(),
                archs: archs.keys().map(|a| (a.to_string(), ())).collect(),
            })
        })
        .collect()
}

/// The manifest of a build that locates no source lines (one from the
/// lock, or with `Build::source_lines(false)`): [`judge`], then
/// [`Judged::finish`] with none.
pub fn manifest(a: &Assembly<'_>) -> Result<Manifest> {
    Ok(judge(a)?.finish(&Lines::new()))
}

/// The manifest a lock stands for: what a build without nvcc of every
/// source the lock records, on `archs` (all the lock's when empty), with
/// the launches the lock records build.rs declaring, assembles (the
/// lock's [`Lock::contributions`] and measurements, no device code and no
/// source lines). Errors name an arch the lock lacks.
pub fn lock_manifest(lock: &Lock, archs: &[String], path: &Path) -> Result<Manifest> {
    let archs = lock.recorded(archs, path)?;
    let sources: Vec<String> = lock
        .kernels
        .iter()
        .map(|k| k.source.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let jobs = lock.contributions(&archs, &sources, path)?;
    let declared = || {
        lock.kernels
            .iter()
            .flat_map(|k| k.archs.values())
            .filter_map(|r| r.declared.as_ref())
    };
    let launches: BTreeMap<String, Launch> = declared()
        .filter_map(|d| d.by_build().0.map(|(launch, pattern)| (pattern, launch)))
        .collect();
    let launches: Vec<(String, Launch)> = launches.into_iter().collect();
    let dynamic_smem: BTreeMap<String, DynamicSmem> = declared()
        .filter_map(|d| d.by_build().1.map(|(rule, pattern)| (pattern, rule)))
        .collect();
    let dynamic_smem: Vec<(String, DynamicSmem)> = dynamic_smem.into_iter().collect();
    manifest(&Assembly {
        package: &lock.package,
        origin: Origin::Lock,
        nvcc: &lock.nvcc,
        archs: &archs,
        jobs: &jobs,
        launches: &launches,
        dynamic_smem: &dynamic_smem,
        measured: &lock.measured,
        device_code: &[],
        others: None,
    })
}

/// One kernel on one arch: the best launch, the declared launch (build.rs's
/// `by_build`, else the kernel's bounds) and the cliffs at the judged one.
fn judge_arch(
    arch: &str,
    k: &Compiled,
    by_build: Option<&(String, Launch)>,
    by_code: &[launches::CodeBlock],
    smem: Option<&(String, DynamicSmem)>,
) -> Result<JudgedArch> {
    let occupancy_error = |detail: String| Error::Occupancy {
        kernel: k.name.clone(),
        arch: arch.to_string(),
        detail,
    };
    let by_build = by_build.map(|(pattern, launch)| (*launch, pattern.clone()));
    let smem = smem.map(|(pattern, rule)| (*rule, pattern.clone()));
    let (best, declared) =
        declared::judge_facts(arch, &k.facts, by_build, by_code, smem).map_err(|e| match e {
            declared::Judging::Best(detail) => occupancy_error(detail),
            declared::Judging::Declared { launch, by, detail } => Error::BadLaunch {
                kernel: k.base_name.clone(),
                arch: arch.to_string(),
                launch: format!("{}, declared by {}", launch.in_words(), by.describe()),
                detail,
            },
        })?;
    let resources = Resources {
        facts: k.facts.clone(),
        best,
        declared,
        cubin_hash: k.cubin_hash.clone(),
    };
    let cliffs = cliff::at_judged(arch, &resources).map_err(occupancy_error)?;
    Ok(JudgedArch {
        resources,
        cliffs,
        compiled: k.clone(),
    })
}

impl Judged {
    /// The kernels whose source lines are worth locating, by cubin: those
    /// with device code whose registers matter
    /// ([`cliff::registers_matter`]).
    pub fn lines_wanted(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut wanted: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for k in &self.kernels {
            for a in k.archs.values() {
                let Some(cubin) = &a.compiled.cubin else {
                    continue;
                };
                if cliff::registers_matter_at(&a.resources, a.cliffs.as_ref()) {
                    wanted
                        .entry(cubin.clone())
                        .or_default()
                        .insert(k.compiled.name.clone());
                }
            }
        }
        wanted
    }

    /// The manifest, with the source lines located (those of kernels
    /// [`Judged::lines_wanted`] named; a kernel without lines has none).
    pub fn finish(self, lines: &Lines) -> Manifest {
        let mut kernels = self
            .kernels
            .into_iter()
            .map(|k| {
                let archs = k
                    .archs
                    .into_iter()
                    .map(|(arch, a)| {
                        let lines = a
                            .compiled
                            .cubin
                            .as_ref()
                            .and_then(|cubin| lines.get(&(cubin.clone(), k.compiled.name.clone())))
                            .filter(|l| !l.is_empty())
                            .cloned();
                        let entry = KernelArch {
                            resources: a.resources,
                            cliffs: a.cliffs,
                            cmem: a.compiled.cmem,
                            warnings: a.compiled.warnings,
                            cubin: a.compiled.cubin,
                            ptx: a.compiled.ptx,
                            lines,
                        };
                        (arch, entry)
                    })
                    .collect();
                Kernel {
                    name: k.compiled.name,
                    demangled: k.compiled.demangled,
                    base_name: k.compiled.base_name,
                    short_name: k.compiled.short_name,
                    ident: k.ident,
                    source: k.source,
                    params: k.compiled.params,
                    archs,
                }
            })
            .chain(self.others)
            .collect::<Vec<_>>();
        kernels.sort_by(|a, b| a.name.cmp(&b.name).then(a.source.cmp(&b.source)));
        Manifest {
            schema: SCHEMA_VERSION,
            package: self.package,
            origin: self.origin,
            nvcc: self.nvcc,
            archs: self.archs,
            kernels,
            device_code: self.device_code,
            measured: self.measured,
            launches: self.launches,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiler::analyze::{contribution, JobText};
    use crate::compiler::params::Signatures;
    use crate::schema::lock::Lock;
    use std::path::Path;

    /// One job of `kernels/kernels.cu` on sm_80 with `-maxrregcount 16`,
    /// its log and PTX as nvcc 13.5 left them in one run
    /// (tests/fixtures/regen.sh), hashed as `hash`.
    fn job(hash: Option<&str>) -> Contribution {
        let signatures = Signatures::default();
        let args = ["-maxrregcount".to_string(), "16".to_string()];
        let text = JobText {
            source: "kernels/kernels.cu",
            arch: "sm_80",
            name: "kernels.sm_80",
            args: &args,
            log: include_str!("../../tests/fixtures/ptxas-13.5-maxrregcount16-sm_80.log"),
            ptx: include_str!("../../tests/fixtures/ptx-13.5-kernels-sm_80.ptx"),
            signatures: &signatures,
            launches: &[],
        };
        contribution(text, hash).expect("the fixture's kernels")
    }

    fn assembly<'a>(
        origin: Origin,
        archs: &'a [String],
        jobs: &'a [Contribution],
        launches: &'a [(String, Launch)],
    ) -> Assembly<'a> {
        Assembly {
            package: "p",
            origin,
            nvcc: "V13.5.37",
            archs,
            jobs,
            launches,
            dynamic_smem: &[],
            measured: &[],
            device_code: &[],
            others: None,
        }
    }

    #[test]
    fn a_build_from_the_lock_gives_the_numbers_of_the_build_with_nvcc() {
        let archs = ["sm_80".to_string()];
        let launches = [("*".to_string(), Launch::block(128))];
        let jobs = [job(Some("c0ffee"))];
        let live = manifest(&assembly(Origin::Nvcc, &archs, &jobs, &launches)).expect("live");
        assert!(live.kernels.len() > 3, "{}", live.kernels.len());
        let lock = Lock::from_manifest(&live);
        let sources = vec!["kernels/kernels.cu".to_string()];
        let from_lock = lock
            .contributions(&archs, &sources, Path::new("occ.lock"))
            .expect("the lock's records");
        let locked =
            manifest(&assembly(Origin::Lock, &archs, &from_lock, &launches)).expect("locked");
        assert_eq!(locked.kernels.len(), live.kernels.len());
        for (a, b) in live.kernels.iter().zip(&locked.kernels) {
            assert_eq!(
                (&a.name, &a.ident, &a.params),
                (&b.name, &b.ident, &b.params)
            );
            let (x, y) = (&a.archs["sm_80"], &b.archs["sm_80"]);
            // Every number, derived ones included; only what a lock does
            // not carry (the files, ptxas's words) differs.
            assert_eq!(x.resources, y.resources, "{}", a.name);
            assert_eq!(x.cliffs, y.cliffs, "{}", a.name);
            assert_eq!(x.resources.cubin_hash.as_deref(), Some("c0ffee"));
            assert!(x.has_device_code() && !y.has_device_code());
        }
    }

    #[test]
    fn each_kernel_arch_is_made_whole_at_its_declared_launch() {
        let archs = ["sm_80".to_string()];
        let jobs = [job(None)];
        let launches = [("*".to_string(), Launch::block(64))];
        let m = manifest(&assembly(Origin::Nvcc, &archs, &jobs, &launches)).expect("manifest");
        for k in &m.kernels {
            let a = &k.archs["sm_80"];
            assert!(!k.ident.is_empty(), "{}", k.name);
            assert!(
                a.best.as_ref().is_some_and(|b| b.block_size > 0),
                "{}",
                k.name
            );
            let d = a.declared.as_ref().expect("every kernel matches `*`");
            assert_eq!(d.block_size, 64, "{}", k.name);
            // The cliffs stand at the judged launch, the declared one.
            let at = cliff::at_judged("sm_80", &a.resources).expect("cliffs");
            assert_eq!(a.cliffs, at, "{}", k.name);
        }
    }

    #[test]
    fn lines_are_asked_for_where_registers_matter_and_kept_only_there() {
        let archs = ["sm_80".to_string()];
        let jobs = [job(None)];
        let judged = judge(&assembly(Origin::Nvcc, &archs, &jobs, &[])).expect("judged");
        let wanted = judged.lines_wanted();
        let m = judged.clone().finish(&Lines::new());
        let expect: BTreeSet<String> = m
            .kernels
            .iter()
            .filter(|k| cliff::registers_matter(&k.archs["sm_80"]))
            .map(|k| k.name.clone())
            .collect();
        assert_eq!(
            wanted.get("kernels.sm_80.cubin"),
            Some(&expect).filter(|e| !e.is_empty())
        );
        let first = m.kernels[0].name.clone();
        let peak = SourceLines {
            spills: Vec::new(),
            peak_pressure: Some(crate::schema::manifest::PressurePoint {
                file: "kernels/kernels.cu".into(),
                line: 7,
                registers: 40,
            }),
        };
        let mut lines = Lines::new();
        lines.insert(("kernels.sm_80.cubin".into(), first.clone()), peak.clone());
        // An empty record is no lines.
        for k in m.kernels.iter().skip(1) {
            lines.insert(
                ("kernels.sm_80.cubin".into(), k.name.clone()),
                SourceLines::default(),
            );
        }
        let with = judged.finish(&lines);
        for k in &with.kernels {
            let got = k.archs["sm_80"].lines.as_ref();
            assert_eq!(got, (k.name == first).then_some(&peak), "{}", k.name);
        }
    }

    #[test]
    fn a_pattern_that_matches_no_kernel_is_refused_naming_the_closest() {
        let archs = ["sm_80".to_string()];
        let jobs = [job(None)];
        let launches = [("no_such_kernel*".to_string(), Launch::block(64))];
        let e = manifest(&assembly(Origin::Nvcc, &archs, &jobs, &launches))
            .expect_err("no kernel matches");
        assert!(
            matches!(&e, Error::UnmatchedLaunch { pattern, closest, .. } if pattern == "no_such_kernel*" && !closest.is_empty()),
            "{e}"
        );
    }
}
