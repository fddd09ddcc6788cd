//! Several `Build`s in one build script, into one `OUT_DIR`.
//!
//! A crate may need more than one build: candle-kernels compiles its
//! kernels to PTX and builds a host-code library of others. Each `Build` is
//! a **part**, named by [`Build::name`](crate::Build::name) (the default part
//! has the empty name). Each part compiles and caches its own jobs (their
//! files are named `<part>@<job>`, so one part never removes another's),
//! and `manifest.json`, `kernels.rs` and the candidate lock hold the kernels
//! of every part run so far by this run of the build script: after its
//! last `Build`, all of them.
//!
//! No state is kept in the process: the parts are merged through the
//! files they write. `parts.json` in `$OUT_DIR/occ` lists the parts of the
//! run that wrote it ([`Parts`]: each one's name, sources and recorded
//! flags) under the run's identity (this process: its id, its start time
//! where the system says, and the build script's path and mtime; [`this_run`]);
//! `manifest.json` holds their kernels. A part reads both before it
//! assembles its manifest ([`theirs`]): when `parts.json` is another run's,
//! the part is the run's first and stands alone; else `manifest.json`'s
//! kernels, device code and measurements of the other parts' sources go
//! into its assembly (`occ_model::assemble`'s `Assembly::others`), which
//! assigns every identifier once over them all, so that the manifest
//! assembled is the one written. Once written, the part is listed
//! ([`record`]). A part run again in the same run (a test rebuilding, or a
//! build script that compiles the same part twice) so replaces its earlier
//! self; a part its memo served (`memo.rs`, the first of its run) is listed
//! with its kernels already in `manifest.json` ([`reused`]).

use crate::leaf::error::{Error, Result};
use crate::leaf::files::write_atomic;
use occ_model::schema::lock::{Committed, Lock};
use occ_model::schema::manifest::Manifest;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

/// The parts list's file name in `$OUT_DIR/occ`.
pub(crate) const FILE: &str = "parts.json";

/// The parts a run of the build script built into one `OUT_DIR`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Parts {
    /// The run ([`this_run`]).
    run: String,
    /// Its parts, in the order they were first built.
    parts: Vec<Part>,
    /// The parts whose last build in this run failed a gate: a later
    /// part's bless must not write a lock without their failure.
    #[serde(default)]
    failed: Vec<String>,
}

/// One part of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Part {
    name: String,
    sources: Vec<String>,
    /// The sources as the file system resolves them (`a/../k.cu`, a
    /// symlink): one file however it is spelled.
    files: Vec<PathBuf>,
    flags: Vec<String>,
}

/// This run of the build script, as a string no other run of any script
/// into this `OUT_DIR` has: the process's id; where the system says
/// (Linux's `/proc`), when the process started; and the running
/// executable's path and modification time. The id alone is reused (a
/// later run may get it, and off Linux nothing else says when it
/// started); the executable is the build script cargo built, whose path
/// and mtime change when it is rebuilt, so a later run with the same id
/// is told apart by its start time where there is one, and by a rebuilt
/// script everywhere. What remains, off Linux only, is the same unchanged
/// script rerun into the same `OUT_DIR` and given the id of its last run:
/// rare, as the system hands out an id again only after cycling through
/// the others. Portable std calls only: std has no process start time, and
/// a platform API per system would be more code than the risk is worth.
fn this_run() -> String {
    let started = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| {
            // Field 22 (`starttime`), the 20th after the command's `)`.
            let (_, after) = stat.rsplit_once(')')?;
            after.split_whitespace().nth(19).map(str::to_string)
        })
        .unwrap_or_default();
    let exe = std::env::current_exe().ok();
    let built = exe
        .as_deref()
        .and_then(|p| std::fs::metadata(p).ok()?.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| format!("{}.{:09}", d.as_secs(), d.subsec_nanos()))
        .unwrap_or_default();
    let exe = exe.map(|p| p.display().to_string()).unwrap_or_default();
    format!("{}-{started}-{built}-{exe}", std::process::id())
}

