//! The README's `Cargo.toml` snippet ("Using occ in your crate"), taken
//! from README.md at test time so that the two cannot drift, builds as a
//! new user's crate with CUDA 13.5's nvcc on `PATH` (the exports
//! `scripts/cuda-toolkit` prints) and with no nvcc at all (issue 27).
//!
//! `cargo check` is enough: it compiles and runs every dependency's build
//! script (cudarc's is the one that panicked, "Unsupported cuda toolkit
//! version: `13.5`") and type-checks occ's `cuda` module against the
//! bindings cudarc chose. A control build of the same snippet without its
//! `cudarc` line shows that the environment with nvcc is the one where
//! cudarc stops, so the test proves the line is what keeps it building.

use occ_tests::{fail, succeed, text, workspace_root, ScratchCrate};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the README's dependencies come from, and the checkout the test
/// builds them from instead (cargo cannot `[patch]` a git source it cannot
/// reach, and the tests run offline).
const GIT: &str = "git = \"https://github.com/occ-rs/occ\"";

/// The first fenced block of kind `lang` after the line `heading`.
pub fn readme_block(heading: &str, lang: &str) -> String {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).expect("README.md");
    let after = readme
        .split_once(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("README.md has no heading `{heading}`"))
        .1;
    let fence = format!("```{lang}\n");
    let block = after
        .split_once(&fence)
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .unwrap_or_else(|| panic!("README.md has no ```{lang} block after `{heading}`"))
        .0;
    format!("{block}\n")
}

/// The README's snippet with each occ crate taken from this checkout: the
/// git source is the only thing replaced.
fn snippet() -> String {
    let snippet = readme_block("## Using occ in your crate", "toml");
    for krate in ["occ", "occ-build"] {
        assert!(
            snippet.contains(&format!("\n{krate} = {{ {GIT}")),
            "the README's snippet takes {krate} from {GIT}:\n{snippet}"
        );
    }
    let mut out = String::new();
    for line in snippet.lines() {
        let krate = line.split(' ').next().unwrap_or_default();
        let local = workspace_root().join(krate);
        out += &line.replace(GIT, &format!("path = {:?}", local.display().to_string()));
        out.push('\n');
    }
    out
}

fn scratch(name: &str, snippet: &str) -> ScratchCrate {
    let manifest = format!(
        "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n\n{snippet}"
    );
    ScratchCrate::new(name).file("Cargo.toml", &manifest).file(
        "src/main.rs",
        "fn main() {\n    let _ = occ::cuda::driver_present();\n}\n",
    )
}

/// `PATH` without any folder holding an nvcc.
fn path_without_nvcc() -> OsString {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let kept: Vec<PathBuf> = std::env::split_paths(&path)
        .filter(|dir| !dir.join("nvcc").exists())
        .collect();
    std::env::join_paths(kept).expect("PATH")
}

/// The toolkit's exports, as `scripts/cuda-toolkit --print` gives them.
fn toolkit_exports() -> Vec<(String, String)> {
    let out = succeed(
        Command::new(workspace_root().join("scripts/cuda-toolkit")).arg("--print"),
        "scripts/cuda-toolkit --print",
    );
    let path = path_without_nvcc();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("export ")?.split_once('='))
        .map(|(k, v)| (k.to_string(), v.replace("$PATH", &path.to_string_lossy())))
        .collect()
}

/// `cargo check -v` in `krate`, with `with_nvcc`: the toolkit's exports,
/// else no nvcc on `PATH` and no `CUDA_HOME`. `CUDNN_LIB` (which cudarc's
/// build script watches, and reads only to link cuDNN) is new on every
/// call, so that the script runs again each time.
fn check(krate: &ScratchCrate, with_nvcc: bool) -> Command {
    let mut cmd = krate.cargo(&["check", "-v"]);
    for var in [
        "CUDA_HOME",
        "CUDA_PATH",
        "CUDA_ROOT",
        "CUDA_TOOLKIT_ROOT_DIR",
        "CUDARC_CUDA_VERSION",
        "NVCC",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("PATH", path_without_nvcc());
    if with_nvcc {
        for (k, v) in toolkit_exports() {
            cmd.env(k, v);
        }
    }
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    cmd.env("CUDNN_LIB", krate.path().join(format!("nonce-{nonce}")));
    cmd
}

fn assert_ran_cudarc_cleanly(out: &str, what: &str) {
    assert!(
        out.contains("cudarc-") && out.contains("build-script-build"),
        "{what}: cudarc's build script did not run:\n{out}"
    );
    for bad in [
        "panicked",
        "Unsupported cuda toolkit version",
        "RUST_BACKTRACE",
    ] {
        assert!(!out.contains(bad), "{what}: `{bad}`:\n{out}");
    }
}

#[test]
fn the_readme_snippet_builds_with_nvcc_13_5_on_path_and_without_nvcc() {
    let exports = toolkit_exports();
    let nvcc = exports
        .iter()
        .find(|(k, _)| k == "CUDA_HOME")
        .map(|(_, v)| Path::new(v).join("bin/nvcc"))
        .expect("scripts/cuda-toolkit --print exports CUDA_HOME");
    assert!(nvcc.is_file(), "{}", nvcc.display());

    let krate = scratch("readme_snippet", &snippet());
    let without = text(&succeed(&mut check(&krate, false), "snippet, no nvcc"));
    assert_ran_cudarc_cleanly(&without, "snippet, no nvcc");
    let with = text(&succeed(&mut check(&krate, true), "snippet, nvcc 13.5"));
    assert_ran_cudarc_cleanly(&with, "snippet, nvcc 13.5");
}

#[test]
fn without_its_cudarc_line_the_snippet_stops_in_cudarc_with_nvcc_13_5() {
    let full = snippet();
    let lines: Vec<&str> = full
        .lines()
        .filter(|l| !l.starts_with("cudarc ="))
        .collect();
    assert_eq!(lines.len() + 1, full.lines().count(), "{full}");
    let krate = scratch("readme_snippet_bare", &(lines.join("\n") + "\n"));
    let out = text(&fail(&mut check(&krate, true), "no cudarc line, nvcc 13.5"));
    assert!(
        out.contains("Unsupported cuda toolkit version: `13.5`"),
        "{out}"
    );
}
