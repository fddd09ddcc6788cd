//! Real programs' outputs, recorded once and replayed through the seam
//! (`process`): [`Recorder`] runs each [`Cmd`] for real and keeps what it
//! gave — status, stdout, stderr and the files it left where
//! [`Cmd::writes`] says — and [`Replay`] gives it back, writing the same
//! files, without the program. The fixtures under
//! `tests/fixtures/nvcc-13.5/` are nvcc 13.5's, recorded by the tests that
//! replay them (`tests/tests/it/replay.rs`, its README says how); nothing
//! in them is written by hand.
//!
//! A run is found by its **key**: the program, arguments, working folder
//! and variables, with the build's folders as placeholders (`@OUT@`,
//! `@ROOT@`, `@TOOLKIT@`) and a scratch name's `.tmp<pid>.<n>` as `.tmp*`,
//! plus the **state** of the crate: a hash of every file below the root
//! (less the output folder, `target`, `.git` and `occ.lock`), since nvcc's
//! output follows from the sources. A command the fixture lacks panics,
//! naming it: a replay never makes an output up.
//!
//! Text (stdout, stderr, files that are UTF-8 without NUL) is kept with
//! the placeholders and filled in with the replaying build's folders;
//! binary files (cubins) are kept byte for byte, so their line tables
//! name the recording's folder, which nothing occ checks reads.
//!
//! A leaf: it imports only `process`.

use crate::process::{Cmd, Output, Programs, Real, Status};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The index of a recording, in its folder.
const INDEX: &str = "runs.json";

/// The folders a recording names by placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folders {
    /// The crate root (`@ROOT@`); its files are the state.
    pub root: PathBuf,
    /// The build's output folder, `OUT_DIR` (`@OUT@`).
    pub out: PathBuf,
    /// The toolkit's root, the folder holding `bin/nvcc` (`@TOOLKIT@`).
    pub toolkit: PathBuf,
}

impl Folders {
    /// (placeholder, folder) pairs, longest folder first (the output folder
    /// may lie in the root), each also as its canonical path.
    fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = Vec::new();
        for (name, dir) in [
            ("@OUT@", &self.out),
            ("@ROOT@", &self.root),
            ("@TOOLKIT@", &self.toolkit),
        ] {
            pairs.push((name, dir.display().to_string()));
            if let Ok(real) = std::fs::canonicalize(dir) {
                pairs.push((name, real.display().to_string()));
            }
        }
        pairs.sort_by_key(|(_, d)| std::cmp::Reverse(d.len()));
        pairs.dedup();
        pairs
    }

    /// `text` with the folders as placeholders.
    fn hide(&self, text: &str) -> String {
        let mut text = text.to_string();
        for (name, dir) in self.pairs() {
            if !dir.is_empty() {
                text = text.replace(&dir, name);
            }
        }
        text
    }

    /// `text` with the placeholders as these folders.
    fn fill(&self, text: &str) -> String {
        [
            ("@OUT@", &self.out),
            ("@ROOT@", &self.root),
            ("@TOOLKIT@", &self.toolkit),
        ]
        .iter()
        .fold(text.to_string(), |t, (name, dir)| {
            t.replace(name, &dir.display().to_string())
        })
    }

    /// The key a command is recorded and found by.
    fn key(&self, cmd: &Cmd) -> Key {
        let show = |s: &std::ffi::OsStr| scratch_free(&self.hide(&s.to_string_lossy()));
        Key {
            program: show(cmd.get_program().as_os_str()),
            args: cmd.get_args().iter().map(|a| show(a)).collect(),
            dir: cmd.get_dir().map(|d| show(d.as_os_str())),
            env: cmd
                .get_envs()
                .iter()
                .map(|(n, v)| (n.to_string_lossy().into_owned(), v.as_deref().map(show)))
                .collect(),
            state: state(&self.root, &self.out),
        }
    }
}

