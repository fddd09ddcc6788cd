//! Live tests of the occ-build pipeline with the real nvcc.

use occ_build::env::Env;
use occ_build::{Build, Error, Manifest};
use occ_tests::{counting_launcher, launches, Scratch};

/// A module exercising every shape the parser must handle.
const ZOO: &str = r#"
#include <cstdio>
#include "common.cuh"

__constant__ float coeffs[8];

extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i] * coeffs[i % 8];
}

namespace ns { namespace inner {
template <typename T, int N>
__global__ void tkern(T* out, const T* in) {
    __shared__ T tile[N];
    tile[threadIdx.x % N] = in[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = tile[(threadIdx.x + 1) % N] * SCALE;
}
template __global__ void tkern<double, 128>(double*, const double*);
template __global__ void tkern<float, 256>(float*, const float*);
}}

extern "C" __global__ void __launch_bounds__(256, 2) bounded(float* p) {
    p[threadIdx.x] *= 2.0f;
}

extern "C" __global__ void dyn_smem(float* p) {
    extern __shared__ float buf[];
    buf[threadIdx.x] = p[threadIdx.x];
    __syncthreads();
    p[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}

__device__ __noinline__ float helper(float x, int k) {
    float acc = x;
    for (int i = 0; i < k; ++i) acc = acc * 1.0001f + i;
    return acc;
}

extern "C" __global__ void calls_helper(float* p, int k) {
    p[threadIdx.x] = helper(p[threadIdx.x], k);
}

__device__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

extern "C" __global__ void recursive(int* p) { p[threadIdx.x] = fib(p[threadIdx.x]); }

extern "C" __global__ void __launch_bounds__(1024, 2) spills(const float* in, float* out, int n) {
    float v[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) v[i] = in[(threadIdx.x + i * 131) % n];
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < 64; ++i)
#pragma unroll
        for (int j = 0; j < 64; ++j) acc += v[i] * v[(i * 7 + j) % 64] * (float)(i ^ j);
    out[threadIdx.x] = acc;
}

extern "C" __global__ void prints(int x) { printf("%d\n", x); }
"#;

fn zoo() -> Scratch {
    let s = Scratch::new();
    s.write("kernels/zoo.cu", ZOO);
    s.write("kernels/common.cuh", "#pragma once\n#define SCALE 3\n");
    s.write(
        "kernels/plain.cu",
        "#include \"common.cuh\"\nextern \"C\" __global__ void plain(int* p) { p[0] = SCALE; }\n",
    );
    s
}

fn env(extra: &[(&str, Option<&str>)]) -> Env {
    occ_tests::build_env(extra)
}

fn build(s: &Scratch) -> Build {
    let mut b = Build::new();
    b.root(s.path())
        .out_dir(s.path().join("out"))
        .glob("kernels/*.cu")
        .archs(["sm_80", "sm_90"]);
    b
}

fn kernel<'a>(m: &'a Manifest, name: &str) -> &'a occ_build::manifest::Kernel {
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
    let report = build(&s).try_compile_with(&env(&[])).expect("build");
    let m = &report.manifest;
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
    assert_eq!(t.archs["sm_80"].static_smem, 128 * 8);
    assert_eq!(
        kernel(m, "ns::inner::tkern<float, 256>").archs["sm_90"].static_smem,
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
    let b = &kernel(m, "bounded").archs["sm_80"].launch_bounds;
    assert_eq!(b.max_threads_per_block(), Some(256));
    assert_eq!(b.min_blocks_per_sm, Some(2));
    // __launch_bounds__(256, 2) caps registers at 65536 / 512 = 128, and the
    // best block can be no larger than 256.
    assert!(kernel(m, "bounded").archs["sm_80"].best.block_size <= 256);
    // Dynamic smem does not appear as static smem.
    assert_eq!(kernel(m, "dyn_smem").archs["sm_90"].static_smem, 0);
    // The spilling kernel spills on both archs; the others do not.
    for (arch, k) in &kernel(m, "spills").archs {
        assert!(k.spills(), "spills on {arch}: {k:?}");
        assert!(
            k.registers <= 32,
            "1024x2 blocks leave 32 registers: {}",
            k.registers
        );
    }
    assert!(!kernel(m, "saxpy").archs["sm_80"].spills());
    // Recursion: ptxas cannot size the stack, says so, and gives no cumulative stack.
    let rec = &kernel(m, "recursive").archs["sm_80"];
    assert!(
        rec.warnings
            .iter()
            .any(|w| w.contains("cannot be statically determined")),
        "{rec:?}"
    );
    assert_eq!(rec.cumulative_stack, None);
    // __constant__ lands in bank 3 of the module on sm_80 (no cmem on sm_90).
    assert!(kernel(m, "saxpy").archs["sm_90"].cmem.is_empty());
    // Every kernel got a best launch.
    for k in &m.kernels {
        for (arch, a) in &k.archs {
            assert!(
                a.best.block_size > 0 && a.best.occupancy > 0.0,
                "{} {arch}",
                k.name
            );
        }
    }
    // Spills are reported as one warning per kernel x arch.
    for arch in ["sm_80", "sm_90"] {
        let needle = format!("spills on {arch}:");
        assert!(
            report
                .directives
                .warnings
                .iter()
                .any(|w| w.contains(&needle)),
            "{:?}",
            report.directives.warnings
        );
    }
    // Files written: manifest, kernels.rs, cubins.
    let out = s.path().join("out/occ");
    assert_eq!(
        occ_build::emit::read_manifest(&out.join("manifest.json")).expect("manifest"),
        *m
    );
    let rs = std::fs::read_to_string(out.join("kernels.rs")).expect("kernels.rs");
    assert!(rs.starts_with("// @generated by occ-build"));
    assert!(
        !rs.contains(&s.path().display().to_string()),
        "no absolute paths in kernels.rs"
    );
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
        "extern \"C\" __global__ void alone(int* p) { p[0] = 1; }\n",
    );
    let log = s.path().join("nvcc.log");
    let launcher = counting_launcher(s.path(), &log);
    let env = || {
        env(&[(
            "OCC_NVCC_LAUNCHER",
            Some(launcher.to_str().expect("utf-8 path")),
        )])
    };
    let first = build(&s).try_compile_with(&env()).expect("first build");
    assert_eq!(first.nvcc_runs, 6);
    assert_eq!(launches(&log).len(), 6, "3 files x 2 archs");
    let second = build(&s).try_compile_with(&env()).expect("second build");
    assert_eq!(second.nvcc_runs, 0);
    assert_eq!(
        launches(&log).len(),
        6,
        "no nvcc process on an unchanged rebuild"
    );
    // Every header nvcc read is watched.
    assert!(second
        .directives
        .rerun_if_changed
        .iter()
        .any(|p| p.ends_with("kernels/common.cuh")));
    // Touch the shared header: zoo.cu and plain.cu rerun, alone.cu does not.
    s.write("kernels/common.cuh", "#pragma once\n#define SCALE 4\n");
    let third = build(&s).try_compile_with(&env()).expect("third build");
    assert_eq!(third.nvcc_runs, 4);
    let reruns = &launches(&log)[6..];
    assert!(
        reruns.iter().all(|l| !l.contains("alone.cu")),
        "{reruns:#?}"
    );
    // Byte-identical output for the same inputs.
    assert_eq!(first.manifest.kernels.len(), third.manifest.kernels.len());
}

