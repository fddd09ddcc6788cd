//! What a CI run shows a reviewer, located at source lines: each spill,
//! regression and near-cliff warning as an [`Alert`], written as GitHub
//! Actions workflow commands ([`workflow_command`]) or as a SARIF 2.1.0
//! log for code scanning ([`sarif`]). Pure: the shell reads the `.cu`
//! files and hands over their text ([`definition_line`]) and maps each
//! source to the path the CI system knows.
//!
//! An alert's line is, in order: the spill site the manifest records
//! (`KernelArch::lines`, from `nvdisasm -g`), the point of peak register
//! pressure, else the line of the kernel's `__global__` definition in its
//! `.cu` file, else line 1 of that file ([`Located::Definition`],
//! [`Located::File`] say which).
//!
//! Rule ids ([`Rule::id`]): `occ/spill`, `occ/regression`,
//! `occ/near-cliff`. A source line has at most one alert per rule.

use crate::compare::{Cause, Diff, Verdict};
use crate::schema::manifest::{Kernel, Manifest};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};

/// What an alert reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// A kernel spills registers to local memory.
    Spill,
    /// A kernel is worse than the committed lock (the gate fails).
    Regression,
    /// A change left a kernel within the cliff margin of losing a block.
    NearCliff,
}

impl Rule {
    /// Every rule, in the order of [`sarif`]'s `rules`.
    pub const ALL: [Rule; 3] = [Rule::Spill, Rule::Regression, Rule::NearCliff];

    /// The SARIF rule id.
    pub fn id(self) -> &'static str {
        match self {
            Rule::Spill => "occ/spill",
            Rule::Regression => "occ/regression",
            Rule::NearCliff => "occ/near-cliff",
        }
    }

    /// The rule's name (SARIF `name`, PascalCase by convention).
    fn name(self) -> &'static str {
        match self {
            Rule::Spill => "RegisterSpill",
            Rule::Regression => "OccupancyRegression",
            Rule::NearCliff => "NearOccupancyCliff",
        }
    }

    /// One sentence on the rule.
    pub fn description(self) -> &'static str {
        match self {
            Rule::Spill => {
                "The kernel spills registers to local memory on this arch (ptxas's spill stores and loads)."
            }
            Rule::Regression => {
                "The kernel is worse than the committed occ.lock: lower occupancy, new or more spills, registers up past the threshold, or gone."
            }
            Rule::NearCliff => {
                "A change left the kernel within the cliff margin of an occupancy cliff: a few more registers per thread cost a resident block."
            }
        }
    }
}

/// How sure the line of an alert is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Located {
    /// A line the manifest records (a spill site or the peak pressure).
    Recorded,
    /// The line of the kernel's `__global__` definition.
    Definition,
    /// Line 1 of the kernel's file: its definition was not found.
    File,
}

/// The severity of an alert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Fails the gate (a regression, or a spill the build denies).
    Error,
    /// Worth a look.
    Warning,
}

impl Located {
    /// The SARIF property value: `recorded`, `definition` or `file`.
    pub fn word(self) -> &'static str {
        match self {
            Located::Recorded => "recorded",
            Located::Definition => "definition",
            Located::File => "file",
        }
    }
}

impl Level {
    fn word(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warning => "warning",
        }
    }
}

/// One result, located at a source line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    /// The rule.
    pub rule: Rule,
    /// Its severity.
    pub level: Level,
    /// The kernel's base name (several, joined by `, `, when the alert is
    /// at a line where several kernels hit the rule).
    pub kernel: String,
    /// The arch (several, joined by `, `, as `kernel`).
    pub arch: String,
    /// The file, relative to the crate (as the manifest names it).
    pub file: String,
    /// The line, 1-based.
    pub line: u32,
    /// How the line was found.
    pub located: Located,
    /// One line for a person.
    pub message: String,
}

/// The line of the `__global__` definition of the kernel named `name` (its
/// short name) in `source`, 1-based; comments, string literals and
/// `__launch_bounds__(...)` between `__global__` and the name are skipped,
/// the name may be on a later line. `None` when there is none.
pub fn definition_line(source: &str, name: &str) -> Option<u32> {
    definition_lines(source).get(name).copied()
}

