//! File helpers every stage uses, and the readers and writers of occ's own
//! files: writes through a temporary sibling and a rename, the temporary
//! names, the cleanup of what killed builds left, crate-relative names, and
//! the manifest, lock and `gate.json` as files.
//!
//! A leaf: it imports nothing of the crate but its error.

use crate::error::{Error, Result};
use occ_model::compare::GateSettings;
use occ_model::schema::lock::Lock;
use occ_model::schema::manifest::Manifest;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Writes a file through a temporary sibling and a rename, and only when its
/// content changes (so the modification time of unchanged output stays).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
    }
    let tmp = unique_sibling(path);
    std::fs::write(&tmp, bytes).map_err(|e| {
        // A full disk leaves a truncated file: never leave it behind.
        let _ = std::fs::remove_file(&tmp);
        Error::io(format!("cannot write {}", path.display()), e)
    })?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(format!("cannot write {}", path.display()), e)
    })
}

/// `path` with a suffix unique to this process and call (`.tmp<pid>.<n>`):
/// a temporary name no other thread or process writes to.
pub fn unique_sibling(path: &Path) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".tmp{}.{n}", std::process::id()));
    PathBuf::from(name)
}

/// Removes what killed builds left in `dir`: scratch folders and
/// half-written files named `<name>.tmp<pid>.<n>` whose process is gone
/// (two live builds into one `OUT_DIR` keep theirs), and in `tmp/` the
/// canonical per-job folders no run owns.
pub fn remove_stale_scratch(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let me = std::process::id();
    let in_tmp = dir.file_name().is_some_and(|n| n == "tmp");
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name
            .rsplit_once(".tmp")
            .and_then(|(_, rest)| rest.split_once('.'))
            .and_then(|(p, n)| n.parse::<u64>().ok().and(p.parse::<u32>().ok()));
        let stale = match pid {
            Some(pid) if pid == me => false,
            Some(pid) => !process_alive(pid),
            None => in_tmp,
        };
        if stale {
            let path = entry.path();
            let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
        }
    }
}

fn process_alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        Path::new(&format!("/proc/{pid}")).exists()
    } else {
        // No cheap portable check: keep it (a later build on Linux or a
        // `cargo clean` removes it).
        true
    }
}

/// `root/kernels/a.cu` → `kernels/a.cu` (with `/`), or the path as given
/// when it lies outside the crate.
pub fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// `path` with each `..` taken away with the name before it, by text alone
/// (no file system call, so a link is not followed): the spelling to compare
/// two paths by when one names a file as nvcc's line markers do,
/// `<crate root>/../target/…`.
pub fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for part in path.components() {
        match (part, out.components().next_back()) {
            (Component::ParentDir, Some(Component::Normal(_))) => {
                out.pop();
            }
            // The root's parent is the root.
            (Component::ParentDir, Some(Component::RootDir | Component::Prefix(_))) => {}
            (Component::CurDir, _) => {}
            (other, _) => out.push(other.as_os_str()),
        }
    }
    out
}

/// Reads and parses a manifest file (`$OUT_DIR/occ/manifest.json`).
pub fn read_manifest(path: &Path) -> Result<Manifest> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("cannot read {}", path.display()), e))?;
    Ok(Manifest::from_json(&text, path)?)
}

/// Reads a lock file; `Ok(None)` when it does not exist.
pub fn read_lock(path: &Path) -> Result<Option<Lock>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(Lock::from_text(&text, path)?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(format!("cannot read {}", path.display()), e)),
    }
}

/// Reads `gate.json`; `Ok(None)` when missing.
pub fn read_settings(path: &Path) -> Result<Option<GateSettings>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(GateSettings::from_json(&text, path)?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(format!("cannot read {}", path.display()), e)),
    }
}

/// Writes `text` as the lock at `path`, the one way both `OCC_BLESS=1`
/// and `cargo occ bless` write it: through a symlink (the file it points
/// to is replaced, atomically, and the link stays), keeping the file's
/// permissions, and never over a read-only lock ([`Error::LockReadOnly`]:
/// the permission bits are checked, so running as root does not override
/// them).
pub fn write_lock(path: &Path, text: &str) -> Result<()> {
    let target = resolve_links(path)?;
    let permissions = match std::fs::metadata(&target) {
        Ok(m) => {
            if m.permissions().readonly() {
                return Err(Error::LockReadOnly { path: target });
            }
            Some(m.permissions())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io(format!("cannot read {}", target.display()), e)),
    };
    write_atomic(&target, text.as_bytes())?;
    if let Some(p) = permissions {
        std::fs::set_permissions(&target, p).map_err(|e| {
            Error::io(
                format!("cannot set the permissions of {}", target.display()),
                e,
            )
        })?;
    }
    Ok(())
}

/// The file `path` names after following every symlink (a dangling link
/// names the file it would create).
fn resolve_links(path: &Path) -> Result<PathBuf> {
    let mut current = path.to_path_buf();
    // A loop of links ends here instead of spinning.
    for _ in 0..40 {
        match std::fs::symlink_metadata(&current) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = std::fs::read_link(&current).map_err(|e| {
                    Error::io(format!("cannot read the symlink {}", current.display()), e)
                })?;
                current = match current.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            _ => return Ok(current),
        }
    }
    Err(Error::io(
        format!("cannot follow the symlink {}", path.display()),
        std::io::Error::other("too many levels of symbolic links"),
    ))
}

#[cfg(test)]
mod tests {
    use super::lexical;
    use std::path::Path;

    #[test]
    fn lexical_takes_each_parent_away_with_the_name_before_it() {
        let out = Path::new("/ws/target/debug/build/k-1/out");
        let dep = Path::new("/ws/crate/../target/debug/build/k-1/out/occ/cache/anchor.cuh");
        assert!(lexical(dep).starts_with(out));
        assert!(!dep.starts_with(out));
        assert_eq!(lexical(Path::new("a/./b/../../c")), Path::new("c"));
        assert_eq!(lexical(Path::new("../a/..")), Path::new(".."));
        assert_eq!(lexical(Path::new("/../a")), Path::new("/a"));
    }
}
