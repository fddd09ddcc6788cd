//! `cargo occ toolkit path|doctor` against the installed
//! nvcc (put where `OCC_CUDA_DIR` says, by symlink), and `install`'s
//! orchestration (pinned wheels, the swap into place, the stamp, a second
//! run doing nothing, a missing Python) through a stand-in Python.

use crate::occ;
use occ_tests::surroundings::{script, toolkit_home};
use occ_tests::{workspace_root, Scratch, ScratchCrate};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// `PATH` without any folder that holds an nvcc, so that only the place a
/// test sets up can be found.
fn path_without_nvcc() -> OsString {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .filter(|d| !d.join("nvcc").exists())
        .collect();
    std::env::join_paths(dirs).expect("join PATH")
}

/// `cargo occ toolkit <args>` in `cwd`, seeing only `OCC_CUDA_DIR=cuda_dir`
/// among the places nvcc can be, plus `env` on top.
fn toolkit(
    cwd: &Path,
    cuda_dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (i32, String, String) {
    let path = path_without_nvcc();
    let mut vars: Vec<(&str, Option<&str>)> = [
        "NVCC",
        "CUDA_HOME",
        "CUDA_PATH",
        "CUDA_ROOT",
        "OCC_NVCC_LAUNCHER",
        "NVCC_CCBIN",
        "NVCC_PREPEND_FLAGS",
        "NVCC_APPEND_FLAGS",
        "PYTHON",
        "CI",
    ]
    .map(|var| (var, None))
    .to_vec();
    vars.push(("PATH", path.to_str()));
    vars.push(("OCC_CUDA_DIR", cuda_dir.to_str()));
    vars.extend(env.iter().map(|&(k, v)| (k, Some(v))));
    let all: Vec<&str> = ["toolkit"].iter().chain(args).copied().collect();
    occ(cwd, &all, &vars, None).parts()
}

/// A toolkit dir whose `cu13` holds the installed toolkit (a symlink to
/// its home, the layout `cargo occ toolkit install` leaves).
fn linked_toolkit_dir(s: &Scratch) -> PathBuf {
    let dir = s.path().join("cuda");
    std::fs::create_dir_all(dir.join("cu13/nvidia")).expect("create toolkit dir");
    std::os::unix::fs::symlink(toolkit_home(), dir.join("cu13/nvidia/cu13")).expect("link toolkit");
    dir
}

fn no_system_cuda() -> bool {
    // /usr/local/cuda comes before OCC_CUDA_DIR in the lookup.
    !Path::new("/usr/local/cuda/bin/nvcc").exists()
}

#[test]
fn path_prints_the_nvcc_in_occ_cuda_dir() {
    if !no_system_cuda() {
        return;
    }
    let s = Scratch::new();
    let dir = linked_toolkit_dir(&s);
    let (code, out, err) = toolkit(s.path(), &dir, &["path"], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        dir.join("cu13/nvidia/cu13/bin/nvcc").display().to_string()
    );
}

#[test]
fn doctor_reports_nvcc_its_archs_host_compiler_and_tools() {
    if !no_system_cuda() {
        return;
    }
    let s = Scratch::new();
    let dir = linked_toolkit_dir(&s);
    let (code, out, err) = toolkit(s.path(), &dir, &["doctor"], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    let bin = dir.join("cu13/nvidia/cu13/bin");
    let expected = [
        format!("{} (found by OCC_CUDA_DIR)", bin.join("nvcc").display()),
        "Cuda compilation tools, release 13.".to_string(),
        "sm_75 sm_80 sm_86".to_string(),
        "accepted by nvcc".to_string(),
        format!("cuobjdump  {}", bin.join("cuobjdump").display()),
        "lock       none: not in a cargo package".to_string(),
        "occ builds with this nvcc.".to_string(),
    ];
    for text in expected {
        assert!(out.contains(&text), "`{text}` not in:\n{out}");
    }
}

#[test]
fn doctor_flags_a_host_compiler_nvcc_rejects() {
    if !no_system_cuda() {
        return;
    }
    let s = Scratch::new();
    let dir = linked_toolkit_dir(&s);
    // A host compiler that fails is what nvcc sees of an unsupported one.
    let cc = script(
        &s.path().join("bin/bad-cc"),
        "echo 'unsupported compiler' >&2; exit 1",
    );
    let (code, out, _) = toolkit(
        s.path(),
        &dir,
        &["doctor"],
        &[("NVCC_CCBIN", &cc.display().to_string())],
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("rejected by nvcc"), "{out}");
    assert!(out.contains("fix:") && out.contains("NVCC_CCBIN"), "{out}");
}

#[test]
fn doctor_reports_the_lock_of_the_package_here() {
    let s = Scratch::new();
    let dir = linked_toolkit_dir(&s);
    let app = workspace_root().join("example-app");
    let (_, out, err) = toolkit(&app, &dir, &["doctor"], &[]);
    let lock = format!("{}: ", app.join("occ.lock").display());
    assert!(
        out.contains(&lock) && out.contains("kernels"),
        "{out}\n{err}"
    );
}

#[test]
fn without_nvcc_path_and_doctor_say_how_to_install_it() {
    if !no_system_cuda() {
        return;
    }
    let s = Scratch::new();
    let empty = s.path().join("empty");
    let (code, out, err) = toolkit(s.path(), &empty, &["path"], &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.is_empty(), "{out}");
    let pip = format!(
        "python3 -m pip install --no-deps --target {} nvidia-cuda-nvcc==",
        empty.join("cu13").display()
    );
    for text in ["nvcc not found", "cargo occ toolkit install", &pip] {
        assert!(err.contains(text), "`{text}` not in:\n{err}");
    }
    let (code, out, _) = toolkit(s.path(), &empty, &["doctor"], &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("nvcc  not found") || out.contains("nvcc       not found"),
        "{out}"
    );
    assert!(
        out.contains("fix: nvcc not found") && out.contains(&pip),
        "{out}"
    );
}

/// A stand-in for `python3` that records its arguments and, for `-m pip
/// install --target DIR`, "installs" by linking the real toolkit into DIR.
/// This is no fake nvcc: what runs afterwards is the real one. What the test
/// checks is occ's orchestration (the pinned list, the swap into place, the
/// stamp, idempotency); a real pip install is a 350 MB download.
fn stand_in_python(s: &Scratch, log: &Path) -> PathBuf {
    script(
        &s.path().join("bin/python3"),
        &format!(
            "echo \"$*\" >> '{log}'\n\
             if [ \"$1 $2 $3\" = '-m pip --version' ]; then echo 'pip 0 (stand-in)'; exit 0; fi\n\
             prev=''; for a in \"$@\"; do [ \"$prev\" = --target ] && target=\"$a\"; prev=\"$a\"; done\n\
             mkdir -p \"$target/nvidia\" && ln -s '{home}' \"$target/nvidia/cu13\"",
            log = log.display(),
            home = toolkit_home().display()
        ),
    )
}

fn calls(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A scratch folder, the toolkit dir in it, the stand-in Python's log and
/// path, and the pinned cu13 set: what an install test starts from.
fn install_scratch() -> (
    Scratch,
    PathBuf,
    PathBuf,
    String,
    occ_shell::wheels::WheelSet,
) {
    let s = Scratch::new();
    let dir = s.path().join("cache/occ/cuda");
    let log = s.path().join("python.log");
    let python = stand_in_python(&s, &log).display().to_string();
    let cu13 = occ_shell::wheels::wheel_sets()
        .into_iter()
        .find(|set| set.name == "cu13")
        .expect("the cu13 set");
    (s, dir, log, python, cu13)
}

#[test]
fn install_pip_installs_the_pinned_wheels_once() {
    if !no_system_cuda() {
        return;
    }
    let (s, dir, log, python, cu13) = install_scratch();

    let (code, out, err) = toolkit(s.path(), &dir, &["install", "--python", &python], &[]);
    assert_eq!(code, 0, "{err}");
    let nvcc = dir.join("cu13/nvidia/cu13/bin/nvcc");
    assert_eq!(out.trim(), nvcc.display().to_string(), "{err}");
    assert!(err.contains("release 13."), "{err}");
    let first = calls(&log);
    assert_eq!(first.len(), 2, "{first:?}");
    assert_eq!(first[0], "-m pip --version");
    let install = &first[1];
    let prefix = format!(
        "-m pip install --disable-pip-version-check --no-warn-script-location --no-deps --target {}.tmp-",
        dir.join("cu13").display()
    );
    assert!(install.starts_with(&prefix), "{install}");
    assert!(install.ends_with(&cu13.requirements.join(" ")), "{install}");
    let stamp = std::fs::read_to_string(dir.join("cu13/.stamp")).expect("stamp");
    assert_eq!(stamp.trim(), cu13.stamp());
    // Nothing is left beside the install.
    let entries: Vec<String> = std::fs::read_dir(&dir)
        .expect("toolkit dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, ["cu13"]);

    // A second run installs nothing (and needs no Python).
    let (code, out, err) = toolkit(
        s.path(),
        &dir,
        &["install", "--python", "/nonexistent/python"],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), nvcc.display().to_string());
    assert!(err.contains("up to date"), "{err}");
    assert_eq!(calls(&log), first);

    // `path` now finds what install put there.
    let (code, out, _) = toolkit(s.path(), &dir, &["path"], &[]);
    assert_eq!((code, out.trim()), (0, nvcc.display().to_string().as_str()));

    // A stale stamp (another pin) reinstalls, through PYTHON this time.
    std::fs::write(dir.join("cu13/.stamp"), "0.0.0\n").expect("write stamp");
    let (code, _, err) = toolkit(s.path(), &dir, &["install"], &[("PYTHON", &python)]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(calls(&log).len(), 4, "{:?}", calls(&log));
    let stamp = std::fs::read_to_string(dir.join("cu13/.stamp")).expect("stamp");
    assert_eq!(stamp.trim(), cu13.stamp());
}

#[test]
fn install_adds_a_cuda_library_beside_nvcc_and_keeps_it() {
    if !no_system_cuda() {
        return;
    }
    let (s, dir, log, python, cu13) = install_scratch();
    let pin = |name: &str| {
        occ_shell::wheels::library_wheels()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, req)| req)
            .expect("a pinned library")
    };
    let (cublas, curand) = (pin("cublas"), pin("curand"));

    // Installed into the nvcc's own set, after its wheels, in one pip run.
    let (code, _, err) = toolkit(
        s.path(),
        &dir,
        &["install", "--python", &python, "--library", "cuBLAS,"],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let first = calls(&log);
    assert_eq!(first.len(), 2, "{first:?}");
    let wanted = format!("{} {cublas}", cu13.requirements.join(" "));
    assert!(first[1].ends_with(&wanted), "{}", first[1]);
    assert!(err.contains("cublas installed beside nvcc"), "{err}");
    let stamp = || std::fs::read_to_string(dir.join("cu13/.stamp")).expect("stamp");
    assert_eq!(stamp().trim(), format!("{}+{cublas}", cu13.stamp()));

    // A plain install keeps it and installs nothing; so does asking again.
    for args in [vec!["install"], vec!["install", "--library", "cublas"]] {
        let (code, _, err) = toolkit(s.path(), &dir, &args, &[("PYTHON", "/nonexistent")]);
        assert_eq!(code, 0, "{err}");
        assert!(err.contains("up to date"), "{err}");
        assert_eq!(calls(&log), first);
    }

    // A second library installs the set again with both, the first kept.
    let (code, _, err) = toolkit(
        s.path(),
        &dir,
        &["install", "--python", &python, "--library", "curand"],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let calls_now = calls(&log);
    assert_eq!(calls_now.len(), 4, "{calls_now:?}");
    assert!(
        calls_now[3].ends_with(&format!("{wanted} {curand}")),
        "{}",
        calls_now[3]
    );
    assert_eq!(
        stamp().trim(),
        format!("{}+{cublas}+{curand}", cu13.stamp())
    );

    // A library occ does not pin: what it does install, and what to do.
    let (code, _, err) = toolkit(s.path(), &dir, &["install", "--library", "cudnn"], &[]);
    assert_eq!(code, 1, "{err}");
    for needle in [
        "no CUDA library `cudnn` to install",
        "cublas, curand",
        "nvidia-cudnn-cu13",
    ] {
        assert!(err.contains(needle), "{needle:?} not in {err}");
    }
    assert_eq!(calls(&log).len(), 4);
}

#[test]
fn install_without_python_or_pip_says_what_to_do() {
    let s = Scratch::new();
    let dir = s.path().join("cuda");
    let (code, _, err) = toolkit(
        s.path(),
        &dir,
        &["install", "--python", "/nonexistent/python3"],
        &[],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("cannot run `/nonexistent/python3`") && err.contains("--python"),
        "{err}"
    );
    let no_pip = script(
        &s.path().join("bin/python-no-pip"),
        "echo 'No module named pip' >&2; exit 1",
    );
    let (code, _, err) = toolkit(
        s.path(),
        &dir,
        &["install", "--python", &no_pip.display().to_string()],
        &[],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("No module named pip") && err.contains("install pip"),
        "{err}"
    );
    assert!(!dir.join("cu13").exists());
}

/// The rows of the table under `## Environment variables` in `text`
/// (Markdown, or Rust doc comments with their `//! ` stripped).
fn env_table(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.strip_prefix("//!").map_or(l, str::trim_start))
        .skip_while(|l| *l != "## Environment variables")
        .skip(1)
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_variable_read_is_in_the_one_table_in_the_guide() {
    let root = workspace_root();
    let read = |rel: &str| std::fs::read_to_string(root.join(rel)).expect(rel);
    let guide = env_table(&read("docs/GUIDE.md"));
    assert!(guide.len() > 10, "{guide:?}");
    // One table: occ-build's crate docs point to it instead of a copy.
    let crate_docs = read("occ-build/src/lib.rs");
    assert!(
        env_table(&crate_docs).is_empty(),
        "a second table in occ-build's crate docs"
    );
    assert!(
        crate_docs.contains("docs/GUIDE.md#environment-variables")
            && read("docs/GUIDE.md").contains("\n## Environment variables\n"),
        "occ-build's crate docs link to the guide's table"
    );
    let table = guide.join("\n");
    // Every variable named in a read (`var("X")`, `var_os("X")`, `flag("X")`).
    let mut missing = Vec::new();
    for dir in [
        "occ-build/src",
        "occ-shell/src",
        "cargo-occ/src",
        "occ-macros/src",
    ] {
        for path in rs_files(&root.join(dir)) {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            for call in ["var(\"", "var_os(\"", "flag(\""] {
                for part in text.split(call).skip(1) {
                    let name: String = part
                        .chars()
                        .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                        .collect();
                    if part[name.len()..].starts_with('"')
                        && !name.is_empty()
                        && !table.contains(&format!("`{name}`"))
                    {
                        missing.push(format!("{name} ({})", path.display()));
                    }
                }
            }
        }
    }
    assert!(missing.is_empty(), "not in the table: {missing:?}");
}

/// Every `.rs` file under `dir`, at any depth (occ-build's `stage/` and
/// `leaf/` included).
fn rs_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in std::fs::read_dir(dir)
        .expect("read a source folder")
        .flatten()
    {
        let path = path.path();
        if path.is_dir() {
            out.extend(rs_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// A crate that takes occ's cudarc with no CUDA version, with
/// nvcc 13.5 on `PATH`, stops in cudarc's build script; doctor says so and
/// prints the line that fixes it, and is content once the line is there.
#[test]
fn doctor_flags_cudarc_without_a_version_under_nvcc_13_5() {
    let s = ScratchCrate::new("cudarcuser")
        .dep_with("occ", &["cudarc"])
        .file("src/main.rs", "fn main() {}\n");
    let dir = linked_toolkit_dir(&s);
    let bin = toolkit_home().join("bin");
    let mut path = OsString::from(&bin);
    path.push(":");
    path.push(path_without_nvcc());
    let path = path.to_string_lossy().into_owned();
    let env = [("PATH", path.as_str()), ("CARGO_NET_OFFLINE", "true")];
    let (code, out, err) = toolkit(s.path(), &dir, &["doctor"], &env);
    let fix =
        "cudarc = { version = \"0.19\", default-features = false, features = [\"cuda-13040\"] }";
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        out.contains("Unsupported cuda toolkit version"),
        "{out}\n{err}"
    );
    assert!(out.contains(fix), "{out}\n{err}");

    let s = s.dep_line(fix);
    let (code, out, err) = toolkit(s.path(), &dir, &["doctor"], &env);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("CUDA 13.4 (feature cuda-13040)"),
        "{out}\n{err}"
    );
}

/// A copy of the checkout's `scripts/cuda-toolkit` (with the wheel list it
/// reads) in `checkout`, a folder with no `.cuda/` yet.
fn checkout_with_the_script(checkout: &Path) -> PathBuf {
    let root = workspace_root();
    let copy = |rel: &str| {
        let to = checkout.join(rel);
        std::fs::create_dir_all(to.parent().expect("a parent")).expect("create folders");
        std::fs::copy(root.join(rel), &to).unwrap_or_else(|e| panic!("copy {rel}: {e}"));
        to
    };
    copy("occ-shell/toolkit-wheels.txt");
    copy("scripts/cuda-toolkit")
}

#[test]
fn scripts_cuda_toolkit_uses_the_toolkit_cargo_occ_toolkit_install_put_in_place() {
    // README step 1 installs nvcc with `cargo occ toolkit install`; a
    // checkout's `scripts/example` and `scripts/test` (through
    // `scripts/cuda-toolkit`) then use that one, not a second 353 MB
    // download into `.cuda/`. The per-user dir here is HOME's, as on a
    // user's machine (no OCC_CUDA_DIR, no XDG_CACHE_HOME).
    if !no_system_cuda() {
        return;
    }
    let s = Scratch::new();
    let home = s.path().join("home");
    let log = s.path().join("python.log");
    let python = stand_in_python(&s, &log).display().to_string();
    let path = path_without_nvcc();
    let user: Vec<(&str, Option<&str>)> = vec![
        ("HOME", home.to_str()),
        ("OCC_CUDA_DIR", None),
        ("XDG_CACHE_HOME", None),
        ("NVCC", None),
        ("CUDA_HOME", None),
        ("CUDA_PATH", None),
        ("CUDA_ROOT", None),
        ("PATH", path.to_str()),
        ("PYTHON", Some(python.as_str())),
    ];
    // With a CUDA library beside nvcc: its stamp lists one wheel more than
    // the script's, and is still the same toolkit to it.
    let (code, out, err) = occ(
        s.path(),
        &["toolkit", "install", "--library", "cublas"],
        &user,
        None,
    )
    .parts();
    assert_eq!(code, 0, "{err}");
    let nvidia = home.join(".cache/occ/cuda/cu13/nvidia/cu13");
    assert_eq!(out.trim(), nvidia.join("bin/nvcc").display().to_string());
    let installs = calls(&log).len();

    let checkout = s.path().join("occ");
    let script = checkout_with_the_script(&checkout);
    for args in [&[][..], &["--print"][..]] {
        let mut cmd = std::process::Command::new(&script);
        cmd.args(args);
        for (key, value) in &user {
            match value {
                Some(v) => cmd.env(key, v),
                None => cmd.env_remove(key),
            };
        }
        let ran = cmd.output().expect("run scripts/cuda-toolkit");
        let (out, err) = (
            String::from_utf8_lossy(&ran.stdout),
            String::from_utf8_lossy(&ran.stderr),
        );
        assert!(ran.status.success(), "{args:?}: {out}\n{err}");
        assert!(
            out.contains(&format!("export CUDA_HOME={}\n", nvidia.display())),
            "{args:?}: the exports name the toolkit installed: {out}\n{err}"
        );
        assert_eq!(calls(&log).len(), installs, "{args:?}: pip ran again");
        assert!(
            !checkout.join(".cuda").exists(),
            "{args:?}: a second toolkit in .cuda/: {err}"
        );
    }
}
