//! Stage 5b: the device code `kernels.rs` embeds ([`Embed`]): one fatbin
//! per `.cu` file (the default), or each file's cubin or PTX per arch, or
//! nothing.
//!
//! The analysis has already compiled every (file, arch) job to a cubin and
//! its PTX; what is embedded is made from those files, so no device code
//! is compiled twice. First each one's line information is taken out
//! ([`occ_model::compiler::shipped`]: the same code, no line table, no path of the
//! build machine), into `<job>.embed.cubin` and `<job>.embed.ptx`, written
//! only when their bytes change; a build that asked for line information
//! itself (`-lineinfo`, `-G`), or has none, embeds copies of the files as
//! they are under the same names. PTX embedded on its own ends with
//! exactly one NUL byte (`cuModuleLoadData` reads PTX as a C string), so
//! its bytes go to the driver as they are; a fatbin's PTX part does not.
//! Then a fatbin
//! is put together from them by the toolkit's `fatbinary` (as `nvcc
//! -fatbin` does as its last step), compressed as [`Compress`] says. A
//! fatbin is rebuilt only when one of its parts, or `fatbinary` itself,
//! changed since the last build (a record in `cache/<file>.fatbin.json`,
//! checked by stat as the job records are).

use crate::builder::Compress;
use crate::leaf::cache::Stat;
use crate::leaf::error::{Error, Result};
use crate::leaf::files::write_atomic;
use crate::leaf::job::JobOutput;
use crate::process::{Cmd, Programs};
use crate::toolkit::{exe, Nvcc};
use occ_model::compiler::shipped;
use occ_model::model::arch::{self, Variant};
use occ_model::schema::manifest::{DeviceCode, Embed};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// How the device code is embedded: what, whether its line information
/// stays, how fatbins are compressed.
pub(crate) struct Settings<'a> {
    /// What `kernels.rs` embeds.
    pub embed: Embed,
    /// Whether the jobs' files carry line information occ added
    /// (`-lineinfo` for source lines) to take out; not when the build
    /// compiled without it or asked for it itself (`-lineinfo`, `-G`).
    pub strip_lines: bool,
    /// `fatbinary`'s compression.
    pub compress: Compress,
    /// What runs `fatbinary`.
    pub programs: &'a dyn Programs,
}

/// The blobs a live build embeds, each with the jobs it is made of:
/// sorted by source, then arch. Names only: [`write`] makes the files.
fn planned<'o>(
    embed: Embed,
    archs: &[String],
    outputs: &'o [JobOutput],
) -> Vec<(DeviceCode, Vec<&'o JobOutput>)> {
    let mut blobs = Vec::new();
    let mut sources: Vec<&str> = outputs.iter().map(|o| o.job.source.as_str()).collect();
    sources.sort();
    sources.dedup();
    for source in sources {
        // This file's jobs in build order (the order of `archs`).
        let mut jobs: Vec<&JobOutput> = outputs.iter().filter(|o| o.job.source == source).collect();
        jobs.sort_by_key(|o| archs.iter().position(|a| *a == o.job.arch));
        match embed {
            Embed::Nothing => {}
            Embed::Cubin | Embed::Ptx => {
                for job in jobs {
                    let blob = DeviceCode {
                        source: source.to_string(),
                        kind: embed,
                        arch: Some(job.job.arch.clone()),
                        file: Some(embedded(&job.job.name, embed.extension())),
                    };
                    blobs.push((blob, vec![job]));
                }
            }
            Embed::Fatbin => {
                let Some(first) = jobs.first() else { continue };
                let stem = first
                    .job
                    .name
                    .strip_suffix(&format!(".{}", first.job.arch))
                    .unwrap_or(&first.job.name);
                let blob = DeviceCode {
                    source: source.to_string(),
                    kind: Embed::Fatbin,
                    arch: None,
                    file: Some(format!("{stem}.fatbin")),
                };
                blobs.push((blob, jobs));
            }
        }
    }
    blobs
}

/// The blobs a live build embeds (sorted by source, then arch), as the
/// manifest lists them before [`write`] makes them: the gates run between,
/// and a build they fail leaves the last build's blobs beside the last
/// build's `kernels.rs`. The tool that makes them is looked for here, so
/// that a missing `fatbinary` fails the build before the gates, not after.
pub(crate) fn listed(
    embed: Embed,
    archs: &[String],
    outputs: &[JobOutput],
    nvcc: &Nvcc,
    toolkit_top: Option<&Path>,
) -> Result<Vec<DeviceCode>> {
    let blobs: Vec<DeviceCode> = planned(embed, archs, outputs)
        .into_iter()
        .map(|(blob, _)| blob)
        .collect();
    if blobs.iter().any(|b| b.kind == Embed::Fatbin) {
        fatbinary_tool(nvcc, toolkit_top)?;
    }
    Ok(blobs)
}

