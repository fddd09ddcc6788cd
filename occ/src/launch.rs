//! Launch configurations, grid sizes, and the baked launches that
//! `#[launch_config]` emits.
//!
//! A site of `#[launch_config(kernel = "saxpy")]` gets a
//! `const LAUNCH: occ::Baked` with one [`BakedArch`] row per arch the
//! kernel was built for (the first row is the build's default arch); the
//! macro only writes the numbers, the code that reads them lives here,
//! once.
//!
//! ```
//! use occ::{Baked, BakedArch, LaunchConfig};
//!
//! const LAUNCH: Baked = Baked {
//!     kernel: "saxpy",
//!     archs: &[
//!         BakedArch { arch: "sm_80", major: 8, minor: 0, block: (256, 1, 1), dynamic_smem: 0, active_blocks_per_sm: 8, occupancy: 1.0 },
//!         BakedArch { arch: "sm_90", major: 9, minor: 0, block: (512, 1, 1), dynamic_smem: 0, active_blocks_per_sm: 4, occupancy: 1.0 },
//!     ],
//! };
//! // The row for an RTX 3090 (8.6): sm_80's cubin runs there.
//! let row = LAUNCH.for_device(8, 6).unwrap();
//! assert_eq!(row.arch, "sm_80");
//! let cfg: LaunchConfig = row.for_elements(1_000_000);
//! assert_eq!(cfg.grid, (3907, 1, 1));
//! assert_eq!(cfg.block, (256, 1, 1));
//! ```

use crate::select::{self, Arch, How};

/// How a kernel is launched: grid and block in three dimensions, and the
/// dynamic shared memory per block. With the `cudarc` feature it converts
/// into `cudarc::driver::LaunchConfig`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid: (u32, u32, u32),
    /// Threads per block in x, y, z.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, bytes.
    pub dynamic_smem: u32,
}

impl LaunchConfig {
    /// A launch of `grid` blocks of `block` threads, no dynamic shared
    /// memory; each is a [`Dim`]: `256`, `(16, 16)` or `(8, 8, 4)`.
    pub fn new(grid: impl Into<Dim>, block: impl Into<Dim>) -> LaunchConfig {
        LaunchConfig {
            grid: grid.into().into(),
            block: block.into().into(),
            dynamic_smem: 0,
        }
    }

    /// A 1-D launch over `n` elements, one per thread: blocks of
    /// `block_threads`, [`grid_for`] blocks.
    pub const fn for_elements(n: usize, block_threads: u32) -> LaunchConfig {
        LaunchConfig {
            grid: (grid_for(n, block_threads), 1, 1),
            block: (block_threads, 1, 1),
            dynamic_smem: 0,
        }
    }

    /// The same launch with `bytes` of dynamic shared memory per block.
    pub const fn with_dynamic_smem(self, bytes: u32) -> LaunchConfig {
        LaunchConfig {
            dynamic_smem: bytes,
            ..self
        }
    }

    /// Threads per block, `x * y * z` (saturating at `u32::MAX`).
    pub const fn threads_per_block(&self) -> u32 {
        volume(self.block)
    }

    /// Whether CUDA can launch this shape at all, checked before any
    /// driver call: every extent at least 1, a grid of at most
    /// (2³¹ − 1, 65535, 65535) blocks, a block of at most (1024, 1024, 64)
    /// threads and 1024 in all. These are the limits of every compute
    /// capability occ builds for (5.0 to 12.1). The error says which
    /// extent is out and what to do.
    ///
    /// ```
    /// use occ::LaunchConfig;
    /// assert!(LaunchConfig::new((1000, 1000), 256).check().is_ok());
    /// let tall = LaunchConfig::new((1, 70_000), 256).check().unwrap_err();
    /// assert!(tall.starts_with("grid y is 70000, above CUDA's 65535"), "{tall}");
    /// ```
    pub fn check(&self) -> Result<(), String> {
        const GRID: (u32, u32, u32) = ((1 << 31) - 1, 65535, 65535);
        const BLOCK: (u32, u32, u32) = (1024, 1024, 64);
        const THREADS: u32 = 1024;
        let dims = |(x, y, z): (u32, u32, u32)| [("x", x), ("y", y), ("z", z)];
        for (what, extent, limit) in [("grid", self.grid, GRID), ("block", self.block, BLOCK)] {
            for ((axis, n), (_, max)) in dims(extent).into_iter().zip(dims(limit)) {
                if n == 0 {
                    return Err(if what == "grid" {
                        format!(
                            "grid {axis} is 0: a launch needs at least one block \
                             (with no elements to cover, skip the launch)"
                        )
                    } else {
                        format!("block {axis} is 0: a block needs at least one thread")
                    });
                }
                if n > max {
                    let hint = match (what, axis) {
                        ("grid", "x") => "use fewer, larger blocks, or loop in the kernel",
                        ("grid", _) => "put the long dimension in x (up to 2147483647 blocks)",
                        _ => "use a smaller block",
                    };
                    return Err(format!("{what} {axis} is {n}, above CUDA's {max}: {hint}"));
                }
            }
        }
        let threads = self.threads_per_block();
        if threads > THREADS {
            let (x, y, z) = self.block;
            return Err(format!(
                "a block of {x}x{y}x{z} is {threads} threads, above CUDA's {THREADS} per block"
            ));
        }
        Ok(())
    }
}

