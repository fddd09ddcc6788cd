//! The driver sweep: occ's blocks per SM beside
//! `cuOccupancyMaxActiveBlocksPerMultiprocessor` at many launches of one
//! loaded kernel, not only the launch the app bakes.
//!
//! The launches are chosen where a wrong model would show: every block size
//! a multiple of the warp (and a few that are not), dynamic shared memory
//! on both sides of every point where one more or one fewer block fits
//! under each carveout the arch offers, and preferred carveouts the arch
//! rounds up as well as the ones it has. At each point the sweep also asks
//! what the model would say if it counted the arch's reserved shared memory
//! twice (once as ptxas's figure and once as the arch's reserve), so that
//! the report shows whether the driver's `SHARED_SIZE_BYTES` already holds
//! the 1 KB the sm_90 cubin's shared section carries above ptxas's
//! "bytes smem".

use anyhow::{Context as _, Result};
use occ::cuda::cudarc::driver::result::{function as cu_function, occupancy as cu_occupancy};
use occ::cuda::cudarc::driver::sys::CUfunction_attribute;
use occ::cuda::Function;
use occ_model::model::arch::Arch;
use occ_model::model::occupancy::{occupancy, BlockLaunch, KernelResources};

/// The preferred carveouts asked about (percent of the largest); `None` is
/// the driver's default. 33 and 61 are no carveout of any arch, so the
/// arch's rounding up is tested too.
const CARVEOUTS: [Option<u8>; 8] = [
    None,
    Some(0),
    Some(25),
    Some(33),
    Some(50),
    Some(61),
    Some(75),
    Some(100),
];

/// One launch to ask both about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    /// Threads per block.
    pub block: u32,
    /// Dynamic shared memory per block in bytes.
    pub dynamic_smem: u32,
    /// Preferred carveout in percent; `None` is the default.
    pub carveout: Option<u8>,
}

