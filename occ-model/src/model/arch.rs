//! Per-architecture occupancy limits, one row per compute capability.
//!
//! Every number the occupancy model needs lives in [`Arch`]: the device
//! properties that `cudaGetDeviceProperties` would report (threads, registers,
//! shared memory per SM and per block, the reserved shared memory per block)
//! and the values that NVIDIA's `cuda_occupancy.h` (CUDA 13.5) hard-codes per
//! compute capability (blocks per SM, allocation granularities, register
//! sub-partitions, legal shared-memory carveouts, the barrier factor, virtual
//! resources, partitioned global caching). Each row names its sources in
//! [`Arch::source`].
//!
//! Names are parsed leniently: `sm_90`, `sm_90a`, `sm_100f`, `compute_90`,
//! `90`, `90a` and `9.0` are all accepted. The `a` (architecture-specific) and
//! `f` (family) suffixes use the limits of their base compute capability, but
//! [`Target::nvcc_name`] keeps them for nvcc. `sm_101`, the CUDA 12.8/12.9
//! name of Jetson Thor, uses the 11.0 row (CUDA 13 renamed it; the 13.5
//! header gives 10.1 and 11.0 the same figures).
//!
//! ```
//! let a100 = occ_model::model::arch::lookup("sm_80").unwrap();
//! assert_eq!((a100.major, a100.minor), (8, 0));
//! assert_eq!(a100.max_warps_per_sm(), 64);
//! assert!(occ_model::model::arch::lookup("sm_99").is_err());
//! ```

use std::fmt;

/// Occupancy-relevant limits of one compute capability.
///
/// Field names follow `cudaOccDeviceProp` where one exists. All sizes are in
/// bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Arch {
    /// Compute capability major version.
    pub major: u32,
    /// Compute capability minor version.
    pub minor: u32,
    /// Canonical nvcc name, like `"sm_80"`.
    pub name: &'static str,
    /// Threads in a warp (32 everywhere).
    pub warp_size: u32,
    /// Maximum threads per block (`maxThreadsPerBlock`).
    pub max_threads_per_block: u32,
    /// Maximum resident threads per SM (`maxThreadsPerMultiProcessor`).
    pub max_threads_per_sm: u32,
    /// Maximum resident blocks per SM (hard-coded in `cuda_occupancy.h`).
    pub max_blocks_per_sm: u32,
    /// 32-bit registers per SM (`regsPerMultiprocessor`).
    pub regs_per_sm: u32,
    /// Maximum registers per block (`regsPerBlock`).
    pub max_regs_per_block: u32,
    /// Register count per thread above which no block can launch (the header
    /// uses 255 on majors up to 6 and 256 from 7 on).
    pub max_regs_per_thread: u32,
    /// Register allocation unit per warp (registers × warp size are rounded up
    /// to this).
    pub reg_alloc_unit: u32,
    /// Register file sub-partitions per SM (4, or 2 on 6.0).
    pub sub_partitions: u32,
    /// Shared memory per SM (`sharedMemPerMultiprocessor`).
    pub smem_per_sm: u32,
    /// Default per-block shared memory limit (`sharedMemPerBlock`, 48 KB).
    pub smem_per_block: u32,
    /// Opt-in per-block shared memory limit (`sharedMemPerBlockOptin`).
    pub smem_per_block_optin: u32,
    /// Shared memory the driver reserves per block
    /// (`reservedSharedMemPerBlock`, 1 KB from 8.0 on), added once to
    /// ptxas's "bytes smem". On sm_90 the cubin's `.nv.shared.<kernel>`
    /// section is 1 KB larger than ptxas's figure, but the driver's
    /// `CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES` is ptxas's figure, and its
    /// occupancy adds this reserve once: measured on an H200 (driver
    /// 580.159.04) at 224,440 launches, where counting the 1 KB twice would
    /// have disagreed with the driver at 26,643 (BENCHMARKS.md section 10).
    /// So occ reads ptxas, never the section's size.
    pub reserved_smem_per_block: u32,
    /// Shared memory allocation granularity (256 up to 7.x, 128 from 8.0).
    pub smem_granularity: u32,
    /// Legal shared-memory carveout sizes in KB, ascending; empty where shared
    /// memory is dedicated (5.x, 6.x).
    pub carveouts_kb: &'static [u32],
    /// Block barriers per SM per block slot (sm_90 and newer); 0 where the
    /// header applies no barrier limit.
    pub barrier_factor: u32,
    /// Virtual resources per SM (128 on majors 10–12); 0 where not modelled.
    pub virtual_resources_per_sm: u32,
    /// Whether partitioned global caching exists (5.2, 5.3, 6.1, 6.2).
    pub partitioned_gc: bool,
    /// Where the figures come from.
    pub source: &'static str,
}

