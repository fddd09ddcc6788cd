//! The job cache: when a job's earlier result may be reused, and how a new
//! result is committed.
//!
//! **The key of record is what nvcc compiled** (ccache's "preprocessor
//! mode"): a job's record holds the hash of the preprocessed text its
//! result was compiled from (the device side's `.cpp1.ii` that `-keep`
//! leaves), beside the job's **key**: the cache format, occ-model's code
//! (`occ_model::CODE`: the record keeps the job's contribution as
//! occ-model parsed it, so another occ-model compiles again), the toolkit's
//! identity ([`ToolkitId`]: every program nvcc runs, found by `nvcc
//! --dryrun`, with their profile, the host compiler and the launcher),
//! nvcc's arguments, and every variable nvcc reads itself
//! (`NVCC_APPEND_FLAGS`, `NVCC_PREPEND_FLAGS`, `NVCC_CCBIN`), its host
//! compiler's include variables, and those its `nvcc.profile` expands or
//! extends (`INCLUDES += "-I$(MY_INC)"`: `inputs::profile_variables`). A
//! result is **proven** by preprocessing the job again (`nvcc -E` with the
//! same arch, flags and source: byte for byte the text the compile read)
//! and comparing hashes.
//!
//! **The direct check** is the shortcut that usually makes a proof
//! unnecessary (ccache's "direct mode"): the record also holds
//!
//! - the **inputs**: the bytes of the source and of every file the
//!   preprocessor entered (from the text's line markers), each checked by
//!   its stat (size, mtime, ctime, inode) and re-hashed only when the stat
//!   differs, as git's index does;
//! - the **folders**: every folder the include search looked in or could
//!   have (the source's, each `-I`, `--system-include` and `CPATH`-like
//!   folder and every folder below them, through symbolic links, the
//!   toolkit's include folders as its profile set them, each input's folder
//!   and each probe's), by stat: a file created, removed or renamed in one
//!   changes it, whatever the file's name (`__has_include` of a macro, a
//!   header that shadows a toolkit header, by quotes or angle brackets,
//!   `#include_next`). A search folder with more than a thousand folders
//!   below it is kept with a stat that matches nothing: every build proves
//!   its jobs;
//! - the **probes**: the paths where a header of the same name as an
//!   input would have been found first, and the candidates of each literal
//!   `__has_include`, with whether each existed;
//! - the **outputs**: the cubin and PTX in `$OUT_DIR/occ` must be the very
//!   files the record was written with (size and mtime).
//!
//! When a hit must be proven ([`Direct`]):
//!
//! - everything holds: the result is used as it is, with no proof — except
//!   under `CI` (where a cached target folder feeds the gate) and with
//!   `OCC_CACHE=verify`, where **every** hit is proven. A hit the stats
//!   vouched for that the proof disproves is compiled again, with a
//!   warning saying which assumption failed (a file it now reads, one it
//!   no longer reads, one changed under an unchanged stat, or the same
//!   files preprocessing differently);
//! - no input's bytes changed (an input whose stat changed is re-hashed:
//!   a `touch` changes nothing), but a folder or a probe did (a file
//!   created, removed or renamed beside a source, in an `-I` folder, a
//!   checkout): the result is proven, and when it holds the record is
//!   rewritten with today's folders;
//! - an input's bytes changed or it is gone, the key differs, or an
//!   output is not the recorded file: the job runs again.
//!
//! nvcc's flags from a file (`--options-file`) are refused (`plan`): what
//! the file says would be in no key, no lock and, where it changes no
//! preprocessed text, no proof.
//!
//! A host-code library (one `nvcc -c` for every arch) has several texts
//! that `nvcc -E` cannot repeat; it has no proof (its record holds no
//! preprocessed hash, `None`, as does one of a job nvcc left no text of),
//! so where one is due it is compiled again.
//!
//! Inputs are snapshotted around the run: the source's bytes before nvcc
//! starts, every input's stat and bytes after it ends. A file whose bytes
//! changed, or whose mtime is not older than the job's start, was being
//! written while nvcc read it: the result is used for this build, but no
//! record is written, so the next build compiles again. A folder that
//! changed during the run is recorded with a stat that matches nothing,
//! so the next build proves the result.
//!
//! A result is committed in order: the outputs are renamed into place, then
//! the record — one file, written to a temporary name and renamed — last. A
//! build killed (or out of disk) before the record leaves the old record,
//! whose outputs no longer match, or none: either way the job runs again.
//!
//! Where and by whom: the record is `$OUT_DIR/occ/cache/<job>.json`
//! (`<stem>.lib.json` for a host-code library, whose outputs are all of
//! its files). The key also holds the source's absolute path (two
//! checkouts sharing a target dir get the same `OUT_DIR`); the toolkit's
//! identity is each program `nvcc --dryrun` runs, its profile, libdevice
//! and the launcher, by path, link target and stat. Inputs are the
//! preprocessed sources' flag-1 line markers (`#line` names read no file).
//! The user's search folders and the toolkit's include folders are watched,
//! so cargo reruns the script when a file appears in one. One build at a
//! time checks and commits a job ([`JobLock`] on `cache/<job>.lock`): a
//! second build into the same `OUT_DIR` waits, then reuses the first's
//! result. The next build removes the scratch folders and temporary files
//! of killed builds. The toolkit's files are watched, so a new ptxas
//! reruns the build script.
//!
//! Above the jobs, the build memo (`memo.rs`) serves a build in which
//! nothing changed without reading any record: it keeps a copy of each
//! record less nvcc's log, and reuses it while the record file has the
//! stat it had and the copy is still [`Record::valid`] for today's key. It
//! serves no build in which every hit is proven.
//!
//! What the direct check assumes (a proof assumes none of it): files are
//! changed through the file system (a change keeps size, mtime, ctime and
//! inode only if nothing was written); the file system keeps sub-second
//! timestamps (ext4, XFS, btrfs, tmpfs, APFS and NTFS do; on one with whole
//! seconds, an input rewritten with the same size within the second it was
//! recorded could be missed) and shares the build machine's clock; a
//! launcher (`OCC_NVCC_LAUNCHER`, e.g. sccache) is transparent, giving the
//! output nvcc would (a proof runs nvcc without it); a wrapper script given
//! as `NVCC` picks its real nvcc and flags the same way on each run (it is
//! seen through `--dryrun`; its real profile's variables are not read); the
//! host compiler's own headers (`/usr/include`) do not change; cargo reruns
//! the script by mtimes, so a symlink retargeted outside the watched
//! folders (or a toolkit switched that way) is seen only at the next rerun.

