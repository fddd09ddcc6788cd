//! Kernel arguments: the traits a typed launcher's parameters are bound by
//! ([`DevicePtr`], [`DevicePtrMut`], [`Value`]), and [`Args`], which packs
//! them for `cuLaunchKernel`.

use super::{Error, Function};
use crate::table::Kernel;
use crate::LaunchConfig;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{
    CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr as _, DevicePtrMut as _, DeviceRepr,
    SyncOnDrop,
};
use std::ffi::c_void;
use std::marker::PhantomData;

/// A device buffer of `T` that a kernel reads: the argument for a
/// `const T*` parameter. Implemented for cudarc's `CudaSlice<T>`,
/// `CudaView<'_, T>` and `CudaViewMut<'_, T>`.
#[diagnostic::on_unimplemented(
    message = "this kernel parameter wants a device buffer of `{T}`, and `{Self}` is not one",
    label = "expected `&CudaSlice<{T}>` or `&CudaView<{T}>` here",
    note = "a `const {T}*` parameter takes a cudarc `CudaSlice<{T}>`, `CudaView<'_, {T}>` or `CudaViewMut<'_, {T}>`, by reference; the kernel's parameter list is in the launcher's docs"
)]
pub trait DevicePtr<T> {
    /// The device pointer for a launch on `stream`, and cudarc's guard
    /// that records the read when dropped (after the launch). `stream`
    /// waits for earlier writes first.
    fn kernel_arg<'a>(&'a self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>);
}

/// A device buffer of `T` that a kernel writes: the argument for a `T*`
/// parameter. Implemented for cudarc's `CudaSlice<T>` and
/// `CudaViewMut<'_, T>`.
#[diagnostic::on_unimplemented(
    message = "this kernel parameter writes a device buffer of `{T}`, and `{Self}` is not a mutable one",
    label = "expected `&mut CudaSlice<{T}>` or `&mut CudaViewMut<{T}>` here",
    note = "a `{T}*` parameter takes a cudarc `CudaSlice<{T}>` or `CudaViewMut<'_, {T}>`, by `&mut`; the kernel's parameter list is in the launcher's docs"
)]
pub trait DevicePtrMut<T> {
    /// The device pointer for a launch on `stream`, and cudarc's guard
    /// that records the write when dropped (after the launch). `stream`
    /// waits for earlier reads and writes first.
    fn kernel_arg_mut<'a>(&'a mut self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>);
}

impl<T> DevicePtr<T> for CudaSlice<T> {
    fn kernel_arg<'a>(&'a self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        self.device_ptr(stream)
    }
}

impl<T> DevicePtr<T> for CudaView<'_, T> {
    fn kernel_arg<'a>(&'a self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        self.device_ptr(stream)
    }
}

impl<T> DevicePtr<T> for CudaViewMut<'_, T> {
    fn kernel_arg<'a>(&'a self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        self.device_ptr(stream)
    }
}

impl<T> DevicePtrMut<T> for CudaSlice<T> {
    fn kernel_arg_mut<'a>(&'a mut self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        self.device_ptr_mut(stream)
    }
}

impl<T> DevicePtrMut<T> for CudaViewMut<'_, T> {
    fn kernel_arg_mut<'a>(&'a mut self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        self.device_ptr_mut(stream)
    }
}

