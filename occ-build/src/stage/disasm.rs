//! Stage 5½, disassembly: where each kernel spills and where its register
//! pressure peaks, by source line.
//!
//! The jobs compile with `-lineinfo` (which leaves the SASS and ptxas's
//! numbers unchanged: `tests/tests/it/lineinfo.rs`), so each cubin maps its
//! instructions to files and lines. Only kernels whose registers matter
//! are located ([`occ_model::model::cliff::registers_matter`]: it spills,
//! fewer registers would gain a resident block, or a register cliff is at
//! most two registers away); the others' lines would never be read, and nvdisasm
//! costs about as much CPU as the compile (BENCHMARKS.md §12.5, §19). For
//! each cubin that holds such a kernel the toolkit's `nvdisasm` runs once
//! over those kernels' code only (`-fun`), `-c -plr -lrm count` (live
//! registers, spill marks, branches), its output read line by line into
//! [`occ_model::compiler::lines`] beside the line table occ reads from the
//! cubin itself ([`LineInfo::from_cubin`]: what `nvdisasm -c -g` would
//! print, without a second run, each of which costs about 0.28 s of CPU
//! before it reads a byte); a cubin whose table occ cannot read gets the
//! `-g` run as well. That gives each kernel's [`SourceLines`]; they go into
//! the manifest (`KernelArch::lines`), never into the lock.
//!
//! Cached by content: `cache/lines/<cubin>.json` holds the result under a
//! key of the cubin's bytes, the kernels located, nvdisasm (path, target,
//! stat) and the crate root (paths are named relative to it), so a warm
//! build reads the record instead of running nvdisasm, and gives the same
//! bytes as a cold one.
//! A toolkit without nvdisasm gives today's manifest (no `lines`) and one
//! note; nvdisasm failing on a cubin is one note too, never an error.

use crate::leaf::cache::{self, Stat};
use crate::leaf::directives::Directives;
use crate::leaf::files::write_atomic;
use crate::process::{Cmd, Programs};
use crate::toolkit::{exe, Nvcc};
use occ_model::assemble::Lines;
use occ_model::compiler::lines::{source_lines, LifeRanges, LineInfo, SourceLines};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The version of the record format and of the analysis; a new one
/// invalidates every record (2: a location carries over into the next
/// section, so records of 1 may lack a function's lines; 3: a record holds
/// the wanted kernels only; 4: the line table read from the cubin, one
/// nvdisasm run).
const FORMAT: u32 = 4;

/// The folder of the records, below `$OUT_DIR/occ/cache`.
const DIR: &str = "lines";

/// One cubin's functions by symbol, or why nvdisasm could not read it.
type Functions = Result<BTreeMap<String, SourceLines>, String>;

/// The functions of one cubin, by symbol, under the key they were made with.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    format: u32,
    key: String,
    functions: BTreeMap<String, SourceLines>,
}

/// What the stage needs of the build.
pub(crate) struct Settings<'a> {
    /// The crate root: files below it are named relative to it.
    pub root: &'a Path,
    /// `$OUT_DIR/occ`.
    pub out: &'a Path,
    /// This part's name (`Build::name`): its records are its own.
    pub part: &'a str,
    /// How many nvdisasm runs at once (besides the jobserver).
    pub parallel: usize,
    /// What runs nvdisasm.
    pub programs: &'a dyn Programs,
}

