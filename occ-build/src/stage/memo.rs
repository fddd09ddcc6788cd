//! The build memo: a build that would change nothing does nothing.
//!
//! After a build that finished, `cache/memo/<part>build.json` records what its
//! outputs depend on and the cargo directives it gathered. The next build
//! of the part runs stages 1–3 and the toolkit's identity (no nvcc runs,
//! nothing is written), then [`reuse`] checks the memo; when it all holds,
//! the build prints the same directives and returns: no job record or
//! output is read, nothing is parsed or analysed, and nothing is written
//! but the part's line in `parts.json` (`parts::reused`: a later `Build`
//! of the same run finds this part there), so no other file's mtime
//! changes. The manifest is read from `manifest.json` only when the
//! caller asks for it (`Report::manifest`).
//!
//! The memo holds when all of these are as recorded:
//!
//! - the **key**: the memo's format; the build script itself (the running
//!   executable's path and stat: a script built with another occ-build is
//!   another script); the `Build`'s settings; the resolved inputs (crate
//!   root, `OUT_DIR`, package, archs, sources, lock path, bless, CI, whether
//!   the crate is a dependency, nvcc's variables, `PATH`, the launches); the
//!   nvcc found and its launcher; the toolkit's identity; every job (its
//!   arguments) and its cache key; `nvdisasm` and `fatbinary` (path, link
//!   target and stat, or their absence);
//! - every environment **variable** the last build read, with its value;
//! - every **job record**: the record file's stat (so its content is the
//!   copy the memo holds, less nvcc's log) and that copy still valid
//!   (`cache::Record::valid`: inputs by stat or hash, include probes,
//!   outputs);
//! - the **lock**: its bytes (by stat, else by hash), or its absence;
//! - the **outputs**: the name and stat of every file in `$OUT_DIR/occ`, its
//!   `cache/` and `cache/lines/` (a file deleted, changed or added is a miss;
//!   a full build removes what it does not own and mends a cache record) and
//!   of the stable `report.txt`.
//!
//! What it does not cover, it never serves: it serves no build in which
//! every cached result is proven (`OCC_CACHE=verify`, `CI`: the job cache's
//! module doc), and no memo is written after a
//! build with a host-code library (cc reads variables of its own), register
//! caps (`max_registers`: placed through the last manifest), `OCC_BLESS`,
//! GitHub Actions (the step summary is appended once per build), a job whose
//! input changed while nvcc ran, or a part built after another part of the
//! same process into the same `OUT_DIR` (the parts share the outputs: that
//! part removes every part's memo, so the next build does the full work).
//! A failed build writes none, and leaves `status.json` saying `running`
//! (or `gate_failed`), on which the last memo then misses. A part
//! reused is registered with `parts` without its manifest, which a later
//! part of the same process reads from `manifest.json`.
//!
//! What the memo assumes, besides what the job cache assumes
//! (`cache.rs`): a build's outputs depend on nothing outside the list
//! above; the build script's executable changes when occ-build does.

use crate::builder::Build;
use crate::env::Env;
use crate::leaf::cache::{self, hash_bytes, Input, JobLock, Record, Stat, ToolkitId};
use crate::leaf::directives::Directives;
use crate::leaf::files::write_atomic;
use crate::leaf::job::Job;
use crate::stage::inputs::Inputs;
use crate::stage::{device_code, disasm, parts, report};
use crate::toolkit::Nvcc;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The version of the memo's format; a new one invalidates every memo.
const FORMAT: u32 = 1;

/// The memos' folder below `$OUT_DIR/occ/cache` (apart from the job
/// records, which `outputs::remove_stale` sorts by name).
const DIR: &str = "memo";

/// The memo's file name in [`DIR`], after the part's prefix; its lock is
/// `<part>build.lock`.
const FILE: &str = "build.json";

