//! Live tests with the real nvcc: ptxas's and nvcc's own words reach the
//! user, and what they say is recorded.

use occ_model::schema::manifest::WarningKind;
use occ_tests::{build_env, text, Scratch, ScratchCrate};

/// Two kernels of one file, so that one `-maxrregcount` caps both.
const TWO: &str = "__global__ void saxpy(float a, const float *x, float *y, int n) {\n\
    int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
    if (i < n) y[i] = a * x[i] + y[i];\n\
}\n\
__global__ void fill(float *y) { y[threadIdx.x] = 1.0f; }\n";

#[test]
fn a_register_cap_below_ptxas_bound_is_warned_once_and_recorded_as_applied() {
    let s = Scratch::new();
    s.write("kernels/k.cu", TWO);
    let mut b = s.build(["sm_80", "sm_90"]);
    b.max_registers("kernels/k.cu", 16);
    let report = b
        .try_compile_with(&build_env(&[("OCC_BLESS", Some("1"))]))
        .expect("build");
    // ptxas says it once per arch: one line for the kind, with its words
    // and every kernel × arch it was printed for.
    let said: Vec<&String> = report
        .directives()
        .warnings()
        .iter()
        .filter(|w| w.contains("ptxas"))
        .collect();
    assert_eq!(said.len(), 1, "{:#?}", report.directives().warnings());
    let words =
        "\"For profile sm_80 adjusting per thread register count of 16 to lower bound of 24\"";
    assert!(
        said[0].starts_with("occ: ptxas warns for 2 kernels: ")
            && said[0].contains("saxpy (sm_80, sm_90)")
            && said[0].contains("fill (sm_80, sm_90)")
            && said[0].contains(words)
            && said[0].contains(" and 1 other like it ")
            && said[0].contains("report.txt"),
        "{}",
        said[0]
    );
    // The fact: the cap ptxas applied, not the one asked for.
    let m = report.manifest().expect("manifest");
    assert_eq!(m.kernels.len(), 2);
    for k in &m.kernels {
        for (arch, a) in &k.archs {
            assert_eq!(a.facts.maxrregcount, Some(24), "{} {arch}", k.name);
            assert_eq!(
                a.warnings.iter().map(|w| &w.kind).collect::<Vec<_>>(),
                [&WarningKind::RegisterCapAdjusted {
                    requested: 16,
                    applied: 24
                }],
                "{} {arch}",
                k.name
            );
            assert!(a.warnings[0].text.contains(&format!("profile {arch} ")));
        }
    }
    let lock = s.read("occ.lock");
    assert_eq!(lock.matches("\"maxrregcount\": 24").count(), 4, "{lock}");
    assert!(!lock.contains("\"maxrregcount\": 16"), "{lock}");
    // The report has every kernel × arch's words.
    let text = s.read("out/occ/report.txt");
    let section = text
        .split("\nptxas warnings\n")
        .nth(1)
        .expect("a ptxas section");
    assert_eq!(
        section
            .lines()
            .filter(|l| l.contains("lower bound of 24"))
            .count(),
        4,
        "{text}"
    );
}

/// The error of a template instantiated with `half`, in a header.
const OPS: &str = "#pragma once\n#include <cuda_fp16.h>\n\
template <typename T>\n__device__ T twice(T x) { return x.no_such_member * 2; }\n";
const SCALE: &str = "#include \"ops.cuh\"\n\
template <typename T>\n__global__ void scale(T *y) { y[threadIdx.x] = twice(y[threadIdx.x]); }\n\
template __global__ void scale<half>(half *);\n";

#[test]
fn a_template_error_keeps_its_instantiation_chain_and_caret() {
    let s = Scratch::new();
    s.write("kernels/ops.cuh", OPS);
    s.write("kernels/scale.cu", SCALE);
    let e = s
        .build(["sm_80"])
        .try_compile_with(&build_env(&[]))
        .expect_err("the template does not compile");
    let msg = e.to_string();
    for line in [
        "error: class \"__half\" has no member \"no_such_member\"",
        "detected during:",
        "instantiation of \"T twice(T) [with T=half]\" at line 3 of ",
        "instantiation of \"void scale(T *) [with T=half]\" at line 4 of ",
    ] {
        assert!(msg.contains(line), "{line:?} is missing from: {msg}");
    }
    // The caret line, under the source line it points into.
    let lines: Vec<&str> = msg.lines().collect();
    let source = lines
        .iter()
        .position(|l| l.contains("return x.no_such_member * 2;"))
        .unwrap_or_else(|| panic!("the source line: {msg}"));
    assert_eq!(lines.get(source + 1).map(|l| l.trim()), Some("^"), "{msg}");
}

#[test]
fn nvcc_warnings_are_shown_once() {
    let s = ScratchCrate::scale(
        "around-warnings",
        ".glob(\"kernels/*.cu\").archs([\"sm_80\", \"sm_90\"])",
    );
    s.write(
        "kernels/k.cu",
        "extern \"C\" __global__ void scale(float* p, int n) {\n  int unused_here;\n  if (threadIdx.x < n) p[threadIdx.x] *= 2.0f;\n}\n",
    );
    let out = s.output(&["build"], &[]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    let shown = t
        .lines()
        .filter(|l| l.contains("warning") && l.contains("177-D"))
        .count();
    assert_eq!(
        shown, 1,
        "nvcc's warning #177-D (on both archs) must be shown as one cargo warning:\n{t}"
    );
}
