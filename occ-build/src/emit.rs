//! Stage 7: writes what a build made into `$OUT_DIR/occ`: `manifest.json`,
//! `kernels.rs` and `device_code.rs` (the device code files are placed by
//! the nvcc jobs and `embed`), and removes the files of jobs this build no
//! longer has.
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
//!
//! `device_code.rs`, which `kernels.rs` includes, holds the blobs' table
//! (`DEVICE_CODE_ARRAY`): each blob by `occ::__device_code!`, which on
//! Linux assembles the file into the crate's object code (`global_asm!`
//! with `.incbin`) instead of making its bytes a `static`'s value, which
//! rustc would also copy into the rlib's metadata (`include_bytes!`: an
//! rlib of twice the code). The symbol and length it names change with
//! the bytes, so that rustc's incremental cache and cargo see a new blob
//! (the assembler's read of the file is tracked by neither); that is why
//! they live in a file of their own, the same in two folders exactly when
//! the device code is, and `kernels.rs` stays the same in any folder. The
//! symbol is `occ_dc_` and the hash of the file's name and bytes: one
//! symbol per name and bytes makes the same file of two crates one comdat
//! group, and never gives two contents one name. The path `.incbin` reads
//! is `OUT_DIR`'s, which rustc reads from the environment, so nothing
//! absolute is written. The bytes can be referenced in a `const`, not read
//! there. Other targets (Mach-O, COFF: other section directives, and a
//! Windows `OUT_DIR` is all backslashes) keep `include_bytes!`.

use crate::error::Result;
use crate::files::write_atomic;
use occ_model::manifest::{self, KernelArch, Manifest, Origin};
use occ_model::manifest::{DeviceCode, Embed};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The generated Rust file's name inside `$OUT_DIR/occ`.
pub const KERNELS_RS: &str = "kernels.rs";

/// The generated file of the blobs' table, which `kernels.rs` includes.
pub const DEVICE_CODE_RS: &str = "device_code.rs";

/// Writes `device_code.rs`, `kernels.rs` and `manifest.json`.
pub fn write_all(manifest: &Manifest, out: &Path) -> Result<()> {
    let text = device_code_rs(manifest, |blob| reach(out, blob));
    write_atomic(&out.join(DEVICE_CODE_RS), text.as_bytes())?;
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
        // `<job>.cubin`, `<job>.embed.cubin` (its copy less line
        // information), likewise `.ptx`.
        let stem = [".cubin", ".ptx"]
            .iter()
            .find_map(|ext| name.strip_suffix(ext))
            .map(|stem| stem.strip_suffix(".embed").unwrap_or(stem));
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

/// The items `kernels.rs` has before its tables: the table's types, which
/// are the `occ` crate's (so the crate that includes the file depends on
/// `occ`), and the lookup.
const PRELUDE: &str = r#"#[allow(unused_imports)]
pub use ::occ::table::{CodeKind, DeclaredLaunch, DeviceCode, Kernel, KernelArch, Param};

/// The kernel named `name`: its symbol, else its base name or Rust
/// identifier, when one kernel has it (`None` when none does, or several:
/// the same `extern "C"` name in two files; name those by
/// `<ident>::KERNEL`).
#[allow(dead_code)]
pub fn get(name: &str) -> Option<&'static Kernel> {
    ::occ::table::lookup(KERNELS, name)
}
"#;

