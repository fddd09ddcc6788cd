//! Issue 12, items 13, 14 and 18: the gate against `occ.lock` through the
//! build-script API. Identity of a kernel across a moved file or a rename,
//! credit for spills gone, blessing through a symlink or into a read-only
//! lock, and the messages for a bad or foreign lock.

use occ_build::Build;
use occ_tests::{build_env, Scratch};

const ALPHA: &str = "extern \"C\" __global__ void alpha(float* p) { p[threadIdx.x] *= 2.0f; }\n";
const BETA: &str = "extern \"C\" __global__ void beta(int* p) { p[threadIdx.x] += 1; }\n";

/// The sweep tests' n-body forces (about 56 registers uncapped on sm_80,
/// spills at 32), with `__launch_bounds__(BOUNDS)`.
fn forces() -> String {
    include_str!("../../fixtures/cu/sweep/forces.cu")
        .replace("void forces8", "void __launch_bounds__(BOUNDS) forces8")
}

fn build(s: &Scratch) -> Build {
    let mut b = Build::new();
    b.root(s.path())
        .out_dir(s.path().join("out"))
        .glob("kernels/*.cu")
        .arch("sm_80");
    b
}

/// Builds with `OCC_BLESS=1`: writes `occ.lock`.
fn bless(s: &Scratch) {
    build(s)
        .try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]))
        .expect("bless");
}

/// The message of a build that must fail, or a panic saying it built.
fn failure(s: &Scratch, what: &str) -> String {
    match build(s).try_compile_with(&build_env(&[])) {
        Ok(_) => panic!("{what}: the build passed"),
        Err(e) => e.to_string(),
    }
}

fn two_kernels() -> Scratch {
    let s = Scratch::new();
    s.write("kernels/a.cu", ALPHA);
    s.write("kernels/b.cu", BETA);
    bless(&s);
    s
}

#[test]
fn item13_moved_file_with_the_same_kernels_passes_the_gate() {
    let s = two_kernels();
    std::fs::rename(s.path().join("kernels/b.cu"), s.path().join("kernels/c.cu")).expect("move");
    if let Err(e) = build(&s).try_compile_with(&build_env(&[])) {
        panic!("b.cu moved to c.cu, no kernel changed, yet the gate failed: {e}");
    }
}

#[test]
fn item13_renamed_kernel_shows_its_new_name() {
    let s = two_kernels();
    s.write("kernels/b.cu", &BETA.replace("beta", "renamed_kernel"));
    let msg = failure(&s, "beta renamed to renamed_kernel");
    assert!(
        msg.contains("beta") && msg.contains("renamed_kernel"),
        "the verdict must show the kernel gone (beta) and the new one (renamed_kernel): {msg}"
    );
}

#[test]
fn item13_spills_gone_are_credited_in_the_verdict() {
    let s = Scratch::new();
    // 32 registers (1024 threads x 2 blocks) make it spill; 64 do not.
    s.write("kernels/k.cu", &forces().replace("BOUNDS", "1024, 2"));
    bless(&s);
    s.write("kernels/k.cu", &forces().replace("BOUNDS", "512, 2"));
    let msg = failure(&s, "spilling kernel given a heavier launch bound");
    // The row of forces8: kernel, arch, source, registers, smem, spills, ...
    let row: Vec<&str> = msg
        .lines()
        .find(|l| l.starts_with("  forces8 ") && l.contains("sm_80"))
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let header: Vec<&str> = msg
        .lines()
        .find(|l| l.starts_with("  kernel "))
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let spills = header.iter().position(|c| *c == "spills");
    let credited = spills
        .and_then(|i| row.get(i))
        .is_some_and(|cell| cell.ends_with("-> 0") && !cell.starts_with("0 "));
    assert!(
        credited,
        "the verdict must show the spills gone, not only the occupancy lost: {msg}"
    );
}

#[cfg(unix)]
#[test]
fn item14_bless_writes_through_a_symlinked_lock() {
    let s = Scratch::new();
    s.write("kernels/a.cu", ALPHA);
    s.write("locks/real.lock", "");
    std::fs::remove_file(s.path().join("locks/real.lock")).expect("rm");
    bless(&s);
    std::fs::rename(s.path().join("occ.lock"), s.path().join("locks/real.lock")).expect("move");
    std::os::unix::fs::symlink("locks/real.lock", s.path().join("occ.lock")).expect("link");
    s.write("kernels/b.cu", BETA);
    bless(&s);
    let link = s.path().join("occ.lock");
    assert!(
        std::fs::symlink_metadata(&link)
            .expect("occ.lock")
            .file_type()
            .is_symlink(),
        "OCC_BLESS=1 replaced the symlink occ.lock with a plain file"
    );
    assert!(
        s.read("locks/real.lock").contains("\"beta\""),
        "the lock the symlink points to was not updated"
    );
}

