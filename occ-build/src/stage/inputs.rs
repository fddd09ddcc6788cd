//! Stage 1: everything a build starts from, resolved once: the crate root,
//! `$OUT_DIR/occ`, the target archs, the `.cu` files, the lock, and each
//! setting read from the environment (all through [`Env`], so each is
//! watched).
//!
//! Archs come from `OCC_ARCHS`, else `CUDA_COMPUTE_CAP`, else `.arch()`, then
//! take the `.arch_specific`/`.arch_family` suffixes (`targets`, also
//! `Build::resolved_archs`); sources are `.file()` and `.glob()` less
//! `.exclude()`. A crate built as a dependency ([`dependency`]) is known by
//! where cargo put it, which a copy does not carry: below `$CARGO_HOME`'s
//! `registry/src` or `git/checkouts`, or in a folder a cargo config names
//! as a `directory` source (`cargo vendor`).

use crate::builder::Build;
use crate::env::Env;
use crate::leaf::directives::Directives;
use crate::leaf::error::{Error, Result};
use crate::leaf::files::relative;
use occ_model::model::arch;
use occ_model::schema::lock::{Lock, DEFAULT_LOCK_FILE};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

impl Build {
    /// The archs this build will compile for, before compiling: `OCC_ARCHS`,
    /// else `CUDA_COMPUTE_CAP`, else [`Build::arch`], with the suffixes of
    /// [`Build::arch_specific`] and [`Build::arch_family`] applied, exactly
    /// as the build computes them (and with the same errors). Prints
    /// `cargo::rerun-if-env-changed` for each variable read, so a build
    /// script that decides on the list is rerun when it changes. Use it to
    /// adapt the build to its archs:
    ///
    /// ```no_run
    /// let mut build = occ_build::Build::new();
    /// build.glob("kernels/*.cu").archs(["sm_75", "sm_90"]);
    /// let archs = build.resolved_archs().expect("valid archs");
    /// if archs.iter().any(|t| t.cc < 80) {
    ///     build.define("NO_BF16_KERNEL", None);
    /// }
    /// build.compile();
    /// ```
    pub fn resolved_archs(&self) -> crate::Result<Vec<arch::Target>> {
        let env = Env::new();
        let archs = targets(self, &env);
        Directives {
            rerun_if_env_changed: env.read_vars().into_iter().collect(),
            ..Directives::default()
        }
        .print();
        Ok(archs?)
    }
}

/// A build's resolved inputs.
#[derive(Debug)]
pub(crate) struct Inputs {
    /// The crate root: relative paths start here, and nvcc runs here.
    pub root: PathBuf,
    /// `$OUT_DIR/occ`.
    pub out_dir: PathBuf,
    /// The cargo package (`CARGO_PKG_NAME`).
    pub package: String,
    /// Target archs, canonical, in build order.
    pub archs: Vec<String>,
    /// `.cu` files relative to the root (`/` separators), in build order.
    pub sources: Vec<String>,
    /// The lock file (read or not).
    pub lock_path: PathBuf,
    /// The committed lock's text, when there is one ([`Inputs::parse_lock`]
    /// parses it).
    pub lock_text: Option<String>,
    /// `OCC_BLESS`: write the lock.
    pub bless: bool,
    /// `CI`: never write the lock, and never stand on it by accident.
    pub ci: bool,
    /// Whether every cached job result is proven by preprocessing before
    /// it is used (`OCC_CACHE=verify`; always under `CI`, where a cached
    /// target folder feeds the gate): the job cache's module doc.
    pub verify: bool,
    /// The crate is another crate's dependency (from a registry, git or a
    /// vendor folder): its lock is its authors' gate, never its
    /// dependents'. The evidence, in words ([`dependency`]).
    pub dependency: Option<String>,
    /// Why not to look for nvcc (`DOCS_RS`, `OCC_NO_NVCC`), if so.
    pub no_nvcc: Option<&'static str>,
    /// `NVCC_CCBIN`: the host compiler for nvcc.
    pub ccbin: Option<String>,
    /// The variables nvcc reads by itself (`NVCC_APPEND_FLAGS`,
    /// `NVCC_PREPEND_FLAGS`, `NVCC_CCBIN`) and those of the host compiler it
    /// preprocesses with (`CPATH`, `CPLUS_INCLUDE_PATH`, ...): watched, part
    /// of every job's key, and passed to nvcc exactly as read.
    pub nvcc_vars: crate::leaf::cache::NvccVars,
    /// How many nvcc jobs may run at once (besides the jobserver).
    pub parallel: usize,
    /// `PATH`, where nvcc finds the host compiler and its tools.
    pub path_var: Option<String>,
    /// The launches of `Build::launch`, `(pattern, launch)` in order.
    pub launches: Vec<(String, occ_model::model::declared::Launch)>,
    /// The dynamic shared memory of `Build::dynamic_smem`, `(pattern,
    /// rule)` in order.
    pub dynamic_smem: Vec<(String, occ_model::model::suggest::DynamicSmem)>,
    /// GitHub Actions' settings, under `GITHUB_ACTIONS=true`.
    pub github: Option<crate::github::Actions>,
    /// What starts the build's programs ([`Env::with_programs`]).
    pub programs: std::sync::Arc<dyn crate::process::Programs>,
}

