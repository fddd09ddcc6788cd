//! `example-app --tune`: times each launch site's candidate block sizes on
//! the GPU at hand, writes the results file that `cargo occ tune import`
//! merges into `occ.lock`, and prints measured against max-occupancy time
//! per kernel.
//!
//! The candidates are occ's ([`occ_model::model::suggest::candidates`] at the site's
//! policy, as `cargo occ tune --plan` prints them given the site's options),
//! less the block sizes a kernel is not written for ([`works_at`]). The timer is
//! [`occ::cuda::EventTimer`] (CUDA events around each launch, warm-up
//! first, the median of the runs); the selection is [`occ::tune::tune`]'s
//! (the fastest, ties to the larger block). Only a kernel whose cubin for
//! this GPU's own arch ran is recorded: the time of PTX the driver compiled
//! belongs to no cubin the lock could name, and a time of an older arch's
//! cubin would be baked for every GPU that runs it.

use crate::kernels;
use crate::launches::{Site, BLOCK_SUM, BLOCK_SUM_ITEMS, SITES};
use anyhow::{anyhow, bail, Context as _, Result};
use occ::cuda::cudarc::driver::sys::CUdevice_attribute;
use occ::cuda::{CudaContext, CudaSlice, CudaStream, EventTimer, Function, Loader};
use occ::select::How;
use occ::tune::{tune, Device, Measurement, Timer, TuneError, Tuned};
use occ::LaunchConfig;
use occ_model::schema::manifest::Manifest;
use std::cell::RefCell;
use std::fmt::Write as _;
use std::sync::Arc;

/// The bucket every site is measured in: the app has one problem size per
/// kernel (the one [`crate::gpu`] checks).
pub const BUCKET: &str = occ_model::schema::measured::DEFAULT_BUCKET;

/// Whether the kernel of `site` is written for blocks of `block_size`
/// threads: `row_softmax` syncs its named barriers for exactly 128.
pub fn works_at(site: &Site, block_size: u32) -> bool {
    match site.ident {
        "row_softmax" => block_size == 128,
        _ => true,
    }
}

/// The block sizes to time for `site` on `arch` and the max-occupancy
/// block (the model's pick, the baseline), from the build's manifest.
pub fn candidates(site: &Site, manifest: &Manifest, arch: &str) -> Result<(Vec<u32>, u32)> {
    let k = site.resources(manifest, arch)?;
    let spec = occ_model::model::arch::lookup(arch).map_err(|e| anyhow!("{}: {e}", site.ident))?;
    let res = occ_model::compiler::analyze::model_of(&k.facts);
    let all = occ_model::model::suggest::candidates(spec, &res, &site.request())
        .map_err(|e| anyhow!("{} on {arch}: {e}", site.ident))?;
    let sizes: Vec<u32> = all
        .iter()
        .map(|c| c.block_size)
        .filter(|b| works_at(site, *b))
        .collect();
    let best = site.plan(arch, k)?.block_size;
    if sizes.is_empty() {
        bail!("{} on {arch}: no block size to time", site.ident);
    }
    Ok((sizes, best))
}

/// One site timed.
#[derive(Debug, Clone)]
pub struct SiteTuning {
    /// The kernel's Rust identifier.
    pub ident: &'static str,
    /// What the results file records.
    pub measurement: Measurement,
    /// The max-occupancy block size on this arch.
    pub max_occupancy: u32,
}

/// Times every candidate of `site` on `arch` with `timer` through
/// `launch` and `reset` (the kernel's own on a GPU), as a measurement of
/// the manifest's cubin.
pub fn tune_site<T: Timer>(
    timer: &T,
    site: &Site,
    manifest: &Manifest,
    arch: &str,
    launch: impl FnMut(u32) -> Result<(), T::Error>,
    reset: impl FnMut() -> Result<(), T::Error>,
) -> Result<SiteTuning>
where
    T::Error: std::fmt::Display + std::fmt::Debug + Send + Sync + 'static,
{
    let (sizes, max_occupancy) = candidates(site, manifest, arch)?;
    let tuned: Tuned = tune(timer, &sizes, launch, reset).map_err(|e| match e {
        TuneError::Timer { block_size, error } => {
            anyhow!("{} at block {block_size}: {error}", site.ident)
        }
        other => anyhow!("{}: {other}", site.ident),
    })?;
    let kernel = manifest
        .kernels
        .iter()
        .find(|k| k.ident == site.ident)
        .ok_or_else(|| anyhow!("kernel `{}` is not in the manifest", site.ident))?;
    let k = site.resources(manifest, arch)?;
    Ok(SiteTuning {
        ident: site.ident,
        measurement: Measurement {
            kernel: kernel.name.clone(),
            source: kernel.source.clone(),
            arch: arch.to_string(),
            bucket: BUCKET.to_string(),
            cubin_hash: k.cubin_hash.clone().ok_or_else(|| {
                anyhow!(
                    "kernel `{}` has no cubin hash on {arch}: the build stood on occ.lock; \
                     build with nvcc to tune",
                    site.ident
                )
            })?,
            candidates_hash: occ_model::schema::measured::candidates_hash(&sizes),
            max_occupancy: Some(max_occupancy),
            tuned,
        },
        max_occupancy,
    })
}