/// A grid or block extent in one, two or three dimensions, for
/// [`LaunchConfig::new`]: from `u32` (`(x, 1, 1)`), `(u32, u32)`,
/// `(u32, u32, u32)`, `[u32; 2]` or `[u32; 3]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dim {
    /// Extent in x.
    pub x: u32,
    /// Extent in y.
    pub y: u32,
    /// Extent in z.
    pub z: u32,
}

impl From<u32> for Dim {
    fn from(x: u32) -> Dim {
        Dim { x, y: 1, z: 1 }
    }
}

impl From<(u32, u32)> for Dim {
    fn from((x, y): (u32, u32)) -> Dim {
        Dim { x, y, z: 1 }
    }
}

impl From<(u32, u32, u32)> for Dim {
    fn from((x, y, z): (u32, u32, u32)) -> Dim {
        Dim { x, y, z }
    }
}

impl From<[u32; 2]> for Dim {
    fn from([x, y]: [u32; 2]) -> Dim {
        Dim { x, y, z: 1 }
    }
}

impl From<[u32; 3]> for Dim {
    fn from([x, y, z]: [u32; 3]) -> Dim {
        Dim { x, y, z }
    }
}

impl From<Dim> for (u32, u32, u32) {
    fn from(d: Dim) -> (u32, u32, u32) {
        (d.x, d.y, d.z)
    }
}

/// Blocks of `block_threads` threads that cover `n` elements, one per
/// thread: `ceil(n / block_threads)`.
///
/// Edge cases: `0` for `n == 0` (a launch with no blocks is refused, by
/// [`LaunchConfig::check`] or the driver, so skip it); never `0` for
/// `n > 0`; a `block_threads` of `0` is taken as `1`. A count beyond
/// `u32::MAX` blocks saturates at `u32::MAX`, which is refused the same
/// way (a grid's x is at most 2³¹ − 1): the launch fails rather than
/// leave elements out.
///
/// ```
/// use occ::grid_for;
/// assert_eq!(grid_for(1000, 256), 4);
/// assert_eq!(grid_for(1024, 256), 4);
/// assert_eq!(grid_for(0, 256), 0);
/// assert_eq!(grid_for(usize::MAX, 1), u32::MAX);
/// ```
pub const fn grid_for(n: usize, block_threads: u32) -> u32 {
    let block = if block_threads == 0 {
        1
    } else {
        block_threads as u64
    };
    // usize is at most 64 bits on every target Rust supports.
    let blocks = (n as u64).div_ceil(block);
    if blocks > u32::MAX as u64 {
        u32::MAX
    } else {
        blocks as u32
    }
}

/// Blocks in x and y of `block` threads that cover a `(width, height)`
/// grid of elements: [`grid_for`] per dimension, with its edge cases. A
/// grid's y is at most 65535 blocks, which this does not cap:
/// [`LaunchConfig::check`] (run by every `occ::cuda` launch) refuses a
/// taller one.
///
/// ```
/// use occ::grid_for_2d;
/// assert_eq!(grid_for_2d((1920, 1080), (16, 16)), (120, 68));
/// ```
pub const fn grid_for_2d((width, height): (usize, usize), (bx, by): (u32, u32)) -> (u32, u32) {
    (grid_for(width, bx), grid_for(height, by))
}

