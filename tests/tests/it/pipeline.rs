//! Live tests of the occ-build pipeline with the real nvcc.

use occ_build::{Build, ErrorKind};
use occ_model::schema::manifest::Manifest;
use occ_tests::{build_env, counting_launcher, launches, Scratch};

/// `tests/fixtures/cu/pipeline/zoo`: zoo.cu, a module exercising every shape
/// the parser must handle, and plain.cu, both including common.cuh.
fn zoo() -> Scratch {
    let s = Scratch::new();
    s.copy_cu("pipeline/zoo", "kernels");
    s
}

/// One tiny kernel `a`.
const A: &str = include_str!("../../fixtures/cu/pipeline/a.cu");

const ARCHS: [&str; 2] = ["sm_80", "sm_90"];

fn kernel<'a>(m: &'a Manifest, name: &str) -> &'a occ_model::schema::manifest::Kernel {
    m.kernels
        .iter()
        .find(|k| k.name == name || k.base_name == name)
        .unwrap_or_else(|| {
            panic!(
                "no kernel {name} in {:?}",
                m.kernels.iter().map(|k| &k.name).collect::<Vec<_>>()
            )
        })
}

#[test]
fn zoo_module_gives_every_kernel_its_resources() {
    let s = zoo();
    let report = s
        .build(ARCHS)
        .try_compile_with(&build_env(&[]))
        .expect("build");
    let m = report.manifest().expect("manifest");
    assert_eq!(m.archs, ["sm_80", "sm_90"]);
    // 9 entries in zoo.cu + 1 in plain.cu, each on both archs.
    assert_eq!(
        m.kernels.len(),
        10,
        "{:#?}",
        m.kernels.iter().map(|k| &k.name).collect::<Vec<_>>()
    );
    for k in &m.kernels {
        assert_eq!(k.archs.len(), 2, "{}", k.name);
        assert!(k.source.starts_with("kernels/"), "{}", k.source);
    }
    // Templates in namespaces: demangled, with the parameter list stripped.
    let t = kernel(m, "ns::inner::tkern<double, 128>");
    assert_eq!(t.archs["sm_80"].facts.static_smem, 128 * 8);
    assert_eq!(
        kernel(m, "ns::inner::tkern<float, 256>").archs["sm_90"]
            .facts
            .static_smem,
        256 * 4
    );
    assert!(
        t.demangled
            .starts_with("void ns::inner::tkern<double, 128>(")
            || t.demangled.starts_with("ns::inner::tkern<double, 128>("),
        "{}",
        t.demangled
    );
    // Launch bounds from the PTX.
    let b = &kernel(m, "bounded").archs["sm_80"].facts.launch_bounds;
    assert_eq!(b.max_threads_per_block(), Some(256));
    assert_eq!(b.min_blocks_per_sm, Some(2));
    // __launch_bounds__(256, 2) caps registers at 65536 / 512 = 128, and the
    // best block can be no larger than 256.
    assert!(
        kernel(m, "bounded").archs["sm_80"]
            .best
            .as_ref()
            .expect("a best launch")
            .block_size
            <= 256
    );
    // Dynamic smem does not appear as static smem.
    assert_eq!(kernel(m, "dyn_smem").archs["sm_90"].facts.static_smem, 0);
    // The spilling kernel spills on both archs; the others do not.
    for (arch, k) in &kernel(m, "spills").archs {
        assert!(k.facts.spills(), "spills on {arch}: {k:?}");
        assert!(
            k.facts.registers <= 32,
            "1024x2 blocks leave 32 registers: {}",
            k.facts.registers
        );
    }
    assert!(!kernel(m, "saxpy").archs["sm_80"].facts.spills());
    // Recursion: ptxas cannot size the stack, says so, and gives no cumulative stack.
    let rec = &kernel(m, "recursive").archs["sm_80"];
    assert!(
        rec.warnings.iter().any(|w| w.kind
            == occ_model::schema::manifest::WarningKind::StackUnknown
            && w.text.contains("cannot be statically determined")),
        "{rec:?}"
    );
    assert_eq!(rec.facts.cumulative_stack, None);
    // __constant__ lands in bank 3 of the module on sm_80 (no cmem on sm_90).
    assert!(kernel(m, "saxpy").archs["sm_90"].cmem.is_empty());
    // Every kernel got a best launch.
    for k in &m.kernels {
        for (arch, a) in &k.archs {
            assert!(
                a.best
                    .as_ref()
                    .is_some_and(|b| b.block_size > 0 && b.occupancy > 0.0),
                "{} {arch}",
                k.name
            );
        }
    }
    // Spills are named in the build's one summary warning, with the bytes,
    // every arch that spills, and where the full table is.
    let spill_bytes = kernel(m, "spills").archs["sm_80"].facts.spill_bytes();
    let summary: Vec<&String> = report
        .directives()
        .warnings()
        .iter()
        .filter(|w| w.contains("kernel spills registers") || w.contains("kernels spill registers"))
        .collect();
    assert_eq!(summary.len(), 1, "{:?}", report.directives().warnings());
    assert!(
        summary[0].contains(&format!("spills ({spill_bytes} B on sm_80, sm_90)"))
            && summary[0].contains("report.txt"),
        "{summary:?}"
    );
    assert!(s.path().join("out/occ/report.txt").is_file());
    // Files written: manifest, kernels.rs, cubins.
    let out = s.path().join("out/occ");
    assert_eq!(
        occ_shell::files::read_manifest(&out.join("manifest.json")).expect("manifest"),
        *m
    );
    for file in ["kernels.rs", "device_code.rs"] {
        let rs = std::fs::read_to_string(out.join(file)).expect(file);
        assert!(rs.starts_with("// @generated by occ-build"), "{file}");
        assert!(
            !rs.contains(&s.path().display().to_string()),
            "no absolute paths in {file}"
        );
    }
    assert!(
        std::fs::metadata(out.join("kernels_zoo.sm_90.cubin"))
            .expect("cubin")
            .len()
            > 0
    );
}

