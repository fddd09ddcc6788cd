//! Stages 6 and 8: the gates, and the policy around the lock.
//!
//! - `spills`: spilling kernels are named in the report's one warning, or
//!   fail the build when it says [`Build::deny_spills`]; each with the line
//!   it spills at (the most spilled bytes), its loop and its peak register
//!   pressure when stage 5½ found them.
//! - `baseline`: the build's candidate lock against the committed
//!   `occ.lock` (judged by the pure [`occ_model::compare`]). With several
//!   `Build`s, each part judges its own kernels by its own settings
//!   (`parts::Scope`), so the verdict does not depend on their order, and
//!   no part blesses while another of the run failed a gate. Lower
//!   occupancy, new spills, more spilled bytes, registers up by more than a
//!   threshold, or a kernel gone fail the build with a before/after table,
//!   one header and one table per cause ([`compare::groups`]), and nothing
//!   else in the error; improvements, new kernels, a new arch, moved files
//!   and neutral changes (registers within the threshold, a recorded field)
//!   are one warning per kind, with a count and the first names, whether
//!   the gate passes or fails: the kinds `cargo occ check` lists.
//! - Output scales with kinds, not kernels: an error shows at most ten
//!   rows per cause and a warning five names; every finding goes to the
//!   report (`report.txt`).
//! - Bless policy: the candidate goes to `$OUT_DIR/occ/occ.lock.new` and the
//!   settings to `gate.json` (for `cargo occ bless/check`); only
//!   `OCC_BLESS=1` writes the lock, and never when `CI` is set. The lock is
//!   watched (`rerun-if-changed`) once it exists: cargo treats a watched
//!   missing file as always stale, so a crate with no lock yet does not
//!   watch it, and a lock created by `cargo occ bless` is picked up by the
//!   next build that reruns the script. Both writers use [`crate::leaf::files::write_lock`]:
//!   through a symlinked lock, never over a read-only one.
//! - A crate built as a dependency (`inputs::dependency`: where cargo put
//!   it) is never gated: its lock is its own CI's baseline, not its
//!   dependents'.
//! - Under `CI` the gate's scope is explicit: every kernel × arch the
//!   build makes must have a baseline in the lock (an arch the lock does
//!   not record, a kernel not blessed yet), and a crate with no lock fails;
//!   a CI run that checked nothing must not look green. Outside CI both
//!   are warnings.
//! - A lock of another package (its `package` differs) is refused by name,
//!   not reported kernel by kernel as gone.
//! - `measured`: the lock's measurements (`cargo occ tune import`) taken on
//!   another cubin than this build's, or whose fastest block the kernel can
//!   no longer launch, are one warning per kind; `tuned` sites then bake
//!   the model's block (or the fastest measured one that still launches).

use crate::builder::Build;
use crate::leaf::directives::Directives;
use crate::leaf::error::{Error, Result};
use crate::leaf::files::{write_atomic, write_lock};
use crate::stage::inputs::Inputs;
use crate::stage::parts::Candidate;
use crate::stage::report::{self, Details};
use occ_model::compare::{
    self, Cause, GateSettings, Group, Thresholds, Verdict, DEFAULT_CLIFF_MARGIN,
    DEFAULT_REGISTER_THRESHOLD, GATE_FILE,
};
use occ_model::render::text_table;
use occ_model::schema::lock::{Lock, CANDIDATE_FILE, LOCK_SCHEMA};
use occ_model::schema::manifest::{self, Manifest, Param};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// The most rows per cause an error's table shows; the report has them all.
pub(crate) const ROWS: usize = 10;