/// Stage 5½: the source lines of the kernels `wanted` (by cubin: those
/// whose registers matter, [`occ_model::assemble::Judged::lines_wanted`]);
/// nvdisasm reads only those kernels' code (`-fun`), and a cubin with
/// none is not disassembled at all. Without nvdisasm, or where it fails,
/// leaves them out with one note each.
pub(crate) fn lines(
    nvcc: &Nvcc,
    top: Option<&Path>,
    settings: &Settings<'_>,
    wanted: &BTreeMap<String, BTreeSet<String>>,
    directives: &mut Directives,
) -> Lines {
    let cubins: Vec<String> = wanted.keys().cloned().collect();
    let dir = settings.out.join("cache").join(DIR);
    remove_stale(&dir, settings.part, &cubins);
    if cubins.is_empty() {
        return Lines::new();
    }
    let places = nvdisasm_places(nvcc, top);
    let Some(tool) = places.iter().find(|p| p.is_file()).cloned() else {
        // Installed later, nvdisasm appears in one of these folders: cargo
        // reruns the script when a watched folder's files change.
        for dir in places.iter().filter_map(|p| p.parent()) {
            if dir.is_dir() {
                directives.watch(dir);
            }
        }
        directives.warn(format!(
            "occ: no nvdisasm beside {} (the toolkit's disassembler), so spills and register \
             pressure are not located by source line; install it (`cargo occ toolkit install`, \
             or the nvidia-cuda-nvdisasm wheel of the same release as nvcc)",
            nvcc.path.display()
        ));
        return Lines::new();
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        directives.warn(format!(
            "occ: cannot create {} ({e}); spills are not located by source line",
            dir.display()
        ));
        return Lines::new();
    }
    // A replaced nvdisasm reruns the script (its records are keyed by it).
    directives.watch(&tool);
    let identity = identity(&tool, settings.root);
    let results = run_all(&tool, &identity, settings, &dir, wanted);
    let mut failed: Vec<String> = Vec::new();
    let mut by_cubin: BTreeMap<&str, BTreeMap<String, SourceLines>> = BTreeMap::new();
    for (cubin, result) in cubins.iter().zip(results) {
        match result {
            Ok(functions) => {
                by_cubin.insert(cubin, functions);
            }
            Err(why) => failed.push(format!("{cubin}: {why}")),
        }
    }
    // Only the kernels located (a record read from a whole cubin, when
    // `-fun` could not name them, holds every function).
    let mut lines = Lines::new();
    for (cubin, functions) in by_cubin {
        let Some(names) = wanted.get(cubin) else {
            continue;
        };
        for (name, found) in functions {
            if names.contains(&name) {
                lines.insert((cubin.to_string(), name), found);
            }
        }
    }
    if let Some(first) = failed.first() {
        let more = match failed.len() - 1 {
            0 => String::new(),
            n => format!(" (and {n} more cubins)"),
        };
        directives.warn(format!(
            "occ: nvdisasm could not read {first}{more}; their spills are not located by source line"
        ));
    }
    lines
}

/// Where the toolkit's nvdisasm is looked for, in order: its `bin` folder,
/// then beside nvcc.
/// The nvdisasm this stage would run, if there is one.
pub(crate) fn tool(nvcc: &Nvcc, top: Option<&Path>) -> Option<PathBuf> {
    nvdisasm_places(nvcc, top).into_iter().find(|p| p.is_file())
}

fn nvdisasm_places(nvcc: &Nvcc, top: Option<&Path>) -> Vec<PathBuf> {
    top.map(|t| t.join("bin").join(exe("nvdisasm")))
        .into_iter()
        .chain([nvcc.beside("nvdisasm")])
        .collect()
}

/// What every record's key shares: the format, nvdisasm as it is, and the
/// root as spelled, made absolute and resolved (the cubin names files by
/// the folder nvcc ran in, as the OS resolved it).
fn identity(tool: &Path, root: &Path) -> Identity {
    let target = std::fs::canonicalize(tool).unwrap_or_else(|_| tool.to_path_buf());
    let mut roots = vec![root.display().to_string()];
    for r in [
        std::path::absolute(root).ok(),
        std::fs::canonicalize(root).ok(),
    ]
    .into_iter()
    .flatten()
    {
        let r = r.display().to_string();
        if !roots.contains(&r) {
            roots.push(r);
        }
    }
    // The record keeps what occ-model read from nvdisasm's text: another
    // occ-model's reading is another result.
    let key = format!(
        "{FORMAT} {} {} {} {:?} {roots:?}",
        occ_model::CODE,
        tool.display(),
        target.display(),
        Stat::of(&target)
    );
    Identity { key, roots }
}

struct Identity {
    key: String,
    roots: Vec<String>,
}

