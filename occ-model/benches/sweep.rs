//! The full occupancy sweep, side by side with NVIDIA's `cuda_occupancy.h`
//! doing the same work: every arch × registers 0..=255 × block sizes
//! 1..=1024, runtime-style attributes (opt-in dynamic shared memory, one
//! barrier, no launch bounds, no shared memory). Target: occ / header ≤ 1.0.
//!
//! The header side is `tests/oracle/harness.cpp` in its `bench` mode, compiled
//! as the oracle test compiles it (`c++ -O2`); it times its own loop, so
//! process start-up is not counted. Without a C++ compiler or the header only
//! the occ side runs.
//!
//! `cargo bench -p occ-model --bench sweep`

// A benchmark, not the library: it builds and runs the C++ header harness
// to compare with. The purity rules of occ-model's clippy.toml are for src/.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::disallowed_macros
)]

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode};
use occ_model::model::arch::{self, Arch};
use occ_model::model::occupancy::{occupancy, BlockLaunch, KernelResources};
use std::fmt::Write as _;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The devices the harness sees (as in `tests/oracle/tests/oracle.rs`): every arch,
/// then 10.1 with 11.0's figures.
fn devices() -> Vec<(u32, u32, &'static Arch)> {
    let mut v: Vec<_> = arch::all().iter().map(|a| (a.major, a.minor, a)).collect();
    v.push((10, 1, arch::lookup("sm_110").expect("sm_110 is known")));
    v
}

fn device_table() -> String {
    let devs = devices();
    let mut s = format!("{}\n", devs.len());
    for (major, minor, a) in devs {
        let _ = writeln!(
            s,
            "{major} {minor} {} {} {} {} {} {} {} {} {}",
            a.max_threads_per_block,
            a.max_threads_per_sm,
            a.max_regs_per_block,
            a.regs_per_sm,
            a.warp_size,
            a.smem_per_block,
            a.smem_per_sm,
            a.smem_per_block_optin,
            a.reserved_smem_per_block
        );
    }
    s
}

/// The work of the harness's `bench` mode; returns (calls, checksum).
fn sweep(devs: &[(u32, u32, &'static Arch)]) -> (u64, u64) {
    let (mut calls, mut checksum) = (0u64, 0u64);
    for (_, _, a) in devs {
        for regs in 0..=255u32 {
            let kernel = KernelResources {
                registers: regs,
                ..Default::default()
            };
            for b in 1..=1024u32 {
                if let Ok(o) = occupancy(a, black_box(&kernel), &BlockLaunch::new(b)) {
                    checksum += u64::from(o.active_blocks_per_sm);
                }
                calls += 1;
            }
        }
    }
    (calls, checksum)
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Compiles the harness; `None` (with a note) when that is not possible here.
fn harness() -> Option<(PathBuf, PathBuf)> {
    let root = workspace_root();
    let mut includes = Vec::new();
    if let Some(home) = std::env::var_os("CUDA_HOME") {
        includes.push(PathBuf::from(home).join("include"));
    }
    includes.push(root.join(".cuda/cu13/nvidia/cu13/include"));
    let Some(include) = includes
        .into_iter()
        .find(|d| d.join("cuda_occupancy.h").is_file())
    else {
        eprintln!("sweep: cuda_occupancy.h not found (CUDA_HOME, .cuda/); header side skipped");
        return None;
    };
    let dir = root.join("target/bench");
    std::fs::create_dir_all(&dir).ok()?;
    let bin = dir.join("occ-oracle-harness");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let ok = Command::new(&cxx)
        .args(["-O2", "-std=c++14", "-Wall", "-Wno-unused-function", "-I"])
        .arg(&include)
        .arg(root.join("tests/oracle/harness.cpp"))
        .arg("-o")
        .arg(&bin)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("sweep: `{cxx}` could not build the harness; header side skipped");
        return None;
    }
    let input = dir.join("occ-oracle-devices.txt");
    std::fs::write(&input, device_table()).ok()?;
    Some((bin, input))
}

/// One run of the harness's `bench` mode: (calls, its own timing, checksum).
fn run_harness(bin: &Path, input: &Path) -> (u64, Duration, u64) {
    let stdin = std::fs::File::open(input).expect("open the device table");
    let out = Command::new(bin)
        .arg("bench")
        .stdin(stdin)
        .stderr(Stdio::inherit())
        .output()
        .expect("run the harness");
    assert!(out.status.success(), "harness bench failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Vec<u64> = text
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(v.len(), 3, "harness printed {text:?}");
    (v[0], Duration::from_nanos(v[1]), v[2])
}

fn full_sweep(c: &mut Criterion) {
    let devs = devices();
    let (calls, _) = sweep(&devs);
    let mut group = c.benchmark_group("sweep");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("occ", |b| b.iter(|| sweep(black_box(&devs))));
    if let Some((bin, input)) = harness() {
        let (their_calls, _, _) = run_harness(&bin, &input);
        assert_eq!(their_calls, calls, "both sides make the same calls");
        group.bench_function("cuda_occupancy_h", |b| {
            b.iter_custom(|iters| (0..iters).map(|_| run_harness(&bin, &input).1).sum())
        });
    }
    group.finish();
    eprintln!("sweep: {calls} occupancy calls per iteration");
}

criterion_group!(benches, full_sweep);
criterion_main!(benches);
