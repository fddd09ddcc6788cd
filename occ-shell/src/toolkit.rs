//! Finding nvcc, and the commands that run it (occ-build's jobs and the
//! toolkit's dry run start them through `process`; `cargo occ toolkit`
//! runs `--version`).

use crate::env::Env;
use crate::error::{Error, Result};
use crate::process::{Cmd, Programs, Real};
use std::path::{Path, PathBuf};

/// The folder (below a workspace root) where `scripts/cuda-toolkit` installs nvcc.
pub const SCRIPT_INSTALL_DIR: &str = ".cuda/cu13/nvidia/cu13/bin";

/// The folder of nvcc below a toolkit dir (`.cuda/` of a checkout,
/// `OCC_CUDA_DIR`, the per-user cache): one layout for every installer.
pub const INSTALL_BIN: &str = "cu13/nvidia/cu13/bin";

/// A toolkit dir: where `cargo occ toolkit install` puts nvcc, and where
/// [`find_nvcc`] looks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolkitDir {
    /// The folder holding `cu13/` (and `cu12/`, `cu11/` with `--legacy`).
    pub path: PathBuf,
    /// Which variable chose it: `OCC_CUDA_DIR`, `XDG_CACHE_HOME`, `HOME` or
    /// `LOCALAPPDATA`.
    pub origin: &'static str,
}

impl ToolkitDir {
    /// The nvcc an install puts in this dir.
    pub fn nvcc(&self) -> PathBuf {
        self.path.join(INSTALL_BIN).join(exe("nvcc"))
    }
}

/// The per-user toolkit dir: `OCC_CUDA_DIR` if set, else
/// `$XDG_CACHE_HOME/occ/cuda`, else `$HOME/.cache/occ/cuda` (Linux and
/// macOS; NVIDIA ships no nvcc for macOS, so there it only ever holds what
/// a user put there); on Windows `%LOCALAPPDATA%\occ\cuda`. `None` when
/// none of those variables is set.
pub fn toolkit_dir(env: &Env) -> Option<ToolkitDir> {
    let dir = |path: PathBuf, origin| Some(ToolkitDir { path, origin });
    if let Some(path) = env.var("OCC_CUDA_DIR") {
        return dir(PathBuf::from(path), "OCC_CUDA_DIR");
    }
    if cfg!(windows) {
        let base = env.var("LOCALAPPDATA")?;
        return dir(Path::new(&base).join("occ").join("cuda"), "LOCALAPPDATA");
    }
    // XDG: a relative XDG_CACHE_HOME is invalid and ignored.
    if let Some(base) = env
        .var("XDG_CACHE_HOME")
        .filter(|b| Path::new(b).is_absolute())
    {
        return dir(Path::new(&base).join("occ").join("cuda"), "XDG_CACHE_HOME");
    }
    let home = env.var("HOME")?;
    dir(Path::new(&home).join(".cache/occ/cuda"), "HOME")
}

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

/// A program's file name on this OS (`nvcc`, `nvcc.exe`).
pub fn exe(name: &str) -> String {
    if cfg!(windows) {
        format!("{name}.exe")
    } else {
        name.to_string()
    }
}

impl Nvcc {
    /// The program `tool` of the same toolkit, in nvcc's folder
    /// (`fatbinary`, `cuobjdump`); it may not exist.
    pub fn beside(&self, tool: &str) -> PathBuf {
        self.path.with_file_name(exe(tool))
    }
}

/// Finds nvcc: `explicit` (from `.nvcc()`), `NVCC`, `CUDA_HOME`, `CUDA_PATH`,
/// `CUDA_ROOT`, `PATH`, `/usr/local/cuda`, `OCC_CUDA_DIR`, the folder the
/// toolkit script installs into (`.cuda/` of `start` or any folder above
/// it), then the per-user toolkit dir of `cargo occ toolkit install`
/// ([`toolkit_dir`]; the same as `OCC_CUDA_DIR` when that is set). The
/// error lists every place looked and how to install nvcc.
///
/// Long because one step per place looked, in the documented order, each
/// recorded for the not-found message.
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
    let user_dir = toolkit_dir(env);
    if let Some(dir) = user_dir.as_ref().filter(|d| d.origin == "OCC_CUDA_DIR") {
        let path = dir.nvcc();
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
    match &user_dir {
        // Looked at above, before `.cuda/`.
        Some(dir) if dir.origin == "OCC_CUDA_DIR" => {}
        Some(dir) => {
            let path = dir.nvcc();
            if path.is_file() {
                return Ok(found(path, "cargo occ toolkit install"));
            }
            looked.push(format!(
                "{} (occ's per-user toolkit, from {}): not installed",
                dir.path.display(),
                dir.origin
            ));
        }
        None => looked.push("occ's per-user toolkit: no folder, as HOME is not set".into()),
    }
    Err(Error::NvccNotFound {
        looked,
        install_dir: user_dir.map(|d| d.path),
    })
}