/// Every cubin's functions, in the order of `wanted`'s keys: from its
/// record, or from two nvdisasm runs over the wanted kernels' code (each
/// run its own job under cargo's jobserver, so one cubin's two run at
/// once), then recorded.
fn run_all(
    tool: &Path,
    identity: &Identity,
    settings: &Settings<'_>,
    dir: &Path,
    wanted: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<Functions> {
    let cubins: Vec<&String> = wanted.keys().collect();
    let mut results: Vec<Option<Functions>> = Vec::with_capacity(cubins.len());
    // (index, record path, key) of the cubins to disassemble, the `-fun`
    // list of each (`None`: the whole cubin) and its line table when occ
    // reads it from the cubin (`None`: `nvdisasm -g` prints it).
    let mut pending: Vec<(usize, PathBuf, String)> = Vec::new();
    let mut only: Vec<Option<String>> = vec![None; cubins.len()];
    let mut tables: Vec<Option<LineInfo>> = vec![None; cubins.len()];
    for (i, (cubin, kernels)) in wanted.iter().enumerate() {
        let record = dir.join(format!("{}.json", stem(cubin)));
        match std::fs::read(settings.out.join(cubin)) {
            Err(e) => results.push(Some(Err(format!("cannot read it ({e})")))),
            Ok(bytes) => {
                let names: Vec<&str> = kernels.iter().map(String::as_str).collect();
                let key = cache::hash_bytes(&[
                    identity.key.as_bytes(),
                    &bytes,
                    names.join("\n").as_bytes(),
                ]);
                match cached(&record, &key) {
                    Some(functions) => results.push(Some(Ok(functions))),
                    None => {
                        results.push(None);
                        only[i] = function_list(&bytes, &names);
                        tables[i] = LineInfo::from_cubin(&bytes);
                        pending.push((i, record, key));
                    }
                }
            }
        }
    }
    // One run per cubin whose line table occ read, else two.
    let runs: Vec<(usize, Pass)> = pending
        .iter()
        .flat_map(|(i, _, _)| match tables[*i] {
            Some(_) => vec![(*i, Pass::Both)],
            None => vec![(*i, Pass::Lines), (*i, Pass::Pressure)],
        })
        .collect();
    let mut readings = pool(settings.parallel, &runs, |(i, pass)| {
        let path = settings.out.join(cubins[*i]);
        pass.run(
            settings.programs,
            tool,
            &path,
            only[*i].as_deref(),
            &tables[*i],
        )
    })
    .into_iter();
    let roots: Vec<&str> = identity.roots.iter().map(String::as_str).collect();
    for (i, record_path, key) in pending {
        let (lines, pressure) = match tables[i] {
            Some(_) => match readings.next() {
                Some(Ok(Reading::Both(info, ranges))) => (
                    Some(Ok(Reading::Lines(info))),
                    Some(Ok(Reading::Pressure(ranges))),
                ),
                other => (other, None),
            },
            None => (readings.next(), readings.next()),
        };
        let functions = match (lines, pressure) {
            (Some(Ok(Reading::Lines(info))), Some(Ok(Reading::Pressure(ranges)))) => {
                let record = Record {
                    format: FORMAT,
                    key,
                    functions: source_lines(&info, &ranges, &roots),
                };
                // A record that cannot be written costs a rerun next
                // time, nothing more.
                if let Ok(text) = serde_json::to_vec(&record) {
                    let _ = write_atomic(&record_path, &text);
                }
                Ok(record.functions)
            }
            (Some(Err(e)), _) | (_, Some(Err(e))) => Err(e),
            _ => Err("no result (a worker thread panicked)".into()),
        };
        results[i] = Some(functions);
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err("no result".into())))
        .collect()
}

/// `nvdisasm -fun`'s argument for `names` in `cubin`: their symbol indices,
/// comma-separated; `None` (disassemble it all) when a name is not a
/// function symbol of its table. nvdisasm prints a `//## File` line at
/// each function it prints whose location differs from the last it
/// printed, so the reading is the same as over the whole cubin
/// (`tests/tests/it/lines.rs` compares the two).
fn function_list(cubin: &[u8], names: &[&str]) -> Option<String> {
    let indices = occ_model::compiler::lines::function_indices(cubin)?;
    let list: Option<Vec<String>> = names
        .iter()
        .map(|n| indices.get(*n).map(u32::to_string))
        .collect();
    list.map(|l| l.join(","))
}

/// The functions of the record at `path`, when its key is `key`.
fn cached(path: &Path, key: &str) -> Option<BTreeMap<String, SourceLines>> {
    let text = std::fs::read(path).ok()?;
    let record = serde_json::from_slice::<Record>(&text).ok()?;
    (record.format == FORMAT && record.key == key).then_some(record.functions)
}

/// The nvdisasm runs over a cubin: one, [`Pass::Both`], where occ reads
/// the line table from the cubin ([`LineInfo::from_cubin`]), else two
/// (`-plr` ignores `-g`).
#[derive(Debug, Clone, Copy)]
enum Pass {
    /// `-c -g`: lines, spill marks, branches.
    Lines,
    /// `-c -plr -lrm count`: live registers.
    Pressure,
    /// `-c -plr -lrm count` read twice: spill marks and branches into the
    /// cubin's line table, and live registers.
    Both,
}

/// What one run read.
enum Reading {
    Lines(LineInfo),
    Pressure(LifeRanges),
    Both(LineInfo, LifeRanges),
}

