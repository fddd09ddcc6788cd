//! The committed baseline, `occ.lock`: its schema and text.
//!
//! In memory the lock holds, per kernel × arch, the kernel's [`Resources`]:
//! what the gate compares (registers, static shared memory, spills, stack,
//! the best block size, the occupancy there and its limiters) plus what
//! `kernels.rs` and `#[launch_config]` need when no nvcc is available
//! (names, parameters, launch bounds, barriers, headroom). On disk it
//! holds only the facts those follow from: JSON with `"schema"`
//! first, kernels sorted by symbol, archs sorted, paths relative to the
//! crate. Reading works out the rest as a build does, so a hand edit or a
//! bad merge cannot make the build from the lock, `diff`, the gate and
//! `#[launch_config]` disagree.
//!
//! The text has one line per kernel (its symbol, source and parameters)
//! and one line per kernel × arch (its facts), so that a change shows in a
//! diff as the lines of the kernels × archs that changed, and a lock of
//! 750 kernels × 2 archs is about 3,000 lines, not 50,000:
//!
//! ```text
//! {
//!   "schema": 3,
//!   "package": "app",
//!   "nvcc": "V13.5.37",
//!   "archs": [
//!     "sm_80"
//!   ],
//!   "kernels": [
//!     {"name": "saxpy", "source": "kernels/saxpy.cu", "params": ["n: int (u32)", ...], "archs": {
//!       "sm_80": {"registers": 16, "barriers": 0, "cubin_hash": "fnv1a64:..."}
//!     }}
//!   ]
//! }
//! ```
//!
//! A parameter is one string, as a reader would write it:
//! `name: C type (PTX type[, N bytes][, align N])`, the size written where
//! it is not the PTX type's width and the alignment where it is not the
//! size (`p: float* (u64, align 1)`, `n: int (u32)`, `args: Args (b8, 16
//! bytes, align 8)`). A C++ kernel's `demangled` name is written for the
//! reader and checked against its symbol; its base and short names and
//! Rust identifier, and every occupancy number (the best launch, the
//! declared launch's occupancy and lift, the launch its own bounds
//! declare), are worked out on reading by the rules a build uses. A key
//! the schema does not have (a `"best"` written in by hand, a misspelt
//! `"registres"`) is refused by name and line, never ignored.
//!
//! What ptxas said of a kernel × arch besides the numbers the gate
//! compares is kept where it has anything to say ([`Noted`]): its constant
//! memory (`"cmem": {"0": 360}`, absent where ptxas reports none, as on
//! sm_90+) and its warnings, each as ptxas's words (`"warnings": ["For
//! profile sm_80 adjusting …"]`, typed again on reading by the build's
//! rule). So a build from the lock writes the manifest and the report a
//! build with nvcc writes. They are optional keys of schema 3: a lock
//! written before reads as having none.
//!
//! Any JSON layout reads the same (the older fully pretty locks included),
//! and so do locks of schemas 1 and 2 (their derived numbers dropped).
//! A measurement is imported only onto the cubin the lock records
//! ([`Lock::import_with`]).

mod text;

use crate::error::{Error, Result};
use crate::schema::manifest::{
    self, CodeLaunch, Compiled, Contribution, Kernel, Manifest, Resources, Warning,
};
use crate::schema::measured::{self, Measured, Results};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The schema version of `occ.lock` (3: the facts alone, every name and
/// number that follows from them left out; 2: the manifest's names, one
/// per fact). Locks of schemas 1 and 2 read as today's; one of a newer
/// version is refused with what to do.
pub const LOCK_SCHEMA: u32 = 3;

/// The default lock file name, next to the crate's `Cargo.toml`.
pub const DEFAULT_LOCK_FILE: &str = "occ.lock";

/// The candidate lock a build leaves in `$OUT_DIR/occ` for `cargo occ bless`.
pub const CANDIDATE_FILE: &str = "occ.lock.new";

/// The committed baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct Lock {
    /// Schema version ([`LOCK_SCHEMA`]).
    pub schema: u32,
    /// The cargo package.
    pub package: String,
    /// The nvcc version that produced the numbers.
    pub nvcc: String,
    /// Target archs in build order.
    pub archs: Vec<String>,
    /// What decided the numbers besides the sources and the toolkit, per
    /// `Build` (the default one under `""`, named ones by name): the nvcc
    /// flags every job of it got from the user (`.flag()`, `.define()`,
    /// `-G`) and the flag variables nvcc reads itself
    /// (`NVCC_APPEND_FLAGS=…`), in order. Absent in locks from before occ
    /// kept them (then nothing is said about flags).
    pub flags: Option<BTreeMap<String, Vec<String>>>,
    /// Kernels, sorted by symbol then source.
    pub kernels: Vec<LockKernel>,
    /// The sources of each named part (the `Build`s of one build script
    /// other than the default one, see `Build::name`), so that one part's
    /// gate knows the other parts' kernels are not gone. Absent when the
    /// crate has one `Build`.
    pub parts: BTreeMap<String, Vec<String>>,
    /// Launches timed on a GPU (`cargo occ tune import`), one line per
    /// kernel × arch × bucket, sorted. Absent when nothing was measured;
    /// locks written before measurements read as having none.
    pub measured: Vec<Measured>,
    /// What ptxas said of each kernel × arch besides its [`Resources`],
    /// by symbol, source and arch: only those with something to say
    /// ([`Noted::is_empty`] ones are left out). A build from the lock
    /// writes it into the manifest; the gate says a change of it as a
    /// `changed` row (never a regression), so a bless keeps it fresh.
    pub noted: BTreeMap<NoteKey, Noted>,
    /// The `<<<...>>>` launches of the crate's C++ host code as the build
    /// read them (the manifest's `launches`): a fact a build without nvcc
    /// cannot read again, so that it judges the kernels they name at the
    /// same launches. An optional key of schema 3: absent when there are
    /// none.
    pub launches: Vec<CodeLaunch>,
}

/// A kernel × arch of the lock: its symbol, its source and the arch.
pub type NoteKey = (String, String, String);

/// What ptxas said of a kernel × arch besides the numbers the gate
/// compares: the manifest's `cmem` and `warnings`, which a build from the
/// lock writes as a build with nvcc does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Noted {
    /// Constant memory per bank, bytes (none on sm_90+, where ptxas omits it).
    pub cmem: BTreeMap<String, u64>,
    /// ptxas's warnings, in the order the manifest has them.
    pub warnings: Vec<Warning>,
}

impl Noted {
    /// Whether ptxas said nothing more (no constant memory, no warning).
    pub fn is_empty(&self) -> bool {
        self.cmem.is_empty() && self.warnings.is_empty()
    }
}

/// What [`Lock::import`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Imported {
    /// Entries that were new.
    pub added: usize,
    /// Entries that replaced an older measurement of the same key.
    pub replaced: usize,
    /// The measurements taken on another cubin than the lock's that
    /// [`OtherCubin::Keep`] kept, one phrase each (`"saxpy on sm_80"`).
    pub other_cubin: Vec<String>,
}

/// What [`Lock::import_with`] does with a measurement whose cubin hash is
/// not the one the lock records for its kernel × arch (code of another
/// build: an older or newer one, or another checkout's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtherCubin {
    /// Refuse the whole import, naming both hashes (the default).
    Refuse,
    /// Keep it (`cargo occ tune import --allow-stale`): builds then call it
    /// stale and `tuned` sites use the model's block, until the lock's
    /// cubin is the measured one.
    Keep,
}

