//! The manifest: `$OUT_DIR/occ/manifest.json`, the contract between
//! occ-build, occ-macros and `cargo occ`.
//!
//! Versioned (`"schema"` first), sorted and deterministic: the same inputs
//! give byte-identical JSON. Paths are relative to the crate (sources) or to
//! `$OUT_DIR/occ` (device code).

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The schema version this occ writes and reads (4: one name per fact —
/// blocks per SM are `active_blocks_per_sm` in `cliffs` and their steps,
/// `min_blocks_per_sm` in a lift's launch bounds, a measurement's device
/// `compute_capability` and `sm_count`; 3: each kernel × arch's `warnings`
/// are [`Warning`] objects, no longer strings).
pub const SCHEMA_VERSION: u32 = 4;

/// The file name of the manifest inside `$OUT_DIR/occ`.
pub const FILE_NAME: &str = "manifest.json";

/// Everything occ-build learned about a crate's kernels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Schema version ([`SCHEMA_VERSION`]).
    pub schema: u32,
    /// The cargo package that built the kernels.
    pub package: String,
    /// Where the numbers come from: a live nvcc, or the committed lock.
    pub origin: Origin,
    /// The nvcc version that produced the numbers (`V13.5.37`); for a
    /// build from the lock, the version the lock records.
    pub nvcc: String,
    /// Target archs in build order; the first is the default of `#[launch_config]`.
    pub archs: Vec<String>,
    /// Kernels, sorted by mangled name.
    pub kernels: Vec<Kernel>,
    /// The device code `kernels.rs` embeds ([`Embed`]): one blob per `.cu`
    /// file (a fatbin), or per file and arch (a cubin or PTX), sorted by
    /// source, then arch.
    #[serde(default)]
    pub device_code: Vec<DeviceCode>,
    /// The lock's measured launches of this build's kernels × archs
    /// (`cargo occ tune import`), which `#[launch_config(tuned = true)]`
    /// bakes; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub measured: Vec<Measured>,
    /// The `<<<...>>>` launches of the crate's own `.cu` host code
    /// ([`crate::compiler::launches`]), by source and line; absent when
    /// there are none. A kernel's constant launches declare its launch
    /// where build.rs does not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub launches: Vec<CodeLaunch>,
}

/// One `<<<...>>>` launch of a crate's C++ host code, as read from its
/// preprocessed source ([`crate::compiler::launches::read`]). A key it
/// does not have is refused (the lock records it).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodeLaunch {
    /// The `.cu` file it is written in, relative to the crate.
    pub source: String,
    /// Its line there.
    pub line: u32,
    /// The kernel expression as written, without spaces (`rows_k<64>`).
    pub kernel: String,
    /// The block, where it is a compile-time constant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<[u32; 3]>,
    /// The dynamic shared memory, bytes, where it is a compile-time
    /// constant (0 where the launch gives none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic_smem: Option<u32>,
    /// Why the launch is known only at run time (``block `n` ``); `None`
    /// for a constant launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl CodeLaunch {
    /// Where it is: `kernels/scale.cu:42`.
    pub fn at(&self) -> String {
        format!("{}:{}", self.source, self.line)
    }

    /// The launch it declares, when its block and dynamic shared memory
    /// are both compile-time constants.
    pub fn constant(&self) -> Option<Launch> {
        match (self.block, self.dynamic_smem, &self.why) {
            (Some(block), Some(smem), None) => Some(Launch {
                block,
                dynamic_smem: DynamicSmem::Fixed(smem),
            }),
            _ => None,
        }
    }
}

/// What device code a build embeds in the crate (`Build::embed`).
///
/// The per-arch analysis runs ptxas for every arch whatever is embedded;
/// this only chooses what `kernels.rs` carries into the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Embed {
    /// One fatbin per `.cu` file: SASS for each arch plus the PTX of the
    /// newest (for GPUs newer than every arch), as `nvcc -fatbin` makes;
    /// the driver picks what runs (`cuModuleLoadData`).
    #[default]
    Fatbin,
    /// The cubin of each file for each arch.
    Cubin,
    /// The PTX of each file for each arch (JIT-compiled by the driver).
    Ptx,
    /// Nothing: the numbers only (a host-code library carries its own
    /// device code).
    Nothing,
}

impl Embed {
    /// The file extension of a blob of this kind (`fatbin`, `cubin`, `ptx`).
    pub fn extension(self) -> &'static str {
        match self {
            Embed::Fatbin => "fatbin",
            Embed::Cubin => "cubin",
            Embed::Ptx => "ptx",
            Embed::Nothing => "",
        }
    }
}

/// One blob of embedded device code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceCode {
    /// The `.cu` file it was compiled from, relative to the crate.
    pub source: String,
    /// What it is: [`Embed::Fatbin`], [`Embed::Cubin`] or [`Embed::Ptx`].
    pub kind: Embed,
    /// The arch of a cubin or PTX; `None` for a fatbin (it holds them all).
    pub arch: Option<String>,
    /// The file, relative to `$OUT_DIR/occ`; `None` (absent) in a build
    /// from the lock, whose `kernels.rs` gives the blob no bytes.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "empty_is_none"
    )]
    pub file: Option<String>,
}

/// Where a manifest's numbers come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// nvcc compiled the sources in this build.
    Nvcc,
    /// No nvcc: the numbers are the committed lock's, and there is no device code.
    Lock,
}

/// One `__global__` function: its names and source, and per arch `A` (the
/// manifest's [`KernelArch`], or the lock's [`Resources`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kernel<A = KernelArch> {
    /// The symbol (mangled name), what `cuModuleGetFunction` takes.
    pub name: String,
    /// The full demangled name with parameters.
    pub demangled: String,
    /// The demangled name without its parameter list (`fluid::stencil1d<float, 3>`).
    pub base_name: String,
    /// The unqualified name without template arguments (`stencil1d`).
    pub short_name: String,
    /// A unique Rust identifier for the kernel (its module in `kernels.rs`).
    pub ident: String,
    /// The `.cu` file, relative to the crate root, with `/` separators.
    pub source: String,
    /// The parameter list (PTX sizes, C++ types and source names where
    /// known; [`crate::compiler::params`]); empty for a kernel without parameters
    /// and in manifests and locks written before occ recorded them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub params: Vec<Param>,
    /// Per target arch (keys as given to nvcc, e.g. `sm_90a`).
    pub archs: BTreeMap<String, A>,
}