/// [`definition_line`] of every name at once, in one pass over the file's
/// tokens: each `__global__` declarator's `name (` pairs, the first
/// definition of a name kept.
fn definition_lines(source: &str) -> HashMap<String, u32> {
    let tokens = tokens(source);
    let mut out = HashMap::new();
    let mut i = 0;
    while i < tokens.len() {
        crate::work::step(1);
        if tokens[i].0 != "__global__" {
            i += 1;
            continue;
        }
        // The declarator: up to the body or the end of the declaration.
        let mut j = i + 1;
        while j + 1 < tokens.len() {
            crate::work::step(1);
            let ((a, line), (b, _)) = (&tokens[j], &tokens[j + 1]);
            if a == "{" || a == ";" {
                break;
            }
            if b == "(" {
                out.entry(a.clone()).or_insert(*line);
            }
            j += 1;
        }
        // A `__global__` inside this declarator starts no other one.
        i = j.max(i + 1);
    }
    out
}

/// Identifiers and single punctuation characters with their lines, without
/// comments, string and character literals or preprocessor lines.
fn tokens(source: &str) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    let chars: Vec<char> = source.chars().collect();
    let (mut i, mut line, mut at_line_start) = (0usize, 1u32, true);
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            at_line_start = true;
            i += 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if at_line_start && c == '#' {
            // A preprocessor line, with its continuations.
            while i < chars.len() && chars[i] != '\n' {
                if chars[i] == '\\' && chars.get(i + 1) == Some(&'\n') {
                    line += 1;
                    i += 1;
                }
                i += 1;
            }
            continue;
        }
        at_line_start = false;
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                if chars[i] == '\n' {
                    line += 1;
                }
                i += 1;
            }
            i += 2;
        } else if c == '"' || c == '\'' {
            i += 1;
            while i < chars.len() && chars[i] != c && chars[i] != '\n' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((chars[start..i].iter().collect(), line));
        } else {
            out.push((c.to_string(), line));
            i += 1;
        }
    }
    out
}

/// The alerts of a build: one per spill (per spill line when the manifest
/// records them, else per kernel × arch), one per regression and one per
/// near-cliff warning of `diff`; then one per rule and line: the alerts of
/// one rule at one line are one alert naming each kernel and arch. `source_text` gives a `.cu` file's text
/// (relative to the crate) when it can be read, for the definition line.
/// Spills are errors when `deny_spills`, else warnings.
///
/// Long because each rule (spill, regression, near cliff) places its alerts at
/// source lines in one pass, so one line gets one alert per rule.
pub fn alerts(
    m: &Manifest,
    diff: Option<&Diff>,
    deny_spills: bool,
    source_text: &dyn Fn(&str) -> Option<String>,
) -> Vec<Alert> {
    // Each file read and its definitions found once, whatever it holds.
    let mut definitions: HashMap<String, HashMap<String, u32>> = HashMap::new();
    let mut at_definition = |source: &str, short_name: &str| -> (u32, Located) {
        let lines = definitions.entry(source.to_string()).or_insert_with(|| {
            source_text(source)
                .map(|t| definition_lines(&t))
                .unwrap_or_default()
        });
        match lines.get(short_name) {
            Some(&line) => (line, Located::Definition),
            None => (1, Located::File),
        }
    };
    // The manifest's kernels by name and source (the first of each).
    let mut kernel_of: HashMap<(&str, &str), &Kernel> = HashMap::new();
    for k in &m.kernels {
        kernel_of
            .entry((k.base_name.as_str(), k.source.as_str()))
            .or_insert(k);
    }
    let mut out = Vec::new();
    let spill_level = if deny_spills {
        Level::Error
    } else {
        Level::Warning
    };
    for k in &m.kernels {
        for (arch, a) in k.archs.iter().filter(|(_, a)| a.facts.spills()) {
            let head = format!(
                "{} spills {} B on {arch} ({} B stores, {} B loads)",
                k.base_name,
                a.facts.spill_bytes(),
                a.facts.spill_stores,
                a.facts.spill_loads
            );
            let sites = a.lines.as_ref().map(|l| l.spills.as_slice()).unwrap_or(&[]);
            if sites.is_empty() {
                let (line, located) = at_definition(&k.source, &k.short_name);
                out.push(Alert {
                    rule: Rule::Spill,
                    level: spill_level,
                    kernel: k.base_name.clone(),
                    arch: arch.clone(),
                    file: k.source.clone(),
                    line,
                    located,
                    message: format!("{head}; `cargo occ explain {}` says why", k.short_name),
                });
            }
            for (file, line, stores, loads, in_loop) in by_line(sites) {
                out.push(Alert {
                    rule: Rule::Spill,
                    level: spill_level,
                    kernel: k.base_name.clone(),
                    arch: arch.clone(),
                    file,
                    line,
                    located: Located::Recorded,
                    message: format!(
                        "{head}: {stores} B stored and {loads} B loaded at this line{in_loop}"
                    ),
                });
            }
        }
    }
    for f in diff.into_iter().flat_map(|d| &d.findings) {
        let near = f.has(Cause::NearCliff);
        let rule = match f.verdict {
            Verdict::Regression => Rule::Regression,
            _ if near => Rule::NearCliff,
            _ => continue,
        };
        crate::work::step(1);
        let kernel = kernel_of
            .get(&(f.kernel.as_str(), f.source.as_str()))
            .copied();
        let (file, line, located) = match kernel.and_then(|k| recorded_line(k, &f.arch)) {
            Some((file, line)) => (file, line, Located::Recorded),
            None => {
                let short = kernel.map_or(f.kernel.as_str(), |k| k.short_name.as_str());
                let (line, located) = at_definition(&f.source, short);
                (f.source.clone(), line, located)
            }
        };
        let mut message = format!("{} on {}: {}", f.kernel, f.arch, f.texts().join(", "));
        if !f.also.is_empty() {
            message.push_str(&format!("; also {}", f.also_texts().join(", ")));
        }
        out.push(Alert {
            rule,
            level: if rule == Rule::Regression {
                Level::Error
            } else {
                Level::Warning
            },
            kernel: f.kernel.clone(),
            arch: f.arch.clone(),
            file,
            line,
            located,
            message,
        });
    }
    let mut out = one_per_line(out);
    for a in out.iter_mut().filter(|a| a.located == Located::File) {
        a.message
            .push_str(" (at line 1: the kernel's __global__ definition was not found in the file)");
    }
    out
}