#[cfg(unix)]
#[test]
fn item14_bless_refuses_a_read_only_lock() {
    use std::os::unix::fs::PermissionsExt;
    let s = Scratch::new();
    s.write("kernels/a.cu", ALPHA);
    bless(&s);
    let lock = s.path().join("occ.lock");
    let before = s.read("occ.lock");
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o444)).expect("chmod");
    s.write("kernels/b.cu", BETA);
    let result = build(&s).try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]));
    assert_eq!(
        s.read("occ.lock"),
        before,
        "OCC_BLESS=1 overwrote a read-only occ.lock"
    );
    let msg = result.map_or_else(|e| e.to_string(), |_| String::new());
    assert!(
        msg.contains("occ.lock") && msg.contains("read-only"),
        "the build must refuse a read-only lock, saying so: {msg:?}"
    );
}

/// A blessed one-kernel crate whose `occ.lock` is then edited by `edit`.
fn with_lock(edit: impl FnOnce(&mut serde_json::Value)) -> Scratch {
    let s = Scratch::new();
    s.write("kernels/a.cu", ALPHA);
    bless(&s);
    let mut lock: serde_json::Value = serde_json::from_str(&s.read("occ.lock")).expect("lock JSON");
    edit(&mut lock);
    s.write(
        "occ.lock",
        &format!("{}\n", serde_json::to_string_pretty(&lock).expect("JSON")),
    );
    s
}

fn result_text(s: &Scratch) -> Result<(), String> {
    build(s)
        .try_compile_with(&build_env(&[]))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[test]
fn item18_string_schema_is_not_called_missing() {
    let s = with_lock(|l| l["schema"] = serde_json::json!("1"));
    let msg = result_text(&s).expect_err("a lock with \"schema\":\"1\" was accepted");
    assert!(
        msg.contains("schema") && !msg.contains("missing"),
        "the schema is present but a string; the message must not call it missing: {msg}"
    );
}

#[test]
fn item18_lock_with_a_utf8_bom_is_read() {
    let s = Scratch::new();
    s.write("kernels/a.cu", ALPHA);
    bless(&s);
    let text = s.read("occ.lock");
    s.write("occ.lock", &format!("\u{feff}{text}"));
    if let Err(e) = result_text(&s) {
        panic!("occ.lock saved with a UTF-8 BOM (as some Windows editors do) failed: {e}");
    }
}

#[test]
fn item18_duplicate_lock_entries_are_refused() {
    let s = with_lock(|l| {
        let first = l["kernels"][0].clone();
        l["kernels"]
            .as_array_mut()
            .expect("kernels array")
            .push(first);
    });
    let msg = result_text(&s).expect_err("a lock with the same kernel twice was accepted");
    assert!(
        msg.contains("duplicate") || msg.contains("twice"),
        "the message must say an entry is duplicated: {msg}"
    );
}

#[test]
fn item18_lock_of_another_crate_names_its_package() {
    let s = with_lock(|l| {
        l["package"] = serde_json::json!("some-other-crate");
        l["kernels"][0]["name"] = serde_json::json!("theirs");
    });
    let err = build(&s)
        .try_compile_with(&build_env(&[("CARGO_PKG_NAME", Some("mine"))]))
        .expect_err("another crate's lock was accepted");
    let msg = err.to_string();
    assert!(
        msg.contains("some-other-crate"),
        "a lock of another crate must be named as such (its package), not reported kernel by kernel: {msg:?}"
    );
    // Its own cause, with both packages and the fixes, not a corrupt file.
    assert!(
        err.kind() == occ_build::ErrorKind::Lock
            && msg.contains("is the lock of package `some-other-crate`, not of `mine`"),
        "{err:?}"
    );
    assert!(
        msg.contains(".lock_file()") && msg.contains("cargo occ bless"),
        "{msg}"
    );
}

#[test]
fn item18_huge_occupancy_does_not_print_inf() {
    let s = with_lock(|l| {
        let archs = l["kernels"][0]["archs"]
            .as_object_mut()
            .expect("archs object");
        for a in archs.values_mut() {
            a["best"]["occupancy"] = serde_json::json!(1e308);
        }
    });
    let msg = result_text(&s).expect_err("an occupancy of 1e308 in the lock was accepted");
    assert!(
        !msg.contains("inf%") && !msg.contains("NaN"),
        "an occupancy of 1e308 must be refused or printed as a number: {msg}"
    );
}
