//! `cargo occ report`: every kernel's resources and occupancy, as a terminal
//! table, Markdown, JSON, or a self-contained HTML page with NVIDIA's
//! calculator charts.
//!
//! The HTML page reads top to bottom as a person triages: a summary (kernels
//! × archs, the lowest occupancy, spills, regressions against the lock),
//! then the table (one row per kernel × arch, each linking to its section;
//! spilling, regressed and low-occupancy rows marked, with a legend), then
//! one collapsed `<details>` section per kernel, open only for the notable
//! ones (spills, occupancy below 50%, a regression). Charts are inline SVG
//! drawn only where they are wanted ([`Charts`]), so the page stays a few
//! megabytes at hundreds of kernels. No JavaScript.

use crate::locate::{Locate, Located};
use crate::render as report;
use anyhow::Context;
use occ_model::analyze::resources;
use occ_model::arch;
use occ_model::compare::{self, Reason, Verdict};
use occ_model::lock::Lock;
use occ_model::manifest::{Kernel, KernelArch, Manifest, Origin};
use occ_model::occupancy::{occupancy, KernelResources, Launch};
use occ_model::table::percent;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns for a terminal.
    Table,
    /// Markdown for a pull-request comment or $GITHUB_STEP_SUMMARY: summary and changes first, details collapsed, at most 60,000 characters.
    Markdown,
    /// JSON rows.
    Json,
    /// One self-contained HTML file with occupancy charts per kernel.
    Html,
}

/// Which kernels the HTML report draws charts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Charts {
    /// Every kernel when the report has at most 64 kernel × arch rows, else only the notable ones.
    Auto,
    /// Only notable kernels: spills, occupancy below 50%, or a regression.
    Notable,
    /// Every kernel (about 20 KB of SVG per kernel × arch).
    All,
}

/// Up to this many kernel × arch rows, `--charts auto` draws every kernel.
const AUTO_ALL_ROWS: usize = 64;

/// Below this occupancy a kernel is notable.
const LOW_OCCUPANCY: f64 = 0.5;

/// Arguments of `cargo occ report`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    #[command(flatten)]
    pub locate: Locate,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Write to this file instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// HTML only: which kernels get charts.
    #[arg(long, value_enum, default_value = "auto", value_name = "WHICH")]
    pub charts: Charts,
    /// The GPU the build is for, as the driver names it (`NVIDIA H100 80GB HBM3`): measurements taken on another GPU are said so (default: OCC_GPU).
    #[arg(long, value_name = "NAME", env = "OCC_GPU")]
    pub gpu: Option<String>,
}

/// Prints or writes the report.
pub fn run(args: ReportArgs) -> anyhow::Result<i32> {
    let found = args.locate.find()?;
    let m = &found.manifest;
    let text = match args.format {
        Format::Table => report::table(m) + &crate::tune::measured_section(m, args.gpu.as_deref()),
        Format::Markdown => report::markdown(m, &baseline(&found)),
        Format::Json => report::json(m),
        Format::Html => html(m, &baseline(&found), args.charts)?,
    };
    match &args.output {
        Some(path) => std::fs::write(path, text)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(0)
}

pub use occ_model::markdown::Baseline;

/// The build compared with its lock, exactly as `cargo occ check` compares
/// them (the lock and thresholds from the build's `gate.json`).
pub fn baseline(found: &Located) -> Baseline {
    if found.manifest.origin == Origin::Lock {
        return Baseline::NotCompared("this build had no nvcc and stands on the lock".into());
    }
    let Some(gate) = &found.gate else {
        return Baseline::NotCompared("the build wrote no gate.json".into());
    };
    let (path, lock) = match found.lock(None) {
        Ok(found) => found,
        Err(e) => return Baseline::NotCompared(format!("the lock could not be read: {e:#}")),
    };
    let lock_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "the lock".into());
    let Some(lock) = lock else {
        return Baseline::NotCompared(format!(
            "no {lock_name} yet (record one with `cargo occ bless`)"
        ));
    };
    let candidate = Lock::from_manifest(&found.manifest);
    Baseline::Compared {
        lock: lock_name,
        diff: compare::compare(&lock, &candidate, &gate.thresholds),
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A size for a person: bytes below 1 KiB (`0`, `32 B`), KiB with one
/// decimal below 10 KiB (`1.5 KiB`), else whole KiB (`146 KiB` for 150000
/// bytes).
pub fn kib(bytes: u32) -> String {
    let k = f64::from(bytes) / 1024.0;
    match bytes {
        0 => "0".into(),
        1..1024 => format!("{bytes} B"),
        _ if k < 9.95 => format!("{k:.1} KiB"),
        _ => format!("{k:.0} KiB"),
    }
}

/// A table cell with a size in KiB and its exact bytes in a tooltip.
fn size_cell(bytes: u32) -> String {
    format!(
        "<td class=n title=\"{bytes} bytes\">{}</td>",
        esc(&kib(bytes))
    )
}

/// The id of a kernel's section, and of one arch inside it. Kernel idents
/// are unique Rust identifiers (no `-`), so the ids never collide.
fn kernel_id(k: &Kernel) -> String {
    format!("k-{}", k.ident)
}

fn arch_id(k: &Kernel, arch: &str) -> String {
    format!("k-{}-{arch}", k.ident)
}

/// What makes one kernel × arch worth a look.
#[derive(Debug, Default)]
struct Marks<'a> {
    spills: bool,
    low: bool,
    /// The regression's reasons, when it regressed.
    regressed: Option<&'a [Reason]>,
}

impl Marks<'_> {
    fn notable(&self) -> bool {
        self.spills || self.low || self.regressed.is_some()
    }

    /// The row's classes: `spill`, `regressed`, `low`.
    fn classes(&self) -> String {
        let mut c = Vec::new();
        if self.spills {
            c.push("spill");
        }
        if self.regressed.is_some() {
            c.push("regressed");
        }
        if self.low {
            c.push("low");
        }
        c.join(" ")
    }
}