impl Pass {
    /// Runs this pass over `cubin`, over only the functions of `only` (a
    /// `-fun` list) when given; [`Pass::Both`] fills `table` (the cubin's
    /// line table), which it needs.
    fn run(
        self,
        programs: &dyn Programs,
        tool: &Path,
        cubin: &Path,
        only: Option<&str>,
        table: &Option<LineInfo>,
    ) -> Result<Reading, String> {
        let fun: Vec<&str> = only.map(|list| vec!["-fun", list]).unwrap_or_default();
        match self {
            Pass::Lines => {
                let mut info = LineInfo::default();
                let args = [&["-c", "-g"][..], &fun].concat();
                disassemble(programs, tool, cubin, &args, &mut |l| info.line(l))?;
                Ok(Reading::Lines(info))
            }
            Pass::Pressure => {
                let mut ranges = LifeRanges::default();
                let args = [&["-c", "-plr", "-lrm", "count"][..], &fun].concat();
                disassemble(programs, tool, cubin, &args, &mut |l| ranges.line(l))?;
                Ok(Reading::Pressure(ranges))
            }
            Pass::Both => {
                let mut info = table
                    .clone()
                    .ok_or_else(|| "no line table read from the cubin".to_string())?;
                let mut ranges = LifeRanges::default();
                let args = [&["-c", "-plr", "-lrm", "count"][..], &fun].concat();
                disassemble(programs, tool, cubin, &args, &mut |l| {
                    info.line(l);
                    ranges.line(l);
                })?;
                Ok(Reading::Both(info, ranges))
            }
        }
    }
}

/// `f` over `items` on up to `parallel` threads, in order; the first thread
/// runs on the build script's own jobserver token, the others each take
/// one per item, before it (`tokens`).
fn pool<T: Sync, R: Send>(
    parallel: usize,
    items: &[T],
    f: impl Fn(&T) -> Result<R, String> + Sync,
) -> Vec<Result<R, String>> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<R, String>>>> =
        Mutex::new((0..items.len()).map(|_| None).collect());
    // SAFETY: cargo passes the jobserver's file descriptors to the build
    // script; nothing in this process closes them (the client opens its own).
    let jobserver = unsafe { jobserver::Client::from_env() };
    let workers = parallel.clamp(1, items.len().max(1));
    let tokens = crate::leaf::tokens::Tokens::new(jobserver.as_ref());
    std::thread::scope(|scope| {
        for worker in 0..workers {
            let (next, results, tokens, f) = (&next, &results, &tokens, &f);
            scope.spawn(move || loop {
                let Some(_token) = tokens.before_next(worker, next, items.len()) else {
                    break;
                };
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(item) = items.get(i) else { break };
                let result = f(item);
                if let Ok(mut slots) = results.lock() {
                    slots[i] = Some(result);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err("no result (a worker thread panicked)".into())))
        .collect()
}

/// Runs `nvdisasm <args> <cubin>`, handing each line of its output to
/// `line` as it comes (the text can be ten times the cubin:
/// [`Programs::lines`]).
fn disassemble(
    programs: &dyn Programs,
    tool: &Path,
    cubin: &Path,
    args: &[&str],
    line: &mut dyn FnMut(&str),
) -> Result<(), String> {
    let mut cmd = Cmd::new(tool);
    cmd.args(args).arg(cubin);
    let output = programs
        .lines(&cmd, line)
        .map_err(|e| format!("cannot run {} ({e})", tool.display()))?;
    if !output.status.success() {
        let errors = String::from_utf8_lossy(&output.stderr);
        let said = errors.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(format!(
            "nvdisasm {} exited with {}: {said}",
            args.join(" "),
            output.status
        ));
    }
    Ok(())
}

/// `kernels_k.sm_80.cubin` → `kernels_k.sm_80`.
fn stem(cubin: &str) -> &str {
    cubin.strip_suffix(".cubin").unwrap_or(cubin)
}

/// Removes this part's records of cubins that are no longer built.
fn remove_stale(dir: &Path, part: &str, cubins: &[String]) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(record) = name.strip_suffix(".json") else {
            // `<record>.json.tmp<pid>.<n>`: a temporary file of a killed build.
            let pid = name
                .rsplit_once(".tmp")
                .and_then(|(_, rest)| rest.split_once('.'))
                .and_then(|(pid, _)| pid.parse::<u32>().ok());
            if pid.is_some_and(|pid| pid != std::process::id() && gone(pid)) {
                let _ = std::fs::remove_file(entry.path());
            }
            continue;
        };
        if crate::stage::parts::owns(part, record) && !cubins.iter().any(|c| stem(c) == record) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether no process `pid` runs (known on Linux only: elsewhere a temporary
/// file stays until `cargo clean`).
fn gone(pid: u32) -> bool {
    cfg!(target_os = "linux") && !Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_of_cubins_no_longer_built_go() {
        let dir = std::env::temp_dir().join(format!("occ-lines-stale-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create");
        // pid 4194304 is above Linux's pid_max: no such process.
        for name in [
            "a.sm_80.json",
            "b.sm_80.json",
            "lib@c.sm_80.json",
            "a.sm_80.json.tmp4194304.2",
        ] {
            std::fs::write(dir.join(name), "{}").expect("write");
        }
        remove_stale(&dir, "", &["a.sm_80.cubin".to_string()]);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .expect("list")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        // Another part's record stays.
        assert_eq!(left, ["a.sm_80.json", "lib@c.sm_80.json"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