#[test]
fn two_folders_give_byte_identical_output() {
    let a = zoo();
    let b = zoo();
    build(&a).try_compile_with(&env(&[])).expect("build a");
    build(&b).try_compile_with(&env(&[])).expect("build b");
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
    s.write(
        "kernels/a.cu",
        "extern \"C\" __global__ void a(int* p) { p[0] = 1; }\n",
    );
    let r = build(&s)
        .try_compile_with(&env(&[("CUDA_COMPUTE_CAP", Some("86,90a"))]))
        .expect("build");
    assert_eq!(r.manifest.archs, ["sm_86", "sm_90a"]);
    let r = build(&s)
        .try_compile_with(&env(&[
            ("OCC_ARCHS", Some("sm_75")),
            ("CUDA_COMPUTE_CAP", Some("86")),
        ]))
        .expect("build");
    assert_eq!(r.manifest.archs, ["sm_75"]);
    assert!(r.directives.rerun_if_env_changed.contains("OCC_ARCHS"));
    assert!(r
        .directives
        .rerun_if_env_changed
        .contains("CUDA_COMPUTE_CAP"));
}

#[test]
fn nvcc_compile_errors_name_the_file_and_line() {
    let s = Scratch::new();
    s.write(
        "kernels/bad.cu",
        "extern \"C\" __global__ void bad(int* p) {\n  p[0] = undefined_thing;\n}\n",
    );
    let err = build(&s)
        .try_compile_with(&env(&[]))
        .expect_err("must fail");
    let text = err.to_string();
    assert!(matches!(err, Error::Compile { .. }), "{text}");
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
    s.write(
        "kernels/a.cu",
        "extern \"C\" __global__ void a(int* p) { p[0] = 1; }\n",
    );
    let err = build(&s)
        .try_compile_with(&env(&[("OCC_ARCHS", Some("sm_52"))]))
        .expect_err("nvcc 13 dropped sm_52");
    let text = err.to_string();
    assert!(matches!(err, Error::UnsupportedArch { .. }), "{text}");
    assert!(text.contains("sm_52") && text.contains("V13."), "{text}");
}

