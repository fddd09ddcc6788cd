//! Host-code static libraries ([`crate::Build::static_lib`]): `.cu` files
//! with `<<<>>>` launchers and `extern "C"` entry points, compiled by
//! `nvcc -c` into objects and archived into `lib<name>.a`, which cargo
//! links with the CUDA runtime and the C++ runtime.
//!
//! The device code is compiled once: one `nvcc -c -keep -Xptxas -v`
//! per file with a `-gencode` for every arch gives the object and, from
//! the same run, each arch's ptxas log, PTX and cubin; the job is split per
//! arch (`occ_model::compiler::ptxas::split_by_arch`) into the same outputs a
//! device-only job gives, so its kernels reach the manifest, `kernels.rs`,
//! the reports and the gate the same way (see `compile.rs`).
//!
//! The `cc` crate does what it does well: it picks the host compiler and
//! its flags for the target (`CXX`, `CXXFLAGS`, PIC, optimization and debug
//! info of the profile), which nvcc gets as `-ccbin` and `-Xcompiler`, and
//! the target's archiver and its flags (`AR`, `ARFLAGS`). What runs goes
//! through the process seam (`process::Programs`): the host compiler is
//! run by nvcc, and the archiver by occ as cc would run it (`ar cq`, with
//! its `D` modifier where the archiver takes it, then `ar s`). cc still
//! runs two things itself: its probe of the host compiler's family
//! (inside `try_get_compiler`, which cc does not let a caller run), and
//! on MSVC targets `lib.exe`, whose arguments cc writes its own way (that
//! target's archive is cc's `try_compile`). occ prints the link
//! directives itself (`leaf/directives.rs` is the one place that prints):
//! cc is told to print nothing.

use crate::builder::{Build, Cudart};
use crate::env::Env;
use crate::leaf::directives::Directives;
use crate::leaf::error::{Error, Result};
use crate::leaf::job::JobOutput;
use crate::process::{Cmd, Programs};
use crate::stage::inputs::Inputs;
use std::path::{Path, PathBuf};

/// The settings of a build's host-code library, resolved before the jobs
/// are planned.
#[derive(Debug)]
pub(crate) struct HostLib {
    /// The library's name: `lib<name>.a`.
    pub name: String,
    /// The CUDA runtime it links.
    pub cudart: Cudart,
    /// nvcc arguments for the host side: `-ccbin` (unless `NVCC_CCBIN` or
    /// a `-ccbin` flag chose one) and cc's host compiler flags.
    pub args: Vec<String>,
    /// The target triple.
    target: String,
    /// Where the archive goes: `$OUT_DIR/occ/lib`.
    dir: PathBuf,
    /// The C++ runtime to link (`CXXSTDLIB`, else the target's).
    stdlib: Option<String>,
    /// cc, configured for the target, for archiving.
    cc: cc::Build,
}

/// The variables cc reads for the host compiler, its flags and the
/// archiver (each also as `<VAR>_<target>`, `<VAR>_<target_with_underscores>`
/// and `TARGET_<VAR>`/`HOST_<VAR>`): read through [`Env`] so they are
/// watched.
const CC_VARS: &[&str] = &[
    "CXX",
    "CXXFLAGS",
    "AR",
    "ARFLAGS",
    "CXXSTDLIB",
    "CRATE_CC_NO_DEFAULTS",
];