/// Resolves a build's inputs; watches the sources and the lock. Long
/// because it is a list: one short block per input, in the order each
/// needs the ones before it.
pub(crate) fn resolve(build: &Build, env: &Env, directives: &mut Directives) -> Result<Inputs> {
    let root = match &build.root {
        Some(root) => root.clone(),
        None => env_path(env, "CARGO_MANIFEST_DIR")?,
    };
    let out_dir = match &build.out_dir {
        Some(dir) => dir.clone(),
        None => env_path(env, "OUT_DIR")?,
    }
    .join("occ");
    let package = env.var("CARGO_PKG_NAME").unwrap_or_default();
    let archs = archs(build, env)?;
    let sources = sources(build, &root, &out_dir, directives)?;
    // Read these now so that they are watched even when nvcc is missing.
    let ccbin = env.var("NVCC_CCBIN");
    // nvcc's own variables, and the host compiler's that change what it
    // finds (nvcc preprocesses with it); PATH picks the programs nvcc runs.
    let nvcc_vars = [
        "NVCC_APPEND_FLAGS",
        "NVCC_PREPEND_FLAGS",
        "NVCC_CCBIN",
        "CPATH",
        "CPLUS_INCLUDE_PATH",
        "C_INCLUDE_PATH",
        "GCC_EXEC_PREFIX",
        "COMPILER_PATH",
    ]
    .into_iter()
    .map(|name| (name.to_string(), env.var(name)))
    .collect();
    let lock_path = root.join(
        build
            .lock_file
            .as_deref()
            .unwrap_or(Path::new(DEFAULT_LOCK_FILE)),
    );
    let bless = env.flag("OCC_BLESS");
    let ci = crate::env::is_ci(env);
    let verify = cache_mode(env, ci, directives)?;
    let dependency = dependency(env, &root);
    if let (Some(evidence), true) = (&dependency, ci) {
        directives.warn(format!(
            "occ: {package} is built as a dependency ({evidence}): its occ.lock is its own CI's \
             gate and is not checked here"
        ));
    }
    let docs_rs = env.var_os("DOCS_RS").is_some();
    let no_nvcc = env.flag("OCC_NO_NVCC");
    let no_nvcc = if docs_rs {
        Some("DOCS_RS is set")
    } else if no_nvcc {
        Some("OCC_NO_NVCC is set")
    } else {
        None
    };
    let lock_text = match std::fs::read_to_string(&lock_path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io(format!("cannot read {}", lock_path.display()), e)),
    };
    if lock_text.is_some() {
        directives.watch(&lock_path);
    } else {
        // A missing file would rerun the build script on every build:
        // watch the stamp `cargo occ bless` touches when it writes the lock.
        // Made with an mtime of long ago: a watched file newer than the
        // script's run would rerun the script once more for nothing.
        let stamp = out_dir.join(crate::build_state::BLESS_STAMP);
        let made = stamp.is_file()
            || (std::fs::create_dir_all(&out_dir).is_ok()
                && std::fs::File::create(&stamp)
                    .and_then(|f| f.set_modified(std::time::SystemTime::UNIX_EPOCH))
                    .is_ok());
        if made {
            directives.watch(&stamp);
        }
    }
    let parallel = env
        .var("NUM_JOBS")
        .and_then(|n| n.parse::<usize>().ok())
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1);
    Ok(Inputs {
        root,
        out_dir,
        package,
        archs,
        sources,
        lock_path,
        lock_text,
        bless,
        ci,
        verify,
        dependency,
        no_nvcc,
        ccbin,
        nvcc_vars,
        parallel,
        path_var: env.var("PATH"),
        launches: build.launches.clone(),
        dynamic_smem: build.dynamic_smem.clone(),
        github: crate::github::Actions::from_env(env),
        programs: env.programs(),
    })
}