impl Arch {
    /// Maximum resident warps per SM.
    pub const fn max_warps_per_sm(&self) -> u32 {
        self.max_threads_per_sm / self.warp_size
    }

    /// The compute capability as `major * 10 + minor` (80 for 8.0).
    pub const fn cc(&self) -> u32 {
        self.major * 10 + self.minor
    }

    /// The largest legal carveout in bytes, or the SM's shared memory where
    /// shared memory is dedicated.
    pub fn max_carveout(&self) -> u32 {
        self.carveouts_kb
            .last()
            .map_or(self.smem_per_sm, |kb| kb * 1024)
    }
}

const KB: u32 = 1024;

const CARVE_VOLTA: &[u32] = &[0, 8, 16, 32, 64, 96];
const CARVE_TURING: &[u32] = &[32, 64];
const CARVE_GA100: &[u32] = &[0, 8, 16, 32, 64, 100, 132, 164];
const CARVE_100K: &[u32] = &[0, 8, 16, 32, 64, 100];
const CARVE_228K: &[u32] = &[0, 8, 16, 32, 64, 100, 132, 164, 196, 228];
const CARVE_328K: &[u32] = &[0, 8, 16, 32, 64, 100, 132, 164, 196, 228, 328];

const SRC_OLD: &str = "threads, blocks, registers, smem: CUDA C++ Programming Guide v11 Table 15; \
     granularities, sub-partitions, 255-register cap: cuda_occupancy.h (CUDA 13.5)";
const SRC_NEW: &str =
    "threads, blocks, registers, smem, opt-in: CUDA Programming Guide 13 Tables 30-31; \
     1 KB reserved: legacy Programming Guide 13.0 shared-memory sections; carveouts: Table 32 and \
     cuda_occupancy.h (CUDA 13.5); granularities, sub-partitions, barriers, virtual resources: \
     cuda_occupancy.h (CUDA 13.5)";

/// Builds a row with the values common to every architecture filled in.
#[allow(clippy::too_many_arguments)]
const fn row(
    major: u32,
    minor: u32,
    name: &'static str,
    max_threads_per_sm: u32,
    max_blocks_per_sm: u32,
    max_regs_per_block: u32,
    smem_per_sm: u32,
    smem_per_block_optin: u32,
    carveouts_kb: &'static [u32],
    barrier_factor: u32,
    source: &'static str,
) -> Arch {
    Arch {
        major,
        minor,
        name,
        warp_size: 32,
        max_threads_per_block: 1024,
        max_threads_per_sm,
        max_blocks_per_sm,
        regs_per_sm: 65536,
        max_regs_per_block,
        max_regs_per_thread: if major <= 6 { 255 } else { 256 },
        reg_alloc_unit: 256,
        sub_partitions: if major == 6 && minor == 0 { 2 } else { 4 },
        smem_per_sm,
        smem_per_block: 48 * KB,
        smem_per_block_optin,
        reserved_smem_per_block: if major >= 8 { KB } else { 0 },
        smem_granularity: if major >= 8 { 128 } else { 256 },
        carveouts_kb,
        barrier_factor,
        virtual_resources_per_sm: if major >= 10 && major <= 12 { 128 } else { 0 },
        partitioned_gc: matches!((major, minor), (5, 2) | (5, 3) | (6, 1) | (6, 2)),
        source,
    }
}