/// The parts of this run built into `out` so far (none when `parts.json`
/// is missing, unreadable or another run's).
fn this_runs(out: &Path) -> Parts {
    let run = this_run();
    std::fs::read(out.join(FILE))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Parts>(&bytes).ok())
        .filter(|parts| parts.run == run)
        .unwrap_or(Parts {
            run,
            parts: Vec::new(),
            failed: Vec::new(),
        })
}

/// Lists `part` among this run's parts in `out` (replacing its earlier
/// self), and returns the list.
fn enlist(out: &Path, mut parts: Parts, part: Part) -> Result<Parts> {
    parts.failed.retain(|f| *f != part.name);
    match parts.parts.iter_mut().find(|p| p.name == part.name) {
        Some(p) => *p = part,
        None => parts.parts.push(part),
    }
    write(out, &parts)?;
    Ok(parts)
}

fn write(out: &Path, parts: &Parts) -> Result<()> {
    // Plain strings and paths: serializing cannot fail.
    let text = serde_json::to_vec(parts).unwrap_or_default();
    write_atomic(&out.join(FILE), &text)
}

/// Notes that the part `name` failed a gate in this run (its spills, the
/// baseline): until it passes again in this run, no later part blesses
/// the lock (`gate::baseline`).
pub(crate) fn failed(out: &Path, name: &str) -> Result<()> {
    let mut parts = this_runs(out);
    if !parts.failed.iter().any(|f| f == name) {
        parts.failed.push(name.to_string());
    }
    write(out, &parts)
}

/// What a part sees of the parts of its run, once listed ([`record`]).
pub(crate) struct View {
    /// The sources of each named part built in this run.
    pub named: BTreeMap<String, Vec<String>>,
    /// The recorded flags (`plan::recorded_flags`) of each part built in
    /// this run, the default one under `""`.
    pub flags: BTreeMap<String, Vec<String>>,
    /// A note when this part replaced an earlier one of the same name with
    /// none of the same sources: two `Build`s that need distinct names.
    pub clash: Option<String>,
    /// The sources of the other parts of this run.
    pub theirs: Vec<String>,
    /// The other parts of this run that failed a gate, as messages name
    /// them.
    pub failed: Vec<String>,
}

/// How messages name a part.
fn describe(name: &str) -> String {
    if name.is_empty() {
        "the default Build".to_string()
    } else {
        format!("the Build named `{name}`")
    }
}

/// Refuses a file that another part of this run compiled into `out` too
/// ([`Error::FileInTwoBuilds`]): its kernels' numbers would come from one
/// compile and their code from the other; and a path that another part
/// gives a different file (parts with their own roots,
/// [`Error::OnePathTwoFiles`]): the table, the lock and [`record`]'s
/// merge know a kernel by its path. So within a run a path is one file
/// of one part. The pipeline checks it before anything is compiled (and
/// before [`record`]).
pub(crate) fn check_sources(out: &Path, name: &str, root: &Path, sources: &[String]) -> Result<()> {
    let parts = this_runs(out);
    let files = resolved(root, sources);
    for other in parts.parts.iter().filter(|p| p.name != name) {
        for (source, file) in sources.iter().zip(&files) {
            if other.files.contains(file) {
                return Err(Error::FileInTwoBuilds {
                    file: source.clone(),
                    first: describe(&other.name),
                    second: describe(name),
                });
            }
            if other.sources.contains(source) {
                return Err(Error::OnePathTwoFiles {
                    file: source.clone(),
                    first: describe(&other.name),
                    second: describe(name),
                });
            }
        }
    }
    Ok(())
}

/// `sources` (relative to `root`) as the file system resolves them.
fn resolved(root: &Path, sources: &[String]) -> Vec<PathBuf> {
    sources
        .iter()
        .map(|s| {
            let path = root.join(s);
            std::fs::canonicalize(&path).unwrap_or(path)
        })
        .collect()
}

/// Whether a part other than `name` was built into `out` in this run.
pub(crate) fn others(out: &Path, name: &str) -> bool {
    this_runs(out).parts.iter().any(|p| p.name != name)
}

/// Lists the part `name` that its memo served: its kernels are those of
/// `out`'s `manifest.json`, which a later part reads ([`record`]).
pub(crate) fn reused(
    out: &Path,
    name: &str,
    root: &Path,
    sources: &[String],
    flags: &[String],
) -> Result<()> {
    let part = Part {
        name: name.to_string(),
        sources: sources.to_vec(),
        files: resolved(root, sources),
        flags: flags.to_vec(),
    };
    enlist(out, this_runs(out), part).map(|_| ())
}

