//! The `<<<...>>>` launches of a crate's own C++ host code, read from the
//! preprocessed source (the real nvcc): a constant block declares its
//! kernel's launch (a `#define`d one, a template launched by its own
//! name), a run-time block is reported as such, build.rs's `.launch` wins
//! and says so where it contradicts the code, the gate names the launch it
//! judged, and a build from the lock judges the same launches.

use occ_build::Launch;
use occ_model::schema::manifest::{DeclaredBy, KernelArch, Manifest};
use occ_tests::{build_env, build_of, Scratch};
use std::path::Path;

/// `scale` at `BLOCK` (256, a `#define`, line 29), `rows_k<64>` at 64 (30),
/// `saxpy` at a run-time block (31), `fill` at 512 (32).
const KERNELS: &str = include_str!("../../fixtures/cu/code_launches/k.cu");

/// The fixture's kernels for sm_80 into `out`, build.rs declaring `fill`
/// at 128 (the code launches it at 512).
fn build(s: &Scratch, out: &str, env: &[(&str, Option<&str>)]) -> occ_build::Result<Manifest> {
    let mut b = build_of(s.path(), out, "kernels/*.cu", ["sm_80"]);
    b.launch("fill", Launch::block(128));
    let report = b.try_compile_with(&build_env(env))?;
    Ok(report.manifest()?.clone())
}

fn arch<'m>(m: &'m Manifest, base_name: &str) -> &'m KernelArch {
    &m.kernels
        .iter()
        .find(|k| k.base_name == base_name)
        .unwrap_or_else(|| panic!("no {base_name} in the manifest"))
        .archs["sm_80"]
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.join(file).display()))
}

#[test]
fn constant_launches_of_the_code_declare_their_kernels_and_the_lock_judges_the_same() {
    let s = Scratch::new();
    s.write("kernels/k.cu", KERNELS);
    build(&s, "bless", &[("OCC_BLESS", Some("1"))]).expect("bless with nvcc");
    let m = build(&s, "nvcc", &[]).expect("build with nvcc");
    let by = |name: &str| {
        let d = arch(&m, name).declared.as_ref();
        d.map(|d| (d.launch.block[0], d.by.clone()))
    };
    let code = |line: u32| DeclaredBy::Code {
        at: format!("kernels/k.cu:{line}"),
    };
    assert_eq!(by("scale"), Some((256, code(29))), "the #define resolves");
    assert_eq!(
        by("rows_k<64>"),
        Some((64, code(30))),
        "the template's own name"
    );
    assert_eq!(by("saxpy"), None, "a run-time block is never guessed");
    let fill = DeclaredBy::Build {
        pattern: "fill".into(),
    };
    assert_eq!(by("fill"), Some((128, fill)), "build.rs's launch wins");

    let report = read(&s.path().join("nvcc/occ"), "report.txt");
    for said in [
        "launches in the C++ host code (3 constant, 1 known only at run time, 0 naming no \
         kernel of the build)",
        "256 from kernels/k.cu:29",
        "kernels/k.cu:31  saxpy       run time  known only at run time: block `threads`",
        "note: build.rs `fill` declares fill at 128, but kernels/k.cu:32 launches it at 512; \
         occ judges build.rs's launch",
    ] {
        assert!(report.contains(said), "{said:?} not in\n{report}");
    }
    let lock = read(s.path(), "occ.lock");
    assert!(
        lock.contains("\"launches\": [") && lock.contains("\"why\": \"block `threads`\""),
        "the lock records the launches read:\n{lock}"
    );

    // Without nvcc, the lock's launches judge the same kernels the same.
    let locked = build(&s, "lock", &[("OCC_NO_NVCC", Some("1"))]).expect("build from the lock");
    assert_eq!(locked.launches, m.launches);
    for k in &m.kernels {
        assert_eq!(
            arch(&locked, &k.base_name).declared,
            k.archs["sm_80"].declared,
            "{}",
            k.base_name
        );
    }
    assert_eq!(read(&s.path().join("lock/occ"), "report.txt"), report);
}

#[test]
fn the_gate_names_the_launch_of_the_code_it_judged() {
    let s = Scratch::new();
    s.write("kernels/k.cu", KERNELS);
    build(&s, "bless", &[("OCC_BLESS", Some("1"))]).expect("bless with nvcc");
    // 40 KiB of static shared memory on the same line: fewer blocks of 256.
    let heavier = KERNELS.replace(
        "    if (i < n) x[i] *= a;\n}\n\ntemplate",
        "    __shared__ float pad[10240]; pad[threadIdx.x] = a; __syncthreads(); \
         if (i < n) x[i] *= pad[threadIdx.x ^ 1];\n}\n\ntemplate",
    );
    assert_ne!(heavier, KERNELS, "the fixture changed");
    s.write("kernels/k.cu", &heavier);
    let e = build(&s, "after", &[]).expect_err("a regression at the launch of the code");
    let said = e.to_string();
    assert!(
        said.contains("launched at 256 from kernels/k.cu:29"),
        "the gate does not name the launch it judged:\n{said}"
    );
}