#[test]
fn unchanged_rebuild_runs_nvcc_zero_times_and_a_header_reruns_only_its_includers() {
    let s = zoo();
    s.write(
        "kernels/alone.cu",
        include_str!("../../fixtures/cu/pipeline/alone.cu"),
    );
    let log = s.path().join("nvcc.log");
    let launcher = counting_launcher(s.path(), &log);
    let env = || {
        build_env(&[(
            "OCC_NVCC_LAUNCHER",
            Some(launcher.to_str().expect("utf-8 path")),
        )])
    };
    let first = s
        .build(ARCHS)
        .try_compile_with(&env())
        .expect("first build");
    assert_eq!(first.nvcc_runs, 6);
    assert_eq!(launches(&log).len(), 6, "3 files x 2 archs");
    let second = s
        .build(ARCHS)
        .try_compile_with(&env())
        .expect("second build");
    assert_eq!(second.nvcc_runs, 0);
    assert_eq!(
        launches(&log).len(),
        6,
        "no nvcc process on an unchanged rebuild"
    );
    // Every header nvcc read is watched.
    assert!(second
        .directives()
        .rerun_if_changed()
        .iter()
        .any(|p| p.ends_with("kernels/common.cuh")));
    // Touch the shared header: zoo.cu and plain.cu rerun, alone.cu does not.
    let common = s.read("kernels/common.cuh");
    assert!(common.contains("#define SCALE 3"), "{common}");
    s.write("kernels/common.cuh", &common.replace("SCALE 3", "SCALE 4"));
    let third = s
        .build(ARCHS)
        .try_compile_with(&env())
        .expect("third build");
    assert_eq!(third.nvcc_runs, 4);
    let reruns = &launches(&log)[6..];
    assert!(
        reruns.iter().all(|l| !l.contains("alone.cu")),
        "{reruns:#?}"
    );
    // Byte-identical output for the same inputs.
    assert_eq!(
        first.manifest().expect("manifest").kernels.len(),
        third.manifest().expect("manifest").kernels.len()
    );
}

