//! Launch sites: for each kernel, a `#[launch_config]` function that bakes
//! its launch per arch at compile time, its launch policy (dynamic shared
//! memory, block shape) and the limiter that holds it back there.
//!
//! A site is one line: it returns the table the attribute baked
//! (`LAUNCH`, an [`occ::Baked`]); [`crate::gpu`] takes the row of the code
//! it loaded (`LAUNCH.for_function(&f)`) and hands it to the kernel's typed
//! launcher. [`Site::plan`] runs occ's model (`occ_model::model::suggest`) on the
//! manifest at run time: for the limiters (which the macro does not bake)
//! and for the tests, which check that it agrees with what the macro baked.

use crate::kernels;
use occ::launch_config;
use occ_model::model::occupancy::Limiter;
use occ_model::model::suggest::{DynamicSmem, TuneRequest};
use occ_model::schema::manifest::KernelArch;

/// How a kernel is launched and what holds it back there.
#[derive(Debug, Clone, Copy)]
pub struct Site {
    /// The kernel's identifier in the manifest and in `kernels.rs`.
    pub ident: &'static str,
    /// The launch site: the `#[launch_config]` function.
    pub baked: fn() -> occ::Baked,
    /// Dynamic shared memory per thread, bytes: the site's `smem_per_thread`.
    pub smem_per_thread: u32,
    /// The site's `max_block_size`, on top of launch bounds.
    pub max_block_size: Option<u32>,
    /// Block sizes are multiples of this (the site's fixed block width).
    pub block_multiple: Option<u32>,
    /// The site's `tuned`: it bakes the block measured on a GPU where
    /// occ.lock holds a measurement (sm_90, an H200), the model's elsewhere.
    /// On where the measured block differs from the model's.
    pub tuned: bool,
    /// The limiter this kernel demonstrates at its launch ...
    pub limiter: Limiter,
    /// ... on this arch.
    pub arch: &'static str,
    /// The kernel's entry in the build's table: its archs and its fatbin.
    pub kernel: kernels::KernelId,
}

/// `saxpy`'s launch site.
#[launch_config(kernel = "saxpy", tuned = true)]
pub fn saxpy_site() -> occ::Baked {
    LAUNCH
}

/// `block_sum`'s launch site: `ITEMS` (32) floats of dynamic shared memory
/// per thread, as build.rs declares (`.dynamic_smem("block_sum", ..)`).
#[launch_config(kernel = "block_sum", tuned = true)]
pub fn block_sum_site() -> occ::Baked {
    LAUNCH
}

/// The transpose's launch site: 32 threads wide (one per tile column), as
/// many rows as the tuner picks, 256 threads at most.
#[launch_config(
    kernel = "linalg::transpose<float, 32>",
    block = (32, _),
    max_block_size = 256
)]
pub fn transpose_site() -> occ::Baked {
    LAUNCH
}

/// `row_softmax`'s launch site (its `__launch_bounds__(128)` fixes the block).
#[launch_config(kernel = "row_softmax")]
pub fn row_softmax_site() -> occ::Baked {
    LAUNCH
}

/// `nbody_forces`' launch site (`__launch_bounds__(256)`).
#[launch_config(kernel = "nbody_forces", tuned = true)]
pub fn nbody_site() -> occ::Baked {
    LAUNCH
}

/// `saxpy`: a light kernel; the SM's warp slots hold it back.
pub const SAXPY: Site = Site {
    ident: "saxpy",
    tuned: true,
    baked: saxpy_site,
    smem_per_thread: 0,
    max_block_size: None,
    block_multiple: None,
    limiter: Limiter::Warps,
    arch: "sm_80",
    kernel: kernels::saxpy::KERNEL,
};

/// `block_sum`: 128 bytes of dynamic shared memory per thread; shared memory
/// holds it back.
pub const BLOCK_SUM: Site = Site {
    ident: "block_sum",
    tuned: true,
    baked: block_sum_site,
    smem_per_thread: BLOCK_SUM_ITEMS * 4,
    max_block_size: None,
    block_multiple: None,
    limiter: Limiter::SharedMemory,
    arch: "sm_80",
    kernel: kernels::block_sum::KERNEL,
};

/// `ITEMS` of `kernels/reduce.cu`: floats each thread stages.
pub const BLOCK_SUM_ITEMS: u32 = 32;

/// `linalg::transpose<float, 32>`: 33 KB of static shared memory per block,
/// launched as 32 × 8 threads; shared memory holds it back.
pub const TRANSPOSE: Site = Site {
    ident: "linalg_transpose_float_32",
    tuned: false,
    baked: transpose_site,
    smem_per_thread: 0,
    max_block_size: Some(256),
    block_multiple: Some(32),
    limiter: Limiter::SharedMemory,
    arch: "sm_80",
    kernel: kernels::linalg_transpose_float_32::KERNEL,
};

/// `row_softmax`: 128 threads, 6 named barriers; on sm_90 the block barriers
/// hold it back.
pub const ROW_SOFTMAX: Site = Site {
    ident: "row_softmax",
    tuned: false,
    baked: row_softmax_site,
    smem_per_thread: 0,
    max_block_size: None,
    block_multiple: None,
    limiter: Limiter::Barriers,
    arch: "sm_90",
    kernel: kernels::row_softmax::KERNEL,
};

