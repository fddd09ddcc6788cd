//! On a GPU: load each kernel's device code, compare occ's numbers with the
//! driver's, run the kernel on real data and check it against the CPU.

use crate::kernels;
use crate::launches::{self, LaunchPlan, Site, SITES};
use anyhow::{anyhow, bail, Context as _, Result};
use occ::cuda::cudarc::driver::result::{self, function as cu_function, occupancy as cu_occupancy};
use occ::cuda::cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use occ::cuda::{CudaContext, CudaSlice, CudaStream, Function, Loader};
use occ::select::How;
use occ_model::model::occupancy::{occupancy, BlockLaunch};
use occ_model::schema::manifest::KernelArch;
use occ_model::schema::manifest::Manifest;
use std::fmt::Write as _;
use std::sync::Arc;

/// Why there is no GPU to check on: a normal outcome, not an error.
#[derive(Debug)]
pub struct NoGpu(pub String);

/// The first CUDA device, or why there is none.
pub fn open() -> std::result::Result<Arc<CudaContext>, NoGpu> {
    if !occ::cuda::driver_present() {
        return Err(NoGpu(
            "no CUDA driver library (libcuda.so) on this machine".into(),
        ));
    }
    result::init().map_err(|e| NoGpu(format!("cuInit failed: {e}")))?;
    match result::device::get_count() {
        Ok(0) => return Err(NoGpu("the CUDA driver sees no device".into())),
        Ok(_) => {}
        Err(e) => return Err(NoGpu(format!("cuDeviceGetCount failed: {e}"))),
    }
    CudaContext::new(0).map_err(|e| NoGpu(format!("cannot create a context on device 0: {e}")))
}

/// occ's number beside the driver's for one kernel.
#[derive(Debug, Default)]
struct Check {
    kernel: String,
    code: String,
    block: u32,
    source: &'static str,
    dyn_smem: u32,
    active_blocks_per_sm: (u32, u32),
    potential_block: (u32, u32),
    registers: (u32, u32),
    static_smem: (u32, u32),
    result: String,
    result_ok: bool,
    sweep: crate::sweep::Sweep,
}

impl Check {
    fn agrees(&self) -> bool {
        self.active_blocks_per_sm.0 == self.active_blocks_per_sm.1
            && self.potential_block.0 == self.potential_block.1
            && self.registers.0 == self.registers.1
            && self.sweep.disagreeing == 0
    }
}

extern "C" fn smem_none(_block: std::ffi::c_int) -> usize {
    0
}

extern "C" fn smem_block_sum(block: std::ffi::c_int) -> usize {
    usize::try_from(block).unwrap_or(0) * launches::BLOCK_SUM.smem_per_thread as usize
}

fn attr(f: &Function, a: CUfunction_attribute) -> Result<u32> {
    let v = f
        .attribute(a)
        .with_context(|| format!("cuFuncGetAttribute({a:?})"))?;
    u32::try_from(v).map_err(|_| anyhow!("cuFuncGetAttribute({a:?}) gave {v}"))
}

