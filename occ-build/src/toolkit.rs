//! Finding nvcc, and the commands that run it (the jobs in `compile` and
//! the toolkit's dry run in `cache` start them).

use crate::env::Env;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The folder (below a workspace root) where `scripts/cuda-toolkit` installs nvcc.
pub const SCRIPT_INSTALL_DIR: &str = ".cuda/cu13/nvidia/cu13/bin";

/// Where an nvcc was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nvcc {
    /// The nvcc executable.
    pub path: PathBuf,
    /// How it was found (for messages), e.g. `NVCC`, `PATH`.
    pub origin: String,
    /// An optional launcher that wraps every nvcc call (`OCC_NVCC_LAUNCHER`, e.g. sccache).
    pub launcher: Option<PathBuf>,
}

fn exe(name: &str) -> String {
    if cfg!(windows) {
        format!("{name}.exe")
    } else {
        name.to_string()
    }
}

/// Finds nvcc: `explicit` (from `.nvcc()`), `NVCC`, `CUDA_HOME`, `CUDA_PATH`,
/// `CUDA_ROOT`, `PATH`, `/usr/local/cuda`, then the folder the toolkit script
/// installs into (`.cuda/` of `start` or any folder above it). The error lists
/// every place looked.
pub fn find_nvcc(env: &Env, explicit: Option<&Path>, start: Option<&Path>) -> Result<Nvcc> {
    let launcher = env.var("OCC_NVCC_LAUNCHER").map(PathBuf::from);
    let mut looked = Vec::new();
    let found = |path: PathBuf, origin: &str| Nvcc {
        path,
        origin: origin.to_string(),
        launcher: launcher.clone(),
    };
    // An nvcc named explicitly is the one wanted: when it is missing, using
    // another would build with a toolkit nobody chose.
    if let Some(path) = explicit {
        if path.is_file() {
            return Ok(found(path.to_path_buf(), ".nvcc()"));
        }
        return Err(Error::NvccMissing {
            origin: ".nvcc()".into(),
            path: path.to_path_buf(),
        });
    }
    if let Some(path) = env.var("NVCC").map(PathBuf::from) {
        if path.is_file() {
            return Ok(found(path, "NVCC"));
        }
        if let Some(hit) = search_path_var(env, &path) {
            return Ok(found(hit, "NVCC"));
        }
        return Err(Error::NvccMissing {
            origin: "NVCC".into(),
            path,
        });
    } else {
        looked.push("NVCC: not set".into());
    }
    for var in ["CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"] {
        match env.var(var) {
            Some(home) => {
                let path = Path::new(&home).join("bin").join(exe("nvcc"));
                if path.is_file() {
                    return Ok(found(path, var));
                }
                looked.push(format!("{var}: no {}", path.display()));
            }
            None => looked.push(format!("{var}: not set")),
        }
    }
    if let Some(hit) = search_path_var(env, Path::new(&exe("nvcc"))) {
        return Ok(found(hit, "PATH"));
    }
    looked.push("PATH: no nvcc".into());
    let default = Path::new("/usr/local/cuda/bin").join(exe("nvcc"));
    if default.is_file() {
        return Ok(found(default, "/usr/local/cuda"));
    }
    looked.push(format!("{}: does not exist", default.display()));
    let script_dir = env.var("OCC_CUDA_DIR").map(PathBuf::from);
    if let Some(dir) = &script_dir {
        let path = dir.join("cu13/nvidia/cu13/bin").join(exe("nvcc"));
        if path.is_file() {
            return Ok(found(path, "OCC_CUDA_DIR"));
        }
        looked.push(format!("OCC_CUDA_DIR: no {}", path.display()));
    }
    if let Some(start) = start {
        for dir in start.ancestors() {
            let path = dir.join(SCRIPT_INSTALL_DIR).join(exe("nvcc"));
            if path.is_file() {
                return Ok(found(path, "scripts/cuda-toolkit"));
            }
        }
        looked.push(format!(
            "{SCRIPT_INSTALL_DIR} in {} and the folders above it: not installed",
            start.display()
        ));
    }
    Err(Error::NvccNotFound { looked })
}

/// Where an nvcc could appear for [`find_nvcc`] to find it next time: the
/// nvcc paths of the variables that are set (`CUDA_HOME`, `CUDA_PATH`,
/// `CUDA_ROOT`, `OCC_CUDA_DIR`), `/usr/local/cuda`, each `.cuda/` of `start`
/// or a folder above it that exists, and the nvcc that `scripts/cuda-toolkit`
/// would install into `start/.cuda`. A build that found no nvcc watches
/// them. Cargo reruns a build script whose watched file is missing on every
/// build, and an installed nvcc is older than the last run (cargo compares
/// mtimes): so such a build reruns each time until nvcc is found, and the
/// first build after an install uses it. (`OCC_NO_NVCC=1` stands on the
/// lock without that.)
pub fn watch_points(env: &Env, start: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"] {
        if let Some(home) = env.var(var) {
            out.push(Path::new(&home).join("bin").join(exe("nvcc")));
        }
    }
    if let Some(dir) = env.var("OCC_CUDA_DIR") {
        out.push(
            Path::new(&dir)
                .join("cu13/nvidia/cu13/bin")
                .join(exe("nvcc")),
        );
    }
    let default = Path::new("/usr/local/cuda");
    if default.is_dir() {
        out.push(default.to_path_buf());
    }
    if let Some(start) = start {
        out.push(start.join(SCRIPT_INSTALL_DIR).join(exe("nvcc")));
        for dir in start.ancestors() {
            let cuda = dir.join(".cuda");
            if cuda.is_dir() {
                out.push(cuda);
            }
        }
    }
    out
}

fn search_path_var(env: &Env, name: &Path) -> Option<PathBuf> {
    if name.components().count() != 1 {
        return None;
    }
    let path = env.var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

impl Nvcc {
    /// A command that runs this nvcc (through the launcher, if any). No shell
    /// is involved: every argument is passed as is.
    pub fn command(&self) -> Command {
        let mut cmd = match &self.launcher {
            Some(launcher) => {
                let mut cmd = Command::new(launcher);
                cmd.arg(&self.path);
                cmd
            }
            None => Command::new(&self.path),
        };
        cmd.stdin(Stdio::null());
        cmd
    }

    /// `nvcc --version`'s release line, e.g. `Cuda compilation tools, release 13.5, V13.5.37`.
    pub fn version(&self) -> Result<String> {
        let output = Command::new(&self.path)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::NvccNotRunnable {
                nvcc: self.path.clone(),
                reason: e.to_string(),
            })?;
        let text = String::from_utf8_lossy(&output.stdout);
        text.lines()
            .find(|l| l.contains("release"))
            .map(|l| l.trim().to_string())
            .ok_or_else(|| Error::NvccNotRunnable {
                nvcc: self.path.clone(),
                reason: format!(
                    "`nvcc --version` printed no release line (exit {}): {}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr).trim()
                ),
            })
    }
}

/// The `V13.5.37` part of a version line, or the whole line.
pub fn short_version(line: &str) -> &str {
    line.rsplit(' ')
        .next()
        .filter(|v| v.starts_with('V'))
        .unwrap_or(line)
}
