//! The end of a build: the full report to a stable file, and at most one
//! cargo warning that says what is notable.
//!
//! The report goes to `$OUT_DIR/occ/report.txt` and, when `$OUT_DIR` lies
//! in cargo's target folder, to `<target>/<profile>/occ/<package>/report.txt`,
//! a path that does not change between builds. It holds the table
//! (`cargo occ report`'s, which says where each kernel spills), every
//! spilling kernel, every spill site (nvdisasm's), the launches measured
//! on a GPU that the lock holds, and the sections the
//! gates add ([`Details`]): every finding their warnings and errors only
//! count. It is written even when a gate fails the build.
//!
//! Warnings scale with kinds, not kernels: each is one line with a count and
//! the first [`NAMED`] names. This module's are the spill line, printed
//! only when a kernel spills, and one line per kind of ptxas warning
//! (`occ_model::schema::manifest::WarningKind`), quoting ptxas's words and naming
//! the kernels and archs it was printed for; the report lists every
//! kernel × arch with each of its warnings once. A build with nothing
//! notable prints nothing. (The gate's own lines come from
//! [`crate::stage::gate`].)

use crate::leaf::directives::Directives;
use crate::leaf::error::Result;
use crate::leaf::files::write_atomic;
use crate::stage::inputs::Inputs;
use occ_model::render::markdown::Baseline;
use occ_model::render::text_table;
use occ_model::schema::manifest::{Manifest, WarningKind};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// The report file's name.
pub const REPORT_FILE: &str = "report.txt";

/// How many names a warning line gives before it counts the rest.
pub(crate) const NAMED: usize = 5;

/// What the gates add to the report: the full lists that their warnings
/// and errors only count, and whether one of them failed the build.
#[derive(Debug)]
pub(crate) struct Details {
    /// Where the report will be (the stable path when there is one).
    report: PathBuf,
    /// Titled sections, in the order the gates added them.
    sections: Vec<(String, String)>,
    /// A gate failed the build: its error says what the warning would.
    pub failed: bool,
    /// The comparison with the lock, for the step summary (set by the
    /// baseline gate; `None` before it ran).
    pub baseline: Option<Baseline>,
}

impl Details {
    /// No sections yet, for a build into `out_dir` of `package`.
    pub(crate) fn new(out_dir: &Path, package: &str) -> Details {
        Details {
            report: report_path(out_dir, package),
            sections: Vec::new(),
            failed: false,
            baseline: None,
        }
    }

    /// The path a warning or error names for the full list.
    pub(crate) fn report(&self) -> &Path {
        &self.report
    }

    /// Adds a section under `title`.
    pub(crate) fn add(&mut self, title: String, body: String) {
        self.sections.push((title, body));
    }
}

/// Writes the report, appends the Markdown step summary under GitHub
/// Actions, and raises the report's warning, if any (not when a gate
/// failed: its error names the spills); returns the stable path of the
/// report.
pub(crate) fn write(
    manifest: &Manifest,
    details: &Details,
    inputs: &Inputs,
    directives: &mut Directives,
) -> Result<PathBuf> {
    let out_dir = inputs.out_dir.as_path();
    if let Some(actions) = &inputs.github {
        let baseline = details.baseline.clone().unwrap_or_else(|| {
            Baseline::NotCompared(if details.failed {
                "the build failed before the comparison".into()
            } else {
                "the build did not compare with the lock".into()
            })
        });
        let md = occ_model::render::markdown::markdown(manifest, &baseline);
        let note = "\n_Annotations at the source lines: run `cargo occ check` in a later step \
                    (a build script's workflow commands do not reach the runner)._\n";
        actions.append_summary(&format!("{md}{note}"))?;
    }
    let mut text = format!(
        "occupancy of {} ({} x {}, nvcc {})\n\n{}",
        manifest.package,
        text_table::count(manifest.kernels.len(), "kernel"),
        text_table::count(manifest.archs.len(), "arch"),
        manifest.nvcc,
        text_table::table_without_cliffs(manifest)
    );
    text.push_str(&text_table::cliff_lines(manifest, None));
    if let Some(spills) = spill_table(manifest) {
        text.push_str(&format!("\nspilling kernels\n{spills}"));
    }
    if let Some(sites) = site_table(manifest) {
        text.push_str(&format!("\nspill sites (nvdisasm)\n{sites}"));
    }
    if let Some(warnings) = warning_table(manifest) {
        text.push_str(&format!("\nptxas warnings\n{warnings}"));
    }
    if let Some(launches) = text_table::code_launches(manifest) {
        text.push_str(&format!("\n{launches}"));
    }
    if let Some(measured) = text_table::measured_table(manifest) {
        text.push_str(&format!(
            "\nmeasured on a GPU (occ.lock; `tuned` sites bake the measured best)\n{measured}"
        ));
    }
    for (title, body) in &details.sections {
        text.push_str(&format!("\n{title}\n{body}"));
    }
    write_atomic(&out_dir.join(REPORT_FILE), text.as_bytes())?;
    let shown = details.report.clone();
    if shown != out_dir.join(REPORT_FILE) {
        write_atomic(&shown, text.as_bytes())?;
    }
    // ptxas's words are not the gate's: shown also when a gate failed.
    for line in warning_lines(manifest, &shown) {
        directives.warn(line);
    }
    if let Some(line) = contradiction_line(manifest, &shown) {
        directives.warn(line);
    }
    if details.failed {
        return Ok(shown);
    }
    if let Some(line) = line(manifest, &shown) {
        directives.warn(line);
    }
    Ok(shown)
}