/// A scratch name's `.tmp<pid>.<random>` (`files::scratch_dir`,
/// `files::scratch_file`) as `.tmp*`.
fn scratch_free(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(".tmp") {
        out.push_str(&rest[..at + 4]);
        rest = &rest[at + 4..];
        let pid = rest.chars().take_while(char::is_ascii_digit).count();
        let after = &rest[pid..];
        let n = after.strip_prefix('.').map_or(0, |a| {
            a.chars().take_while(char::is_ascii_alphanumeric).count()
        });
        if pid > 0 && n > 0 {
            out.push('*');
            rest = &after[1 + n..];
        }
    }
    out.push_str(rest);
    out
}

/// The crate's state: a hash (FNV-1a, stable across Rust versions) of the
/// name and bytes of every file below `root`, less `out`, `target`,
/// `.git` and `occ.lock` (occ's own outputs and the gate's baseline, which
/// no program reads).
fn state(root: &Path, out: &Path) -> String {
    let mut files = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.starts_with(out) || name == "target" || name == ".git" {
                continue;
            }
            if path.is_dir() {
                todo.push(path);
            } else if name != "occ.lock" {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in (bytes.len() as u64).to_le_bytes().iter().chain(bytes) {
            hash = (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    };
    for file in files {
        let rel = file.strip_prefix(root).unwrap_or(&file);
        feed(rel.to_string_lossy().replace('\\', "/").as_bytes());
        feed(&std::fs::read(&file).unwrap_or_default());
    }
    format!("{hash:016x}")
}

/// What a run is found by ([`Folders::key`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Key {
    program: String,
    args: Vec<String>,
    dir: Option<String>,
    env: Vec<(String, Option<String>)>,
    state: String,
}

impl Key {
    fn shown(&self) -> String {
        let env: Vec<String> = self
            .env
            .iter()
            .filter_map(|(n, v)| v.as_ref().map(|v| format!("{n}={v}")))
            .collect();
        format!(
            "{}{} {} (in {}, crate state {})",
            env.iter().map(|e| format!("{e} ")).collect::<String>(),
            self.program,
            self.args.join(" "),
            self.dir.as_deref().unwrap_or("."),
            self.state
        )
    }
}

/// One recorded run.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Run {
    #[serde(flatten)]
    key: Key,
    code: Option<i32>,
    signal: Option<i32>,
    stdout: String,
    stderr: String,
    /// The files it left, by name below [`Cmd::writes`] (`.` for the file
    /// itself), each with whether it is kept as text.
    files: BTreeMap<String, bool>,
    /// Its number: its files are in `files/<id>/`.
    id: usize,
}

/// A run with the files it left, by name (text with placeholders).
type Recorded = (Run, Vec<(String, Vec<u8>)>);

/// Runs every command for real through `inner` and records it into a
/// folder ([`Recorder::save`]), for [`Replay`].
#[derive(Debug)]
pub struct Recorder {
    inner: Arc<dyn Programs>,
    folders: Folders,
    runs: Mutex<Vec<Recorded>>,
}

impl Recorder {
    /// A recorder of the programs themselves ([`Real`]) for a build in
    /// `folders`.
    pub fn new(folders: Folders) -> Recorder {
        Recorder {
            inner: Arc::new(Real),
            folders,
            runs: Mutex::default(),
        }
    }

    /// Writes what was recorded into `dir` (emptied first): `runs.json`
    /// and `files/<id>/<name>`. A command run twice in the same state is
    /// kept once (the first run).
    pub fn save(&self, dir: &Path) -> io::Result<()> {
        let runs = self.runs.lock().map_err(|_| io::Error::other("poisoned"))?;
        let mut unique: BTreeMap<Key, &Recorded> = BTreeMap::new();
        for run in runs.iter() {
            unique.entry(run.0.key.clone()).or_insert(run);
        }
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir)?;
        let mut index = Vec::new();
        for (id, (run, files)) in unique.into_values().enumerate() {
            let mut run = run.clone();
            run.id = id;
            for (name, bytes) in files {
                let path = dir.join("files").join(id.to_string()).join(stored(name));
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(path, bytes)?;
            }
            index.push(run);
        }
        let mut text = serde_json::to_string_pretty(&index).map_err(io::Error::other)?;
        text.push('\n');
        std::fs::write(dir.join(INDEX), text)
    }

    /// The files `cmd` left, by name ([`Run::files`]).
    fn written(&self, cmd: &Cmd) -> Vec<(String, Vec<u8>)> {
        let Some(at) = cmd.get_writes() else {
            return Vec::new();
        };
        if at.is_file() {
            return std::fs::read(at)
                .map(|b| vec![(".".to_string(), b)])
                .unwrap_or_default();
        }
        let mut found = Vec::new();
        let mut todo = vec![at.to_path_buf()];
        while let Some(dir) = todo.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    todo.push(path);
                } else if let Ok(bytes) = std::fs::read(&path) {
                    let rel = path.strip_prefix(at).unwrap_or(&path);
                    found.push((rel.to_string_lossy().replace('\\', "/"), bytes));
                }
            }
        }
        found.sort();
        found
    }
}

