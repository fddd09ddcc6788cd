//! The same inputs give byte-identical `manifest.json`, `kernels.rs` and
//! device code: in another folder, with another parallelism (`NUM_JOBS`),
//! with files listed in another order (`.file()` vs `.glob()`), and on a clean
//! rebuild. In another folder the device code that is embedded (the
//! fatbins, `*.embed.cubin`, `*.embed.ptx`) is the same with source lines
//! too: the line information, whose table names the folder, is taken out
//! of it. Only the analysed cubins and PTX, which keep it for nvdisasm,
//! differ. (tests/tests/it/pipeline.rs checks two folders with the zoo
//! module.)
//!
//! Kernels of internal linkage (an anonymous namespace, `static`, a
//! template of an anonymous type), whose symbols cicc would hash from the
//! source's path or the process, have one identity in any folder and any
//! cold build; source lines on or off leave every cubin hash alone; and the
//! anchor header occ has nvcc include works under a quote in the path and
//! is never watched.

use occ_build::Build;
use occ_shell::Env;
use occ_tests::{build_env, build_of, Scratch};
use std::collections::BTreeMap;
use std::path::Path;

/// The files of `tests/fixtures/cu/determinism` and of `cu/lines` (whose
/// `churner` spills, so that stage 5½ locates it: only kernels whose
/// registers matter get lines), in the order the second build lists them
/// (reversed, the first twice).
const FILES: [&str; 4] = [
    "kernels/b_tmpl.cu",
    "kernels/a_plain.cu",
    "kernels/c_same_name.cu",
    "kernels/tmpl.cu",
];

fn crate_in(s: &Scratch, sub: &str) -> std::path::PathBuf {
    s.copy_cu("determinism", &format!("{sub}kernels"));
    s.copy_cu("lines", &format!("{sub}kernels"));
    let root = s.path().join(sub);
    for rel in FILES {
        assert!(root.join(rel).is_file(), "{rel} in the fixture");
    }
    root
}

fn env(num_jobs: &str) -> Env {
    build_env(&[("NUM_JOBS", Some(num_jobs))])
}

/// Every file the build left in `$OUT_DIR/occ` (not the cache), by name,
/// except `gate.json`, which tells `cargo occ` where this checkout's lock
/// file is, an absolute path by design; and `parts.json`, which names the
/// run of the build script (its process) and the files it compiled, to
/// merge that run's `Build`s: bookkeeping of one run, no output.
fn outputs(out: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(out.join("occ"))
        .expect("out/occ")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.is_file() && !p.ends_with(occ_model::compare::GATE_FILE) && !p.ends_with("parts.json")
        })
        .map(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (name, std::fs::read(&p).expect("read output"))
        })
        .collect()
}

fn assert_same(a: &BTreeMap<String, Vec<u8>>, b: &BTreeMap<String, Vec<u8>>, what: &str) {
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "{what}: the same files"
    );
    for (name, bytes) in a {
        assert!(b[name] == *bytes, "{what}: {name} differs");
    }
    for must in ["manifest.json", "kernels.rs"] {
        assert!(a.contains_key(must), "{must} written");
    }
}

/// Device code: its line table (`-lineinfo`, for `Build::source_lines`)
/// names the folder the crate is in; and `device_code.rs`, which names
/// each blob by the hash and length of its bytes (`kernels.rs` does not).
fn is_device_code(name: &str) -> bool {
    [".cubin", ".ptx", ".fatbin"]
        .iter()
        .any(|e| name.ends_with(e))
        || name == "device_code.rs"
}

/// What `kernels.rs` embeds: the fatbins and the copies less line
/// information they are made from.
fn is_embedded(name: &str) -> bool {
    name.ends_with(".fatbin") || name.contains(".embed.")
}

#[test]
fn parallelism_file_order_and_folder_do_not_change_the_output() {
    // With source lines (the default) everything but the analysed device
    // code, which names the folder: what is embedded is the same; without
    // source lines the analysed device code too.
    for lines in [true, false] {
        let s = Scratch::new();
        // One build: glob, one job at a time.
        let root_a = crate_in(&s, "a/");
        let out_a = s.path().join("a/target/out");
        let ra = build_of(&root_a, &out_a, "kernels/*.cu", ["sm_80", "sm_90"])
            .source_lines(lines)
            .try_compile_with(&env("1"))
            .expect("build a");
        // The other: files listed one by one in reverse order (one twice),
        // eight jobs at once, in a deeper folder with a space.
        let root_b = crate_in(&s, "some where/else/b/");
        let out_b = s.path().join("elsewhere out");
        let mut b = Build::new();
        b.root(&root_b).out_dir(&out_b).source_lines(lines);
        for rel in FILES.iter().rev() {
            b.file(rel);
        }
        b.file(FILES[0]).archs(["sm_80", "sm_90"]);
        let rb = b.try_compile_with(&env("8")).expect("build b");
        assert_eq!(
            ra.manifest().expect("manifest"),
            rb.manifest().expect("manifest")
        );
        assert_eq!(ra.manifest().expect("manifest").kernels.len(), 7);
        let has_lines = ra
            .manifest()
            .expect("manifest")
            .kernels
            .iter()
            .any(|k| k.archs.values().any(|a| a.lines.is_some()));
        assert_eq!(has_lines, lines, "source_lines({lines})");
        let (mut oa, mut ob) = (outputs(&out_a), outputs(&out_b));
        if lines {
            for o in [&mut oa, &mut ob] {
                o.retain(|name, _| !is_device_code(name) || is_embedded(name));
            }
            assert!(
                oa.keys().any(|n| n.ends_with(".fatbin")),
                "the fatbins are compared"
            );
        }
        assert_same(
            &oa,
            &ob,
            &format!("NUM_JOBS=1 glob vs NUM_JOBS=8 files, source_lines({lines})"),
        );
    }
}

