//! Building without nvcc: the committed `occ.lock` stands in (a crate with
//! `#[launch_config]` sites, docs.rs, example-app, the guide's code), a
//! build leaves that mode as soon as nvcc appears where occ looks, and
//! under `CI` a crate's own build without nvcc fails unless it opts out.
//! (A dependency is never gated: `gate_scope.rs`.)

use occ_tests::surroundings::{
    blessed_light_crate, newest_out_dir, printed_registers, without_nvcc, LIGHT,
};
use occ_tests::{build_env, build_of, cargo, text, ScratchCrate};
use std::path::Path;

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// A crate with a `#[launch_config]` site, its lock blessed with nvcc.
fn launch_config_crate(name: &str) -> ScratchCrate {
    let s = ScratchCrate::new(name).dep("occ").build_dep("occ-build");
    s.write(
        "build.rs",
        "fn main() {\n    occ_build::Build::new().glob(\"kernels/*.cu\").archs([\"sm_80\"]).compile();\n}\n",
    );
    s.write("kernels/scale.cu", LIGHT);
    s.write(
        "src/main.rs",
        "mod kernels {\n    include!(concat!(env!(\"OUT_DIR\"), \"/occ/kernels.rs\"));\n}\n\n\
         /// Launches scale.\n\
         #[occ::launch_config(kernel = \"scale\")]\n\
         fn scale_launch(n: u32) -> (u32, u32) {\n    (grid_for(n), BLOCK_SIZE)\n}\n\n\
         fn main() {\n    println!(\"{:?} {}\", scale_launch(1 << 20), kernels::scale::KERNEL.archs[0].registers);\n}\n",
    );
    let out = s.output(&["build"], &[("OCC_BLESS", Some("1"))]);
    assert!(out.status.success(), "blessing with nvcc: {}", text(&out));
    assert!(s.path().join("occ.lock").is_file(), "no occ.lock written");
    s
}

#[test]
fn a_launch_config_crate_builds_with_occ_no_nvcc() {
    let s = launch_config_crate("around-nonvcc");
    let out = s.output(&["build"], &[("OCC_NO_NVCC", Some("1"))]);
    assert!(
        out.status.success(),
        "OCC_NO_NVCC=1 cargo build with a committed occ.lock failed:\n{}",
        text(&out)
    );
}

#[test]
fn docs_rs_documents_a_launch_config_crate() {
    let s = launch_config_crate("around-docsrs");
    let out = s.output(&["doc", "--no-deps"], &[("DOCS_RS", Some("1"))]);
    assert!(
        out.status.success(),
        "DOCS_RS=1 cargo doc with a committed occ.lock failed:\n{}",
        text(&out)
    );
}

#[test]
fn the_guides_cubin_line_compiles_without_nvcc() {
    let s = ScratchCrate::scale(
        "around-nonvcc-cubin",
        ".glob(\"kernels/*.cu\").arch(\"sm_80\")",
    );
    s.write("kernels/scale.cu", LIGHT);
    s.write(
        "src/main.rs",
        "mod kernels {\n    include!(concat!(env!(\"OUT_DIR\"), \"/occ/kernels.rs\"));\n}\n\n\
         fn main() {\n    let sm_80 = kernels::scale::KERNEL.on(\"sm_80\").unwrap();\n    \
         let code: &[u8] = sm_80.code.unwrap().bytes;\n    \
         println!(\"registers={} {}\", sm_80.registers, code.len());\n}\n",
    );
    let out = s.output(&["build"], &[("OCC_BLESS", Some("1"))]);
    assert!(out.status.success(), "{}", text(&out));
    let out = s.output(&["build"], &[("OCC_NO_NVCC", Some("1"))]);
    assert!(
        out.status.success(),
        "`let code: &[u8] = sm_80.code.unwrap().bytes;` (docs/GUIDE.md's line) does not \
         compile in a build from occ.lock:\n{}",
        text(&out)
    );
}

#[test]
fn example_app_builds_without_nvcc() {
    let mut cmd = cargo();
    let out = cmd
        .args(["build", "-p", "example-app", "--manifest-path"])
        .arg(occ_tests::workspace_root().join("Cargo.toml"))
        .env("OCC_NO_NVCC", "1")
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "OCC_NO_NVCC=1 cargo build -p example-app failed:\n{}",
        text(&out)
    );
}

