//! Which device code runs on a GPU: the one place the rule lives.
//!
//! A build targets archs such as `sm_80`, `sm_90a` or `sm_100f`; a GPU has
//! a compute capability `major.minor`. NVIDIA's compatibility rules
//! (CUDA Programming Guide, "Compute Capability and Streaming
//! Multiprocessor Versions"; the CUDA 12.9 note on family-specific
//! features):
//!
//! | arch | its cubin (SASS) runs on | its PTX is JIT-compiled on |
//! |---|---|---|
//! | `sm_XY` | X.Z with Z ≥ Y (same major) | any GPU of compute capability ≥ X.Y |
//! | `sm_XYf` | X.Z with Z ≥ Y (same major, the family) | the same |
//! | `sm_XYa` | exactly X.Y | exactly X.Y |
//!
//! The choice: the **newest cubin that runs** (the highest minor; at the
//! same minor `a` before `f` before plain, the more specific code being
//! the faster), else **PTX for the driver's JIT**: the newest arch whose
//! PTX runs there (ordered by `major * 10 + minor`, then as above). A cubin
//! is always preferred to the JIT: it loads without compiling and its
//! resources are the ones ptxas reported.
//!
//! [`pick`] applies the rule to arch names alone (every arch has both
//! SASS and PTX); [`pick_code`] to a kernel of the generated table, where
//! what is embedded decides what can run (see there).
//!
//! ```
//! use occ::select::{pick, How};
//!
//! let built = ["sm_80", "sm_86", "sm_90a"];
//! // An RTX 3090 (8.6) runs the sm_86 cubin.
//! let c = pick(&built, 8, 6).unwrap();
//! assert_eq!((built[c.index], c.how), ("sm_86", How::Sass));
//! // An RTX 4090 (8.9) runs the sm_86 cubin too: same major, newer minor.
//! assert_eq!(built[pick(&built, 8, 9).unwrap().index], "sm_86");
//! // A B200 (10.0) runs none of the cubins: the driver JITs sm_86's PTX
//! // (sm_90a's PTX runs on 9.0 only).
//! let c = pick(&built, 10, 0).unwrap();
//! assert_eq!((built[c.index], c.how), ("sm_86", How::Jit));
//! // A T4 (7.5) runs nothing of this build.
//! assert!(pick(&built, 7, 5).is_none());
//! ```

use crate::table::{CodeKind, DeviceCode, Kernel, KernelArch};
use core::cmp::Reverse;
use core::fmt;

/// The suffix of an arch name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Variant {
    /// `sm_90`: forward-compatible (SASS within the major, PTX onwards).
    Plain,
    /// `sm_100f`: family-specific, runs on the family (same major, a
    /// minor at least its own).
    Family,
    /// `sm_90a`: arch-specific, runs on exactly that compute capability.
    Specific,
}

/// An arch name, parsed: `sm_90a` is 9.0, [`Variant::Specific`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Arch {
    /// The compute capability's major version (`10` for `sm_100`).
    pub major: u32,
    /// Its minor version (`3` for `sm_103`).
    pub minor: u32,
    /// The suffix.
    pub variant: Variant,
}

impl Arch {
    /// `sm_XY`, `sm_XYa`, `sm_XYf` (also `compute_XY…`) as compute
    /// capability X.Y: the last digit is the minor version. `None` for
    /// anything else.
    pub fn parse(arch: &str) -> Option<Arch> {
        let body = arch
            .strip_prefix("sm_")
            .or_else(|| arch.strip_prefix("compute_"))?;
        let (digits, variant) = match body.as_bytes().last()? {
            b'a' => (&body[..body.len() - 1], Variant::Specific),
            b'f' => (&body[..body.len() - 1], Variant::Family),
            _ => (body, Variant::Plain),
        };
        if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n: u32 = digits.parse().ok()?;
        Some(Arch {
            major: n / 10,
            minor: n % 10,
            variant,
        })
    }

    /// `major * 10 + minor` (`90` for 9.0).
    pub fn cc(&self) -> u32 {
        self.major * 10 + self.minor
    }

