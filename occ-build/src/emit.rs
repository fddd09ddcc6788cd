//! Stage 7: writes what a build made into `$OUT_DIR/occ`: `manifest.json`
//! and `kernels.rs` (the device code files are placed by the nvcc jobs and
//! `embed`), and removes the files of jobs this build no longer has.
//!
//! `kernels.rs` is data, not a forest of modules: one static table of
//! kernels (names, source, per-arch resources and best launch, a reference
//! to the device-code blob that holds it), a table of blobs, `get(name)`
//! for run-time lookup, and one small module per kernel (`KERNEL`, a
//! reference into the table) for compile-time use. It is written as text,
//! one line per kernel × arch: quoting and pretty-printing a file of
//! several MB costs seconds at a build script's opt-level 0, and this text
//! is already formatted. Sorted, free of absolute paths and timestamps,
//! and written only when it changes.

use crate::compile::write_atomic;
use crate::error::Result;
use crate::manifest::{self, KernelArch, Manifest, Origin};
use crate::manifest::{DeviceCode, Embed};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The generated Rust file's name inside `$OUT_DIR/occ`.
pub const KERNELS_RS: &str = "kernels.rs";

/// Reads and parses a manifest file (`$OUT_DIR/occ/manifest.json`).
pub fn read_manifest(path: &Path) -> Result<Manifest> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| crate::Error::io(format!("cannot read {}", path.display()), e))?;
    Ok(Manifest::from_json(&text, path)?)
}

/// Writes `manifest.json` and `kernels.rs`.
pub fn write_all(manifest: &Manifest, out: &Path) -> Result<()> {
    write_atomic(&out.join(KERNELS_RS), kernels_rs(manifest).as_bytes())?;
    // The manifest goes last: its presence means the rest is complete.
    write_atomic(
        &out.join(manifest::FILE_NAME),
        manifest.to_json().as_bytes(),
    )
}