/// The other parts of this run built into `out`, for the assembly of the
/// part `name` (`occ_model::assemble`'s `Assembly::others`): none when no
/// other part of this run was built; else `manifest.json` with only the
/// kernels and device code of the sources another part lists (a path is
/// one part's, [`check_sources`]), so neither this part's earlier self nor
/// a part of an earlier run leaves a kernel behind (the assembly keeps
/// the measurements of the kernels × archs it holds).
pub(crate) fn theirs(out: &Path, name: &str) -> Result<Option<Manifest>> {
    let parts = this_runs(out);
    if !parts.parts.iter().any(|p| p.name != name) {
        return Ok(None);
    }
    // A set, not a list: a scan of every source per kernel grows with both.
    let listed: HashSet<&str> = parts
        .parts
        .iter()
        .filter(|p| p.name != name)
        .flat_map(|p| p.sources.iter().map(String::as_str))
        .collect();
    let path = out.join(occ_model::schema::manifest::FILE_NAME);
    let mut theirs = crate::leaf::files::read_manifest(&path)?;
    theirs
        .kernels
        .retain(|k| listed.contains(k.source.as_str()));
    theirs
        .device_code
        .retain(|b| listed.contains(b.source.as_str()));
    Ok(Some(theirs))
}

/// Lists the part `name` (its sources passed [`check_sources`], its
/// manifest, assembled with [`theirs`], written) among the parts of
/// this run built into `out`, replacing its earlier self.
pub(crate) fn record(
    out: &Path,
    name: &str,
    root: &Path,
    sources: &[String],
    flags: &[String],
) -> Result<View> {
    let parts = this_runs(out);
    let earlier = parts.parts.iter().find(|p| p.name == name).cloned();
    let clash = earlier
        .as_ref()
        .filter(|old| {
            !old.sources.is_empty()
                && !sources.is_empty()
                && !old.sources.iter().any(|s| sources.contains(s))
        })
        .map(|_| {
            format!(
                "occ: two Builds{} in this build script write into the same OUT_DIR with none of \
                 the same files; kernels.rs now holds the second one's kernels only: give each \
                 Build its own `.name(..)`",
                if name.is_empty() {
                    String::new()
                } else {
                    format!(" named `{name}`")
                }
            )
        });
    let part = Part {
        name: name.to_string(),
        sources: sources.to_vec(),
        files: resolved(root, sources),
        flags: flags.to_vec(),
    };
    let parts = enlist(out, parts, part)?;
    let named = parts
        .parts
        .iter()
        .filter(|p| !p.name.is_empty())
        .map(|p| (p.name.clone(), p.sources.clone()))
        .collect();
    let flags = parts
        .parts
        .iter()
        .map(|p| (p.name.clone(), p.flags.clone()))
        .collect();
    let theirs = parts
        .parts
        .iter()
        .filter(|p| p.name != name)
        .flat_map(|p| p.sources.iter().cloned())
        .collect();
    let failed = parts
        .failed
        .iter()
        .filter(|f| *f != name)
        .map(|f| describe(f))
        .collect();
    Ok(View {
        named,
        flags,
        clash,
        theirs,
        failed,
    })
}

/// The candidate lock: every part's kernels (`merged`, the manifest
/// written), plus the committed lock's
/// kernels of the other parts it records that this process has not built
/// yet (a later `Build` of the build script will), so that a part never
/// reports the others' kernels as gone; the sources of each named part; and
/// the committed lock's measurements of kernels × archs still built.
pub(crate) fn candidate(
    view: &View,
    merged: &Manifest,
    name: &str,
    sources: &[String],
    lock: Option<&Lock>,
) -> Candidate {
    let mut theirs = view.theirs.clone();
    let mut mine = sources.to_vec();
    if let Some(lock) = lock {
        for (part, recorded) in &lock.parts {
            if part == name {
                mine.extend(recorded.iter().cloned());
            } else {
                theirs.extend(recorded.iter().cloned());
            }
        }
    }
    let scope = if name.is_empty() {
        Scope::AllBut(theirs)
    } else {
        Scope::Only(mine)
    };
    Candidate {
        lock: candidate_lock(view, merged, name, lock),
        scope,
        failed: view.failed.clone(),
    }
}