#[test]
fn a_build_leaves_lock_mode_once_nvcc_appears() {
    leaves_lock_mode_once_nvcc_appears("around-nvcc-appears", false);
}

/// The same through the per-user toolkit dir (`$XDG_CACHE_HOME/occ/cuda`,
/// where `cargo occ toolkit install` puts nvcc) with `OCC_CUDA_DIR` unset.
#[test]
fn a_build_leaves_lock_mode_once_nvcc_appears_in_the_user_cache() {
    // Not "around-nvcc-appears-…": newest_out_dir matches a name by prefix.
    leaves_lock_mode_once_nvcc_appears("around-user-cache-nvcc", true);
}

fn leaves_lock_mode_once_nvcc_appears(name: &str, xdg: bool) {
    let s = ScratchCrate::scale(name, ".glob(\"kernels/*.cu\").arch(\"sm_80\")");
    s.write("kernels/scale.cu", LIGHT);
    let cache = s.path().join("cache");
    let cuda = if xdg {
        cache.join("occ/cuda")
    } else {
        s.path().join("cuda")
    };
    let out = s.output(&["build"], &[("OCC_BLESS", Some("1"))]);
    assert!(out.status.success(), "{}", text(&out));
    // No nvcc anywhere: the build stands on the lock.
    let (occ_cuda_dir, xdg_cache_home) = if xdg {
        (None, Some(path_str(&cache)))
    } else {
        (Some(path_str(&cuda)), None)
    };
    let none: &[(&str, Option<&str>)] = &[
        ("NVCC", None),
        ("CUDA_HOME", None),
        ("CUDA_PATH", None),
        ("CUDA_ROOT", None),
        ("OCC_CUDA_DIR", occ_cuda_dir),
        ("XDG_CACHE_HOME", xdg_cache_home),
    ];
    let out = s.output(&["run", "-q"], none);
    assert!(printed_registers(&out) > 0);
    let cubins = || cubins(&newest_out_dir(name).join("occ"));
    assert!(
        cubins().is_empty(),
        "expected a build from the lock, with no device code"
    );
    // Now the toolkit script installs nvcc where occ looks.
    let bin = cuda.join("cu13/nvidia/cu13");
    std::fs::create_dir_all(bin.parent().expect("parent")).expect("create cuda folder");
    std::os::unix::fs::symlink(occ_tests::surroundings::toolkit_home(), &bin)
        .expect("install nvcc");
    let out = s.output(&["run", "-q"], none);
    assert!(printed_registers(&out) > 0);
    assert!(
        !cubins().is_empty(),
        "nvcc is now installed in {}, yet the build still stands on the lock",
        cuda.display()
    );
}

/// The device code files `manifest.json` of an `$OUT_DIR/occ` names (none
/// in a build from the lock).
fn cubins(occ_dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(occ_dir.join("manifest.json")).expect("manifest.json");
    let m: serde_json::Value = serde_json::from_str(&text).expect("manifest JSON");
    let mut found = Vec::new();
    for k in m["kernels"].as_array().into_iter().flatten() {
        for a in k["archs"].as_object().into_iter().flat_map(|o| o.values()) {
            if let Some(c) = a["cubin"].as_str().filter(|c| !c.is_empty()) {
                found.push(c.to_string());
            }
        }
    }
    found
}

#[test]
fn a_ci_build_without_nvcc_fails_unless_opted_out() {
    let s = blessed_light_crate();
    let nowhere = s.path().join("no-toolkit");
    // CI, no nvcc: the lock would check nothing, so the build fails and
    // says how to install nvcc or opt out.
    let e = build_of(s.path(), "out", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&build_env(&without_nvcc(&nowhere, &[("CI", Some("true"))])))
        .expect_err("a CI build without nvcc must not pass on the lock");
    let msg = e.to_string();
    assert!(
        msg.contains("CI is set") && msg.contains("check nothing") && msg.contains("OCC_NO_NVCC=1"),
        "{msg}"
    );
    // Opted out: the lock stands in, as on docs.rs.
    for opt_out in [("OCC_NO_NVCC", Some("1")), ("DOCS_RS", Some("1"))] {
        let r = build_of(s.path(), "out", "kernels/k.cu", ["sm_80"])
            .try_compile_with(&build_env(&without_nvcc(
                &nowhere,
                &[("CI", Some("true")), opt_out],
            )))
            .unwrap_or_else(|e| panic!("{opt_out:?} in CI: {e}"));
        assert_eq!(
            r.manifest().expect("manifest").origin,
            occ_model::schema::manifest::Origin::Lock
        );
    }
    // Outside CI a machine without nvcc still builds from the lock.
    let r = build_of(s.path(), "out", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&build_env(&without_nvcc(&nowhere, &[])))
        .expect("no CI, no nvcc: the lock stands in");
    assert_eq!(
        r.manifest().expect("manifest").origin,
        occ_model::schema::manifest::Origin::Lock
    );
}