/// Checks the library's name: what cargo's `rustc-link-lib` and the
/// archive's file name accept.
pub(crate) fn check_name(name: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(Error::BadLibraryName {
            name: name.to_string(),
            why: why.to_string(),
        })
    };
    if name.is_empty() {
        return bad("give the library a name such as `kernels`");
    }
    if let Some(stem) = name
        .strip_prefix("lib")
        .and_then(|s| s.strip_suffix(".a"))
        .or_else(|| name.strip_suffix(".a"))
        .or_else(|| name.strip_suffix(".lib"))
    {
        return bad(&format!(
            "give the name without `lib` and `.a`: `static_lib(\"{stem}\")` makes `lib{stem}.a`"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return bad(&format!(
            "it holds {c:?}; use letters, digits, `_` and `-` only"
        ));
    }
    if matches!(name, "cudart" | "cudart_static" | "cuda" | "stdc++" | "c++") {
        return bad("it is the name of a library the build links anyway; choose another name");
    }
    Ok(())
}

/// The host-code library of a build, or `None` when it makes none.
///
/// Long because it configures cc for the target once, reading each variable cc
/// would, so the host compiler and its flags match what cc builds.
pub(crate) fn prepare(build: &Build, inputs: &Inputs, env: &Env) -> Result<Option<HostLib>> {
    let Some(name) = &build.static_lib else {
        return Ok(None);
    };
    check_name(name)?;
    let target = env.var("TARGET").ok_or_else(|| Error::Env {
        var: "TARGET".into(),
        detail: "is not set (cargo sets it for build scripts; a host-code library is built \
                 for the target); run the build from build.rs, or set TARGET, HOST and OPT_LEVEL"
            .into(),
    })?;
    let host = env.var("HOST").unwrap_or_else(|| target.clone());
    let opt_level = env.var("OPT_LEVEL").unwrap_or_else(|| "0".into());
    let debug = env
        .var("DEBUG")
        .is_some_and(|d| !matches!(d.as_str(), "0" | "false" | "none"));
    // Watched: cc reads these itself.
    let under = target.replace('-', "_");
    for var in CC_VARS {
        for name in [
            format!("{var}_{target}"),
            format!("{var}_{under}"),
            format!("{}_{var}", if host == target { "HOST" } else { "TARGET" }),
            var.to_string(),
        ] {
            let _ = env.var_os(&name);
        }
    }
    let mut cc = cc::Build::new();
    cc.cpp(true)
        .cargo_metadata(false)
        .cargo_warnings(false)
        .cargo_debug(false)
        .cargo_output(false)
        .warnings(false)
        .extra_warnings(false)
        .target(&target)
        .host(&host)
        .opt_level_str(&opt_level)
        .debug(debug)
        .out_dir(inputs.out_dir.join("lib"));
    let stdlib = [
        format!("CXXSTDLIB_{target}"),
        format!("CXXSTDLIB_{under}"),
        format!(
            "{}_CXXSTDLIB",
            if host == target { "HOST" } else { "TARGET" }
        ),
        "CXXSTDLIB".to_string(),
    ]
    .iter()
    .find_map(|v| env.var_os(v))
    .map(|v| v.to_string_lossy().into_owned())
    .map_or_else(
        || cpp_stdlib(&target).map(str::to_string),
        |v| (!v.is_empty()).then_some(v),
    );
    // cc may run the compiler here to learn its family (GNU, Clang, MSVC):
    // an exception to `process`'s seam (with MSVC's `lib.exe` below), as
    // that probe is cc's own and cc offers no way to run it through
    // another. occ never runs the host compiler: nvcc does (`-ccbin`),
    // through the seam.
    let tool = cc.try_get_compiler().map_err(|e| Error::HostCompiler {
        compiler: "cc's C++ compiler (CXX)".into(),
        detail: e.to_string(),
    })?;
    let mut args = Vec::new();
    let chosen = inputs.ccbin.is_some()
        || build
            .flags
            .iter()
            .any(|f| f.starts_with("-ccbin") || f.starts_with("--compiler-bindir"));
    if !chosen {
        args.push("-ccbin".to_string());
        args.push(tool.path().display().to_string());
    }
    for arg in tool.args() {
        let arg = arg.to_string_lossy();
        // nvcc splits an -Xcompiler value at commas; nvcc passes its own
        // `-c`, `-o` and `-x`.
        if arg.contains(',') || matches!(arg.as_ref(), "-c" | "-x") {
            continue;
        }
        args.push("-Xcompiler".to_string());
        args.push(arg.into_owned());
    }
    Ok(Some(HostLib {
        name: name.clone(),
        cudart: build.cudart,
        args,
        target,
        dir: inputs.out_dir.join("lib"),
        stdlib,
        cc,
    }))
}

/// Where `nvcc -c -keep` leaves an arch's cubin and PTX in its keep
/// folder: `<stem>.compute_90.cubin` (or `<stem>.compute_90.sm_90.cubin`
/// when the PTX is embedded too) and `<stem>.compute_90.ptx`; with a
/// single `-gencode`, nvcc 13.5 names them `<stem>.sm_90.cubin` and
/// `<stem>.ptx` instead.
pub(crate) fn kept_files(dir: &Path, source: &str, arch: &str) -> Option<(PathBuf, PathBuf)> {
    let stem = Path::new(source)
        .file_stem()?
        .to_string_lossy()
        .into_owned();
    let virt = arch.replacen("sm_", "compute_", 1);
    let ptx = [
        dir.join(format!("{stem}.{virt}.ptx")),
        dir.join(format!("{stem}.ptx")),
    ]
    .into_iter()
    .find(|p| p.is_file())?;
    let cubin = [
        dir.join(format!("{stem}.{virt}.cubin")),
        dir.join(format!("{stem}.{virt}.{arch}.cubin")),
        dir.join(format!("{stem}.{arch}.cubin")),
    ]
    .into_iter()
    .find(|p| p.is_file())?;
    Some((cubin, ptx))
}

/// Archives the library's objects (the target's archiver, through
/// `programs`), and adds the link directives: the library, the CUDA
/// runtime from the toolkit's library folder, the system libraries it
/// needs and the C++ runtime.
pub(crate) fn archive(
    lib: &HostLib,
    programs: &dyn Programs,
    toolkit_libs: &[PathBuf],
    outputs: &[JobOutput],
    directives: &mut Directives,
) -> Result<PathBuf> {
    let mut objects: Vec<&PathBuf> = outputs.iter().filter_map(|o| o.object.as_ref()).collect();
    objects.dedup();
    let dir = lib.dir.clone();
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
    if lib.target.contains("msvc") {
        // `lib.exe`'s arguments are cc's to write: cc runs it itself, the
        // one archive outside the seam (named in `occ-model/tests/it/seam.rs`).
        let mut cc = lib.cc.clone();
        cc.objects(objects);
        cc.try_compile(&lib.name).map_err(|e| Error::Archive {
            name: lib.name.clone(),
            detail: e.to_string(),
        })?;
    } else {
        ar(
            lib,
            programs,
            &dir.join(format!("lib{}.a", lib.name)),
            &objects,
        )?;
    }
    directives.link(format!("rustc-link-search=native={}", dir.display()));
    // `-bundle`: linked from OUT_DIR at the final link, not copied into the
    // crate's rlib (a library of 80 MB would otherwise be in it too).
    directives.link(format!("rustc-link-lib=static:-bundle={}", lib.name));
    let linux = lib.target.contains("-linux");
    let runtime = match lib.cudart {
        Cudart::Static => Some("cudart_static"),
        Cudart::Shared => Some("cudart"),
        Cudart::None => None,
    };
    if let Some(runtime) = runtime {
        let found = toolkit_libs
            .iter()
            .find(|d| runtime_file(d, runtime, lib.cudart).is_some());
        let Some(dir) = found else {
            return Err(Error::NoCudart {
                library: runtime.to_string(),
                looked: toolkit_libs.to_vec(),
            });
        };
        directives.link(format!("rustc-link-search=native={}", dir.display()));
        match runtime_file(dir, runtime, lib.cudart) {
            // The wheels ship only `libcudart.so.13`, without the
            // unversioned link `-lcudart` needs.
            Some(file) if !file.starts_with("lib") || file.ends_with(".so") => {
                directives.link(format!("rustc-link-lib={runtime}"))
            }
            Some(file) => directives.link(format!("rustc-link-lib=dylib:+verbatim={file}")),
            None => {}
        }
        if linux && lib.cudart == Cudart::Static {
            for system in ["rt", "pthread", "dl"] {
                directives.link(format!("rustc-link-lib={system}"));
            }
        }
    }
    if let Some(stdlib) = &lib.stdlib {
        directives.link(format!("rustc-link-lib={stdlib}"));
    }
    Ok(dir.join(format!("lib{}.a", lib.name)))
}

/// Archives `objects` into `dst` as cc does on a target with `ar`, each
/// run through `programs`: `ar cqD` (deterministic) in batches of command
/// lines of about 4,000 bytes, `ar cq` with `ZERO_AR_DATE=1` if the archiver
/// refuses `D`, then `ar s` (`sD`) for the symbol table. The archiver and
/// its flags (`AR`, `ARFLAGS`) are cc's choice (`try_get_archiver`).
fn ar(lib: &HostLib, programs: &dyn Programs, dst: &Path, objects: &[&PathBuf]) -> Result<()> {
    let failed = |detail: String| Error::Archive {
        name: lib.name.clone(),
        detail,
    };
    let archiver = || -> Result<Cmd> {
        let ar = lib
            .cc
            .try_get_archiver()
            .map_err(|e| failed(e.to_string()))?;
        let mut cmd = Cmd::new(ar.get_program());
        cmd.args(ar.get_args());
        for (name, value) in ar.get_envs() {
            match value {
                Some(v) => cmd.env(name, v),
                None => cmd.env_remove(name),
            };
        }
        if let Some(dir) = ar.get_current_dir() {
            cmd.current_dir(dir);
        }
        Ok(cmd)
    };
    let run = |cmd: &mut Cmd| -> Result<bool> {
        cmd.writes(dst);
        let out = programs
            .output(cmd)
            .map_err(|e| failed(format!("cannot run {}: {e}", cmd.display())))?;
        Ok(out.status.success())
    };
    let must = |cmd: &mut Cmd| -> Result<()> {
        if run(cmd)? {
            return Ok(());
        }
        Err(failed(format!("{} failed", cmd.display())))
    };
    // Created on the first batch, appended to by the others.
    let _ = std::fs::remove_file(dst);
    let mut deterministic = None;
    for batch in batches(objects, 4000) {
        match deterministic {
            Some(true) => must(archiver()?.arg("cqD").arg(dst).args(&batch))?,
            Some(false) => must(
                archiver()?
                    .env("ZERO_AR_DATE", "1")
                    .arg("cq")
                    .arg(dst)
                    .args(&batch),
            )?,
            None => {
                deterministic = Some(run(archiver()?.arg("cqD").arg(dst).args(&batch))?);
                if deterministic == Some(false) {
                    must(
                        archiver()?
                            .env("ZERO_AR_DATE", "1")
                            .arg("cq")
                            .arg(dst)
                            .args(&batch),
                    )?;
                }
            }
        }
    }
    match deterministic {
        Some(true) => must(archiver()?.arg("sD").arg(dst)),
        _ => must(archiver()?.env("ZERO_AR_DATE", "1").arg("s").arg(dst)),
    }
}

/// `objects` in batches whose paths add up to about `budget` bytes (at
/// least one each), as cc batches them.
fn batches<'a>(objects: &[&'a PathBuf], budget: usize) -> Vec<Vec<&'a PathBuf>> {
    let mut out: Vec<Vec<&PathBuf>> = Vec::new();
    let mut left = 0;
    for object in objects {
        let len = object.as_os_str().len();
        match out.last_mut() {
            Some(batch) if len <= left => batch.push(object),
            _ => {
                out.push(vec![object]);
                left = budget;
            }
        }
        left = left.saturating_sub(len);
    }
    out
}

