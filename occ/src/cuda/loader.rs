//! Loading kernels into a context ([`Loader`]) and launching them
//! ([`Function`]).

use super::Error;
use crate::select::{self, How};
use crate::table::{CodeKind, DeviceCode, Kernel, KernelArch};
use crate::{Baked, BakedArch, LaunchConfig};
use cudarc::driver::sys::{self, CUdevice_attribute, CUfunction, CUfunction_attribute, CUmodule};
use cudarc::driver::{result, CudaContext, CudaStream};
use std::borrow::Cow;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Loads the kernels of the generated table into one CUDA context.
///
/// One module per embedded blob: a fatbin holds every kernel of its `.cu`
/// file, and is loaded once however many of them are asked for. Loading a
/// kernel a second time returns the same [`Function`]. Modules are
/// unloaded when the last `Function` from them and the `Loader` are gone.
/// A `Loader` may be shared between threads.
pub struct Loader {
    ctx: Arc<CudaContext>,
    gpu: (u32, u32),
    smem_per_block_optin: u32,
    cache: Mutex<Cache>,
}

#[derive(Default)]
struct Cache {
    /// By the blob's bytes (address, length).
    modules: HashMap<(usize, usize), Arc<Module>>,
    /// By the kernel's (symbol, source).
    functions: HashMap<(&'static str, &'static str), Function>,
}

impl std::fmt::Debug for Loader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loader")
            .field("ordinal", &self.ctx.ordinal())
            .field("gpu", &self.gpu)
            .field("smem_per_block_optin", &self.smem_per_block_optin)
            .finish_non_exhaustive()
    }
}

/// A loaded module; unloaded on drop with its context bound.
struct Module {
    raw: CUmodule,
    ctx: Arc<CudaContext>,
}

// SAFETY: a CUmodule is a handle the driver lets any thread use (with the
// context bound, as every use here does).
unsafe impl Send for Module {}
// SAFETY: as above; the handle is never mutated.
unsafe impl Sync for Module {}

impl Drop for Module {
    fn drop(&mut self) {
        // Errors here have no one to go to; cudarc keeps them for the
        // context's next check, as its own CudaModule does.
        self.ctx.record_err(self.ctx.bind_to_thread());
        // SAFETY: the module was loaded in this context and no function of
        // it outlives it (each holds an `Arc<Module>`).
        self.ctx
            .record_err(unsafe { result::module::unload(self.raw) });
    }
}

