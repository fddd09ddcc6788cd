//! The identity of this occ-model's code, as `OCC_MODEL_CODE` (exported as
//! `occ_model::CODE`): a hash of every file below `src/`. Whatever a build
//! keeps that this crate worked out (a job's parsed contribution, the
//! source lines read from nvdisasm) is keyed by it, so a changed parser
//! never serves what an older one made, even at the same version.

// A build script reads files and prints to cargo; the library itself
// never does.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::disallowed_macros
)]

use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// FNV-1a, 64 bits, from `seed`: enough to tell two versions of the code
/// apart (no adversary chooses them).
fn fnv(seed: u64, parts: &[&[u8]]) -> u64 {
    let mut h = seed;
    for part in parts {
        for b in part.iter().chain(&(part.len() as u64).to_le_bytes()) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

fn main() {
    let src = Path::new("src");
    println!("cargo::rerun-if-changed=src");
    let mut all = Vec::new();
    files(src, &mut all);
    all.sort();
    let mut parts: Vec<Vec<u8>> = Vec::new();
    for path in &all {
        let name = path.strip_prefix(src).unwrap_or(path);
        parts.push(name.to_string_lossy().replace('\\', "/").into_bytes());
        parts.push(std::fs::read(path).unwrap_or_default());
    }
    let parts: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    let a = fnv(0xcbf2_9ce4_8422_2325, &parts);
    let b = fnv(0x8422_2325_cbf2_9ce4, &parts);
    println!("cargo::rustc-env=OCC_MODEL_CODE={a:016x}{b:016x}");
}
