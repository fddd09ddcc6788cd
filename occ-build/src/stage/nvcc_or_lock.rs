//! Stage 2: what this build compiles with. An [`NvccOrLock`] is a value that
//! says whether the build has a live nvcc or stands on the committed lock,
//! and why; nothing downstream learns it from an error.
//!
//! With no nvcc (`DOCS_RS`, `OCC_NO_NVCC`, or none found) the build stands
//! on the lock and watches the places nvcc may appear. None found under `CI`
//! in the crate's own build is an error (a lock-only CI run checks nothing);
//! in a dependency's build it never is.

use crate::builder::Build;
use crate::env::Env;
use crate::leaf::cache::ToolkitId;
use crate::leaf::error::Result;
use crate::stage::inputs::Inputs;
use crate::toolkit::{self, Nvcc};
use occ_model::schema::lock::Lock;
use std::path::Path;

/// What one build compiles with: a live nvcc or the committed lock.
#[derive(Debug)]
pub(crate) enum NvccOrLock {
    /// A live nvcc: the numbers are this build's.
    Nvcc(Nvcc),
    /// No nvcc: the committed lock's numbers stand in, without device code.
    Lock {
        /// The committed lock (boxed: a lock is far larger than an nvcc).
        lock: Box<Lock>,
        /// Why there is no nvcc (`DOCS_RS is set`, the last place looked, ...).
        reason: String,
        /// Where an nvcc may appear: watched, so that the build leaves the
        /// lock once one does (empty under `DOCS_RS`/`OCC_NO_NVCC`).
        watch: Vec<std::path::PathBuf>,
    },
}

/// Picks nvcc or the lock: no nvcc under `DOCS_RS`/`OCC_NO_NVCC`, else the
/// nvcc [`toolkit::find_nvcc`] finds; without one, the lock, else the error
/// listing every place looked.
pub(crate) fn select(build: &Build, env: &Env, inputs: &Inputs) -> Result<NvccOrLock> {
    let (looked, install_dir, watch) = match inputs.no_nvcc {
        Some(why) => (
            vec![format!("{why}: not looking for nvcc")],
            None,
            Vec::new(),
        ),
        None => match toolkit::find_nvcc(env, build.nvcc.as_deref(), Some(&inputs.root)) {
            Ok(nvcc) => return Ok(NvccOrLock::Nvcc(nvcc)),
            Err(occ_shell::Error::NvccNotFound {
                looked,
                install_dir,
            }) => (
                looked,
                install_dir,
                toolkit::watch_points(env, Some(&inputs.root)),
            ),
            Err(other) => return Err(other.into()),
        },
    };
    match &inputs.lock_text {
        // A CI run of the crate's own build that stood on its lock would
        // check nothing and pass: it fails, unless the user said so
        // (`OCC_NO_NVCC`, `DOCS_RS`) or the crate is a dependency.
        Some(_) if inputs.ci && inputs.no_nvcc.is_none() && inputs.dependency.is_none() => {
            Err(occ_shell::Error::NvccNotFoundInCi {
                looked,
                install_dir,
            }
            .into())
        }
        Some(text) => Ok(NvccOrLock::Lock {
            lock: Box::new(Lock::from_text(text, &inputs.lock_path)?),
            reason: looked.last().cloned().unwrap_or_default(),
            watch,
        }),
        None => {
            let mut looked = looked;
            looked.push(format!(
                "{}: none (a committed lock lets the crate build without nvcc; see `cargo occ bless`)",
                inputs.display(&inputs.lock_path)
            ));
            Err(occ_shell::Error::NvccNotFound {
                looked,
                install_dir,
            }
            .into())
        }
    }
}

/// `nvcc --version` (its `V13.5.37` part), cached in `$OUT_DIR/occ/cache`
/// under the toolkit's identity so an unchanged rebuild starts no process.
pub(crate) fn version(
    nvcc: &Nvcc,
    programs: &dyn crate::process::Programs,
    toolkit: &ToolkitId,
    out: &Path,
) -> Result<String> {
    let id = toolkit.id.clone();
    let cache = out.join("cache").join("nvcc-version");
    if let Ok(text) = std::fs::read_to_string(&cache) {
        if let Some((stored_id, version)) = text.split_once('\n') {
            if stored_id == id {
                return Ok(version.trim().to_string());
            }
        }
    }
    let version = toolkit::short_version(&nvcc.version_with(programs)?).to_string();
    crate::leaf::files::write_atomic(&cache, format!("{id}\n{version}\n").as_bytes())?;
    Ok(version)
}
