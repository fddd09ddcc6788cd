//! Stage 3: the nvcc jobs of a build, one per (source, arch) (or one per
//! source, for every arch, when the build makes a host-code library), each with
//! its arguments, and the register caps of [`Build::max_registers`] placed
//! on the files they apply to.
//!
//! Names are folder-free (`folder_free_names`): cicc and cudafe++ get
//! `--orig_src_path_name` set to the source relative to the crate, and every
//! job pre-includes `$OUT_DIR/occ/cache/anchor.cuh`, one unused external device
//! function named per package and file. cicc names an anonymous namespace from
//! a hash of that path and of the file's first external function (else of
//! nvcc's process id), so every identity and the device code are the same in
//! every build and folder, whatever kernels are added above. A `compute_XX`
//! arch is refused (no ptxas numbers), as are `-rdc` and the flags occ sets
//! itself. `recorded_flags` is what the lock's `flags` hold: the common
//! arguments less paths and `-lineinfo`. A host-code library's job carries the
//! host compiler and flags cc picks.

use crate::builder::Build;
use crate::leaf::error::{Error, Result};
use crate::leaf::job::{Job, JobKind};
use crate::stage::hostlib::HostLib;
use crate::stage::inputs::Inputs;
use occ_model::assemble;
use occ_model::schema::manifest::{self, Contribution, Kernel, Lookup};
use std::collections::BTreeMap;
use std::path::Path;

/// [`Build::max_registers`] caps, by source file, and the targets not yet
/// placed in a file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Caps {
    /// `-maxrregcount` per source.
    pub by_file: BTreeMap<String, u32>,
    /// Kernel targets the last manifest could not place.
    pub pending: Vec<(String, u32)>,
}

impl Caps {
    /// Whether this build's own kernels must place the caps (a second look
    /// after the first compile): some target is unplaced, or the caps came
    /// from a previous manifest that may be out of date.
    pub fn needs_second_look(&self, from_previous: bool) -> bool {
        !self.pending.is_empty() || (from_previous && !self.by_file.is_empty())
    }
}

/// Places the caps by file name, or by kernel through `known` (the last
/// build's manifest's kernels, if any, or this build's names).
pub(crate) fn register_caps<A>(
    build: &Build,
    inputs: &Inputs,
    known: Option<&[Kernel<A>]>,
) -> Caps {
    let mut caps = Caps::default();
    for (target, cap) in &build.max_registers {
        let file = inputs
            .sources
            .iter()
            .find(|s| *s == target || s.rsplit('/').next() == Some(target.as_str()))
            .cloned()
            .or_else(|| match known.map(|k| manifest::lookup(k, target)) {
                Some(Lookup::Found(k)) if inputs.sources.contains(&k.source) => {
                    Some(k.source.clone())
                }
                _ => None,
            });
        match file {
            Some(f) => {
                caps.by_file.insert(f, *cap);
            }
            None => caps.pending.push((target.clone(), *cap)),
        }
    }
    caps
}

/// Places the caps by this build's own kernels, as the first compile's
/// jobs contributed them; a target that names no source and no kernel is
/// an error. Only names and sources are read: nothing is judged (no
/// launch is checked before its kernel is compiled under its cap).
pub(crate) fn place_caps(build: &Build, inputs: &Inputs, jobs: &[Contribution]) -> Result<Caps> {
    let found = assemble::names(jobs);
    let caps = register_caps(build, inputs, Some(&found));
    match caps.pending.first() {
        Some((target, _)) => Err(unknown_cap_target(target, &found)),
        None => Ok(caps),
    }
}