/// The block sizes asked about: every multiple of the warp up to `max`,
/// and a few that are not.
fn blocks(spec: &Arch, max: u32) -> Vec<u32> {
    let mut sizes: Vec<u32> = (1..=max / spec.warp_size)
        .map(|w| w * spec.warp_size)
        .collect();
    sizes.extend([1, 33, 100, 999].into_iter().filter(|b| *b <= max));
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// The dynamic shared memory sizes asked about: 0, the most a block may
/// take, and both sides of every size at which `k` blocks just fit in a
/// carveout of the arch (`k` from 1 to the arch's block limit).
fn dynamic_sizes(spec: &Arch, static_smem: u32, max_dynamic: u32) -> Vec<u32> {
    let per_block = static_smem + spec.reserved_smem_per_block;
    let mut sizes = vec![0, max_dynamic];
    for &kb in spec.carveouts_kb {
        for k in 1..=spec.max_blocks_per_sm {
            let fits = (kb * 1024 / k) / spec.smem_granularity * spec.smem_granularity;
            if let Some(d) = fits.checked_sub(per_block) {
                sizes.extend([d, d + 1]);
            }
        }
    }
    sizes.retain(|d| *d <= max_dynamic);
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// Every launch the sweep asks about for a kernel with `kernel`'s resources
/// that may take `max_dynamic` bytes of dynamic shared memory.
pub fn points(spec: &Arch, kernel: &KernelResources, max_dynamic: u32) -> Vec<Point> {
    let max_block = kernel
        .max_threads_per_block
        .map_or(spec.max_threads_per_block, |m| {
            m.min(spec.max_threads_per_block)
        });
    let blocks = blocks(spec, max_block);
    let dynamic = dynamic_sizes(spec, kernel.static_smem, max_dynamic);
    let mut all = Vec::with_capacity(CARVEOUTS.len() * blocks.len() * dynamic.len());
    for carveout in CARVEOUTS {
        for &block in &blocks {
            for &dynamic_smem in &dynamic {
                all.push(Point {
                    block,
                    dynamic_smem,
                    carveout,
                });
            }
        }
    }
    all
}

/// The model's blocks per SM at `p`, or `None` where it refuses the launch.
pub fn model(spec: &Arch, kernel: &KernelResources, p: Point) -> Option<u32> {
    let launch = BlockLaunch {
        dynamic_smem: p.dynamic_smem,
        carveout: p.carveout,
        ..BlockLaunch::new(p.block)
    };
    occupancy(spec, kernel, &launch)
        .ok()
        .map(|o| o.active_blocks_per_sm)
}

/// What one kernel's sweep found.
#[derive(Debug, Default)]
pub struct Sweep {
    /// Launches asked about.
    pub queries: usize,
    /// Where occ and the driver differ, described (the first ten).
    pub disagreements: Vec<String>,
    /// How many launches differ in all.
    pub disagreeing: usize,
    /// At how many launches a model that counted the reserved shared
    /// memory twice would differ from the driver.
    pub twice_would_differ: usize,
}

/// Asks the driver about every point of [`points`] for `f`, whose maximum
/// dynamic shared memory the caller has set to `max_dynamic`, and compares.
/// Leaves `f`'s preferred carveout at the default.
pub fn run(f: &Function, spec: &Arch, kernel: &KernelResources, max_dynamic: u32) -> Result<Sweep> {
    let twice = KernelResources {
        static_smem: kernel.static_smem + spec.reserved_smem_per_block,
        ..*kernel
    };
    let mut sweep = Sweep::default();
    let mut carveout_set = None;
    for p in points(spec, kernel, max_dynamic) {
        if carveout_set != Some(p.carveout) {
            set_carveout(f, p.carveout)?;
            carveout_set = Some(p.carveout);
        }
        let ours = model(spec, kernel, p);
        // SAFETY: `f` is a loaded function of the current context.
        let theirs = unsafe {
            cu_occupancy::max_active_block_per_multiprocessor(
                f.raw(),
                i32::try_from(p.block).unwrap_or(i32::MAX),
                p.dynamic_smem as usize,
            )
        }
        .ok()
        .and_then(|b| u32::try_from(b).ok());
        sweep.queries += 1;
        if ours != theirs {
            sweep.disagreeing += 1;
            if sweep.disagreements.len() < 10 {
                sweep.disagreements.push(format!(
                    "block {} dyn {} carveout {}: occ {} != driver {}",
                    p.block,
                    p.dynamic_smem,
                    p.carveout.map_or("default".into(), |c| format!("{c}%")),
                    ours.map_or("refused".into(), |b| b.to_string()),
                    theirs.map_or("refused".into(), |b| b.to_string()),
                ));
            }
        }
        if model(spec, &twice, p) != theirs {
            sweep.twice_would_differ += 1;
        }
    }
    set_carveout(f, None)?;
    Ok(sweep)
}

fn set_carveout(f: &Function, carveout: Option<u8>) -> Result<()> {
    let value = carveout.map_or(-1, i32::from);
    // SAFETY: `f` is a loaded function of the current context.
    unsafe {
        cu_function::set_function_attribute(
            f.raw(),
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
            value,
        )
    }
    .with_context(|| format!("cuFuncSetAttribute(PREFERRED_SHARED_MEMORY_CARVEOUT, {value})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transpose_on_sm90() -> (&'static Arch, KernelResources) {
        let spec = occ_model::model::arch::lookup("sm_90").unwrap();
        let k = KernelResources {
            registers: 24,
            static_smem: 33792,
            ..KernelResources::default()
        };
        (spec, k)
    }

    #[test]
    fn the_points_cross_every_shared_memory_step_of_the_model() {
        // Between two neighbouring dynamic sizes of the sweep, the model's
        // blocks per SM at the largest carveout never drops by more than
        // one step that the sweep did not ask about from both sides.
        let (spec, k) = transpose_on_sm90();
        let max_dynamic = spec.smem_per_block_optin - k.static_smem;
        let sizes = dynamic_sizes(spec, k.static_smem, max_dynamic);
        let at = |d: u32| {
            model(
                spec,
                &k,
                Point {
                    block: 32,
                    dynamic_smem: d,
                    carveout: Some(100),
                },
            )
            .unwrap()
        };
        let mut steps = 0;
        for pair in sizes.windows(2) {
            let (lo, hi) = (at(pair[0]), at(pair[1]));
            assert!(lo >= hi, "more dynamic smem, more blocks: {pair:?}");
            if lo != hi {
                steps += 1;
                assert_eq!(
                    pair[1] - pair[0],
                    1,
                    "a step between {pair:?} the sweep does not straddle"
                );
            }
        }
        assert!(steps >= 5, "only {steps} steps seen");
    }

    #[test]
    fn counting_the_reserve_twice_differs_somewhere_in_the_sweep() {
        // Else the sweep could not tell the two readings of the driver's
        // SHARED_SIZE_BYTES apart.
        let (spec, k) = transpose_on_sm90();
        let twice = KernelResources {
            static_smem: k.static_smem + spec.reserved_smem_per_block,
            ..k
        };
        let max_dynamic = spec.smem_per_block_optin - k.static_smem;
        let differ = points(spec, &k, max_dynamic)
            .into_iter()
            .filter(|p| model(spec, &k, *p) != model(spec, &twice, *p))
            .count();
        assert!(differ > 0);
    }

    #[test]
    fn block_sizes_stop_at_the_launch_bounds() {
        let (spec, mut k) = transpose_on_sm90();
        k.max_threads_per_block = Some(256);
        let p = points(spec, &k, 0);
        assert_eq!(p.iter().map(|p| p.block).max(), Some(256));
        assert!(p.iter().any(|p| p.block == 100));
    }
}