/// `nbody_forces`: ~80 registers under `__launch_bounds__(256)`; registers
/// hold it back.
pub const NBODY: Site = Site {
    ident: "nbody_forces",
    tuned: true,
    baked: nbody_site,
    smem_per_thread: 0,
    max_block_size: None,
    block_multiple: None,
    limiter: Limiter::Registers,
    arch: "sm_80",
    kernel: kernels::nbody_forces::KERNEL,
};

/// Every launch site, in the order the app runs them.
pub const SITES: [Site; 5] = [SAXPY, BLOCK_SUM, TRANSPOSE, ROW_SOFTMAX, NBODY];

/// A launch computed by the model.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchPlan {
    /// Threads per block.
    pub block_size: u32,
    /// Dynamic shared memory per block, bytes.
    pub dynamic_smem: u32,
    /// Resident blocks per SM.
    pub active_blocks_per_sm: u32,
    /// Resident warps / the SM's maximum.
    pub occupancy: f64,
    /// What holds it back: every resource whose own limit equals the
    /// resident blocks.
    pub limiters: Vec<Limiter>,
    /// The limiter flags as `cuda_occupancy.h` sets them. On sm_90+ the header
    /// sets the barrier flag after the others without clearing them, so a
    /// barrier-bound kernel also keeps the flags of the resources that would
    /// have bound it otherwise; [`LaunchPlan::limiters`] does not.
    pub header_limiters: Vec<Limiter>,
}

impl LaunchPlan {
    /// The launch `o` describes, with `dynamic_smem` bytes per block.
    fn of(dynamic_smem: u32, o: &occ_model::model::occupancy::Occupancy) -> LaunchPlan {
        LaunchPlan {
            block_size: o.block_size,
            dynamic_smem,
            active_blocks_per_sm: o.active_blocks_per_sm,
            occupancy: o.occupancy,
            limiters: Limiter::ALL
                .into_iter()
                .filter(|l| o.limits.get(*l) == Some(o.active_blocks_per_sm))
                .collect(),
            header_limiters: o.limiters.iter().collect(),
        }
    }
}

impl Site {
    /// The model's request for this site.
    pub fn request(&self) -> TuneRequest {
        TuneRequest {
            dynamic_smem: if self.smem_per_thread == 0 {
                DynamicSmem::Fixed(0)
            } else {
                DynamicSmem::PerThread {
                    per_thread: self.smem_per_thread,
                    fixed: 0,
                }
            },
            max_block_size: self.max_block_size,
            block_multiple: self.block_multiple,
            ..TuneRequest::default()
        }
    }

    /// Dynamic shared memory for a block of `block_size` threads, bytes.
    pub fn dynamic_smem(&self, block_size: u32) -> u32 {
        self.smem_per_thread.saturating_mul(block_size)
    }

    /// The best launch of this site on `arch` for a kernel with resources `k`.
    pub fn plan(&self, arch: &str, k: &KernelArch) -> anyhow::Result<LaunchPlan> {
        let spec = occ_model::model::arch::lookup(arch)
            .map_err(|e| anyhow::anyhow!("{}: {e}", self.ident))?;
        let res = occ_model::compiler::analyze::model_of(&k.facts);
        let best = occ_model::model::suggest::best_block_size(spec, &res, &self.request())
            .map_err(|e| anyhow::anyhow!("{} on {arch}: {e}", self.ident))?
            .ok_or_else(|| anyhow::anyhow!("{} cannot launch on {arch}", self.ident))?;
        Ok(LaunchPlan::of(best.dynamic_smem, &best.occupancy))
    }

    /// This site's launch on `arch` at blocks of `block_size` threads (a
    /// measured block, say) for a kernel with resources `k`.
    pub fn at(&self, arch: &str, k: &KernelArch, block_size: u32) -> anyhow::Result<LaunchPlan> {
        let spec = occ_model::model::arch::lookup(arch)
            .map_err(|e| anyhow::anyhow!("{}: {e}", self.ident))?;
        let launch = occ_model::model::occupancy::BlockLaunch {
            dynamic_smem: self.dynamic_smem(block_size),
            ..occ_model::model::occupancy::BlockLaunch::new(block_size)
        };
        let o = occ_model::model::occupancy::occupancy(
            spec,
            &occ_model::compiler::analyze::model_of(&k.facts),
            &launch,
        )
        .map_err(|e| anyhow::anyhow!("{} on {arch} at block {block_size}: {e}", self.ident))?;
        Ok(LaunchPlan::of(launch.dynamic_smem, &o))
    }

    /// The manifest's entry for this kernel on `arch`.
    pub fn resources<'m>(
        &self,
        manifest: &'m occ_model::schema::manifest::Manifest,
        arch: &str,
    ) -> anyhow::Result<&'m KernelArch> {
        manifest
            .kernels
            .iter()
            .find(|k| k.ident == self.ident)
            .ok_or_else(|| anyhow::anyhow!("kernel `{}` is not in the manifest", self.ident))?
            .archs
            .get(arch)
            .ok_or_else(|| anyhow::anyhow!("kernel `{}` was not built for {arch}", self.ident))
    }
}