/// The jobs of a build: every source × arch, in that order; with a
/// host-code library, one job per source for all archs, with the host
/// compiler's arguments. Flags that occ sets itself, and `-rdc`, are
/// refused here, before any nvcc runs.
pub(crate) fn jobs(
    build: &Build,
    inputs: &Inputs,
    caps: &BTreeMap<String, u32>,
    host: Option<&HostLib>,
) -> Result<Vec<Job>> {
    check_flags(build.flags.iter().map(|f| (f.as_str(), ".flag()")))?;
    for (var, value) in &inputs.nvcc_vars {
        if let (name @ ("NVCC_APPEND_FLAGS" | "NVCC_PREPEND_FLAGS"), Some(value)) =
            (var.as_str(), value)
        {
            check_flags(value.split_whitespace().map(|f| (f, name)))?;
        }
    }
    let part = build.part();
    let args = common_args(build, inputs);
    let names = job_names(&inputs.sources);
    let prefix = crate::stage::parts::prefix(part);
    let mut jobs = Vec::new();
    for (source, name) in inputs.sources.iter().zip(&names) {
        let mut source_args = args.clone();
        // nvcc runs in the crate root: the anchor by a path from there when
        // it can (nvcc escapes a `'` of an absolute path wrongly for the
        // preprocessor, and the target folder is usually below the crate's
        // or the workspace's root).
        let anchor = inputs.out_dir.join(ANCHOR_FILE);
        let anchor = relative_to(&inputs.root, &anchor).unwrap_or(anchor);
        source_args.extend(folder_free_names(&inputs.package, source, &anchor));
        if let Some(host) = host {
            let mut args = source_args.clone();
            if let Some(cap) = caps.get(source) {
                args.extend(["-maxrregcount".to_string(), cap.to_string()]);
            }
            args.extend(host.args.iter().cloned());
            jobs.push(Job {
                source: source.clone(),
                arch: inputs.archs.join(","),
                name: format!("{prefix}{name}.lib"),
                args,
                kind: JobKind::Library {
                    archs: inputs.archs.clone(),
                    stem: format!("{prefix}{name}"),
                },
            });
            continue;
        }
        for arch in &inputs.archs {
            let mut args = source_args.clone();
            if let Some(cap) = caps.get(source) {
                args.extend(["-maxrregcount".to_string(), cap.to_string()]);
            }
            jobs.push(Job {
                source: source.clone(),
                arch: arch.clone(),
                name: format!("{prefix}{name}.{arch}"),
                args,
                kind: JobKind::Device,
            });
        }
    }
    Ok(jobs)
}

/// `path` from `base` (`../../target/debug/…`), both absolute; `None` when
/// they share no folder.
fn relative_to(base: &Path, path: &Path) -> Option<std::path::PathBuf> {
    use std::path::Component;
    let (base, path): (Vec<Component<'_>>, Vec<Component<'_>>) =
        (base.components().collect(), path.components().collect());
    let shared = base.iter().zip(&path).take_while(|(a, b)| a == b).count();
    // Only the root in common: an absolute path says it as well.
    if shared <= 1 {
        return None;
    }
    let mut out = std::path::PathBuf::new();
    for _ in shared..base.len() {
        out.push("..");
    }
    for part in &path[shared..] {
        out.push(part.as_os_str());
    }
    Some(out)
}

/// Refuses a part name (`Build::name`) that could not name files in
/// `OUT_DIR`; checked first, before the part meets any other.
pub(crate) fn check_part_name(part: &str) -> Result<()> {
    if part
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        Ok(())
    } else {
        Err(Error::BadBuildName {
            name: part.to_string(),
        })
    }
}

/// The header every job pre-includes, relative to `$OUT_DIR/occ` (beside
/// the job records, not among the build's outputs), see
/// [`folder_free_names`].
pub(crate) const ANCHOR_FILE: &str = "cache/anchor.cuh";

/// The text of [`ANCHOR_FILE`]: one external device function, named by the
/// `-D` of each job, which nothing calls (so no cubin keeps it, except a
/// `-G` build's, which keeps every function).
pub(crate) const ANCHOR: &str =
    "// @generated by occ-build: names the anonymous namespace of each .cu file\n\
     // the same way in every build and folder (see occ-build's plan.rs).\n\
     __device__ void OCC_MODULE_ANCHOR(void) {}\n";

