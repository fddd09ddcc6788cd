//! `cargo occ explain KERNEL`: what limits a kernel's occupancy (each
//! resource's block limit, as Nsight Compute's occupancy section shows it)
//! and what would buy one more resident block.

use crate::locate::{unknown_kernel, Locate};
use anyhow::anyhow;
use occ_build::analyze::resources;
use occ_build::manifest::Lookup;
use occ_build::occupancy::{occupancy, Launch, Limiter};
use occ_build::table::percent;
use occ_build::{arch, tune};

/// Arguments of `cargo occ explain`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExplainArgs {
    /// The kernel: its symbol, its name (`ns::kern<float, 3>`), short name or Rust identifier.
    pub kernel: String,
    /// The arch (default: the first arch of the build).
    #[arg(long)]
    pub arch: Option<String>,
    /// Threads per block (default: the best block size).
    #[arg(long, value_name = "N")]
    pub block: Option<u32>,
    /// Dynamic shared memory per block, bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    pub smem: u32,
    #[command(flatten)]
    pub locate: Locate,
}

/// Prints the breakdown.
pub fn run(args: ExplainArgs) -> anyhow::Result<i32> {
    let found = args.locate.find()?;
    let m = &found.manifest;
    let kernel = match m.lookup(&args.kernel) {
        Lookup::Found(k) => k,
        _ => return Err(unknown_kernel(m, &args.kernel)),
    };
    let arch_name = match &args.arch {
        Some(a) => arch::canonical_name(a).map_err(|e| anyhow!("{e}"))?,
        None => m
            .archs
            .first()
            .cloned()
            .ok_or_else(|| anyhow!("the manifest lists no arch; rebuild"))?,
    };
    let k = kernel.archs.get(&arch_name).ok_or_else(|| {
        anyhow!(
            "{} was not built for {arch_name}; its archs: {}",
            kernel.base_name,
            kernel.archs.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    })?;
    let a = arch::lookup(&arch_name).map_err(|e| anyhow!("{e}"))?;
    let res = resources(k);
    let block = args.block.unwrap_or(k.best.block_size);
    let launch = Launch::new(block).with_dynamic_smem(args.smem);
    let occ = occupancy(a, &res, &launch).map_err(|e| anyhow!("{e}"))?;
    println!("{} on {arch_name} ({})", kernel.base_name, kernel.source);
    println!(
        "  resources: {} registers/thread, {} B static smem, {} B spills, {} B stack",
        k.registers,
        k.static_smem,
        k.spill_bytes(),
        k.stack_frame
    );
    if let Some(max) = k.launch_bounds.max_threads_per_block() {
        println!("  launch bounds: at most {max} threads per block");
    }
    println!(
        "  launch: {block} threads/block, {} B dynamic smem{}",
        args.smem,
        if args.block.is_none() {
            " (the best block size)"
        } else {
            ""
        }
    );
    println!(
        "  occupancy: {} ({}/{} warps, {} blocks per SM)",
        percent(occ.occupancy),
        occ.active_warps,
        occ.max_warps,
        occ.active_blocks
    );
    println!();
    println!("  {:<18} {:>10}", "block limit", "blocks/SM");
    for l in Limiter::ALL {
        let value = occ
            .limits
            .get(l)
            .map(|v| v.to_string())
            .unwrap_or_else(|| "no limit".into());
        let mark = if occ.limiters.contains(l) {
            "  <- limits occupancy"
        } else {
            ""
        };
        println!("  {:<18} {value:>10}{mark}", l.as_str());
    }
    println!();
    let hints = tune::what_if(a, &res, &launch).map_err(|e| anyhow!("{e}"))?;
    if occ.active_warps >= occ.max_warps {
        println!("  full occupancy: nothing to gain at this block size");
        return Ok(0);
    }
    println!(
        "  what if (one more block per SM: {} -> {}):",
        hints.active_blocks, hints.target_blocks
    );
    let mut any = false;
    if let Some(r) = hints.registers {
        any = true;
        println!(
            "    registers: use at most {} per thread ({} fewer)",
            r.max_registers, r.drop
        );
    }
    if let Some(s) = hints.shared_memory {
        any = true;
        println!(
            "    shared memory: use at most {} B per block ({} B less)",
            s.max_bytes, s.shed
        );
    }
    if let Some(lb) = hints
        .launch_bounds
        .filter(|lb| lb.register_cap < k.registers)
    {
        any = true;
        println!(
            "    __launch_bounds__({}, {}): caps registers near {}{}",
            lb.max_threads,
            lb.min_blocks,
            lb.register_cap,
            if lb.reaches_target {
                " and reaches the target (it may spill)"
            } else {
                ", but something else still limits occupancy"
            }
        );
    }
    if !any {
        println!(
            "    no single change of registers or shared memory reaches it; try another block size"
        );
    }
    Ok(0)
}
