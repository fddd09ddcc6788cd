//! nvcc's arguments for a job, built in one place: stage 4 (`compile`)
//! runs them, and the cache's key (`cache::job_key`), which the build memo
//! (`memo`) also holds records by, hashes them; and the check that refuses
//! what nvcc cannot pass on safely. A leaf: it imports no stage.

use crate::leaf::error::{Error, Result};
use crate::leaf::job::{Job, JobKind};
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

/// nvcc's arguments that preprocess a device job's source as its compile
/// does (the text its `-keep` leaves as `<stem>.cpp1.ii`, byte for byte:
/// the same arch, flags and source, from the same folder) into `text`.
pub(crate) fn preprocess(job: &Job, text: &Path) -> Vec<String> {
    let virt = job.arch.replacen("sm_", "compute_", 1);
    let mut args = vec![
        "-E".to_string(),
        "-gencode".to_string(),
        format!("arch={virt},code={}", job.arch),
        "-o".to_string(),
        text.display().to_string(),
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

/// Refuses the arguments nvcc cannot pass on safely.
pub(crate) fn check(job: &Job, run_args: &[String]) -> Result<()> {
    // occ starts nvcc without a shell, but nvcc itself hands file names
    // to `sh`, in double quotes, when it runs the host compiler: a `$`, a
    // backquote or a double quote in one would run as a command or break
    // the line (nvcc 13.5; spaces, `;`, `&`, `'`, `|`, `()` are safe).
    if let Some(arg) = run_args.iter().find(|a| a.contains(['$', '`', '"'])) {
        return Err(Error::ShellUnsafeArgument {
            file: job.source.clone(),
            arch: job.arch.clone(),
            argument: arg.clone(),
        });
    }
    // A host-code library's `-c` run hands each arch's cubin to
    // `fatbinary` as `--image3=…,file=<name>`: a comma in the file's name
    // splits that list (nvcc 13.5: "is not in 'keyword=value' format").
    if matches!(job.kind, JobKind::Library { .. }) && job.source.contains(',') {
        return Err(Error::CommaInLibrarySource {
            file: job.source.clone(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(source: &str, kind: JobKind) -> Job {
        Job {
            source: source.into(),
            arch: "sm_80".into(),
            name: "k.sm_80".into(),
            args: Vec::new(),
            kind,
        }
    }

    #[test]
    fn a_shell_character_or_a_library_comma_is_refused_and_the_rest_passes() {
        let device = job("kernels/a b;c&(d)'e.cu", JobKind::Device);
        assert!(check(&device, &for_job(&device, Path::new("/t"))).is_ok());
        for bad in ["-I$HOME", "-DX=`id`", "-DS=\"q\""] {
            let err = check(&device, &[bad.to_string()]).unwrap_err();
            assert!(
                matches!(err, Error::ShellUnsafeArgument { ref argument, .. } if argument == bad),
                "{err}"
            );
        }
        let library = JobKind::Library {
            archs: vec!["sm_80".into()],
            stem: "k".into(),
        };
        let comma = job("kernels/a,b.cu", library.clone());
        assert!(matches!(
            check(&comma, &[]),
            Err(Error::CommaInLibrarySource { .. })
        ));
        // A comma only matters to a library's fatbinary list.
        assert!(check(&job("kernels/a,b.cu", JobKind::Device), &[]).is_ok());
        assert!(check(&job("kernels/ab.cu", library), &[]).is_ok());
    }
}