/// The flags that make the kernels' symbols the same in every build and
/// every folder.
///
/// cicc and cudafe++ name an anonymous namespace `_GLOBAL__N__<a>_<file>_<b>`:
/// `<a>` is a hash of `--orig_src_path_name`, which nvcc sets to the
/// source's absolute path, and `<b>` a hash of the first external function
/// the file defines, or of the process id when it defines none. So a kernel
/// in `namespace { … }` got another symbol in every checkout, in every build
/// of a file with no other external function, and whenever a kernel was
/// added above the others: the lock, the gate, measurements and `get()`
/// missed it. Both tools are given the path relative to the crate instead
/// (both: a host-code library's host stub registers the name cudafe++
/// computes, the cubin holds cicc's), and every job pre-includes
/// [`ANCHOR`], whose function, named per package and file so that no two
/// host objects define the same symbol, is then the file's first external
/// one. nvcc splits `-X` values at commas and runs its steps through `sh`,
/// so the path keeps only characters that survive both; it seeds a hash and
/// names nothing on disk.
fn folder_free_names(package: &str, source: &str, anchor: &Path) -> Vec<String> {
    let name: String = source
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let flag = format!("--orig_src_path_name={name}");
    let id = occ_model::schema::measured::content_hash(format!("{package}\0{source}").as_bytes());
    let id = id.trim_start_matches("fnv1a64:");
    vec![
        "-Xcicc".to_string(),
        flag.clone(),
        "-Xcudafe".to_string(),
        flag,
        format!("-DOCC_MODULE_ANCHOR=__occ_anchor_{id}"),
        "-include".to_string(),
        anchor.display().to_string(),
    ]
}

/// nvcc flags that occ sets itself for every job, with the builder method
/// that does what the user meant, if any.
const RESERVED: &[(&[&str], Option<&str>)] = &[
    (&["-o", "--output-file"], None),
    (
        &[
            "-keep",
            "--keep",
            "-keep-dir",
            "--keep-dir",
            "-save-temps",
            "--save-temps",
        ],
        None,
    ),
    (
        &[
            "-E",
            "--preprocess",
            "-M",
            "-MM",
            "-MD",
            "-MMD",
            "-MF",
            "--dependency-output",
        ],
        None,
    ),
    (
        &[
            "-ptx",
            "--ptx",
            "-cubin",
            "--cubin",
            "-fatbin",
            "--fatbin",
            "-c",
            "--compile",
        ],
        None,
    ),
    (
        &[
            "-dryrun", "--dryrun", "-lib", "--lib", "-link", "--link", "-run", "--run",
        ],
        None,
    ),
    (
        &[
            "-arch",
            "--gpu-architecture",
            "-code",
            "--gpu-code",
            "-gencode",
            "--generate-code",
        ],
        Some(".arch(\"sm_90\") (or OCC_ARCHS)"),
    ),
];

/// Flags that make nvcc read more flags from a file.
const OPTIONS_FILE: &[&str] = &["-optf", "--options-file"];

/// Flags that make device code relocatable: its cubin would need a device
/// link, and ptxas's numbers would be the pre-link ones.
const RELOCATABLE: &[&str] = &[
    "-rdc",
    "--relocatable-device-code",
    "-dc",
    "--device-c",
    "-dw",
    "--device-w",
];

/// Refuses flags (from `origin`: `.flag()`, `NVCC_APPEND_FLAGS`, ...) that
/// occ sets itself or that make device code relocatable.
fn check_flags<'a>(flags: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<()> {
    for (flag, origin) in flags {
        let name = flag.split('=').next().unwrap_or(flag);
        if let Some((_, instead)) = RESERVED.iter().find(|(names, _)| names.contains(&name)) {
            return Err(Error::ReservedFlag {
                flag: flag.to_string(),
                origin: origin.to_string(),
                instead: instead.map(str::to_string),
            });
        }
        // nvcc reads more flags from the file: its contents would be in no
        // job's key, no lock and no proof (the preprocessed text may not
        // change with them).
        if OPTIONS_FILE.contains(&name) {
            return Err(Error::OptionsFile {
                flag: flag.to_string(),
                origin: origin.to_string(),
            });
        }
        let value = flag.split_once('=').map(|(_, v)| v);
        if RELOCATABLE.contains(&name) && value.is_none_or(|v| v != "false") {
            return Err(Error::RelocatableDeviceCode {
                flag: flag.to_string(),
                origin: origin.to_string(),
            });
        }
    }
    Ok(())
}

