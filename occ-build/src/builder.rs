//! [`Build`]: the build-script API, in the shape of `cc::Build`.

use occ_model::model::arch;
use occ_model::model::declared::Launch;
use occ_model::model::suggest::DynamicSmem;
use occ_model::schema::manifest::Embed;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Compiles `.cu` files with nvcc for each target arch and records every
/// kernel's resources and occupancy. A `Build` is configuration only:
/// `new()` does no I/O, and the work (the stages of `pipeline.rs`, see ARCHITECTURE.md) happens
/// in [`Build::try_compile`] (or [`Build::compile`] in a build script).
#[derive(Debug, Clone, Default)]
pub struct Build {
    pub(crate) files: Vec<PathBuf>,
    pub(crate) globs: Vec<String>,
    pub(crate) excludes: Vec<String>,
    pub(crate) includes: Vec<PathBuf>,
    pub(crate) defines: Vec<(String, Option<String>)>,
    pub(crate) flags: Vec<String>,
    pub(crate) archs: Vec<String>,
    pub(crate) arch_variants: Vec<(String, arch::Variant)>,
    pub(crate) launches: Vec<(String, Launch)>,
    pub(crate) dynamic_smem: Vec<(String, DynamicSmem)>,
    pub(crate) nvcc: Option<PathBuf>,
    pub(crate) deny_spills: bool,
    pub(crate) max_registers: Vec<(String, u32)>,
    pub(crate) debug: bool,
    pub(crate) no_source_lines: bool,
    pub(crate) out_dir: Option<PathBuf>,
    pub(crate) root: Option<PathBuf>,
    pub(crate) lock_file: Option<PathBuf>,
    pub(crate) register_threshold: Option<u32>,
    pub(crate) kernel_register_thresholds: BTreeMap<String, u32>,
    pub(crate) cliff_margin: Option<u32>,
    pub(crate) embed: Option<Embed>,
    pub(crate) compress: Compress,
    pub(crate) name: String,
    pub(crate) static_lib: Option<String>,
    pub(crate) cudart: Cudart,
}

/// Which CUDA runtime library a host-code library links ([`Build::cudart`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Cudart {
    /// `libcudart_static.a` (nvcc's own default): the binary needs only the
    /// driver (`libcuda.so`) at run time. On Linux it also links `rt`,
    /// `pthread` and `dl`.
    #[default]
    Static,
    /// `libcudart.so`: the binary needs the runtime library at run time
    /// (on `LD_LIBRARY_PATH`, or installed system-wide).
    Shared,
    /// No CUDA runtime: the crate links one itself.
    None,
}

/// How the fatbins occ embeds are compressed ([`Build::compress`]): which
/// `fatbinary` options put them together. Chosen by measurement
/// (BENCHMARKS.md section 12): the sizes of the modes differ by a few per
/// cent, their cost by much more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Compress {
    /// Every image compressed (`-compress-all`), in fatbinary's default
    /// mode. Loading it needs driver 525.60.13 or newer with a CUDA 12
    /// toolkit (the floor CUDA 12 itself has); CUDA 13's code needs 580 or
    /// newer in any case.
    #[default]
    All,
    /// Every image compressed for the smallest size
    /// (`-compress-all -compress-mode=size`): a few per cent smaller than
    /// [`Compress::All`], seconds more per file. Loading it needs driver
    /// 550.54.14 or newer with a CUDA 12 toolkit (12.4's), 580 with CUDA 13.
    Size,
    /// Only PTX compressed, SASS as ptxas wrote it (`fatbinary`'s own
    /// default): for drivers older than [`Compress::All`] needs.
    PtxOnly,
}

impl Compress {
    /// `fatbinary`'s options for it.
    pub(crate) fn fatbinary_args(self) -> &'static [&'static str] {
        match self {
            Compress::All => &["-compress-all"],
            Compress::Size => &["-compress-all", "-compress-mode=size"],
            Compress::PtxOnly => &[],
        }
    }
}

impl Build {
    /// A build with nothing configured. Does no I/O and reads no environment.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a `.cu` file (relative paths are from the crate root).
    pub fn file(&mut self, path: impl AsRef<Path>) -> &mut Self {
        self.files.push(path.as_ref().to_path_buf());
        self
    }

