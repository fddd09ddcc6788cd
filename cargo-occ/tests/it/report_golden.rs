//! Golden files of `cargo occ report` in every format (table, markdown,
//! json, html), run as a process on an in-process build of
//! `tests/fixtures/cu/gate_cli/k.cu` for sm_80 and sm_90 with the nvcc that
//! `scripts/cuda-toolkit` pins (13.5). Through the binary, not the
//! renderers' functions, so the goldens hold wherever the renderers live.
//! The snapshots are in `cargo-occ/tests/snapshots/`; tests/README.md says
//! how to bless them.

use crate::occ;
use occ_tests::{build_env, kernels_build, Scratch};

#[test]
fn every_report_format_matches_its_golden_file() {
    let s = Scratch::new();
    s.write(
        "kernels/k.cu",
        include_str!("../../../tests/fixtures/cu/gate_cli/k.cu"),
    );
    let report = kernels_build(s.path(), &s.path().join("out"), ["sm_80", "sm_90"])
        .try_compile_with(&build_env(&[
            ("CARGO_PKG_NAME", Some("golden")),
            ("NVCC_CCBIN", None),
        ]))
        .unwrap_or_else(|e| panic!("build: {e}"));
    let manifest = report.out_dir.join("manifest.json");
    let manifest = manifest.to_str().expect("utf-8 path");
    let scratch = s.path().display().to_string();
    for format in ["table", "markdown", "json", "html"] {
        let args = ["report", "--manifest", manifest, "--format", format];
        let (code, text, err) = occ(s.path(), &args, &[], None).parts();
        assert_eq!(code, 0, "{format}: {err}");
        assert!(!text.is_empty(), "{format}: no report");
        assert!(
            !text.contains(&scratch),
            "the {format} report names the build folder {scratch}:\n{text}"
        );
        insta::assert_snapshot!(format, text);
    }
}