/// Whether every cached result is proven (`OCC_CACHE`: `verify`, or
/// `direct`, the default; under `CI` always, and a `direct` says so).
fn cache_mode(env: &Env, ci: bool, directives: &mut Directives) -> Result<bool> {
    match env.var("OCC_CACHE").map(|v| v.trim().to_ascii_lowercase()) {
        None => Ok(ci),
        Some(v) if v == "verify" => Ok(true),
        Some(v) if v == "direct" => {
            if ci {
                directives.warn(
                    "occ: OCC_CACHE=direct is ignored because CI is set: every cached result is \
                     proven by preprocessing",
                );
            }
            Ok(ci)
        }
        Some(value) => Err(Error::CacheMode { value }),
    }
}

/// Whether the crate at `root` is built as another crate's dependency,
/// and the evidence: where cargo put it, which a copy of the crate cannot
/// carry by accident (a stray `.cargo-ok` or `.cargo-checksum.json`, as a
/// fork copied out of the registry has, is no evidence). Cargo unpacks a
/// registry crate below `$CARGO_HOME/registry/src` and checks out a git
/// one below `$CARGO_HOME/git/checkouts`; `cargo vendor` puts each crate
/// in a folder that a cargo config (`.cargo/config.toml` in a folder above
/// it, or `$CARGO_HOME/config.toml`) names as a `directory` source. A
/// build script is told nothing else (`CARGO_PRIMARY_PACKAGE` is rustc's).
pub(crate) fn dependency(env: &Env, root: &Path) -> Option<String> {
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let root = canonical(root);
    let cargo_home = env
        .var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env.var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .map(|h| canonical(&h));
    if let Some(home) = &cargo_home {
        for (place, what) in [
            ("registry/src", "unpacked by cargo from a registry"),
            ("git/checkouts", "checked out by cargo from git"),
        ] {
            let dir = canonical(&home.join(place));
            if root.starts_with(&dir) {
                return Some(format!("{what} into {}", dir.display()));
            }
        }
    }
    let configs = root
        .ancestors()
        .skip(1)
        .flat_map(|dir| {
            ["config.toml", "config"].map(|name| (dir.to_path_buf(), dir.join(".cargo").join(name)))
        })
        // Cargo reads a config's relative paths from the folder above the
        // one that holds it: `<dir>` for `<dir>/.cargo/config.toml`, and
        // the folder above `$CARGO_HOME` for `$CARGO_HOME/config.toml`.
        .chain(cargo_home.iter().map(|h| {
            let base = h.parent().unwrap_or(h).to_path_buf();
            (base, h.join("config.toml"))
        }));
    for (base, config) in configs {
        let Ok(text) = std::fs::read_to_string(&config) else {
            continue;
        };
        for folder in directory_sources(&text) {
            if root.parent() == Some(canonical(&base.join(folder)).as_path()) {
                return Some(format!(
                    "vendored: {} names its folder as a directory source",
                    config.display()
                ));
            }
        }
    }
    None
}