/// What a build must match to be served by its memo, computed before any
/// job runs; `None` ([`identity`]) when the memo does not apply to it.
pub(crate) struct Identity {
    /// The hash of everything the key covers (the module doc's list).
    key: String,
    /// Each job's record file and today's cache key for it.
    records: Vec<(PathBuf, String)>,
    /// `cache/memo/<part>build.json`.
    path: PathBuf,
    /// Held from the check to the end of the build: a second build into
    /// the same `OUT_DIR` waits, so that no memo is checked against files
    /// another build is writing.
    _lock: JobLock,
}

/// A memo, as written after a build that finished.
#[derive(Debug, Serialize, Deserialize)]
struct Memo {
    format: u32,
    key: String,
    /// When it was written (ns since the epoch): a file whose mtime is not
    /// older is checked by its bytes, not its stat.
    recorded_at: i128,
    /// Every variable the build read, with its value.
    vars: Vec<(String, Option<OsString>)>,
    /// Each job's record file, its stat, and the record less nvcc's log.
    records: Vec<(PathBuf, Stat, Record)>,
    /// The lock's bytes, or `None` when there was none.
    lock: Option<Input>,
    /// Every file of `$OUT_DIR/occ` and its caches' folders ([`listing`]).
    files: Vec<(String, Stat)>,
    /// The stable `report.txt` (`None` when there is none).
    report: Option<Stat>,
    /// The directives the build gathered.
    directives: Saved,
}

/// [`Directives`], as the memo keeps them.
#[derive(Debug, Serialize, Deserialize)]
struct Saved {
    rerun_if_changed: BTreeSet<String>,
    rerun_if_env_changed: BTreeSet<String>,
    warnings: Vec<String>,
    link: Vec<String>,
}

/// Whether the memo serves this build at all: not when every cached result
/// is proven (`OCC_CACHE=verify`, `CI`), nor with a host-code
/// library, register caps, `OCC_BLESS`, GitHub Actions, or another part in
/// the same `OUT_DIR` (the module doc says why each).
fn applies(build: &Build, inputs: &Inputs) -> bool {
    !inputs.verify
        && build.static_lib.is_none()
        && build.max_registers.is_empty()
        && !inputs.bless
        && inputs.github.is_none()
        && !parts::others(&inputs.out_dir, build.part())
}

/// Each job's record file and cache key, exactly as stage 4 checks them.
fn job_records(
    inputs: &Inputs,
    nvcc: &Nvcc,
    toolkit: &ToolkitId,
    jobs: &[Job],
) -> Vec<(PathBuf, String)> {
    jobs.iter()
        .map(|job| {
            let key = cache::job_key(
                toolkit,
                nvcc,
                &inputs.nvcc_vars,
                &inputs.root,
                &inputs.out_dir,
                job,
            );
            (cache::record_path(&inputs.out_dir, &job.name), key)
        })
        .collect()
}