#[test]
fn two_folders_give_byte_identical_output() {
    let a = zoo();
    let b = zoo();
    a.build(ARCHS)
        .try_compile_with(&build_env(&[]))
        .expect("build a");
    b.build(ARCHS)
        .try_compile_with(&build_env(&[]))
        .expect("build b");
    for file in ["manifest.json", "kernels.rs"] {
        assert_eq!(
            a.read(&format!("out/occ/{file}")),
            b.read(&format!("out/occ/{file}")),
            "{file}"
        );
    }
}

#[test]
fn arch_list_comes_from_occ_archs_or_cuda_compute_cap() {
    let s = Scratch::new();
    s.write("kernels/a.cu", A);
    let r = s
        .build(ARCHS)
        .try_compile_with(&build_env(&[("CUDA_COMPUTE_CAP", Some("86,90a"))]))
        .expect("build");
    assert_eq!(r.manifest().expect("manifest").archs, ["sm_86", "sm_90a"]);
    let r = s
        .build(ARCHS)
        .try_compile_with(&build_env(&[
            ("OCC_ARCHS", Some("sm_75")),
            ("CUDA_COMPUTE_CAP", Some("86")),
        ]))
        .expect("build");
    assert_eq!(r.manifest().expect("manifest").archs, ["sm_75"]);
    assert!(r.directives().rerun_if_env_changed().contains("OCC_ARCHS"));
    assert!(r
        .directives()
        .rerun_if_env_changed()
        .contains("CUDA_COMPUTE_CAP"));
}

#[test]
fn nvcc_compile_errors_name_the_file_and_line() {
    let s = Scratch::new();
    s.write(
        "kernels/bad.cu",
        include_str!("../../fixtures/cu/pipeline/bad.cu"),
    );
    let err = s
        .build(ARCHS)
        .try_compile_with(&build_env(&[]))
        .expect_err("must fail");
    let text = err.to_string();
    assert_eq!(err.kind(), ErrorKind::Compile, "{text}");
    assert!(
        text.starts_with("nvcc failed to compile kernels/bad.cu"),
        "{text}"
    );
    assert!(text.contains("kernels/bad.cu(2)"), "{text}");
    assert!(text.contains("undefined_thing"), "{text}");
    assert!(
        !s.path().join("out/occ/manifest.json").exists(),
        "nothing half-written"
    );
}

#[test]
fn an_arch_this_nvcc_cannot_build_is_one_clear_error() {
    let s = Scratch::new();
    s.write("kernels/a.cu", A);
    let err = s
        .build(ARCHS)
        .try_compile_with(&build_env(&[("OCC_ARCHS", Some("sm_52"))]))
        .expect_err("nvcc 13 dropped sm_52");
    let text = err.to_string();
    assert_eq!(err.kind(), ErrorKind::Toolkit, "{text}");
    assert!(text.contains("cannot build sm_52"), "{text}");
    assert!(text.contains("sm_52") && text.contains("V13."), "{text}");
}

#[test]
fn unknown_arch_lists_the_known_ones() {
    let s = Scratch::new();
    s.write("kernels/a.cu", A);
    let err = s
        .build(ARCHS)
        .try_compile_with(&build_env(&[("OCC_ARCHS", Some("sm_95"))]))
        .expect_err("sm_95 does not exist")
        .to_string();
    assert!(
        err.contains("`sm_95`") && err.contains("OCC_ARCHS") && err.contains("sm_120"),
        "{err}"
    );
}