/// Regressions by (base name, source, arch).
type Regressed<'a> = BTreeMap<(&'a str, &'a str, &'a str), &'a [Reason]>;

fn marks<'a>(kernel: &Kernel, arch: &str, k: &KernelArch, regressed: &Regressed<'a>) -> Marks<'a> {
    Marks {
        spills: k.spills(),
        low: k.judged().occupancy < LOW_OCCUPANCY,
        regressed: regressed
            .get(&(kernel.base_name.as_str(), kernel.source.as_str(), arch))
            .copied(),
    }
}

fn kernel_notable(kernel: &Kernel, regressed: &Regressed<'_>) -> bool {
    kernel
        .archs
        .iter()
        .any(|(arch, k)| marks(kernel, arch, k, regressed).notable())
}

/// One chart: occupancy (percent) against x, with the current point marked.
struct Chart<'a> {
    title: String,
    x_label: &'a str,
    points: Vec<(f64, f64)>,
    current: (f64, f64),
    current_label: String,
}

/// Width and height of one chart: three fit side by side in a 1280 px window.
const CHART_SIZE: (u32, u32) = (380, 210);

fn draw_error(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("cannot draw a chart: {e}")
}

/// The step line through sampled points: occupancy holds until the next
/// sample that differs, so runs of equal values collapse to their ends.
fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (i, &(x, y)) in points.iter().enumerate() {
        let last = i + 1 == points.len();
        match out.last() {
            Some(&(_, prev)) if prev == y && !last => {}
            Some(&(_, prev)) => {
                out.push((x, prev));
                if prev != y {
                    out.push((x, y));
                }
            }
            None => out.push((x, y)),
        }
    }
    out
}

