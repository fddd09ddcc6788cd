//! The occupancy model: `cudaOccMaxActiveBlocksPerMultiprocessor` of NVIDIA's
//! `cuda_occupancy.h` (CUDA 13.5), in Rust.
//!
//! [`occupancy`] takes a kernel's resources ([`KernelResources`], from ptxas),
//! a launch ([`BlockLaunch`]) and an architecture ([`Arch`]) and returns how many
//! blocks stay resident per SM, every limit that the header computes, and the
//! limiter(s) — every limit equal to the result, as Nsight Compute reports
//! them. The arithmetic follows the header step by step (the oracle test in
//! `occ-tests` compares it with the real header over millions of inputs):
//!
//! - registers: per-warp allocation rounded up to 256, split over the SM's
//!   sub-partitions, with the hardware's per-block check that assumes every
//!   sub-partition is allocated at once; on 6.0 the 6.1 model must also fit;
//! - warps and the hard-coded blocks-per-SM limit;
//! - shared memory: static + dynamic + the driver's reserved 1 KB (8.0+),
//!   rounded to the allocation granularity, within a carveout that is aligned
//!   up to the legal sizes and grown when one block needs more;
//! - block barriers (9.0+) and virtual resources (10.x–12.x);
//! - partitioned global caching on 5.2, 5.3, 6.1 and 6.2.
//!
//! Like the CUDA runtime, the model assumes the kernel opts in to the largest
//! dynamic shared memory its arch allows (`cudaFuncAttributeMaxDynamicSharedMemorySize`
//! = opt-in maximum − static), uses one block barrier and leaves partitioned
//! global caching off; each is settable.
//!
//! ```
//! use occ_model::{model::arch, model::occupancy::*};
//! let sm80 = arch::lookup("sm_80").unwrap();
//! let kernel = KernelResources { registers: 40, static_smem: 16384, ..Default::default() };
//! let occ = occupancy(sm80, &kernel, &BlockLaunch::new(256)).unwrap();
//! assert_eq!((occ.active_blocks_per_sm, occ.active_warps_per_sm), (6, 48));
//! assert_eq!(occ.limiters.to_string(), "registers");
//! ```

use crate::model::arch::Arch;
use std::fmt;

/// What ptxas and the launch bounds say about a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct KernelResources {
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block in bytes (ptxas "bytes smem").
    pub static_smem: u32,
    /// Named block barriers; the runtime assumes 1.
    pub barriers: u32,
    /// `__launch_bounds__` maximum threads per block, if declared.
    pub max_threads_per_block: Option<u32>,
    /// Virtual resources per block (CUDA 13.5 attribute; 0 = none).
    pub virtual_resources: u32,
    /// `cudaFuncAttributeMaxDynamicSharedMemorySize`; `None` means the kernel
    /// opts in to the most its arch allows (opt-in maximum − static).
    pub max_dynamic_smem: Option<u32>,
}

impl Default for KernelResources {
    fn default() -> Self {
        KernelResources {
            registers: 0,
            static_smem: 0,
            barriers: 1,
            max_threads_per_block: None,
            virtual_resources: 0,
            max_dynamic_smem: None,
        }
    }
}

impl KernelResources {
    /// The dynamic shared memory attribute in effect on `arch`.
    pub fn max_dynamic_smem_on(&self, arch: &Arch) -> u32 {
        self.max_dynamic_smem
            .unwrap_or_else(|| arch.smem_per_block_optin.saturating_sub(self.static_smem))
    }
}

/// The legacy L1/shared-memory preference (`cudaFuncSetCacheConfig`); used on
/// 7.0+ only when no carveout is given.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum CachePref {
    /// No preference (the default).
    #[default]
    None,
    /// Prefer shared memory (carveout 100 %).
    Shared,
    /// Prefer L1 (carveout 0 %).
    L1,
    /// Equal split (carveout 50 %).
    Equal,
}

/// Partitioned global caching (5.2, 5.3, 6.1, 6.2 only).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum PartitionedGc {
    /// Off (the runtime's default).
    #[default]
    Off,
    /// On where a block still fits, otherwise off.
    On,
    /// On, even if no block fits (`cudaOccupancyDisableCachingOverride`).
    OnStrict,
}

/// How a kernel is launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BlockLaunch {
    /// Threads per block.
    pub block_size: u32,
    /// Dynamic shared memory per block in bytes.
    #[serde(default)]
    pub dynamic_smem: u32,
    /// Preferred shared-memory carveout in percent (0–100); `None` = default.
    #[serde(default)]
    pub carveout: Option<u8>,
    /// Legacy cache preference, used when `carveout` is `None`.
    #[serde(default)]
    pub cache_pref: CachePref,
    /// Partitioned global caching request.
    #[serde(default)]
    pub partitioned_gc: PartitionedGc,
}

impl BlockLaunch {
    /// A launch of `block_size` threads with no dynamic shared memory and
    /// default preferences.
    pub const fn new(block_size: u32) -> Self {
        BlockLaunch {
            block_size,
            dynamic_smem: 0,
            carveout: None,
            cache_pref: CachePref::None,
            partitioned_gc: PartitionedGc::Off,
        }
    }