/// Runs the check on `ctx`; returns the report and whether everything agreed.
/// Long because it is the report, written in the order it is read.
pub fn check(ctx: &Arc<CudaContext>, manifest: &Manifest) -> Result<(String, bool)> {
    let (major, minor) = ctx.compute_capability().context("cuDeviceGetAttribute")?;
    let (major, minor) = (
        u32::try_from(major).context("compute capability")?,
        u32::try_from(minor).context("compute capability")?,
    );
    let arch = format!("sm_{major}{minor}");
    let spec = occ_model::model::arch::lookup(&arch).map_err(|e| anyhow!("{arch}: {e}"))?;
    let name = ctx.name().unwrap_or_else(|_| "device 0".into());
    let optin = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        .context("cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)")?;
    let stream = ctx.default_stream();
    let loader = Loader::new(ctx).context("reading the GPU's attributes")?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "GPU check on {name} ({arch}, opt-in smem per block {optin} B)"
    );
    let gpu = Gpu {
        loader: &loader,
        manifest,
        arch: &arch,
        spec,
        optin,
        stream: &stream,
    };
    let mut checks = Vec::new();
    for site in SITES {
        checks.push(check_site(&gpu, &site).unwrap_or_else(|e| Check {
            kernel: site.ident.trim_start_matches("linalg_").to_string(),
            result: format!("FAILED: {e:#}"),
            ..Check::default()
        }));
    }
    let pair = |p: (u32, u32)| {
        if p.0 == p.1 {
            format!("{}", p.0)
        } else {
            format!("{} != {}", p.0, p.1)
        }
    };
    let _ = writeln!(
        out,
        "{:<18} {:<16} {:>11} {:>7} {:>12} {:>12} {:>10} {:>14}  result",
        "kernel", "code", "block", "dyn", "blk/SM", "best block", "regs", "smem ptxas/drv"
    );
    let mut ok = true;
    for c in &checks {
        ok &= c.agrees() && c.result_ok;
        let _ = writeln!(
            out,
            "{:<18} {:<16} {:>11} {:>7} {:>12} {:>12} {:>10} {:>14}  {}",
            c.kernel,
            c.code,
            format!("{} {}", c.block, c.source),
            c.dyn_smem,
            pair(c.active_blocks_per_sm),
            pair(c.potential_block),
            pair(c.registers),
            format!("{}/{}", c.static_smem.0, c.static_smem.1),
            c.result
        );
    }
    let _ = writeln!(
        out,
        "(occ != driver where they differ. block: launched, as #[launch_config] baked it (the model's, or measured on a GPU at a `tuned` site; the model's for JIT code); blk/SM: cuOccupancyMaxActiveBlocksPerMultiprocessor at that block and dynamic smem; best block: cuOccupancyMaxPotentialBlockSize with the same smem per thread and cap; regs: CU_FUNC_ATTRIBUTE_NUM_REGS; smem: static, ptxas / CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)"
    );
    let extra: Vec<String> = checks
        .iter()
        .filter(|c| c.static_smem.0 != c.static_smem.1)
        .map(|c| {
            format!(
                "{} +{}",
                c.kernel,
                i64::from(c.static_smem.1) - i64::from(c.static_smem.0)
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "static smem, driver SHARED_SIZE_BYTES vs ptxas on {arch}: {}",
        if extra.is_empty() {
            "equal for every kernel".to_string()
        } else {
            extra.join(", ")
        }
    );
    let queries: usize = checks.iter().map(|c| c.sweep.queries).sum();
    let disagreeing: usize = checks.iter().map(|c| c.sweep.disagreeing).sum();
    let twice: usize = checks.iter().map(|c| c.sweep.twice_would_differ).sum();
    let _ = writeln!(
        out,
        "driver sweep on {arch}: {queries} launches (every block size a multiple of the warp and a few more, dynamic smem on both sides of every blocks-per-SM step of every carveout, 8 preferred carveouts): {}",
        if disagreeing == 0 {
            "cuOccupancyMaxActiveBlocksPerMultiprocessor agrees at every one".to_string()
        } else {
            format!("{disagreeing} disagree")
        }
    );
    for c in &checks {
        for d in &c.sweep.disagreements {
            let _ = writeln!(out, "  {}: {d}", c.kernel);
        }
    }
    let _ = writeln!(
        out,
        "a model counting the reserved {} B per block on top of SHARED_SIZE_BYTES would disagree with the driver at {twice} of them",
        spec.reserved_smem_per_block
    );
    let _ = writeln!(
        out,
        "{}",
        if ok {
            "GPU check passed: occ agrees with the driver and every kernel matches the CPU"
        } else {
            "GPU check FAILED: see the rows marked != or FAILED above"
        }
    );
    Ok((out, ok))
}

/// What every site's check needs of the GPU.
struct Gpu<'a> {
    loader: &'a Loader,
    manifest: &'a Manifest,
    arch: &'a str,
    spec: &'static occ_model::model::arch::Arch,
    optin: i32,
    stream: &'a Arc<CudaStream>,
}