/// Removes from `out` (`$OUT_DIR/occ`) the device code files and cache
/// records of jobs this build does not have: the files of an arch or a
/// source dropped from the build, which would otherwise stay forever.
/// `jobs` are this build's job names (`kernels_a.sm_80`), `blobs` its
/// embedded files.
/// Only the files of `part` ([`crate::parts::owns`]) are considered.
pub(crate) fn remove_stale(out: &Path, part: &str, jobs: &[&str], blobs: &[DeviceCode]) {
    let keep = |stem: &str| {
        !crate::parts::owns(part, stem)
            || jobs.contains(&stem)
            || blobs.iter().any(|b| b.file == stem)
    };
    let listing = |dir: &Path| -> Vec<(std::path::PathBuf, String)> {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                    .map(|e| (e.path(), e.file_name().to_string_lossy().into_owned()))
                    .collect()
            })
            .unwrap_or_default()
    };
    for (path, name) in listing(out) {
        let stem = [".cubin", ".ptx"]
            .iter()
            .find_map(|ext| name.strip_suffix(ext));
        let stale = match stem {
            Some(stem) => !keep(stem),
            None => name.ends_with(".fatbin") && !keep(&name),
        };
        if stale {
            let _ = std::fs::remove_file(path);
        }
    }
    for (path, name) in listing(&out.join("cache")) {
        // `<job>.json`, `<job>.lock`, `<file>.fatbin.json`; not toolkit.json.
        let stem = name
            .strip_suffix(".json")
            .or_else(|| name.strip_suffix(".lock"));
        if let Some(stem) = stem {
            if stem != "toolkit" && !keep(stem) {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// The items `kernels.rs` defines before its tables: the types the tables
/// are made of and the lookup. Plain Rust with no dependency, so the file
/// compiles in any crate.
const PRELUDE: &str = r#"/// How a blob of device code is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)]
pub enum CodeKind {
    /// A fatbin: SASS for each arch of the build and the PTX of the newest
    /// (load it with `cuModuleLoadData`; the driver picks what runs).
    Fatbin,
    /// A cubin for one arch.
    Cubin,
    /// PTX for one arch, JIT-compiled by the driver.
    Ptx,
}

/// One blob of embedded device code: a `.cu` file's fatbin, or its cubin
/// or PTX for one arch.
#[derive(Debug, Clone, Copy)]
#[allow(dead_code)]
pub struct DeviceCode {
    /// The `.cu` file, relative to the crate.
    pub source: &'static str,
    /// What the bytes are.
    pub kind: CodeKind,
    /// The arch of a cubin or PTX; `None` for a fatbin.
    pub arch: Option<&'static str>,
    /// The bytes (empty when the build stood on occ.lock: `HAS_DEVICE_CODE`).
    pub bytes: &'static [u8],
}

#[allow(dead_code)]
impl DeviceCode {
    /// The text of a PTX blob (`None` for a fatbin or cubin).
    pub fn ptx(&self) -> Option<&'static str> {
        match self.kind {
            CodeKind::Ptx => core::str::from_utf8(self.bytes).ok(),
            _ => None,
        }
    }
}

/// The launch a kernel is written for (build.rs `.launch()`,
/// `__launch_bounds__` or `.reqntid`) and its occupancy there.
#[derive(Debug, Clone, Copy)]
#[allow(dead_code)]
pub struct DeclaredLaunch {
    /// Threads per block in x, y, z.
    pub block: [u32; 3],
    /// Dynamic shared memory per block at that launch, bytes.
    pub dynamic_smem_bytes: u32,
    /// Resident blocks per SM.
    pub blocks_per_sm: u32,
    /// Occupancy, 0..=1.
    pub occupancy: f32,
}

/// A kernel's resources and best launch on one arch, as ptxas reported them
/// and as `cuda_occupancy.h` computes them.
#[derive(Debug, Clone, Copy)]
#[allow(dead_code)]
pub struct KernelArch {
    /// The arch (`sm_80`).
    pub arch: &'static str,
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block, bytes.
    pub static_smem_bytes: u32,
    /// Stack frame, bytes.
    pub stack_frame_bytes: u32,
    /// Spill stores, bytes.
    pub spill_stores_bytes: u32,
    /// Spill loads, bytes.
    pub spill_loads_bytes: u32,
    /// Named barriers, when ptxas reported them.
    pub barriers: Option<u32>,
    /// `__launch_bounds__` maximum threads per block.
    pub max_threads_per_block: Option<u32>,
    /// `__launch_bounds__` minimum blocks per SM.
    pub min_blocks_per_sm: Option<u32>,
    /// `__maxnreg__` register cap.
    pub max_registers: Option<u32>,
    /// `__cluster_dims__` (x, y, z).
    pub cluster_dims: Option<[u32; 3]>,
    /// The block size with the highest occupancy (no dynamic smem).
    pub best_block_size: u32,
    /// Resident blocks per SM at `best_block_size`.
    pub blocks_per_sm: u32,
    /// Resident warps per SM at `best_block_size`.
    pub warps_per_sm: u32,
    /// Occupancy at `best_block_size`, 0..=1.
    pub occupancy: f32,
    /// What limits occupancy there.
    pub limiters: &'static [&'static str],
    /// Dynamic shared memory a block can still take at that occupancy, bytes.
    pub dynamic_smem_headroom_bytes: u32,
    /// The launch the kernel is written for, when one is declared.
    pub declared: Option<DeclaredLaunch>,
    /// The embedded device code that holds this kernel for this arch
    /// (`None` when the build embeds nothing).
    pub code: Option<&'static DeviceCode>,
}

/// One `__global__` function and its numbers on each arch it was built for.
#[derive(Debug, Clone, Copy)]
#[allow(dead_code)]
pub struct Kernel {
    /// The symbol to load (`cuModuleGetFunction`).
    pub name: &'static str,
    /// The demangled name.
    pub demangled: &'static str,
    /// The name without its parameter list.
    pub base_name: &'static str,
    /// The Rust identifier (`kernels::<ident>::KERNEL`).
    pub ident: &'static str,
    /// The `.cu` file, relative to the crate.
    pub source: &'static str,
    /// Per arch, in build order; an arch the kernel was not compiled for
    /// (an `#if __CUDA_ARCH__` around it) is absent.
    pub archs: &'static [KernelArch],
}

#[allow(dead_code)]
impl Kernel {
    /// The kernel's numbers on `arch` (`"sm_80"`), if it was built there.
    pub fn on(&self, arch: &str) -> Option<&'static KernelArch> {
        self.archs.iter().find(|a| a.arch == arch)
    }
}

