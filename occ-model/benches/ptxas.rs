//! Throughput of `ptxas::parse_log` on a large log: every captured 13.5, 12.9
//! and 11.8 log of `tests/fixtures/` concatenated, with renamed kernels, until
//! it holds at least 10,000 kernel records. Target: ≥ 200 MB/s (BENCHMARKS.md).
//!
//! `cargo bench -p occ-model --bench ptxas`

// A benchmark, not the library: it reads the fixture logs from disk. The
// purity rules of occ-model's clippy.toml are for src/.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::disallowed_macros
)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use occ_model::compiler::ptxas;
use std::hint::black_box;
use std::path::Path;

const MIN_KERNELS: usize = 10_000;

/// The fixture logs of every CUDA version (not the `-rdc` one: its nvlink
/// records name kernels across runs, which renaming per copy would not change).
fn fixtures() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/fixtures exists")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ptxas-") && n.ends_with(".log") && !n.contains("rdc"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|n| std::fs::read_to_string(dir.join(n)).expect("read fixture"))
        .collect()
}

/// The fixtures repeated, each copy's mangled names put in a namespace of
/// their own (`_Z…` → `_ZN4copyNE_Z…`), until there are `n` kernel records.
fn big_log(n: usize) -> String {
    let base = fixtures();
    let per = base.matches("Compiling entry function").count().max(1);
    let copies = n.div_ceil(per);
    let mut out = String::with_capacity(base.len() * copies * 11 / 10);
    for i in 0..copies {
        out.push_str(&base.replace("_Z", &format!("_ZN4copy{i}E_Z")));
    }
    out
}

fn parse_big_log(c: &mut Criterion) {
    let text = big_log(MIN_KERNELS);
    let kernels = ptxas::parse_log(&text).expect("parses").kernels.len();
    assert!(kernels >= MIN_KERNELS, "{kernels} kernel records");
    eprintln!(
        "ptxas log: {kernels} kernel records, {:.2} MB",
        text.len() as f64 / 1e6
    );
    let mut group = c.benchmark_group("ptxas");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.sample_size(30);
    group.bench_function("parse_log_10k_kernels", |b| {
        b.iter(|| ptxas::parse_log(black_box(&text)))
    });
    group.finish();
}

criterion_group!(benches, parse_big_log);
criterion_main!(benches);
