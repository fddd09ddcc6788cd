//! The one error type of occ-model.

use std::fmt;
use std::path::PathBuf;

/// What the pure core can reject, each with a message that says what went
/// wrong and what to do.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// A manifest, lock or gate file whose text cannot be used.
    Corrupt {
        /// The file the text came from (for the message only).
        path: PathBuf,
        /// What is wrong with it, and what to do.
        detail: String,
    },
    /// ptxas output that occ could not read.
    Parse {
        /// The `.cu` file whose output it was.
        file: String,
        /// The target arch.
        arch: String,
        /// What did not parse, quoting the line.
        detail: String,
    },
    /// A job's ptxas log that does not account for exactly the kernels
    /// its PTX defines (a launcher or wrapper that hid or filtered nvcc's
    /// stderr, or a log of another compile). Boxed: the enum stays small.
    Unaccounted(Box<Unaccounted>),
    /// The occupancy model rejected a kernel's numbers.
    Occupancy {
        /// The kernel.
        kernel: String,
        /// The arch.
        arch: String,
        /// The model's reason.
        detail: String,
    },
    /// A `Build::launch` pattern that matches no kernel of the build.
    UnmatchedLaunch {
        /// The builder method that gave it: `launch`, `dynamic_smem`.
        method: &'static str,
        /// The pattern given.
        pattern: String,
        /// The closest kernel names, best first.
        closest: Vec<String>,
    },
    /// Two `Build::launch` patterns of the same kind (both exact names, or
    /// both with wildcards) that give one kernel different launches.
    ConflictingLaunches {
        /// The kernel (its name without parameters).
        kernel: String,
        /// The first pattern, in build.rs's order, and its launch in words.
        /// Both patterns are exact names (no `*` or `?`), or both have
        /// wildcards.
        first: (String, String),
        /// The later pattern that disagrees with it, and its launch in words.
        second: (String, String),
    },
    /// A declared launch that cannot run a kernel it names.
    BadLaunch {
        /// The kernel (its name without parameters).
        kernel: String,
        /// The arch.
        arch: String,
        /// The launch in words and who declared it (`a block of 256 threads
        /// with 300000 bytes of dynamic shared memory, declared by build.rs
        /// `hot``).
        launch: String,
        /// Why not.
        detail: String,
    },
}

/// What [`Error::Unaccounted`] says of a job's log.
#[derive(Debug, Clone, PartialEq)]
pub struct Unaccounted {
    /// The `.cu` file.
    pub file: String,
    /// The target arch.
    pub arch: String,
    /// The PTX's kernels that the log has no lines for.
    pub missing: Vec<String>,
    /// The log's kernels that the PTX does not define.
    pub extra: Vec<String>,
    /// The PTX's kernels whose lines in the log lack a resource line
    /// (`Used N registers`, or `N bytes stack frame, N bytes spill ...`).
    pub uncounted: Vec<String>,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Corrupt { path, detail } => write!(f, "{}: {detail}", path.display()),
            Error::Parse { file, arch, detail } => write!(
                f,
                "cannot read the ptxas output for {file} ({arch}): {detail}; this is an occ bug or an \
                 nvcc version it does not know: please report it with the line above"
            ),
            Error::Unaccounted(u) => {
                let Unaccounted {
                    file,
                    arch,
                    missing,
                    extra,
                    uncounted,
                } = &**u;
                let names = |v: &[String]| {
                    let shown: Vec<&str> = v.iter().take(5).map(String::as_str).collect();
                    let more = v.len().saturating_sub(shown.len());
                    if more > 0 {
                        format!("{} and {more} more", shown.join(", "))
                    } else {
                        shown.join(", ")
                    }
                };
                let mut what = Vec::new();
                if !missing.is_empty() {
                    what.push(format!(
                        "its PTX defines {} kernel(s) the log has no ptxas lines for ({})",
                        missing.len(),
                        names(missing)
                    ));
                }
                if !extra.is_empty() {
                    what.push(format!(
                        "the log has lines for {} kernel(s) its PTX does not define ({})",
                        extra.len(),
                        names(extra)
                    ));
                }
                if !uncounted.is_empty() {
                    what.push(format!(
                        "the log's lines for {} kernel(s) lack a resource line (`Used N registers` \
                         or `N bytes stack frame, N bytes spill stores`) ({})",
                        uncounted.len(),
                        names(uncounted)
                    ));
                }
                write!(
                    f,
                    "the ptxas log of {file} for {arch} does not account for its kernels: {}; occ \
                     reads every kernel's numbers from nvcc's stderr (-Xptxas -v), so a launcher \
                     (OCC_NVCC_LAUNCHER) or an NVCC wrapper must pass nvcc's stderr through \
                     unchanged: fix it and build again",
                    what.join("; and ")
                )
            }
            Error::Occupancy {
                kernel,
                arch,
                detail,
            } => write!(
                f,
                "cannot compute occupancy of {kernel} on {arch}: {detail}; check the kernel's \
                 resources and launch bounds, or report it as an occ bug with its ptxas lines"
            ),
            Error::UnmatchedLaunch {
                method,
                pattern,
                closest,
            } => {
                write!(f, "{method}(\"{pattern}\", ..) in build.rs matches no kernel")?;
                if closest.is_empty() {
                    write!(f, " (the build has no kernels)")?;
                } else {
                    write!(f, "; closest: {}", closest.join(", "))?;
                }
                write!(
                    f,
                    "; fix the pattern: it matches a kernel's symbol, name, short name or Rust \
                     identifier (`*` any characters, `?` one)"
                )
            }
            Error::ConflictingLaunches {
                kernel,
                first,
                second,
            } => {
                write!(
                    f,
                    "kernel `{kernel}` is given two launches in build.rs: launch(\"{}\", ..) \
                     declares {} and launch(\"{}\", ..) declares {}; ",
                    first.0, first.1, second.0, second.1
                )?;
                if !first.0.contains(['*', '?']) {
                    write!(f, "keep one of the two")
                } else {
                    write!(
                        f,
                        "keep one, or make the one meant for it exact, launch(\"{kernel}\", ..): \
                         an exact name wins over every pattern with `*` or `?`"
                    )
                }
            }
            Error::BadLaunch {
                kernel,
                arch,
                launch,
                detail,
            } => write!(
                f,
                "kernel `{kernel}` cannot launch on {arch} as declared ({launch}): {detail}; \
                 fix the launch in build.rs or the kernel's launch bounds"
            ),
        }
    }
}