/// The text of `kernels.rs`. Long because it writes the file top to
/// bottom, one section after another, so it reads in the order of the
/// generated file.
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
    // Where each (source, arch) finds its blob in `DEVICE_CODE_ARRAY`
    // (`device_code.rs`): an array static, which the table's rows point
    // into: rows that index a slice static (`&DEVICE_CODE[i]`) make rustc's
    // const evaluation walk the blobs once per kernel × arch (94 s instead
    // of 6.6 s of rustc for 2000 kernels × 3 archs, BENCHMARKS.md item 8).
    let mut blob_of: BTreeMap<(&str, Option<&str>), usize> = BTreeMap::new();
    for (i, blob) in manifest.device_code.iter().enumerate() {
        blob_of.insert((blob.source.as_str(), blob.arch.as_deref()), i);
    }
    if manifest.device_code.iter().any(|b| !b.file.is_empty()) {
        out.push_str(
            "\n// The blobs' table (`DEVICE_CODE_ARRAY`), in a file of its own: it\n\
             // names each blob by the hash and length of its bytes.\n\
             include!(concat!(env!(\"OUT_DIR\"), \"/occ/device_code.rs\"));\n",
        );
    } else {
        // No file to embed (a build from the lock, `Embed::Nothing`): the
        // table here, so that the file needs no `OUT_DIR`.
        out.push('\n');
        let table = device_code_rs(manifest, |_| Reach::Empty);
        for line in table
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with("//"))
        {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str("\n/// The embedded device code, sorted by source, then arch.\n#[allow(dead_code)]\npub static DEVICE_CODE: &[DeviceCode] = &DEVICE_CODE_ARRAY;\n");
    // An array static again, for the `<ident>::KERNEL` consts to point into:
    // `&KERNELS[i]` through the slice static costs rustc 0.4 s more at 705
    // kernels (BENCHMARKS.md, kernels.rs at candle's size).
    let _ = writeln!(
        out,
        "\n#[allow(dead_code)]\nstatic KERNELS_ARRAY: [Kernel; {}] = [",
        manifest.kernels.len()
    );
    for kernel in &manifest.kernels {
        let _ = writeln!(
            out,
            "    Kernel {{\n        name: {},\n        demangled: {},\n        base_name: {},\n        ident: {},\n        source: {},\n        params: &[{}],\n        archs: &[",
            lit(&kernel.name),
            lit(&kernel.demangled),
            lit(&kernel.base_name),
            lit(&kernel.ident),
            lit(&kernel.source),
            kernel
                .params
                .iter()
                .map(param)
                .collect::<Vec<_>>()
                .join(", ")
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
    out.push_str("];\n\n/// Every kernel, sorted by symbol (`get` looks them up).\n#[allow(dead_code)]\npub static KERNELS: &[Kernel] = &KERNELS_ARRAY;\n");
    for (i, kernel) in manifest.kernels.iter().enumerate() {
        let _ = writeln!(
            out,
            "\n/// `{}` from `{}`.\n#[allow(dead_code)]\npub mod {} {{\n    /// This kernel's entry in [`KERNELS`](super::KERNELS).\n    pub const KERNEL: &super::Kernel = &super::KERNELS_ARRAY[{i}];\n{}}}",
            doc(&kernel.base_name),
            doc(&kernel.source),
            kernel.ident,
            launcher(kernel)
        );
    }
    out
}

fn param(p: &occ_model::params::Param) -> String {
    format!(
        "Param {{ name: {}, c_type: {}, size: {}, align: {} }}",
        lit(&p.name),
        lit(&p.c_type),
        p.size,
        p.align
    )
}

/// Names a kernel parameter's Rust name may not take: the launcher's own
/// parameters, and what a parameter pattern would read as an item in scope
/// instead of a new binding (the module's `KERNEL`; the prelude's `None`,
/// `Some`, `Ok`, `Err`). Such a name gets a `_` appended.
const RESERVED: [&str; 8] = [
    "func", "stream", "cfg", "KERNEL", "None", "Some", "Ok", "Err",
];

/// A Rust parameter name for kernel parameter `i` named `name` in the
/// source (`arg{i}` when it has none, `{name}_` for a Rust keyword or a
/// [`RESERVED`] name).
fn rust_param_name(i: usize, name: &str) -> String {
    use occ_model::names::{is_keyword, is_rust_ident};
    if is_keyword(name) || RESERVED.contains(&name) {
        return format!("{name}_");
    }
    if !is_rust_ident(name) {
        return format!("arg{i}");
    }
    if name.starts_with("__occ") {
        return format!("{name}_");
    }
    name.to_string()
}

/// The Rust names of a kernel's parameters, in order: [`rust_param_name`]
/// of each, with `_` appended until it differs from the earlier ones and
/// from [`RESERVED`] (`func` and `func_` give `func_` and `func__`; an
/// unnamed first parameter and one named `arg0` give `arg0` and `arg0_`).
fn rust_param_names(params: &[occ_model::params::Param]) -> Vec<String> {
    let mut used: Vec<String> = RESERVED.iter().map(|s| s.to_string()).collect();
    params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut name = rust_param_name(i, &p.name);
            while used.contains(&name) {
                name.push('_');
            }
            used.push(name.clone());
            name
        })
        .collect()
}