/// Loads one kernel, compares occ with the driver, runs it. Long because
/// each comparison is one short block with its own message, in the order
/// the report prints them.
fn check_site(gpu: &Gpu<'_>, site: &Site) -> Result<Check> {
    let Gpu {
        loader,
        manifest,
        spec,
        optin,
        stream,
        ..
    } = *gpu;
    let arch = gpu.arch;
    // The newest cubin that runs here, else the PTX through the driver's
    // JIT: occ's one rule, the same one `LAUNCH.for_function` follows.
    let f = loader.load(site.kernel).with_context(|| {
        format!(
            "{}: loading its device code (the cubins and PTX come from nvcc 13.5: the driver must support CUDA 13.x)",
            site.ident
        )
    })?;
    let built = f.arch().arch;
    let code = match f.how() {
        How::Sass => format!("{built} cubin"),
        How::Jit => format!("{built} PTX (JIT)"),
    };
    let regs = attr(&f, CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS)?;
    let smem = attr(
        &f,
        CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
    )?;
    // occ's model gives a kernel the opt-in maximum of dynamic shared
    // memory (as cudaFuncSetAttribute would); tell the driver the same
    // before asking it, so that both answer the same question.
    let max_dyn = u32::try_from(optin).unwrap_or(0).saturating_sub(smem);
    // SAFETY: `f` is a loaded function of the current context.
    unsafe {
        cu_function::set_function_attribute(
            f.raw(),
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            i32::try_from(max_dyn).unwrap_or(i32::MAX),
        )
    }
    .with_context(|| {
        format!(
            "{}: cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
            site.ident
        )
    })?;
    // The launch: what `#[launch_config]` baked for the code that was loaded.
    let row = (site.baked)()
        .for_function(&f)
        .with_context(|| format!("{}: the baked launch", site.ident))?;
    let mut k: KernelArch = site.resources(manifest, built)?.clone();
    if f.how() == How::Jit {
        k.facts.registers = regs;
    }
    let plan: LaunchPlan = site.plan(arch, &k)?;
    let launch = (row.threads(), row.dynamic_smem);
    let resources = occ_model::compiler::analyze::model_of(&k.facts);
    // Our blocks per SM at that launch, on this arch.
    let ours = occupancy(
        spec,
        &resources,
        &BlockLaunch {
            dynamic_smem: launch.1,
            ..BlockLaunch::new(launch.0)
        },
    )
    .map_err(|e| anyhow!("{} on {arch}: {e}", site.ident))?;
    let as_int = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
    // SAFETY: `f` is a loaded function of the current context.
    let drv_blocks = unsafe {
        cu_occupancy::max_active_block_per_multiprocessor(
            f.raw(),
            as_int(launch.0),
            launch.1 as usize,
        )
    }
    .context("cuOccupancyMaxActiveBlocksPerMultiprocessor")?;
    let callback = if site.smem_per_thread == 0 {
        smem_none
    } else {
        smem_block_sum
    };
    // SAFETY: as above; the callback is the site's smem rule.
    let (_, drv_block) = unsafe {
        cu_occupancy::max_potential_block_size(
            f.raw(),
            Some(callback),
            0,
            as_int(site.max_block_size.unwrap_or(0)),
        )
    }
    .context("cuOccupancyMaxPotentialBlockSize")?;
    let sweep = crate::sweep::run(&f, spec, &resources, max_dyn)
        .with_context(|| format!("{}: the driver sweep", site.ident))?;
    let (result, result_ok) = match run(stream, &f, site, row) {
        Ok(detail) => (detail, true),
        Err(e) => (format!("FAILED: {e:#}"), false),
    };
    Ok(Check {
        kernel: site.ident.trim_start_matches("linalg_").to_string(),
        code,
        block: launch.0,
        source: if site.tuned && measured_here(manifest, site.ident, built) {
            "measured"
        } else if row.block.1 > 1 {
            "baked 2-D"
        } else {
            "baked"
        },
        dyn_smem: launch.1,
        active_blocks_per_sm: (
            ours.active_blocks_per_sm,
            u32::try_from(drv_blocks).unwrap_or(0),
        ),
        potential_block: (plan.block_size, u32::try_from(drv_block).unwrap_or(0)),
        registers: (k.facts.registers, regs),
        static_smem: (k.facts.static_smem, smem),
        result,
        result_ok,
        sweep,
    })
}

/// Whether the build holds a measured launch of the kernel `ident` on
/// `arch` (occ.lock's `measured`, default bucket), which a `tuned` site
/// bakes.
fn measured_here(manifest: &Manifest, ident: &str, arch: &str) -> bool {
    manifest
        .kernels
        .iter()
        .filter(|kernel| kernel.ident == ident)
        .any(|kernel| {
            let key = (
                kernel.name.as_str(),
                kernel.source.as_str(),
                arch,
                occ_model::schema::measured::DEFAULT_BUCKET,
            );
            manifest.measured.iter().any(|m| m.key() == key)
        })
}

