//! The Markdown report of a build: made to be posted as a pull-request
//! comment or appended to `$GITHUB_STEP_SUMMARY` (by `cargo occ report
//! --format markdown`, `cargo occ check` and the build itself under GitHub
//! Actions). It reads top down as a reviewer triages (what changed against
//! the lock, the spills, the lowest occupancy, what is near a cliff),
//! keeps the long parts in collapsed `<details>` blocks, and never passes
//! its budget ([`MARKDOWN_BUDGET`] characters; GitHub refuses a comment
//! over 65,536 and a step summary over 1 MiB): rows past the budget are
//! left out and counted, naming where they all are. The same build gives
//! the same text.

use crate::compare::{self, Diff, Finding, Verdict};
use crate::render::measured::{self, measured_rows, MeasuredRow};
use crate::render::text_table::{cells, percent, rows, Row, HEADER};
use crate::schema::manifest::{Manifest, Origin};
use std::collections::{BTreeSet, HashMap};

/// What a report knows about regressions against the committed lock.
#[derive(Debug, Clone, PartialEq)]
pub enum Baseline {
    /// The build was compared with the lock (named by its file name only,
    /// so that the text names no local folder).
    Compared {
        /// The lock's file name (`occ.lock`).
        lock: String,
        /// The comparison, as `cargo occ check` makes it.
        diff: Diff,
    },
    /// No comparison, and why (`no occ.lock yet`).
    NotCompared(String),
}

impl Baseline {
    /// The regressions, none when not compared.
    pub fn regressions(&self) -> Vec<&Finding> {
        match self {
            Baseline::Compared { diff, .. } => diff.regressions().collect(),
            Baseline::NotCompared(_) => Vec::new(),
        }
    }

    /// The comparison, when there is one.
    pub fn diff(&self) -> Option<&Diff> {
        match self {
            Baseline::Compared { diff, .. } => Some(diff),
            Baseline::NotCompared(_) => None,
        }
    }
}

/// The most characters the Markdown report holds (a GitHub comment holds
/// 65,536; this leaves room for text around it).
pub const MARKDOWN_BUDGET: usize = 60_000;

/// The most rows of the "notable" table (the full table is below it).
const NOTABLE_ROWS: usize = 50;

/// The most kernels the summary names per line before it counts the rest.
const NAMED: usize = 5;

/// The most rows per cause in the before/after block.
const DIFF_ROWS: usize = 20;

/// Below this occupancy a row is notable.
const LOW_OCCUPANCY: f64 = 0.5;

/// Where every row is, for the line that counts the rows left out.
const ELSEWHERE: &str = "see `report.txt` in the build's `occ` folder, `cargo occ report`, \
     or the HTML report (`cargo occ report --format html`)";

/// A name or other text in Markdown, in a table cell or a line: what no
/// name may hold shown escaped ([`crate::compiler::names::shown`]), `<`, `>` and `&`
/// as entities (no HTML from a name), and a backslash before each of
/// `\`, `|`, `` ` ``, `*`, `[`, `]`, so that a name opens no code span,
/// emphasis or link and splits no table row (GFM's table reader takes
/// `\` with the character after it before it looks for `|`).
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in crate::compiler::names::shown(s).chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\\' | '|' | '`' | '*' | '[' | ']' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// occ's own words, which may hold Markdown (a `cargo occ bless` span)
/// and a name in them: no line break or other character no name may hold,
/// no table cell split, no HTML.
fn prose(s: &str) -> String {
    crate::compiler::names::shown(s)
        .replace('|', "\\|")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A name in a code span: fenced by a run of backticks longer than any in
/// the name (padded with a space where it starts or ends with one), what
/// no name may hold shown escaped, and `|` and `\` after a backslash, which
/// a table row needs (GFM reads `\|` in a cell as `|`, also in a span).
pub(crate) fn code(s: &str) -> String {
    let shown = crate::compiler::names::shown(s);
    let mut body = String::with_capacity(shown.len());
    for c in shown.chars() {
        if matches!(c, '|' | '\\') {
            body.push('\\');
        }
        body.push(c);
    }
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = if body.starts_with('`') || body.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{body}{pad}{fence}")
}

/// The Markdown report, within [`MARKDOWN_BUDGET`] characters.
pub fn markdown(m: &Manifest, baseline: &Baseline) -> String {
    markdown_within(m, baseline, MARKDOWN_BUDGET)
}

