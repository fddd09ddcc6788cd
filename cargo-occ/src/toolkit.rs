//! `cargo occ toolkit install|path|doctor`: NVIDIA's nvcc for any crate.
//!
//! `install` pip-installs the pinned wheels of `occ_shell::wheels::WHEELS`
//! (the list `scripts/cuda-toolkit` reads too) with the system's Python into
//! the per-user toolkit dir (`occ_shell::toolkit::toolkit_dir`), where
//! occ-build looks after the usual places, with the CUDA libraries asked for
//! (`--library cublas`) in nvcc's own folder; `path` prints the nvcc occ would
//! use; `doctor` reports everything a build depends on and what to do about
//! each gap.

use crate::cudarc;
use crate::locate::Locate;
use anyhow::{bail, Context, Result};
use occ_model::schema::lock::DEFAULT_LOCK_FILE;
use occ_shell::process::{Cmd, Programs, Real};
use occ_shell::toolkit::{self, Nvcc, ToolkitDir};
use occ_shell::wheels::{self, WheelSet};
use occ_shell::{files, Env};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Arguments of `cargo occ toolkit`.
#[derive(Debug, clap::Args)]
pub struct ToolkitArgs {
    #[command(subcommand)]
    command: ToolkitCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ToolkitCommand {
    /// Pip-install NVIDIA's pinned nvcc wheels into occ's per-user toolkit
    /// dir (OCC_CUDA_DIR, else $XDG_CACHE_HOME/occ/cuda or ~/.cache/occ/cuda);
    /// no root, nothing done when already installed.
    Install(InstallArgs),
    /// Print the nvcc occ would use; exit 1, with how to install one, if none.
    Path,
    /// Report what occ would use (nvcc, its version and archs, the host
    /// compiler, cuobjdump/nvdisasm, the lock, the CUDA version cudarc
    /// would take) and what to do about each gap.
    Doctor(DoctorArgs),
}

#[derive(Debug, clap::Args)]
struct InstallArgs {
    /// The Python that runs pip (default: $PYTHON, else python3).
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
    /// Also install ptxas 12.9 and 11.8 (sm_50..sm_72 and their log formats).
    #[arg(long)]
    legacy: bool,
    /// Also install a CUDA library of the same release, whose headers nvcc
    /// then finds as in a full toolkit: cublas, curand, cufft, cusparse,
    /// cusolver, nvrtc, nvjitlink, nvjpeg, npp, cupti (repeat, or separate
    /// with commas). Libraries installed before are kept.
    #[arg(long = "library", value_name = "NAME", value_delimiter = ',')]
    libraries: Vec<String>,
}

#[derive(Debug, clap::Args)]
struct DoctorArgs {
    /// Which package's lock to report (default: the package here).
    #[command(flatten)]
    locate: Locate,
}

/// Runs `cargo occ toolkit`; returns the exit code.
pub fn run(args: ToolkitArgs) -> Result<i32> {
    match args.command {
        ToolkitCommand::Install(a) => install(a),
        ToolkitCommand::Path => path(),
        ToolkitCommand::Doctor(a) => doctor(a),
    }
}

fn here() -> Result<PathBuf> {
    std::env::current_dir().context("cannot read the current folder")
}

/// The nvcc occ-build would find for a crate in the current folder.
fn find(cwd: &Path) -> occ_shell::Result<Nvcc> {
    toolkit::find_nvcc(&Env::new(), None, Some(cwd))
}

fn path() -> Result<i32> {
    match find(&here()?) {
        Ok(nvcc) => {
            println!("{}", nvcc.path.display());
            Ok(0)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(1)
        }
    }
}

// ---------------------------------------------------------------- install

fn install(args: InstallArgs) -> Result<i32> {
    if !cfg!(any(target_os = "linux", windows)) {
        bail!(
            "NVIDIA publishes nvcc wheels for Linux and Windows only; on this system build on \
             the committed occ.lock (OCC_NO_NVCC=1), or point NVCC at an nvcc you have"
        );
    }
    let env = Env::new();
    let Some(dir) = toolkit::toolkit_dir(&env) else {
        bail!("no folder to install into (HOME is not set); set OCC_CUDA_DIR=<folder>");
    };
    let asked = asked_libraries(&args.libraries)?;
    let sets: Vec<WheelSet> = wheels::wheel_sets()
        .into_iter()
        .filter(|s| args.legacy || !s.legacy)
        .enumerate()
        .map(|(i, s)| {
            if i == 0 {
                with_libraries(&dir, s, &asked)
            } else {
                s
            }
        })
        .collect();
    let pending: Vec<&WheelSet> = sets.iter().filter(|s| !installed(&dir, s)).collect();
    if pending.is_empty() {
        eprintln!(
            "cargo occ toolkit: up to date in {} ({})",
            dir.path.display(),
            sets.iter()
                .map(WheelSet::stamp)
                .collect::<Vec<_>>()
                .join(", ")
        );
    } else {
        let python = args
            .python
            .map(OsString::from)
            .or_else(|| env.var_os("PYTHON").filter(|p| !p.is_empty()))
            .unwrap_or_else(|| "python3".into());
        check_pip(&python)?;
        std::fs::create_dir_all(&dir.path)
            .with_context(|| format!("cannot create {}", dir.path.display()))?;
        for set in pending {
            install_set(&python, &dir.path, set)?;
        }
    }
    let nvcc = dir.nvcc();
    let version = Nvcc {
        path: nvcc.clone(),
        origin: "install".into(),
        launcher: None,
    }
    .version()
    .with_context(|| format!("the installed nvcc ({}) does not run", nvcc.display()))?;
    eprintln!("cargo occ toolkit: {version}");
    if !asked.is_empty() {
        if let Some(set) = sets.first() {
            eprintln!(
                "cargo occ toolkit: {} installed beside nvcc; it finds their headers in {}",
                asked.join(", "),
                dir.path
                    .join(set.name)
                    .join("nvidia/cu13/include")
                    .display()
            );
        }
    }
    println!("{}", nvcc.display());
    if dir.origin == "OCC_CUDA_DIR" {
        eprintln!("note: builds find it while OCC_CUDA_DIR is set as it is now");
    }
    // A toolkit found earlier in the lookup shadows this one.
    if let Ok(used) = find(&here()?) {
        if used.path != nvcc {
            eprintln!(
                "note: occ will use {} (found by {}) before this one; unset it to use this one",
                used.path.display(),
                used.origin
            );
        }
    }
    Ok(0)
}

/// The libraries of `--library`, as [`wheels::library_wheels`] names
/// them (an empty name, as `cublas,` gives, is none); an error naming the
/// ones occ installs for any other.
fn asked_libraries(names: &[String]) -> Result<Vec<&'static str>> {
    let known = wheels::library_wheels();
    names
        .iter()
        .filter(|name| !name.trim().is_empty())
        .map(|name| {
            let lower = name.trim().to_ascii_lowercase();
            known
                .iter()
                .find(|(n, _)| *n == lower)
                .map(|(n, _)| *n)
                .with_context(|| {
                    format!(
                        "no CUDA library `{name}` to install; occ installs {} (cuDNN and NCCL \
                         are released apart from the toolkit: pip-install NVIDIA's \
                         nvidia-cudnn-cu13 or nvidia-nccl-cu13 and add its include folder \
                         with .include(..))",
                        known.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                    )
                })
        })
        .collect()
}

