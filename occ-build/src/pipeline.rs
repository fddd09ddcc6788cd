//! The build, stage by stage. This is the one place that says what a build
//! does and in which order; each stage's work is a function in the module
//! of `stage/` named for it (this module keeps only the glue between them:
//! the anchor header written before the jobs, the inputs watched after
//! them), the helpers they share are in `leaf/`, and ARCHITECTURE.md lists
//! the same stages.
//!
//! 1. `inputs::resolve`: paths, archs, sources, the lock's text, and the
//!    settings read from the environment (the lock is parsed,
//!    `Inputs::parse_lock`, once the memo of 3½ missed, and handed to the
//!    stages that read it: 5's measurements, 7½ and 8).
//! 2. `nvcc_or_lock::select`: a live nvcc, or the committed lock (and why);
//!    with nvcc, `Inputs::with_profile_vars` adds the variables its
//!    profile reads.
//! 3. `hostlib::prepare`, `plan::jobs`: one nvcc job per (source, arch),
//!    with its arguments (per source, for all archs, with the host
//!    compiler cc picked, when the build makes a host-code library).
//!    Then `compile::toolkit_id` identifies the toolkit (every program nvcc
//!    runs).
//!    3½. `memo::identity`, `memo::reuse`: when nothing the last finished
//!    build depended on changed (its memo, `stage/memo.rs`), the build prints
//!    that build's directives and stops here, having written nothing but
//!    its line in `parts.json`.
//! 4. `compile::run`: run the jobs or reuse their cached results; each
//!    job's contribution (`occ_model::compiler::analyze::contribution`, its kernels
//!    as the compiler left them) is worked out when it runs and kept with
//!    its record. A register cap that names a kernel is placed in its file
//!    by the contributions' kernel names (`plan::place_caps`, nothing
//!    judged), and the jobs whose caps moved run again.
//! 5. `device_code::listed`: the names of the device code to embed (a
//!    fatbin per file by default), which the manifest lists, and the check
//!    that `fatbinary` is there to make them (before the gates); then
//!    `assemble::judge`: the one assembly (`occ_model::assemble`) of the
//!    jobs' contributions, build.rs's launches, the lock's measurements
//!    and the other parts of this run (`parts::theirs`: with several
//!    `Build`s in one script, their kernels as `manifest.json` holds
//!    them), every identifier assigned once over them all.
//!    5½. `disasm::lines`: nvdisasm over the cubins of the kernels whose
//!    registers matter (cached by their bytes): where each spills and where
//!    its register pressure peaks, by source line; the manifest is
//!    finished with them (`Judged::finish`), once.
//! 6. `gate::spills`: spilling kernels fail a build that denies them (else
//!    the report of stage 9 names them), and `gate::measured` warns about
//!    measurements of another cubin; then `hostlib::archive` archives a
//!    host-code library's objects and adds its link directives.
//! 7. `device_code::write`: the device code 5 listed, made only now, once
//!    the gates of 6 passed (a build they fail leaves the last build's blobs
//!    beside the last build's `kernels.rs`); `outputs::write_all`:
//!    `manifest.json` and `kernels.rs` into `$OUT_DIR/occ`;
//!    `outputs::remove_stale`: files of jobs gone from the build.
//!    7½. `parts::record`: this part listed among the parts of this run
//!    in `parts.json`, and the candidate lock of them all.
//! 8. `gate::baseline`: compare with `occ.lock`; bless on request.
//! 9. `report::write`: the report (table, spills, every finding of the
//!    gates) to `report.txt`, also when a gate failed, and one warning when
//!    something is notable; then `memo::record` writes the memo.
//!
//! A build that stands on the lock (no nvcc) runs 1, 2, then
//! `device_code::without_files`, `assemble::from_lock` (the same assembly
//! over the lock's records, with the other parts of this run), and from
//! there the stages a build with nvcc runs on its manifest: the gates of 6,
//! `outputs::write_all`, `parts::record`, 8 and 9 (`baseline_and_report`),
//! so that it writes the same files (`tests/it/no_nvcc.rs` compares them).
//!
//! From the memo's miss (or a failure before it) to the end,
//! `$OUT_DIR/occ/status.json` says `running` (`build_state::mark`), so `cargo
//! occ` can tell a failed build's leftovers; a build its memo served
//! leaves it `finished`.

