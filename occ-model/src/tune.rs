//! Launch tuning on top of the occupancy model.
//!
//! - [`best_block_size`][]: `cudaOccMaxPotentialOccupancyBlockSize` (and its
//!   `VariableSMem` form) with the header's exact search: candidates from the
//!   limit down in steps of 32, the first being the limit itself even when it
//!   is not a multiple of 32; a candidate wins only with strictly more
//!   resident threads, so ties keep the larger block; the search stops early
//!   at full occupancy. The limit is the smallest of the arch's maximum, the
//!   kernel's `__launch_bounds__` and an optional user maximum. As an occ
//!   extension, [`TuneRequest::block_multiple`] restricts the candidates to
//!   multiples of N.
//! - [`candidates`][]: the block sizes worth timing for a request: each
//!   occupancy plateau's (blocks per SM) smallest and largest, 128/256/512
//!   and the best block size.
//! - [`available_dynamic_smem`][]: `cudaOccAvailableDynamicSMemPerBlock`
//!   (CUDA 13.5, which subtracts the 1 KB reserve on 8.0+).
//! - [`min_carveout`][]: the smallest carveout that keeps a launch's occupancy.
//! - [`what_if`][]: the fewest registers to drop, or shared-memory bytes to
//!   shed, to reach the next occupancy step, and whether
//!   `__launch_bounds__(N, minBlocks)` would get there.
//! - [`register_steps`][]: the register counts at which the register limit
//!   steps, for an arch and block size.
//!
//! ```
//! use occ_model::{arch, occupancy::KernelResources, tune::*};
//! let sm80 = arch::lookup("sm_80").unwrap();
//! let kernel = KernelResources { registers: 40, ..Default::default() };
//! let best = best_block_size(sm80, &kernel, &TuneRequest::default()).unwrap().unwrap();
//! assert_eq!(best.block_size, 768);
//! assert_eq!(best.occupancy.active_blocks, 2);
//! ```

use crate::arch::Arch;
use crate::occupancy::{
    align_up_carveout, compute, smem_per_block_limit, smem_preference, validate, validate_kernel,
    CachePref, KernelResources, Launch, Occupancy, OccupancyError, PartitionedGc,
};

/// The manifest schema's types this module fills (defined in [`crate::manifest`]).
pub use crate::manifest::{DynamicSmem, LaunchBoundsHint, RegisterHint, SmemHint};

impl Default for DynamicSmem {
    fn default() -> Self {
        DynamicSmem::Fixed(0)
    }
}

impl DynamicSmem {
    /// Bytes for a block of `block_size` threads.
    pub fn bytes(&self, block_size: u32) -> u64 {
        match *self {
            DynamicSmem::Fixed(b) => u64::from(b),
            DynamicSmem::PerThread { per_thread, fixed } => {
                u64::from(per_thread) * u64::from(block_size) + u64::from(fixed)
            }
        }
    }
}

/// What [`best_block_size`] searches over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct TuneRequest {
    /// Dynamic shared memory per block.
    pub dynamic_smem: DynamicSmem,
    /// A user cap on the block size (on top of the arch and launch bounds).
    pub max_block_size: Option<u32>,
    /// Only consider block sizes that are multiples of this (occ extension).
    pub block_multiple: Option<u32>,
    /// Carveout preference in percent.
    pub carveout: Option<u8>,
    /// Legacy cache preference.
    pub cache_pref: CachePref,
    /// Partitioned global caching request.
    pub partitioned_gc: PartitionedGc,
}

/// The block size [`best_block_size`] picked.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BestBlock {
    /// Threads per block.
    pub block_size: u32,
    /// Dynamic shared memory per block at that size.
    pub dynamic_smem: u32,
    /// The occupancy at that size.
    pub occupancy: Occupancy,
}

impl BestBlock {
    /// Resident blocks per SM.
    pub fn blocks_per_sm(&self) -> u32 {
        self.occupancy.active_blocks
    }

    /// The header's `minGridSize`: blocks for a full machine of `num_sms` SMs.
    pub fn min_grid_size(&self, num_sms: u32) -> u32 {
        self.occupancy.active_blocks.saturating_mul(num_sms)
    }
}