/// Spilling kernels of this part's `sources`: [`Error::Spills`] under
/// [`Build::deny_spills`] (the first [`ROWS`] kernel × archs, then a count
/// and where the rest are); otherwise the build's one report warning names
/// them (`report`). Another part's kernels are its own build's to judge.
pub(crate) fn spills(
    build: &Build,
    sources: &[String],
    manifest: &Manifest,
    details: &mut Details,
) -> Result<()> {
    let mut lines = Vec::new();
    for kernel in manifest
        .kernels
        .iter()
        .filter(|k| sources.contains(&k.source))
    {
        for (arch, k) in &kernel.archs {
            if k.facts.spills() {
                // Where, when nvdisasm said: `at kernels/q.cu:142 (loop at
                // :130), peak pressure 255 at :151`; else the `.cu` file.
                let place = match k.lines.as_ref().map(|l| l.describe()) {
                    Some(at) if !at.is_empty() => at,
                    _ => format!("({})", kernel.source),
                };
                lines.push(format!(
                    "{} on {arch}: {} bytes spill stores, {} bytes spill loads {place}",
                    kernel.base_name, k.facts.spill_stores, k.facts.spill_loads
                ));
            }
        }
    }
    if lines.is_empty() || !build.deny_spills {
        return Ok(());
    }
    details.failed = true;
    if lines.len() > ROWS {
        let more = lines.len() - ROWS;
        lines.truncate(ROWS);
        lines.push(format!(
            "... and {more} more kernel x archs: see {}",
            details.report().display()
        ));
    }
    Err(Error::Spills { kernels: lines })
}

/// The register thresholds a build sets.
fn thresholds(build: &Build) -> Thresholds {
    Thresholds {
        registers: build
            .register_threshold
            .unwrap_or(DEFAULT_REGISTER_THRESHOLD),
        kernels: build.kernel_register_thresholds.clone(),
        cliff_margin: build.cliff_margin.unwrap_or(DEFAULT_CLIFF_MARGIN),
    }
}