use crate::build_state::{self, BuildState};
use crate::builder::Build;
use crate::env::Env;
use crate::leaf::cache::ToolkitId;
use crate::leaf::directives::{self, Directives};
use crate::leaf::error::{Error, Result};
use crate::leaf::files;
use crate::leaf::job::{Job, JobOutput};
use crate::leaf::nvcc_text;
use crate::stage::hostlib::HostLib;
use crate::stage::inputs::Inputs;
use crate::stage::nvcc_or_lock::NvccOrLock;
use crate::stage::{
    assemble, compile, device_code, disasm, gate, hostlib, inputs, memo, nvcc_or_lock, outputs,
    parts, plan, report,
};
use crate::toolkit::Nvcc;
use occ_model::schema::lock::Lock;
use occ_model::schema::manifest::Manifest;
use std::path::PathBuf;

/// What a successful build produced.
#[derive(Debug, Clone)]
pub struct Report {
    /// The manifest written to `$OUT_DIR/occ/manifest.json` ([`Report::manifest`]).
    manifest: Made,
    /// `$OUT_DIR/occ`.
    pub out_dir: PathBuf,
    /// How many nvcc jobs ran (the rest were unchanged and reused).
    pub nvcc_runs: usize,
    /// The cargo directives of the build ([`Report::directives`]).
    directives: Directives,
}

/// The manifest a build made: in hand, or, for a build its memo served,
/// the text of `manifest.json` as the build checked it, parsed when first
/// asked for (a build script rarely asks; parsing costs more than the rest
/// of such a build).
#[derive(Debug, Clone)]
pub(crate) enum Made {
    /// Assembled by this build.
    Manifest(Manifest),
    /// `manifest.json`'s text, and the manifest once parsed.
    Text(String, std::sync::OnceLock<Manifest>),
}

impl Report {
    /// The manifest written to `$OUT_DIR/occ/manifest.json`. A build that
    /// changed nothing kept the manifest's text and parses it here, on the
    /// first call: an error only if that text cannot be read as a manifest.
    pub fn manifest(&self) -> crate::Result<&Manifest> {
        match &self.manifest {
            Made::Manifest(m) => Ok(m),
            Made::Text(text, parsed) => {
                if let Some(m) = parsed.get() {
                    return Ok(m);
                }
                let path = self.out_dir.join(occ_model::schema::manifest::FILE_NAME);
                let m = Manifest::from_json(text, &path).map_err(Error::from)?;
                Ok(parsed.get_or_init(|| m))
            }
        }
    }

    /// The cargo directives of the build: what [`Build::compile`] printed,
    /// and what a build script that calls [`Build::try_compile`] prints
    /// ([`Directives::print`]).
    pub fn directives(&self) -> &Directives {
        &self.directives
    }
}

impl Build {
    /// Runs the build in a build script: prints the cargo directives and, on
    /// failure, each line of the error as `cargo::error=` (cargo then fails the
    /// build). Never panics. Returns the report when the build succeeded.
    pub fn compile(&self) -> Option<Report> {
        let (result, directives) = self.run_with(&Env::new());
        directives.print();
        match result {
            Ok(report) => Some(report),
            Err(error) => {
                directives::print_error(&format!("occ: {error}"));
                None
            }
        }
    }

    /// Runs the build and returns what it made. Prints nothing: the cargo
    /// directives are in the report and, when the build failed, in the
    /// error ([`Report::directives`], [`Error::directives`](crate::Error::directives));
    /// print them, so that cargo reruns the script when a file or variable
    /// the build read changes.
    pub fn try_compile(&self) -> crate::Result<Report> {
        let (result, directives) = self.run_with(&Env::new());
        result.map_err(|e| crate::Error::new(e, directives))
    }

    /// Runs the build; returns its result and the cargo directives gathered,
    /// also on failure (the files and variables read are still watched, so
    /// fixing them reruns the build script). This is what [`Build::compile`]
    /// prints; occ's tests reach it through `Build::try_compile_with`
    /// (`with_env.rs`, with the feature `internal-test-env` only).
    pub(crate) fn run_with(&self, env: &Env) -> (Result<Report>, Directives) {
        let mut directives = Directives::default();
        let result = run(self, env, &mut directives);
        directives.rerun_if_env_changed.extend(env.read_vars());
        let result = result.map(|outcome| Report {
            manifest: outcome.manifest,
            out_dir: outcome.out_dir,
            nvcc_runs: outcome.nvcc_runs,
            directives: directives.clone(),
        });
        (result, directives)
    }
}