/// The largest block size the search may consider.
fn block_limit(
    arch: &Arch,
    kernel: &KernelResources,
    req: &TuneRequest,
) -> Result<u32, OccupancyError> {
    let limit = arch
        .max_threads_per_block
        .min(kernel.max_threads_per_block.unwrap_or(u32::MAX))
        .min(req.max_block_size.unwrap_or(u32::MAX));
    if limit == 0 {
        return Err(OccupancyError::BlockSize {
            block_size: 0,
            max: arch.max_threads_per_block,
            arch: arch.name,
        });
    }
    Ok(limit)
}

/// Occupancy at one candidate, with the header's treatment of shared memory
/// no block could have (0 blocks, not an error).
fn candidate(
    arch: &Arch,
    kernel: &KernelResources,
    req: &TuneRequest,
    block_size: u32,
) -> (Occupancy, u32) {
    let dynamic = req.dynamic_smem.bytes(block_size);
    let fits = u64::from(kernel.static_smem) + dynamic <= u64::from(arch.smem_per_block_optin);
    let dynamic = if fits { dynamic as u32 } else { u32::MAX };
    let launch = Launch {
        block_size,
        dynamic_smem: dynamic,
        carveout: req.carveout,
        cache_pref: req.cache_pref,
        partitioned_gc: req.partitioned_gc,
    };
    let mut occ = compute(arch, kernel, &launch);
    if !fits {
        // The header gives 0: the dynamic size exceeds the attribute.
        occ.active_blocks = 0;
        occ.active_warps = 0;
        occ.occupancy = 0.0;
        occ.limits.shared_memory = Some(0);
        occ.limiters =
            crate::occupancy::Limiters::from_bits(crate::occupancy::Limiter::SharedMemory.bit());
    }
    (occ, dynamic)
}

/// The largest block size `req` allows for `kernel` and the step of the
/// search (the warp, or [`TuneRequest::block_multiple`]), after checking
/// the kernel fits the arch at all.
fn limit_and_step(
    arch: &Arch,
    kernel: &KernelResources,
    req: &TuneRequest,
) -> Result<(u32, u32), OccupancyError> {
    validate_kernel(arch, kernel, req.carveout)?;
    let limit = block_limit(arch, kernel, req)?;
    let step = match req.block_multiple {
        Some(0) => return Err(OccupancyError::BlockMultiple),
        Some(n) => n,
        None => arch.warp_size,
    };
    Ok((limit, step))
}

/// The block size with the most resident threads per SM, exactly as
/// `cudaOccMaxPotentialOccupancyBlockSize` (`…VariableSMem` for
/// [`DynamicSmem::PerThread`]) picks it. `Ok(None)` when no block size can
/// run (the header's block size 0).
pub fn best_block_size(
    arch: &Arch,
    kernel: &KernelResources,
    req: &TuneRequest,
) -> Result<Option<BestBlock>, OccupancyError> {
    let (limit, step) = limit_and_step(arch, kernel, req)?;
    let full = arch.max_threads_per_sm;
    let mut best: Option<BestBlock> = None;
    let mut best_threads = 0u32;
    let mut consider = |size: u32| -> bool {
        let (occ, dynamic) = candidate(arch, kernel, req, size);
        let threads = size * occ.active_blocks;
        if threads > best_threads {
            best_threads = threads;
            best = Some(BestBlock {
                block_size: size,
                dynamic_smem: dynamic,
                occupancy: occ,
            });
        }
        best_threads == full
    };
    if req.block_multiple.is_some() {
        let mut size = limit / step * step;
        while size > 0 {
            if consider(size) {
                break;
            }
            size -= step;
        }
    } else {
        let mut aligned = limit.div_ceil(step) * step;
        while aligned > 0 {
            if consider(limit.min(aligned)) {
                break;
            }
            aligned -= step;
        }
    }
    Ok(best)
}

/// Why a block size is among the [`candidates`] worth timing. A plateau
/// is a run of block sizes with the same resident blocks per SM.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum CandidateWhy {
    /// The smallest block size of an occupancy plateau.
    PlateauMin,
    /// The largest block size of an occupancy plateau.
    PlateauMax,
    /// One of the usual sizes, 128, 256 and 512.
    Usual,
    /// [`best_block_size`]'s pick, the baseline a measurement is compared with.
    MaxOccupancy,
}