/// The spill sites of one kernel × arch by line: the file, the line, the
/// bytes stored and loaded there, and where the line is in loops
/// (` (loop at :10)`, ` (loop at :10 and outside it)`, empty outside
/// any). A line in and out of a loop is two sites in the manifest
/// (`SpillSite` is per line and loop) and one place in the source.
fn by_line(sites: &[crate::compiler::lines::SpillSite]) -> Vec<(String, u32, u32, u32, String)> {
    type Line = (u32, u32, Vec<u32>, bool);
    let mut lines: Vec<((String, u32), Line)> = Vec::new();
    let mut index: HashMap<(&str, u32), usize> = HashMap::new();
    for site in sites {
        crate::work::step(1);
        let at = *index
            .entry((site.file.as_str(), site.line.max(1)))
            .or_insert_with(|| {
                lines.push((
                    (site.file.clone(), site.line.max(1)),
                    (0, 0, Vec::new(), false),
                ));
                lines.len() - 1
            });
        let (stores, loads, loops, outside) = &mut lines[at].1;
        *stores = stores.saturating_add(site.stores);
        *loads = loads.saturating_add(site.loads);
        match site.loop_line {
            Some(l) if !loops.contains(&l) => loops.push(l),
            Some(_) => {}
            None => *outside = true,
        }
    }
    lines
        .into_iter()
        .map(|((file, line), (stores, loads, loops, outside))| {
            let at: Vec<String> = loops.iter().map(|l| format!(":{l}")).collect();
            let in_loop = match (at.len(), outside) {
                (0, _) => String::new(),
                (1, false) => format!(" (loop at {})", at[0]),
                (_, false) => format!(" (loops at {})", at.join(", ")),
                (1, true) => format!(" (loop at {} and outside it)", at[0]),
                (_, true) => format!(" (loops at {} and outside them)", at.join(", ")),
            };
            (file, line, stores, loads, in_loop)
        })
        .collect()
}

