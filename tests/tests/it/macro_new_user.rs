//! `#[launch_config]` as a new user meets it: a scratch crate outside the
//! workspace, depending on occ-build and occ (with `cudarc`) by path, with kernels used
//! nowhere else, built with plain `cargo`. Every baked number must equal what
//! occ-build's tuner (the logic of `cargo occ calc`, checked against
//! cuda_occupancy.h by the oracle test) gives for the kernel's resources in
//! the manifest; a spilling kernel named by an attribute must fail the build
//! with the kernel, the arch and the bytes that nvcc itself reports.

use occ_model::model::occupancy::BlockLaunch;
use occ_model::model::suggest::{self, DynamicSmem, TuneRequest};
use occ_model::schema::manifest::{Lookup, Manifest};
use occ_model::{compiler::analyze, model::arch};
use occ_tests::{nvcc, ScratchCrate, BUILD_RS};
use std::path::Path;
use std::process::Command;

const MAIN: &str = r#"
use occ::cuda::{CudaSlice, CudaStream, Function};
use occ::launch_config;

mod kernels {
    include!(concat!(env!("OUT_DIR"), "/occ/kernels.rs"));
}

fn show(site: &str, kernel: &str, arch: &str, block: u32, smem: u32, blocks: u32, baked: &occ::Baked) {
    println!("site {site} {kernel} {arch} {block} {smem} {blocks}");
    for r in baked.archs {
        println!("row {site} {} {} {} {} {} {}", r.arch, r.major, r.minor, r.threads(), r.dynamic_smem, r.active_blocks_per_sm);
    }
}

#[launch_config(kernel = "block_sum")]
fn sum() {
    show("sum", KERNEL_NAME, ARCH, BLOCK_SIZE, DYNAMIC_SMEM, ACTIVE_BLOCKS_PER_SM, &LAUNCH);
    println!("grid sum {}", grid_for(1_000_000));
    let pick = |major, minor| LAUNCH.for_device(major, minor).map(|r| (r.threads(), r.dynamic_smem));
    println!("pick sum {:?} {:?} {:?}", pick(8, 6), pick(9, 0), pick(7, 0));
}

#[launch_config(kernel = "phys::nbody_step<64>", arch = "sm_90")]
fn nbody() {
    show("nbody", KERNEL_NAME, ARCH, BLOCK_SIZE, DYNAMIC_SMEM, ACTIVE_BLOCKS_PER_SM, &LAUNCH);
}

#[launch_config(kernel = "nbody_step")]
fn nbody_by_base_name() {
    show("nbody_base", KERNEL_NAME, ARCH, BLOCK_SIZE, DYNAMIC_SMEM, ACTIVE_BLOCKS_PER_SM, &LAUNCH);
}

#[launch_config(kernel = "tile_gemm", smem_per_thread = 8, smem_fixed = 512, block_multiple = 64)]
fn gemm() {
    show("gemm", KERNEL_NAME, ARCH, BLOCK_SIZE, DYNAMIC_SMEM, ACTIVE_BLOCKS_PER_SM, &LAUNCH);
}

#[launch_config(kernel = "block_sum", dynamic_smem = "max", max_block_size = 512)]
fn sum_max_smem() {
    show("sum_max", KERNEL_NAME, ARCH, BLOCK_SIZE, DYNAMIC_SMEM, ACTIVE_BLOCKS_PER_SM, &LAUNCH);
}

// A launch site as docs/GUIDE.md writes one: the baked row of the loaded
// code, and the kernel's typed launcher.
#[launch_config(kernel = "block_sum")]
fn sum_on_gpu(f: &Function, stream: &CudaStream, x: &CudaSlice<f32>, out: &mut CudaSlice<f32>) -> Result<(), occ::cuda::Error> {
    let cfg = LAUNCH.for_function(f)?.for_elements(x.len());
    kernels::block_sum::launch(f, stream, cfg, x, out, x.len() as i32)
}

fn gpu() -> Result<(), Box<dyn std::error::Error>> {
    if !occ::cuda::driver_present() {
        return Err("no CUDA driver".into());
    }
    let ctx = occ::cuda::CudaContext::new(0)?;
    let loader = occ::cuda::Loader::new(&ctx)?;
    let f = loader.load(kernels::block_sum::KERNEL)?;
    let stream = ctx.default_stream();
    let x = stream.clone_htod(&vec![1.0f32; 1 << 16])?;
    let mut out = stream.alloc_zeros::<f32>(1 << 16)?;
    sum_on_gpu(&f, &stream, &x, &mut out)?;
    stream.synchronize()?;
    Ok(())
}