/// A kernel's resources and best launch on one arch: what the lock records
/// and the gate compares, and what `kernels.rs` and `#[launch_config]` need
/// when there is no nvcc: the compiler's [`Facts`] (flattened into the same
/// JSON object) and what follows from them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    /// The compiler's numbers: registers, shared memory, spills, stack,
    /// barriers, launch bounds, the register cap.
    #[serde(flatten)]
    pub facts: Facts,
    /// Occupancy at the best block size with no dynamic shared memory;
    /// `None` (`null`) for a kernel that cannot launch on the arch at any
    /// block size (static shared memory over the arch's limit, too many
    /// registers for one warp). Occs before this wrote such a kernel as a
    /// best block of 0 threads limited by `cannot launch`, which reads as
    /// `None`.
    #[serde(deserialize_with = "cannot_launch_is_none")]
    pub best: Option<Best>,
    /// The launch the kernel is written for (`Build::launch`, else its
    /// `__launch_bounds__`/`.reqntid`), the occupancy there and what would
    /// lift it; absent when nothing declares one. Reports and the gate
    /// judge the kernel at this launch when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared: Option<Declared>,
    /// [`crate::schema::measured::cubin_hash`] of the cubin (its sections less the
    /// debug ones), which a measurement is checked against. The lock keeps
    /// it too, so that a build from the lock judges a measurement exactly
    /// as a build with nvcc of the same sources does. `None` in locks from
    /// before occ kept it (absent, or `""` as some wrote it); never
    /// compared by the gate as a change of numbers (the gate checks
    /// measured kernels' separately).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "empty_is_none"
    )]
    pub cubin_hash: Option<String>,
}

/// What one job (one source, one arch) contributes to a build: its
/// kernels as the compiler left them (`analyze::contribution`), kept with
/// the job's record; `assemble` makes the manifest of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contribution {
    /// The source, relative to the crate root (`/` separators).
    pub source: String,
    /// The arch as built (`sm_90a`).
    pub arch: String,
    /// Its kernels, by symbol.
    pub kernels: Vec<Compiled>,
    /// The `<<<...>>>` launches its source's host code writes, as this
    /// job's preprocessed text gives them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub launches: Vec<CodeLaunch>,
}

/// One kernel of a job, as compiled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compiled {
    /// The symbol (mangled name).
    pub name: String,
    /// The full demangled name with parameters.
    pub demangled: String,
    /// The demangled name without its parameter list.
    pub base_name: String,
    /// The short name (no namespaces, no template arguments).
    pub short_name: String,
    /// The kernel's parameters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub params: Vec<Param>,
    /// The compiler's numbers.
    pub facts: Facts,
    /// Constant memory per bank, bytes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cmem: BTreeMap<String, u64>,
    /// ptxas's warnings about the kernel.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
    /// The job's cubin, relative to `$OUT_DIR/occ`; `None` for a record
    /// of the lock (a build without nvcc has no device code).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "empty_is_none"
    )]
    pub cubin: Option<String>,
    /// The job's PTX, relative to `$OUT_DIR/occ`; `None` for a record of
    /// the lock.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "empty_is_none"
    )]
    pub ptx: Option<String>,
    /// `measured::cubin_hash` of the cubin; `None` when unknown (a job
    /// without a cubin, a lock from before occ kept the hash).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "empty_is_none"
    )]
    pub cubin_hash: Option<String>,
}

/// A kernel's numbers on one arch as the compiler gave them (ptxas's log
/// and the PTX's directives), before anything is derived from them: what
/// a job contributes ([`Compiled::facts`]) and what the lock's record
/// ([`Resources::facts`]) holds besides the derived [`Resources::best`] and
/// [`Resources::declared`]. Every rule of the model takes these.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Facts {
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block, bytes.
    pub static_smem: u32,
    /// Spill stores, bytes.
    pub spill_stores: u32,
    /// Spill loads, bytes.
    pub spill_loads: u32,
    /// Stack frame, bytes.
    pub stack_frame: u32,
    /// Cumulative stack of the call chain, bytes, when ptxas could determine it.
    pub cumulative_stack: Option<u32>,
    /// Named barriers (`used N barriers`); `None` when ptxas did not say (before CUDA 12.8).
    pub barriers: Option<u32>,
    /// Launch bounds and cluster directives from the PTX.
    pub launch_bounds: LaunchBounds,
    /// The register cap `-maxrregcount` set for this kernel's file (from
    /// `Build::max_registers` or a raw flag) as ptxas applied it, not as
    /// asked: a cap below the arch's lower bound is that bound (16 gives 24),
    /// one above its maximum the maximum (ptxas's notes say which);
    /// absent when none was given or ptxas ignored it.
    /// `__launch_bounds__` and `__maxnreg__` override it: compare with `registers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maxrregcount: Option<u32>,
}

impl Facts {
    /// Spilled bytes (stores + loads).
    pub fn spill_bytes(&self) -> u32 {
        self.spill_stores.saturating_add(self.spill_loads)
    }

    /// Whether the kernel spills registers on this arch.
    pub fn spills(&self) -> bool {
        self.spill_stores > 0 || self.spill_loads > 0
    }
}

impl Resources {
    /// The launch a kernel × arch is judged at, by the one rule every
    /// reader follows: its declared launch when it has one (build.rs's
    /// `.launch`, else its `.reqntid` or `__launch_bounds__`), else its best
    /// block size; `None` when it has neither (it cannot launch on the arch:
    /// views say [`CANNOT_LAUNCH`]). The reports, `cargo occ explain` and
    /// the gate judge the kernel there, and a `#[launch_config]` site with
    /// no option that shapes its launch bakes exactly this launch
    /// ([`Judged::at`]).
    pub fn judged(&self) -> Option<Judged<'_>> {
        match &self.declared {
            Some(d) => Some(Judged::declared(d)),
            None => self.best.as_ref().map(Judged::best),
        }
    }

    /// The occupancy the kernel is judged at ([`Resources::judged`]); 0 for
    /// a kernel that cannot launch, which sorts and plots as none resident.
    pub fn judged_occupancy(&self) -> f64 {
        self.judged().map_or(0.0, |j| j.occupancy)
    }
}

/// What the views write where a kernel that cannot launch on an arch
/// ([`Resources::best`] and [`Resources::judged`] `None`) would have its
/// limiters.
pub const CANNOT_LAUNCH: &str = "cannot launch";

/// A kernel's occupancy at the launch it is judged at ([`Resources::judged`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Judged<'a> {
    /// Threads per block.
    pub block_size: u32,
    /// Dynamic shared memory per block there, bytes (0 at the best block).
    pub dynamic_smem: u32,
    /// Resident blocks per SM.
    pub active_blocks_per_sm: u32,
    /// Resident warps / the SM's maximum, 0..=1.
    pub occupancy: f64,
    /// Resident warps per SM.
    pub active_warps_per_sm: u32,
    /// What limits it.
    pub limiters: &'a [String],
    /// The declared launch, when it is one (else the best block size).
    pub declared: Option<&'a Declared>,
}