/// Compares with the committed lock (`committed`, none when there is no
/// lock file): writes the candidate and the gate settings into
/// `$OUT_DIR/occ`, then fails on regressions, warns on improvements and new
/// kernels of this `Build`'s sources (the candidate also holds the other
/// parts', see `parts`; one line per kind), and writes the
/// lock only on `OCC_BLESS` outside CI. Every difference goes to the
/// report (`details`).
///
/// Long because each early return is one state of the gate (a dependency, no
/// lock yet, another package's lock, a bless, a regression), read in the order
/// they are decided.
pub(crate) fn baseline(
    build: &Build,
    inputs: &Inputs,
    committed: Option<&Lock>,
    part: &Candidate,
    manifest: &Manifest,
    details: &mut Details,
    directives: &mut Directives,
) -> Result<()> {
    let scope = &inputs.sources[..];
    let candidate = &part.lock;
    let (text, settings) = write_candidate(build, inputs, candidate)?;
    let lock_name = inputs.display(&inputs.lock_path);
    if let Some(evidence) = &inputs.dependency {
        // The lock is its authors' gate: a dependent's build (another
        // toolkit, other archs) never fails on it, nor writes it.
        details.baseline = Some(occ_model::render::markdown::Baseline::NotCompared(format!(
            "built as a dependency ({evidence}): {lock_name} gates its own crate's builds, \
             not its dependents'"
        )));
        return Ok(());
    }
    let blessing = inputs.bless && !inputs.ci;
    if inputs.bless && inputs.ci {
        directives.warn(format!(
            "occ: OCC_BLESS is ignored because CI is set; {lock_name} is never written in CI"
        ));
    }
    let write =
        |directives: &mut Directives, what: &str| -> Result<()> {
            if !part.failed.is_empty() {
                // The lock would hold their last numbers, not the ones that
                // failed: a bless that hides a failure.
                directives.warn(format!(
                "occ: OCC_BLESS=1: {lock_name} not written: {} failed {} gate in this run; fix \
                 that and build again",
                part.failed.join(", "),
                if part.failed.len() == 1 { "its" } else { "their" }
            ));
                return Ok(());
            }
            let current = std::fs::read_to_string(&inputs.lock_path).unwrap_or_default();
            if current != text {
                write_lock(&inputs.lock_path, &text)?;
                directives.watch(&inputs.lock_path);
                directives.warn(format!(
                    "occ: OCC_BLESS=1: wrote {lock_name} ({what}); commit it"
                ));
            }
            Ok(())
        };
    let Some(lock) = committed else {
        details.baseline = Some(occ_model::render::markdown::Baseline::NotCompared(format!(
            "no {lock_name} yet (record one with `cargo occ bless`)"
        )));
        if blessing {
            return write(directives, "new baseline");
        }
        if inputs.ci {
            details.failed = true;
            return Err(Error::NoLockInCi { lock: lock_name });
        }
        directives.warn(format!(
            "occ: no {lock_name} yet; record the baseline with `cargo occ bless` (or OCC_BLESS=1 cargo build) and commit it"
        ));
        return Ok(());
    };
    if !lock.package.is_empty()
        && !candidate.package.is_empty()
        && lock.package != candidate.package
    {
        if blessing {
            return write(
                directives,
                &format!("replaced the lock of package `{}`", lock.package),
            );
        }
        return Err(Error::ForeignLock {
            path: inputs.lock_path.clone(),
            lock_package: lock.package.clone(),
            package: candidate.package.clone(),
        });
    }
    let diff = compare::compare(lock, candidate, &settings.thresholds);
    // This part's kernels, judged by its settings; the others' are their
    // own parts' to judge.
    let judged = compare::Diff {
        findings: diff
            .findings
            .iter()
            .filter(|f| part.scope.judges(&f.source))
            .cloned()
            .collect(),
        dropped_archs: diff.dropped_archs.clone(),
        settings: diff.settings.clone(),
        stale_measurements: diff
            .stale_measurements
            .iter()
            .filter(|s| part.scope.judges(&s.source))
            .cloned()
            .collect(),
    };
    details.baseline = Some(occ_model::render::markdown::Baseline::Compared {
        lock: inputs
            .lock_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| lock_name.clone()),
        diff: diff.clone(),
    });
    if !diff.findings.is_empty() {
        details.add(
            format!("differences from {lock_name}"),
            text_table::render_diff(&diff, &Verdict::ALL),
        );
    }
    if blessing {
        let regressions = judged.regressions().count();
        let what = if regressions > 0 {
            format!("accepted {regressions} regression(s)")
        } else {
            "updated".into()
        };
        return write(directives, &what);
    }
    if judged.has_regressions() {
        details.failed = true;
        // The error holds what got worse (cargo prints each of its lines
        // as `error:`); every other change is a warning, as when the gate
        // passes. The settings changed open the error's table already.
        let rest = compare::Diff {
            settings: Vec::new(),
            ..diff.clone()
        };
        warn_changes(
            lock, candidate, &rest, scope, &lock_name, details, directives,
        );
        return Err(Error::Regression {
            report: regression_report(
                &judged,
                manifest,
                &lock_name,
                &settings.thresholds,
                inputs.ci,
                details,
            ),
        });
    }
    if inputs.ci {
        let sources: HashSet<&str> = scope.iter().map(String::as_str).collect();
        let unchecked = diff.unchecked(|source| sources.contains(source));
        if !unchecked.is_empty() {
            details.failed = true;
            // Blessed for the lock's archs and the build's, so that no
            // baseline is dropped.
            let mut archs = lock.archs.clone();
            archs.extend(
                inputs
                    .archs
                    .iter()
                    .filter(|a| !lock.archs.contains(a))
                    .cloned(),
            );
            return Err(Error::Unchecked {
                lock: lock_name,
                archs,
                what: unchecked.to_string(),
            });
        }
    }
    // The changes are warned also when the measured code fails the build.
    warn_changes(
        lock, candidate, &diff, scope, &lock_name, details, directives,
    );
    measured_code(&judged, &lock_name, details)
}

/// Writes the candidate lock and `gate.json` into `$OUT_DIR/occ` for
/// `cargo occ bless` and `check`; returns the candidate's text and the
/// settings.
fn write_candidate(
    build: &Build,
    inputs: &Inputs,
    candidate: &Lock,
) -> Result<(String, GateSettings)> {
    let out = &inputs.out_dir;
    let text = candidate.to_text();
    write_atomic(&out.join(CANDIDATE_FILE), text.as_bytes())?;
    let settings = GateSettings {
        schema: LOCK_SCHEMA,
        lock_file: inputs.lock_path.clone(),
        thresholds: thresholds(build),
        crate_root: Some(inputs.root.clone()),
        deny_spills: build.deny_spills,
    };
    write_atomic(
        &out.join(GATE_FILE),
        manifest::to_json_pretty(&settings).as_bytes(),
    )?;
    Ok((text, settings))
}