/// The first default set with the libraries asked for and those its
/// install already has (kept, at today's pins) after its own wheels, in
/// the wheel list's order: they go into the nvcc's own folder, where nvcc
/// finds their headers without an `-I`.
fn with_libraries(dir: &ToolkitDir, mut set: WheelSet, asked: &[&str]) -> WheelSet {
    let had = stamp_of(dir, &set);
    let wheel = |req: &str| {
        req.split_once("==")
            .map_or(req.to_string(), |(w, _)| w.to_string())
    };
    for (name, req) in wheels::library_wheels() {
        let kept = had.iter().any(|h| wheel(h) == wheel(req));
        if asked.contains(&name) || kept {
            set.requirements.push(req);
        }
    }
    set
}

/// The requirements `<dir>/<set>/.stamp` lists (none when there is none).
fn stamp_of(dir: &ToolkitDir, set: &WheelSet) -> Vec<String> {
    std::fs::read_to_string(dir.path.join(set.name).join(".stamp"))
        .map(|s| s.trim().split('+').map(str::to_string).collect())
        .unwrap_or_default()
}

/// Whether `<dir>/<set>/.stamp` says the set is installed: it lists every
/// requirement of the set (a library installed beside them is no reason
/// to install again).
fn installed(dir: &ToolkitDir, set: &WheelSet) -> bool {
    let stamp = stamp_of(dir, set);
    !stamp.is_empty()
        && set
            .requirements
            .iter()
            .all(|r| stamp.iter().any(|s| s == r))
}

