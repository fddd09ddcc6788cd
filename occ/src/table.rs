//! The types of the kernel table that occ-build generates.
//!
//! A build script that runs `occ_build::Build` writes
//! `$OUT_DIR/occ/kernels.rs`: the blobs' table `DEVICE_CODE` (a `static`
//! of [`DeviceCode`]s), the kernels' [`Table`] `KERNELS` (read as a slice
//! of [`Kernel`]s, packed rows decoded on first use, so that rustc does
//! not type-check and const-evaluate a struct literal per kernel × arch),
//! a `KernelId` per kernel (`<ident>::KERNEL`, which derefs to its
//! `Kernel`) and a `get(name)` lookup. Every field is public and every
//! type is plain data. The blobs' bytes come from `device_code.rs` beside
//! it, through the hidden `occ::__device_code!`: on Linux assembled into
//! the object code, so that they are not also copied into the rlib's
//! metadata.
//!
//! ```
//! use occ::table::{Best, CodeKind, DeviceCode, Kernel, KernelArch, Param};
//!
//! static CODE: DeviceCode = DeviceCode {
//!     source: "kernels/saxpy.cu",
//!     kind: CodeKind::Fatbin,
//!     arch: None,
//!     bytes: &[],
//! };
//! static SAXPY: Kernel = Kernel {
//!     name: "_Z5saxpyfPKfPfi",
//!     demangled: "saxpy(float, float const*, float*, int)",
//!     base_name: "saxpy",
//!     ident: "saxpy",
//!     source: "kernels/saxpy.cu",
//!     params: &[
//!         Param { name: "a", c_type: "float", size: 4, align: 4 },
//!         Param { name: "x", c_type: "float const*", size: 8, align: 8 },
//!         Param { name: "y", c_type: "float*", size: 8, align: 8 },
//!         Param { name: "n", c_type: "int", size: 4, align: 4 },
//!     ],
//!     archs: &[KernelArch {
//!         arch: "sm_80",
//!         registers: 16,
//!         static_smem: 0,
//!         stack_frame: 0,
//!         spill_stores: 0,
//!         spill_loads: 0,
//!         barriers: None,
//!         max_threads_per_block: None,
//!         min_blocks_per_sm: None,
//!         max_registers: None,
//!         cluster_dims: None,
//!         best: Some(Best {
//!             block_size: 1024,
//!             active_blocks_per_sm: 2,
//!             active_warps_per_sm: 64,
//!             occupancy: 1.0,
//!             limiters: &["warps"],
//!             dynamic_smem_headroom: 0,
//!         }),
//!         declared: None,
//!         code: Some(&CODE),
//!     }],
//! };
//! assert_eq!(SAXPY.signature(), "saxpy(float a, float const* x, float* y, int n)");
//! assert_eq!(SAXPY.on("sm_80").map(|a| a.registers), Some(16));
//! let best = SAXPY.on("sm_80").and_then(|a| a.best);
//! assert_eq!(best.map(|b| b.block_size), Some(1024));
//! ```

use core::fmt;

/// How a blob of device code is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodeKind {
    /// A fatbin: SASS for each arch of the build and the PTX of the newest
    /// (a plain arch preferred; load it with `cuModuleLoadData`, the driver
    /// picks what runs).
    Fatbin,
    /// A cubin for one arch.
    Cubin,
    /// PTX for one arch, JIT-compiled by the driver.
    Ptx,
}

/// One blob of embedded device code: a `.cu` file's fatbin, or its cubin
/// or PTX for one arch.
#[derive(Clone, Copy)]
pub struct DeviceCode {
    /// The `.cu` file, relative to the crate.
    pub source: &'static str,
    /// What the bytes are.
    pub kind: CodeKind,
    /// The arch of a cubin or PTX; `None` for a fatbin.
    pub arch: Option<&'static str>,
    /// The bytes (empty when the build stood on occ.lock: `HAS_DEVICE_CODE`).
    /// PTX ends with exactly one NUL byte, as `cuModuleLoadData` reads it
    /// (a C string), so the bytes of any kind go to the driver as they
    /// are; [`DeviceCode::ptx`] is the text without it.
    pub bytes: &'static [u8],
}

