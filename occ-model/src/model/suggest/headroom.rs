//! Headroom at a launch: the dynamic shared memory a block may still take
//! (`cudaOccAvailableDynamicSMemPerBlock`) and the smallest carveout that
//! keeps the occupancy.

use crate::model::arch::Arch;
use crate::model::occupancy::{
    align_up_carveout, compute, smem_per_block_limit, smem_preference, validate, BlockLaunch,
    CachePref, KernelResources, OccupancyError,
};

/// The most dynamic shared memory per block that still lets `num_blocks`
/// blocks of `launch.block_size` threads reside on one SM
/// (`cudaOccAvailableDynamicSMemPerBlock`, CUDA 13.5). `launch.dynamic_smem`
/// is ignored.
pub fn available_dynamic_smem(
    arch: &Arch,
    kernel: &KernelResources,
    launch: &BlockLaunch,
    num_blocks: u32,
) -> Result<u32, OccupancyError> {
    let base = BlockLaunch {
        dynamic_smem: 0,
        ..*launch
    };
    validate(arch, kernel, &base)?;
    let active = compute(arch, kernel, &base).active_blocks_per_sm;
    if num_blocks == 0 || active < num_blocks {
        return Err(OccupancyError::NumBlocks {
            requested: num_blocks,
            max: active,
        });
    }
    let g = u64::from(arch.smem_granularity);
    let limit = smem_per_block_limit(arch, u64::from(arch.smem_per_sm));
    let budget = if num_blocks == 1 {
        limit
    } else {
        let pref = smem_preference(arch, launch.carveout, launch.cache_pref);
        if pref == 0 {
            align_up_carveout(arch, 1)
        } else {
            pref
        }
    };
    let mut avail = budget / u64::from(num_blocks) / g * g;
    avail = avail.min(limit);
    avail = avail.saturating_sub(kernel.static_smem.into());
    if arch.major >= 8 {
        avail = avail.saturating_sub(arch.reserved_smem_per_block.into());
    }
    avail = avail.min(kernel.max_dynamic_smem_on(arch).into());
    Ok(avail as u32)
}

/// A carveout to request with `cudaFuncAttributePreferredSharedMemoryCarveout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CarveoutHint {
    /// The percentage to request.
    pub percent: u8,
    /// The legal carveout it aligns up to, in bytes.
    pub smem_per_sm: u32,
}

/// The smallest carveout that keeps the launch's occupancy, leaving the rest
/// of the unified memory to L1. `None` on archs with dedicated shared memory
/// (5.x, 6.x) and for launches that cannot run.
pub fn min_carveout(
    arch: &Arch,
    kernel: &KernelResources,
    launch: &BlockLaunch,
) -> Result<Option<CarveoutHint>, OccupancyError> {
    validate(arch, kernel, launch)?;
    if arch.carveouts_kb.is_empty() {
        return Ok(None);
    }
    let target = compute(arch, kernel, launch).active_blocks_per_sm;
    if target == 0 {
        return Ok(None);
    }
    for percent in 0..=100u8 {
        let trial = BlockLaunch {
            carveout: Some(percent),
            ..*launch
        };
        if compute(arch, kernel, &trial).active_blocks_per_sm >= target {
            let bytes = smem_preference(arch, Some(percent), CachePref::None);
            return Ok(Some(CarveoutHint {
                percent,
                smem_per_sm: bytes as u32,
            }));
        }
    }
    Ok(None)
}
