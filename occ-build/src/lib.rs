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
//!     println!("saxpy: {} threads per block, {} registers", sm_80.best_block_size, sm_80.registers);
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
//! ([`occ_model::launch::Declared`]); reports, `cargo occ explain` and the gate judge
//! the kernel at that launch.
//!
//! ## Finding nvcc
//!
//! In order: [`Build::nvcc`], `NVCC`, `CUDA_HOME`, `CUDA_PATH`, `CUDA_ROOT`,
//! `PATH`, `/usr/local/cuda`, `OCC_CUDA_DIR`, `.cuda/` of the crate or any
//! folder above it (where the workspace's `scripts/cuda-toolkit` installs
//! NVIDIA's nvcc wheels), then occ's per-user toolkit dir
//! ([`cli::toolkit_dir`]: `$XDG_CACHE_HOME/occ/cuda`, else
//! `~/.cache/occ/cuda`), where
//!
//! ```sh
//! cargo install --locked --git https://github.com/occ-rs/occ cargo-occ   # or: cargo install --locked --path <occ checkout>/cargo-occ
//! cargo occ toolkit install
//! ```
//!
//! puts the pinned wheels ([`cli::WHEELS`]) for any crate, without
//! root. nvcc needs no GPU. A build that found none watches these places
//! and reruns once nvcc appears in one of them.
//!
//! ## Environment variables
//!
//! Every variable occ reads (the same table is in `docs/GUIDE.md`):
//!
//! | variable | read by | effect |
//! |---|---|---|
//! | `OCC_ARCHS` | occ-build | overrides the arch list: `sm_80,sm_90a` |
//! | `CUDA_COMPUTE_CAP` | occ-build | the same, as candle users set it: `80`, `90a`, `80,90` |
//! | `NVCC` | occ-build, `cargo occ` | the nvcc to use: a path, or a name on `PATH` |
//! | `CUDA_HOME`, `CUDA_PATH`, `CUDA_ROOT` | occ-build, `cargo occ` | a CUDA install: its `bin/nvcc` |
//! | `PATH` | occ-build, `cargo occ` | searched for `nvcc` |
//! | `OCC_CUDA_DIR` | occ-build, `cargo occ`, `scripts/cuda-toolkit` | occ's toolkit dir: where `cargo occ toolkit install` and `scripts/cuda-toolkit` install nvcc, and where occ looks for `cu13/nvidia/cu13/bin/nvcc` |
//! | `XDG_CACHE_HOME`, `HOME` (Windows: `LOCALAPPDATA`) | occ-build, `cargo occ` | without `OCC_CUDA_DIR`, the toolkit dir is `$XDG_CACHE_HOME/occ/cuda`, else `$HOME/.cache/occ/cuda` (`%LOCALAPPDATA%\occ\cuda`) |
//! | `PYTHON` | `cargo occ toolkit install`, `scripts/cuda-toolkit` | the Python that runs pip (default `python3`) |
//! | `NVCC_CCBIN` | nvcc; occ-build watches it and keys its cache on it | the host compiler nvcc runs |
//! | `NVCC_PREPEND_FLAGS`, `NVCC_APPEND_FLAGS` | nvcc; occ-build watches them and keys its cache on them | extra nvcc flags (their `-I` folders count in the include search) |
//! | `CPATH`, `CPLUS_INCLUDE_PATH`, `C_INCLUDE_PATH`, `GCC_EXEC_PREFIX`, `COMPILER_PATH` | the host compiler nvcc preprocesses with; occ-build watches them and keys its cache on them | where it finds headers and its programs |
//! | `OCC_NVCC_LAUNCHER` | occ-build, `cargo occ` | a wrapper for every nvcc call (e.g. `sccache`) |
//! | `OCC_BLESS` | occ-build | `1`: write the build's numbers to `occ.lock` (never when `CI` is set) |
//! | `CI` | occ-build, `cargo occ bless` | set (not `0`/`false`/`no`/`off`): `occ.lock` is never written, and the crate's own build fails when it finds no nvcc (unless `OCC_NO_NVCC=1`) |
//! | `OCC_NO_NVCC` | occ-build | `1`: do not look for nvcc; build from `occ.lock` |
//! | `CUDARC_CUDA_VERSION` | cudarc's build script; `cargo occ toolkit doctor` | the CUDA version of cudarc's bindings (`13040`), over a `cuda-XXXXX` feature and the nvcc on `PATH` (see the cudarc line of the README's `Cargo.toml`) |
//! | `OCC_GPU` | `cargo occ report` | the GPU the build is for (as the driver names it; also `--gpu`): measurements taken on another GPU are said so |
//! | `DOCS_RS` | occ-build | set by docs.rs: build from `occ.lock` |
//! | `OCC_PTXAS_TIMEOUT` | `cargo occ sweep` | seconds a ptxas run may take before it is killed (default 60; `--ptxas-timeout`) |
//! | `OCC_MANIFEST` | occ-macros | the `manifest.json` `#[launch_config]` reads instead of `$OUT_DIR/occ/manifest.json` (relative to the crate) |
//! | `OUT_DIR`, `CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`, `NUM_JOBS` | occ-build, occ-macros | set by cargo: where to write, the crate root, the package, how many nvcc jobs at once |
//! | `TARGET`, `HOST`, `OPT_LEVEL`, `DEBUG` | occ-build (`static_lib`) | set by cargo: given to the `cc` crate, which picks the host compiler, its flags and the archiver from them (and from `CXX`, `CXXFLAGS`, `AR`, `CXXSTDLIB`, ...) |
//! | `CARGO` | `cargo occ` | set by cargo: the cargo that runs `cargo metadata` |
//! | `GITHUB_ACTIONS` | occ-build, `cargo occ check` | `true`: append the Markdown report to the step summary; `cargo occ check` also prints workflow commands |
//! | `GITHUB_STEP_SUMMARY`, `GITHUB_WORKSPACE` | occ-build, `cargo occ check` (only when `GITHUB_ACTIONS=true`) | set by GitHub Actions: the step summary file; the checkout, which annotation paths are relative to |
//!
//! Every variable read is printed as `cargo::rerun-if-env-changed`; every
//! `.cu` file and every header nvcc read as `cargo::rerun-if-changed`. A job
//! whose inputs (source and header bytes, flags, nvcc, arch) did not change is
//! not rerun.
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
//! docs.rs has no nvcc and sets `DOCS_RS`, so there the build script stands
//! on the crate's committed `occ.lock`: the docs build as long as the lock
//! is in the package and covers every arch the build asks for (an arch the
//! lock does not record is an error). So, before `cargo publish`:
//!
//! - bless the lock for the archs of the build (`OCC_BLESS=1 cargo build`
//!   or `cargo occ bless`) and commit it;
//! - check that the package holds it and the `.cu` files (users' builds
//!   compile those): `cargo package --list | grep -E 'occ.lock|\.cu'`. Cargo
//!   packages every file git tracks; an `include = [...]` list must name
//!   `occ.lock` and the kernels (`"kernels/**"`), and neither may match an
//!   `exclude` pattern;
//! - build the docs on one target, so docs.rs runs the build script once:
//!
//! ```toml
//! [package.metadata.docs.rs]
//! targets = ["x86_64-unknown-linux-gnu"]
//! ```
//!
//! docs.rs's metadata cannot set environment variables; `DOCS_RS`, which
//! docs.rs sets itself, is what selects the lock, so nothing else is needed
//! there. To try the same build locally: `OCC_NO_NVCC=1 cargo doc`. Code
//! that uses the device code compiles unchanged (every blob's `bytes` is
//! empty, `kernels::HAS_DEVICE_CODE` is `false`).
#![deny(missing_docs)]

mod assemble;
mod builder;
mod cache;
mod cargo;
pub mod cli;
mod compile;
mod disasm;
mod embed;
mod emit;
mod env;
mod error;
mod files;
mod gate;
mod github;
mod hostlib;
mod inputs;
mod job;
mod memo;
mod nvcc_args;
mod nvcc_text;
mod parts;
mod pipeline;
mod plan;
#[cfg(test)]
mod proptests;
mod status;
mod summary;
mod tokens;
mod toolchain;
mod toolkit;
mod wheels;

pub use builder::{Build, Compress, Cudart};
pub use error::{Error, Result};
pub use occ_model::arch::Target;
pub use occ_model::launch::Launch;
pub use occ_model::manifest::Embed;
pub use pipeline::Report;