/// The kernel's typed launcher: one Rust parameter per kernel parameter,
/// typed from its C++ type (`occ_model::params::Param::rust`), so that
/// rustc refuses a wrong count, a wrong scalar or a buffer of the wrong
/// element type at the argument. Wrapped in `occ::__if_cudarc!`: it exists
/// when the `occ` crate's `cudarc` feature is on.
///
/// Long because it writes the launcher's Rust text in the order the generated
/// file reads.
fn launcher(kernel: &manifest::Kernel) -> String {
    use occ_model::params::RustArg;
    let mut generics = Vec::new();
    let mut pointee_generics: Vec<(String, String)> = Vec::new();
    let mut params = Vec::new();
    let mut pushes = Vec::new();
    let names = rust_param_names(&kernel.params);
    for (i, (p, name)) in kernel.params.iter().zip(&names).enumerate() {
        match p.rust() {
            RustArg::Scalar(ty) => {
                params.push(format!("{name}: {ty}"));
                pushes.push(format!(".value(&{name})"));
            }
            RustArg::Pointer { mutable, pointee } => {
                let ty = match pointee {
                    Some(t) => t.to_string(),
                    // One generic per distinct C++ pointee: `const __half* in`
                    // and `__half* out` take buffers of one element type.
                    None => {
                        let key = occ_model::params::pointee_key(&p.c_type);
                        match pointee_generics
                            .iter()
                            .find(|(k, _)| !k.is_empty() && *k == key)
                        {
                            Some((_, g)) => g.clone(),
                            None => {
                                let g = format!("P{i}");
                                generics.push(g.clone());
                                pointee_generics.push((key, g.clone()));
                                g
                            }
                        }
                    }
                };
                if mutable {
                    params.push(format!("{name}: &mut impl ::occ::cuda::DevicePtrMut<{ty}>"));
                    pushes.push(format!(".ptr_mut({name})"));
                } else {
                    params.push(format!("{name}: &impl ::occ::cuda::DevicePtr<{ty}>"));
                    pushes.push(format!(".ptr({name})"));
                }
            }
            RustArg::Bytes { size, align } => {
                params.push(format!("{name}: &impl ::occ::cuda::Value<{size}, {align}>"));
                pushes.push(format!(".value({name})"));
            }
        }
    }
    let generics = if generics.is_empty() {
        String::new()
    } else {
        format!("<{}>", generics.join(", "))
    };
    let signature: Vec<String> = kernel.params.iter().map(|p| p.describe()).collect();
    let body = if pushes.is_empty() {
        String::new()
    } else {
        format!("        __occ_args{};\n", pushes.join(""))
    };
    format!(
        "    ::occ::__if_cudarc! {{\n    \
         /// Launches `{}({})` on `stream` with `cfg`: one argument per\n    \
         /// kernel parameter, in order, typed from the kernel's own list.\n    \
         #[allow(clippy::too_many_arguments, non_snake_case)]\n    \
         pub fn launch{generics}(\n        \
         func: &::occ::cuda::Function,\n        \
         stream: &::occ::cuda::CudaStream,\n        \
         cfg: ::occ::LaunchConfig,\n{}    \
         ) -> ::core::result::Result<(), ::occ::cuda::Error> {{\n        \
         func.expect(KERNEL)?;\n        \
         #[allow(unused_mut)]\n        \
         let mut __occ_args = ::occ::cuda::Args::new(stream);\n\
         {body}        \
         // SAFETY: the arguments are the kernel's parameters, in order, with\n        \
         // the types of its list (sizes are checked again at the launch).\n        \
         unsafe {{ __occ_args.launch(func, cfg) }}\n    \
         }}\n    }}\n",
        doc(&kernel.base_name),
        doc(&signature.join(", ")),
        params
            .iter()
            .map(|p| format!("        {p},\n"))
            .collect::<String>()
    )
}

