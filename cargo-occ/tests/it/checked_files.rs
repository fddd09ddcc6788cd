//! What occ reads is checked before it is believed, with no nvcc (builds
//! written by hand from example-app's lock): the lock records facts only,
//! and a number that would follow from them written into it (a hand edit,
//! a bad merge, a lock of a tool that wrote one) is refused by every
//! reader (`diff`, `check`, a build from the lock), naming the field and
//! the line, rather than ignored; `tune import` refuses timings of another
//! cubin than the lock's unless told to keep them.

use super::cli_robustness::{hand_build, EXAMPLE_LOCK};
use crate::occ;
use occ_tests::{build_env, Scratch};
use std::path::Path;

/// example-app's lock after a hand edit (or a bad merge): saxpy on sm_80
/// given an occupancy of 0.25 beside its facts, which the lock leaves out
/// (the model's, from its registers, is 1.0).
fn edited_lock() -> String {
    let line = EXAMPLE_LOCK
        .lines()
        .find(|l| l.starts_with("      \"sm_80\": {\"registers\": 10,"))
        .expect("saxpy's sm_80 line");
    let edited = line.replacen(
        "\"registers\": 10,",
        "\"registers\": 10, \"occupancy\": 0.25,",
        1,
    );
    assert_ne!(edited, line);
    EXAMPLE_LOCK.replacen(line, &edited, 1)
}

/// The refusal names the file, the field, where it is and what to do.
fn names_the_mismatch(out: &str) {
    let line = EXAMPLE_LOCK
        .lines()
        .position(|l| l.starts_with("      \"sm_80\": {\"registers\": 10,"))
        .expect("saxpy's sm_80 line")
        + 1;
    for needle in [
        "occ.lock",
        "unknown field `occupancy`",
        &format!("line {line}"),
        "cargo occ bless",
    ] {
        assert!(out.contains(needle), "{needle:?} not in:\n{out}");
    }
}

#[test]
fn diff_refuses_a_lock_with_a_derived_number_written_in() {
    let s = Scratch::new();
    let good = s.write("good.lock", EXAMPLE_LOCK).display().to_string();
    let bad = s.write("occ.lock", &edited_lock()).display().to_string();
    for args in [[&good, &bad], [&bad, &good]] {
        let (code, out) = occ(s.path(), &["diff", args[0], args[1]], &[], None).code_and_text();
        assert_eq!(code, 2, "`cargo occ diff` compared an edited lock:\n{out}");
        names_the_mismatch(&out);
    }
}

#[test]
fn check_refuses_an_edited_lock() {
    let (s, m) = hand_build(|_| {}, true, None);
    s.write("occ.lock", &edited_lock());
    let (code, out) = occ(s.path(), &["check", "--manifest", &m], &[], None).code_and_text();
    assert_ne!(
        code, 0,
        "`cargo occ check` passed on an edited lock:\n{out}"
    );
    names_the_mismatch(&out);
}

#[test]
fn a_build_without_nvcc_refuses_an_edited_lock() {
    // Lock mode: kernels.rs and #[launch_config] must not stand on a
    // number the lock cannot vouch for.
    let s = Scratch::new();
    for file in ["nbody", "reduce", "saxpy", "softmax", "transpose"] {
        s.write(&format!("kernels/{file}.cu"), "// built from occ.lock\n");
    }
    let build = || {
        let mut b = occ_build::Build::new();
        b.root(s.path())
            .out_dir(s.path().join("out"))
            .glob("kernels/*.cu")
            .archs(["sm_80", "sm_86", "sm_90"])
            // As example-app's build.rs declares it.
            .dynamic_smem("block_sum", occ_build::DynamicSmem::per_thread(32 * 4));
        b.try_compile_with(&build_env(&[
            ("OCC_NO_NVCC", Some("1")),
            ("CARGO_PKG_NAME", Some("example-app")),
        ]))
    };
    s.write("occ.lock", EXAMPLE_LOCK);
    build().expect("the committed lock builds without nvcc");
    s.write("occ.lock", &edited_lock());
    let err = build().expect_err("a build stood on an edited lock");
    names_the_mismatch(&err.to_string());
}