impl<'a> Judged<'a> {
    /// At a declared launch.
    pub fn declared(d: &'a Declared) -> Self {
        Judged {
            block_size: d.block_size,
            dynamic_smem: d.dynamic_smem,
            active_blocks_per_sm: d.active_blocks_per_sm,
            occupancy: d.occupancy,
            active_warps_per_sm: d.active_warps_per_sm,
            limiters: &d.limiters,
            declared: Some(d),
        }
    }

    /// At the best block size (no dynamic shared memory).
    pub fn best(b: &'a Best) -> Self {
        Judged {
            block_size: b.block_size,
            dynamic_smem: 0,
            active_blocks_per_sm: b.active_blocks_per_sm,
            occupancy: b.occupancy,
            active_warps_per_sm: b.active_warps_per_sm,
            limiters: &b.limiters,
            declared: None,
        }
    }

    /// The launch itself: the declared one (its shape and dynamic shared
    /// memory rule), else a 1-D block of the best size with no dynamic
    /// shared memory.
    pub fn at(&self) -> Launch {
        match self.declared {
            Some(d) => d.launch,
            None => Launch {
                block: [self.block_size, 1, 1],
                dynamic_smem: DynamicSmem::Fixed(0),
            },
        }
    }

    /// The launch as the reports' `launch` column shows it: the declared
    /// shape (`1024`, `16x16 + 4 B/thread smem`; `256 from
    /// kernels/scale.cu:42` where the C++ host code declares it), or
    /// `best` (the best block).
    pub fn launch(&self) -> String {
        match self.declared {
            Some(Declared {
                launch,
                by: DeclaredBy::Code { at },
                ..
            }) => format!("{} from {at}", launch.describe()),
            Some(d) => d.launch.describe(),
            None => "best".into(),
        }
    }
}

/// A kernel on one arch in the manifest: its [`Resources`] (flattened into
/// the same JSON object) plus what only a live build knows.
///
/// It dereferences to its resources: a `KernelArch` *is* the lock's record
/// plus where its device code lives, and every reader of registers or
/// spills treats both alike.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelArch {
    /// Resources and best launch.
    #[serde(flatten)]
    pub resources: Resources,
    /// Where occupancy steps at the launch the kernel is judged at
    /// ([`Resources::judged`]): the registers and shared memory that cost
    /// a block, and what to drop to gain one; absent in manifests of older
    /// occs and for a kernel that cannot launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cliffs: Option<Cliffs>,
    /// Constant memory per bank, bytes (absent on sm_90+ where ptxas omits it).
    pub cmem: BTreeMap<String, u64>,
    /// ptxas's warnings about this kernel on this arch, each once, in the
    /// order ptxas printed them: those that name it and those of its ptxas
    /// run that name no kernel (`For profile sm_80 adjusting per thread
    /// register count of 16 to lower bound of 24`).
    pub warnings: Vec<Warning>,
    /// The cubin holding this kernel, relative to `$OUT_DIR/occ`; `None`
    /// (absent) in a build from the lock, which has no device code.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "empty_is_none"
    )]
    pub cubin: Option<String>,
    /// The PTX holding this kernel, relative to `$OUT_DIR/occ`; `None`
    /// (absent) in a build from the lock.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "empty_is_none"
    )]
    pub ptx: Option<String>,
    /// Where it spills and where its register pressure peaks, by source
    /// line (from nvdisasm), for a kernel whose registers matter
    /// ([`crate::model::cliff::registers_matter`]: it spills, fewer registers
    /// would gain a block, or a register cliff is near); absent for the others, without
    /// nvdisasm, in a build from the lock, and never in the lock (lines
    /// move with every edit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<SourceLines>,
}

/// A ptxas warning about a kernel on an arch: what it says, read by
/// [`crate::compiler::ptxas`], beside its words. A warning of a shape occ does not
/// know is [`WarningKind::Other`], kept with its words, never dropped.
///
/// In JSON, one object: the kind's tag and figures, then the words
/// (`{"kind": "register_cap_adjusted", "requested": 16, "applied": 24,
/// "text": "For profile sm_80 adjusting …"}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// What it says.
    #[serde(flatten)]
    pub kind: WarningKind,
    /// ptxas's words after `ptxas warning : `, verbatim.
    pub text: String,
}

/// What a ptxas [`Warning`] says, with its figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WarningKind {
    /// `For profile sm_80 adjusting per thread register count of 16 to
    /// lower bound of 24`: the register cap asked for (`-maxrregcount`) is
    /// outside what the arch allows, and ptxas applies `applied` instead.
    RegisterCapAdjusted {
        /// The cap asked for.
        requested: u32,
        /// The cap ptxas applies.
        applied: u32,
    },
    /// `Too big maxrregcount value specified 300, will be ignored`.
    RegisterCapIgnored {
        /// The cap asked for.
        requested: u32,
    },
    /// `Too many maxnreg specified for entry k, will be ignored`
    /// (`__maxnreg__`).
    MaxnregIgnored,
    /// `Value of threads per SM for entry k is out of range. .minnctapersm
    /// will be ignored`: the min blocks of `__launch_bounds__` cannot be met.
    MinBlocksIgnored,
    /// `Stack size for entry function 'k' cannot be statically determined`
    /// (recursion).
    StackUnknown,
    /// `Registers are spilled to local memory in function 'k', 20 bytes
    /// spill stores, 20 bytes spill loads` (`--warn-on-spills`).
    Spills {
        /// Bytes of spill stores.
        stores: u64,
        /// Bytes of spill loads.
        loads: u64,
    },
    /// `Local memory used for function 'k', size of stack frame: 24 bytes`
    /// (`--warn-on-local-memory-usage`).
    LocalMemory {
        /// The stack frame, bytes.
        frame: u64,
    },
    /// A warning of any other shape.
    Other,
}

impl WarningKind {
    /// What warnings of this kind say, in a few words: the title of their
    /// line in the build's warnings.
    pub fn title(&self) -> &'static str {
        match self {
            WarningKind::RegisterCapAdjusted { .. } => {
                "the register cap asked for is outside the arch's bounds, so ptxas applies its bound"
            }
            WarningKind::RegisterCapIgnored { .. } => {
                "the register cap asked for is too big, so ptxas ignores it"
            }
            WarningKind::MaxnregIgnored => "__maxnreg__ is too big, so ptxas ignores it",
            WarningKind::MinBlocksIgnored => {
                "the min blocks per SM of __launch_bounds__ cannot be met, so ptxas ignores them"
            }
            WarningKind::StackUnknown => "the stack size cannot be statically determined",
            WarningKind::Spills { .. } => "registers spilled to local memory",
            WarningKind::LocalMemory { .. } => "local memory used",
            WarningKind::Other => "a warning occ does not know",
        }
    }
}