/// One alert per rule and source line: alerts of one rule at one line
/// (several kernels or archs there, such as a header's line inlined into
/// each) become one, with every kernel and arch named, every distinct
/// message joined by `; `, and the most severe level. Code scanning and
/// the runner's annotations show one entry per result, so two results at
/// one line would say the same place twice. In order of first appearance.
fn one_per_line(alerts: Vec<Alert>) -> Vec<Alert> {
    /// A list in order of first appearance, each item once.
    #[derive(Default)]
    struct Distinct(Vec<String>, HashSet<String>);
    impl Distinct {
        fn add(&mut self, item: String) {
            if self.1.insert(item.clone()) {
                self.0.push(item);
            }
        }
    }
    let mut groups: Vec<(Alert, [Distinct; 3])> = Vec::new();
    let mut index: HashMap<(Rule, String, u32), usize> = HashMap::new();
    for a in alerts {
        crate::work::step(1);
        let key = (a.rule, a.file.clone(), a.line);
        let Some(&i) = index.get(&key) else {
            let mut lists: [Distinct; 3] = Default::default();
            lists[0].add(a.kernel.clone());
            lists[1].add(a.arch.clone());
            lists[2].add(a.message.clone());
            index.insert(key, groups.len());
            groups.push((a, lists));
            continue;
        };
        let (first, [kernels, archs, messages]) = &mut groups[i];
        if a.level == Level::Error {
            first.level = Level::Error;
        }
        first.located = match (first.located, a.located) {
            (Located::Recorded, _) | (_, Located::Recorded) => Located::Recorded,
            (Located::Definition, _) | (_, Located::Definition) => Located::Definition,
            _ => Located::File,
        };
        kernels.add(a.kernel);
        archs.add(a.arch);
        messages.add(a.message);
    }
    groups
        .into_iter()
        .map(|(a, [kernels, archs, messages])| Alert {
            kernel: kernels.0.join(", "),
            arch: archs.0.join(", "),
            message: messages.0.join("; "),
            ..a
        })
        .collect()
}

/// The line the manifest records for a kernel on an arch: its peak
/// register pressure, else its first spill site.
fn recorded_line(k: &Kernel, arch: &str) -> Option<(String, u32)> {
    let lines = k.archs.get(arch)?.lines.as_ref()?;
    if let Some(p) = &lines.peak_pressure {
        return Some((p.file.clone(), p.line.max(1)));
    }
    lines
        .spills
        .first()
        .map(|s| (s.file.clone(), s.line.max(1)))
}

/// Escapes a workflow command's message (`%`, CR, LF; any other character
/// no name may hold as [`crate::compiler::names::shown`] writes it).
fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
        .chars()
        .fold(String::with_capacity(s.len()), |mut out, c| {
            if crate::compiler::names::is_refused(c) {
                out.extend(c.escape_default());
            } else {
                out.push(c);
            }
            out
        })
}

/// What a SARIF `uri` may hold of a path as it is: RFC 3986's unreserved
/// characters and `/`, the separator of its segments. Everything else
/// (`%`, `#`, `?`, a space, every byte outside ASCII) is percent-encoded,
/// so that the URI names the file and nothing after a `#` or `?` is read
/// as a fragment or a query.
const URI_PATH: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

/// `path` (relative, `/`-separated) as a SARIF `uri`: percent-encoded
/// (all but RFC 3986's unreserved characters and `/`); `kernels/hot ü#1.cu`
/// gives `kernels/hot%20%C3%BC%231.cu`.
pub fn uri(path: &str) -> String {
    percent_encoding::utf8_percent_encode(path, URI_PATH).to_string()
}

/// Escapes a workflow command's property value (also `:` and `,`).
fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// The GitHub Actions workflow command of an alert:
/// `::error file=kernels/q.cu,line=142,title=occ/spill::…`, with `path` the
/// file as the repository names it (relative to its root).
pub fn workflow_command(alert: &Alert, path: &str) -> String {
    format!(
        "::{} file={},line={},title={}::{}",
        alert.level.word(),
        escape_property(path),
        alert.line,
        escape_property(&format!("{} ({})", alert.rule.id(), alert.arch)),
        escape_data(&alert.message)
    )
}

