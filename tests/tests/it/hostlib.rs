//! Host-code static libraries (`Build::static_lib`): a scratch crate links
//! `libmoe.a` (built from `tests/fixtures/cu/hostlib/` by the real nvcc)
//! into a Rust binary that calls its `extern "C"` launchers. There is no
//! GPU and no driver here, so each launch returns CUDA's no-device or
//! insufficient-driver error: the call went through the library and the
//! static CUDA runtime, end to end.

use occ_model::schema::manifest::Manifest;
use occ_tests::{build_env, counting_launcher, launches, succeed, Scratch, ScratchCrate};

const BUILD_RS: &str = r#"fn main() {
    occ_build::Build::new()
        .file("kernels/moe.cu")
        .file("kernels/topk.cu")
        .archs(["sm_80", "sm_90"])
        .static_lib("moe")
        .compile();
}
"#;

const MAIN: &str = r#"mod kernels {
    include!(concat!(env!("OUT_DIR"), "/occ/kernels.rs"));
}

extern "C" {
    fn occ_moe_scale(x: *mut f32, n: i32) -> i32;
    fn occ_moe_gate(logits: *const f32, expert: *mut i32, n: i32, experts: i32) -> i32;
    fn occ_topk_device_count(devices: *mut i32) -> i32;
}

fn main() {
    // SAFETY: without a device the runtime fails before touching memory.
    let codes = unsafe {
        let mut devices = 0;
        [
            occ_moe_scale(std::ptr::null_mut(), 0),
            occ_moe_gate(std::ptr::null(), std::ptr::null_mut(), 0, 4),
            occ_topk_device_count(&mut devices),
        ]
    };
    println!("codes {} {} {}", codes[0], codes[1], codes[2]);
    println!("gate registers {}", kernels::moe_gate::KERNEL.on("sm_80").unwrap().registers);
    println!("manifest");
    print!("{}", include_str!(concat!(env!("OUT_DIR"), "/occ/manifest.json")));
}
"#;

/// cudaErrorInsufficientDriver and cudaErrorNoDevice.
const NO_GPU: [i32; 2] = [35, 100];

fn library_crate() -> ScratchCrate {
    ScratchCrate::new("hostlib")
        .dep("occ")
        .build_dep("occ-build")
        .build_rs(BUILD_RS)
        .cu("hostlib", "kernels")
        .file("src/main.rs", MAIN)
}

/// The manifest the same files give as a device-only build (one nvcc
/// `--cubin` job per file and arch).
fn device_only_manifest() -> Manifest {
    let s = Scratch::new();
    s.copy_cu("hostlib", "kernels");
    let report = s
        .build(["sm_80", "sm_90"])
        .try_compile_with(&build_env(&[("CARGO_PKG_NAME", Some("hostlib"))]))
        .expect("device-only build");
    report.manifest().expect("manifest").clone()
}