/// The nvcc arguments every job of the build shares.
fn common_args(build: &Build, inputs: &Inputs) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    if let Some(ccbin) = &inputs.ccbin {
        args.push("-ccbin".into());
        args.push(ccbin.clone());
    }
    if build.debug {
        args.push("-G".into());
    } else if !build.no_source_lines
        && !build.flags.iter().any(|f| {
            matches!(
                f.as_str(),
                "-G" | "--device-debug" | "-lineinfo" | "--generate-line-info"
            )
        })
    {
        // Each instruction's source line, for `disasm` (stage 5½); `-G`
        // has its own (and nvcc warns when both are given).
        args.push("-lineinfo".into());
    }
    for dir in &build.includes {
        args.push(format!("-I{}", dir.display()));
    }
    for (name, value) in &build.defines {
        args.push(match value {
            Some(v) => format!("-D{name}={v}"),
            None => format!("-D{name}"),
        });
    }
    args.extend(build.flags.iter().cloned());
    args
}

/// What decides a build's numbers besides the sources and the toolkit, as
/// the lock records it (`Lock::flags`): the arguments every job gets from
/// the build ([`common_args`]: `-G`, `.define()`s, `.flag()`s) and nvcc's
/// own flag variables, in the order nvcc sees them, less what names a
/// folder or program of one machine ([`without_paths`]) and `-lineinfo`
/// (which changes no number).
pub(crate) fn recorded_flags(build: &Build, inputs: &Inputs) -> Vec<String> {
    let var = |name: &str| {
        inputs
            .nvcc_vars
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v.as_deref())
            .map(|v| {
                let tokens: Vec<&str> = v.split_whitespace().collect();
                without_paths(&tokens).join(" ")
            })
            .filter(|v| !v.is_empty())
            .map(|v| format!("{name}={v}"))
    };
    let args = common_args(build, inputs);
    let args: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !matches!(*a, "-lineinfo" | "--generate-line-info"))
        .collect();
    let mut flags: Vec<String> = var("NVCC_PREPEND_FLAGS").into_iter().collect();
    flags.extend(without_paths(&args).into_iter().map(str::to_string));
    flags.extend(var("NVCC_APPEND_FLAGS"));
    flags
}

/// `flags` less those that name a folder or program of one machine or
/// checkout (`-I`, `-isystem`, `-L`, `-ccbin`, with their value attached or
/// next): the lock is the same in every checkout.
fn without_paths<'a>(flags: &[&'a str]) -> Vec<&'a str> {
    const WITH_PATH: [&str; 8] = [
        "-I",
        "--include-path",
        "-isystem",
        "--system-include",
        "-L",
        "--library-path",
        "-ccbin",
        "--compiler-bindir",
    ];
    let mut out = Vec::new();
    let mut skip_next = false;
    for flag in flags {
        if skip_next {
            skip_next = false;
            continue;
        }
        let name = flag.split('=').next().unwrap_or(flag);
        if WITH_PATH.contains(&name) {
            // `-I dir` / `-ccbin gcc`: the value is the next argument.
            skip_next = !flag.contains('=');
            continue;
        }
        if ["-I", "-L"]
            .iter()
            .any(|p| flag.len() > 2 && flag.starts_with(p))
            || flag.starts_with("-isystem")
        {
            continue;
        }
        out.push(*flag);
    }
    out
}

/// The longest stem a job name keeps before it is shortened with a hash.
const MAX_STEM: usize = 48;

