//! The committed baseline, `occ.lock`: its schema and text.
//!
//! The lock records, per kernel × arch, the kernel's [`Resources`]: what the
//! gate compares (registers, static shared memory, spills, stack, the best
//! block size, the occupancy there and its limiters) plus what `kernels.rs`
//! and `#[launch_config]` need when no nvcc is available (names, launch
//! bounds, barriers, headroom). It is JSON with `"schema"` first, kernels
//! sorted by symbol, archs sorted, paths relative to the crate: a stable,
//! diff-friendly subset of the manifest, sharing its types.
//!
//! The text has one line per kernel (its names and source) and one line per
//! kernel × arch (its numbers), so that a change shows in a diff as the
//! lines of the kernels × archs that changed, and a lock of 750 kernels × 2
//! archs is about 3,000 lines, not 50,000:
//!
//! ```text
//! {
//!   "schema": 2,
//!   "package": "app",
//!   "nvcc": "V13.5.37",
//!   "archs": [
//!     "sm_80"
//!   ],
//!   "kernels": [
//!     {"name": "saxpy", "demangled": "saxpy", ..., "source": "kernels/saxpy.cu", "archs": {
//!       "sm_80": {"registers": 16, "static_smem": 0, ..., "best": {"block_size": 1024, ...}}
//!     }}
//!   ]
//! }
//! ```
//!
//! Any JSON layout reads the same (the older fully pretty locks included).
//!
//! Reading trusts the recorded facts (registers, shared memory, spills,
//! barriers, launch bounds, the launch build.rs declared, hashes) but not
//! the numbers that follow from them: [`Lock::from_text`] recomputes each
//! kernel × arch's `best` and `declared` occupancy with the model, as a
//! build does, and refuses a lock where they differ
//! ([`Lock::check_derived`]), so that a hand edit or a bad merge cannot
//! make the build from the lock, `diff`, the gate and `#[launch_config]`
//! disagree. A measurement is imported only onto the cubin the lock
//! records ([`Lock::import_with`]).

