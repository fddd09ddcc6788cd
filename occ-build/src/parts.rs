//! Several `Build`s in one build script, into one `OUT_DIR`.
//!
//! A crate may need more than one build: candle-kernels compiles its
//! kernels to PTX and builds a host-code library of others. Each `Build` is
//! a **part**, named by [`Build::name`](crate::Build::name) (the default part
//! has the empty name). Each part compiles and caches its own jobs (their
//! files are named `<part>@<job>`, so one part never removes another's),
//! and `manifest.json`, `kernels.rs` and the candidate lock hold the kernels
//! of every part run so far in this process: after the last `Build` of the
//! build script, all of them.
//!
//! A part run again in the same process (a test rebuilding, or a build
//! script that compiles the same part twice) replaces its earlier self.
//!
//! A part its memo served (`memo.rs`) is registered without its manifest
//! ([`reused`]): it is the first part of the process (the memo serves no
//! other), so `manifest.json` holds its kernels alone until a later part
//! writes it, and a later part reads it from there ([`record`]).

use crate::error::{Error, Result};
use occ_model::analyze;
use occ_model::lock::Lock;
use occ_model::manifest::Manifest;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

struct Part {
    out: PathBuf,
    name: String,
    sources: Vec<String>,
    /// The sources as the file system resolves them (`a/../k.cu`, a
    /// symlink): one file however it is spelled.
    files: Vec<PathBuf>,
    flags: Vec<String>,
    /// `None` for a part its memo served: its kernels are in `manifest.json`.
    manifest: Option<Manifest>,
}

impl Part {
    fn new(
        out: &Path,
        name: &str,
        root: &Path,
        sources: &[String],
        flags: &[String],
        manifest: Option<Manifest>,
    ) -> Part {
        Part {
            out: out.to_path_buf(),
            name: name.to_string(),
            sources: sources.to_vec(),
            files: resolved(root, sources),
            flags: flags.to_vec(),
            manifest,
        }
    }
}

/// The parts built in this process.
static PARTS: Mutex<Vec<Part>> = Mutex::new(Vec::new());

/// What a part sees of the builds into its `OUT_DIR`.
pub(crate) struct View {
    /// Every part's kernels: what `manifest.json` and `kernels.rs` hold.
    pub merged: Manifest,
    /// The sources of each named part built in this process.
    pub named: std::collections::BTreeMap<String, Vec<String>>,
    /// The recorded flags (`plan::recorded_flags`) of each part built in
    /// this process, the default one under `""`.
    pub flags: std::collections::BTreeMap<String, Vec<String>>,
    /// A note when this part replaced an earlier one of the same name with
    /// none of the same sources: two `Build`s that need distinct names.
    pub clash: Option<String>,
}

/// How messages name a part.
fn describe(name: &str) -> String {
    if name.is_empty() {
        "the default Build".to_string()
    } else {
        format!("the Build named `{name}`")
    }
}

