//! Issue 12, items 7-12, 15 and 17: builds that break, or break badly. The
//! no-nvcc path with `#[launch_config]`, file and folder names, `-rdc`,
//! `NVCC` pointing nowhere, the macro's ambiguity message, and messages
//! for flags occ owns, a missing launcher, nvcc's warnings and a signal.

use occ_build::Build;
use occ_tests::trust::{
    cargo_toml, newest_out_dir, printed_registers, run_cargo, scale_crate, script, text, LIGHT,
};
use occ_tests::{build_env, cargo, Scratch};
use std::path::Path;

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// A crate with a `#[launch_config]` site, its lock blessed with nvcc.
fn launch_config_crate(name: &str) -> Scratch {
    let s = Scratch::new();
    s.write("Cargo.toml", &cargo_toml(name));
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
    let out = run_cargo(&s, &["build"], &[("OCC_BLESS", Some("1"))]);
    assert!(out.status.success(), "blessing with nvcc: {}", text(&out));
    assert!(s.path().join("occ.lock").is_file(), "no occ.lock written");
    s
}

#[test]
fn item07_no_nvcc_build_of_a_launch_config_crate_succeeds() {
    let s = launch_config_crate("trust-nonvcc");
    let out = run_cargo(&s, &["build"], &[("OCC_NO_NVCC", Some("1"))]);
    assert!(
        out.status.success(),
        "OCC_NO_NVCC=1 cargo build with a committed occ.lock failed:\n{}",
        text(&out)
    );
}

#[test]
fn item07_docs_rs_doc_of_a_launch_config_crate_succeeds() {
    let s = launch_config_crate("trust-docsrs");
    let out = run_cargo(&s, &["doc", "--no-deps"], &[("DOCS_RS", Some("1"))]);
    assert!(
        out.status.success(),
        "DOCS_RS=1 cargo doc with a committed occ.lock failed:\n{}",
        text(&out)
    );
}