/// Fails with what to do when `python -m pip` cannot run.
fn check_pip(python: &OsString) -> Result<()> {
    let shown = Path::new(python).display().to_string();
    let out = Real.output(Cmd::new(python).args(["-m", "pip", "--version"]));
    match out {
        Err(e) => bail!(
            "cannot run `{shown}` ({e}); install Python 3 with pip, or name the interpreter \
             with --python PATH or PYTHON=PATH"
        ),
        Ok(out) if !out.status.success() => bail!(
            "`{shown} -m pip` does not work ({}); install pip (Debian/Ubuntu: `apt install \
             python3-pip`; elsewhere: `{shown} -m ensurepip --user`), or pass --python PATH",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Ok(_) => Ok(()),
    }
}

/// Installs one set into `<dir>/<set>.tmp-<pid>`, stamps it, then swaps it
/// into place, so that `<dir>/<set>` is either the old install or a
/// complete new one, never half of one.
fn install_set(python: &OsString, dir: &Path, set: &WheelSet) -> Result<()> {
    let dest = dir.join(set.name);
    let tmp = dir.join(format!("{}.tmp-{}", set.name, std::process::id()));
    remove(&tmp)?;
    eprintln!(
        "cargo occ toolkit: installing {} into {}",
        set.requirements.join(" "),
        dest.display()
    );
    // Outside the seam (occ-shell's `process`): pip's output goes straight
    // to the terminal while it downloads, which a `Cmd`'s does not.
    let status = std::process::Command::new(python)
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-warn-script-location",
            "--no-deps",
            "--target",
        ])
        .arg(&tmp)
        .args(&set.requirements)
        .stdin(std::process::Stdio::null())
        // pip's progress goes to stderr: stdout is the nvcc path only.
        .stdout(std::io::stderr())
        .status()
        .context("cannot run pip")?;
    if !status.success() {
        remove(&tmp)?;
        bail!(
            "pip failed ({status}) installing {}; see its output above (network, disk space, \
             or a Python too old for the wheels)",
            set.requirements.join(" ")
        );
    }
    make_executable(&tmp)?;
    std::fs::write(tmp.join(".stamp"), format!("{}\n", set.stamp()))
        .with_context(|| format!("cannot write {}", tmp.join(".stamp").display()))?;
    let old = dir.join(format!("{}.old-{}", set.name, std::process::id()));
    if dest.exists() {
        std::fs::rename(&dest, &old)
            .with_context(|| format!("cannot move {} aside", dest.display()))?;
    }
    std::fs::rename(&tmp, &dest)
        .with_context(|| format!("cannot move {} to {}", tmp.display(), dest.display()))?;
    remove(&old)
}

fn remove(path: &Path) -> Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot remove {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// The wheels do not always keep the executable bit: sets it on the
/// programs in `nvidia/*/bin` and `nvidia/*/nvvm/bin` that lack it.
fn make_executable(root: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let Ok(homes) = std::fs::read_dir(root.join("nvidia")) else {
            return Ok(());
        };
        for home in homes.flatten() {
            for bin in [home.path().join("bin"), home.path().join("nvvm/bin")] {
                let Ok(files) = std::fs::read_dir(&bin) else {
                    continue;
                };
                for file in files.flatten() {
                    let path = file.path();
                    let Ok(meta) = std::fs::metadata(&path) else {
                        continue;
                    };
                    let mode = meta.permissions().mode();
                    if meta.is_file() && mode & 0o111 != 0o111 {
                        std::fs::set_permissions(
                            &path,
                            std::fs::Permissions::from_mode(mode | 0o111),
                        )
                        .with_context(|| format!("cannot make {} executable", path.display()))?;
                    }
                }
            }
        }
    }
    #[cfg(not(unix))]
    let _ = root;
    Ok(())
}