use crate::leaf::error::{Error, Result};
use crate::leaf::files::write_atomic;
use crate::leaf::job::Job;
use crate::leaf::nvcc_args;
use crate::leaf::nvcc_text::{
    dryrun_include_dirs, dryrun_library_dirs, dryrun_programs, dryrun_settings, expand,
};
use crate::process::{Cmd, Programs};
use crate::toolkit::{exe, Nvcc};
use occ_model::schema::manifest::Contribution;
use serde::{Deserialize, Serialize};
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The version of the record format; a new one invalidates every record
/// (6: the record keeps what the job contributed, parsed once).
const FORMAT: u32 = 6;

/// A job's record: `$OUT_DIR/occ/cache/<job>.json` (`out` is
/// `$OUT_DIR/occ`).
pub(crate) fn record_path(out: &Path, job: &str) -> PathBuf {
    out.join("cache").join(format!("{job}.json"))
}

/// A job's key (the module doc's first bullet): occ-model's code
/// (`occ_model::CODE`: the record keeps what it parsed), the toolkit, the source's
/// absolute path (two checkouts sharing a target dir get the same
/// `OUT_DIR`), the launcher, nvcc's arguments (`nvcc_args::for_job`, with
/// the job's canonical scratch folder, fixed per job name), the source and
/// arch, and the variables nvcc reads. Stage 4 checks a job's record by it,
/// and the build memo holds the records by it.
pub(crate) fn job_key(
    toolkit: &ToolkitId,
    nvcc: &Nvcc,
    vars: &NvccVars,
    root: &Path,
    out: &Path,
    job: &Job,
) -> String {
    let args = nvcc_args::for_job(job, &nvcc_args::scratch(out, job));
    hash_bytes(&[
        // The record keeps what occ-model parsed: another occ-model's
        // parse is another result.
        occ_model::CODE.as_bytes(),
        toolkit.id.as_bytes(),
        root.join(&job.source).to_string_lossy().as_bytes(),
        format!("{:?}", nvcc.launcher).as_bytes(),
        format!("{args:?}").as_bytes(),
        job.source.as_bytes(),
        job.arch.as_bytes(),
        format!("{vars:?}").as_bytes(),
    ])
}

/// A 128-bit content hash, as hex (two SipHash passes with different keys).
///
/// SipHash is what std ships; a collision needs 2^64 tries for either half.
/// A dependency-free hash keeps the build script small, and inputs are
/// re-hashed only when their stat changed.
pub(crate) fn hash_bytes(parts: &[&[u8]]) -> String {
    let mut a = DefaultHasher::new();
    let mut b = DefaultHasher::new();
    0xa5u8.hash(&mut b);
    for part in parts {
        part.len().hash(&mut a);
        part.hash(&mut a);
        part.len().hash(&mut b);
        part.hash(&mut b);
    }
    format!("{:016x}{:016x}", a.finish(), b.finish())
}

/// What identifies a file's contents without reading them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct Stat {
    len: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    ino: u64,
}

impl Stat {
    /// The stat of `path` (following links); `None` when it cannot be read.
    pub fn of(path: &Path) -> Option<Stat> {
        let meta = std::fs::metadata(path).ok()?;
        if !meta.is_file() {
            return None;
        }
        Some(Stat::from_meta(&meta))
    }

    /// The stat of the folder `path` (following links); `None` when there
    /// is no folder there. A folder's mtime and ctime change whenever an
    /// entry is created, removed or renamed in it.
    pub fn of_dir(path: &Path) -> Option<Stat> {
        let meta = std::fs::metadata(path).ok()?;
        meta.is_dir().then(|| Stat::from_meta(&meta))
    }

    /// A stat that matches no file: for one that changed while it was
    /// read, which no stat can vouch for.
    fn unknown(self) -> Stat {
        Stat {
            len: u64::MAX,
            ..self
        }
    }

    fn from_meta(meta: &std::fs::Metadata) -> Stat {
        let mtime_ns = meta.modified().ok().map_or(0, nanos);
        #[cfg(unix)]
        let (ctime_ns, ino) = {
            use std::os::unix::fs::MetadataExt;
            (
                i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
                meta.ino(),
            )
        };
        #[cfg(not(unix))]
        let (ctime_ns, ino) = (0, 0);
        Stat {
            len: meta.len(),
            mtime_ns,
            ctime_ns,
            ino,
        }
    }

    /// Whether a file with this stat may have been written at or after `t`.
    pub fn not_older_than(&self, t: SystemTime) -> bool {
        let t = nanos(t);
        self.mtime_ns >= t || self.ctime_ns >= t
    }
}

fn nanos(t: SystemTime) -> i128 {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

/// One input file of a job: where, its stat, and its bytes' hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Input {
    /// Absolute path.
    pub path: PathBuf,
    /// Its stat when the record was written.
    pub stat: Stat,
    /// Its bytes' hash.
    pub hash: String,
}

impl Input {
    /// Reads `path` now; `None` when it is gone.
    pub fn read(path: &Path) -> Option<Input> {
        let before = Stat::of(path)?;
        let bytes = std::fs::read(path).ok()?;
        let after = Stat::of(path)?;
        // Written while we read it: no stat can vouch for these bytes.
        let stat = if before == after {
            after
        } else {
            after.unknown()
        };
        Some(Input {
            path: path.to_path_buf(),
            stat,
            hash: hash_bytes(&[&bytes]),
        })
    }

    /// Whether the file still holds the recorded bytes: its stat is the
    /// recorded one (and the record was not written in the same instant the
    /// file was), or its bytes hash the same.
    pub fn unchanged(&self, recorded_at: i128) -> bool {
        match Stat::of(&self.path) {
            None => false,
            Some(now) if now == self.stat && self.stat.mtime_ns < recorded_at => true,
            Some(_) => Input::read(&self.path).is_some_and(|now| now.hash == self.hash),
        }
    }
}

/// An output file of a job in `$OUT_DIR/occ`, as committed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Output {
    /// The file name inside `$OUT_DIR/occ`.
    pub file: String,
    /// Its stat right after it was put in place.
    pub stat: Stat,
}

