//! The HTML page of `cargo occ report --format html`: one self-contained
//! file (summary, linked table, a `<details>` per kernel with its charts),
//! no JavaScript.

use super::charts::{charts, timing_chart};
use super::{Baseline, Charts, AUTO_ALL_ROWS, LOW_OCCUPANCY};
use occ_model::compare::{Reason, Verdict};
use occ_model::compiler::names::table_name;
use occ_model::model::arch;
use occ_model::render::measured::{measured_rows, times, us, MeasuredRow, HEADER};
use occ_model::render::text_table::percent;
use occ_model::schema::manifest::{Kernel, KernelArch, Manifest, Origin, CANNOT_LAUNCH};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Text in HTML, in an element or a quoted attribute: `&`, `<`, `>`, `"`
/// and `'` as references, and what no name may hold shown escaped
/// (`occ_model::compiler::names::shown`).
pub(super) fn esc(s: &str) -> String {
    occ_model::compiler::names::shown(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
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
pub(super) fn size_cell(bytes: u32) -> String {
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
        spills: k.facts.spills(),
        low: k.judged_occupancy() < LOW_OCCUPANCY,
        regressed: regressed
            .get(&(kernel.base_name.as_str(), kernel.source.as_str(), arch))
            .copied(),
    }
}

/// What limits a kernel × arch at the launch it is judged at, or that it
/// cannot launch.
fn limiters(k: &KernelArch) -> String {
    k.judged()
        .map_or_else(|| CANNOT_LAUNCH.into(), |j| j.limiters.join(" + "))
}

/// The best launch in a kernel × arch's facts line: block, occupancy,
/// limiters and headroom, or that it cannot launch at any block size.
fn best_facts(k: &KernelArch) -> String {
    match &k.best {
        Some(b) => format!(
            "best block {} &middot; occupancy {} ({}) &middot; <span title=\"{} bytes\">{}</span> \
             dynamic smem headroom",
            b.block_size,
            percent(b.occupancy),
            esc(&b.limiters.join(" + ")),
            b.dynamic_smem_headroom,
            esc(&kib(b.dynamic_smem_headroom)),
        ),
        None => format!("{} at any block size", esc(CANNOT_LAUNCH)),
    }
}

fn kernel_notable(kernel: &Kernel, regressed: &Regressed<'_>) -> bool {
    kernel
        .archs
        .iter()
        .any(|(arch, k)| marks(kernel, arch, k, regressed).notable())
}

/// The launch bounds as the source would spell them, if any.
fn launch_bounds(k: &KernelArch) -> Option<String> {
    let lb = &k.facts.launch_bounds;
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

/// Long because one kernel's section is written top to bottom in the order it
/// One measured launch in words: `measured on NVIDIA H200 (9.0, 132 SMs),
/// bucket default: baked block 32 (38.69 us); max-occupancy block 896
/// (46.67 us): 1.21x slower`.
fn measured_words(r: &MeasuredRow) -> String {
    format!(
        "measured on {} ({}, {} SMs), bucket {}: baked block <strong>{}</strong> ({}){}; \
         max-occupancy block {} ({}){}",
        esc(&r.device),
        esc(&r.compute_capability),
        r.sm_count,
        esc(&r.bucket),
        r.baked,
        us(r.baked_us),
        if r.stale {
            ", stale: the kernel's code changed since, sites use the model's block"
        } else {
            ""
        },
        r.max_occupancy.map_or("-".into(), |b| b.to_string()),
        us(r.max_occupancy_us),
        r.speedup
            .map(|s| format!(": {} the baked block's time", times(Some(s))))
            .unwrap_or_default(),
    )
}

/// reads.
fn kernel_section(
    kernel: &Kernel,
    regressed: &Regressed<'_>,
    measured: &[&MeasuredRow],
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
            percent(k.judged_occupancy())
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
             <span title=\"{} bytes\">{}</span> static smem &middot; {} &middot; {}",
            arch_id(kernel, arch),
            esc(arch),
            k.facts.registers,
            k.facts.static_smem,
            esc(&kib(k.facts.static_smem)),
            if m.spills {
                format!(
                    "<strong class=\"spilled\">{} B spilled ({} stores, {} loads)</strong>",
                    k.facts.spill_bytes(),
                    k.facts.spill_stores,
                    k.facts.spill_loads
                )
            } else {
                "no spills".into()
            },
            best_facts(k),
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
                    .map(Reason::to_string)
                    .collect::<Vec<_>>()
                    .join("; "))
            );
        }
        let timed: Vec<&&MeasuredRow> = measured.iter().filter(|r| r.arch == **arch).collect();
        for r in &timed {
            let _ = writeln!(out, "<p class=\"facts\">{}</p>", measured_words(r));
        }
        // The measured launches are the best evidence: their charts are
        // drawn whenever the kernel's are, and for a kernel without them.
        if draw || !timed.is_empty() {
            out.push_str("<div class=\"charts\">");
            if draw {
                for chart in charts(arch, k)? {
                    out.push_str(&chart);
                }
            }
            for r in &timed {
                out.push_str(&timing_chart(r)?);
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
        let shown = table_name(&kernel.base_name);
        let _ = writeln!(
            out,
            "<tr{}><td><a href=\"#{}\"{}><code>{}</code></a></td><td>{}</td><td class=n>{}</td>{}\
             <td class=\"n{}\">{}</td><td>{}</td><td class=\"n{}\">{}</td><td>{}</td><td class=n>{}</td>{}</tr>",
            if classes.is_empty() {
                String::new()
            } else {
                format!(" class=\"{classes}\"")
            },
            arch_id(kernel, arch),
            // A shortened name keeps the full one on hover.
            if shown == kernel.base_name {
                String::new()
            } else {
                format!(" title=\"{}\"", esc(&kernel.base_name))
            },
            esc(&shown),
            esc(arch),
            k.facts.registers,
            size_cell(k.facts.static_smem),
            if mk.spills { " spilled" } else { "" },
            k.facts.spill_bytes(),
            esc(&k.judged().map_or_else(|| "-".into(), |j| j.launch())),
            if mk.low { " low" } else { "" },
            percent(k.judged_occupancy()),
            esc(&limiters(k)),
            k.best.as_ref().map_or_else(|| "-".into(), |b| b.block_size.to_string()),
            k.best.as_ref().map_or_else(
                || "<td class=n>-</td>".into(),
                |b| size_cell(b.dynamic_smem_headroom)
            ),
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

/// The measured launches' table: each row links to its kernel × arch.
fn measured_table(m: &Manifest, measured: &[MeasuredRow], out: &mut String) {
    out.push_str(
        "<h2 id=\"measured\">Measured on a GPU</h2>\n<p class=\"legend\"><code>tuned</code> sites \
         bake the fastest block measured; the model's choice is the block of maximum occupancy \
         (in each kernel's section, a chart of time against block size: red the baked block, \
         blue the max-occupancy one)</p>\n<table><thead><tr>",
    );
    for h in HEADER {
        let _ = write!(out, "<th>{h}</th>");
    }
    out.push_str("</tr></thead><tbody>\n");
    let kernels: BTreeMap<(&str, &str), &Kernel> = m
        .kernels
        .iter()
        .map(|k| ((k.name.as_str(), k.source.as_str()), k))
        .collect();
    for r in measured {
        let link = kernels
            .get(&(r.symbol.as_str(), r.source.as_str()))
            .map(|k| arch_id(k, &r.arch));
        let [kernel, rest @ ..] = r.cells();
        let name = format!("<code>{}</code>", esc(&kernel));
        let _ = write!(
            out,
            "<tr><td>{}</td>",
            match link {
                Some(id) => format!("<a href=\"#{id}\">{name}</a>"),
                None => name,
            }
        );
        for cell in rest {
            let _ = write!(out, "<td>{}</td>", esc(&cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
}

/// The HTML report: the summary, the table (each row linking to its
/// section), then one `<details>` section per kernel.
///
/// Long because the page is written top to bottom in the order it reads.
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
    let measured = measured_rows(m);
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
            .filter(|(_, k)| k.facts.spills())
            .map(|(arch, k)| format!("{} {} B", esc(arch), k.facts.spill_bytes()))
            .collect();
        if !spilling.is_empty() {
            spill_rows += spilling.len();
            spills.push((
                kernel_id(kernel),
                format!(
                    "<code>{}</code> ({})",
                    esc(&table_name(&kernel.base_name)),
                    spilling.join(", ")
                ),
            ));
        }
        for (arch, k) in &kernel.archs {
            if lowest.is_none_or(|(_, _, l)| k.judged_occupancy() < l.judged_occupancy()) {
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
            percent(k.judged_occupancy()),
            esc(&table_name(&kernel.base_name)),
            esc(arch),
            esc(&limiters(k)),
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
    if !measured.is_empty() {
        let devices: std::collections::BTreeSet<&str> =
            measured.iter().map(|r| r.device.as_str()).collect();
        let faster = measured
            .iter()
            .filter(|r| r.speedup.is_some_and(|s| s > 1.0))
            .count();
        let _ = write!(
            out,
            "<dt>measured</dt><dd><a href=\"#measured\">{} launches</a> on {}: the baked block \
             beat the max-occupancy block in {faster}</dd>",
            measured.len(),
            esc(&devices.into_iter().collect::<Vec<_>>().join(", ")),
        );
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
    if !measured.is_empty() {
        measured_table(m, &measured, &mut out);
    }
    out.push_str("<h2 id=\"sections\">Per kernel</h2>\n");
    // Each kernel's measured launches, grouped once (not a scan per kernel).
    let mut timed: BTreeMap<(&str, &str), Vec<&MeasuredRow>> = BTreeMap::new();
    for r in &measured {
        timed
            .entry((r.symbol.as_str(), r.source.as_str()))
            .or_default()
            .push(r);
    }
    for (kernel, notable) in m.kernels.iter().zip(&notable) {
        let mine = timed
            .get(&(kernel.name.as_str(), kernel.source.as_str()))
            .map_or(&[][..], Vec::as_slice);
        kernel_section(kernel, &regressed, mine, draw_all || *notable, &mut out)?;
    }
    out.push_str("</body></html>\n");
    Ok(out)
}