/// One warning for every launch of the C++ host code that build.rs's
/// `.launch` contradicts (build.rs wins): the first, and how many more.
fn contradiction_line(manifest: &Manifest, report: &Path) -> Option<String> {
    let all = occ_model::compiler::launches::contradictions(manifest);
    let first = all.first()?;
    let more = match all.len() - 1 {
        0 => String::new(),
        n => format!(" ({} like it)", text_table::count(n, "other")),
    };
    Some(format!("{first}{more}; report: {}", report.display()))
}

/// Every spilling kernel × arch with its bytes, `None` when none spills.
fn spill_table(manifest: &Manifest) -> Option<String> {
    let mut rows: Vec<[String; 6]> = vec![[
        "kernel".into(),
        "arch".into(),
        "source".into(),
        "registers".into(),
        "spill stores".into(),
        "spill loads".into(),
    ]];
    for k in &manifest.kernels {
        for (arch, a) in k.archs.iter().filter(|(_, a)| a.facts.spills()) {
            rows.push([
                k.base_name.clone(),
                arch.clone(),
                k.source.clone(),
                a.facts.registers.to_string(),
                a.facts.spill_stores.to_string(),
                a.facts.spill_loads.to_string(),
            ]);
        }
    }
    (rows.len() > 1).then(|| text_table::align(&rows))
}

/// Every spill site of every kernel × arch (from nvdisasm), `None` when
/// there is none.
fn site_table(manifest: &Manifest) -> Option<String> {
    let mut rows: Vec<[String; 6]> = vec![[
        "kernel".into(),
        "arch".into(),
        "line".into(),
        "loop".into(),
        "stores".into(),
        "loads".into(),
    ]];
    for k in &manifest.kernels {
        for (arch, a) in &k.archs {
            for site in a.lines.iter().flat_map(|l| &l.spills) {
                rows.push([
                    k.base_name.clone(),
                    arch.clone(),
                    format!("{}:{}", site.file, site.line),
                    site.loop_line.map_or("-".into(), |l| format!(":{l}")),
                    site.stores.to_string(),
                    site.loads.to_string(),
                ]);
            }
        }
    }
    (rows.len() > 1).then(|| text_table::align(&rows))
}

/// Every ptxas warning of every kernel × arch, each once, `None` when
/// there is none.
fn warning_table(manifest: &Manifest) -> Option<String> {
    let mut rows: Vec<[String; 4]> = vec![[
        "kernel".into(),
        "arch".into(),
        "source".into(),
        "ptxas warning".into(),
    ]];
    for k in &manifest.kernels {
        for (arch, a) in &k.archs {
            for w in &a.warnings {
                rows.push([
                    k.base_name.clone(),
                    arch.clone(),
                    k.source.clone(),
                    w.text.clone(),
                ]);
            }
        }
    }
    (rows.len() > 1).then(|| text_table::align(&rows))
}

