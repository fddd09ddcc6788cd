//! Launch sites: for each kernel, its launch policy (dynamic shared memory,
//! block size cap) and the limiter that holds it back there.
//!
//! The launch itself is computed by occ's model (`occ_build::tune`) from the
//! kernel's resources in the manifest, the same computation
//! `#[launch_config]` bakes in at compile time.

use crate::kernels;
use occ_build::manifest::KernelArch;
use occ_build::occupancy::Limiter;
use occ_build::tune::{DynamicSmem, TuneRequest};

/// How a kernel is launched and what holds it back there.
#[derive(Debug, Clone, Copy)]
pub struct Site {
    /// The kernel's identifier in the manifest and in `kernels.rs`.
    pub ident: &'static str,
    /// The symbol to load.
    pub symbol: &'static str,
    /// Dynamic shared memory per thread, bytes (`smem_per_thread`).
    pub smem_per_thread: u32,
    /// A cap on the block size (`max_block_size`), on top of launch bounds.
    pub max_block_size: Option<u32>,
    /// The limiter this kernel demonstrates at its launch ...
    pub limiter: Limiter,
    /// ... on this arch.
    pub arch: &'static str,
    /// Cubin and PTX per arch, in build order.
    pub device_code: &'static [(&'static str, &'static [u8], &'static str)],
}

macro_rules! device_code {
    ($k:ident) => {
        &[
            ("sm_80", kernels::$k::sm_80::CUBIN, kernels::$k::sm_80::PTX),
            ("sm_86", kernels::$k::sm_86::CUBIN, kernels::$k::sm_86::PTX),
            ("sm_90", kernels::$k::sm_90::CUBIN, kernels::$k::sm_90::PTX),
        ]
    };
}

/// `saxpy`: a light kernel; the SM's warp slots hold it back.
pub const SAXPY: Site = Site {
    ident: "saxpy",
    symbol: kernels::saxpy::NAME,
    smem_per_thread: 0,
    max_block_size: None,
    limiter: Limiter::Warps,
    arch: "sm_80",
    device_code: device_code!(saxpy),
};

/// `block_sum`: 128 bytes of dynamic shared memory per thread; shared memory
/// holds it back.
pub const BLOCK_SUM: Site = Site {
    ident: "block_sum",
    symbol: kernels::block_sum::NAME,
    smem_per_thread: BLOCK_SUM_ITEMS * 4,
    max_block_size: None,
    limiter: Limiter::SharedMemory,
    arch: "sm_80",
    device_code: device_code!(block_sum),
};

/// `ITEMS` of `kernels/reduce.cu`: floats each thread stages.
pub const BLOCK_SUM_ITEMS: u32 = 32;

/// `linalg::transpose<float, 32>`: 33 KB of static shared memory per block,
/// launched as 32 × 8 threads; shared memory holds it back.
pub const TRANSPOSE: Site = Site {
    ident: "linalg_transpose_float_32",
    symbol: kernels::linalg_transpose_float_32::NAME,
    smem_per_thread: 0,
    max_block_size: Some(256),
    limiter: Limiter::SharedMemory,
    arch: "sm_80",
    device_code: device_code!(linalg_transpose_float_32),
};

/// `row_softmax`: 128 threads, 6 named barriers; on sm_90 the block barriers
/// hold it back.
pub const ROW_SOFTMAX: Site = Site {
    ident: "row_softmax",
    symbol: kernels::row_softmax::NAME,
    smem_per_thread: 0,
    max_block_size: None,
    limiter: Limiter::Barriers,
    arch: "sm_90",
    device_code: device_code!(row_softmax),
};

/// `nbody_forces`: ~80 registers under `__launch_bounds__(256)`; registers
/// hold it back.
pub const NBODY: Site = Site {
    ident: "nbody_forces",
    symbol: kernels::nbody_forces::NAME,
    smem_per_thread: 0,
    max_block_size: None,
    limiter: Limiter::Registers,
    arch: "sm_80",
    device_code: device_code!(nbody_forces),
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
    pub blocks_per_sm: u32,
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
            ..TuneRequest::default()
        }
    }

    /// Dynamic shared memory for a block of `block_size` threads, bytes.
    pub fn dynamic_smem(&self, block_size: u32) -> u32 {
        self.smem_per_thread.saturating_mul(block_size)
    }

    /// The best launch of this site on `arch` for a kernel with resources `k`.
    pub fn plan(&self, arch: &str, k: &KernelArch) -> anyhow::Result<LaunchPlan> {
        let spec =
            occ_build::arch::lookup(arch).map_err(|e| anyhow::anyhow!("{}: {e}", self.ident))?;
        let res = occ_build::analyze::resources(k);
        let best = occ_build::tune::best_block_size(spec, &res, &self.request())
            .map_err(|e| anyhow::anyhow!("{} on {arch}: {e}", self.ident))?
            .ok_or_else(|| anyhow::anyhow!("{} cannot launch on {arch}", self.ident))?;
        Ok(LaunchPlan {
            block_size: best.block_size,
            dynamic_smem: best.dynamic_smem,
            blocks_per_sm: best.occupancy.active_blocks,
            occupancy: best.occupancy.occupancy,
            limiters: Limiter::ALL
                .into_iter()
                .filter(|l| best.occupancy.limits.get(*l) == Some(best.occupancy.active_blocks))
                .collect(),
            header_limiters: best.occupancy.limiters.iter().collect(),
        })
    }

    /// The manifest's entry for this kernel on `arch`.
    pub fn resources<'m>(
        &self,
        manifest: &'m occ_build::Manifest,
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