use crate::error::{Error, Result};
use crate::model::declared;
use crate::schema::manifest::{
    self, Compiled, Contribution, DeclaredBy, Kernel, KernelArch, Manifest, Origin, Resources,
};
use crate::schema::measured::{self, Measured, Results};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The schema version of `occ.lock` (2: the manifest's names, one per
/// fact: a lift's launch bounds say `min_blocks_per_sm`, a measured line
/// `compute_capability` and `sm_count`). A lock of another version is
/// refused with what to do (`delete it and run cargo occ bless`).
pub const LOCK_SCHEMA: u32 = 2;

/// The default lock file name, next to the crate's `Cargo.toml`.
pub const DEFAULT_LOCK_FILE: &str = "occ.lock";

/// The candidate lock a build leaves in `$OUT_DIR/occ` for `cargo occ bless`.
pub const CANDIDATE_FILE: &str = "occ.lock.new";

/// The committed baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flags: Option<BTreeMap<String, Vec<String>>>,
    /// Kernels, sorted by symbol then source.
    pub kernels: Vec<LockKernel>,
    /// The sources of each named part (the `Build`s of one build script
    /// other than the default one, see `Build::name`), so that one part's
    /// gate knows the other parts' kernels are not gone. Absent when the
    /// crate has one `Build`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parts: BTreeMap<String, Vec<String>>,
    /// Launches timed on a GPU (`cargo occ tune import`), one line per
    /// kernel × arch × bucket, sorted. Absent when nothing was measured;
    /// locks written before measurements read as having none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub measured: Vec<Measured>,
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
        }
    }

    /// A manifest made from the lock alone, for builds without nvcc: only
    /// the archs in `archs` (all of the lock's when empty), no device code
    /// (no `cubin` or `ptx`), no warnings or constant banks, and `origin`
    /// [`Origin::Lock`]. Errors name an arch the lock lacks.
    pub fn to_manifest(&self, archs: &[String], path: &Path) -> Result<Manifest> {
        let archs = self.recorded(archs, path)?;
        let kernels = self
            .kernels
            .iter()
            .map(|k| {
                map_archs(k, |arch, a| {
                    archs
                        .contains(arch)
                        .then(|| KernelArch::from_resources(a.clone()))
                })
            })
            .collect();
        let measured = self
            .measured
            .iter()
            .filter(|m| archs.contains(&m.arch))
            .cloned()
            .collect();
        Ok(Manifest {
            schema: manifest::SCHEMA_VERSION,
            package: self.package.clone(),
            origin: Origin::Lock,
            nvcc: self.nvcc.clone(),
            archs,
            kernels,
            device_code: Vec::new(),
            measured,
        })
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
                jobs.entry((k.source.as_str(), arch.as_str()))
                    .or_default()
                    .push(Compiled {
                        name: k.name.clone(),
                        demangled: k.demangled.clone(),
                        base_name: k.base_name.clone(),
                        short_name: k.short_name.clone(),
                        params: k.params.clone(),
                        facts: r.facts.clone(),
                        cmem: BTreeMap::new(),
                        warnings: Vec::new(),
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

    /// The lock's text: JSON, schema first, one line per kernel and one
    /// per kernel × arch (the module's layout), trailing newline. The same
    /// lock gives the same bytes.
    pub fn to_text(&self) -> String {
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut out, LockFormatter::default());
        // Plain data with string keys, into memory: serializing cannot fail.
        if self.serialize(&mut ser).is_err() {
            return manifest::to_json_pretty(self);
        }
        let mut text = String::from_utf8(out).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Parses a lock (one of an older schema read as today's, `upgrade`),
    /// checking its schema, its names, that no kernel is
    /// listed twice and that every occupancy is a fraction (0..=1). A UTF-8
    /// byte-order mark (some editors save one) is skipped.
    pub fn from_text(text: &str, path: &Path) -> Result<Lock> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| Error::Corrupt {
            path: path.to_path_buf(),
            detail: format!(
                "not valid JSON ({e}); restore it from version control, or delete it and run `cargo occ bless`"
            ),
        })?;
        let value = upgrade(value);
        manifest::check_schema(
            &value,
            path,
            LOCK_SCHEMA,
            "restore it from version control, or delete it and run `cargo occ bless`",
        )?;
        let lock: Lock = serde_json::from_value(value).map_err(|e| Error::Corrupt {
            path: path.to_path_buf(),
            detail: format!(
                "not an occ lock ({e}); restore it from version control, or delete it and run `cargo occ bless`"
            ),
        })?;
        lock.validate().map_err(|detail| Error::Corrupt {
            path: path.to_path_buf(),
            detail: format!(
                "{detail}; restore it from version control, or delete it and run `cargo occ bless`"
            ),
        })?;
        lock.check_derived().map_err(|detail| Error::Corrupt {
            path: path.to_path_buf(),
            detail,
        })?;
        Ok(lock)
    }

    /// Checks every number of the lock that follows from its recorded
    /// facts against the model: each kernel × arch's `best` (from its
    /// registers, static shared memory, barriers and launch bounds, by
    /// [`declared::best_launch`], as a build computes it) and its `declared`
    /// occupancy and lift (from the declared launch, by
    /// [`declared::declared_for`]). A hand edit or a bad merge that changed a
    /// number, or a resource without the numbers it gives, is refused: the
    /// error names the first such kernel, arch and field with the file's
    /// value and the recomputed one, counts the others, and says what to
    /// do. The measured section's `best` is checked by
    /// [`measured::validate_entries`].
    pub fn check_derived(&self) -> std::result::Result<(), String> {
        let mut wrong = self.kernels.iter().flat_map(|kernel| {
            kernel.archs.iter().filter_map(move |(arch, r)| {
                let fields = derived_differences(arch, r);
                (!fields.is_empty()).then_some((kernel, arch, r, fields))
            })
        });
        let Some((kernel, arch, r, fields)) = wrong.next() else {
            return Ok(());
        };
        let said: Vec<String> = fields
            .iter()
            .map(|d| {
                format!(
                    "{} is {} in the file, {} recomputed",
                    d.field, d.file, d.recomputed
                )
            })
            .collect();
        let others: Vec<String> = wrong
            .map(|(k, a, _, _)| format!("{:?} on {a}", k.name))
            .collect();
        let more = match others.len() {
            0 => String::new(),
            n if n <= 3 => format!(" (so do {})", others.join(", ")),
            n => format!(" (so do {} and {} more)", others[..3].join(", "), n - 3),
        };
        Err(format!(
            "the numbers of kernel {:?} ({}) on {arch} do not follow from its registers ({}), \
             static shared memory ({} B), barriers and launch bounds: {}{more}; a hand edit or a \
             bad merge changed them: resolve the merge by taking one side's lines of each kernel, \
             or rebuild with nvcc and run `cargo occ bless`",
            kernel.name,
            kernel.source,
            r.facts.registers,
            r.facts.static_smem,
            said.join("; "),
        ))
    }

    /// What a lock read back may not be trusted with: names that become
    /// Rust ([`manifest::validate_names`]), a kernel listed twice (the same
    /// symbol from the same source), and numbers out of range
    /// ([`manifest::validate_resources`]).
    pub fn validate(&self) -> std::result::Result<(), String> {
        manifest::writable("the package name", &self.package)?;
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
                manifest::validate_resources(&kernel.name, arch, r)?;
            }
        }
        measured::validate_entries(&self.measured)
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

/// The lock's layout: the lock object (depth 1), the maps in it (depth 2:
/// `parts`, one part and its sources a line) and each kernel's `archs` map
/// (depth 4) have one entry per line, and so has every array at depth 2
/// (`archs`, `kernels`); everything else is written on one line, with a
/// space after each `:` and `,`.
#[derive(Default)]
struct LockFormatter {
    /// Per open object or array: whether its entries go on lines of their
    /// own, and whether it had any.
    open: Vec<(bool, bool)>,
}

impl LockFormatter {
    /// Object depths whose entries go on lines of their own.
    const OBJECTS: [usize; 3] = [1, 2, 4];
    /// Array depths whose values go on lines of their own.
    const ARRAYS: [usize; 1] = [2];

    fn open<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        bracket: &[u8],
        broken_at: &[usize],
    ) -> std::io::Result<()> {
        self.open
            .push((broken_at.contains(&(self.open.len() + 1)), false));
        w.write_all(bracket)
    }

    /// The indent of a line: two spaces per enclosing container that is
    /// broken into lines (a container on one line adds none).
    fn indent<W: ?Sized + std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        let broken = self.open.iter().filter(|(broken, _)| *broken).count();
        w.write_all(&b"  ".repeat(broken))
    }

    fn entry<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        let Some((broken, any)) = self.open.last_mut() else {
            return Ok(());
        };
        *any = true;
        let broken = *broken;
        if !first {
            w.write_all(b",")?;
        }
        if broken {
            w.write_all(b"\n")?;
            self.indent(w)
        } else if !first {
            w.write_all(b" ")
        } else {
            Ok(())
        }
    }

    fn close<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        bracket: &[u8],
    ) -> std::io::Result<()> {
        if let Some((true, true)) = self.open.pop() {
            w.write_all(b"\n")?;
            self.indent(w)?;
        }
        w.write_all(bracket)
    }
}

