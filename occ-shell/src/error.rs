//! The one error type of occ-shell: what finding nvcc and reading or
//! writing occ's files can fail with, each with a message that says what
//! went wrong and what to do.
//!
//! occ-build wraps it whole (and sorts each variant into one of its
//! `ErrorKind`s); cargo-occ shows its message. The enum is exhaustive on
//! purpose: only occ's own crates match on it, and a new variant should
//! fail to compile there until occ-build has given it a kind.

use std::fmt;
use std::path::{Path, PathBuf};

/// What occ-shell can fail with.
#[derive(Debug)]
pub enum Error {
    /// No nvcc was found in any of the places occ looks.
    NvccNotFound {
        /// Every place looked, in order, with what was there.
        looked: Vec<String>,
        /// The per-user toolkit dir ([`crate::toolkit::toolkit_dir`]), where
        /// the message tells the user to install nvcc; `None` without a home.
        install_dir: Option<PathBuf>,
    },
    /// No nvcc was found in a CI run (`CI` set) of the crate's own build,
    /// which would otherwise stand on the committed lock and check nothing.
    NvccNotFoundInCi {
        /// Every place looked, in order, with what was there.
        looked: Vec<String>,
        /// The per-user toolkit dir, as in [`Error::NvccNotFound`].
        install_dir: Option<PathBuf>,
    },
    /// nvcc exists but could not be started (not executable, wrong format).
    NvccNotRunnable {
        /// The nvcc that was tried.
        nvcc: PathBuf,
        /// The operating system's reason.
        reason: String,
    },
    /// `NVCC` (or `.nvcc()`) names a file that does not exist.
    NvccMissing {
        /// `NVCC` or `.nvcc()`.
        origin: String,
        /// The path given.
        path: PathBuf,
    },
    /// Reading or writing a file failed.
    Io {
        /// What was being done, naming the path.
        action: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The lock would be written (a bless) but its file is read-only.
    LockReadOnly {
        /// The lock file (after following symlinks).
        path: PathBuf,
    },
    /// A file occ reads whose text the pure core refuses (a corrupt
    /// manifest, lock or `gate.json`), as occ-model words it.
    Model(occ_model::Error),
}

impl From<occ_model::Error> for Error {
    fn from(e: occ_model::Error) -> Self {
        Error::Model(e)
    }
}

impl Error {
    /// Wraps an I/O error with what was being done.
    pub fn io(action: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            action: action.into(),
            source,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NvccNotFound {
                looked,
                install_dir,
            } => {
                writeln!(f, "nvcc not found; looked in:")?;
                for place in looked {
                    writeln!(f, "  - {place}")?;
                }
                not_found_fix(f, install_dir.as_deref())
            }
            Error::NvccNotFoundInCi {
                looked,
                install_dir,
            } => {
                writeln!(
                    f,
                    "nvcc not found, and CI is set: a CI build that stood on the committed lock \
                     would check nothing, so it fails; looked in:"
                )?;
                for place in looked {
                    writeln!(f, "  - {place}")?;
                }
                not_found_fix(f, install_dir.as_deref())?;
                write!(
                    f,
                    "\n  or, to build from the lock on purpose (no device code, nothing checked), \
                     set OCC_NO_NVCC=1"
                )
            }
            Error::NvccNotRunnable { nvcc, reason } => write!(
                f,
                "cannot run nvcc at {}: {reason}; check that it is an executable nvcc for this machine, \
                 or point NVCC at another one",
                nvcc.display()
            ),
            Error::NvccMissing { origin, path } => write!(
                f,
                "{origin} is {} but there is no such file; point {origin} at an nvcc, or unset it \
                 to let occ look in CUDA_HOME, PATH and the other usual places",
                path.display()
            ),
            Error::Io { action, source } => write!(
                f,
                "{action}: {source}; check the path, its permissions and the free space"
            ),
            Error::LockReadOnly { path } => write!(
                f,
                "{} is read-only, so it was not blessed; make it writable (`chmod u+w {}`) and bless again, \
                 or leave it as it is",
                path.display(),
                path.display()
            ),
            Error::Model(e) => write!(f, "{e}"),
        }
    }
}

/// No `source()`: each message already says its cause in one sentence
/// (an `Io`'s operating-system error, a `Model`'s words), and a reporter
/// that walks sources (`anyhow`'s `{:#}`, cargo's "Caused by") would say
/// it twice.
impl std::error::Error for Error {}

/// The result type of occ-shell.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The end of the nvcc-not-found message: the two ways to install nvcc that
/// work for any crate (both into the per-user dir occ looks in), then the
/// variables for an nvcc already installed.
fn not_found_fix(f: &mut fmt::Formatter<'_>, install_dir: Option<&Path>) -> fmt::Result {
    let Some(dir) = install_dir else {
        return write!(
            f,
            "set NVCC=/path/to/nvcc or CUDA_HOME=/path/to/cuda, or set OCC_CUDA_DIR=<folder> and \
             run `cargo occ toolkit install` (pip-installs NVIDIA's nvcc wheels there, no root)"
        );
    };
    let mut wheels = String::new();
    for set in crate::wheels::wheel_sets().iter().filter(|s| !s.legacy) {
        wheels.push_str(&format!(
            "\n    python3 -m pip install --no-deps --target {} {}",
            dir.join(set.name).display(),
            set.requirements.join(" ")
        ));
    }
    write!(
        f,
        "install nvcc without root (NVIDIA's wheels: about 130 MB to download, 347 MB on disk; into {}, where occ looks):\n    \
         {} && cargo occ toolkit install\n  \
         or with pip:{wheels}\n  \
         or, for an nvcc already installed, set NVCC=/path/to/nvcc or CUDA_HOME=/path/to/cuda",
        dir.display(),
        install_cargo_occ()
    )
}

/// The command that installs `cargo occ` today: from the occ source tree
/// this crate was built from when it has cargo-occ beside it (a path or git
/// dependency: cargo checks out the whole repository), else from the
/// repository (the crates are not on crates.io yet).
fn install_cargo_occ() -> String {
    let beside = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(|workspace| workspace.join("cargo-occ"))
        .filter(|dir| dir.join("Cargo.toml").is_file());
    match beside {
        Some(dir) if dir.to_string_lossy().contains(char::is_whitespace) => {
            format!("cargo install --locked --path \"{}\"", dir.display())
        }
        Some(dir) => format!("cargo install --locked --path {}", dir.display()),
        None => "cargo install --locked --git https://github.com/occ-rs/occ cargo-occ".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_install_command_names_a_cargo_occ_that_exists() {
        // Built from this workspace, occ-shell points at its own cargo-occ
        // (the crates are not on crates.io, so `cargo install cargo-occ`
        // would fail).
        let command = install_cargo_occ();
        let dir = command
            .strip_prefix("cargo install --locked --path ")
            .unwrap_or_else(|| panic!("not the path form: {command}"))
            .trim_matches('"');
        assert!(
            Path::new(dir).join("Cargo.toml").is_file()
                && std::fs::read_to_string(Path::new(dir).join("Cargo.toml"))
                    .expect("read")
                    .contains("name = \"cargo-occ\""),
            "{command}"
        );
        let message = Error::NvccNotFound {
            looked: vec![],
            install_dir: Some(PathBuf::from("/home/u/.cache/occ/cuda")),
        }
        .to_string();
        assert!(message.contains(&command), "{message}");
    }
}
