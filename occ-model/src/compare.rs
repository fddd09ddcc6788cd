//! The regression gate's judgement: a build's lock (the candidate) against
//! the committed one. Pure: which kernels got worse, better, new or gone,
//! and why, as typed findings; the views (`text_table::render_diff`, `ci`,
//! `markdown`) render them. The policy (when to fail, bless, or write)
//! lives in occ-build's gate.

use crate::schema::lock::{Lock, LockKernel};
use crate::schema::manifest::{Declared, DeclaredBy, Judged, Launch, Resources};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt;

mod reason;
pub use reason::{DeclaredChange, FieldChange, JudgedAt, LaunchChange, Reason, Resident};

// The gate.json schema lives beside the lock's, whose version it carries.
pub use crate::schema::lock::{
    GateSettings, Thresholds, DEFAULT_CLIFF_MARGIN, DEFAULT_REGISTER_THRESHOLD, GATE_FILE,
};

/// How one kernel × arch changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Worse: fails the build.
    Regression,
    /// Better: a warning asking to bless.
    Improvement,
    /// Not in the lock: a warning asking to bless.
    New,
    /// Different but neither better nor worse (e.g. registers within the threshold).
    Changed,
}

impl Verdict {
    /// Every verdict, in the order findings are sorted.
    pub const ALL: [Verdict; 4] = [
        Verdict::Regression,
        Verdict::Improvement,
        Verdict::New,
        Verdict::Changed,
    ];
}

/// What a reason says, without its numbers: findings with the same verdict
/// and causes are reported together ([`groups`]), one header line and one
/// table, instead of the same sentence once per kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// Fewer resident warps (or a lower occupancy).
    OccupancyDown,
    /// Spills where there were none.
    NewSpills,
    /// More spilled bytes.
    MoreSpills,
    /// Registers up by more than the threshold.
    RegistersPastThreshold,
    /// In the lock, not in the build.
    Gone,
    /// The launch build.rs declared (`.launch`), which the lock records, is
    /// declared no more: the kernel's sites now launch at its best block,
    /// which a kernel written for one shape may not take.
    LaunchRemoved,
    /// More resident warps.
    OccupancyUp,
    /// Fewer spilled bytes.
    FewerSpills,
    /// Fewer registers.
    FewerRegisters,
    /// In the build, not in the lock.
    NewKernel,
    /// The kernel is in the lock, but not for this arch, which the lock does not record.
    NewArch,
    /// Registers up within the threshold.
    RegistersWithinThreshold,
    /// The change left the kernel within the cliff margin of losing a
    /// resident block (it warns, it does not fail).
    NearCliff,
    /// Static shared memory changed.
    StaticSmem,
    /// The best block size changed.
    BestBlock,
    /// The declared launch the lock records changed or went, with the same
    /// occupancy (a different one is [`Cause::OccupancyDown`] or
    /// [`Cause::OccupancyUp`], its reason naming both launches).
    LaunchChanged,
    /// The kernel's file moved.
    Moved,
    /// Something else the lock records changed.
    Details,
    /// A kernel gone beside a new one: a likely rename.
    Renamed,
}

impl Cause {
    /// The cause in a few words (`new spills`).
    pub fn phrase(self) -> &'static str {
        match self {
            Cause::OccupancyDown => "occupancy down",
            Cause::NewSpills => "new spills",
            Cause::MoreSpills => "more spills",
            Cause::RegistersPastThreshold => "registers up past the threshold",
            Cause::Gone => "kernel gone",
            Cause::LaunchRemoved => "declared launch removed from build.rs",
            Cause::OccupancyUp => "occupancy up",
            Cause::FewerSpills => "fewer spills",
            Cause::FewerRegisters => "fewer registers",
            Cause::NewKernel => "new kernel",
            Cause::NewArch => "new arch",
            Cause::RegistersWithinThreshold => "registers up within the threshold",
            Cause::NearCliff => "near an occupancy cliff",
            Cause::StaticSmem => "static smem changed",
            Cause::BestBlock => "best block changed",
            Cause::LaunchChanged => "declared launch changed",
            Cause::Moved => "moved to another file",
            Cause::Details => "recorded fields changed",
            Cause::Renamed => "renamed?",
        }
    }
}

/// One kernel × arch that differs from the lock.
///
/// A kernel is known by its symbol; its source is a detail: a kernel whose
/// file moved is matched to its lock entry ([`Reason::Moved`]), and a kernel
/// gone beside a new one on the same arch is shown as a likely rename.
///
/// As JSON (`cargo occ diff --format json`) `reasons` and `also` are lists
/// of objects, one per [`Reason`]: its `cause` (the [`Cause`]'s snake_case
/// name), its figures by name and `text`, its words
/// (`{"cause": "registers_past_threshold", "before": 32, "after": 41,
/// "threshold": 8, "text": "registers 32 -> 41 (+9, threshold 8)"}`). Read
/// back, the words are formatted again from the figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The kernel's base name.
    pub kernel: String,
    /// The kernel's source file (in this build; in the lock for a kernel gone).
    pub source: String,
    /// The arch.
    pub arch: String,
    /// The verdict.
    pub verdict: Verdict,
    /// Why: the changes that decided the verdict.
    #[serde(serialize_with = "with_text")]
    pub reasons: Vec<Reason>,
    /// Every other change, good or bad, that did not decide the verdict
    /// (`spills 96 -> 0 bytes (better)` beside an occupancy drop; see
    /// [`Finding::also_texts`]).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "with_text"
    )]
    pub also: Vec<Reason>,
    /// The locked numbers (`None` for a new kernel).
    pub before: Option<Resources>,
    /// The numbers of this build (`None` for a kernel gone).
    pub after: Option<Resources>,
}

impl Finding {
    fn new(kernel: &LockKernel, arch: &str, verdict: Verdict, reason: Reason) -> Finding {
        Finding {
            kernel: kernel.base_name.clone(),
            source: kernel.source.clone(),
            arch: arch.to_string(),
            verdict,
            reasons: vec![reason],
            also: Vec::new(),
            before: None,
            after: None,
        }
    }

    /// The source the lock records, when the kernel's file moved: its
    /// [`Reason::Moved`], among the reasons or the other changes.
    pub fn moved_from(&self) -> Option<&str> {
        self.reasons.iter().chain(&self.also).find_map(|r| match r {
            Reason::Moved { from } => Some(from.as_str()),
            _ => None,
        })
    }

    /// The cause of each reason, in order.
    pub fn causes(&self) -> impl Iterator<Item = Cause> + '_ {
        self.reasons.iter().map(Reason::cause)
    }

    /// Whether one of the reasons has `cause`.
    pub fn has(&self, cause: Cause) -> bool {
        self.causes().any(|c| c == cause)
    }

    /// Each reason in words, in order.
    pub fn texts(&self) -> Vec<String> {
        self.reasons.iter().map(Reason::to_string).collect()
    }

    /// Each other change in words, in order, a change for the better marked
    /// so (`spills 96 -> 0 bytes (better)`).
    pub fn also_texts(&self) -> Vec<String> {
        self.also
            .iter()
            .map(|r| {
                if r.is_better() {
                    format!("{r} (better)")
                } else {
                    r.to_string()
                }
            })
            .collect()
    }
}

/// Serializes reasons (or settings) as objects: each one's fields and its
/// words.
fn with_text<T, S>(items: &[T], s: S) -> Result<S::Ok, S::Error>
where
    T: Serialize + fmt::Display,
    S: serde::Serializer,
{
    /// An item as JSON: its kind and figures, then its words.
    #[derive(Serialize)]
    struct WithText<'a, T> {
        #[serde(flatten)]
        item: &'a T,
        text: String,
    }
    s.collect_seq(items.iter().map(|item| WithText {
        item,
        text: item.to_string(),
    }))
}

/// The result of comparing a build with the lock.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Diff {
    /// Every kernel × arch that differs, regressions first.
    pub findings: Vec<Finding>,
    /// Archs in the lock that this build did not build (not a regression).
    pub dropped_archs: Vec<String>,
    /// What decided the numbers besides the sources and changed since the
    /// lock was blessed (`nvcc 13.4.1 -> 13.5.37`, ``flags +`-Ofc max` ``),
    /// said before the kernels: one such change moves many of them. As
    /// JSON each is an object: its kind (`setting`), its fields and `text`,
    /// its words.
    #[serde(default, serialize_with = "with_text")]
    pub settings: Vec<Setting>,
    /// The kernel × archs the lock holds a GPU measurement of whose code
    /// is not the code measured (the cubin's hash changed, or the lock
    /// records none): the build fails on them, and `cargo occ check` with
    /// it ([`Diff::fails`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stale_measurements: Vec<StaleMeasurement>,
}

/// A kernel × arch whose GPU measurement in the lock was taken on other
/// code ([`Diff::stale_measurements`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleMeasurement {
    /// The kernel's C++ name without its parameters (its base name, what
    /// `cargo occ explain` takes), never its mangled symbol.
    pub kernel: String,
    /// Its source.
    pub source: String,
    /// The arch.
    pub arch: String,
    /// Whether the lock records the hash of the code measured (`false`: a
    /// lock written before occ kept them).
    pub recorded: bool,
}

/// A change of what decided the numbers besides the sources.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "setting", rename_all = "snake_case")]
pub enum Setting {
    /// The toolkit's version (`nvcc 13.4.1 -> 13.5.37`).
    Nvcc {
        /// The version the lock records.
        before: String,
        /// This build's.
        after: String,
    },
    /// A `Build`'s flags (``flags of Build `fast` +`-Ofc=max` ``).
    Flags {
        /// The `Build`'s name (empty: the unnamed one).
        part: String,
        /// Each flag given more (`+`) or fewer (`-`) times, in the order of
        /// this build's flags, then the lock's; empty when only their order
        /// changed.
        changes: Vec<FlagChange>,
        /// This build's flags, in order.
        now: Vec<String>,
    },
}