fn main() {
    println!("manifest {}", concat!(env!("OUT_DIR"), "/occ/manifest.json"));
    sum();
    nbody();
    nbody_by_base_name();
    gemm();
    sum_max_smem();
    println!("sig {}", kernels::block_sum::KERNEL.signature());
    match gpu() {
        Ok(()) => println!("gpu ran"),
        Err(e) => println!("gpu skipped: {e}"),
    }
}
"#;

/// The kernels of `tests/fixtures/cu/macro_new_user`: reduce.cu, physics.cu,
/// gemm.cu and crunch.cu (two blocks of 1024 threads per SM leave it 32
/// registers for 64 live values).
fn scratch_crate() -> ScratchCrate {
    ScratchCrate::new("macrouser")
        .dep_with("occ", &["cudarc"])
        .build_dep("occ-build")
        .build_rs(BUILD_RS)
        .cu("macro_new_user", "kernels")
        .file("src/main.rs", MAIN)
}

/// What the tuner gives for one site: (symbol, block, dynamic smem, blocks per SM).
fn expected(
    m: &Manifest,
    kernel: &str,
    arch_name: &str,
    request: TuneRequest,
    max_smem: bool,
) -> (String, u32, u32, u32) {
    let k = match m.lookup(kernel) {
        Lookup::Found(k) => k,
        other => panic!("{kernel}: {other:?}"),
    };
    let ka = &k.archs[arch_name];
    let limits = arch::lookup(arch_name).expect("arch");
    let res = analyze::model_of(&ka.facts);
    let best = suggest::best_block_size(limits, &res, &request)
        .expect("tune")
        .expect("a launch");
    let smem = if max_smem {
        suggest::available_dynamic_smem(
            limits,
            &res,
            &BlockLaunch::new(best.block_size),
            best.occupancy.active_blocks_per_sm,
        )
        .expect("headroom")
    } else {
        request.dynamic_smem.bytes(best.block_size) as u32
    };
    (
        k.name.clone(),
        best.block_size,
        smem,
        best.occupancy.active_blocks_per_sm,
    )
}

/// Spill stores + loads that nvcc itself reports for `kernel` on `arch`.
fn nvcc_spill_bytes(source: &Path, kernel: &str, arch_name: &str) -> u64 {
    let out = Command::new(nvcc())
        .args(["-cubin", "-o", "/dev/null", "-Xptxas", "-v"])
        .arg(format!("-arch={arch_name}"))
        .arg(source)
        .output()
        .expect("run nvcc");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    let mut lines = log.lines();
    while let Some(line) = lines.next() {
        if line.contains("Function properties for") && line.trim_end().ends_with(kernel) {
            let props = lines.next().unwrap_or_default();
            let number_before = |what: &str| -> u64 {
                let end = props.find(what).unwrap_or_else(|| panic!("{props}"));
                props[..end]
                    .trim_end()
                    .rsplit(|c: char| !c.is_ascii_digit())
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("{props}"))
            };
            return number_before(" bytes spill stores") + number_before(" bytes spill loads");
        }
    }
    panic!("no properties for {kernel} in\n{log}");
}

