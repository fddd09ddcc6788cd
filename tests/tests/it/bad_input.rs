//! The bad-input matrix: each way a user (or a machine) can hand occ-build
//! something wrong, with the message the user sees. Live tests, real nvcc.
//!
//! Covered elsewhere, not repeated here (tests/tests/it/pipeline.rs):
//! nvcc missing (`missing_nvcc_lists_every_place_looked`), nvcc compile error
//! (`nvcc_compile_errors_name_the_file_and_line`), an arch this nvcc cannot
//! build (`an_arch_this_nvcc_cannot_build_is_one_clear_error`), an unknown
//! arch, a `.cu` that does not exist and a glob that matches nothing
//! (`missing_source_and_empty_glob_are_errors`), an empty `.cu` and one
//! without kernels (`files_without_kernels_and_empty_files_build`); and
//! tests/tests/it/new_user.rs for the compile error as cargo prints it.

use occ_build::{Build, ErrorKind};
use occ_model::manifest::Manifest;
use occ_tests::{build_env, script, Scratch};
use std::path::{Path, PathBuf};

const KERNEL: &str = include_str!("../../fixtures/cu/bad_input/k.cu");
/// The second kernel of the slow build, `slow`.
const SLOW: &str = include_str!("../../fixtures/cu/bad_input/slow.cu");

/// `kernels/*.cu` below `root` into `out`, for sm_80.
fn build_in(root: &Path, out: &Path) -> Build {
    occ_tests::kernels_build(root, out, ["sm_80"])
}

fn manifest_in(out: &Path) -> Manifest {
    occ_shell::files::read_manifest(&out.join("occ/manifest.json")).expect("manifest reads back")
}

#[test]
fn nvcc_that_is_not_executable_says_so_and_names_it() {
    let s = Scratch::new();
    s.write("kernels/a.cu", KERNEL);
    let fake = s.write("bin/nvcc", "not a program\n");
    let err = build_in(s.path(), &s.path().join("out"))
        .try_compile_with(&build_env(&[("NVCC", fake.to_str())]))
        .expect_err("nvcc cannot run");
    let text = err.to_string();
    assert_eq!(err.kind(), ErrorKind::Toolkit, "{text}");
    assert!(
        text.starts_with(&format!("cannot run nvcc at {}", fake.display())),
        "{text}"
    );
    assert!(text.contains("ermission denied"), "{text}");
    assert!(text.contains("point NVCC at another one"), "{text}");
    assert!(!s.path().join("out/occ/manifest.json").exists());
}

#[test]
fn a_program_that_is_not_nvcc_gives_a_message_not_a_panic() {
    let s = Scratch::new();
    s.write("kernels/a.cu", KERNEL);
    let fake = script(&s.path().join("nvcc"), "#!/bin/sh\necho hello\nexit 0\n");
    let err = build_in(s.path(), &s.path().join("out"))
        .try_compile_with(&build_env(&[("NVCC", fake.to_str())]))
        .expect_err("not nvcc");
    let text = err.to_string();
    // The toolkit's dry run finds it out before any job runs.
    assert!(
        text.contains(&fake.display().to_string())
            && text.contains("is not an nvcc")
            && text.contains("(hello)")
            && text.contains("point NVCC at the nvcc of a CUDA toolkit"),
        "{text}"
    );
    assert!(!s.path().join("out/occ/manifest.json").exists());
}

#[test]
fn a_directory_given_as_a_cu_file_is_named() {
    let s = Scratch::new();
    std::fs::create_dir_all(s.path().join("kernels/dir.cu")).expect("mkdir");
    let mut b = Build::new();
    b.root(s.path())
        .out_dir(s.path().join("out"))
        .file("kernels/dir.cu")
        .arch("sm_80");
    let text = b
        .try_compile_with(&build_env(&[]))
        .expect_err("a folder")
        .to_string();
    assert!(
        text.contains("cannot read CUDA source kernels/dir.cu: not a file"),
        "{text}"
    );
}