/// The SARIF 2.1.0 log of `alerts`: one run of the tool `occ` (version
/// `version`), its rules, one result per alert located at
/// `path(alert.file)` (relative to the repository root, `%SRCROOT%`,
/// percent-encoded by [`uri`]) and its line. Pretty JSON with a trailing newline.
pub fn sarif(alerts: &[Alert], version: &str, path: &dyn Fn(&str) -> String) -> String {
    let rules: Vec<Value> = Rule::ALL
        .iter()
        .map(|r| {
            json!({
                "id": r.id(),
                "name": r.name(),
                "shortDescription": { "text": r.description() },
                "helpUri": "https://github.com/occ-rs/occ/blob/main/docs/GUIDE.md#gate-occupancy-in-ci",
                "defaultConfiguration": {
                    "level": if *r == Rule::Regression { "error" } else { "warning" }
                }
            })
        })
        .collect();
    let results: Vec<Value> = alerts
        .iter()
        .map(|a| {
            let index = Rule::ALL.iter().position(|r| *r == a.rule).unwrap_or(0);
            json!({
                "ruleId": a.rule.id(),
                "ruleIndex": index,
                "level": a.level.word(),
                "message": { "text": a.message },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": uri(&path(&a.file)), "uriBaseId": "%SRCROOT%" },
                        "region": { "startLine": a.line }
                    },
                    "logicalLocations": [{ "name": a.kernel, "kind": "function" }]
                }],
                "partialFingerprints": {
                    "occKernelArch/v1": format!("{}|{}|{}", a.rule.id(), a.kernel, a.arch)
                },
                "properties": { "arch": a.arch, "kernel": a.kernel, "located": a.located.word() }
            })
        })
        .collect();
    let log = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "occ",
                    "semanticVersion": version,
                    "informationUri": "https://github.com/occ-rs/occ",
                    "rules": rules
                }
            },
            "results": results
        }]
    });
    crate::schema::manifest::to_json_pretty(&log)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_definition_line_skips_comments_strings_and_launch_bounds() {
        let src = "#include <x.h>\n\
                   // __global__ void k(int) {}\n\
                   /* __global__ void k(\n int) */\n\
                   const char* s = \"__global__ void k(\";\n\
                   __device__ void k(float);\n\
                   template <int N>\n\
                   __global__ void __launch_bounds__(256, 2)\n\
                   k(float* x) { x[0] = N; }\n\
                   extern \"C\" __global__ void other(int) {}\n";
        assert_eq!(definition_line(src, "k"), Some(9));
        assert_eq!(definition_line(src, "other"), Some(10));
        assert_eq!(definition_line(src, "missing"), None);
        // A call inside another kernel's body is not a definition.
        let src = "__global__ void a() { k(); }\n__global__ void k() {}\n";
        assert_eq!(definition_line(src, "k"), Some(2));
    }

    #[test]
    fn a_spill_is_at_its_recorded_site_else_the_definition_else_line_1() {
        use crate::compare::tests::{arch, lock};
        let l = lock(&[("k", arch(32, 64, 4))]);
        let mut m = crate::assemble::lock_manifest(&l, &[], std::path::Path::new("occ.lock"))
            .expect("manifest");
        let none = |_: &str| None;
        let a = alerts(&m, None, false, &none);
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].rule, a[0].level), (Rule::Spill, Level::Warning));
        assert_eq!((a[0].line, a[0].located), (1, Located::File));
        assert!(
            a[0].message.ends_with("was not found in the file)"),
            "{}",
            a[0].message
        );
        let text = |_: &str| Some("// k\n\n__global__ void k(float *x) {}\n".to_string());
        let a = alerts(&m, None, true, &text);
        assert_eq!(
            (a[0].line, a[0].located, a[0].level),
            (3, Located::Definition, Level::Error)
        );
        assert_eq!(a[0].file, "k.cu");
        if let Some(k) = m.kernels[0].archs.get_mut("sm_80") {
            k.lines = Some(crate::compiler::lines::SourceLines {
                spills: vec![crate::compiler::lines::SpillSite {
                    file: "kernels/h.cuh".into(),
                    line: 12,
                    loop_line: Some(10),
                    stores: 8,
                    loads: 8,
                }],
                peak_pressure: None,
            });
        }
        let a = alerts(&m, None, false, &text);
        assert_eq!(
            (a[0].file.as_str(), a[0].line, a[0].located),
            ("kernels/h.cuh", 12, Located::Recorded)
        );
        assert!(a[0].message.contains("(loop at :10)"), "{}", a[0].message);
        let log: Value =
            serde_json::from_str(&sarif(&a, "0.1.0", &|f| format!("app/{f}"))).expect("json");
        let r = &log["runs"][0]["results"][0];
        assert_eq!(
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            "app/kernels/h.cuh"
        );
        assert_eq!(
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
            12
        );
        assert_eq!(r["properties"]["located"], "recorded");
    }

    #[test]
    fn one_result_per_line_and_rule() {
        use crate::compare::tests::{arch, lock};
        use crate::compiler::lines::{SourceLines, SpillSite};
        let l = lock(&[("k", arch(32, 64, 24)), ("j", arch(32, 64, 4))]);
        let mut m = crate::assemble::lock_manifest(&l, &[], std::path::Path::new("occ.lock"))
            .expect("manifest");
        let site = |line, loop_line, bytes| SpillSite {
            file: "kernels/h.cuh".into(),
            line,
            loop_line,
            stores: bytes,
            loads: bytes,
        };
        // k spills at h.cuh:12 in the loop at :10 and after it, and at :20;
        // j, which inlines the same header, at :12 too.
        let sites = [
            (
                "k",
                vec![site(12, Some(10), 8), site(12, None, 4), site(20, None, 12)],
            ),
            ("j", vec![site(12, None, 4)]),
        ];
        for (name, spills) in sites {
            let k = m.kernels.iter_mut().find(|k| k.name == name).expect(name);
            if let Some(a) = k.archs.get_mut("sm_80") {
                a.lines = Some(SourceLines {
                    spills,
                    peak_pressure: None,
                });
            }
        }
        let a = alerts(&m, None, false, &|_: &str| None);
        let at: Vec<(&str, u32)> = a.iter().map(|a| (a.file.as_str(), a.line)).collect();
        assert_eq!(at, [("kernels/h.cuh", 12), ("kernels/h.cuh", 20)], "{a:#?}");
        let twelve = &a[0];
        assert_eq!(twelve.kernel, "j, k", "{twelve:#?}");
        assert!(
            twelve.message.contains("k spills 48 B on sm_80")
                && twelve.message.contains(
                    "12 B stored and 12 B loaded at this line (loop at :10 and outside it)"
                )
                && twelve.message.contains("j spills 8 B on sm_80"),
            "{}",
            twelve.message
        );
        let log: Value =
            serde_json::from_str(&sarif(&a, "0.1.0", &|f| f.to_string())).expect("json");
        let results = log["runs"][0]["results"].as_array().expect("results");
        let lines: Vec<(String, u64)> = results
            .iter()
            .map(|r| {
                let at = &r["locations"][0]["physicalLocation"];
                (
                    format!("{} {}", r["ruleId"], at["artifactLocation"]["uri"]),
                    at["region"]["startLine"].as_u64().unwrap_or(0),
                )
            })
            .collect();
        let mut unique = lines.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(
            lines.len(),
            unique.len(),
            "two results at one line: {lines:?}"
        );
    }

    #[test]
    fn a_sarif_uri_is_percent_encoded_and_names_the_file() {
        for (path, encoded) in [
            ("kernels/q.cu", "kernels/q.cu"),
            ("kernels/a#1.cu", "kernels/a%231.cu"),
            ("kernels/100%.cu", "kernels/100%25.cu"),
            ("kernels/hot ü.cu", "kernels/hot%20%C3%BC.cu"),
            ("a?b.cu", "a%3Fb.cu"),
            ("nl\nx.cu", "nl%0Ax.cu"),
        ] {
            assert_eq!(uri(path), encoded);
            let back = percent_encoding::percent_decode_str(encoded).decode_utf8_lossy();
            assert_eq!(back, path);
        }
    }

    #[test]
    fn workflow_commands_escape_what_the_runner_splits_on() {
        let a = Alert {
            rule: Rule::Spill,
            level: Level::Error,
            kernel: "k".into(),
            arch: "sm_80".into(),
            file: "kernels/a,b.cu".into(),
            line: 7,
            located: Located::Definition,
            message: "100% spills\nnext".into(),
        };
        assert_eq!(
            workflow_command(&a, "crate/kernels/a,b.cu"),
            "::error file=crate/kernels/a%2Cb.cu,line=7,title=occ/spill (sm_80)::100%25 spills%0Anext"
        );
    }
}