    /// The same launch with `bytes` of dynamic shared memory.
    pub const fn with_dynamic_smem(mut self, bytes: u32) -> Self {
        self.dynamic_smem = bytes;
        self
    }

    /// The same launch with a carveout preference in percent.
    pub const fn with_carveout(mut self, percent: u8) -> Self {
        self.carveout = Some(percent);
        self
    }
}

/// One reason occupancy stops where it does.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Limiter {
    /// Warp slots per SM.
    Warps,
    /// The register file.
    Registers,
    /// Shared memory.
    SharedMemory,
    /// The blocks-per-SM limit.
    Blocks,
    /// Block barriers (9.0+).
    Barriers,
    /// Virtual resources (10.x–12.x).
    VirtualResources,
}

impl Limiter {
    /// Every limiter, in the header's bit order.
    pub const ALL: [Limiter; 6] = [
        Limiter::Warps,
        Limiter::Registers,
        Limiter::SharedMemory,
        Limiter::Blocks,
        Limiter::Barriers,
        Limiter::VirtualResources,
    ];

    /// The `cudaOccLimitingFactor` bit.
    pub const fn bit(self) -> u8 {
        match self {
            Limiter::Warps => 0x01,
            Limiter::Registers => 0x02,
            Limiter::SharedMemory => 0x04,
            Limiter::Blocks => 0x08,
            Limiter::Barriers => 0x10,
            Limiter::VirtualResources => 0x20,
        }
    }

    /// The human name, as in Nsight Compute: "shared memory".
    pub const fn as_str(self) -> &'static str {
        match self {
            Limiter::Warps => "warps",
            Limiter::Registers => "registers",
            Limiter::SharedMemory => "shared memory",
            Limiter::Blocks => "blocks",
            Limiter::Barriers => "barriers",
            Limiter::VirtualResources => "virtual resources",
        }
    }
}

impl fmt::Display for Limiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of [`Limiter`]s with the bit values of `cudaOccLimitingFactor`.
///
/// Serialized as a list of limiter names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Limiters(u8);

impl Limiters {
    /// The empty set.
    pub const EMPTY: Limiters = Limiters(0);

    /// The set with the given `cudaOccLimitingFactor` bits (unknown bits are
    /// dropped).
    pub const fn from_bits(bits: u8) -> Self {
        Limiters(bits & 0x3f)
    }

    /// The `cudaOccLimitingFactor` bits.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Whether `l` is in the set.
    pub const fn contains(self, l: Limiter) -> bool {
        self.0 & l.bit() != 0
    }

    /// The set with `l` added.
    pub const fn with(self, l: Limiter) -> Self {
        Limiters(self.0 | l.bit())
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// How many limiters are in the set.
    pub const fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The limiters in the set, in bit order.
    pub fn iter(self) -> impl Iterator<Item = Limiter> {
        Limiter::ALL.into_iter().filter(move |l| self.contains(*l))
    }
}

impl fmt::Display for Limiters {
    /// Joins the names with " + ", or "none".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        for (i, l) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(" + ")?;
            }
            f.write_str(l.as_str())?;
        }
        Ok(())
    }
}

impl serde::Serialize for Limiters {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> serde::Deserialize<'de> for Limiters {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v: Vec<Limiter> = serde::Deserialize::deserialize(d)?;
        Ok(v.into_iter().fold(Limiters::EMPTY, Limiters::with))
    }
}

/// Blocks per SM allowed by each resource alone. `None` means the resource
/// sets no limit (the header's `INT_MAX`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BlockLimits {
    /// Warp slots.
    pub warps: u32,
    /// Registers (`None` for a kernel that uses no registers).
    pub registers: Option<u32>,
    /// Shared memory (`None` when a block allocates none).
    pub shared_memory: Option<u32>,
    /// The blocks-per-SM limit.
    pub blocks: u32,
    /// Block barriers (`None` before 9.0 or with no barriers).
    pub barriers: Option<u32>,
    /// Virtual resources (`None` where not used or not modelled).
    pub virtual_resources: Option<u32>,
}

impl BlockLimits {
    /// The limit of one resource.
    pub fn get(&self, l: Limiter) -> Option<u32> {
        match l {
            Limiter::Warps => Some(self.warps),
            Limiter::Registers => self.registers,
            Limiter::SharedMemory => self.shared_memory,
            Limiter::Blocks => Some(self.blocks),
            Limiter::Barriers => self.barriers,
            Limiter::VirtualResources => self.virtual_resources,
        }
    }
}

/// The result of [`occupancy`].
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Occupancy {
    /// Threads per block.
    pub block_size: u32,
    /// Warps per block.
    pub warps_per_block: u32,
    /// Resident blocks per SM (0: the launch cannot run).
    pub active_blocks_per_sm: u32,
    /// Resident warps per SM.
    pub active_warps_per_sm: u32,
    /// Warp slots per SM.
    pub max_warps_per_sm: u32,
    /// `active_warps_per_sm / max_warps_per_sm`, 0 to 1.
    pub occupancy: f64,
    /// Each resource's block limit.
    pub limits: BlockLimits,
    /// The header's limiting-factor flags: every limit equal to the count
    /// before the barrier step, plus barriers if that step set the count.
    /// See [`Occupancy::binding_limiters`] for what holds the final count.
    pub limiters: Limiters,
    /// Registers allocated per block.
    pub allocated_registers_per_block: u32,
    /// Shared memory allocated per block, reserve included, in bytes.
    pub allocated_smem_per_block: u32,
    /// Whether partitioned global caching stays on.
    pub partitioned_gc: PartitionedGc,
}

