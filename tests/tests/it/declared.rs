//! Declared launches and the build-script API around them, with the real
//! nvcc: `Build::launch` and `__launch_bounds__` as declarations, the
//! occupancy at that launch and what would lift it, patterns that match
//! nothing; a 2-D launch declared once in build.rs, which the site bakes
//! and the report and the gate judge; an exact name
//! over wildcards, and two wildcards that disagree; recursive globs with
//! excludes, `Build::resolved_archs` and the arch-suffix policy, nvcc's
//! warnings as cargo warnings; a launch that fits only under the register
//! cap build.rs sets on its kernel.

use occ_build::{Build, ErrorKind, Launch};
use occ_model::model::arch::{self, Variant};
use occ_model::model::declared::DeclaredBy;
use occ_model::model::occupancy::{occupancy, BlockLaunch as At, KernelResources};
use occ_model::{compiler::analyze, schema::manifest::Manifest};
use occ_tests::{build_env, Scratch, ScratchCrate};

const DECLARED: &str = include_str!("../../fixtures/cu/declared/k.cu");

fn kernel<'a>(m: &'a Manifest, name: &str) -> &'a occ_model::schema::manifest::Kernel {
    m.kernels
        .iter()
        .find(|k| k.name == name)
        .unwrap_or_else(|| panic!("no kernel {name}"))
}

#[test]
fn a_declared_block_is_judged_at_that_launch_and_says_what_lifts_it() {
    let s = Scratch::new();
    s.write("kernels/k.cu", DECLARED);
    let report = s
        .build(["sm_80", "sm_90"])
        .launch("fast_argmin_*", Launch::block(1024))
        .try_compile_with(&build_env(&[]))
        .unwrap_or_else(|e| panic!("build failed: {e}"));
    let m = report.manifest().expect("manifest");
    for name in ["fast_argmin_f32", "fast_argmin_f64"] {
        for (arch_name, k) in &kernel(m, name).archs {
            assert_eq!(
                k.facts.static_smem, 4096,
                "test premise: __shared__ float s[1024]"
            );
            let d = k.declared.as_ref().expect("declared by build.rs");
            assert_eq!(
                d.by,
                DeclaredBy::Build {
                    pattern: "fast_argmin_*".into()
                }
            );
            assert_eq!((d.block_size, d.dynamic_smem), (1024, 0));
            // The model at the declared launch, not at the best block size.
            let a = arch::lookup(arch_name).expect("arch");
            let res = analyze::model_of(&k.facts);
            let model = occupancy(a, &res, &At::new(1024)).expect("launchable");
            assert_eq!(
                d.active_blocks_per_sm, model.active_blocks_per_sm,
                "{name} {arch_name}"
            );
            assert_eq!(d.occupancy, model.occupancy, "{name} {arch_name}");
            assert_eq!(k.judged_occupancy(), d.occupancy);
            if arch_name == "sm_80" {
                assert!(
                    k.facts.registers > 32,
                    "test premise: {} registers",
                    k.facts.registers
                );
                assert!(
                    k.best.as_ref().expect("a best launch").block_size < 1024,
                    "the best block is another one"
                );
                assert_eq!(d.active_blocks_per_sm, 1);
                let lift = d.lift.as_ref().expect("50%: a step up exists");
                assert_eq!(lift.target_blocks, 2);
                assert_eq!(lift.occupancy, 1.0);
                // The register hint is the most that reaches two blocks.
                let hint = lift.registers.expect("fewer registers reach it");
                let with = |registers: u32| {
                    let r = KernelResources { registers, ..res };
                    occupancy(a, &r, &At::new(1024))
                        .expect("ok")
                        .active_blocks_per_sm
                };
                assert!(with(hint.max_registers) >= 2 && with(hint.max_registers + 1) < 2);
                assert_eq!(hint.drop, k.facts.registers - hint.max_registers);
                let lb = lift.launch_bounds.expect("a launch bound caps registers");
                assert_eq!((lb.max_threads, lb.min_blocks_per_sm), (1024, 2));
                assert!(lb.reaches_target);
            }
        }
    }
    // Nothing stated: __launch_bounds__(256) is the declaration.
    let bounded = &kernel(m, "bounded").archs["sm_80"];
    let d = bounded.declared.as_ref().expect("declared by its bounds");
    assert_eq!(
        (d.by.clone(), d.block_size),
        (DeclaredBy::LaunchBounds, 256)
    );
    // report.txt shows the launch column and the lift line.
    let text = std::fs::read_to_string(report.out_dir.join("report.txt")).expect("report.txt");
    let k80 = &kernel(m, "fast_argmin_f32").archs["sm_80"];
    let drop = k80
        .declared
        .as_ref()
        .and_then(|d| d.lift.as_ref())
        .and_then(|l| l.registers)
        .map(|r| r.drop)
        .expect("a register hint");
    let line = text
        .lines()
        .find(|l| l.contains("fast_argmin_f32 on sm_80 at block 1024 (50.0%)"))
        .unwrap_or_else(|| panic!("no lift line in\n{text}"));
    assert!(
        line.contains(&format!("{drop} fewer registers"))
            && line.contains("__launch_bounds__(1024, 2) -> 100.0%"),
        "{line}"
    );
}

