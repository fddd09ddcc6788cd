//! The README's first page, "From nothing to a gated crate", tested as
//! written: its `Cargo.toml`, `build.rs`, kernel and
//! `src/main.rs` are taken from README.md at test time, so that the two
//! cannot drift, and built as a new user's crate with CUDA 13.5's nvcc on
//! `PATH` (the exports `scripts/cuda-toolkit` prints). `cargo occ bless`
//! (this workspace's binary) writes the lock; the crate then also builds
//! with no nvcc at all, from the lock; and the kernel made heavier at the
//! 32 × 8 launch that build.rs declares fails both CI steps, `cargo build`
//! and `cargo occ check`, naming it.
//!
//! One scratch crate, one arch (`OCC_ARCHS=sm_80`, which the README's
//! build.rs lets override its list), debug builds into the shared scratch
//! target. cudarc's build script runs in each environment (it is the one
//! that panicked, "Unsupported cuda toolkit version: `13.5`"); a control
//! check of the snippet without its `cudarc` line shows that nvcc 13.5 on
//! `PATH` is where cudarc stops, so the line is what keeps it building.

use crate::occ;
use occ_tests::{fail, succeed, text, workspace_root, ScratchCrate};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

/// Where the README's dependencies come from, and the checkout the test
/// builds them from instead (cargo cannot `[patch]` a git source it cannot
/// reach, and the tests run offline).
const GIT: &str = "git = \"https://github.com/occ-rs/occ\"";

/// The first page's section of README.md.
const SECTION: &str = "## From nothing to a gated crate";

/// The README's first page: from `SECTION` to the next `## ` heading.
fn first_page() -> String {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).expect("README.md");
    let after = readme
        .split_once(&format!("\n{SECTION}\n"))
        .unwrap_or_else(|| panic!("README.md has no heading `{SECTION}`"))
        .1;
    after.split("\n## ").next().unwrap_or_default().to_string()
}

/// The fenced blocks of the first page: each block's info string and text.
fn blocks() -> Vec<(String, String)> {
    let page = first_page();
    let mut out = Vec::new();
    let mut rest = page.as_str();
    while let Some((_, open)) = rest.split_once("\n```") {
        let Some((info, body)) = open.split_once('\n') else {
            break;
        };
        let Some((block, after)) = body.split_once("\n```\n") else {
            panic!("README.md: an unclosed ```{info} block on the first page")
        };
        out.push((info.to_string(), format!("{block}\n")));
        rest = after;
    }
    out
}

/// The first page's block of kind `lang` whose first line is `first`
/// (`""`: the first block of that kind).
fn block(lang: &str, first: &str) -> String {
    blocks()
        .into_iter()
        .find(|(info, text)| {
            info.split(',').next() == Some(lang)
                && text.lines().next().unwrap_or("").starts_with(first)
        })
        .map(|(_, text)| text)
        .unwrap_or_else(|| {
            panic!("README.md's first page has no ```{lang} block starting `{first}`")
        })
}