impl serde_json::ser::Formatter for LockFormatter {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"[", &Self::ARRAYS)
    }

    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"]")
    }

    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.entry(w, first)
    }

    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        Ok(())
    }

    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"{", &Self::OBJECTS)
    }

    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"}")
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.entry(w, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        Ok(())
    }
}

/// One derived number a lock records that the model does not give.
#[derive(Debug, Clone, PartialEq)]
struct Difference {
    /// Its path in the kernel × arch record (`best.block_size`).
    field: String,
    /// The file's value, as JSON text.
    file: String,
    /// The model's value, as JSON text (or why it has none).
    recomputed: String,
}

/// The derived numbers of one kernel × arch record that differ from the
/// model's: `best` and `declared` recomputed from the record's own facts,
/// then both records compared field by field as JSON (so a field added to
/// either is compared too).
fn derived_differences(arch: &str, r: &Resources) -> Vec<Difference> {
    // build.rs's launch is a fact the lock cannot check, so the record's
    // stands in for it; a launch the kernel declares itself follows from
    // its launch bounds (`judge_facts`, the assembly's rule). No `declared`
    // is a lock from before occ recorded it: nothing to check.
    let judged = match &r.declared {
        None => declared::best_launch(arch, &r.facts).map(|best| (best, None)),
        Some(d) => {
            let by_build = match &d.by {
                DeclaredBy::Build { pattern } => Some((d.launch, pattern.clone())),
                _ => None,
            };
            declared::judge_facts(arch, &r.facts, by_build).map_err(|e| match e {
                declared::Judging::Best(detail) | declared::Judging::Declared { detail, .. } => {
                    detail
                }
            })
        }
    };
    let again = judged.map(|(best, declared)| Resources {
        best,
        declared,
        ..r.clone()
    });
    let again = match again {
        Ok(again) => again,
        Err(e) => {
            return vec![Difference {
                field: "best".into(),
                file: json_text(&r.best),
                recomputed: format!("none (the model refuses the record: {e})"),
            }]
        }
    };
    let mut out = Vec::new();
    differences(
        "",
        &serde_json::to_value(r).unwrap_or_default(),
        &serde_json::to_value(&again).unwrap_or_default(),
        &mut out,
    );
    out
}