impl Occupancy {
    /// The limiters whose own block limit equals `active_blocks_per_sm`: what really
    /// holds the kernel there. The same as [`Occupancy::limiters`] except when
    /// the block-barrier limit (sm_90+) lowered the count after the header had
    /// flagged the others, which then no longer bind.
    pub fn binding_limiters(&self) -> Limiters {
        let mut out = Limiters::EMPTY;
        for l in self.limiters.iter() {
            if self.limits.get(l) == Some(self.active_blocks_per_sm) {
                out = out.with(l);
            }
        }
        if out.is_empty() {
            self.limiters
        } else {
            out
        }
    }
}

/// Input that no launch could have.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OccupancyError {
    /// Block size 0 or above the arch's maximum.
    BlockSize {
        /// The block size given.
        block_size: u32,
        /// The arch's maximum threads per block.
        max: u32,
        /// The arch's name.
        arch: &'static str,
    },
    /// Block size above the kernel's `__launch_bounds__`.
    LaunchBounds {
        /// The block size given.
        block_size: u32,
        /// The declared maximum.
        max: u32,
    },
    /// Carveout above 100 %.
    Carveout(u8),
    /// Static + dynamic shared memory above the opt-in maximum.
    SharedMemory {
        /// Static plus dynamic bytes per block.
        bytes: u64,
        /// The arch's opt-in maximum.
        max: u32,
        /// The arch's name.
        arch: &'static str,
    },
    /// `max_dynamic_smem` attribute plus static smem above the opt-in maximum.
    MaxDynamicSmem {
        /// The attribute given.
        attribute: u32,
        /// The most the attribute may be (opt-in maximum − static).
        max: u32,
        /// The arch's name.
        arch: &'static str,
    },
    /// A block-size multiple of 0 was asked for.
    BlockMultiple,
    /// `num_blocks` of [`crate::model::suggest::available_dynamic_smem`] is 0 or more
    /// than fit even without dynamic shared memory.
    NumBlocks {
        /// The number asked for.
        requested: u32,
        /// The most that fit with no dynamic shared memory.
        max: u32,
    },
}

impl fmt::Display for OccupancyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OccupancyError::BlockSize {
                block_size,
                max,
                arch,
            } => write!(
                f,
                "block size {block_size} is not possible on {arch}; use 1 to {max} threads"
            ),
            OccupancyError::LaunchBounds { block_size, max } => write!(
                f,
                "block size {block_size} exceeds the kernel's __launch_bounds__ maximum of {max} \
                 threads; use at most {max} or raise the bound"
            ),
            OccupancyError::Carveout(c) => write!(
                f,
                "carveout {c}% is out of range; use a percentage from 0 to 100"
            ),
            OccupancyError::SharedMemory { bytes, max, arch } => write!(
                f,
                "{bytes} bytes of shared memory per block exceed the {max} bytes {arch} allows; \
                 use less static or dynamic shared memory"
            ),
            OccupancyError::MaxDynamicSmem {
                attribute,
                max,
                arch,
            } => write!(
                f,
                "max dynamic shared memory {attribute} bytes exceeds the {max} bytes {arch} allows \
                 with this kernel's static shared memory; set it to at most {max}"
            ),
            OccupancyError::BlockMultiple => f.write_str(
                "block multiple 0 is not possible; use a multiple of at least 1, such as 32",
            ),
            OccupancyError::NumBlocks { requested, max } => write!(
                f,
                "{requested} blocks per SM cannot fit (at most {max} fit with no dynamic shared \
                 memory); ask for 1 to {max} blocks"
            ),
        }
    }
}

impl std::error::Error for OccupancyError {}

/// Checks the inputs that no real launch could have.
#[inline]
pub(crate) fn validate(
    arch: &Arch,
    kernel: &KernelResources,
    launch: &BlockLaunch,
) -> Result<(), OccupancyError> {
    validate_kernel(arch, kernel, launch.carveout)?;
    if launch.block_size == 0 || launch.block_size > arch.max_threads_per_block {
        return Err(OccupancyError::BlockSize {
            block_size: launch.block_size,
            max: arch.max_threads_per_block,
            arch: arch.name,
        });
    }
    if let Some(max) = kernel.max_threads_per_block {
        if launch.block_size > max {
            return Err(OccupancyError::LaunchBounds {
                block_size: launch.block_size,
                max,
            });
        }
    }
    let bytes = u64::from(kernel.static_smem) + u64::from(launch.dynamic_smem);
    if bytes > u64::from(arch.smem_per_block_optin) {
        return Err(OccupancyError::SharedMemory {
            bytes,
            max: arch.smem_per_block_optin,
            arch: arch.name,
        });
    }
    Ok(())
}