/// The kernel named `name`: its symbol, else its base name or Rust
/// identifier, when one kernel has it (`None` when none does, or several:
/// the same `extern "C"` name in two files; name those by
/// `<ident>::KERNEL`).
#[allow(dead_code)]
pub fn get(name: &str) -> Option<&'static Kernel> {
    let i = KERNELS.partition_point(|k| k.name < name);
    let is = |j: usize| KERNELS.get(j).is_some_and(|k| k.name == name);
    if is(i) {
        return if is(i + 1) { None } else { Some(&KERNELS[i]) };
    }
    let mut found = KERNELS.iter().filter(|k| k.base_name == name || k.ident == name);
    match (found.next(), found.next()) {
        (Some(k), None) => Some(k),
        _ => None,
    }
}
"#;

/// The text of `kernels.rs`.
pub fn kernels_rs(manifest: &Manifest) -> String {
    let mut out = String::with_capacity(4096 + manifest.kernels.len() * 600);
    out.push_str("// @generated by occ-build. Do not edit.\n");
    out.push_str("// Include with: include!(concat!(env!(\"OUT_DIR\"), \"/occ/kernels.rs\"));\n\n");
    let archs: Vec<String> = manifest.archs.iter().map(|a| lit(a)).collect();
    let has_device_code =
        manifest.origin == Origin::Nvcc && manifest.device_code.iter().any(|d| !d.file.is_empty());
    let _ = writeln!(
        out,
        "/// Target archs in build order; the first is the default.\n#[allow(dead_code)]\npub const ARCHS: &[&str] = &[{}];\n",
        archs.join(", ")
    );
    let _ = writeln!(
        out,
        "/// Whether this build has device code: `false` when it stood on occ.lock\n\
         /// because there was no nvcc (docs.rs, `OCC_NO_NVCC=1`), or embeds nothing;\n\
         /// then every blob's `bytes` is empty and the numbers are the lock's.\n\
         #[allow(dead_code)]\npub const HAS_DEVICE_CODE: bool = {has_device_code};\n"
    );
    out.push_str(PRELUDE);
    // The blobs, and where each (source, arch) finds its own.
    let mut blob_of: BTreeMap<(&str, Option<&str>), usize> = BTreeMap::new();
    // An array static, which the table's rows point into: rows that index a
    // slice static (`&DEVICE_CODE[i]`) make rustc's const evaluation walk the
    // blobs once per kernel × arch (94 s instead of 6.6 s of rustc for 2000
    // kernels × 3 archs, BENCHMARKS.md item 8).
    let _ = writeln!(
        out,
        "\n#[allow(dead_code)]\nstatic DEVICE_CODE_ARRAY: [DeviceCode; {}] = [",
        manifest.device_code.len()
    );
    for (i, blob) in manifest.device_code.iter().enumerate() {
        blob_of.insert((blob.source.as_str(), blob.arch.as_deref()), i);
        let _ = writeln!(out, "    {},", device_code(blob));
    }
    out.push_str("];\n\n/// The embedded device code, sorted by source, then arch.\n#[allow(dead_code)]\npub static DEVICE_CODE: &[DeviceCode] = &DEVICE_CODE_ARRAY;\n");
    out.push_str("\n/// Every kernel, sorted by symbol (`get` looks them up).\n#[allow(dead_code)]\npub static KERNELS: &[Kernel] = &[\n");
    for kernel in &manifest.kernels {
        let _ = writeln!(
            out,
            "    Kernel {{\n        name: {},\n        demangled: {},\n        base_name: {},\n        ident: {},\n        source: {},\n        archs: &[",
            lit(&kernel.name),
            lit(&kernel.demangled),
            lit(&kernel.base_name),
            lit(&kernel.ident),
            lit(&kernel.source)
        );
        // Build order, as `ARCHS`.
        let mut archs: Vec<(&String, &KernelArch)> = kernel.archs.iter().collect();
        archs.sort_by_key(|(a, _)| manifest.archs.iter().position(|m| m == *a));
        for (arch, k) in archs {
            let blob = blob_of
                .get(&(kernel.source.as_str(), Some(arch.as_str())))
                .or_else(|| blob_of.get(&(kernel.source.as_str(), None)));
            let _ = writeln!(out, "            {},", kernel_arch(arch, k, blob.copied()));
        }
        out.push_str("        ],\n    },\n");
    }
    out.push_str("];\n");
    for (i, kernel) in manifest.kernels.iter().enumerate() {
        let _ = writeln!(
            out,
            "\n/// `{}` from `{}`.\n#[allow(dead_code)]\npub mod {} {{\n    /// This kernel's entry in [`KERNELS`](super::KERNELS).\n    pub const KERNEL: &super::Kernel = &super::KERNELS[{i}];\n}}",
            kernel.base_name.replace('`', "'"),
            kernel.source.replace('`', "'"),
            kernel.ident
        );
    }
    out
}

