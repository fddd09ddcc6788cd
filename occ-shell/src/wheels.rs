//! The pinned nvcc wheels (`occ-shell/toolkit-wheels.txt`), shared by the
//! installers (`cargo occ toolkit install`, `scripts/cuda-toolkit`) and the
//! nvcc-not-found message.
//!
//! A leaf: it imports nothing of the crate.

/// The pinned wheel list (`occ-shell/toolkit-wheels.txt`), shared with
/// `scripts/cuda-toolkit`; read it through [`wheel_sets`].
pub const WHEELS: &str = include_str!("../toolkit-wheels.txt");

/// Wheels installed together into one folder of a toolkit dir.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WheelSet {
    /// The folder below the toolkit dir, e.g. `cu13`.
    pub name: &'static str,
    /// Installed only on request (`--legacy`: ptxas 12.9 and 11.8).
    pub legacy: bool,
    /// pip requirements, each pinned: `nvidia-cuda-nvcc==13.5.37`.
    pub requirements: Vec<&'static str>,
}

impl WheelSet {
    /// What `<set>/.stamp` holds once the set is installed: its pinned
    /// requirements in order, joined by `+` (the rule `scripts/cuda-toolkit`
    /// follows, so either installer sees the other's install as done). A
    /// wheel added to the set, or a new pin, installs the set again.
    pub fn stamp(&self) -> String {
        self.requirements.join("+")
    }
}

/// The wheel sets of [`WHEELS`], in file order: the default set (`cu13`)
/// first, then the legacy ones.
pub fn wheel_sets() -> Vec<WheelSet> {
    let mut sets: Vec<WheelSet> = Vec::new();
    for line in WHEELS.lines() {
        let mut words = line.split_whitespace();
        let (Some(kind), Some(name), Some(req)) = (words.next(), words.next(), words.next()) else {
            continue;
        };
        if kind.starts_with('#') || kind == "library" {
            continue;
        }
        match sets.iter_mut().find(|s| s.name == name) {
            Some(set) => set.requirements.push(req),
            None => sets.push(WheelSet {
                name,
                legacy: kind == "legacy",
                requirements: vec![req],
            }),
        }
    }
    sets
}

/// The CUDA libraries `cargo occ toolkit install --library NAME` adds, in
/// [`WHEELS`]' order: each one's name there (`cublas`) and its pinned
/// requirement (`nvidia-cublas==13.10.0.20`).
pub fn library_wheels() -> Vec<(&'static str, &'static str)> {
    WHEELS
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            match (words.next(), words.next(), words.next()) {
                (Some("library"), Some(name), Some(req)) => Some((name, req)),
                _ => None,
            }
        })
        .collect()
}

/// The CUDA release of the default set's nvcc (`13.5` of
/// `nvidia-cuda-nvcc==13.5.37`), for messages.
pub fn cuda_release() -> Option<&'static str> {
    let req = wheel_sets()
        .into_iter()
        .filter(|s| !s.legacy)
        .flat_map(|s| s.requirements)
        .find(|r| r.starts_with("nvidia-cuda-nvcc=="))?;
    let version = req.split_once("==")?.1;
    let minor_end = version
        .match_indices('.')
        .nth(1)
        .map_or(version.len(), |(i, _)| i);
    Some(&version[..minor_end])
}

/// A CUDA library whose headers the toolkit occ installs leaves out, named
/// by [`library_of_missing_header`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Library {
    /// Its name as NVIDIA writes it (`cuBLAS`).
    pub name: &'static str,
    /// NVIDIA's wheel of it for CUDA 13 (`nvidia-cublas`).
    pub wheel: &'static str,
    /// Where the wheel puts its headers, below its install folder
    /// (`nvidia/cu13/include` for the toolkit's own libraries).
    pub include: &'static str,
}

impl Library {
    /// The name `cargo occ toolkit install --library` takes for it
    /// (`cublas`), when occ pins it ([`library_wheels`]): the toolkit's own
    /// libraries, not cuDNN or NCCL, which NVIDIA releases apart from it.
    pub fn installable(&self) -> Option<&'static str> {
        library_wheels()
            .into_iter()
            .find(|(_, req)| req.split_once("==").map(|(w, _)| w) == Some(self.wheel))
            .map(|(name, _)| name)
    }
}

