//! The block-size search (`cudaOccMaxPotentialOccupancyBlockSize`), and
//! the block sizes worth timing for a site's request.

use super::DynamicSmem;
use crate::model::arch::Arch;
use crate::model::occupancy::{
    compute, validate_kernel, BlockLaunch, CachePref, KernelResources, Occupancy, OccupancyError,
    PartitionedGc,
};

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
    pub fn active_blocks_per_sm(&self) -> u32 {
        self.occupancy.active_blocks_per_sm
    }

    /// The header's `minGridSize`: blocks for a full machine of `num_sms` SMs.
    pub fn min_grid_size(&self, num_sms: u32) -> u32 {
        self.occupancy.active_blocks_per_sm.saturating_mul(num_sms)
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
pub(super) fn candidate(
    arch: &Arch,
    kernel: &KernelResources,
    req: &TuneRequest,
    block_size: u32,
) -> (Occupancy, u32) {
    let dynamic = req.dynamic_smem.bytes(block_size);
    let fits = u64::from(kernel.static_smem) + dynamic <= u64::from(arch.smem_per_block_optin);
    let dynamic = if fits { dynamic as u32 } else { u32::MAX };
    let launch = BlockLaunch {
        block_size,
        dynamic_smem: dynamic,
        carveout: req.carveout,
        cache_pref: req.cache_pref,
        partitioned_gc: req.partitioned_gc,
    };
    let mut occ = compute(arch, kernel, &launch);
    if !fits {
        // The header gives 0: the dynamic size exceeds the attribute.
        occ.active_blocks_per_sm = 0;
        occ.active_warps_per_sm = 0;
        occ.occupancy = 0.0;
        occ.limits.shared_memory = Some(0);
        occ.limiters = crate::model::occupancy::Limiters::from_bits(
            crate::model::occupancy::Limiter::SharedMemory.bit(),
        );
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
        let threads = size * occ.active_blocks_per_sm;
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
    /// The kernel's declared launch ([`shaped_candidates`]).
    Declared,
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
    Ok((occupancy.active_blocks_per_sm > 0).then_some(BestBlock {
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
        .filter(|(_, occ, _)| occ.active_blocks_per_sm > 0)
        .collect();
    let mut picked: std::collections::BTreeMap<u32, Vec<CandidateWhy>> = Default::default();
    let mut levels: std::collections::BTreeMap<u32, (u32, u32)> = Default::default();
    for (size, occ, _) in &evaluated {
        let e = levels
            .entry(occ.active_blocks_per_sm)
            .or_insert((*size, *size));
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

/// The most threads a block has along x, y and z on every GPU from
/// compute capability 2.0 on (`maxThreadsDim`).
const MAX_BLOCK_DIMS: [u32; 3] = [1024, 1024, 64];

/// A candidate of [`shaped_candidates`]: a block shape and the
/// [`TuneCandidate`] of its threads.
#[derive(Debug, Clone, PartialEq)]
pub struct ShapedCandidate {
    /// The block (x, y, z); `candidate.block_size` is its product.
    pub block: [u32; 3],
    /// The candidate at that many threads.
    pub candidate: TuneCandidate,
}

/// [`candidates`] for a kernel launched with the block `shape`, as shapes
/// of its dimensionality: the dimensions before its last one above 1 stay
/// as they are and that one varies (32x8: 32 × y; 8x8x4: 8 × 8 × z). The
/// occupancy depends on the threads alone, so each is [`candidates`]'s at
/// that many threads, for `req` narrowed to whole warps that are multiples
/// of the fixed dimensions and to CUDA's limit on the varied one
/// (1024, 1024, 64). `shape` itself is one ([`CandidateWhy::Declared`])
/// when it launches. A 1-D `shape` gives [`candidates`] as `[n, 1, 1]`.
pub fn shaped_candidates(
    arch: &Arch,
    kernel: &KernelResources,
    req: &TuneRequest,
    shape: [u32; 3],
) -> Result<Vec<ShapedCandidate>, OccupancyError> {
    let shape = shape.map(|d| d.max(1));
    let free = shape.iter().rposition(|&d| d > 1).unwrap_or(0);
    if free == 0 {
        return Ok(candidates(arch, kernel, req)?
            .into_iter()
            .map(|c| ShapedCandidate {
                block: [c.block_size, 1, 1],
                candidate: c,
            })
            .collect());
    }
    let fixed: u32 = shape[..free].iter().product();
    let step = lcm(fixed, req.block_multiple.unwrap_or(arch.warp_size));
    let cap = fixed.saturating_mul(MAX_BLOCK_DIMS[free]);
    let narrowed = TuneRequest {
        block_multiple: Some(step),
        max_block_size: Some(req.max_block_size.map_or(cap, |m| m.min(cap))),
        ..*req
    };
    let mut found = candidates(arch, kernel, &narrowed)?;
    let declared: u32 = shape.iter().product();
    match found.iter_mut().find(|c| c.block_size == declared) {
        Some(c) => {
            c.why.push(CandidateWhy::Declared);
            c.why.sort();
        }
        None if declared <= block_limit(arch, kernel, req)? => {
            let (occupancy, dynamic_smem) = candidate(arch, kernel, req, declared);
            if occupancy.active_blocks_per_sm > 0 {
                found.push(TuneCandidate {
                    block_size: declared,
                    dynamic_smem,
                    occupancy,
                    why: vec![CandidateWhy::Declared],
                });
                found.sort_by_key(|c| c.block_size);
            }
        }
        None => {}
    }
    Ok(found
        .into_iter()
        .map(|c| {
            let mut block = shape;
            block[free] = c.block_size / fixed;
            ShapedCandidate {
                block,
                candidate: c,
            }
        })
        .collect())
}

fn lcm(a: u32, b: u32) -> u32 {
    fn gcd(a: u32, b: u32) -> u32 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let (a, b) = (a.max(1), b.max(1));
    (a / gcd(a, b)).saturating_mul(b)
}