/// A block size worth timing: one of [`candidates`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TuneCandidate {
    /// Threads per block.
    pub block_size: u32,
    /// Dynamic shared memory per block at that size.
    pub dynamic_smem: u32,
    /// The occupancy at that size.
    pub occupancy: Occupancy,
    /// Why it is a candidate (sorted; a size may be several at once).
    pub why: Vec<CandidateWhy>,
}

/// The usual block sizes every candidate set tries when the site allows them.
pub const USUAL_BLOCK_SIZES: [u32; 3] = [128, 256, 512];

/// The block sizes [`best_block_size`] searches for `req`, smallest first:
/// multiples of the step (the warp, or [`TuneRequest::block_multiple`]) up
/// to the limit, and the limit itself when it is not one (as the header's
/// search starts there).
pub fn search_sizes(
    arch: &Arch,
    kernel: &KernelResources,
    req: &TuneRequest,
) -> Result<Vec<u32>, OccupancyError> {
    let (limit, step) = limit_and_step(arch, kernel, req)?;
    let mut sizes: Vec<u32> = (1..=limit / step).map(|m| m * step).collect();
    if req.block_multiple.is_none() && !limit.is_multiple_of(step) {
        sizes.push(limit);
    }
    Ok(sizes)
}

/// `block_size` as [`best_block_size`] would report it, when the request
/// allows it (one of [`search_sizes`]) and it launches (a measured block
/// baked at a site must be both); `Ok(None)` otherwise.
pub fn at_block_size(
    arch: &Arch,
    kernel: &KernelResources,
    req: &TuneRequest,
    block_size: u32,
) -> Result<Option<BestBlock>, OccupancyError> {
    if !search_sizes(arch, kernel, req)?.contains(&block_size) {
        return Ok(None);
    }
    let (occupancy, dynamic_smem) = candidate(arch, kernel, req, block_size);
    Ok((occupancy.active_blocks > 0).then_some(BestBlock {
        block_size,
        dynamic_smem,
        occupancy,
    }))
}

/// The block sizes worth timing for `req`: for each occupancy plateau
/// over [`search_sizes`] (the sizes with the same resident blocks per SM;
/// across one, occupancy grows with the block, so its ends are its most
/// and least resident warps per block), its smallest and largest block
/// size, plus [`USUAL_BLOCK_SIZES`] that the request allows
/// and [`best_block_size`]'s pick (always one of them); block sizes that
/// cannot launch (0 resident blocks) are left out. Sorted
/// by block size, each size once. Empty when no block size launches.
pub fn candidates(
    arch: &Arch,
    kernel: &KernelResources,
    req: &TuneRequest,
) -> Result<Vec<TuneCandidate>, OccupancyError> {
    let sizes = search_sizes(arch, kernel, req)?;
    let evaluated: Vec<(u32, Occupancy, u32)> = sizes
        .iter()
        .map(|&s| {
            let (occ, dynamic) = candidate(arch, kernel, req, s);
            (s, occ, dynamic)
        })
        .filter(|(_, occ, _)| occ.active_blocks > 0)
        .collect();
    let mut picked: std::collections::BTreeMap<u32, Vec<CandidateWhy>> = Default::default();
    let mut levels: std::collections::BTreeMap<u32, (u32, u32)> = Default::default();
    for (size, occ, _) in &evaluated {
        let e = levels.entry(occ.active_blocks).or_insert((*size, *size));
        e.0 = e.0.min(*size);
        e.1 = e.1.max(*size);
    }
    for (lo, hi) in levels.values() {
        picked
            .entry(*lo)
            .or_default()
            .push(CandidateWhy::PlateauMin);
        picked
            .entry(*hi)
            .or_default()
            .push(CandidateWhy::PlateauMax);
    }
    for usual in USUAL_BLOCK_SIZES {
        if evaluated.iter().any(|(s, _, _)| *s == usual) {
            picked.entry(usual).or_default().push(CandidateWhy::Usual);
        }
    }
    if let Some(best) = best_block_size(arch, kernel, req)? {
        picked
            .entry(best.block_size)
            .or_default()
            .push(CandidateWhy::MaxOccupancy);
    }
    Ok(evaluated
        .into_iter()
        .filter_map(|(size, occupancy, dynamic_smem)| {
            picked.remove(&size).map(|mut why| {
                why.sort();
                why.dedup();
                TuneCandidate {
                    block_size: size,
                    dynamic_smem,
                    occupancy,
                    why,
                }
            })
        })
        .collect())
}