/// The CUDA libraries by the start of their headers' names; cuDNN and NCCL
/// ship their wheels per CUDA major, the toolkit's own libraries do not.
const LIBRARIES: &[(&str, Library)] = &[
    (
        "cublas",
        Library {
            name: "cuBLAS",
            wheel: "nvidia-cublas",
            include: "nvidia/cu13/include",
        },
    ),
    (
        "curand",
        Library {
            name: "cuRAND",
            wheel: "nvidia-curand",
            include: "nvidia/cu13/include",
        },
    ),
    (
        "cufft",
        Library {
            name: "cuFFT",
            wheel: "nvidia-cufft",
            include: "nvidia/cu13/include",
        },
    ),
    (
        "cusparse",
        Library {
            name: "cuSPARSE",
            wheel: "nvidia-cusparse",
            include: "nvidia/cu13/include",
        },
    ),
    (
        "cusolver",
        Library {
            name: "cuSOLVER",
            wheel: "nvidia-cusolver",
            include: "nvidia/cu13/include",
        },
    ),
    (
        "nvrtc",
        Library {
            name: "NVRTC",
            wheel: "nvidia-cuda-nvrtc",
            include: "nvidia/cu13/include",
        },
    ),
    (
        "nvjitlink",
        Library {
            name: "nvJitLink",
            wheel: "nvidia-nvjitlink",
            include: "nvidia/cu13/include",
        },
    ),
    (
        "nvjpeg",
        Library {
            name: "nvJPEG",
            wheel: "nvidia-nvjpeg",
            include: "nvidia/cu13/include",
        },
    ),
    (
        "npp",
        Library {
            name: "NPP",
            wheel: "nvidia-npp",
            include: "nvidia/cu13/include",
        },
    ),
    (
        "cupti",
        Library {
            name: "CUPTI",
            wheel: "nvidia-cuda-cupti",
            include: "nvidia/cu13/include",
        },
    ),
    (
        "cudnn",
        Library {
            name: "cuDNN",
            wheel: "nvidia-cudnn-cu13",
            include: "nvidia/cudnn/include",
        },
    ),
    (
        "nccl",
        Library {
            name: "NCCL",
            wheel: "nvidia-nccl-cu13",
            include: "nvidia/nccl/include",
        },
    ),
];

/// The header a compiler's line says it could not find, and the CUDA
/// library it belongs to: gcc's `k.cu:1:10: fatal error: cublas_v2.h: No
/// such file or directory` and nvcc's front end's `k.cu(1): catastrophic
/// error: cannot open source file "cublas_v2.h"`. `None` for any other
/// line, and for a header of no library occ knows.
pub fn library_of_missing_header(line: &str) -> Option<(&str, Library)> {
    let header = if let Some((_, rest)) = line.split_once("cannot open source file \"") {
        rest.split_once('"')?.0
    } else {
        let rest = line.split_once("fatal error: ")?.1;
        rest.strip_suffix(": No such file or directory")?
    };
    let file = header
        .rsplit('/')
        .next()
        .unwrap_or(header)
        .to_ascii_lowercase();
    LIBRARIES
        .iter()
        .find(|(start, _)| file.starts_with(start))
        .map(|&(_, library)| (header, library))
}

#[cfg(test)]
mod library_tests {
    use super::{cuda_release, library_of_missing_header, library_wheels, wheel_sets, LIBRARIES};

    #[test]
    fn every_toolkit_library_is_pinned_once_and_never_installed_by_default() {
        let pinned = library_wheels();
        assert!(pinned.len() >= 10, "{pinned:?}");
        for (name, req) in &pinned {
            let (wheel, version) = req.split_once("==").expect("pinned");
            assert!(wheel.starts_with("nvidia-") && !version.is_empty(), "{req}");
            // The name --library takes is the library's header prefix,
            // and its wheel is the one the missing-header message names.
            let (_, lib) = LIBRARIES
                .iter()
                .find(|(start, _)| start == name)
                .unwrap_or_else(|| panic!("{name} has no headers listed"));
            assert_eq!(lib.wheel, wheel);
            assert_eq!(lib.installable(), Some(*name));
            assert_eq!(lib.include, "nvidia/cu13/include");
            assert_eq!(pinned.iter().filter(|(n, _)| n == name).count(), 1);
        }
        // cuDNN and NCCL are released apart from the toolkit: not pinned,
        // and their headers live elsewhere in their wheels.
        for (start, lib) in LIBRARIES {
            if !pinned.iter().any(|(n, _)| n == start) {
                assert_eq!(lib.installable(), None, "{start}");
                assert_ne!(lib.include, "nvidia/cu13/include", "{start}");
            }
        }
        for set in wheel_sets() {
            assert!(
                !set.requirements
                    .iter()
                    .any(|r| pinned.iter().any(|(_, p)| p == r)),
                "{} installs a library by default",
                set.name
            );
        }
        assert_eq!(cuda_release(), Some("13.5"));
    }

    #[test]
    fn a_missing_library_header_names_its_library_and_wheel() {
        let gcc = "kernels/gemm.cu:3:10: fatal error: cublas_v2.h: No such file or directory";
        let (header, lib) = library_of_missing_header(gcc).expect("cuBLAS");
        assert_eq!(
            (header, lib.name, lib.wheel),
            ("cublas_v2.h", "cuBLAS", "nvidia-cublas")
        );
        let edg =
            "kernels/r.cu(2): catastrophic error: cannot open source file \"curand_kernel.h\"";
        let (header, lib) = library_of_missing_header(edg).expect("cuRAND");
        assert_eq!((header, lib.name), ("curand_kernel.h", "cuRAND"));
        // A header of the crate's own, or no missing header at all: none.
        for line in [
            "src/errors/helpers.cuh:2:10: fatal error: missing_helpers.cuh: No such file or directory",
            "kernels/k.cu(3): error: identifier \"cublasHandle_t\" is undefined",
        ] {
            assert_eq!(library_of_missing_header(line), None, "{line}");
        }
    }
}
