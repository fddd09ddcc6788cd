//! Support for the tests that change what surrounds a build (the cache's,
//! the no-nvcc path's, the gate's): executable scripts, a scratch copy of
//! the CUDA toolkit with one tool swapped for a wrapper or none at all,
//! what a scratch crate ([`crate::ScratchCrate`]) printed or left in its
//! `OUT_DIR`, its build script run directly, and the output of an
//! `$OUT_DIR/occ` to compare.

use crate::{build_env, build_of, nvcc, text, Scratch, ScratchCrate};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

/// A kernel with few registers.
pub const LIGHT: &str = "extern \"C\" __global__ void scale(float* p, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) p[i] *= 2.0f;\n}\n";

/// The same kernel with 64 values live at once: many more registers.
pub const HEAVY: &str = "extern \"C\" __global__ void scale(float* p, int n) {\n  float v[64];\n#pragma unroll\n  for (int i = 0; i < 64; ++i) v[i] = p[(threadIdx.x + i * 131) % n];\n  float acc = 0.0f;\n#pragma unroll\n  for (int i = 0; i < 64; ++i)\n#pragma unroll\n    for (int j = 0; j < 64; ++j) acc += v[i] * v[(i * 7 + j) % 64] * (float)(i ^ j);\n  p[threadIdx.x] = acc;\n}\n";

/// A kernel whose weight is chosen by the preprocessor: `HEAVY_KERNEL`
/// defined (by a header, a `-D` or an nvcc environment flag) makes it heavy.
pub const SWITCHED: &str = "#include \"common.cuh\"\n#ifdef HEAVY_KERNEL\n#define N 64\n#else\n#define N 2\n#endif\nextern \"C\" __global__ void scale(float* p, int n) {\n  float v[N];\n#pragma unroll\n  for (int i = 0; i < N; ++i) v[i] = p[(threadIdx.x + i * 131) % n];\n  float acc = 0.0f;\n#pragma unroll\n  for (int i = 0; i < N; ++i)\n#pragma unroll\n    for (int j = 0; j < N; ++j) acc += v[i] * v[(i * 7 + j) % N] * (float)(i ^ j);\n  p[threadIdx.x] = acc;\n}\n";

/// The environment of a machine with no nvcc anywhere occ looks (no `NVCC`,
/// `CUDA_*`, a bare `PATH`, `home` as every per-user folder), on top of
/// `extra`.
pub fn without_nvcc<'a>(
    home: &'a Path,
    extra: &[(&'a str, Option<&'a str>)],
) -> Vec<(&'a str, Option<&'a str>)> {
    let home = home.to_str().expect("utf-8 path");
    let mut env = vec![
        ("NVCC", None),
        ("CUDA_HOME", None),
        ("CUDA_PATH", None),
        ("CUDA_ROOT", None),
        ("PATH", Some("/usr/bin:/bin")),
        ("OCC_CUDA_DIR", Some(home)),
        ("XDG_CACHE_HOME", Some(home)),
        ("HOME", Some(home)),
    ];
    env.extend_from_slice(extra);
    env
}

/// `kernels/k.cu` ([`LIGHT`]) with its lock blessed by nvcc (an in-process
/// build for sm_80 into `out/`).
pub fn blessed_light_crate() -> Scratch {
    let s = Scratch::new();
    s.write("kernels/k.cu", LIGHT);
    build_of(s.path(), "out", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]))
        .expect("bless with nvcc");
    assert!(s.path().join("occ.lock").is_file(), "no occ.lock written");
    s
}

/// Writes an executable `#!/bin/sh` script running `body`, creating its
/// folder; returns its path.
pub fn script(path: &Path, body: &str) -> PathBuf {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).expect("create script folder");
    }
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).expect("write script");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
            .expect("chmod script");
    }
    path.to_path_buf()
}

/// The installed toolkit's root (the folder holding `bin/nvcc`).
pub fn toolkit_home() -> PathBuf {
    nvcc()
        .parent()
        .and_then(Path::parent)
        .expect("nvcc in <home>/bin")
        .to_path_buf()
}

/// A scratch toolkit in `dir`: the installed toolkit's layout, every file a
/// symlink to the real one, except `nvcc.profile` (a copy, so a test can
/// edit it) and the tools in `swap` (paths below the toolkit root such as
/// `bin/ptxas` or `nvvm/bin/cicc`), each a wrapper script that runs the real
/// tool with the extra arguments given. nvcc finds its tools beside its own
/// (unresolved) path, so the symlinked nvcc runs the wrappers. Returns the
/// scratch `bin/nvcc`.
pub fn scratch_toolkit(dir: &Path, swap: &[(&str, &str)]) -> PathBuf {
    let real = toolkit_home();
    link_tree(&real, dir, Path::new(""), swap);
    dir.join("bin/nvcc")
}