#[test]
fn paths_with_spaces_and_non_ascii_build() {
    let s = Scratch::new();
    let root = s.path().join("my crate/ünïcødé dir");
    let out = s.path().join("out dir/ö");
    for (rel, name) in [
        ("kernels/with space.cu", "spaced"),
        ("kernels/ä.cu", "umlaut_a"),
        ("kernels/ö.cu", "umlaut_o"),
        ("2d.cu", "two_d"),
    ] {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(
            &path,
            include_str!("../../fixtures/cu/bad_input/named.cu").replace("NAME", name),
        )
        .expect("write");
    }
    std::fs::write(root.join("kernels/ü header.cuh"), "#define V 7\n").expect("write");
    std::fs::write(root.join("ü header.cuh"), "#define V 8\n").expect("write");
    let report = build_in(&root, &out)
        .file("2d.cu")
        .try_compile_with(&build_env(&[]))
        .expect("spaces and non-ASCII must work");
    let m = report.manifest().expect("manifest");
    let mut names: Vec<&str> = m.kernels.iter().map(|k| k.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["spaced", "two_d", "umlaut_a", "umlaut_o"]);
    let sources: Vec<&str> = m.kernels.iter().map(|k| k.source.as_str()).collect();
    assert!(sources.contains(&"kernels/with space.cu"), "{sources:?}");
    assert!(sources.contains(&"kernels/ä.cu"), "{sources:?}");
    // The header with a space and an umlaut is watched.
    assert!(
        report
            .directives()
            .rerun_if_changed()
            .iter()
            .any(|p| p.ends_with("kernels/ü header.cuh")),
        "{:?}",
        report.directives().rerun_if_changed()
    );
    // Every device-code file the manifest names exists beside it, and
    // kernels.rs is valid Rust.
    for k in &m.kernels {
        for a in k.archs.values() {
            assert!(out.join("occ").join(&a.cubin).is_file(), "{}", a.cubin);
            assert!(out.join("occ").join(&a.ptx).is_file(), "{}", a.ptx);
        }
    }
    assert_eq!(manifest_in(&out), *m);
    let rs = std::fs::read_to_string(out.join("occ/kernels.rs")).expect("kernels.rs");
    assert!(rs.starts_with("// @generated by occ-build"), "{rs}");
    // `2d.cu` at the crate root: its fatbin is named in a string, not an
    // item (in the blobs' table kernels.rs includes).
    let dc = std::fs::read_to_string(out.join("occ/device_code.rs")).expect("device_code.rs");
    assert!(dc.contains("\"/occ/2d.fatbin\""), "{dc}");
    assert!(out.join("occ/2d.fatbin").is_file());
    // A rebuild runs nothing.
    let again = build_in(&root, &out)
        .file("2d.cu")
        .try_compile_with(&build_env(&[]))
        .expect("rebuild");
    assert_eq!(again.nvcc_runs, 0);
}

fn argv_recorder(s: &Scratch) -> (PathBuf, PathBuf) {
    let log = s.path().join("argv.log");
    let launcher = script(
        &s.path().join("record argv.sh"),
        &format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> '{}'; done\nexec \"$@\"\n",
            log.display()
        ),
    );
    (launcher, log)
}

#[test]
fn nvcc_runs_without_a_shell_every_argument_arrives_whole() {
    let s = Scratch::new();
    let weird = "kernels/we ird;'q&|<x> (y)*#!.cu";
    s.write(weird, KERNEL);
    let (launcher, log) = argv_recorder(&s);
    let report = build_in(s.path(), &s.path().join("out"))
        .try_compile_with(&build_env(&[("OCC_NVCC_LAUNCHER", launcher.to_str())]))
        .expect("a strange file name builds");
    assert_eq!(report.manifest().expect("manifest").kernels.len(), 1);
    assert_eq!(
        report.manifest().expect("manifest").kernels[0].source,
        weird
    );
    let argv = std::fs::read_to_string(&log).expect("launcher ran");
    assert!(
        argv.lines().any(|a| a == weird),
        "the file name is one argument:\n{argv}"
    );
    assert!(
        argv.lines().any(|a| a == "-Xptxas") && argv.lines().any(|a| a == "-v"),
        "{argv}"
    );
}

