//! What a build script gets when a build fails: [`Error`], opaque (a
//! [`ErrorKind`] to act on, the message to show, and the cargo directives
//! the build gathered before it failed), after cc's `Error`.
//!
//! Inside the crate every failure is a variant of `crate::leaf::error::Error`,
//! one per case with the fields its message needs; it becomes this type at
//! the public boundary (`Build::try_compile`, `Report::manifest`,
//! `Build::resolved_archs`), where `crate::leaf::error::Error::kind` sorts it.
//! The variants and their fields are free to change; the kinds and the
//! messages are what a build script sees.

use crate::leaf::directives::Directives;
use crate::leaf::error::ErrorKind;
use std::fmt;

/// Why a build failed: its [`kind`](Error::kind), its message (the
/// `Display`, which says what went wrong and what to do, the text that
/// [`Build::compile`](crate::Build::compile) prints as `cargo::error=`
/// lines), and the [`directives`](Error::directives) gathered before it
/// failed.
///
/// A build script that handles an error itself still prints the
/// directives, so that cargo reruns it when a file or variable it read
/// changes (a header fixed, nvcc installed):
///
/// ```no_run
/// use occ_build::{Build, ErrorKind};
///
/// println!("cargo::rustc-check-cfg=cfg(no_cuda)");
/// match Build::new().glob("kernels/*.cu").archs(["sm_80"]).try_compile() {
///     Ok(report) => report.directives().print(),
///     // No nvcc and no committed lock to stand on: build without the kernels.
///     Err(e) if e.kind() == ErrorKind::NvccNotFound => {
///         e.directives().print();
///         println!("cargo::rustc-cfg=no_cuda");
///     }
///     Err(e) => {
///         e.directives().print();
///         for line in e.to_string().lines() {
///             println!("cargo::error={line}");
///         }
///     }
/// }
/// ```
pub struct Error {
    kind: ErrorKind,
    message: String,
    /// Boxed: a `Result<Report, Error>` stays small.
    directives: Box<Directives>,
}

impl Error {
    /// The error of a failed build, with the directives it gathered.
    pub(crate) fn new(error: crate::leaf::error::Error, directives: Directives) -> Self {
        Error {
            kind: error.kind(),
            message: error.to_string(),
            directives: Box::new(directives),
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The cargo directives the build gathered before it failed (empty for
    /// an error that is not a build's: [`Report::manifest`](crate::Report::manifest),
    /// [`Build::resolved_archs`](crate::Build::resolved_archs)). Print them
    /// ([`Directives::print`]) from a build script that handles the error
    /// itself: [`Build::compile`](crate::Build::compile) does.
    pub fn directives(&self) -> &Directives {
        &self.directives
    }
}

impl From<crate::leaf::error::Error> for Error {
    fn from(error: crate::leaf::error::Error) -> Self {
        Error::new(error, Directives::default())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.kind)
            .field("message", &self.message)
            .finish_non_exhaustive()
    }
}

/// No `source()`, as inside: each message already says its cause.
impl std::error::Error for Error {}

/// The result type of occ-build.
pub type Result<T, E = Error> = std::result::Result<T, E>;