const fn volume((x, y, z): (u32, u32, u32)) -> u32 {
    x.saturating_mul(y).saturating_mul(z)
}

/// One arch's baked launch of a `#[launch_config]` site: what the macro
/// chose for the kernel on that arch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BakedArch {
    /// The arch (`sm_80`, `sm_90a`).
    pub arch: &'static str,
    /// Its compute capability's major version.
    pub major: u32,
    /// Its minor version.
    pub minor: u32,
    /// Threads per block in x, y, z.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, bytes.
    pub dynamic_smem: u32,
    /// Resident blocks per SM at this launch.
    pub active_blocks_per_sm: u32,
    /// Occupancy at this launch, 0..=1.
    pub occupancy: f32,
}

impl BakedArch {
    /// Threads per block, `x * y * z` (saturating at `u32::MAX`).
    pub const fn threads(&self) -> u32 {
        volume(self.block)
    }

    /// This launch with `grid` blocks.
    pub const fn config(&self, grid: (u32, u32, u32)) -> LaunchConfig {
        LaunchConfig {
            grid,
            block: self.block,
            dynamic_smem: self.dynamic_smem,
        }
    }

    /// A 1-D grid over `n` elements, one per thread: [`grid_for`]`(n,
    /// self.threads())` blocks of this block shape. With a 2-D or 3-D
    /// block the grid still counts every thread of a block, so the kernel
    /// must flatten its index (`(threadIdx.z * blockDim.y + threadIdx.y)
    /// * blockDim.x + threadIdx.x`, plus `blockIdx.x` times the block's
    /// threads); a kernel that indexes rows and columns wants
    /// [`BakedArch::for_2d`].
    pub const fn for_elements(&self, n: usize) -> LaunchConfig {
        self.config((grid_for(n, self.threads()), 1, 1))
    }

    /// A 2-D grid over `width × height` elements, one per thread:
    /// [`grid_for_2d`] with this block's x and y (a 1-D block gives one
    /// row of blocks per element row). A block's z extent is launched as
    /// it is, with one block in z.
    pub const fn for_2d(&self, width: usize, height: usize) -> LaunchConfig {
        let (gx, gy) = grid_for_2d((width, height), (self.block.0, self.block.1));
        self.config((gx, gy, 1))
    }
}

/// The baked launches of one `#[launch_config]` site: a row per arch the
/// kernel was built for, in build order; the first is the build's default
/// arch. The macro emits it as a constant:
/// `const LAUNCH: ::occ::Baked = ::occ::Baked { kernel: "…", archs: &[…] };`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Baked {
    /// The kernel's name as the site gave it.
    pub kernel: &'static str,
    /// One row per arch (empty only in the placeholder of a site that
    /// failed to compile).
    pub archs: &'static [BakedArch],
}