/// The Markdown report in at most `budget` characters: the summary, the
/// changes against the lock, the notable rows, then every row in a
/// collapsed block, as many as fit, the rest counted.
///
/// Long because the report's sections are written in the order they appear,
/// each checked against the one budget.
pub fn markdown_within(m: &Manifest, baseline: &Baseline, budget: usize) -> String {
    // Kernels by the names tables show (`names::table_names`).
    let names = crate::compiler::names::table_names(m.kernels.iter().map(|k| k.base_name.as_str()));
    let shown = |kernel: &str| {
        names
            .get(kernel)
            .cloned()
            .unwrap_or_else(|| crate::compiler::names::table_name(kernel))
    };
    let mut all = rows(m);
    for r in &mut all {
        r.kernel = shown(&r.kernel);
    }
    let regressed: BTreeSet<(String, &str, &str)> = match baseline {
        Baseline::Compared { diff, .. } => diff
            .regressions()
            .filter(|f| f.after.is_some())
            .map(|f| (shown(&f.kernel), f.source.as_str(), f.arch.as_str()))
            .collect(),
        Baseline::NotCompared(_) => BTreeSet::new(),
    };
    let is_regressed =
        |r: &Row| regressed.contains(&(r.kernel.clone(), r.source.as_str(), r.arch.as_str()));
    let mut out = format!(
        "### CUDA occupancy: {} (nvcc {})\n\n",
        esc(&m.package),
        esc(&m.nvcc)
    );
    out.push_str(&summary(m, baseline, &all));
    if let Baseline::Compared { lock, diff } = baseline {
        if !diff.findings.is_empty() {
            out.push_str(&changes(lock, diff, budget / 4));
        }
    }
    // Notable rows: regressed first, then spills (most bytes first), then
    // the lowest occupancy; ties by kernel and arch.
    let mut notable: Vec<&Row> = all
        .iter()
        .filter(|r| is_regressed(r) || r.spill_bytes > 0 || r.occupancy < LOW_OCCUPANCY)
        .collect();
    notable.sort_by(|a, b| {
        is_regressed(b)
            .cmp(&is_regressed(a))
            .then(b.spill_bytes.cmp(&a.spill_bytes))
            .then(a.occupancy.total_cmp(&b.occupancy))
            .then(a.kernel.cmp(&b.kernel))
            .then(a.arch.cmp(&b.arch))
    });
    let tail = "\n</details>\n";
    if !notable.is_empty() {
        out.push_str(&format!(
            "\n#### Notable: {} of {} rows\n\nspills, occupancy below {}{}\n\n",
            notable.len(),
            all.len(),
            percent(LOW_OCCUPANCY),
            if regressed.is_empty() {
                ""
            } else {
                ", regressions"
            }
        ));
        let room = budget.saturating_sub(out.len()) / 2;
        let table = table_within(
            &notable,
            NOTABLE_ROWS,
            room,
            "notable rows (all in the table below)",
        );
        out.push_str(&table);
    }
    // What would lift a kernel at its declared launch, one line each, as
    // many as the budget's share allows.
    let lifts: Vec<String> = all
        .iter()
        .filter_map(|r| {
            Some(format!(
                "- {} on {} at block {}: {}\n",
                code(&r.kernel),
                esc(&r.arch),
                esc(&r.launch),
                // `->` reads as is in Markdown; only `<` and `|` need escaping.
                r.lift.as_ref()?.replace('|', "\\|").replace('<', "&lt;")
            ))
        })
        .collect();
    if !lifts.is_empty() {
        out.push_str("\nAt the declared launch, one step up:\n\n");
        let room = budget.saturating_sub(out.len()) / 4;
        let mut used = 0;
        let mut shown = 0;
        for line in lifts.iter().take(NOTABLE_ROWS) {
            if used + line.len() > room {
                break;
            }
            out.push_str(line);
            used += line.len();
            shown += 1;
        }
        if shown < lifts.len() {
            out.push_str(&format!(
                "- ... and {} more: {ELSEWHERE}\n",
                lifts.len() - shown
            ));
        }
    }
    // Kernel x archs near a register cliff, one line each, likewise bounded.
    let near: Vec<String> = all
        .iter()
        .filter(|r| {
            r.cliffs
                .as_ref()
                .is_some_and(|c| c.registers.within(crate::render::text_table::NEAR_CLIFF))
        })
        .filter_map(|r| {
            Some(format!(
                "- {} on {}: {}\n",
                code(&r.kernel),
                esc(&r.arch),
                r.describe_cliffs()?
                    .replace('|', "\\|")
                    .replace('<', "&lt;")
            ))
        })
        .collect();
    if !near.is_empty() {
        out.push_str(&format!(
            "\nWithin {} registers of an occupancy cliff (a few more registers per thread cost a block):\n\n",
            crate::render::text_table::NEAR_CLIFF
        ));
        let room = budget.saturating_sub(out.len()) / 4;
        let mut used = 0;
        let mut shown = 0;
        for line in near.iter().take(NOTABLE_ROWS) {
            if used + line.len() > room {
                break;
            }
            out.push_str(line);
            used += line.len();
            shown += 1;
        }
        if shown < near.len() {
            out.push_str(&format!(
                "- ... and {} more: {ELSEWHERE}\n",
                near.len() - shown
            ));
        }
    }
    // What was measured on a GPU: the best evidence occ holds.
    let room = budget.saturating_sub(out.len()) / 4;
    out.push_str(&measured(&measured_rows(m), room));
    out.push_str(&format!(
        "\n<details><summary>All {} rows ({} kernels x {} archs)</summary>\n\n",
        all.len(),
        m.kernels.len(),
        m.archs.len()
    ));
    let room = budget.saturating_sub(out.len() + tail.len());
    let every: Vec<&Row> = all.iter().collect();
    out.push_str(&table_within(&every, usize::MAX, room, "rows"));
    out.push_str(tail);
    out
}