impl Loader {
    /// A loader for `ctx`; reads the GPU's compute capability and its
    /// opt-in maximum of shared memory per block.
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Loader, Error> {
        let attr = |a: CUdevice_attribute, what: &'static str| {
            ctx.attribute(a)
                .map(|v| u32::try_from(v).unwrap_or(0))
                .map_err(|error| Error::Device { what, error })
        };
        let major = attr(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)",
        )?;
        let minor = attr(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
            "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)",
        )?;
        let optin = attr(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            "cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)",
        )?;
        Ok(Loader {
            ctx: ctx.clone(),
            gpu: (major, minor),
            smem_per_block_optin: optin,
            cache: Mutex::new(Cache::default()),
        })
    }

    /// The context's GPU's compute capability (major, minor).
    pub fn compute_capability(&self) -> (u32, u32) {
        self.gpu
    }

    /// The context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Loads `kernel` (`kernels::<ident>::KERNEL` of the generated table, a
    /// `KernelId`, or a `&'static Kernel` of `KERNELS` or `get`):
    /// picks its device code for this GPU ([`select::pick_code`]: the
    /// newest cubin that runs, else PTX for the driver's JIT), loads the
    /// blob unless it is loaded already, and looks up the kernel's symbol.
    ///
    /// Long because the driver calls run in the order the driver requires, each
    /// failure named.
    pub fn load(&self, kernel: impl Into<&'static Kernel>) -> Result<Function, Error> {
        let kernel: &'static Kernel = kernel.into();
        let (major, minor) = self.gpu;
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(f) = cache.functions.get(&(kernel.name, kernel.source)) {
            return Ok(f.clone());
        }
        let code = select::pick_code(kernel, major, minor)?;
        let bind = |error| Error::Device {
            what: "binding the CUDA context to this thread",
            error,
        };
        self.ctx.bind_to_thread().map_err(bind)?;
        let key = (code.code.bytes.as_ptr() as usize, code.code.bytes.len());
        let module = match cache.modules.get(&key) {
            Some(m) => m.clone(),
            None => {
                let image = image(code.code);
                // SAFETY: `image` is a cubin, fatbin or NUL-terminated PTX,
                // aligned, alive for the call (the driver copies it), and the
                // context is bound.
                let raw = unsafe { result::module::load_data(image.as_ptr().cast::<c_void>()) }
                    .map_err(|error| Error::Load {
                        kernel: kernel.base_name,
                        source: kernel.source,
                        arch: code.arch.arch,
                        how: code.how,
                        error,
                    })?;
                let m = Arc::new(Module {
                    raw,
                    ctx: self.ctx.clone(),
                });
                cache.modules.insert(key, m.clone());
                m
            }
        };
        let symbol_error = |error| Error::Symbol {
            kernel: kernel.base_name,
            symbol: kernel.name,
            error,
        };
        let name = CString::new(kernel.name).map_err(|_| {
            symbol_error(result::DriverError(sys::CUresult::CUDA_ERROR_INVALID_VALUE))
        })?;
        // SAFETY: the module is loaded in the bound context.
        let raw =
            unsafe { result::module::get_function(module.raw, name) }.map_err(symbol_error)?;
        let attr = |a: CUfunction_attribute, attribute: &'static str| {
            // SAFETY: `raw` is a function of a loaded module.
            unsafe { result::function::get_function_attribute(raw, a) }
                .map(|v| u32::try_from(v).unwrap_or(0))
                .map_err(|error| Error::Attribute {
                    kernel: kernel.base_name,
                    attribute,
                    error,
                })
        };
        let static_smem = attr(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
            "SHARED_SIZE_BYTES",
        )?;
        let dynamic_allowed = attr(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            "MAX_DYNAMIC_SHARED_SIZE_BYTES",
        )?;
        let f = Function {
            inner: Arc::new(Inner {
                kernel,
                arch: code.arch,
                how: code.how,
                raw,
                module,
                gpu: self.gpu,
                static_smem,
                smem_per_block_optin: self.smem_per_block_optin,
                dynamic_allowed: AtomicU32::new(dynamic_allowed),
                raising: Mutex::new(()),
            }),
        };
        cache
            .functions
            .insert((kernel.name, kernel.source), f.clone());
        Ok(f)
    }
}

/// The bytes to give `cuModuleLoadData`: PTX must end in a NUL (occ-build
/// ends each PTX blob with one; a table of an older occ-build may not), and
/// an ELF or fatbin image is read in 8-byte words, which `include_bytes!`
/// does not promise. Copied when either is needed.
pub(crate) fn image(code: &DeviceCode) -> Cow<'static, [u64]> {
    let bytes = code.bytes;
    let nul = code.kind == CodeKind::Ptx && bytes.last() != Some(&0);
    let aligned =
        bytes.as_ptr().align_offset(align_of::<u64>()) == 0 && bytes.len().is_multiple_of(8);
    if aligned && !nul {
        // SAFETY: aligned to 8, a whole number of words, 'static.
        return Cow::Borrowed(unsafe {
            std::slice::from_raw_parts(bytes.as_ptr().cast::<u64>(), bytes.len() / 8)
        });
    }
    let len = bytes.len() + usize::from(nul);
    let mut words = vec![0u64; len.div_ceil(8)];
    // SAFETY: `words` holds at least `bytes.len()` bytes; the rest stay 0
    // (the PTX's NUL).
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), words.as_mut_ptr().cast::<u8>(), bytes.len());
    }
    Cow::Owned(words)
}

/// A kernel loaded in a context, ready to launch. Cheap to clone (clones
/// share the module and the dynamic shared memory set so far).
#[derive(Clone)]
pub struct Function {
    inner: Arc<Inner>,
}

struct Inner {
    kernel: &'static Kernel,
    arch: &'static KernelArch,
    how: How,
    raw: CUfunction,
    module: Arc<Module>,
    gpu: (u32, u32),
    static_smem: u32,
    smem_per_block_optin: u32,
    /// The function's MAX_DYNAMIC_SHARED_SIZE_BYTES as last set (or read).
    dynamic_allowed: AtomicU32,
    /// Held while raising it, so two launches never lower it.
    raising: Mutex<()>,
}

// SAFETY: a CUfunction is a driver handle usable from any thread with its
// context bound; every launch binds it. The rest is Sync.
unsafe impl Send for Inner {}
// SAFETY: as above.
unsafe impl Sync for Inner {}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function")
            .field("kernel", &self.inner.kernel.name)
            .field("arch", &self.inner.arch.arch)
            .field("how", &self.inner.how)
            .finish_non_exhaustive()
    }
}