/// A 32x8 tile transpose; `PAD` sizes its shared tile (33: no bank
/// conflicts; larger: fewer resident blocks).
fn transpose() -> String {
    occ_tests::fixture("cu/declared/transpose_tiled.cu")
}

const TRANSPOSE_BUILD: &str = r#"fn main() {
    occ_build::Build::new()
        .glob("kernels/*.cu")
        .archs(["sm_80"])
        .launch("transpose_tiled", occ_build::Launch::block_2d(32, 8).dynamic_smem(1024))
        .compile();
}
"#;

/// The site names no block: it launches at build.rs's.
const TRANSPOSE_MAIN: &str = r#"
use occ::launch_config;

#[launch_config(kernel = "transpose_tiled")]
fn site() {
    println!(
        "site {} {} {} {} {} {} {}",
        BLOCK.0, BLOCK.1, BLOCK.2, BLOCK_SIZE, DYNAMIC_SMEM, ACTIVE_BLOCKS_PER_SM, grid_for(1000)
    );
}

fn main() {
    println!("out {}", env!("OUT_DIR"));
    site();
}
"#;

#[test]
fn a_2d_launch_declared_in_build_rs_is_what_the_site_bakes_and_the_gate_judges() {
    let krate = ScratchCrate::new("occ_declared_2d")
        .dep("occ")
        .build_dep("occ-build")
        .build_rs(TRANSPOSE_BUILD)
        .file("kernels/t.cu", &transpose())
        .file("src/main.rs", TRANSPOSE_MAIN);
    let mut bless = krate.cargo(&["run", "--quiet"]);
    bless.env("OCC_BLESS", "1");
    let out = occ_tests::succeed(&mut bless, "first build (blessed)");
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    let word = |w: &str| -> Vec<String> {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(w))
            .unwrap_or_else(|| panic!("no `{w}` line in\n{out}"))
            .split_whitespace()
            .skip(1)
            .map(str::to_string)
            .collect()
    };
    let occ_dir = std::path::PathBuf::from(&word("out")[0]).join("occ");
    let m = occ_shell::files::read_manifest(&occ_dir.join("manifest.json")).expect("manifest");
    let ka = &kernel(&m, "transpose_tiled").archs["sm_80"];
    let d = ka.declared.as_ref().expect("declared by build.rs");
    assert_eq!(d.launch.block, [32, 8, 1]);
    assert_eq!((d.block_size, d.dynamic_smem), (256, 1024));
    // Judged there, by the model at that launch.
    let a = arch::lookup("sm_80").expect("arch");
    let model = occupancy(
        a,
        &analyze::model_of(&ka.facts),
        &At::new(256).with_dynamic_smem(1024),
    )
    .expect("launchable");
    assert_eq!(d.active_blocks_per_sm, model.active_blocks_per_sm);
    let judged = ka.judged().expect("launchable");
    assert_eq!(
        (judged.block_size, judged.occupancy),
        (256, model.occupancy)
    );
    assert_eq!(judged.launch(), "32x8 + 1024 B smem");
    // The site bakes the same launch and numbers, with no block of its own.
    let site = [
        32,
        8,
        1,
        256,
        1024,
        model.active_blocks_per_sm,
        1000u32.div_ceil(256),
    ];
    assert_eq!(word("site"), site.map(|n| n.to_string()));
    // The report (the table `cargo occ report` prints) shows the shape.
    let report = std::fs::read_to_string(occ_dir.join("report.txt")).expect("report.txt");
    let row = report
        .lines()
        .find(|l| l.contains("transpose_tiled") && l.contains("sm_80"))
        .unwrap_or_else(|| panic!("no row in\n{report}"));
    assert!(row.contains("32x8 + 1024 B smem"), "{row}");
    // The gate judges against the blessed lock at the same launch: a tile
    // of 33 KiB leaves half the blocks of 256 threads resident (a
    // regression), while the best block, 1024 threads, stays at 100%; its
    // table says so, naming the launch.
    krate.write(
        "kernels/t.cu",
        &transpose().replace("#define PAD 33", "#define PAD 264"),
    );
    let err = krate.build_fails("a larger tile");
    assert!(err.contains("occupancy regression"), "{err}");
    let row = err
        .lines()
        .find(|l| l.contains("transpose_tiled") && l.contains("sm_80"))
        .unwrap_or_else(|| panic!("no row in\n{err}"));
    assert!(
        row.contains("100.0% -> 50.0%") && row.contains("at block 32x8 + 1024 B smem"),
        "{row}"
    );
    // The kernel as blessed, launched at 32x22 instead: the application's
    // occupancy drops (22 warps a block, 2 blocks resident), so the gate
    // compares the lock at its 32x8 with the build at its 32x22 and fails,
    // naming both launches.
    krate.write("kernels/t.cu", &transpose());
    let relaunch = |shape: &str| {
        krate.write(
            "build.rs",
            &TRANSPOSE_BUILD.replace("block_2d(32, 8)", &format!("block_2d({shape})")),
        );
    };
    relaunch("32, 22");
    let err = krate.build_fails("a 32x22 launch");
    assert!(err.contains("occupancy regression"), "{err}");
    assert!(err.contains("occupancy down"), "{err}");
    let row = err
        .lines()
        .find(|l| l.contains("transpose_tiled") && l.contains("sm_80"))
        .unwrap_or_else(|| panic!("no row in\n{err}"));
    assert!(
        row.contains("100.0% -> 68.8%")
            && row.contains("at block 32x8 + 1024 B smem -> 32x22 + 1024 B smem"),
        "{row}"
    );
    assert!(err.contains("cargo occ bless"), "{err}");
    // At 32x16 the occupancy is the lock's: the build passes and says the
    // launch is not the one recorded.
    relaunch("32, 16");
    let out = occ_tests::text(&occ_tests::succeed(
        &mut krate.cargo(&["build"]),
        "a 32x16 launch",
    ));
    assert!(
        out.contains("another declared launch than occ.lock records, with the same occupancy"),
        "{out}"
    );
}