/// A Rust string literal for `s` (`{:?}` escapes quotes, backslashes and
/// control characters the way Rust source reads them).
fn lit(s: &str) -> String {
    format!("{s:?}")
}

/// A name in a `///` line's code span: what no name may hold shown
/// escaped (`occ_model::names::shown`: a line break would end the comment
/// and start Rust), a backquote as `'` (it would end the span).
fn doc(s: &str) -> String {
    occ_model::names::shown(s).replace('`', "'")
}

fn opt(v: Option<u32>) -> String {
    match v {
        Some(v) => format!("Some({v})"),
        None => "None".into(),
    }
}

/// How `device_code.rs` reaches a blob's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reach {
    /// No file (a build from the lock): empty bytes.
    Empty,
    /// `occ::__device_code!`: assembled from the file (`.incbin`) on
    /// Linux under `symbol`, `len` bytes; `include_bytes!` elsewhere.
    Assembled { symbol: String, len: u64 },
    /// `include_bytes!`: the path cannot be written in an assembler string
    /// (a `"`, `\`, `{`, `}` or control character in `OUT_DIR`), or the
    /// file cannot be read now (rustc will say so).
    Included,
}

/// How the blob `blob` in `out` (`$OUT_DIR/occ`) is reached: its file
/// read, hashed and measured. The symbol is `occ_dc_` and a 128-bit hash
/// of the file's name and bytes: unique to those bytes, so two crates
/// (or `Build`s) never define one symbol with two contents, and the same
/// file of the same bytes in two crates of one binary is one comdat group,
/// kept once.
fn reach(out: &Path, blob: &DeviceCode) -> Reach {
    if blob.file.is_empty() {
        return Reach::Empty;
    }
    let path = out.join(&blob.file);
    let quotable = path.to_str().is_some_and(|p| {
        !p.chars()
            .any(|c| matches!(c, '"' | '\\' | '{' | '}') || c.is_control())
    });
    match std::fs::read(&path) {
        Ok(bytes) if quotable => Reach::Assembled {
            symbol: format!(
                "occ_dc_{}",
                crate::cache::hash_bytes(&[blob.file.as_bytes(), &bytes])
            ),
            len: bytes.len() as u64,
        },
        _ => Reach::Included,
    }
}

/// The text of `device_code.rs`: `DEVICE_CODE_ARRAY`, one row per blob,
/// each reached as `reach` says.
pub(crate) fn device_code_rs(manifest: &Manifest, reach: impl Fn(&DeviceCode) -> Reach) -> String {
    let mut out = String::with_capacity(512 + manifest.device_code.len() * 200);
    out.push_str("// @generated by occ-build. Do not edit. Included by kernels.rs.\n");
    out.push_str("// Each blob's symbol and length change with its bytes.\n\n");
    let _ = writeln!(
        out,
        "#[allow(dead_code)]\nstatic DEVICE_CODE_ARRAY: [DeviceCode; {}] = [",
        manifest.device_code.len()
    );
    for blob in &manifest.device_code {
        let _ = writeln!(out, "    {},", device_code(blob, &reach(blob)));
    }
    out.push_str("];\n");
    out
}