/// The candidate lock of a part, with what of it the part judges.
pub(crate) struct Candidate {
    /// Every part's kernels ([`candidate`]).
    pub lock: Lock,
    /// The kernels the part's gate judges: each part judges its own, by
    /// its own settings, so that the verdict does not depend on the order
    /// of the `Build`s.
    pub scope: Scope,
    /// The other parts of this run that failed a gate ([`failed`]): no
    /// bless while there is one.
    pub failed: Vec<String>,
}

/// The sources whose kernels a part judges.
pub(crate) enum Scope {
    /// A named part: its sources, and those the lock records for it.
    Only(Vec<String>),
    /// The default part: every source but the named parts'.
    AllBut(Vec<String>),
}

impl Scope {
    /// Whether the part judges the kernels of `source`.
    pub fn judges(&self, source: &str) -> bool {
        match self {
            Scope::Only(mine) => mine.iter().any(|s| s == source),
            Scope::AllBut(theirs) => !theirs.iter().any(|s| s == source),
        }
    }
}

/// The candidate lock (see [`candidate`]): the committed lock's named
/// parts that are neither this one nor built by this run stay as recorded.
fn candidate_lock(view: &View, merged: &Manifest, name: &str, lock: Option<&Lock>) -> Lock {
    let keep: Vec<&str> = lock.map_or_else(Vec::new, |lock| {
        lock.parts
            .keys()
            .filter(|part| *part != name && !view.named.contains_key(*part))
            .map(String::as_str)
            .collect()
    });
    Lock::candidate(
        merged,
        view.named.clone(),
        view.flags.clone(),
        lock.map(|lock| Committed { lock, keep: &keep }),
    )
}

/// Whether a file of `OUT_DIR/occ` named `file` belongs to part `name`:
/// `<name>@…` for a named part, no `@` for the default one.
pub(crate) fn owns(name: &str, file: &str) -> bool {
    match file.split_once('@') {
        Some((part, _)) => part == name,
        None => name.is_empty(),
    }
}