static ARCHS: [Arch; 21] = [
    row(
        5,
        0,
        "sm_50",
        2048,
        32,
        65536,
        64 * KB,
        48 * KB,
        &[],
        0,
        SRC_OLD,
    ),
    row(
        5,
        2,
        "sm_52",
        2048,
        32,
        65536,
        96 * KB,
        48 * KB,
        &[],
        0,
        SRC_OLD,
    ),
    row(
        5,
        3,
        "sm_53",
        2048,
        32,
        32768,
        64 * KB,
        48 * KB,
        &[],
        0,
        SRC_OLD,
    ),
    row(
        6,
        0,
        "sm_60",
        2048,
        32,
        65536,
        64 * KB,
        48 * KB,
        &[],
        0,
        "CUDA C++ Programming Guide v11 Table 15; 2 sub-partitions and the GP10x register rule: \
         cuda_occupancy.h (CUDA 13.5)",
    ),
    row(
        6,
        1,
        "sm_61",
        2048,
        32,
        65536,
        96 * KB,
        48 * KB,
        &[],
        0,
        SRC_OLD,
    ),
    row(
        6,
        2,
        "sm_62",
        2048,
        32,
        32768,
        64 * KB,
        48 * KB,
        &[],
        0,
        SRC_OLD,
    ),
    row(
        7,
        0,
        "sm_70",
        2048,
        32,
        65536,
        96 * KB,
        96 * KB,
        CARVE_VOLTA,
        0,
        "CUDA C++ Programming Guide v11 Table 15; carveouts: legacy Programming Guide 13.0 \
         section 20.6.4 and cuda_occupancy.h (CUDA 13.5)",
    ),
    row(
        7,
        2,
        "sm_72",
        2048,
        32,
        65536,
        96 * KB,
        96 * KB,
        CARVE_VOLTA,
        0,
        "CUDA C++ Programming Guide v11 Table 15; carveouts: cuda_occupancy.h (CUDA 13.5) treats \
         every 7.x but 7.5 as Volta",
    ),
    row(
        7,
        5,
        "sm_75",
        1024,
        16,
        65536,
        64 * KB,
        64 * KB,
        CARVE_TURING,
        0,
        "CUDA Programming Guide 13 Tables 30-32 and v11 Table 15; carveouts 32/64 KB: \
         cuda_occupancy.h (CUDA 13.5)",
    ),
    row(
        8,
        0,
        "sm_80",
        2048,
        32,
        65536,
        164 * KB,
        163 * KB,
        CARVE_GA100,
        0,
        SRC_NEW,
    ),
    row(
        8,
        6,
        "sm_86",
        1536,
        16,
        65536,
        100 * KB,
        99 * KB,
        CARVE_100K,
        0,
        SRC_NEW,
    ),
    row(
        8,
        7,
        "sm_87",
        1536,
        16,
        65536,
        164 * KB,
        163 * KB,
        CARVE_GA100,
        0,
        "CUDA Programming Guide 13 Tables 30-32; Jetson Orin deviceQuery (1536 threads, \
         167936 B per SM); cuda_occupancy.h (CUDA 13.5)",
    ),
    row(
        8,
        8,
        "sm_88",
        1536,
        16,
        65536,
        100 * KB,
        99 * KB,
        CARVE_100K,
        0,
        "blocks per SM and carveouts: cuda_occupancy.h (CUDA 13.5) generic 8.x; threads and \
         shared memory inferred from 8.6 (no guide row; nvcc 13.5 lists sm_88)",
    ),
    row(
        8,
        9,
        "sm_89",
        1536,
        24,
        65536,
        100 * KB,
        99 * KB,
        CARVE_100K,
        0,
        SRC_NEW,
    ),
    row(
        9,
        0,
        "sm_90",
        2048,
        32,
        65536,
        228 * KB,
        227 * KB,
        CARVE_228K,
        2,
        SRC_NEW,
    ),
    row(
        10,
        0,
        "sm_100",
        2048,
        32,
        65536,
        228 * KB,
        227 * KB,
        CARVE_228K,
        2,
        SRC_NEW,
    ),
    row(
        10,
        3,
        "sm_103",
        2048,
        32,
        65536,
        228 * KB,
        227 * KB,
        CARVE_228K,
        1,
        SRC_NEW,
    ),
    row(
        10,
        7,
        "sm_107",
        2048,
        16,
        65536,
        328 * KB,
        327 * KB,
        CARVE_328K,
        1,
        "blocks per SM, carveouts up to 328 KB, barrier factor: cuda_occupancy.h (CUDA 13.5); \
         328 KB per SM and 327 KB per block: Programming Guide 13.4 Table 31 as quoted by a \
         third party; 2048 threads per SM inferred from 10.0",
    ),
    row(
        11,
        0,
        "sm_110",
        1536,
        24,
        65536,
        228 * KB,
        227 * KB,
        CARVE_228K,
        1,
        "CUDA Programming Guide 13 Tables 30-32; Jetson Thor deviceQuery (1536 threads, 233472 B \
         per SM); cuda_occupancy.h (CUDA 13.5, which gives 10.1 the same figures)",
    ),
    row(
        12,
        0,
        "sm_120",
        1536,
        24,
        65536,
        100 * KB,
        99 * KB,
        CARVE_100K,
        1,
        "CUDA Programming Guide 13 Tables 30-32; RTX 5090 deviceQuery (102400 B per SM, 101376 B \
         opt-in); cuda_occupancy.h (CUDA 13.5); the Blackwell Tuning Guide's 32 blocks and 128 KB \
         disagree",
    ),
    row(
        12,
        1,
        "sm_121",
        1536,
        24,
        65536,
        100 * KB,
        99 * KB,
        CARVE_100K,
        1,
        SRC_NEW,
    ),
];