#[test]
fn a_launch_pattern_that_matches_no_kernel_names_the_closest() {
    let s = Scratch::new();
    s.write("kernels/k.cu", DECLARED);
    let e = s
        .build(["sm_80"])
        .launch("fast_argmni_*", Launch::block(1024))
        .try_compile_with(&build_env(&[]))
        .expect_err("matches nothing");
    let text = e.to_string();
    assert_eq!(e.kind(), ErrorKind::Config, "{e:?}");
    assert!(text.contains("matches no kernel"), "{text}");
    assert!(
        text.contains("fast_argmni_*") && text.contains("fast_argmin_f32"),
        "{text}"
    );
    // A launch the kernel cannot take (above its bounds) is refused too.
    let e = s
        .build(["sm_80"])
        .launch("bounded", Launch::block_2d(32, 16))
        .try_compile_with(&build_env(&[]))
        .expect_err("512 > 256");
    let text = e.to_string();
    assert!(text.contains("bounded") && text.contains("32x16"), "{text}");
}

/// The new-user review's build.rs: an exact name, then `*` for "every
/// other kernel". The exact name wins whatever the order; two wildcards
/// that give a kernel different launches fail the build, naming both.
#[test]
fn an_exact_name_beats_a_later_wildcard_and_two_wildcards_that_disagree_fail() {
    let s = Scratch::new();
    s.write("kernels/k.cu", DECLARED);
    let report = s
        .build(["sm_80"])
        .launch("fast_argmin_f32", Launch::block_2d(32, 8))
        .launch("*", Launch::block(256))
        .try_compile_with(&build_env(&[]))
        .unwrap_or_else(|e| panic!("build failed: {e}"));
    let m = report.manifest().expect("manifest");
    let by = |name: &str| {
        let d = kernel(m, name).archs["sm_80"].declared.clone();
        d.map(|d| (d.launch.block, d.by))
    };
    let build = |pattern: &str| DeclaredBy::Build {
        pattern: pattern.into(),
    };
    assert_eq!(
        by("fast_argmin_f32"),
        Some(([32, 8, 1], build("fast_argmin_f32")))
    );
    assert_eq!(by("fast_argmin_f64"), Some(([256, 1, 1], build("*"))));
    assert_eq!(by("bounded"), Some(([256, 1, 1], build("*"))));
    let e = s
        .build(["sm_80"])
        .launch("fast_*", Launch::block(1024))
        .launch("*", Launch::block(256))
        .try_compile_with(&build_env(&[]))
        .expect_err("two wildcards disagree on fast_argmin_*");
    assert_eq!(e.kind(), ErrorKind::Config, "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("kernel `fast_argmin_f")
            && text.contains("launch(\"fast_*\", ..) declares a block of 1024 threads")
            && text.contains("launch(\"*\", ..) declares a block of 256 threads")
            && text.contains("keep one, or make the one meant for it exact"),
        "{text}"
    );
}

#[test]
fn a_recursive_glob_leaves_out_what_exclude_names() {
    let s = Scratch::new();
    let tiny = "extern \"C\" __global__ void NAME(float *p) { p[threadIdx.x] = 1.0f; }\n";
    for (path, name) in [
        ("src/a.cu", "a"),
        ("src/sub/b.cu", "b"),
        ("src/moe/c.cu", "c"),
        ("src/moe/deep/d.cu", "d"),
    ] {
        s.write(path, &tiny.replace("NAME", name));
    }
    let build = |excludes: &[&str]| {
        let mut b = Build::new();
        b.root(s.path())
            .out_dir(s.path().join("out"))
            .glob("src/**/*.cu")
            .arch("sm_80");
        for e in excludes {
            b.exclude(*e);
        }
        b.try_compile_with(&build_env(&[]))
    };
    let report = build(&["src/moe/**", "nothing/*.cu"]).expect("build");
    let m = report.manifest().expect("manifest").clone();
    let sources: Vec<&str> = m.kernels.iter().map(|k| k.source.as_str()).collect();
    assert_eq!(sources, ["src/a.cu", "src/sub/b.cu"]);
    // The glob's folder is watched, so a new file reruns the build script.
    let src = s.path().join("src").display().to_string();
    let directives = report.directives();
    assert!(
        directives.rerun_if_changed().contains(&src),
        "{directives:?}"
    );
    // `*` stays within its folder.
    let report = build(&["src/*.cu"]).expect("build");
    let m = report.manifest().expect("manifest").clone();
    let mut names: Vec<&str> = m.kernels.iter().map(|k| k.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["b", "c", "d"]);
    // Excluding every match is the no-match error, naming the excludes.
    let e = build(&["src/**"]).expect_err("nothing left");
    assert_eq!(e.kind(), ErrorKind::Config, "{e:?}");
    let text = e.to_string();
    assert!(text.contains("matched no .cu file"), "{text}");
    assert!(
        text.contains("src/**/*.cu") && text.contains("\"src/**\"") && text.contains("removed"),
        "{text}"
    );
}

#[test]
fn resolved_archs_are_the_builds_and_watch_what_they_read() {
    let mut b = Build::new();
    b.archs(["sm_80", "sm_90"])
        .arch_specific(["sm_90", "sm_100"]);
    let names = |env: &occ_shell::Env| -> Vec<String> {
        b.resolved_archs_with(env)
            .expect("archs")
            .iter()
            .map(|t| t.nvcc_name())
            .collect()
    };
    let env = build_env(&[]);
    assert_eq!(names(&env), ["sm_80", "sm_90a"]);
    let read = env.read_vars();
    assert!(
        read.iter().any(|v| v == "OCC_ARCHS") && read.iter().any(|v| v == "CUDA_COMPUTE_CAP"),
        "{read:?}"
    );
    // The environment's list gets the same policy; 75 < 80 is what a
    // build script tests to define NO_BF16_KERNEL.
    let env = build_env(&[("CUDA_COMPUTE_CAP", Some("75,90,100"))]);
    let targets = b.resolved_archs_with(&env).expect("archs");
    assert_eq!(
        targets.iter().map(|t| t.nvcc_name()).collect::<Vec<_>>(),
        ["sm_75", "sm_90a", "sm_100a"]
    );
    assert!(targets.iter().any(|t| t.cc < 80));
    assert_eq!(targets[1].variant, Variant::Specific);
    // The same errors as the build's.
    let env = build_env(&[("OCC_ARCHS", Some("sm_77"))]);
    let e = b.resolved_archs_with(&env).expect_err("no sm_77");
    assert_eq!(e.kind(), ErrorKind::Config, "{e:?}");
    assert!(e.to_string().contains("unknown CUDA arch `sm_77`"), "{e}");
    let mut bad = Build::new();
    bad.arch("sm_80").arch_specific(["sm_80"]);
    let e = bad
        .resolved_archs_with(&build_env(&[]))
        .expect_err("no sm_80a");
    assert_eq!(e.kind(), ErrorKind::Config, "{e:?}");
    assert!(e.to_string().contains("has no `a` target"), "{e}");
    assert!(e.to_string().contains("sm_90a"), "{e}");
    let mut family = Build::new();
    family.arch("sm_100").arch_family(["100"]);
    let t = family.resolved_archs_with(&build_env(&[])).expect("archs");
    assert_eq!(t[0].nvcc_name(), "sm_100f");
}

#[test]
fn the_suffix_policy_reaches_nvcc_and_nvcc_warnings_are_shown_once() {
    let s = Scratch::new();
    s.write(
        "kernels/w.cu",
        "extern \"C\" __global__ void w(float *p) { int unused_here = 3; p[threadIdx.x] = 1.0f; }\n",
    );
    let report = s
        .build(["sm_80", "sm_90"])
        .arch_specific(["sm_90"])
        .try_compile_with(&build_env(&[]))
        .unwrap_or_else(|e| panic!("build failed: {e}"));
    let m = report.manifest().expect("manifest").clone();
    let directives = report.directives();
    assert_eq!(m.archs, ["sm_80", "sm_90a"]);
    assert_eq!(
        m.kernels[0].archs.keys().collect::<Vec<_>>(),
        ["sm_80", "sm_90a"]
    );
    let warned: Vec<&String> = directives
        .warnings()
        .iter()
        .filter(|w| w.contains("unused_here"))
        .collect();
    assert_eq!(warned.len(), 1, "{:#?}", directives.warnings());
    assert!(
        warned[0].starts_with("nvcc: ") && warned[0].contains("kernels/w.cu"),
        "{warned:?}"
    );
    assert!(directives
        .lines()
        .iter()
        .any(|l| l.starts_with("cargo::warning=nvcc: ") && l.contains("unused_here")));
}

/// A launch of 1024 threads that the kernel fits only under the register
/// cap build.rs names it by: uncapped, no block of it is resident, so the
/// build fails naming the kernel, the arch and the launch (the driver
/// would refuse it; it was once recorded at 0%); the cap, placed by the
/// first compile's kernel names alone (`plan::place_caps`, nothing
/// judged), makes it run one.
#[test]
fn a_launch_that_fits_only_under_a_kernels_register_cap_builds() {
    let s = Scratch::new();
    s.write("kernels/k.cu", occ_tests::surroundings::HEAVY);
    let build = |cap: Option<u32>| {
        let mut b = s.build(["sm_80"]);
        b.launch("scale", Launch::block(1024));
        if let Some(cap) = cap {
            b.max_registers("scale", cap);
        }
        b.try_compile_with(&build_env(&[]))
    };
    let err = build(None).expect_err("1024 threads of the uncapped kernel were accepted");
    let text = err.to_string();
    assert!(
        text.contains("kernel `scale` cannot launch on sm_80 as declared")
            && text.contains("a block of 1024 threads, declared by build.rs `scale`")
            && text.contains("no block of 1024 runs"),
        "{text}"
    );
    let report = build(Some(64)).unwrap_or_else(|e| panic!("build failed: {e}"));
    let k = kernel(report.manifest().expect("manifest"), "scale").archs["sm_80"].clone();
    let d = k.declared.clone().expect("declared by build.rs");
    assert!(k.facts.registers <= 64, "{}", k.facts.registers);
    assert_eq!((d.block_size, d.active_blocks_per_sm), (1024, 1));
}