/// The file of the runtime `name` in `dir` that the linker will take:
/// `libcudart_static.a`, `libcudart.so` or a versioned `libcudart.so.13`
/// (`cudart.lib`, `cudart_static.lib` on Windows).
fn runtime_file(dir: &Path, name: &str, kind: Cudart) -> Option<String> {
    let plain = [
        format!("lib{name}.a"),
        format!("lib{name}.so"),
        format!("{name}.lib"),
    ];
    if let Some(f) = plain.iter().find(|f| dir.join(f).is_file()) {
        return Some(f.clone());
    }
    if kind != Cudart::Shared {
        return None;
    }
    let prefix = format!("lib{name}.so.");
    let mut versioned: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix) && n[prefix.len()..].chars().all(|c| c.is_ascii_digit()))
        .collect();
    versioned.sort();
    versioned.pop()
}

/// The C++ runtime host code compiled by a GNU or LLVM compiler needs, as
/// cc links it by default for the target.
fn cpp_stdlib(target: &str) -> Option<&'static str> {
    if target.contains("msvc") {
        None
    } else if target.contains("apple") || target.contains("freebsd") || target.contains("openbsd") {
        Some("c++")
    } else {
        Some("stdc++")
    }
}

#[cfg(test)]
mod tests {
    use super::{ar, batches, kept_files, HostLib};
    use crate::builder::Cudart;
    use crate::process::{Cmd, Output, Programs, Status};
    use std::path::PathBuf;
    use std::sync::Mutex;