impl DeviceCode {
    /// The text of a PTX blob, without its closing NUL (`None` for a
    /// fatbin or cubin), for an API that takes PTX as a string.
    pub fn ptx(&self) -> Option<&'static str> {
        match self.kind {
            CodeKind::Ptx => {
                let text = self.bytes.strip_suffix(&[0]).unwrap_or(self.bytes);
                core::str::from_utf8(text).ok()
            }
            _ => None,
        }
    }
}

/// The bytes are shown by their count: a blob can be megabytes.
impl fmt::Debug for DeviceCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceCode")
            .field("source", &self.source)
            .field("kind", &self.kind)
            .field("arch", &self.arch)
            .field("bytes", &format_args!("<{} bytes>", self.bytes.len()))
            .finish()
    }
}

/// The bytes of a device-code file of `$len` bytes at `$file` under
/// `OUT_DIR` (`"/occ/kernels_saxpy.fatbin"`), as `device_code.rs` embeds
/// them (occ-build writes the calls; not for use by hand).
///
/// On Linux (ELF) the file is assembled into the crate's object code by
/// `global_asm!` (`.incbin`), 16-byte aligned, in a read-only section of
/// its own named for `$symbol` (occ-build's hash of the file's name and
/// bytes) and in the comdat group of that name, and the bytes are an
/// `extern` static: so rustc keeps them in the rlib's object only, where a
/// `static`'s value (`include_bytes!`) would also be copied into the rlib's
/// metadata; the linker drops them when nothing refers to them, and keeps
/// one copy of the same file in two crates.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __device_code {
    ($symbol:ident, $file:literal, $len:literal) => {{
        mod __occ_device_code {
            extern "C" {
                #[link_name = ::core::stringify!($symbol)]
                pub static BYTES: [u8; $len];
            }
            ::core::arch::global_asm!(
                ".pushsection .rodata.{bytes},\"aG\",%progbits,{bytes},comdat",
                ".balign 16",
                ".globl {bytes}",
                ".type {bytes},%object",
                ::core::concat!(".size {bytes}, ", ::core::stringify!($len)),
                "{bytes}:",
                ::core::concat!(
                    ".incbin \"", ::core::env!("OUT_DIR"), $file, "\", 0, ",
                    ::core::stringify!($len)
                ),
                ".popsection",
                bytes = sym BYTES,
            );
        }
        // SAFETY: the symbol is the assembled file, exactly `$len` bytes
        // (`.incbin` reads at most that many, and occ-build measured the
        // file it names by its hash), never written.
        unsafe { &__occ_device_code::BYTES }
    }};
}

/// The bytes of a device-code file of `$len` bytes at `$file` under
/// `OUT_DIR`, as `device_code.rs` embeds them: here (not Linux)
/// `include_bytes!`.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
#[doc(hidden)]
#[macro_export]
macro_rules! __device_code {
    ($symbol:ident, $file:literal, $len:literal) => {
        ::core::include_bytes!(::core::concat!(::core::env!("OUT_DIR"), $file))
    };
}

/// The launch a kernel is written for (build.rs `.launch()`,
/// `__launch_bounds__` or `.reqntid`) and its occupancy there.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeclaredLaunch {
    /// Threads per block in x, y, z.
    pub block: [u32; 3],
    /// Dynamic shared memory per block at that launch, bytes.
    pub dynamic_smem: u32,
    /// Resident blocks per SM.
    pub active_blocks_per_sm: u32,
    /// Occupancy, 0..=1.
    pub occupancy: f32,
}