/// One kernel in the lock: its names, source and per-arch [`Resources`].
pub type LockKernel = Kernel<Resources>;

/// What a build's candidate lock keeps of the committed one
/// ([`Lock::candidate`]).
#[derive(Debug, Clone, Copy)]
pub struct Committed<'a> {
    /// The committed lock.
    pub lock: &'a Lock,
    /// Its parts kept as recorded (named parts this run has not built: a
    /// later `Build` of the build script will): their sources, their
    /// kernels and their flags.
    pub keep: &'a [&'a str],
}

impl Lock {
    /// The lock's view of a manifest, and nothing else: no flags, parts or
    /// measurements (a build's candidate is [`Lock::candidate`]).
    pub fn from_manifest(m: &Manifest) -> Lock {
        Lock {
            schema: LOCK_SCHEMA,
            package: m.package.clone(),
            nvcc: m.nvcc.clone(),
            archs: m.archs.clone(),
            flags: None,
            kernels: lock_kernels(m, Vec::new()),
            parts: BTreeMap::new(),
            measured: Vec::new(),
            noted: notes(m, BTreeMap::new()),
            launches: m.launches.clone(),
        }
    }

    /// A build's candidate lock, whole: the kernels of `manifest` (the
    /// manifest written, every part of this run's), the sources of this
    /// run's named parts (`parts`) and the flags of each of its parts
    /// (`flags`, the default one under `""`), and of the `committed` lock
    /// the parts it keeps (their sources, kernels and flags) and the
    /// measurements of kernels × archs still built. Measurements are
    /// committed data, not build output: they stay under the kernel's
    /// source of today (a moved file keeps its measurements, which the
    /// build then checks against the cubin as ever).
    pub fn candidate(
        manifest: &Manifest,
        mut parts: BTreeMap<String, Vec<String>>,
        mut flags: BTreeMap<String, Vec<String>>,
        committed: Option<Committed<'_>>,
    ) -> Lock {
        let mut kept = Vec::new();
        let mut kept_notes = BTreeMap::new();
        let mut launches = manifest.launches.clone();
        if let Some(c) = committed {
            for (part, sources) in c
                .lock
                .parts
                .iter()
                .filter(|(p, _)| c.keep.contains(&p.as_str()))
            {
                if let Some(theirs) = c.lock.flags.as_ref().and_then(|f| f.get(part)) {
                    flags.insert(part.clone(), theirs.clone());
                }
                parts.insert(part.clone(), sources.clone());
                kept.extend(
                    c.lock
                        .kernels
                        .iter()
                        .filter(|k| sources.contains(&k.source))
                        .cloned(),
                );
                launches.extend(
                    c.lock
                        .launches
                        .iter()
                        .filter(|l| sources.contains(&l.source))
                        .cloned(),
                );
                kept_notes.extend(
                    c.lock
                        .noted
                        .iter()
                        .filter(|((_, source, _), _)| sources.contains(source))
                        .map(|(key, noted)| (key.clone(), noted.clone())),
                );
            }
        }
        let kernels = lock_kernels(manifest, kept);
        let measured = measured::rebase(committed.map_or(&[][..], |c| &c.lock.measured), |m| {
            find(&kernels, &m.kernel, &m.source)
                .filter(|k| k.archs.contains_key(&m.arch))
                .map(|k| k.source.clone())
        });
        Lock {
            schema: LOCK_SCHEMA,
            package: manifest.package.clone(),
            nvcc: manifest.nvcc.clone(),
            archs: manifest.archs.clone(),
            flags: Some(flags),
            kernels,
            parts,
            measured,
            noted: notes(manifest, kept_notes),
            launches: {
                launches.sort();
                launches.dedup();
                launches
            },
        }
    }

    /// What a build without nvcc stands on: the lock's records of the
    /// kernels of `sources` on `archs` (all the lock's when empty), one
    /// [`Contribution`] per source and arch, for [`crate::assemble`]. The
    /// derived numbers are the assembly's to work out, from build.rs's
    /// declarations of today.
    pub fn contributions(
        &self,
        archs: &[String],
        sources: &[String],
        path: &Path,
    ) -> Result<Vec<Contribution>> {
        let archs = self.recorded(archs, path)?;
        let mut jobs: BTreeMap<(&str, &str), Vec<Compiled>> = BTreeMap::new();
        for k in self.kernels.iter().filter(|k| sources.contains(&k.source)) {
            for (arch, r) in k.archs.iter().filter(|(a, _)| archs.contains(a)) {
                let noted = self
                    .noted
                    .get(&(k.name.clone(), k.source.clone(), arch.clone()))
                    .cloned()
                    .unwrap_or_default();
                jobs.entry((k.source.as_str(), arch.as_str()))
                    .or_default()
                    .push(Compiled {
                        name: k.name.clone(),
                        demangled: k.demangled.clone(),
                        base_name: k.base_name.clone(),
                        short_name: k.short_name.clone(),
                        params: k.params.clone(),
                        facts: r.facts.clone(),
                        cmem: noted.cmem,
                        warnings: noted.warnings,
                        cubin: None,
                        ptx: None,
                        cubin_hash: r.cubin_hash.clone(),
                    });
            }
        }
        Ok(jobs
            .into_iter()
            .map(|((source, arch), kernels)| Contribution {
                source: source.to_string(),
                arch: arch.to_string(),
                kernels,
                launches: self
                    .launches
                    .iter()
                    .filter(|l| l.source == source)
                    .cloned()
                    .collect(),
            })
            .collect())
    }

    /// `archs` (the lock's when empty), each one the lock records numbers
    /// of, else an error naming it.
    pub fn recorded(&self, archs: &[String], path: &Path) -> Result<Vec<String>> {
        let archs: Vec<String> = if archs.is_empty() {
            self.archs.clone()
        } else {
            archs.to_vec()
        };
        for arch in &archs {
            if !self.archs.contains(arch) {
                return Err(Error::Corrupt {
                    path: path.to_path_buf(),
                    detail: format!(
                        "has no numbers for {arch} (it records {}); without nvcc the build can only use \
                         recorded archs: build with nvcc and run `cargo occ bless`, or drop {arch}",
                        self.archs.join(", ")
                    ),
                });
            }
        }
        Ok(archs)
    }

    /// The lock's text (the module's form): JSON, schema first, one line per
    /// kernel and one per kernel × arch, each with the facts it records
    /// and nothing that follows from them; trailing newline. The same lock
    /// gives the same bytes.
    pub fn to_text(&self) -> String {
        text::write(self)
    }

    /// Parses a lock (one of an older schema read as today's), working out
    /// every name and number that follows from its facts as a build does
    /// (the module's rules), and checking its schema, its names, that no kernel is
    /// listed twice and that every number is in range. A UTF-8 byte-order
    /// mark (some editors save one) is skipped.
    pub fn from_text(text: &str, path: &Path) -> Result<Lock> {
        text::read(text, path)
    }