/// Refuses a file that another part of this process compiled into `out`
/// too ([`Error::FileInTwoBuilds`]): its kernels' numbers would come from
/// one compile and their code from the other. The pipeline checks it
/// before anything is compiled (and before [`record`]).
pub(crate) fn check_sources(out: &Path, name: &str, root: &Path, sources: &[String]) -> Result<()> {
    let parts = PARTS.lock().unwrap_or_else(|e| e.into_inner());
    let files = resolved(root, sources);
    let shared = parts
        .iter()
        .filter(|p| p.out == out && p.name != name)
        .find_map(|p| {
            sources
                .iter()
                .zip(&files)
                .find(|(_, f)| p.files.contains(f))
                .map(|(file, _)| (p, file))
        });
    match shared {
        Some((other, file)) => Err(Error::FileInTwoBuilds {
            file: file.clone(),
            first: describe(&other.name),
            second: describe(name),
        }),
        None => Ok(()),
    }
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

/// Whether a part other than `name` was built into `out` in this process.
pub(crate) fn others(out: &Path, name: &str) -> bool {
    let parts = PARTS.lock().unwrap_or_else(|e| e.into_inner());
    parts.iter().any(|p| p.out == out && p.name != name)
}

/// Registers the part `name` that its memo served: like [`record`], with
/// its manifest left in `out`'s `manifest.json`.
pub(crate) fn reused(out: &Path, name: &str, root: &Path, sources: &[String], flags: &[String]) {
    let mut parts = PARTS.lock().unwrap_or_else(|e| e.into_inner());
    parts.retain(|p| !(p.out == out && p.name == name));
    parts.push(Part::new(out, name, root, sources, flags, None));
}

/// Records `manifest` as the part `name` of the builds into `out` (its
/// sources passed [`check_sources`]). A part registered by [`reused`] is
/// read from `manifest.json` here, before this part writes it.
pub(crate) fn record(
    out: &Path,
    name: &str,
    root: &Path,
    sources: &[String],
    flags: &[String],
    manifest: &Manifest,
) -> Result<View> {
    let mut parts = PARTS.lock().unwrap_or_else(|e| e.into_inner());
    for part in parts.iter_mut().filter(|p| p.out == out && p.name != name) {
        if part.manifest.is_none() {
            let path = out.join(occ_model::manifest::FILE_NAME);
            part.manifest = Some(crate::files::read_manifest(&path)?);
        }
    }
    let mut clash = None;
    if let Some(i) = parts.iter().position(|p| p.out == out && p.name == name) {
        let old = parts.remove(i);
        if !old.sources.is_empty()
            && !sources.is_empty()
            && !old.sources.iter().any(|s| sources.contains(s))
        {
            clash = Some(format!(
                "occ: two Builds{} in this build script write into the same OUT_DIR with none of \
                 the same files; kernels.rs now holds the second one's kernels only: give each \
                 Build its own `.name(..)`",
                if name.is_empty() {
                    String::new()
                } else {
                    format!(" named `{name}`")
                }
            ));
        }
    }
    parts.push(Part::new(
        out,
        name,
        root,
        sources,
        flags,
        Some(manifest.clone()),
    ));
    let mine: Vec<&Part> = parts.iter().filter(|p| p.out == out).collect();
    // One part (most crates): what the merge gives is the part itself with
    // its identifiers made unique, without copying it through the merge.
    let merged = if mine.len() == 1 {
        let mut own = manifest.clone();
        analyze::assign_idents(&mut own.kernels);
        own
    } else {
        let manifests: Vec<&Manifest> = mine.iter().filter_map(|p| p.manifest.as_ref()).collect();
        analyze::merge(&manifests).unwrap_or_else(|| manifest.clone())
    };
    let named = mine
        .iter()
        .filter(|p| !p.name.is_empty())
        .map(|p| (p.name.clone(), p.sources.clone()))
        .collect();
    let flags = mine
        .iter()
        .map(|p| (p.name.clone(), p.flags.clone()))
        .collect();
    Ok(View {
        merged,
        named,
        flags,
        clash,
    })
}

/// The candidate lock: every part's kernels, plus the committed lock's
/// kernels of the other parts it records that this process has not built
/// yet (a later `Build` of the build script will), so that a part never
/// reports the others' kernels as gone; the sources of each named part; and
/// the committed lock's measurements of kernels × archs still built.
pub(crate) fn candidate(view: &View, name: &str, lock: Option<&Lock>) -> Lock {
    let mut candidate = Lock::from_manifest(&view.merged);
    candidate.parts = view.named.clone();
    let mut flags = view.flags.clone();
    if let Some(lock) = lock {
        for (part, sources) in &lock.parts {
            if part == name || view.named.contains_key(part) {
                continue;
            }
            if let Some(theirs) = lock.flags.as_ref().and_then(|f| f.get(part)) {
                flags.insert(part.clone(), theirs.clone());
            }
            candidate.parts.insert(part.clone(), sources.clone());
            candidate.kernels.extend(
                lock.kernels
                    .iter()
                    .filter(|k| sources.contains(&k.source))
                    .cloned(),
            );
        }
        candidate
            .kernels
            .sort_by(|a, b| a.name.cmp(&b.name).then(a.source.cmp(&b.source)));
        // Measurements are committed data, not build output: they stay
        // while their kernel × arch is still built, under the kernel's
        // source of today (a moved file keeps its measurements, which the
        // build then checks against the cubin as ever).
        candidate.measured = occ_model::measured::rebase(&lock.measured, |m| {
            candidate
                .find(&m.kernel, &m.source)
                .filter(|k| k.archs.contains_key(&m.arch))
                .map(|k| k.source.clone())
        });
    }
    candidate.flags = Some(flags);
    candidate
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