/// A value of `SIZE` bytes aligned to `ALIGN`: the argument for a
/// by-value parameter whose type Rust does not know (a struct, or an
/// `extern "C"` kernel's parameter known only by its PTX `.param`). The
/// generated launcher takes `&impl Value<SIZE, ALIGN>`.
///
/// Implemented for Rust's primitive numbers and `bool` (at their sizes),
/// and with occ's `half` feature for `half::f16` and `half::bf16` (a
/// `__half` or `__nv_bfloat16` by value); for your own `#[repr(C)]`
/// struct, laid out as the kernel's, say
/// `unsafe impl cudarc::driver::DeviceRepr for Params {}` and
/// [`occ::kernel_value!(Params)`](crate::kernel_value), which implements
/// it at the type's real size and alignment, so a mismatch with the
/// kernel's parameter is a compile error.
///
/// # Safety
///
/// `SIZE` and `ALIGN` must be the type's size and alignment: the launch
/// hands the driver a pointer to the value and the driver reads the
/// parameter's size from it. [`kernel_value!`](crate::kernel_value)
/// implements it so.
#[diagnostic::on_unimplemented(
    message = "this kernel parameter takes a value of {SIZE} bytes aligned to {ALIGN}, and `{Self}` is not one",
    label = "expected a value of {SIZE} bytes aligned to {ALIGN} here",
    note = "a parameter known by its size takes any value of that size and alignment: a Rust number, or a `#[repr(C)]` struct laid out as the kernel's, marked with `unsafe impl cudarc::driver::DeviceRepr for … {{}}` and `occ::kernel_value!(…);` (then this error means the sizes differ)"
)]
pub unsafe trait Value<const SIZE: usize, const ALIGN: usize>: DeviceRepr {}

/// Implements [`Value`](crate::cuda::Value) for `#[repr(C)]` types at
/// their own size and alignment: `occ::kernel_value!(Params, Other);`.
/// Each type must implement `cudarc::driver::DeviceRepr`.
///
/// ```
/// use occ::cuda::cudarc::driver::DeviceRepr;
///
/// #[repr(C)]
/// #[derive(Clone, Copy)]
/// struct Params {
///     scale: f32,
///     n: u32,
/// }
/// // SAFETY: plain data, laid out as the kernel's `struct Params`.
/// unsafe impl DeviceRepr for Params {}
/// occ::kernel_value!(Params);
///
/// fn takes<V: occ::cuda::Value<8, 4>>(_: &V) {}
/// takes(&Params { scale: 1.0, n: 3 });
/// ```
#[macro_export]
macro_rules! kernel_value {
    ($($t:ty),+ $(,)?) => {
        $(
            // SAFETY: SIZE and ALIGN are the type's own.
            unsafe impl $crate::cuda::Value<
                { ::core::mem::size_of::<$t>() },
                { ::core::mem::align_of::<$t>() },
            > for $t {}
        )+
    };
}

crate::kernel_value!(
    bool, i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize, f32, f64
);

#[cfg(feature = "half")]
crate::kernel_value!(half::f16, half::bf16);

/// One argument as [`Args`] holds it until the launch.
enum Slot {
    /// A pointer to the value.
    Value(*const c_void),
    /// An index into `Args::ptrs`.
    Ptr(usize),
}

/// The arguments of one launch, in the kernel's parameter order: values
/// by reference, device buffers through [`DevicePtr`]/[`DevicePtrMut`],
/// whose cudarc guards are kept until the launch has been submitted (so
/// cudarc's stream synchronisation sees it). A typed launcher of the
/// generated `kernels.rs` fills one and launches it:
///
/// ```no_run
/// # use occ::cuda::{Args, CudaStream, DevicePtr, DevicePtrMut, Error, Function};
/// # fn f(f: &Function, stream: &CudaStream, cfg: occ::LaunchConfig,
/// #      a: f32, x: &impl DevicePtr<f32>, y: &mut impl DevicePtrMut<f32>, n: i32) -> Result<(), Error> {
/// let mut args = Args::new(stream);
/// args.value(&a).ptr(x).ptr_mut(y).value(&n);
/// // SAFETY: the arguments are the kernel's parameters, in order.
/// unsafe { args.launch(f, cfg) }
/// # }
/// ```
pub struct Args<'a> {
    stream: &'a CudaStream,
    slots: Vec<Slot>,
    /// Each argument's size, for the check against the kernel's list.
    sizes: Vec<usize>,
    ptrs: Vec<CUdeviceptr>,
    guards: Vec<SyncOnDrop<'a>>,
    /// The values pointed to live for 'a.
    _values: PhantomData<&'a ()>,
}