    /// What a lock read back may not be trusted with: names that become
    /// Rust ([`manifest::validate_names`]), a kernel listed twice (the same
    /// symbol from the same source), and numbers out of range
    /// ([`manifest::validate_resources`]).
    pub fn validate(&self) -> std::result::Result<(), String> {
        manifest::writable("the package name", &self.package)?;
        manifest::validate_launches(&self.launches)?;
        manifest::writable("the nvcc version", &self.nvcc)?;
        for (part, flags) in self.flags.iter().flatten() {
            manifest::writable("a part's name", part)?;
            for flag in flags {
                manifest::writable(&format!("part {part:?}'s flag"), flag)?;
            }
        }
        for (part, sources) in &self.parts {
            manifest::writable("a part's name", part)?;
            for source in sources {
                manifest::writable(&format!("part {part:?}'s source"), source)?;
            }
        }
        let mut archs = std::collections::BTreeSet::new();
        if let Some(arch) = self.archs.iter().find(|a| !archs.insert(a.as_str())) {
            return Err(format!("lists arch {arch} twice"));
        }
        manifest::validate_names(&self.archs, &self.kernels)?;
        let mut seen = std::collections::BTreeSet::new();
        for kernel in &self.kernels {
            if !seen.insert((&kernel.name, &kernel.source)) {
                return Err(format!(
                    "lists kernel {:?} from {} twice (duplicate entries)",
                    kernel.name, kernel.source
                ));
            }
            for (arch, r) in &kernel.archs {
                if !archs.contains(arch.as_str()) {
                    return Err(format!(
                        "kernel {:?} records {arch}, which the lock's archs ({}) do not list",
                        kernel.name,
                        self.archs.join(", ")
                    ));
                }
                if let Some(hash) = &r.cubin_hash {
                    manifest::writable(&format!("kernel {:?}'s cubin hash", kernel.name), hash)?;
                }
                manifest::validate_resources(&kernel.name, arch, r)?;
            }
        }
        let recorded: std::collections::BTreeSet<(&str, &str, &str)> = self
            .kernels
            .iter()
            .flat_map(|k| {
                k.archs
                    .keys()
                    .map(|a| (k.name.as_str(), k.source.as_str(), a.as_str()))
            })
            .collect();
        for ((name, source, arch), noted) in &self.noted {
            if !recorded.contains(&(name.as_str(), source.as_str(), arch.as_str())) {
                return Err(format!(
                    "notes what ptxas said of kernel {name:?} of {source} on {arch}, which the \
                     lock does not record"
                ));
            }
            for bank in noted.cmem.keys() {
                manifest::writable(&format!("kernel {name:?}'s constant bank"), bank)?;
            }
            for w in &noted.warnings {
                manifest::writable(&format!("kernel {name:?}'s ptxas warning"), &w.text)?;
            }
        }
        measured::validate_entries(&self.measured)?;
        if let Some(m) = self.measured.iter().find(|m| {
            self.find(&m.kernel, &m.source)
                .is_none_or(|k| k.source != m.source || !k.archs.contains_key(&m.arch))
        }) {
            return Err(format!(
                "measures kernel {:?} of {} on {}, which the lock does not record",
                m.kernel, m.source, m.arch
            ));
        }
        Ok(())
    }

    /// [`Lock::import_with`] refusing measurements of another cubin.
    pub fn import(&mut self, results: &Results) -> std::result::Result<Imported, String> {
        self.import_with(results, OtherCubin::Refuse)
    }

    /// Merges a results file into the `measured` section: each
    /// measurement replaces the lock's entry of the same kernel, source,
    /// arch and bucket. Refused, with the reason, when the file is of
    /// another package, names a kernel or an arch the lock does not have,
    /// or (unless `other` is [`OtherCubin::Keep`]) timed a cubin whose hash
    /// is not the lock's for that kernel × arch (then nothing is merged).
    /// A lock from before occ kept cubin hashes has none to compare with:
    /// its measurements are taken as they are.
    pub fn import_with(
        &mut self,
        results: &Results,
        other: OtherCubin,
    ) -> std::result::Result<Imported, String> {
        let mut done = Imported::default();
        if results.package != self.package {
            return Err(format!(
                "the results are of package `{}`, the lock of `{}`; import them into that package's occ.lock",
                results.package, self.package
            ));
        }
        for m in &results.measurements {
            let Some(kernel) = self.find(&m.kernel, &m.source) else {
                return Err(format!(
                    "the results time kernel {:?} of {}, which the lock does not have; rebuild and bless the package the results were measured on, or measure again",
                    m.kernel, m.source
                ));
            };
            let Some(recorded) = kernel.archs.get(&m.arch) else {
                return Err(format!(
                    "the results time kernel {:?} on {}, which the lock does not record (it has {}); add the arch to the build or measure on one of those",
                    m.kernel,
                    m.arch,
                    kernel.archs.keys().cloned().collect::<Vec<_>>().join(", ")
                ));
            };
            let Some(lock_hash) = recorded.cubin_hash.as_ref() else {
                continue;
            };
            if *lock_hash == m.cubin_hash {
                continue;
            }
            match other {
                OtherCubin::Refuse => {
                    return Err(format!(
                        "the results time kernel {:?} on {} on cubin {}, but the lock records cubin {} for it: \
                         they measured other code (an older or newer build, or another checkout's); build, \
                         bless and measure the same code, or pass --allow-stale to keep them anyway",
                        m.kernel, m.arch, m.cubin_hash, lock_hash
                    ));
                }
                OtherCubin::Keep => done.other_cubin.push(format!("{} on {}", m.kernel, m.arch)),
            }
        }
        for mut entry in results.to_measured() {
            // A moved file: key the entry by the lock's source.
            if let Some(k) = self.find(&entry.kernel, &entry.source) {
                entry.source = k.source.clone();
            }
            match self.measured.iter_mut().find(|e| e.key() == entry.key()) {
                Some(old) => {
                    *old = entry;
                    done.replaced += 1;
                }
                None => {
                    self.measured.push(entry);
                    done.added += 1;
                }
            }
        }
        measured::sort(&mut self.measured);
        Ok(done)
    }

    /// The kernel with the symbol `name`: the one from `source` if the lock
    /// has it, else the only one with that symbol (its file moved). A
    /// kernel's identity is its symbol; its source is a detail.
    pub fn find(&self, name: &str, source: &str) -> Option<&LockKernel> {
        find(&self.kernels, name, source)
    }
}

/// [`Lock::find`] over `kernels`.
fn find<'k>(kernels: &'k [LockKernel], name: &str, source: &str) -> Option<&'k LockKernel> {
    crate::compiler::names::find_kernel(kernels, name, source, |k| {
        (k.name.as_str(), k.source.as_str())
    })
}

/// The lock's kernels: those of `m`, then `kept` (recorded by parts a
/// candidate keeps), sorted by symbol then source.
fn lock_kernels(m: &Manifest, kept: Vec<LockKernel>) -> Vec<LockKernel> {
    let mut kernels: Vec<LockKernel> = m
        .kernels
        .iter()
        .map(|k| map_archs(k, |_, a| Some(a.resources.clone())))
        .chain(kept)
        .collect();
    kernels.sort_by(|a, b| a.name.cmp(&b.name).then(a.source.cmp(&b.source)));
    kernels
}

/// What ptxas said of the kernels × archs of `m` besides their
/// resources, and `kept` (of the parts a candidate keeps): those with
/// anything to say.
fn notes(m: &Manifest, mut kept: BTreeMap<NoteKey, Noted>) -> BTreeMap<NoteKey, Noted> {
    for k in &m.kernels {
        for (arch, a) in &k.archs {
            let noted = Noted {
                cmem: a.cmem.clone(),
                warnings: a.warnings.clone(),
            };
            if !noted.is_empty() {
                kept.insert((k.name.clone(), k.source.clone(), arch.clone()), noted);
            }
        }
    }
    kept
}