    /// Whether this arch's cubin runs on a GPU of compute capability
    /// `major.minor`.
    pub fn runs_sass_on(&self, major: u32, minor: u32) -> bool {
        match self.variant {
            Variant::Specific => self.major == major && self.minor == minor,
            Variant::Plain | Variant::Family => self.major == major && self.minor <= minor,
        }
    }

    /// Whether the driver can JIT-compile this arch's PTX for a GPU of
    /// compute capability `major.minor`.
    pub fn runs_ptx_on(&self, major: u32, minor: u32) -> bool {
        match self.variant {
            Variant::Plain => self.cc() <= major * 10 + minor,
            // Family and arch-specific PTX is bound as its SASS is.
            Variant::Family | Variant::Specific => self.runs_sass_on(major, minor),
        }
    }
}

/// How the chosen code runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum How {
    /// A cubin built for a compatible arch runs as it is.
    Sass,
    /// The driver JIT-compiles the arch's PTX for the GPU at load time
    /// (slower to load; its registers may differ from ptxas's numbers for
    /// the arch the PTX was written for).
    Jit,
}

impl fmt::Display for How {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            How::Sass => "cubin",
            How::Jit => "PTX (JIT)",
        })
    }
}

/// What [`pick`] chose: an index into the archs it was given, and how that
/// arch's code runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Choice {
    /// Index of the chosen arch in the slice given to [`pick`].
    pub index: usize,
    /// SASS or JIT.
    pub how: How,
}

/// The arch of `archs` whose code runs best on compute capability
/// `major.minor` (module docs): the newest cubin that runs there, else the
/// newest PTX the driver can JIT there; `None` when neither exists. Names
/// that are not arch names are skipped; of two equal names the first wins.
pub fn pick(archs: &[&str], major: u32, minor: u32) -> Option<Choice> {
    choose(
        archs.len(),
        |i| Arch::parse(archs[i]),
        |_| true,
        |_| true,
        major,
        minor,
    )
}

/// The rule over `n` candidates: `arch(i)` parses the i-th, `sass(i)` and
/// `ptx(i)` say which of its codes exist.
pub(crate) fn choose(
    n: usize,
    arch: impl Fn(usize) -> Option<Arch>,
    sass: impl Fn(usize) -> bool,
    ptx: impl Fn(usize) -> bool,
    major: u32,
    minor: u32,
) -> Option<Choice> {
    let parsed = (0..n).filter_map(|i| arch(i).map(|a| (i, a)));
    // Every cubin that runs has the GPU's major: rank by minor, then suffix.
    let cubin = parsed
        .clone()
        .filter(|(i, a)| sass(*i) && a.runs_sass_on(major, minor))
        .max_by_key(|(i, a)| (a.minor, a.variant, Reverse(*i)));
    if let Some((index, _)) = cubin {
        return Some(Choice {
            index,
            how: How::Sass,
        });
    }
    parsed
        .filter(|(i, a)| ptx(*i) && a.runs_ptx_on(major, minor))
        .max_by_key(|(i, a)| (a.cc(), a.variant, Reverse(*i)))
        .map(|(index, _)| Choice {
            index,
            how: How::Jit,
        })
}

/// The device code to load for a kernel, as [`pick_code`] chose it.
#[derive(Debug, Clone, Copy)]
pub struct Code {
    /// The arch whose numbers hold: its cubin runs, or its PTX is JITted.
    pub arch: &'static KernelArch,
    /// The blob to load. For a fatbin this is the whole fatbin (the driver
    /// picks from it by the same rule).
    pub code: &'static DeviceCode,
    /// SASS or JIT.
    pub how: How,
}

/// Why a kernel has no device code for a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// Code was built, but none of it runs on this compute capability.
    NothingRuns,
    /// The build stood on `occ.lock` without nvcc: every blob is empty.
    NoNvcc,
    /// The build embeds no device code (`Embed::Nothing`, or a
    /// `static_lib`, whose library carries its own).
    NotEmbedded,
}

/// No device code of a kernel can run on a GPU. Its message names the
/// kernel, the GPU's arch and the archs built, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoCode {
    /// The kernel's name without its parameters (`saxpy`).
    pub kernel: &'static str,
    /// Its `.cu` file.
    pub source: &'static str,
    /// The GPU's compute capability (major, minor).
    pub gpu: (u32, u32),
    /// The archs the kernel was built for, in build order.
    pub built: Vec<&'static str>,
    /// Why.
    pub reason: Reason,
}