/// Plotters' SVG without what the page's style already says: `opacity="1"`,
/// black fill and the font family on every text, font sizes to 15 digits.
/// A quarter smaller.
fn compact_svg(svg: &str) -> String {
    let svg = svg
        .replace(" opacity=\"1\"", "")
        .replace(" font-family=\"sans-serif\"", "")
        .replace(" fill=\"#000000\"", "");
    let key = "font-size=\"";
    let mut out = String::with_capacity(svg.len());
    let mut rest = svg.as_str();
    while let Some(i) = rest.find(key) {
        let (head, tail) = rest.split_at(i + key.len());
        out.push_str(head);
        let end = tail.find('"').unwrap_or(tail.len());
        match tail[..end].parse::<f64>() {
            Ok(size) => {
                let _ = write!(out, "{size:.1}");
            }
            Err(_) => out.push_str(&tail[..end]),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

fn svg(chart: &Chart<'_>) -> anyhow::Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, CHART_SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        let x_max = chart
            .points
            .iter()
            .map(|p| p.0)
            .fold(chart.current.0, f64::max)
            .max(1.0);
        let mut c = ChartBuilder::on(&root)
            .caption(
                format!(
                    "{} (now {}: {:.0}%)",
                    chart.title, chart.current_label, chart.current.1
                ),
                ("sans-serif", 13),
            )
            .margin(6)
            .x_label_area_size(32)
            .y_label_area_size(36)
            .build_cartesian_2d(0f64..x_max, 0f64..105f64)
            .map_err(draw_error)?;
        c.configure_mesh()
            .x_desc(chart.x_label)
            .y_desc("occupancy %")
            .x_labels(6)
            .y_labels(6)
            .max_light_lines(0)
            .bold_line_style(RGBColor(232, 232, 232))
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .label_style(("sans-serif", 11))
            .draw()
            .map_err(draw_error)?;
        c.draw_series(LineSeries::new(steps(&chart.points), BLUE.stroke_width(2)))
            .map_err(draw_error)?;
        c.draw_series(std::iter::once(Circle::new(chart.current, 4, RED.filled())))
            .map_err(draw_error)?;
        root.present().map_err(draw_error)?;
    }
    Ok(compact_svg(&out))
}

fn occ_at(a: &'static arch::Arch, res: &KernelResources, block: u32) -> Option<f64> {
    occupancy(a, res, &Launch::new(block))
        .ok()
        .map(|o| o.occupancy * 100.0)
}

/// The three charts of NVIDIA's occupancy calculator for one kernel × arch.
fn charts(arch_name: &str, k: &KernelArch) -> anyhow::Result<[String; 3]> {
    let a = arch::lookup(arch_name).map_err(|e| anyhow::anyhow!("{e}"))?;
    let res = resources(k);
    // The current point: the declared launch, else the best block size.
    let block = k.judged().block_size.max(1);
    let here = k.judged().occupancy * 100.0;
    let max_block = res
        .max_threads_per_block
        .unwrap_or(a.max_threads_per_block)
        .min(a.max_threads_per_block);
    let mut blocks: Vec<(f64, f64)> = (1..=max_block / 32)
        .map(|i| i * 32)
        .filter_map(|b| occ_at(a, &res, b).map(|o| (f64::from(b), o)))
        .collect();
    if max_block % 32 != 0 {
        if let Some(o) = occ_at(a, &res, max_block) {
            blocks.push((f64::from(max_block), o));
        }
    }
    let regs: Vec<(f64, f64)> = (1..=a.max_regs_per_thread)
        .filter_map(|r| {
            let res = KernelResources {
                registers: r,
                ..res
            };
            occ_at(a, &res, block).map(|o| (f64::from(r), o))
        })
        .collect();
    let step = 256u32;
    let smem: Vec<(f64, f64)> = (0..=a.smem_per_block_optin / step)
        .map(|i| i * step)
        .filter_map(|s| {
            let res = KernelResources {
                static_smem: s,
                ..res
            };
            occ_at(a, &res, block).map(|o| (f64::from(s) / 1024.0, o))
        })
        .collect();
    Ok([
        svg(&Chart {
            title: "vs block size".into(),
            x_label: "threads per block",
            points: blocks,
            current: (f64::from(block), here),
            current_label: block.to_string(),
        })?,
        svg(&Chart {
            title: format!("vs registers, {block} threads"),
            x_label: "registers per thread",
            points: regs,
            current: (f64::from(k.registers), here),
            current_label: k.registers.to_string(),
        })?,
        svg(&Chart {
            title: format!("vs shared memory, {block} threads"),
            x_label: "shared memory per block (KiB)",
            points: smem,
            current: (f64::from(k.static_smem) / 1024.0, here),
            current_label: kib(k.static_smem),
        })?,
    ])
}

/// The launch bounds as the source would spell them, if any.
fn launch_bounds(k: &KernelArch) -> Option<String> {
    let lb = &k.launch_bounds;
    let dims = |d: [u32; 3]| match d {
        [x, 1, 1] => x.to_string(),
        [x, y, 1] => format!("{x}×{y}"),
        [x, y, z] => format!("{x}×{y}×{z}"),
    };
    let mut parts = Vec::new();
    if let Some(t) = lb.max_threads {
        parts.push(format!("max {} threads", dims(t)));
    }
    if let Some(t) = lb.req_threads {
        parts.push(format!("exactly {} threads", dims(t)));
    }
    if let Some(b) = lb.min_blocks_per_sm {
        parts.push(format!("min {b} blocks/SM"));
    }
    if let Some(r) = lb.max_registers {
        parts.push(format!("max {r} registers"));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

fn kernel_section(
    kernel: &Kernel,
    regressed: &Regressed<'_>,
    draw: bool,
    out: &mut String,
) -> anyhow::Result<()> {
    let all: Vec<(&String, &KernelArch, Marks<'_>)> = kernel
        .archs
        .iter()
        .map(|(arch, k)| (arch, k, marks(kernel, arch, k, regressed)))
        .collect();
    let notable = all.iter().any(|(_, _, m)| m.notable());
    let _ = write!(
        out,
        "<details class=\"kernel\" id=\"{}\"{}><summary><code>{}</code>",
        kernel_id(kernel),
        if notable { " open" } else { "" },
        esc(&kernel.base_name),
    );
    if all.iter().any(|(_, _, m)| m.regressed.is_some()) {
        out.push_str("<span class=\"badge regressed\">regressed</span>");
    }
    if all.iter().any(|(_, _, m)| m.spills) {
        out.push_str("<span class=\"badge spill\">spills</span>");
    }
    for (arch, k, m) in &all {
        let _ = write!(
            out,
            "<span class=\"badge{}\">{} {}</span>",
            if m.low { " low" } else { "" },
            esc(arch),
            percent(k.judged().occupancy)
        );
    }
    let _ = write!(
        out,
        "<span class=\"src\">{}</span></summary>\n<div class=\"body\"><p class=\"src\">symbol <code>{}</code></p>\n",
        esc(&kernel.source),
        esc(&kernel.name)
    );
    for (arch, k, m) in &all {
        let _ = write!(
            out,
            "<div class=\"arch\" id=\"{}\"><h3>{}</h3><p class=\"facts\">{} registers &middot; \
             <span title=\"{} bytes\">{}</span> static smem &middot; {} &middot; best block {} &middot; \
             occupancy {} ({}) &middot; <span title=\"{} bytes\">{}</span> dynamic smem headroom",
            arch_id(kernel, arch),
            esc(arch),
            k.registers,
            k.static_smem,
            esc(&kib(k.static_smem)),
            if m.spills {
                format!(
                    "<strong class=\"spilled\">{} B spilled ({} stores, {} loads)</strong>",
                    k.spill_bytes(),
                    k.spill_stores,
                    k.spill_loads
                )
            } else {
                "no spills".into()
            },
            k.best.block_size,
            percent(k.best.occupancy),
            esc(&k.best.limiters.join(" + ")),
            k.best.dynamic_smem_headroom,
            esc(&kib(k.best.dynamic_smem_headroom)),
        );
        if let Some(lb) = launch_bounds(k) {
            let _ = write!(out, " &middot; launch bounds: {}", esc(&lb));
        }
        out.push_str("</p>\n");
        if let Some(c) = &k.cliffs {
            if let Ok(a) = arch::lookup(arch) {
                let _ = writeln!(
                    out,
                    "<p class=\"facts\">cliffs at block {}: {}</p>",
                    c.block_size,
                    esc(&c.describe(a))
                );
            }
        }
        // Where, by source line (nvdisasm): `spills at kernels/q.cu:142
        // (loop at :130), peak pressure 255 at :151`.
        if let Some(at) = k.lines.as_ref().map(|l| l.describe()) {
            if !at.is_empty() {
                let _ = writeln!(
                    out,
                    "<p class=\"facts\">{}{}</p>",
                    if m.spills { "spills " } else { "" },
                    esc(&at)
                );
            }
        }
        if let Some(d) = &k.declared {
            let _ = writeln!(
                out,
                "<p class=\"facts\">declared launch {} ({}): occupancy {} ({}), {} block{} per SM{}</p>",
                esc(&d.launch.describe()),
                esc(&d.by.describe()),
                percent(d.occupancy),
                esc(&d.limiters.join(" + ")),
                d.active_blocks_per_sm,
                if d.active_blocks_per_sm == 1 { "" } else { "s" },
                d.lift
                    .as_ref()
                    .and_then(|l| l.describe())
                    .map(|l| format!("; one step up: {}", esc(&l)))
                    .unwrap_or_default()
            );
        }
        if let Some(reasons) = m.regressed {
            let _ = writeln!(
                out,
                "<p class=\"regression\">regressed: {}</p>",
                esc(&reasons
                    .iter()
                    .map(|r| r.text.as_str())
                    .collect::<Vec<_>>()
                    .join("; "))
            );
        }
        if draw {
            out.push_str("<div class=\"charts\">");
            for chart in charts(arch, k)? {
                out.push_str(&chart);
            }
            out.push_str("</div>\n");
        }
        out.push_str("</div>\n");
    }
    if !draw {
        out.push_str(
            "<p class=\"note\">no charts for this kernel: <code>--charts all</code> draws them</p>\n",
        );
    }
    out.push_str(
        "<p class=\"top\"><a href=\"#kernels\">back to the table</a></p></div></details>\n",
    );
    Ok(())
}

const STYLE: &str = "\
:root{--spill:#fbd9d3;--reg:#ffe08a;--low:#b3261e}\
body{font:14px/1.45 system-ui,sans-serif;margin:20px 24px;color:#222;max-width:1240px}\
h1{font-size:21px;margin:0 0 2px}h2{font-size:17px;margin:22px 0 6px}\
.meta{color:#555;margin:0 0 12px}code{font-size:13px}a{color:#1a56b0}\
.summary{display:grid;grid-template-columns:max-content 1fr;gap:3px 16px;margin:0 0 12px;\
padding:10px 14px;border:1px solid #ddd;border-radius:4px;background:#fafafa}\
.summary dt{font-weight:600}.summary dd{margin:0}\
table{border-collapse:collapse;font-size:13px}\
td,th{border:1px solid #d8d8d8;padding:2px 8px;white-space:nowrap}\
th{background:#eee;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}\
tr.spill td{background:var(--spill)}tr.regressed td{background:var(--reg)}\
tr.spill.regressed td{background:linear-gradient(90deg,var(--reg) 50%,var(--spill) 50%)}\
td.low,.badge.low{color:var(--low);font-weight:600}td.spilled,.spilled{color:#8a1c10;font-weight:600}\
.legend{font-size:13px;color:#444;margin:4px 0 8px}\
.legend span{display:inline-block;padding:0 8px;margin-right:10px;border:1px solid #ccc}\
.sw-spill{background:var(--spill)}.sw-reg{background:var(--reg)}.sw-low{color:var(--low);font-weight:600}\
details.kernel{border:1px solid #ddd;border-radius:4px;margin:4px 0}\
details.kernel>summary{cursor:pointer;padding:3px 8px;background:#f6f6f6}\
details.kernel[open]>summary{border-bottom:1px solid #ddd}\
.badge{font-size:12px;padding:0 6px;margin-left:8px;border-radius:8px;background:#eee}\
.badge.spill{background:var(--spill)}.badge.regressed{background:var(--reg)}\
summary .src{margin-left:12px}.src,.facts,.note,.top{color:#555;font-size:13px;margin:2px 0}\
.body{padding:2px 12px 6px}.arch h3{font-size:14px;margin:8px 0 0}\
.regression{color:#7a4d00;font-weight:600;margin:2px 0}\
.charts{display:flex;flex-wrap:wrap;gap:6px;margin-top:4px}.charts svg{border:1px solid #e4e4e4}\
.charts text{font-family:sans-serif}\
:target{outline:2px solid #1a56b0;outline-offset:2px}";

/// The table of these rows, each kernel linking to its section.
fn table(rows: &[&(&Kernel, &String, &KernelArch, Marks<'_>)], out: &mut String) {
    out.push_str("<table><thead><tr>");
    for h in [
        "kernel",
        "arch",
        "registers",
        "static smem",
        "spills",
        "launch",
        "occupancy",
        "limiter",
        "best block",
        "smem headroom",
    ] {
        let _ = write!(out, "<th>{h}</th>");
    }
    out.push_str("</tr></thead><tbody>\n");
    for (kernel, arch, k, mk) in rows.iter().copied() {
        let classes = mk.classes();
        let _ = writeln!(
            out,
            "<tr{}><td><a href=\"#{}\"><code>{}</code></a></td><td>{}</td><td class=n>{}</td>{}\
             <td class=\"n{}\">{}</td><td>{}</td><td class=\"n{}\">{}</td><td>{}</td><td class=n>{}</td>{}</tr>",
            if classes.is_empty() {
                String::new()
            } else {
                format!(" class=\"{classes}\"")
            },
            arch_id(kernel, arch),
            esc(&kernel.base_name),
            esc(arch),
            k.registers,
            size_cell(k.static_smem),
            if mk.spills { " spilled" } else { "" },
            k.spill_bytes(),
            esc(&k.judged().launch()),
            if mk.low { " low" } else { "" },
            percent(k.judged().occupancy),
            esc(&k.judged().limiters.join(" + ")),
            k.best.block_size,
            size_cell(k.best.dynamic_smem_headroom),
        );
    }
    out.push_str("</tbody></table>\n");
}

/// Links to the first few findings, then a count of the rest.
fn link_list(items: &[(String, String)], limit: usize) -> String {
    let mut out: Vec<String> = items
        .iter()
        .take(limit)
        .map(|(href, text)| format!("<a href=\"#{href}\">{text}</a>"))
        .collect();
    if items.len() > limit {
        out.push(format!(
            "and {} more (highlighted in the table)",
            items.len() - limit
        ));
    }
    out.join(", ")
}

/// The HTML report: the summary, the table (each row linking to its
/// section), then one `<details>` section per kernel.
pub fn html(m: &Manifest, baseline: &Baseline, charts: Charts) -> anyhow::Result<String> {
    let regressions = baseline.regressions();
    let regressed: Regressed<'_> = regressions
        .iter()
        .filter(|f| f.after.is_some())
        .map(|f| {
            (
                (f.kernel.as_str(), f.source.as_str(), f.arch.as_str()),
                f.reasons.as_slice(),
            )
        })
        .collect();
    let rows: usize = m.kernels.iter().map(|k| k.archs.len()).sum();
    let draw_all = match charts {
        Charts::All => true,
        Charts::Notable => false,
        Charts::Auto => rows <= AUTO_ALL_ROWS,
    };
    let notable: Vec<bool> = m
        .kernels
        .iter()
        .map(|k| kernel_notable(k, &regressed))
        .collect();

    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\"><title>CUDA occupancy: {pkg}</title>\n\
         <style>{STYLE}</style></head><body>\n<h1>CUDA occupancy: {pkg}</h1>\
         <p class=\"meta\">nvcc {nvcc} &middot; archs {archs} &middot; numbers from {origin}</p>\n",
        pkg = esc(&m.package),
        nvcc = esc(&m.nvcc),
        archs = esc(&m.archs.join(", ")),
        origin = match m.origin {
            Origin::Nvcc => "ptxas",
            Origin::Lock => "the lock (no nvcc in this build)",
        },
    );

    // The summary.
    // Spilling kernels, one link each: `name` (sm_80 192 B, sm_90 64 B).
    let mut spills: Vec<(String, String)> = Vec::new();
    let mut spill_rows = 0;
    let mut lowest: Option<(&Kernel, &String, &KernelArch)> = None;
    for kernel in &m.kernels {
        let spilling: Vec<String> = kernel
            .archs
            .iter()
            .filter(|(_, k)| k.spills())
            .map(|(arch, k)| format!("{} {} B", esc(arch), k.spill_bytes()))
            .collect();
        if !spilling.is_empty() {
            spill_rows += spilling.len();
            spills.push((
                kernel_id(kernel),
                format!(
                    "<code>{}</code> ({})",
                    esc(&kernel.base_name),
                    spilling.join(", ")
                ),
            ));
        }
        for (arch, k) in &kernel.archs {
            if lowest.is_none_or(|(_, _, l)| k.judged().occupancy < l.judged().occupancy) {
                lowest = Some((kernel, arch, k));
            }
        }
    }
    let archs_built: std::collections::BTreeSet<&String> =
        m.kernels.iter().flat_map(|k| k.archs.keys()).collect();
    out.push_str("<dl class=\"summary\">");
    let _ = write!(
        out,
        "<dt>kernels</dt><dd>{} kernels × {} archs: {rows} rows \
         (<a href=\"#kernels\">table</a>, <a href=\"#sections\">sections</a>)</dd>",
        m.kernels.len(),
        archs_built.len().max(m.archs.len()),
    );
    if let Some((kernel, arch, k)) = lowest {
        let _ = write!(
            out,
            "<dt>lowest occupancy</dt><dd><a href=\"#{}\">{} <code>{}</code> on {}</a>, limited by {}</dd>",
            arch_id(kernel, arch),
            percent(k.judged().occupancy),
            esc(&kernel.base_name),
            esc(arch),
            esc(&k.judged().limiters.join(" + ")),
        );
    }
    let _ = write!(
        out,
        "<dt>spills</dt><dd>{}</dd>",
        if spills.is_empty() {
            "none".to_string()
        } else {
            format!(
                "<span class=\"spilled\">{} kernels on {spill_rows} kernel × arch</span>: {}",
                spills.len(),
                link_list(&spills, 8)
            )
        }
    );
    match baseline {
        Baseline::Compared { lock, diff } => {
            let mut items: Vec<(String, String)> = Vec::new();
            for f in &regressions {
                let target = m
                    .kernels
                    .iter()
                    .find(|k| k.base_name == f.kernel && k.source == f.source)
                    .filter(|k| k.archs.contains_key(&f.arch));
                let text = format!(
                    "<code>{}</code> on {}: {}",
                    esc(&f.kernel),
                    esc(&f.arch),
                    esc(&f.texts().join("; "))
                );
                match target {
                    Some(k) => items.push((arch_id(k, &f.arch), text)),
                    None => items.push((String::new(), text)),
                }
            }
            let others = diff
                .findings
                .iter()
                .filter(|f| f.verdict != Verdict::Regression)
                .count();
            let listed: Vec<String> = items
                .iter()
                .take(12)
                .map(|(href, text)| {
                    if href.is_empty() {
                        text.clone()
                    } else {
                        format!("<a href=\"#{href}\">{text}</a>")
                    }
                })
                .collect();
            let _ = write!(
                out,
                "<dt>regressions</dt><dd>{}{}{}</dd>",
                if items.is_empty() {
                    format!("none against {}", esc(lock))
                } else {
                    format!(
                        "<span class=\"regression\">{} against {}</span>: {}",
                        items.len(),
                        esc(lock),
                        listed.join(", ")
                    )
                },
                if items.len() > 12 {
                    format!(", and {} more", items.len() - 12)
                } else {
                    String::new()
                },
                if others > 0 {
                    format!(
                        " ({others} other differences; <code>cargo occ check</code> lists them)"
                    )
                } else {
                    String::new()
                }
            );
        }
        Baseline::NotCompared(why) => {
            let _ = write!(
                out,
                "<dt>regressions</dt><dd>not checked: {}</dd>",
                esc(why)
            );
        }
    }
    let notable_count = notable.iter().filter(|n| **n).count();
    let _ = writeln!(
        out,
        "<dt>sections</dt><dd>{notable_count} of {} kernels notable (spills, occupancy below 50%, \
         a regression): their sections are open; charts for {}</dd></dl>",
        m.kernels.len(),
        if draw_all {
            "every kernel".to_string()
        } else {
            format!(
                "notable kernels only ({notable_count}); <code>--charts all</code> draws every kernel's"
            )
        }
    );

    // The table: every row, or at scale the notable rows and then every
    // row in a collapsed `<details>`.
    out.push_str(
        "<h2 id=\"kernels\">Kernels</h2>\n<p class=\"legend\"><span class=\"sw-spill\">spills</span>\
         <span class=\"sw-reg\">regressed</span><span class=\"sw-low\">occupancy below 50%</span>\
         sizes in KiB (hover for bytes) &middot; spills in bytes per thread &middot; \
         each kernel links to its charts</p>\n",
    );
    let all_rows: Vec<(&Kernel, &String, &KernelArch, Marks<'_>)> = m
        .kernels
        .iter()
        .flat_map(|kernel| {
            let regressed = &regressed;
            kernel
                .archs
                .iter()
                .map(move |(arch, k)| (kernel, arch, k, marks(kernel, arch, k, regressed)))
        })
        .collect();
    let notable_rows: Vec<_> = all_rows.iter().filter(|r| r.3.notable()).collect();
    if rows > AUTO_ALL_ROWS {
        let _ = writeln!(
            out,
            "<h3>Notable: {} of {rows} rows</h3>",
            notable_rows.len()
        );
        if !notable_rows.is_empty() {
            table(&notable_rows, &mut out);
        }
        let _ = writeln!(
            out,
            "<details class=\"rows\" id=\"all-rows\"><summary>every row ({rows})</summary>"
        );
        table(&all_rows.iter().collect::<Vec<_>>(), &mut out);
        out.push_str("</details>\n");
    } else {
        table(&all_rows.iter().collect::<Vec<_>>(), &mut out);
    }
    out.push_str("<h2 id=\"sections\">Per kernel</h2>\n");
    for (kernel, notable) in m.kernels.iter().zip(&notable) {
        kernel_section(kernel, &regressed, draw_all || *notable, &mut out)?;
    }
    out.push_str("</body></html>\n");
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use occ_model::analyze::best_launch;
    use occ_model::manifest::{Best, LaunchBounds, Resources};

    fn arch_entry(arch: &str, registers: u32, static_smem: u32, spill: u32) -> KernelArch {
        bounded(arch, registers, static_smem, spill, LaunchBounds::default())
    }

    fn bounded(
        arch: &str,
        registers: u32,
        static_smem: u32,
        spill: u32,
        launch_bounds: LaunchBounds,
    ) -> KernelArch {
        let mut r = Resources {
            registers,
            static_smem,
            spill_stores: spill,
            spill_loads: spill,
            stack_frame: spill,
            cumulative_stack: None,
            barriers: Some(1),
            launch_bounds,
            maxrregcount: None,
            declared: None,
            cubin_hash: String::new(),
            best: Best {
                block_size: 0,
                active_blocks_per_sm: 0,
                active_warps_per_sm: 0,
                occupancy: 0.0,
                limiters: Vec::new(),
                dynamic_smem_headroom: 0,
            },
        };
        r.best = best_launch(arch, &r).expect("best launch");
        KernelArch::from_resources(r)
    }

    fn kernel(name: &str, archs: [(&str, KernelArch); 2]) -> Kernel {
        Kernel {
            name: name.into(),
            demangled: name.into(),
            base_name: name.into(),
            short_name: name.into(),
            params: Vec::new(),
            ident: name.into(),
            source: "kernels/k.cu".into(),
            archs: archs.into_iter().map(|(a, k)| (a.to_string(), k)).collect(),
        }
    }

    /// `light` (full occupancy), `spilly` (spills), `tiled` (150000 bytes
    /// of shared memory, at most 256 threads: low occupancy), `fat` (many
    /// registers, 50%: not notable).
    pub(crate) fn manifest() -> Manifest {
        let at_most_256 = LaunchBounds {
            max_threads: Some([256, 1, 1]),
            ..LaunchBounds::default()
        };
        Manifest {
            schema: occ_model::manifest::SCHEMA_VERSION,
            package: "demo".into(),
            origin: Origin::Nvcc,
            nvcc: "V13.5.37".into(),
            archs: vec!["sm_80".into(), "sm_90".into()],
            kernels: vec![
                kernel(
                    "fat",
                    [
                        ("sm_80", arch_entry("sm_80", 64, 0, 0)),
                        ("sm_90", arch_entry("sm_90", 64, 0, 0)),
                    ],
                ),
                kernel(
                    "light",
                    [
                        ("sm_80", arch_entry("sm_80", 8, 0, 0)),
                        ("sm_90", arch_entry("sm_90", 8, 0, 0)),
                    ],
                ),
                kernel(
                    "spilly",
                    [
                        ("sm_80", arch_entry("sm_80", 32, 1024, 40)),
                        ("sm_90", arch_entry("sm_90", 32, 1024, 0)),
                    ],
                ),
                kernel(
                    "tiled",
                    [
                        (
                            "sm_80",
                            bounded("sm_80", 10, 150000, 0, at_most_256.clone()),
                        ),
                        (
                            "sm_90",
                            bounded("sm_90", 10, 150000, 0, at_most_256.clone()),
                        ),
                    ],
                ),
            ],
            device_code: Vec::new(),
            measured: Vec::new(),
        }
    }

    /// The attribute values of every `attr="…"` in `html`.
    fn attrs<'a>(html: &'a str, attr: &str) -> Vec<&'a str> {
        let key = format!("{attr}=\"");
        html.match_indices(&key)
            .filter_map(|(i, _)| {
                let rest = &html[i + key.len()..];
                rest.find('"').map(|end| &rest[..end])
            })
            .collect()
    }

    /// The `<tr …>` lines of the table body.
    fn rows(html: &str) -> Vec<&str> {
        html.lines().filter(|l| l.starts_with("<tr")).collect()
    }

    #[test]
    fn charts_drop_only_redundant_attributes() {
        let svg = "<text x=\"1\" font-family=\"sans-serif\" font-size=\"8.870967741935484\" \
                   opacity=\"1\" fill=\"#000000\">a</text><circle opacity=\"0.5\" fill=\"#FF0000\"/>";
        assert_eq!(
            compact_svg(svg),
            "<text x=\"1\" font-size=\"8.9\">a</text><circle opacity=\"0.5\" fill=\"#FF0000\"/>"
        );
    }

    #[test]
    fn sizes_read_in_kib() {
        assert_eq!(kib(0), "0");
        assert_eq!(kib(40), "40 B");
        assert_eq!(kib(1023), "1023 B");
        assert_eq!(kib(1024), "1.0 KiB");
        assert_eq!(kib(1536), "1.5 KiB");
        assert_eq!(kib(10_188), "9.9 KiB");
        assert_eq!(kib(10_200), "10 KiB");
        assert_eq!(kib(32_768), "32 KiB");
        assert_eq!(kib(150_000), "146 KiB");
        assert_eq!(
            size_cell(150_000),
            "<td class=n title=\"150000 bytes\">146 KiB</td>"
        );
    }

    #[test]
    fn every_row_links_to_an_existing_section() {
        let page = html(
            &manifest(),
            &Baseline::NotCompared("test".into()),
            Charts::All,
        )
        .expect("html");
        let ids = attrs(&page, "id");
        let rows = rows(&page);
        assert_eq!(rows.len(), 8, "one row per kernel × arch");
        for row in rows {
            let hrefs = attrs(row, "href");
            assert_eq!(hrefs.len(), 1, "{row}");
            let target = hrefs[0].strip_prefix('#').expect("a fragment link");
            assert!(ids.contains(&target), "no element with id {target}");
        }
        // Every link on the page lands somewhere.
        for href in attrs(&page, "href") {
            let target = href.strip_prefix('#').expect("only in-page links");
            assert!(ids.contains(&target), "dangling link #{target}");
        }
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len(), "ids are unique");
    }

    #[test]
    fn spilling_rows_and_low_occupancy_are_marked() {
        let page = html(
            &manifest(),
            &Baseline::NotCompared("test".into()),
            Charts::All,
        )
        .expect("html");
        for row in rows(&page) {
            let spills = row.contains("k-spilly-sm_80");
            assert_eq!(row.contains("class=\"spill"), spills, "{row}");
            let low = row.contains("k-tiled-");
            assert_eq!(row.contains(" low\">"), low, "{row}");
        }
        assert!(page.contains("title=\"150000 bytes\">146 KiB<"));
        assert!(!page.contains(">150000<"), "raw bytes only in tooltips");
        assert!(page.contains("<a href=\"#k-spilly\"><code>spilly</code> (sm_80 80 B)</a>"));
        assert!(
            page.contains("<dt>lowest occupancy</dt><dd><a href=\"#k-tiled-sm_80\">"),
            "{page}"
        );
    }

    #[test]
    fn only_notable_kernels_are_open() {
        let page = html(
            &manifest(),
            &Baseline::NotCompared("test".into()),
            Charts::All,
        )
        .expect("html");
        let open: Vec<&str> = page
            .lines()
            .filter(|l| l.starts_with("<details"))
            .filter(|l| l.contains(" open>"))
            .map(|l| attrs(l, "id")[0])
            .collect();
        assert_eq!(open, ["k-spilly", "k-tiled"]);
        assert_eq!(page.matches("<details").count(), 4);
    }

    #[test]
    fn a_regression_is_highlighted_and_opens_its_kernel() {
        let m = manifest();
        let mut locked = Lock::from_manifest(&m);
        let fat = locked
            .kernels
            .iter_mut()
            .find(|k| k.name == "fat")
            .expect("fat");
        let sm90 = fat.archs.get_mut("sm_90").expect("sm_90");
        sm90.registers = 16;
        sm90.best.active_warps_per_sm = 64;
        sm90.best.occupancy = 1.0;
        let diff = compare::compare(
            &locked,
            &Lock::from_manifest(&m),
            &compare::Thresholds::default(),
        );
        assert!(diff.has_regressions());
        let page = html(
            &m,
            &Baseline::Compared {
                lock: "occ.lock".into(),
                diff,
            },
            Charts::Notable,
        )
        .expect("html");
        let regressed: Vec<&str> = rows(&page)
            .into_iter()
            .filter(|r| r.contains("regressed"))
            .collect();
        assert_eq!(regressed.len(), 1, "{regressed:?}");
        assert!(regressed[0].contains("k-fat-sm_90"));
        assert!(page.contains("<details class=\"kernel\" id=\"k-fat\" open>"));
        assert!(page.contains("<span class=\"regression\">1 against occ.lock</span>"));
        // Charts only for the notable kernels: fat, spilly, tiled (2 archs × 3 each).
        assert_eq!(page.matches("<svg").count(), 3 * 2 * 3);
    }

    /// 700 kernels × 2 archs, every tenth notable: the default page stays
    /// small; `--charts all` stays within reach.
    #[test]
    fn seven_hundred_kernels_stay_reasonable() {
        let base = manifest();
        let mut m = base.clone();
        m.kernels = (0..700)
            .map(|i| {
                let mut k = base.kernels[if i % 10 == 0 { 3 } else { 1 }].clone();
                k.name = format!("kern_{i:03}");
                k.base_name = format!("ns::kern<{i}>");
                k.ident = format!("kern_{i:03}");
                k
            })
            .collect();
        let none = Baseline::NotCompared("test".into());
        let start = std::time::Instant::now();
        let page = html(&m, &none, Charts::Auto).expect("html");
        let auto_time = start.elapsed();
        // The 140 notable rows first, then all 1400 in a closed `<details>`.
        assert_eq!(rows(&page).len(), 140 + 1400);
        assert!(page.contains("<h3>Notable: 140 of 1400 rows</h3>"));
        assert!(page.contains("<details class=\"rows\" id=\"all-rows\"><summary>"));
        assert_eq!(page.matches(" open>").count(), 70);
        assert_eq!(page.matches("<svg").count(), 70 * 2 * 3);
        let start = std::time::Instant::now();
        let all = html(&m, &none, Charts::All).expect("html");
        let all_time = start.elapsed();
        assert_eq!(all.matches("<svg").count(), 700 * 2 * 3);
        eprintln!(
            "700 kernels × 2 archs: auto {} KB in {auto_time:?}, all {} KB in {all_time:?}",
            page.len() / 1000,
            all.len() / 1000
        );
        assert!(page.len() < 4_000_000, "auto page {} bytes", page.len());
        assert!(all.len() < 40_000_000, "all page {} bytes", all.len());
    }
}