#[test]
fn a_name_that_nvccs_own_shell_would_expand_is_refused_before_nvcc_runs() {
    // nvcc passes file names to sh in double quotes when it runs the host
    // compiler: `$(...)` and backquotes in them would run, a `"` ends the
    // quoting early.
    let s = Scratch::new();
    for (i, weird) in [
        "kernels/a$(touch pwned).cu",
        "kernels/b`touch pwned`.cu",
        "kernels/c\";touch pwned;\".cu",
    ]
    .into_iter()
    .enumerate()
    {
        let sub = Scratch::new();
        sub.write(weird, KERNEL);
        let (launcher, log) = argv_recorder(&s);
        let err = build_in(sub.path(), &sub.path().join("out"))
            .try_compile_with(&build_env(&[("OCC_NVCC_LAUNCHER", launcher.to_str())]))
            .expect_err("refused");
        let msg = err.to_string();
        assert!(
            msg.contains(weird)
                && msg.contains("nvcc's own shell would expand or misread")
                && msg.contains("rename"),
            "{i}: {msg}"
        );
        assert!(!log.exists(), "nvcc never ran");
        for pwned in ["pwned", "kernels/pwned"] {
            assert!(!sub.path().join(pwned).exists(), "a shell ran: {pwned}");
        }
    }
}

#[test]
fn a_control_character_in_a_source_name_is_refused_before_nvcc_runs() {
    // A newline would put the rest of the name on a line of its own in
    // kernels.rs (a crafted name injects Rust), in a cargo directive and
    // in every report's table; a bidi control reorders what a reader sees.
    for (weird, shown, by_glob) in [
        (
            "kernels/a\nfn evil() {}\n.cu",
            "kernels/a\\nfn evil() {}\\n.cu",
            true,
        ),
        ("kernels/tab\there.cu", "kernels/tab\\there.cu", true),
        (
            "kernels/x\u{202e}uc.exe.cu",
            "kernels/x\\u{202e}uc.exe.cu",
            false,
        ),
    ] {
        let s = Scratch::new();
        s.write(weird, KERNEL);
        let (launcher, log) = argv_recorder(&s);
        let mut build = build_in(s.path(), &s.path().join("out"));
        if !by_glob {
            build.file(weird);
        }
        let err = build
            .try_compile_with(&build_env(&[("OCC_NVCC_LAUNCHER", launcher.to_str())]))
            .expect_err("refused");
        assert_eq!(err.kind(), ErrorKind::Config, "{err:?}");
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!("cannot build CUDA source {shown}: its path "))
                && msg.ends_with("rename the file or folder")
                && !msg.contains(['\n', '\t', '\u{202e}']),
            "{weird:?}: {msg}"
        );
        assert!(!log.exists(), "nvcc never ran");
    }
}

#[test]
fn a_corrupt_manifest_names_the_file_and_says_rebuild() {
    let s = Scratch::new();
    let now = occ_model::manifest::SCHEMA_VERSION;
    for (text, needle) in [
        (
            format!("{{\"schema\": {now}, \"package\": "),
            "not valid JSON",
        ),
        ("\u{0}\u{1}binary".to_string(), "not valid JSON"),
        (String::new(), "not valid JSON"),
        ("[1, 2, 3]".to_string(), "has no \"schema\" field"),
        (format!("{{\"schema\": {now}}}"), "not an occ manifest"),
        ("{\"schema\": \"1\"}".to_string(), "has no \"schema\" field"),
        ("{\"schema\": 0}".to_string(), "written by an older occ"),
    ] {
        let path = s.write("out/occ/manifest.json", &text);
        let err = occ_shell::files::read_manifest(&path).expect_err("corrupt");
        let msg = err.to_string();
        assert!(
            matches!(
                err,
                occ_shell::Error::Model(occ_model::Error::Corrupt { .. })
            ),
            "{msg}"
        );
        assert!(
            msg.starts_with(&path.display().to_string()) && msg.contains(needle),
            "{text:?}: {msg}"
        );
        assert!(msg.contains("delete it and rebuild"), "{msg}");
    }
    let err = occ_shell::files::read_manifest(&s.path().join("nope/manifest.json"))
        .expect_err("missing")
        .to_string();
    assert!(
        err.contains("cannot read") && err.contains("nope/manifest.json"),
        "{err}"
    );
}

#[test]
fn a_manifest_from_a_newer_schema_says_upgrade() {
    let s = Scratch::new();
    let path = s.write(
        "manifest.json",
        "{\"schema\": 7, \"package\": \"p\", \"future\": {\"field\": true}}\n",
    );
    let msg = occ_shell::files::read_manifest(&path)
        .expect_err("newer")
        .to_string();
    assert!(
        msg.contains(&format!(
            "written by a newer occ (schema 7; this occ reads schema {})",
            occ_model::manifest::SCHEMA_VERSION
        )) && msg.contains("upgrade occ-build, occ-macros and cargo-occ together"),
        "{msg}"
    );
}

