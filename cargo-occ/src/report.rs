//! `cargo occ report`: every kernel's resources and occupancy, as a terminal
//! table, Markdown, JSON, or a self-contained HTML page with NVIDIA's
//! calculator charts.

use crate::locate::Locate;
use crate::render as report;
use anyhow::Context;
use occ_build::analyze::resources;
use occ_build::arch;
use occ_build::manifest::{Kernel, KernelArch, Manifest};
use occ_build::occupancy::{occupancy, KernelResources, Launch};
use occ_build::table::percent;
use plotters::prelude::*;
use std::path::PathBuf;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns for a terminal.
    Table,
    /// A Markdown table (fits $GITHUB_STEP_SUMMARY).
    Markdown,
    /// JSON rows.
    Json,
    /// One self-contained HTML file with occupancy charts per kernel.
    Html,
}

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
}

/// Prints or writes the report.
pub fn run(args: ReportArgs) -> anyhow::Result<i32> {
    let found = args.locate.find()?;
    let m = &found.manifest;
    let text = match args.format {
        Format::Table => report::table(m),
        Format::Markdown => report::markdown(m),
        Format::Json => report::json(m),
        Format::Html => html(m)?,
    };
    match &args.output {
        Some(path) => std::fs::write(path, text)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(0)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One chart: occupancy (percent) against x, with the current point marked.
struct Chart<'a> {
    title: &'a str,
    x_label: &'a str,
    points: Vec<(u32, f64)>,
    current: (u32, f64),
}

fn svg(chart: &Chart<'_>) -> anyhow::Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (420, 260)).into_drawing_area();
        root.fill(&WHITE)
            .map_err(|e| anyhow::anyhow!("cannot draw a chart: {e}"))?;
        let x_max = chart
            .points
            .iter()
            .map(|p| p.0)
            .max()
            .unwrap_or(1)
            .max(chart.current.0)
            .max(1);
        let mut c = ChartBuilder::on(&root)
            .caption(
                format!(
                    "{} (now {}: {:.0}%)",
                    chart.title, chart.current.0, chart.current.1
                ),
                ("sans-serif", 14),
            )
            .margin(8)
            .x_label_area_size(36)
            .y_label_area_size(44)
            .build_cartesian_2d(0u32..x_max, 0f64..105f64)
            .map_err(|e| anyhow::anyhow!("cannot draw a chart: {e}"))?;
        c.configure_mesh()
            .x_desc(chart.x_label)
            .y_desc("occupancy %")
            .x_labels(8)
            .y_labels(6)
            .y_label_formatter(&|y| format!("{y:.0}"))
            .light_line_style(RGBColor(238, 238, 238))
            .label_style(("sans-serif", 11))
            .draw()
            .map_err(|e| anyhow::anyhow!("cannot draw a chart: {e}"))?;
        // A step line: occupancy is constant between the sampled points.
        let mut steps: Vec<(u32, f64)> = Vec::new();
        for (i, &(x, y)) in chart.points.iter().enumerate() {
            if i > 0 {
                steps.push((x, steps[steps.len() - 1].1));
            }
            steps.push((x, y));
        }
        c.draw_series(LineSeries::new(steps, BLUE.stroke_width(2)))
            .map_err(|e| anyhow::anyhow!("cannot draw a chart: {e}"))?;
        c.draw_series(std::iter::once(Circle::new(chart.current, 5, RED.filled())))
            .map_err(|e| anyhow::anyhow!("cannot draw a chart: {e}"))?;
        root.present()
            .map_err(|e| anyhow::anyhow!("cannot draw a chart: {e}"))?;
    }
    Ok(out)
}

fn occ_at(a: &'static arch::Arch, res: &KernelResources, block: u32) -> Option<f64> {
    occupancy(a, res, &Launch::new(block))
        .ok()
        .map(|o| o.occupancy * 100.0)
}