impl std::ops::Deref for KernelArch {
    type Target = Resources;
    fn deref(&self) -> &Resources {
        &self.resources
    }
}

impl std::ops::DerefMut for KernelArch {
    fn deref_mut(&mut self) -> &mut Resources {
        &mut self.resources
    }
}

impl KernelArch {
    /// A record with no device code and nothing but `resources`: the
    /// tests' shorthand (a build makes its records whole, in
    /// [`crate::assemble`]).
    #[cfg(test)]
    pub(crate) fn from_resources(resources: Resources) -> Self {
        KernelArch {
            resources,
            cliffs: None,
            cmem: BTreeMap::new(),
            warnings: Vec::new(),
            cubin: None,
            ptx: None,
            lines: None,
        }
    }

    /// Whether this build has device code for the kernel on this arch.
    pub fn has_device_code(&self) -> bool {
        self.cubin.is_some()
    }
}

/// `__launch_bounds__`, `__maxnreg__` and cluster directives of a kernel.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchBounds {
    /// `.maxntid` (x, y, z): `__launch_bounds__(maxThreadsPerBlock)`.
    pub max_threads: Option<[u32; 3]>,
    /// `.reqntid` (x, y, z): a required block shape.
    pub req_threads: Option<[u32; 3]>,
    /// `.minnctapersm`: `__launch_bounds__(_, minBlocksPerMultiprocessor)`.
    pub min_blocks_per_sm: Option<u32>,
    /// `.maxnreg`: `__maxnreg__(N)`.
    pub max_registers: Option<u32>,
    /// `.maxclusterrank`: `__launch_bounds__(_, _, maxBlocksPerCluster)`.
    pub max_cluster_rank: Option<u32>,
    /// `.reqnctapercluster` (x, y, z): `__cluster_dims__`.
    pub cluster_dims: Option<[u32; 3]>,
    /// `.explicitcluster`.
    pub explicit_cluster: bool,
}

impl LaunchBounds {
    /// The most threads per block the kernel allows (`.maxntid` or `.reqntid` product).
    pub fn max_threads_per_block(&self) -> Option<u32> {
        let product = |d: &[u32; 3]| d.iter().fold(1u32, |a, &b| a.saturating_mul(b.max(1)));
        match (&self.max_threads, &self.req_threads) {
            (Some(m), Some(r)) => Some(product(m).min(product(r))),
            (Some(m), None) => Some(product(m)),
            (None, Some(r)) => Some(product(r)),
            (None, None) => None,
        }
    }

    /// The exact block size a `.reqntid` kernel must be launched with.
    pub fn required_block_size(&self) -> Option<u32> {
        self.req_threads
            .map(|d| d.iter().fold(1u32, |a, &b| a.saturating_mul(b.max(1))))
    }
}

/// The best launch found by the tuner (no dynamic shared memory): a block
/// size at which the kernel launches ([`Resources::best`] is `None` where
/// none does).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Best {
    /// Threads per block.
    pub block_size: u32,
    /// Resident blocks per SM at that block size.
    pub active_blocks_per_sm: u32,
    /// Resident warps per SM.
    pub active_warps_per_sm: u32,
    /// Resident warps / the SM's maximum, 0..=1.
    pub occupancy: f64,
    /// What limits it (`registers`, `shared memory`, `warps`, `blocks`, `barriers`, ...).
    pub limiters: Vec<String>,
    /// Dynamic shared memory a block can still take at that occupancy, bytes.
    pub dynamic_smem_headroom: u32,
}

/// How a kernel name given by a user matched, or why it did not.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup<'a, A = KernelArch> {
    /// Exactly one kernel.
    Found(&'a Kernel<A>),
    /// Several kernels answer to the name: each with its source and the
    /// exact string that selects it.
    Ambiguous(Vec<Candidate>),
    /// No kernel; the closest names (did-you-mean), best first.
    Unknown(Vec<String>),
}

/// One of the kernels an ambiguous name matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The kernel's base name.
    pub base_name: String,
    /// Its `.cu` file, relative to the crate.
    pub source: String,
    /// What to write to select it alone ([`Manifest::lookup`] finds exactly
    /// this kernel by it): its base name when that is unique, else
    /// `source:name`, its Rust identifier or its symbol.
    pub select: String,
}

/// The candidates of an ambiguous name, one phrase each:
/// ``same in kernels/a.cu (write `kernels/a.cu:same`)``, joined by `; `.
pub fn describe_candidates(candidates: &[Candidate]) -> String {
    candidates
        .iter()
        .map(|c| format!("{} in {} (write `{}`)", c.base_name, c.source, c.select))
        .collect::<Vec<_>>()
        .join("; ")
}

impl Manifest {
    /// The kernel with the symbol `name`: the one from `source`, else the
    /// only one with that symbol (its file moved), as
    /// [`crate::schema::lock::Lock::find`] finds it.
    pub fn find(&self, name: &str, source: &str) -> Option<&Kernel> {
        crate::compiler::names::find_kernel(&self.kernels, name, source, |k| {
            (k.name.as_str(), k.source.as_str())
        })
    }