// ---------------------------------------------------------------- doctor

/// One line of the report, and what to do when it is a gap.
struct Line {
    label: &'static str,
    value: String,
    fix: Option<String>,
}

fn line(label: &'static str, value: impl Into<String>, fix: Option<String>) -> Line {
    Line {
        label,
        value: value.into(),
        fix,
    }
}

fn doctor(args: DoctorArgs) -> Result<i32> {
    let cwd = here()?;
    let mut lines = Vec::new();
    let mut usable = false;
    let mut nvcc_version = None;
    match find(&cwd) {
        // The message lists every place looked and ends with how to install nvcc.
        Err(e) => lines.push(line("nvcc", "not found", Some(e.to_string()))),
        Ok(nvcc) => {
            lines.push(line(
                "nvcc",
                format!("{} (found by {})", nvcc.path.display(), nvcc.origin),
                None,
            ));
            match nvcc.version() {
                Ok(v) => {
                    nvcc_version = Some(toolkit::short_version(&v).to_string());
                    lines.push(line("version", v, None));
                    usable = true;
                }
                Err(e) => lines.push(line(
                    "version",
                    "nvcc does not run",
                    Some(format!("{e}; reinstall it (`cargo occ toolkit install`)")),
                )),
            }
            if usable {
                lines.push(archs(&nvcc));
                let (host, accepted) = host_compiler(&nvcc);
                usable &= accepted;
                lines.push(host);
            }
            lines.push(launcher(&nvcc));
            for tool in ["cuobjdump", "nvdisasm"] {
                lines.push(beside(&nvcc, tool));
            }
        }
    }
    lines.push(lock(&args.locate, &cwd, nvcc_version.as_deref()));
    let cudarc = cudarc_lines(&args.locate, &cwd);
    let cudarc_stops = cudarc.iter().any(|l| l.fix.is_some());
    lines.extend(cudarc);
    let width = lines.iter().map(|l| l.label.len()).max().unwrap_or(0);
    for l in &lines {
        println!("{:width$}  {}", l.label, l.value);
        if let Some(fix) = &l.fix {
            for (i, text) in fix.lines().enumerate() {
                let head = if i == 0 { "fix: " } else { "     " };
                println!("{:width$}    {head}{text}", "");
            }
        }
    }
    if usable {
        println!("\nocc builds with this nvcc.");
    } else {
        println!("\nocc cannot compile kernels here; builds stand on occ.lock if there is one.");
    }
    if cudarc_stops {
        println!("cudarc's build script would stop this crate's build: see the fix above.");
    }
    Ok(if usable && !cudarc_stops { 0 } else { 1 })
}

/// One line per cudarc of the crate here (none when it has none): whether
/// cudarc's build script would stop at the nvcc on `PATH`
/// ([`cudarc::judge`]).
fn cudarc_lines(locate: &Locate, cwd: &Path) -> Vec<Line> {
    let in_package = cwd.ancestors().any(|d| d.join("Cargo.toml").is_file());
    if locate.manifest_path.is_none() && !in_package {
        return Vec::new();
    }
    let found = match cudarc::of_crate(locate.manifest_path.as_deref()) {
        Ok(found) => found,
        Err(e) => return vec![line("cudarc", format!("not checked: {e:#}"), None)],
    };
    let env = std::env::var("CUDARC_CUDA_VERSION").ok();
    let nvcc = cudarc::nvcc_on_path();
    found
        .iter()
        .map(|c| {
            let v = cudarc::judge(c, env.as_deref(), nvcc.as_deref());
            line("cudarc", v.value, v.fix)
        })
        .collect()
}