/// The warnings of a passing gate: settings changed since the bless, one
/// line per kind of finding in this part's sources, archs the lock has and
/// the build does not, parameter lists the lock holds stale.
fn warn_changes(
    lock: &Lock,
    candidate: &Lock,
    diff: &compare::Diff,
    scope: &[String],
    lock_name: &str,
    details: &Details,
    directives: &mut Directives,
) {
    let sources: HashSet<&str> = scope.iter().map(String::as_str).collect();
    let in_scope = compare::Diff {
        findings: diff
            .findings
            .iter()
            .filter(|f| sources.contains(f.source.as_str()))
            .cloned()
            .collect(),
        dropped_archs: Vec::new(),
        settings: diff.settings.clone(),
        stale_measurements: Vec::new(),
    };
    if !diff.settings.is_empty() {
        directives.warn(format!(
            "occ: changed since {lock_name} was blessed: {}; run `cargo occ bless` to record",
            compare::said(&diff.settings)
        ));
    }
    for group in compare::groups(
        &in_scope,
        &[Verdict::Improvement, Verdict::New, Verdict::Changed],
    ) {
        if let Some(line) = warning(&group, lock_name, details.report()) {
            directives.warn(line);
        }
    }
    if !diff.dropped_archs.is_empty() {
        directives.warn(format!(
            "occ: {lock_name} records {} which this build does not build; run `cargo occ bless` to drop them",
            diff.dropped_archs.join(", ")
        ));
    }
    if let Some(line) = stale_params(lock, candidate, scope, lock_name) {
        directives.warn(line);
    }
}