    /// Finds a kernel by its symbol, its demangled name, its name without the
    /// parameter list (`ns::kern<float, 3>`), its Rust identifier, or its
    /// short name when that is unique. Any of these may be prefixed with the
    /// kernel's source and a colon (`kernels/a.cu:same`) to pick among
    /// kernels of the same name in different files ([`lookup`]).
    pub fn lookup(&self, query: &str) -> Lookup<'_> {
        lookup(&self.kernels, query)
    }

    /// The JSON text of the manifest: pretty, with a trailing newline.
    pub fn to_json(&self) -> String {
        to_json_pretty(self)
    }

    /// Parses a manifest, checking its schema version.
    pub fn from_json(text: &str, path: &Path) -> Result<Self> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| Error::Corrupt {
            path: path.to_path_buf(),
            detail: format!("not valid JSON ({e}); delete it and rebuild"),
        })?;
        check_schema(&value, path, SCHEMA_VERSION, "delete it and rebuild")?;
        let manifest: Manifest = serde_json::from_value(value).map_err(|e| Error::Corrupt {
            path: path.to_path_buf(),
            detail: format!("not an occ manifest ({e}); delete it and rebuild"),
        })?;
        manifest.validate().map_err(|detail| Error::Corrupt {
            path: path.to_path_buf(),
            detail: format!("{detail}; it was not written by occ-build, delete it and rebuild"),
        })?;
        Ok(manifest)
    }

    /// Checks what a manifest read back may not be trusted with: the names
    /// [`validate_names`] checks, and the device code files (`cubin`,
    /// `ptx`), which feed `include_bytes!` in `kernels.rs`: each must be a
    /// plain file name inside `$OUT_DIR/occ` (no `/`, `\`, `..` or absolute
    /// path). A build from the lock has no device code (empty names).
    pub fn validate(&self) -> std::result::Result<(), String> {
        writable("the package name", &self.package)?;
        writable("the nvcc version", &self.nvcc)?;
        validate_launches(&self.launches)?;
        validate_names(&self.archs, &self.kernels)?;
        for kernel in &self.kernels {
            for (arch, k) in &kernel.archs {
                validate_resources(&kernel.name, arch, k)?;
                let steps = k.cliffs.iter().flat_map(|c| {
                    [c.registers, c.shared_memory]
                        .into_iter()
                        .flat_map(|cliff| cliff.down.into_iter().chain(cliff.up))
                });
                for step in steps {
                    if !(0.0..=1.0).contains(&step.occupancy) {
                        return Err(format!(
                            "kernel {:?} on {arch} records a cliff at occupancy {:?}, which is not a \
                             fraction between 0 and 1 (the file is damaged)",
                            kernel.name, step.occupancy
                        ));
                    }
                }
                for (field, file) in [("cubin", &k.cubin), ("ptx", &k.ptx)] {
                    let allowed = match (self.origin, file) {
                        (Origin::Nvcc, Some(file)) => is_plain_file_name(file),
                        (Origin::Lock, None) => true,
                        _ => false,
                    };
                    if !allowed {
                        let file = file.as_deref().unwrap_or_default();
                        return Err(format!(
                            "kernel {:?} on {arch} names {field} file {file:?}, which is not a plain file name in the manifest's folder",
                            kernel.name
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// An optional string that files of older occs wrote as `""` for none:
/// absent, `null` and `""` all read as `None`.
/// Reads [`Resources::best`]: `null`, or the form occs before wrote for a
/// kernel that cannot launch (a block of 0 threads), as `None`.
fn cannot_launch_is_none<'de, D>(d: D) -> std::result::Result<Option<Best>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Ok(Option::<Best>::deserialize(d)?.filter(|b| b.block_size != 0))
}

fn empty_is_none<'de, D>(d: D) -> std::result::Result<Option<String>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Ok(Option::<String>::deserialize(d)?.filter(|s| !s.is_empty()))
}

/// `Ok` when `name` ([`crate::compiler::names::check`]) may be written everywhere
/// occ writes names, else why not, `what` naming it.
pub fn writable(what: &str, name: &str) -> std::result::Result<(), String> {
    crate::compiler::names::check(name).map_err(|e| format!("{what} {e}"))
}

/// Checks the text of the C++ launches a manifest or lock records (their
/// source, kernel expression and reason), as every name is checked.
pub fn validate_launches(launches: &[CodeLaunch]) -> std::result::Result<(), String> {
    for l in launches {
        writable("a launch's source", &l.source)?;
        writable(&format!("the launch at {}", l.at()), &l.kernel)?;
        if let Some(why) = &l.why {
            writable(&format!("the reason of the launch at {}", l.at()), why)?;
        }
    }
    Ok(())
}

/// Checks what becomes Rust in `kernels.rs`, in a manifest or a lock:
/// kernel identifiers and arch keys become module names, so each must be a
/// Rust identifier or an arch name like `sm_90a`; every name and source
/// path, and each parameter's name and type, must be
/// [`crate::compiler::names::check`]'s.
pub fn validate_names<A>(
    archs: &[String],
    kernels: &[Kernel<A>],
) -> std::result::Result<(), String> {
    for kernel in kernels {
        writable("a kernel name", &kernel.name)?;
        let what = |field: &str| format!("kernel {:?}'s {field}", kernel.name);
        for (field, value) in [
            ("demangled name", &kernel.demangled),
            ("base name", &kernel.base_name),
            ("short name", &kernel.short_name),
            ("source", &kernel.source),
        ] {
            writable(&what(field), value)?;
        }
        for p in &kernel.params {
            writable(&what("parameter name"), &p.name)?;
            writable(&what("parameter type"), &p.c_type)?;
        }
        if !crate::compiler::names::is_rust_ident(&kernel.ident) {
            return Err(format!(
                "kernel {:?} has ident {:?}, which is not a Rust identifier",
                kernel.name, kernel.ident
            ));
        }
        if let Some(arch) = kernel.archs.keys().find(|a| !is_arch_key(a)) {
            return Err(format!(
                "kernel {:?} has an arch named {arch:?}, which is not an arch name like sm_90a",
                kernel.name
            ));
        }
    }
    match archs.iter().find(|a| !is_arch_key(a)) {
        Some(arch) => Err(format!(
            "arch list holds {arch:?}, which is not an arch name like sm_90a"
        )),
        None => Ok(()),
    }
}

/// Checks the numbers of one kernel × arch read back from a file: the
/// occupancy is a fraction of the SM (0..=1), never NaN or infinite, so no
/// report prints `inf%`.
pub fn validate_resources(
    kernel: &str,
    arch: &str,
    r: &Resources,
) -> std::result::Result<(), String> {
    let declared = r.declared.iter().flat_map(|d| {
        [d.occupancy]
            .into_iter()
            .chain(d.lift.as_ref().map(|l| l.occupancy))
    });
    for occupancy in r.best.iter().map(|b| b.occupancy).chain(declared) {
        if !(0.0..=1.0).contains(&occupancy) {
            return Err(format!(
                "kernel {kernel:?} on {arch} records occupancy {occupancy:?}, which is not a fraction \
                 between 0 and 1 (the file is damaged)"
            ));
        }
    }
    Ok(())
}

/// Checks the `"schema"` field of a JSON document against the version this
/// occ knows; `remake` says how the file is made again (`delete it and
/// rebuild`), the fix of an old or damaged one.
pub fn check_schema(
    value: &serde_json::Value,
    path: &Path,
    known: u32,
    remake: &str,
) -> Result<()> {
    match value.get("schema").and_then(|s| s.as_u64()) {
        Some(v) if v == u64::from(known) => Ok(()),
        Some(v) if v > u64::from(known) => Err(Error::Corrupt {
            path: path.to_path_buf(),
            detail: format!(
                "written by a newer occ (schema {v}; this occ reads schema {known}); upgrade occ-build, occ-macros and cargo-occ together"
            ),
        }),
        Some(v) => Err(Error::Corrupt {
            path: path.to_path_buf(),
            detail: format!(
                "written by an older occ (schema {v}; this occ reads schema {known}); {remake}"
            ),
        }),
        None => Err(Error::Corrupt {
            path: path.to_path_buf(),
            detail: format!(
                "has no \"schema\" field; it is not an occ file, or it is damaged: {remake}"
            ),
        }),
    }
}

/// The one JSON serializer: pretty, two-space indent, trailing newline.
pub fn to_json_pretty<T: Serialize>(value: &T) -> String {
    // Serializing plain data with string keys cannot fail.
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

/// A file name with no folder part: not empty, not `.` or `..`, without
/// `/`, `\`, `:` or NUL (so it cannot leave the folder it is joined to on
/// any platform).
pub fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', ':', '\0'])
}

/// An arch key as occ writes them: lowercase ASCII letters, digits and `_`,
/// starting with a letter (`sm_90a`).
pub fn is_arch_key(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The kernels among `kernels` that `query` names: by symbol, Rust
/// identifier, demangled name or base name; else by short name or base name
/// without template arguments.
/// The rule of [`Manifest::lookup`], over any kernels with their names
/// (a manifest's, or the names a build's jobs contributed before anything
/// is judged, `crate::assemble::names`).
pub fn lookup<'a, A>(kernels: &'a [Kernel<A>], query: &str) -> Lookup<'a, A> {
    let query = query.trim();
    let hits = hits(kernels, query);
    match hits.as_slice() {
        [one] => Lookup::Found(one),
        [] => {
            let mut scored: Vec<(f64, &str)> = kernels
                .iter()
                .flat_map(|k| [k.short_name.as_str(), k.base_name.as_str(), k.name.as_str()])
                .map(|cand| (strsim::jaro_winkler(query, cand), cand))
                .filter(|(score, _)| *score > 0.8)
                .collect();
            scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
            let mut names: Vec<String> = Vec::new();
            for (_, name) in scored {
                if !names.iter().any(|n| n == name) {
                    names.push(name.to_string());
                }
            }
            names.truncate(3);
            Lookup::Unknown(names)
        }
        many => {
            let mut candidates: Vec<Candidate> = many
                .iter()
                .map(|k| Candidate {
                    base_name: k.base_name.clone(),
                    source: k.source.clone(),
                    select: selector(kernels, k),
                })
                .collect();
            candidates.sort_by(|a, b| a.source.cmp(&b.source).then(a.select.cmp(&b.select)));
            Lookup::Ambiguous(candidates)
        }
    }
}

/// The kernels `query` names: those of one source for `source:name`,
/// exact names first, then short names.
fn hits<'a, A>(kernels: &'a [Kernel<A>], query: &str) -> Vec<&'a Kernel<A>> {
    let in_source: Vec<(&Kernel<A>, &str)> = kernels
        .iter()
        .filter_map(|k| {
            let rest = query.strip_prefix(k.source.as_str())?.strip_prefix(':')?;
            Some((k, rest.trim()))
        })
        .collect();
    if !in_source.is_empty() {
        let hits = matching(in_source.iter().map(|(k, _)| *k), in_source[0].1);
        if !hits.is_empty() {
            return hits;
        }
    }
    matching(kernels.iter(), query)
}

/// The most readable string that selects `k` alone among `kernels`: the
/// base name, then `source:base name`, the Rust identifier, the symbol,
/// `source:symbol`.
fn selector<A>(kernels: &[Kernel<A>], k: &Kernel<A>) -> String {
    let forms = [
        k.base_name.clone(),
        format!("{}:{}", k.source, k.base_name),
        k.ident.clone(),
        k.name.clone(),
        format!("{}:{}", k.source, k.name),
    ];
    let alone = |s: &String| matches!(hits(kernels, s).as_slice(), [one] if std::ptr::eq(*one, k));
    forms.iter().find(|s| alone(s)).unwrap_or(&forms[4]).clone()
}

fn matching<'a, A: 'a>(
    kernels: impl Iterator<Item = &'a Kernel<A>> + Clone,
    query: &str,
) -> Vec<&'a Kernel<A>> {
    let squash = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    let squashed = squash(query);
    // A name as a table shows it (`names::table_name`): a shortened one
    // ends with ` #` and six hex digits of its full name's hash, which
    // select it alone.
    let hash = query
        .rsplit_once(" #")
        .filter(|(_, h)| h.len() == 6 && h.bytes().all(|b| b.is_ascii_hexdigit()));
    // The name before the hash must be the kernel's too (shortened, or as
    // a table that told two alike apart shows it).
    let hashed = |k: &Kernel<A>| {
        hash.is_some_and(|(name, h)| {
            crate::compiler::names::table_hash(&k.base_name) == *h && {
                let shown = squash(&crate::compiler::names::table_name(&k.base_name));
                shown == squashed || shown == squash(name)
            }
        })
    };
    let exact: Vec<&Kernel<A>> = kernels
        .clone()
        .filter(|k| {
            k.name == query
                || k.ident == query
                || squash(&k.demangled) == squashed
                || squash(&k.base_name) == squashed
                || hashed(k)
        })
        .collect();
    if !exact.is_empty() {
        return exact;
    }
    let exact: Vec<&Kernel<A>> = kernels
        .clone()
        .filter(|k| squash(&crate::compiler::names::table_name(&k.base_name)) == squashed)
        .collect();
    if !exact.is_empty() {
        return exact;
    }
    kernels
        .filter(|k| k.short_name == query || squash(&strip_templates(&k.base_name)) == squashed)
        .collect()
}

/// `ns::kern<float, 3>` → `ns::kern`.
fn strip_templates(name: &str) -> String {
    let mut depth = 0usize;
    let mut out = String::new();
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

// The types below are the parts of the schema that an analysis fills:
// `declared::declared_for` (Declared), `cliff::cliffs` (Cliffs), the measured
// launches (Measured), with the types they hold. Their methods live with
// the analysis that computes them.

/// The launch a kernel is written for: its block shape and its dynamic
/// shared memory (fixed bytes, bytes per thread, or both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launch {
    /// Threads per block in x, y, z.
    pub block: [u32; 3],
    /// Dynamic shared memory per block.
    #[serde(default)]
    pub dynamic_smem: DynamicSmem,
}

/// Who declared a kernel's launch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeclaredBy {
    /// `Build::launch(pattern, ..)` in build.rs.
    Build {
        /// The pattern that matched the kernel.
        pattern: String,
    },
    /// The kernel's `__launch_bounds__` (its max threads per block).
    LaunchBounds,
    /// The kernel's PTX `.reqntid` (its exact block shape).
    Reqntid,
    /// A `<<<...>>>` launch of the crate's C++ host code with a constant
    /// block (the one of lowest occupancy where there are several).
    Code {
        /// Where: `kernels/scale.cu:42`.
        at: String,
    },
    /// No block is declared, but build.rs declares the kernel's dynamic
    /// shared memory (`Build::dynamic_smem`): the best block at it.
    Best,
}

