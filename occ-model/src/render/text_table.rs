//! Plain-text tables: the column aligner, the number formats every report
//! shares, and the per-kernel table (one row per kernel × arch) that the
//! build writes to `report.txt` and `cargo occ report` prints.

use crate::compare::{groups, Cause, Diff, Finding, Group, JudgedAt, Reason, Verdict};
use crate::compiler::lines::SourceLines;
use crate::schema::manifest::{Manifest, Resources, CANNOT_LAUNCH};
use serde::Serialize;

pub use crate::render::units::{count, percent};

/// What a group's findings share, in a few words (`new spills`,
/// `occupancy down, registers up past the threshold`, `new arch sm_90`).
pub fn group_title(group: &Group<'_>) -> String {
    let mut words: Vec<String> = group
        .causes
        .iter()
        .map(|c| match c {
            Cause::Details => details_title(group),
            c => c.phrase().to_string(),
        })
        .collect();
    if let (Some(arch), Some(w)) = (&group.arch, words.first_mut()) {
        *w = format!("{w} {arch}");
    }
    if words.is_empty() {
        words.push(Cause::Details.phrase().into());
    }
    words.join(", ")
}

/// The recorded fields a group's [`Reason::Details`] name, as a title:
/// `maxrregcount changed`, `declared launch, stack frame changed`; the
/// cause's phrase when they name none, or more than three (each row's
/// note names its own).
fn details_title(group: &Group<'_>) -> String {
    let mut names: Vec<&str> = Vec::new();
    for f in &group.findings {
        crate::work::step(1);
        for r in &f.reasons {
            if let Reason::Details { declared, fields } = r {
                let declared = declared.as_ref().map(|_| "declared launch");
                for name in declared
                    .into_iter()
                    .chain(fields.iter().map(|c| c.field.as_str()))
                {
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
            }
        }
        if names.len() > 3 {
            break;
        }
    }
    match names.len() {
        1..=3 => format!("{} changed", names.join(", ")),
        _ => Cause::Details.phrase().into(),
    }
}

/// `a, b (sm_90), c and 12 more`: the first `named` kernels of a group
/// (with their archs when they lack some of the group's), then a count.
pub fn group_names(group: &Group<'_>, named: usize) -> String {
    let all = group.archs();
    let kernels = group.kernels();
    let names = crate::compiler::names::table_names(kernels.iter().map(|(k, _)| *k));
    let shown: Vec<String> = kernels
        .iter()
        .take(named)
        .map(|(k, archs)| {
            let k = &names[k];
            if archs.len() == all.len() {
                k.to_string()
            } else {
                format!("{k} ({})", archs.join(", "))
            }
        })
        .collect();
    let shown = shown.join(", ");
    match kernels.len().saturating_sub(named) {
        0 => shown,
        n => format!("{shown} and {n} more"),
    }
}

/// Aligns rows into columns separated by two spaces (the first row is the
/// header and is underlined); numbers are right-aligned. A cell shows
/// what no name may hold escaped ([`crate::compiler::names::shown`]), so that a name
/// breaks no line of the table.
///
/// A column is at most [`WIDEST`] characters wide: a longer cell (a
/// template's full name) is written whole and shifts the rest of its own
/// line, so that one long name does not pad every other line to its width
/// (the table stays as long as its cells, not rows × the longest cell).
///
/// Linear in the cells: each is read once for the widths and the numeric
/// columns and once to write it (`render::linear` counts the steps).
pub fn align<const N: usize>(rows: &[[String; N]]) -> String {
    let shown: Vec<[std::borrow::Cow<'_, str>; N]> = rows
        .iter()
        .map(|row| std::array::from_fn(|i| crate::compiler::names::shown(&row[i])))
        .collect();
    let mut widths = [0usize; N];
    // A column is numeric when every cell under the header is.
    let mut numeric = [shown.len() > 1; N];
    for (n, row) in shown.iter().enumerate() {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count().min(WIDEST));
            if n > 0 && numeric[i] && !is_number(cell) {
                numeric[i] = false;
            }
        }
    }
    let total = widths.iter().sum::<usize>() + 2 * N.saturating_sub(1);
    let mut out = String::with_capacity(shown.len() * (total + 1) + total + 1);
    for (n, row) in shown.iter().enumerate() {
        let start = out.len();
        for (i, cell) in row.iter().enumerate() {
            crate::work::step(1);
            if i > 0 {
                out.push_str("  ");
            }
            let pad = widths[i].saturating_sub(cell.chars().count());
            if n > 0 && numeric[i] {
                out.extend(std::iter::repeat_n(' ', pad));
                out.push_str(cell);
            } else {
                out.push_str(cell);
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        // The line without its trailing blanks.
        let kept = out[start..].trim_end().len();
        out.truncate(start + kept);
        out.push('\n');
        if n == 0 {
            out.extend(std::iter::repeat_n('-', total));
            out.push('\n');
        }
    }
    out
}

/// The widest a column of [`align`] pads to, in characters.
pub const WIDEST: usize = 64;

/// What [`align`] right-aligns: a number, a percentage, `-` or nothing.
fn is_number(cell: &str) -> bool {
    crate::work::step(1);
    cell.is_empty() || cell == "-" || cell.trim_end_matches('%').parse::<f64>().is_ok()
}

/// One row of the report: a kernel on an arch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The kernel's base name (`ns::kern<float, 3>`).
    pub kernel: String,
    /// The `.cu` file.
    pub source: String,
    /// The arch.
    pub arch: String,
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block, bytes.
    pub static_smem: u32,
    /// Spilled bytes (stores + loads).
    pub spill_bytes: u32,
    /// Occupancy at the declared launch, else at the best block size, 0..=1.
    pub occupancy: f64,
    /// What limits it ([`CANNOT_LAUNCH`] for a kernel that cannot launch).
    pub limiters: Vec<String>,
    /// The declared launch (`1024`, `16x16`), or `best` when none is
    /// declared (`-` when the kernel cannot launch).
    pub launch: String,
    /// At a declared launch below full occupancy, what would reach the
    /// next step (`2 fewer registers (at most 32), or
    /// __launch_bounds__(1024, 2) -> 100.0%`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lift: Option<String>,
    /// The best block size; `None` when the kernel cannot launch.
    pub best_block_size: Option<u32>,
    /// Dynamic shared memory a block can still take there, bytes; `None`
    /// when the kernel cannot launch.
    pub dynamic_smem_headroom: Option<u32>,
    /// Where occupancy steps at the launch: the registers and shared
    /// memory that cost a block and what gains one (absent when the
    /// manifest has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cliffs: Option<crate::model::cliff::Cliffs>,
    /// Where it spills and where its register pressure peaks, by source
    /// line (from nvdisasm, when the build ran it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<SourceLines>,
}

impl Row {
    /// The `cliff` column: registers per thread until the next block is
    /// lost (`+2` when 2 more registers cost a block), `-` without a cliff.
    pub fn cliff(&self) -> String {
        self.cliffs
            .as_ref()
            .and_then(|c| {
                c.registers
                    .down
                    .map(|d| format!("+{}", d.at - c.registers.now))
            })
            .unwrap_or_else(|| "-".into())
    }

    /// The cliffs in words (`registers 40: +1 costs a block (6 -> 5, …); …`).
    pub fn describe_cliffs(&self) -> Option<String> {
        let c = self.cliffs.as_ref()?;
        let a = crate::model::arch::lookup(&self.arch).ok()?;
        Some(c.describe(a))
    }
}

pub use crate::model::cliff::NEAR_CLIFF;

/// The report rows, in manifest order (kernels by symbol, archs sorted).
pub fn rows(m: &Manifest) -> Vec<Row> {
    let mut out = Vec::new();
    for k in &m.kernels {
        for (arch, a) in &k.archs {
            let judged = a.judged();
            out.push(Row {
                kernel: k.base_name.clone(),
                source: k.source.clone(),
                arch: arch.clone(),
                registers: a.facts.registers,
                static_smem: a.facts.static_smem,
                spill_bytes: a.facts.spill_bytes(),
                occupancy: a.judged_occupancy(),
                limiters: judged
                    .map_or_else(|| vec![CANNOT_LAUNCH.into()], |j| j.limiters.to_vec()),
                launch: judged.map_or_else(|| "-".into(), |j| j.launch()),
                lift: judged
                    .and_then(|j| j.declared)
                    .and_then(|d| d.lift.as_ref())
                    .and_then(|l| l.describe()),
                best_block_size: a.best.as_ref().map(|b| b.block_size),
                dynamic_smem_headroom: a.best.as_ref().map(|b| b.dynamic_smem_headroom),
                cliffs: a.cliffs.clone(),
                lines: a.lines.clone(),
            });
        }
    }
    out
}

/// [`rows`] for plain text: each name (kernel, source, the files of its
/// source lines) as [`crate::compiler::names::shown`] writes it, so that no name
/// breaks a line of the table or the lines under it. (The JSON report
/// keeps [`rows`]' names as they are: JSON escapes them.)
fn text_rows(m: &Manifest) -> Vec<Row> {
    let shown = |s: &mut String| *s = crate::compiler::names::shown(s).into_owned();
    let mut rows = rows(m);
    let names = crate::compiler::names::table_names(m.kernels.iter().map(|k| k.base_name.as_str()));
    for r in &mut rows {
        if let Some(name) = names.get(r.kernel.as_str()) {
            r.kernel = name.clone();
        }
        shown(&mut r.kernel);
        shown(&mut r.source);
        for l in r.lines.iter_mut() {
            l.spills.iter_mut().for_each(|s| shown(&mut s.file));
            l.peak_pressure.iter_mut().for_each(|p| shown(&mut p.file));
        }
    }
    rows
}

/// The column names of [`table`]. `cliff` is [`Row::cliff`].
pub const HEADER: [&str; 11] = [
    "kernel",
    "arch",
    "registers",
    "smem",
    "spills",
    "launch",
    "occupancy",
    "limiter",
    "cliff",
    "best block",
    "headroom",
];

/// A number, or `-` where there is none (a kernel that cannot launch).
fn or_dash(n: Option<u32>) -> String {
    n.map_or_else(|| "-".into(), |n| n.to_string())
}

/// The cells of one [`Row`], formatted as [`table`] prints them.
pub fn cells(r: &Row) -> [String; 11] {
    [
        r.kernel.clone(),
        r.arch.clone(),
        r.registers.to_string(),
        r.static_smem.to_string(),
        r.spill_bytes.to_string(),
        r.launch.clone(),
        percent(r.occupancy),
        r.limiters.join(" + "),
        r.cliff(),
        or_dash(r.best_block_size),
        or_dash(r.dynamic_smem_headroom),
    ]
}

/// The terminal table: one line per kernel × arch (occupancy at the
/// declared launch, or at the best block size where the launch column
/// says `best`; `cliff`: registers until a block is lost), then one line
/// per kernel × arch whose declared launch could reach the next occupancy
/// step, saying how, one per spilling kernel × arch saying where it spills
/// (when the build located it), and one per kernel × arch at most
/// [`NEAR_CLIFF`] registers from a cliff, with both steps.
pub fn table(m: &Manifest) -> String {
    let mut out = table_without_cliffs(m);
    out.push_str(&cliff_lines(m, Some(NEAR_CLIFF)));
    out
}

/// The cliffs of every kernel × arch (`margin` `None`), or of those at
/// most `margin` registers from one, one line each under a title; empty
/// when there are none.
pub fn cliff_lines(m: &Manifest, margin: Option<u32>) -> String {
    let lines: Vec<String> = text_rows(m)
        .iter()
        .filter(|r| margin.is_none_or(|n| r.cliffs.as_ref().is_some_and(|c| c.registers.within(n))))
        .filter_map(|r| {
            let at = if r.launch == "best" {
                format!("{} (best)", or_dash(r.best_block_size))
            } else {
                r.launch.clone()
            };
            Some(format!(
                "  {} on {} at block {at}: {}\n",
                r.kernel,
                r.arch,
                r.describe_cliffs()?
            ))
        })
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    let title = match margin {
        Some(n) => format!(
            "\nwithin {n} register{} of an occupancy cliff:\n",
            if n == 1 { "" } else { "s" }
        ),
        None => {
            "\noccupancy cliffs at the launch (registers per thread, shared memory per block):\n"
                .to_string()
        }
    };
    format!("{title}{}", lines.concat())
}

/// [`table`] without the lines near a cliff (the build's report follows
/// it with every kernel × arch's cliffs).
pub fn table_without_cliffs(m: &Manifest) -> String {
    let rows = text_rows(m);
    let mut all: Vec<[String; 11]> = vec![HEADER.map(str::to_string)];
    all.extend(rows.iter().map(cells));
    let mut out = align(&all);
    let lifts: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            let lift = r.lift.as_ref()?;
            Some(format!(
                "  {} on {} at block {} ({}): {lift}\n",
                r.kernel,
                r.arch,
                r.launch,
                percent(r.occupancy)
            ))
        })
        .collect();
    if !lifts.is_empty() {
        out.push_str("\nat the declared launch, one step up:\n");
        out.extend(lifts);
    }
    let spills: Vec<String> = rows
        .iter()
        .filter(|r| r.spill_bytes > 0)
        .filter_map(|r| {
            let at = r.lines.as_ref()?.describe();
            (!at.is_empty()).then(|| format!("  {} on {}: {at}\n", r.kernel, r.arch))
        })
        .collect();
    if !spills.is_empty() {
        out.push_str("\nwhere they spill:\n");
        out.extend(spills);
    }
    out
}