#[test]
fn item07_readme_cubin_line_compiles_without_nvcc() {
    let s = scale_crate(
        "trust-nonvcc-cubin",
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
    let out = run_cargo(&s, &["build"], &[("OCC_BLESS", Some("1"))]);
    assert!(out.status.success(), "{}", text(&out));
    let out = run_cargo(&s, &["build"], &[("OCC_NO_NVCC", Some("1"))]);
    assert!(
        out.status.success(),
        "`let code: &[u8] = sm_80.code.unwrap().bytes;` (docs/GUIDE.md's line) does not \
         compile in a build from occ.lock:\n{}",
        text(&out)
    );
}

#[test]
fn item07_example_app_builds_without_nvcc() {
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
fn item07_build_leaves_lock_mode_once_nvcc_appears() {
    leaves_lock_mode_once_nvcc_appears("trust-nvcc-appears", false);
}

/// The same through the per-user toolkit dir (`$XDG_CACHE_HOME/occ/cuda`,
/// where `cargo occ toolkit install` puts nvcc) with `OCC_CUDA_DIR` unset.
#[test]
fn issue17_build_leaves_lock_mode_once_nvcc_appears_in_the_user_cache() {
    // Not "trust-nvcc-appears-…": newest_out_dir matches a name by prefix.
    leaves_lock_mode_once_nvcc_appears("trust-user-cache-nvcc", true);
}

fn leaves_lock_mode_once_nvcc_appears(name: &str, xdg: bool) {
    let s = scale_crate(name, ".glob(\"kernels/*.cu\").arch(\"sm_80\")");
    s.write("kernels/scale.cu", LIGHT);
    let cache = s.path().join("cache");
    let cuda = if xdg {
        cache.join("occ/cuda")
    } else {
        s.path().join("cuda")
    };
    let out = run_cargo(&s, &["build"], &[("OCC_BLESS", Some("1"))]);
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
    let out = run_cargo(&s, &["run", "-q"], none);
    assert!(printed_registers(&out) > 0);
    let cubins = || cubins(&newest_out_dir(name).join("occ"));
    assert!(
        cubins().is_empty(),
        "expected a build from the lock, with no device code"
    );
    // Now the toolkit script installs nvcc where occ looks.
    let bin = cuda.join("cu13/nvidia/cu13");
    std::fs::create_dir_all(bin.parent().expect("parent")).expect("create cuda folder");
    std::os::unix::fs::symlink(occ_tests::trust::toolkit_home(), &bin).expect("install nvcc");
    let out = run_cargo(&s, &["run", "-q"], none);
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
fn item08_files_differing_in_case_give_a_kernels_rs_that_compiles() {
    let s = scale_crate("trust-case", ".glob(\"kernels/*.cu\").arch(\"sm_80\")");
    s.write("kernels/k.cu", LIGHT);
    s.write(
        "kernels/K.cu",
        "extern \"C\" __global__ void upper(int* p) { p[threadIdx.x] += 1; }\n",
    );
    let out = run_cargo(&s, &["run", "-q"], &[]);
    assert!(printed_registers(&out) > 0);
}

const RDC_A: &str = "extern __device__ float helper(float x);\nextern \"C\" __global__ void uses_helper(float* p) { p[threadIdx.x] = helper(p[threadIdx.x]); }\n";
const RDC_B: &str = "__device__ float helper(float x) { float a = x; for (int i = 0; i < 100; ++i) a = a * 1.01f + i; return a; }\n";

#[test]
fn item09_rdc_is_linked_or_refused_with_a_message() {
    let s = Scratch::new();
    s.write("kernels/a.cu", RDC_A);
    s.write("kernels/b.cu", RDC_B);
    let result = Build::new()
        .root(s.path())
        .out_dir(s.path().join("out"))
        .glob("kernels/*.cu")
        .arch("sm_80")
        .flag("-rdc=true")
        .try_compile_with(&build_env(&[]));
    match result {
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("-rdc"), "the refusal must name -rdc: {msg}");
        }
        Ok(report) => {
            // Linked: every cubin is an executable ELF (e_type 2), not a
            // relocatable one (e_type 1) with unresolved symbols.
            for k in &report.manifest().expect("manifest").kernels {
                for (arch, ka) in &k.archs {
                    let cubin = std::fs::read(report.out_dir.join(&ka.cubin)).expect("cubin");
                    assert_eq!(
                        cubin.get(16),
                        Some(&2),
                        "{} on {arch}: {} is a relocatable cubin (not device-linked)",
                        k.name,
                        ka.cubin
                    );
                }
            }
        }
    }
}

#[test]
fn item10_deep_relative_path_builds() {
    let s = Scratch::new();
    let deep = format!(
        "kernels/{}/{}/{}/k.cu",
        "a".repeat(80),
        "b".repeat(80),
        "c".repeat(80)
    );
    assert!(deep.len() >= 250);
    s.write(&deep, LIGHT);
    let report = Build::new()
        .root(s.path())
        .out_dir(s.path().join("out"))
        .file(&deep)
        .arch("sm_80")
        .try_compile_with(&build_env(&[]));
    if let Err(e) = &report {
        panic!("a {}-character relative path failed: {e}", deep.len());
    }
}

#[test]
fn item11_crate_folder_with_glob_metacharacters_globs() {
    let s = Scratch::new();
    s.write("brk[v2]/kernels/k.cu", LIGHT);
    let root = s.path().join("brk[v2]");
    let report = Build::new()
        .root(&root)
        .out_dir(s.path().join("out"))
        .glob("kernels/*.cu")
        .arch("sm_80")
        .try_compile_with(&build_env(&[]));
    match report {
        Ok(r) => assert_eq!(r.manifest().expect("manifest").kernels.len(), 1),
        Err(e) => panic!("glob in a crate folder named `brk[v2]`: {e}"),
    }
}

#[test]
fn item12_nvcc_set_to_a_missing_file_is_an_error() {
    let s = Scratch::new();
    s.write("kernels/k.cu", LIGHT);
    let home = occ_tests::trust::toolkit_home();
    let result = Build::new()
        .root(s.path())
        .out_dir(s.path().join("out"))
        .file("kernels/k.cu")
        .arch("sm_80")
        .try_compile_with(&build_env(&[
            ("NVCC", Some("/missing/nvcc")),
            ("CUDA_HOME", Some(path_str(&home))),
        ]));
    match result {
        Ok(_) => panic!("NVCC=/missing/nvcc built with another nvcc (CUDA_HOME's)"),
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains("NVCC") && msg.contains("/missing/nvcc"),
                "the error must name NVCC and its value: {msg}"
            );
        }
    }
}

#[test]
fn item12_nvcc_set_to_something_that_is_not_nvcc_is_an_error() {
    let s = Scratch::new();
    s.write("kernels/k.cu", LIGHT);
    let not_nvcc = s.write("not-nvcc.txt", "hello\n");
    let result = Build::new()
        .root(s.path())
        .out_dir(s.path().join("out"))
        .file("kernels/k.cu")
        .arch("sm_80")
        .try_compile_with(&build_env(&[("NVCC", Some(path_str(&not_nvcc)))]));
    match result {
        Ok(_) => panic!("NVCC pointing to a text file built"),
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains("not-nvcc.txt"),
                "the error must name the file NVCC points to: {msg}"
            );
        }
    }
}