/// What a launch's dynamic shared memory needs of the function attribute.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Smem {
    /// Within what is allowed already.
    Fits,
    /// Allowed once MAX_DYNAMIC_SHARED_SIZE_BYTES is raised to it.
    Raise(u32),
    /// Beyond the device's opt-in maximum.
    TooMuch,
}

/// What the kernel itself allows of a launch's shape, past CUDA's own
/// limits ([`LaunchConfig::check`]): no more threads per block than its
/// `__launch_bounds__` maximum, and a grid that is a whole number of its
/// `__cluster_dims__` clusters. The driver refuses either with
/// `CUDA_ERROR_INVALID_VALUE` or an invalid cluster size, which names
/// neither.
pub(crate) fn kernel_shape(cfg: &LaunchConfig, arch: &KernelArch) -> Result<(), String> {
    let threads = cfg.threads_per_block();
    if let Some(max) = arch.max_threads_per_block.filter(|&max| threads > max) {
        let (x, y, z) = cfg.block;
        return Err(format!(
            "a block of {x}x{y}x{z} is {threads} threads, above the kernel's \
             __launch_bounds__ maximum of {max} on {}: launch at most {max} threads per block",
            arch.arch
        ));
    }
    if let Some(cluster) = arch.cluster_dims {
        let grid = [cfg.grid.0, cfg.grid.1, cfg.grid.2];
        for ((axis, n), c) in ["x", "y", "z"].into_iter().zip(grid).zip(cluster) {
            if c > 1 && n % c != 0 {
                return Err(format!(
                    "grid {axis} is {n}, not a multiple of the kernel's __cluster_dims__ \
                     {axis} of {c}: round it up to {}",
                    n.div_ceil(c).saturating_mul(c)
                ));
            }
        }
    }
    Ok(())
}

/// `requested` bytes of dynamic shared memory, for a function that allows
/// `allowed` now, has `static_smem` and runs on a device whose blocks may
/// opt in to `optin` bytes in all.
pub(crate) fn smem_plan(requested: u32, allowed: u32, static_smem: u32, optin: u32) -> Smem {
    if requested <= allowed {
        Smem::Fits
    } else if u64::from(requested) + u64::from(static_smem) > u64::from(optin) {
        Smem::TooMuch
    } else {
        Smem::Raise(requested)
    }
}

