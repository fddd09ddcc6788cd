//! `#[launch_config(tuned = true)]` end to end in a scratch crate built
//! with plain cargo and the real nvcc: the first build bakes the model's
//! block; a results file (written by the test: recorded timings, not a
//! measurement) imported into occ.lock makes the next build bake the
//! measured block on that arch and bucket, also when the crate is checked
//! out in another folder; a kernel edited since (its cubin changed) fails
//! the gate until blessed, then falls back to the model with one build
//! warning, with nvcc and without.

use occ_model::compiler::analyze::model_of;
use occ_model::model::arch;
use occ_model::model::suggest::{self, TuneRequest};
use occ_model::schema::lock::Lock;
use occ_model::schema::manifest::Manifest;
use occ_tests::{succeed, ScratchCrate};
use std::path::Path;

const BUILD: &str = r#"fn main() {
    occ_build::Build::new().glob("kernels/*.cu").archs(["sm_80"]).compile();
}
"#;

const MAIN: &str = r#"
use occ::launch_config;

#[launch_config(kernel = "wide", tuned = true, bucket = "n=1M")]
fn tuned() {
    println!("tuned {} {} {}", BLOCK_SIZE, MEASURED, LAUNCH.archs[0].threads());
}

#[launch_config(kernel = "wide", tuned = true)]
fn other_bucket() {
    println!("default-bucket {} {}", BLOCK_SIZE, MEASURED);
}

#[launch_config(kernel = "wide")]
fn modelled() {
    println!("modelled {} {}", BLOCK_SIZE, MEASURED);
}

fn main() {
    println!("manifest {}", concat!(env!("OUT_DIR"), "/occ/manifest.json"));
    tuned();
    other_bucket();
    modelled();
}
"#;

/// `cargo run`'s stdout and stderr, with `OCC_BLESS` when asked.
fn run(krate: &ScratchCrate, bless: bool, what: &str) -> (String, String) {
    let mut cmd = krate.cargo(&["run"]);
    if bless {
        cmd.env("OCC_BLESS", "1");
    }
    let out = succeed(&mut cmd, what);
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The numbers after `word` on the line that starts with it.
fn line<'a>(out: &'a str, word: &str) -> Vec<&'a str> {
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(word))
        .unwrap_or_else(|| panic!("no `{word}` line in\n{out}"))
        .split_whitespace()
        .skip(1)
        .collect()
}

fn manifest(out: &str) -> Manifest {
    let path = line(out, "manifest")[0];
    let text = std::fs::read_to_string(path).expect("manifest");
    Manifest::from_json(&text, Path::new(path)).expect("parses")
}

