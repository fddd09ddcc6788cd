//! occ for the application side: launch the CUDA kernels that
//! [occ-build](https://docs.rs/occ-build) compiled in your `build.rs`, at
//! the launches `#[launch_config]` baked from ptxas's real numbers.
//!
//! One dependency gives the attribute ([`launch_config`](attr.launch_config.html)), the kernel
//! table's types ([`table`]), the rule that picks the device code for a
//! GPU ([`select`]), launch configurations ([`LaunchConfig`],
//! [`grid_for`], [`grid_for_2d`]) with the per-arch launches a site bakes
//! ([`Baked`]), and with the `cudarc` feature, loading and typed launches
//! through cudarc's driver API ([`cuda`](cuda/index.html)).
//!
//! # Example
//!
//! `Cargo.toml`:
//!
//! ```toml
//! [dependencies]
//! occ = { git = "https://github.com/occ-rs/occ", features = ["cudarc"] }   # not on crates.io yet
//! # cudarc's CUDA version (13.4, its newest; name yours if older): without one,
//! # cudarc asks the nvcc on PATH and stops at 13.5.
//! cudarc = { version = "0.19", default-features = false, features = ["cuda-13040"] }
//!
//! [build-dependencies]
//! occ-build = { git = "https://github.com/occ-rs/occ" }
//! ```
//!
//! `build.rs`:
//!
//! ```rust,ignore
//! fn main() {
//!     occ_build::Build::new()
//!         .file("kernels/saxpy.cu")
//!         .archs(["sm_80", "sm_90"])
//!         .compile();
//! }
//! ```
//!
//! `kernels/saxpy.cu`:
//!
//! ```cuda
//! __global__ void saxpy(float a, const float* x, float* y, int n) {
//!     int i = blockIdx.x * blockDim.x + threadIdx.x;
//!     if (i < n) y[i] = a * x[i] + y[i];
//! }
//! ```
//!
//! A launch site (`src/main.rs`):
//!
//! ```ignore
//! mod kernels {
//!     include!(concat!(env!("OUT_DIR"), "/occ/kernels.rs"));
//! }
//! use occ::cuda::{CudaSlice, CudaStream, Error, Loader};
//!
//! #[occ::launch_config(kernel = "saxpy")]
//! fn saxpy(loader: &Loader, stream: &CudaStream, a: f32, x: &CudaSlice<f32>, y: &mut CudaSlice<f32>) -> Result<(), Error> {
//!     let f = loader.load(kernels::saxpy::KERNEL)?;             // the cubin that runs here, else the PTX
//!     let cfg = LAUNCH.for_function(&f)?.for_elements(x.len());  // the launch baked for that arch
//!     kernels::saxpy::launch(&f, stream, cfg, a, x, y, x.len() as i32) // arguments checked by rustc
//! }
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let ctx = occ::cuda::CudaContext::new(0)?;
//!     let (stream, loader) = (ctx.default_stream(), Loader::new(&ctx)?);
//!     let x = stream.clone_htod(&vec![1.0f32; 1 << 20])?;
//!     let mut y = stream.alloc_zeros::<f32>(1 << 20)?;
//!     saxpy(&loader, &stream, 2.0, &x, &mut y)?;
//!     Ok(())
//! }
//! ```
//!
//! The loader keeps one module per embedded blob (a fatbin holds all the
//! kernels of its `.cu` file) and returns the same function for a kernel
//! loaded twice, so loading at the site costs a lookup after the first
//! call.
//!
//! # What is checked at compile time
//!
//! - **At the attribute** (`#[launch_config]`, from the manifest the build
//!   wrote): the kernel exists (with a did-you-mean), it does not spill,
//!   its occupancy meets the site's `min_occupancy`; the baked launch per
//!   arch is `cuda_occupancy.h`'s best for the kernel's real registers and
//!   shared memory.
//! - **At the launch** (the typed launcher of `kernels.rs`): the number of
//!   arguments; each value's type (`f32` for `float`, `i32` for `int`);
//!   each pointer's element type and whether the kernel writes through it
//!   (`const float*` takes `&CudaSlice<f32>`, `float*` takes `&mut
//!   CudaSlice<f32>`); a struct's size and alignment ([`cuda::Value`](cuda/trait.Value.html)).
//!   A mistake is an error at the argument that says what the parameter
//!   wants, e.g. "this kernel parameter wants a device buffer of `f32`,
//!   and `CudaSlice<f64>` is not one".
//! - **Not checked**: that buffers are long enough, and what the kernel
//!   does with memory. At run time the loader refuses a kernel with no
//!   code for the GPU ([`select::NoCode`], naming the archs built), a
//!   grid or block outside CUDA's limits or the kernel's
//!   (`__launch_bounds__`, `__cluster_dims__`), naming the extent, and a
//!   launch with more dynamic shared memory than the device has.
//!
//! # Features
//!
//! - `macros` (default): [`launch_config`](attr.launch_config.html), from occ-macros.
//! - `cudarc`: [`cuda`](cuda/index.html). Without any feature the crate has no
//!   dependencies; the generated `kernels.rs` compiles either way (its
//!   launchers are wrapped in `occ::__if_cudarc!`, which drops them when
//!   the feature is off).
//! - `half` (implies `cudarc`): `half::f16` and `half::bf16` are
//!   [`cuda::Value<2, 2>`](cuda/trait.Value.html), the argument of a
//!   `__half` or `__nv_bfloat16` parameter by value, and cudarc's `f16` feature makes
//!   `CudaSlice<half::f16>` a buffer for a `__half*`.
//!
//! # The cudarc feature
//!
//! occ depends on cudarc 0.19 with the driver API only, loaded at run
//! time (`fallback-dynamic-loading`): nothing of CUDA is needed to build,
//! a binary runs on machines without a GPU until it creates a context,
//! and no NVRTC is used (cubins, fatbins and PTX are loaded with
//! `cuModuleLoadData`).
//!
//! cudarc compiles the bindings of one CUDA version (`cuda-12080`,
//! `cuda-13000`, ...) and refuses two: cargo unifies the features that
//! every crate of a build asks of cudarc, and with two version features
//! each binding is defined twice (E0428, some 190 errors inside cudarc).
//! So occ names none; it asks for `cuda-version-from-build-system` and
//! `fallback-latest`, which cudarc's build script applies only when no
//! version is named:
//!
//! 1. `CUDARC_CUDA_VERSION=13040` at build time, if set;
//! 2. else a version feature of any crate of the build, yours included:
//!    `cudarc = { version = "0.19", default-features = false, features =
//!    ["cuda-13040"] }` in your `[dependencies]` (the README's setup: CUDA
//!    13.4, cudarc 0.19's newest; name yours if it is older) — the setup
//!    to use when the build must not depend on the machine;
//! 3. else the version of the `nvcc` on `PATH` (only its version is read;
//!    `CUDA_HOME` is not asked);
//! 4. with no nvcc there, cudarc's newest bindings.
//!
//! In step 3, an nvcc newer than cudarc knows (CUDA 13.5, the toolkit
//! occ installs, for cudarc 0.19.10) makes cudarc's build script panic
//! with "Unsupported cuda toolkit version"; name a version as in steps 1
//! or 2. `cargo occ toolkit doctor` checks this for the crate it runs in,
//! and prints the line.
//!
//! The driver API being loaded at run time, bindings newer than the
//! installed driver work as long as the functions called exist there;
//! every driver function occ calls exists in CUDA 11.4+ drivers. A `dynamic-linking`
//! or `static-linking` feature of yours replaces occ's dynamic loading
//! (where `dynamic-loading` would be refused next to it).
//!
//! # Environment variables
//!
//! None are read by this crate. The build (`occ-build`) reads
//! `OCC_ARCHS` (the archs to build, `sm_80,sm_90a`), `NVCC`, `CUDA_HOME`,
//! `OCC_NO_NVCC`, `OCC_BLESS`; cudarc reads `CUDARC_CUDA_VERSION` at
//! build time.
#![deny(missing_docs)]