#[test]
fn item15_ambiguous_kernel_lists_each_source_and_what_to_write() {
    let s = Scratch::new();
    s.write("Cargo.toml", &cargo_toml("trust-ambiguous"));
    s.write(
        "build.rs",
        "fn main() {\n    occ_build::Build::new().glob(\"kernels/*.cu\").archs([\"sm_80\"]).compile();\n}\n",
    );
    s.write(
        "kernels/a.cu",
        "extern \"C\" __global__ void same(int* p) { p[threadIdx.x] += 1; }\n",
    );
    s.write(
        "kernels/b.cu",
        "extern \"C\" __global__ void same(float* p) { p[threadIdx.x] *= 2.0f; }\n",
    );
    s.write(
        "src/main.rs",
        "#[occ::launch_config(kernel = \"same\")]\nfn launch() -> u32 { BLOCK_SIZE }\n\nfn main() { println!(\"{}\", launch()); }\n",
    );
    let out = run_cargo(&s, &["build"], &[]);
    let t = text(&out);
    assert!(
        !out.status.success(),
        "an ambiguous kernel name compiled:\n{t}"
    );
    assert!(
        t.contains("kernels/a.cu") && t.contains("kernels/b.cu"),
        "the ambiguity message must list each candidate's source:\n{t}"
    );
    // The string the message says to write selects that kernel.
    let select = "kernels/b.cu:same";
    assert!(
        t.contains(&format!("`{select}`")),
        "the message must say what to write:\n{t}"
    );
    s.write(
        "src/main.rs",
        &format!("#[occ::launch_config(kernel = \"{select}\")]\nfn launch() -> u32 {{ BLOCK_SIZE }}\n\nfn main() {{ println!(\"{{}}\", launch()); }}\n"),
    );
    let out = run_cargo(&s, &["build"], &[]);
    assert!(
        out.status.success(),
        "`kernel = \"{select}\"`, as the message says, does not compile:\n{}",
        text(&out)
    );
}

fn one_file_build(s: &Scratch) -> Build {
    let mut b = Build::new();
    b.root(s.path())
        .out_dir(s.path().join("out"))
        .file("kernels/k.cu")
        .arch("sm_80");
    b
}

#[test]
fn item17_flags_occ_sets_itself_are_refused_by_name() {
    let s = Scratch::new();
    s.write("kernels/k.cu", LIGHT);
    let mut missed = Vec::new();
    for (flag, method) in [
        ("-o=x.cubin", None),
        ("--keep-dir=kd", None),
        ("-E", None),
        ("--ptx", None),
        ("-arch=sm_90", Some(".arch")),
    ] {
        let result = one_file_build(&s)
            .flag(flag)
            .try_compile_with(&build_env(&[]));
        let name = flag.split('=').next().unwrap_or(flag);
        let ok = match &result {
            Ok(_) => false,
            Err(e) => {
                let msg = e.to_string();
                msg.contains(name) && method.is_none_or(|m| msg.contains(m))
            }
        };
        if !ok {
            missed.push(format!(
                "{flag}: {}",
                result.map_or_else(|e| e.to_string(), |_| "built".into())
            ));
        }
    }
    assert!(
        missed.is_empty(),
        "each flag occ sets itself must be refused with a message naming it (and the builder \
         method to use instead):\n  {}",
        missed.join("\n  ")
    );
}

#[test]
fn item17_missing_launcher_is_blamed_on_the_launcher() {
    let s = Scratch::new();
    s.write("kernels/k.cu", LIGHT);
    let result = one_file_build(&s).try_compile_with(&build_env(&[(
        "OCC_NVCC_LAUNCHER",
        Some("/missing/launcher"),
    )]));
    let msg = result.map_or_else(|e| e.to_string(), |_| "built".into());
    assert!(
        msg.contains("OCC_NVCC_LAUNCHER") && msg.contains("/missing/launcher"),
        "the error must blame OCC_NVCC_LAUNCHER and name it: {msg}"
    );
}

#[test]
fn item17_nvcc_warnings_are_shown_once() {
    let s = scale_crate(
        "trust-warnings",
        ".glob(\"kernels/*.cu\").archs([\"sm_80\", \"sm_90\"])",
    );
    s.write(
        "kernels/k.cu",
        "extern \"C\" __global__ void scale(float* p, int n) {\n  int unused_here;\n  if (threadIdx.x < n) p[threadIdx.x] *= 2.0f;\n}\n",
    );
    let out = run_cargo(&s, &["build"], &[]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    let shown = t
        .lines()
        .filter(|l| l.contains("warning") && l.contains("177-D"))
        .count();
    assert_eq!(
        shown, 1,
        "nvcc's warning #177-D (on both archs) must be shown as one cargo warning:\n{t}"
    );
}

#[test]
fn item17_signal_is_not_reported_as_errors_to_fix() {
    let s = Scratch::new();
    s.write("kernels/k.cu", LIGHT);
    let killer = script(&s.path().join("killed.sh"), "kill -9 $$");
    let result = one_file_build(&s).try_compile_with(&build_env(&[(
        "OCC_NVCC_LAUNCHER",
        Some(path_str(&killer)),
    )]));
    let msg = result.map_or_else(|e| e.to_string(), |_| "built".into());
    assert_ne!(msg, "built");
    assert!(
        !msg.contains("fix the errors above"),
        "nvcc was killed by a signal; there are no errors to fix: {msg}"
    );
    assert!(
        msg.contains("signal"),
        "the message must say a signal ended it: {msg}"
    );
}