/// One line per kind of ptxas warning: ptxas's words (the first of the
/// kind's), what they mean, and the kernels with the archs each was
/// warned on (the first [`NAMED`], then a count).
fn warning_lines(manifest: &Manifest, report: &Path) -> Vec<String> {
    // Per kind, in order of first appearance: its distinct words, and
    // each kernel's archs.
    // (Each text and kernel is found through a set and a map, so that a
    // warning on every kernel of a big build costs one step per warning.)
    struct Kind<'a> {
        kind: &'a WarningKind,
        texts: Vec<&'a str>,
        seen: HashSet<&'a str>,
        kernels: Vec<(&'a str, Vec<&'a str>)>,
        at: HashMap<&'a str, usize>,
    }
    let mut kinds: Vec<Kind<'_>> = Vec::new();
    for k in &manifest.kernels {
        for (arch, a) in &k.archs {
            for w in &a.warnings {
                let same = |x: &Kind<'_>| {
                    std::mem::discriminant(x.kind) == std::mem::discriminant(&w.kind)
                };
                let i = match kinds.iter().position(same) {
                    Some(i) => i,
                    None => {
                        kinds.push(Kind {
                            kind: &w.kind,
                            texts: Vec::new(),
                            seen: HashSet::new(),
                            kernels: Vec::new(),
                            at: HashMap::new(),
                        });
                        kinds.len() - 1
                    }
                };
                let kind = &mut kinds[i];
                if kind.seen.insert(&w.text) {
                    kind.texts.push(&w.text);
                }
                match kind.at.get(k.base_name.as_str()) {
                    Some(&i) => {
                        let archs = &mut kind.kernels[i].1;
                        if !archs.contains(&arch.as_str()) {
                            archs.push(arch);
                        }
                    }
                    None => {
                        kind.at.insert(&k.base_name, kind.kernels.len());
                        kind.kernels.push((&k.base_name, vec![arch.as_str()]));
                    }
                }
            }
        }
    }
    kinds
        .iter()
        .map(|kind| {
            let like = match kind.texts.len() {
                1 => String::new(),
                n => format!(" and {} like it", text_table::count(n - 1, "other")),
            };
            let named: Vec<String> = kind
                .kernels
                .iter()
                .take(NAMED)
                .map(|(name, archs)| format!("{name} ({})", archs.join(", ")))
                .collect();
            let more = match kind.kernels.len().saturating_sub(NAMED) {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            format!(
                "occ: ptxas warns for {}: {}{more}: \"{}\"{like} ({}); report: {}",
                text_table::count(kind.kernels.len(), "kernel"),
                named.join(", "),
                kind.texts.first().copied().unwrap_or_default(),
                kind.kind.title(),
                report.display()
            )
        })
        .collect()
}

/// Where the report of a build into `out_dir` of `package` is shown: the
/// stable path when there is one, else `out_dir`'s `report.txt`.
pub(crate) fn report_path(out_dir: &Path, package: &str) -> PathBuf {
    stable_path(out_dir, package).unwrap_or_else(|| out_dir.join(REPORT_FILE))
}

/// `<target>/<profile>/occ/<package>/report.txt` for an `out_dir` of
/// `<target>/<profile>/build/<package>-<hash>/out/occ`.
fn stable_path(out_dir: &Path, package: &str) -> Option<PathBuf> {
    let build = out_dir.parent()?.parent()?.parent()?;
    if build.file_name()? != "build" || package.is_empty() {
        return None;
    }
    Some(build.parent()?.join("occ").join(package).join(REPORT_FILE))
}