#[test]
fn a_manifest_pointing_outside_out_dir_is_rejected() {
    let s = Scratch::new();
    s.write("kernels/a.cu", KERNEL);
    let out = s.path().join("out");
    build_in(s.path(), &out)
        .try_compile_with(&build_env(&[]))
        .expect("build");
    let path = out.join("occ/manifest.json");
    let good = std::fs::read_to_string(&path).expect("read");
    for bad in ["../../../etc/passwd", "/etc/passwd", "sub/a.cubin", ".."] {
        let text = good.replacen("\"kernels_a.sm_80.cubin\"", &format!("{bad:?}"), 1);
        assert_ne!(text, good, "the test edits the cubin field");
        std::fs::write(&path, &text).expect("write");
        let msg = occ_shell::files::read_manifest(&path)
            .expect_err(bad)
            .to_string();
        assert!(
            msg.contains("not a plain file name") && msg.contains("delete it and rebuild"),
            "{bad}: {msg}"
        );
    }
}

#[test]
fn an_unwritable_out_dir_names_the_folder() {
    let s = Scratch::new();
    s.write("kernels/a.cu", KERNEL);
    // A regular file where a folder must be: unwritable even for root.
    s.write("blocked", "a file, not a folder\n");
    let out = s.path().join("blocked/out");
    let err = build_in(s.path(), &out)
        .try_compile_with(&build_env(&[]))
        .expect_err("cannot write");
    let msg = err.to_string();
    assert_eq!(err.kind(), ErrorKind::Io, "{msg}");
    assert!(
        msg.contains(&format!("cannot create {}", out.join("occ").display())),
        "{msg}"
    );
    #[cfg(unix)]
    {
        // A read-only folder, where permissions apply (not for root).
        use std::os::unix::fs::PermissionsExt;
        let ro = s.path().join("ro");
        std::fs::create_dir_all(&ro).expect("mkdir");
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).expect("chmod");
        if std::fs::write(ro.join("probe"), "").is_err() {
            let msg = build_in(s.path(), &ro)
                .try_compile_with(&build_env(&[]))
                .expect_err("read-only")
                .to_string();
            assert!(
                msg.contains(&ro.display().to_string()) && msg.contains("ermission denied"),
                "{msg}"
            );
        }
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
}

#[test]
fn two_builds_into_one_out_dir_at_once_both_succeed_and_agree() {
    let s = Scratch::new();
    s.write("kernels/a.cu", KERNEL);
    s.write(
        "kernels/b.cu",
        include_str!("../../fixtures/cu/bad_input/b.cu"),
    );
    let out = s.path().join("out");
    let root = s.path();
    let results: Vec<Result<(Manifest, usize), String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let out = &out;
                scope.spawn(move || {
                    let mut b = build_in(root, out);
                    b.arch("sm_90");
                    b.try_compile_with(&build_env(&[("NUM_JOBS", Some("4"))]))
                        .map(|r| (r.manifest().expect("manifest").clone(), r.nvcc_runs))
                        .map_err(|e| e.to_string())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("panicked".into())))
            .collect()
    });
    let (manifests, runs): (Vec<Manifest>, Vec<usize>) = results
        .into_iter()
        .map(|r| r.expect("both concurrent builds succeed"))
        .unzip();
    // Each of the 4 jobs (2 files × sm_80, sm_90) is compiled once: the
    // build that waited for one reuses it.
    assert_eq!(
        runs.iter().sum::<usize>(),
        4,
        "nvcc runs per build: {runs:?}"
    );
    assert_eq!(manifests[0], manifests[1]);
    assert_eq!(manifest_in(&out), manifests[0]);
    // No temporary file is left beside the outputs.
    for entry in std::fs::read_dir(out.join("occ")).expect("read out") {
        let name = entry.expect("entry").file_name();
        assert!(
            !name.to_string_lossy().contains(".tmp"),
            "left over: {name:?}"
        );
    }
    // A third, sequential build reuses everything and writes the same bytes.
    let before = std::fs::read(out.join("occ/manifest.json")).expect("read");
    let mut b = build_in(root, &out);
    b.arch("sm_90");
    let r = b.try_compile_with(&build_env(&[])).expect("third build");
    assert_eq!(r.nvcc_runs, 0);
    assert_eq!(
        std::fs::read(out.join("occ/manifest.json")).expect("read"),
        before
    );
}

const KILL_DIR: &str = "OCC_TEST_KILLED_BUILD_DIR";