/// A kernel's best launch on one arch: the block size with the highest
/// occupancy (no dynamic shared memory) and its numbers there, as
/// `cuda_occupancy.h` computes them (the manifest's `best`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Best {
    /// Threads per block.
    pub block_size: u32,
    /// Resident blocks per SM at that block size.
    pub active_blocks_per_sm: u32,
    /// Resident warps per SM there.
    pub active_warps_per_sm: u32,
    /// Occupancy there, 0..=1.
    pub occupancy: f32,
    /// What limits occupancy there (`registers`, `shared memory`, `warps`, ...).
    pub limiters: &'static [&'static str],
    /// Dynamic shared memory a block can still take at that occupancy, bytes.
    pub dynamic_smem_headroom: u32,
}

/// A kernel's resources and best launch on one arch, as ptxas reported them
/// and as `cuda_occupancy.h` computes them.
#[derive(Debug, Clone, Copy)]
pub struct KernelArch {
    /// The arch (`sm_80`).
    pub arch: &'static str,
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block, bytes.
    pub static_smem: u32,
    /// Stack frame, bytes.
    pub stack_frame: u32,
    /// Spill stores, bytes.
    pub spill_stores: u32,
    /// Spill loads, bytes.
    pub spill_loads: u32,
    /// Named barriers, when ptxas reported them.
    pub barriers: Option<u32>,
    /// `__launch_bounds__` maximum threads per block.
    pub max_threads_per_block: Option<u32>,
    /// `__launch_bounds__` minimum blocks per SM.
    pub min_blocks_per_sm: Option<u32>,
    /// `__maxnreg__` register cap.
    pub max_registers: Option<u32>,
    /// `__cluster_dims__` (x, y, z).
    pub cluster_dims: Option<[u32; 3]>,
    /// The best launch; `None` when the kernel cannot launch on this arch
    /// at any block size (too much shared memory per block, say).
    pub best: Option<Best>,
    /// The launch the kernel is written for, when one is declared.
    pub declared: Option<DeclaredLaunch>,
    /// The embedded device code that holds this kernel for this arch
    /// (`None` when the build embeds nothing).
    pub code: Option<&'static DeviceCode>,
}

/// One parameter of a kernel, in declaration order: its size and alignment
/// from the PTX `.param` list, its name and C type where they are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Param {
    /// The parameter's name in the source; `""` when unknown.
    pub name: &'static str,
    /// Its C type as the demangled name spells it (`float const*`); `""`
    /// when unknown (an `extern "C"` kernel's parameter whose declaration
    /// was not read).
    pub c_type: &'static str,
    /// Size in bytes (the PTX `.param`'s).
    pub size: u32,
    /// Alignment in bytes.
    pub align: u32,
}

impl fmt::Display for Param {
    /// `float const* x`; `<8 bytes> x` when the type is unknown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.c_type.is_empty() {
            write!(f, "<{} bytes>", self.size)?;
        } else {
            f.write_str(self.c_type)?;
        }
        if !self.name.is_empty() {
            write!(f, " {}", self.name)?;
        }
        Ok(())
    }
}

/// One `__global__` function and its numbers on each arch it was built for.
#[derive(Debug, Clone, Copy)]
pub struct Kernel {
    /// The symbol to load (`cuModuleGetFunction`): a C++ kernel's mangled
    /// name (`_ZN5fluid9stencil1dIfLi3EEEvPKT_PS1_i`), an `extern "C"`
    /// kernel's plain one (`saxpy`). To show a person, use
    /// [`base_name`](Self::base_name) or [`demangled`](Self::demangled).
    pub name: &'static str,
    /// The demangled name with its parameter types
    /// (`fluid::stencil1d<float, 3>(float const*, float*, int)`; `saxpy`
    /// for an `extern "C"` kernel, whose symbol carries no types).
    pub demangled: &'static str,
    /// The readable name: the demangled name without its parameter list
    /// (`fluid::stencil1d<float, 3>`, `saxpy`); what the reports show, and
    /// a name [`lookup`] (the generated `get`) accepts when one kernel has
    /// it. [`signature`](Self::signature) adds the parameters.
    pub base_name: &'static str,
    /// The Rust identifier (`kernels::<ident>::KERNEL`).
    pub ident: &'static str,
    /// The `.cu` file, relative to the crate.
    pub source: &'static str,
    /// The kernel's parameters in order (the launch's argument list).
    pub params: &'static [Param],
    /// Per arch, in build order; an arch the kernel was not compiled for
    /// (an `#if __CUDA_ARCH__` around it) is absent.
    pub archs: &'static [KernelArch],
}