impl<'a> Args<'a> {
    /// No arguments yet, for a launch on `stream`.
    pub fn new(stream: &'a CudaStream) -> Args<'a> {
        Args {
            stream,
            slots: Vec::with_capacity(8),
            sizes: Vec::with_capacity(8),
            ptrs: Vec::new(),
            guards: Vec::new(),
            _values: PhantomData,
        }
    }

    /// The next argument: a value, passed by copy (`float a`, `int n`, a
    /// struct).
    pub fn value<T: DeviceRepr>(&mut self, value: &'a T) -> &mut Self {
        self.slots
            .push(Slot::Value((value as *const T).cast::<c_void>()));
        self.sizes.push(size_of::<T>());
        self
    }

    /// The next argument: a buffer the kernel reads (`const T*`).
    pub fn ptr<T>(&mut self, buffer: &'a impl DevicePtr<T>) -> &mut Self {
        let (ptr, guard) = buffer.kernel_arg(self.stream);
        self.push_ptr(ptr, guard)
    }

    /// The next argument: a buffer the kernel writes (`T*`).
    pub fn ptr_mut<T>(&mut self, buffer: &'a mut impl DevicePtrMut<T>) -> &mut Self {
        let (ptr, guard) = buffer.kernel_arg_mut(self.stream);
        self.push_ptr(ptr, guard)
    }

    /// The next argument: a device address as it is, for what the typed
    /// launchers cannot say: a null pointer (`0`) for an optional
    /// parameter, or one buffer passed twice to a kernel that works in
    /// place (`out == in`), which the borrow rules refuse as a `&` and a
    /// `&mut` at once.
    ///
    /// No cudarc guard comes with it. For a buffer you hold, take its guard
    /// yourself (cudarc's `device_ptr_mut` when the kernel writes it,
    /// `device_ptr` when it only reads) and keep it until
    /// [`Args::launch`] has returned, so that cudarc orders the buffer's
    /// other uses after this launch; for any other address, it must stay
    /// valid, in the function's context, until the kernel has finished.
    /// What [`Args::launch`]'s safety section says holds for it too.
    ///
    /// ```no_run
    /// # use occ::cuda::{Args, CudaSlice, CudaStream, Error, Function};
    /// use occ::cuda::cudarc::driver::DevicePtrMut as _;
    /// # fn f(f: &Function, stream: &CudaStream, cfg: occ::LaunchConfig,
    /// #      x: &mut CudaSlice<f32>, n: u64) -> Result<(), Error> {
    /// // `relu(const float* in, float* out, size_t n)` in place on `x`:
    /// // the write guard, held until the launch is submitted.
    /// let (ptr, _write) = x.device_ptr_mut(stream);
    /// let mut args = Args::new(stream);
    /// args.raw_ptr(ptr).raw_ptr(ptr).value(&n);
    /// // SAFETY: the kernel reads and writes each element once, at its own
    /// // index, so in == out is allowed; `x` outlives the launch on `stream`.
    /// unsafe { args.launch(f, cfg) }
    /// # }
    /// ```
    pub fn raw_ptr(&mut self, ptr: CUdeviceptr) -> &mut Self {
        self.slots.push(Slot::Ptr(self.ptrs.len()));
        self.ptrs.push(ptr);
        self.sizes.push(size_of::<CUdeviceptr>());
        self
    }

    fn push_ptr(&mut self, ptr: CUdeviceptr, guard: SyncOnDrop<'a>) -> &mut Self {
        self.guards.push(guard);
        self.raw_ptr(ptr)
    }

    /// Launches `f` with these arguments: checks them against the kernel's
    /// parameter list (count and sizes, [`Error::Arguments`]), then
    /// [`Function::launch_raw`]. cudarc's guards are dropped after the
    /// launch is submitted.
    ///
    /// # Safety
    ///
    /// The arguments must mean what the kernel's parameters mean: the
    /// right types (sizes are checked, types are not), buffers large
    /// enough for what the kernel accesses, in `f`'s context. A typed
    /// launcher checks the types at compile time.
    pub unsafe fn launch(self, f: &Function, cfg: LaunchConfig) -> Result<(), Error> {
        check(f.kernel(), &self.sizes)?;
        let mut params: Vec<*mut c_void> = self
            .slots
            .iter()
            .map(|slot| match *slot {
                Slot::Value(p) => p.cast_mut(),
                Slot::Ptr(i) => (&self.ptrs[i] as *const CUdeviceptr)
                    .cast::<c_void>()
                    .cast_mut(),
            })
            .collect();
        // SAFETY: the caller vouches for the arguments; `params` points
        // into `self.ptrs` and at values that live for 'a, all alive here.
        let launched = unsafe { f.launch_raw(self.stream, cfg, &mut params) };
        drop(self.guards);
        launched
    }
}

/// The arguments' sizes against `kernel`'s parameter list. A kernel whose
/// list is empty is not checked (an empty list is also what a table
/// without parameter lists has).
pub(crate) fn check(kernel: &Kernel, sizes: &[usize]) -> Result<(), Error> {
    let params = kernel.params;
    if params.is_empty() {
        return Ok(());
    }
    let fail = |detail: String| Error::Arguments {
        kernel: kernel.base_name,
        signature: kernel.signature(),
        detail,
    };
    if params.len() != sizes.len() {
        return Err(fail(format!(
            "it takes {} arguments and the launch passes {}",
            params.len(),
            sizes.len()
        )));
    }
    for (i, (p, &size)) in params.iter().zip(sizes).enumerate() {
        if usize::try_from(p.size).ok() != Some(size) {
            return Err(fail(format!(
                "argument {} is {size} bytes, and its parameter `{p}` is {}",
                i + 1,
                p.size
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::Param;

    const SAXPY: Kernel = Kernel {
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

    #[test]
    fn check_counts_and_sizes() {
        assert!(check(&SAXPY, &[4, 8, 8, 4]).is_ok());
        let text = check(&SAXPY, &[4, 8, 8]).unwrap_err().to_string();
        assert!(
            text.contains("takes 4 arguments and the launch passes 3"),
            "{text}"
        );
        assert!(
            text.contains("saxpy(float a, float const* x, float* y, int n)"),
            "{text}"
        );
        let text = check(&SAXPY, &[8, 8, 8, 4]).unwrap_err().to_string();
        assert!(
            text.contains("argument 1 is 8 bytes, and its parameter `float a` is 4"),
            "{text}"
        );
        // An unknown list is not checked.
        let bare = Kernel {
            params: &[],
            ..SAXPY
        };
        assert!(check(&bare, &[1, 2, 3]).is_ok());
    }

    /// The `Value<SIZE, ALIGN>` a type implements: the size and alignment a
    /// launcher's parameter of it takes.
    fn value<V: Value<S, A>, const S: usize, const A: usize>(_: &V) -> (usize, usize) {
        (S, A)
    }

    #[test]
    fn primitives_are_values_at_their_size() {
        assert_eq!(value(&1.0f32), (4, 4));
        assert_eq!(value(&1.0f64), (8, 8));
        assert_eq!(value(&1u8), (1, 1));
        assert_eq!(value(&true), (1, 1));
        assert_eq!(value(&1i16), (2, 2));
    }

    /// `__half h` and `__nv_bfloat16 b` by value: `Value<2, 2>`, which is
    /// also each type's own size and alignment (the bytes a launch passes).
    #[test]
    #[cfg(feature = "half")]
    fn half_types_are_two_byte_values() {
        let (h, b) = (half::f16::from_f32(1.5), half::bf16::from_f32(1.5));
        assert_eq!(value(&h), (2, 2));
        assert_eq!(value(&b), (2, 2));
        assert_eq!(value(&h), (size_of_val(&h), align_of_val(&h)));
        assert_eq!(value(&b), (size_of_val(&b), align_of_val(&b)));
    }
}
