//! The per-kernel SVG charts of the HTML report (plotters): occupancy by
//! block size, by registers and by shared memory, and a measured launch's
//! time by block size.

use super::html::kib;
use occ_model::compiler::analyze::model_of;
use occ_model::model::arch;
use occ_model::model::occupancy::{occupancy, BlockLaunch, KernelResources};
use occ_model::render::measured::MeasuredRow;
use occ_model::schema::manifest::KernelArch;
use plotters::prelude::*;
use std::fmt::Write as _;

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
pub(super) fn compact_svg(svg: &str) -> String {
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
    occupancy(a, res, &BlockLaunch::new(block))
        .ok()
        .map(|o| o.occupancy * 100.0)
}

/// The three charts of NVIDIA's occupancy calculator for one kernel × arch.
pub(super) fn charts(arch_name: &str, k: &KernelArch) -> anyhow::Result<[String; 3]> {
    let a = arch::lookup(arch_name).map_err(|e| anyhow::anyhow!("{e}"))?;
    let res = model_of(&k.facts);
    // The current point: the declared launch, else the best block size
    // (none resident at a block of 1 thread where it cannot launch).
    let block = k.judged().map_or(1, |j| j.block_size.max(1));
    let here = k.judged_occupancy() * 100.0;
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
            current: (f64::from(k.facts.registers), here),
            current_label: k.facts.registers.to_string(),
        })?,
        svg(&Chart {
            title: format!("vs shared memory, {block} threads"),
            x_label: "shared memory per block (KiB)",
            points: smem,
            current: (f64::from(k.facts.static_smem) / 1024.0, here),
            current_label: kib(k.facts.static_smem),
        })?,
    ])
}

/// A measured launch's chart: the median time at each block size measured,
/// the block `tuned` sites bake marked in red and the max-occupancy block,
/// where it was measured, in blue.
pub(super) fn timing_chart(r: &MeasuredRow) -> anyhow::Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, CHART_SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        let points: Vec<(f64, f64)> = r.timings.iter().map(|&(b, t)| (f64::from(b), t)).collect();
        let x_max = points.iter().map(|p| p.0).fold(1.0, f64::max);
        let y_max = points.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-3) * 1.1;
        let mut c = ChartBuilder::on(&root)
            .caption(
                format!("measured on {} ({}): baked {}", r.device, r.bucket, r.baked),
                ("sans-serif", 13),
            )
            .margin(6)
            .x_label_area_size(32)
            .y_label_area_size(44)
            .build_cartesian_2d(0f64..x_max * 1.05, 0f64..y_max)
            .map_err(draw_error)?;
        c.configure_mesh()
            .x_desc("threads per block")
            .y_desc("median time (us)")
            .x_labels(6)
            .y_labels(6)
            .max_light_lines(0)
            .bold_line_style(RGBColor(232, 232, 232))
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.3}"))
            .label_style(("sans-serif", 11))
            .draw()
            .map_err(draw_error)?;
        c.draw_series(LineSeries::new(
            points.iter().copied(),
            BLACK.stroke_width(1),
        ))
        .map_err(draw_error)?;
        c.draw_series(points.iter().map(|&p| Circle::new(p, 2, BLACK.filled())))
            .map_err(draw_error)?;
        if let Some(t) = r.max_occupancy.zip(r.max_occupancy_us) {
            c.draw_series(std::iter::once(Circle::new(
                (f64::from(t.0), t.1),
                5,
                BLUE.filled(),
            )))
            .map_err(draw_error)?;
        }
        if let Some(t) = r.baked_us {
            c.draw_series(std::iter::once(Circle::new(
                (f64::from(r.baked), t),
                4,
                RED.filled(),
            )))
            .map_err(draw_error)?;
        }
        root.present().map_err(draw_error)?;
    }
    Ok(compact_svg(&out))
}
