//! nvcc's arguments for a job, built in one place: stage 4 (`compile`)
//! runs them, and the cache's key (`cache::job_key`), which the build memo
//! (`memo`) also holds records by, hashes them. A leaf: it imports no stage.

use crate::job::{Job, JobKind};
use std::path::{Path, PathBuf};

/// A job's canonical scratch folder, `$OUT_DIR/occ/tmp/<job>`: the one its
/// key names (a run compiles in a unique sibling of it).
pub(crate) fn scratch(out: &Path, job: &Job) -> PathBuf {
    out.join("tmp").join(&job.name)
}

/// nvcc's arguments for `job`, with its scratch files in `tmp`.
pub(crate) fn for_job(job: &Job, tmp: &Path) -> Vec<String> {
    if let JobKind::Library { archs, .. } = &job.kind {
        let mut args = vec!["-c".to_string()];
        args.extend(gencodes(archs));
        args.extend(
            [
                "-Xptxas",
                "-v",
                // The PTX, cubin and preprocessed sources of every arch.
                "-keep",
                "--keep-dir",
            ]
            .map(str::to_string),
        );
        args.push(tmp.display().to_string());
        args.push("-o".to_string());
        args.push(tmp.join("out.o").display().to_string());
        args.extend(job.args.iter().cloned());
        args.push(job.source.clone());
        return args;
    }
    let virt = job.arch.replacen("sm_", "compute_", 1);
    let mut args = vec![
        "--cubin".to_string(),
        "-gencode".to_string(),
        format!("arch={virt},code={}", job.arch),
        "-Xptxas".to_string(),
        "-v".to_string(),
        // -keep leaves the PTX and the preprocessed source; the line
        // markers of the latter name every file read, so no `-MD` (which
        // costs nvcc a second preprocessor pass, ~15 % of a job).
        "-keep".to_string(),
        "--keep-dir".to_string(),
        tmp.display().to_string(),
        "-o".to_string(),
        tmp.join("out.cubin").display().to_string(),
    ];
    args.extend(job.args.iter().cloned());
    args.push(job.source.clone());
    args
}

/// The `-gencode` options of a library job: SASS for every arch, plus the
/// PTX of the newest arch that is not arch-specific (`sm_90a`, `sm_100f`
/// have no forward-compatible PTX), so that the library also runs, JIT
/// compiled by the driver, on GPUs newer than the arch list.
pub(crate) fn gencodes(archs: &[String]) -> Vec<String> {
    let portable = |a: &str| a.chars().last().is_some_and(|c| c.is_ascii_digit());
    let number = |a: &str| {
        a.trim_start_matches("sm_")
            .trim_end_matches(|c: char| !c.is_ascii_digit())
            .parse::<u32>()
            .unwrap_or(0)
    };
    let newest = archs
        .iter()
        .filter(|a| portable(a))
        .max_by_key(|a| number(a))
        .cloned();
    let mut args = Vec::new();
    for arch in archs {
        let virt = arch.replacen("sm_", "compute_", 1);
        args.push("-gencode".to_string());
        if Some(arch) == newest.as_ref() {
            args.push(format!("arch={virt},code=[{arch},{virt}]"));
        } else {
            args.push(format!("arch={virt},code={arch}"));
        }
    }
    args
}