/// The leaves where `file` and `model` differ, by their dotted path under
/// `at`; arrays (limiters) compare whole.
fn differences(
    at: &str,
    file: &serde_json::Value,
    model: &serde_json::Value,
    out: &mut Vec<Difference>,
) {
    use serde_json::Value;
    if let (Value::Object(f), Value::Object(m)) = (file, model) {
        let keys: std::collections::BTreeSet<&String> = f.keys().chain(m.keys()).collect();
        for key in keys {
            let path = if at.is_empty() {
                key.clone()
            } else {
                format!("{at}.{key}")
            };
            let (a, b) = (
                f.get(key).unwrap_or(&Value::Null),
                m.get(key).unwrap_or(&Value::Null),
            );
            differences(&path, a, b, out);
        }
    } else if file != model {
        out.push(Difference {
            field: at.to_string(),
            file: json_text(file),
            recomputed: json_text(model),
        });
    }
}

/// A value as compact JSON text (`absent` for null).
fn json_text(value: &impl Serialize) -> String {
    match serde_json::to_string(value) {
        Ok(text) if text == "null" => "absent".into(),
        Ok(text) => text,
        Err(_) => "?".into(),
    }
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

/// A lock of schema 1 as schema 2, which renamed three keys and nothing
/// else (one name per fact): a lift's `launch_bounds.min_blocks` is
/// `min_blocks_per_sm`, a measured line's `cc` and `sms` are
/// `compute_capability` and `sm_count`. So a committed lock keeps gating
/// across the upgrade, and the next `cargo occ bless` writes it anew. Any
/// other value is returned as it is.
fn upgrade(mut value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    if value.get("schema").and_then(Value::as_u64) != Some(1) {
        return value;
    }
    fn rename(object: Option<&mut Value>, from: &str, to: &str) {
        if let Some(Value::Object(map)) = object {
            if let Some(v) = map.remove(from) {
                map.insert(to.to_string(), v);
            }
        }
    }
    if let Some(Value::Array(kernels)) = value.get_mut("kernels") {
        for kernel in kernels {
            if let Some(Value::Object(archs)) = kernel.get_mut("archs") {
                for arch in archs.values_mut() {
                    let bounds = arch
                        .get_mut("declared")
                        .and_then(|d| d.get_mut("lift"))
                        .and_then(|l| l.get_mut("launch_bounds"));
                    rename(bounds, "min_blocks", "min_blocks_per_sm");
                }
            }
        }
    }
    if let Some(Value::Array(measured)) = value.get_mut("measured") {
        for line in measured {
            rename(Some(&mut *line), "cc", "compute_capability");
            rename(Some(line), "sms", "sm_count");
        }
    }
    value["schema"] = Value::from(LOCK_SCHEMA);
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::tests::{arch, lock as fabricated};

    /// A kernel that cannot launch on an arch (here 4,096 registers per
    /// thread: one warp would want twice the SM's registers) has no best
    /// launch: the lock writes `"best":
    /// null` and reads it back, and the form occs before wrote (a best
    /// block of 0 threads, none resident, limited by `cannot launch`) reads
    /// as the same record.
    #[test]
    fn a_kernel_that_cannot_launch_has_no_best_and_the_old_zero_block_reads_as_none() {
        let mut r = arch(4096, 64, 0);
        r.best = declared::best_launch("sm_80", &r.facts).expect("the model");
        assert_eq!(r.best, None, "test premise: over sm_80's registers");
        let l = fabricated(&[("a", r)]);
        let text = l.to_text();
        let read = Lock::from_text(&text, Path::new("occ.lock")).expect("null reads");
        assert_eq!(read.to_text(), text);
        let record: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(
            record["kernels"][0]["archs"]["sm_80"]["best"],
            serde_json::Value::Null,
            "{text}"
        );

        let mut old = record;
        old["kernels"][0]["archs"]["sm_80"]["best"] = serde_json::json!({
            "block_size": 0,
            "active_blocks_per_sm": 0,
            "active_warps_per_sm": 0,
            "occupancy": 0.0,
            "limiters": ["cannot launch"],
            "dynamic_smem_headroom": 0
        });
        let old = serde_json::to_string_pretty(&old).expect("JSON");
        let upgraded = Lock::from_text(&old, Path::new("occ.lock")).expect("the old form reads");
        assert_eq!(upgraded.kernels[0].archs["sm_80"].best, None);
        assert_eq!(upgraded.to_text(), text);
    }

    /// example-app's lock as the last occ of schema 1 wrote it (its lift
    /// hints' `min_blocks`, its H200 measurements' `cc` and `sms`) reads
    /// as the same lock of schema 2: every kernel, number and measurement.
    #[test]
    fn a_lock_of_schema_1_reads_as_schema_2() {
        let old = include_str!("../../../tests/fixtures/lock-schema-1/occ.lock");
        let new = include_str!("../../../example-app/occ.lock");
        assert!(old.contains("\"schema\": 1") && old.contains("\"cc\": \"9.0\""));
        assert!(old.contains("\"min_blocks\": 4"));
        let upgraded = Lock::from_text(old, Path::new("occ.lock")).expect("schema 1 reads");
        let today = Lock::from_text(new, Path::new("occ.lock")).expect("schema 2 reads");
        assert!(!today.measured.is_empty(), "the measurements are compared");
        assert_eq!(upgraded.to_text(), today.to_text());
        // A schema it does not know is still refused, naming it.
        let e = Lock::from_text(
            &old.replace("\"schema\": 1", "\"schema\": 0"),
            Path::new("occ.lock"),
        )
        .expect_err("schema 0");
        assert!(e.to_string().contains("schema 0"), "{e}");
    }

    /// A lock of these kernels on sm_80 whose `best` numbers are the
    /// model's, so that it reads back.
    fn lock(kernels: &[(&str, Resources)]) -> Lock {
        derived(fabricated(kernels))
    }

    /// `l` with each kernel × arch's `best` recomputed by the model.
    fn derived(mut l: Lock) -> Lock {
        for k in &mut l.kernels {
            for (arch, r) in &mut k.archs {
                r.best = declared::best_launch(arch, &r.facts).expect("the model");
            }
        }
        l
    }

    #[test]
    fn lock_text_round_trips_and_starts_with_the_schema() {
        let l = lock(&[("a", arch(32, 64, 0))]);
        let text = l.to_text();
        assert!(text.starts_with("{\n  \"schema\": 2,"), "{text}");
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
        let mut m = l
            .to_manifest(&[], Path::new("occ.lock"))
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
        // Each kernel × arch line holds all of its numbers.
        assert!(arch_lines
            .iter()
            .all(|l| l.contains("\"best\": {\"block_size\": ")));
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
        let old = manifest::to_json_pretty(&l);
        assert!(old.lines().count() > 10 * lines.len());
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

    #[test]
    fn a_lock_with_a_bad_ident_is_corrupt_not_a_panic() {
        // Found by the `lock` fuzz target: the ident feeds format_ident! in
        // kernels.rs when a build without nvcc stands on the lock.
        let text = include_str!("../../../fuzz/seeds/occ.lock");
        let good = Lock::from_text(text, Path::new("occ.lock")).expect("the seed lock reads");
        let bad = text.replacen("\"ident\": \"saxpy\"", "\"ident\": \"sax)py\"", 1);
        assert_ne!(bad, text, "the seed has a saxpy kernel");
        let err = Lock::from_text(&bad, Path::new("occ.lock"))
            .expect_err("bad ident")
            .to_string();
        assert!(
            err.contains("sax)py") && err.contains("not a Rust identifier"),
            "{err}"
        );
        let bad_arch = text.replacen("\"sm_80\"", "\"sm 80\"", 1);
        assert!(Lock::from_text(&bad_arch, Path::new("occ.lock")).is_err());
        assert!(!good.kernels.is_empty());
    }

    #[test]
    fn a_bom_is_skipped_and_duplicates_and_bad_occupancy_are_refused() {
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
        let huge = text.replacen("\"occupancy\": 1.0", "\"occupancy\": 1e308", 1);
        assert_ne!(huge, text);
        let err = Lock::from_text(&huge, Path::new("occ.lock"))
            .expect_err("occupancy 1e308")
            .to_string();
        assert!(err.contains("1e308") && !err.contains("inf"), "{err}");
    }

    /// The error of reading `l`'s text back.
    fn refusal(l: &Lock) -> String {
        Lock::from_text(&l.to_text(), Path::new("occ.lock"))
            .expect_err("the lock was accepted")
            .to_string()
    }

    #[test]
    fn a_hand_edited_best_launch_is_refused_naming_kernel_arch_field_and_both_values() {
        // A bad merge: 200 registers beside the numbers of a lighter kernel.
        let mut l = lock(&[("a", arch(32, 64, 0)), ("b", arch(32, 64, 0))]);
        let sm80 = l.kernels[0].archs.get_mut("sm_80").expect("sm_80");
        sm80.facts.registers = 200;
        let best = sm80.best.as_mut().expect("a best launch");
        best.block_size = 1024;
        best.occupancy = 0.25;
        let err = refusal(&l);
        for needle in [
            "occ.lock",
            "kernel \"a\" (k.cu) on sm_80",
            "registers (200)",
            "best.block_size is 1024 in the file, 256 recomputed",
            "best.occupancy is 0.25 in the file, 0.125 recomputed",
            "cargo occ bless",
        ] {
            assert!(err.contains(needle), "{needle:?} not in: {err}");
        }
        assert!(!err.contains("\"b\""), "b is as the model says: {err}");
        assert!(!err.contains('\n'), "one line: {err}");
        // Each kernel × arch is checked: the others are counted.
        let mut all = l.clone();
        for k in &mut all.kernels {
            if let Some(a) = k.archs.get_mut("sm_80") {
                a.facts.static_smem = 48 * 1024;
            }
        }
        let err = refusal(&all);
        assert!(err.contains("(so do \"b\" on sm_80)"), "{err}");
        // A number the file lacks is refused too (absent, not a default).
        let mut missing = lock(&[("a", arch(32, 64, 0))]);
        missing.kernels[0]
            .archs
            .get_mut("sm_80")
            .expect("sm_80")
            .best
            .as_mut()
            .expect("a best launch")
            .limiters = Vec::new();
        let err = refusal(&missing);
        assert!(err.contains("best.limiters is [] in the file"), "{err}");
    }

    #[test]
    fn a_declared_launch_is_checked_at_its_launch_and_against_the_launch_bounds() {
        use crate::model::declared::{Launch, Lift};
        let mut l = lock(&[("a", arch(64, 32, 0))]);
        let r = l.kernels[0].archs.get_mut("sm_80").expect("sm_80");
        let by = DeclaredBy::Build {
            pattern: "a".into(),
        };
        r.declared = Some(
            declared::declared_for("sm_80", &r.facts, &Launch::block(128), by).expect("a launch"),
        );
        let good = l.to_text();
        assert_eq!(
            Lock::from_text(&good, Path::new("occ.lock")).ok(),
            Some(l.clone())
        );
        // Its occupancy, and what would lift it, follow from the launch.
        let mut edited = l.clone();
        let d = edited.kernels[0]
            .archs
            .get_mut("sm_80")
            .and_then(|r| r.declared.as_mut());
        let d = d.expect("declared");
        d.occupancy = 1.0;
        d.lift = None::<Lift>;
        let err = refusal(&edited);
        assert!(
            err.contains("declared.occupancy is 1.0 in the file"),
            "{err}"
        );
        assert!(err.contains("declared.lift is absent in the file"), "{err}");
        // A launch said to come from the launch bounds must be theirs.
        let mut bounds = l.clone();
        let r = bounds.kernels[0].archs.get_mut("sm_80").expect("sm_80");
        r.facts.launch_bounds.max_threads = Some([256, 1, 1]);
        r.best = declared::best_launch("sm_80", &r.facts).expect("the model");
        r.declared = Some(
            declared::declared_for(
                "sm_80",
                &r.facts,
                &Launch::block(128),
                DeclaredBy::LaunchBounds,
            )
            .expect("a launch"),
        );
        let err = refusal(&bounds);
        assert!(
            err.contains("declared.block_size is 128 in the file, 256 recomputed"),
            "{err}"
        );
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