/// One flag of a [`Setting::Flags`] change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlagChange {
    /// The flag.
    pub flag: String,
    /// Given more times than the lock records (else fewer).
    pub added: bool,
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Setting::Nvcc { before, after } => write!(f, "nvcc {before} -> {after}"),
            Setting::Flags { part, changes, now } => {
                write!(f, "flags")?;
                if !part.is_empty() {
                    write!(f, " of Build `{part}`")?;
                }
                if changes.is_empty() {
                    return write!(f, " the same flags in another order ({})", now.join(" "));
                }
                for c in changes {
                    let sign = if c.added { '+' } else { '-' };
                    write!(f, " {sign}`{}`", c.flag)?;
                }
                Ok(())
            }
        }
    }
}

/// Settings in words, `; ` between them (`nvcc 13.4 -> 13.5; flags +`-DA``).
pub fn said(settings: &[Setting]) -> String {
    settings
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl Diff {
    /// The regressions.
    pub fn regressions(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.verdict == Verdict::Regression)
    }

    /// Whether any kernel regressed.
    pub fn has_regressions(&self) -> bool {
        self.regressions().next().is_some()
    }

    /// Whether the gate fails on this comparison whatever is unchecked: a
    /// regression, or a measurement taken on other code.
    pub fn fails(&self) -> bool {
        self.has_regressions() || !self.stale_measurements.is_empty()
    }

    /// The findings of kernels whose file moved (one per kernel × arch).
    pub fn moved(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.moved_from().is_some())
    }

    /// What the comparison could not check: the kernel × archs the lock
    /// has no baseline for ([`Verdict::New`]), of the sources `in_scope`
    /// says, as the archs no baseline covers at all (each kernel of such
    /// an arch new) and the other kernel × archs.
    pub fn unchecked(&self, in_scope: impl Fn(&str) -> bool) -> Unchecked {
        let new: Vec<&Finding> = self
            .findings
            .iter()
            .filter(|f| f.verdict == Verdict::New && in_scope(&f.source))
            .collect();
        let mut archs: Vec<String> = new
            .iter()
            .filter(|f| f.has(Cause::NewArch))
            .map(|f| f.arch.clone())
            .collect();
        archs.sort();
        archs.dedup();
        let kernels = new
            .iter()
            .filter(|f| !archs.contains(&f.arch))
            .map(|f| format!("{} ({})", f.kernel, f.arch))
            .collect();
        Unchecked {
            archs,
            kernels,
            not_built: Vec::new(),
        }
    }
}

/// What a comparison could not check ([`Diff::unchecked`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unchecked {
    /// Archs the lock has no baseline for.
    pub archs: Vec<String>,
    /// Other kernel × archs with no baseline, as `kernel (arch)`.
    pub kernels: Vec<String>,
    /// Archs the lock records that the build did not make, so their
    /// baselines were checked against nothing (`cargo occ check` counts
    /// them; a build warns of them, [`Diff::dropped_archs`]).
    pub not_built: Vec<String>,
}

impl Unchecked {
    /// Whether everything was checked.
    pub fn is_empty(&self) -> bool {
        self.archs.is_empty() && self.kernels.is_empty() && self.not_built.is_empty()
    }
}

impl fmt::Display for Unchecked {
    /// `no baseline for sm_86 (any kernel); no baseline for 2 kernels: a
    /// (sm_80), b (sm_80)`, the kernels capped at five.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if !self.archs.is_empty() {
            parts.push(format!(
                "no baseline for {} (any kernel)",
                self.archs.join(", ")
            ));
        }
        if !self.kernels.is_empty() {
            let shown: Vec<&str> = self.kernels.iter().take(5).map(String::as_str).collect();
            let more = self.kernels.len() - shown.len();
            parts.push(format!(
                "no baseline for {}: {}{}",
                crate::render::units::count(self.kernels.len(), "new kernel"),
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ));
        }
        if !self.not_built.is_empty() {
            parts.push(format!(
                "{} in the lock but not built, so checked against nothing",
                self.not_built.join(", ")
            ));
        }
        write!(f, "{}", parts.join("; "))
    }
}

/// Lock entries paired with the build's kernels: by symbol and source,
/// then by symbol alone (a moved file), the rest unpaired. Each kernel is
/// looked up by its key once (a map per side), so pairing is linear.
fn pair<'a>(
    lock: &'a Lock,
    candidate: &'a Lock,
) -> Vec<(Option<&'a LockKernel>, Option<&'a LockKernel>)> {
    let mut used_before = vec![false; lock.kernels.len()];
    let mut used_after = vec![false; candidate.kernels.len()];
    let mut pairs = Vec::new();
    // The lock's kernels by symbol and source, in order (the first unused
    // one pairs first).
    let mut by_key: HashMap<(&str, &str), VecDeque<usize>> = HashMap::new();
    for (j, b) in lock.kernels.iter().enumerate() {
        crate::work::step(1);
        by_key
            .entry((b.name.as_str(), b.source.as_str()))
            .or_default()
            .push_back(j);
    }
    for (i, a) in candidate.kernels.iter().enumerate() {
        crate::work::step(1);
        let key = (a.name.as_str(), a.source.as_str());
        if let Some(j) = by_key.get_mut(&key).and_then(VecDeque::pop_front) {
            used_before[j] = true;
            used_after[i] = true;
            pairs.push((Some(&lock.kernels[j]), Some(a)));
        }
    }
    // A symbol left once on each side is the same kernel in another file.
    let mut left_before: HashMap<&str, Vec<usize>> = HashMap::new();
    for (j, b) in lock
        .kernels
        .iter()
        .enumerate()
        .filter(|(j, _)| !used_before[*j])
    {
        crate::work::step(1);
        left_before.entry(b.name.as_str()).or_default().push(j);
    }
    let mut left_after: HashMap<&str, usize> = HashMap::new();
    for (_, a) in candidate
        .kernels
        .iter()
        .enumerate()
        .filter(|(i, _)| !used_after[*i])
    {
        crate::work::step(1);
        *left_after.entry(a.name.as_str()).or_default() += 1;
    }
    for (i, a) in candidate.kernels.iter().enumerate() {
        crate::work::step(1);
        if used_after[i] || left_after.get(a.name.as_str()) != Some(&1) {
            continue;
        }
        if let Some([j]) = left_before.get(a.name.as_str()).map(Vec::as_slice) {
            used_before[*j] = true;
            used_after[i] = true;
            pairs.push((Some(&lock.kernels[*j]), Some(a)));
        }
    }
    for (j, b) in lock.kernels.iter().enumerate() {
        if !used_before[j] {
            pairs.push((Some(b), None));
        }
    }
    for (i, a) in candidate.kernels.iter().enumerate() {
        if !used_after[i] {
            pairs.push((None, Some(a)));
        }
    }
    pairs
}

/// How many times each flag is given.
fn counts(flags: &[String]) -> BTreeMap<&str, i64> {
    let mut n: BTreeMap<&str, i64> = BTreeMap::new();
    for f in flags {
        *n.entry(f.as_str()).or_default() += 1;
    }
    n
}

/// The changes of what decided the numbers besides the sources: the
/// toolkit's version, and each `Build`'s flags (only when both locks record
/// them: a lock from before occ kept flags says nothing about them).
pub fn settings_changes(lock: &Lock, candidate: &Lock) -> Vec<Setting> {
    let mut changes = Vec::new();
    if !lock.nvcc.is_empty() && !candidate.nvcc.is_empty() && lock.nvcc != candidate.nvcc {
        changes.push(Setting::Nvcc {
            before: lock.nvcc.clone(),
            after: candidate.nvcc.clone(),
        });
    }
    let (Some(before), Some(after)) = (&lock.flags, &candidate.flags) else {
        return changes;
    };
    for (part, now) in after {
        // A part the lock does not know yet has no flags to compare.
        let Some(then) = before.get(part) else {
            continue;
        };
        if then == now {
            continue;
        }
        // By count, so that a flag given twice is one more, not a reorder.
        let (was, is) = (counts(then), counts(now));
        let mut flags: Vec<FlagChange> = Vec::new();
        for f in now
            .iter()
            .map(String::as_str)
            .chain(then.iter().map(String::as_str))
        {
            let more = is.get(f).copied().unwrap_or(0) - was.get(f).copied().unwrap_or(0);
            if more == 0 || flags.iter().any(|c| c.flag == f) {
                continue;
            }
            flags.push(FlagChange {
                flag: f.to_string(),
                added: more > 0,
            });
        }
        changes.push(Setting::Flags {
            part: part.clone(),
            changes: flags,
            now: now.clone(),
        });
    }
    changes
}