impl fmt::Display for NoCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (major, minor) = self.gpu;
        let built = if self.built.is_empty() {
            "no arch".to_string()
        } else {
            self.built.join(", ")
        };
        write!(f, "kernel `{}` ({}): ", self.kernel, self.source)?;
        match self.reason {
            Reason::NothingRuns => write!(
                f,
                "no device code runs on this GPU (sm_{major}{minor}); built for {built} \
                 (a cubin runs on GPUs of its major version from its minor on, an `a` \
                 arch's only on its own; PTX also on later majors); add sm_{major}{minor} \
                 to the archs in build.rs, or set OCC_ARCHS={}",
                suggest(&self.built, major, minor)
            ),
            Reason::NoNvcc => write!(
                f,
                "this build has no device code: it stood on occ.lock without nvcc \
                 (DOCS_RS, OCC_NO_NVCC or no nvcc found), so every blob is empty; build \
                 where nvcc is found (NVCC=…, CUDA_HOME, PATH, or `cargo occ toolkit \
                 install`) to embed the code for {built}"
            ),
            Reason::NotEmbedded => write!(
                f,
                "the build embeds no device code for it (`.embed(Embed::Nothing)`, or a \
                 `.static_lib` whose library carries its own); launch it through that \
                 library, or embed the code with `.embed(Embed::Fatbin)` (the default)"
            ),
        }
    }
}

impl std::error::Error for NoCode {}

/// The `OCC_ARCHS` value a fix needs: the built archs plus the GPU's.
fn suggest(built: &[&str], major: u32, minor: u32) -> String {
    let gpu = format!("sm_{major}{minor}");
    let mut archs: Vec<&str> = built.iter().copied().filter(|a| *a != gpu).collect();
    archs.push(&gpu);
    archs.join(",")
}

/// The device code of `kernel` to load on a GPU of compute capability
/// `major.minor`, by the rule of [`pick`] over what the build embedded:
///
/// - [`CodeKind::Fatbin`] (the default): a fatbin per file holds the SASS
///   of every arch and the PTX of the newest plain arch only (the newest
///   arch when none is plain), so the JIT is possible only with that
///   arch's PTX;
/// - [`CodeKind::Cubin`]: SASS only, no JIT;
/// - [`CodeKind::Ptx`]: only the JIT, of any arch's PTX.
///
/// Blobs with no bytes (a build that stood on `occ.lock` without nvcc)
/// are not code: [`Reason::NoNvcc`] when there is nothing else,
/// [`Reason::NotEmbedded`] when no arch has a blob at all.
pub fn pick_code(kernel: &Kernel, major: u32, minor: u32) -> Result<Code, NoCode> {
    let rows = kernel.archs;
    let code = |i: usize| rows[i].code.filter(|c| !c.bytes.is_empty());
    let sass =
        |i: usize| code(i).is_some_and(|c| matches!(c.kind, CodeKind::Fatbin | CodeKind::Cubin));
    let ptx = |i: usize| match code(i) {
        Some(c) if c.kind == CodeKind::Ptx => true,
        Some(c) if c.kind == CodeKind::Fatbin => fatbin_ptx_row(rows, c) == Some(i),
        _ => false,
    };
    let chosen = choose(
        rows.len(),
        |i| Arch::parse(rows[i].arch),
        sass,
        ptx,
        major,
        minor,
    );
    let found = chosen.and_then(|choice| {
        let arch = &rows[choice.index];
        Some(Code {
            arch,
            code: code(choice.index)?,
            how: choice.how,
        })
    });
    found.ok_or_else(|| {
        let reason = if (0..rows.len()).any(|i| code(i).is_some()) {
            Reason::NothingRuns
        } else if rows.iter().any(|r| r.code.is_some()) {
            Reason::NoNvcc
        } else if rows.is_empty() {
            Reason::NothingRuns
        } else {
            Reason::NotEmbedded
        };
        NoCode {
            kernel: kernel.base_name,
            source: kernel.source,
            gpu: (major, minor),
            built: rows.iter().map(|r| r.arch).collect(),
            reason,
        }
    })
}