/// What a build made.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The manifest written to `$OUT_DIR/occ/manifest.json`.
    pub manifest: Made,
    /// `$OUT_DIR/occ`.
    pub out_dir: PathBuf,
    /// How many nvcc jobs ran (the rest were reused).
    pub nvcc_runs: usize,
}

/// Runs the build's stages in order, gathering cargo directives on the way.
pub(crate) fn run(build: &Build, env: &Env, directives: &mut Directives) -> Result<Outcome> {
    let inputs = inputs::resolve(build, env, directives)?;
    check_names(build, &inputs)?;
    let nvcc = match nvcc_or_lock::select(build, env, &inputs) {
        Ok(NvccOrLock::Nvcc(nvcc)) => nvcc,
        Ok(NvccOrLock::Lock {
            lock,
            reason,
            watch,
        }) => {
            build_state::mark(&inputs.out_dir, BuildState::Running)?;
            return from_lock(build, &inputs, &lock, &reason, &watch, directives);
        }
        Err(e) => return failed(&inputs, e),
    };
    let inputs = inputs.with_profile_vars(env, &nvcc);
    let planned = match plan(build, env, &inputs, &nvcc, directives) {
        Ok(planned) => planned,
        Err(e) => return failed(&inputs, e),
    };
    // Nothing changed since the last build that finished: stop here.
    let memo = memo::identity(build, &inputs, &nvcc, &planned.toolkit, &planned.jobs);
    if let Some(manifest) = memo::reuse(memo.as_ref(), build, env, &inputs, directives) {
        return Ok(Outcome {
            manifest: Made::Text(manifest, std::sync::OnceLock::new()),
            out_dir: inputs.out_dir,
            nvcc_runs: 0,
        });
    }
    build_state::mark(&inputs.out_dir, BuildState::Running)?;
    let lock = inputs.parse_lock()?;
    let compiled = compile(build, &inputs, &nvcc, planned)?;
    watch_inputs(&inputs, &compiled.outputs, directives);
    let others = parts::theirs(&inputs.out_dir, build.part())?;
    let manifest = assemble(
        build,
        &inputs,
        &nvcc,
        &compiled,
        lock.as_ref(),
        others.as_ref(),
        directives,
    )?;
    // The report holds every finding of the gates, also when one fails.
    let mut details = deny_spills(build, &inputs, &manifest, directives)?;
    gate::measured(&manifest, &inputs.sources, &mut details, directives);
    if let Some(host) = &compiled.host {
        hostlib::archive(
            host,
            &*inputs.programs,
            &compiled.toolkit.lib_dirs(),
            &compiled.outputs,
            directives,
        )?;
    }
    let view = outputs(build, &inputs, &nvcc, &compiled, &manifest, directives)?;
    baseline_and_report(
        build,
        &inputs,
        lock.as_ref(),
        &view,
        &manifest,
        details,
        directives,
    )?;
    let unstable = compiled.outputs.iter().any(|o| o.unstable.is_some());
    memo::record(memo.as_ref(), build, env, &inputs, unstable, directives);
    Ok(Outcome {
        manifest: Made::Manifest(manifest),
        out_dir: inputs.out_dir,
        nvcc_runs: compiled.outputs.iter().filter(|o| o.ran).count(),
    })
}

/// A build that failed before its memo was checked: marked `running`, as
/// any failed build is (its outputs may be an earlier build's).
fn failed<T>(inputs: &Inputs, error: Error) -> Result<T> {
    // The build's own error says more than one about the marker.
    let _ = build_state::mark(&inputs.out_dir, BuildState::Running);
    Err(error)
}