#[test]
fn a_rust_binary_links_the_library_and_its_launchers_return_the_no_gpu_error() {
    let krate = library_crate();
    let log = krate.path().join("nvcc.log");
    let launcher = counting_launcher(krate.path(), &log);
    let run = |what: &str| {
        let out = succeed(
            krate
                .cargo(&["run", "--quiet"])
                .env("OCC_NVCC_LAUNCHER", &launcher),
            what,
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let stdout = run("first build");
    let codes: Vec<i32> = stdout
        .lines()
        .find_map(|l| l.strip_prefix("codes "))
        .expect("the binary prints its codes")
        .split(' ')
        .map(|c| c.parse().expect("a number"))
        .collect();
    for code in &codes {
        assert!(NO_GPU.contains(code), "CUDA's no-GPU error, got {codes:?}");
    }

    // One nvcc run per file, for both archs, gives the object and the numbers.
    let runs = launches(&log);
    assert_eq!(runs.len(), 2, "{runs:#?}");
    for run in &runs {
        assert!(run.contains(" -c "), "{run}");
        assert!(
            run.contains("code=sm_80") && run.contains("[sm_90,compute_90]"),
            "{run}"
        );
    }

    // The library's kernels are in the manifest with the numbers a
    // device-only build of the same files gives.
    let json = stdout.split_once("manifest\n").expect("manifest printed").1;
    let manifest =
        Manifest::from_json(json, std::path::Path::new("manifest.json")).expect("a manifest");
    let device = device_only_manifest();
    assert_eq!(manifest.archs, ["sm_80", "sm_90"]);
    let names: Vec<&str> = manifest
        .kernels
        .iter()
        .map(|k| k.base_name.as_str())
        .collect();
    // Sorted by symbol: `_Z9moe_scaleILi256EEvPfi` first.
    assert_eq!(
        names,
        ["moe_scale<256>", "moe_gate", "topk_count"],
        "{names:?}"
    );
    // The library's files are named for its part (`moe@…`), and its
    // cubins come from another nvcc command (the host code beside them),
    // whose bytes may differ (sm_90's do); the numbers are what counts.
    let unnamed = |m: &Manifest| {
        let mut kernels = m.kernels.clone();
        for k in &mut kernels {
            for a in k.archs.values_mut() {
                a.cubin = a
                    .cubin
                    .as_deref()
                    .map(|f| f.trim_start_matches("moe@").to_string());
                a.ptx = a
                    .ptx
                    .as_deref()
                    .map(|f| f.trim_start_matches("moe@").to_string());
                a.cubin_hash = None;
            }
        }
        kernels
    };
    assert_eq!(
        unnamed(&manifest),
        unnamed(&device),
        "a library's kernels have the numbers of a device-only build"
    );
    let gate = &manifest.kernels[1].archs["sm_80"].resources;
    assert!(
        stdout.contains(&format!("gate registers {}\n", gate.facts.registers)),
        "{stdout}"
    );
    let scale = &manifest.kernels[0].archs["sm_90"].resources;
    assert_eq!(scale.facts.static_smem, 1024, "__shared__ float tile[256]");
    assert_eq!(scale.facts.launch_bounds.max_threads_per_block(), Some(256));

    // A no-op rebuild runs nothing; a host-only header edit reruns its includer.
    assert_eq!(run("no-op rebuild"), stdout);
    assert_eq!(launches(&log).len(), 2);
    let header = occ_tests::fixture("cu/hostlib/host_config.h");
    krate.write(
        "kernels/host_config.h",
        &header.replace("(1 << 30)", "(1 << 29)"),
    );
    let after = run("host header edit");
    let reruns = launches(&log)[2..].to_vec();
    assert_eq!(reruns.len(), 1, "{reruns:#?}");
    assert!(reruns[0].contains("kernels/moe.cu"), "{reruns:#?}");
    assert!(after.contains("codes "), "{after}");
}

/// `rustc`'s host triple, the target of an in-process library build.
fn host_triple() -> String {
    let out = succeed(std::process::Command::new("rustc").arg("-vV"), "rustc -vV");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .expect("rustc -vV names its host")
}

#[test]
fn bad_library_names_and_a_missing_host_compiler_fail_with_clear_messages() {
    let s = Scratch::new();
    s.copy_cu("hostlib", "kernels");
    let target = host_triple();
    let env = |extra: &[(&str, Option<&str>)]| {
        let mut vars = vec![
            ("CARGO_PKG_NAME", Some("hostlib")),
            ("TARGET", Some(target.as_str())),
            ("HOST", Some(target.as_str())),
            ("OPT_LEVEL", Some("0")),
        ];
        vars.extend_from_slice(extra);
        build_env(&vars)
    };
    for (name, expected) in [
        ("libmoe.a", "without `lib` and `.a`: `static_lib(\"moe\")`"),
        ("moe.a", "`static_lib(\"moe\")`"),
        ("", "an empty name cannot name a static library"),
        ("kernels/moe", "it holds '/'"),
        ("cudart", "a library the build links anyway"),
    ] {
        let err = s
            .build(["sm_80"])
            .static_lib(name)
            .try_compile_with(&env(&[]))
            .expect_err(name);
        let text = err.to_string();
        assert!(
            err.kind() == occ_build::ErrorKind::Config
                && text.contains("cannot name a static library")
                && text.contains(expected),
            "{name}: {text}"
        );
    }
    let err = s
        .build(["sm_80"])
        .static_lib("moe")
        .try_compile_with(&env(&[("NVCC_CCBIN", Some("/nonexistent/g++"))]))
        .expect_err("no such host compiler");
    let text = err.to_string();
    assert!(
        err.kind() == occ_build::ErrorKind::Toolkit
            && text.contains("the host compiler")
            && text.contains("/nonexistent/g++")
            && text.contains("NVCC_CCBIN"),
        "{text}"
    );
    // Outside a build script nothing names the target.
    let err = s
        .build(["sm_80"])
        .static_lib("moe")
        .try_compile_with(&build_env(&[("TARGET", None)]))
        .expect_err("no TARGET");
    assert!(err.to_string().contains("TARGET"), "{err}");
    // A comma in a library source's name: nvcc's fatbinary step would fail
    // with its own words; refused up front, naming it.
    let comma = Scratch::new();
    comma.write(
        "kernels/a,b.cu",
        "__global__ void k(int* p) { p[0] = 1; }\n",
    );
    let mut b = occ_build::Build::new();
    b.root(comma.path())
        .out_dir(comma.path().join("out"))
        .file("kernels/a,b.cu")
        .arch("sm_80")
        .static_lib("moe");
    let err = b.try_compile_with(&env(&[])).expect_err("a comma");
    let text = err.to_string();
    assert!(
        text.contains("kernels/a,b.cu") && text.contains("comma") && text.contains("rename"),
        "{text}"
    );
}
