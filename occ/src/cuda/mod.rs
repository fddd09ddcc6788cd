//! Loading and launching through cudarc's driver API (feature `cudarc`).
//!
//! - [`Loader`]: one per context; `loader.load(kernels::saxpy::KERNEL)`
//!   picks the device code for the GPU ([`select::pick_code`](crate::select::pick_code)),
//!   loads each embedded blob once (`cuModuleLoadData`, no NVRTC) and
//!   returns a [`Function`].
//! - [`Function::launch_raw`]: `cuLaunchKernel`, after refusing a shape
//!   CUDA or the kernel cannot launch ([`Error::Shape`]), raising the
//!   dynamic shared memory opt-in when the launch needs more than 48 KiB,
//!   and refusing more than the device has.
//! - [`Args`]: packs a launch's arguments, keeping cudarc's stream
//!   synchronisation; [`DevicePtr`], [`DevicePtrMut`] and [`Value`] are
//!   what the typed launchers of the generated `kernels.rs` take, so a
//!   wrong argument is a compile error that says what the parameter wants.
//!
//! A typed launcher, as `kernels.rs` generates one per kernel
//! (`saxpy(float a, const float* x, float* y, int n)`):
//!
//! ```
//! # mod saxpy {
//! # pub static KERNEL: &occ::table::Kernel = &occ::table::Kernel {
//! #     name: "_Z5saxpyfPKfPfi", demangled: "", base_name: "saxpy", ident: "saxpy",
//! #     source: "kernels/saxpy.cu", params: &[], archs: &[] };
//! /// Launches `saxpy(float a, float const* x, float* y, int n)`.
//! pub fn launch(
//!     f: &::occ::cuda::Function,
//!     stream: &::occ::cuda::CudaStream,
//!     cfg: ::occ::LaunchConfig,
//!     a: f32,
//!     x: &impl ::occ::cuda::DevicePtr<f32>,
//!     y: &mut impl ::occ::cuda::DevicePtrMut<f32>,
//!     n: i32,
//! ) -> ::core::result::Result<(), ::occ::cuda::Error> {
//!     f.expect(KERNEL)?; // refuses a Function loaded for another kernel
//!     let mut args = ::occ::cuda::Args::new(stream);
//!     args.value(&a).ptr(x).ptr_mut(y).value(&n);
//!     // SAFETY: the arguments are the kernel's parameters, in order, with
//!     // their types.
//!     unsafe { args.launch(f, cfg) }
//! }
//! # }
//! ```
//!
//! and a launch site:
//!
//! ```no_run
//! # mod kernels { pub mod saxpy {
//! #   pub static KERNEL: &occ::table::Kernel = &occ::table::Kernel {
//! #     name: "_Z5saxpyfPKfPfi", demangled: "", base_name: "saxpy", ident: "saxpy",
//! #     source: "kernels/saxpy.cu", params: &[], archs: &[] };
//! #   pub fn launch(f: &occ::cuda::Function, s: &occ::cuda::CudaStream, c: occ::LaunchConfig, a: f32,
//! #     x: &impl occ::cuda::DevicePtr<f32>, y: &mut impl occ::cuda::DevicePtrMut<f32>, n: i32)
//! #     -> Result<(), occ::cuda::Error> { let _ = (f, s, c, a, x, y, n); Ok(()) }
//! # } }
//! # const LAUNCH: occ::Baked = occ::Baked { kernel: "saxpy", archs: &[] };
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use occ::cuda::{CudaContext, Loader};
//!
//! let ctx = CudaContext::new(0)?;
//! let stream = ctx.default_stream();
//! let loader = Loader::new(&ctx)?;
//! let f = loader.load(kernels::saxpy::KERNEL)?;
//! let x = stream.clone_htod(&vec![1.0f32; 1 << 20])?;
//! let mut y = stream.alloc_zeros::<f32>(1 << 20)?;
//! let cfg = LAUNCH.for_function(&f)?.for_elements(x.len());
//! kernels::saxpy::launch(&f, &stream, cfg, 2.0, &x, &mut y, 1 << 20)?;
//! # Ok(()) }
//! ```
//!
//! What the compiler checks at such a site: the number of arguments, each
//! value's Rust type (`f32` for `float`, `i32` for `int`), each pointer's
//! element type and whether the kernel may write through it (`const
//! float*` takes `&CudaSlice<f32>`/`&CudaView<f32>`, `float*` takes `&mut
//! CudaSlice<f32>`/`&mut CudaViewMut<f32>`), and the size and alignment of
//! struct parameters ([`Value`]). What it cannot check: that buffers are
//! long enough for what the kernel accesses, and what a kernel does with
//! memory; the launch is `unsafe` inside the launcher for that reason.

mod args;
mod error;
mod loader;
mod timer;

pub use args::{Args, DevicePtr, DevicePtrMut, Value};
pub use error::Error;
pub use loader::{Function, Loader};
pub use timer::EventTimer;

/// cudarc itself, as occ depends on it (`occ::cuda::cudarc::driver::…`).
pub use cudarc;
/// The cudarc types a launch site needs.
pub use cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, CudaView, CudaViewMut, DeviceRepr, DriverError,
};

