//! The occupancy plan: per kernel × arch, the resources ptxas reported and
//! the launch each kernel's launch site baked (the model's pick, or at a
//! `tuned` site the block measured on a GPU), with its occupancy there.

use crate::launches::{LaunchPlan, Site, SITES};
use occ_model::schema::manifest::Manifest;
use std::fmt::Write as _;

/// One row of the plan.
#[derive(Debug, Clone)]
pub struct Row {
    /// The kernel's launch site.
    pub site: Site,
    /// The arch.
    pub arch: String,
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block, bytes.
    pub static_smem: u32,
    /// Spilled bytes (stores + loads).
    pub spills: u32,
    /// Named barriers (`None` when ptxas did not say).
    pub barriers: Option<u32>,
    /// The launch the site baked, with its occupancy and limiters there.
    pub baked: LaunchPlan,
    /// The model's launch on the same resources.
    pub launch: LaunchPlan,
}

impl Row {
    /// Whether the baked launch is the model's.
    pub fn agrees(&self) -> bool {
        self.baked == self.launch
    }
}

/// Every site on every arch of the manifest.
pub fn rows(manifest: &Manifest) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for site in SITES {
        for arch in &manifest.archs {
            let k = site.resources(manifest, arch)?;
            let row = (site.baked)().on(arch).ok_or_else(|| {
                anyhow::anyhow!("{}: #[launch_config] baked nothing for {arch}", site.ident)
            })?;
            let baked = site.at(arch, k, row.threads())?;
            if (baked.dynamic_smem, baked.active_blocks_per_sm)
                != (row.dynamic_smem, row.active_blocks_per_sm)
            {
                anyhow::bail!(
                    "{} on {arch}: #[launch_config] baked {} B of dynamic smem and {} blocks per SM at block {}, the model gives {} B and {}",
                    site.ident,
                    row.dynamic_smem,
                    row.active_blocks_per_sm,
                    row.threads(),
                    baked.dynamic_smem,
                    baked.active_blocks_per_sm
                );
            }
            rows.push(Row {
                baked,
                site,
                arch: arch.clone(),
                registers: k.facts.registers,
                static_smem: k.facts.static_smem,
                spills: k.facts.spill_bytes(),
                barriers: k.facts.barriers,
                launch: site.plan(arch, k)?,
            });
        }
    }
    Ok(rows)
}

/// `a + b` of the limiters, or "none".
pub fn limiters(l: &[occ_model::model::occupancy::Limiter]) -> String {
    if l.is_empty() {
        return "none".into();
    }
    l.iter().map(|l| l.as_str()).collect::<Vec<_>>().join(" + ")
}

fn kernel_label(site: &Site) -> String {
    site.ident.trim_start_matches("linalg_").to_string()
}

/// The plan as a table.
pub fn render(manifest: &Manifest) -> anyhow::Result<String> {
    let rows = rows(manifest)?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "occupancy plan: {} kernels x {} archs ({}), nvcc {}",
        SITES.len(),
        manifest.archs.len(),
        manifest.archs.join(", "),
        manifest.nvcc
    );
    let _ = writeln!(
        out,
        "{:<18} {:<6} {:>4} {:>6} {:>4} {:>6} {:>5} {:>7} {:>6} {:>5}  limiter",
        "kernel", "arch", "regs", "smem", "bars", "spills", "block", "dyn", "blk/SM", "occ"
    );
    for r in &rows {
        let bars = r.barriers.map_or("-".to_string(), |b| b.to_string());
        let claimed = if r.arch == r.site.arch && r.baked.limiters.contains(&r.site.limiter) {
            "  <- demonstrated"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "{:<18} {:<6} {:>4} {:>6} {:>4} {:>6} {:>5} {:>7} {:>6} {:>4.0}%  {}{}",
            kernel_label(&r.site),
            r.arch,
            r.registers,
            r.static_smem,
            bars,
            r.spills,
            r.baked.block_size,
            r.baked.dynamic_smem,
            r.baked.active_blocks_per_sm,
            r.baked.occupancy * 100.0,
            limiters(&r.baked.limiters),
            claimed
        );
    }
    for r in rows
        .iter()
        .filter(|r| r.baked.header_limiters != r.baked.limiters)
    {
        let _ = writeln!(
            out,
            "note: {} on {}: cuda_occupancy.h flags {} (it adds the barrier flag without clearing the others); bound by {}",
            kernel_label(&r.site),
            r.arch,
            limiters(&r.baked.header_limiters),
            limiters(&r.baked.limiters)
        );
    }
    Ok(out)
}