/// Checks the kernel and the carveout (everything but the block size and
/// dynamic shared memory).
#[inline]
pub(crate) fn validate_kernel(
    arch: &Arch,
    kernel: &KernelResources,
    carveout: Option<u8>,
) -> Result<(), OccupancyError> {
    if let Some(c) = carveout {
        if c > 100 {
            return Err(OccupancyError::Carveout(c));
        }
    }
    if kernel.static_smem > arch.smem_per_block_optin {
        return Err(OccupancyError::SharedMemory {
            bytes: kernel.static_smem.into(),
            max: arch.smem_per_block_optin,
            arch: arch.name,
        });
    }
    if let Some(attr) = kernel.max_dynamic_smem {
        let max = arch.smem_per_block_optin - kernel.static_smem;
        if attr > max {
            return Err(OccupancyError::MaxDynamicSmem {
                attribute: attr,
                max,
                arch: arch.name,
            });
        }
    }
    Ok(())
}

/// Resident blocks per SM for `kernel` launched as `launch` on `arch`, equal
/// to `cudaOccMaxActiveBlocksPerMultiprocessor` of CUDA 13.5's
/// `cuda_occupancy.h` with runtime-style function attributes (opt-in shared
/// memory, `kernel.barriers` barriers).
///
/// Inputs no launch could have are errors: a block size of 0 or above the
/// arch's (or the launch bounds') maximum, a carveout above 100 %, static +
/// dynamic shared memory above the opt-in maximum, a `max_dynamic_smem`
/// attribute the driver would refuse. An input that is legal but cannot run
/// (too many registers, say) gives `active_blocks_per_sm == 0`.
#[inline]
pub fn occupancy(
    arch: &Arch,
    kernel: &KernelResources,
    launch: &BlockLaunch,
) -> Result<Occupancy, OccupancyError> {
    validate(arch, kernel, launch)?;
    Ok(compute(arch, kernel, launch))
}

const INT_MAX: u32 = i32::MAX as u32;

fn to_opt(v: u32) -> Option<u32> {
    (v != INT_MAX).then_some(v)
}

/// Aligns a shared-memory size up to the arch's next legal carveout
/// (`cudaOccAlignUpShmemSizeVoltaPlus`). Sizes above the largest carveout
/// (which validated inputs never reach) give the largest.
#[inline]
pub(crate) fn align_up_carveout(arch: &Arch, bytes: u64) -> u64 {
    let max = u64::from(arch.max_carveout());
    if bytes >= max {
        return max;
    }
    for &kb in arch.carveouts_kb {
        let size = u64::from(kb) * 1024;
        if bytes <= size {
            return size;
        }
    }
    u64::from(arch.max_carveout())
}

/// The SM shared memory the launch prefers (`cudaOccSMemPerMultiprocessor`).
#[inline]
pub(crate) fn smem_preference(arch: &Arch, carveout: Option<u8>, cache: CachePref) -> u64 {
    let per_sm = u64::from(arch.smem_per_sm);
    if arch.major < 7 {
        return per_sm;
    }
    let pct = match carveout {
        Some(c) => Some(u64::from(c)),
        None => match cache {
            CachePref::L1 => Some(0),
            CachePref::Shared => Some(100),
            CachePref::Equal => Some(50),
            CachePref::None => None,
        },
    };
    let p = match pct {
        None => per_sm,
        Some(c) => c * per_sm / 100,
    };
    align_up_carveout(arch, p)
}

/// The per-block shared-memory ceiling, reserve included
/// (`cudaOccSMemPerBlock` with an opt-in config).
#[inline]
pub(crate) fn smem_per_block_limit(arch: &Arch, max_usage: u64) -> u64 {
    let mut l = if arch.major <= 6 || max_usage <= u64::from(arch.smem_per_block) {
        arch.smem_per_block
    } else {
        arch.smem_per_block_optin
    };
    if arch.major >= 8 {
        l += arch.reserved_smem_per_block;
    }
    u64::from(l)
}

/// Rounds `x` up to a multiple of `g`, a power of two.
#[inline(always)]
fn round_up_pow2(x: u32, g: u32) -> u32 {
    (x + (g - 1)) & !(g - 1)
}