#[test]
fn a_clean_rebuild_gives_the_same_bytes() {
    let s = Scratch::new();
    let root = crate_in(&s, "");
    let out = s.path().join("out");
    let build = || {
        build_of(&root, &out, "kernels/*.cu", ["sm_90", "sm_80"])
            .try_compile_with(&env("2"))
            .expect("build")
    };
    let first = build();
    let before = outputs(&out);
    std::fs::remove_dir_all(&out).expect("clean");
    let second = build();
    assert_eq!(
        second.nvcc_runs,
        FILES.len() * 2,
        "a clean build runs every job (file x arch)"
    );
    assert_same(&before, &outputs(&out), "clean rebuild");
    // The arch list keeps the order given (the first is the default).
    assert_eq!(
        first.manifest().expect("manifest").archs,
        ["sm_90", "sm_80"]
    );
    // An unchanged rebuild also writes the same bytes.
    let third = build();
    assert_eq!(third.nvcc_runs, 0);
    assert_same(&before, &outputs(&out), "unchanged rebuild");
}

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
fn no_lines_build(dir: &Path, out: &Path, env: &[(&str, Option<&str>)]) -> occ_build::Report {
    build_of(dir, out, "kernels/k.cu", ["sm_80", "sm_100"])
        .source_lines(false)
        .try_compile_with(&build_env(env))
        .unwrap_or_else(|e| panic!("build in {}: {e}", dir.display()))
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

#[test]
fn internal_linkage_kernels_have_the_same_identity_in_any_folder() {
    // Two checkouts of one crate: different folders, different depths.
    let a = Scratch::new();
    let b = Scratch::new();
    let b_root = b.path().join("deeper/checkout");
    a.write("kernels/k.cu", INTERNAL);
    b.write("deeper/checkout/kernels/k.cu", INTERNAL);
    let first = no_lines_build(a.path(), &a.path().join("out"), &[]);
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
    let second = no_lines_build(&b_root, &b_root.join("out"), &[]);
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
        let name = Path::new(blob.file.as_deref().unwrap_or_default());
        assert!(
            read(&first.out_dir.join(name)) == read(&second.out_dir.join(name)),
            "device code {} differs between two folders",
            blob.file.as_deref().unwrap_or_default()
        );
    }
    // The lock blessed in one folder gates the other in CI: no "kernel gone".
    std::fs::copy(first.out_dir.join("occ.lock.new"), b_root.join("occ.lock"))
        .expect("copy the lock");
    let gated = no_lines_build(&b_root, &b_root.join("out"), &[("CI", Some("true"))]);
    assert_eq!(names(&gated), names(&first));
    // With source lines (the default) too: the same candidate lock, cubin
    // hashes included, in both folders.
    let lines = |root: &Path| {
        build_of(root, "lines", "kernels/k.cu", ["sm_80", "sm_100"])
            .try_compile_with(&build_env(&[]))
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
    let r = no_lines_build(root, &root.join("out"), &[]);
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
fn a_file_of_anonymous_namespace_kernels_alone_has_one_symbol() {
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
fn a_kernel_added_above_leaves_anonymous_symbols_alone() {
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

#[test]
fn source_lines_on_or_off_give_the_same_cubin_hashes() {
    // Kernels with noinline calls (relocations, the call graph), spills,
    // templates, shared and constant memory, and internal linkage.
    let s = Scratch::new();
    s.copy_cu("pipeline/zoo", "kernels/zoo");
    s.copy_cu("lines", "kernels/lines");
    s.write("kernels/internal.cu", INTERNAL);
    let hashes = |lines: bool| -> Vec<(String, String, String)> {
        let r = build_of(
            s.path(),
            if lines { "with" } else { "without" },
            "kernels/**/*.cu",
            ["sm_80", "sm_90", "sm_100", "sm_120"],
        )
        .source_lines(lines)
        .try_compile_with(&build_env(&[]))
        .unwrap_or_else(|e| panic!("build (source lines {lines}): {e}"));
        r.manifest()
            .expect("manifest")
            .kernels
            .iter()
            .flat_map(|k| {
                k.archs.iter().map(|(arch, a)| {
                    (
                        k.name.clone(),
                        arch.clone(),
                        a.cubin_hash.clone().unwrap_or_default(),
                    )
                })
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
fn the_anchor_header_works_under_a_quote_and_is_not_watched() {
    // nvcc escapes a `'` of an absolute -include path wrongly; and a file
    // the build script writes into OUT_DIR must not be watched (the next
    // no-op build would rerun the script).
    let s = Scratch::new();
    let root = s.path().join("bob's crate");
    s.write("bob's crate/kernels/k.cu", INTERNAL);
    let r = no_lines_build(&root, &root.join("out"), &[]);
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
    let r = no_lines_build(&root, &s.path().join("ws/target/out"), &[]);
    let watched = r.directives().rerun_if_changed();
    assert!(
        watched.iter().any(|p| p.ends_with("k.cu")),
        "the source is watched: {watched:?}"
    );
    assert!(!watched.iter().any(|p| p.contains("anchor")), "{watched:?}");
}