/// A kernel that reads constant memory (`cmem` of its own bank on sm_80).
const CONSTANT: &str = "__constant__ float coef[8];\nextern \"C\" __global__ void weigh(float* p, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) p[i] *= coef[i & 7];\n}\n";

/// A build that stands on the lock is the same build as one with nvcc:
/// `manifest.json`, `report.txt`, `gate.json` and the candidate lock are
/// byte for byte the ones nvcc's build of the same crate wrote, once its
/// lock is blessed, but for what only nvcc can know. Those are the
/// manifest's `origin` (`nvcc` or `lock`: where the numbers come from),
/// the `file` of each `device_code` entry and each kernel × arch's `cubin`
/// and `ptx` (a build from the lock makes no device code), and `lines`
/// (nvdisasm's source lines, read from that code); none of them shows in
/// the report, the candidate or `gate.json`.
/// The crate has what a lock must keep for that: constant memory, and a
/// ptxas warning (a register cap below sm_80's lower bound) on one file.
#[test]
fn a_build_from_the_lock_writes_what_a_build_with_nvcc_writes() {
    let s = occ_tests::Scratch::new();
    s.write("kernels/k.cu", LIGHT);
    s.write("kernels/w.cu", CONSTANT);
    let build = |out: &str| {
        let mut b = build_of(s.path(), out, "kernels/*.cu", ["sm_80", "sm_90"]);
        b.max_registers("kernels/w.cu", 16);
        b
    };
    build("bless")
        .try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]))
        .expect("bless with nvcc");
    build("nvcc")
        .try_compile_with(&build_env(&[]))
        .expect("build with nvcc");
    let lock = build("lock")
        .try_compile_with(&build_env(&[("OCC_NO_NVCC", Some("1"))]))
        .expect("build from the lock");
    assert_eq!(
        lock.manifest().expect("manifest").origin,
        occ_model::schema::manifest::Origin::Lock
    );
    let nvcc_dir = s.path().join("nvcc/occ");
    let lock_dir = s.path().join("lock/occ");
    let read = |dir: &Path, file: &str| {
        std::fs::read_to_string(dir.join(file))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.join(file).display()))
    };
    // The crate has what the lock must carry: constant memory and a warning.
    let nvcc_manifest = read(&nvcc_dir, "manifest.json");
    assert!(
        nvcc_manifest.contains("\"register_cap_adjusted\"")
            && nvcc_manifest.contains("\"cmem\": {\n"),
        "the crate no longer has a ptxas warning and constant memory:\n{nvcc_manifest}"
    );
    for file in ["report.txt", "gate.json", "occ.lock.new"] {
        assert_eq!(
            read(&lock_dir, file),
            read(&nvcc_dir, file),
            "{file} of the build from the lock differs from nvcc's"
        );
    }
    // What only nvcc knows set aside, the manifests are the same text.
    let mut with_nvcc = occ_model::schema::manifest::Manifest::from_json(
        &nvcc_manifest,
        Path::new("manifest.json"),
    )
    .expect("nvcc's manifest");
    with_nvcc.origin = occ_model::schema::manifest::Origin::Lock;
    for a in with_nvcc
        .kernels
        .iter_mut()
        .flat_map(|k| k.archs.values_mut())
    {
        (a.cubin, a.ptx, a.lines) = (None, None, None);
    }
    for code in &mut with_nvcc.device_code {
        code.file = None;
    }
    assert_eq!(
        read(&lock_dir, "manifest.json"),
        with_nvcc.to_json(),
        "manifest.json of the build from the lock differs from nvcc's (less origin, the device \
         code's files, cubin, ptx and lines)"
    );
}