/// How a verdict heads its groups.
fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Regression => "regression",
        Verdict::Improvement => "improvement",
        Verdict::New => "new",
        Verdict::Changed => "changed",
    }
}

/// `n kernel x arch` with the noun for `n`.
fn pairs(n: usize) -> String {
    format!("{n} kernel x arch{}", if n == 1 { "" } else { "s" })
}

/// The before/after table of the findings with one of `verdicts`: per
/// group of findings with the same causes, one header line (the verdict,
/// the causes and how many) and one table, one row per kernel × arch
/// (`before -> after` where a number changed). Every row is shown.
pub fn render_diff(diff: &Diff, verdicts: &[Verdict]) -> String {
    render(diff, verdicts, None)
}

/// [`render_diff`] with at most `rows` rows per group; each group that has
/// more ends with `... and N more kernel x archs: {rest}` (`rest` says
/// where the full table is).
pub fn render_diff_bounded(diff: &Diff, verdicts: &[Verdict], rows: usize, rest: &str) -> String {
    render(diff, verdicts, Some((rows, rest)))
}

fn render(diff: &Diff, verdicts: &[Verdict], limit: Option<(usize, &str)>) -> String {
    let mut out = String::new();
    if !diff.settings.is_empty() {
        out.push_str(&format!(
            "changed since the lock was blessed, before any kernel: {}\n",
            crate::compare::said(&diff.settings)
        ));
    }
    for group in groups(diff, verdicts) {
        let n = group.findings.len();
        out.push_str(&format!(
            "{}: {} ({})\n",
            verdict_word(group.verdict),
            group_title(&group),
            pairs(n)
        ));
        let shown = limit.map_or(n, |(rows, _)| rows.min(n));
        let mut table: Vec<[String; 10]> = vec![[
            "kernel".into(),
            "arch".into(),
            "source".into(),
            "registers".into(),
            "smem".into(),
            "spills".into(),
            "occupancy".into(),
            "limiter".into(),
            "best block".into(),
            "note".into(),
        ]];
        let names =
            crate::compiler::names::table_names(group.findings.iter().map(|f| f.kernel.as_str()));
        table.extend(group.findings.iter().take(shown).map(|f| {
            let mut cells = row(f);
            cells[0] = crate::compiler::names::shown(&names[f.kernel.as_str()]).into_owned();
            cells
        }));
        for line in align(&table).lines() {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
        if let Some((_, rest)) = limit.filter(|_| shown < n) {
            let more = n - shown;
            let s = if more == 1 { "" } else { "s" };
            out.push_str(&format!("  ... and {more} more kernel x arch{s}: {rest}\n"));
        }
    }
    out
}

/// One finding as a table row: the numbers before and after, and the notes
/// the numbers do not show (a moved file, a likely rename). Occupancy and
/// limiter are at the launch the gate judged (`compare`'s
/// `judged_occupancy`: a declared launch, named in the notes with its
/// change when the lock recorded another, else the best block), so the row
/// says what the verdict says.
fn row(f: &Finding) -> [String; 10] {
    fn cell<T: PartialEq + ToString>(
        before: &Option<Resources>,
        after: &Option<Resources>,
        get: impl Fn(&Resources) -> T,
    ) -> String {
        match (before.as_ref().map(&get), after.as_ref().map(&get)) {
            (Some(b), Some(a)) if b == a => a.to_string(),
            (Some(b), Some(a)) => format!("{} -> {}", b.to_string(), a.to_string()),
            (None, Some(a)) => a.to_string(),
            (Some(b), None) => format!("{} -> -", b.to_string()),
            (None, None) => "-".into(),
        }
    }
    let (b, a) = (&f.before, &f.after);
    let mut notes: Vec<String> = f.reasons.iter().filter_map(note).collect();
    // A move that did not decide the verdict is still said.
    let moved = f.also.iter().filter(|r| matches!(r, Reason::Moved { .. }));
    notes.extend(moved.map(Reason::to_string));
    // Occupancy where the gate judged it, and that launch in words.
    let (occupancy, at) = match (b, a) {
        (Some(before), Some(after)) => {
            let judged = crate::compare::judged_occupancy(&f.arch, before, after);
            let (was, now) = (
                percent(judged.before.occupancy),
                percent(judged.after.occupancy),
            );
            let cell = if was == now {
                now
            } else {
                format!("{was} -> {now}")
            };
            (cell, judged.at.to_string())
        }
        (one, other) => {
            let r = other.as_ref().or(one.as_ref());
            let at = r.and_then(|r| r.declared.as_ref());
            (
                cell(b, a, |r| percent(r.judged_occupancy())),
                at.map_or(String::new(), |d| JudgedAt::launch(d).to_string()),
            )
        }
    };
    if !at.is_empty() {
        notes.push(at);
    }
    [
        f.kernel.clone(),
        f.arch.clone(),
        f.source.clone(),
        cell(b, a, |r| r.facts.registers),
        cell(b, a, |r| r.facts.static_smem),
        cell(b, a, |r| r.facts.spill_bytes()),
        occupancy,
        cell(b, a, |r| {
            r.judged()
                .map_or_else(|| CANNOT_LAUNCH.into(), |j| j.limiters.join(" + "))
        }),
        cell(b, a, |r| or_dash(r.best.as_ref().map(|b| b.block_size))),
        notes.join("; "),
    ]
}

/// What a before/after table notes beside the numbers it shows for a
/// reason (`+9, threshold 8`, `moved from k.cu`, ``renamed? `a` -> `b` ``);
/// `None` when its columns show it all.
fn note(reason: &Reason) -> Option<String> {
    match reason {
        Reason::RegistersPastThreshold {
            before,
            after,
            threshold,
        } => Some(format!("+{}, threshold {threshold}", after - before)),
        // What changed where no column shows it (`maxrregcount none -> 64`).
        Reason::Moved { .. } | Reason::Renamed { .. } | Reason::Details { .. } => {
            Some(reason.to_string())
        }
        _ => None,
    }
}

/// The launches of the crate's C++ host code (`report.txt`'s section):
/// a title with the counts (constant, known only at run time, naming no
/// kernel of the build), then one row per launch: where, the kernel as
/// written, the launch, and what occ made of it; `None` when the code
/// launches nothing.
pub fn code_launches(m: &Manifest) -> Option<String> {
    use crate::compiler::launches::{self, Match};
    if m.launches.is_empty() {
        return None;
    }
    let kernels: Vec<&crate::schema::manifest::Kernel> = m.kernels.iter().collect();
    let (mut constant, mut run_time, mut unresolved) = (0, 0, 0);
    let mut rows: Vec<[String; 4]> = vec![[
        "where".into(),
        "kernel".into(),
        "launch".into(),
        "note".into(),
    ]];
    for l in &m.launches {
        let (launch, mut note) = match l.constant() {
            Some(c) => {
                constant += 1;
                (c.describe(), String::new())
            }
            None => {
                run_time += 1;
                let why = l.why.as_deref().unwrap_or("not a constant");
                (
                    "run time".to_string(),
                    format!("known only at run time: {why}"),
                )
            }
        };
        if let Match::Unresolved(why) = launches::matched(l, &kernels) {
            unresolved += 1;
            note = if note.is_empty() {
                format!("not judged: {why}")
            } else {
                format!("{note}; {why}")
            };
        }
        rows.push([
            l.at(),
            crate::compiler::names::shown(&l.kernel).into_owned(),
            launch,
            note,
        ]);
    }
    let mut out = format!(
        "launches in the C++ host code ({constant} constant, {run_time} known only at run time, \
         {unresolved} naming no kernel of the build)\n"
    );
    for line in align(&rows).lines() {
        out.push_str("  ");
        out.push_str(line.trim_end());
        out.push('\n');
    }
    for c in launches::contradictions(m) {
        out.push_str(&format!("  note: {c}\n"));
    }
    Some(out)
}

/// The launches measured on a GPU ([`crate::render::measured`]) as an
/// aligned table: per kernel × arch × bucket the device, the measured best
/// (what `tuned` sites bake) and the max-occupancy block with their times
/// and the speed-up; `None` when nothing was measured.
pub fn measured_table(m: &Manifest) -> Option<String> {
    use crate::render::measured::{measured_rows, HEADER};
    let mut rows = vec![HEADER.map(str::to_string)];
    rows.extend(measured_rows(m).iter().map(|r| r.cells()));
    (rows.len() > 1).then(|| align(&rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel that cannot launch on an arch (no best launch, none
    /// declared) reads `cannot launch` where its limiters go and `-` for
    /// its best block and headroom, at 0%.
    #[test]
    fn a_kernel_that_cannot_launch_says_so_in_its_row() {
        use crate::compare::tests::{arch, lock};
        let mut r = arch(4096, 64, 0);
        r.best = crate::model::declared::best_launch("sm_80", &r.facts).expect("the model");
        assert_eq!(
            r.best, None,
            "test premise: one warp over sm_80's registers"
        );
        let m = crate::assemble::lock_manifest(
            &lock(&[("a", r)]),
            &[],
            std::path::Path::new("occ.lock"),
        )
        .expect("manifest");
        let row = &rows(&m)[0];
        assert_eq!(
            (row.limiters.as_slice(), row.best_block_size, row.occupancy),
            ([CANNOT_LAUNCH.to_string()].as_slice(), None, 0.0)
        );
        let cells = cells(row);
        assert_eq!(
            [&cells[5], &cells[6], &cells[7], &cells[9], &cells[10]],
            ["-", "0.0%", "cannot launch", "-", "-"]
        );
    }

    #[test]
    fn a_count_of_one_is_singular() {
        assert_eq!(count(0, "kernel"), "0 kernels");
        assert_eq!(count(1, "kernel"), "1 kernel");
        assert_eq!(count(2, "arch"), "2 archs");
    }

    #[test]
    fn align_pads_text_left_and_numbers_right() {
        let t = align(&[
            ["name".to_string(), "n".to_string()],
            ["a".to_string(), "100".to_string()],
            ["long".to_string(), "5".to_string()],
        ]);
        assert_eq!(t, "name  n\n---------\na     100\nlong    5\n");
    }

    #[test]
    fn a_cell_past_the_widest_column_shifts_only_its_own_line() {
        let long = "k".repeat(WIDEST + 30);
        let mut rows = vec![["kernel".to_string(), "registers".to_string()]];
        rows.extend((0..50).map(|i| [format!("k{i}"), "32".to_string()]));
        rows.push([long.clone(), "40".to_string()]);
        let t = align(&rows);
        let lines: Vec<&str> = t.lines().collect();
        // Every short line padded to the widest column, not to the long name.
        assert_eq!(
            lines[2].len(),
            WIDEST + 2 + "registers".len(),
            "{}",
            lines[2]
        );
        assert_eq!(lines.last(), Some(&format!("{long}  {:>9}", "40").as_str()));
        // The table grows with its cells, not with rows x the longest one.
        let line = WIDEST + 2 + "registers".len() + 1;
        assert_eq!(t.len(), 52 * line + long.len() + 2 + 9 + 1, "{t}");
    }
}
