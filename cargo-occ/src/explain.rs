//! `cargo occ explain KERNEL`: what limits a kernel's occupancy (each
//! resource's block limit, as Nsight Compute's occupancy section shows it),
//! what would buy one more resident block, where it spills and where its
//! register pressure peaks (by source line, when the build ran nvdisasm),
//! and, for a kernel that spills, what gives ptxas more registers. Every hint names what to write: the
//! `__launch_bounds__`/`__maxnreg__` text, or `Build::max_registers`.

use crate::locate::{unknown_kernel, Locate};
use crate::source::{has_bounds, written};
use anyhow::anyhow;
use occ_model::compiler::analyze::model_of;
use occ_model::compiler::launches;
use occ_model::model::arch::Arch;
use occ_model::model::occupancy::{occupancy, BlockLaunch, KernelResources, Limiter, Occupancy};
use occ_model::model::suggest::{self, WhatIf};
use occ_model::render::text_table::percent;
use occ_model::schema::manifest::{
    Cliffs, Declared, DeclaredBy, Kernel, KernelArch, LaunchBounds, Lookup, Manifest, SourceLines,
    SpillSite,
};
use occ_model::{model::arch, model::cliff};

/// Arguments of `cargo occ explain`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExplainArgs {
    /// The kernel: its symbol, its name (`ns::kern<float, 3>`), short name or Rust identifier.
    pub kernel: String,
    /// The arch (default: the first arch of the build).
    #[arg(long)]
    pub arch: Option<String>,
    /// Threads per block (default: the declared launch, else the best block size).
    #[arg(long, value_name = "N")]
    pub block: Option<u32>,
    /// Dynamic shared memory per block, bytes (default: the declared
    /// launch's, else 0).
    #[arg(long, value_name = "BYTES")]
    pub smem: Option<u32>,
    #[command(flatten)]
    pub locate: Locate,
}