pub mod launch;
pub mod select;
pub mod table;
pub mod tune;

#[cfg(feature = "cudarc")]
pub mod cuda;

pub use launch::{grid_for, grid_for_2d, Baked, BakedArch, Dim, LaunchConfig};

/// `#[launch_config(kernel = "…")]`: bake the best launch of a kernel into
/// the host code at compile time (the `occ-macros` crate).
#[cfg(feature = "macros")]
#[doc(inline)]
pub use occ_macros::launch_config;

/// Expands to its input when occ's `cudarc` feature is on, to nothing
/// when it is off: the generated `kernels.rs` wraps its typed launchers in
/// it, so the file compiles either way (the cfg is evaluated here, in
/// occ, not in the crate that includes the file).
#[cfg(feature = "cudarc")]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_cudarc {
    ($($t:tt)*) => {
        $($t)*
    };
}

/// Expands to its input when occ's `cudarc` feature is on, to nothing
/// when it is off (here: off).
#[cfg(not(feature = "cudarc"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_cudarc {
    ($($t:tt)*) => {};
}

#[cfg(test)]
mod tests {
    #[allow(dead_code)]
    mod fallback {
        pub const KEPT: bool = false;
    }
    /// `KEPT` is the glob's `false` unless the macro defines its own.
    mod probe {
        #[allow(unused_imports)]
        pub use super::fallback::*;
        crate::__if_cudarc! {
            pub const KEPT: bool = true;
        }
    }

    #[test]
    fn if_cudarc_follows_the_feature() {
        assert_eq!(probe::KEPT, cfg!(feature = "cudarc"));
    }
}