#[test]
fn unknown_arch_lists_the_known_ones() {
    let s = Scratch::new();
    s.write(
        "kernels/a.cu",
        "extern \"C\" __global__ void a(int* p) { p[0] = 1; }\n",
    );
    let err = build(&s)
        .try_compile_with(&env(&[("OCC_ARCHS", Some("sm_95"))]))
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
    s.write(
        "kernels/a.cu",
        "extern \"C\" __global__ void a(int* p) { p[0] = 1; }\n",
    );
    let env = env(&[
        ("NVCC", None),
        ("CUDA_HOME", None),
        ("CUDA_PATH", None),
        ("CUDA_ROOT", None),
        ("PATH", Some("/nonexistent")),
        ("OCC_CUDA_DIR", None),
    ]);
    let (result, directives) = build(&s).execute(&env);
    let text = result.expect_err("no nvcc").to_string();
    for place in [
        "NVCC",
        "CUDA_HOME",
        "CUDA_PATH",
        "PATH",
        "/usr/local/cuda",
        "scripts/cuda-toolkit",
    ] {
        assert!(text.contains(place), "{place} in {text}");
    }
    // The variables read are still watched, so setting NVCC reruns the build.
    assert!(directives.rerun_if_env_changed.contains("NVCC"));
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
        .try_compile_with(&env(&[]))
        .expect_err("missing")
        .to_string();
    assert!(text.contains("kernels/nope.cu"), "{text}");
    let mut b = Build::new();
    b.root(s.path())
        .out_dir(s.path().join("out"))
        .glob("kernels/*.cu")
        .arch("sm_80");
    let text = b
        .try_compile_with(&env(&[]))
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
    let err = build(&s)
        .deny_spills()
        .try_compile_with(&env(&[]))
        .expect_err("spills denied");
    let text = err.to_string();
    assert!(matches!(err, Error::Spills { .. }), "{text}");
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
        "__device__ int twice(int x) { return 2 * x; }\n",
    );
    let r = build(&s).try_compile_with(&env(&[])).expect("build");
    assert!(r.manifest.kernels.is_empty());
}