#[test]
fn tuned_sites_bake_the_measured_block_and_fall_back_when_stale() {
    let krate = ScratchCrate::new("occ_tuned_site")
        .dep("occ")
        .build_dep("occ-build")
        .build_rs(BUILD)
        .cu("explain", "kernels")
        .file("src/main.rs", MAIN);

    // 1. No measurement yet: every site bakes the model's block.
    let (out, _) = run(&krate, true, "first build (blessed)");
    let m = manifest(&out);
    let wide = &m.kernels.iter().find(|k| k.name == "wide").expect("wide");
    let ka = &wide.archs["sm_80"];
    let model = ka.best.as_ref().expect("a best launch").block_size;
    assert_eq!(
        line(&out, "tuned"),
        [model.to_string().as_str(), "false", &model.to_string()]
    );
    assert_eq!(
        line(&out, "modelled"),
        [model.to_string().as_str(), "false"]
    );

    // 2. Time the candidates (recorded: the smallest candidate other than
    // the model's block is fastest) and import them into the lock.
    let sm80 = arch::lookup("sm_80").expect("sm_80");
    let cands =
        suggest::candidates(sm80, &model_of(&ka.facts), &TuneRequest::default()).expect("model");
    let sizes: Vec<u32> = cands.iter().map(|c| c.block_size).collect();
    let fastest = *sizes.iter().find(|&&s| s != model).expect("two candidates");
    let times: Vec<(u32, f64)> = sizes
        .iter()
        .map(|&b| {
            (
                b,
                if b == fastest {
                    5.0
                } else {
                    9.0 + f64::from(b) / 1024.0
                },
            )
        })
        .collect();
    let results = occ_tests::recorded_results(&m, &wide.name, "sm_80", "n=1M", &times, 0.01);
    assert_eq!(results.package, "occ_tuned_site");
    let lock_path = krate.path().join("occ.lock");
    let text = std::fs::read_to_string(&lock_path).expect("blessed lock");
    let mut lock = Lock::from_text(&text, &lock_path).expect("lock");
    lock.import(&results).expect("imports");
    std::fs::write(&lock_path, lock.to_text()).expect("write lock");

    // 3. The tuned site of that bucket bakes the measured block; the site
    // of another bucket and the plain site keep the model's.
    let (out, err) = run(&krate, false, "build with a measurement");
    assert_eq!(
        line(&out, "tuned"),
        [fastest.to_string().as_str(), "true", &fastest.to_string()],
        "{err}"
    );
    assert_eq!(
        line(&out, "default-bucket"),
        [model.to_string().as_str(), "false"]
    );
    assert_eq!(
        line(&out, "modelled"),
        [model.to_string().as_str(), "false"]
    );
    assert!(!err.contains("another cubin"), "{err}");

    // 3b. The same crate checked out in another folder, with the committed
    // lock: its cubin's line table names the other folder, and the
    // measurement still holds (the hash leaves the debug sections out).
    let other = ScratchCrate::new("occ_tuned_site")
        .dep("occ")
        .build_dep("occ-build")
        .build_rs(BUILD)
        .cu("explain", "kernels")
        .file("src/main.rs", MAIN)
        .file(
            "occ.lock",
            &std::fs::read_to_string(&lock_path).expect("lock"),
        );
    assert_ne!(other.path(), krate.path());
    let (out, err) = run(&other, false, "build in another checkout");
    assert_eq!(
        line(&out, "tuned"),
        [fastest.to_string().as_str(), "true", &fastest.to_string()],
        "{err}"
    );
    assert!(!err.contains("another cubin"), "{err}");
    let there = manifest(&out);
    assert_eq!(
        there
            .kernels
            .iter()
            .find(|k| k.name == "wide")
            .expect("wide")
            .archs["sm_80"]
            .cubin_hash,
        ka.cubin_hash
    );

    // 4. The kernel's file changes (its cubin with it): one warning, and
    // the tuned site is back on the model.
    let k = krate.read("kernels/k.cu");
    krate.write(
        "kernels/k.cu",
        &format!(
            "{k}\nextern \"C\" __global__ void extra(float *p) {{ p[threadIdx.x] = 1.0f; }}\n"
        ),
    );
    // The gate fails first: the lock's numbers no longer describe the
    // measured code, and a build without nvcc would still use them.
    let failed = occ_tests::fail(&mut krate.cargo(&["build"]), "build after an edit");
    let err = String::from_utf8_lossy(&failed.stderr);
    assert!(
        err.contains("measured kernel")
            && err.contains("wide on sm_80")
            && err.contains("cargo occ bless"),
        "{err}"
    );
    // What else changed is said beside the error, as `cargo occ check`
    // lists it: the new kernel.
    assert!(
        err.lines().any(|l| l.starts_with("warning: ")
            && l.contains("not in occ.lock")
            && l.contains("extra")),
        "{err}"
    );
    // Accepted: one warning, and the tuned site is back on the model.
    let (out, err) = run(&krate, true, "bless after an edit");
    assert_eq!(
        line(&out, "tuned"),
        [model.to_string().as_str(), "false", &model.to_string()]
    );
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("another cubin"))
        .collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(warnings[0].contains("wide on sm_80"), "{err}");

    // 5. The same sources and lock without nvcc bake the
    // same block (the lock keeps each kernel × arch's cubin hash, so the
    // measurement is stale there too), and so does a build with nvcc again.
    for (what, var) in [("without nvcc", Some("OCC_NO_NVCC")), ("with nvcc", None)] {
        let mut cmd = krate.cargo(&["run"]);
        if let Some(var) = var {
            cmd.env(var, "1");
        }
        let out = succeed(&mut cmd, what);
        let out = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            line(&out, "tuned"),
            [model.to_string().as_str(), "false", &model.to_string()],
            "{what}"
        );
    }
}