    /// Adds several `.cu` files.
    pub fn files<P: AsRef<Path>>(&mut self, paths: impl IntoIterator<Item = P>) -> &mut Self {
        for path in paths {
            self.file(path);
        }
        self
    }

    /// Adds every file matching a glob pattern, relative to the crate root:
    /// `kernels/*.cu` (one folder), `src/**/*.cu` (`**` crosses folders);
    /// matched in sorted order when the build runs. A pattern that matches
    /// nothing, or only files that [`Build::exclude`] removes, is an error.
    pub fn glob(&mut self, pattern: impl Into<String>) -> &mut Self {
        self.globs.push(pattern.into());
        self
    }

    /// Leaves out the files of [`Build::glob`] that match this glob
    /// pattern, relative to the crate root (`src/moe/**`, `src/*_test.cu`;
    /// `*` stays within a folder, `**` crosses folders). Files named with
    /// [`Build::file`] are always built. An exclude that matches nothing is
    /// fine.
    pub fn exclude(&mut self, pattern: impl Into<String>) -> &mut Self {
        self.excludes.push(pattern.into());
        self
    }

    /// Adds an include directory (`-I`).
    pub fn include(&mut self, dir: impl AsRef<Path>) -> &mut Self {
        self.includes.push(dir.as_ref().to_path_buf());
        self
    }