/// The folders of the `directory` keys of a cargo config's text (source
/// replacement, as `cargo vendor` prints it), in every form TOML allows:
/// `directory = "vendor"` under `[source.x]`, `x = { directory = "vendor" }`
/// and `source.x.directory = "vendor"`. A text scan, not a TOML parser
/// (which a build script would pay for): a `directory` key anywhere counts,
/// and a false match can only make a crate in that very folder a
/// dependency.
fn directory_sources(config: &str) -> Vec<&str> {
    let mut folders = Vec::new();
    for line in config.lines() {
        let line = line.split('#').next().unwrap_or("");
        for (at, _) in line.match_indices("directory") {
            let before = line[..at].chars().next_back();
            if before.is_some_and(|c| !matches!(c, ' ' | '\t' | '{' | ',' | '.')) {
                continue;
            }
            let rest = line[at + "directory".len()..].trim_start();
            let Some(value) = rest.strip_prefix('=') else {
                continue;
            };
            let value = value.trim_start();
            let Some(quote) = value.chars().next().filter(|q| matches!(q, '"' | '\'')) else {
                continue;
            };
            if let Some(end) = value[1..].find(quote) {
                let folder = &value[1..1 + end];
                if !folder.is_empty() {
                    folders.push(folder);
                }
            }
        }
    }
    folders
}

/// The environment variables `nvcc`'s `nvcc.profile` can take a value from
/// (`nvcc_text::profile_variables`): the profile beside nvcc, as found and
/// through its links. A wrapper script given as `NVCC` whose real nvcc lies
/// elsewhere is seen through `--dryrun` by the toolkit's identity, but its
/// profile's variables are not read here.
fn profile_variables(nvcc: &crate::toolkit::Nvcc) -> Vec<String> {
    let mut dirs = vec![nvcc.path.clone()];
    dirs.extend(std::fs::canonicalize(&nvcc.path).ok());
    let mut names: Vec<String> = dirs
        .iter()
        .filter_map(|p| std::fs::read_to_string(p.with_file_name("nvcc.profile")).ok())
        .flat_map(|text| crate::leaf::nvcc_text::profile_variables(&text))
        .collect();
    names.sort();
    names.dedup();
    names
}

impl Inputs {
    /// The inputs with the variables `nvcc`'s profile expands added to
    /// [`Inputs::nvcc_vars`] (read through `env`, so watched):
    /// `INCLUDES += "-I$(MY_INC)"` makes `MY_INC` part of every job's key,
    /// as nvcc's own variables are. Known once nvcc is, so a step of its
    /// own; it takes the inputs and gives them back, so no stage sees them
    /// half made.
    pub fn with_profile_vars(mut self, env: &Env, nvcc: &crate::toolkit::Nvcc) -> Self {
        for name in profile_variables(nvcc) {
            if !self.nvcc_vars.iter().any(|(n, _)| *n == name) {
                let value = env.var(&name);
                self.nvcc_vars.push((name, value));
            }
        }
        self
    }

    /// The committed lock, parsed from [`Inputs::lock_text`] (none without
    /// one). Called once the memo, which compares bytes, missed (a big lock
    /// costs a build script at opt-level 0 a good part of a second to
    /// parse); what needs the lock (its measurements, the baseline) is
    /// given it by the caller, so no stage can read a lock not yet parsed.
    pub fn parse_lock(&self) -> Result<Option<Lock>> {
        self.lock_text
            .as_deref()
            .map(|text| Lock::from_text(text, &self.lock_path))
            .transpose()
            .map_err(Into::into)
    }

    /// A path for messages: relative to the crate root when inside it.
    pub fn display(&self, path: &Path) -> String {
        relative(&self.root, path)
    }
}

/// The target archs: `OCC_ARCHS`, else `CUDA_COMPUTE_CAP`, else `.arch()`,
/// with the suffixes of [`Build::arch_specific`] and [`Build::arch_family`]
/// applied, each once, in the order given.
fn archs(build: &Build, env: &Env) -> Result<Vec<String>> {
    Ok(targets(build, env)?
        .iter()
        .map(arch::Target::nvcc_name)
        .collect())
}