/// A kernel's occupancy at its declared launch on one arch, and what would
/// reach the next step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Declared {
    /// The launch.
    pub launch: Launch,
    /// Who declared it.
    pub by: DeclaredBy,
    /// The pattern of build.rs's `Build::dynamic_smem` that gave the
    /// launch its dynamic shared memory, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smem_pattern: Option<String>,
    /// Threads per block.
    pub block_size: u32,
    /// Dynamic shared memory per block at that launch, bytes.
    pub dynamic_smem: u32,
    /// Resident blocks per SM.
    pub active_blocks_per_sm: u32,
    /// Resident warps per SM.
    pub active_warps_per_sm: u32,
    /// Resident warps / the SM's maximum, 0..=1.
    pub occupancy: f64,
    /// What limits it (the binding set, as in [`crate::schema::manifest::Best`]).
    pub limiters: Vec<String>,
    /// What would give one more resident block per SM; `None` at full
    /// occupancy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lift: Option<Lift>,
}

/// What would reach the next occupancy step at a declared launch
/// ([`crate::model::suggest::what_if`], the hints `cargo occ explain` prints).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lift {
    /// Resident blocks per SM at the next step.
    pub target_blocks: u32,
    /// The occupancy there.
    pub occupancy: f64,
    /// The fewest registers to drop that reach it, if any do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registers: Option<RegisterHint>,
    /// The least shared memory to shed that reaches it, if any does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_memory: Option<SmemHint>,
    /// `__launch_bounds__(block, target)`, when it would cap registers
    /// below today's count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_bounds: Option<LaunchBoundsHint>,
}