#[test]
fn missing_nvcc_lists_every_place_looked() {
    let s = Scratch::new();
    s.write("kernels/a.cu", A);
    let env = build_env(&[
        ("NVCC", None),
        ("CUDA_HOME", None),
        ("CUDA_PATH", None),
        ("CUDA_ROOT", None),
        ("PATH", Some("/nonexistent")),
        ("OCC_CUDA_DIR", None),
        ("XDG_CACHE_HOME", Some("/nonexistent/cache")),
    ]);
    let err = s.build(ARCHS).try_compile_with(&env).expect_err("no nvcc");
    assert_eq!(err.kind(), ErrorKind::NvccNotFound, "{err}");
    let text = err.to_string();
    for place in [
        "NVCC",
        "CUDA_HOME",
        "CUDA_PATH",
        "PATH",
        "/usr/local/cuda",
        ".cuda/cu13/nvidia/cu13/bin",
        "/nonexistent/cache/occ/cuda (occ's per-user toolkit, from XDG_CACHE_HOME)",
    ] {
        assert!(text.contains(place), "{place} in {text}");
    }
    // It ends with the two installs that work for any crate, cargo-occ
    // from the occ tree this occ-build came from (not on crates.io yet).
    let cargo_occ = format!(
        "cargo install --locked --path {} && cargo occ toolkit install",
        occ_tests::workspace_root().join("cargo-occ").display()
    );
    for fix in [
        cargo_occ.as_str(),
        "python3 -m pip install --no-deps --target /nonexistent/cache/occ/cuda/cu13 nvidia-cuda-nvcc==",
    ] {
        assert!(text.contains(fix), "{fix} in {text}");
    }
    // The variables read are still watched, so setting NVCC (or installing
    // into the per-user dir) reruns the build: the error carries them.
    let directives = err.directives();
    assert!(directives.rerun_if_env_changed().contains("NVCC"));
    assert!(directives.rerun_if_env_changed().contains("XDG_CACHE_HOME"));
    assert!(directives
        .lines()
        .contains(&"cargo::rerun-if-env-changed=NVCC".to_string()));
}

#[test]
fn missing_source_and_empty_glob_are_errors() {
    let s = Scratch::new();
    let mut b = Build::new();
    b.root(s.path())
        .out_dir(s.path().join("out"))
        .file("kernels/nope.cu")
        .arch("sm_80");
    let text = b
        .try_compile_with(&build_env(&[]))
        .expect_err("missing")
        .to_string();
    assert!(text.contains("kernels/nope.cu"), "{text}");
    let mut b = Build::new();
    b.root(s.path())
        .out_dir(s.path().join("out"))
        .glob("kernels/*.cu")
        .arch("sm_80");
    let text = b
        .try_compile_with(&build_env(&[]))
        .expect_err("empty glob")
        .to_string();
    assert!(
        text.contains("kernels/*.cu") && text.contains("matched no"),
        "{text}"
    );
}

#[test]
fn deny_spills_fails_the_build_naming_kernel_arch_and_bytes() {
    let s = zoo();
    let err = s
        .build(ARCHS)
        .deny_spills()
        .try_compile_with(&build_env(&[]))
        .expect_err("spills denied");
    let text = err.to_string();
    assert_eq!(err.kind(), ErrorKind::Gate, "{text}");
    assert!(
        text.starts_with("register spills to local memory"),
        "{text}"
    );
    assert!(
        text.contains("spills on sm_80") && text.contains("bytes spill stores"),
        "{text}"
    );
}

#[test]
fn files_without_kernels_and_empty_files_build() {
    let s = Scratch::new();
    s.write("kernels/empty.cu", "");
    s.write(
        "kernels/helpers.cu",
        include_str!("../../fixtures/cu/pipeline/helpers.cu"),
    );
    let r = s
        .build(ARCHS)
        .try_compile_with(&build_env(&[]))
        .expect("build");
    assert!(r.manifest().expect("manifest").kernels.is_empty());
}
