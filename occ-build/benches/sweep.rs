//! Full sweep of the occupancy model: every arch × registers 0..=255 × block
//! sizes 1..=1024 (5.5M calls), and the block-size search for every arch ×
//! register count. The C++ harness times the same sweep with
//! `cuda_occupancy.h`: `cargo test -p occ-tests --test oracle -- --ignored
//! --nocapture bench_side_by_side`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use occ_build::arch;
use occ_build::occupancy::{occupancy, KernelResources, Launch};
use occ_build::tune::{best_block_size, TuneRequest};
use std::hint::black_box;

fn sweep(c: &mut Criterion) {
    let archs = arch::all();
    let mut group = c.benchmark_group("sweep");
    group.sample_size(10);
    group.throughput(Throughput::Elements(archs.len() as u64 * 256 * 1024));
    group.bench_function(
        "occupancy/all-archs x regs 0..=255 x blocks 1..=1024",
        |b| {
            b.iter(|| {
                let mut sum = 0u64;
                for a in archs {
                    for registers in 0..=255 {
                        let kernel = KernelResources {
                            registers,
                            ..Default::default()
                        };
                        for block in 1..=1024 {
                            if let Ok(o) = occupancy(a, black_box(&kernel), &Launch::new(block)) {
                                sum += u64::from(o.active_blocks) + u64::from(o.limiters.bits());
                            }
                        }
                    }
                }
                black_box(sum)
            })
        },
    );
    group.throughput(Throughput::Elements(archs.len() as u64 * 256));
    group.bench_function("best_block_size/all-archs x regs 0..=255", |b| {
        b.iter(|| {
            let mut sum = 0u64;
            for a in archs {
                for registers in 0..=255 {
                    let kernel = KernelResources {
                        registers,
                        ..Default::default()
                    };
                    if let Ok(Some(best)) =
                        best_block_size(a, black_box(&kernel), &TuneRequest::default())
                    {
                        sum += u64::from(best.block_size);
                    }
                }
            }
            black_box(sum)
        })
    });
    group.finish();
}

criterion_group!(benches, sweep);
criterion_main!(benches);