fn archs(nvcc: &Nvcc) -> Line {
    let out = Real.output(Cmd::new(&nvcc.path).arg("--list-gpu-code"));
    let mut archs: Vec<(u32, String)> = match &out {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|a| {
                let rest = a.strip_prefix("sm_")?;
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                Some((digits.parse().unwrap_or(0), a.to_string()))
            })
            .collect(),
        _ => Vec::new(),
    };
    archs.sort();
    if archs.is_empty() {
        return line(
            "archs",
            "unknown (`nvcc --list-gpu-code` failed)",
            Some(
                "check that nvcc runs: `cargo occ toolkit path`, then run it with --version".into(),
            ),
        );
    }
    let names: Vec<String> = archs.into_iter().map(|(_, a)| a).collect();
    line("archs", names.join(" "), None)
}

/// The host compiler nvcc runs (the first program of `nvcc --dryrun`), and
/// whether nvcc accepts it: `nvcc -E` of an empty `.cu` runs it for real,
/// so an unsupported version fails there as it would in a build.
fn host_compiler(nvcc: &Nvcc) -> (Line, bool) {
    let scratch = std::env::temp_dir().join(format!("occ-doctor-{}", std::process::id()));
    let result = probe_host(nvcc, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    match result {
        Ok((name, None)) => (line("host c++", format!("{name}: accepted by nvcc"), None), true),
        Ok((name, Some(err))) => (
            line(
                "host c++",
                format!("{name}: rejected by nvcc"),
                Some(format!(
                    "{err}\ninstall a host compiler this nvcc supports and set NVCC_CCBIN=/path/to/it \
                     (NVCC_PREPEND_FLAGS=-allow-unsupported-compiler skips the check, at your own risk)"
                )),
            ),
            false,
        ),
        Err(e) => (
            line(
                "host c++",
                "unknown",
                Some(format!("{e:#}; install g++ (or set NVCC_CCBIN)")),
            ),
            false,
        ),
    }
}

/// (the host compiler's description, nvcc's complaint if it rejects it).
fn probe_host(nvcc: &Nvcc, scratch: &Path) -> Result<(String, Option<String>)> {
    std::fs::create_dir_all(scratch)
        .with_context(|| format!("cannot create {}", scratch.display()))?;
    let cu = scratch.join("empty.cu");
    std::fs::write(&cu, "").with_context(|| format!("cannot write {}", cu.display()))?;
    let dry = Real
        .output(
            Cmd::new(&nvcc.path)
                .args(["--dryrun", "-c"])
                .arg(&cu)
                .arg("-o")
                .arg(scratch.join("empty.o")),
        )
        .context("cannot run nvcc --dryrun")?;
    let text = String::from_utf8_lossy(&dry.stderr).into_owned();
    let mut search_path = std::env::var_os("PATH");
    let mut program = None;
    for cmd in text.lines().filter_map(|l| l.strip_prefix("#$ ")) {
        let first = cmd.split_whitespace().next().unwrap_or_default();
        if let Some(value) = first.strip_prefix("PATH=") {
            search_path = Some(value.into());
        }
        if !first.contains('=') {
            program = Some(first.trim_matches('"').to_string());
            break;
        }
    }
    // nvcc probes the host compiler before it prints a dry run: one it
    // cannot run leaves the dry run empty, and `-E` below says why.
    let program = program.or_else(|| std::env::var("NVCC_CCBIN").ok());
    let name = match program {
        None => "unknown (`nvcc --dryrun` named none)".to_string(),
        Some(program) => describe_host(&program, search_path.as_ref()),
    };
    let pre = Real
        .output(
            Cmd::new(&nvcc.path)
                .args(["-E", "-x", "cu"])
                .arg(&cu)
                .arg("-o")
                .arg(scratch.join("empty.ii"))
                .writes(scratch.join("empty.ii")),
        )
        .context("cannot run nvcc -E")?;
    if pre.status.success() {
        return Ok((name, None));
    }
    let err = String::from_utf8_lossy(&pre.stderr);
    let err = err
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(4)
        .collect::<Vec<_>>()
        .join("\n");
    Ok((name, Some(err)))
}

/// `/usr/bin/gcc (gcc (Debian 12.2.0-14) 12.2.0)`: where the host compiler
/// is and the first line of its `--version`.
fn describe_host(program: &str, search_path: Option<&OsString>) -> String {
    let resolved = if program.contains('/') || program.contains('\\') {
        Some(PathBuf::from(program))
    } else {
        search_path.and_then(|p| {
            std::env::split_paths(p)
                .map(|d| d.join(program))
                .find(|c| c.is_file())
        })
    };
    let version = resolved.as_ref().and_then(|p| {
        let out = Real.output(Cmd::new(p).arg("--version")).ok()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines().next().map(str::to_string)
    });
    match (&resolved, version) {
        (Some(p), Some(v)) => format!("{} ({v})", p.display()),
        (Some(p), None) => p.display().to_string(),
        (None, _) => format!("{program} (not on PATH)"),
    }
}

fn launcher(nvcc: &Nvcc) -> Line {
    match &nvcc.launcher {
        None => line("launcher", "none (OCC_NVCC_LAUNCHER is not set)", None),
        Some(l) => {
            let runs = Real.output(Cmd::new(l).arg("--version")).is_ok();
            if runs {
                line("launcher", l.display().to_string(), None)
            } else {
                line(
                    "launcher",
                    format!("{} does not run", l.display()),
                    Some("install it, or unset OCC_NVCC_LAUNCHER".into()),
                )
            }
        }
    }
}

/// cuobjdump or nvdisasm beside nvcc. Builds run nvdisasm to locate spills
/// and register pressure by source line (without it they say so once);
/// cuobjdump is for looking at the device code by hand.
fn beside(nvcc: &Nvcc, tool: &'static str) -> Line {
    let path = nvcc.beside(tool);
    if path.is_file() {
        return line(tool, path.display().to_string(), None);
    }
    let (what, fix) = match tool {
        "nvdisasm" => (
            "not beside nvcc: builds do not locate spills by source line".to_string(),
            "`cargo occ toolkit install` (its wheels include nvdisasm), or the \
             nvidia-cuda-nvdisasm wheel of nvcc's release"
                .to_string(),
        ),
        _ => (
            format!("not beside nvcc (optional: occ's builds do not run {tool})"),
            format!(
                "for reading device code by hand, use a full CUDA toolkit's {tool}, or \
                 `cargo occ toolkit install` (its wheels include {tool})"
            ),
        ),
    };
    line(tool, what, Some(fix))
}

/// The lock of the package here: the one its last build compared with,
/// else `occ.lock` beside the nearest `Cargo.toml`.
fn lock(locate: &Locate, cwd: &Path, nvcc_version: Option<&str>) -> Line {
    let located = locate.find().ok().and_then(|l| l.lock(None).ok());
    let (path, lock) = match located {
        Some(found) => found,
        None => {
            let Some(package) = cwd.ancestors().find(|d| d.join("Cargo.toml").is_file()) else {
                return line("lock", "none: not in a cargo package", None);
            };
            let path = package.join(DEFAULT_LOCK_FILE);
            match files::read_lock(&path) {
                Ok(lock) => (path, lock),
                Err(e) => {
                    return line(
                        "lock",
                        format!("{}: unreadable", path.display()),
                        Some(format!("{e}; rebuild with nvcc, then `cargo occ bless`")),
                    )
                }
            }
        }
    };
    let Some(lock) = lock else {
        return line(
            "lock",
            format!("{}: none yet", path.display()),
            Some(
                "build with nvcc, then `cargo occ bless` (or `OCC_BLESS=1 cargo build`) and \
                 commit occ.lock: builds gate on it, and stand on it where there is no nvcc"
                    .into(),
            ),
        );
    };
    let value = format!(
        "{}: {}, {} ({}), made by nvcc {}",
        path.display(),
        occ_model::render::units::count(lock.kernels.len(), "kernel"),
        lock.archs.join(" "),
        lock.package,
        lock.nvcc
    );
    let fix = nvcc_version
        .filter(|v| toolkit::short_version(&lock.nvcc) != *v)
        .map(|v| {
            format!(
                "this nvcc is {v}: its numbers may differ from the lock's; after a build, \
                 `cargo occ check` shows how, `cargo occ bless` adopts them"
            )
        });
    line("lock", value, fix)
}
