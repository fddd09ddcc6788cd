//! The launches measured on a GPU, as every report shows them: the best
//! evidence occ holds. One row per kernel × arch × bucket the build's
//! manifest carries from the lock: the device, the block `tuned` sites
//! bake (the fastest measured) and its time, the max-occupancy block
//! beside it and its time, the speed-up, and every time measured. The
//! terminal report, the Markdown (here) and the HTML and JSON reports
//! (cargo-occ) are made from these rows; the Markdown section is
//! `render::markdown`'s.

use crate::schema::manifest::Manifest;
use crate::schema::measured::Staleness;
use serde::Serialize;
use std::collections::BTreeMap;

/// One measured launch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeasuredRow {
    /// The kernel's symbol.
    pub symbol: String,
    /// The kernel's base name (its symbol when the build no longer has it).
    pub kernel: String,
    /// Its source.
    pub source: String,
    /// The arch.
    pub arch: String,
    /// The problem-size bucket the timings are for.
    pub bucket: String,
    /// The GPU, as its driver names it.
    pub device: String,
    /// Its compute capability (`9.0`).
    pub compute_capability: String,
    /// Its SMs.
    pub sm_count: u32,
    /// The fastest block measured: what `tuned` sites bake.
    pub baked: u32,
    /// Its median time, µs.
    pub baked_us: Option<f64>,
    /// The block of maximum occupancy (the tuner's for the site, else the
    /// kernel's best launch).
    pub max_occupancy: Option<u32>,
    /// Its median time, µs, where it was measured.
    pub max_occupancy_us: Option<f64>,
    /// The max-occupancy block's time over the baked one's.
    pub speedup: Option<f64>,
    /// Whether the kernel's code changed since (the measurement is of
    /// another cubin: sites fall back to the model's block).
    pub stale: bool,
    /// Every block measured and its median time, µs, by block size.
    pub timings: Vec<(u32, f64)>,
}

impl MeasuredRow {
    /// The row as every report's table shows it, plain text for each
    /// renderer to escape: kernel, arch, bucket, device (`NVIDIA H200
    /// (9.0, 132 SMs)`), the baked block (`(stale)` where it is), its time,
    /// the max-occupancy block, its time, the speed-up.
    pub fn cells(&self) -> [String; 9] {
        [
            crate::compiler::names::table_name(&self.kernel),
            self.arch.clone(),
            self.bucket.clone(),
            format!(
                "{} ({}, {} SMs)",
                self.device, self.compute_capability, self.sm_count
            ),
            format!("{}{}", self.baked, if self.stale { " (stale)" } else { "" }),
            us(self.baked_us),
            self.max_occupancy.map_or("-".into(), |b| b.to_string()),
            us(self.max_occupancy_us),
            times(self.speedup),
        ]
    }
}

/// The header of [`MeasuredRow::cells`].
pub const HEADER: [&str; 9] = [
    "kernel",
    "arch",
    "bucket",
    "device",
    "baked block",
    "time",
    "max-occupancy block",
    "time",
    "speed-up",
];

/// The measured launches of `m`, in the manifest's order.
pub fn measured_rows(m: &Manifest) -> Vec<MeasuredRow> {
    let kernels: BTreeMap<(&str, &str), &crate::schema::manifest::Kernel> = m
        .kernels
        .iter()
        .map(|k| ((k.name.as_str(), k.source.as_str()), k))
        .collect();
    m.measured
        .iter()
        .map(|e| {
            let kernel = kernels.get(&(e.kernel.as_str(), e.source.as_str()));
            let ka = kernel.and_then(|k| k.archs.get(&e.arch));
            let max_occupancy = e
                .max_occupancy
                .or_else(|| ka.and_then(|a| a.best.as_ref()).map(|b| b.block_size));
            let mut timings: Vec<(u32, f64)> = e
                .timings
                .iter()
                .map(|t| (t.block_size, t.median_us))
                .collect();
            timings.sort_by_key(|t| t.0);
            MeasuredRow {
                symbol: e.kernel.clone(),
                kernel: kernel.map_or(e.kernel.clone(), |k| k.base_name.clone()),
                source: e.source.clone(),
                arch: e.arch.clone(),
                bucket: e.bucket.clone(),
                device: e.device.clone(),
                compute_capability: e.compute_capability.clone(),
                sm_count: e.sm_count,
                baked: e.best,
                baked_us: e.time_at(e.best),
                max_occupancy,
                max_occupancy_us: max_occupancy.and_then(|b| e.time_at(b)),
                speedup: max_occupancy.and_then(|b| e.speedup_over(b)),
                stale: ka.is_some_and(|a| {
                    matches!(
                        e.staleness(a.cubin_hash.as_deref()),
                        Staleness::Stale { .. }
                    )
                }),
                timings,
            }
        })
        .collect()
}

/// A time in µs, or `-` where it was not measured.
pub fn us(t: Option<f64>) -> String {
    t.map_or("-".to_string(), |t| format!("{t:.2} us"))
}

/// A speed-up (`1.21x`), or `-`.
pub fn times(s: Option<f64>) -> String {
    s.map_or("-".to_string(), |s| format!("{s:.2}x"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::lock::Lock;
    use std::path::Path;

    /// example-app's lock, as a build from it assembles it.
    fn example() -> Manifest {
        let text = include_str!("../../../example-app/occ.lock");
        let lock = Lock::from_text(text, Path::new("occ.lock")).expect("example-app's lock");
        crate::assemble::lock_manifest(&lock, &[], Path::new("occ.lock")).expect("a manifest")
    }

    /// block_sum was measured on an H200: the fastest block, 32, is what
    /// `tuned` sites bake; the max-occupancy block the tuner recorded, 896,
    /// ran slower (the lock's timings give the ratio).
    #[test]
    fn each_measured_launch_shows_the_baked_and_the_max_occupancy_block_with_both_times() {
        let m = example();
        let rows = measured_rows(&m);
        assert_eq!(rows.len(), m.measured.len());
        let sum = rows
            .iter()
            .find(|r| r.kernel == "block_sum")
            .expect("block_sum measured");
        assert_eq!((sum.baked, sum.max_occupancy), (32, Some(896)));
        assert_eq!(sum.device, "NVIDIA H200");
        let entry = m
            .measured
            .iter()
            .find(|e| e.kernel == "block_sum")
            .expect("the lock's entry");
        assert_eq!(sum.baked_us, entry.time_at(32));
        assert_eq!(sum.max_occupancy_us, entry.time_at(896));
        let ratio = entry.time_at(896).expect("896 timed") / entry.time_at(32).expect("32 timed");
        assert!((sum.speedup.expect("a speed-up") - ratio).abs() < 1e-9);
        assert!(!sum.stale, "the lock's cubin is the one measured");
        let md = crate::render::markdown::measured(&rows, usize::MAX);
        assert!(
            md.contains("| `block_sum` | sm_90 | default | NVIDIA H200 (9.0, 132 SMs) | 32 | ")
                && md.contains(&format!(
                    "| 896 | {} | {} |",
                    us(sum.max_occupancy_us),
                    times(sum.speedup)
                )),
            "{md}"
        );
        // Bounded: the rows that do not fit are counted.
        let short = crate::render::markdown::measured(&rows, 400);
        assert!(
            short.len() < 500 && short.contains("more measured launches"),
            "{short}"
        );
        assert!(crate::render::markdown::measured(&[], usize::MAX).is_empty());
    }
}