/// A file-name-safe, short, unique stem per source: `kernels/a.cu` →
/// `kernels_a`. A stem that would be long (deep paths: file names in
/// `$OUT_DIR` have a length limit) keeps its last characters and gets a
/// hash of the whole path; so do stems that differ only in case from
/// another one (`K.cu` beside `k.cu`: one file on a case-insensitive file
/// system, one module name in `kernels.rs`) or that sanitize alike.
fn job_names(sources: &[String]) -> Vec<String> {
    let sanitize = |s: &str| {
        let stem = s.strip_suffix(".cu").unwrap_or(s);
        stem.chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect::<String>()
    };
    let plain: Vec<String> = sources.iter().map(|s| sanitize(s)).collect();
    plain
        .iter()
        .zip(sources)
        .map(|(name, source)| {
            let clashes = plain
                .iter()
                .filter(|n| n.eq_ignore_ascii_case(name))
                .count()
                > 1;
            if name.len() > MAX_STEM {
                let tail: String = name[name.len() - (MAX_STEM - 9)..].to_string();
                format!(
                    "{}_{}",
                    tail.trim_start_matches('_'),
                    occ_model::compiler::names::short_hash(source)
                )
            } else if clashes {
                format!("{name}_{}", occ_model::compiler::names::short_hash(source))
            } else {
                name.clone()
            }
        })
        .collect()
}

/// The error for a [`Build::max_registers`] target that names neither a
/// source nor one kernel of the build (none, or several).
fn unknown_cap_target<A>(target: &str, kernels: &[Kernel<A>]) -> Error {
    let hint = match manifest::lookup(kernels, target) {
        Lookup::Ambiguous(candidates) => {
            return Error::AmbiguousCapTarget {
                target: target.to_string(),
                candidates: manifest::describe_candidates(&candidates),
            }
        }
        Lookup::Unknown(close) if !close.is_empty() => {
            format!("did you mean `{}`?", close.join("`, `"))
        }
        _ => String::new(),
    };
    Error::UnknownCapTarget {
        target: target.to_string(),
        hint,
    }
}

#[cfg(test)]
mod tests {
    use super::{check_flags, relative_to, without_paths};
    use crate::leaf::error::Error;
    use std::path::Path;

    #[test]
    fn an_options_file_is_refused_from_every_origin() {
        for (flag, origin) in [
            ("--options-file=nvcc.opts", ".flag()"),
            ("-optf", "NVCC_APPEND_FLAGS"),
        ] {
            let err = check_flags([(flag, origin)]).expect_err(flag);
            assert!(
                matches!(&err, Error::OptionsFile { flag: f, origin: o } if f == flag && o == origin),
                "{err}"
            );
        }
        assert!(check_flags([("-O3", ".flag()"), ("--use_fast_math", ".flag()")]).is_ok());
    }

    #[test]
    fn the_anchor_is_named_from_the_crate_root() {
        assert_eq!(
            relative_to(
                Path::new("/w/bob's crate"),
                Path::new("/w/bob's crate/target/o/a.cuh")
            ),
            Some("target/o/a.cuh".into())
        );
        assert_eq!(
            relative_to(Path::new("/w/ws/member"), Path::new("/w/ws/target/o/a.cuh")),
            Some("../target/o/a.cuh".into())
        );
        assert_eq!(
            relative_to(Path::new("/home/c"), Path::new("/tmp/o/a.cuh")),
            None
        );
    }

    #[test]
    fn recorded_flags_name_no_folder_of_a_checkout() {
        // The lock is the same in every checkout.
        assert_eq!(
            without_paths(&[
                "-Ofc=max",
                "-I/home/a/crate/include",
                "-I",
                "/home/a/inc",
                "--include-path=/x",
                "-isystem/usr/x",
                "-ccbin",
                "/usr/bin/g++-12",
                "--compiler-bindir=/opt/gcc",
                "-DX=1",
                "-L/lib",
            ]),
            ["-Ofc=max", "-DX=1"]
        );
    }
}
