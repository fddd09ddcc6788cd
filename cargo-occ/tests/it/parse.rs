//! `cargo occ parse` as a process: files, stdin, exit codes.

use crate::occ;
use std::path::Path;

fn fixture(name: &str) -> String {
    occ_tests::fixture_path(name).display().to_string()
}

#[test]
fn parses_a_saved_log_as_json() {
    let log = fixture("ptxas-12.9-sm_61.log");
    let (code, out, err) = occ(Path::new("."), &["parse", &log, "--json"], &[], None).parts();
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    let kernels = v["kernels"].as_array().expect("kernels");
    let text = std::fs::read_to_string(&log).expect("fixture");
    assert_eq!(
        kernels.len(),
        text.matches("Compiling entry function").count()
    );
    let smem = kernels
        .iter()
        .find(|k| k["demangled"] == "smem_static(float*)")
        .expect("smem_static");
    assert_eq!(smem["static_smem"], 1024);
    assert_eq!(smem["arch"], "sm_61");
}

#[test]
fn reads_stdin_and_keeps_nulls() {
    let text = std::fs::read_to_string(fixture("ptxas-11.8-sm_70.log")).expect("fixture");
    let (code, out, err) = occ(Path::new("."), &["parse", "-", "--json"], &[], Some(&text)).parts();
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert!(v["kernels"]
        .as_array()
        .is_some_and(|k| !k.is_empty() && k.iter().all(|k| k["barriers"].is_null())));
}

#[test]
fn table_by_default() {
    let (code, out, _) = occ(
        Path::new("."),
        &["parse", &fixture("ptxas-13.5-sm_90.log")],
        &[],
        None,
    )
    .parts();
    assert_eq!(code, 0);
    assert!(out.starts_with("kernel"));
    assert!(out.contains("ns::inner::tkern<double, 128>"));
}

#[test]
fn exit_codes() {
    let (code, _, err) = occ(
        Path::new("."),
        &["parse", "/nonexistent/ptxas.log"],
        &[],
        None,
    )
    .parts();
    assert_eq!(code, 1);
    assert!(
        err.contains("cannot read the log /nonexistent/ptxas.log"),
        "{err}"
    );
    let (code, _, err) = occ(
        Path::new("."),
        &["parse", "-"],
        &[],
        Some("ptxas info    : Used many registers\n"),
    )
    .parts();
    assert_eq!(code, 1);
    assert!(err.contains("line 1"), "{err}");
    let (code, _, _) = occ(Path::new("."), &["parse"], &[], None).parts();
    assert_eq!(code, 2);
    let (code, _, _) = occ(Path::new("."), &["parse", "a", "--bogus"], &[], None).parts();
    assert_eq!(code, 2);
}