/// Everything the cache knows of one job's last complete result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// [`FORMAT`].
    pub format: u32,
    /// The job's key (toolkit, arguments, nvcc's variables).
    pub key: String,
    /// When the record was written (ns since the epoch).
    pub recorded_at: i128,
    /// The source and every file the preprocessor entered.
    pub inputs: Vec<Input>,
    /// Paths whose existence the preprocessor's result depends on, and
    /// whether each existed: headers that would shadow an input (absent),
    /// and the candidates of each `__has_include` in the user's files.
    pub probes: Vec<(PathBuf, bool)>,
    /// Every folder the include search looked in or could have (the
    /// source's, each `-I`, the toolkit's, each input's and each probe's),
    /// by stat (`None`: no folder there): a file created, removed or
    /// renamed in one changes its stat, whatever its name or whoever would
    /// have found it (`__has_include` of a macro, a header that shadows
    /// the toolkit's).
    pub folders: Vec<(PathBuf, Option<Stat>)>,
    /// The hash of the preprocessed text nvcc compiled (the device side's
    /// `.cpp1.ii`), the key of record: a cached result is proven by
    /// preprocessing again and comparing ([`Direct`]). `None` for a
    /// host-code library, whose several texts one `nvcc -E` cannot give,
    /// and when nvcc left no text; a record of format 6 from before it was
    /// an `Option` says so with `""`, which reads as `None`.
    #[serde(deserialize_with = "empty_is_none")]
    pub preprocessed: Option<String>,
    /// The cubin and the PTX.
    pub outputs: Vec<Output>,
    /// nvcc's output (the ptxas `-v` log).
    pub log: String,
    /// What the job contributed, per arch ([`occ_model::compiler::analyze::contribution`]:
    /// its kernels as the compiler left them, parsed once, when it ran),
    /// so that a build of cached jobs assembles without parsing anything.
    pub contributions: Vec<Contribution>,
}

/// How a record stands against the files as they are now, checked by
/// stats alone (ccache's "direct mode"), before any proof.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direct {
    /// Every input holds its recorded bytes (by stat, else re-hashed: a
    /// `touch` changes nothing), and every probe and folder is as recorded.
    Holds,
    /// Every input holds its recorded bytes, but a folder or a probe
    /// changed (a file created, removed or renamed where the include search
    /// looks): preprocessing again says whether the result still holds.
    Unsure,
    /// An input's bytes changed or it is gone: the job runs again.
    Changed,
}

impl Record {
    /// Whether this record still describes the job with key `key` in `out`
    /// by stats alone ([`Record::fits`] and [`Direct::Holds`]).
    pub fn valid(&self, key: &str, out: &Path) -> bool {
        self.fits(key, out) && self.direct() == Direct::Holds
    }

    /// Whether the record is of this format and key and its outputs are
    /// the very files it was written with: what no proof by preprocessing
    /// can vouch for.
    pub fn fits(&self, key: &str, out: &Path) -> bool {
        self.format == FORMAT
            && self.key == key
            && self
                .outputs
                .iter()
                .all(|o| Stat::of(&out.join(&o.file)) == Some(o.stat))
    }

    /// The direct check of the inputs, the probes and the folders.
    pub fn direct(&self) -> Direct {
        if !self.inputs.iter().all(|i| i.unchanged(self.recorded_at)) {
            return Direct::Changed;
        }
        let probes_hold = self
            .probes
            .iter()
            .all(|(p, existed)| std::fs::symlink_metadata(p).is_ok() == *existed);
        let folders_hold = self
            .folders
            .iter()
            .all(|(dir, stat)| Stat::of_dir(dir) == *stat);
        if probes_hold && folders_hold {
            Direct::Holds
        } else {
            Direct::Unsure
        }
    }

    /// Reads a record; `None` when missing, unreadable or of another format.
    pub fn read(path: &Path) -> Option<Record> {
        let text = std::fs::read(path).ok()?;
        let record: Record = serde_json::from_slice(&text).ok()?;
        (record.format == FORMAT).then_some(record)
    }

    /// Why this record's result did not hold, though every stat said it
    /// did, given what preprocessing read now (`now`, absolute and
    /// sorted): the assumption of the direct check that failed.
    pub fn disproof(&self, now: &[PathBuf], root: &Path) -> String {
        let name = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
        let recorded: Vec<&PathBuf> = self.inputs.iter().map(|i| &i.path).collect();
        if let Some(new) = now.iter().find(|p| !recorded.contains(p)) {
            return format!(
                "it now reads {}, which it did not: a file appeared where the include search looks",
                name(new)
            );
        }
        if let Some(gone) = recorded.iter().find(|p| !now.contains(p)) {
            return format!("it no longer reads {}", name(gone));
        }
        if let Some(changed) = self
            .inputs
            .iter()
            .find(|i| Input::read(&i.path).is_none_or(|now| now.hash != i.hash))
        {
            return format!(
                "{} changed but kept its size, times and inode",
                name(&changed.path)
            );
        }
        "the same files with the same bytes preprocess differently: a setting from outside \
         the files changed (a variable that nvcc, its profile or the host compiler expands)"
            .to_string()
    }
}

/// The snapshot before nvcc starts: when, and the source's bytes.
#[derive(Debug)]
pub(crate) struct Before {
    started: SystemTime,
    source: Input,
}

impl Before {
    /// Takes the snapshot of `source` (absolute); `None` when it is gone.
    pub fn take(source: &Path) -> Option<Before> {
        let started = SystemTime::now();
        Some(Before {
            started,
            source: Input::read(source)?,
        })
    }
}

/// A finished nvcc run of one job, as [`commit`] takes it (or a proof by
/// preprocessing, as [`refresh`] takes it).
#[derive(Debug)]
pub(crate) struct Finished<'a> {
    /// The job's key.
    pub key: &'a str,
    /// The crate root.
    pub root: &'a Path,
    /// The job's source, absolute.
    pub source: &'a Path,
    /// Every input nvcc read (the source among them), absolute and sorted.
    pub deps: &'a [PathBuf],
    /// The user's folders the includes search ([`search_dirs`]).
    pub search: &'a [PathBuf],
    /// The toolkit's root: its headers are covered by its identity.
    pub toolkit_top: Option<&'a Path>,
    /// The toolkit's include folders ([`ToolkitId::include_dirs`]).
    pub toolkit_dirs: &'a [PathBuf],
    /// Every folder below the user's search folders ([`subfolders`]): a
    /// header created in one (`#include "gen/x.cuh"`) changes its stat.
    pub subfolders: &'a [PathBuf],
    /// The search folders with too many folders below them to walk: kept
    /// with a stat that matches nothing, so every build proves the result.
    pub unwalked: &'a [PathBuf],
    /// Each file nvcc left in its scratch folder, with its name in `out`.
    pub moves: &'a [(PathBuf, String)],
    /// `$OUT_DIR/occ`.
    pub out: &'a Path,
    /// The job's record, `cache/<job>.json`.
    pub record: &'a Path,
    /// nvcc's log.
    pub log: &'a str,
    /// What the job contributed, per arch.
    pub contributions: &'a [Contribution],
    /// The hash of the preprocessed text ([`Record::preprocessed`]).
    pub preprocessed: Option<&'a str>,
}