impl Kernel {
    /// The kernel's numbers on `arch` (`"sm_80"`), if it was built there.
    pub fn on(&self, arch: &str) -> Option<&'static KernelArch> {
        self.archs.iter().find(|a| a.arch == arch)
    }

    /// The kernel's parameter list as a declaration reads:
    /// `saxpy(float a, float const* x, float* y, int n)`; a parameter of
    /// unknown type shows its size (`<8 bytes>`).
    pub fn signature(&self) -> String {
        let mut out = String::with_capacity(self.base_name.len() + 2 + 16 * self.params.len());
        out.push_str(self.base_name);
        out.push('(');
        for (i, p) in self.params.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(&p.to_string());
        }
        out.push(')');
        out
    }
}

/// The kernel table of a generated `kernels.rs` (`KERNELS`): every kernel,
/// sorted by symbol, as a slice of [`Kernel`] through `Deref`
/// (`KERNELS.iter()`, `KERNELS.len()`, `&KERNELS[..]`).
///
/// The rows are written packed, as two string literals (the strings, and
/// the numbers as decimal words), and made into `Kernel`s on first use:
/// a typed `static` of hundreds of struct literals cost rustc about a
/// second per 700 kernels to type-check and const-evaluate, where two
/// literals cost it next to nothing (BENCHMARKS.md section 17). The
/// format is occ-build's and private: the `occ` crate must be the same
/// release as the occ-build that wrote the file.
pub struct Table {
    code: &'static [DeviceCode],
    strings: &'static str,
    rows: &'static str,
    decoded: std::sync::OnceLock<&'static [Kernel]>,
}

impl Table {
    /// The table of the packed `rows` over `strings`, whose rows point
    /// into `code` (what `kernels.rs` writes; not for use by hand).
    #[doc(hidden)]
    pub const fn new(
        code: &'static [DeviceCode],
        strings: &'static str,
        rows: &'static str,
    ) -> Table {
        Table {
            code,
            strings,
            rows,
            decoded: std::sync::OnceLock::new(),
        }
    }

    /// The rows as `Kernel`s. The slices the rows point to (parameters,
    /// archs, limiters) are allocated once, here, and never freed: the
    /// table is a `static`.
    fn decode(&self) -> Box<[Kernel]> {
        let mut words = Words {
            words: self.rows.split_ascii_whitespace(),
            strings: self.strings,
        };
        let count = words.count();
        let mut kernels = Vec::with_capacity(count);
        for _ in 0..count {
            let name = words.str();
            let demangled = words.str();
            let base_name = words.str();
            let ident = words.str();
            let source = words.str();
            let params: Vec<Param> = (0..words.count())
                .map(|_| Param {
                    name: words.str(),
                    c_type: words.str(),
                    size: words.u32(),
                    align: words.u32(),
                })
                .collect();
            let archs: Vec<KernelArch> =
                (0..words.count()).map(|_| words.arch(self.code)).collect();
            kernels.push(Kernel {
                name,
                demangled,
                base_name,
                ident,
                source,
                params: Box::leak(params.into_boxed_slice()),
                archs: Box::leak(archs.into_boxed_slice()),
            });
        }
        kernels.into_boxed_slice()
    }
}

