//! `occ::cuda::Error`: what went wrong loading or launching, and what to do.

use crate::select::{How, NoCode};
use crate::LaunchConfig;
use cudarc::driver::{sys::CUresult, DriverError};
use std::fmt;

/// An error of [`Loader`](super::Loader), [`Function`](super::Function) or
/// [`Args`](super::Args). Each message names the kernel and ends with what
/// to do; the driver's error, where there is one, is its
/// [`source`](std::error::Error::source).
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// No embedded device code of the kernel runs on the context's GPU.
    NoCode(NoCode),
    /// A driver call about the device or the context failed
    /// (`what`: `"cuDeviceGetAttribute"`, `"binding the context"`, ...).
    Device {
        /// What was asked.
        what: &'static str,
        /// The driver's error.
        error: DriverError,
    },
    /// `cuModuleLoadData` refused the kernel's device code.
    Load {
        /// The kernel (its name without parameters).
        kernel: &'static str,
        /// Its `.cu` file.
        source: &'static str,
        /// The arch whose code was to run.
        arch: &'static str,
        /// SASS or JIT.
        how: How,
        /// The driver's error.
        error: DriverError,
    },
    /// The loaded device code holds no function of the kernel's symbol.
    Symbol {
        /// The kernel.
        kernel: &'static str,
        /// The symbol looked up.
        symbol: &'static str,
        /// The driver's error.
        error: DriverError,
    },
    /// A function attribute could not be read or set.
    Attribute {
        /// The kernel.
        kernel: &'static str,
        /// The attribute (`"MAX_DYNAMIC_SHARED_SIZE_BYTES"`).
        attribute: &'static str,
        /// The driver's error.
        error: DriverError,
    },
    /// The launch asks for more dynamic shared memory than the GPU gives a
    /// block of this kernel.
    SharedMemory {
        /// The kernel.
        kernel: &'static str,
        /// The GPU's compute capability.
        gpu: (u32, u32),
        /// Dynamic shared memory asked for, bytes.
        requested: u32,
        /// The kernel's static shared memory, bytes.
        static_smem: u32,
        /// The device's opt-in maximum of shared memory per block, bytes.
        max_per_block: u32,
    },
    /// The stream belongs to another context than the loaded function.
    WrongContext {
        /// The kernel.
        kernel: &'static str,
    },
    /// A typed launcher was given a function loaded for another kernel.
    WrongKernel {
        /// The kernel the launcher launches.
        expected: &'static str,
        /// The kernel the function was loaded for.
        loaded: &'static str,
    },
    /// The arguments do not match the kernel's parameter list.
    Arguments {
        /// The kernel.
        kernel: &'static str,
        /// Its parameter list (`saxpy(float a, float const* x, ...)`).
        signature: String,
        /// What differs.
        detail: String,
    },
    /// A `#[launch_config]` site has no baked launch for the arch whose
    /// code was loaded.
    NotBaked {
        /// The site's kernel.
        kernel: &'static str,
        /// The loaded code's arch.
        arch: &'static str,
        /// The archs the site has launches for.
        baked: Vec<&'static str>,
    },
    /// The launch's grid or block is outside what CUDA can launch
    /// ([`LaunchConfig::check`]) or what the kernel takes (above its
    /// `__launch_bounds__` maximum, or not whole `__cluster_dims__`
    /// clusters); refused before any driver call.
    Shape {
        /// The kernel.
        kernel: &'static str,
        /// The launch.
        config: LaunchConfig,
        /// Which extent is out, and what to do.
        problem: String,
    },
    /// `cuLaunchKernel` failed.
    Launch {
        /// The kernel.
        kernel: &'static str,
        /// The launch.
        config: LaunchConfig,
        /// The driver's error.
        error: DriverError,
    },
}

impl From<NoCode> for Error {
    fn from(e: NoCode) -> Error {
        Error::NoCode(e)
    }
}

/// The error's name (`CUDA_ERROR_INVALID_PTX`), read from the code alone:
/// `DriverError`'s own text asks the driver, which a message must not
/// depend on.
struct Name<'a>(&'a DriverError);

impl fmt::Display for Name<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0 .0)
    }
}