/// The files as they stand after a run: every input's bytes and stat, the
/// probes and the folders, and the input (or shadowing header) that
/// changed while the run read them, if any.
struct Snapshot {
    inputs: Vec<Input>,
    probes: Vec<(PathBuf, bool)>,
    folders: Vec<(PathBuf, Option<Stat>)>,
    unstable: Option<PathBuf>,
}

fn snapshot(before: &Before, run: &Finished<'_>) -> Snapshot {
    let inputs: Vec<Option<Input>> = run.deps.iter().map(|d| Input::read(d)).collect();
    let changed = run
        .deps
        .iter()
        .zip(&inputs)
        .find(|(path, input)| match input {
            None => true,
            Some(i) => {
                i.stat.not_older_than(before.started)
                    || (*path == run.source && i.hash != before.source.hash)
            }
        });
    // The include search as it stands now: a shadowing header that
    // exists now but was no input appeared while nvcc ran.
    let (mut probes, appeared) = shadow_probes(
        run.root,
        run.deps,
        run.search,
        run.toolkit_top,
        before.started,
    );
    probes.extend(has_include_probes(
        run.root,
        run.deps,
        run.search,
        run.toolkit_top,
    ));
    let folders = searched_folders(run, &probes, before.started);
    let unstable = changed.map(|(p, _)| p).or(appeared.first()).cloned();
    Snapshot {
        inputs: inputs.into_iter().flatten().collect(),
        probes,
        folders,
        unstable,
    }
}

/// The folders a record keeps by stat ([`Record::folders`]): the user's
/// search folders, the toolkit's include folders, each input's folder and
/// each probe's, less those of `$OUT_DIR/occ` (occ writes there itself).
/// A folder that changed while the run read it is kept as no stat can
/// match: the next build proves the result before it trusts it.
fn searched_folders(
    run: &Finished<'_>,
    probes: &[(PathBuf, bool)],
    started: SystemTime,
) -> Vec<(PathBuf, Option<Stat>)> {
    let mut dirs: Vec<&Path> = run.search.iter().map(PathBuf::as_path).collect();
    dirs.extend(run.toolkit_dirs.iter().map(PathBuf::as_path));
    dirs.extend(run.subfolders.iter().map(PathBuf::as_path));
    dirs.extend(run.deps.iter().filter_map(|d| d.parent()));
    dirs.extend(probes.iter().filter_map(|(p, _)| p.parent()));
    dirs.sort();
    dirs.dedup();
    // The anchor header is named from the crate root (`<root>/../target/…`
    // when the target folder is beside the crate): compared without `..`.
    let out = crate::leaf::files::lexical(run.out);
    dirs.into_iter()
        .filter(|d| !crate::leaf::files::lexical(d).starts_with(&out))
        .map(|d| {
            let stat = Stat::of_dir(d).map(|s| {
                if s.not_older_than(started) {
                    s.unknown()
                } else {
                    s
                }
            });
            (d.to_path_buf(), stat)
        })
        .chain(
            run.unwalked
                .iter()
                .map(|d| (d.clone(), Stat::of_dir(d).map(Stat::unknown))),
        )
        .collect()
}

/// The most folders [`subfolders`] walks below one search folder.
const MAX_SUBFOLDERS: usize = 1000;

/// Every folder below `dir` (not `dir` itself), sorted; `None` when there
/// are more than [`MAX_SUBFOLDERS`]. A symbolic link to a folder is walked
/// as the folder (its stat is the target's), each folder once. Not walked:
/// `.git`, `target` and any folder that holds `out` or lies in it (occ
/// writes there itself).
pub(crate) fn subfolders(dir: &Path, out: &Path) -> Option<Vec<PathBuf>> {
    let out = crate::leaf::files::lexical(out);
    let mut found = Vec::new();
    let mut seen: std::collections::HashSet<PathBuf> =
        std::fs::canonicalize(dir).into_iter().collect();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(next) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            // Through links: a linked folder's files are found through it.
            let is_dir = std::fs::metadata(&path).is_ok_and(|m| m.is_dir())
                && std::fs::canonicalize(&path).is_ok_and(|c| seen.insert(c));
            let name = entry.file_name();
            let lexical = crate::leaf::files::lexical(&path);
            if !is_dir
                || name == ".git"
                || name == "target"
                || lexical.starts_with(&out)
                || out.starts_with(&lexical)
            {
                continue;
            }
            if found.len() == MAX_SUBFOLDERS {
                return None;
            }
            found.push(path.clone());
            todo.push(path);
        }
    }
    found.sort();
    Some(found)
}

/// Commits a finished job, in the order the module doc gives: the
/// snapshot after nvcc (every input's bytes and stat, the include probes
/// and folders), the outputs renamed into place, then the record, written
/// last and atomically — or, when an input changed while nvcc ran (its
/// bytes, or a stat not older than the job's start, or a shadowing header
/// that appeared), no record. Returns that changed input, if any: the
/// result is good for this build only.
pub(crate) fn commit(before: &Before, run: &Finished<'_>) -> Result<Option<PathBuf>> {
    let snapshot = snapshot(before, run);
    let mut outputs = Vec::new();
    for (from, to) in run.moves {
        let dest = run.out.join(to);
        std::fs::rename(from, &dest)
            .map_err(|e| Error::io(format!("cannot write {}", dest.display()), e))?;
        let stat = Stat::of(&dest).ok_or_else(|| {
            Error::io(
                format!("cannot read {}", dest.display()),
                std::io::Error::from(std::io::ErrorKind::NotFound),
            )
        })?;
        outputs.push(Output {
            file: to.clone(),
            stat,
        });
    }
    if snapshot.unstable.is_some() {
        // The old record's outputs were just replaced: it cannot match
        // again, but leave nothing that looks like a result.
        let _ = std::fs::remove_file(run.record);
        return Ok(snapshot.unstable);
    }
    write_record(run, snapshot, outputs)?;
    Ok(None)
}

/// Rewrites the record of a result that preprocessing proved (the same
/// text as recorded) with the files as they are now, so that the next
/// build's direct check holds again; the outputs stay. When a file changed
/// while it was read, the old record stays, and the next build proves
/// the result again.
pub(crate) fn refresh(before: &Before, run: &Finished<'_>, outputs: Vec<Output>) -> Result<()> {
    let snapshot = snapshot(before, run);
    if snapshot.unstable.is_some() {
        return Ok(());
    }
    write_record(run, snapshot, outputs)
}