/// Checks the names a build gives before anything is written: the
/// host-code library's first (it says more than the part name it gives),
/// the part's, and that no other part of this process owns a source.
fn check_names(build: &Build, inputs: &Inputs) -> Result<()> {
    if let Some(name) = &build.static_lib {
        hostlib::check_name(name)?;
    }
    plan::check_part_name(build.part())?;
    parts::check_sources(&inputs.out_dir, build.part(), &inputs.root, &inputs.sources)
}

/// Stages 8 and 9, the same for a build with nvcc and one from the lock:
/// the candidate lock and `gate.json`, the comparison with the committed
/// lock (`lock`), the report (also when the gate failed), and the build's
/// state.
fn baseline_and_report(
    build: &Build,
    inputs: &Inputs,
    lock: Option<&Lock>,
    view: &parts::View,
    manifest: &Manifest,
    mut details: report::Details,
    directives: &mut Directives,
) -> Result<()> {
    let candidate = parts::candidate(view, manifest, build.part(), &inputs.sources, lock);
    let gated = gate::baseline(
        build,
        inputs,
        lock,
        &candidate,
        manifest,
        &mut details,
        directives,
    );
    report::write(manifest, &details, inputs, directives)?;
    if gated.is_err() && details.failed {
        parts::failed(&inputs.out_dir, build.part())?;
        // The numbers are this build's; only the gate said no.
        build_state::mark(&inputs.out_dir, BuildState::GateFailed)?;
    }
    gated?;
    build_state::mark(&inputs.out_dir, BuildState::Finished)?;
    Ok(())
}

/// A build without nvcc: the manifest from the committed lock, the device
/// code's blobs without files, and then what a build with nvcc writes
/// from its manifest: `manifest.json`, `kernels.rs`, the candidate lock,
/// `gate.json` and the report, by the same stages (the gates included:
/// the lock's spills and measurements, and the comparison with the lock,
/// which build.rs's launches of today may have changed).
fn from_lock(
    build: &Build,
    inputs: &Inputs,
    lock: &Lock,
    reason: &str,
    watch: &[PathBuf],
    directives: &mut Directives,
) -> Result<Outcome> {
    for place in watch {
        directives.watch(place);
    }
    if let Some(name) = &build.static_lib {
        directives.warn(format!(
            "occ: the host-code library lib{name}.a is not built without nvcc ({reason}); \
             checking and documenting the crate work, linking it does not"
        ));
    }
    // The lock's numbers are of the flags it records for this part: with
    // others, they may not be this build's (a lock from before occ kept
    // flags says nothing of them).
    if let Some(recorded) = lock.flags.as_ref().and_then(|f| f.get(build.part())) {
        let today = plan::recorded_flags(build, inputs);
        if *recorded != today {
            return Err(Error::LockFlagsDiffer {
                lock: inputs.display(&inputs.lock_path),
                part: build.part().to_string(),
                recorded: recorded.clone(),
                today,
            });
        }
    }
    let device_code =
        device_code::without_files(build.embed_mode(), &inputs.archs, &inputs.sources);
    let others = parts::theirs(&inputs.out_dir, build.part())?;
    let manifest = assemble::from_lock(
        inputs,
        lock,
        reason,
        &device_code,
        others.as_ref(),
        directives,
    )?;
    // The spills the lock records are denied as a build with nvcc denies
    // them.
    let mut details = deny_spills(build, inputs, &manifest, directives)?;
    gate::measured(&manifest, &inputs.sources, &mut details, directives);
    outputs::write_all(&manifest, &inputs.out_dir)?;
    let view = record_part(build, inputs)?;
    if let Some(note) = &view.clash {
        directives.warn(note.clone());
    }
    baseline_and_report(
        build,
        inputs,
        Some(lock),
        &view,
        &manifest,
        details,
        directives,
    )?;
    Ok(Outcome {
        manifest: Made::Manifest(manifest),
        out_dir: inputs.out_dir.clone(),
        nvcc_runs: 0,
    })
}

/// The jobs of stage 3, and the toolkit they run.
struct Planned {
    /// The register caps by file.
    caps: plan::Caps,
    /// Whether the caps came from the last build's manifest.
    caps_from_previous: bool,
    /// The host-code library's settings, when the build makes one.
    host: Option<HostLib>,
    /// The jobs.
    jobs: Vec<Job>,
    /// The toolkit's identity.
    toolkit: ToolkitId,
}