/// The summary warning, when something is notable.
fn line(manifest: &Manifest, report: &Path) -> Option<String> {
    let mut spilling: Vec<(String, Vec<String>, u32, String)> = Vec::new();
    for k in &manifest.kernels {
        let archs: Vec<String> = k
            .archs
            .iter()
            .filter(|(_, a)| a.facts.spills())
            .map(|(arch, _)| arch.clone())
            .collect();
        if !archs.is_empty() {
            // The arch that spills most, and the line it spills most at.
            let most = k.archs.values().max_by_key(|a| a.facts.spill_bytes());
            let bytes = most.map_or(0, |a| a.facts.spill_bytes());
            let at = most
                .and_then(|a| a.lines.as_ref())
                .and_then(|l| l.worst())
                .map(|s| format!(" at {}:{}", s.file, s.line))
                .unwrap_or_default();
            spilling.push((k.base_name.clone(), archs, bytes, at));
        }
    }
    if spilling.is_empty() {
        return None;
    }
    let named: Vec<String> = spilling
        .iter()
        .take(NAMED)
        .map(|(name, archs, bytes, at)| format!("{name} ({bytes} B on {}){at}", archs.join(", ")))
        .collect();
    let more = match spilling.len().saturating_sub(NAMED) {
        0 => String::new(),
        n => format!(" and {n} more (all in the report)"),
    };
    let lowest = lowest(manifest)
        .map(|(name, arch, occ, limiter)| {
            format!(
                "; lowest occupancy {} ({name} on {arch}: {limiter})",
                text_table::percent(occ)
            )
        })
        .unwrap_or_default();
    Some(format!(
        "occ: {} x {}; {} {} registers: {}{more}{lowest}; report: {}",
        text_table::count(manifest.kernels.len(), "kernel"),
        text_table::count(manifest.archs.len(), "arch"),
        text_table::count(spilling.len(), "kernel"),
        if spilling.len() == 1 {
            "spills"
        } else {
            "spill"
        },
        named.join(", "),
        report.display()
    ))
}

/// The occupancy at a best launch; 0 where there is none.
fn occupancy(best: Option<&occ_model::schema::manifest::Best>) -> f64 {
    best.map_or(0.0, |b| b.occupancy)
}