/// Prints the breakdown: the kernel's resources, the launch and its
/// occupancy with each block limit, the cliffs there, and what would reach
/// the next step (or, at full occupancy, what its spills cost).
pub fn run(args: ExplainArgs) -> anyhow::Result<i32> {
    let found = args.locate.find()?;
    let m = &found.manifest;
    let kernel = match m.lookup(&args.kernel) {
        Lookup::Found(k) => k,
        _ => return Err(unknown_kernel(m, &args.kernel)),
    };
    let arch_name = arch_of(&args, m)?;
    let k = kernel.archs.get(&arch_name).ok_or_else(|| {
        anyhow!(
            "{} was not built for {arch_name}; its archs: {}",
            kernel.base_name,
            kernel.archs.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    })?;
    let a = arch::lookup(&arch_name).map_err(|e| anyhow!("{e}"))?;
    let res = model_of(&k.facts);
    // Without --block: the launch the kernel is judged at
    // (`Resources::judged`: the one it is declared for, by build.rs's
    // `Build::launch`, its `__launch_bounds__` or `.reqntid`, else the best).
    let judged = k.judged().filter(|_| args.block.is_none());
    let declared = judged.and_then(|j| j.declared);
    let block = args.block.or(judged.map(|j| j.block_size)).ok_or_else(|| {
        anyhow!(
            "kernel `{}` cannot launch on {arch_name} at any block size; give --block to \
                 see what limits it at one",
            kernel.base_name
        )
    })?;
    let smem = args.smem.or(judged.map(|j| j.dynamic_smem)).unwrap_or(0);
    let launch = BlockLaunch::new(block).with_dynamic_smem(smem);
    let occ = occupancy(a, &res, &launch).map_err(|e| anyhow!("{e}"))?;
    print_resources(kernel, &arch_name, a, k);
    print_launch(block, smem, declared, args.block.is_none(), &occ);
    print_code_launches(m, kernel);
    let c = cliff::cliffs(a, &res, &launch).map_err(|e| anyhow!("{e}"))?;
    print_cliffs(&c);
    let hints = suggest::what_if(a, &res, &launch).map_err(|e| anyhow!("{e}"))?;
    if occ.active_warps_per_sm >= occ.max_warps_per_sm {
        if k.facts.spills() {
            println!(
                "  full occupancy at this block size, but it spills {} B per thread",
                k.facts.spill_bytes()
            );
            spill_hints(a, kernel.base_name.as_str(), k, &res, smem);
        } else {
            println!("  full occupancy: nothing to gain at this block size");
        }
        return Ok(0);
    }
    print_what_if(kernel.base_name.as_str(), a, k, block, &occ, &hints);
    if k.facts.spills() {
        println!();
        println!("  it spills {} B per thread", k.facts.spill_bytes());
        spill_hints(a, kernel.base_name.as_str(), k, &res, smem);
    }
    Ok(0)
}

/// The arch to explain: `--arch`, else the manifest's first.
fn arch_of(args: &ExplainArgs, m: &Manifest) -> anyhow::Result<String> {
    match &args.arch {
        Some(a) => arch::canonical_name(a).map_err(|e| anyhow!("{e}")),
        None => m
            .archs
            .first()
            .cloned()
            .ok_or_else(|| anyhow!("the manifest lists no arch; rebuild")),
    }
}

/// The kernel's resources, launch bounds, spills and where they are.
fn print_resources(kernel: &Kernel, arch_name: &str, a: &Arch, k: &KernelArch) {
    println!("{} on {arch_name} ({})", kernel.base_name, kernel.source);
    println!(
        "  resources: {} registers/thread, {} B static smem, {} B spills, {} B stack",
        k.facts.registers,
        k.facts.static_smem,
        k.facts.spill_bytes(),
        k.facts.stack_frame
    );
    if let Some(line) = bounds_line(a, &k.facts.launch_bounds) {
        println!("  launch bounds: {line}");
    }
    if k.facts.spills() {
        println!(
            "  spills: {} B stores, {} B loads per thread (local memory)",
            k.facts.spill_stores, k.facts.spill_loads
        );
    }
    if let Some(lines) = &k.lines {
        for line in where_lines(lines) {
            println!("{line}");
        }
    }
}

/// The launch and its occupancy, then each block limit, marking those
/// that limit it.
fn print_launch(
    block: u32,
    smem: u32,
    declared: Option<&Declared>,
    default_block: bool,
    occ: &Occupancy,
) {
    println!(
        "  launch: {block} threads/block, {smem} B dynamic smem{}",
        match declared {
            Some(Declared {
                launch,
                by: DeclaredBy::Code { at },
                ..
            }) => format!(
                " (launched at {} from {at}, the lowest occupancy of its constant launches)",
                launch.describe()
            ),
            Some(d) => format!(
                " (the declared launch {}, by {})",
                d.launch.describe(),
                d.by.describe()
            ),
            None if default_block => " (the best block size)".to_string(),
            None => String::new(),
        }
    );
    println!(
        "  occupancy: {} ({}/{} warps, {} blocks per SM)",
        percent(occ.occupancy),
        occ.active_warps_per_sm,
        occ.max_warps_per_sm,
        occ.active_blocks_per_sm
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
}

/// The launches of the C++ host code that name the kernel: each constant
/// one and each known only at run time, and where build.rs contradicts one.
fn print_code_launches(m: &Manifest, kernel: &Kernel) {
    let own = launches::of_kernel(m, kernel);
    if own.is_empty() {
        return;
    }
    println!("  C++ launches:");
    for l in own {
        println!("    {}", launches::describe(l));
    }
    for c in launches::contradicting(m, kernel) {
        println!("    note: {c}");
    }
}

/// The register and shared-memory cliffs at this launch.
fn print_cliffs(c: &Cliffs) {
    println!(
        "  cliffs at this launch ({} blocks per SM now):",
        c.active_blocks_per_sm
    );
    for (what, unit, side) in [
        ("registers", " registers/thread", &c.registers),
        (
            "shared memory",
            " B/block (static + dynamic)",
            &c.shared_memory,
        ),
    ] {
        let mut parts = vec![format!("{}{unit} now", side.now)];
        match side.down {
            Some(d) => parts.push(format!(
                "{} (+{}) costs {} block{}: {} per SM, {}",
                d.at,
                d.at - side.now,
                c.active_blocks_per_sm - d.active_blocks_per_sm,
                if c.active_blocks_per_sm - d.active_blocks_per_sm == 1 {
                    ""
                } else {
                    "s"
                },
                d.active_blocks_per_sm,
                percent(d.occupancy)
            )),
            None => parts.push("no block to lose".into()),
        }
        if let Some(u) = side.up {
            parts.push(format!(
                "{} or less (-{}) gains {}: {} per SM, {}",
                u.at,
                side.now - u.at,
                u.active_blocks_per_sm - c.active_blocks_per_sm,
                u.active_blocks_per_sm,
                percent(u.occupancy)
            ));
        }
        println!("    {what}: {}", parts.join("; "));
    }
    println!();
}

/// What would give one more resident block per SM.
fn print_what_if(
    name: &str,
    a: &Arch,
    k: &KernelArch,
    block: u32,
    occ: &Occupancy,
    hints: &WhatIf,
) {
    let next_warps = (hints.target_blocks * block.div_ceil(a.warp_size)).min(occ.max_warps_per_sm);
    println!(
        "  what if (one more block per SM: {} -> {}, occupancy {} -> {}):",
        hints.active_blocks_per_sm,
        hints.target_blocks,
        percent(occ.occupancy),
        percent(f64::from(next_warps) / f64::from(occ.max_warps_per_sm.max(1)))
    );
    let mut any = false;
    if let Some(r) = hints.registers {
        any = true;
        println!(
            "    registers: use at most {} per thread ({} fewer): {}",
            r.max_registers,
            r.drop,
            how_to_cap(name, &k.facts.launch_bounds, r.max_registers)
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
        .filter(|lb| lb.register_cap < k.facts.registers)
    {
        any = true;
        println!(
            "    __launch_bounds__({}, {}){}: caps registers near {}{}",
            lb.max_threads,
            lb.min_blocks_per_sm,
            written(&k.facts.launch_bounds)
                .filter(|_| has_bounds(&k.facts.launch_bounds))
                .map(|w| format!(" in place of {w}"))
                .unwrap_or_default(),
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
}

/// How many spill sites `explain` names; the rest are counted.
const SITES: usize = 5;

/// Where it spills (the sites with the most bytes first) and where its
/// register pressure peaks, one line each, as nvdisasm found them.
fn where_lines(lines: &SourceLines) -> Vec<String> {
    let mut sites: Vec<&SpillSite> = lines.spills.iter().collect();
    // Most bytes first; among equals, file and line order.
    sites.sort_by_key(|s| std::cmp::Reverse(s.bytes()));
    let mut out: Vec<String> = sites
        .iter()
        .take(SITES)
        .map(|s| {
            format!(
                "    at {}:{}{}: {} B stores, {} B loads",
                s.file,
                s.line,
                s.loop_line
                    .map(|l| format!(" (in the loop at :{l})"))
                    .unwrap_or_default(),
                s.stores,
                s.loads
            )
        })
        .collect();
    if sites.len() > SITES {
        out.push(format!(
            "    and {} more lines (cargo occ report --format json lists them)",
            sites.len() - SITES
        ));
    }
    if let Some(p) = &lines.peak_pressure {
        out.push(format!(
            "  peak register pressure: {} live at {}:{}",
            p.registers, p.file, p.line
        ));
    }
    out
}

/// The launch-bounds line: the directives as written, then what each asks
/// for, including the register cap ptxas derives from them.
fn bounds_line(a: &Arch, lb: &LaunchBounds) -> Option<String> {
    let text = written(lb)?;
    let mut facts = Vec::new();
    if let Some(r) = lb.required_block_size() {
        facts.push(format!("exactly {r} threads per block"));
    } else if let Some(max) = lb.max_threads_per_block() {
        facts.push(format!("at most {max} threads per block"));
    }
    if let Some(m) = lb.min_blocks_per_sm {
        facts.push(format!("at least {m} blocks per SM"));
    }
    let derived = lb
        .max_threads_per_block()
        .and_then(|t| suggest::launch_bounds_register_cap(a, t, lb.min_blocks_per_sm.unwrap_or(1)));
    match (lb.max_registers, derived) {
        (Some(n), Some(d)) => facts.push(format!("registers at most {}", n.min(d))),
        (Some(n), None) => facts.push(format!("registers at most {n}")),
        (None, Some(d)) => facts.push(format!("so ptxas keeps registers at or below {d}")),
        (None, None) => {}
    }
    if facts.is_empty() {
        Some(text)
    } else {
        Some(format!("{text}: {}", facts.join(", ")))
    }
}

/// What to write to keep the kernel at `cap` registers per thread. nvcc
/// refuses `__maxnreg__` beside `__launch_bounds__`, and ptxas ignores
/// `-maxrregcount` for a kernel with either.
fn how_to_cap(name: &str, lb: &LaunchBounds, cap: u32) -> String {
    if let Some(n) = lb.max_registers {
        format!("write __maxnreg__({cap}) in place of __maxnreg__({n})")
    } else if has_bounds(lb) {
        let bounds = written(lb).unwrap_or_else(|| "its launch bounds".to_string());
        format!(
            "nvcc refuses __maxnreg__ beside __launch_bounds__ and ptxas ignores -maxrregcount \
             here: raise the min blocks of {bounds} (below), or replace it with __maxnreg__({cap})"
        )
    } else {
        format!(
            "write __maxnreg__({cap}) on the kernel, or Build::max_registers({name:?}, {cap}) \
             in build.rs (-maxrregcount for every kernel in its file)"
        )
    }
}

/// Why a spilling kernel has the registers it has, and what would give
/// ptxas more: fewer min blocks or a smaller block bound, a higher
/// `__maxnreg__` or `-maxrregcount`, each with the occupancy at its cap.
///
/// Long because the spill sites, the loop and the pressure peak are said in the
/// order a reader acts on them.
fn spill_hints(a: &Arch, name: &str, k: &KernelArch, res: &KernelResources, smem: u32) {
    let lb = &k.facts.launch_bounds;
    // The occupancy if ptxas used all `registers` at `block` threads.
    let at = |registers: u32, block: u32| {
        let trial = KernelResources {
            registers,
            max_threads_per_block: None,
            ..*res
        };
        occupancy(a, &trial, &BlockLaunch::new(block).with_dynamic_smem(smem))
            .map(|o| {
                format!(
                    "at {registers}: {} block{} of {block} per SM, {}",
                    o.active_blocks_per_sm,
                    if o.active_blocks_per_sm == 1 { "" } else { "s" },
                    percent(o.occupancy)
                )
            })
            .unwrap_or_default()
    };
    let mut any = false;
    if let Some(n) = lb.max_registers {
        any = true;
        println!(
            "    __maxnreg__({n}) caps it; a higher __maxnreg__ lets ptxas use more \
             (cargo occ sweep {name} shows the spills at each cap)"
        );
    }
    if let (Some(t), None) = (lb.max_threads_per_block(), lb.max_registers) {
        let now = lb.min_blocks_per_sm.unwrap_or(1).max(1);
        let cap_now = suggest::launch_bounds_register_cap(a, t, now);
        any = true;
        println!(
            "    {} keeps registers at or below {} so that {now} block{} of {t} threads fit{}",
            written(lb).unwrap_or_default(),
            cap_now.map_or("the register file".to_string(), |c| c.to_string()),
            if now == 1 { "" } else { "s" },
            if now == 1 { "" } else { " per SM" }
        );
        let relaxed: Vec<(String, u32, u32)> = if now > 1 {
            (1..now)
                .rev()
                .filter_map(|m| {
                    let cap = suggest::launch_bounds_register_cap(a, t, m)?;
                    Some((format!("__launch_bounds__({t}, {m})"), cap, t))
                })
                .collect()
        } else {
            // A smaller block bound, a warp multiple, leaves each thread more.
            let half = (t / 2).div_ceil(32) * 32;
            suggest::launch_bounds_register_cap(a, half, 1)
                .filter(|_| half >= 32 && half < t)
                .map(|cap| (format!("__launch_bounds__({half})"), cap, half))
                .into_iter()
                .collect()
        };
        for (text, cap, block) in relaxed {
            if cap_now.is_some_and(|c| cap <= c) {
                continue;
            }
            println!(
                "    {text}: lets ptxas use up to {cap} registers ({})",
                at(cap, block)
            );
        }
    }
    if let Some(c) = k
        .facts
        .maxrregcount
        .filter(|_| !has_bounds(lb) && lb.max_registers.is_none())
    {
        any = true;
        println!(
            "    the build's -maxrregcount (Build::max_registers({name:?}, ..)) caps it at {c}, \
             as ptxas applied it; raise or remove it (cargo occ sweep {name} shows the spills \
             at each cap)"
        );
    }
    if !any {
        println!(
            "    nothing caps its registers below {}: ptxas spilled by choice; keep fewer \
             values live (cargo occ sweep {name} shows the spills at each cap)",
            k.facts.registers
        );
    }
}
