//! File helpers every stage uses, and the readers and writers of occ's own
//! files: writes through a temporary sibling and a rename, scratch files
//! and folders, the cleanup of what killed builds left, crate-relative
//! names, and the manifest, lock and `gate.json` as files.
//!
//! A scratch name is `<name>.tmp<pid>.<random letters>` beside what it
//! stands for, made by the `tempfile` crate, which creates it (so no other
//! thread or process can take the same name) with no state in the process;
//! the process id lets [`remove_stale_scratch`] tell a killed build's
//! leftovers from a live one's.
//!
//! A leaf: it imports nothing of the crate but its error.

use crate::error::{Error, Result};
use occ_model::compare::GateSettings;
use occ_model::schema::lock::Lock;
use occ_model::schema::manifest::Manifest;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes a file through a temporary sibling ([`scratch_file`]) and a
/// rename, and only when its content changes (so the modification time of
/// unchanged output stays). Nothing half-written is left: a write or
/// rename that fails removes the sibling.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    let failed = |e| Error::io(format!("cannot write {}", path.display()), e);
    let prefix = scratch_prefix(path)?;
    let mut tmp = scratch(&prefix, false)
        .tempfile_in(folder(path))
        .map_err(failed)?;
    // A full disk leaves a truncated file: dropped, it is removed.
    tmp.write_all(bytes).map_err(failed)?;
    tmp.persist(path).map_err(|e| failed(e.error))?;
    Ok(())
}

/// A scratch file: removed when dropped, unless persisted
/// (`persist(dest)`: renamed over `dest`).
pub type ScratchFile = tempfile::TempPath;

/// A new empty file beside `path`, named as the module says: removed when
/// dropped, unless persisted (renamed over `path` once a program wrote it
/// whole).
pub fn scratch_file(path: &Path) -> Result<ScratchFile> {
    let prefix = scratch_prefix(path)?;
    let file = scratch(&prefix, false)
        .tempfile_in(folder(path))
        .map_err(|e| {
            Error::io(
                format!("cannot create a scratch file beside {}", path.display()),
                e,
            )
        })?;
    Ok(file.into_temp_path())
}

/// A new empty folder beside `path`, named as the module says, for one
/// run alone; the caller removes it.
pub fn scratch_dir(path: &Path) -> Result<PathBuf> {
    let prefix = scratch_prefix(path)?;
    let dir = scratch(&prefix, true)
        .tempdir_in(folder(path))
        .map_err(|e| {
            Error::io(
                format!("cannot create a scratch folder beside {}", path.display()),
                e,
            )
        })?;
    Ok(dir.keep())
}

/// The folder a scratch sibling of `path` goes in.
fn folder(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// How a scratch sibling of `path` begins (`<name>.tmp<pid>.`), once its
/// folder is created.
fn scratch_prefix(path: &Path) -> Result<String> {
    let dir = folder(path);
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    Ok(format!("{name}.tmp{}.", std::process::id()))
}

/// A scratch sibling's maker: `prefix`, then eight random letters. Made
/// with the mode std gives a new file or folder (0666 or 0777 less the
/// umask), not tempfile's owner-only 0600: the outputs a build renames
/// into place (`occ.lock`, `kernels.rs`, the manifest) read as any file
/// the user writes.
fn scratch(prefix: &str, folder: bool) -> tempfile::Builder<'_, 'static> {
    let mut builder = tempfile::Builder::new();
    builder.prefix(prefix).rand_bytes(8);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = if folder { 0o777 } else { 0o666 };
        builder.permissions(std::fs::Permissions::from_mode(mode));
    }
    #[cfg(not(unix))]
    let _ = folder;
    builder
}

/// Removes what killed builds left in `dir`: scratch folders and
/// half-written files named `<name>.tmp<pid>.<random>` whose process is gone
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
            .and_then(|(p, n)| {
                let random = !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric());
                random.then(|| p.parse::<u32>().ok()).flatten()
            });
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
    use super::{lexical, remove_stale_scratch, scratch_dir, scratch_file, write_atomic};
    use std::path::Path;

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// What occ writes has the mode any file the user writes has (the
    /// umask's), not a scratch file's owner-only 0600: a blessed `occ.lock`
    /// reads as a committed file should.
    #[cfg(unix)]
    #[test]
    fn written_files_and_scratch_folders_have_the_modes_std_gives() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("dir");
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        let plain = dir.path().join("plain");
        std::fs::write(&plain, b"x").expect("write");
        let ours = dir.path().join("occ.lock");
        write_atomic(&ours, b"x").expect("write_atomic");
        assert_eq!(mode(&ours), mode(&plain));
        let plain_dir = dir.path().join("plain_dir");
        std::fs::create_dir(&plain_dir).expect("mkdir");
        let ours_dir = scratch_dir(&dir.path().join("job")).expect("scratch dir");
        assert_eq!(mode(&ours_dir), mode(&plain_dir));
    }

    /// Scratch names carry this process's id and differ call by call, with
    /// no counter in the process; a write leaves its file alone, a scratch
    /// file dropped unpersisted is gone (nothing half-written stays), and
    /// the cleanup takes a dead process's scratch but never a live one's.
    #[test]
    fn scratch_siblings_are_unique_per_call_and_left_only_by_a_dead_process() {
        let dir = std::env::temp_dir().join(format!("occ-scratch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let file = dir.join("out/m.json");
        write_atomic(&file, b"one").expect("write");
        write_atomic(&file, b"two").expect("write again");
        assert_eq!(std::fs::read(&file).expect("read"), b"two");
        assert_eq!(names(&dir.join("out")), ["m.json"]);
        let mine = format!("job.tmp{}.", std::process::id());
        let (a, b) = (
            scratch_dir(&dir.join("job")).expect("a"),
            scratch_dir(&dir.join("job")).expect("b"),
        );
        assert_ne!(a, b);
        for d in [&a, &b] {
            let name = d.file_name().expect("name").to_string_lossy().into_owned();
            assert!(name.starts_with(&mine) && d.is_dir(), "{name}");
        }
        let f = scratch_file(&dir.join("job")).expect("file");
        assert!(f.is_file());
        let path = f.to_path_buf();
        drop(f);
        assert!(!path.exists(), "a scratch file dropped is removed");
        // A killed build's scratch (a process id no process has) goes.
        let dead = dir.join(format!("job.tmp{}.aB3xYz9Q", u32::MAX));
        std::fs::create_dir_all(&dead).expect("dead");
        remove_stale_scratch(&dir);
        if cfg!(target_os = "linux") {
            assert!(!dead.exists(), "a dead process's scratch is left");
        }
        assert!(
            a.is_dir() && b.is_dir(),
            "a live process's scratch was taken"
        );
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

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