/// The Markdown section of the launches measured on a GPU
/// ([`crate::render::measured`]), at most `room`
/// characters (the rows that do not fit are counted); empty without any.
pub fn measured(rows: &[MeasuredRow], room: usize) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "\n#### Measured on a GPU: {} launches\n\n`tuned` sites bake the fastest block; the model's \
         choice is the block of maximum occupancy.\n\n\
         | {} |\n|---|---|---|---|---:|---:|---:|---:|---:|\n",
        rows.len(),
        measured::HEADER.join(" | ")
    );
    let mut shown = 0;
    for r in rows {
        let [kernel, rest @ ..] = r.cells();
        let rest: Vec<String> = rest.iter().map(|c| esc(c)).collect();
        let line = format!("| {} | {} |\n", code(&kernel), rest.join(" | "));
        if out.len() + line.len() > room {
            break;
        }
        out.push_str(&line);
        shown += 1;
    }
    if shown < rows.len() {
        out.push_str(&format!(
            "\n... and {} more measured launches: `cargo occ report` lists them\n",
            rows.len() - shown
        ));
    }
    out
}

/// The summary lines: what the report covers, the comparison with the
/// lock, the spills and the lowest occupancy.
///
/// Long because the summary's lines are written in the order they appear.
fn summary(m: &Manifest, baseline: &Baseline, all: &[Row]) -> String {
    let origin = match m.origin {
        Origin::Nvcc => "nvcc",
        Origin::Lock => "the lock (no nvcc in this build)",
    };
    let mut out = format!(
        "{} kernels x {} archs ({}); numbers from {origin}\n\n",
        m.kernels.len(),
        m.archs.len(),
        esc(&m.archs.join(", "))
    );
    let compared = match baseline {
        Baseline::Compared { lock, diff } if diff.findings.is_empty() => {
            format!("no change against {}", code(lock))
        }
        Baseline::Compared { lock, diff } => {
            let count = |v: Verdict| diff.findings.iter().filter(|f| f.verdict == v).count();
            let parts: Vec<String> = [
                (Verdict::Regression, "worse"),
                (Verdict::Improvement, "better"),
                (Verdict::New, "new"),
                (Verdict::Changed, "changed"),
            ]
            .iter()
            .filter(|(v, _)| count(*v) > 0)
            .map(|(v, word)| match count(*v) {
                n if *v == Verdict::Regression => format!("**{n} {word}**"),
                n => format!("{n} {word}"),
            })
            .collect();
            format!(
                "against {}: {} (kernel x archs)",
                code(lock),
                parts.join(", ")
            )
        }
        Baseline::NotCompared(why) => format!("not compared with the lock: {}", prose(why)),
    };
    out.push_str(&format!("- {compared}\n"));
    // Per kernel: its most spilled bytes on an arch, and that arch's line
    // with the most (when the build located it).
    let mut spilling: Vec<(&str, u32, Option<String>)> = Vec::new();
    let mut at_index: HashMap<&str, usize> = HashMap::new();
    for r in all.iter().filter(|r| r.spill_bytes > 0) {
        crate::work::step(1);
        let at = r
            .lines
            .as_ref()
            .and_then(|l| l.worst())
            .map(|s| format!("{}:{}", s.file, s.line));
        match at_index.get(r.kernel.as_str()) {
            Some(&i) => {
                let (_, bytes, most) = &mut spilling[i];
                if r.spill_bytes > *bytes {
                    (*bytes, *most) = (r.spill_bytes, at);
                }
            }
            None => {
                at_index.insert(&r.kernel, spilling.len());
                spilling.push((&r.kernel, r.spill_bytes, at));
            }
        }
    }
    if spilling.is_empty() {
        out.push_str("- no kernel spills registers\n");
    } else {
        let rows = all.iter().filter(|r| r.spill_bytes > 0).count();
        let named: Vec<String> = spilling
            .iter()
            .take(NAMED)
            .map(|(k, bytes, at)| match at {
                Some(at) => format!("{} ({bytes} B at {})", code(k), code(at)),
                None => format!("{} ({bytes} B)", code(k)),
            })
            .collect();
        let more = match spilling.len().saturating_sub(NAMED) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        let kernels = match spilling.len() {
            1 => "1 kernel spills".to_string(),
            n => format!("{n} kernels spill"),
        };
        out.push_str(&format!(
            "- **{kernels}** registers ({rows} kernel x arch{}): {}{more}\n",
            if rows == 1 { "" } else { "s" },
            named.join(", ")
        ));
    }
    let lowest = all.iter().min_by(|a, b| {
        a.occupancy
            .total_cmp(&b.occupancy)
            .then(a.kernel.cmp(&b.kernel))
            .then(a.arch.cmp(&b.arch))
    });
    if let Some(r) = lowest {
        out.push_str(&format!(
            "- lowest occupancy: {} ({} on {}, {})\n",
            percent(r.occupancy),
            code(&r.kernel),
            esc(&r.arch),
            esc(&r.limiters.join(" + "))
        ));
    }
    out
}