    /// Programs that run nothing: each command is kept, and it fails when
    /// `fails` says so.
    #[derive(Debug)]
    struct Kept {
        runs: Mutex<Vec<Cmd>>,
        fails: fn(&Cmd) -> bool,
    }

    impl Programs for Kept {
        fn output(&self, cmd: &Cmd) -> std::io::Result<Output> {
            self.runs.lock().expect("runs").push(cmd.clone());
            let code = if (self.fails)(cmd) { 1 } else { 0 };
            Ok(Output {
                status: Status {
                    code: Some(code),
                    signal: None,
                },
                stdout: Vec::new(),
                stderr: Vec::new(),
            })
        }
    }

    /// What each run was: its arguments after the archiver's, and
    /// whether it set `ZERO_AR_DATE`.
    fn runs(kept: &Kept, program: &str) -> Vec<(String, bool)> {
        let runs = kept.runs.lock().expect("runs");
        runs.iter()
            .map(|c| {
                assert_eq!(c.get_program(), std::path::Path::new(program));
                let args: Vec<String> = c
                    .get_args()
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect();
                let zero = c.get_envs().iter().any(|(n, _)| n == "ZERO_AR_DATE");
                (args.join(" "), zero)
            })
            .collect()
    }

    /// The archive runs through the seam as cc would run it: `cqD` and
    /// `sD` where the archiver takes `D`, else `cq` and `s` with
    /// `ZERO_AR_DATE=1`, the archiver and flags cc picked (`AR`, here
    /// `my-ar`, and `ar_flag`).
    #[test]
    fn the_archive_runs_through_the_seam_as_cc_would() {
        let mut cc = cc::Build::new();
        cc.archiver("my-ar")
            .ar_flag("-X")
            .target("x86_64-unknown-linux-gnu")
            .host("x86_64-unknown-linux-gnu");
        let lib = HostLib {
            name: "k".into(),
            cudart: Cudart::None,
            args: Vec::new(),
            target: "x86_64-unknown-linux-gnu".into(),
            dir: PathBuf::from("/o/lib"),
            stdlib: None,
            cc,
        };
        let (a, b) = (PathBuf::from("/o/a.o"), PathBuf::from("/o/b.o"));
        let dst = PathBuf::from("/o/lib/libk.a");
        let takes_d = Kept {
            runs: Mutex::new(Vec::new()),
            fails: |_| false,
        };
        ar(&lib, &takes_d, &dst, &[&a, &b]).expect("archived");
        assert_eq!(
            runs(&takes_d, "my-ar"),
            [
                ("-X cqD /o/lib/libk.a /o/a.o /o/b.o".to_string(), false),
                ("-X sD /o/lib/libk.a".to_string(), false)
            ]
        );
        let refuses_d = Kept {
            runs: Mutex::new(Vec::new()),
            fails: |c| {
                c.get_args()
                    .iter()
                    .any(|a| a.to_string_lossy().ends_with('D'))
            },
        };
        ar(&lib, &refuses_d, &dst, &[&a]).expect("archived without D");
        assert_eq!(
            runs(&refuses_d, "my-ar"),
            [
                ("-X cqD /o/lib/libk.a /o/a.o".to_string(), false),
                ("-X cq /o/lib/libk.a /o/a.o".to_string(), true),
                ("-X s /o/lib/libk.a".to_string(), true)
            ]
        );
        let fails = Kept {
            runs: Mutex::new(Vec::new()),
            fails: |_| true,
        };
        let e = ar(&lib, &fails, &dst, &[&a]).expect_err("an archiver that fails");
        assert!(e.to_string().contains("my-ar -X cq /o/lib/libk.a"), "{e}");
        let long: Vec<PathBuf> = (0..300)
            .map(|i| PathBuf::from(format!("/o/{i:020}.o")))
            .collect();
        let long: Vec<&PathBuf> = long.iter().collect();
        let cut = batches(&long, 4000);
        assert!(cut.len() > 1 && cut.iter().all(|b| !b.is_empty()));
        assert_eq!(cut.concat(), long);
    }