/// Compares a candidate (this build) with the committed lock.
///
/// Kernels are matched by symbol: a kernel whose file moved is compared
/// with its lock entry and noted ([`Reason::Moved`]); a kernel gone beside a new
/// one on the same arch is named as a likely rename on both findings. Each
/// finding lists the changes that decided its verdict and every other
/// change, good or bad.
///
/// Long because the pairing of kernels (same file, moved file, gone, new, new
/// arch) is one walk over both locks.
pub fn compare(lock: &Lock, candidate: &Lock, thresholds: &Thresholds) -> Diff {
    let mut findings = Vec::new();
    let built = &candidate.archs;
    for (before_k, after_k) in pair(lock, candidate) {
        if let Some(after_k) = after_k {
            let moved_from = before_k
                .filter(|b| b.source != after_k.source)
                .map(|b| b.source.clone());
            for (arch, after) in &after_k.archs {
                let before = before_k.and_then(|k| k.archs.get(arch));
                let Some(before) = before else {
                    let reason = if lock.archs.contains(arch) || before_k.is_none() {
                        Reason::NewKernel
                    } else {
                        Reason::NewArch { arch: arch.clone() }
                    };
                    let mut f = Finding::new(after_k, arch, Verdict::New, reason);
                    f.after = Some(after.clone());
                    findings.push(f);
                    continue;
                };
                let threshold = thresholds.for_kernel(after_k);
                let judged = judge(arch, before, after, threshold, thresholds.cliff_margin);
                // What ptxas said besides the numbers (a build from the
                // lock writes it): a change is said, so a bless keeps the
                // lock's copy the build's.
                let noted = before_k
                    .map(|b| noted_changes(lock, candidate, b, after_k, arch))
                    .unwrap_or_default();
                let (verdict, mut reasons, mut also) = match (judged, &moved_from) {
                    (Some(j), _) => j,
                    (None, Some(_)) => (Verdict::Changed, Vec::new(), Vec::new()),
                    (None, None) if !noted.is_empty() => (Verdict::Changed, Vec::new(), Vec::new()),
                    (None, None) => continue,
                };
                // The first reason decides the row's words; what else
                // changed is said beside it.
                let mut say = |reason: Reason| {
                    if reasons.is_empty() {
                        reasons.push(reason);
                    } else {
                        also.push(reason);
                    }
                };
                if let Some(from) = &moved_from {
                    say(Reason::Moved { from: from.clone() });
                }
                if !noted.is_empty() {
                    say(Reason::Details {
                        declared: None,
                        fields: noted,
                    });
                }
                findings.push(Finding {
                    kernel: after_k.base_name.clone(),
                    source: after_k.source.clone(),
                    arch: arch.clone(),
                    verdict,
                    reasons,
                    also,
                    before: Some(before.clone()),
                    after: Some(after.clone()),
                });
            }
        }
        if let Some(before_k) = before_k {
            for (arch, before) in &before_k.archs {
                if !built.contains(arch) || after_k.is_some_and(|k| k.archs.contains_key(arch)) {
                    continue;
                }
                let mut f = Finding::new(before_k, arch, Verdict::Regression, Reason::Gone);
                f.before = Some(before.clone());
                findings.push(f);
            }
        }
    }
    name_renames(&mut findings);
    findings.sort_by(|a, b| {
        a.verdict
            .cmp(&b.verdict)
            .then(a.kernel.cmp(&b.kernel))
            .then(a.source.cmp(&b.source))
            .then(a.arch.cmp(&b.arch))
    });
    let dropped_archs = lock
        .archs
        .iter()
        .filter(|a| !candidate.archs.contains(a))
        .cloned()
        .collect();
    Diff {
        findings,
        dropped_archs,
        settings: settings_changes(lock, candidate),
        stale_measurements: stale_measurements(lock, candidate),
    }
}