/// The prefix of the part's job names (`moe@`; empty for the default part).
pub(crate) fn prefix(name: &str) -> String {
    if name.is_empty() {
        String::new()
    } else {
        format!("{name}@")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use occ_model::assemble::{self, Assembly};
    use occ_model::compiler::analyze;
    use occ_model::schema::manifest::Origin;

    /// The kernels of one job of nvcc 13.5 (tests/fixtures/regen.sh), as
    /// if compiled from `source`, assembled with the other parts of this
    /// run in `out` ([`theirs`]) as the part `name`.
    fn part(out: &Path, name: &str, source: &str) -> Manifest {
        let signatures = occ_model::compiler::params::Signatures::default();
        let args = ["-maxrregcount".to_string(), "16".to_string()];
        let text = analyze::JobText {
            source,
            arch: "sm_80",
            name: "k",
            args: &args,
            log: include_str!("../../../tests/fixtures/ptxas-13.5-maxrregcount16-sm_80.log"),
            ptx: include_str!("../../../tests/fixtures/ptx-13.5-kernels-sm_80.ptx"),
            signatures: &signatures,
            launches: &[],
        };
        let jobs = [analyze::contribution(text, None).expect("the kernels")];
        let others = theirs(out, name).expect("the other parts");
        assemble::manifest(&Assembly {
            package: "p",
            origin: Origin::Nvcc,
            nvcc: "V13.5.37",
            archs: &["sm_80".into()],
            jobs: &jobs,
            launches: &[],
            dynamic_smem: &[],
            measured: &[],
            device_code: &[],
            others: others.as_ref(),
        })
        .expect("manifest")
    }

    /// A measurement of `kernel` from `source` on sm_80.
    fn measured(kernel: &str, source: &str) -> occ_model::schema::manifest::Measured {
        occ_model::schema::manifest::Measured {
            kernel: kernel.into(),
            source: source.into(),
            arch: "sm_80".into(),
            bucket: "n".into(),
            best: 256,
            device: "d".into(),
            compute_capability: "8.0".into(),
            sm_count: 108,
            toolkit: "V13.5.37".into(),
            cubin_hash: String::new(),
            candidates_hash: String::new(),
            max_occupancy: None,
            timings: Vec::new(),
        }
    }

    fn sources(m: &Manifest) -> std::collections::BTreeSet<&str> {
        m.kernels.iter().map(|k| k.source.as_str()).collect()
    }

    #[test]
    fn the_parts_of_one_run_merge_through_their_files_and_an_earlier_runs_do_not() {
        let out = std::env::temp_dir().join(format!("occ-parts-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).expect("out");
        let write = |m: &Manifest| {
            std::fs::write(
                out.join(occ_model::schema::manifest::FILE_NAME),
                m.to_json(),
            )
            .expect("write")
        };
        // A part: assembled with the others, written, then listed.
        let build = |name: &str, source: &str, flags: &[String]| {
            let merged = part(&out, name, source);
            let view = record(&out, name, &out, &[source.into()], flags).expect("listed");
            (merged, view)
        };
        let (merged, _) = build("", "a.cu", &[]);
        assert_eq!(sources(&merged), ["a.cu"].into());
        // Two measurements in manifest.json: one of a kernel a.cu has, one
        // of a kernel it has not (a stale line a merge must not keep).
        let mut with_measured = merged.clone();
        let kept = measured(&with_measured.kernels[0].name, "a.cu");
        with_measured.measured = vec![kept.clone(), measured("gone_kernel", "a.cu")];
        write(&with_measured);
        let (merged, view) = build("lib", "b.cu", &["-O3".into()]);
        assert_eq!(sources(&merged), ["a.cu", "b.cu"].into());
        assert_eq!(merged.measured, [kept], "only the kernel's still built");
        // The identifiers are the assembly's, unique over both parts: the
        // same symbols in two files.
        let idents: std::collections::BTreeSet<&str> =
            merged.kernels.iter().map(|k| k.ident.as_str()).collect();
        assert_eq!(idents.len(), merged.kernels.len(), "unique identifiers");
        assert_eq!(view.named.keys().collect::<Vec<_>>(), ["lib"]);
        assert_eq!(view.flags[""], Vec::<String>::new());
        assert_eq!(view.flags["lib"], ["-O3"]);
        write(&merged);
        // A file of a part of this run is refused in another.
        let e = check_sources(&out, "other", &out, &["b.cu".into()]).expect_err("b is lib's");
        assert!(e.to_string().contains("b.cu"), "{e}");
        // lib's path under another root is another file: refused too.
        let elsewhere = out.join("elsewhere");
        std::fs::create_dir_all(&elsewhere).expect("elsewhere");
        std::fs::write(elsewhere.join("b.cu"), "").expect("b.cu");
        std::fs::write(out.join("b.cu"), "// lib's").expect("b.cu");
        let e = check_sources(&out, "other", &elsewhere, &["b.cu".into()]).expect_err("one path");
        assert!(matches!(e, Error::OnePathTwoFiles { .. }), "{e}");
        // The default part again, now of b.cu alone: it replaces its
        // earlier self, a.cu's kernels go (lib's b.cu is this part's now:
        // the part's own sources are never taken from the others).
        let (merged, view) = build("", "b.cu", &[]);
        assert_eq!(sources(&merged), ["b.cu"].into());
        assert!(view.clash.is_some(), "none of the same files: a clash");
        // An earlier run's parts are not this run's.
        let text = std::fs::read_to_string(out.join(FILE)).expect("parts.json");
        let mut parts: Parts = serde_json::from_str(&text).expect("parts");
        assert_eq!(parts.run, this_run());
        parts.run = "1-1".into();
        let text = serde_json::to_string(&parts).expect("json");
        std::fs::write(out.join(FILE), text).expect("another run");
        assert!(!others(&out, ""));
        assert!(theirs(&out, "").expect("none").is_none());
        let (merged, _) = build("", "a.cu", &[]);
        assert_eq!(sources(&merged), ["a.cu"].into());
        let _ = std::fs::remove_dir_all(&out);
    }
}