/// The most dynamic shared memory per block that still lets `num_blocks`
/// blocks of `launch.block_size` threads reside on one SM
/// (`cudaOccAvailableDynamicSMemPerBlock`, CUDA 13.5). `launch.dynamic_smem`
/// is ignored.
pub fn available_dynamic_smem(
    arch: &Arch,
    kernel: &KernelResources,
    launch: &Launch,
    num_blocks: u32,
) -> Result<u32, OccupancyError> {
    let base = Launch {
        dynamic_smem: 0,
        ..*launch
    };
    validate(arch, kernel, &base)?;
    let active = compute(arch, kernel, &base).active_blocks;
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
    launch: &Launch,
) -> Result<Option<CarveoutHint>, OccupancyError> {
    validate(arch, kernel, launch)?;
    if arch.carveouts_kb.is_empty() {
        return Ok(None);
    }
    let target = compute(arch, kernel, launch).active_blocks;
    if target == 0 {
        return Ok(None);
    }
    for percent in 0..=100u8 {
        let trial = Launch {
            carveout: Some(percent),
            ..*launch
        };
        if compute(arch, kernel, &trial).active_blocks >= target {
            let bytes = smem_preference(arch, Some(percent), CachePref::None);
            return Ok(Some(CarveoutHint {
                percent,
                smem_per_sm: bytes as u32,
            }));
        }
    }
    Ok(None)
}

/// What-if hints for the next occupancy step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WhatIf {
    /// Resident blocks per SM now.
    pub active_blocks: u32,
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
pub fn what_if(
    arch: &Arch,
    kernel: &KernelResources,
    launch: &Launch,
) -> Result<WhatIf, OccupancyError> {
    validate(arch, kernel, launch)?;
    let now = compute(arch, kernel, launch);
    let target = now.active_blocks + 1;

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
            compute(arch, &k, launch).active_blocks >= target
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
        let l = Launch {
            dynamic_smem: dynamic.min(launch.dynamic_smem),
            ..*launch
        };
        compute(arch, &k, &l).active_blocks >= target
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
                min_blocks: target,
                register_cap,
                reaches_target: compute(arch, &k, launch).active_blocks >= target,
            }
        })
    } else {
        None
    };

    Ok(WhatIf {
        active_blocks: now.active_blocks,
        target_blocks: target,
        registers,
        shared_memory,
        launch_bounds,
    })
}

/// The most registers per thread ptxas may use under
/// `__launch_bounds__(max_threads, min_blocks)` (`min_blocks` 0 or 1 for
/// `__launch_bounds__(max_threads)`): the most for which the register file
/// alone fits `min_blocks` blocks of `max_threads` threads, at most 255 (the
/// ISA's limit). `None` when not even one register fits them.
pub fn launch_bounds_register_cap(arch: &Arch, max_threads: u32, min_blocks: u32) -> Option<u32> {
    let blocks = min_blocks.max(1);
    (1..=arch.max_regs_per_thread.min(255))
        .rev()
        .find(|&r| register_limit(arch, r, max_threads).is_none_or(|b| b >= blocks))
}

/// The register limit alone (blocks per SM) for `registers` per thread and
/// `block_size` threads, with partitioned global caching off; `None` for 0
/// registers (no limit).
pub fn register_limit(arch: &Arch, registers: u32, block_size: u32) -> Option<u32> {
    let k = KernelResources {
        registers,
        ..Default::default()
    };
    compute(arch, &k, &Launch::new(block_size.max(1)))
        .limits
        .registers
}

/// One step of the register limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RegisterStep {
    /// The most registers per thread that still give `blocks`.
    pub max_registers: u32,
    /// Blocks per SM the register file allows up to `max_registers`.
    pub blocks: u32,
}

/// Iterator returned by [`register_steps`].
#[derive(Debug, Clone)]
pub struct RegisterSteps {
    arch: &'static Arch,
    block_size: u32,
    next: u32,
}

impl Iterator for RegisterSteps {
    type Item = RegisterStep;

    fn next(&mut self) -> Option<RegisterStep> {
        let max = self.arch.max_regs_per_thread;
        while self.next <= max {
            let r = self.next;
            self.next += 1;
            let here = register_limit(self.arch, r, self.block_size).unwrap_or(u32::MAX);
            let after = if r == max {
                None
            } else {
                register_limit(self.arch, r + 1, self.block_size)
            };
            if after != Some(here) {
                return Some(RegisterStep {
                    max_registers: r,
                    blocks: here,
                });
            }
        }
        None
    }
}