/// `""` as `None`: what [`Record::preprocessed`] held for "no text" before
/// it was an `Option`, so that those records still read.
fn empty_is_none<'de, D>(d: D) -> std::result::Result<Option<String>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Ok(Option::<String>::deserialize(d)?.filter(|s| !s.is_empty()))
}

fn write_record(run: &Finished<'_>, snapshot: Snapshot, outputs: Vec<Output>) -> Result<()> {
    let record = Record {
        format: FORMAT,
        key: run.key.to_string(),
        recorded_at: nanos(SystemTime::now()),
        inputs: snapshot.inputs,
        probes: snapshot.probes,
        folders: snapshot.folders,
        preprocessed: run.preprocessed.map(str::to_string),
        outputs,
        log: run.log.to_string(),
        contributions: run.contributions.to_vec(),
    };
    let text = serde_json::to_vec(&record).map_err(|e| {
        Error::io(
            format!("cannot write {}", run.record.display()),
            std::io::Error::other(e),
        )
    })?;
    write_atomic(run.record, &text)
}

/// An exclusive advisory lock on `cache/<job>.lock`, released on drop.
///
/// Cargo never runs two build scripts in one `OUT_DIR`, but two builds
/// given the same `OUT_DIR` by hand (or a script run twice) may. Where the
/// file system has no locks (some network mounts) the job runs unlocked:
/// a record whose outputs were replaced under it then fails its output
/// check and the job runs again, which costs time but is never stale.
pub(crate) struct JobLock(Option<std::fs::File>);

impl JobLock {
    /// Takes the lock beside `record`, waiting for a build that holds it.
    pub fn take(record: &Path) -> JobLock {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(record.with_extension("lock"))
            .ok()
            .filter(|f| f.lock().is_ok());
        JobLock(file)
    }
}

impl Drop for JobLock {
    fn drop(&mut self) {
        if let Some(file) = &self.0 {
            let _ = file.unlock();
        }
    }
}

/// The identity of the toolkit every job of a build runs: nvcc as it
/// really is (seen through `--dryrun`, so a wrapper script's real nvcc
/// counts), every program it starts (cicc, ptxas, the host compiler, ...),
/// its profile and libdevice, and the launcher.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ToolkitId {
    /// What the identity was computed from: nvcc's and the launcher's stat,
    /// the arguments and nvcc's variables. Unchanged, with unchanged tools,
    /// the dry run is not repeated.
    probe: String,
    /// Every file the identity covers: the path nvcc finds it by, the file
    /// that path leads to through links, and that file's stat.
    pub tools: Vec<Tool>,
    /// The dry run's text (the commands nvcc would run).
    dryrun: String,
    /// The toolkit's root (`TOP` of the profile): its headers are the
    /// toolkit's, covered by its identity, never the user's.
    pub top: Option<PathBuf>,
    /// The hash of all of the above.
    pub id: String,
}

/// One program or data file of the toolkit.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct Tool {
    /// The path as nvcc (or its profile) names it.
    pub path: PathBuf,
    /// Where that path leads through links: a link pointed elsewhere is a
    /// changed tool, even when the new target's stat is old.
    pub target: PathBuf,
    /// The target's stat.
    pub stat: Stat,
}

impl Tool {
    fn find(path: PathBuf) -> Option<Tool> {
        let target = std::fs::canonicalize(&path).ok()?;
        let stat = Stat::of(&target)?;
        Some(Tool { path, target, stat })
    }

    fn unchanged(&self) -> bool {
        Tool::find(self.path.clone()).as_ref() == Some(self)
    }
}

/// The variables nvcc reads by itself (its own, its host compiler's and
/// those its profile expands), with their values in this build.
pub(crate) type NvccVars = Vec<(String, Option<String>)>;

impl ToolkitId {
    /// The identity, from `cache` when nothing it covers changed, else from
    /// a new `nvcc --dryrun` with `args` (a job's full arguments).
    pub fn identify(
        nvcc: &Nvcc,
        programs: &dyn Programs,
        vars: &NvccVars,
        path_var: Option<&str>,
        args: &[String],
        root: &Path,
        cache: &Path,
    ) -> Result<ToolkitId> {
        let probe = hash_bytes(&[
            format!("{FORMAT}").as_bytes(),
            format!("{:?}", Stat::of(&nvcc.path)).as_bytes(),
            nvcc.path.to_string_lossy().as_bytes(),
            format!("{:?}", nvcc.launcher).as_bytes(),
            format!(
                "{:?}",
                nvcc.launcher
                    .as_deref()
                    .and_then(|l| which(l, path_var))
                    .and_then(|p| Stat::of(&p))
            )
            .as_bytes(),
            format!("{args:?}").as_bytes(),
            format!("{vars:?}").as_bytes(),
            // Which `gcc` or `ptxas` a name means.
            path_var.unwrap_or("").as_bytes(),
        ]);
        if let Some(known) = std::fs::read(cache)
            .ok()
            .and_then(|t| serde_json::from_slice::<ToolkitId>(&t).ok())
        {
            if known.probe == probe && known.tools.iter().all(Tool::unchanged) {
                return Ok(known);
            }
        }
        let toolkit = ToolkitId::from_dryrun(nvcc, programs, vars, path_var, args, root, probe)?;
        if let Ok(text) = serde_json::to_vec(&toolkit) {
            // A cache of the identity only: failing to write it costs a dry run.
            let _ = write_atomic(cache, &text);
        }
        Ok(toolkit)
    }