    #[test]
    fn kept_files_of_one_and_of_several_gencodes() {
        let dir = std::env::temp_dir().join(format!("occ-kept-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // What nvcc 13.5 -c -keep leaves: with one -gencode, `one.ptx` and
        // `one.sm_80.cubin`; with two, names that carry the virtual arch.
        for name in [
            "one.ptx",
            "one.sm_80.cubin",
            "two.compute_80.cubin",
            "two.compute_80.ptx",
            "two.compute_90.sm_90.cubin",
            "two.compute_90.ptx",
        ] {
            std::fs::write(dir.join(name), b"").unwrap();
        }
        let found = |source, arch| kept_files(&dir, source, arch);
        assert_eq!(
            found("src/one.cu", "sm_80"),
            Some((dir.join("one.sm_80.cubin"), dir.join("one.ptx")))
        );
        assert_eq!(
            found("src/two.cu", "sm_80"),
            Some((
                dir.join("two.compute_80.cubin"),
                dir.join("two.compute_80.ptx")
            ))
        );
        assert_eq!(
            found("src/two.cu", "sm_90"),
            Some((
                dir.join("two.compute_90.sm_90.cubin"),
                dir.join("two.compute_90.ptx")
            ))
        );
        assert_eq!(found("src/three.cu", "sm_80"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