#[test]
fn tune_import_refuses_timings_of_another_cubin_unless_kept() {
    let (s, m) = hand_build(|_| {}, true, None);
    let manifest = occ_shell::files::read_manifest(Path::new(&m)).expect("manifest");
    let mut results = occ_tests::recorded_results(
        &manifest,
        "saxpy",
        "sm_80",
        "n=1M",
        &[(128, 2.0), (256, 3.0)],
        0.01,
    );
    let ours = results.measurements[0].cubin_hash.clone();
    assert!(!ours.is_empty() && EXAMPLE_LOCK.contains(&ours));
    let theirs = occ_model::schema::measured::content_hash(b"an older build's cubin");
    results.measurements[0].cubin_hash = theirs.clone();
    let file = s
        .write("occ-tune.json", &results.to_json())
        .display()
        .to_string();
    let (code, out) = occ(
        s.path(),
        &["tune", "import", &file, "--manifest", &m],
        &[],
        None,
    )
    .code_and_text();
    assert_eq!(code, 2, "{out}");
    assert_eq!(s.read("occ.lock"), EXAMPLE_LOCK, "imported:\n{out}");
    assert!(
        out.contains(&ours) && out.contains(&theirs) && out.contains("--allow-stale"),
        "the refusal names both hashes and the way to keep it: {out}"
    );
    // Kept on request, with a warning.
    let (code, out) = occ(
        s.path(),
        &["tune", "import", &file, "--allow-stale", "--manifest", &m],
        &[],
        None,
    )
    .code_and_text();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("1 measurement added"), "{out}");
    assert!(
        out.contains("warning: kept (--allow-stale) 1 measurement")
            && out.contains("saxpy on sm_80"),
        "{out}"
    );
    assert!(s.read("occ.lock").contains(&theirs));
}

/// example-app's `linalg::transpose<float, 32>`, measured on an H200 (sm_90).
fn transpose(
    m: &mut occ_model::schema::manifest::Manifest,
) -> &mut occ_model::schema::manifest::Kernel {
    m.kernels
        .iter_mut()
        .find(|k| k.short_name == "transpose")
        .expect("transpose")
}

#[test]
fn check_fails_where_the_build_fails_on_a_measured_kernel_whose_code_changed() {
    // The build's gate fails when a measured kernel's cubin is not the one
    // measured; `cargo occ check` on the same build must not say "ok".
    // transpose<float, 32> on sm_90 was measured on an H200; its cubin is
    // other code now.
    let (s, m) = hand_build(
        |m| {
            transpose(m)
                .archs
                .get_mut("sm_90")
                .expect("sm_90")
                .cubin_hash = Some(occ_model::schema::measured::content_hash(b"edited code"));
        },
        true,
        None,
    );
    let (code, out) = occ(s.path(), &["check", "--manifest", &m], &[], None).code_and_text();
    assert_eq!(
        code, 1,
        "`cargo occ check` passed a stale measurement:\n{out}"
    );
    for needle in [
        "not ok: the cubin of 1 measured kernel changed since occ.lock was blessed",
        // The kernel by its C++ name, not its symbol.
        "linalg::transpose<float, 32> on sm_90",
        "cargo occ bless",
    ] {
        assert!(out.contains(needle), "{needle:?} not in:\n{out}");
    }
    assert!(!out.contains("_ZN6linalg"), "{out}");
}

#[test]
fn tables_show_a_long_template_name_short_and_explain_takes_it() {
    // A CUB-sized instantiation: its full name is 240 characters.
    let long = "cub::_V_300500_SM_800::detail::reduce::DeviceReduceKernel<cub::_V_300500_SM_800::\
                detail::reduce::policy_selector_from_types<float, unsigned int, \
                cuda::std::__4::plus<void>>, true, float*, float*, unsigned int, unsigned int, \
                cuda::std::__4::plus<void>, float, cuda::std::__4::identity>";
    let (s, m) = hand_build(
        |m| {
            let k = transpose(m);
            k.base_name = long.into();
            k.short_name = "DeviceReduceKernel".into();
        },
        false,
        None,
    );
    let shown = occ_model::compiler::names::table_name(long);
    assert!(
        shown.starts_with("DeviceReduceKernel<policy_selector_from_types<…>, true, ")
            && shown.chars().count() < 70,
        "{shown}"
    );
    for format in ["table", "markdown", "html"] {
        let (code, out) = occ(
            s.path(),
            &["report", "--format", format, "--manifest", &m],
            &[],
            None,
        )
        .code_and_text();
        assert_eq!(code, 0, "{out}");
        // In the tables, the short name; the full one nowhere but HTML's hover.
        let shown = if format == "html" {
            shown.replace('<', "&lt;").replace('>', "&gt;")
        } else {
            shown.clone()
        };
        assert!(out.contains(&shown), "{format}: {shown:?} not in\n{out}");
        assert!(
            !out.contains("_V_300500_SM_800::detail::reduce::DeviceReduceKernel")
                || format == "html",
            "{format}:\n{out}"
        );
    }
    let explain = |name: &str| {
        occ(
            s.path(),
            &["explain", name, "--arch", "sm_90", "--manifest", &m],
            &[],
            None,
        )
        .code_and_text()
    };
    // The full name one command away.
    let (code, out) = explain(&shown);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(long), "{out}");
    // The hash selects only with its kernel's name before it.
    let hash = shown.rsplit_once(" #").expect("a hash").1;
    let other = format!("block_sum #{hash}");
    let (code, out) = explain(&other);
    assert_ne!(code, 0, "{other} found a kernel:\n{out}");
}