/// Dynamic shared memory as a function of the block size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DynamicSmem {
    /// The same number of bytes for every block size.
    Fixed(u32),
    /// `per_thread × block size + fixed` bytes.
    PerThread {
        /// Bytes per thread.
        per_thread: u32,
        /// Bytes per block on top.
        fixed: u32,
    },
}

/// Registers to drop to reach the next occupancy step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RegisterHint {
    /// The most registers per thread that reach the target.
    pub max_registers: u32,
    /// How many fewer than now.
    pub drop: u32,
}

/// Shared memory to shed to reach the next occupancy step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SmemHint {
    /// The most static + dynamic bytes per block that reach the target.
    pub max_bytes: u32,
    /// How many bytes fewer than now.
    pub shed: u32,
}

/// What `__launch_bounds__(max_threads, min_blocks_per_sm)` would do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LaunchBoundsHint {
    /// The first argument: the launch's block size.
    pub max_threads: u32,
    /// The second argument: the target blocks per SM.
    pub min_blocks_per_sm: u32,
    /// The most registers per thread for which the register file alone
    /// fits `min_blocks_per_sm` blocks (ptxas caps the kernel near this; it may
    /// spill).
    pub register_cap: u32,
    /// Whether the launch reaches `min_blocks_per_sm` with that cap (false when
    /// something other than registers limits it).
    pub reaches_target: bool,
}

/// The cliffs of one kernel × arch at one launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cliffs {
    /// Threads per block of the launch (the declared one, else the best).
    pub block_size: u32,
    /// Dynamic shared memory per block at that launch, bytes.
    pub dynamic_smem: u32,
    /// Resident blocks per SM there.
    pub active_blocks_per_sm: u32,
    /// Registers per thread.
    pub registers: Cliff,
    /// Shared memory per block, static plus dynamic, bytes.
    pub shared_memory: Cliff,
}

/// The steps around today's value of one resource.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cliff {
    /// Today's value.
    pub now: u32,
    /// The cliff ahead: the smallest value above `now` with fewer resident
    /// blocks; `None` when no block is resident (nothing to lose).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down: Option<Step>,
    /// The step up: the largest value below `now` with more resident
    /// blocks; `None` when no smaller value gives more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up: Option<Step>,
}

/// A value of a resource and the occupancy there.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The value (registers per thread, or bytes per block).
    pub at: u32,
    /// Resident blocks per SM there.
    pub active_blocks_per_sm: u32,
    /// Resident warps / the SM's maximum there, 0..=1.
    pub occupancy: f64,
}

/// One candidate's time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Threads per block.
    pub block_size: u32,
    /// The median time of one launch, microseconds.
    pub median_us: f64,
    /// Timed runs (after warm-up).
    pub runs: u32,
    /// The spread of the runs: median absolute deviation / median.
    pub noise: f64,
}

/// A measurement as the lock keeps it: one line per kernel × arch × bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// The kernel's symbol.
    pub kernel: String,
    /// Its source, relative to the crate.
    pub source: String,
    /// The arch.
    pub arch: String,
    /// The problem-size bucket.
    pub bucket: String,
    /// The fastest block size of `timings`.
    pub best: u32,
    /// The device's name.
    pub device: String,
    /// Its compute capability, `major.minor`.
    pub compute_capability: String,
    /// Its SM count.
    pub sm_count: u32,
    /// The toolkit that built the cubin.
    pub toolkit: String,
    /// [`crate::schema::measured::cubin_hash`] of the cubin that ran.
    pub cubin_hash: String,
    /// [`crate::schema::measured::candidates_hash`] of the block sizes timed.
    pub candidates_hash: String,
    /// The max-occupancy block of the site that was timed (the model's
    /// choice under the site's options, which the speed-up is over), when
    /// the tuner recorded it; without it the report compares with the
    /// kernel's best block without options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_occupancy: Option<u32>,
    /// Each candidate's time, by block size.
    pub timings: Vec<Timing>,
}

/// How close to a register cliff a kernel must be for the reports to name
/// it (and the default of the gate's warning): 2 more registers per
/// thread, or fewer, cost a block.
pub const NEAR_CLIFF: u32 = 2;

/// One kernel parameter as the manifest and the lock record it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Param {
    /// The name in the source; empty when it is not known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The C++ type as demangled (`float const*`, `unsigned int`); empty
    /// when it is not known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub c_type: String,
    /// The PTX type (`u64`, `f32`, `b8` for an aggregate).
    pub ptx: String,
    /// Bytes.
    pub size: u32,
    /// Alignment, bytes.
    pub align: u32,
}

/// Where one kernel on one arch spills and where its register pressure
/// peaks, by source line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceLines {
    /// The spill sites, sorted by file, line and loop.
    pub spills: Vec<SpillSite>,
    /// The first instruction where the most registers are live, when the
    /// disassembly gives it a line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_pressure: Option<PressurePoint>,
}

