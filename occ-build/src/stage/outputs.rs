//! Stage 7: writes what a build made into `$OUT_DIR/occ`: `manifest.json`,
//! `kernels.rs` and `device_code.rs` (the device code files are placed by
//! the nvcc jobs and `device_code`), and removes the files of jobs this build no
//! longer has.
//!
//! The files' text is [`occ_model::render::kernels_rs`]'s. `kernels.rs` is data, not a forest of modules: one static table of
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

use crate::leaf::error::Result;
use crate::leaf::files::write_atomic;
use occ_model::render::kernels_rs::{device_code_rs, kernels_rs, Reach};
use occ_model::schema::manifest::{self, DeviceCode, Manifest};
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
/// Only the files of `part` ([`crate::stage::parts::owns`]) are considered.
pub(crate) fn remove_stale(out: &Path, part: &str, jobs: &[&str], blobs: &[DeviceCode]) {
    let keep = |stem: &str| {
        !crate::stage::parts::owns(part, stem)
            || jobs.contains(&stem)
            || blobs.iter().any(|b| b.file.as_deref() == Some(stem))
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

/// How the blob `blob` in `out` (`$OUT_DIR/occ`) is reached: its file
/// read, hashed and measured. The symbol is `occ_dc_` and a 128-bit hash
/// of the file's name and bytes: unique to those bytes, so two crates
/// (or `Build`s) never define one symbol with two contents, and the same
/// file of the same bytes in two crates of one binary is one comdat group,
/// kept once.
fn reach(out: &Path, blob: &DeviceCode) -> Reach {
    let Some(file) = &blob.file else {
        return Reach::Empty;
    };
    let path = out.join(file);
    let quotable = path.to_str().is_some_and(|p| {
        !p.chars()
            .any(|c| matches!(c, '"' | '\\' | '{' | '}') || c.is_control())
    });
    match std::fs::read(&path) {
        Ok(bytes) if quotable => Reach::Assembled {
            symbol: format!(
                "occ_dc_{}",
                crate::leaf::cache::hash_bytes(&[file.as_bytes(), &bytes])
            ),
            len: bytes.len() as u64,
        },
        _ => Reach::Included,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use occ_model::schema::manifest::{Embed, Origin};

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
            launches: Vec::new(),
        }
    }

    fn blob(file: &str) -> DeviceCode {
        DeviceCode {
            source: "k.cu".into(),
            kind: Embed::Fatbin,
            arch: None,
            file: (!file.is_empty()).then(|| file.to_string()),
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
}