/// Writes the blobs of a live build into `out` (`$OUT_DIR/occ`) where they
/// are not already there: exactly those [`listed`] names.
pub(crate) fn write(
    settings: &Settings<'_>,
    archs: &[String],
    outputs: &[JobOutput],
    nvcc: &Nvcc,
    toolkit_top: Option<&Path>,
    out: &Path,
) -> Result<()> {
    for (blob, jobs) in planned(settings.embed, archs, outputs) {
        match blob.kind {
            Embed::Nothing => {}
            Embed::Cubin | Embed::Ptx => {
                for job in jobs {
                    shipped(
                        out,
                        &job.job.name,
                        blob.kind.extension(),
                        settings.strip_lines,
                        End::for_blob(blob.kind),
                    )?;
                }
            }
            Embed::Fatbin => {
                // `planned` names the file of every blob of a live build.
                if let Some(file) = &blob.file {
                    fatbin(settings, &jobs, nvcc, toolkit_top, out, file)?;
                }
            }
        }
    }
    Ok(())
}

/// The blobs of a build from the lock: the same entries a live build would
/// have, each without a file (`file: None`; `kernels.rs` gives them no
/// bytes), so that a launch site names the same blobs either way.
pub(crate) fn without_files(embed: Embed, archs: &[String], sources: &[String]) -> Vec<DeviceCode> {
    let mut sources = sources.to_vec();
    sources.sort();
    let mut blobs = Vec::new();
    for source in sources {
        match embed {
            Embed::Nothing => {}
            Embed::Fatbin => blobs.push(DeviceCode {
                source,
                kind: embed,
                arch: None,
                file: None,
            }),
            Embed::Cubin | Embed::Ptx => blobs.extend(archs.iter().map(|a| DeviceCode {
                source: source.clone(),
                kind: embed,
                arch: Some(a.clone()),
                file: None,
            })),
        }
    }
    blobs
}

/// What a fatbin was made from: when every part (and `fatbinary`) still
/// has this stat and the fatbin is the file written then, it is reused.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct FatbinRecord {
    tool: Option<Stat>,
    args: Vec<String>,
    parts: Vec<Option<Stat>>,
    output: Option<Stat>,
}