/// The spill and refill instructions of one source line (in one loop).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpillSite {
    /// The source file: relative to the crate root with `/` separators, or
    /// absolute for a file outside it (a toolkit header).
    pub file: String,
    /// The line in `file` (a header's line for inlined or template code).
    pub line: u32,
    /// The line of the innermost loop around the site (the first line of
    /// the loop's code in the file of its backward branch: the `for` or
    /// `while` line), when that line is in `file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_line: Option<u32>,
    /// Bytes stored to spill slots (the widths of the `STL`s; summed over
    /// every site of a kernel, ptxas's `bytes spill stores`).
    pub stores: u32,
    /// Bytes loaded from spill slots (the widths of the `LDL`s; summed,
    /// ptxas's `bytes spill loads`).
    pub loads: u32,
}

/// The point of peak register pressure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PressurePoint {
    /// The source file, as [`SpillSite::file`].
    pub file: String,
    /// The line in `file`.
    pub line: u32,
    /// General-purpose registers live there (nvdisasm's count).
    pub registers: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::tests::{arch, lock};
    use crate::schema::lock::Lock;

    /// A manifest of `(symbol, source, ident)` kernels on sm_80.
    fn manifest(kernels: &[(&str, &str, &str)]) -> Manifest {
        let l: Lock = lock(&[]);
        let mut m =
            crate::assemble::lock_manifest(&l, &[], Path::new("occ.lock")).expect("manifest");
        m.kernels = kernels
            .iter()
            .map(|(name, source, ident)| Kernel {
                name: name.to_string(),
                demangled: name.to_string(),
                base_name: name.to_string(),
                short_name: name.to_string(),
                params: Vec::new(),
                ident: ident.to_string(),
                source: source.to_string(),
                archs: [(
                    "sm_80".to_string(),
                    KernelArch::from_resources(arch(32, 64, 0)),
                )]
                .into_iter()
                .collect(),
            })
            .collect();
        m
    }

    fn found<'a>(m: &'a Manifest, query: &str) -> Option<&'a str> {
        match m.lookup(query) {
            Lookup::Found(k) => Some(k.source.as_str()),
            _ => None,
        }
    }

    #[test]
    fn an_old_or_schemaless_file_is_told_how_that_file_is_made_again() {
        use crate::schema::lock::GateSettings;
        use crate::schema::measured::Results;
        let path = Path::new("f.json");
        for text in ["{\"schema\": 0}", "{}"] {
            let said = [
                (
                    Manifest::from_json(text, path).map(|_| ()),
                    "delete it and rebuild",
                ),
                (
                    Lock::from_text(text, path).map(|_| ()),
                    "delete it and run `cargo occ bless`",
                ),
                (
                    GateSettings::from_json(text, path).map(|_| ()),
                    "rebuild to regenerate it",
                ),
                (
                    Results::from_json(text, path).map(|_| ()),
                    "write it again with the tuner",
                ),
            ];
            for (result, fix) in said {
                let err = result.expect_err(text).to_string();
                assert!(
                    err.matches(fix).count() == 1 && err.matches("again").count() <= 1,
                    "{text}: {err}"
                );
            }
        }
    }

    #[test]
    fn an_ambiguous_name_lists_each_source_and_a_string_that_selects_it() {
        let m = manifest(&[
            ("same", "kernels/a.cu", "same"),
            ("same", "kernels/b.cu", "same_1234abcd"),
            ("other", "kernels/a.cu", "other"),
        ]);
        let Lookup::Ambiguous(candidates) = m.lookup("same") else {
            panic!("`same` is in two files");
        };
        let selects: Vec<(&str, &str)> = candidates
            .iter()
            .map(|c| (c.source.as_str(), c.select.as_str()))
            .collect();
        assert_eq!(
            selects,
            [
                ("kernels/a.cu", "kernels/a.cu:same"),
                ("kernels/b.cu", "kernels/b.cu:same")
            ]
        );
        for c in &candidates {
            assert_eq!(found(&m, &c.select), Some(c.source.as_str()), "{c:?}");
        }
        assert_eq!(
            describe_candidates(&candidates),
            "same in kernels/a.cu (write `kernels/a.cu:same`); same in kernels/b.cu (write `kernels/b.cu:same`)"
        );
        assert_eq!(found(&m, "same_1234abcd"), Some("kernels/b.cu"));
        assert_eq!(found(&m, "kernels/a.cu:other"), Some("kernels/a.cu"));
        assert_eq!(found(&m, "other"), Some("kernels/a.cu"));
        // A source prefix that names no kernel of that file is not a match.
        assert!(matches!(m.lookup("kernels/b.cu:other"), Lookup::Unknown(_)));
    }

    #[test]
    fn occupancy_outside_zero_to_one_is_refused() {
        let mut r = arch(32, 64, 0);
        assert!(validate_resources("k", "sm_80", &r).is_ok());
        for bad in [1e308, -0.5, f64::NAN, f64::INFINITY] {
            r.best.as_mut().expect("a best launch").occupancy = bad;
            let e = validate_resources("k", "sm_80", &r).expect_err("out of range");
            assert!(e.contains("occupancy") && !e.contains("inf%"), "{e}");
        }
    }

    #[test]
    fn an_empty_file_name_or_hash_of_an_older_occ_reads_as_none() {
        let mut old =
            serde_json::to_value(KernelArch::from_resources(arch(32, 64, 0))).expect("a record");
        // An older occ wrote "" for none: a build from the lock's files, a
        // lock from before cubin hashes.
        for field in ["cubin", "ptx", "cubin_hash"] {
            old[field] = serde_json::Value::from("");
        }
        let read: KernelArch = serde_json::from_value(old.clone()).expect("the old form");
        assert_eq!(
            (&read.cubin, &read.ptx, &read.cubin_hash),
            (&None, &None, &None)
        );
        // And none is absent when written.
        let again = serde_json::to_value(&read).expect("written");
        for field in ["cubin", "ptx", "cubin_hash"] {
            assert!(again.get(field).is_none(), "{field}: {again}");
        }
        // A name is kept.
        old["cubin"] = serde_json::Value::from("k.sm_80.cubin");
        old["cubin_hash"] = serde_json::Value::from("fnv1a64:00");
        let read: KernelArch = serde_json::from_value(old).expect("a live build's form");
        assert_eq!(read.cubin.as_deref(), Some("k.sm_80.cubin"));
        assert_eq!(read.cubin_hash.as_deref(), Some("fnv1a64:00"));
        let blob: DeviceCode = serde_json::from_str(
            r#"{"source": "k.cu", "kind": "fatbin", "arch": null, "file": ""}"#,
        )
        .expect("an old blob of a build from the lock");
        assert_eq!(blob.file, None);
    }
}