/// Fails when the code of a kernel × arch the lock holds a measurement of
/// is not the code the lock records ([`compare::Diff::stale_measurements`],
/// which `cargo occ check` fails on too).
fn measured_code(diff: &compare::Diff, lock_name: &str, details: &mut Details) -> Result<()> {
    let Some(message) = compare::stale_measurements_message(lock_name, &diff.stale_measurements)
    else {
        return Ok(());
    };
    details.failed = true;
    details.add(
        "Measured kernels whose code changed".into(),
        diff.stale_measurements
            .iter()
            .map(|s| format!("{} on {}", s.kernel, s.arch))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    Err(Error::MeasuredCodeChanged { message })
}

/// One warning when the lock records other parameter lists than the
/// kernels have now (or none: a lock from before occ recorded them). A
/// build without nvcc stands on the lock, and its typed launchers take
/// the lock's lists, so the lock must follow the kernels' signatures.
fn stale_params(
    lock: &Lock,
    candidate: &Lock,
    scope: &[String],
    lock_name: &str,
) -> Option<String> {
    // By maps, not a scan of the lock per kernel: linear in the kernels.
    let scope: HashSet<&str> = scope.iter().map(String::as_str).collect();
    let recorded: HashMap<(&str, &str), &Vec<Param>> = lock
        .kernels
        .iter()
        .map(|l| ((l.name.as_str(), l.source.as_str()), &l.params))
        .collect();
    let stale: Vec<&str> = candidate
        .kernels
        .iter()
        .filter(|k| scope.contains(k.source.as_str()))
        .filter(|k| {
            recorded
                .get(&(k.name.as_str(), k.source.as_str()))
                .is_some_and(|params| **params != k.params)
        })
        .map(|k| k.base_name.as_str())
        .collect();
    let (first, rest) = stale.split_at(stale.len().min(3));
    if first.is_empty() {
        return None;
    }
    let more = if rest.is_empty() {
        String::new()
    } else {
        format!(" and {} more", rest.len())
    };
    Some(format!(
        "occ: the parameter lists of {}{more} differ from what {lock_name} records; a build without \
         nvcc takes the lock's, so its typed launchers would differ: run `cargo occ bless` and commit {lock_name}",
        first.join(", ")
    ))
}

/// The error of a failing gate: how many kernel × archs regressed, one
/// header and one table per cause of regression (at most [`ROWS`] rows
/// each, the rest in the report; a row's note has what else of that kernel
/// changed, so that a regression shows what it bought), and what to do.
/// Improvements, new kernels and neutral changes are not errors: they are
/// the warnings of `warn_changes`.
fn regression_report(
    diff: &compare::Diff,
    manifest: &Manifest,
    lock_name: &str,
    thresholds: &Thresholds,
    ci: bool,
    details: &Details,
) -> String {
    let regressions = diff.regressions().count();
    let rest = format!("see {}", details.report().display());
    let mut text = text_table::render_diff_bounded(diff, &[Verdict::Regression], ROWS, &rest);
    text.push_str(&spill_places(diff, manifest));
    let mut hints = Vec::new();
    let past_threshold = diff
        .regressions()
        .any(|f| f.has(Cause::RegistersPastThreshold));
    if past_threshold {
        hints.push(format!(
            "registers may grow by the threshold in the note column before the gate fails; if the growth \
             is intended, raise it with .register_threshold(n) (now {}) or, for one kernel, \
             .kernel_register_threshold(\"name\", n)",
            thresholds.registers
        ));
    }
    hints.push(if ci {
        format!("fix the kernels, or bless on a developer machine (`cargo occ bless`) and commit {lock_name}")
    } else {
        format!("if this is intended, accept it with `cargo occ bless` (or OCC_BLESS=1 cargo build) and commit {lock_name}")
    });
    format!(
        "occupancy regression against {lock_name}: {regressions} kernel x arch{} worse\n{text}{}",
        if regressions == 1 { "" } else { "s" },
        hints.join("\n")
    )
}

/// How many spill places a regression's error names (the table above it
/// has the kernels; `explain` has every place).
const SPILL_PLACES: usize = 3;

/// Where each regression's new or grown spills are, by source line (stage
/// 5½), at most [`SPILL_PLACES`] lines: `- scale on sm_80 spills at
/// kernels/k.cu:13 (loop at :10) ...`; the `.cu` file when nvdisasm found
/// no line.
fn spill_places(diff: &compare::Diff, manifest: &Manifest) -> String {
    let mut lines: Vec<String> = diff
        .regressions()
        .filter(|f| {
            f.causes()
                .any(|c| matches!(c, Cause::NewSpills | Cause::MoreSpills))
        })
        .filter_map(|f| {
            let kernel = manifest
                .kernels
                .iter()
                .find(|k| k.base_name == f.kernel && k.source == f.source)?;
            let at = kernel
                .archs
                .get(&f.arch)
                .and_then(|a| a.lines.as_ref())
                .map(|l| l.describe())
                .filter(|at| !at.is_empty())
                .unwrap_or_else(|| format!("in {} (no line: see `cargo occ explain`)", f.source));
            Some(format!("  - {} on {} spills {at}", f.kernel, f.arch))
        })
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    let more = lines.len().saturating_sub(SPILL_PLACES);
    lines.truncate(SPILL_PLACES);
    if more > 0 {
        lines.push(format!(
            "  - and {more} more (`cargo occ explain KERNEL` names each)"
        ));
    }
    format!("where the spills are:\n{}\n", lines.join("\n"))
}

/// `n kernel(s)` and the verb for `n`.
fn kernels(n: usize, singular: &str, plural: &str) -> String {
    if n == 1 {
        format!("1 kernel {singular}")
    } else {
        format!("{n} kernels {plural}")
    }
}

/// The lock's measurements this build cannot stand behind: taken on
/// another cubin (stale), or with a fastest block the kernel can no longer
/// launch. One warning per kind, naming the first [`report::NAMED`]; all
/// go to the report.
pub(crate) fn measured(
    manifest: &Manifest,
    sources: &[String],
    details: &mut Details,
    directives: &mut Directives,
) {
    let mut stale = Vec::new();
    let mut impossible = Vec::new();
    for m in manifest
        .measured
        .iter()
        .filter(|m| sources.contains(&m.source))
    {
        let Some(ka) = manifest
            .kernels
            .iter()
            .find(|k| k.name == m.kernel && k.source == m.source)
            .and_then(|k| k.archs.get(&m.arch))
        else {
            continue;
        };
        let what = format!("{} on {} (bucket {:?})", m.kernel, m.arch, m.bucket);
        if let occ_model::schema::measured::Staleness::Stale { .. } =
            m.staleness(ka.cubin_hash.as_deref())
        {
            stale.push(what);
            continue;
        }
        let Ok(target) = occ_model::model::arch::parse_target(&m.arch) else {
            continue;
        };
        let request =
            occ_model::model::declared::within_bounds(&ka.facts.launch_bounds, Default::default());
        let launches = occ_model::model::declared::decide(
            target.arch,
            &occ_model::compiler::analyze::model_of(&ka.facts),
            occ_model::model::declared::Ask::Measured(&request, m.best),
        );
        if !matches!(launches, Ok(Some(_))) {
            impossible.push(format!("{what}: block {}", m.best));
        }
    }
    let report = details.report().display().to_string();
    let named = |list: &[String]| {
        let more = list.len().saturating_sub(report::NAMED);
        let mut text = list
            .iter()
            .take(report::NAMED)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if more > 0 {
            text.push_str(&format!(" and {more} more"));
        }
        text
    };
    if !stale.is_empty() {
        directives.warn(format!(
            "occ: {} of occ.lock {} taken on another cubin than this build's: {}; `tuned` sites use the model's block there; measure again and run `cargo occ tune import` (all in {report})",
            measurements(stale.len()),
            if stale.len() == 1 { "was" } else { "were" },
            named(&stale)
        ));
        details.add("Stale measurements".into(), stale.join("\n"));
    }
    if !impossible.is_empty() {
        directives.warn(format!(
            "occ: the measured block of {} can no longer launch: {}; `tuned` sites use the fastest measured block that still launches, else the model's; measure again (all in {report})",
            measurements(impossible.len()),
            named(&impossible)
        ));
        details.add(
            "Measured blocks that no longer launch".into(),
            impossible.join("\n"),
        );
    }
}

fn measurements(n: usize) -> String {
    if n == 1 {
        "1 measurement".into()
    } else {
        format!("{n} measurements")
    }
}

/// The one warning line of a group of findings that do not fail the build
/// (every group `cargo occ check` lists as a difference has one, so that
/// the two report the same changes); `None` for a regression, which is the
/// error's.
fn warning(group: &Group<'_>, lock_name: &str, report: &Path) -> Option<String> {
    let n = group.kernels().len();
    let archs = group.archs().join(", ");
    let names = text_table::group_names(group, report::NAMED);
    let record = "run `cargo occ bless` to record";
    let all = format!("all in {}", report.display());
    if group.causes.contains(&Cause::NearCliff) {
        return Some(format!(
            "occ: {} within the cliff margin of an occupancy cliff ({archs}: a few more registers \
             per thread cost a resident block): {names}; `cargo occ explain` shows the steps \
             ({all})",
            kernels(n, "moved", "moved")
        ));
    }
    let head = match (group.verdict, group.causes.first()) {
        (Verdict::New, Some(Cause::NewArch)) => format!(
            "{} new on {archs}, which {lock_name} does not record",
            kernels(n, "is", "are")
        ),
        (Verdict::New, _) => format!("{} not in {lock_name} ({archs})", kernels(n, "is", "are")),
        (Verdict::Improvement, _) => format!(
            "{} improved on {lock_name} ({archs}: {})",
            kernels(n, "has", "have"),
            text_table::group_title(group)
        ),
        (Verdict::Changed, _) if group.causes.contains(&Cause::LaunchChanged) => format!(
            "{} another declared launch than {lock_name} records, with the same occupancy ({archs})",
            kernels(n, "has", "have")
        ),
        (Verdict::Changed, Some(Cause::Moved)) if group.causes.len() == 1 => format!(
            "{} moved to another file with the same numbers ({archs})",
            kernels(n, "has", "have")
        ),
        (Verdict::Changed, _) => format!(
            "{} from {lock_name} with the same occupancy ({archs}: {})",
            kernels(n, "changed", "changed"),
            text_table::group_title(group)
        ),
        (Verdict::Regression, _) => return None,
    };
    Some(format!("occ: {head}: {names}; {record} them ({all})"))
}