/// A packed table reads as the slice of its kernels.
impl core::ops::Deref for Table {
    type Target = [Kernel];

    fn deref(&self) -> &[Kernel] {
        // Decoded once per table; `kernels.rs`'s is a `static`.
        self.decoded.get_or_init(|| Box::leak(self.decode()))
    }
}

/// The kernels' count, not their rows.
impl fmt::Debug for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("kernels", &self.len())
            .finish()
    }
}

/// The reader of a packed table's words: each a decimal `u32`; a string
/// is two words, its byte offset into the strings and its length; an
/// option is a word 0 (`None`) or 1 followed by its value. A word that is
/// missing or no number reads as 0 and a string out of range as `""`: a
/// table written by another release reads as wrong numbers, never a panic.
struct Words<'a> {
    words: core::str::SplitAsciiWhitespace<'a>,
    strings: &'static str,
}

impl Words<'_> {
    fn u32(&mut self) -> u32 {
        self.words.next().and_then(|w| w.parse().ok()).unwrap_or(0)
    }

    fn count(&mut self) -> usize {
        self.u32() as usize
    }

    fn str(&mut self) -> &'static str {
        let start = self.count();
        let len = self.count();
        start
            .checked_add(len)
            .and_then(|end| self.strings.get(start..end))
            .unwrap_or("")
    }

    fn opt(&mut self) -> Option<u32> {
        (self.u32() != 0).then(|| self.u32())
    }

    fn f32(&mut self) -> f32 {
        f32::from_bits(self.u32())
    }

    /// One kernel × arch: the fields of [`KernelArch`] in order.
    fn arch(&mut self, code: &'static [DeviceCode]) -> KernelArch {
        KernelArch {
            arch: self.str(),
            registers: self.u32(),
            static_smem: self.u32(),
            stack_frame: self.u32(),
            spill_stores: self.u32(),
            spill_loads: self.u32(),
            barriers: self.opt(),
            max_threads_per_block: self.opt(),
            min_blocks_per_sm: self.opt(),
            max_registers: self.opt(),
            cluster_dims: (self.u32() != 0).then(|| [self.u32(), self.u32(), self.u32()]),
            best: (self.u32() != 0).then(|| Best {
                block_size: self.u32(),
                active_blocks_per_sm: self.u32(),
                active_warps_per_sm: self.u32(),
                occupancy: self.f32(),
                limiters: {
                    let limiters: Vec<&'static str> =
                        (0..self.count()).map(|_| self.str()).collect();
                    Box::leak(limiters.into_boxed_slice())
                },
                dynamic_smem_headroom: self.u32(),
            }),
            declared: (self.u32() != 0).then(|| DeclaredLaunch {
                block: [self.u32(), self.u32(), self.u32()],
                dynamic_smem: self.u32(),
                active_blocks_per_sm: self.u32(),
                occupancy: self.f32(),
            }),
            code: self.opt().and_then(|i| code.get(i as usize)),
        }
    }
}