fn device_code(blob: &DeviceCode, reach: &Reach) -> String {
    let kind = match blob.kind {
        Embed::Fatbin | Embed::Nothing => "Fatbin",
        Embed::Cubin => "Cubin",
        Embed::Ptx => "Ptx",
    };
    let arch = match &blob.arch {
        Some(a) => format!("Some({})", lit(a)),
        None => "None".into(),
    };
    let file = lit(&format!("/occ/{}", blob.file));
    let bytes = match reach {
        Reach::Empty => "&[]".to_string(),
        Reach::Assembled { symbol, len } => {
            format!("::occ::__device_code!({symbol}, {file}, {len})")
        }
        Reach::Included => format!("include_bytes!(concat!(env!(\"OUT_DIR\"), {file}))"),
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use occ_model::params::Param;

    /// A manifest of `kernels` and `device_code` for sm_80, as nvcc built it.
    pub(crate) fn manifest(
        kernels: Vec<manifest::Kernel>,
        device_code: Vec<DeviceCode>,
    ) -> Manifest {
        Manifest {
            schema: manifest::SCHEMA_VERSION,
            package: "p".into(),
            origin: Origin::Nvcc,
            nvcc: "V13.5.37".into(),
            archs: vec!["sm_80".into()],
            kernels,
            device_code,
            measured: Vec::new(),
        }
    }

    fn named(names: &[&str]) -> Vec<Param> {
        names
            .iter()
            .map(|n| Param {
                name: n.to_string(),
                c_type: "int".into(),
                ptx: "u32".into(),
                size: 4,
                align: 4,
            })
            .collect()
    }

    fn blob(file: &str) -> DeviceCode {
        DeviceCode {
            source: "k.cu".into(),
            kind: Embed::Fatbin,
            arch: None,
            file: file.into(),
        }
    }

    #[test]
    fn a_blob_is_assembled_under_a_symbol_of_its_name_and_bytes() {
        let dir = std::env::temp_dir().join(format!("occ-emit-reach-{}", std::process::id()));
        let out = dir.join("out dir");
        std::fs::create_dir_all(&out).expect("mkdir");
        let write =
            |file: &str, bytes: &[u8]| std::fs::write(out.join(file), bytes).expect("write");
        write("a.fatbin", b"0123456789");
        write("b.fatbin", b"0123456789");
        let Reach::Assembled { symbol: a, len } = reach(&out, &blob("a.fatbin")) else {
            panic!("a.fatbin in a folder with a space is assembled");
        };
        assert_eq!(len, 10);
        assert!(a.starts_with("occ_dc_") && a.len() == 7 + 32, "{a}");
        assert!(a[7..].chars().all(|c| c.is_ascii_hexdigit()), "{a}");
        // Another file of the same bytes: another symbol (one crate never
        // defines a symbol twice).
        let Reach::Assembled { symbol: b, .. } = reach(&out, &blob("b.fatbin")) else {
            panic!("b.fatbin");
        };
        assert_ne!(a, b);
        // New bytes of the same length: a new symbol, so that rustc and
        // cargo see the change.
        write("a.fatbin", b"0123456780");
        let Reach::Assembled { symbol: a2, len } = reach(&out, &blob("a.fatbin")) else {
            panic!("a.fatbin, changed");
        };
        assert_eq!(len, 10);
        assert_ne!(a, a2);
        // No file (a build from the lock), a file gone.
        assert_eq!(reach(&out, &blob("")), Reach::Empty);
        assert_eq!(reach(&out, &blob("gone.fatbin")), Reach::Included);
        // A folder the assembler's string cannot name.
        for bad in ["q\"uote", "back\\slash", "br{ace}"] {
            let odd = dir.join(bad);
            std::fs::create_dir_all(&odd).expect("mkdir");
            std::fs::write(odd.join("a.fatbin"), b"x").expect("write");
            assert_eq!(reach(&odd, &blob("a.fatbin")), Reach::Included, "{bad}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn device_code_rs_names_each_blob_as_it_is_reached() {
        let m = manifest(vec![], vec![blob("a.fatbin"), blob("b.fatbin"), blob("")]);
        let text = device_code_rs(&m, |b| match b.file.as_str() {
            "a.fatbin" => Reach::Assembled {
                symbol: "occ_dc_00ff".into(),
                len: 10,
            },
            "b.fatbin" => Reach::Included,
            _ => Reach::Empty,
        });
        assert!(
            text.contains("static DEVICE_CODE_ARRAY: [DeviceCode; 3] = ["),
            "{text}"
        );
        assert!(
            text.contains("bytes: ::occ::__device_code!(occ_dc_00ff, \"/occ/a.fatbin\", 10) }"),
            "{text}"
        );
        assert!(
            text.contains("bytes: include_bytes!(concat!(env!(\"OUT_DIR\"), \"/occ/b.fatbin\")) }"),
            "{text}"
        );
        assert!(text.contains("arch: None, bytes: &[] }"), "{text}");
        // kernels.rs includes it, and no file's bytes.
        let rs = kernels_rs(&m);
        assert!(
            rs.contains("include!(concat!(env!(\"OUT_DIR\"), \"/occ/device_code.rs\"));"),
            "{rs}"
        );
        assert!(
            !rs.contains("include_bytes") && !rs.contains("a.fatbin"),
            "{rs}"
        );
        // No file at all (a build from the lock): the table inline, so that
        // kernels.rs needs no OUT_DIR.
        let lock = Manifest {
            device_code: vec![blob(""), blob("")],
            ..m
        };
        let rs = kernels_rs(&lock);
        assert!(!rs.contains("device_code.rs"), "{rs}");
        assert!(
            rs.contains("static DEVICE_CODE_ARRAY: [DeviceCode; 2] = [")
                && rs.matches("bytes: &[] },").count() == 2,
            "{rs}"
        );
    }

    #[test]
    fn launcher_parameter_names_are_distinct_new_bindings() {
        let got = rust_param_names(&named(&["func", "func_", "", "arg2", "KERNEL", "None"]));
        assert_eq!(
            got,
            ["func_", "func__", "arg2", "arg2_", "KERNEL_", "None_"]
        );
        let got = rust_param_names(&named(&["type", "type_", "self", "n"]));
        assert_eq!(got, ["type_", "type__", "self_", "n"]);
        // The one identifier rule of occ_model::names: `union` is a keyword
        // there, a non-ASCII or `_` name is no parameter name.
        let got = rust_param_names(&named(&["union", "gen", "größe", "_", "__occ_x"]));
        assert_eq!(got, ["union_", "gen_", "arg2", "arg3", "__occ_x_"]);
    }

    #[test]
    fn pointers_to_one_struct_type_share_a_generic() {
        let ptr = |name: &str, c_type: &str| Param {
            name: name.into(),
            c_type: c_type.into(),
            ptx: "u64".into(),
            size: 8,
            align: 8,
        };
        let kernel = manifest::Kernel {
            name: "tscale".into(),
            demangled: "tscale".into(),
            base_name: "tscale".into(),
            short_name: "tscale".into(),
            ident: "tscale".into(),
            source: "k.cu".into(),
            params: vec![
                ptr("inp", "__half const*"),
                ptr("out", "__half*"),
                ptr("idx", "int2 const*"),
            ],
            archs: BTreeMap::new(),
        };
        let text = launcher(&kernel);
        assert!(text.contains("pub fn launch<P0, P2>("), "{text}");
        assert!(
            text.contains("inp: &impl ::occ::cuda::DevicePtr<P0>"),
            "{text}"
        );
        assert!(
            text.contains("out: &mut impl ::occ::cuda::DevicePtrMut<P0>"),
            "{text}"
        );
        assert!(
            text.contains("idx: &impl ::occ::cuda::DevicePtr<P2>"),
            "{text}"
        );
    }
}