#[test]
fn baked_launches_equal_the_tuner_and_a_spilling_kernel_fails_the_build() {
    let s = scratch_crate();
    let stdout = s.run("cargo run");
    let manifest_path = stdout
        .lines()
        .find_map(|l| l.strip_prefix("manifest "))
        .expect("the manifest path");
    let m = occ_shell::files::read_manifest(Path::new(manifest_path)).expect("read the manifest");
    assert_eq!(m.archs, ["sm_80", "sm_90"]);

    let req = TuneRequest::default;
    let per_thread = TuneRequest {
        dynamic_smem: DynamicSmem::PerThread {
            per_thread: 8,
            fixed: 512,
        },
        block_multiple: Some(64),
        ..TuneRequest::default()
    };
    let capped = TuneRequest {
        max_block_size: Some(512),
        ..TuneRequest::default()
    };
    // (site, kernel, request, "max" smem, archs of the table; the first is the plain consts')
    let sites: [(&str, &str, TuneRequest, bool, &[&str]); 5] = [
        ("sum", "block_sum", req(), false, &["sm_80", "sm_90"]),
        ("nbody", "phys::nbody_step<64>", req(), false, &["sm_90"]),
        (
            "nbody_base",
            "phys::nbody_step<64>",
            req(),
            false,
            &["sm_80", "sm_90"],
        ),
        ("gemm", "tile_gemm", per_thread, false, &["sm_80", "sm_90"]),
        ("sum_max", "block_sum", capped, true, &["sm_80", "sm_90"]),
    ];
    for (site, kernel, request, max_smem, archs) in sites {
        let (name, block, smem, blocks) = expected(&m, kernel, archs[0], request, max_smem);
        let line = format!("site {site} {name} {} {block} {smem} {blocks}", archs[0]);
        assert!(
            stdout.lines().any(|l| l == line),
            "want `{line}` in\n{stdout}"
        );
        let rows: Vec<&str> = stdout
            .lines()
            .filter(|l| l.starts_with(&format!("row {site} ")))
            .collect();
        assert_eq!(rows.len(), archs.len(), "{site}: {rows:#?}");
        for (row, a) in rows.iter().zip(archs) {
            let (_, block, smem, blocks) = expected(&m, kernel, a, request, max_smem);
            let target = arch::parse_target(a).expect("arch");
            let want = format!(
                "row {site} {a} {} {} {block} {smem} {blocks}",
                target.arch.major, target.arch.minor
            );
            assert_eq!(*row, want);
        }
    }
    // The site without options agrees with the manifest's own best launch.
    let sum = |a: &str| match m.lookup("block_sum") {
        Lookup::Found(k) => k.archs[a].best.as_ref().expect("a best launch").block_size,
        other => panic!("{other:?}"),
    };
    let grid = format!("grid sum {}", 1_000_000u32.div_ceil(sum("sm_80")));
    assert!(stdout.contains(&grid), "want `{grid}` in\n{stdout}");
    let pick = format!(
        "pick sum Some(({}, 0)) Some(({}, 0)) None",
        sum("sm_80"),
        sum("sm_90")
    );
    assert!(stdout.contains(&pick), "want `{pick}` in\n{stdout}");

    // The typed launcher's parameters are the kernel's, as its source
    // declares them.
    let source = std::fs::read_to_string(s.path().join("kernels/reduce.cu")).expect("reduce.cu");
    let decl = source
        .lines()
        .find(|l| l.contains("void block_sum("))
        .expect("block_sum's declaration");
    let names: Vec<&str> = decl[decl.find('(').expect("(") + 1..decl.find(')').expect(")")]
        .split(',')
        .map(|p| p.trim().rsplit([' ', '*']).next().expect("a name"))
        .collect();
    let sig = stdout
        .lines()
        .find_map(|l| l.strip_prefix("sig "))
        .expect("the signature");
    assert_eq!(
        sig,
        format!(
            "block_sum(float const* {}, float* {}, int {})",
            names[0], names[1], names[2]
        )
    );
    // The GPU step, last: what it prints depends on this machine, which the
    // test asks the same way. No driver: exactly that reason; a device: it
    // ran (a failed load or launch names its error here and fails).
    let want = if !occ::cuda::driver_present() {
        "gpu skipped: no CUDA driver".to_string()
    } else {
        match occ::cuda::CudaContext::new(0) {
            Ok(_) => "gpu ran".to_string(),
            Err(e) => format!("gpu skipped: {e}"),
        }
    };
    assert_eq!(stdout.lines().last(), Some(want.as_str()), "{stdout}");

    // An argument of the wrong type fails the build at the argument, naming
    // the kernel's parameter.
    s.write("src/main.rs", &MAIN.replace("x.len() as i32)", "x.len())"));
    let stderr = s.build_fails("a usize for `int n` must fail the build");
    assert!(stderr.contains("expected `i32`, found `usize`"), "{stderr}");
    assert!(stderr.contains(&format!("{}: i32", names[2])), "{stderr}");

    // Name the spilling kernel at a launch site: the build fails, naming the
    // kernel, each arch and the bytes nvcc reports.
    s.write(
        "src/main.rs",
        &MAIN.replace(
            "fn main() {",
            "#[launch_config(kernel = \"crunch\")]\nfn crunch() -> u32 {\n    BLOCK_SIZE\n}\n\nfn main() {\n    crunch();",
        ),
    );
    let stderr = s.build_fails("a spilling kernel must fail the build");
    assert!(stderr.contains("kernel `crunch` spills"), "{stderr}");
    let source = s.path().join("kernels/crunch.cu");
    for a in ["sm_80", "sm_90"] {
        let bytes = nvcc_spill_bytes(&source, "crunch", a);
        assert!(bytes > 0, "crunch must spill on {a}");
        let want = format!("{a} ({bytes} bytes");
        assert!(stderr.contains(&want), "want `{want}` in\n{stderr}");
    }
    assert!(stderr.contains("allow_spills"), "{stderr}");
    assert!(
        !stderr.contains("panicked") && stderr.matches("error: kernel").count() == 1,
        "one message, no panic\n{stderr}"
    );
}