/// The register counts (1 up to the arch's per-thread cap) at which the
/// register limit for `block_size` threads changes, each with the blocks per
/// SM it allows: the last count before each drop, and the cap itself.
pub fn register_steps(arch: &'static Arch, block_size: u32) -> RegisterSteps {
    RegisterSteps {
        arch,
        block_size,
        next: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::lookup;

    fn k(registers: u32) -> KernelResources {
        KernelResources {
            registers,
            ..Default::default()
        }
    }

    #[test]
    fn doc_vectors_best_block() {
        let a = lookup("sm_80").unwrap();
        let kk = KernelResources {
            static_smem: 16384,
            ..k(40)
        };
        let b = best_block_size(a, &kk, &TuneRequest::default())
            .unwrap()
            .unwrap();
        assert_eq!((b.block_size, b.blocks_per_sm()), (768, 2));
        assert_eq!(b.min_grid_size(108), 216);
        let h = lookup("sm_90").unwrap();
        let b = best_block_size(h, &k(32), &TuneRequest::default())
            .unwrap()
            .unwrap();
        assert_eq!((b.block_size, b.blocks_per_sm()), (1024, 2));
        let ga = lookup("sm_86").unwrap();
        let kk = KernelResources {
            static_smem: 48 * 1024,
            ..k(64)
        };
        let b = best_block_size(ga, &kk, &TuneRequest::default())
            .unwrap()
            .unwrap();
        assert_eq!((b.block_size, b.blocks_per_sm()), (1024, 1));
    }

    #[test]
    fn v17_first_candidate_is_the_limit() {
        let a = lookup("sm_80").unwrap();
        let kk = KernelResources {
            max_threads_per_block: Some(200),
            ..k(40)
        };
        let b = best_block_size(a, &kk, &TuneRequest::default())
            .unwrap()
            .unwrap();
        assert_eq!(b.block_size, 192);
        // One block fits at any size (100 KB static): the limit itself wins,
        // although it is not a multiple of 32.
        let kk = KernelResources {
            max_threads_per_block: Some(1000),
            static_smem: 100 * 1024,
            ..k(16)
        };
        let b = best_block_size(a, &kk, &TuneRequest::default())
            .unwrap()
            .unwrap();
        assert_eq!((b.block_size, b.blocks_per_sm()), (1000, 1));
        // The user cap works the same way.
        let req = TuneRequest {
            max_block_size: Some(200),
            ..Default::default()
        };
        assert_eq!(
            best_block_size(a, &k(40), &req)
                .unwrap()
                .unwrap()
                .block_size,
            192
        );
    }

    #[test]
    fn v18_variable_smem() {
        let a = lookup("sm_80").unwrap();
        let req = TuneRequest {
            dynamic_smem: DynamicSmem::PerThread {
                per_thread: 64,
                fixed: 0,
            },
            ..Default::default()
        };
        // The vector used the runtime's default attribute (48 KB dynamic):
        // 1024 × 64 B does not fit, and 512 threads × 4 blocks fill the SM.
        let runtime_default = KernelResources {
            max_dynamic_smem: Some(48 * 1024),
            ..k(32)
        };
        let b = best_block_size(a, &runtime_default, &req).unwrap().unwrap();
        assert_eq!((b.block_size, b.blocks_per_sm()), (512, 4));
        assert_eq!(b.dynamic_smem, 64 * 512);
        // Opted in to the maximum, 1024 × 2 blocks already fills the SM.
        let b = best_block_size(a, &k(32), &req).unwrap().unwrap();
        assert_eq!((b.block_size, b.blocks_per_sm()), (1024, 2));
    }

    #[test]
    fn nothing_fits_and_block_multiple() {
        let a = lookup("sm_80").unwrap();
        assert_eq!(
            best_block_size(
                a,
                &k(255),
                &TuneRequest {
                    dynamic_smem: DynamicSmem::Fixed(200_000),
                    ..Default::default()
                }
            )
            .unwrap(),
            None
        );
        let req = TuneRequest {
            block_multiple: Some(96),
            ..Default::default()
        };
        let b = best_block_size(a, &k(40), &req).unwrap().unwrap();
        assert_eq!(b.block_size % 96, 0);
        // Brute force over multiples of 96: most threads, then larger block.
        let best = (1..=10)
            .map(|m| m * 96)
            .map(|s| (s * compute(a, &k(40), &Launch::new(s)).active_blocks, s))
            .max()
            .unwrap();
        assert_eq!(b.block_size, best.1);
        assert!(matches!(
            best_block_size(
                a,
                &k(40),
                &TuneRequest {
                    block_multiple: Some(0),
                    ..Default::default()
                }
            ),
            Err(OccupancyError::BlockMultiple)
        ));
    }

    /// Every request shape the candidate tests try.
    fn requests() -> Vec<TuneRequest> {
        vec![
            TuneRequest::default(),
            TuneRequest {
                block_multiple: Some(96),
                ..Default::default()
            },
            TuneRequest {
                max_block_size: Some(200),
                ..Default::default()
            },
            TuneRequest {
                dynamic_smem: DynamicSmem::PerThread {
                    per_thread: 96,
                    fixed: 1024,
                },
                ..Default::default()
            },
            TuneRequest {
                dynamic_smem: DynamicSmem::Fixed(40 * 1024),
                ..Default::default()
            },
        ]
    }

    #[test]
    fn candidates_cover_every_plateau_and_all_launch() {
        let mut checked = 0;
        for arch_name in ["sm_61", "sm_80", "sm_86", "sm_90", "sm_120"] {
            let a = lookup(arch_name).unwrap();
            for registers in [16, 32, 40, 64, 72, 128, 255] {
                for static_smem in [0, 12 * 1024, 48 * 1024] {
                    for bounds in [None, Some(256), Some(1000)] {
                        let kk = KernelResources {
                            static_smem,
                            max_threads_per_block: bounds,
                            ..k(registers)
                        };
                        for req in requests() {
                            let Ok(cands) = candidates(a, &kk, &req) else {
                                continue;
                            };
                            checked += 1;
                            // Brute force: every block size 1..=1024 the
                            // request allows, and its occupancy.
                            let limit = 1024
                                .min(a.max_threads_per_block)
                                .min(bounds.unwrap_or(u32::MAX))
                                .min(req.max_block_size.unwrap_or(u32::MAX));
                            let allowed = |s: u32| match req.block_multiple {
                                Some(m) => s.is_multiple_of(m),
                                None => s.is_multiple_of(32) || s == limit,
                            };
                            let brute: Vec<(u32, Occupancy)> = (1..=limit)
                                .filter(|&s| allowed(s))
                                .map(|s| (s, candidate(a, &kk, &req, s).0))
                                .filter(|(_, o)| o.active_blocks > 0)
                                .collect();
                            // Sorted, each size once, each one launches.
                            assert!(cands.windows(2).all(|w| w[0].block_size < w[1].block_size));
                            for c in &cands {
                                let (o, _) = candidate(a, &kk, &req, c.block_size);
                                assert!(o.active_blocks > 0, "{arch_name} {c:?}");
                                assert_eq!(o, c.occupancy);
                                assert!(allowed(c.block_size), "{c:?} {req:?}");
                            }
                            // Each plateau's smallest and largest size is a
                            // candidate; a plateau is one run of sizes.
                            let levels: std::collections::BTreeSet<u32> =
                                brute.iter().map(|(_, o)| o.active_blocks).collect();
                            for level in &levels {
                                let at: Vec<u32> = brute
                                    .iter()
                                    .filter(|(_, o)| o.active_blocks == *level)
                                    .map(|(s, _)| *s)
                                    .collect();
                                let run = brute
                                    .iter()
                                    .skip_while(|(s, _)| *s != at[0])
                                    .take(at.len())
                                    .all(|(_, o)| o.active_blocks == *level);
                                assert!(run, "{arch_name} r{registers}: plateau {level} is split");
                                for s in [at[0], at[at.len() - 1]] {
                                    assert!(
                                        cands.iter().any(|c| c.block_size == s),
                                        "{arch_name} r{registers} level {level}: {s} missing"
                                    );
                                }
                            }
                            // Nothing else but the usual sizes and the best.
                            let best = best_block_size(a, &kk, &req).unwrap();
                            assert_eq!(best.is_none(), cands.is_empty());
                            for c in &cands {
                                let extreme = brute
                                    .iter()
                                    .filter(|(_, o)| o.active_blocks == c.occupancy.active_blocks)
                                    .map(|(s, _)| *s)
                                    .fold((u32::MAX, 0), |(lo, hi), s| (lo.min(s), hi.max(s)));
                                assert!(
                                    c.block_size == extreme.0
                                        || c.block_size == extreme.1
                                        || USUAL_BLOCK_SIZES.contains(&c.block_size)
                                        || best.is_some_and(|b| b.block_size == c.block_size),
                                    "{c:?}"
                                );
                            }
                            for usual in USUAL_BLOCK_SIZES {
                                assert_eq!(
                                    brute.iter().any(|(s, _)| *s == usual),
                                    cands.iter().any(|c| c.block_size == usual),
                                    "{arch_name} {usual} {req:?}"
                                );
                            }
                            if let Some(b) = best {
                                let c = cands.iter().find(|c| c.block_size == b.block_size);
                                assert!(
                                    c.is_some_and(|c| c.why.contains(&CandidateWhy::MaxOccupancy))
                                );
                            }
                        }
                    }
                }
            }
        }
        assert!(checked > 400, "{checked}");
    }

    #[test]
    fn at_block_size_is_a_candidate_evaluation_or_none() {
        let a = lookup("sm_80").unwrap();
        let kk = KernelResources {
            max_threads_per_block: Some(512),
            ..k(40)
        };
        let req = TuneRequest::default();
        for c in candidates(a, &kk, &req).unwrap() {
            let at = at_block_size(a, &kk, &req, c.block_size).unwrap().unwrap();
            assert_eq!(
                (at.occupancy, at.dynamic_smem),
                (c.occupancy, c.dynamic_smem)
            );
        }
        // Above the bounds, off the warp multiple, or unlaunchable: none.
        assert_eq!(at_block_size(a, &kk, &req, 1024).unwrap(), None);
        assert_eq!(at_block_size(a, &kk, &req, 100).unwrap(), None);
        let big = TuneRequest {
            dynamic_smem: DynamicSmem::PerThread {
                per_thread: 400,
                fixed: 0,
            },
            ..Default::default()
        };
        assert_eq!(at_block_size(a, &kk, &big, 512).unwrap(), None);
        assert!(at_block_size(a, &kk, &big, 256).unwrap().is_some());
    }

    #[test]
    fn a_required_block_is_the_only_candidate() {
        let a = lookup("sm_80").unwrap();
        let req = TuneRequest {
            max_block_size: Some(384),
            block_multiple: Some(384),
            ..Default::default()
        };
        let c = candidates(a, &k(32), &req).unwrap();
        assert_eq!(
            c.iter().map(|c| c.block_size).collect::<Vec<_>>(),
            vec![384]
        );
        // Nothing launches: no candidate.
        let req = TuneRequest {
            dynamic_smem: DynamicSmem::Fixed(200_000),
            ..Default::default()
        };
        assert!(candidates(a, &k(32), &req).unwrap().is_empty());
        assert!(matches!(
            candidates(
                a,
                &k(32),
                &TuneRequest {
                    block_multiple: Some(0),
                    ..Default::default()
                }
            ),
            Err(OccupancyError::BlockMultiple)
        ));
    }

    #[test]
    fn v19_available_dynamic_smem() {
        let h = lookup("sm_90").unwrap();
        let l = Launch::new(128);
        assert_eq!(available_dynamic_smem(h, &k(0), &l, 1).unwrap(), 232448);
        assert_eq!(available_dynamic_smem(h, &k(0), &l, 2).unwrap(), 115712);
        assert!(matches!(
            available_dynamic_smem(h, &k(0), &l, 0),
            Err(OccupancyError::NumBlocks { .. })
        ));
        assert!(available_dynamic_smem(h, &k(0), &l, 17).is_err());
        // sm_80, 1 block: 166912 in 13.5.
        let a = lookup("sm_80").unwrap();
        assert_eq!(available_dynamic_smem(a, &k(0), &l, 1).unwrap(), 166912);
    }

    #[test]
    fn carveout_hint_keeps_occupancy() {
        let a = lookup("sm_80").unwrap();
        let kk = KernelResources {
            static_smem: 16384,
            ..k(40)
        };
        let l = Launch::new(256);
        let hint = min_carveout(a, &kk, &l).unwrap().unwrap();
        // 6 blocks × 17408 B = 104448 B → the 132 KB carveout.
        assert_eq!(hint.smem_per_sm, 132 * 1024);
        let with = compute(a, &kk, &l.with_carveout(hint.percent)).active_blocks;
        assert_eq!(with, 6);
        if hint.percent > 0 {
            let less = compute(a, &kk, &l.with_carveout(hint.percent - 1)).active_blocks;
            assert!(less < 6);
        }
        assert_eq!(
            min_carveout(lookup("sm_61").unwrap(), &kk, &l).unwrap(),
            None
        );
    }

    #[test]
    fn launch_bounds_caps_follow_the_register_file() {
        let a = lookup("sm_80").unwrap();
        // 64 Ki registers: 1024 threads x 2 blocks leave 32 each, 1 block 64.
        assert_eq!(launch_bounds_register_cap(a, 1024, 2), Some(32));
        assert_eq!(launch_bounds_register_cap(a, 1024, 1), Some(64));
        assert_eq!(launch_bounds_register_cap(a, 1024, 0), Some(64));
        // Small blocks: the ISA's 255, never the header's 256.
        assert_eq!(launch_bounds_register_cap(a, 32, 1), Some(255));
        // Each cap is the largest that fits: one more register does not.
        for (threads, blocks) in [(256, 3), (384, 2), (1024, 2), (96, 7)] {
            let cap = launch_bounds_register_cap(a, threads, blocks).unwrap();
            assert!(register_limit(a, cap, threads).is_none_or(|b| b >= blocks));
            assert!(register_limit(a, cap + 1, threads).is_some_and(|b| b < blocks));
        }
        // 64 blocks of 1024 threads cannot fit at any register count.
        assert_eq!(launch_bounds_register_cap(a, 1024, 64), None);
    }

    #[test]
    fn what_if_registers_and_smem() {
        let a = lookup("sm_80").unwrap();
        let kk = KernelResources {
            static_smem: 16384,
            ..k(40)
        };
        let w = what_if(a, &kk, &Launch::new(256)).unwrap();
        assert_eq!((w.active_blocks, w.target_blocks), (6, 7));
        // 7 blocks of 8 warps need ≤ 32 registers (Rw = 1024 → 16 warps/SP).
        assert_eq!(
            w.registers,
            Some(RegisterHint {
                max_registers: 32,
                drop: 8
            })
        );
        // Shared memory is not the limiter: shedding cannot help.
        assert_eq!(w.shared_memory, None);
        let lb = w.launch_bounds.unwrap();
        assert_eq!(
            (lb.max_threads, lb.min_blocks, lb.register_cap),
            (256, 7, 32)
        );
        assert!(lb.reaches_target);

        // Shared-memory bound kernel.
        let ga = lookup("sm_86").unwrap();
        let kk = KernelResources {
            static_smem: 48 * 1024,
            ..k(64)
        };
        let w = what_if(ga, &kk, &Launch::new(128)).unwrap();
        let s = w.shared_memory.unwrap();
        // 3 blocks in 100 KB: roundUp(x + 1 KB, 128) ≤ 34133 → x ≤ 33024.
        assert_eq!(s.max_bytes, 33024);
        assert_eq!(s.shed, 48 * 1024 - 33024);
        assert!(!w.launch_bounds.unwrap().reaches_target);
    }

    #[test]
    fn register_steps_match_limits() {
        let a = lookup("sm_80").unwrap();
        let steps: Vec<_> = register_steps(a, 256).collect();
        assert!(steps.windows(2).all(|w| w[0].blocks > w[1].blocks));
        assert!(steps
            .windows(2)
            .all(|w| w[0].max_registers < w[1].max_registers));
        for s in &steps {
            assert_eq!(register_limit(a, s.max_registers, 256), Some(s.blocks));
            if s.max_registers < 256 {
                assert!(register_limit(a, s.max_registers + 1, 256).unwrap() < s.blocks);
            }
        }
        // 40 regs → 6 blocks: the 6-block step ends at 40.
        assert!(steps.contains(&RegisterStep {
            max_registers: 40,
            blocks: 6
        }));
        assert_eq!(steps.last().unwrap().max_registers, 256);
    }
}
