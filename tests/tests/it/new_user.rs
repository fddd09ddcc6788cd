//! A scratch crate made as a new user would: outside the workspace, depending
//! on occ-build by path, built with plain `cargo build`, with the real nvcc.

use occ_tests::{counting_launcher, launches, ScratchCrate, BUILD_RS};

const MAIN: &str = r#"mod kernels {
    include!(concat!(env!("OUT_DIR"), "/occ/kernels.rs"));
}

fn main() {
    use kernels::*;
    let scale = get("scale").expect("scale by name");
    let (sm80, sm90) = (scale.on("sm_80").unwrap(), scale.on("sm_90").unwrap());
    println!("scale {} {} {} {}", scale.name, sm80.registers, sm80.best.map_or(0, |b| b.block_size), sm90.code.unwrap().bytes.len());
    let stencil = fluid_stencil1d_float_3::KERNEL;
    println!("stencil {} {} {}", stencil.name, stencil.base_name, stencil.on("sm_90").unwrap().static_smem);
}
"#;

/// `tests/fixtures/cu/new_user`: scale.cu (with factor.cuh) and stencil.cu;
/// broken.cu is added by the compile-error test.
fn scratch_crate() -> ScratchCrate {
    let krate = ScratchCrate::new("newuser")
        .dep("occ")
        .build_dep("occ-build")
        .build_rs(BUILD_RS)
        .file("src/main.rs", MAIN);
    for file in ["scale.cu", "factor.cuh", "stencil.cu"] {
        krate.write(
            &format!("kernels/{file}"),
            &occ_tests::fixture(&format!("cu/new_user/{file}")),
        );
    }
    krate
}

#[test]
fn a_new_crate_builds_runs_and_rebuilds_without_nvcc() {
    let s = scratch_crate();
    let log = s.path().join("nvcc.log");
    let launcher = counting_launcher(s.path(), &log);
    let run = |what: &str| {
        let out = occ_tests::succeed(
            s.cargo(&["run", "--quiet"])
                .env("OCC_NVCC_LAUNCHER", &launcher),
            what,
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first = run("first build");
    assert!(first.contains("scale scale "), "{first}");
    assert!(
        first.contains(
            "stencil _ZN5fluid9stencil1dIfLi3EEEvPKT_PS1_i fluid::stencil1d<float, 3> 1048"
        ),
        "{first}"
    );
    assert_eq!(launches(&log).len(), 4, "2 files x 2 archs");
    // A no-op rebuild does not even run the build script.
    let second = run("no-op rebuild");
    assert_eq!(first, second);
    assert_eq!(
        launches(&log).len(),
        4,
        "a no-op rebuild runs nvcc zero times"
    );
    // Touch the header: only its includer recompiles, for both archs.
    let factor = occ_tests::fixture("cu/new_user/factor.cuh");
    assert!(factor.contains("#define FACTOR 2.0f"), "{factor}");
    s.write("kernels/factor.cuh", &factor.replace("2.0f", "3.0f"));
    run("header change");
    let reruns = launches(&log)[4..].to_vec();
    assert_eq!(reruns.len(), 2, "{reruns:#?}");
    assert!(
        reruns.iter().all(|l| l.contains("kernels/scale.cu")),
        "{reruns:#?}"
    );
}

#[test]
fn a_compile_error_fails_the_build_with_one_clear_message_and_no_backtrace() {
    let s = scratch_crate();
    s.write(
        "kernels/broken.cu",
        &occ_tests::fixture("cu/new_user/broken.cu"),
    );
    let stderr = s.build_fails("a compile error");
    assert!(
        stderr.contains("occ: nvcc failed to compile kernels/broken.cu for sm_"),
        "{stderr}"
    );
    assert!(
        stderr.contains("kernels/broken.cu(2): error: identifier \"nope\" is undefined"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
        "{stderr}"
    );
}