/// A small deterministic generator for test data.
struct Rng(u64);

impl Rng {
    fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32) / ((1u64 << 24) as f32) * 2.0 - 1.0
    }

    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next_f32()).collect()
    }
}

fn upload(stream: &Arc<CudaStream>, v: &[f32]) -> Result<CudaSlice<f32>> {
    stream.clone_htod(v).context("copying to the device")
}

fn download(stream: &Arc<CudaStream>, v: &CudaSlice<f32>) -> Result<Vec<f32>> {
    let host = stream.clone_dtoh(v).context("copying from the device")?;
    stream
        .synchronize()
        .context("the kernel failed (cuStreamSynchronize)")?;
    Ok(host)
}

/// The largest error of `got` against `want`, each relative to its `scale`
/// (the sum of the magnitudes that made it, so cancellation does not count).
fn max_err(got: &[f32], want: &[f64], scale: &[f64]) -> Result<f64> {
    if got.len() != want.len() || scale.len() != want.len() {
        bail!("{} results, expected {}", got.len(), want.len());
    }
    let mut worst = 0.0f64;
    for ((g, w), s) in got.iter().zip(want).zip(scale) {
        let e = (f64::from(*g) - w).abs() / s.max(1e-30);
        if e.is_nan() {
            return Ok(f64::INFINITY);
        }
        worst = worst.max(e);
    }
    Ok(worst)
}

fn verdict(err: f64, tol: f64) -> Result<String> {
    if err <= tol {
        Ok(format!("ok (max rel err {err:.1e})"))
    } else {
        bail!("max rel err {err:.1e} > {tol:.0e}")
    }
}

fn grid(n: usize, per_block: usize) -> Result<u32> {
    u32::try_from(n.div_ceil(per_block)).context("grid too large")
}