/// A Rust string literal for `s` (`{:?}` escapes quotes, backslashes and
/// control characters the way Rust source reads them).
fn lit(s: &str) -> String {
    format!("{s:?}")
}

fn opt(v: Option<u32>) -> String {
    match v {
        Some(v) => format!("Some({v})"),
        None => "None".into(),
    }
}

fn device_code(blob: &DeviceCode) -> String {
    let kind = match blob.kind {
        Embed::Fatbin | Embed::Nothing => "Fatbin",
        Embed::Cubin => "Cubin",
        Embed::Ptx => "Ptx",
    };
    let arch = match &blob.arch {
        Some(a) => format!("Some({})", lit(a)),
        None => "None".into(),
    };
    let bytes = if blob.file.is_empty() {
        "&[]".to_string()
    } else {
        format!(
            "include_bytes!(concat!(env!(\"OUT_DIR\"), {}))",
            lit(&format!("/occ/{}", blob.file))
        )
    };
    format!(
        "DeviceCode {{ source: {}, kind: CodeKind::{kind}, arch: {arch}, bytes: {bytes} }}",
        lit(&blob.source)
    )
}

fn kernel_arch(arch: &str, k: &KernelArch, blob: Option<usize>) -> String {
    let lb = &k.launch_bounds;
    let cluster = match lb.cluster_dims {
        Some([x, y, z]) => format!("Some([{x}, {y}, {z}])"),
        None => "None".into(),
    };
    let limiters: Vec<String> = k.best.limiters.iter().map(|l| lit(l)).collect();
    let code = match blob {
        Some(i) => format!("Some(&DEVICE_CODE_ARRAY[{i}])"),
        None => "None".into(),
    };
    let declared = match &k.declared {
        Some(d) => {
            let [x, y, z] = d.launch.block;
            format!(
                "Some(DeclaredLaunch {{ block: [{x}, {y}, {z}], dynamic_smem_bytes: {}, blocks_per_sm: {}, occupancy: {:?} }})",
                d.dynamic_smem, d.active_blocks_per_sm, d.occupancy as f32
            )
        }
        None => "None".into(),
    };
    format!(
        "KernelArch {{ arch: {}, registers: {}, static_smem_bytes: {}, stack_frame_bytes: {}, \
         spill_stores_bytes: {}, spill_loads_bytes: {}, barriers: {}, max_threads_per_block: {}, \
         min_blocks_per_sm: {}, max_registers: {}, cluster_dims: {cluster}, best_block_size: {}, \
         blocks_per_sm: {}, warps_per_sm: {}, occupancy: {:?}, limiters: &[{}], \
         dynamic_smem_headroom_bytes: {}, declared: {declared}, code: {code} }}",
        lit(arch),
        k.registers,
        k.static_smem,
        k.stack_frame,
        k.spill_stores,
        k.spill_loads,
        opt(k.barriers),
        opt(lb.max_threads_per_block()),
        opt(lb.min_blocks_per_sm),
        opt(lb.max_registers),
        k.best.block_size,
        k.best.active_blocks_per_sm,
        k.best.active_warps_per_sm,
        k.best.occupancy as f32,
        limiters.join(", "),
        k.best.dynamic_smem_headroom,
    )
}