/// The jobs of stages 3 and 4 and what they made.
struct Compiled {
    /// The host-code library's settings, when the build makes one.
    host: Option<HostLib>,
    /// The jobs, as last planned.
    jobs: Vec<Job>,
    /// The toolkit's identity.
    toolkit: ToolkitId,
    /// Each job's outputs (per arch), in the order of `jobs`.
    outputs: Vec<JobOutput>,
}

/// Stage 3 and the toolkit's identity: the jobs, with their register
/// caps. Caps name files or kernels; a kernel is placed in its file by the
/// last build's manifest (read only when a cap is set), or by this build's
/// first pass of stage 4 (the kernels its jobs contributed).
fn plan(
    build: &Build,
    env: &Env,
    inputs: &Inputs,
    nvcc: &Nvcc,
    directives: &mut Directives,
) -> Result<Planned> {
    let previous = if build.max_registers.is_empty() {
        None
    } else {
        files::read_manifest(&inputs.out_dir.join(occ_model::schema::manifest::FILE_NAME)).ok()
    };
    let caps = plan::register_caps(build, inputs, previous.as_ref().map(|m| &m.kernels[..]));
    // The header every job pre-includes (`plan::folder_free_names`).
    files::write_atomic(
        &inputs.out_dir.join(plan::ANCHOR_FILE),
        plan::ANCHOR.as_bytes(),
    )?;
    let host = hostlib::prepare(build, inputs, env)?;
    let jobs = plan::jobs(build, inputs, &caps.by_file, host.as_ref())?;
    let toolkit = compile::toolkit_id(nvcc, inputs, &jobs)?;
    // A new ptxas, cicc, host compiler or profile reruns the build script,
    // and so does a header created in the toolkit's include folders.
    for tool in &toolkit.tools {
        directives.watch(&tool.path);
    }
    for dir in toolkit.include_dirs() {
        directives.watch(&dir);
    }
    Ok(Planned {
        caps,
        caps_from_previous: previous.is_some(),
        host,
        jobs,
        toolkit,
    })
}

/// Stage 4: runs the jobs; when a cap names a kernel, places it by this
/// build's kernels (their names and sources, as the jobs contributed
/// them: nothing is judged before the caps apply) and runs again the jobs
/// whose caps moved.
fn compile(build: &Build, inputs: &Inputs, nvcc: &Nvcc, planned: Planned) -> Result<Compiled> {
    let Planned {
        mut caps,
        caps_from_previous,
        host,
        mut jobs,
        toolkit,
    } = planned;
    let mut outputs = compile::run(nvcc, &toolkit, inputs, &jobs)?;
    if caps.needs_second_look(caps_from_previous) {
        let contributed = assemble::contributions(&outputs);
        let placed = plan::place_caps(build, inputs, &contributed)?;
        if placed.by_file != caps.by_file {
            caps = placed;
            jobs = plan::jobs(build, inputs, &caps.by_file, host.as_ref())?;
            outputs = compile::run(nvcc, &toolkit, inputs, &jobs)?;
        }
    }
    Ok(Compiled {
        host,
        jobs,
        toolkit,
        outputs,
    })
}

/// Watches what the jobs read: every input, and every folder the includes
/// search (cargo scans a watched folder's files, so a header created there
/// reruns the build script); warns of jobs whose inputs changed while
/// nvcc ran.
fn watch_inputs(inputs: &Inputs, outputs: &[JobOutput], directives: &mut Directives) {
    let out_dir = files::lexical(&inputs.out_dir);
    for output in outputs {
        // Not the files occ writes into OUT_DIR itself (the anchor header):
        // written after cargo started the script, they would make the next
        // no-op build rerun it. nvcc names the anchor from the crate root,
        // `<root>/../target/…` when the target folder is beside the crate.
        for dep in output
            .deps
            .iter()
            .filter(|d| !files::lexical(d).starts_with(&out_dir))
        {
            directives.watch(dep);
        }
        // A folder that holds OUT_DIR would rerun the script on every build.
        for dir in &output.search {
            if dir.is_dir() && !inputs.out_dir.starts_with(dir) {
                directives.watch(dir);
            }
        }
        for note in output.unstable.iter().chain(&output.disproved) {
            directives.warn(note.clone());
        }
    }
}

