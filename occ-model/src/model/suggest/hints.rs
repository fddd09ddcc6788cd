//! What would reach the next occupancy step: registers to drop, shared
//! memory to shed, or `__launch_bounds__(N, minBlocks)` (`what_if`).

use super::{register_limit, LaunchBoundsHint, RegisterHint, SmemHint};
use crate::model::arch::Arch;
use crate::model::occupancy::{compute, validate, BlockLaunch, KernelResources, OccupancyError};

/// What-if hints for the next occupancy step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WhatIf {
    /// Resident blocks per SM now.
    pub active_blocks_per_sm: u32,
    /// The next step: one more block.
    pub target_blocks: u32,
    /// Fewer registers that reach the target, if any do.
    pub registers: Option<RegisterHint>,
    /// Less shared memory that reaches the target, if any does.
    pub shared_memory: Option<SmemHint>,
    /// The launch bounds that would ask ptxas for the target.
    pub launch_bounds: Option<LaunchBoundsHint>,
}

/// How to get one more resident block per SM: registers to drop, shared
/// memory to shed (dynamic first, then static), or launch bounds to add.
///
/// Long because the three hints (registers, shared memory, launch bounds) share
/// the launch's limits, computed once.
pub fn what_if(
    arch: &Arch,
    kernel: &KernelResources,
    launch: &BlockLaunch,
) -> Result<WhatIf, OccupancyError> {
    validate(arch, kernel, launch)?;
    let now = compute(arch, kernel, launch);
    let target = now.active_blocks_per_sm + 1;

    // Above `max_regs_per_thread` no block launches, so the search starts
    // there: a bogus register count (from a hand-edited manifest, say) must
    // not make this loop run four billion times.
    let registers = (0..kernel
        .registers
        .min(arch.max_regs_per_thread.saturating_add(1)))
        .rev()
        .find(|&r| {
            let k = KernelResources {
                registers: r,
                ..*kernel
            };
            compute(arch, &k, launch).active_blocks_per_sm >= target
        })
        .map(|r| RegisterHint {
            max_registers: r,
            drop: kernel.registers - r,
        });

    let total = kernel.static_smem + launch.dynamic_smem;
    let with_total = |t: u32| {
        let dynamic = t.saturating_sub(kernel.static_smem);
        let k = KernelResources {
            static_smem: t.min(kernel.static_smem),
            ..*kernel
        };
        let l = BlockLaunch {
            dynamic_smem: dynamic.min(launch.dynamic_smem),
            ..*launch
        };
        compute(arch, &k, &l).active_blocks_per_sm >= target
    };
    let shared_memory = if total > 0 && with_total(0) {
        // Largest t in [0, total) with the target reached; monotone.
        let (mut lo, mut hi) = (0u32, total);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if with_total(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(SmemHint {
            max_bytes: lo,
            shed: total - lo,
        })
    } else {
        None
    };

    let bounds_ok = kernel
        .max_threads_per_block
        .is_none_or(|m| launch.block_size <= m);
    let launch_bounds = if bounds_ok && kernel.registers > 0 {
        launch_bounds_register_cap(arch, launch.block_size, target).map(|register_cap| {
            let k = KernelResources {
                registers: register_cap.min(kernel.registers),
                ..*kernel
            };
            LaunchBoundsHint {
                max_threads: launch.block_size,
                min_blocks_per_sm: target,
                register_cap,
                reaches_target: compute(arch, &k, launch).active_blocks_per_sm >= target,
            }
        })
    } else {
        None
    };

    Ok(WhatIf {
        active_blocks_per_sm: now.active_blocks_per_sm,
        target_blocks: target,
        registers,
        shared_memory,
        launch_bounds,
    })
}

/// The most registers per thread ptxas may use under
/// `__launch_bounds__(max_threads, min_blocks_per_sm)` (`min_blocks_per_sm` 0 or 1 for
/// `__launch_bounds__(max_threads)`): the most for which the register file
/// alone fits `min_blocks_per_sm` blocks of `max_threads` threads, at most 255 (the
/// ISA's limit). `None` when not even one register fits them.
pub fn launch_bounds_register_cap(
    arch: &Arch,
    max_threads: u32,
    min_blocks_per_sm: u32,
) -> Option<u32> {
    let blocks = min_blocks_per_sm.max(1);
    (1..=arch.max_regs_per_thread.min(255))
        .rev()
        .find(|&r| register_limit(arch, r, max_threads).is_none_or(|b| b >= blocks))
}
