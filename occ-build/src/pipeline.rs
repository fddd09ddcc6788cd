//! The build, stage by stage. This is the one place that says what a build
//! does and in which order; each stage is a function in the module named
//! for it, and ARCHITECTURE.md lists the same stages.
//!
//! 1. `inputs::resolve`: paths, archs, sources, and the settings read from
//!    the environment.
//! 2. `toolchain::select`: a live nvcc, or the committed lock (and why).
//! 3. `hostlib::prepare`, `plan::jobs`: one nvcc job per (source, arch),
//!    with its arguments (per source, for all archs, with the host
//!    compiler cc picked, when the build makes a host-code library).
//! 4. `compile::toolkit`, `compile::run`: identify the toolkit (every
//!    program nvcc runs), then run the jobs or reuse their cached results.
//! 5. `assemble::manifest`: parse each job's output into the manifest.
//!    5½. `disasm::annotate`: nvdisasm over each cubin (cached by its
//!    bytes): where each kernel spills and where its register pressure
//!    peaks, by source line.
//! 6. `gate::spills`: spilling kernels fail a build that denies them (else
//!    the summary of stage 9 names them), and `gate::measured` warns about
//!    measurements of another cubin; then `hostlib::archive` archives a
//!    host-code library's objects and adds its link directives.
//! 7. `embed::write`: the device code to embed (a fatbin per file by
//!    default); `emit::write_all`: `manifest.json` and `kernels.rs` into
//!    `$OUT_DIR/occ`; `emit::remove_stale`: files of jobs gone from the build.
//! 8. `gate::baseline`: compare with `occ.lock`; bless on request.
//! 9. `summary::write`: the report (table, spills, every finding of the
//!    gates) to `report.txt`, also when a gate failed, and one warning when
//!    something is notable.
//!
//! A build that stands on the lock (no nvcc) runs 1, 2, then
//! `assemble::from_lock`, `embed::placeholders` and `emit::write_all`.
//!
//! Between 1 and the end, `$OUT_DIR/occ/status.json` says `running`
//! (`status::mark`), so `cargo occ` can tell a failed build's leftovers.

use crate::builder::Build;
use crate::cargo::Directives;
use crate::env::Env;
use crate::error::Result;
use crate::manifest::Manifest;
use crate::status::{self, BuildState};
use crate::toolchain::Toolchain;
use crate::{
    assemble, compile, disasm, embed, emit, gate, hostlib, inputs, parts, plan, summary, toolchain,
};
use std::path::PathBuf;

/// What a build made.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The manifest written to `$OUT_DIR/occ/manifest.json`.
    pub manifest: Manifest,
    /// `$OUT_DIR/occ`.
    pub out_dir: PathBuf,
    /// How many nvcc jobs ran (the rest were reused).
    pub nvcc_runs: usize,
}

