//! A scratch crate made as a new user would: outside the workspace, depending
//! on occ-build by path, built with plain `cargo build`, with the real nvcc.

use occ_tests::{cargo, counting_launcher, launches, path_dep, Scratch};

fn scratch_crate() -> Scratch {
    let s = Scratch::new();
    s.write(
        "Cargo.toml",
        &format!(
            "[package]\nname = \"newuser\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [workspace]\n\n[build-dependencies]\n{}\n",
            path_dep("occ-build")
        ),
    );
    s.write(
        "build.rs",
        "fn main() {\n    occ_build::Build::new().glob(\"kernels/*.cu\").archs([\"sm_80\", \"sm_90\"]).compile();\n}\n",
    );
    s.write(
        "kernels/scale.cu",
        "#include \"factor.cuh\"\nextern \"C\" __global__ void scale(float* p, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) p[i] *= FACTOR;\n}\n",
    );
    s.write("kernels/factor.cuh", "#pragma once\n#define FACTOR 2.0f\n");
    s.write(
        "kernels/stencil.cu",
        "namespace fluid {\ntemplate <typename T, int R>\n__global__ void stencil1d(const T* in, T* out, int n) {\n  __shared__ T s[256 + 2 * R];\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  s[threadIdx.x + R] = i < n ? in[i] : T(0);\n  __syncthreads();\n  T acc = 0;\n  for (int k = -R; k <= R; ++k) acc += s[threadIdx.x + R + k];\n  if (i < n) out[i] = acc;\n}\ntemplate __global__ void stencil1d<float, 3>(const float*, float*, int);\n}\n",
    );
    s.write(
        "src/main.rs",
        "mod kernels {\n    include!(concat!(env!(\"OUT_DIR\"), \"/occ/kernels.rs\"));\n}\n\nfn main() {\n    use kernels::*;\n    println!(\"scale {} {} {} {}\", scale::NAME, scale::sm_80::REGISTERS, scale::sm_80::BEST_BLOCK_SIZE, scale::sm_90::CUBIN.len());\n    println!(\"stencil {} {} {}\", fluid_stencil1d_float_3::NAME, fluid_stencil1d_float_3::BASE_NAME, fluid_stencil1d_float_3::sm_90::STATIC_SMEM_BYTES);\n}\n",
    );
    s
}

#[test]
fn a_new_crate_builds_runs_and_rebuilds_without_nvcc() {
    let s = scratch_crate();
    let log = s.path().join("nvcc.log");
    let launcher = counting_launcher(s.path(), &log);
    let run = |what: &str| {
        let out = cargo()
            .args(["run", "--quiet"])
            .current_dir(s.path())
            .env("OCC_NVCC_LAUNCHER", &launcher)
            .output()
            .expect("run cargo");
        assert!(
            out.status.success(),
            "{what}: cargo run failed\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first = run("first build");
    assert!(first.contains("scale scale "), "{first}");
    assert!(
        first.contains(
            "stencil _ZN5fluid9stencil1dIfLi3EEEvPKT_PS1_i fluid::stencil1d<float, 3> 1048"
        ),
        "{first}"
    );
    assert_eq!(launches(&log).len(), 4, "2 files x 2 archs");
    // A no-op rebuild does not even run the build script.
    let second = run("no-op rebuild");
    assert_eq!(first, second);
    assert_eq!(
        launches(&log).len(),
        4,
        "a no-op rebuild runs nvcc zero times"
    );
    // Touch the header: only its includer recompiles, for both archs.
    s.write("kernels/factor.cuh", "#pragma once\n#define FACTOR 3.0f\n");
    run("header change");
    let reruns = launches(&log)[4..].to_vec();
    assert_eq!(reruns.len(), 2, "{reruns:#?}");
    assert!(
        reruns.iter().all(|l| l.contains("kernels/scale.cu")),
        "{reruns:#?}"
    );
}

#[test]
fn a_compile_error_fails_the_build_with_one_clear_message_and_no_backtrace() {
    let s = scratch_crate();
    s.write(
        "kernels/broken.cu",
        "extern \"C\" __global__ void broken(int* p) {\n  p[0] = nope;\n}\n",
    );
    let out = cargo()
        .args(["build"])
        .current_dir(s.path())
        .output()
        .expect("run cargo");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("occ: nvcc failed to compile kernels/broken.cu for sm_"),
        "{stderr}"
    );
    assert!(
        stderr.contains("kernels/broken.cu(2): error: identifier \"nope\" is undefined"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
        "{stderr}"
    );
}