fn link_tree(real: &Path, dir: &Path, rel: &Path, swap: &[(&str, &str)]) {
    std::fs::create_dir_all(dir.join(rel)).expect("create toolkit folder");
    // Folders on the way to a swapped tool are made; others are linked whole.
    let on_way = |p: &Path| swap.iter().any(|(s, _)| Path::new(s).starts_with(p));
    for entry in std::fs::read_dir(real.join(rel))
        .expect("read toolkit")
        .flatten()
    {
        let child = rel.join(entry.file_name());
        let src = real.join(&child);
        let dst = dir.join(&child);
        let key = child.to_string_lossy().into_owned();
        if let Some((_, extra)) = swap.iter().find(|(s, _)| *s == key) {
            script(&dst, &format!("exec '{}' \"$@\" {extra}", src.display()));
        } else if key == "bin/nvcc.profile" {
            std::fs::copy(&src, &dst).expect("copy nvcc.profile");
        } else if src.is_dir() && (on_way(&child) || key == "bin") {
            link_tree(real, dir, &child, swap);
        } else {
            std::os::unix::fs::symlink(&src, &dst).expect("symlink toolkit file");
        }
    }
}

/// Replaces a swapped tool's wrapper with one passing other extra arguments.
pub fn reswap(toolkit: &Path, tool: &str, extra: &str) {
    let real = toolkit_home().join(tool);
    script(
        &toolkit.join(tool),
        &format!("exec '{}' \"$@\" {extra}", real.display()),
    );
}

/// `N` of the `registers=N` line a scale crate's ([`ScratchCrate::scale`])
/// binary printed.
pub fn printed_registers(out: &Output) -> u32 {
    let t = text(out);
    assert!(out.status.success(), "cargo run failed:\n{t}");
    t.lines()
        .find_map(|l| l.strip_prefix("registers="))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no registers= line in:\n{t}"))
}

/// The `$OUT_DIR` of the newest build of package `name` in the scratch
/// target folder.
pub fn newest_out_dir(name: &str) -> PathBuf {
    let build = crate::scratch_target_dir().join("debug").join("build");
    let mut newest: Option<(std::time::SystemTime, PathBuf)> = None;
    for entry in std::fs::read_dir(build).expect("build dir").flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let out = entry.path().join("out");
        // `<name>-<hash>` exactly: `<name>-xdg-<hash>` is another package.
        let is_ours = file
            .strip_prefix(&format!("{name}-"))
            .is_some_and(|hash| hash.chars().all(|c| c.is_ascii_hexdigit()));
        if !is_ours || !out.is_dir() {
            continue;
        }
        // The manifest's time: cargo reuses an OUT_DIR (its hash leaves out
        // the crate's folder), so the folder's own time is its first build's.
        let manifest = out.join("occ").join("manifest.json");
        if let Ok(t) = std::fs::metadata(&manifest).and_then(|m| m.modified()) {
            if newest.as_ref().is_none_or(|(n, _)| t > *n) {
                newest = Some((t, out));
            }
        }
    }
    newest.map(|(_, p)| p).expect("an OUT_DIR of the package")
}

/// What a build gives a user: `manifest.json`, `kernels.rs` and every device
/// code file (`.cubin`, `.ptx`, `.fatbin`) of an `$OUT_DIR/occ`, by path below
/// it, with `out_dir` itself replaced by `$OUT_DIR` where it appears.
pub fn outputs(occ_dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    collect(occ_dir, occ_dir, &mut files);
    let out_dir = occ_dir.parent().unwrap_or(occ_dir).display().to_string();
    for bytes in files.values_mut() {
        if let Ok(text) = std::str::from_utf8(bytes) {
            if text.contains(&out_dir) {
                *bytes = text.replace(&out_dir, "$OUT_DIR").into_bytes();
            }
        }
    }
    files
}

fn collect(root: &Path, dir: &Path, files: &mut BTreeMap<String, Vec<u8>>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let rel = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .to_string_lossy()
            .into_owned();
        if rel == "cache" || rel == "tmp" {
            continue;
        }
        if path.is_dir() {
            collect(root, &path, files);
            continue;
        }
        let keep = rel == "manifest.json"
            || rel == "kernels.rs"
            || [".cubin", ".ptx", ".fatbin"]
                .iter()
                .any(|ext| rel.ends_with(ext));
        if keep {
            files.insert(rel, std::fs::read(&path).expect("read output"));
        }
    }
}

/// Panics naming every file in which `warm` and `cold` differ.
pub fn assert_same_outputs(warm: &Path, cold: &Path, what: &str) {
    let w = outputs(warm);
    let c = outputs(cold);
    let names: std::collections::BTreeSet<&String> = w.keys().chain(c.keys()).collect();
    let differ: Vec<String> = names
        .into_iter()
        .filter(|n| w.get(*n) != c.get(*n))
        .map(|n| match (w.get(n), c.get(n)) {
            (None, _) => format!("{n}: only in the cold build"),
            (_, None) => format!("{n}: only in the warm build"),
            _ => format!("{n}: differs"),
        })
        .collect();
    assert!(
        differ.is_empty(),
        "{what}: the warm build differs from a cold build of the same inputs:\n  {}",
        differ.join("\n  ")
    );
}