/// The row whose PTX the fatbin `blob` holds: of the rows pointing at it,
/// the newest plain arch, else the newest (as occ-build's `device_code`
/// stage puts it together).
fn fatbin_ptx_row(rows: &[KernelArch], blob: &DeviceCode) -> Option<usize> {
    rows.iter()
        .enumerate()
        .filter(|(_, r)| r.code.is_some_and(|c| core::ptr::eq(c, blob)))
        .filter_map(|(i, r)| Arch::parse(r.arch).map(|a| (i, a)))
        .max_by_key(|(i, a)| (a.variant == Variant::Plain, a.cc(), Reverse(*i)))
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::tests::{kernel, row};

    fn arch(s: &str) -> Arch {
        Arch::parse(s).unwrap()
    }

    #[test]
    fn parses_arch_names() {
        let a = |major, minor, variant| {
            Some(Arch {
                major,
                minor,
                variant,
            })
        };
        assert_eq!(Arch::parse("sm_75"), a(7, 5, Variant::Plain));
        assert_eq!(Arch::parse("sm_90a"), a(9, 0, Variant::Specific));
        assert_eq!(Arch::parse("sm_100f"), a(10, 0, Variant::Family));
        assert_eq!(Arch::parse("sm_121"), a(12, 1, Variant::Plain));
        assert_eq!(Arch::parse("compute_103a"), a(10, 3, Variant::Specific));
        for bad in [
            "", "sm_", "sm_8", "sm_a", "sm_90x", "sm_9o", "80", "gfx90a", "sm_+80",
        ] {
            assert_eq!(Arch::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn compatibility_per_variant() {
        // (arch, gpu, sass runs, ptx runs)
        let cases = [
            ("sm_80", (8, 0), true, true),
            ("sm_80", (8, 6), true, true),
            ("sm_86", (8, 0), false, false),
            ("sm_80", (9, 0), false, true),
            ("sm_90", (8, 9), false, false),
            ("sm_90a", (9, 0), true, true),
            ("sm_90a", (9, 1), false, false),
            ("sm_90a", (10, 0), false, false),
            ("sm_100f", (10, 3), true, true),
            ("sm_100f", (10, 0), true, true),
            ("sm_103f", (10, 0), false, false),
            ("sm_100f", (12, 0), false, false),
            ("sm_100", (12, 0), false, true),
        ];
        for (a, (major, minor), sass, ptx) in cases {
            let a_ = arch(a);
            assert_eq!(
                a_.runs_sass_on(major, minor),
                sass,
                "{a} sass on {major}.{minor}"
            );
            assert_eq!(
                a_.runs_ptx_on(major, minor),
                ptx,
                "{a} ptx on {major}.{minor}"
            );
        }
    }

    #[test]
    fn pick_table() {
        use How::{Jit, Sass};
        // (archs, gpu, expected (arch, how))
        type Case = (
            &'static [&'static str],
            (u32, u32),
            Option<(&'static str, How)>,
        );
        let cases: &[Case] = &[
            // Exact match.
            (&["sm_80", "sm_86"], (8, 6), Some(("sm_86", Sass))),
            // Newer minor of the same major: the newest cubin below it.
            (&["sm_80", "sm_86"], (8, 9), Some(("sm_86", Sass))),
            (&["sm_86", "sm_80"], (8, 9), Some(("sm_86", Sass))),
            // A cubin of a newer minor does not run.
            (&["sm_86"], (8, 0), None),
            // No cubin of the major: the newest PTX at most the GPU's.
            (&["sm_75", "sm_80", "sm_86"], (9, 0), Some(("sm_86", Jit))),
            (&["sm_80", "sm_120"], (9, 0), Some(("sm_80", Jit))),
            // Arch-specific first at the same minor, only on exactly it.
            (&["sm_90", "sm_90a"], (9, 0), Some(("sm_90a", Sass))),
            (&["sm_90a", "sm_90"], (9, 0), Some(("sm_90a", Sass))),
            (&["sm_90a"], (10, 0), None),
            (&["sm_80", "sm_90a"], (10, 0), Some(("sm_80", Jit))),
            // Family: over plain at the same minor, on newer minors too.
            (&["sm_100", "sm_100f"], (10, 3), Some(("sm_100f", Sass))),
            (&["sm_100f", "sm_100a"], (10, 0), Some(("sm_100a", Sass))),
            (&["sm_100f", "sm_100a"], (10, 3), Some(("sm_100f", Sass))),
            // The highest minor beats a more specific suffix.
            (&["sm_100a", "sm_103"], (10, 3), Some(("sm_103", Sass))),
            (&["sm_100f", "sm_103"], (10, 3), Some(("sm_103", Sass))),
            // A family does not reach the next major.
            (&["sm_100f"], (12, 0), None),
            (&["sm_100f", "sm_90"], (12, 0), Some(("sm_90", Jit))),
            // Older GPUs than every arch.
            (&["sm_80", "sm_90"], (7, 5), None),
            // Names that are not archs are skipped.
            (&["sm_x", "sm_80"], (8, 0), Some(("sm_80", Sass))),
            (&[], (8, 0), None),
        ];
        for (archs, (major, minor), want) in cases {
            let got = pick(archs, *major, *minor).map(|c| (archs[c.index], c.how));
            assert_eq!(got, *want, "{archs:?} on {major}.{minor}");
        }
    }

    #[test]
    fn pick_prefers_the_first_of_equal_names() {
        let c = pick(&["sm_80", "sm_80"], 8, 0).unwrap();
        assert_eq!(c.index, 0);
    }

    const fn blob(kind: CodeKind, arch: Option<&'static str>, bytes: &'static [u8]) -> DeviceCode {
        DeviceCode {
            source: "kernels/k.cu",
            kind,
            arch,
            bytes,
        }
    }

    fn picked(
        k: &Kernel,
        major: u32,
        minor: u32,
    ) -> Result<(&'static str, How, *const DeviceCode), Reason> {
        pick_code(k, major, minor)
            .map(|c| (c.arch.arch, c.how, c.code as *const DeviceCode))
            .map_err(|e| e.reason)
    }

    #[test]
    fn fatbin_has_sass_for_all_and_ptx_of_the_newest_plain_arch() {
        static FAT: DeviceCode = blob(CodeKind::Fatbin, None, b"fatbin");
        static ROWS: [KernelArch; 3] = [
            row("sm_80", Some(&FAT)),
            row("sm_90", Some(&FAT)),
            row("sm_90a", Some(&FAT)),
        ];
        let k = kernel("k", "k", "k", &ROWS);
        let fat = &FAT as *const DeviceCode;
        assert_eq!(picked(&k, 8, 6), Ok(("sm_80", How::Sass, fat)));
        assert_eq!(picked(&k, 9, 0), Ok(("sm_90a", How::Sass, fat)));
        // The fatbin's PTX is sm_90's (plain), not sm_80's.
        assert_eq!(picked(&k, 12, 0), Ok(("sm_90", How::Jit, fat)));
        // Every arch is newer than 7.5.
        assert_eq!(picked(&k, 7, 5), Err(Reason::NothingRuns));
    }

    #[test]
    fn fatbin_ptx_newer_than_the_gpu_gives_no_jit() {
        // archs sm_80 + sm_120: the PTX is sm_120's, which a 9.0 GPU cannot
        // JIT, though pick() over the names would JIT sm_80's.
        static FAT: DeviceCode = blob(CodeKind::Fatbin, None, b"fatbin");
        static ROWS: [KernelArch; 2] = [row("sm_80", Some(&FAT)), row("sm_120", Some(&FAT))];
        let k = kernel("k", "k", "k", &ROWS);
        assert_eq!(picked(&k, 9, 0), Err(Reason::NothingRuns));
        assert_eq!(
            pick(&["sm_80", "sm_120"], 9, 0).map(|c| c.how),
            Some(How::Jit)
        );
        assert_eq!(
            picked(&k, 12, 1).map(|p| (p.0, p.1)),
            Ok(("sm_120", How::Sass))
        );
    }

    #[test]
    fn fatbin_of_specific_archs_only_holds_the_newest_ptx() {
        static FAT: DeviceCode = blob(CodeKind::Fatbin, None, b"fatbin");
        static ROWS: [KernelArch; 2] = [row("sm_90a", Some(&FAT)), row("sm_100a", Some(&FAT))];
        let k = kernel("k", "k", "k", &ROWS);
        assert_eq!(
            picked(&k, 10, 0).map(|p| (p.0, p.1)),
            Ok(("sm_100a", How::Sass))
        );
        assert_eq!(picked(&k, 10, 3), Err(Reason::NothingRuns));
    }

    #[test]
    fn cubins_give_sass_only() {
        static C80: DeviceCode = blob(CodeKind::Cubin, Some("sm_80"), b"elf80");
        static C90: DeviceCode = blob(CodeKind::Cubin, Some("sm_90"), b"elf90");
        static ROWS: [KernelArch; 2] = [row("sm_80", Some(&C80)), row("sm_90", Some(&C90))];
        let k = kernel("k", "k", "k", &ROWS);
        assert_eq!(picked(&k, 8, 9), Ok(("sm_80", How::Sass, &C80 as *const _)));
        assert_eq!(picked(&k, 9, 0), Ok(("sm_90", How::Sass, &C90 as *const _)));
        // No PTX: nothing runs on 10.0.
        assert_eq!(picked(&k, 10, 0), Err(Reason::NothingRuns));
    }

    #[test]
    fn ptx_blobs_give_jit_only() {
        static P80: DeviceCode = blob(CodeKind::Ptx, Some("sm_80"), b".version");
        static P90A: DeviceCode = blob(CodeKind::Ptx, Some("sm_90a"), b".version");
        static ROWS: [KernelArch; 2] = [row("sm_80", Some(&P80)), row("sm_90a", Some(&P90A))];
        let k = kernel("k", "k", "k", &ROWS);
        assert_eq!(picked(&k, 8, 0), Ok(("sm_80", How::Jit, &P80 as *const _)));
        // sm_90a's PTX runs on exactly 9.0, and is the newest there.
        assert_eq!(
            picked(&k, 9, 0),
            Ok(("sm_90a", How::Jit, &P90A as *const _))
        );
        assert_eq!(picked(&k, 10, 0), Ok(("sm_80", How::Jit, &P80 as *const _)));
        assert_eq!(picked(&k, 7, 5), Err(Reason::NothingRuns));
    }

    #[test]
    fn empty_blobs_mean_no_nvcc() {
        static EMPTY: DeviceCode = blob(CodeKind::Fatbin, None, &[]);
        static ROWS: [KernelArch; 2] = [row("sm_80", Some(&EMPTY)), row("sm_90", Some(&EMPTY))];
        let k = kernel("k", "saxpy", "saxpy", &ROWS);
        let err = pick_code(&k, 8, 0).unwrap_err();
        assert_eq!(err.reason, Reason::NoNvcc);
        let text = err.to_string();
        assert!(
            text.contains("`saxpy`") && text.contains("without nvcc"),
            "{text}"
        );
    }

    #[test]
    fn no_blobs_mean_not_embedded() {
        static ROWS: [KernelArch; 1] = [row("sm_80", None)];
        let k = kernel("k", "k", "k", &ROWS);
        assert_eq!(picked(&k, 8, 0), Err(Reason::NotEmbedded));
    }

    #[test]
    fn no_code_names_kernel_gpu_archs_and_the_fix() {
        static FAT: DeviceCode = blob(CodeKind::Fatbin, None, b"fatbin");
        static ROWS: [KernelArch; 2] = [row("sm_80", Some(&FAT)), row("sm_90", Some(&FAT))];
        let k = kernel("_Z5saxpyfPKfPfi", "saxpy", "saxpy", &ROWS);
        let err = pick_code(&k, 7, 5).unwrap_err();
        assert_eq!(err.gpu, (7, 5));
        assert_eq!(err.built, ["sm_80", "sm_90"]);
        let text = err.to_string();
        for part in [
            "kernel `saxpy` (kernels/k.cu)",
            "(sm_75)",
            "built for sm_80, sm_90",
            "add sm_75 to the archs in build.rs",
            "OCC_ARCHS=sm_80,sm_90,sm_75",
        ] {
            assert!(text.contains(part), "{part:?} missing from {text}");
        }
    }
}