/// The kernel named `name` in `kernels` (sorted by symbol, as `KERNELS`
/// is): its symbol, else its base name or Rust identifier when one kernel
/// has it. `None` when none does, or several do (the same `extern "C"`
/// name in two files; name those by `<ident>::KERNEL`). The generated
/// `get(name)` is this over `KERNELS`.
pub fn lookup(kernels: &'static [Kernel], name: &str) -> Option<&'static Kernel> {
    let i = kernels.partition_point(|k| k.name < name);
    let is = |j: usize| kernels.get(j).is_some_and(|k| k.name == name);
    if is(i) {
        return if is(i + 1) { None } else { kernels.get(i) };
    }
    let mut found = kernels
        .iter()
        .filter(|k| k.base_name == name || k.ident == name);
    match (found.next(), found.next()) {
        (Some(k), None) => Some(k),
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A row with the given arch and code; the numbers are arbitrary.
    pub(crate) const fn row(arch: &'static str, code: Option<&'static DeviceCode>) -> KernelArch {
        KernelArch {
            arch,
            registers: 32,
            static_smem: 0,
            stack_frame: 0,
            spill_stores: 0,
            spill_loads: 0,
            barriers: None,
            max_threads_per_block: None,
            min_blocks_per_sm: None,
            max_registers: None,
            cluster_dims: None,
            best: Some(Best {
                block_size: 256,
                active_blocks_per_sm: 8,
                active_warps_per_sm: 64,
                occupancy: 1.0,
                limiters: &[],
                dynamic_smem_headroom: 0,
            }),
            declared: None,
            code,
        }
    }

    pub(crate) const fn kernel(
        name: &'static str,
        base_name: &'static str,
        ident: &'static str,
        archs: &'static [KernelArch],
    ) -> Kernel {
        Kernel {
            name,
            demangled: name,
            base_name,
            ident,
            source: "kernels/k.cu",
            params: &[],
            archs,
        }
    }

    #[test]
    fn signature_shows_types_names_and_unknown_sizes() {
        static PARAMS: [Param; 3] = [
            Param {
                name: "in",
                c_type: "float const*",
                size: 8,
                align: 8,
            },
            Param {
                name: "",
                c_type: "int",
                size: 4,
                align: 4,
            },
            Param {
                name: "",
                c_type: "",
                size: 16,
                align: 8,
            },
        ];
        let k = Kernel {
            params: &PARAMS,
            ..kernel("t", "linalg::transpose<float, 32>", "t", &[])
        };
        assert_eq!(
            k.signature(),
            "linalg::transpose<float, 32>(float const* in, int, <16 bytes>)"
        );
        let none = kernel("f", "f", "f", &[]);
        assert_eq!(none.signature(), "f()");
    }

    #[test]
    fn on_finds_the_arch_row() {
        static ROWS: [KernelArch; 2] = [row("sm_80", None), row("sm_90a", None)];
        let k = kernel("k", "k", "k", &ROWS);
        assert_eq!(k.on("sm_90a").map(|a| a.arch), Some("sm_90a"));
        assert!(k.on("sm_90").is_none());
    }

    #[test]
    fn lookup_by_symbol_base_name_and_ident() {
        static KERNELS: [Kernel; 4] = [
            kernel("_Z3addPf", "add", "add", &[]),
            kernel("_Z3subPf", "sub", "sub_f", &[]),
            kernel("dup", "dup", "dup_a", &[]),
            kernel("dup", "dup", "dup_b", &[]),
        ];
        let name = |n: &str| lookup(&KERNELS, n).map(|k| k.ident);
        assert_eq!(name("_Z3addPf"), Some("add"));
        assert_eq!(name("sub"), Some("sub_f"));
        assert_eq!(name("sub_f"), Some("sub_f"));
        assert_eq!(name("dup_b"), Some("dup_b"));
        // Two kernels with the symbol `dup`: ambiguous.
        assert_eq!(name("dup"), None);
        assert_eq!(name("mul"), None);
    }

    #[test]
    fn device_code_debug_counts_bytes() {
        static CODE: DeviceCode = DeviceCode {
            source: "k.cu",
            kind: CodeKind::Ptx,
            arch: Some("sm_80"),
            bytes: b".version 8.0",
        };
        let text = format!("{CODE:?}");
        assert!(text.contains("<12 bytes>"), "{text}");
        assert_eq!(CODE.ptx(), Some(".version 8.0"));
    }

    #[test]
    fn ptx_text_leaves_out_the_closing_nul() {
        static CODE: DeviceCode = DeviceCode {
            source: "k.cu",
            kind: CodeKind::Ptx,
            arch: Some("sm_80"),
            bytes: b".version 8.0\n\0",
        };
        assert_eq!(CODE.ptx(), Some(".version 8.0\n"));
    }
}
