//! `#[launch_config]` as a new user meets it: a scratch crate outside the
//! workspace, depending on occ-build and occ-macros by path, with kernels used
//! nowhere else, built with plain `cargo`. Every baked number must equal what
//! occ-build's tuner (the logic of `cargo occ calc`, checked against
//! cuda_occupancy.h by the oracle test) gives for the kernel's resources in
//! the manifest; a spilling kernel named by an attribute must fail the build
//! with the kernel, the arch and the bytes that nvcc itself reports.

use occ_build::manifest::{Lookup, Manifest};
use occ_build::occupancy::Launch;
use occ_build::tune::{self, DynamicSmem, TuneRequest};
use occ_build::{analyze, arch};
use occ_tests::{cargo, nvcc, path_dep, Scratch};
use std::path::Path;
use std::process::Command;

const REDUCE: &str = r#"
extern "C" __global__ void block_sum(const float* in, float* out, int n) {
    __shared__ float partial[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x % 256] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int s = 128; s > 0; s >>= 1) {
        if (threadIdx.x % 256 < s) partial[threadIdx.x % 256] += partial[threadIdx.x % 256 + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}
"#;

const PHYSICS: &str = r#"
namespace phys {
template <int N>
__global__ void nbody_step(float4* pos, float4* vel, int n, float dt) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float4 p = pos[i];
    float3 acc = make_float3(0.f, 0.f, 0.f);
#pragma unroll 8
    for (int j = 0; j < N; ++j) {
        float4 q = pos[(i + j) % n];
        float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
        float inv = rsqrtf(dx * dx + dy * dy + dz * dz + 1e-3f);
        float s = q.w * inv * inv * inv;
        acc.x += dx * s; acc.y += dy * s; acc.z += dz * s;
    }
    float4 v = vel[i];
    v.x += acc.x * dt; v.y += acc.y * dt; v.z += acc.z * dt;
    vel[i] = v;
}
template __global__ void nbody_step<64>(float4*, float4*, int, float);
}
"#;

const GEMM: &str = r#"
extern "C" __global__ void __launch_bounds__(512) tile_gemm(const float* a, const float* b, float* c, int n) {
    extern __shared__ float tiles[];
    int t = threadIdx.x;
    tiles[t] = a[(blockIdx.x * blockDim.x + t) % n];
    tiles[blockDim.x + t] = b[(blockIdx.x * blockDim.x + t) % n];
    __syncthreads();
    float acc = 0.f;
    for (int k = 0; k < blockDim.x; ++k) acc += tiles[k] * tiles[blockDim.x + (t + k) % blockDim.x];
    c[blockIdx.x * blockDim.x + t] = acc;
}
"#;

/// Two blocks of 1024 threads per SM leave 32 registers for 64 live values.
const CRUNCH: &str = r#"
extern "C" __global__ void __launch_bounds__(1024, 2) crunch(const float* in, float* out, int n) {
    float v[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) v[i] = in[(threadIdx.x * 3 + i * 97) % n];
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < 64; ++i)
#pragma unroll
        for (int j = 0; j < 64; ++j) acc += v[i] * v[(i * 5 + j) % 64] * (float)(i + j);
    out[threadIdx.x] = acc;
}
"#;

const MAIN: &str = r#"
use occ_macros::launch_config;

type Rows = &'static [(&'static str, u32, u32, u32, u32, u32)];

fn show(site: &str, kernel: &str, arch: &str, block: u32, smem: u32, blocks: u32, rows: Rows) {
    println!("site {site} {kernel} {arch} {block} {smem} {blocks}");
    for (a, major, minor, b, s, n) in rows {
        println!("row {site} {a} {major} {minor} {b} {s} {n}");
    }
}

#[launch_config(kernel = "block_sum")]
fn sum() {
    show("sum", KERNEL_NAME, ARCH, BLOCK_SIZE, DYNAMIC_SMEM_BYTES, BLOCKS_PER_SM, LAUNCH_CONFIGS);
    println!("grid sum {}", grid_for(1_000_000));
    println!("pick sum {:?} {:?} {:?}", launch_for(8, 6), launch_for(9, 0), launch_for(7, 0));
}