/// Where an nvcc could appear for [`find_nvcc`] to find it next time: the
/// nvcc paths of the variables that are set (`CUDA_HOME`, `CUDA_PATH`,
/// `CUDA_ROOT`), `/usr/local/cuda`, each `.cuda/` of `start` or a folder
/// above it that exists, the nvcc that `scripts/cuda-toolkit` would install
/// into `start/.cuda`, and the nvcc of the per-user toolkit dir
/// ([`toolkit_dir`]: `OCC_CUDA_DIR`, else the cache dir that `cargo occ
/// toolkit install` fills). A build that found no nvcc watches
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
    if let Some(dir) = toolkit_dir(env) {
        out.push(dir.nvcc());
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
    /// A command that runs this nvcc (through the launcher, if any), for
    /// [`Programs`] to run. No shell is involved: every argument is passed
    /// as is.
    pub fn cmd(&self) -> Cmd {
        match &self.launcher {
            Some(launcher) => {
                let mut cmd = Cmd::new(launcher);
                cmd.arg(&self.path);
                cmd
            }
            None => Cmd::new(&self.path),
        }
    }

    /// `nvcc --version`'s release line, e.g. `Cuda compilation tools, release 13.5, V13.5.37`.
    pub fn version(&self) -> Result<String> {
        self.version_with(&Real)
    }

    /// [`Nvcc::version`], run by `programs`.
    pub fn version_with(&self, programs: &dyn Programs) -> Result<String> {
        let mut cmd = Cmd::new(&self.path);
        cmd.arg("--version");
        let output = programs.output(&cmd).map_err(|e| Error::NvccNotRunnable {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wheels::{wheel_sets, WheelSet};
    use std::ffi::OsString;

    fn env(vars: &[(&str, Option<&str>)]) -> Env {
        Env::with_overrides(
            vars.iter()
                .map(|(k, v)| (k.to_string(), v.map(OsString::from)))
                .collect(),
        )
    }

    #[test]
    fn the_wheel_list_is_pinned_and_starts_with_the_set_occ_looks_for() {
        let sets = wheel_sets();
        assert!(sets.len() >= 2, "{sets:?}");
        assert_eq!(
            sets[0].name,
            INSTALL_BIN.split('/').next().unwrap_or_default()
        );
        assert!(!sets[0].legacy);
        assert!(sets[0]
            .requirements
            .iter()
            .any(|r| r.starts_with("nvidia-cuda-nvcc==")));
        for set in &sets {
            assert!(!set.requirements.is_empty());
            for req in &set.requirements {
                let (name, version) = req
                    .split_once("==")
                    .unwrap_or_else(|| panic!("{req} is not pinned"));
                assert!(name.starts_with("nvidia-") && !version.is_empty(), "{req}");
            }
        }
        assert_eq!(SCRIPT_INSTALL_DIR, format!(".cuda/{INSTALL_BIN}"));
    }

    #[test]
    fn a_stamp_is_the_requirements_in_order() {
        let set = WheelSet {
            name: "cu13",
            legacy: false,
            requirements: vec!["a==1.2", "b==1.2", "c==0.9"],
        };
        assert_eq!(set.stamp(), "a==1.2+b==1.2+c==0.9");
        // A wheel added at the same version is a new stamp: the set is
        // installed again (nvdisasm joined nvcc 13.5.37's set that way).
        let more = WheelSet {
            requirements: vec!["a==1.2", "b==1.2", "c==0.9", "d==1.2"],
            ..set.clone()
        };
        assert_ne!(more.stamp(), set.stamp());
    }

    #[cfg(not(windows))]
    #[test]
    fn the_toolkit_dir_is_occ_cuda_dir_then_xdg_then_home() {
        let dir = |vars| toolkit_dir(&env(vars)).map(|d| (d.path, d.origin));
        let all = [
            ("OCC_CUDA_DIR", Some("/opt/occ")),
            ("XDG_CACHE_HOME", Some("/x")),
            ("HOME", Some("/h")),
        ];
        assert_eq!(dir(&all), Some(("/opt/occ".into(), "OCC_CUDA_DIR")));
        assert_eq!(
            dir(&all[1..]),
            Some(("/x/occ/cuda".into(), "XDG_CACHE_HOME"))
        );
        // A relative XDG_CACHE_HOME is invalid: HOME decides.
        assert_eq!(
            dir(&[("XDG_CACHE_HOME", Some("rel")), ("HOME", Some("/h"))]),
            Some(("/h/.cache/occ/cuda".into(), "HOME"))
        );
        assert_eq!(
            dir(&[
                ("OCC_CUDA_DIR", None),
                ("XDG_CACHE_HOME", None),
                ("HOME", None)
            ]),
            None
        );
    }

    #[cfg(not(windows))]
    #[test]
    fn a_build_without_nvcc_watches_the_per_user_nvcc_and_names_it() {
        let vars = [
            ("NVCC", None),
            ("CUDA_HOME", None),
            ("CUDA_PATH", None),
            ("CUDA_ROOT", None),
            ("PATH", Some("/nonexistent")),
            ("OCC_CUDA_DIR", None),
            ("XDG_CACHE_HOME", Some("/nonexistent/cache")),
        ];
        let nvcc = PathBuf::from("/nonexistent/cache/occ/cuda")
            .join(INSTALL_BIN)
            .join("nvcc");
        assert!(watch_points(&env(&vars), None).contains(&nvcc));
        if Path::new("/usr/local/cuda/bin/nvcc").is_file() {
            return; // found there, before the per-user dir
        }
        let e = env(&vars);
        match find_nvcc(&e, None, None) {
            Err(Error::NvccNotFound {
                looked,
                install_dir,
            }) => {
                assert!(
                    looked
                        .last()
                        .is_some_and(|l| l.starts_with("/nonexistent/cache/occ/cuda")),
                    "{looked:?}"
                );
                assert_eq!(install_dir, Some("/nonexistent/cache/occ/cuda".into()));
            }
            other => panic!("expected NvccNotFound, got {other:?}"),
        }
        // Every variable that chose the folder is watched.
        assert!(e.read_vars().contains(&"XDG_CACHE_HOME".to_string()));
    }
}