/// The identity a build is checked against and recorded under, or `None`
/// when the memo does not serve this build (see the module doc).
pub(crate) fn identity(
    build: &Build,
    inputs: &Inputs,
    nvcc: &Nvcc,
    toolkit: &ToolkitId,
    jobs: &[Job],
) -> Option<Identity> {
    if !applies(build, inputs) {
        return None;
    }
    let records = job_records(inputs, nvcc, toolkit, jobs);
    let top = toolkit.top.as_deref();
    let tools = [disasm::tool(nvcc, top), device_code::fatbinary(nvcc, top)].map(|tool| {
        tool.map(|path| {
            let target = std::fs::canonicalize(&path).ok();
            let stat = target.as_deref().and_then(Stat::of);
            (path, target, stat)
        })
    });
    let exe = std::env::current_exe().ok();
    let exe_stat = exe.as_deref().and_then(Stat::of);
    let key = hash_bytes(&[
        format!("{FORMAT}").as_bytes(),
        format!("{exe:?} {exe_stat:?}").as_bytes(),
        format!("{build:?}").as_bytes(),
        format!(
            "{:?} {:?} {:?} {:?} {:?} {:?}",
            inputs.root,
            inputs.out_dir,
            inputs.package,
            inputs.archs,
            inputs.sources,
            inputs.lock_path
        )
        .as_bytes(),
        format!(
            "{} {} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
            inputs.bless,
            inputs.ci,
            inputs.dependency,
            inputs.no_nvcc,
            inputs.ccbin,
            inputs.nvcc_vars,
            inputs.path_var,
            inputs.launches,
            inputs.dynamic_smem
        )
        .as_bytes(),
        format!("{nvcc:?}").as_bytes(),
        format!("{} {:?}", toolkit.id, toolkit.top).as_bytes(),
        format!("{jobs:?}").as_bytes(),
        format!("{records:?}").as_bytes(),
        format!("{tools:?}").as_bytes(),
    ]);
    let path = memo_path(inputs, build);
    if let Some(dir) = path.parent() {
        // Once per OUT_DIR; without it the build runs unlocked.
        let _ = std::fs::create_dir_all(dir);
    }
    let lock = JobLock::take(&path);
    Some(Identity {
        key,
        records,
        path,
        _lock: lock,
    })
}

/// The build as its memo recorded it, when everything the memo covers is
/// unchanged: `directives` become the recorded ones, the part is
/// registered (without its manifest), and the text of `manifest.json` is
/// returned (read now; the caller parses it only if asked). Reads and
/// compares; writes only the part's line in `parts.json`, once the memo
/// held.
pub(crate) fn reuse(
    identity: Option<&Identity>,
    build: &Build,
    env: &Env,
    inputs: &Inputs,
    directives: &mut Directives,
) -> Option<String> {
    let identity = identity?;
    let text = std::fs::read(&identity.path).ok()?;
    let memo: Memo = serde_json::from_slice(&text).ok()?;
    let holds = memo.format == FORMAT
        && memo.key == identity.key
        && memo
            .vars
            .iter()
            .all(|(name, value)| env.var_os(name) == *value)
        && records_hold(&memo, identity, &inputs.out_dir)
        && match &memo.lock {
            Some(lock) => lock.path == inputs.lock_path && lock.unchanged(memo.recorded_at),
            None => std::fs::symlink_metadata(&inputs.lock_path).is_err(),
        }
        && listing(&inputs.out_dir) == memo.files
        && report_path(inputs).and_then(|p| Stat::of(&p)) == memo.report;
    if !holds {
        return None;
    }
    let manifest =
        std::fs::read_to_string(inputs.out_dir.join(occ_model::schema::manifest::FILE_NAME))
            .ok()?;
    // Listed among this run's parts, or no reuse (a later part would
    // not find its kernels).
    parts::reused(
        &inputs.out_dir,
        build.part(),
        &inputs.root,
        &inputs.sources,
        &crate::stage::plan::recorded_flags(build, inputs),
    )
    .ok()?;
    let saved = memo.directives;
    *directives = Directives {
        rerun_if_changed: saved.rerun_if_changed,
        rerun_if_env_changed: saved.rerun_if_env_changed,
        warnings: saved.warnings,
        link: saved.link,
    };
    Some(manifest)
}

/// Whether every job's record is the one the memo copied, and still holds.
fn records_hold(memo: &Memo, identity: &Identity, out: &Path) -> bool {
    memo.records.len() == identity.records.len()
        && memo
            .records
            .iter()
            .zip(&identity.records)
            .all(|((path, stat, record), (now, key))| {
                path == now && Stat::of(path) == Some(*stat) && record.valid(key, out)
            })
}