/// `scale`'s registers on `arch` in an `$OUT_DIR/occ/manifest.json`.
pub fn manifest_registers(occ_dir: &Path, arch: &str) -> u64 {
    let text = std::fs::read_to_string(occ_dir.join("manifest.json")).expect("manifest.json");
    let m: serde_json::Value = serde_json::from_str(&text).expect("manifest JSON");
    m["kernels"]
        .as_array()
        .and_then(|ks| ks.iter().find(|k| k["name"] == "scale"))
        .and_then(|k| k["archs"][arch]["registers"].as_u64())
        .unwrap_or_else(|| panic!("no scale on {arch} in {text}"))
}

/// A scratch crate's compiled build script, run directly with the
/// environment cargo gives a build script, so that a test chooses `OUT_DIR`
/// (a warm one kept between runs, a cold empty one) and sees every run.
#[derive(Clone)]
pub struct BuildScript {
    /// The `build-script-build` executable.
    pub exe: PathBuf,
    /// The crate root (`CARGO_MANIFEST_DIR`).
    pub root: PathBuf,
    /// The package name (`CARGO_PKG_NAME`).
    pub package: String,
}

impl BuildScript {
    /// Builds the scratch crate once with cargo and finds its build script
    /// binary.
    pub fn compile(krate: &ScratchCrate) -> BuildScript {
        let package = krate.name();
        let out = krate.output(&["build"], &[]);
        assert!(out.status.success(), "cargo build failed:\n{}", text(&out));
        let build = crate::scratch_target_dir().join("debug").join("build");
        let mut newest: Option<(std::time::SystemTime, PathBuf)> = None;
        for entry in std::fs::read_dir(build).expect("build dir").flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let exe = entry.path().join("build-script-build");
            if !name.starts_with(&format!("{package}-")) || !exe.is_file() {
                continue;
            }
            if let Ok(t) = std::fs::metadata(&exe).and_then(|m| m.modified()) {
                if newest.as_ref().is_none_or(|(n, _)| t > *n) {
                    newest = Some((t, exe));
                }
            }
        }
        BuildScript {
            exe: newest.map(|(_, p)| p).expect("the build script binary"),
            root: krate.path().to_path_buf(),
            package: package.to_string(),
        }
    }

    /// A command running the build script into `out_dir` with cargo's
    /// variables; the caller's environment has no `OCC_*`, `CUDA_*`, `NVCC*`
    /// or `CARGO_*` variable; `env` adds (or, with `None`, removes) more.
    pub fn command(&self, out_dir: &Path, env: &[(&str, Option<&str>)]) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.exe);
        cmd.env_clear();
        for key in ["PATH", "HOME", "TMPDIR", "LANG"] {
            if let Some(v) = std::env::var_os(key) {
                cmd.env(key, v);
            }
        }
        std::fs::create_dir_all(out_dir).expect("create OUT_DIR");
        let target = "x86_64-unknown-linux-gnu";
        cmd.env("CARGO_MANIFEST_DIR", &self.root)
            .env("CARGO_PKG_NAME", &self.package)
            .env("CARGO_PKG_VERSION", "0.1.0")
            .env("CARGO", "cargo")
            .env("OUT_DIR", out_dir)
            .env("TARGET", target)
            .env("HOST", target)
            .env("PROFILE", "debug")
            .env("OPT_LEVEL", "0")
            .env("DEBUG", "true")
            .env("NUM_JOBS", "2")
            .env("RUSTC", "rustc")
            .env("CARGO_CFG_TARGET_ARCH", "x86_64")
            .env("CARGO_CFG_TARGET_OS", "linux")
            .env("CARGO_CFG_TARGET_FAMILY", "unix")
            .env("CARGO_CFG_TARGET_ENV", "gnu")
            .env("CARGO_CFG_UNIX", "")
            .env("CARGO_CFG_TARGET_POINTER_WIDTH", "64")
            .env("CARGO_CFG_TARGET_ENDIAN", "little")
            .env("CARGO_CFG_DEBUG_ASSERTIONS", "")
            .env("NVCC", nvcc())
            .current_dir(&self.root);
        for (k, v) in env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        cmd
    }

    /// Runs the build script into `out_dir`; returns its output.
    pub fn run(&self, out_dir: &Path, env: &[(&str, Option<&str>)]) -> Output {
        self.command(out_dir, env)
            .output()
            .expect("run the build script")
    }
}

/// Whether a build script's output says it succeeded (no `cargo::error=`
/// line and exit 0).
pub fn script_ok(out: &Output) -> bool {
    out.status.success()
        && !String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.starts_with("cargo::error=") || l.starts_with("cargo:error="))
}