impl std::error::Error for Error {}

/// The result type of occ-model.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// One of each variant. The `match` in the test fails to compile when a
    /// variant is added: give it a sample here and in occ-build's
    /// `error::tests::every_variant`, whose test also checks that each
    /// message states a fix (occ-build matches this `#[non_exhaustive]`
    /// enum with a wildcard, so only this crate can be made to notice).
    fn every_variant() -> Vec<Error> {
        let s = |t: &str| t.to_string();
        vec![
            Error::Corrupt {
                path: PathBuf::from("occ.lock"),
                detail: s("not valid JSON (line 1); delete it and rebuild"),
            },
            Error::Parse {
                file: s("k.cu"),
                arch: s("sm_80"),
                detail: s("line 3"),
            },
            Error::Unaccounted(Box::new(Unaccounted {
                file: s("k.cu"),
                arch: s("sm_80"),
                missing: vec![s("k1"), s("k2")],
                extra: vec![s("old")],
                uncounted: vec![s("k3")],
            })),
            Error::Occupancy {
                kernel: s("k"),
                arch: s("sm_80"),
                detail: s("block size 0"),
            },
            Error::UnmatchedLaunch {
                method: "launch",
                pattern: s("fast_*"),
                closest: vec![],
            },
            Error::ConflictingLaunches {
                kernel: s("t"),
                first: (s("t*"), s("a block of 256 threads")),
                second: (s("*"), s("a block of 128 threads")),
            },
            Error::BadLaunch {
                kernel: s("k"),
                arch: s("sm_80"),
                launch: s("a block of 2048 threads"),
                detail: s("above 1024 threads"),
            },
        ]
    }

    #[test]
    fn every_message_is_one_line_without_stray_whitespace() {
        let mut seen = std::collections::BTreeSet::new();
        for e in every_variant() {
            seen.insert(match &e {
                Error::Corrupt { .. } => "Corrupt",
                Error::Parse { .. } => "Parse",
                Error::Unaccounted(_) => "Unaccounted",
                Error::Occupancy { .. } => "Occupancy",
                Error::UnmatchedLaunch { .. } => "UnmatchedLaunch",
                Error::ConflictingLaunches { .. } => "ConflictingLaunches",
                Error::BadLaunch { .. } => "BadLaunch",
            });
            let text = e.to_string();
            assert!(!text.contains('\n') && !text.contains('\t'), "{text:?}");
            assert!(!text.contains("  ") && text == text.trim(), "{text:?}");
        }
        assert_eq!(seen.len(), 7, "a sample of each variant: {seen:?}");
    }
}