/// The register limit (`cudaOccMaxBlocksPerSMRegsLimit`) for a given number
/// of sub-partitions; returns (limit, allocated registers per block) and may
/// switch `gc` off.
///
/// The table's allocation unit and sub-partition counts are powers of two
/// (checked by a unit test), so rounding is a mask; the arithmetic is 32-bit
/// wherever the values are bounded (registers ≤ 256, warps ≤ 32 for a valid
/// block).
#[inline(always)]
fn regs_limit(
    arch: &Arch,
    sub_partitions: u32,
    registers: u32,
    warps: u32,
    gc: &mut PartitionedGc,
) -> (u32, u32) {
    if registers > arch.max_regs_per_thread || warps > 1024 {
        // Cold path: the header's limit is 0 (or its int math would
        // overflow); report the allocation saturated.
        let unit = u64::from(arch.reg_alloc_unit);
        let per_warp = (u64::from(registers) * u64::from(arch.warp_size)).div_ceil(unit) * unit;
        let allocated = u32::try_from(per_warp * u64::from(warps)).unwrap_or(u32::MAX);
        let limit = if registers > arch.max_regs_per_thread {
            0
        } else {
            regs_limit_u64(arch, sub_partitions, per_warp, warps, gc)
        };
        return (limit, allocated);
    }
    let per_warp = round_up_pow2(registers * arch.warp_size, arch.reg_alloc_unit);
    let allocated = per_warp * warps;
    let assumed = per_warp * round_up_pow2(warps, sub_partitions);
    let per_block = arch.max_regs_per_block;
    // sub_partitions is a power of two.
    let per_sp = arch.regs_per_sm >> sub_partitions.trailing_zeros();
    let limit = if per_block < assumed || per_block < allocated {
        0
    } else if let Some(warps_per_sp) = per_sp.checked_div(per_warp) {
        let mut max_blocks = 0;
        if *gc != PartitionedGc::Off {
            max_blocks = warps_per_sp * (sub_partitions / 2) / warps * 2;
        }
        if max_blocks == 0 && *gc != PartitionedGc::OnStrict {
            *gc = PartitionedGc::Off;
            max_blocks = warps_per_sp * sub_partitions / warps;
        }
        max_blocks
    } else {
        INT_MAX
    };
    (limit, allocated)
}

/// The register limit in 64-bit arithmetic for the cold path (blocks far
/// above any arch's maximum, which only [`compute`]'s unvalidated callers
/// can ask for).
#[cold]
fn regs_limit_u64(
    arch: &Arch,
    sub_partitions: u32,
    per_warp: u64,
    warps: u32,
    gc: &mut PartitionedGc,
) -> u32 {
    let allocated = per_warp * u64::from(warps);
    let assumed = per_warp * u64::from(warps.div_ceil(sub_partitions) * sub_partitions);
    let per_block = u64::from(arch.max_regs_per_block);
    if per_block < assumed || per_block < allocated {
        return 0;
    }
    let Some(warps_per_sp) = u64::from(arch.regs_per_sm / sub_partitions).checked_div(per_warp)
    else {
        return INT_MAX;
    };
    let warps_per_sp = warps_per_sp as u32;
    let mut max_blocks = 0;
    if *gc != PartitionedGc::Off {
        max_blocks = warps_per_sp * (sub_partitions / 2) / warps * 2;
    }
    if max_blocks == 0 && *gc != PartitionedGc::OnStrict {
        *gc = PartitionedGc::Off;
        max_blocks = warps_per_sp * sub_partitions / warps;
    }
    max_blocks
}

