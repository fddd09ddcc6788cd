//! Step 2: find the manifest and read it, once per rustc process.
//!
//! The manifest is `$OCC_MANIFEST` when that is set (a path to a
//! `manifest.json`; relative paths are from `$CARGO_MANIFEST_DIR`), otherwise
//! `$OUT_DIR/occ/manifest.json`, which occ-build's build script writes.
//! Parsed manifests are cached by path, length and modification time, so a
//! crate with many `#[launch_config]` sites parses its manifest once, and a
//! long-lived proc-macro server (rust-analyzer) sees a rebuilt one.

use occ_model::schema::manifest::{Manifest, FILE_NAME};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

/// The environment variable that names a manifest explicitly.
pub const OVERRIDE_VAR: &str = "OCC_MANIFEST";

/// Where the manifest came from; decides how the expansion tracks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `$OUT_DIR/occ/manifest.json`.
    OutDir,
    /// `$OCC_MANIFEST`, resolved to this path.
    Override(PathBuf),
}

/// A manifest ready to use.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The parsed manifest.
    pub manifest: Arc<Manifest>,
    /// Where it came from.
    pub source: Source,
}

/// Finds and reads the manifest of the crate being compiled. The error is a
/// complete message for the user.
pub fn load() -> Result<Loaded, String> {
    let (path, source) = locate()?;
    let manifest = cached(&path).map_err(|detail| match &source {
        Source::OutDir => format!("cannot use the occ manifest $OUT_DIR/occ/{FILE_NAME}: {detail}"),
        Source::Override(p) => format!(
            "cannot use the occ manifest {} (from {OVERRIDE_VAR}): {detail}",
            p.display()
        ),
    })?;
    Ok(Loaded { manifest, source })
}

const BUILD_RS_HINT: &str = "#[launch_config] reads the manifest that occ-build writes in build.rs; add to Cargo.toml\n\n    [build-dependencies]\n    occ-build = { git = \"https://github.com/occ-rs/occ\" }\n\nand a build.rs beside it:\n\n    fn main() {\n        occ_build::Build::new()\n            .glob(\"kernels/*.cu\")\n            .archs([\"sm_80\", \"sm_90\"])\n            .compile();\n    }";

fn locate() -> Result<(PathBuf, Source), String> {
    if let Some(value) = std::env::var_os(OVERRIDE_VAR).filter(|v| !v.is_empty()) {
        let mut path = PathBuf::from(value);
        if path.is_relative() {
            if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
                path = Path::new(&dir).join(path);
            }
        }
        if !path.is_file() {
            return Err(format!(
                "{OVERRIDE_VAR} is {}, which is not a file; point it at an occ manifest.json or unset it",
                path.display()
            ));
        }
        return Ok((path.clone(), Source::Override(path)));
    }
    let Some(out_dir) = std::env::var_os("OUT_DIR") else {
        return Err(format!(
            "no occ manifest: this crate has no build script (OUT_DIR is not set); {BUILD_RS_HINT}"
        ));
    };
    let path = Path::new(&out_dir).join("occ").join(FILE_NAME);
    if !path.is_file() {
        return Err(format!(
            "no occ manifest: the build script did not write $OUT_DIR/occ/{FILE_NAME}; {BUILD_RS_HINT}"
        ));
    }
    Ok((path, Source::OutDir))
}

type Key = (PathBuf, Option<SystemTime>, u64);
type Cache = Mutex<HashMap<PathBuf, (Key, Arc<Result<Arc<Manifest>, String>>)>>;

static CACHE: OnceLock<Cache> = OnceLock::new();
static PARSES: AtomicUsize = AtomicUsize::new(0);

/// How many times this process parsed a manifest file (tests).
#[cfg(test)]
fn parse_count() -> usize {
    PARSES.load(Ordering::Relaxed)
}

/// Reads and parses `path`, or returns the cached result for the same file
/// contents (same length and modification time).
pub fn cached(path: &Path) -> Result<Arc<Manifest>, String> {
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("cannot read it ({e}); rebuild to regenerate it"))?;
    let key: Key = (path.to_path_buf(), meta.modified().ok(), meta.len());
    let cache = CACHE.get_or_init(Default::default);
    {
        let map = cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((k, result)) = map.get(path) {
            if *k == key {
                return (**result).clone();
            }
        }
    }
    PARSES.fetch_add(1, Ordering::Relaxed);
    let result = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read it ({e}); rebuild to regenerate it"))
        .and_then(|text| {
            Manifest::from_json(&text, path).map_err(|e| match e {
                occ_model::Error::Corrupt { detail, .. } => detail,
                other => other.to_string(),
            })
        })
        .map(Arc::new);
    let result = Arc::new(result);
    let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
    map.insert(path.to_path_buf(), (key, result.clone()));
    (*result).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest_json(schema: u32) -> String {
        format!(
            "{{\"schema\": {schema}, \"package\": \"p\", \"origin\": \"nvcc\", \"nvcc\": \"V13.5\", \"archs\": [\"sm_80\"], \"kernels\": []}}\n"
        )
    }

    #[test]
    fn parses_once_per_file_version() {
        let dir = std::env::temp_dir().join(format!("occ-macros-cache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok();
        let path = dir.join("manifest.json");
        std::fs::write(
            &path,
            manifest_json(occ_model::schema::manifest::SCHEMA_VERSION),
        )
        .ok();
        let before = parse_count();
        for _ in 0..5 {
            assert!(cached(&path).is_ok());
        }
        assert_eq!(parse_count() - before, 1);
        // A different file (length changes) is parsed again and its error kept.
        std::fs::write(&path, manifest_json(99) + " ").ok();
        let err = cached(&path).err().unwrap_or_default();
        assert!(err.contains("newer occ"), "{err}");
        assert!(cached(&path).is_err());
        assert_eq!(parse_count() - before, 2);
        std::fs::remove_dir_all(&dir).ok();
    }
}
