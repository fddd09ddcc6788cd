//! Support for occ's integration tests: finding the installed nvcc, scratch
//! folders and scratch crates that use occ as a new user would.

use std::path::{Path, PathBuf};
use std::process::Command;

pub mod trust;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The nvcc that `scripts/cuda-toolkit` installed (or NVCC/CUDA_HOME/PATH).
/// Panics with the fix when there is none: the live tests need a real nvcc.
pub fn nvcc() -> PathBuf {
    let env = occ_build::env::Env::new();
    match occ_build::toolkit::find_nvcc(&env, None, Some(&workspace_root())) {
        Ok(found) => found.path,
        Err(e) => panic!("the live tests need nvcc: {e}"),
    }
}

/// The CUDA include folder beside that nvcc.
pub fn cuda_include() -> PathBuf {
    nvcc()
        .parent()
        .and_then(Path::parent)
        .map(|home| home.join("include"))
        .unwrap_or_default()
}

/// A temporary folder holding files.
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    /// A new empty folder under the system temp dir.
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("occ-test-")
            .tempdir()
            .expect("create a temp dir");
        Scratch { dir }
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a file (creating folders), returning its path.
    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create folders");
        }
        std::fs::write(&path, text).expect("write file");
        path
    }

    /// Reads a file below the folder.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(rel)).expect("read file")
    }
}

impl Default for Scratch {
    fn default() -> Self {
        Self::new()
    }
}

/// The target folder shared by every scratch crate of the test suite, so
/// occ-build and its dependencies compile once.
pub fn scratch_target_dir() -> PathBuf {
    workspace_root().join("target").join("scratch")
}

/// A wrapper script for `OCC_NVCC_LAUNCHER` that records every nvcc call
/// (its arguments, one line per call) in `log` and then runs the real nvcc.
pub fn counting_launcher(dir: &Path, log: &Path) -> PathBuf {
    let script = dir.join("count-nvcc.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec \"$@\"\n",
            log.display()
        ),
    )
    .expect("write launcher");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
            .expect("chmod launcher");
    }
    script
}

/// The lines a counting launcher recorded (empty when none ran).
pub fn launches(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// `cargo` with the environment of a new user's shell: no variables of the
/// outer cargo that would leak into the scratch build, and `NVCC` set to the
/// installed nvcc (a scratch crate lies outside the workspace and its `.cuda/`).
pub fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    for (key, _) in std::env::vars() {
        if key.starts_with("CARGO_") && key != "CARGO_HOME" && key != "CARGO_NET_OFFLINE"
            || key == "RUSTFLAGS"
            || key.starts_with("OCC_")
            || key == "OUT_DIR"
        {
            cmd.env_remove(key);
        }
    }
    cmd.env("CARGO_TARGET_DIR", scratch_target_dir());
    // A new user points occ at their CUDA install; ours is the one the
    // toolkit script installed.
    cmd.env("NVCC", nvcc());
    cmd
}

/// The `[dependencies]` line for a workspace crate, by path.
pub fn path_dep(name: &str) -> String {
    format!(
        "{name} = {{ path = {:?} }}",
        workspace_root().join(name).display().to_string()
    )
}

/// The `cuda_occupancy.h` oracle: the C++ harness of `tests/oracle/` built
/// against the installed header, and the device table it reads.
pub mod oracle {
    use occ_build::arch::Arch;
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::sync::OnceLock;

    /// Compiles `tests/oracle/harness.cpp` against the installed
    /// `cuda_occupancy.h` into `out_dir`, once per test binary. Panics with
    /// the fix when the header or a C++ compiler is missing.
    pub fn harness(out_dir: &Path) -> &'static Path {
        static BIN: OnceLock<PathBuf> = OnceLock::new();
        BIN.get_or_init(|| {
            let src = super::workspace_root().join("tests/oracle/harness.cpp");
            let inc = super::cuda_include();
            assert!(
                inc.join("cuda_occupancy.h").is_file(),
                "cuda_occupancy.h not found in {}; run scripts/cuda-toolkit or set CUDA_HOME",
                inc.display()
            );
            let out = out_dir.join("occ-oracle-harness");
            let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
            let status = Command::new(&cxx)
                .args(["-O2", "-std=c++14", "-Wall", "-Wno-unused-function", "-I"])
                .arg(&inc)
                .arg(&src)
                .arg("-o")
                .arg(&out)
                .status()
                .unwrap_or_else(|e| {
                    panic!("cannot run the C++ compiler `{cxx}`: {e}; install g++ or set CXX")
                });
            assert!(status.success(), "compiling {} failed", src.display());
            out
        })
    }

    /// The device table the harness reads: a count line, then one line per
    /// `(major, minor, limits)` with the limits of `cudaOccDeviceProp`.
    pub fn device_table(devices: &[(u32, u32, &Arch)]) -> String {
        let mut s = format!("{}\n", devices.len());
        for (major, minor, a) in devices {
            s += &format!(
                "{major} {minor} {} {} {} {} {} {} {} {} {}\n",
                a.max_threads_per_block,
                a.max_threads_per_sm,
                a.max_regs_per_block,
                a.regs_per_sm,
                a.warp_size,
                a.smem_per_block,
                a.smem_per_sm,
                a.smem_per_block_optin,
                a.reserved_smem_per_block
            );
        }
        s
    }
}

/// An environment for in-process builds (`Build::try_compile_with`): every
/// variable occ-build reads that would change a build is unset (`OCC_ARCHS`,
/// `CUDA_COMPUTE_CAP`, `OCC_NVCC_LAUNCHER`, `NUM_JOBS`, `OCC_BLESS`,
/// `OCC_NO_NVCC`, `DOCS_RS`, `CI`), `NVCC` is the installed nvcc, and `extra`
/// sets or unsets (`None`) what a test needs on top.
pub fn build_env(extra: &[(&str, Option<&str>)]) -> occ_build::env::Env {
    use std::ffi::OsString;
    let mut vars: Vec<(String, Option<OsString>)> = [
        "OCC_ARCHS",
        "CUDA_COMPUTE_CAP",
        "OCC_NVCC_LAUNCHER",
        "NUM_JOBS",
        "OCC_BLESS",
        "OCC_NO_NVCC",
        "DOCS_RS",
        "CI",
    ]
    .iter()
    .map(|name| (name.to_string(), None))
    .collect();
    vars.push(("NVCC".into(), Some(nvcc().into_os_string())));
    for (name, value) in extra {
        vars.retain(|(n, _)| n != name);
        vars.push((name.to_string(), value.map(OsString::from)));
    }
    occ_build::env::Env::with_overrides(vars)
}