/// What to do about a failed `cuModuleLoadData`.
fn load_hint(code: CUresult) -> &'static str {
    match code {
        CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION | CUresult::CUDA_ERROR_INVALID_PTX => {
            "the PTX is newer than this driver's JIT compiler: update the NVIDIA driver, \
             build with an older CUDA toolkit, or add this GPU's arch to the build so a \
             cubin runs"
        }
        CUresult::CUDA_ERROR_INVALID_IMAGE | CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU => {
            "the driver cannot run this code: it may be older than the CUDA toolkit that \
             built it (update the NVIDIA driver), or the build's archs miss this GPU (add \
             its arch in build.rs or OCC_ARCHS)"
        }
        CUresult::CUDA_ERROR_JIT_COMPILER_NOT_FOUND => {
            "the driver has no PTX JIT compiler here: add this GPU's arch to the build so \
             a cubin runs"
        }
        CUresult::CUDA_ERROR_OUT_OF_MEMORY => "the GPU is out of memory: free some first",
        _ => "check that the NVIDIA driver supports the CUDA toolkit that built the code",
    }
}

impl fmt::Display for Error {
    /// Long: one arm per variant, so that every message is written whole in
    /// one place.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoCode(e) => e.fmt(f),
            Error::Device { what, error } => write!(
                f,
                "{what} failed: {}; check that the NVIDIA driver is installed and the GPU \
                 is visible (nvidia-smi)",
                Name(error)
            ),
            Error::Load {
                kernel,
                source,
                arch,
                how,
                error,
            } => write!(
                f,
                "kernel `{kernel}` ({source}): loading its {arch} {how} failed: {}; {}",
                Name(error),
                load_hint(error.0)
            ),
            Error::Symbol {
                kernel,
                symbol,
                error,
            } => write!(
                f,
                "kernel `{kernel}`: its device code holds no function `{symbol}` ({}); the \
                 embedded code and the kernel table disagree: rebuild the crate (cargo clean \
                 -p <crate>) and report it if it persists",
                Name(error)
            ),
            Error::Attribute {
                kernel,
                attribute,
                error,
            } => write!(
                f,
                "kernel `{kernel}`: the function attribute {attribute} failed: {}",
                Name(error)
            ),
            Error::SharedMemory {
                kernel,
                gpu: (major, minor),
                requested,
                static_smem,
                max_per_block,
            } => write!(
                f,
                "kernel `{kernel}`: the launch asks for {requested} bytes of dynamic shared \
                 memory per block, and this GPU (sm_{major}{minor}) gives a block at most \
                 {max_per_block} bytes, {static_smem} of them static: at most {} dynamic; \
                 launch with less (the baked launch of the loaded arch: `Baked::for_function`)",
                max_per_block.saturating_sub(*static_smem)
            ),
            Error::WrongContext { kernel } => write!(
                f,
                "kernel `{kernel}`: the stream belongs to another CUDA context than the one \
                 it was loaded in; launch on a stream of that context, or load it with a \
                 Loader of the stream's context"
            ),
            Error::WrongKernel { expected, loaded } => write!(
                f,
                "the launcher of kernel `{expected}` was given the function of kernel \
                 `{loaded}`; load `{expected}` (loader.load(kernels::<ident>::KERNEL)) and \
                 pass that"
            ),
            Error::Arguments {
                kernel,
                signature,
                detail,
            } => write!(
                f,
                "kernel `{kernel}`: {detail}; it is declared {signature}: pass one argument \
                 per parameter, in order"
            ),
            Error::NotBaked {
                kernel,
                arch,
                baked,
            } => write!(
                f,
                "kernel `{kernel}`: the `#[launch_config]` site has no launch for {arch}, the \
                 arch of the loaded code (it has {}); the site's manifest and the kernel table \
                 are of different builds: rebuild the crate",
                if baked.is_empty() {
                    "none".to_string()
                } else {
                    baked.join(", ")
                }
            ),
            Error::Shape {
                kernel,
                config,
                problem,
            } => write!(
                f,
                "kernel `{kernel}`: cannot launch grid {:?}, block {:?}: {problem}",
                config.grid, config.block
            ),
            Error::Launch {
                kernel,
                config,
                error,
            } => write!(
                f,
                "kernel `{kernel}`: cuLaunchKernel failed: {} (grid {:?}, block {:?}, {} \
                 bytes of dynamic shared memory); the shape passed CUDA's limits and the \
                 kernel's own, so check its registers and shared memory at this block (`cargo \
                 occ explain`) and any earlier error on the stream",
                Name(error),
                config.grid,
                config.block,
                config.dynamic_smem
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::NoCode(e) => Some(e),
            Error::Device { error, .. }
            | Error::Load { error, .. }
            | Error::Symbol { error, .. }
            | Error::Attribute { error, .. }
            | Error::Launch { error, .. } => Some(error),
            Error::SharedMemory { .. }
            | Error::WrongContext { .. }
            | Error::WrongKernel { .. }
            | Error::Arguments { .. }
            | Error::Shape { .. }
            | Error::NotBaked { .. } => None,
        }
    }
}