/// Runs one kernel at its launch and checks it against the CPU.
/// Every launch goes through the kernel's typed launcher (`kernels::<kernel>::launch`):
/// its arguments are checked against the kernel's parameter list by rustc.
/// Long because it is one `match` arm per kernel of the demo: each arm is
/// that kernel's inputs, launch and CPU reference, read side by side.
fn run(
    stream: &Arc<CudaStream>,
    f: &Function,
    site: &Site,
    row: &occ::BakedArch,
) -> Result<String> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let block = row.threads();
    let b = block as usize;
    match site.ident {
        "saxpy" => {
            let n = 1usize << 22;
            let (a, x, y) = (1.5f32, rng.vec(n), rng.vec(n));
            let dx = upload(stream, &x)?;
            let mut dy = upload(stream, &y)?;
            kernels::saxpy::launch(f, stream, row.for_elements(n), a, &dx, &mut dy, n as i32)
                .context("launch")?;
            let got = download(stream, &dy)?;
            let a64 = f64::from(a);
            let terms = |(x, y): (&f32, &f32)| (a64 * f64::from(*x), f64::from(*y));
            let want: Vec<f64> = x.iter().zip(&y).map(terms).map(|(p, q)| p + q).collect();
            let scale: Vec<f64> = x
                .iter()
                .zip(&y)
                .map(terms)
                .map(|(p, q)| p.abs() + q.abs())
                .collect();
            verdict(max_err(&got, &want, &scale)?, 1e-6)
        }
        "block_sum" => {
            let n = (1usize << 22) + 12345;
            let x = rng.vec(n);
            let per_block = b * launches::BLOCK_SUM_ITEMS as usize;
            let blocks = grid(n, per_block)?;
            let dx = upload(stream, &x)?;
            let mut dout = stream
                .alloc_zeros::<f32>(blocks as usize)
                .context("alloc")?;
            // ITEMS * 4 * block bytes of dynamic smem: the baked row's.
            let cfg = row.config((blocks, 1, 1));
            kernels::block_sum::launch(f, stream, cfg, &dx, &mut dout, i32::try_from(n)?)
                .context("launch")?;
            let got = download(stream, &dout)?;
            let want: Vec<f64> = x
                .chunks(per_block)
                .map(|c| c.iter().map(|v| f64::from(*v)).sum())
                .collect();
            let scale: Vec<f64> = x
                .chunks(per_block)
                .map(|c| c.iter().map(|v| f64::from(v.abs())).sum())
                .collect();
            verdict(max_err(&got, &want, &scale)?, 1e-5)
        }
        "linalg_transpose_float_32" => {
            const TILE: u32 = 32;
            const PLANES: usize = 8;
            if row.block.0 != TILE {
                bail!("block {:?} is not {TILE} threads wide", row.block);
            }
            let (rows, cols) = (1000usize, 1500usize);
            let x = rng.vec(PLANES * rows * cols);
            let dx = upload(stream, &x)?;
            let mut dout = stream.alloc_zeros::<f32>(x.len()).context("alloc")?;
            // One 32 x 32 tile per block (x: columns, y: rows), PLANES planes.
            let cfg = row.config((grid(cols, TILE as usize)?, grid(rows, TILE as usize)?, 1));
            kernels::linalg_transpose_float_32::launch(
                f,
                stream,
                cfg,
                &dx,
                &mut dout,
                rows as i32,
                cols as i32,
            )
            .context("launch")?;
            let got = download(stream, &dout)?;
            let mut want = vec![0.0f64; x.len()];
            for p in 0..PLANES {
                for r in 0..rows {
                    for c in 0..cols {
                        want[p * rows * cols + c * rows + r] =
                            f64::from(x[p * rows * cols + r * cols + c]);
                    }
                }
            }
            verdict(max_err(&got, &want, &vec![1.0; want.len()])?, 0.0)
        }
        "row_softmax" => {
            if block != 128 {
                bail!("row_softmax is written for 128 threads, the launch has {block}");
            }
            let (rows, cols) = (2048usize, 1000usize);
            let x: Vec<f32> = rng.vec(rows * cols).iter().map(|v| v * 8.0).collect();
            let dx = upload(stream, &x)?;
            let mut dout = stream.alloc_zeros::<f32>(x.len()).context("alloc")?;
            // One block per row.
            let cfg = row.config((rows as u32, 1, 1));
            kernels::row_softmax::launch(f, stream, cfg, &dx, &mut dout, cols as i32)
                .context("launch")?;
            let got = download(stream, &dout)?;
            let mut want = Vec::with_capacity(x.len());
            for row in x.chunks(cols) {
                let m = row.iter().fold(f64::MIN, |m, v| m.max(f64::from(*v)));
                let s: f64 = row.iter().map(|v| (f64::from(*v) - m).exp()).sum();
                want.extend(row.iter().map(|v| (f64::from(*v) - m).exp() / s));
            }
            let scale: Vec<f64> = want.iter().map(|w| w.max(1e-3)).collect();
            verdict(max_err(&got, &want, &scale)?, 1e-3)
        }
        "nbody_forces" => {
            let n = 4096usize;
            let soft = 1e-2f32;
            let mut pos = rng.vec(4 * n);
            for w in pos.chunks_mut(4) {
                w[3] = w[3].abs() + 0.1;
            }
            let dpos = upload(stream, &pos)?;
            let mut dacc = stream.alloc_zeros::<f32>(3 * n).context("alloc")?;
            // float4 positions and float3 accelerations, as f32 buffers.
            let cfg = row.for_elements(n);
            kernels::nbody_forces::launch(f, stream, cfg, &dpos, &mut dacc, n as i32, soft)
                .context("launch")?;
            let got = download(stream, &dacc)?;
            let mut want = vec![0.0f64; 3 * n];
            let mut scale = vec![0.0f64; 3 * n];
            for i in 0..n {
                let p = &pos[4 * i..4 * i + 4];
                for j in 0..n {
                    let q = &pos[4 * j..4 * j + 4];
                    let d = [q[0] - p[0], q[1] - p[1], q[2] - p[2]].map(f64::from);
                    let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + f64::from(soft);
                    let s = f64::from(q[3]) / (r2 * r2.sqrt());
                    for c in 0..3 {
                        want[3 * i + c] += d[c] * s;
                        scale[3 * i + c] += (d[c] * s).abs();
                    }
                }
            }
            verdict(max_err(&got, &want, &scale)?, 5e-4)
        }
        other => bail!("no test data for kernel `{other}`"),
    }
}