/// Every known architecture, ordered by compute capability.
pub fn all() -> &'static [Arch] {
    &ARCHS
}

/// Which flavour of a compute capability a target name asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// Plain target such as `sm_90`.
    Base,
    /// Architecture-specific target such as `sm_90a`.
    Specific,
    /// Family target such as `sm_100f`.
    Family,
}

/// A parsed target name: the limits to use and the name to give nvcc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// The limits of the target's base compute capability.
    pub arch: &'static Arch,
    /// The compute capability as written, `major * 10 + minor` (101 for
    /// `sm_101`, whose limits are those of 11.0).
    pub cc: u32,
    /// The suffix.
    pub variant: Variant,
}

impl Target {
    /// The `sm_` name for nvcc, keeping the suffix: `sm_90a`, `sm_100f`.
    pub fn nvcc_name(&self) -> String {
        let suffix = match self.variant {
            Variant::Base => "",
            Variant::Specific => "a",
            Variant::Family => "f",
        };
        format!("sm_{}{}", self.cc, suffix)
    }

    /// Whether nvcc builds this compute capability with `variant`: every
    /// one as [`Variant::Base`], architecture-specific (`a`) from 9.0 on,
    /// family (`f`) from 10.0 on (CUDA 12.9+). nvcc refuses `sm_80a` and
    /// `sm_90f`.
    pub fn has_variant(&self, variant: Variant) -> bool {
        match variant {
            Variant::Base => true,
            Variant::Specific => self.cc >= 90,
            Variant::Family => self.cc >= 100,
        }
    }

    /// The same compute capability as `variant` (`sm_90` → `sm_90a`), or
    /// `None` when nvcc has no such target ([`Target::has_variant`]).
    pub fn with_variant(self, variant: Variant) -> Option<Target> {
        self.has_variant(variant)
            .then_some(Target { variant, ..self })
    }
}

/// The error for an architecture name that is not in the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownArch {
    /// The name as given.
    pub name: String,
}

impl fmt::Display for UnknownArch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown CUDA architecture `{}`; known: ", self.name)?;
        for (i, a) in ARCHS.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(a.name)?;
        }
        f.write_str(" (sm_101 is accepted as sm_110; suffixes a and f are allowed, as in sm_90a)")
    }
}

impl std::error::Error for UnknownArch {}

/// Parses a target name (`sm_90`, `sm_90a`, `sm_100f`, `compute_90`, `90`,
/// `90a`, `9.0`) into its limits and nvcc spelling.
pub fn parse_target(name: &str) -> Result<Target, UnknownArch> {
    let unknown = || UnknownArch {
        name: name.to_string(),
    };
    let s = name.trim().to_ascii_lowercase();
    let body = s
        .strip_prefix("sm_")
        .or_else(|| s.strip_prefix("compute_"))
        .unwrap_or(&s);
    let (body, variant) = if let Some(b) = body.strip_suffix('a') {
        (b, Variant::Specific)
    } else if let Some(b) = body.strip_suffix('f') {
        (b, Variant::Family)
    } else {
        (body, Variant::Base)
    };
    let cc = if let Some((maj, min)) = body.split_once('.') {
        let maj: u32 = parse_digits(maj).ok_or_else(unknown)?;
        let min: u32 = parse_digits(min).ok_or_else(unknown)?;
        if min > 9 {
            return Err(unknown());
        }
        maj.checked_mul(10)
            .and_then(|m| m.checked_add(min))
            .ok_or_else(unknown)?
    } else {
        parse_digits(body).ok_or_else(unknown)?
    };
    let limits_cc = if cc == 101 { 110 } else { cc };
    let arch = ARCHS
        .iter()
        .find(|a| a.cc() == limits_cc)
        .ok_or_else(unknown)?;
    Ok(Target { arch, cc, variant })
}

fn parse_digits(s: &str) -> Option<u32> {
    if s.is_empty() || s.len() > 4 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Looks up the limits for a target name; see [`parse_target`] for the
/// accepted spellings.
pub fn lookup(name: &str) -> Result<&'static Arch, UnknownArch> {
    parse_target(name).map(|t| t.arch)
}

