//! # occ-macros: `#[launch_config]`
//!
//! Bakes the best CUDA launch of a kernel into the host function that
//! launches it, at compile time. The numbers come from the manifest that
//! [occ-build](https://docs.rs/occ-build) writes in `build.rs` (registers,
//! shared memory and launch bounds that ptxas reported for each arch), run
//! through occ-model's occupancy model, which equals NVIDIA's
//! `cuda_occupancy.h`.
//!
//! Use it through the [`occ`](https://docs.rs/occ) crate, which re-exports
//! it as `occ::launch_config` and holds the types its expansion names
//! (`occ::Baked`): the expansion refers to `::occ`, so a crate that uses
//! the attribute depends on `occ` (as `serde_derive`'s does on `serde`).
//!
//! ## Example
//!
//! `Cargo.toml`:
//!
//! ```toml
//! [dependencies]
//! occ = { git = "https://github.com/occ-rs/occ" }   # not on crates.io yet
//!
//! [build-dependencies]
//! occ-build = { git = "https://github.com/occ-rs/occ" }
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
//! ```ignore
//! fn main() {
//!     occ_build::Build::new()
//!         .glob("kernels/*.cu")
//!         .archs(["sm_80", "sm_90"])
//!         .compile();
//! }
//! ```
//!
//! `src/main.rs`:
//!
//! ```ignore
//! use occ::launch_config;
//!
//! #[launch_config(kernel = "saxpy")]
//! fn saxpy_launch(n: u32) -> (u32, u32, u32) {
//!     // Injected: KERNEL_NAME, ARCH, BLOCK_SIZE, BLOCK, DYNAMIC_SMEM,
//!     // ACTIVE_BLOCKS_PER_SM, OCCUPANCY, LAUNCH, grid_for.
//!     (grid_for(n), BLOCK_SIZE, DYNAMIC_SMEM)
//! }
//!
//! fn main() {
//!     println!("{:?}", saxpy_launch(1 << 20));
//! }
//! ```
//!
//! ## What is injected
//!
//! At the top of the function's body (so they are visible in all of it):
//!
//! | item | meaning |
//! |---|---|
//! | `const KERNEL_NAME: &str` | the kernel's symbol, what `cuModuleGetFunction` takes |
//! | `const ARCH: &str` | the arch of the plain consts: the build's first arch, or `arch = "..."` |
//! | `const BLOCK_SIZE: u32` | threads per block: the declared launch's (build.rs's; for a site without launch options also the kernel's `.reqntid` or `__launch_bounds__(N)`), else the size with the most resident threads per SM the site's options allow (`cudaOccMaxPotentialOccupancyBlockSize`) |
//! | `const BLOCK: (u32, u32, u32)` | the block's shape: the declared one, the site's `block = (x, _)`, the kernel's `.reqntid`, or `(BLOCK_SIZE, 1, 1)` |
//! | `const DYNAMIC_SMEM: u32` | dynamic shared memory per block: build.rs's declared launch's, or what the site asks for; else 0 |
//! | `const ACTIVE_BLOCKS_PER_SM: u32` | resident blocks per SM at that size (× the SM count = a full wave) |
//! | `const OCCUPANCY: f32` | resident warps / the SM's warp slots |
//! | `const LAUNCH: occ::Baked` | the same per arch of the build (`occ::BakedArch` rows): `LAUNCH.for_function(&f)` (the row of the code `occ::cuda` loaded), `LAUNCH.for_device(major, minor)`, `LAUNCH.on("sm_90")`; each row makes a `LaunchConfig` (`for_elements(n)`, `for_2d(w, h)`, `config(grid)`) |
//! | `const fn grid_for(n: u32) -> u32` | blocks of `BLOCK_SIZE` threads that cover `n` elements |
//!
//! Only the names the function's body uses are injected (its tokens are
//! scanned, macro arguments included), so a site pays for what it reads; a
//! body that calls a macro of its own, which may name them, gets them all.
//! A body whose every `grid_for` is a call of one argument gets no function:
//! each `grid_for(n)` becomes `u32::div_ceil(n, BLOCK_SIZE)` with the block
//! size written out (the same `const fn`, so the same result, types and
//! const contexts), which spares rustc one function per site.
//!
//! The rules that read the table (which row's code runs on a GPU: the
//! newest cubin that runs there, else PTX for the driver's JIT) live once,
//! in `occ::select`; the expansion is consts and one table.
//!
//! ## Options
//!
//! | option | effect |
//! |---|---|
//! | `kernel = "name"` | required: the extern "C" name, the demangled name without its parameter list (`"fluid::stencil1d<float, 3>"`), or a base name (`"stencil1d"`) when only one kernel has it; any of these prefixed with the kernel's source and a colon (`"kernels/a.cu:same"`) picks among kernels of one name in several files |
//! | `arch = "sm_90"` | the site launches on this arch only: the plain consts and the table are for it alone |
//! | `block = (32, _)` | `(32, _)` / `(8, 8, _)`: the last dimension left to the tuner, every block size a multiple of the fixed ones; CUDA's limits hold (x and y at most 1024, z at most 64, 1024 threads in all), a free dimension included. A fixed shape (`(32, 8)`, `256`) is declared in build.rs instead (see [One truth for a launch](#one-truth-for-a-launch)); here it may only repeat build.rs's or the kernel's `.reqntid` |
//! | `dynamic_smem = BYTES` | the same dynamic shared memory at every block size (integer literals and `+ - * / <<` of them: `48 * 1024`); with a declared launch, build.rs's bytes |
//! | `dynamic_smem = "max"` | the most a block can take without lowering the chosen occupancy (`cudaOccAvailableDynamicSMemPerBlock`); with a declared launch, its resident blocks |
//! | `smem_per_thread = BYTES` | dynamic shared memory of `BYTES × block size` (`…VariableSMem`), plus `smem_fixed = BYTES` per block; with a declared launch, build.rs's bytes at its block |
//! | `max_block_size = N` | no block larger than N; with a declared launch, a check of it |
//! | `block_multiple = N` | only block sizes that are multiples of N; with a declared launch, a check of it |
//! | `min_occupancy = 0.5` | a compile error when the launch the site bakes stays below it |
//! | `allow_spills` | accept a kernel that spills registers |
//! | `max_spill_bytes = N` | accept at most N bytes of spill stores + loads |
//!
//! Kernels with `.reqntid` (a required block size) get exactly that size.
//! `tuned` with a declared launch bakes a measurement of that block only.
//! Above 48 KiB of dynamic shared memory a launch must opt in with
//! `cudaFuncSetAttribute(…MaxDynamicSharedMemorySize…)`; the model assumes it does.
//!
//! ## One truth for a launch
//!
//! The gate, the reports, `cargo occ explain`, `check` and `tune --plan`
//! judge a kernel at its declared launch, which build.rs states once:
//! `.launch("transpose_tiled", Launch::block_2d(32, 8))`. A site of that
//! kernel launches there without saying so: `BLOCK` is `(32, 8, 1)`,
//! `BLOCK_SIZE` 256, `DYNAMIC_SMEM` the declared bytes, `grid_for`
//! counts blocks of 256. What the site states besides is checked against
//! it, never a second launch:
//!
//! - the same `block`, `dynamic_smem` or `smem_per_thread` bytes, a
//!   `max_block_size` or `block_multiple` the block meets, a free
//!   `(32, _)` whose fixed dimensions match: allowed (redundant);
//! - anything else: a compile error at the option naming both, "this site
//!   launches `transpose_tiled` at block (16, 16) but build.rs declares
//!   block (32, 8) with `.launch("transpose*", ..)`; keep one: …";
//! - a fixed `block` (every dimension given) for a kernel build.rs
//!   declares nothing for, whose gate judged another block: a compile
//!   error with the `.launch(..)` line to add and the site without it.
//!
//! Dynamic shared memory likewise: build.rs's `.dynamic_smem(pattern,
//! DynamicSmem)` gives a kernel's, whatever its block, and every site
//! launches with it (a site's other bytes are a compile error). A site's
//! own `dynamic_smem`/`smem_per_thread` on a kernel build.rs declares none
//! for is allowed where it costs no occupancy at the site's block (the
//! gate, judging without it, then judges what the site gets) and
//! otherwise a compile error that gives the `.dynamic_smem(..)` line.
//!
//! A site that states no option shaping its launch (`block`,
//! `max_block_size`, `block_multiple`, `dynamic_smem`, `smem_per_thread`,
//! `smem_fixed`, `tuned`; `arch`, `min_occupancy` and the spill options do
//! not) bakes exactly the launch the gate judges, by the one rule
//! `occ_model::schema::manifest::Resources::judged`: build.rs's launch,
//! else the kernel's `.reqntid` shape or `__launch_bounds__(N)` (a block
//! of N), else its best block. So at 40 registers under
//! `__launch_bounds__(1024)` a bare site bakes 1024, where the gate judges
//! it, not the best block below it (768).
//!
//! `__launch_bounds__(N)` binds only such a site: one that states tuning
//! options tunes within them and below N (a cap is not a launch), and the
//! gate still judges the kernel at N. A `.reqntid` shape is the launch
//! either way: the site gets it, and may repeat it. Without any
//! declaration, tuning options (`(32, _)`, `max_block_size`,
//! `block_multiple`, `dynamic_smem`, `smem_per_thread`) choose the site's
//! block, and the gate judges the kernel at its best block with no
//! dynamic shared memory: declare the launch in build.rs to judge that one.
//!
//! ## Gates
//!
//! Every check is a compile error at the attribute, spanned on the argument at
//! fault, and the function still compiles around it (placeholder consts), so
//! one mistake is one message:
//!
//! - a kernel that spills on an arch the site launches on, naming the kernel,
//!   the arch and the bytes, unless the site says `allow_spills` or
//!   `max_spill_bytes = N`;
//! - a launch below `min_occupancy`;
//! - a site that contradicts build.rs's declared launch, or fixes a block
//!   build.rs does not declare (above);
//! - an unknown kernel (with a did-you-mean) or an ambiguous one (with each
//!   candidate's source and the exact string that selects it);
//! - no manifest (with the `build.rs` lines to add), or one of another schema;
//! - an unknown option or a bad value.
//!
//! ## cudarc
//!
//! With `occ`'s `cudarc` feature, `occ::cuda::Loader` loads a kernel's
//! device code for the GPU at hand and the generated `kernels.rs` has a
//! typed launcher per kernel; a site is a few lines:
//!
//! ```ignore
//! let f = loader.load(kernels::saxpy::KERNEL)?;
//! let cfg = LAUNCH.for_function(&f)?.for_elements(n);
//! kernels::saxpy::launch(&f, &stream, cfg, 2.0, &x, &mut y, n as i32)?;
//! ```
//!
//! ## The manifest
//!
//! The attribute reads `$OUT_DIR/occ/manifest.json` (cargo sets `OUT_DIR`
//! for crates with a build script), or the file named by the `OCC_MANIFEST`
//! environment variable when that is set (relative paths are from the
//! crate's root; for tools and tests). It reads and parses the manifest once
//! per compiler process however many sites there are, and the expansion
//! `include_bytes!`es it so that rustc recompiles the crate when it changes.
//! Sites that write the same attribute against the same manifest share one
//! plan, computed at the first of them.
#![deny(missing_docs)]

mod args;
mod declared;
mod expand;
mod manifest;
mod plans;
mod validate;

/// Bakes the best launch of a CUDA kernel into this function; see the
/// [crate docs](crate) for the options and what is injected.
#[proc_macro_attribute]
pub fn launch_config(
    attr: proc_macro::TokenStream,
    item: proc_macro::TokenStream,
) -> proc_macro::TokenStream {
    expand::expand(attr.into(), item.into()).into()
}