/// The table: per kernel, the max-occupancy block and its time, the
/// fastest block and its time, the ratio, and every candidate's time.
pub fn table(device: &Device, tunings: &[SiteTuning]) -> String {
    let mut out = String::new();
    let (major, minor) = device.compute_capability;
    let _ = writeln!(
        out,
        "measured on {} (sm_{major}{minor}, {} SMs), median of the timed runs per launch",
        device.name, device.sm_count
    );
    let _ = writeln!(
        out,
        "{:<18} {:<6} {:>14} {:>10} {:>14} {:>10} {:>8}  every candidate (block: us)",
        "kernel", "arch", "max-occ block", "time us", "measured best", "time us", "ratio"
    );
    for t in tunings {
        let m = &t.measurement;
        let best = m.tuned.best;
        let at = |b: u32| m.tuned.time_at(b).unwrap_or(f64::NAN);
        let (base, fast) = (at(t.max_occupancy), at(best));
        let every: Vec<String> = m
            .tuned
            .timings
            .iter()
            .map(|t| {
                let noisy = if t.is_noisy(occ_model::schema::measured::NOISY) {
                    "~"
                } else {
                    ""
                };
                format!("{}: {noisy}{:.2}", t.block_size, t.median_us)
            })
            .collect();
        let _ = writeln!(
            out,
            "{:<18} {:<6} {:>14} {:>10.2} {:>14} {:>10.2} {:>7.2}x  {}",
            t.ident.trim_start_matches("linalg_"),
            m.arch,
            t.max_occupancy,
            base,
            best,
            fast,
            base / fast,
            every.join(", ")
        );
    }
    let _ = writeln!(
        out,
        "(ratio: max-occupancy time / measured best time; ~: runs spread more than {:.0} % of the median)",
        occ_model::schema::measured::NOISY * 100.0
    );
    out
}

/// The device's name, compute capability, SM count and clock.
pub fn device(ctx: &Arc<CudaContext>) -> Result<Device> {
    let attribute = |a: CUdevice_attribute| -> Result<u32> {
        let v = ctx
            .attribute(a)
            .with_context(|| format!("cuDeviceGetAttribute({a:?})"))?;
        u32::try_from(v).map_err(|_| anyhow!("cuDeviceGetAttribute({a:?}) gave {v}"))
    };
    let (major, minor) = ctx.compute_capability().context("cuDeviceGetAttribute")?;
    Ok(Device {
        name: ctx.name().unwrap_or_else(|_| "device 0".into()),
        compute_capability: (
            u32::try_from(major).context("compute capability")?,
            u32::try_from(minor).context("compute capability")?,
        ),
        sm_count: attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        clock_khz: attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE).ok(),
    })
}

/// Measures every site on the GPU of `ctx`, writes the results file to
/// `path` and returns the table.
pub fn run(ctx: &Arc<CudaContext>, manifest: &Manifest, path: &std::path::Path) -> Result<String> {
    let device = device(ctx)?;
    let stream = ctx.default_stream();
    let loader = Loader::new(ctx).context("reading the GPU's attributes")?;
    let timer = EventTimer::new(stream.clone()).with_runs(5, 30);
    let mut tunings = Vec::new();
    let mut notes = String::new();
    for site in SITES {
        let f = loader
            .load(site.kernel)
            .with_context(|| format!("{}: loading its device code", site.ident))?;
        if f.how() == How::Jit {
            let _ = writeln!(
                notes,
                "{}: not measured: no cubin of this GPU's arch in the build (the driver compiled {}'s PTX); add it to build.rs's archs",
                site.ident,
                f.arch().arch
            );
            continue;
        }
        let arch = f.arch().arch;
        let (major, minor) = device.compute_capability;
        if arch.trim_end_matches(['a', 'f']) != format!("sm_{major}{minor}") {
            // It runs, but a time of this GPU would be baked for every GPU
            // that runs the cubin.
            let _ = writeln!(
                notes,
                "{}: not measured: the build has no sm_{major}{minor} cubin (this GPU ran its {arch} one); add sm_{major}{minor} to build.rs's archs",
                site.ident
            );
            continue;
        }
        tunings.push(time_kernel(&timer, &stream, &f, &site, manifest, arch)?);
    }
    if tunings.is_empty() {
        bail!("nothing measured, so no results file:\n{notes}");
    }
    let json = occ::tune::results_json(
        &manifest.package,
        &device,
        &manifest.nvcc,
        &measurements(&tunings),
    );
    std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
    let mut out = table(&device, &tunings);
    out.push_str(&notes);
    let _ = writeln!(
        out,
        "wrote {}; `cargo occ tune import {}` (in example-app/) merges it into occ.lock",
        path.display(),
        path.display()
    );
    Ok(out)
}