/// The canonical nvcc spelling of a target name: `90a` → `sm_90a`,
/// `9.0` → `sm_90`, `compute_80` → `sm_80`.
pub fn canonical_name(name: &str) -> Result<String, UnknownArch> {
    parse_target(name).map(|t| t.nvcc_name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_named() {
        for w in ARCHS.windows(2) {
            assert!(w[0].cc() < w[1].cc());
        }
        for a in &ARCHS {
            assert_eq!(a.name, format!("sm_{}", a.cc()));
            assert!(!a.source.is_empty());
            // The largest carveout equals the SM's shared memory.
            assert_eq!(a.max_carveout(), a.smem_per_sm, "{}", a.name);
            // Opt-in plus the reserve fits in the SM.
            assert!(a.smem_per_block_optin + a.reserved_smem_per_block <= a.smem_per_sm);
            // The model rounds with masks.
            for g in [
                a.reg_alloc_unit,
                a.sub_partitions,
                a.smem_granularity,
                a.warp_size,
            ] {
                assert!(g.is_power_of_two(), "{}", a.name);
            }
        }
        assert_eq!(all().len(), 21);
    }

    #[test]
    fn variants_exist_where_nvcc_has_them() {
        let t = |n: &str| parse_target(n).unwrap();
        assert_eq!(
            t("90")
                .with_variant(Variant::Specific)
                .map(|v| v.nvcc_name()),
            Some("sm_90a".to_string())
        );
        assert_eq!(
            t("sm_100a")
                .with_variant(Variant::Family)
                .map(|v| v.nvcc_name()),
            Some("sm_100f".to_string())
        );
        assert_eq!(t("sm_89").with_variant(Variant::Specific), None);
        assert_eq!(t("sm_90").with_variant(Variant::Family), None);
        assert_eq!(
            t("sm_90a")
                .with_variant(Variant::Base)
                .map(|v| v.nvcc_name()),
            Some("sm_90".to_string())
        );
    }

    #[test]
    fn spellings() {
        for n in [
            "sm_90",
            "sm_90a",
            "compute_90",
            "90",
            "90a",
            "9.0",
            " SM_90 ",
        ] {
            let a = lookup(n).unwrap();
            assert_eq!((a.major, a.minor), (9, 0), "{n}");
        }
        assert_eq!(lookup("sm_100f").unwrap().cc(), 100);
        assert_eq!(lookup("12.1").unwrap().cc(), 121);
        assert_eq!(canonical_name("90a").unwrap(), "sm_90a");
        assert_eq!(canonical_name("9.0").unwrap(), "sm_90");
        assert_eq!(canonical_name("compute_100f").unwrap(), "sm_100f");
        let thor = parse_target("sm_101").unwrap();
        assert_eq!(thor.arch.cc(), 110);
        assert_eq!(thor.nvcc_name(), "sm_101");
    }

    #[test]
    fn unknown_names_list_known_ones() {
        for n in [
            "sm_99",
            "",
            "sm_",
            "9.10",
            "sm_8x",
            "abc",
            "99999999999",
            "sm_90b",
        ] {
            let e = lookup(n).unwrap_err();
            let msg = e.to_string();
            assert!(msg.starts_with("unknown CUDA architecture"), "{msg}");
            assert!(msg.contains("sm_121") && msg.contains("sm_50"), "{msg}");
        }
    }

    #[test]
    fn header_specific_values() {
        // Values that cuda_occupancy.h hard-codes; see arch-table.md.
        let blocks = |n: &str| lookup(n).unwrap().max_blocks_per_sm;
        assert_eq!(blocks("sm_75"), 16);
        assert_eq!(blocks("sm_86"), 16);
        assert_eq!(blocks("sm_89"), 24);
        assert_eq!(blocks("sm_107"), 16);
        assert_eq!(blocks("sm_110"), 24);
        assert_eq!(blocks("sm_120"), 24);
        assert_eq!(lookup("sm_60").unwrap().sub_partitions, 2);
        assert_eq!(lookup("sm_53").unwrap().max_regs_per_block, 32768);
        assert!(lookup("sm_52").unwrap().partitioned_gc);
        assert!(!lookup("sm_60").unwrap().partitioned_gc);
        assert_eq!(lookup("sm_103").unwrap().barrier_factor, 1);
        assert_eq!(lookup("sm_100").unwrap().barrier_factor, 2);
    }
}