/// The constant memory and ptxas warnings of `before` (the lock's) and
/// `after` (the build's) on `arch` that differ, each named with its values
/// (`constant memory bank 0: 360 B -> bank 0: 400 B`).
fn noted_changes(
    lock: &Lock,
    candidate: &Lock,
    before: &LockKernel,
    after: &LockKernel,
    arch: &str,
) -> Vec<FieldChange> {
    let key = |k: &LockKernel| (k.name.clone(), k.source.clone(), arch.to_string());
    let empty = crate::schema::lock::Noted::default();
    let then = lock.noted.get(&key(before)).unwrap_or(&empty);
    let now = candidate.noted.get(&key(after)).unwrap_or(&empty);
    let mut out = Vec::new();
    if then.cmem != now.cmem {
        let said = |c: &BTreeMap<String, u64>| {
            if c.is_empty() {
                "none".to_string()
            } else {
                c.iter()
                    .map(|(bank, bytes)| format!("bank {bank}: {bytes} B"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        out.push(FieldChange {
            field: "constant memory".into(),
            before: said(&then.cmem),
            after: said(&now.cmem),
        });
    }
    if then.warnings != now.warnings {
        let said = |w: &[crate::schema::manifest::Warning]| match w.len() {
            0 => "none".to_string(),
            1 => format!("`{}`", w[0].text),
            n => format!("{n} warnings"),
        };
        out.push(FieldChange {
            field: "ptxas warnings".into(),
            before: said(&then.warnings),
            after: said(&now.warnings),
        });
    }
    out
}

/// The kernel × archs the lock holds a measurement of whose code in the
/// candidate is not the code the lock records (`cubin_hash`), once each,
/// in the lock's order of measurements. A build without nvcc judges
/// measurements by the lock's hash, so a lock the gate passed makes both
/// builds bake the same block.
fn stale_measurements(lock: &Lock, candidate: &Lock) -> Vec<StaleMeasurement> {
    let mut stale: Vec<StaleMeasurement> = Vec::new();
    for m in &lock.measured {
        let Some(kernel) = lock.find(&m.kernel, &m.source) else {
            continue;
        };
        let (Some(before), Some(now)) = (
            kernel.archs.get(&m.arch),
            candidate
                .find(&m.kernel, &m.source)
                .and_then(|k| k.archs.get(&m.arch)),
        ) else {
            continue;
        };
        let seen = |s: &StaleMeasurement| {
            s.kernel == kernel.base_name && s.source == kernel.source && s.arch == m.arch
        };
        if before.cubin_hash != now.cubin_hash && !stale.iter().any(seen) {
            stale.push(StaleMeasurement {
                kernel: kernel.base_name.clone(),
                source: kernel.source.clone(),
                arch: m.arch.clone(),
                recorded: before.cubin_hash.is_some(),
            });
        }
    }
    stale
}

/// How many of the stale measurements a message names before a count.
const STALE_NAMED: usize = 5;

/// The message of a build or check that fails on
/// [`Diff::stale_measurements`]: which kernels, why it matters and the two
/// ways out. `None` when there are none.
pub fn stale_measurements_message(lock_name: &str, stale: &[StaleMeasurement]) -> Option<String> {
    if stale.is_empty() {
        return None;
    }
    let named: Vec<String> = stale
        .iter()
        .take(STALE_NAMED)
        .map(|s| format!("{} on {}", s.kernel, s.arch))
        .collect();
    let more = match stale.len() - named.len() {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    let count = |what: &str| match stale.len() {
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    };
    Some(if stale.iter().any(|s| !s.recorded) {
        format!(
            "{lock_name} holds measurements of {} but no hash of their code: it was written \
             before occ recorded one ({}{more}); accept today's code with `cargo occ bless` (or \
             OCC_BLESS=1 cargo build): a measurement taken on today's code then counts, and an \
             older one waits for a new measurement, its `tuned` sites using the model's block \
             until then, with nvcc and without",
            count("kernel"),
            named.join(", ")
        )
    } else {
        format!(
            "the cubin of {} changed since {lock_name} was blessed: {}{more} (any edit of a \
             kernel in the same .cu file changes it); the measurements were taken on the old \
             code, and a build without nvcc (docs.rs, OCC_NO_NVCC) would still use them: \
             measure again and run `cargo occ tune import`, or accept the change with `cargo occ \
             bless` (or OCC_BLESS=1 cargo build), after which `tuned` sites use the model's \
             block there until measured again",
            count("measured kernel"),
            named.join(", ")
        )
    })
}

/// Pairs each kernel gone with a new kernel on the same arch, if any (the
/// same source first, then the closest name), and says so on both:
/// ``renamed? `old` -> `new` ``.
fn name_renames(findings: &mut [Finding]) {
    let is_gone = |f: &Finding| f.after.is_none() && f.reasons.first() == Some(&Reason::Gone);
    let is_new = |f: &Finding| f.before.is_none() && f.reasons.first() == Some(&Reason::NewKernel);
    let mut gone: Vec<usize> = (0..findings.len())
        .filter(|&i| is_gone(&findings[i]))
        .collect();
    gone.sort_by(|&a, &b| {
        let (a, b) = (&findings[a], &findings[b]);
        (&a.arch, &a.kernel, &a.source).cmp(&(&b.arch, &b.kernel, &b.source))
    });
    // The new kernels by arch: a gone kernel is scored against those of its
    // arch only (gone x new, not gone x findings).
    let mut new_on: HashMap<&str, Vec<usize>> = HashMap::new();
    for (n, f) in findings.iter().enumerate().filter(|(_, f)| is_new(f)) {
        new_on.entry(f.arch.as_str()).or_default().push(n);
    }
    let new_on: HashMap<String, Vec<usize>> = new_on
        .into_iter()
        .map(|(arch, n)| (arch.to_string(), n))
        .collect();
    let mut taken = vec![false; findings.len()];
    for g in gone {
        let old = &findings[g];
        let candidates = new_on.get(&old.arch).map_or(&[][..], Vec::as_slice);
        let best = candidates
            .iter()
            .copied()
            .filter(|&n| !taken[n])
            .max_by(|&x, &y| {
                let score = |n: usize| {
                    let f = &findings[n];
                    (
                        f.source == old.source,
                        strsim::jaro_winkler(&old.kernel, &f.kernel),
                    )
                };
                let (sx, sy) = (score(x), score(y));
                sx.0.cmp(&sy.0)
                    .then(sx.1.total_cmp(&sy.1))
                    // Ties: the first name in order.
                    .then(findings[y].kernel.cmp(&findings[x].kernel))
            });
        if let Some(n) = best {
            taken[n] = true;
            let renamed = Reason::Renamed {
                from: old.kernel.clone(),
                to: findings[n].kernel.clone(),
            };
            for i in [g, n] {
                findings[i].reasons.push(renamed.clone());
            }
        }
    }
}

/// The changes that decided a verdict.
type Reasons = Vec<Reason>;

/// The launch build.rs declared (`.launch`, or its dynamic shared memory,
/// `.dynamic_smem`) that the lock records and the build declares no more:
/// without it the kernel would read as better, judged at the best block
/// with no dynamic shared memory, a launch it is not made with.
fn removed_from_build(before: &Resources, after: &Resources) -> Option<Launch> {
    let was = before.declared.as_ref()?;
    let smem_gone = was.smem_pattern.is_some()
        && after
            .declared
            .as_ref()
            .is_none_or(|d| d.smem_pattern.is_none());
    let launch_gone = after.declared.is_none() && matches!(was.by, DeclaredBy::Build { .. });
    (smem_gone || launch_gone).then_some(was.launch)
}

/// The verdict on one kernel × arch, the changes that decided it, and every
/// other change; `None` when nothing the lock records changed.
///
/// Long because every change the lock records is weighed in one place, so that
/// the order of the verdict's rules is visible.
fn judge(
    arch: &str,
    before: &Resources,
    after: &Resources,
    threshold: u32,
    margin: u32,
) -> Option<(Verdict, Reasons, Reasons)> {
    let mut worse: Reasons = Vec::new();
    let mut better: Reasons = Vec::new();
    let mut neutral: Reasons = Vec::new();
    // Occupancy is a ratio of small integers; compare resident warps.
    let judged = judged_occupancy(arch, before, after);
    let (was, now) = (judged.before, judged.after);
    let removed = removed_from_build(before, after);
    if now.active_warps_per_sm < was.active_warps_per_sm
        || (now.active_warps_per_sm == was.active_warps_per_sm
            && now.occupancy + 1e-9 < was.occupancy)
    {
        worse.push(Reason::OccupancyDown {
            before: was,
            after: now,
            at: judged.at.clone(),
        });
    } else if now.active_warps_per_sm > was.active_warps_per_sm
        || now.occupancy > was.occupancy + 1e-9
    {
        better.push(Reason::OccupancyUp {
            before: was,
            after: now,
            at: judged.at.clone(),
        });
    } else if let Some(change) = judged.launch_change().filter(|_| removed.is_none()) {
        // The same occupancy at another launch: the table's `at` note names both.
        neutral.push(Reason::LaunchChanged {
            change: change.clone(),
        });
    }
    if let Some(launch) = removed {
        // Its sites took the shape from build.rs: they now launch at the
        // best block, which a kernel written for one shape may not take.
        worse.push(Reason::LaunchRemoved {
            launch,
            best_block_size: after.best.as_ref().map(|b| b.block_size),
        });
    }
    let launch = |r: &Resources| r.declared.as_ref().map(|d| d.launch);
    let described = |r: &Resources| launch(r).map(|l| l.describe());
    // A recorded launch changed is said by the occupancy's reason above.
    let declared = (judged.launch_change().is_none() && described(before) != described(after))
        .then(|| DeclaredChange {
            before: launch(before),
            after: launch(after),
        });
    let fields = recorded_changes(before, after);
    if declared.is_some() || !fields.is_empty() {
        neutral.push(Reason::Details { declared, fields });
    }
    let (bs, as_) = (before.facts.spill_bytes(), after.facts.spill_bytes());
    if bs == 0 && as_ > 0 {
        worse.push(Reason::NewSpills { bytes: as_ });
    } else if as_ > bs {
        worse.push(Reason::MoreSpills {
            before: bs,
            after: as_,
        });
    } else if as_ < bs {
        better.push(Reason::FewerSpills {
            before: bs,
            after: as_,
        });
    }
    let (br, ar) = (before.facts.registers, after.facts.registers);
    if ar > br.saturating_add(threshold) {
        worse.push(Reason::RegistersPastThreshold {
            before: br,
            after: ar,
            threshold,
        });
    } else if ar < br {
        better.push(Reason::FewerRegisters {
            before: br,
            after: ar,
        });
    } else if ar > br {
        neutral.push(Reason::RegistersWithinThreshold {
            before: br,
            after: ar,
            threshold,
        });
    }
    if before.facts.static_smem != after.facts.static_smem {
        neutral.push(Reason::StaticSmem {
            before: before.facts.static_smem,
            after: after.facts.static_smem,
        });
    }
    let best_block = |r: &Resources| r.best.as_ref().map(|b| b.block_size);
    if best_block(before) != best_block(after) {
        neutral.push(Reason::BestBlock {
            before: best_block(before),
            after: best_block(after),
        });
    }
    let near = near_cliff(arch, before, after, margin);
    if !worse.is_empty() {
        let mut also = better;
        also.extend(neutral);
        also.extend(near);
        return Some((Verdict::Regression, worse, also));
    }
    if let Some(near) = near {
        // Not worse yet: the verdict the other changes give, warned.
        let verdict = if better.is_empty() {
            Verdict::Changed
        } else {
            Verdict::Improvement
        };
        let (mut reasons, also) = if better.is_empty() {
            (neutral, Vec::new())
        } else {
            (better, neutral)
        };
        reasons.push(near);
        return Some((verdict, reasons, also));
    }
    if !better.is_empty() {
        return Some((Verdict::Improvement, better, neutral));
    }
    // The cubin's hash changes with any edit of the code; it matters only
    // to a measurement (`Diff::stale_measurements`).
    let numbers = |r: &Resources| Resources {
        cubin_hash: None,
        ..r.clone()
    };
    if numbers(before) != numbers(after) {
        if neutral.is_empty() {
            // Numbers derived otherwise from the same facts (another occ's
            // model): no recorded field to name.
            neutral.push(Reason::Details {
                declared: None,
                fields: Vec::new(),
            });
        }
        return Some((Verdict::Changed, neutral, Vec::new()));
    }
    None
}

/// The recorded facts no other reason speaks of that differ, each named
/// with its values (`maxrregcount none -> 64`), in the lock's order:
/// spill stores and loads when their sum is the same, the stack, barriers,
/// the register cap, `__launch_bounds__`, `__maxnreg__` and cluster
/// directives, and who declared an unchanged launch.
fn recorded_changes(before: &Resources, after: &Resources) -> Vec<FieldChange> {
    fn opt<T: fmt::Display>(v: Option<T>, unit: &str) -> String {
        v.map_or_else(|| "none".into(), |v| format!("{v}{unit}"))
    }
    fn dims(d: Option<[u32; 3]>) -> String {
        opt(
            d.map(|[x, y, z]| match (y, z) {
                (1, 1) => x.to_string(),
                (_, 1) => format!("{x}x{y}"),
                _ => format!("{x}x{y}x{z}"),
            }),
            "",
        )
    }
    let (b, a) = (&before.facts, &after.facts);
    let (bl, al) = (&b.launch_bounds, &a.launch_bounds);
    let bytes = |n: u32| format!("{n} bytes");
    let mut fields = Vec::new();
    let mut field = |name: &str, was: String, now: String| {
        if was != now {
            fields.push(FieldChange {
                field: name.into(),
                before: was,
                after: now,
            });
        }
    };
    if b.spill_bytes() == a.spill_bytes() {
        field("spill stores", bytes(b.spill_stores), bytes(a.spill_stores));
        field("spill loads", bytes(b.spill_loads), bytes(a.spill_loads));
    }
    field("stack frame", bytes(b.stack_frame), bytes(a.stack_frame));
    field(
        "cumulative stack",
        opt(b.cumulative_stack, " bytes"),
        opt(a.cumulative_stack, " bytes"),
    );
    field("barriers", opt(b.barriers, ""), opt(a.barriers, ""));
    field(
        "maxrregcount",
        opt(b.maxrregcount, ""),
        opt(a.maxrregcount, ""),
    );
    field(
        "__launch_bounds__ max threads",
        dims(bl.max_threads),
        dims(al.max_threads),
    );
    field(".reqntid", dims(bl.req_threads), dims(al.req_threads));
    field(
        "__launch_bounds__ min blocks per SM",
        opt(bl.min_blocks_per_sm, ""),
        opt(al.min_blocks_per_sm, ""),
    );
    field(
        "__maxnreg__",
        opt(bl.max_registers, ""),
        opt(al.max_registers, ""),
    );
    field(
        "max cluster rank",
        opt(bl.max_cluster_rank, ""),
        opt(al.max_cluster_rank, ""),
    );
    field("cluster dims", dims(bl.cluster_dims), dims(al.cluster_dims));
    field(
        "explicit cluster",
        bl.explicit_cluster.to_string(),
        al.explicit_cluster.to_string(),
    );
    if let (Some(was), Some(now)) = (&before.declared, &after.declared) {
        if was.launch == now.launch {
            field("declared by", was.by.describe(), now.by.describe());
        }
    }
    fields
}

/// [`Reason::NearCliff`] (`1 register from an occupancy cliff at block 256
/// (+1 costs a block: 6 -> 5 blocks per SM)`) when the change (registers,
/// shared memory or launch) left the kernel at most `margin` registers per
/// thread from losing a resident block and it was further before (or had
/// no cliff).
fn near_cliff(arch: &str, before: &Resources, after: &Resources, margin: u32) -> Option<Reason> {
    if margin == 0 {
        return None;
    }
    let cliff = |r: &Resources| crate::model::cliff::at_judged(arch, r).ok().flatten();
    let now = cliff(after)?;
    let d = now.registers.down?;
    let distance = d.at - now.registers.now;
    if distance > margin {
        return None;
    }
    let was_near = cliff(before).is_some_and(|c| c.registers.within(margin));
    let same = before.facts.registers == after.facts.registers
        && before.facts.static_smem == after.facts.static_smem
        && before.judged().map(|j| j.block_size) == after.judged().map(|j| j.block_size);
    if was_near || same {
        return None;
    }
    Some(Reason::NearCliff {
        registers: distance,
        block_size: now.block_size,
        active_blocks_per_sm: now.active_blocks_per_sm,
        blocks_past: d.active_blocks_per_sm,
    })
}

/// Findings that share a verdict and the causes that decided it (for a new
/// arch, the arch too): reported as one header line and one table.
#[derive(Debug, Clone, PartialEq)]
pub struct Group<'a> {
    /// The verdict.
    pub verdict: Verdict,
    /// The causes that decided it (a likely rename is a note, not a cause).
    pub causes: Vec<Cause>,
    /// The arch, for findings of [`Cause::NewArch`].
    pub arch: Option<String>,
    /// The findings, in the diff's order.
    pub findings: Vec<&'a Finding>,
}

impl Group<'_> {
    /// The distinct kernels, in order, each with the archs it has in the group.
    pub fn kernels(&self) -> Vec<(&str, Vec<&str>)> {
        let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
        // Where each kernel is in `out`, and the (kernel, arch)s seen.
        let mut at: HashMap<&str, usize> = HashMap::new();
        let mut seen: HashSet<(&str, &str)> = HashSet::new();
        for f in &self.findings {
            crate::work::step(1);
            if !seen.insert((&f.kernel, &f.arch)) {
                continue;
            }
            match at.get(f.kernel.as_str()) {
                Some(&i) => out[i].1.push(&f.arch),
                None => {
                    at.insert(&f.kernel, out.len());
                    out.push((&f.kernel, vec![&f.arch]));
                }
            }
        }
        out
    }

    /// Every arch of the group, sorted.
    pub fn archs(&self) -> Vec<&str> {
        let mut archs: Vec<&str> = self.findings.iter().map(|f| f.arch.as_str()).collect();
        archs.sort_unstable();
        archs.dedup();
        archs
    }
}

/// The findings with one of `verdicts`, grouped by verdict and causes, in a
/// stable order (regressions first).
pub fn groups<'a>(diff: &'a Diff, verdicts: &[Verdict]) -> Vec<Group<'a>> {
    // A group's key: the verdict, the deciding causes, a new arch's name.
    type Key = (Verdict, Vec<Cause>, Option<String>);
    let mut by_key: BTreeMap<Key, Vec<&'a Finding>> = BTreeMap::new();
    for f in diff
        .findings
        .iter()
        .filter(|f| verdicts.contains(&f.verdict))
    {
        let causes: Vec<Cause> = f.causes().filter(|c| *c != Cause::Renamed).collect();
        let arch = causes.contains(&Cause::NewArch).then(|| f.arch.clone());
        by_key.entry((f.verdict, causes, arch)).or_default().push(f);
    }
    by_key
        .into_iter()
        .map(|((verdict, causes, arch), findings)| Group {
            verdict,
            causes,
            arch,
            findings,
        })
        .collect()
}

/// The occupancy the gate compares, before and after, and the launch
/// each is judged at ([`judged_occupancy`]).
pub(crate) struct JudgedOccupancy {
    /// Before.
    pub before: Resident,
    /// After.
    pub after: Resident,
    /// Where: both at their best block, at one declared launch, or at
    /// a recorded launch before and another (or the best block) after.
    pub at: JudgedAt,
}

impl JudgedOccupancy {
    /// The change of a recorded launch, when before is judged at it and
    /// after at another.
    pub fn launch_change(&self) -> Option<&LaunchChange> {
        match &self.at {
            JudgedAt::Changed { change } => Some(change),
            JudgedAt::Best | JudgedAt::Launch { .. } => None,
        }
    }
}

/// The occupancy the gate compares: the launch the application uses. The
/// same declared launch: both as recorded there. A launch the lock records
/// and the build changed or dropped: before at its recorded launch, after
/// at its own (its declared launch, else its best block), the change named.
/// A launch the lock does not record (an older lock, a launch newly
/// declared): before's numbers recomputed at the build's launch from its
/// resources. No declared launch: best block to best block.
pub(crate) fn judged_occupancy(
    arch: &str,
    before: &Resources,
    after: &Resources,
) -> JudgedOccupancy {
    // Each side where `Resources::judged` judges it (the one "declared,
    // else best" rule); a kernel that cannot launch keeps no warp resident.
    let resident = |j: Option<Judged<'_>>| Resident {
        occupancy: j.map_or(0.0, |j| j.occupancy),
        active_warps_per_sm: j.map_or(0, |j| j.active_warps_per_sm),
    };
    let best = |r: &Resources| resident(r.best.as_ref().map(Judged::best));
    let at = |d: &Declared| resident(Some(Judged::declared(d)));
    let judged = |before, after, at| JudgedOccupancy { before, after, at };
    let (then_judged, now_judged) = (resident(before.judged()), resident(after.judged()));
    match (&before.declared, &after.declared) {
        (None, None) => judged(then_judged, now_judged, JudgedAt::Best),
        (Some(then), Some(now)) if then.launch == now.launch => {
            judged(then_judged, now_judged, JudgedAt::launch(now))
        }
        (Some(then), Some(now)) => judged(
            then_judged,
            now_judged,
            JudgedAt::Changed {
                change: LaunchChange::Other {
                    before: then.launch,
                    before_by: then.by.clone(),
                    after: now.launch,
                    after_by: now.by.clone(),
                },
            },
        ),
        (Some(then), None) => judged(
            then_judged,
            now_judged,
            JudgedAt::Changed {
                change: LaunchChange::Removed {
                    before: then.launch,
                    best_block_size: after.best.as_ref().map(|b| b.block_size),
                },
            },
        ),
        (None, Some(now)) => {
            match crate::model::declared::declared_for(
                arch,
                &before.facts,
                &now.launch,
                now.by.clone(),
            ) {
                Ok(then) => judged(at(&then), now_judged, JudgedAt::launch(now)),
                // The old resources cannot take the new launch: compare best to best.
                Err(_) => judged(best(before), best(after), JudgedAt::Best),
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::declared::{DeclaredBy, Launch};
    use crate::render::text_table::{render_diff, render_diff_bounded};
    use crate::schema::lock::LOCK_SCHEMA;
    use crate::schema::manifest::{Best, Facts, Kernel, LaunchBounds};

    pub(crate) fn arch(registers: u32, warps: u32, spills: u32) -> Resources {
        Resources {
            facts: Facts {
                registers,
                static_smem: 0,
                spill_stores: spills,
                spill_loads: spills,
                stack_frame: 0,
                cumulative_stack: Some(0),
                maxrregcount: None,
                barriers: Some(0),
                launch_bounds: LaunchBounds::default(),
            },
            declared: None,
            cubin_hash: None,
            best: Some(Best {
                block_size: 256,
                active_blocks_per_sm: warps / 8,
                active_warps_per_sm: warps,
                occupancy: f64::from(warps) / 64.0,
                limiters: vec!["registers".into()],
                dynamic_smem_headroom: 0,
            }),
        }
    }

    #[test]
    fn changed_flags_and_toolkit_are_said_in_words() {
        let flagged = |nvcc: &str, flags: &[&str]| Lock {
            nvcc: nvcc.into(),
            flags: Some(BTreeMap::from([(
                String::new(),
                flags.iter().map(|f| f.to_string()).collect(),
            )])),
            ..lock(&[])
        };
        let say = |a: &Lock, b: &Lock| said(&settings_changes(a, b));
        assert_eq!(
            say(
                &flagged("13.4", &["-DA"]),
                &flagged("13.5", &["-DA", "-Ofc=max"])
            ),
            "nvcc 13.4 -> 13.5; flags +`-Ofc=max`"
        );
        assert_eq!(
            say(
                &flagged("13.5", &["-DA"]),
                &flagged("13.5", &["-DA", "-DA"])
            ),
            "flags +`-DA`"
        );
        assert_eq!(
            say(
                &flagged("13.5", &["-DA", "-DB"]),
                &flagged("13.5", &["-DB", "-DA"])
            ),
            "flags the same flags in another order (-DB -DA)"
        );
        assert_eq!(
            say(&flagged("13.5", &["-DA"]), &flagged("13.5", &["-DA"])),
            ""
        );
        // A lock from before occ kept flags says nothing about them.
        let old = Lock {
            flags: None,
            ..flagged("13.5", &[])
        };
        assert_eq!(say(&old, &flagged("13.5", &["-DA"])), "");
        // Typed, and as JSON each with its words; read back the same.
        let settings = settings_changes(
            &flagged("13.4", &["-DA", "-DB"]),
            &flagged("13.5", &["-DB", "-DC"]),
        );
        assert_eq!(
            settings[1],
            Setting::Flags {
                part: String::new(),
                changes: vec![
                    FlagChange {
                        flag: "-DC".into(),
                        added: true
                    },
                    FlagChange {
                        flag: "-DA".into(),
                        added: false
                    },
                ],
                now: vec!["-DB".into(), "-DC".into()],
            }
        );
        let diff = Diff {
            settings,
            ..Diff::default()
        };
        let text = serde_json::to_string(&diff).expect("serialize");
        assert!(
            text.contains(
                r#""setting":"nvcc","before":"13.4","after":"13.5","text":"nvcc 13.4 -> 13.5""#
            ),
            "{text}"
        );
        let back: Diff = serde_json::from_str(&text).expect("read back");
        assert_eq!(back, diff);
        // The key stays when nothing changed, as it always has.
        let none = serde_json::to_string(&Diff::default()).expect("serialize");
        assert!(none.contains(r#""settings":[]"#), "{none}");
        assert_eq!(
            said(&back.settings),
            "nvcc 13.4 -> 13.5; flags +`-DC` -`-DA`"
        );
    }

    pub(crate) fn lock(kernels: &[(&str, Resources)]) -> Lock {
        Lock {
            schema: LOCK_SCHEMA,
            package: "p".into(),
            nvcc: "V13.5".into(),
            archs: vec!["sm_80".into()],
            flags: None,
            kernels: kernels
                .iter()
                .map(|(name, a)| Kernel {
                    name: name.to_string(),
                    demangled: name.to_string(),
                    base_name: name.to_string(),
                    short_name: name.to_string(),
                    params: Vec::new(),
                    ident: name.to_string(),
                    source: "k.cu".into(),
                    archs: [("sm_80".to_string(), a.clone())].into_iter().collect(),
                })
                .collect(),
            parts: Default::default(),
            measured: Vec::new(),
            noted: Default::default(),
            launches: Vec::new(),
        }
    }

    fn verdicts(d: &Diff) -> Vec<(String, Verdict)> {
        d.findings
            .iter()
            .map(|f| (f.kernel.clone(), f.verdict))
            .collect()
    }

    #[test]
    fn a_change_of_constant_memory_or_ptxas_warnings_alone_is_said() {
        // A build from the lock writes the lock's constant memory and
        // warnings: an nvcc build whose only change is there must say so,
        // or the lock keeps a stale copy no gate notices.
        let a = arch(32, 64, 0);
        let key = ("k".to_string(), "k.cu".to_string(), "sm_80".to_string());
        let with_cmem = |bytes: u64| {
            let mut l = lock(&[("k", a.clone())]);
            l.noted.insert(
                key.clone(),
                crate::schema::lock::Noted {
                    cmem: [("0".to_string(), bytes)].into_iter().collect(),
                    warnings: Vec::new(),
                },
            );
            l
        };
        let same = compare(&with_cmem(360), &with_cmem(360), &Thresholds::default());
        assert!(same.findings.is_empty(), "{same:?}");
        let diff = compare(&with_cmem(360), &with_cmem(400), &Thresholds::default());
        assert_eq!(diff.findings.len(), 1, "{diff:?}");
        assert_eq!(diff.findings[0].verdict, Verdict::Changed);
        assert!(!diff.fails());
        let table = render_diff(&diff, &Verdict::ALL);
        assert!(
            table.contains("constant memory bank 0: 360 B -> bank 0: 400 B"),
            "{table}"
        );
    }

    #[test]
    fn a_findings_json_has_one_list_of_reasons_and_reads_back() {
        let before = lock(&[("a", arch(32, 64, 0))]);
        let after = lock(&[("a", arch(41, 32, 0))]);
        let d = compare(&before, &after, &Thresholds::default());
        let f = &d.findings[0];
        assert!(f.has(Cause::RegistersPastThreshold), "{f:?}");
        let json = serde_json::to_value(f).expect("serialize");
        assert!(json.get("causes").is_none(), "{json}");
        let reasons = json["reasons"].as_array().expect("reasons");
        assert_eq!(reasons.len(), f.reasons.len());
        assert_eq!(
            reasons[1],
            serde_json::json!({
                "cause": "registers_past_threshold",
                "before": 32,
                "after": 41,
                "threshold": 8,
                "text": "registers 32 -> 41 (+9, threshold 8)"
            })
        );
        let texts: Vec<&str> = reasons
            .iter()
            .map(|r| r["text"].as_str().expect("words"))
            .collect();
        assert_eq!(texts, f.texts());
        // Each cause by the name `Cause` serializes to.
        for (r, cause) in reasons.iter().zip(f.causes()) {
            assert_eq!(r["cause"], serde_json::to_value(cause).expect("cause"));
        }
        let back: Finding = serde_json::from_value(json).expect("read back");
        assert_eq!(&back, f);
        // Every kind of reason reads back, its words formatted again.
        let all = compare(
            &lock(&[("a", arch(64, 32, 8)), ("beta", arch(32, 64, 0))]),
            &moved(
                lock(&[("a", arch(32, 64, 0)), ("beta_v2", arch(32, 64, 0))]),
                "a",
                "m.cu",
            ),
            &Thresholds::default(),
        );
        let text = serde_json::to_string(&all).expect("serialize");
        let back: Diff = serde_json::from_str(&text).expect("read back");
        assert_eq!(back, all, "{text}");
    }

    #[test]
    fn equal_locks_give_no_findings() {
        let l = lock(&[("a", arch(32, 64, 0))]);
        assert!(compare(&l, &l, &Thresholds::default()).findings.is_empty());
    }

    #[test]
    fn occupancy_down_spills_and_gone_kernels_regress() {
        let before = lock(&[
            ("a", arch(32, 64, 0)),
            ("b", arch(32, 64, 0)),
            ("c", arch(32, 64, 4)),
            ("d", arch(32, 64, 0)),
        ]);
        let after = lock(&[
            ("a", arch(64, 32, 0)),
            ("b", arch(32, 64, 8)),
            ("c", arch(32, 64, 8)),
        ]);
        let d = compare(&before, &after, &Thresholds::default());
        let v = verdicts(&d);
        assert_eq!(
            v,
            [
                ("a".to_string(), Verdict::Regression),
                ("b".to_string(), Verdict::Regression),
                ("c".to_string(), Verdict::Regression),
                ("d".to_string(), Verdict::Regression),
            ]
        );
        assert!(d.findings[0].texts()[0].starts_with("occupancy 100.0% -> 50.0%"));
        assert!(d.findings[0].texts()[1].contains("registers 32 -> 64"));
        assert_eq!(d.findings[1].texts(), ["new spills: 16 bytes"]);
        assert_eq!(d.findings[2].texts(), ["spills 8 -> 16 bytes"]);
        assert_eq!(d.findings[3].texts(), ["kernel gone"]);
        let table = render_diff(&d, &[Verdict::Regression]);
        // One header per cause, one row per kernel x arch with its numbers.
        for header in [
            "regression: occupancy down, registers up past the threshold (1 kernel x arch)",
            "regression: new spills (1 kernel x arch)",
            "regression: more spills (1 kernel x arch)",
            "regression: kernel gone (1 kernel x arch)",
        ] {
            assert!(table.contains(&format!("{header}\n")), "{header}:\n{table}");
        }
        let a = table
            .lines()
            .find(|l| l.starts_with("  a "))
            .unwrap_or_else(|| panic!("no row of a:\n{table}"));
        assert!(
            a.contains("sm_80") && a.contains("32 -> 64") && a.contains("100.0% -> 50.0%"),
            "{a}"
        );
    }

    #[test]
    fn a_declared_launch_is_judged_at_that_launch() {
        use crate::model::declared::declared_for;
        let at_1024 = |mut r: Resources| {
            let by = DeclaredBy::Build {
                pattern: "a".into(),
            };
            r.declared =
                Some(declared_for("sm_80", &r.facts, &Launch::block(1024), by).expect("runs"));
            r
        };
        // Two more registers: within the threshold, and the best launch (as
        // recorded) is unchanged; at 1024 threads one block of two is lost.
        let before = lock(&[("a", arch(32, 64, 0))]);
        let after = lock(&[("a", at_1024(arch(34, 64, 0)))]);
        let plain = lock(&[("a", arch(34, 64, 0))]);
        assert_eq!(
            verdicts(&compare(&before, &plain, &Thresholds::default())),
            [("a".to_string(), Verdict::Changed)]
        );
        // The old lock records no launch: its numbers are recomputed at 1024.
        let d = compare(&before, &after, &Thresholds::default());
        assert_eq!(verdicts(&d), [("a".to_string(), Verdict::Regression)]);
        assert_eq!(
            d.findings[0].texts(),
            ["occupancy 100.0% -> 50.0% at block 1024"]
        );
        assert!(d.findings[0]
            .also_texts()
            .contains(&"declared launch none -> 1024".to_string()));
        // The table's row says the same: occupancy at that launch, named.
        let table = render_diff(&d, &[Verdict::Regression]);
        let row = table
            .lines()
            .find(|l| l.starts_with("  a "))
            .unwrap_or_else(|| panic!("no row of a:\n{table}"));
        assert!(
            row.contains("100.0% -> 50.0%") && row.contains("at block 1024"),
            "{row}"
        );
        // Both recorded at the launch: compared as recorded.
        let d = compare(
            &lock(&[("a", at_1024(arch(32, 64, 0)))]),
            &after,
            &Thresholds::default(),
        );
        assert_eq!(verdicts(&d), [("a".to_string(), Verdict::Regression)]);
    }

    #[test]
    fn register_threshold_is_global_and_per_kernel() {
        let before = lock(&[("a", arch(32, 64, 0)), ("b", arch(32, 64, 0))]);
        let after = lock(&[("a", arch(40, 64, 0)), ("b", arch(41, 64, 0))]);
        let d = compare(&before, &after, &Thresholds::default());
        assert_eq!(
            verdicts(&d),
            [
                ("b".to_string(), Verdict::Regression),
                ("a".to_string(), Verdict::Changed),
            ]
        );
        let mut t = Thresholds::default();
        t.kernels.insert("a".into(), 0);
        t.kernels.insert("b".into(), 9);
        let d = compare(&before, &after, &t);
        assert_eq!(
            verdicts(&d),
            [
                ("a".to_string(), Verdict::Regression),
                ("b".to_string(), Verdict::Changed),
            ]
        );
    }

    #[test]
    fn improvements_and_new_kernels_are_not_regressions() {
        let before = lock(&[("a", arch(64, 32, 8))]);
        let after = lock(&[("a", arch(32, 64, 0)), ("n", arch(16, 64, 0))]);
        let d = compare(&before, &after, &Thresholds::default());
        assert!(!d.has_regressions());
        assert_eq!(
            verdicts(&d),
            [
                ("a".to_string(), Verdict::Improvement),
                ("n".to_string(), Verdict::New),
            ]
        );
    }

    fn moved(mut l: Lock, name: &str, source: &str) -> Lock {
        for k in l.kernels.iter_mut().filter(|k| k.name == name) {
            k.source = source.into();
        }
        l
    }

    #[test]
    fn a_kernel_in_another_file_is_the_same_kernel() {
        let before = lock(&[("a", arch(32, 64, 0)), ("b", arch(32, 64, 0))]);
        let after = moved(before.clone(), "b", "c.cu");
        let d = compare(&before, &after, &Thresholds::default());
        assert!(!d.has_regressions(), "{d:?}");
        assert_eq!(verdicts(&d), [("b".to_string(), Verdict::Changed)]);
        assert_eq!(d.findings[0].moved_from(), Some("k.cu"));
        assert_eq!(d.findings[0].texts(), ["moved from k.cu"]);
        assert_eq!(d.moved().count(), 1);
        // Moved and worse: the regression, and the move as another change.
        let worse = moved(
            lock(&[("a", arch(32, 64, 0)), ("b", arch(64, 32, 0))]),
            "b",
            "c.cu",
        );
        let d = compare(&before, &worse, &Thresholds::default());
        assert_eq!(verdicts(&d), [("b".to_string(), Verdict::Regression)]);
        assert!(d.findings[0].also.contains(&Reason::Moved {
            from: "k.cu".into()
        }));
    }

    #[test]
    fn the_same_symbol_in_two_files_pairs_by_source_first() {
        let one = lock(&[("same", arch(32, 64, 0))]);
        let mut two = one.clone();
        two.kernels
            .push(moved(lock(&[("same", arch(64, 32, 0))]), "same", "z.cu").kernels[0].clone());
        let d = compare(&one, &two, &Thresholds::default());
        assert_eq!(verdicts(&d), [("same".to_string(), Verdict::New)]);
        assert_eq!(d.findings[0].source, "z.cu");
    }

    #[test]
    fn a_kernel_gone_beside_a_new_one_is_a_likely_rename() {
        let before = lock(&[("a", arch(32, 64, 0)), ("beta", arch(32, 64, 0))]);
        let after = lock(&[
            ("a", arch(32, 64, 0)),
            ("beta_v2", arch(32, 64, 0)),
            ("zzz", arch(32, 64, 0)),
        ]);
        let d = compare(&before, &after, &Thresholds::default());
        let gone = &d.findings[0];
        assert_eq!(
            (gone.kernel.as_str(), gone.verdict),
            ("beta", Verdict::Regression)
        );
        assert_eq!(
            gone.texts(),
            ["kernel gone", "renamed? `beta` -> `beta_v2`"]
        );
        let new: Vec<&Finding> = d
            .findings
            .iter()
            .filter(|f| f.verdict == Verdict::New)
            .collect();
        assert_eq!(new.len(), 2);
        assert_eq!(
            new[0].texts(),
            ["new kernel", "renamed? `beta` -> `beta_v2`"]
        );
        assert_eq!(new[1].texts(), ["new kernel"]);
        let table = render_diff(&d, &Verdict::ALL);
        assert!(
            table.contains("regression: kernel gone (1 kernel x arch)\n"),
            "{table}"
        );
        assert!(
            table.contains("new: new kernel (2 kernel x archs)\n"),
            "{table}"
        );
        let renamed: Vec<&str> = table
            .lines()
            .filter(|l| l.ends_with("renamed? `beta` -> `beta_v2`"))
            .collect();
        assert_eq!(renamed.len(), 2, "both sides say it:\n{table}");
    }

    #[test]
    fn a_regression_shows_what_got_better_too() {
        // A heavier launch bound: occupancy halves, the spills go away.
        let before = lock(&[("f", arch(32, 64, 48))]);
        let mut heavier = arch(64, 32, 0);
        heavier.best.as_mut().expect("a best launch").block_size = 512;
        let after = lock(&[("f", heavier)]);
        let d = compare(&before, &after, &Thresholds::default());
        let f = &d.findings[0];
        assert_eq!(f.verdict, Verdict::Regression);
        assert_eq!(f.texts()[0], "occupancy 100.0% -> 50.0%");
        assert_eq!(
            f.also_texts(),
            ["spills 96 -> 0 bytes (better)", "best block 256 -> 512"]
        );
        assert_eq!(
            f.also,
            [
                Reason::FewerSpills {
                    before: 96,
                    after: 0
                },
                Reason::BestBlock {
                    before: Some(256),
                    after: Some(512)
                }
            ]
        );
        let table = render_diff(&d, &[Verdict::Regression]);
        assert!(
            table.contains(
                "regression: occupancy down, registers up past the threshold (1 kernel x arch)\n"
            ),
            "{table}"
        );
        let row = table
            .lines()
            .find(|l| l.starts_with("  f "))
            .unwrap_or_default();
        for cell in ["32 -> 64", "96 -> 0", "100.0% -> 50.0%", "256 -> 512"] {
            assert!(row.contains(cell), "{cell} missing: {row}\n{table}");
        }
    }

    /// `n` kernels `k_0000`.. on sm_80, with the numbers `a`.
    fn kernels(n: usize, a: &Resources) -> Lock {
        let names: Vec<String> = (0..n).map(|i| format!("k_{i:04}")).collect();
        lock(
            &names
                .iter()
                .map(|k| (k.as_str(), a.clone()))
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn many_kernels_failing_for_one_reason_are_one_group() {
        let before = kernels(50, &arch(32, 64, 0));
        let mut after = kernels(50, &arch(32, 64, 8));
        after
            .kernels
            .push(lock(&[("z_new", arch(16, 64, 0))]).kernels[0].clone());
        let d = compare(&before, &after, &Thresholds::default());
        let groups = groups(&d, &Verdict::ALL);
        assert_eq!(groups.len(), 2, "{groups:#?}");
        assert_eq!(
            crate::render::text_table::group_title(&groups[0]),
            "new spills"
        );
        assert_eq!(groups[0].findings.len(), 50);
        assert_eq!(
            crate::render::text_table::group_names(&groups[0], 3),
            "k_0000, k_0001, k_0002 and 47 more"
        );
        assert_eq!(
            crate::render::text_table::group_title(&groups[1]),
            "new kernel"
        );
        let full = render_diff(&d, &Verdict::ALL);
        // Two headers, two tables of a header and a rule each, a row per finding.
        assert_eq!(full.lines().count(), 2 + 2 * 2 + 51, "{full}");
        assert_eq!(full.matches("new spills").count(), 1, "{full}");
        let bounded = render_diff_bounded(&d, &Verdict::ALL, 5, "see report.txt");
        assert_eq!(bounded.lines().count(), 2 + 2 * 2 + 5 + 1 + 1, "{bounded}");
        assert!(
            bounded.contains("  ... and 45 more kernel x archs: see report.txt\n"),
            "{bounded}"
        );
    }

    #[test]
    fn a_new_arch_is_one_group_per_arch() {
        let before = kernels(30, &arch(32, 64, 0));
        let mut after = before.clone();
        after
            .archs
            .extend(["sm_90".to_string(), "sm_100".to_string()]);
        for k in &mut after.kernels {
            k.archs.insert("sm_90".into(), arch(32, 64, 0));
            k.archs.insert("sm_100".into(), arch(32, 64, 0));
        }
        let d = compare(&before, &after, &Thresholds::default());
        let titles: Vec<String> = groups(&d, &Verdict::ALL)
            .iter()
            .map(crate::render::text_table::group_title)
            .collect();
        assert_eq!(titles, ["new arch sm_100", "new arch sm_90"]);
        assert_eq!(
            crate::render::text_table::group_names(&groups(&d, &Verdict::ALL)[1], 2),
            "k_0000, k_0001 and 28 more"
        );
    }

    #[test]
    fn moving_within_the_cliff_margin_warns_and_only_then() {
        // sm_80, 256 threads: 32 registers keep 8 blocks, 33 give 6.
        let far = lock(&[("k", arch(24, 64, 0))]);
        let near = lock(&[("k", arch(32, 64, 0))]);
        let d = compare(&far, &near, &Thresholds::default());
        let f = &d.findings[0];
        assert_eq!(f.verdict, Verdict::Changed, "{f:?}");
        assert_eq!(
            f.causes().collect::<Vec<_>>(),
            [Cause::RegistersWithinThreshold, Cause::NearCliff],
            "{f:?}"
        );
        assert_eq!(
            f.reasons[1],
            Reason::NearCliff {
                registers: 1,
                block_size: 256,
                active_blocks_per_sm: 8,
                blocks_past: 6
            }
        );
        assert_eq!(
            f.texts()[1],
            "1 register from an occupancy cliff at block 256 (+1 costs 2 blocks: 8 -> 6 blocks per SM)"
        );
        // The margin is the setting: 0 turns it off.
        let off = Thresholds {
            cliff_margin: 0,
            ..Thresholds::default()
        };
        assert!(!compare(&far, &near, &off).findings[0].has(Cause::NearCliff));
        // Already near before: nothing new to say.
        let nearer = lock(&[("k", arch(31, 64, 0))]);
        let d = compare(&nearer, &near, &Thresholds::default());
        assert!(!d.findings[0].has(Cause::NearCliff), "{d:?}");
        // A regression names it among the other changes.
        let spilling = lock(&[("k", arch(32, 64, 4))]);
        let d = compare(&far, &spilling, &Thresholds::default());
        assert_eq!(d.findings[0].verdict, Verdict::Regression);
        assert!(
            d.findings[0]
                .also
                .iter()
                .any(|a| a.cause() == Cause::NearCliff),
            "{d:?}"
        );
        // gate.json of an older occ has no margin: the default.
        let old: Thresholds =
            serde_json::from_str(r#"{"registers": 8, "kernels": {}}"#).expect("old thresholds");
        assert_eq!(old.cliff_margin, DEFAULT_CLIFF_MARGIN);
    }

    /// `r` with a launch declared by `by` on sm_80.
    fn launched(mut r: Resources, launch: Launch, by: &DeclaredBy) -> Resources {
        let d = crate::model::declared::declared_for("sm_80", &r.facts, &launch, by.clone())
            .expect("runs");
        r.declared = Some(d);
        r
    }

    /// A launch declared in build.rs by the pattern `t`.
    fn build_rs() -> DeclaredBy {
        DeclaredBy::Build {
            pattern: "t".into(),
        }
    }

    /// The one finding of `before` against `after` (kernel `t`, sm_80).
    fn one(before: Resources, after: Resources) -> Finding {
        let d = compare(
            &lock(&[("t", before)]),
            &lock(&[("t", after)]),
            &Thresholds::default(),
        );
        assert_eq!(d.findings.len(), 1, "{d:#?}");
        d.findings[0].clone()
    }

    /// build.rs's dynamic shared memory dropped is a regression, however
    /// much better the kernel then reads (judged at its best block with
    /// none): a build that deletes the declaration must not pass as an
    /// improvement.
    #[test]
    fn a_dynamic_smem_declaration_removed_from_build_rs_is_a_regression() {
        let mut before = arch(32, 64, 0);
        let rule = crate::schema::manifest::DynamicSmem::Fixed(102_400);
        before.declared = crate::model::declared::judge_facts(
            "sm_80",
            &before.facts,
            None,
            &[],
            Some((rule, "t".into())),
        )
        .expect("the model")
        .1;
        assert!(before.judged_occupancy() < 1.0);
        let f = one(before, arch(32, 64, 0));
        assert_eq!(f.verdict, Verdict::Regression, "{f:?}");
        assert!(f.causes().any(|c| c == Cause::LaunchRemoved), "{f:?}");
        assert!(
            f.texts().iter().any(|t| t.contains("`.dynamic_smem(..)`")),
            "{:?}",
            f.texts()
        );
    }

    /// The table row of `f`.
    fn row_of(f: &Finding) -> String {
        let d = Diff {
            findings: vec![f.clone()],
            ..Diff::default()
        };
        render_diff(&d, &Verdict::ALL)
    }

    #[test]
    fn a_recorded_launch_changed_in_build_rs_compares_each_at_its_launch() {
        // 24 registers on sm_80 (far from a cliff): 8 blocks of 32x8 fill
        // the SM; of 32x22 (22 warps) only 2 fit.
        let by = build_rs();
        let at = |x, y| launched(arch(24, 64, 0), Launch::block_2d(x, y), &by);
        // Worse: the kernel is untouched, the launch the application uses is not.
        let f = one(at(32, 8), at(32, 22));
        assert_eq!(f.verdict, Verdict::Regression, "{f:?}");
        assert_eq!(
            f.texts(),
            ["occupancy 100.0% -> 68.8% at block 32x8 -> 32x22"]
        );
        assert!(f.also.is_empty(), "said once: {:?}", f.also);
        let table = row_of(&f);
        assert!(
            table.contains("regression: occupancy down (1 kernel x arch)\n"),
            "{table}"
        );
        assert!(
            table.contains("100.0% -> 68.8%") && table.contains("at block 32x8 -> 32x22"),
            "{table}"
        );
        // Better.
        let f = one(at(32, 22), at(32, 8));
        assert_eq!(f.verdict, Verdict::Improvement, "{f:?}");
        assert_eq!(
            f.texts(),
            ["occupancy 68.8% -> 100.0% at block 32x22 -> 32x8"]
        );
        // The same occupancy: changed, the reason names both launches.
        let f = one(at(32, 8), at(32, 16));
        assert_eq!(f.verdict, Verdict::Changed, "{f:?}");
        assert_eq!(f.causes().collect::<Vec<_>>(), [Cause::LaunchChanged]);
        assert_eq!(f.texts(), ["launch 32x8 -> 32x16"]);
        let table = row_of(&f);
        assert!(
            table.contains("changed: declared launch changed (1 kernel x arch)\n")
                && table.contains("at block 32x8 -> 32x16"),
            "{table}"
        );
        // Its JSON: the new cause as a snake_case string.
        let json = serde_json::to_value(&f).expect("serialize");
        assert_eq!(
            json["reasons"],
            serde_json::json!([{
                "cause": "launch_changed",
                "change": {
                    "kind": "other",
                    "before": {"block": [32, 8, 1], "dynamic_smem": {"fixed": 0}},
                    "before_by": {"build": {"pattern": "t"}},
                    "after": {"block": [32, 16, 1], "dynamic_smem": {"fixed": 0}},
                    "after_by": {"build": {"pattern": "t"}}
                },
                "text": "launch 32x8 -> 32x16"
            }])
        );
        // The same launch stated by another declarer is said too.
        let bounds = launched(
            arch(24, 64, 0),
            Launch::block(256),
            &DeclaredBy::LaunchBounds,
        );
        let f = one(bounds, at(32, 8));
        assert_eq!(
            f.texts(),
            ["launch 256 (__launch_bounds__) -> 32x8 (build.rs `t`)"]
        );
    }

    #[test]
    fn a_recorded_launch_from_launch_bounds_is_judged_like_one_from_build_rs() {
        let bounds = |n| launched(arch(24, 64, 0), Launch::block(n), &DeclaredBy::LaunchBounds);
        // __launch_bounds__(704): 2 blocks of 22 warps; 1024: 2 of 32.
        let f = one(bounds(704), bounds(1024));
        assert_eq!(f.verdict, Verdict::Improvement, "{f:?}");
        assert_eq!(
            f.texts(),
            ["occupancy 68.8% -> 100.0% at block 704 -> 1024"]
        );
    }

    #[test]
    fn a_recorded_launch_removed_judges_the_build_at_its_best_block() {
        let by = build_rs();
        // Down from the launch to the best block: the drop is a regression.
        let mut worse_best = arch(32, 32, 0);
        worse_best.best.as_mut().expect("a best launch").block_size = 1024;
        let f = one(
            launched(arch(32, 64, 0), Launch::block_2d(32, 8), &by),
            worse_best,
        );
        assert_eq!(f.verdict, Verdict::Regression, "{f:?}");
        assert_eq!(
            f.texts()[0],
            "occupancy 100.0% -> 50.0% at block 32x8 -> best block 1024"
        );
        assert_eq!(
            f.causes().collect::<Vec<_>>(),
            [Cause::OccupancyDown, Cause::LaunchRemoved]
        );
        // The same occupancy: build.rs's launch gone is still a regression
        // (its sites now launch at the best block, which a kernel written
        // for one shape may not take), and says so.
        let f = one(
            launched(arch(32, 64, 0), Launch::block_2d(32, 8), &by),
            arch(32, 64, 0),
        );
        assert_eq!(f.verdict, Verdict::Regression, "{f:?}");
        assert_eq!(
            f.texts(),
            ["declared launch 32x8 removed from build.rs: its sites now launch at the best block \
              256; declare it again (`.launch(..)`, or `.dynamic_smem(..)` for its dynamic \
              shared memory), or bless if the kernel takes any block"]
        );
        let table = row_of(&f);
        assert!(
            table.contains("regression: declared launch removed from build.rs (1 kernel x arch)\n")
                && table.contains("at block 32x8 -> best block 256"),
            "{table}"
        );
        // A launch that came from `__launch_bounds__`, gone with them, binds
        // no site: the same occupancy is a change, said.
        let bounds = launched(
            arch(32, 64, 0),
            Launch::block(256),
            &DeclaredBy::LaunchBounds,
        );
        let f = one(bounds, arch(32, 64, 0));
        assert_eq!(f.verdict, Verdict::Changed, "{f:?}");
        assert_eq!(
            f.texts(),
            ["declared launch 256 removed: judged at its best block 256"]
        );
    }

    #[test]
    fn a_launch_the_lock_does_not_record_or_did_not_change_is_judged_as_before() {
        let by = build_rs();
        // Newly declared: before recomputed at the new launch, which the
        // kernel, unchanged, has as well.
        let f = one(
            arch(32, 64, 0),
            launched(arch(32, 64, 0), Launch::block_2d(32, 22), &by),
        );
        assert_eq!(f.verdict, Verdict::Changed, "{f:?}");
        assert_eq!(f.causes().collect::<Vec<_>>(), [Cause::Details]);
        assert_eq!(f.texts(), ["declared launch none -> 32x22"]);
        // Newly declared on a heavier kernel: the drop at that launch.
        let f = one(
            arch(32, 64, 0),
            launched(arch(40, 64, 0), Launch::block_2d(32, 8), &by),
        );
        assert_eq!(f.verdict, Verdict::Regression, "{f:?}");
        assert_eq!(f.texts()[0], "occupancy 100.0% -> 75.0% at block 32x8");
        // The same launch: as recorded; the same numbers, no finding.
        let at_32x8 = |r| launched(r, Launch::block_2d(32, 8), &by);
        let same = lock(&[("t", at_32x8(arch(32, 64, 0)))]);
        assert!(compare(&same, &same, &Thresholds::default())
            .findings
            .is_empty());
        // The same launch, a heavier kernel: the drop there.
        let f = one(at_32x8(arch(32, 64, 0)), at_32x8(arch(40, 64, 0)));
        assert_eq!(f.verdict, Verdict::Regression, "{f:?}");
        assert_eq!(f.texts()[0], "occupancy 100.0% -> 75.0% at block 32x8");
    }

    #[test]
    fn a_changed_row_names_the_field_and_its_old_and_new_value() {
        // A -maxrregcount above what the kernel uses: the same registers,
        // occupancy and best block; only the recorded cap differs. The row
        // must say so, not "recorded details changed" beside equal numbers.
        let mut capped = arch(32, 64, 0);
        capped.facts.maxrregcount = Some(64);
        let f = one(arch(32, 64, 0), capped.clone());
        assert_eq!(f.verdict, Verdict::Changed, "{f:?}");
        assert_eq!(f.causes().collect::<Vec<_>>(), [Cause::Details]);
        assert_eq!(f.texts(), ["maxrregcount none -> 64"]);
        let table = row_of(&f);
        assert!(table.contains("maxrregcount none -> 64"), "{table}");
        assert!(
            table.starts_with("changed: maxrregcount changed (1 kernel x arch)\n"),
            "{table}"
        );
        // Several fields: each named, in the struct's order.
        let mut more = capped;
        more.facts.stack_frame = 16;
        more.facts.launch_bounds.min_blocks_per_sm = Some(2);
        let f = one(arch(32, 64, 0), more);
        assert_eq!(
            f.texts(),
            ["stack frame 0 bytes -> 16 bytes; maxrregcount none -> 64; \
              __launch_bounds__ min blocks per SM none -> 2"]
        );
        // Beside a change with its own reason, still said.
        let mut grown = arch(34, 64, 0);
        grown.facts.maxrregcount = Some(64);
        let f = one(arch(32, 64, 0), grown);
        assert_eq!(
            f.texts(),
            [
                "maxrregcount none -> 64",
                "registers 32 -> 34 (within threshold 8)"
            ]
        );
    }
}