/// Writes the memo of a build that finished, with the directives it
/// gathered (and the variables it read, as `Build::run_with` adds them).
/// A memo not written costs the next build its time, never its
/// correctness: errors are ignored.
pub(crate) fn record(
    identity: Option<&Identity>,
    build: &Build,
    env: &Env,
    inputs: &Inputs,
    unstable: bool,
    directives: &Directives,
) {
    if parts::others(&inputs.out_dir, build.part()) {
        // Several parts share the outputs: none is served by a memo.
        remove_all(&inputs.out_dir);
        return;
    }
    let Some(identity) = identity else {
        let _ = std::fs::remove_file(memo_path(inputs, build));
        return;
    };
    let recorded_at = nanos(SystemTime::now());
    let memo = (!unstable)
        .then(|| snapshot(identity, env, inputs, directives, recorded_at))
        .flatten();
    match memo.and_then(|m| serde_json::to_vec(&m).ok()) {
        Some(bytes) => {
            let _ = write_atomic(&identity.path, &bytes);
        }
        None => {
            let _ = std::fs::remove_file(&identity.path);
        }
    }
}

/// The memo of this build, now; `None` when a record is missing.
fn snapshot(
    identity: &Identity,
    env: &Env,
    inputs: &Inputs,
    directives: &Directives,
    recorded_at: i128,
) -> Option<Memo> {
    let mut records = Vec::new();
    for (path, _) in &identity.records {
        let stat = Stat::of(path)?;
        let mut record = Record::read(path)?;
        // The memo checks the record; it never serves its results.
        record.log.clear();
        record.contributions.clear();
        records.push((path.clone(), stat, record));
    }
    let vars: Vec<(String, Option<OsString>)> = env
        .read_vars()
        .into_iter()
        .map(|name| {
            let value = env.var_os(&name);
            (name, value)
        })
        .collect();
    let mut saved = directives.clone();
    saved.rerun_if_env_changed.extend(env.read_vars());
    Some(Memo {
        format: FORMAT,
        key: identity.key.clone(),
        recorded_at,
        vars,
        records,
        lock: Input::read(&inputs.lock_path),
        files: listing(&inputs.out_dir),
        report: report_path(inputs).and_then(|p| Stat::of(&p)),
        directives: Saved {
            rerun_if_changed: saved.rerun_if_changed,
            rerun_if_env_changed: saved.rerun_if_env_changed,
            warnings: saved.warnings,
            link: saved.link,
        },
    })
}

/// Every file of `$OUT_DIR/occ`, of its `cache/` and of `cache/lines/`
/// (the caches' own files: a record disturbed is a miss, and the full
/// build mends it), by name below `$OUT_DIR/occ`, with its stat; not
/// `parts.json`, which every run rewrites (a build its memo served too:
/// `parts::reused`) and which holds no result.
fn listing(out: &Path) -> Vec<(String, Stat)> {
    let mut files: Vec<(String, Stat)> = Vec::new();
    for dir in ["", "cache", "cache/lines"] {
        let Ok(entries) = std::fs::read_dir(out.join(dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if dir.is_empty() && name == parts::FILE {
                continue;
            }
            if let Some(stat) = Stat::of(&entry.path()) {
                files.push((format!("{dir}/{name}"), stat));
            }
        }
    }
    files.sort();
    files
}

/// The stable `report.txt` beside cargo's build folder, if the build has one.
fn report_path(inputs: &Inputs) -> Option<PathBuf> {
    let path = report::report_path(&inputs.out_dir, &inputs.package);
    (path != inputs.out_dir.join(report::REPORT_FILE)).then_some(path)
}

/// `cache/memo/<part>build.json` of this build's part.
fn memo_path(inputs: &Inputs, build: &Build) -> PathBuf {
    inputs
        .out_dir
        .join("cache")
        .join(DIR)
        .join(format!("{}{FILE}", parts::prefix(build.part())))
}

/// Removes the memo of every part in `out`.
fn remove_all(out: &Path) {
    let Ok(entries) = std::fs::read_dir(out.join("cache").join(DIR)) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().ends_with(FILE) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn nanos(t: SystemTime) -> i128 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}