impl Baked {
    /// The row of the default arch (the build's first).
    pub const fn first(&self) -> Option<&'static BakedArch> {
        self.archs.first()
    }

    /// The row of `arch` (`"sm_80"`).
    pub const fn on(&self, arch: &str) -> Option<&'static BakedArch> {
        let mut i = 0;
        while i < self.archs.len() {
            if str_eq(self.archs[i].arch, arch) {
                return Some(&self.archs[i]);
            }
            i += 1;
        }
        None
    }

    /// The row for a GPU of compute capability `major.minor`, chosen by
    /// [`select::pick`] over the rows' archs: the arch whose cubin runs
    /// there, else the arch whose PTX the driver JITs (the same arch
    /// [`select::pick_code`] loads for a build of cubins and PTX).
    ///
    /// For a JIT row the numbers were computed for that arch, not for this
    /// GPU: a launch that fits the older arch almost always fits the newer
    /// one, but shared memory per block can shrink across majors (9.0 has
    /// 227 KiB, 12.0 99 KiB); `occ::cuda::Function::launch_raw` refuses
    /// dynamic shared memory above the device's maximum with a clear
    /// error. To know which it was, use [`Baked::pick`]. Once a kernel is
    /// loaded, `Baked::for_function` (feature `cudarc`) gives the row of
    /// the code that was loaded: prefer it.
    pub fn for_device(&self, major: u32, minor: u32) -> Option<&'static BakedArch> {
        self.pick(major, minor).map(|(_, row)| row)
    }

    /// [`Baked::for_device`], with how the chosen arch's code runs.
    pub fn pick(&self, major: u32, minor: u32) -> Option<(How, &'static BakedArch)> {
        let archs = self.archs;
        let choice = select::choose(
            archs.len(),
            |i| Arch::parse(archs[i].arch),
            |_| true,
            |_| true,
            major,
            minor,
        )?;
        Some((choice.how, &archs[choice.index]))
    }
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn row(arch: &'static str, block: (u32, u32, u32), smem: u32) -> BakedArch {
        BakedArch {
            arch,
            major: 0,
            minor: 0,
            block,
            dynamic_smem: smem,
            active_blocks_per_sm: 1,
            occupancy: 0.5,
        }
    }

    const LAUNCH: Baked = Baked {
        kernel: "k",
        archs: &[
            row("sm_80", (256, 1, 1), 0),
            row("sm_86", (128, 1, 1), 1024),
            row("sm_90a", (16, 16, 1), 65536),
        ],
    };

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn grid_for_edges() {
        // (n, block, grid)
        let cases: &[(usize, u32, u32)] = &[
            (0, 256, 0),
            (1, 256, 1),
            (255, 256, 1),
            (256, 256, 1),
            (257, 256, 2),
            (1_000_000, 1024, 977),
            (7, 0, 7),
            (0, 0, 0),
            (u32::MAX as usize, 1, u32::MAX),
            (u32::MAX as usize + 1, 1, u32::MAX),
            (usize::MAX, 1, u32::MAX),
            (usize::MAX, 1024, u32::MAX),
            (u32::MAX as usize * 1024, 1024, u32::MAX),
            (u32::MAX as usize * 1024 + 1, 1024, u32::MAX),
            ((u32::MAX as usize - 1) * 1024 + 1, 1024, u32::MAX),
            ((u32::MAX as usize - 1) * 1024, 1024, u32::MAX - 1),
            // 2^64 - 1 over 2^32 - 1 is 2^32 + 1 blocks.
            (usize::MAX, u32::MAX, u32::MAX),
            (u32::MAX as usize * 2, u32::MAX, 2),
        ];
        for &(n, block, want) in cases {
            assert_eq!(grid_for(n, block), want, "grid_for({n}, {block})");
        }
    }

    #[test]
    fn check_refuses_each_extent_at_its_limit_plus_one() {
        let ok =
            |grid: (u32, u32, u32), block: (u32, u32, u32)| LaunchConfig::new(grid, block).check();
        // Every limit itself launches.
        assert_eq!(ok(((1 << 31) - 1, 65535, 65535), (1024, 1, 1)), Ok(()));
        assert_eq!(ok((1, 1, 1), (1, 1024, 1)), Ok(()));
        assert_eq!(ok((1, 1, 1), (16, 1, 64)), Ok(()));
        // One past each is refused, naming the extent.
        type Xyz = (u32, u32, u32);
        let cases: &[(Xyz, Xyz, &str)] = &[
            (
                (1 << 31, 1, 1),
                (1, 1, 1),
                "grid x is 2147483648, above CUDA's 2147483647",
            ),
            ((u32::MAX, 1, 1), (256, 1, 1), "grid x is 4294967295"),
            (
                (1, 65536, 1),
                (1, 1, 1),
                "grid y is 65536, above CUDA's 65535: put the long",
            ),
            ((1, 1, 65536), (1, 1, 1), "grid z is 65536"),
            (
                (1, 1, 1),
                (1025, 1, 1),
                "block x is 1025, above CUDA's 1024",
            ),
            ((1, 1, 1), (1, 1025, 1), "block y is 1025"),
            ((1, 1, 1), (1, 1, 65), "block z is 65, above CUDA's 64"),
            ((1, 1, 1), (64, 32, 1), "a block of 64x32x1 is 2048 threads"),
            (
                (1, 1, 1),
                (1024, 1024, 64),
                "a block of 1024x1024x64 is 67108864 threads",
            ),
            (
                (0, 1, 1),
                (256, 1, 1),
                "grid x is 0: a launch needs at least one block",
            ),
            ((4, 1, 0), (256, 1, 1), "grid z is 0"),
            ((1, 1, 1), (256, 0, 1), "block y is 0"),
        ];
        for &(grid, block, want) in cases {
            let got = ok(grid, block).expect_err(want);
            assert!(got.starts_with(want), "{grid:?} {block:?}: {got}");
        }
        // A 2-D grid for a tall image is out of y's range.
        let tall = LaunchConfig::new(grid_for_2d((64, 70_000), (64, 1)), (64, 1));
        assert!(tall.check().unwrap_err().starts_with("grid y is 70000"));
    }

    #[test]
    fn grid_for_2d_per_dimension() {
        assert_eq!(grid_for_2d((1920, 1080), (16, 16)), (120, 68));
        assert_eq!(grid_for_2d((1, 1), (32, 8)), (1, 1));
        assert_eq!(grid_for_2d((0, 5), (32, 1)), (0, 5));
        assert_eq!(grid_for_2d((usize::MAX, 3), (1, 2)), (u32::MAX, 2));
    }

    #[test]
    fn launch_config_builders() {
        let c = LaunchConfig::new(10, (16, 16)).with_dynamic_smem(4096);
        assert_eq!(c.grid, (10, 1, 1));
        assert_eq!(c.block, (16, 16, 1));
        assert_eq!(c.dynamic_smem, 4096);
        assert_eq!(c.threads_per_block(), 256);
        assert_eq!(LaunchConfig::new([2, 3, 4], [8, 8, 4]).grid, (2, 3, 4));
        assert_eq!(LaunchConfig::new([2, 3], (1, 2, 3)).block, (1, 2, 3));
        let e = LaunchConfig::for_elements(1000, 128);
        assert_eq!((e.grid, e.block), ((8, 1, 1), (128, 1, 1)));
        let big = LaunchConfig::new(1, (u32::MAX, 2, 1));
        assert_eq!(big.threads_per_block(), u32::MAX);
    }

    #[test]
    fn baked_lookups() {
        assert_eq!(LAUNCH.first().map(|r| r.arch), Some("sm_80"));
        assert_eq!(LAUNCH.on("sm_86").map(|r| r.block), Some((128, 1, 1)));
        assert_eq!(LAUNCH.on("sm_90"), None);
        // const-evaluable
        const ROW: Option<&BakedArch> = LAUNCH.on("sm_90a");
        assert_eq!(ROW.map(|r| r.dynamic_smem), Some(65536));
        let empty = Baked {
            kernel: "x",
            archs: &[],
        };
        assert_eq!(empty.first(), None);
        assert_eq!(empty.for_device(8, 0), None);
    }

    #[test]
    fn baked_for_device_follows_the_selection_rule() {
        // (gpu, expected (how, arch))
        let cases = [
            ((8, 0), Some((How::Sass, "sm_80"))),
            ((8, 6), Some((How::Sass, "sm_86"))),
            ((8, 9), Some((How::Sass, "sm_86"))),
            ((9, 0), Some((How::Sass, "sm_90a"))),
            // sm_90a's code runs on exactly 9.0: 10.0 JITs sm_86's PTX.
            ((10, 0), Some((How::Jit, "sm_86"))),
            ((7, 5), None),
        ];
        for ((major, minor), want) in cases {
            let got = LAUNCH.pick(major, minor).map(|(h, r)| (h, r.arch));
            assert_eq!(got, want, "{major}.{minor}");
            assert_eq!(
                LAUNCH.for_device(major, minor).map(|r| r.arch),
                want.map(|w| w.1)
            );
        }
    }

    #[test]
    fn baked_arch_configs() {
        let r = LAUNCH.on("sm_86").unwrap();
        assert_eq!(r.threads(), 128);
        let c = r.for_elements(1000);
        assert_eq!(
            c,
            LaunchConfig {
                grid: (8, 1, 1),
                block: (128, 1, 1),
                dynamic_smem: 1024
            }
        );
        assert_eq!(r.config((3, 2, 1)).grid, (3, 2, 1));
        // A 2-D block: for_elements counts all 256 threads of a block.
        let tile = LAUNCH.on("sm_90a").unwrap();
        assert_eq!(tile.threads(), 256);
        assert_eq!(tile.for_elements(1000).grid, (4, 1, 1));
        assert_eq!(tile.for_2d(1000, 33).grid, (63, 3, 1));
        assert_eq!(tile.for_2d(1000, 33).dynamic_smem, 65536);
        // A 1-D block over rows: one block row per element row.
        assert_eq!(r.for_2d(1000, 7).grid, (8, 7, 1));
    }
}