/// The changes against the lock: one line per kind (a count and the first
/// names), then the before/after tables collapsed, in at most `room`
/// characters.
pub fn changes(lock: &str, diff: &Diff, room: usize) -> String {
    let mut out = format!("\n#### Changes against {}\n\n", code(lock));
    for group in compare::groups(diff, &Verdict::ALL) {
        let n = group.findings.len();
        let verdict = match group.verdict {
            Verdict::Regression => "**regression**",
            Verdict::Improvement => "improvement",
            Verdict::New => "new",
            Verdict::Changed => "changed",
        };
        let kernels = group.kernels();
        let shown = crate::compiler::names::table_names(kernels.iter().map(|(k, _)| *k));
        let mut names: Vec<String> = kernels
            .iter()
            .take(NAMED)
            .map(|(k, _)| code(&shown[k]))
            .collect();
        if kernels.len() > NAMED {
            names.push(format!("and {} more", kernels.len() - NAMED));
        }
        out.push_str(&format!(
            "- {verdict}: {} ({n} kernel x arch{}): {}\n",
            esc(&crate::render::text_table::group_title(&group)),
            if n == 1 { "" } else { "s" },
            names.join(", ")
        ));
    }
    let mut text = crate::render::text_table::render_diff_bounded(
        diff,
        &Verdict::ALL,
        DIFF_ROWS,
        "see report.txt",
    );
    let open = "\n<details><summary>Before and after</summary>\n\n```text\n";
    let close = "```\n\n</details>\n";
    let cut = "... (cut here: the rest is in report.txt)\n";
    let room = room.saturating_sub(out.len() + open.len() + close.len() + cut.len());
    if text.len() > room {
        let mut end = room;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let end = text[..end].rfind('\n').map_or(0, |i| i + 1);
        text.truncate(end);
        text.push_str(cut);
    }
    // A fence inside the text would end the block early.
    out.push_str(open);
    out.push_str(&text.replace("```", "'''"));
    out.push_str(close);
    out
}

/// A Markdown table of `rows`: at most `max` rows and `room` characters;
/// the rows left out are counted in a last line (`... and 12 more {what}`).
fn table_within(rows: &[&Row], max: usize, room: usize, what: &str) -> String {
    let mut out = format!(
        "| {} |\n|{}\n",
        HEADER.join(" | "),
        ["---|", "---|", "--:|", "--:|", "--:|", "--:|", "--:|", "---|", "--:|", "--:|", "--:|"]
            .concat()
    );
    let count_line = |n: usize| format!("\n... and {n} more {what}: {ELSEWHERE}\n");
    // Room for the count line, whatever the number in it.
    let reserve = count_line(rows.len()).len();
    let mut shown = 0;
    for r in rows.iter().take(max) {
        let line = row(r);
        if out.len() + line.len() + reserve > room {
            break;
        }
        out.push_str(&line);
        shown += 1;
    }
    if shown < rows.len() {
        out.push_str(&count_line(rows.len() - shown));
    }
    out
}

/// One row of the Markdown table.
fn row(r: &Row) -> String {
    let mut c: Vec<String> = cells(r).iter().map(|s| esc(s)).collect();
    c[0] = code(&r.kernel);
    if r.spill_bytes > 0 {
        c[4] = format!("**{}**", c[4]);
    }
    format!("| {} |\n", c.join(" | "))
}