impl Function {
    /// The kernel's entry in the table.
    pub fn kernel(&self) -> &'static Kernel {
        self.inner.kernel
    }

    /// The arch whose numbers hold for the loaded code: its cubin runs
    /// here, or its PTX was JIT-compiled ([`Function::how`]; after a JIT,
    /// registers may differ from the table's, `attribute(NUM_REGS)` has
    /// the driver's).
    pub fn arch(&self) -> &'static KernelArch {
        self.inner.arch
    }

    /// Whether the code runs as a cubin or was JIT-compiled from PTX.
    pub fn how(&self) -> How {
        self.inner.how
    }

    /// The driver's handle.
    pub fn raw(&self) -> CUfunction {
        self.inner.raw
    }

    /// The context it was loaded in.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.inner.module.ctx
    }

    /// The function attribute `attribute` as the driver reports it
    /// (`CU_FUNC_ATTRIBUTE_NUM_REGS`, ...).
    pub fn attribute(&self, attribute: CUfunction_attribute) -> Result<i32, Error> {
        // SAFETY: the function's module is alive (held by `inner`).
        unsafe { result::function::get_function_attribute(self.inner.raw, attribute) }.map_err(
            |error| Error::Attribute {
                kernel: self.inner.kernel.base_name,
                attribute: "cuFuncGetAttribute",
                error,
            },
        )
    }

    /// `Ok` when this function was loaded for `kernel` (by symbol and
    /// source), else [`Error::WrongKernel`]. Typed launchers call it first.
    pub fn expect(&self, kernel: &Kernel) -> Result<(), Error> {
        let loaded = self.inner.kernel;
        if loaded.name == kernel.name && loaded.source == kernel.source {
            Ok(())
        } else {
            Err(Error::WrongKernel {
                expected: kernel.base_name,
                loaded: loaded.base_name,
            })
        }
    }

    /// Launches the kernel on `stream` with `params`, one pointer per
    /// kernel parameter to its value (`cuLaunchKernel`'s `kernelParams`).
    ///
    /// Before launching: the grid and block must be shapes CUDA launches
    /// ([`LaunchConfig::check`]) and the kernel takes (its
    /// `__launch_bounds__` maximum, whole `__cluster_dims__` clusters),
    /// else [`Error::Shape`]; the stream must belong to the function's
    /// context ([`Error::WrongContext`]); dynamic shared memory above what
    /// the function allows (48 KiB less its static shared memory, by default)
    /// raises `MAX_DYNAMIC_SHARED_SIZE_BYTES` to it, once per larger size,
    /// and more than the device's opt-in maximum is refused
    /// ([`Error::SharedMemory`]) without a driver call.
    ///
    /// # Safety
    ///
    /// `params` must match the kernel's parameters in number, order, size
    /// and meaning (device pointers to memory of this context that the
    /// kernel may access as it does), and stay valid for the call. The
    /// typed launchers of the generated `kernels.rs` and [`Args`](super::Args)
    /// check what they can; nothing checks what the kernel does with
    /// memory.
    pub unsafe fn launch_raw(
        &self,
        stream: &CudaStream,
        cfg: LaunchConfig,
        params: &mut [*mut c_void],
    ) -> Result<(), Error> {
        let inner = &*self.inner;
        let kernel = inner.kernel.base_name;
        cfg.check()
            .and_then(|()| kernel_shape(&cfg, inner.arch))
            .map_err(|problem| Error::Shape {
                kernel,
                config: cfg,
                problem,
            })?;
        if !Arc::ptr_eq(stream.context(), &inner.module.ctx) {
            return Err(Error::WrongContext { kernel });
        }
        stream
            .context()
            .bind_to_thread()
            .map_err(|error| Error::Device {
                what: "binding the CUDA context to this thread",
                error,
            })?;
        self.allow_dynamic_smem(cfg.dynamic_smem)?;
        // SAFETY: the caller vouches for `params`; the function's module is
        // alive and its context bound.
        unsafe {
            result::launch_kernel(
                inner.raw,
                cfg.grid,
                cfg.block,
                cfg.dynamic_smem,
                stream.cu_stream(),
                params,
            )
        }
        .map_err(|error| Error::Launch {
            kernel,
            config: cfg,
            error,
        })
    }

    /// Makes sure the function may take `requested` bytes of dynamic
    /// shared memory per block.
    fn allow_dynamic_smem(&self, requested: u32) -> Result<(), Error> {
        let inner = &*self.inner;
        let plan = |allowed| {
            smem_plan(
                requested,
                allowed,
                inner.static_smem,
                inner.smem_per_block_optin,
            )
        };
        let too_much = || Error::SharedMemory {
            kernel: inner.kernel.base_name,
            gpu: inner.gpu,
            requested,
            static_smem: inner.static_smem,
            max_per_block: inner.smem_per_block_optin,
        };
        match plan(inner.dynamic_allowed.load(Ordering::Acquire)) {
            Smem::Fits => return Ok(()),
            Smem::TooMuch => return Err(too_much()),
            Smem::Raise(_) => {}
        }
        let _raising = inner.raising.lock().unwrap_or_else(PoisonError::into_inner);
        // Another launch may have raised it meanwhile.
        match plan(inner.dynamic_allowed.load(Ordering::Acquire)) {
            Smem::Fits => Ok(()),
            Smem::TooMuch => Err(too_much()),
            Smem::Raise(bytes) => {
                let value = i32::try_from(bytes).map_err(|_| too_much())?;
                // SAFETY: the function's module is alive, its context bound
                // (by `launch_raw`).
                unsafe {
                    result::function::set_function_attribute(
                        inner.raw,
                        CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        value,
                    )
                }
                .map_err(|error| Error::Attribute {
                    kernel: inner.kernel.base_name,
                    attribute: "MAX_DYNAMIC_SHARED_SIZE_BYTES",
                    error,
                })?;
                inner.dynamic_allowed.store(bytes, Ordering::Release);
                Ok(())
            }
        }
    }
}

