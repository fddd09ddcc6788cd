//! # occ-build: CUDA occupancy as a build-time fact
//!
//! In a crate's `build.rs`, occ-build compiles each `.cu` file with
//! `nvcc -Xptxas -v` for each target arch, reads every kernel's registers,
//! shared/constant/local memory, stack, spills, barriers and launch bounds,
//! computes occupancy exactly as NVIDIA's `cuda_occupancy.h` does, picks the
//! best block size, and writes `$OUT_DIR/occ/manifest.json` and
//! `$OUT_DIR/occ/kernels.rs` (constants plus the embedded device code).
//! With the toolkit's `nvdisasm` it also finds where each kernel spills
//! and where its register pressure peaks, by source line
//! ([`Build::source_lines`]).
//!
//! ## Example
//!
//! `Cargo.toml`:
//!
//! ```toml
//! [build-dependencies]
//! occ-build = { git = "https://github.com/occ-rs/occ" }   # not on crates.io yet
//! ```
//!
//! `kernels/saxpy.cu`:
//!
//! ```cuda
//! extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
//!     int i = blockIdx.x * blockDim.x + threadIdx.x;
//!     if (i < n) y[i] = a * x[i] + y[i];
//! }
//! ```
//!
//! `build.rs`:
//!
//! ```no_run
//! occ_build::Build::new()
//!     .glob("kernels/*.cu")
//!     .archs(["sm_80", "sm_90"])
//!     .compile();
//! ```
//!
//! `src/main.rs`:
//!
//! ```ignore
//! mod kernels {
//!     include!(concat!(env!("OUT_DIR"), "/occ/kernels.rs"));
//! }
//!
//! fn main() {
//!     let saxpy = kernels::get("saxpy").unwrap(); // or kernels::saxpy::KERNEL
//!     let sm_80 = saxpy.on("sm_80").unwrap();
//!     let fatbin: &[u8] = sm_80.code.unwrap().bytes; // for cuModuleLoadData
//!     // `best` is `None` where the kernel cannot launch on the arch.
//!     let block = sm_80.best.map_or(0, |b| b.block_size);
//!     println!("saxpy: {block} threads per block, {} registers", sm_80.registers);
//! }
//! ```
//!
//! With `occ-macros`, `#[launch_config(kernel = "saxpy")]` on the launch
//! function bakes `BLOCK_SIZE` and friends into it instead.
//!
//! ## Sources, archs and declared launches
//!
//! ```no_run
//! use occ_build::{Build, Launch};
//! let mut build = Build::new();
//! build
//!     .glob("src/**/*.cu")
//!     .exclude("src/moe/**")
//!     .archs(["sm_75", "sm_90"])
//!     .arch_specific(["sm_90"]) // sm_90 is built as sm_90a
//!     .launch("fast_argmin_*", Launch::block(1024));
//! if build.resolved_archs().expect("archs").iter().any(|t| t.cc < 80) {
//!     build.define("NO_BF16_KERNEL", None);
//! }
//! build.compile();
//! ```
//!
//! [`Build::launch`] states the launch a kernel is written for; without
//! one its `__launch_bounds__` or `.reqntid` is its declared launch. The
//! manifest records the occupancy there and what would lift it
//! ([`occ_model::model::declared::Declared`]); reports, `cargo occ explain` and the gate judge
//! the kernel at that launch.
//!
//! ## Finding nvcc
//!
//! In order: [`Build::nvcc`], `NVCC`, `CUDA_HOME`, `CUDA_PATH`, `CUDA_ROOT`,
//! `PATH`, `/usr/local/cuda`, `OCC_CUDA_DIR`, `.cuda/` of the crate or any
//! folder above it (where the workspace's `scripts/cuda-toolkit` installs
//! NVIDIA's nvcc wheels), then occ's per-user toolkit dir
//! (`OCC_CUDA_DIR`, else `$XDG_CACHE_HOME/occ/cuda`, else
//! `~/.cache/occ/cuda`), where
//!
//! ```sh
//! cargo install --locked --git https://github.com/occ-rs/occ cargo-occ   # or: cargo install --locked --path <occ checkout>/cargo-occ
//! cargo occ toolkit install
//! ```
//!
//! puts the pinned wheels (occ-shell's `toolkit-wheels.txt`) for any
//! crate, without root. nvcc needs no GPU. A build that found none watches these places
//! and reruns once nvcc appears in one of them.
//!
//! ## When the build fails
//!
//! [`Build::compile`] prints the cargo directives (every file and variable
//! read is watched, also by a failed build, so fixing one reruns the
//! script), then each line of the error as `cargo::error=`, which fails
//! the build. [`Build::try_compile`] prints nothing and returns a
//! [`Report`] or an [`Error`]: its [`kind`](Error::kind) says what failed
//! ([`ErrorKind::NvccNotFound`], [`ErrorKind::Compile`],
//! [`ErrorKind::Gate`], ...), its `Display` what to do, and both carry the
//! [`Directives`] to print (an example is on [`Error`]).
//!
//! ## Environment variables
//!
//! Every variable occ-build reads is printed as `cargo::rerun-if-env-changed`;
//! every `.cu` file and every header nvcc read as `cargo::rerun-if-changed`.
//! A job whose inputs (source and header bytes, flags, nvcc, arch) did not
//! change is not rerun. The table of every variable (`OCC_ARCHS`,
//! `CUDA_COMPUTE_CAP`, `OCC_BLESS`, `OCC_NO_NVCC`, `CI`, ...) is in the
//! guide: [Environment variables](https://github.com/occ-rs/occ/blob/main/docs/GUIDE.md#environment-variables).
//!
//! ## Updating the baseline
//!
//! Each build compares its numbers with `occ.lock` beside `Cargo.toml`
//! (see [`Build::lock_file`]). Lower occupancy, new spills, more spilled
//! bytes, registers up by more than [`Build::register_threshold`] (default
//! 8; per kernel: [`Build::kernel_register_threshold`]), or a kernel gone
//! fail the build with a before/after table: one header per cause and one
//! row per kernel × arch, at most ten rows per cause (the rest are counted,
//! and listed in `report.txt`). Improvements, new kernels and a new arch
//! are one warning per kind, naming the first five kernels; so is a change
//! that leaves a kernel within [`Build::cliff_margin`] registers (default
//! 2) of an occupancy cliff. To accept the numbers of the last build, run
//! `cargo occ bless` (it copies `$OUT_DIR/occ/occ.lock.new` over the lock),
//! or build once with `OCC_BLESS=1 cargo build`; then commit `occ.lock`.
//! Under `CI` the lock is never written. With no lock yet, the first build
//! says how to create one.
//!
//! Without nvcc (docs.rs, machines without CUDA, `OCC_NO_NVCC=1`), a
//! committed lock stands in for live numbers: the build writes the manifest
//! and `kernels.rs` from it, with one warning, and `kernels.rs` then has no
//! `CUBIN`/`PTX` device code.
//!
//! ## Publishing a crate that uses occ-build
//!
//! docs.rs has no nvcc; there the build stands on the committed `occ.lock`,
//! which the package must hold with the `.cu` files. The checklist is in
//! the guide: [Publish a crate that uses occ-build](https://github.com/occ-rs/occ/blob/main/docs/GUIDE.md#publish-a-crate-that-uses-occ-build).
#![deny(missing_docs)]

// On top: the configuration (`builder`), the stages in order (`pipeline`),
// the public error (`failure`) and the tests' door (`with_env`). Below
// them, one module per stage (`stage`), and the leaves every stage uses
// (`leaf`), which import no stage.
mod builder;
mod failure;
mod leaf;
mod pipeline;
#[cfg(test)]
mod proptests;
mod stage;
#[cfg(feature = "internal-test-env")]
mod with_env;

// What occ-build shares with cargo-occ lives in occ-shell; its modules are
// imported here by their own names, so that a stage reads
// `crate::toolkit::Nvcc` (finding nvcc) or `crate::build_state::mark`
// (status.json). None of it is re-exported.
use occ_shell::{build_state, env, github, process, toolkit};

pub use builder::{Build, Compress, Cudart};
pub use failure::{Error, Result};
pub use leaf::directives::Directives;
pub use leaf::error::ErrorKind;
pub use occ_model::model::arch::Target;
pub use occ_model::model::declared::Launch;
pub use occ_model::model::suggest::DynamicSmem;
pub use occ_model::schema::manifest::Embed;
pub use pipeline::Report;