/// The README's `Cargo.toml` lines with each occ crate taken from this
/// checkout: the git source is the only thing replaced.
fn snippet() -> String {
    let snippet = block("toml", "");
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

fn manifest(name: &str, snippet: &str) -> String {
    format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n\n{snippet}")
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

/// `cargo <args> -v` in `krate` for sm_80, with `with_nvcc`: the toolkit's
/// exports, else no nvcc on `PATH`, no `CUDA_HOME` and `OCC_NO_NVCC=1`.
/// `CUDNN_LIB` (which cudarc's build script watches, and reads only to
/// link cuDNN) is new on every call, so that the script runs again each time.
fn cargo(krate: &ScratchCrate, args: &[&str], with_nvcc: bool) -> Command {
    let mut cmd = krate.cargo(args);
    cmd.arg("-v");
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
    cmd.env("PATH", path_without_nvcc())
        .env("OCC_ARCHS", "sm_80");
    if with_nvcc {
        for (k, v) in toolkit_exports() {
            cmd.env(k, v);
        }
    } else {
        cmd.env("OCC_NO_NVCC", "1");
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

/// The kernel's tile, and the taller one that makes it heavier: 11 × 32
/// rows of 33 floats, 46,464 bytes of static shared memory (under the
/// 48 KiB a block may declare).
const TILE: &str = "__shared__ float tile[TILE][TILE + 1];";
const HEAVY_TILE: &str = "__shared__ float tile[TILE * 11][TILE + 1];";

#[test]
fn the_first_page_builds_blesses_and_its_ci_gate_catches_a_heavier_kernel() {
    let build_rs = block("rust", "// build.rs");
    let kernel = block("cuda", "// kernels/transpose.cu");
    let main_rs = block("rust", "// src/main.rs");
    assert!(
        build_rs.contains(".launch(\"transpose\", Launch::block_2d(32, 8))"),
        "{build_rs}"
    );
    assert!(
        main_rs.contains("#[occ::launch_config(kernel = \"transpose\")]"),
        "{main_rs}"
    );
    assert!(kernel.contains(TILE), "{kernel}");
    // Step 7's heavier tile is the line the page shows.
    assert_eq!(block("cuda", "    __shared__").trim(), HEAVY_TILE);
    // `cargo occ` finds the crate's builds in the suite's scratch target.
    let target = occ_tests::scratch_target_dir();
    let target = [(
        "CARGO_TARGET_DIR",
        Some(target.to_str().expect("utf-8 path")),
    )];
    let krate = ScratchCrate::new("first_page")
        .file("Cargo.toml", &manifest("first_page", &snippet()))
        .file("build.rs", &build_rs)
        .file("kernels/transpose.cu", &kernel)
        .file("src/main.rs", &main_rs);

    // Step 6: the first build has no lock to compare with; bless writes it.
    let out = text(&succeed(
        &mut cargo(&krate, &["build"], true),
        "first build, nvcc 13.5",
    ));
    assert_ran_cudarc_cleanly(&out, "first build, nvcc 13.5");
    assert!(out.contains("no occ.lock yet"), "{out}");
    let (code, stdout, stderr) = occ(krate.path(), &["bless"], &target, None).parts();
    assert_eq!(code, 0, "{stdout}{stderr}");
    let lock = krate.read("occ.lock");
    assert!(lock.contains("\"transpose\""), "{lock}");

    // Step 7 on the blessed crate: both CI steps pass. The build script
    // reruns (bless touched the stamp it watches in the lock's stead) and
    // gates against the new lock: no stale "no occ.lock yet".
    let out = text(&succeed(
        &mut cargo(&krate, &["build"], true),
        "build with the lock",
    ));
    assert!(
        out.contains("first_page-")
            && out.contains("build-script-build`")
            && !out.contains("no occ.lock yet"),
        "the build after bless did not rerun its script against the lock:\n{out}"
    );
    let (code, stdout, stderr) = occ(krate.path(), &["check"], &target, None).parts();
    assert_eq!(code, 0, "{stdout}{stderr}");
    let at_32x8 = |blocks: &str| {
        let (code, stdout, stderr) =
            occ(krate.path(), &["explain", "transpose"], &target, None).parts();
        assert_eq!(code, 0, "{stdout}{stderr}");
        assert!(
            stdout.contains("(the declared launch 32x8, by build.rs `transpose`)")
                && stdout.contains(&format!("warps, {blocks} blocks per SM)")),
            "{stdout}"
        );
    };
    at_32x8("8");

    // With no nvcc at all, the crate stands on its lock.
    let out = text(&succeed(
        &mut cargo(&krate, &["check"], false),
        "check, no nvcc",
    ));
    assert_ran_cudarc_cleanly(&out, "check, no nvcc");

    // A heavier kernel at the declared 32 × 8: both CI steps fail, naming it.
    krate.write("kernels/transpose.cu", &kernel.replace(TILE, HEAVY_TILE));
    let out = text(&fail(
        &mut cargo(&krate, &["build"], true),
        "build of the heavier kernel",
    ));
    let regressed = |text: &str| {
        text.contains("regression: occupancy down")
            && text
                .lines()
                .any(|l| l.contains("sm_80") && l.split_whitespace().any(|w| w == "transpose"))
    };
    assert!(regressed(&out), "{out}");
    let (code, stdout, stderr) = occ(krate.path(), &["check"], &target, None).parts();
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(regressed(&stdout), "{stdout}");
    // The README's numbers: an sm_80 SM holds 3 blocks of 32 x 8, not 8.
    at_32x8("3");
}

#[test]
fn without_its_cudarc_line_the_snippet_stops_in_cudarc_with_nvcc_13_5() {
    let full = snippet();
    let lines: Vec<&str> = full
        .lines()
        .filter(|l| !l.starts_with("cudarc ="))
        .collect();
    assert_eq!(lines.len() + 1, full.lines().count(), "{full}");
    let krate = ScratchCrate::new("first_page_bare")
        .file(
            "Cargo.toml",
            &manifest("first_page_bare", &(lines.join("\n") + "\n")),
        )
        .file(
            "src/main.rs",
            "fn main() {\n    let _ = occ::cuda::driver_present();\n}\n",
        );
    let out = text(&fail(
        &mut cargo(&krate, &["check"], true),
        "no cudarc line, nvcc 13.5",
    ));
    assert!(
        out.contains("Unsupported cuda toolkit version: `13.5`"),
        "{out}"
    );
}