/// The header's computation without input validation. Inputs must satisfy
/// [`validate`] except the launch-bounds and block-size checks, which the
/// header does not make (a block above the arch maximum gives 0 warps).
///
/// Long because it follows `cudaOccMaxActiveBlocksPerMultiprocessor` step by
/// step, so it can be read beside the header.
#[inline]
pub(crate) fn compute(arch: &Arch, kernel: &KernelResources, launch: &BlockLaunch) -> Occupancy {
    let block = launch.block_size;
    // The warp size is a power of two (checked by a unit test of the table).
    let warp_shift = arch.warp_size.trailing_zeros();
    let warps = (block >> warp_shift) + u32::from(block & (arch.warp_size - 1) != 0);
    let mut gc = if arch.partitioned_gc {
        launch.partitioned_gc
    } else {
        PartitionedGc::Off
    };

    // Registers.
    let (mut lim_regs, alloc_regs) =
        regs_limit(arch, arch.sub_partitions, kernel.registers, warps, &mut gc);
    if arch.major == 6 && arch.minor == 0 && lim_regs != 0 {
        let mut gc10x = gc;
        if regs_limit(arch, 4, kernel.registers, warps, &mut gc10x).0 == 0 {
            lim_regs = 0;
        }
    }

    // Warps.
    let lim_warps = if block > arch.max_threads_per_block {
        0
    } else {
        let max_w = arch.max_threads_per_sm >> warp_shift;
        if gc != PartitionedGc::Off {
            max_w / 2 / warps * 2
        } else {
            max_w / warps
        }
    };

    let lim_blocks = arch.max_blocks_per_sm;

    // Shared memory. Sizes fit in 32 bits once the per-block ceiling (at
    // most 328 KB) has been checked.
    let g = arch.smem_granularity;
    let fixed = u64::from(kernel.static_smem) + u64::from(arch.reserved_smem_per_block);
    let dynamic = u64::from(launch.dynamic_smem);
    let total = fixed + dynamic;
    let alloc_smem = total.div_ceil(u64::from(g)) * u64::from(g);
    let max_dyn = u64::from(kernel.max_dynamic_smem_on(arch));
    let ceiling = smem_per_block_limit(arch, fixed + max_dyn);
    let lim_smem = if dynamic > max_dyn || alloc_smem > ceiling {
        0
    } else {
        // alloc_smem ≤ ceiling < 2^32 here.
        let alloc = alloc_smem as u32;
        let pref = smem_preference(arch, launch.carveout, launch.cache_pref) as u32;
        let budget = if pref >= alloc {
            pref
        } else if arch.major >= 7 {
            align_up_carveout(arch, alloc.into()) as u32
        } else {
            arch.smem_per_sm
        };
        budget.checked_div(alloc).unwrap_or(INT_MAX)
    };

    // Virtual resources.
    let lim_virtual = if arch.virtual_resources_per_sm > 0 && kernel.virtual_resources > 0 {
        arch.virtual_resources_per_sm / kernel.virtual_resources
    } else {
        INT_MAX
    };

    let mut active = lim_regs
        .min(lim_smem)
        .min(lim_warps)
        .min(lim_blocks)
        .min(lim_virtual);
    let mut flags = 0u8;
    if active == lim_warps {
        flags |= Limiter::Warps.bit();
    }
    if active == lim_regs {
        flags |= Limiter::Registers.bit();
    }
    if active == lim_smem {
        flags |= Limiter::SharedMemory.bit();
    }
    if active == lim_blocks {
        flags |= Limiter::Blocks.bit();
    }
    if active == lim_virtual {
        flags |= Limiter::VirtualResources.bit();
    }
    let lim_bars = if arch.major >= 9 && kernel.barriers > 0 {
        let bars = lim_blocks * arch.barrier_factor / kernel.barriers;
        active = active.min(bars);
        if active == bars {
            flags |= Limiter::Barriers.bit();
        }
        bars
    } else {
        INT_MAX
    };

    let max_warps_per_sm = arch.max_threads_per_sm >> warp_shift;
    let active_warps_per_sm = active * warps;
    Occupancy {
        block_size: block,
        warps_per_block: warps,
        active_blocks_per_sm: active,
        active_warps_per_sm,
        max_warps_per_sm,
        occupancy: f64::from(active_warps_per_sm) / f64::from(max_warps_per_sm),
        limits: BlockLimits {
            warps: lim_warps,
            registers: to_opt(lim_regs),
            shared_memory: to_opt(lim_smem),
            blocks: lim_blocks,
            barriers: to_opt(lim_bars),
            virtual_resources: to_opt(lim_virtual),
        },
        limiters: Limiters(flags),
        allocated_registers_per_block: alloc_regs,
        allocated_smem_per_block: u32::try_from(alloc_smem).unwrap_or(u32::MAX),
        partitioned_gc: gc,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::arch::lookup;

    fn k(registers: u32, static_smem: u32) -> KernelResources {
        KernelResources {
            registers,
            static_smem,
            ..Default::default()
        }
    }

    fn occ(arch: &str, kernel: KernelResources, launch: BlockLaunch) -> Occupancy {
        occupancy(lookup(arch).unwrap(), &kernel, &launch).unwrap()
    }

    fn flags(o: &Occupancy) -> u8 {
        o.limiters.bits()
    }

    #[test]
    fn sm80_40_regs_256_threads_16k() {
        let o = occ("sm_80", k(40, 16384), BlockLaunch::new(256));
        assert_eq!(o.active_blocks_per_sm, 6);
        assert_eq!(o.active_warps_per_sm, 48);
        assert_eq!(o.max_warps_per_sm, 64);
        assert!((o.occupancy - 0.75).abs() < 1e-12);
        assert_eq!(flags(&o), 0x02);
        assert_eq!(o.limits.registers, Some(6));
        assert_eq!(o.limits.shared_memory, Some(9));
        assert_eq!(o.limits.warps, 8);
        assert_eq!(o.limits.blocks, 32);
        assert_eq!(o.allocated_registers_per_block, 10240);
        assert_eq!(o.allocated_smem_per_block, 17408);
    }

    #[test]
    fn sm90_tie_warps_registers() {
        let o = occ("sm_90", k(32, 0), BlockLaunch::new(1024));
        assert_eq!(o.active_blocks_per_sm, 2);
        assert_eq!(flags(&o), 0x03);
        assert_eq!(o.limits.barriers, Some(64));
        assert_eq!(o.limits.shared_memory, Some(228));
        assert_eq!(o.limiters.to_string(), "warps + registers");
    }

    #[test]
    fn sm86_smem_static_or_dynamic() {
        let o = occ("sm_86", k(64, 48 * 1024), BlockLaunch::new(128));
        assert_eq!(o.active_blocks_per_sm, 2);
        assert_eq!(flags(&o), 0x04);
        assert_eq!(o.allocated_smem_per_block, 50176);
        assert_eq!(
            (o.limits.registers, o.limits.warps, o.limits.blocks),
            (Some(8), 12, 16)
        );
        let d = occ(
            "sm_86",
            k(64, 0),
            BlockLaunch::new(128).with_dynamic_smem(48 * 1024),
        );
        assert_eq!(d.active_blocks_per_sm, 2);
    }

    #[test]
    fn vectors_v1_to_v5_barriers() {
        // v1..v3: 16 regs, 32 threads, 1 barrier.
        let o = occ("12.0", k(16, 0), BlockLaunch::new(32));
        assert_eq!((o.active_blocks_per_sm, flags(&o)), (24, 0x18));
        let o = occ("9.0", k(16, 0), BlockLaunch::new(32));
        assert_eq!(
            (o.active_blocks_per_sm, flags(&o), o.limits.barriers),
            (32, 0x08, Some(64))
        );
        let o = occ("10.3", k(16, 0), BlockLaunch::new(32));
        assert_eq!((o.active_blocks_per_sm, flags(&o)), (32, 0x18));
        // v4: 2 barriers.
        let two = KernelResources {
            barriers: 2,
            ..k(16, 0)
        };
        assert_eq!(
            occ("10.3", two, BlockLaunch::new(32)).active_blocks_per_sm,
            16
        );
        assert_eq!(
            occ("10.0", two, BlockLaunch::new(32)).active_blocks_per_sm,
            32
        );
        // v5
        assert_eq!(
            occ("11.0", k(16, 0), BlockLaunch::new(32)).active_blocks_per_sm,
            24
        );
        assert_eq!(
            occ("sm_101", k(16, 0), BlockLaunch::new(32)).active_blocks_per_sm,
            24
        );
        // No barriers: no barrier limit.
        let none = KernelResources {
            barriers: 0,
            ..k(16, 0)
        };
        let o = occ("12.0", none, BlockLaunch::new(32));
        assert_eq!((flags(&o), o.limits.barriers), (0x08, None));
    }

    #[test]
    fn vectors_v6_to_v8_register_checks() {
        // v6: hardware check rounds 10 warps up to 12.
        let o = occ("8.0", k(192, 0), BlockLaunch::new(320));
        assert_eq!((o.active_blocks_per_sm, o.limits.registers), (0, Some(0)));
        assert_eq!(flags(&o), 0x02);
        // v7: regsPerBlock 32K.
        assert_eq!(
            occ("5.3", k(64, 0), BlockLaunch::new(1024)).active_blocks_per_sm,
            0
        );
        // v8: GP100 rule.
        assert_eq!(
            occ("6.0", k(104, 0), BlockLaunch::new(576)).active_blocks_per_sm,
            0
        );
        // Above the per-thread cap.
        assert_eq!(
            occ("8.0", k(257, 0), BlockLaunch::new(32)).active_blocks_per_sm,
            0
        );
        assert_eq!(
            occ("6.1", k(256, 0), BlockLaunch::new(32)).active_blocks_per_sm,
            0
        );
        assert_eq!(
            occ("7.0", k(256, 0), BlockLaunch::new(32)).active_blocks_per_sm,
            8
        );
    }

    #[test]
    fn vector_v9_partitioned_gc() {
        let with = |gc| BlockLaunch {
            partitioned_gc: gc,
            ..BlockLaunch::new(96)
        };
        let on = occ("5.2", k(32, 0), with(PartitionedGc::On));
        assert_eq!(on.active_blocks_per_sm, 20);
        assert_eq!(on.partitioned_gc, PartitionedGc::On);
        assert_eq!(
            occ("5.2", k(32, 0), with(PartitionedGc::Off)).active_blocks_per_sm,
            21
        );
        let big = |gc| BlockLaunch {
            partitioned_gc: gc,
            ..BlockLaunch::new(1024)
        };
        let fallback = occ("5.2", k(64, 0), big(PartitionedGc::On));
        assert_eq!(fallback.active_blocks_per_sm, 1);
        assert_eq!(fallback.partitioned_gc, PartitionedGc::Off);
        assert_eq!(
            occ("5.2", k(64, 0), big(PartitionedGc::OnStrict)).active_blocks_per_sm,
            0
        );
        // Unsupported archs force it off.
        let o = occ("7.0", k(32, 0), with(PartitionedGc::OnStrict));
        assert_eq!(
            (o.active_blocks_per_sm, o.partitioned_gc),
            (21, PartitionedGc::Off)
        );
    }

    #[test]
    fn vectors_v10_to_v13() {
        let o = occ("8.6", k(32, 0), BlockLaunch::new(100));
        assert_eq!((o.active_blocks_per_sm, o.warps_per_block), (12, 4));
        let o = occ("8.0", k(0, 0), BlockLaunch::new(256));
        assert_eq!((o.active_blocks_per_sm, o.limits.registers), (8, None));
        let o = occ("8.0", k(0, 16384), BlockLaunch::new(256).with_carveout(50));
        assert_eq!((o.active_blocks_per_sm, flags(&o)), (5, 0x04));
        let o = occ("8.0", k(0, 0), BlockLaunch::new(64).with_carveout(0));
        assert_eq!(o.active_blocks_per_sm, 8);
    }

    #[test]
    fn vectors_v14_v15_opt_in() {
        let sm90 = lookup("9.0").unwrap();
        let launch = BlockLaunch::new(128).with_dynamic_smem(100 * 1024);
        let attr = |a| KernelResources {
            max_dynamic_smem: a,
            ..k(0, 0)
        };
        assert_eq!(
            compute(sm90, &attr(Some(48 * 1024)), &launch).active_blocks_per_sm,
            0
        );
        assert_eq!(
            compute(sm90, &attr(Some(227 * 1024)), &launch).active_blocks_per_sm,
            2
        );
        assert_eq!(compute(sm90, &attr(None), &launch).active_blocks_per_sm, 2);
        let full = BlockLaunch::new(128).with_dynamic_smem(227 * 1024);
        assert_eq!(
            occupancy(sm90, &attr(None), &full)
                .unwrap()
                .active_blocks_per_sm,
            1
        );
        let over = BlockLaunch::new(128).with_dynamic_smem(227 * 1024 + 1);
        assert!(matches!(
            occupancy(sm90, &attr(None), &over),
            Err(OccupancyError::SharedMemory { .. })
        ));
    }

    #[test]
    fn vector_v16_virtual_resources() {
        let v = KernelResources {
            virtual_resources: 10,
            ..k(16, 0)
        };
        for a in ["10.0", "12.0"] {
            let o = occ(a, v, BlockLaunch::new(32));
            assert_eq!(o.active_blocks_per_sm, 12);
            assert!(o.limiters.contains(Limiter::VirtualResources));
            assert_eq!(o.limits.virtual_resources, Some(12));
        }
        let o = occ("9.0", v, BlockLaunch::new(32));
        assert_eq!(
            (o.active_blocks_per_sm, o.limits.virtual_resources),
            (32, None)
        );
    }

    #[test]
    fn invalid_inputs_are_errors() {
        let a = lookup("sm_80").unwrap();
        let kk = k(32, 0);
        for bs in [0, 1025] {
            let e = occupancy(a, &kk, &BlockLaunch::new(bs)).unwrap_err();
            assert!(matches!(e, OccupancyError::BlockSize { .. }));
            assert!(e.to_string().contains("sm_80"));
        }
        let e = occupancy(a, &kk, &BlockLaunch::new(32).with_carveout(101)).unwrap_err();
        assert_eq!(e, OccupancyError::Carveout(101));
        let bounded = KernelResources {
            max_threads_per_block: Some(128),
            ..kk
        };
        assert!(occupancy(a, &bounded, &BlockLaunch::new(128)).is_ok());
        assert!(matches!(
            occupancy(a, &bounded, &BlockLaunch::new(129)),
            Err(OccupancyError::LaunchBounds { .. })
        ));
        let attr = KernelResources {
            static_smem: 1024,
            max_dynamic_smem: Some(163 * 1024),
            ..kk
        };
        assert!(matches!(
            occupancy(a, &attr, &BlockLaunch::new(32)),
            Err(OccupancyError::MaxDynamicSmem { .. })
        ));
        let big = k(0, 200_000);
        assert!(occupancy(a, &big, &BlockLaunch::new(32)).is_err());
    }

    #[test]
    fn cache_preference_maps_to_carveouts() {
        let a = lookup("sm_80").unwrap();
        let kk = k(0, 16384);
        let l1 = BlockLaunch {
            cache_pref: CachePref::L1,
            ..BlockLaunch::new(256)
        };
        // 0 % carveout: grows to one block's aligned size (32 KB) → 1 block.
        assert_eq!(occupancy(a, &kk, &l1).unwrap().active_blocks_per_sm, 1);
        let eq = BlockLaunch {
            cache_pref: CachePref::Equal,
            ..BlockLaunch::new(256)
        };
        assert_eq!(occupancy(a, &kk, &eq).unwrap().active_blocks_per_sm, 5);
        // The carveout wins over the cache preference.
        assert_eq!(
            occupancy(a, &kk, &l1.with_carveout(100))
                .unwrap()
                .active_blocks_per_sm,
            8
        );
        // Dedicated shared memory ignores both.
        let m = lookup("sm_52").unwrap();
        assert_eq!(
            occupancy(m, &kk, &l1.with_carveout(0))
                .unwrap()
                .active_blocks_per_sm,
            6
        );
    }

    #[test]
    fn limiters_display_and_serde() {
        let l = Limiters::from_bits(0x18);
        assert_eq!(l.to_string(), "blocks + barriers");
        assert_eq!(l.len(), 2);
        let json = serde_json::to_string(&l).unwrap();
        assert_eq!(json, r#"["blocks","barriers"]"#);
        let back: Limiters = serde_json::from_str(&json).unwrap();
        assert_eq!(back, l);
        assert_eq!(Limiters::EMPTY.to_string(), "none");
    }

    #[test]
    fn binding_limiters_drop_flags_the_barrier_step_made_stale() {
        // sm_90, 128 threads, 6 named barriers: warps allow 64 / 4 = 16 blocks,
        // the header flags WARPS; then barriers allow 32 * 2 / 6 = 10 and set
        // BARRIERS too. Only barriers hold the final 10.
        let arch = lookup("sm_90").expect("sm_90");
        let k = KernelResources {
            registers: 16,
            barriers: 6,
            ..KernelResources::default()
        };
        let o = occupancy(arch, &k, &BlockLaunch::new(128)).expect("valid");
        assert_eq!(o.active_blocks_per_sm, 10);
        assert!(o.limiters.contains(Limiter::Warps) && o.limiters.contains(Limiter::Barriers));
        assert_eq!(o.binding_limiters().to_string(), "barriers");
        // Without the barrier step the two sets agree.
        let k1 = KernelResources { barriers: 1, ..k };
        let o1 = occupancy(arch, &k1, &BlockLaunch::new(128)).expect("valid");
        assert_eq!(o1.binding_limiters(), o1.limiters);
    }
}