/// The kernel × arch with the lowest occupancy, with its binding limiters.
fn lowest(manifest: &Manifest) -> Option<(String, String, f64, String)> {
    manifest
        .kernels
        .iter()
        .flat_map(|k| k.archs.iter().map(move |(arch, a)| (k, arch, a)))
        .map(|(k, arch, a)| (k, arch, a.best.as_ref()))
        // A kernel that cannot launch keeps none resident: the lowest.
        .min_by(|x, y| occupancy(x.2).total_cmp(&occupancy(y.2)))
        .map(|(k, arch, best)| {
            (
                k.base_name.clone(),
                arch.clone(),
                occupancy(best),
                best.map_or_else(
                    || occ_model::schema::manifest::CANNOT_LAUNCH.into(),
                    |b| b.limiters.join(" + "),
                ),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_spilling_kernel_is_singular() {
        let path = Path::new("occ.lock");
        let lock = occ_model::schema::lock::Lock::from_text(
            include_str!("../../../fuzz/seeds/occ.lock"),
            path,
        )
        .expect("lock");
        let mut m =
            occ_model::assemble::lock_manifest(&lock, &["sm_80".into()], path).expect("manifest");
        m.kernels.truncate(1);
        assert!(line(&m, Path::new("report.txt")).is_none());
        if let Some(a) = m.kernels[0].archs.get_mut("sm_80") {
            a.resources.facts.spill_stores = 8;
        }
        let one = line(&m, Path::new("report.txt")).expect("a spill line");
        assert!(
            one.starts_with("occ: 1 kernel x 1 arch; 1 kernel spills registers: "),
            "{one}"
        );
        let mut two = occ_model::assemble::lock_manifest(&lock, &[], path).expect("manifest");
        for k in &mut two.kernels[..2] {
            if let Some(a) = k.archs.get_mut("sm_90") {
                a.resources.facts.spill_loads = 4;
            }
        }
        let two = line(&two, Path::new("report.txt")).expect("a spill line");
        assert!(
            two.starts_with("occ: 5 kernels x 3 archs; 2 kernels spill registers: "),
            "{two}"
        );
    }

    /// The manifest of nvcc 13.5's `-cubin -arch=sm_80 -maxrregcount=16
    /// -Xptxas -v kernels.cu` (tests/fixtures/regen.sh): ptxas raised the
    /// cap to 24 for all 13 kernels, and one of them recurses.
    fn capped_at_16() -> Manifest {
        let log = include_str!("../../../tests/fixtures/ptxas-13.5-maxrregcount16-sm_80.log");
        let args = ["-maxrregcount".to_string(), "16".to_string()];
        let signatures = occ_model::compiler::params::Signatures::default();
        let job = occ_model::compiler::analyze::JobText {
            source: "kernels/kernels.cu",
            arch: "sm_80",
            name: "kernels",
            args: &args,
            log,
            // The PTX of the same run: its entries are the job's kernels.
            ptx: include_str!("../../../tests/fixtures/ptx-13.5-kernels-sm_80.ptx"),
            signatures: &signatures,
            launches: &[],
        };
        let jobs =
            [occ_model::compiler::analyze::contribution(job, None).expect("the job's kernels")];
        occ_model::assemble::manifest(&occ_model::assemble::Assembly {
            package: "p",
            origin: occ_model::schema::manifest::Origin::Nvcc,
            nvcc: "V13.5.37",
            archs: &["sm_80".into()],
            jobs: &jobs,
            launches: &[],
            dynamic_smem: &[],
            measured: &[],
            device_code: &[],
            others: None,
        })
        .expect("manifest")
    }

    #[test]
    fn each_kind_of_ptxas_warning_is_one_line_with_its_words() {
        let m = capped_at_16();
        let lines = warning_lines(&m, Path::new("report.txt"));
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(
            lines[0].starts_with("occ: ptxas warns for 13 kernels: ")
                && lines[0].contains(" (sm_80), ")
                && lines[0].contains(" and 8 more: \"For profile sm_80 adjusting per thread register count of 16 to lower bound of 24\" (the register cap asked for is outside the arch's bounds, so ptxas applies its bound); report: report.txt"),
            "{}",
            lines[0]
        );
        assert_eq!(
            lines[1],
            "occ: ptxas warns for 1 kernel: calls_recursive (sm_80): \"Stack size for entry function \
             '_Z15calls_recursivePi' cannot be statically determined\" (the stack size cannot be \
             statically determined); report: report.txt"
        );
        // Two archs' words of one kind: one line, the first words and a count.
        let mut two = m.clone();
        for k in &mut two.kernels {
            let mut a = k.archs["sm_80"].clone();
            for w in &mut a.warnings {
                w.text = w.text.replace("sm_80", "sm_90");
            }
            k.archs.insert("sm_90".into(), a);
        }
        let lines = warning_lines(&two, Path::new("report.txt"));
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(lines[0].contains(" (sm_80, sm_90), "), "{}", lines[0]);
        assert!(
            lines[0].contains("lower bound of 24\" and 1 other like it ("),
            "{}",
            lines[0]
        );
        // Nothing warned, nothing said.
        let mut quiet = m;
        for k in &mut quiet.kernels {
            for a in k.archs.values_mut() {
                a.warnings.clear();
            }
        }
        assert!(warning_lines(&quiet, Path::new("report.txt")).is_empty());
        assert!(warning_table(&quiet).is_none());
    }

    #[test]
    fn the_report_lists_every_ptxas_warning_once_per_kernel_and_arch() {
        let table = warning_table(&capped_at_16()).expect("a table");
        let rows: Vec<&str> = table.lines().filter(|r| r.contains(" sm_80 ")).collect();
        // 13 kernels' cap warning, and the recursive kernel's own.
        assert_eq!(rows.len(), 14, "{table}");
        assert_eq!(
            rows.iter()
                .filter(|r| r.contains("adjusting per thread register count"))
                .count(),
            13
        );
        assert!(rows.iter().any(|r| r.starts_with("calls_recursive ")
            && r.contains(" sm_80 ")
            && r.contains("kernels/kernels.cu")
            && r.ends_with("cannot be statically determined")));
    }

    #[test]
    fn the_stable_path_is_beside_cargos_build_folder() {
        let out = Path::new("/w/target/debug/build/app-0123abcd/out/occ");
        assert_eq!(
            stable_path(out, "app"),
            Some(PathBuf::from("/w/target/debug/occ/app/report.txt"))
        );
        assert_eq!(stable_path(Path::new("/tmp/x/out/occ"), "app"), None);
        assert_eq!(stable_path(out, ""), None);
    }
}