    /// Long because it reads the dry run's settings and programs in the order nvcc
    /// prints them, and each program it finds is part of the identity.
    fn from_dryrun(
        nvcc: &Nvcc,
        programs: &dyn Programs,
        vars: &NvccVars,
        path_var: Option<&str>,
        args: &[String],
        root: &Path,
        probe: String,
    ) -> Result<ToolkitId> {
        let mut cmd = Cmd::new(&nvcc.path);
        nvcc_vars(&mut cmd, vars);
        cmd.arg("--dryrun").args(args).current_dir(root);
        let output = programs.output(&cmd).map_err(|e| {
            Error::Shell(occ_shell::Error::NvccNotRunnable {
                nvcc: nvcc.path.clone(),
                reason: e.to_string(),
            })
        })?;
        let text = String::from_utf8_lossy(&output.stderr).into_owned();
        let settings = dryrun_settings(&text);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let here = match settings.iter().find(|(k, _)| k == "_HERE_") {
            Some((_, v)) => PathBuf::from(v),
            // nvcc refused the dry run itself (a bad flag): the jobs will
            // say why; identify the toolkit by the program alone.
            None if format!("{text}{stdout}")
                .to_ascii_lowercase()
                .contains("nvcc") =>
            {
                nvcc.path
                    .parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_default()
            }
            None => {
                return Err(Error::NotAnNvcc {
                    nvcc: nvcc.path.clone(),
                    origin: nvcc.origin.clone(),
                    detail: first_line(&text, &stdout),
                })
            }
        };
        // nvcc's own search path, as its profile set it.
        let nvcc_path = settings
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let mut files: Vec<PathBuf> = vec![
            here.join(exe("nvcc")),
            here.join("nvcc.profile"),
            nvcc.path.clone(),
        ];
        if let Some(launcher) = nvcc.launcher.as_deref().and_then(|l| which(l, path_var)) {
            files.push(launcher);
        }
        if let Some((_, dir)) = settings.iter().find(|(k, _)| k == "NVVMIR_LIBRARY_DIR") {
            if let Ok(entries) = std::fs::read_dir(dir) {
                files.extend(entries.filter_map(|e| e.ok().map(|e| e.path())));
            }
        }
        for program in dryrun_programs(&text) {
            let program = expand(&program, &settings);
            let found = if program.contains('/') {
                Some(PathBuf::from(&program))
            } else {
                std::env::split_paths(&nvcc_path)
                    .map(|d| d.join(&program))
                    .find(|p| p.is_file())
            };
            files.extend(found);
        }
        let mut tools: Vec<Tool> = files.into_iter().filter_map(Tool::find).collect();
        tools.sort();
        tools.dedup();
        let top = settings
            .iter()
            .find(|(k, _)| k == "TOP")
            .map(|(_, v)| std::fs::canonicalize(v).unwrap_or_else(|_| PathBuf::from(v)));
        // The identity is what runs: the tools and the commands, not the
        // search path that found them (a new PATH that resolves to the same
        // programs changes nothing).
        let commands: String = text
            .lines()
            .filter(|l| !l.starts_with("#$ PATH=") && !l.starts_with("#$ LD_LIBRARY_PATH="))
            .map(|l| format!("{l}\n"))
            .collect();
        let id = hash_bytes(&[
            format!("{FORMAT}").as_bytes(),
            format!("{tools:?}").as_bytes(),
            commands.as_bytes(),
        ]);
        Ok(ToolkitId {
            probe,
            tools,
            dryrun: text,
            top,
            id,
        })
    }
}

impl ToolkitId {
    /// The toolkit's include folders, as its profile set them for every
    /// job (the dry run's `INCLUDES` and `SYSTEM_INCLUDES`).
    pub fn include_dirs(&self) -> Vec<PathBuf> {
        dryrun_include_dirs(&self.dryrun)
            .into_iter()
            .map(|d| std::fs::canonicalize(&d).unwrap_or_else(|_| PathBuf::from(d)))
            .collect()
    }

    /// The toolkit's library folders, as nvcc links with them (the dry
    /// run's `LIBRARIES`), without the driver stubs: where `libcudart`
    /// is, on every layout (the wheels' `lib/`, a system install's
    /// `targets/<arch>-linux/lib`).
    pub fn lib_dirs(&self) -> Vec<PathBuf> {
        dryrun_library_dirs(&self.dryrun)
            .into_iter()
            .map(|d| std::fs::canonicalize(&d).unwrap_or_else(|_| PathBuf::from(d)))
            .filter(|d| !d.ends_with("stubs"))
            .collect()
    }
}

/// Sets (or clears) the variables nvcc reads on a command, so that nvcc
/// sees exactly what the build read through [`crate::env::Env`].
pub(crate) fn nvcc_vars(cmd: &mut Cmd, vars: &NvccVars) {
    for (name, value) in vars {
        match value {
            Some(v) => cmd.env(name, v),
            None => cmd.env_remove(name),
        };
    }
}