/// `k` with each arch's record mapped by `f` (`None` drops the arch).
fn map_archs<A, B>(k: &Kernel<A>, mut f: impl FnMut(&String, &A) -> Option<B>) -> Kernel<B> {
    Kernel {
        name: k.name.clone(),
        demangled: k.demangled.clone(),
        base_name: k.base_name.clone(),
        short_name: k.short_name.clone(),
        params: k.params.clone(),
        ident: k.ident.clone(),
        source: k.source.clone(),
        archs: k
            .archs
            .iter()
            .filter_map(|(arch, a)| f(arch, a).map(|b| (arch.clone(), b)))
            .collect(),
    }
}

// ---- gate.json: what a build leaves for the CLI, versioned with the lock ----

/// The gate settings a build leaves in `$OUT_DIR/occ` for `cargo occ check`
/// and `cargo occ bless` (the lock's path and the thresholds).
pub const GATE_FILE: &str = "gate.json";

/// The default register threshold: registers may grow by this many per
/// thread before the gate fails (an occupancy drop fails regardless).
pub const DEFAULT_REGISTER_THRESHOLD: u32 = 8;

/// The default cliff margin: a change that leaves a kernel this many
/// registers per thread (or fewer) from losing a resident block warns.
pub const DEFAULT_CLIFF_MARGIN: u32 = manifest::NEAR_CLIFF;

fn default_cliff_margin() -> u32 {
    DEFAULT_CLIFF_MARGIN
}

/// Register thresholds of the gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Registers per thread may grow by this many before the gate fails.
    pub registers: u32,
    /// Per-kernel overrides, keyed by any name [`crate::schema::manifest::Manifest::lookup`] accepts
    /// (symbol, base name, short name, Rust identifier).
    pub kernels: BTreeMap<String, u32>,
    /// A change that leaves a kernel at most this many registers per
    /// thread from its next occupancy cliff warns ([`crate::compare::Cause::NearCliff`]);
    /// 0: never.
    #[serde(default = "default_cliff_margin")]
    pub cliff_margin: u32,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            registers: DEFAULT_REGISTER_THRESHOLD,
            kernels: BTreeMap::new(),
            cliff_margin: DEFAULT_CLIFF_MARGIN,
        }
    }
}

impl Thresholds {
    /// The register threshold of one kernel.
    pub fn for_kernel(&self, k: &LockKernel) -> u32 {
        [&k.name, &k.base_name, &k.short_name, &k.ident]
            .iter()
            .find_map(|n| self.kernels.get(n.as_str()).copied())
            .unwrap_or(self.registers)
    }
}

/// What a build leaves in `$OUT_DIR/occ/gate.json` for the CLI.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateSettings {
    /// Schema version ([`LOCK_SCHEMA`]).
    pub schema: u32,
    /// The lock file this build compares with (absolute: `$OUT_DIR` is local).
    pub lock_file: PathBuf,
    /// The register thresholds.
    pub thresholds: Thresholds,
    /// The crate root (absolute), where the `.cu` files the manifest
    /// names are: for the source lines of `cargo occ check`'s annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crate_root: Option<PathBuf>,
    /// Whether the build fails on spills (`Build::deny_spills`): spills
    /// are then errors in annotations and SARIF, else warnings.
    #[serde(default)]
    pub deny_spills: bool,
}