/// A file's name in the recording: `.` (the file a command writes) as `_file`.
fn stored(name: &str) -> &str {
    if name == "." {
        "_file"
    } else {
        name
    }
}

/// Whether a file is kept as text (placeholders filled in).
fn is_text(bytes: &[u8]) -> bool {
    !bytes.contains(&0) && std::str::from_utf8(bytes).is_ok()
}

impl Programs for Recorder {
    fn output(&self, cmd: &Cmd) -> io::Result<Output> {
        let key = self.folders.key(cmd);
        let output = self.inner.output(cmd)?;
        let f = &self.folders;
        let files: Vec<(String, Vec<u8>)> = self
            .written(cmd)
            .into_iter()
            .map(|(name, bytes)| match is_text(&bytes) {
                true => (name, f.hide(&String::from_utf8_lossy(&bytes)).into_bytes()),
                false => (name, bytes),
            })
            .collect();
        let run = Run {
            key,
            code: output.status.code,
            signal: output.status.signal,
            stdout: f.hide(&String::from_utf8_lossy(&output.stdout)),
            stderr: f.hide(&String::from_utf8_lossy(&output.stderr)),
            files: files.iter().map(|(n, b)| (n.clone(), is_text(b))).collect(),
            id: 0,
        };
        if let Ok(mut runs) = self.runs.lock() {
            runs.push((run, files));
        }
        Ok(output)
    }
}

/// Serves recorded runs ([`Recorder`]) in place of the programs, writing
/// the files each left; panics, naming the command, on one it does not have.
#[derive(Debug)]
pub struct Replay {
    dir: PathBuf,
    folders: Folders,
    runs: BTreeMap<Key, Run>,
    served: Mutex<Vec<String>>,
}

impl Replay {
    /// The recording in `dir`, for a build in `folders`.
    pub fn new(dir: &Path, folders: Folders) -> io::Result<Replay> {
        let text = std::fs::read_to_string(dir.join(INDEX))?;
        let runs: Vec<Run> = serde_json::from_str(&text).map_err(io::Error::other)?;
        Ok(Replay {
            dir: dir.to_path_buf(),
            folders,
            runs: runs.into_iter().map(|r| (r.key.clone(), r)).collect(),
            served: Mutex::default(),
        })
    }