/// A program name or path as the OS would run it (`sccache` via `path`,
/// the build's `PATH` as its [`crate::env::Env`] read it, and watches it).
fn which(program: &Path, path: Option<&str>) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return Some(program.to_path_buf());
    }
    std::env::split_paths(path?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

fn first_line(stderr: &str, stdout: &str) -> String {
    stderr
        .lines()
        .chain(stdout.lines())
        .find(|l| !l.trim().is_empty())
        .unwrap_or("it printed nothing for --dryrun")
        .trim()
        .to_string()
}

/// The folders a job's `#include`s search that belong to the user, in
/// order: the source's folder, then each `-I` of the arguments. (The
/// toolkit's own folders are covered by the toolkit's identity.)
pub(crate) fn search_dirs(root: &Path, source: &Path, args: &[String]) -> Vec<PathBuf> {
    let abs = |d: &str| {
        let d = Path::new(d);
        if d.is_absolute() {
            d.to_path_buf()
        } else {
            root.join(d)
        }
    };
    let mut dirs = Vec::new();
    if let Some(dir) = source.parent() {
        dirs.push(dir.to_path_buf());
    }
    // nvcc's include options, each taking a comma-separated list
    // (`-Ia,b`), as a word of their own or joined to their value.
    const OPTIONS: [&str; 4] = ["--include-path", "--system-include", "-isystem", "-I"];
    let mut iter = args.iter();
    while let Some(a) = iter.next() {
        let value = if OPTIONS.contains(&a.as_str()) {
            iter.next().map(String::as_str)
        } else {
            OPTIONS.iter().find_map(|o| {
                a.strip_prefix(o)
                    .map(|v| v.strip_prefix('=').unwrap_or(v))
                    .filter(|v| !v.is_empty())
            })
        };
        dirs.extend(
            value
                .into_iter()
                .flat_map(|v| v.split(','))
                .filter(|d| !d.is_empty())
                .map(abs),
        );
    }
    dirs
}

/// The paths that must stay absent for the user's inputs (those in the
/// crate or a search folder) to be what `#include` finds: for each such
/// input below a search folder (as `folder/rel`), `rel` in every folder an
/// include could look in first (the folders of the user's inputs, for
/// quoted includes, and the search folders before that one).
/// Deliberately wide: a spurious entry costs a rerun only if someone
/// creates exactly that file.
/// Also returns the candidates that exist but are no input, in a folder
/// searched before the input's, and were written at or after `started`: a
/// header that appeared while nvcc ran and would shadow one it read.
pub(crate) fn shadow_probes(
    root: &Path,
    inputs: &[PathBuf],
    search: &[PathBuf],
    toolkit: Option<&Path>,
    started: SystemTime,
) -> (Vec<(PathBuf, bool)>, Vec<PathBuf>) {
    let user: Vec<&PathBuf> = inputs
        .iter()
        .filter(|p| p.starts_with(root) || search.iter().any(|d| p.starts_with(d)))
        .filter(|p| toolkit.is_none_or(|t| !p.starts_with(t)))
        .collect();
    let mut includer_dirs: Vec<PathBuf> = user
        .iter()
        .filter_map(|p| p.parent().map(Path::to_path_buf))
        .collect();
    includer_dirs.sort();
    includer_dirs.dedup();
    let mut probes = Vec::new();
    let mut appeared = Vec::new();
    for input in &user {
        for (k, dir) in search.iter().enumerate() {
            let Ok(rel) = input.strip_prefix(dir) else {
                continue;
            };
            for other in includer_dirs.iter().chain(search[..k].iter()) {
                let candidate = other.join(rel);
                if candidate == **input || inputs.contains(&candidate) {
                    continue;
                }
                if std::fs::symlink_metadata(&candidate).is_err() {
                    probes.push((candidate, false));
                } else if earlier_than(&candidate, input, search)
                    && Stat::of(&candidate).is_none_or(|s| s.not_older_than(started))
                {
                    appeared.push(candidate);
                }
            }
        }
    }
    probes.sort();
    probes.dedup();
    (probes, appeared)
}

/// Whether `candidate` lies in a search folder that comes before the one
/// `input` was found in (so it would have been found instead). Folders of
/// includers are not ordered here: only the `-I` order is certain.
fn earlier_than(candidate: &Path, input: &Path, search: &[PathBuf]) -> bool {
    let position = |p: &Path| search.iter().position(|d| p.parent() == Some(d.as_path()));
    matches!((position(candidate), position(input)), (Some(c), Some(i)) if c < i)
}

/// The files named by `__has_include("name")` / `__has_include(<name>)` (and
/// `__has_include_next`) in the user's inputs, looked up as the
/// preprocessor would: in each folder of `search` and of the user's inputs,
/// with whether each candidate exists now. A header that a `__has_include`
/// found missing is no input, yet creating it changes the output.
pub(crate) fn has_include_probes(
    root: &Path,
    inputs: &[PathBuf],
    search: &[PathBuf],
    toolkit: Option<&Path>,
) -> Vec<(PathBuf, bool)> {
    let user = |p: &&PathBuf| {
        (p.starts_with(root) || search.iter().any(|d| p.starts_with(d)))
            && toolkit.is_none_or(|t| !p.starts_with(t))
    };
    let mut names = Vec::new();
    let mut dirs: Vec<PathBuf> = search.to_vec();
    for input in inputs.iter().filter(user) {
        if let Some(dir) = input.parent() {
            dirs.push(dir.to_path_buf());
        }
        let Ok(text) = std::fs::read(input) else {
            continue;
        };
        names.extend(has_include_names(&text));
    }
    dirs.sort();
    dirs.dedup();
    names.sort();
    names.dedup();
    let mut probes = Vec::new();
    for name in &names {
        for dir in &dirs {
            let candidate = dir.join(name);
            let exists = std::fs::symlink_metadata(&candidate).is_ok();
            probes.push((candidate, exists));
        }
    }
    probes
}

/// The names inside `__has_include(...)` in a source text.
fn has_include_names(text: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(text);
    let mut names = Vec::new();
    let mut rest: &str = &text;
    while let Some(at) = rest.find("__has_include") {
        rest = &rest[at + "__has_include".len()..];
        let after = rest.strip_prefix("_next").unwrap_or(rest).trim_start();
        let Some(arg) = after.strip_prefix('(') else {
            continue;
        };
        let arg = arg.trim_start();
        let close = match arg.chars().next() {
            Some('"') => '"',
            Some('<') => '>',
            _ => continue,
        };
        if let Some(end) = arg[1..].find(close) {
            let name = &arg[1..1 + end];
            if !name.is_empty() && !name.contains('\n') {
                names.push(name.to_string());
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A launcher named without a folder is looked up on the `PATH` the
    /// build read through its environment reader (which watches it), not
    /// on the process's own.
    #[test]
    fn a_bare_launcher_is_found_on_the_path_the_build_read() {
        let dir = std::env::temp_dir().join(format!("occ-which-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("my-launcher"), "").expect("launcher");
        let path = std::env::join_paths([Path::new("/nowhere"), &dir]).expect("PATH");
        let path = path.to_str().expect("utf-8");
        let bare = Path::new("my-launcher");
        assert_eq!(which(bare, Some(path)), Some(dir.join("my-launcher")));
        assert_eq!(which(bare, Some("/nowhere")), None);
        assert_eq!(which(bare, None), None);
        assert_eq!(
            which(Path::new("/opt/sccache"), None),
            Some(PathBuf::from("/opt/sccache"))
        );
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
    use crate::process::{Output, Status};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// nvcc 13.5's recorded `--dryrun` of a job (`tests/fixtures/nvcc-13.5`,
    /// the replay fixtures): its arguments and what it printed, with the
    /// toolkit at `toolkit` and the output folder at `out`.
    fn recorded_dryrun(toolkit: &Path, out: &Path) -> Option<(Vec<String>, String)> {
        let runs = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/nvcc-13.5/replay/memo_unchanged/runs.json");
        let runs: serde_json::Value = serde_json::from_slice(&std::fs::read(runs).ok()?).ok()?;
        let fill = |s: &str| {
            s.replace("@TOOLKIT@", &toolkit.display().to_string())
                .replace("@OUT@", &out.display().to_string())
        };
        let run = runs.as_array()?.iter().find(|r| {
            r["args"]
                .as_array()
                .is_some_and(|a| a.iter().any(|a| a == "--dryrun"))
        })?;
        let args = run["args"].as_array()?.iter().skip(1);
        let args = args.map(|a| a.as_str().map(fill)).collect::<Option<_>>()?;
        Some((args, fill(run["stderr"].as_str()?)))
    }

    /// Serves the recorded dry run to that command (and refuses any other),
    /// counting the runs.
    #[derive(Debug)]
    struct DryRun {
        args: Vec<String>,
        stderr: String,
        runs: AtomicUsize,
    }

    impl Programs for DryRun {
        fn output(&self, cmd: &Cmd) -> std::io::Result<Output> {
            let args: Vec<String> = cmd.get_args()[1..]
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            assert_eq!(cmd.get_args()[0], "--dryrun");
            assert_eq!(args, self.args, "not the recorded command");
            self.runs.fetch_add(1, Ordering::SeqCst);
            Ok(Output {
                status: Status {
                    code: Some(0),
                    signal: None,
                },
                stdout: Vec::new(),
                stderr: self.stderr.clone().into_bytes(),
            })
        }
    }

    #[test]
    fn the_toolkits_identity_is_one_dry_run_until_what_it_covers_changes() {
        let dir = std::env::temp_dir().join(format!("occ-identity-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (toolkit, out) = (dir.join("toolkit"), dir.join("crate/out"));
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/nvcc-13.5");
        if !fixtures.is_dir() {
            return; // a packaged occ-build
        }
        let (args, stderr) = recorded_dryrun(&toolkit, &out).expect("the recorded dry run");
        std::fs::create_dir_all(toolkit.join("bin")).expect("toolkit");
        std::fs::create_dir_all(&out).expect("out");
        std::fs::write(toolkit.join("bin/nvcc"), "").expect("nvcc");
        let nvcc = Nvcc {
            path: toolkit.join("bin/nvcc"),
            origin: "test".into(),
            launcher: None,
        };
        let dry = DryRun {
            args: args.clone(),
            stderr,
            runs: AtomicUsize::new(0),
        };
        let cache = out.join("toolkit.json");
        let root = dir.join("crate");
        let identify = |vars: &NvccVars| {
            ToolkitId::identify(&nvcc, &dry, vars, None, &args, &root, &cache).expect("identify")
        };
        let first = identify(&Vec::new());
        assert_eq!(dry.runs.load(Ordering::SeqCst), 1);
        // Its root is the profile's TOP, and nvcc is among its tools.
        assert_eq!(first.top, std::fs::canonicalize(&toolkit).ok());
        assert!(first.tools.iter().any(|t| t.path == nvcc.path), "{first:?}");
        // Nothing it covers changed: the cached identity, no process.
        assert_eq!(identify(&Vec::new()), first);
        assert_eq!(dry.runs.load(Ordering::SeqCst), 1);
        // A variable nvcc reads: the dry run again.
        let set = vec![("NVCC_APPEND_FLAGS".to_string(), Some("-DX".to_string()))];
        identify(&set);
        assert_eq!(dry.runs.load(Ordering::SeqCst), 2);
        // nvcc replaced (another size): again, and another identity.
        std::fs::write(&nvcc.path, "another nvcc").expect("nvcc");
        let replaced = identify(&set);
        assert_eq!(dry.runs.load(Ordering::SeqCst), 3);
        assert_ne!(replaced.id, first.id);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn every_include_option_and_comma_list_names_a_search_folder() {
        let root = Path::new("/c");
        let args: Vec<String> = [
            "-Ia,b",
            "-I",
            "c",
            "--include-path=d,/abs/e",
            "--system-include=/sys",
            "-isystem",
            "f",
            "-isystemg",
            "-include",
            "anchor.cuh",
        ]
        .map(str::to_string)
        .to_vec();
        let dirs = search_dirs(root, Path::new("/c/kernels/k.cu"), &args);
        let want = ["kernels", "a", "b", "c", "d", "/abs/e", "/sys", "f", "g"];
        assert_eq!(dirs, want.map(|d| root.join(d)));
    }

    #[test]
    fn subfolders_are_walked_below_a_search_folder_but_not_into_out_dir() {
        let dir = tempfile_dir();
        for sub in ["gen/deep", "target/x", ".git/objects", "out/occ"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        let found = subfolders(&dir, &dir.join("out/occ")).expect("walked");
        assert_eq!(found, [dir.join("gen"), dir.join("gen/deep")]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn has_include_names_are_found_in_both_forms() {
        let text = b"#if __has_include(\"util.cuh\")\n#include \"util.cuh\"\n#endif\n\
                     #if defined(__has_include) && __has_include_next( <cuda/std/x> )\n#endif\n";
        assert_eq!(has_include_names(text), ["util.cuh", "cuda/std/x"]);
        assert!(has_include_names(b"#if defined(__has_include)\n").is_empty());
    }

    #[test]
    fn a_record_without_a_preprocessed_text_reads_as_none_in_both_spellings() {
        let record = |preprocessed: serde_json::Value| {
            serde_json::from_value::<Record>(serde_json::json!({
                "format": FORMAT, "key": "k", "recorded_at": 0, "inputs": [],
                "probes": [], "folders": [], "preprocessed": preprocessed,
                "outputs": [], "log": "", "contributions": [],
            }))
            .map(|r| r.preprocessed)
        };
        assert_eq!(record(serde_json::json!("")).ok(), Some(None));
        assert_eq!(record(serde_json::Value::Null).ok(), Some(None));
        assert_eq!(record(serde_json::json!("h")).ok(), Some(Some("h".into())));
    }

    #[test]
    fn hashes_differ_by_content_and_by_split() {
        assert_ne!(hash_bytes(&[b"ab"]), hash_bytes(&[b"a", b"b"]));
        assert_ne!(hash_bytes(&[b"a"]), hash_bytes(&[b"b"]));
        assert_eq!(hash_bytes(&[b"a"]), hash_bytes(&[b"a"]));
        assert_eq!(hash_bytes(&[b"a"]).len(), 32);
    }

    #[test]
    fn shadow_probes_cover_earlier_folders_and_includer_folders() {
        let dir = tempfile_dir();
        let k = dir.join("kernels");
        let inc = dir.join("inc");
        std::fs::create_dir_all(&k).unwrap();
        std::fs::create_dir_all(&inc).unwrap();
        std::fs::write(k.join("k.cu"), "").unwrap();
        std::fs::write(inc.join("common.cuh"), "").unwrap();
        let inputs = vec![
            k.join("k.cu"),
            inc.join("common.cuh"),
            PathBuf::from("/usr/include/stdio.h"),
        ];
        let extra = dir.join("extra");
        let search = vec![k.clone(), extra.clone(), inc.clone()];
        let (probes, appeared) = shadow_probes(&dir, &inputs, &search, None, SystemTime::now());
        assert!(appeared.is_empty());
        let probes: Vec<PathBuf> = probes.into_iter().map(|(p, _)| p).collect();
        assert!(probes.contains(&k.join("common.cuh")), "{probes:?}");
        assert!(probes.contains(&extra.join("common.cuh")), "{probes:?}");
        assert!(!probes.contains(&inc.join("common.cuh")));
        assert!(!probes.iter().any(|p| p.ends_with("stdio.h")), "{probes:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "occ-cache-test-{}-{}",
            std::process::id(),
            nanos(SystemTime::now())
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