    /// Defines a preprocessor macro (`-DNAME` or `-DNAME=VALUE`).
    pub fn define<'a>(&mut self, name: &str, value: impl Into<Option<&'a str>>) -> &mut Self {
        self.defines
            .push((name.to_string(), value.into().map(str::to_string)));
        self
    }

    /// Adds a raw nvcc flag (passed as one argument, never through a shell).
    pub fn flag(&mut self, flag: impl Into<String>) -> &mut Self {
        self.flags.push(flag.into());
        self
    }

    /// Adds a target arch (`sm_80`, `sm_90a`, `sm_100f`, or just `80`).
    pub fn arch(&mut self, arch: impl Into<String>) -> &mut Self {
        self.archs.push(arch.into());
        self
    }

    /// Adds several target archs.
    pub fn archs<S: Into<String>>(&mut self, archs: impl IntoIterator<Item = S>) -> &mut Self {
        for arch in archs {
            self.arch(arch);
        }
        self
    }

    /// Builds these compute capabilities as their architecture-specific
    /// target, `sm_90` as `sm_90a` and `sm_100` as `sm_100a`, whichever
    /// list the build's archs come from (`.arch()`, `OCC_ARCHS`,
    /// `CUDA_COMPUTE_CAP`): for kernels that use features only that exact
    /// chip has (wgmma, tcgen05, setmaxnreg). Archs of the list that the
    /// build does not target are ignored; one without an `a` target (before
    /// sm_90) is an error. The last of `arch_specific` and
    /// [`Build::arch_family`] naming an arch wins.
    ///
    /// ```no_run
    /// // CUDA_COMPUTE_CAP=90 builds sm_90a; =80 builds sm_80.
    /// occ_build::Build::new()
    ///     .glob("kernels/*.cu")
    ///     .arch_specific(["sm_90", "sm_100"])
    ///     .compile();
    /// ```
    pub fn arch_specific<S: Into<String>>(
        &mut self,
        archs: impl IntoIterator<Item = S>,
    ) -> &mut Self {
        for name in archs {
            self.arch_variants
                .push((name.into(), arch::Variant::Specific));
        }
        self
    }

    /// Builds these compute capabilities as their family target, `sm_100`
    /// as `sm_100f` (CUDA 12.9+: code that runs on every chip of the
    /// family). As [`Build::arch_specific`] otherwise; an arch without an
    /// `f` target (before sm_100) is an error.
    pub fn arch_family<S: Into<String>>(
        &mut self,
        archs: impl IntoIterator<Item = S>,
    ) -> &mut Self {
        for name in archs {
            self.arch_variants
                .push((name.into(), arch::Variant::Family));
        }
        self
    }

    /// Declares the launch of the kernels whose symbol, name, short name or
    /// Rust identifier matches `pattern` (`*` any characters, `?` one):
    /// the block shape and dynamic shared memory they are written for. The
    /// manifest then records, per arch, the occupancy at that launch and
    /// what would lift it (registers to drop, the `__launch_bounds__(N,
    /// minBlocks)` that reaches the next step); reports, `cargo occ
    /// explain` and the gate judge the kernel there rather than at its best
    /// block size. Without a declaration, a kernel's `__launch_bounds__`
    /// (its max threads) or `.reqntid` is its declared launch. A pattern
    /// without wildcards (an exact name) wins over every pattern with them,
    /// whatever their order, so `.launch("transpose", ..)` holds against a
    /// later `.launch("*", ..)` for every other kernel. Two patterns of the
    /// same kind (both exact, or both with wildcards) that give one kernel
    /// different launches are an error naming the kernel and both; the same
    /// launch twice is not. A pattern that matches no kernel is an error
    /// naming the closest ones, and so is a launch a kernel cannot take
    /// (above its launch bounds, other than its `.reqntid`).
    ///
    /// ```no_run
    /// use occ_build::{Build, Launch};
    /// Build::new()
    ///     .glob("kernels/*.cu")
    ///     .arch("sm_80")
    ///     .launch("fast_argmin_*", Launch::block(1024))
    ///     .launch("conv2d", Launch::block_2d(16, 16).dynamic_smem_per_thread(8))
    ///     .compile();
    /// ```
    pub fn launch(&mut self, pattern: impl Into<String>, launch: Launch) -> &mut Self {
        self.launches.push((pattern.into(), launch));
        self
    }

    /// Declares the dynamic shared memory the kernels matching `pattern`
    /// launch with, whatever their block (the block then comes from
    /// `.launch`, else the kernel's `__launch_bounds__`/`.reqntid`, else
    /// occ's best block at that much): `DynamicSmem::up_to(bytes)` for a
    /// size known only at run time, judged at that worst case, and
    /// `DynamicSmem::per_thread(bytes)` (`.plus(bytes)` per block more)
    /// for one that grows with the block. The reports, `cargo occ
    /// explain`, kernels.rs, the gate and every `#[launch_config]` site of
    /// the kernel then judge it with that much; a site that names other
    /// dynamic shared memory is a compile error, and so is one that
    /// launches with dynamic shared memory costing occupancy that build.rs
    /// does not declare. Patterns match as in [`Build::launch`]; a
    /// `.launch` of the same kernel that gives its own dynamic shared
    /// memory, other than this, is an error.
    ///
    /// ```no_run
    /// use occ_build::{Build, DynamicSmem};
    /// Build::new()
    ///     .glob("kernels/*.cu")
    ///     .arch("sm_80")
    ///     .dynamic_smem("softmax_rows", DynamicSmem::up_to(48 * 1024))
    ///     .dynamic_smem("block_sum", DynamicSmem::per_thread(4))
    ///     .compile();
    /// ```
    pub fn dynamic_smem(&mut self, pattern: impl Into<String>, rule: DynamicSmem) -> &mut Self {
        self.dynamic_smem.push((pattern.into(), rule));
        self
    }

    /// Uses this nvcc instead of searching for one.
    pub fn nvcc(&mut self, path: impl AsRef<Path>) -> &mut Self {
        self.nvcc = Some(path.as_ref().to_path_buf());
        self
    }

    /// Makes a spilling kernel an error instead of a warning.
    pub fn deny_spills(&mut self) -> &mut Self {
        self.deny_spills = true;
        self
    }

    /// Caps registers per thread at `max` for the `.cu` file `target` (its
    /// path relative to the crate, or its file name), or for the file that
    /// holds the kernel `target` (any name `cargo occ` accepts): nvcc gets
    /// `-maxrregcount max` for that file, so the cap applies to **every
    /// kernel in the file**. Kernels with `__launch_bounds__` or
    /// `__maxnreg__` ignore it (ptxas prefers their own limit). The cap
    /// ptxas applies is recorded per kernel as `maxrregcount` in the
    /// manifest and lock: a cap below the arch's lower bound becomes that
    /// bound (16 becomes 24), and the build shows ptxas's warning. Pick a
    /// cap with `cargo occ sweep`.
    pub fn max_registers(&mut self, target: impl Into<String>, max: u32) -> &mut Self {
        self.max_registers.push((target.into(), max));
        self
    }

    /// What device code `kernels.rs` embeds in the crate (default
    /// [`Embed::Fatbin`]: one fatbin per `.cu` file, with SASS for each
    /// arch and the PTX of the newest). [`Embed::Cubin`] and [`Embed::Ptx`]
    /// embed one blob per file and arch; [`Embed::Nothing`] keeps only the
    /// numbers. Whatever is embedded, ptxas runs for every arch to find them.
    ///
    /// A [`Build::static_lib`] embeds nothing unless told: the library
    /// carries its own device code.
    pub fn embed(&mut self, embed: Embed) -> &mut Self {
        self.embed = Some(embed);
        self
    }

    /// What this build embeds ([`Build::embed`], or its default).
    pub(crate) fn embed_mode(&self) -> Embed {
        match (self.embed, &self.static_lib) {
            (Some(embed), _) => embed,
            (None, Some(_)) => Embed::Nothing,
            (None, None) => Embed::Fatbin,
        }
    }

    /// Whether the build asked for line information itself (`-G`, a
    /// `-lineinfo` flag, or one passed to ptxas such as
    /// `-Xptxas=-lineinfo`), in its flags or in nvcc's flag variables
    /// (`NVCC_APPEND_FLAGS`, `NVCC_PREPEND_FLAGS`, as `vars` holds them):
    /// then what it embeds keeps it.
    pub(crate) fn keeps_line_info(&self, vars: &[(String, Option<String>)]) -> bool {
        let asks = |token: &str| {
            matches!(token, "-G" | "--device-debug")
                || token.contains("lineinfo")
                || token.contains("generate-line-info")
        };
        self.debug
            || self.flags.iter().any(|f| asks(f))
            || vars
                .iter()
                .filter_map(|(_, value)| value.as_deref())
                .flat_map(str::split_whitespace)
                .any(asks)
    }

    /// This build's part name ([`Build::name`], else its
    /// [`Build::static_lib`] name, else the default part's empty name).
    pub(crate) fn part(&self) -> &str {
        match &self.static_lib {
            Some(lib) if self.name.is_empty() => lib,
            _ => &self.name,
        }
    }

    /// Names this build, for a build script with several `Build`s (say,
    /// PTX kernels and a host-code library). Each compiles its own files;
    /// `kernels.rs`, `manifest.json`, the reports and `occ.lock` hold the
    /// kernels of all of them, and each one's gate judges its own kernels.
    /// One `Build` may stay unnamed; any other needs a name of its own
    /// (letters, digits, `_` and `-`); a [`Build::static_lib`] is named by
    /// its library unless given a name.
    pub fn name(&mut self, name: impl Into<String>) -> &mut Self {
        self.name = name.into();
        self
    }

    /// How the embedded fatbins are compressed (default [`Compress::All`]:
    /// every image, SASS too, as `nvcc -fatbin -Xfatbin=-compress-all`
    /// does). Cubins and PTX embedded on their own ([`Embed::Cubin`],
    /// [`Embed::Ptx`]) are never compressed: the driver loads them as they are.
    pub fn compress(&mut self, compress: Compress) -> &mut Self {
        self.compress = compress;
        self
    }

    /// Compiles device code with `-G` (debug; changes registers and spills).
    pub fn debug(&mut self, debug: bool) -> &mut Self {
        self.debug = debug;
        self
    }

    /// Locates each kernel's spills and its peak register pressure by
    /// source line (on by default): the jobs compile with `-lineinfo` and
    /// the toolkit's nvdisasm reads the cubins; the manifest, the spill
    /// warning and error, `#[launch_config]`'s errors, `cargo occ explain`
    /// and the reports name the lines. `-lineinfo` leaves the machine code
    /// and every number unchanged, and what is embedded carries no line
    /// information: the line sections are cut out of the cubins and the
    /// `.loc` lines out of the PTX (the same code, byte for byte, and no
    /// path of the build machine). A build that asks for line information
    /// itself (a `-lineinfo` or `-G` flag, [`Build::debug`]) embeds it.
    /// `false` compiles without it and runs no nvdisasm.
    pub fn source_lines(&mut self, on: bool) -> &mut Self {
        self.no_source_lines = !on;
        self
    }

    /// Writes into this folder instead of `$OUT_DIR` (tools and tests).
    pub fn out_dir(&mut self, dir: impl AsRef<Path>) -> &mut Self {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Takes relative paths from this folder instead of `$CARGO_MANIFEST_DIR`.
    pub fn root(&mut self, dir: impl AsRef<Path>) -> &mut Self {
        self.root = Some(dir.as_ref().to_path_buf());
        self
    }

    /// The baseline file, relative to the crate root (default `occ.lock`).
    /// See the crate docs, "Updating the baseline".
    pub fn lock_file(&mut self, path: impl AsRef<Path>) -> &mut Self {
        self.lock_file = Some(path.as_ref().to_path_buf());
        self
    }

    /// How many registers per thread a kernel may grow by, compared with the
    /// lock, before the build fails (default
    /// [`occ_model::compare::DEFAULT_REGISTER_THRESHOLD`]). An occupancy drop fails
    /// regardless.
    pub fn register_threshold(&mut self, registers: u32) -> &mut Self {
        self.register_threshold = Some(registers);
        self
    }

    /// How near an occupancy cliff a change may move a kernel before the
    /// gate warns (default 2): a kernel whose registers or launch changed
    /// so that `registers` or fewer more registers per thread would cost a
    /// resident block gets one warning line (and a SARIF result in `cargo
    /// occ check --format sarif`). 0 turns the warning off. It never fails
    /// the build: losing the block does.
    pub fn cliff_margin(&mut self, registers: u32) -> &mut Self {
        self.cliff_margin = Some(registers);
        self
    }

    /// The register threshold of one kernel (by symbol, base name, short
    /// name or Rust identifier), overriding [`Build::register_threshold`].
    pub fn kernel_register_threshold(&mut self, kernel: &str, registers: u32) -> &mut Self {
        self.kernel_register_thresholds
            .insert(kernel.to_string(), registers);
        self
    }

    /// Also builds the files into a static library with their host code,
    /// `lib<name>.a`, that cargo links into the crate: for `.cu` files with
    /// `<<<>>>` launchers and `extern "C"` entry points that Rust calls
    /// (declare them in an `extern "C"` block).
    ///
    /// Each file is compiled **once**, by `nvcc -c` with a `-gencode` for
    /// every arch (SASS for each, plus the PTX of the newest portable arch
    /// so that the library also runs on newer GPUs); the same nvcc run
    /// gives the object and each arch's ptxas numbers and PTX, so the
    /// library's kernels are in the manifest, `kernels.rs`, the reports and
    /// the gate like those of any other build. The host side is compiled by
    /// the C++ compiler that the [`cc`](https://docs.rs/cc) crate picks for
    /// the target (`CXX`, `CXXFLAGS`; `NVCC_CCBIN` or a `-ccbin` flag
    /// overrides it), with cc's flags for the profile (PIC, `-O`, `-g`);
    /// the objects are archived by the archiver cc picks for the target
    /// (`AR`, `ARFLAGS`).
    ///
    /// The build prints the link directives: the library, the CUDA runtime
    /// from the toolkit's library folder ([`Build::cudart`]: static by
    /// default, with `rt`, `pthread` and `dl` on Linux) and the C++ runtime
    /// (`stdc++`, or `CXXSTDLIB`). Without nvcc (docs.rs, `OCC_NO_NVCC`)
    /// the numbers come from `occ.lock` and no library is built: `cargo
    /// check` and `cargo doc` work, a link does not.
    ///
    /// `name` is the library's name without `lib` and `.a` (`"moe"`):
    /// letters, digits, `_` and `-`. Build the device-only (PTX/cubin) files
    /// of a crate with another `Build`.
    ///
    /// ```no_run
    /// occ_build::Build::new()
    ///     .glob("kernels/moe/*.cu")
    ///     .archs(["sm_80", "sm_90"])
    ///     .static_lib("moe")
    ///     .compile();
    /// ```
    pub fn static_lib(&mut self, name: impl Into<String>) -> &mut Self {
        self.static_lib = Some(name.into());
        self
    }

    /// Which CUDA runtime a [`Build::static_lib`] links: [`Cudart::Static`]
    /// (the default, as nvcc links it), [`Cudart::Shared`] or
    /// [`Cudart::None`].
    ///
    /// [`Cudart::Static`]: crate::Cudart::Static
    /// [`Cudart::Shared`]: crate::Cudart::Shared
    /// [`Cudart::None`]: crate::Cudart::None
    pub fn cudart(&mut self, cudart: Cudart) -> &mut Self {
        self.cudart = cudart;
        self
    }
}