/// [`archs`] as parsed targets (what [`Build::resolved_archs`] returns).
pub(crate) fn targets(build: &Build, env: &Env) -> Result<Vec<arch::Target>> {
    // Read both, so that both are watched.
    let occ_archs = env.var("OCC_ARCHS");
    let compute_cap = env.var("CUDA_COMPUTE_CAP");
    let (origin, list): (&str, Vec<String>) = if let Some(v) = occ_archs {
        ("OCC_ARCHS", split_list(&v))
    } else if let Some(v) = compute_cap {
        ("CUDA_COMPUTE_CAP", split_list(&v))
    } else {
        (".arch()", build.archs.clone())
    };
    if list.is_empty() {
        return Err(Error::NoArch);
    }
    let parse = |origin: &str, name: &str| {
        arch::parse_target(name).map_err(|_| Error::UnknownArch {
            origin: origin.to_string(),
            name: name.to_string(),
            known: arch::all().iter().map(|a| a.name.to_string()).collect(),
        })
    };
    // The suffix policy: compute capability -> variant (the last one given wins).
    let mut policy: Vec<(u32, arch::Variant)> = Vec::new();
    for (name, variant) in &build.arch_variants {
        let target = parse(variant_setter(*variant), name)?;
        if !target.has_variant(*variant) {
            return Err(Error::NoArchVariant {
                arch: name.clone(),
                variant: variant_suffix(*variant).to_string(),
            });
        }
        policy.retain(|(cc, _)| *cc != target.cc);
        policy.push((target.cc, *variant));
    }
    let mut out: Vec<arch::Target> = Vec::new();
    for name in list {
        // A virtual arch has no ptxas run, so nothing occ reports; nvcc
        // would be given the real arch of the same number instead.
        if name.trim().to_ascii_lowercase().starts_with("compute_") {
            return Err(Error::VirtualArch {
                origin: origin.to_string(),
                real: parse(origin, &name)?.nvcc_name(),
                name,
            });
        }
        let mut target = parse(origin, &name)?;
        if let Some((_, variant)) = policy.iter().find(|(cc, _)| *cc == target.cc) {
            // Checked above: the compute capability has the variant.
            target = target.with_variant(*variant).unwrap_or(target);
        }
        if !out.contains(&target) {
            out.push(target);
        }
    }
    Ok(out)
}

/// The setter that states a suffix policy, for messages.
fn variant_setter(variant: arch::Variant) -> &'static str {
    match variant {
        arch::Variant::Family => ".arch_family()",
        _ => ".arch_specific()",
    }
}

/// The suffix of a variant (`a`, `f`), for messages.
pub(crate) fn variant_suffix(variant: arch::Variant) -> &'static str {
    match variant {
        arch::Variant::Base => "",
        arch::Variant::Specific => "a",
        arch::Variant::Family => "f",
    }
}