    /// Every command served so far, in order, as its key shows it (the
    /// build's folders as placeholders): `nvcc` runs are those whose
    /// program ends in `nvcc`.
    pub fn served(&self) -> Vec<String> {
        self.served.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Programs for Replay {
    fn output(&self, cmd: &Cmd) -> io::Result<Output> {
        let key = self.folders.key(cmd);
        let Some(run) = self.runs.get(&key) else {
            let near: Vec<String> = self
                .runs
                .keys()
                .filter(|k| k.program == key.program && k.args == key.args)
                .map(|k| format!("  recorded in crate state {}", k.state))
                .collect();
            panic!(
                "no recorded run of\n  {}\nin {} ({} runs){}{}\nre-record the fixtures (tests/fixtures/nvcc-13.5/README.md)",
                key.shown(),
                self.dir.display(),
                self.runs.len(),
                if near.is_empty() { "" } else { "; the same command was\n" },
                near.join("\n")
            );
        };
        if let Ok(mut served) = self.served.lock() {
            served.push(key.shown());
        }
        if let Some(at) = cmd.get_writes() {
            for (name, text) in &run.files {
                let from = self
                    .dir
                    .join("files")
                    .join(run.id.to_string())
                    .join(stored(name));
                let bytes = std::fs::read(&from)?;
                let bytes = match text {
                    true => self
                        .folders
                        .fill(&String::from_utf8_lossy(&bytes))
                        .into_bytes(),
                    false => bytes,
                };
                let to = if name == "." {
                    at.to_path_buf()
                } else {
                    at.join(name)
                };
                if let Some(parent) = to.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(to, bytes)?;
            }
        }
        Ok(Output {
            status: Status {
                code: run.code,
                signal: run.signal,
            },
            stdout: self.folders.fill(&run.stdout).into_bytes(),
            stderr: self.folders.fill(&run.stderr).into_bytes(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_name_is_the_same_in_every_run() {
        assert_eq!(
            scratch_free("-o /o/tmp/k.sm_80.tmp4711.3/out.cubin"),
            "-o /o/tmp/k.sm_80.tmp*/out.cubin"
        );
        assert_eq!(
            scratch_free("-o /o/tmp/k.sm_80.tmp4711.aB3xYz9Q/out.cubin"),
            "-o /o/tmp/k.sm_80.tmp*/out.cubin"
        );
        assert_eq!(
            scratch_free("a.tmp.b .tmp1 x.tmp2. y.tmpq.1"),
            "a.tmp.b .tmp1 x.tmp2. y.tmpq.1"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_recorded_run_is_replayed_with_its_files_and_an_unknown_one_panics() {
        let base = std::env::temp_dir().join(format!("occ-replay-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let folders = Folders {
            root: base.join("crate"),
            out: base.join("crate/out"),
            toolkit: base.join("toolkit"),
        };
        let scratch = folders.out.join("tmp/job.tmp12.0");
        std::fs::create_dir_all(&scratch).expect("scratch");
        std::fs::write(folders.root.join("k.cu"), "one").expect("source");
        let mut cmd = Cmd::new("sh");
        cmd.args([
            "-c",
            "printf 'at %s\\n' \"$PWD\"; printf '\\000\\001' > bin; echo \"$PWD/k.cu\" > t.txt",
        ])
        .current_dir(&scratch)
        .writes(&scratch);
        let recorder = Recorder::new(folders.clone());
        let real = recorder.output(&cmd).expect("run sh");
        let fixture = base.join("fixture");
        recorder.save(&fixture).expect("save");
        let index = std::fs::read_to_string(fixture.join(INDEX)).expect("index");
        assert!(index.contains("@OUT@/tmp/job.tmp*"), "{index}");
        assert!(!index.contains(&base.display().to_string()), "{index}");

        // Another build's folders, another scratch name: the same run.
        let other = Folders {
            root: base.join("other"),
            out: base.join("other/out"),
            toolkit: base.join("toolkit2"),
        };
        let scratch = other.out.join("tmp/job.tmp99.7");
        std::fs::create_dir_all(&scratch).expect("scratch");
        std::fs::write(other.root.join("k.cu"), "one").expect("source");
        let replay = Replay::new(&fixture, other.clone()).expect("replay");
        let mut again = Cmd::new("sh");
        again
            .args(cmd.get_args())
            .current_dir(&scratch)
            .writes(&scratch);
        let out = replay.output(&again).expect("replayed");
        assert_eq!(out.status, real.status);
        let shown = |d: &Path| d.display().to_string();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("at {}\n", shown(&other.out.join("tmp/job.tmp12.0")))
        );
        assert_eq!(std::fs::read(scratch.join("bin")).expect("bin"), [0, 1]);
        assert_eq!(
            std::fs::read_to_string(scratch.join("t.txt")).expect("text"),
            format!("{}\n", shown(&other.out.join("tmp/job.tmp12.0/k.cu")))
        );
        assert_eq!(replay.served().len(), 1);

        // The sources changed: a state never recorded is refused.
        std::fs::write(other.root.join("k.cu"), "two").expect("source");
        let refused = std::panic::catch_unwind(|| replay.output(&again));
        let message = refused
            .err()
            .and_then(|e| e.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        assert!(message.contains("no recorded run of"), "{message}");
        assert!(message.contains("sh -c"), "{message}");
        let _ = std::fs::remove_dir_all(&base);
    }
}