/// Stages 5 and 5½: the device code to embed (stage 7's files, written
/// first: the manifest lists them), what each job contributed, every
/// number of the build, the source lines of the kernels whose registers
/// matter, and the manifest, assembled once from them and the other parts
/// of this run (nvcc's warnings are passed on).
fn assemble(
    build: &Build,
    inputs: &Inputs,
    nvcc: &Nvcc,
    compiled: &Compiled,
    lock: Option<&Lock>,
    others: Option<&Manifest>,
    directives: &mut Directives,
) -> Result<Manifest> {
    for warning in nvcc_text::warnings(compiled.outputs.iter().map(|o| o.log.as_str())) {
        directives.warn(warning);
    }
    let version =
        nvcc_or_lock::version(nvcc, &*inputs.programs, &compiled.toolkit, &inputs.out_dir)?;
    let jobs = assemble::contributions(&compiled.outputs);
    let device_code = device_code::listed(
        build.embed_mode(),
        &inputs.archs,
        &compiled.outputs,
        nvcc,
        compiled.toolkit.top.as_deref(),
    )?;
    let judged = assemble::judge(inputs, &version, &jobs, lock, &device_code, others)?;
    let lines = if build.no_source_lines {
        Default::default()
    } else {
        let settings = disasm::Settings {
            root: &inputs.root,
            out: &inputs.out_dir,
            part: build.part(),
            parallel: inputs.parallel,
            programs: &*inputs.programs,
        };
        disasm::lines(
            nvcc,
            compiled.toolkit.top.as_deref(),
            &settings,
            &judged.lines_wanted(),
            directives,
        )
    };
    Ok(judged.finish(&lines))
}

/// Stage 7: `manifest.json` and `kernels.rs` of every part of this
/// process (the manifest assembled with the others); removes the files of
/// jobs gone from the build; then lists the part (7½). Returns the parts'
/// view the candidate lock is made with.
fn outputs(
    build: &Build,
    inputs: &Inputs,
    nvcc: &Nvcc,
    compiled: &Compiled,
    manifest: &Manifest,
    directives: &mut Directives,
) -> Result<parts::View> {
    let embedding = device_code::Settings {
        embed: build.embed_mode(),
        strip_lines: !build.no_source_lines && !build.keeps_line_info(&inputs.nvcc_vars),
        compress: build.compress,
        programs: &*inputs.programs,
    };
    device_code::write(
        &embedding,
        &inputs.archs,
        &compiled.outputs,
        nvcc,
        compiled.toolkit.top.as_deref(),
        &inputs.out_dir,
    )?;
    // With several `Build`s in the build script, the files hold them all.
    outputs::write_all(manifest, &inputs.out_dir)?;
    // A library job's files are also named per arch (`<stem>.<arch>.cubin`).
    let names: Vec<String> = compiled.jobs.iter().flat_map(Job::file_stems).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    outputs::remove_stale(&inputs.out_dir, build.part(), &names, &manifest.device_code);
    let view = record_part(build, inputs)?;
    if let Some(note) = &view.clash {
        directives.warn(note.clone());
    }
    Ok(view)
}

/// Stage 7½: lists this part among the parts of this process
/// (`parts::record`), with the flags the lock keeps for it.
fn record_part(build: &Build, inputs: &Inputs) -> Result<parts::View> {
    let flags = plan::recorded_flags(build, inputs);
    parts::record(
        &inputs.out_dir,
        build.part(),
        &inputs.root,
        &inputs.sources,
        &flags,
    )
}

/// The spills gate, the same for a build with nvcc and one from the lock:
/// on a failure the part is noted failed (`parts::failed`) and the report
/// written with the gate's findings; else the findings so far, which the
/// report of a build that goes on holds.
fn deny_spills(
    build: &Build,
    inputs: &Inputs,
    manifest: &Manifest,
    directives: &mut Directives,
) -> Result<report::Details> {
    let mut details = report::Details::new(&inputs.out_dir, &inputs.package);
    if let Err(e) = gate::spills(build, &inputs.sources, manifest, &mut details) {
        parts::failed(&inputs.out_dir, build.part())?;
        report::write(manifest, &details, inputs, directives)?;
        return Err(e);
    }
    Ok(details)
}