impl GateSettings {
    /// Parses `gate.json`, checking its schema.
    pub fn from_json(text: &str, path: &Path) -> Result<GateSettings> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| Error::Corrupt {
            path: path.to_path_buf(),
            detail: format!("not valid JSON ({e}); rebuild to regenerate it"),
        })?;
        manifest::check_schema(&value, path, LOCK_SCHEMA, "rebuild to regenerate it")?;
        serde_json::from_value(value).map_err(|e| Error::Corrupt {
            path: path.to_path_buf(),
            detail: format!("not occ gate settings ({e}); rebuild to regenerate it"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::tests::{arch, lock as fabricated};

    use crate::model::declared::{self, Launch};
    use crate::schema::manifest::{DeclaredBy, DynamicSmem, Facts};
    use serde_json::Value;

    /// A kernel that cannot run at the block its `.reqntid` requires
    /// (here 255 registers per thread in 1,024 threads: four times an
    /// sm_80 SM's registers; ptxas would have capped the registers) is
    /// refused on reading, naming the kernel, the arch and the launch,
    /// never read as a launch at 0% occupancy; so is the form a schema-2
    /// lock wrote for it (a best block of 0 threads, none resident,
    /// limited by `cannot launch`).
    #[test]
    fn a_kernel_that_cannot_run_its_required_block_is_refused_in_either_schema() {
        let mut big = arch(255, 64, 0);
        big.facts.launch_bounds.req_threads = Some([1024, 1, 1]);
        let l = fabricated(&[("a", big)]);
        let text = l.to_text();
        let err = Lock::from_text(&text, Path::new("occ.lock"))
            .expect_err("a launch no block of which runs")
            .to_string();
        assert!(
            err.contains("kernel \"a\" on sm_80") && err.contains("no block of 1024"),
            "{err}"
        );
        let mut old: Value = serde_json::from_str(&text).expect("JSON");
        old["schema"] = Value::from(2);
        old["kernels"][0]["archs"]["sm_80"]["best"] = serde_json::json!({
            "block_size": 0,
            "active_blocks_per_sm": 0,
            "active_warps_per_sm": 0,
            "occupancy": 0.0,
            "limiters": ["cannot launch"],
            "dynamic_smem_headroom": 0
        });
        let old = serde_json::to_string_pretty(&old).expect("JSON");
        let err = Lock::from_text(&old, Path::new("occ.lock"))
            .expect_err("the old form of it")
            .to_string();
        assert!(err.contains("no block of 1024"), "{err}");
    }

    /// example-app's lock as occs of schema 1 and 2 wrote it (schema 1:
    /// its lift hints' `min_blocks`, its H200 measurements' `cc` and
    /// `sms`; schema 2: every name and derived number) reads as the same
    /// lock of today's schema: every kernel, number and measurement.
    #[test]
    fn locks_of_schemas_1_and_2_read_as_todays() {
        let one = include_str!("../../../../tests/fixtures/lock-schema-1/occ.lock");
        let two = include_str!("../../../../tests/fixtures/lock-schema-2/occ.lock");
        let new = include_str!("../../../../example-app/occ.lock");
        assert!(one.contains("\"schema\": 1") && one.contains("\"cc\": \"9.0\""));
        assert!(one.contains("\"min_blocks\": 4"));
        assert!(two.contains("\"schema\": 2") && two.contains("\"best\": {"));
        assert!(new.contains("\"schema\": 3") && !new.contains("\"base_name\""));
        // The fixtures were written before example-app declared block_sum's
        // dynamic shared memory (`Build::dynamic_smem`): read today's
        // without it.
        let declared = ", \"dynamic_smem\": {\"pattern\": \"block_sum\", \"per_thread\": 128}";
        assert!(new.contains(declared), "example-app declares block_sum's");
        let new = new.replace(declared, "");
        let mut today = Lock::from_text(&new, Path::new("occ.lock")).expect("schema 3 reads");
        assert!(!today.measured.is_empty(), "the measurements are compared");
        // The older schemas kept no constant memory: all else is the same.
        assert!(!today.noted.is_empty(), "example-app's lock keeps its cmem");
        today.noted.clear();
        let new = today.to_text();
        for old in [one, two] {
            let upgraded =
                Lock::from_text(old, Path::new("occ.lock")).expect("an old schema reads");
            assert_eq!(upgraded, today);
            assert_eq!(upgraded.to_text(), new.as_str());
        }
        // A schema it does not know is still refused, naming it.
        let e = Lock::from_text(
            &one.replace("\"schema\": 1", "\"schema\": 0"),
            Path::new("occ.lock"),
        )
        .expect_err("schema 0");
        assert!(e.to_string().contains("schema 0"), "{e}");
    }

    /// A lock of these kernels on sm_80 whose derived numbers are the
    /// model's, as reading it back works them out.
    fn lock(kernels: &[(&str, Resources)]) -> Lock {
        derived(fabricated(kernels))
    }

    /// `l` with each kernel × arch's `best` and `declared` worked out by
    /// the model from its facts and build.rs's launch.
    fn derived(mut l: Lock) -> Lock {
        for k in &mut l.kernels {
            for (arch, r) in &mut k.archs {
                let (by_build, smem) = r.declared.as_ref().map_or((None, None), |d| d.by_build());
                let (best, declared) =
                    declared::judge_facts(arch, &r.facts, by_build, &[], smem).expect("the model");
                r.best = best;
                r.declared = declared;
            }
        }
        l
    }

    /// The C++ launches a build read are a fact the lock records (one
    /// optional key, absent when there are none); reading the lock judges
    /// the kernel they name at its constant launch, as the build did.
    #[test]
    fn the_code_launches_are_recorded_and_judge_their_kernel_on_reading() {
        let plain = lock(&[("k", arch(32, 64, 0))]);
        assert!(!plain.to_text().contains("launches"), "{}", plain.to_text());
        let mut l = plain.clone();
        let at = |line: u32, block: Option<[u32; 3]>, why: Option<&str>| CodeLaunch {
            source: "k.cu".into(),
            line,
            kernel: "k".into(),
            block,
            dynamic_smem: Some(0),
            why: why.map(str::to_string),
        };
        l.launches = vec![
            at(3, Some([128, 1, 1]), None),
            at(4, None, Some("block `n`")),
        ];
        let text = l.to_text();
        assert!(text.contains("\"launches\": ["), "{text}");
        let read = Lock::from_text(&text, Path::new("occ.lock")).expect("reads");
        assert_eq!(read.launches, l.launches);
        let d = read.kernels[0].archs["sm_80"]
            .declared
            .as_ref()
            .expect("declared");
        assert_eq!(
            (d.launch.block, &d.by),
            (
                [128, 1, 1],
                &DeclaredBy::Code {
                    at: "k.cu:3".into()
                }
            )
        );
        // A key a launch does not have is refused, as any other.
        let bad = text.replace("\"why\"", "\"whyy\"");
        assert!(Lock::from_text(&bad, Path::new("occ.lock")).is_err());
    }

    #[test]
    fn lock_text_round_trips_and_starts_with_the_schema() {
        let l = lock(&[("a", arch(32, 64, 0))]);
        let text = l.to_text();
        assert!(text.starts_with("{\n  \"schema\": 3,"), "{text}");
        assert!(text.ends_with("}\n"));
        assert_eq!(Lock::from_text(&text, Path::new("occ.lock")).ok(), Some(l));
        let empty = Lock {
            kernels: Vec::new(),
            archs: Vec::new(),
            ..lock(&[])
        };
        let text = empty.to_text();
        assert!(
            text.contains("\"archs\": [],\n  \"kernels\": []\n}"),
            "{text}"
        );
        assert_eq!(
            Lock::from_text(&text, Path::new("occ.lock")).ok(),
            Some(empty)
        );
        let err = Lock::from_text("{\"schema\": 99}", Path::new("occ.lock"));
        assert!(err.is_err_and(|e| e.to_string().contains("newer occ")));
    }

    /// A lock of `n` kernels on two archs.
    fn many(n: usize) -> Lock {
        let names: Vec<String> = (0..n).map(|i| format!("k_{i:04}")).collect();
        let mut l = lock(
            &names
                .iter()
                .map(|n| (n.as_str(), arch(32, 64, 0)))
                .collect::<Vec<_>>(),
        );
        l.archs.push("sm_90".into());
        for (i, k) in l.kernels.iter_mut().enumerate() {
            k.archs.insert("sm_90".into(), arch(40, 48, (i % 3) as u32));
        }
        derived(l)
    }

    #[test]
    fn source_lines_stay_out_of_the_lock() {
        let l = lock(&[("a", arch(32, 64, 0))]);
        let mut m = crate::assemble::lock_manifest(&l, &[], Path::new("occ.lock"))
            .expect("a manifest of the lock");
        for a in m.kernels.iter_mut().flat_map(|k| k.archs.values_mut()) {
            a.lines = Some(crate::compiler::lines::SourceLines {
                spills: vec![crate::compiler::lines::SpillSite {
                    file: "k.cu".into(),
                    line: 7,
                    loop_line: Some(5),
                    stores: 4,
                    loads: 4,
                }],
                peak_pressure: None,
            });
        }
        assert!(manifest::to_json_pretty(&m).contains("\"lines\""));
        let again = Lock::from_manifest(&m);
        assert!(!again.to_text().contains("lines"), "{}", again.to_text());
        assert_eq!(again.to_text(), l.to_text());
    }

    #[test]
    fn the_lock_has_one_line_per_kernel_and_per_kernel_arch() {
        let l = many(300);
        let text = l.to_text();
        let lines: Vec<&str> = text.lines().collect();
        // 6 lines of header (schema, package, nvcc, archs), 3 per kernel
        // (its names, its archs' closing line, and its two archs), the end.
        let kernel_lines = lines
            .iter()
            .filter(|l| l.starts_with("    {\"name\": "))
            .count();
        let arch_lines: Vec<&&str> = lines
            .iter()
            .filter(|l| l.starts_with("      \"sm_") && l.contains("\"registers\": "))
            .collect();
        assert_eq!(kernel_lines, 300, "{text}");
        assert_eq!(arch_lines.len(), 600, "{text}");
        assert!(lines.len() <= 300 * 4 + 12, "{} lines", lines.len());
        // Each kernel × arch line holds its facts, and nothing that
        // follows from them.
        assert!(arch_lines
            .iter()
            .all(|l| l.contains("\"barriers\": 0") && !l.contains("best")));
        // Round trip, byte for byte.
        let back = Lock::from_text(&text, Path::new("occ.lock")).expect("reads");
        assert_eq!(back, l);
        assert_eq!(back.to_text(), text);
        // Named parts: one line each, with their sources.
        let mut parted = l.clone();
        parted
            .parts
            .insert("lib".into(), vec!["src/a.cu".into(), "src/b.cu".into()]);
        parted.parts.insert("ptx".into(), vec!["src/c.cu".into()]);
        let text_parts = parted.to_text();
        assert!(
            text_parts.contains("  \"parts\": {\n    \"lib\": [\"src/a.cu\", \"src/b.cu\"],\n    \"ptx\": [\"src/c.cu\"]\n  }\n}\n"),
            "{}",
            &text_parts[text_parts.len() - 300..]
        );
        let back_parts = Lock::from_text(&text_parts, Path::new("occ.lock")).expect("reads");
        assert_eq!(back_parts, parted);
        // A lock in the old layout (fully pretty JSON) reads the same.
        let value: Value = serde_json::from_str(&text).expect("JSON");
        let old = manifest::to_json_pretty(&value);
        assert!(old.lines().count() > 3 * lines.len());
        let from_old = Lock::from_text(&old, Path::new("occ.lock")).expect("old layout");
        assert_eq!(from_old.to_text(), text);
    }

    #[test]
    fn a_change_of_one_number_is_a_one_line_diff() {
        let l = many(20);
        let mut changed = l.clone();
        if let Some(a) = changed.kernels[7].archs.get_mut("sm_90") {
            a.facts.registers += 8;
        }
        let (a, b) = (l.to_text(), changed.to_text());
        let differing = a.lines().zip(b.lines()).filter(|(x, y)| x != y).count();
        assert_eq!(a.lines().count(), b.lines().count());
        assert_eq!(differing, 1, "{b}");
    }

    /// What the lock derives is not in the file, and a hand edit cannot
    /// put it there: a key the schema does not have (an `ident`, a `best`)
    /// is refused by name, not ignored. (The `lock` fuzz target found a
    /// lock whose `ident` broke kernels.rs; idents now follow from the
    /// symbols.)
    #[test]
    fn a_derived_name_or_number_written_into_the_lock_is_refused() {
        let text = include_str!("../../../../fuzz/seeds/occ.lock");
        let good = Lock::from_text(text, Path::new("occ.lock")).expect("the seed lock reads");
        assert!(good.kernels.iter().any(|k| k.ident == "saxpy"));
        assert!(!text.contains("\"ident\""), "{text}");
        let bad = text.replacen(
            "{\"name\": \"saxpy\"",
            "{\"name\": \"saxpy\", \"ident\": \"sax)py\"",
            1,
        );
        assert_ne!(bad, text, "the seed has a saxpy kernel");
        let err = Lock::from_text(&bad, Path::new("occ.lock"))
            .expect_err("an ident")
            .to_string();
        assert!(
            err.contains("occ.lock")
                && err.contains("unknown field `ident`")
                && err.contains("line "),
            "{err}"
        );
        let best = text.replacen(
            "\"registers\": ",
            "\"best\": {\"block_size\": 64}, \"registers\": ",
            1,
        );
        let err = Lock::from_text(&best, Path::new("occ.lock"))
            .expect_err("a best launch")
            .to_string();
        assert!(err.contains("unknown field `best`"), "{err}");
        let bad_arch = text.replacen("\"sm_80\"", "\"sm 80\"", 1);
        assert!(Lock::from_text(&bad_arch, Path::new("occ.lock")).is_err());
    }

    /// A C++ kernel's demangled name is written for the reader and checked
    /// against its symbol; the other names follow from the symbol.
    #[test]
    fn a_cpp_kernels_names_follow_from_its_symbol() {
        let mut l = fabricated(&[("_Z5saxpyifPKfPf", arch(32, 64, 0))]);
        l.kernels[0].demangled = "saxpy(int, float, float const*, float*)".into();
        l.kernels[0].base_name = "saxpy".into();
        l.kernels[0].short_name = "saxpy".into();
        l.kernels[0].ident = "saxpy".into();
        let l = derived(l);
        let text = l.to_text();
        assert!(
            text.contains("\"demangled\": \"saxpy(int, float, float const*, float*)\"")
                && !text.contains("base_name"),
            "{text}"
        );
        assert_eq!(Lock::from_text(&text, Path::new("occ.lock")).ok(), Some(l));
        let edited = text.replacen("saxpy(int,", "saxpy(long,", 1);
        let err = Lock::from_text(&edited, Path::new("occ.lock"))
            .expect_err("a demangled name of another symbol")
            .to_string();
        assert!(
            err.contains("saxpy(long, float")
                && err.contains("demangles to")
                && err.contains("cargo occ bless"),
            "{err}"
        );
    }

    #[test]
    fn a_bom_is_skipped_and_duplicates_and_bad_numbers_are_refused() {
        let l = lock(&[("a", arch(32, 64, 0))]);
        let text = l.to_text();
        let with_bom = format!("\u{feff}{text}");
        assert_eq!(
            Lock::from_text(&with_bom, Path::new("occ.lock")).ok(),
            Some(l.clone())
        );
        let mut twice = l.clone();
        twice.kernels.push(twice.kernels[0].clone());
        let err = Lock::from_text(&twice.to_text(), Path::new("occ.lock"))
            .expect_err("duplicate")
            .to_string();
        assert!(err.contains("\"a\"") && err.contains("twice"), "{err}");
        let huge = text.replacen("\"registers\": 32", "\"registers\": 1e308", 1);
        assert_ne!(huge, text);
        let err = Lock::from_text(&huge, Path::new("occ.lock"))
            .expect_err("registers 1e308")
            .to_string();
        assert!(
            err.contains("expected u32") && err.contains("line 10"),
            "{err}"
        );
    }

    /// What ptxas said of a kernel × arch besides its numbers (constant
    /// memory, warnings) is written only where it said anything, each
    /// warning as ptxas's words, and reads back whole: the warning typed
    /// again by the rule that types a log's.
    #[test]
    fn constant_memory_and_ptxas_warnings_round_trip_and_are_left_out_when_none() {
        let plain = lock(&[("a", arch(32, 64, 0)), ("b", arch(32, 64, 0))]);
        let text = plain.to_text();
        assert!(
            !text.contains("cmem") && !text.contains("warnings"),
            "{text}"
        );
        let mut l = plain.clone();
        let words =
            "For profile sm_80 adjusting per thread register count of 16 to lower bound of 24";
        l.noted.insert(
            ("a".into(), "k.cu".into(), "sm_80".into()),
            Noted {
                cmem: BTreeMap::from([("0".to_string(), 364), ("3".to_string(), 32)]),
                warnings: vec![crate::compiler::ptxas::warning(words)],
            },
        );
        let text = l.to_text();
        assert!(
            text.contains(&format!(
                "\"cmem\": {{\"0\": 364, \"3\": 32}}, \"warnings\": [\"{words}\"]}}"
            )),
            "{text}"
        );
        assert_eq!(text.matches("cmem").count(), 1, "b has none: {text}");
        let read = Lock::from_text(&text, Path::new("occ.lock")).expect("reads");
        assert_eq!(read, l);
        let warning = &read.noted[&("a".into(), "k.cu".into(), "sm_80".into())].warnings[0];
        assert_eq!(
            warning.kind,
            manifest::WarningKind::RegisterCapAdjusted {
                requested: 16,
                applied: 24
            }
        );
        // What a build without nvcc stands on carries them to the manifest.
        let jobs = read
            .contributions(&[], &["k.cu".to_string()], Path::new("occ.lock"))
            .expect("contributions");
        let a = jobs[0].kernels.iter().find(|k| k.name == "a").expect("a");
        assert_eq!((a.cmem.len(), a.warnings.len()), (2, 1));
        // A note of a kernel × arch the lock does not record is refused.
        let mut stray = l.clone();
        stray.noted.insert(
            ("a".into(), "k.cu".into(), "sm_90".into()),
            Noted::default(),
        );
        let err = stray.validate().expect_err("a note of sm_90");
        assert!(err.contains("kernel \"a\" of k.cu on sm_90"), "{err}");
        // A warning that could break a report is refused on reading.
        let bad = text.replace(words, "bad\\u0007bell");
        assert_ne!(bad, text);
        let err = Lock::from_text(&bad, Path::new("occ.lock"))
            .expect_err("a control character")
            .to_string();
        assert!(err.contains("ptxas warning"), "{err}");
    }

    /// serde reads a map's repeated key as its last; the lock refuses a
    /// kernel whose `archs` list one arch twice, naming the kernel, the
    /// arch and the line, as it refuses an unknown key.
    #[test]
    fn an_arch_listed_twice_in_one_kernel_is_refused_by_kernel_arch_and_line() {
        let l = lock(&[("a", arch(32, 64, 0))]);
        let text = l.to_text();
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with("\"sm_80\": {"))
            .expect("the arch line")
            .to_string();
        let twice = text.replacen(
            &line,
            &format!(
                "{}\n{line}",
                line.replacen("\"registers\": 32", "\"registers\": 40", 1) + ","
            ),
            1,
        );
        let at = twice
            .lines()
            .position(|l| l.trim_start().starts_with("\"sm_80\": {\"registers\": 32"))
            .expect("the second line")
            + 1;
        let err = Lock::from_text(&twice, Path::new("occ.lock"))
            .expect_err("an arch twice")
            .to_string();
        assert!(
            err.contains("occ.lock")
                && err.contains("kernel \"a\" lists arch sm_80 twice")
                && err.contains(&format!("line {at}"))
                && err.contains("cargo occ bless"),
            "{err}\n{twice}"
        );
        // Any other object too (here a lock of schema 2, read through its
        // upgrade, and the `parts` map).
        let mut old: Value = serde_json::from_str(&text).expect("JSON");
        old["schema"] = Value::from(2);
        let old = serde_json::to_string_pretty(&old).expect("JSON").replacen(
            "\"package\": \"p\",",
            "\"package\": \"p\",\n  \"package\": \"q\",",
            1,
        );
        let err = Lock::from_text(&old, Path::new("occ.lock"))
            .expect_err("a key twice")
            .to_string();
        assert!(err.contains("key \"package\" appears twice"), "{err}");
    }

    /// The numbers a lock's reader sees are the model's for the facts in
    /// the file: a hand edit of the registers (a bad merge) moves the best
    /// launch with them, as a build from the lock would.
    #[test]
    fn the_best_launch_follows_the_registers_in_the_file() {
        let l = lock(&[("a", arch(32, 64, 0))]);
        let text = l
            .to_text()
            .replacen("\"registers\": 32", "\"registers\": 200", 1);
        let read = Lock::from_text(&text, Path::new("occ.lock")).expect("reads");
        let r = &read.kernels[0].archs["sm_80"];
        assert_eq!(r.facts.registers, 200);
        let best = r.best.as_ref().expect("a best launch");
        assert_eq!((best.block_size, best.occupancy), (256, 0.125));
    }

    /// build.rs's launch is a fact the lock records (its pattern and
    /// launch); its occupancy and lift, and a launch the kernel's own
    /// bounds declare, follow from the facts. A recorded launch the kernel
    /// cannot run is refused naming the kernel and arch.
    #[test]
    fn build_rs_launch_is_recorded_and_its_occupancy_derived() {
        let mut l = fabricated(&[("a", arch(64, 32, 0))]);
        let r = l.kernels[0].archs.get_mut("sm_80").expect("sm_80");
        r.declared = Some(
            declared::declared_for(
                "sm_80",
                &r.facts,
                &Launch::block(128),
                DeclaredBy::Build {
                    pattern: "a".into(),
                },
            )
            .expect("a launch"),
        );
        let l = derived(l);
        let text = l.to_text();
        assert!(
            text.contains("\"launch\": {\"pattern\": \"a\", \"block\": [128, 1, 1]}")
                && !text.contains("occupancy"),
            "{text}"
        );
        let read = Lock::from_text(&text, Path::new("occ.lock")).expect("reads");
        assert_eq!(read, l);
        let d = read.kernels[0].archs["sm_80"].declared.as_ref();
        assert_eq!(d.map(|d| d.block_size), Some(128));
        // A launch the kernel's bounds declare is not written: it follows.
        let mut bounds = arch(64, 32, 0);
        bounds.facts.launch_bounds.max_threads = Some([256, 1, 1]);
        let b = lock(&[("b", bounds)]);
        let text = b.to_text();
        assert!(
            text.contains("\"launch_bounds\": {\"max_threads\": [256, 1, 1]}")
                && !text.contains("\"launch\""),
            "{text}"
        );
        let read = Lock::from_text(&text, Path::new("occ.lock")).expect("reads");
        let d = read.kernels[0].archs["sm_80"].declared.as_ref();
        assert_eq!(
            d.map(|d| (d.block_size, &d.by)),
            Some((256, &DeclaredBy::LaunchBounds))
        );
        // A recorded launch it cannot run.
        let edited = l.to_text().replacen("[128, 1, 1]", "[2048, 1, 1]", 1);
        let err = Lock::from_text(&edited, Path::new("occ.lock"))
            .expect_err("2048 threads")
            .to_string();
        assert!(err.contains("kernel \"a\" on sm_80"), "{err}");
    }

    /// build.rs's dynamic shared memory (`Build::dynamic_smem`) is a fact
    /// the lock records beside the kernel's facts (its pattern and rule),
    /// whether the block is occ's best at it or the kernel's bounds'; the
    /// launch and its occupancy follow, as a build with nvcc judged them.
    #[test]
    fn build_rs_dynamic_smem_is_recorded_and_the_launch_derived() {
        let judged = |facts: &Facts, rule| {
            declared::judge_facts("sm_80", facts, None, &[], Some((rule, "a".to_string())))
                .expect("the model")
                .1
        };
        let mut l = fabricated(&[("a", arch(32, 0, 0)), ("b", arch(32, 0, 0))]);
        let per_thread = DynamicSmem::PerThread {
            per_thread: 128,
            fixed: 0,
        };
        let a = l.kernels[0].archs.get_mut("sm_80").expect("sm_80");
        a.declared = judged(&a.facts, per_thread);
        let b = l.kernels[1].archs.get_mut("sm_80").expect("sm_80");
        b.facts.launch_bounds.max_threads = Some([256, 1, 1]);
        b.declared = judged(&b.facts, DynamicSmem::Fixed(49152));
        let l = derived(l);
        let text = l.to_text();
        for needle in [
            "\"dynamic_smem\": {\"pattern\": \"a\", \"per_thread\": 128}",
            "\"dynamic_smem\": {\"pattern\": \"a\", \"bytes\": 49152}",
        ] {
            assert!(text.contains(needle), "{needle} not in {text}");
        }
        assert!(!text.contains("\"launch\""), "{text}");
        let read = Lock::from_text(&text, Path::new("occ.lock")).expect("reads");
        assert_eq!(read, l);
        let d = |i: usize| {
            let d = read.kernels[i].archs["sm_80"]
                .declared
                .clone()
                .expect("declared");
            (d.by, d.launch.dynamic_smem, d.block_size, d.smem_pattern)
        };
        let (by, rule, block, pattern) = d(0);
        assert_eq!(
            (by, rule, pattern.as_deref()),
            (DeclaredBy::Best, per_thread, Some("a"))
        );
        assert!(
            block > 0 && block < 1024,
            "the best block at 128 B/thread: {block}"
        );
        let (by, rule, block, _) = d(1);
        assert_eq!(
            (by, rule, block),
            (DeclaredBy::LaunchBounds, DynamicSmem::Fixed(49152), 256)
        );
    }

    /// A parameter is one string a reader can read, and reads back as the
    /// same parameter; a malformed one says what form it wants.
    #[test]
    fn parameters_are_written_as_declarations_and_read_back() {
        use crate::schema::manifest::Param;
        let p = |name: &str, c_type: &str, ptx: &str, size: u32, align: u32| Param {
            name: name.into(),
            c_type: c_type.into(),
            ptx: ptx.into(),
            size,
            align,
        };
        for (param, written) in [
            (p("n", "int", "u32", 4, 4), "n: int (u32)"),
            (p("p", "float*", "u64", 8, 1), "p: float* (u64, align 1)"),
            (
                p("args", "Args", "b8", 16, 8),
                "args: Args (b8, 16 bytes, align 8)",
            ),
            (
                p("f", "void (*)(int)", "u64", 8, 8),
                "f: void (*)(int) (u64)",
            ),
            (p("", "", "u32", 4, 4), ": (u32)"),
        ] {
            assert_eq!(text::param_text(&param), written);
            let mut l = lock(&[("a", arch(32, 64, 0))]);
            l.kernels[0].params = vec![param];
            let read = Lock::from_text(&l.to_text(), Path::new("occ.lock")).expect("reads");
            assert_eq!(read, l, "{written}");
        }
        let l = lock(&[("a", arch(32, 64, 0))]);
        let bad = l
            .to_text()
            .replacen("\"source\"", "\"params\": [\"n: int u32\"], \"source\"", 1);
        let err = Lock::from_text(&bad, Path::new("occ.lock"))
            .expect_err("a malformed parameter")
            .to_string();
        assert!(
            err.contains("\"n: int u32\"") && err.contains("name: C type (PTX type"),
            "{err}"
        );
    }

    /// Facts no ptxas reports, and text that would reach a build's
    /// output, are refused on reading, each naming what is wrong (found
    /// by a reviewer's hand-written and mutated locks).
    #[test]
    fn facts_no_build_makes_are_refused_on_reading() {
        let l = lock(&[("a", arch(32, 64, 0))]);
        let text = l.to_text();
        let refused = |edited: String, needle: &str| {
            assert_ne!(edited, text, "the edit applies ({needle})");
            let err = Lock::from_text(&edited, Path::new("occ.lock"))
                .expect_err(needle)
                .to_string();
            assert!(
                err.contains(needle) && err.contains("cargo occ bless"),
                "{needle:?}: {err}"
            );
        };
        refused(
            text.replacen("\"registers\": 32", "\"registers\": 100000", 1),
            "records 100000 registers per thread",
        );
        refused(
            text.replacen(
                "\"registers\": 32",
                "\"registers\": 32, \"launch_bounds\": {\"max_threads\": [0, 0, 0]}",
                1,
            ),
            ".maxntid with a dimension of 0",
        );
        refused(
            text.replacen(
                "\"source\"",
                "\"params\": [\"x: T (b8, 0 bytes, align 1)\"], \"source\"",
                1,
            ),
            "1 to 32764 bytes, not 0",
        );
        refused(
            text.replacen(
                "\"source\"",
                "\"params\": [\"x: int (u32, align 3)\"], \"source\"",
                1,
            ),
            "alignment, 3, is not a power of two",
        );
        refused(
            text.replacen(
                "\"source\"",
                "\"params\": [\"x: int (u32, align 4096)\"], \"source\"",
                1,
            ),
            "alignment, 4096",
        );
        refused(
            text.replacen("\"nvcc\": \"V13.5\"", "\"nvcc\": \"V13.5\\u202e\"", 1),
            "the nvcc version",
        );
        refused(
            text.replacen("\"sm_80\"\n  ]", "\"sm_80\",\n    \"sm_80\"\n  ]", 1),
            "lists arch sm_80 twice",
        );
        refused(
            text.replacen("\"sm_80\": {", "\"sm_90\": {", 1),
            "records sm_90, which the lock's archs (sm_80) do not list",
        );
        refused(
            text.replacen(
                "\"registers\": 32",
                "\"registers\": 32, \"launch\": {\"pattern\": \"zzz\", \"block\": [128, 1, 1]}",
                1,
            ),
            "pattern \"zzz\", which does not name it",
        );
        // A measurement of a kernel the lock does not record.
        let mut timed = measured::tests::results("a", &[(128, 2.0), (256, 3.0)]);
        timed.package = l.package.clone();
        let mut with = l.clone();
        with.import(&timed).expect("imports");
        let measured_text = with.to_text();
        refused_in(
            &measured_text,
            "\"kernel\": \"a\"",
            "\"kernel\": \"b\"",
            "measures kernel \"b\"",
        );
        refused_in(
            &measured_text,
            "\"block_size\": 128",
            "\"block_size\": 0",
            "a block of 0 threads",
        );
        refused_in(&measured_text, "\"runs\": 20", "\"runs\": 0", "no runs");
    }

    /// `text` with `from` replaced by `to` is refused, saying `needle`.
    fn refused_in(text: &str, from: &str, to: &str, needle: &str) {
        let edited = text.replacen(from, to, 1);
        assert_ne!(edited, text, "{from:?} in {text}");
        let err = Lock::from_text(&edited, Path::new("occ.lock"))
            .expect_err(needle)
            .to_string();
        assert!(err.contains(needle), "{needle:?}: {err}");
    }

    /// A measured time reads back as the same `f64` (serde_json's
    /// `float_roundtrip`): `tune import` then `bless` does not churn the
    /// lock's digits.
    #[test]
    fn measured_times_read_back_to_the_bit() {
        let mut timed =
            measured::tests::results("a", &[(128, 971.986_371_854_762_9), (256, 999.0)]);
        let mut l = lock(&[("a", arch(32, 64, 0))]);
        timed.package = l.package.clone();
        l.import(&timed).expect("imports");
        let text = l.to_text();
        let read = Lock::from_text(&text, Path::new("occ.lock")).expect("reads");
        assert_eq!(read.measured, l.measured);
        assert_eq!(read.to_text(), text);
    }

    #[test]
    fn a_measurement_of_another_cubin_is_refused_naming_both_hashes_unless_kept() {
        let timed = measured::tests::results("a", &[(128, 2.0), (256, 3.0)]);
        let theirs = timed.measurements[0].cubin_hash.clone();
        let ours = measured::content_hash(b"another cubin");
        let mut l = lock(&[("a", arch(32, 64, 0))]);
        l.package = timed.package.clone();
        l.kernels[0]
            .archs
            .get_mut("sm_80")
            .expect("sm_80")
            .cubin_hash = Some(ours.clone());
        let before = l.clone();
        let err = l
            .import(&timed)
            .expect_err("another cubin's timings were imported");
        assert!(
            err.contains(&theirs) && err.contains(&ours) && err.contains("--allow-stale"),
            "{err}"
        );
        assert!(err.contains("\"a\" on sm_80"), "{err}");
        assert_eq!(l, before, "nothing merged");
        // Kept on request, and said to be kept.
        let done = l
            .import_with(&timed, OtherCubin::Keep)
            .expect("kept on request");
        assert_eq!(done.added, 1);
        assert_eq!(done.other_cubin, vec!["a on sm_80".to_string()]);
        // The same cubin imports; a lock from before cubin hashes cannot tell.
        for recorded in [Some(theirs), None] {
            let mut l = before.clone();
            l.kernels[0]
                .archs
                .get_mut("sm_80")
                .expect("sm_80")
                .cubin_hash = recorded;
            let done = l.import(&timed).expect("imports");
            assert_eq!((done.added, done.other_cubin.len()), (1, 0));
        }
    }

    #[test]
    fn find_prefers_the_source_and_falls_back_to_a_unique_symbol() {
        let mut l = lock(&[("a", arch(32, 64, 0)), ("b", arch(32, 64, 0))]);
        assert!(l.find("a", "k.cu").is_some());
        assert_eq!(
            l.find("a", "moved.cu").map(|k| k.source.as_str()),
            Some("k.cu")
        );
        let mut other = l.kernels[0].clone();
        other.source = "z.cu".into();
        l.kernels.push(other);
        assert_eq!(l.find("a", "z.cu").map(|k| k.source.as_str()), Some("z.cu"));
        assert!(
            l.find("a", "moved.cu").is_none(),
            "two files hold `a`: no guess"
        );
    }
}