/// The `.cu` files of `.file()` and `.glob()` (less `.exclude()`), each
/// once, relative to `root`; watches each file and each glob's folder (the
/// part of the pattern before its first wildcard, unless it holds
/// `out_dir`: that would rerun the build script on every build).
///
/// Long because files, globs and excludes are resolved, checked and watched in
/// one pass, with an error for each way a source can be wrong.
fn sources(
    build: &Build,
    root: &Path,
    out_dir: &Path,
    directives: &mut Directives,
) -> Result<Vec<String>> {
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut ordered: Vec<String> = Vec::new();
    let mut add = |rel: String| {
        if seen.insert(rel.clone()) {
            ordered.push(rel);
        }
    };
    // Every source path is checked once, here, where it enters the build:
    // it is written into kernels.rs, the lock, the reports and SARIF.
    for file in &build.files {
        let full = root.join(file);
        directives.watch(&full);
        let meta = std::fs::metadata(&full).map_err(|e| Error::MissingSource {
            path: file.clone(),
            reason: e.to_string(),
        })?;
        if !meta.is_file() {
            return Err(Error::MissingSource {
                path: file.clone(),
                reason: "not a file".into(),
            });
        }
        add(writable(root, &full)?);
    }
    let excludes = build
        .excludes
        .iter()
        .map(|pattern| {
            glob::Pattern::new(pattern).map_err(|e| Error::BadGlob {
                pattern: pattern.clone(),
                detail: e.to_string(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    // `*` stays within a folder; `**` crosses folders, as in `.glob()`.
    let options = glob::MatchOptions {
        require_literal_separator: true,
        ..glob::MatchOptions::new()
    };
    for pattern in &build.globs {
        // The crate's own folder may hold `[`, `*` or `?` (`brk[v2]/`): only
        // the pattern given is a pattern.
        let escaped_root = glob::Pattern::escape(&root.display().to_string());
        let full = Path::new(&escaped_root).join(pattern).display().to_string();
        let paths = glob::glob(&full).map_err(|e| Error::BadGlob {
            pattern: pattern.clone(),
            detail: e.to_string(),
        })?;
        let mut matched: Vec<PathBuf> = paths
            .filter_map(|p| p.ok())
            .filter(|p| p.is_file())
            .collect();
        matched.sort();
        // Watch the folder too, so a new file reruns the build (cargo scans
        // a watched folder recursively).
        let dir = literal_prefix(pattern);
        let dir = root.join(dir);
        if !out_dir.starts_with(&dir) {
            directives.watch(&dir);
        }
        let found = matched.len();
        let mut removed_by: Vec<String> = Vec::new();
        // An excluded file is never checked: `.exclude()` is how a crate
        // leaves out a file whose name occ refuses.
        let kept: Vec<&PathBuf> = matched
            .iter()
            .filter(|path| {
                let rel = relative(root, path);
                let hit = excludes
                    .iter()
                    .find(|e| e.matches_with(&rel, options))
                    .map(|e| e.as_str().to_string());
                if let Some(e) = hit {
                    if !removed_by.contains(&e) {
                        removed_by.push(e);
                    }
                    false
                } else {
                    true
                }
            })
            .collect();
        if kept.is_empty() {
            return Err(Error::NoSources {
                what: pattern.clone(),
                excluded: if found > 0 { removed_by } else { Vec::new() },
            });
        }
        for path in kept {
            let rel = writable(root, path)?;
            directives.watch(&root.join(&rel));
            add(rel);
        }
    }
    if ordered.is_empty() {
        return Err(Error::NoSources {
            what: String::new(),
            excluded: Vec::new(),
        });
    }
    Ok(ordered)
}

/// `path` relative to `root`, when occ may write it
/// (`occ_model::compiler::names::check`, and UTF-8); else
/// [`Error::UnwritableSource`].
fn writable(root: &Path, path: &Path) -> Result<String> {
    let rel = relative(root, path);
    let unwritable = |detail: String| Error::UnwritableSource {
        path: rel.clone(),
        detail,
    };
    let below = path.strip_prefix(root).unwrap_or(path);
    if below.to_str().is_none() {
        return Err(unwritable(format!("{rel:?} is not UTF-8")));
    }
    occ_model::compiler::names::check(&rel).map_err(|e| unwritable(e.to_string()))?;
    Ok(rel)
}

/// The folders of a glob pattern before its first wildcard component:
/// `src/**/*.cu` → `src`, `kernels/*.cu` → `kernels`, `*.cu` → ``.
fn literal_prefix(pattern: &str) -> PathBuf {
    let mut out = PathBuf::new();
    let components: Vec<&str> = pattern.split(['/', '\\']).collect();
    // The last component is a file pattern (or a file).
    for part in &components[..components.len().saturating_sub(1)] {
        if part.contains(['*', '?', '[']) {
            break;
        }
        out.push(part);
    }
    out
}

fn env_path(env: &Env, var: &str) -> Result<PathBuf> {
    env.var_os(var)
        .map(PathBuf::from)
        .ok_or_else(|| Error::Env {
            var: var.to_string(),
            detail: "is not set".into(),
        })
}

fn split_list(value: &str) -> Vec<String> {
    value
        .split([',', ' ', ';'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_source_is_read_in_every_toml_form() {
        let config =
            "[source.crates-io]\nreplace-with = \"v\"\n[source.v]\ndirectory = \"vendor\"\n\
            [source]\nw = { directory = 'third/party', other = 1 }\n\
            source.x.directory = \"/usr/share/cargo/registry\" # packaged\n\
            subdirectory = \"no\"\n# directory = \"commented\"\n";
        assert_eq!(
            directory_sources(config),
            ["vendor", "third/party", "/usr/share/cargo/registry"]
        );
    }
}