impl Baked {
    /// The row of the arch whose code `f` runs ([`Function::arch`]): the
    /// launch baked for the code that was loaded. [`Error::NotBaked`] when
    /// the site has no row for it (the site's manifest and the kernel
    /// table are of different builds).
    pub fn for_function(&self, f: &Function) -> Result<&'static BakedArch, Error> {
        let arch = f.arch().arch;
        self.on(arch).ok_or_else(|| Error::NotBaked {
            kernel: self.kernel,
            arch,
            baked: self.archs.iter().map(|a| a.arch).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_shape_holds_the_launch_bounds_and_the_cluster() {
        let mut arch = crate::table::tests::row("sm_90", None);
        let cfg = |grid: (u32, u32, u32), block: u32| LaunchConfig::new(grid, block);
        assert_eq!(kernel_shape(&cfg((7, 1, 1), 1024), &arch), Ok(()));
        arch.max_threads_per_block = Some(256);
        assert_eq!(kernel_shape(&cfg((7, 1, 1), 256), &arch), Ok(()));
        let over = kernel_shape(&LaunchConfig::new(7, (16, 32)), &arch).unwrap_err();
        assert!(
            over.starts_with("a block of 16x32x1 is 512 threads, above the kernel's __launch_bounds__ maximum of 256 on sm_90"),
            "{over}"
        );
        arch.cluster_dims = Some([2, 1, 1]);
        assert_eq!(kernel_shape(&cfg((8, 3, 1), 128), &arch), Ok(()));
        let odd = kernel_shape(&cfg((7, 1, 1), 128), &arch).unwrap_err();
        assert!(
            odd.starts_with("grid x is 7, not a multiple of the kernel's __cluster_dims__ x of 2: round it up to 8"),
            "{odd}"
        );
        arch.cluster_dims = Some([1, 1, 4]);
        let z = kernel_shape(&cfg((8, 1, 6), 128), &arch).unwrap_err();
        assert!(
            z.contains("grid z is 6") && z.ends_with("round it up to 8"),
            "{z}"
        );
    }

    #[test]
    fn smem_plan_raises_up_to_the_opt_in_maximum() {
        // (requested, allowed, static, optin, plan)
        let cases = [
            (0, 49152, 0, 232448, Smem::Fits),
            (49152, 49152, 0, 232448, Smem::Fits),
            (49153, 49152, 0, 232448, Smem::Raise(49153)),
            (200_000, 49152, 1024, 232448, Smem::Raise(200_000)),
            (231424, 49152, 1024, 232448, Smem::Raise(231424)),
            (231425, 49152, 1024, 232448, Smem::TooMuch),
            (u32::MAX, 49152, u32::MAX, 232448, Smem::TooMuch),
            // Raised before: what was allowed stays allowed.
            (100_000, 150_000, 0, 232448, Smem::Fits),
        ];
        for (requested, allowed, static_smem, optin, want) in cases {
            assert_eq!(
                smem_plan(requested, allowed, static_smem, optin),
                want,
                "{requested} with {allowed} allowed, {static_smem} static, {optin} opt-in"
            );
        }
    }

    fn code(kind: CodeKind, bytes: &'static [u8]) -> DeviceCode {
        DeviceCode {
            source: "k.cu",
            kind,
            arch: None,
            bytes,
        }
    }

    fn as_bytes(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    #[test]
    fn ptx_images_end_in_nul() {
        let ptx = code(CodeKind::Ptx, b".version 8.0\n.target sm_80");
        let img = image(&ptx);
        let bytes = as_bytes(&img);
        assert_eq!(&bytes[..ptx.bytes.len()], ptx.bytes);
        assert_eq!(bytes[ptx.bytes.len()], 0);
        assert!(matches!(img, Cow::Owned(_)));
    }

    #[test]
    fn a_nul_ended_ptx_blob_goes_to_the_driver_as_it_is() {
        // What occ-build embeds: PTX and one NUL, here 16 bytes, aligned.
        #[repr(align(8))]
        struct Aligned([u8; 16]);
        static BLOB: Aligned = Aligned(*b".version 8.0\n.x\0");
        let img = image(&code(CodeKind::Ptx, &BLOB.0));
        assert!(matches!(img, Cow::Borrowed(_)), "no copy, no second NUL");
        assert_eq!(as_bytes(&img), BLOB.0);
    }

    #[test]
    fn misaligned_binaries_are_copied_aligned() {
        static WORDS: [u64; 3] = [1, 2, 3];
        // SAFETY: reading the bytes of a static array of integers.
        let all: &'static [u8] = unsafe { std::slice::from_raw_parts(WORDS.as_ptr().cast(), 24) };
        let aligned = image(&code(CodeKind::Cubin, &all[..16]));
        assert!(matches!(aligned, Cow::Borrowed(_)));
        assert_eq!(aligned.as_ref(), &[1, 2]);
        let odd = image(&code(CodeKind::Fatbin, &all[1..20]));
        assert!(matches!(odd, Cow::Owned(_)));
        assert_eq!(&as_bytes(&odd)[..19], &all[1..20]);
        assert_eq!(odd.as_ptr().align_offset(8), 0);
    }
}