/// Puts `file` (in `out`) together from the jobs' cubins and the PTX of
/// the newest arch: that PTX is JIT-compiled on a GPU newer than every
/// cubin. A plain arch is preferred for it (`sm_90` over `sm_90a`): the
/// PTX of an arch-specific target runs on that one compute capability only.
/// Long because the cache check, the `fatbinary` command and its
/// failure's message belong to one run of one program.
fn fatbin(
    settings: &Settings<'_>,
    jobs: &[&JobOutput],
    nvcc: &Nvcc,
    toolkit_top: Option<&Path>,
    out: &Path,
    file: &str,
) -> Result<()> {
    let tool = fatbinary_tool(nvcc, toolkit_top)?;
    let newest = jobs
        .iter()
        .filter_map(|j| Some((arch::parse_target(&j.job.arch).ok()?, *j)))
        .max_by_key(|(t, _)| (t.variant == Variant::Base, t.cc))
        .map(|(_, j)| j);
    // (fatbinary's image kind, the job, the file extension) per part.
    let images = jobs
        .iter()
        .map(|j| ("elf", *j, "cubin"))
        .chain(newest.map(|j| ("ptx", j, "ptx")));
    let mut parts: Vec<PathBuf> = Vec::new();
    let mut args = vec!["-64".to_string()];
    args.extend(
        settings
            .compress
            .fatbinary_args()
            .iter()
            .map(|a| a.to_string()),
    );
    for (kind, job, ext) in images {
        // By name, run in `out`: fatbinary records each image's file name
        // in the fatbin, which must not name the build's folder.
        let name = shipped(out, &job.job.name, ext, settings.strip_lines, End::AsIs)?;
        args.push(format!(
            "--image3=kind={kind},sm={},file={name}",
            sm(&job.job.arch),
        ));
        parts.push(out.join(name));
    }
    let dest = out.join(file);
    let record_path = out.join("cache").join(format!("{file}.json"));
    let record = |output: Option<Stat>| FatbinRecord {
        tool: Stat::of(&tool),
        args: args.clone(),
        parts: parts.iter().map(|p| Stat::of(p)).collect(),
        output,
    };
    let reuse = std::fs::read(&record_path)
        .ok()
        .and_then(|b| serde_json::from_slice::<FatbinRecord>(&b).ok())
        .is_some_and(|old| old.output.is_some() && old == record(Stat::of(&dest)));
    if reuse {
        return Ok(());
    }
    // A new file of this call alone: two builds into one OUT_DIR at once
    // (threads of one process too) never write the same temporary file,
    // and one fatbinary fails to write is removed.
    let tmp = crate::leaf::files::scratch_file(&out.join("tmp").join(file))?;
    let mut cmd = Cmd::new(&tool);
    cmd.current_dir(out)
        .arg(format!("--create={}", tmp.display()))
        .args(&args)
        .writes(&tmp);
    let output = settings
        .programs
        .output(&cmd)
        .map_err(|e| Error::io(format!("cannot run {}", tool.display()), e))?;
    if !output.status.success() {
        // Dropped, the scratch file is removed.
        return Err(Error::ToolFailed {
            tool: tool.clone(),
            what: format!("the fatbin {file}"),
            log: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    tmp.persist(&dest)
        .map_err(|e| Error::io(format!("cannot write {}", dest.display()), e.error))?;
    let text = serde_json::to_vec(&record(Stat::of(&dest))).map_err(|e| {
        Error::io(
            format!("cannot write {}", record_path.display()),
            std::io::Error::other(e),
        )
    })?;
    write_atomic(&record_path, &text)
}

/// How an embedded file ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// As nvcc wrote it: a cubin, or PTX that is a fatbin's part
    /// (`fatbinary` reads a file, not a C string).
    AsIs,
    /// With exactly one NUL byte: PTX embedded on its own
    /// ([`Embed::Ptx`]), which `cuModuleLoadData` reads as a C string, so
    /// that its bytes can be handed to the driver as they are.
    Nul,
}

impl End {
    /// How a blob of `embed`'s kind ends.
    fn for_blob(embed: Embed) -> End {
        match embed {
            Embed::Ptx => End::Nul,
            Embed::Cubin | Embed::Fatbin | Embed::Nothing => End::AsIs,
        }
    }
}

/// Writes, and names, the file (in `out`) that embeds the job's `<job>.<ext>` (a cubin or
/// PTX): `<job>.embed.<ext>`, the file less its line information when
/// `strip_lines`, else the same bytes, ended as `end` says, written only
/// when its bytes change (so its stat, which a fatbin's record checks,
/// changes only then). One name whatever the mode, so a build that turns
/// source lines off leaves no copy of the last build's behind (the
/// differential test's step).
fn shipped(out: &Path, job: &str, ext: &str, strip_lines: bool, end: End) -> Result<String> {
    let path = out.join(format!("{job}.{ext}"));
    let bytes = std::fs::read(&path)
        .map_err(|e| Error::io(format!("cannot read {}", path.display()), e))?;
    let stripped = if !strip_lines {
        Some(bytes)
    } else if ext == "ptx" {
        Some(shipped::ptx_without_lines(&String::from_utf8_lossy(&bytes)).into_bytes())
    } else {
        shipped::cubin_without_lines(&bytes)
    };
    let mut stripped = stripped.ok_or_else(|| Error::LineInfoLayout { file: path.clone() })?;
    if end == End::Nul {
        while stripped.last() == Some(&0) {
            stripped.pop();
        }
        stripped.push(0);
    }
    let file = embedded(job, ext);
    let dest = out.join(&file);
    if std::fs::read(&dest).ok().as_deref() != Some(stripped.as_slice()) {
        write_atomic(&dest, &stripped)?;
    }
    Ok(file)
}

/// The file that embeds a job's `<job>.<ext>`: `<job>.embed.<ext>`.
fn embedded(job: &str, ext: &str) -> String {
    format!("{job}.embed.{ext}")
}

/// `sm_90a` → `90a`, as `fatbinary --image3` names an arch.
fn sm(arch: &str) -> &str {
    arch.strip_prefix("sm_").unwrap_or(arch)
}

/// [`fatbinary`], or the error that says it is missing and what to do.
fn fatbinary_tool(nvcc: &Nvcc, top: Option<&Path>) -> Result<PathBuf> {
    fatbinary(nvcc, top).ok_or_else(|| Error::ToolNotFound {
        tool: "fatbinary".into(),
        near: nvcc.path.clone(),
        todo: "use `.embed(Embed::Cubin)` or `.embed(Embed::Ptx)`, or a full toolkit".into(),
    })
}

/// The toolkit's `fatbinary`: in its `bin` folder, else beside nvcc.
pub(crate) fn fatbinary(nvcc: &Nvcc, top: Option<&Path>) -> Option<PathBuf> {
    top.map(|t| t.join("bin").join(exe("fatbinary")))
        .into_iter()
        .chain([nvcc.beside("fatbinary")])
        .find(|p| p.is_file())
}
