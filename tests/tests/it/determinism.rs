//! The same inputs give byte-identical `manifest.json`, `kernels.rs` and
//! device code: in another folder, with another parallelism (`NUM_JOBS`),
//! with files listed in another order (`.file()` vs `.glob()`), and on a clean
//! rebuild. In another folder the device code that is embedded (the
//! fatbins, `*.embed.cubin`, `*.embed.ptx`) is the same with source lines
//! too: the line information, whose table names the folder, is taken out
//! of it. Only the analysed cubins and PTX, which keep it for nvdisasm,
//! differ. (tests/tests/it/pipeline.rs checks two folders with the zoo
//! module.)

use occ_build::Build;
use occ_shell::Env;
use occ_tests::Scratch;
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
    occ_tests::build_env(&[("NUM_JOBS", Some(num_jobs))])
}

/// Every file the build left in `$OUT_DIR/occ` (not the cache), by name,
/// except `gate.json`: it tells `cargo occ` where this checkout's lock file
/// is, an absolute path by design.
fn outputs(out: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(out.join("occ"))
        .expect("out/occ")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_file() && !p.ends_with(occ_model::compare::GATE_FILE))
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
        let mut a = Build::new();
        a.root(&root_a)
            .out_dir(&out_a)
            .glob("kernels/*.cu")
            .archs(["sm_80", "sm_90"])
            .source_lines(lines);
        let ra = a.try_compile_with(&env("1")).expect("build a");
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
        let mut b = Build::new();
        b.root(&root)
            .out_dir(&out)
            .glob("kernels/*.cu")
            .archs(["sm_90", "sm_80"]);
        b.try_compile_with(&env("2")).expect("build")
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