/// Runs the build's stages in order, gathering cargo directives on the way.
pub(crate) fn run(build: &Build, env: &Env, directives: &mut Directives) -> Result<Outcome> {
    let inputs = inputs::resolve(build, env, directives)?;
    // Names first: a library's says more than the part name it gives.
    if let Some(name) = &build.static_lib {
        hostlib::check_name(name)?;
    }
    plan::check_part_name(build.part())?;
    parts::check_sources(&inputs.out_dir, build.part(), &inputs.root, &inputs.sources)?;
    status::mark(&inputs.out_dir, BuildState::Running)?;
    let nvcc = match toolchain::select(build, env, &inputs)? {
        Toolchain::Nvcc(nvcc) => nvcc,
        Toolchain::Lock {
            lock,
            reason,
            watch,
        } => {
            for place in &watch {
                directives.watch(place);
            }
            if let Some(name) = &build.static_lib {
                hostlib::check_name(name)?;
                directives.warn(format!(
                    "occ: the host-code library lib{name}.a is not built without nvcc ({reason}); \
                     checking and documenting the crate work, linking it does not"
                ));
            }
            let mut manifest = assemble::from_lock(&inputs, &lock, &reason, directives)?;
            // This part's kernels only: the lock holds every part's.
            manifest
                .kernels
                .retain(|k| inputs.sources.contains(&k.source));
            manifest.device_code =
                embed::placeholders(build.embed_mode(), &inputs.archs, &inputs.sources);
            let view = record_part(build, &inputs, &manifest);
            emit::write_all(&view.merged, &inputs.out_dir)?;
            status::mark(&inputs.out_dir, BuildState::Finished)?;
            return Ok(Outcome {
                manifest: view.merged,
                out_dir: inputs.out_dir,
                nvcc_runs: 0,
            });
        }
    };
    // Register caps name files or kernels; a kernel is placed in its file by
    // the last build's manifest, or by this build's first pass.
    let previous = emit::read_manifest(&inputs.out_dir.join(crate::manifest::FILE_NAME)).ok();
    let mut caps = plan::register_caps(build, &inputs, previous.as_ref());
    // The header every job pre-includes (`plan::folder_free_names`).
    compile::write_atomic(
        &inputs.out_dir.join(plan::ANCHOR_FILE),
        plan::ANCHOR.as_bytes(),
    )?;
    let host = hostlib::prepare(build, &inputs, env)?;
    let mut jobs = plan::jobs(build, &inputs, &caps.by_file, host.as_ref())?;
    let toolkit = compile::toolkit(&nvcc, &inputs, &jobs)?;
    // A new ptxas, cicc, host compiler or profile reruns the build script.
    for tool in &toolkit.tools {
        directives.watch(&tool.path);
    }
    let mut outputs = compile::run(&nvcc, &toolkit, &inputs, &jobs)?;
    if caps.needs_second_look(previous.is_some()) {
        let found = assemble::manifest(&inputs, "", &outputs)?;
        let placed = plan::place_caps(build, &inputs, &found)?;
        if placed.by_file != caps.by_file {
            caps = placed;
            jobs = plan::jobs(build, &inputs, &caps.by_file, host.as_ref())?;
            outputs = compile::run(&nvcc, &toolkit, &inputs, &jobs)?;
        }
    }
    for output in &outputs {
        // Not the files occ writes into OUT_DIR itself (the anchor header):
        // written after cargo started the script, they would make the next
        // no-op build rerun it.
        for dep in output
            .deps
            .iter()
            .filter(|d| !d.starts_with(&inputs.out_dir))
        {
            directives.watch(dep);
        }
        // A header created in a folder the includes search reruns the
        // build script (cargo scans a watched folder's files); a folder that
        // holds OUT_DIR would rerun it on every build.
        for dir in &output.search {
            if dir.is_dir() && !inputs.out_dir.starts_with(dir) {
                directives.watch(dir);
            }
        }
        if let Some(note) = &output.unstable {
            directives.warn(note.clone());
        }
    }
    for warning in assemble::nvcc_warnings(&outputs) {
        directives.warn(warning);
    }
    let version = toolchain::version(&nvcc, &toolkit, &inputs.out_dir)?;
    let mut manifest = assemble::manifest(&inputs, &version, &outputs)?;
    if !build.no_source_lines {
        let settings = disasm::Settings {
            root: &inputs.root,
            out: &inputs.out_dir,
            part: build.part(),
            parallel: inputs.parallel,
        };
        disasm::annotate(
            &nvcc,
            toolkit.top.as_deref(),
            &settings,
            &mut manifest,
            directives,
        );
    }
    // The report holds every finding of the gates, also when one fails.
    let mut details = summary::Details::new(&inputs.out_dir, &inputs.package);
    if let Err(e) = gate::spills(build, &manifest, &mut details) {
        summary::write(&manifest, &details, &inputs, directives)?;
        return Err(e);
    }
    gate::measured(&manifest, &mut details, directives);
    if let Some(host) = &host {
        hostlib::archive(host, &toolkit.lib_dirs(), &outputs, directives)?;
    }
    manifest.device_code = embed::write(
        build.embed_mode(),
        &inputs.archs,
        &outputs,
        &nvcc,
        toolkit.top.as_deref(),
        &inputs.out_dir,
    )?;
    // With several `Build`s in the build script, the files hold them all.
    let view = record_part(build, &inputs, &manifest);
    if let Some(note) = &view.clash {
        directives.warn(note.clone());
    }
    emit::write_all(&view.merged, &inputs.out_dir)?;
    // A library job's files are also named per arch (`<stem>.<arch>.cubin`).
    let names: Vec<String> = jobs
        .iter()
        .flat_map(|j| {
            let per_arch: Vec<String> = match &j.kind {
                compile::JobKind::Library { archs, stem } => {
                    archs.iter().map(|a| format!("{stem}.{a}")).collect()
                }
                compile::JobKind::Device => Vec::new(),
            };
            per_arch.into_iter().chain([j.name.clone()])
        })
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    emit::remove_stale(&inputs.out_dir, build.part(), &names, &manifest.device_code);
    let candidate = parts::candidate(&view, build.part(), inputs.lock.as_ref());
    let gated = gate::baseline(
        build,
        &inputs,
        &candidate,
        &view.merged,
        &inputs.sources,
        &mut details,
        directives,
    );
    summary::write(&view.merged, &details, &inputs, directives)?;
    if gated.is_err() && details.failed {
        // The numbers are this build's; only the gate said no.
        status::mark(&inputs.out_dir, BuildState::GateFailed)?;
    }
    gated?;
    status::mark(&inputs.out_dir, BuildState::Finished)?;
    Ok(Outcome {
        manifest: view.merged,
        out_dir: inputs.out_dir,
        nvcc_runs: outputs.iter().filter(|o| o.ran).count(),
    })
}

/// Stage 7½: records this part's manifest among the parts of this process
/// (`parts::record`), with the flags the lock keeps for it.
fn record_part(build: &Build, inputs: &inputs::Inputs, manifest: &Manifest) -> parts::View {
    let flags = plan::recorded_flags(build, inputs);
    parts::record(
        &inputs.out_dir,
        build.part(),
        &inputs.root,
        &inputs.sources,
        &flags,
        manifest,
    )
}