/// Whether this machine has a CUDA driver library (`libcuda.so`,
/// `nvcuda.dll`) that cudarc can load. cudarc loads the driver when it is
/// first used and panics when there is none; ask this first to tell a
/// machine without a GPU driver from an error:
///
/// ```no_run
/// if !occ::cuda::driver_present() {
///     eprintln!("no CUDA driver: skipping the GPU part");
///     return;
/// }
/// let ctx = occ::cuda::CudaContext::new(0).expect("a CUDA device");
/// # let _ = ctx;
/// ```
pub fn driver_present() -> bool {
    // SAFETY: only tries to load the library; calls nothing in it.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

impl From<crate::LaunchConfig> for cudarc::driver::LaunchConfig {
    fn from(c: crate::LaunchConfig) -> cudarc::driver::LaunchConfig {
        cudarc::driver::LaunchConfig {
            grid_dim: c.grid,
            block_dim: c.block,
            shared_mem_bytes: c.dynamic_smem,
        }
    }
}

impl From<cudarc::driver::LaunchConfig> for crate::LaunchConfig {
    fn from(c: cudarc::driver::LaunchConfig) -> crate::LaunchConfig {
        crate::LaunchConfig {
            grid: c.grid_dim,
            block: c.block_dim,
            dynamic_smem: c.shared_mem_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::{NoCode, Reason};
    use crate::LaunchConfig;

    #[test]
    fn launch_config_converts_both_ways() {
        let ours = LaunchConfig::new((4, 2), (16, 16)).with_dynamic_smem(65536);
        let theirs: cudarc::driver::LaunchConfig = ours.into();
        assert_eq!(theirs.grid_dim, (4, 2, 1));
        assert_eq!(theirs.block_dim, (16, 16, 1));
        assert_eq!(theirs.shared_mem_bytes, 65536);
        assert_eq!(LaunchConfig::from(theirs), ours);
    }

    #[test]
    fn errors_name_the_kernel_and_what_to_do() {
        let smem = Error::SharedMemory {
            kernel: "tile",
            gpu: (12, 0),
            requested: 200_000,
            static_smem: 1024,
            max_per_block: 101_376,
        }
        .to_string();
        for part in [
            "kernel `tile`",
            "200000 bytes",
            "(sm_120)",
            "101376 bytes",
            "at most 100352 dynamic",
        ] {
            assert!(smem.contains(part), "{part:?} missing from {smem}");
        }
        let wrong = Error::WrongKernel {
            expected: "saxpy",
            loaded: "vadd",
        }
        .to_string();
        assert!(
            wrong.contains("launcher of kernel `saxpy`") && wrong.contains("`vadd`"),
            "{wrong}"
        );
        let no_code: Error = NoCode {
            kernel: "saxpy",
            source: "kernels/saxpy.cu",
            gpu: (7, 5),
            built: vec!["sm_80"],
            reason: Reason::NothingRuns,
        }
        .into();
        let text = no_code.to_string();
        assert!(
            text.contains("sm_75") && text.contains("built for sm_80"),
            "{text}"
        );
        assert!(std::error::Error::source(&no_code).is_some());
        let config = LaunchConfig::new((1, 70_000), 256);
        let shape = Error::Shape {
            kernel: "blur",
            config,
            problem: config.check().expect_err("y is out"),
        };
        let text = shape.to_string();
        assert!(
            text.starts_with("kernel `blur`: cannot launch grid (1, 70000, 1), block (256, 1, 1): grid y is 70000")
                && text.contains("put the long dimension in x"),
            "{text}"
        );
        assert!(std::error::Error::source(&shape).is_none());
    }

    /// The launcher shape of the generated kernels.rs, type-checked here
    /// (this test cannot launch without a GPU).
    #[allow(dead_code)]
    mod launcher_shape {
        use crate::table::{Kernel, Param};

        pub static KERNEL: &Kernel = &Kernel {
            name: "_Z5saxpyfPKfPfi",
            demangled: "saxpy(float, float const*, float*, int)",
            base_name: "saxpy",
            ident: "saxpy",
            source: "kernels/saxpy.cu",
            params: &[
                Param {
                    name: "a",
                    c_type: "float",
                    size: 4,
                    align: 4,
                },
                Param {
                    name: "x",
                    c_type: "float const*",
                    size: 8,
                    align: 8,
                },
                Param {
                    name: "y",
                    c_type: "float*",
                    size: 8,
                    align: 8,
                },
                Param {
                    name: "n",
                    c_type: "int",
                    size: 4,
                    align: 4,
                },
            ],
            archs: &[],
        };

        #[allow(clippy::too_many_arguments)]
        pub fn launch(
            f: &crate::cuda::Function,
            stream: &crate::cuda::CudaStream,
            cfg: crate::LaunchConfig,
            a: f32,
            x: &impl crate::cuda::DevicePtr<f32>,
            y: &mut impl crate::cuda::DevicePtrMut<f32>,
            n: i32,
        ) -> ::core::result::Result<(), crate::cuda::Error> {
            f.expect(KERNEL)?;
            let mut args = crate::cuda::Args::new(stream);
            args.value(&a).ptr(x).ptr_mut(y).value(&n);
            // SAFETY: the arguments are the kernel's parameters, in order.
            unsafe { args.launch(f, cfg) }
        }

        /// A struct parameter of 8 bytes aligned to 4, and views.
        pub fn launch_struct(
            f: &crate::cuda::Function,
            stream: &crate::cuda::CudaStream,
            cfg: crate::LaunchConfig,
            p: &impl crate::cuda::Value<8, 4>,
            x: &crate::cuda::CudaView<'_, f32>,
            y: &mut crate::cuda::CudaViewMut<'_, f32>,
        ) -> ::core::result::Result<(), crate::cuda::Error> {
            let mut args = crate::cuda::Args::new(stream);
            args.value(p).ptr(x).ptr_mut(y);
            // SAFETY: as above.
            unsafe { args.launch(f, cfg) }
        }
    }
}
