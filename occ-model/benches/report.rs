//! What the build's views cost as a build grows: the per-kernel table and
//! every cliff (`report.txt`), the comparison with the lock and its
//! before/after tables, the Markdown report and the CI alerts, at 1,000
//! and at 10,000 kernels × 2 archs (every kernel's registers up against the
//! lock, a third of them spilling: the most a build's views write).
//! Linear (or n log n) means the 10,000 row's time is about 10× the 1,000
//! one's; `bench/run.sh criterion` prints the ratio and BENCHMARKS.md
//! section 15 holds it to ≤ 15×. A quadratic step gives ~100×.
//!
//! `cargo bench -p occ-model --bench report`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use occ_model::compare::{compare, groups, Verdict};
use occ_model::render::{ci, markdown, text_table};
use occ_model::schema::lock::{Lock, LockKernel, Thresholds, LOCK_SCHEMA};
use occ_model::schema::manifest::{Best, Facts, LaunchBounds, Manifest, Resources};
use std::hint::black_box;
use std::path::Path;

fn resources(registers: u32, spills: u32) -> Resources {
    Resources {
        facts: Facts {
            registers,
            static_smem: 0,
            spill_stores: spills,
            spill_loads: spills,
            stack_frame: 0,
            cumulative_stack: Some(0),
            barriers: Some(0),
            launch_bounds: LaunchBounds::default(),
            maxrregcount: None,
        },
        declared: None,
        cubin_hash: None,
        best: Some(Best {
            block_size: 256,
            active_blocks_per_sm: 4,
            active_warps_per_sm: 32,
            occupancy: 0.5,
            limiters: vec!["registers".into()],
            dynamic_smem_headroom: 0,
        }),
    }
}

/// `n` kernels in files of 100 on sm_80 and sm_90.
fn lock(n: usize, registers: u32, spills: bool) -> Lock {
    let kernels = (0..n)
        .map(|i| {
            let name = format!("kern_{i:05}");
            let a = resources(registers, if spills && i % 3 == 0 { 8 } else { 0 });
            LockKernel {
                name: name.clone(),
                demangled: name.clone(),
                base_name: name.clone(),
                short_name: name.clone(),
                params: Vec::new(),
                ident: name,
                source: format!("f{:03}.cu", i / 100),
                archs: [("sm_80".to_string(), a.clone()), ("sm_90".to_string(), a)]
                    .into_iter()
                    .collect(),
            }
        })
        .collect();
    Lock {
        schema: LOCK_SCHEMA,
        package: "p".into(),
        nvcc: "V13.5".into(),
        archs: vec!["sm_80".into(), "sm_90".into()],
        flags: None,
        kernels,
        parts: Default::default(),
        measured: Vec::new(),
        noted: Default::default(),
        launches: Vec::new(),
    }
}

fn manifest(after: &Lock) -> Manifest {
    occ_model::assemble::lock_manifest(after, &[], Path::new("occ.lock")).expect("manifest")
}

fn source(file: &str) -> Option<String> {
    let first: usize = file
        .trim_start_matches('f')
        .trim_end_matches(".cu")
        .parse()
        .ok()?;
    Some(
        (first * 100..first * 100 + 100)
            .map(|i| format!("__global__ void kern_{i:05}(float* p) {{ p[0] = 1; }}\n"))
            .collect(),
    )
}

fn views(c: &mut Criterion) {
    let mut g = c.benchmark_group("views");
    g.sample_size(10);
    for n in [1_000, 10_000] {
        let (before, after) = (lock(n, 32, false), lock(n, 72, true));
        let m = manifest(&after);
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                let diff = compare(&before, &after, &Thresholds::default());
                let mut out = text_table::table(&m);
                out += &text_table::cliff_lines(&m, None);
                out += &text_table::render_diff(&diff, &Verdict::ALL);
                for group in groups(&diff, &Verdict::ALL) {
                    out += &text_table::group_names(&group, 5);
                }
                let baseline = markdown::Baseline::Compared {
                    lock: "occ.lock".into(),
                    diff: diff.clone(),
                };
                out += &markdown::markdown(&m, &baseline);
                let alerts = ci::alerts(&m, Some(&diff), false, &source);
                black_box((out.len(), alerts.len()))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, views);
criterion_main!(benches);