#[launch_config(kernel = "phys::nbody_step<64>", arch = "sm_90")]
fn nbody() {
    show("nbody", KERNEL_NAME, ARCH, BLOCK_SIZE, DYNAMIC_SMEM_BYTES, BLOCKS_PER_SM, LAUNCH_CONFIGS);
}

#[launch_config(kernel = "nbody_step")]
fn nbody_by_base_name() {
    show("nbody_base", KERNEL_NAME, ARCH, BLOCK_SIZE, DYNAMIC_SMEM_BYTES, BLOCKS_PER_SM, LAUNCH_CONFIGS);
}

#[launch_config(kernel = "tile_gemm", smem_per_thread = 8, smem_fixed = 512, block_multiple = 64)]
fn gemm() {
    show("gemm", KERNEL_NAME, ARCH, BLOCK_SIZE, DYNAMIC_SMEM_BYTES, BLOCKS_PER_SM, LAUNCH_CONFIGS);
}

#[launch_config(kernel = "block_sum", dynamic_smem = "max", max_block_size = 512)]
fn sum_max_smem() {
    show("sum_max", KERNEL_NAME, ARCH, BLOCK_SIZE, DYNAMIC_SMEM_BYTES, BLOCKS_PER_SM, LAUNCH_CONFIGS);
}

fn main() {
    println!("manifest {}", concat!(env!("OUT_DIR"), "/occ/manifest.json"));
    sum();
    nbody();
    nbody_by_base_name();
    gemm();
    sum_max_smem();
}
"#;

fn scratch_crate() -> Scratch {
    let s = Scratch::new();
    s.write(
        "Cargo.toml",
        &format!(
            "[package]\nname = \"macrouser\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [workspace]\n\n[dependencies]\n{}\n\n[build-dependencies]\n{}\n",
            path_dep("occ-macros"),
            path_dep("occ-build")
        ),
    );
    s.write(
        "build.rs",
        "fn main() {\n    occ_build::Build::new().glob(\"kernels/*.cu\").archs([\"sm_80\", \"sm_90\"]).compile();\n}\n",
    );
    s.write("kernels/reduce.cu", REDUCE);
    s.write("kernels/physics.cu", PHYSICS);
    s.write("kernels/gemm.cu", GEMM);
    s.write("kernels/crunch.cu", CRUNCH);
    s.write("src/main.rs", MAIN);
    s
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
    let res = analyze::resources(ka);
    let best = tune::best_block_size(limits, &res, &request)
        .expect("tune")
        .expect("a launch");
    let smem = if max_smem {
        tune::available_dynamic_smem(
            limits,
            &res,
            &Launch::new(best.block_size),
            best.occupancy.active_blocks,
        )
        .expect("headroom")
    } else {
        request.dynamic_smem.bytes(best.block_size) as u32
    };
    (
        k.name.clone(),
        best.block_size,
        smem,
        best.occupancy.active_blocks,
    )
}

fn cargo_in(s: &Scratch, args: &[&str]) -> std::process::Output {
    cargo()
        .args(args)
        .current_dir(s.path())
        .output()
        .expect("run cargo")
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
    let out = cargo_in(&s, &["run", "--quiet"]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "cargo run failed\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest_path = stdout
        .lines()
        .find_map(|l| l.strip_prefix("manifest "))
        .expect("the manifest path");
    let m = occ_build::emit::read_manifest(Path::new(manifest_path)).expect("read the manifest");
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
        Lookup::Found(k) => k.archs[a].best.block_size,
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

    // Name the spilling kernel at a launch site: the build fails, naming the
    // kernel, each arch and the bytes nvcc reports.
    s.write(
        "src/main.rs",
        &MAIN.replace(
            "fn main() {",
            "#[launch_config(kernel = \"crunch\")]\nfn crunch() -> u32 {\n    BLOCK_SIZE\n}\n\nfn main() {\n    crunch();",
        ),
    );
    let out = cargo_in(&s, &["build"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "a spilling kernel must fail the build\n{stderr}"
    );
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