/// The three charts of NVIDIA's occupancy calculator for one kernel × arch.
fn charts(arch_name: &str, k: &KernelArch) -> anyhow::Result<Vec<String>> {
    let a = arch::lookup(arch_name).map_err(|e| anyhow::anyhow!("{e}"))?;
    let res = resources(k);
    let block = k.best.block_size.max(1);
    let here = k.best.occupancy * 100.0;
    let max_block = res
        .max_threads_per_block
        .unwrap_or(a.max_threads_per_block)
        .min(a.max_threads_per_block);
    let mut blocks: Vec<(u32, f64)> = (1..=max_block / 32)
        .map(|i| i * 32)
        .filter_map(|b| occ_at(a, &res, b).map(|o| (b, o)))
        .collect();
    if max_block % 32 != 0 {
        if let Some(o) = occ_at(a, &res, max_block) {
            blocks.push((max_block, o));
        }
    }
    let regs: Vec<(u32, f64)> = (1..=a.max_regs_per_thread)
        .filter_map(|r| {
            let res = KernelResources {
                registers: r,
                ..res
            };
            occ_at(a, &res, block).map(|o| (r, o))
        })
        .collect();
    let step = 256u32;
    let smem: Vec<(u32, f64)> = (0..=a.smem_per_block_optin / step)
        .map(|i| i * step)
        .filter_map(|s| {
            let res = KernelResources {
                static_smem: s,
                ..res
            };
            occ_at(a, &res, block).map(|o| (s, o))
        })
        .collect();
    Ok(vec![
        svg(&Chart {
            title: "vs block size",
            x_label: "threads per block",
            points: blocks,
            current: (block, here),
        })?,
        svg(&Chart {
            title: &format!("vs registers, {block} threads"),
            x_label: "registers per thread",
            points: regs,
            current: (k.registers, here),
        })?,
        svg(&Chart {
            title: &format!("vs shared memory, {block} threads"),
            x_label: "shared memory per block (bytes)",
            points: smem,
            current: (k.static_smem, here),
        })?,
    ])
}

fn kernel_section(kernel: &Kernel, out: &mut String) -> anyhow::Result<()> {
    out.push_str(&format!(
        "<section><h2><code>{}</code></h2><p class=\"src\">{} &middot; <code>{}</code></p>\n",
        esc(&kernel.base_name),
        esc(&kernel.source),
        esc(&kernel.name)
    ));
    for (arch_name, k) in &kernel.archs {
        out.push_str(&format!(
            "<h3>{}</h3><p class=\"facts\">{} registers &middot; {} B static smem &middot; {} B spills &middot; \
             best block {} &middot; occupancy {} ({}) &middot; {} B dynamic smem headroom</p>\n<div class=\"charts\">",
            esc(arch_name),
            k.registers,
            k.static_smem,
            k.spill_bytes(),
            k.best.block_size,
            percent(k.best.occupancy),
            esc(&k.best.limiters.join(" + ")),
            k.best.dynamic_smem_headroom
        ));
        for chart in charts(arch_name, k)? {
            out.push_str(&chart);
        }
        out.push_str("</div>\n");
    }
    out.push_str("</section>\n");
    Ok(())
}

/// The HTML report: the summary table, then three charts per kernel × arch.
pub fn html(m: &Manifest) -> anyhow::Result<String> {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>CUDA occupancy: {pkg}</title>\n<style>\
body{{font-family:sans-serif;margin:24px;color:#222}}table{{border-collapse:collapse;font-size:13px}}\
td,th{{border:1px solid #ccc;padding:3px 8px}}td.n{{text-align:right}}th{{background:#f0f0f0}}\
.charts{{display:flex;flex-wrap:wrap;gap:8px}}.charts svg{{border:1px solid #ddd}}\
.src,.facts{{color:#555;font-size:13px}}section{{margin-top:28px;border-top:2px solid #ddd}}\
</style></head><body>\n<h1>CUDA occupancy: {pkg}</h1><p>nvcc {nvcc} &middot; archs {archs} &middot; \
red dot: the best launch (no dynamic shared memory)</p>\n<table><tr>",
        pkg = esc(&m.package),
        nvcc = esc(&m.nvcc),
        archs = esc(&m.archs.join(", "))
    );
    for h in [
        "kernel",
        "arch",
        "registers",
        "smem",
        "spills",
        "occupancy",
        "limiter",
        "best block",
        "headroom",
    ] {
        out.push_str(&format!("<th>{h}</th>"));
    }
    out.push_str("</tr>\n");
    for r in report::rows(m) {
        out.push_str(&format!(
            "<tr><td><code>{}</code></td><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td>\
             <td class=n>{}</td><td>{}</td><td class=n>{}</td><td class=n>{}</td></tr>\n",
            esc(&r.kernel),
            esc(&r.arch),
            r.registers,
            r.static_smem,
            r.spill_bytes,
            percent(r.occupancy),
            esc(&r.limiters.join(" + ")),
            r.best_block,
            r.headroom
        ));
    }
    out.push_str("</table>\n");
    for kernel in &m.kernels {
        kernel_section(kernel, &mut out)?;
    }
    out.push_str("</body></html>\n");
    Ok(out)
}