/// The build that [`a_build_killed_midway_leaves_no_half_written_file`] kills:
/// run only as that test's child process (it does nothing otherwise).
#[test]
#[ignore = "the child process of a_build_killed_midway_leaves_no_half_written_file"]
fn killed_build_child() {
    let Some(dir) = std::env::var_os(KILL_DIR).map(PathBuf::from) else {
        return;
    };
    let launcher = dir.join("slow-nvcc.sh");
    let _ = build_in(&dir, &dir.join("out")).try_compile_with(&build_env(&[
        ("NUM_JOBS", Some("1")),
        ("OCC_NVCC_LAUNCHER", launcher.to_str()),
    ]));
}

#[test]
fn a_build_killed_midway_leaves_no_half_written_file() {
    let s = Scratch::new();
    s.write("kernels/a_fast.cu", KERNEL);
    s.write("kernels/b_slow.cu", SLOW);
    let started = s.path().join("slow-started");
    let pids = s.path().join("slow-pids");
    let slow = s.write("slow", "");
    // Sleeps (killably) before running nvcc on b_slow.cu; runs a_fast.cu at once.
    script(
        &s.path().join("slow-nvcc.sh"),
        &format!(
            "#!/bin/sh\ncase \"$*\" in *b_slow.cu*)\n  [ -e '{slow}' ] || exec \"$@\"\n  sleep 60 &\n  echo \"$$ $!\" > '{pids}'\n  touch '{started}'\n  wait $!\n  ;;\nesac\nexec \"$@\"\n",
            pids = pids.display(),
            started = started.display(),
            slow = slow.display()
        ),
    );
    let exe = std::env::current_exe().expect("test binary");
    let mut child = std::process::Command::new(exe)
        .args([
            "--exact",
            "bad_input::killed_build_child",
            "--ignored",
            "--nocapture",
        ])
        .env(KILL_DIR, s.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the child build");
    // Wait (without a time limit on success) until the first job is done and
    // the second one is inside the launcher; fail if the child exits first.
    while !started.exists() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the child build ended before the slow job started: {status}");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().expect("kill the build");
    let _ = child.wait();
    // The launcher and its sleep outlive the killed build; stop them.
    let ids = std::fs::read_to_string(&pids).unwrap_or_default();
    for id in ids.split_whitespace() {
        let _ = std::process::Command::new("kill").args(["-9", id]).status();
    }
    let occ = s.path().join("out/occ");
    let mut top: Vec<String> = std::fs::read_dir(&occ)
        .expect("the build had started")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    assert_eq!(
        top,
        [
            "bless.stamp",
            "cache",
            "kernels_a_fast.sm_80.cubin",
            "kernels_a_fast.sm_80.ptx",
            "status.json",
            "tmp"
        ],
        "only the finished job's files, whole, the marker of an unfinished build and the \
         empty stamp a crate with no lock watches; no manifest, no kernels.rs, no temporaries"
    );
    let status = std::fs::read_to_string(occ.join("status.json")).expect("status.json");
    assert!(status.contains("running"), "{status}");
    // The rebuild (same launcher, now fast) reuses the finished job, runs
    // the killed one, and gives the same bytes as an uninterrupted build.
    std::fs::remove_file(&slow).expect("no more sleeping");
    let launcher = s.path().join("slow-nvcc.sh");
    let report = build_in(s.path(), &s.path().join("out"))
        .try_compile_with(&build_env(&[
            ("NUM_JOBS", Some("1")),
            ("OCC_NVCC_LAUNCHER", launcher.to_str()),
        ]))
        .expect("rebuild after the kill");
    assert_eq!(report.nvcc_runs, 1, "the finished job is reused");
    // A clean build in the same folder (the cubins' line tables name it).
    let files = [
        "manifest.json",
        "kernels.rs",
        "kernels_a_fast.sm_80.cubin",
        "kernels_b_slow.sm_80.cubin",
    ];
    let after_kill: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(occ.join(f)).expect(f))
        .collect();
    std::fs::remove_dir_all(s.path().join("out")).expect("remove out/");
    build_in(s.path(), &s.path().join("out"))
        .try_compile_with(&build_env(&[]))
        .expect("clean build");
    for (file, bytes) in files.iter().zip(&after_kill) {
        assert_eq!(&std::fs::read(occ.join(file)).expect(file), bytes, "{file}");
    }
}