/// The measurements of `tunings`, for the results file.
pub fn measurements(tunings: &[SiteTuning]) -> Vec<Measurement> {
    tunings.iter().map(|t| t.measurement.clone()).collect()
}

fn device_error(what: &'static str) -> impl Fn(occ::cuda::DriverError) -> occ::cuda::Error {
    move |error| occ::cuda::Error::Device { what, error }
}

fn upload(stream: &Arc<CudaStream>, n: usize, scale: f32) -> Result<CudaSlice<f32>> {
    let host: Vec<f32> = (0..n).map(|i| ((i % 97) as f32 - 48.0) * scale).collect();
    stream.clone_htod(&host).context("copying to the device")
}

fn blocks(n: usize, per_block: u32) -> u32 {
    occ::grid_for(n, per_block.max(1))
}

/// Times `site`'s kernel at each candidate on its own problem. Long
/// because it is one `match` arm per kernel of the demo, each that
/// kernel's inputs and timed launch.
fn time_kernel(
    timer: &EventTimer,
    stream: &Arc<CudaStream>,
    f: &Function,
    site: &Site,
    manifest: &Manifest,
    arch: &str,
) -> Result<SiteTuning> {
    // Every kernel is timed the same way; only its problem, its launch at
    // block size `b` and (for one that writes its input) its reset differ.
    macro_rules! time {
        ($launch:expr) => {
            time!($launch, || Ok(()))
        };
        ($launch:expr, $reset:expr) => {
            tune_site(timer, site, manifest, arch, $launch, $reset)
        };
    }
    match site.ident {
        "saxpy" => {
            // y = a x + y writes its input: each run starts from y0.
            let n = 1usize << 24;
            let (x, y0) = (upload(stream, n, 1e-2)?, upload(stream, n, 1e-3)?);
            let y = RefCell::new(stream.alloc_zeros::<f32>(n).context("alloc")?);
            time!(
                |b| {
                    let cfg = LaunchConfig::for_elements(n, b);
                    kernels::saxpy::launch(f, stream, cfg, 1.5, &x, &mut *y.borrow_mut(), n as i32)
                },
                || {
                    stream
                        .memcpy_dtod(&y0, &mut *y.borrow_mut())
                        .map_err(device_error("copying y back"))
                }
            )
        }
        "block_sum" => {
            // Each block sums ITEMS elements per thread.
            let n = 1usize << 24;
            let x = upload(stream, n, 1e-3)?;
            let (sizes, _) = candidates(site, manifest, arch)?;
            let smallest = sizes.iter().copied().min().unwrap_or(32);
            let mut out = stream
                .alloc_zeros::<f32>(blocks(n, smallest * BLOCK_SUM_ITEMS) as usize)
                .context("alloc")?;
            time!(|b| {
                let cfg = LaunchConfig::new(blocks(n, b * BLOCK_SUM_ITEMS), b)
                    .with_dynamic_smem(BLOCK_SUM.dynamic_smem(b));
                kernels::block_sum::launch(f, stream, cfg, &x, &mut out, n as i32)
            })
        }
        "linalg_transpose_float_32" => {
            // One 32 x 32 tile (of 8 planes) per block, 32 threads wide.
            let (rows, cols) = (4096usize, 4096usize);
            let x = upload(stream, 8 * rows * cols, 1.0)?;
            let mut out = stream
                .alloc_zeros::<f32>(8 * rows * cols)
                .context("alloc")?;
            let (r, c) = (rows as i32, cols as i32);
            time!(|b| {
                let cfg = LaunchConfig::new((blocks(cols, 32), blocks(rows, 32)), (32, b / 32));
                kernels::linalg_transpose_float_32::launch(f, stream, cfg, &x, &mut out, r, c)
            })
        }
        "row_softmax" => {
            // One block per row.
            let (rows, cols) = (16384usize, 1000usize);
            let x = upload(stream, rows * cols, 1e-2)?;
            let mut out = stream.alloc_zeros::<f32>(rows * cols).context("alloc")?;
            time!(|b| {
                let cfg = LaunchConfig::new(rows as u32, b);
                kernels::row_softmax::launch(f, stream, cfg, &x, &mut out, cols as i32)
            })
        }
        "nbody_forces" => {
            let n = 16384usize;
            let pos = upload(stream, 4 * n, 1e-2)?;
            let mut acc = stream.alloc_zeros::<f32>(3 * n).context("alloc")?;
            time!(|b| {
                let cfg = LaunchConfig::for_elements(n, b);
                kernels::nbody_forces::launch(f, stream, cfg, &pos, &mut acc, n as i32, 1e-2)
            })
        }
        other => bail!("no problem to time for kernel `{other}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use occ::tune::Recorded;

    /// A made-up cost per block size (not a measurement): fastest at 256.
    fn recorded(sizes: &[u32]) -> Recorded {
        Recorded::new(
            sizes
                .iter()
                .map(|&b| (b, 10.0 + (f64::from(b) - 256.0).abs() / 64.0)),
        )
    }

    #[test]
    fn every_site_has_candidates_with_its_baked_block_among_them_on_every_arch() {
        let m = crate::manifest().expect("manifest");
        for site in SITES {
            let baked = (site.baked)();
            for arch in &m.archs {
                let (sizes, best) = candidates(&site, &m, arch).expect("candidates");
                let row = baked.on(arch).expect("a baked row per arch");
                // A tuned site bakes a measured block, itself a candidate;
                // any other site the max-occupancy block.
                if !site.tuned {
                    assert_eq!(best, row.threads(), "{} on {arch}", site.ident);
                }
                assert!(sizes.contains(&best), "{} on {arch}: {sizes:?}", site.ident);
                assert!(
                    sizes.contains(&row.threads()),
                    "{} on {arch}: baked {} is no candidate of {sizes:?}",
                    site.ident,
                    row.threads()
                );
                assert!(sizes.iter().all(|b| works_at(&site, *b)));
                assert!(sizes.windows(2).all(|w| w[0] < w[1]), "{sizes:?}");
            }
        }
        let (sizes, _) = candidates(&crate::launches::ROW_SOFTMAX, &m, "sm_90").expect("softmax");
        assert_eq!(sizes, [128]);
    }

    #[test]
    fn the_results_file_is_one_cargo_occ_tune_import_reads() {
        let m = crate::manifest().expect("manifest");
        let mut tunings = Vec::new();
        for site in SITES {
            let (sizes, _) = candidates(&site, &m, "sm_90").expect("candidates");
            let mut launched = Vec::new();
            let t = tune_site(
                &recorded(&sizes),
                &site,
                &m,
                "sm_90",
                |b| {
                    launched.push(b);
                    Ok(())
                },
                || Ok(()),
            )
            .expect("tunes");
            assert_eq!(launched, sizes, "{}: every candidate once", site.ident);
            let want = *sizes
                .iter()
                .min_by(|a, b| {
                    (i64::from(**a) - 256)
                        .abs()
                        .cmp(&(i64::from(**b) - 256).abs())
                        .then(b.cmp(a))
                })
                .expect("a size");
            assert_eq!(t.measurement.tuned.best, want, "{}", site.ident);
            tunings.push(t);
        }
        let device = Device {
            name: "recorded".into(),
            compute_capability: (9, 0),
            sm_count: 132,
            clock_khz: None,
        };
        let json = occ::tune::results_json(&m.package, &device, &m.nvcc, &measurements(&tunings));
        let results =
            occ_model::schema::measured::Results::from_json(&json, std::path::Path::new("r.json"))
                .expect("cargo occ tune import reads it");
        results.validate().expect("valid");
        assert_eq!(results.measurements.len(), SITES.len());
        for (r, site) in results.measurements.iter().zip(SITES) {
            let k = site.resources(&m, "sm_90").expect("sm_90");
            assert!(k.cubin_hash.is_some());
            assert_eq!(Some(&r.cubin_hash), k.cubin_hash.as_ref(), "{}", site.ident);
            assert_eq!(r.bucket, BUCKET);
        }
        let text = table(&device, &tunings);
        assert_eq!(text.lines().count(), 2 + SITES.len() + 1, "{text}");
        assert!(text.contains("row_softmax"), "{text}");
    }
}
