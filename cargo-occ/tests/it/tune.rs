//! `cargo occ tune` as a process on a real build (the real nvcc): `--plan`
//! prints the model's candidates, `import` merges a results file into
//! occ.lock (refusing one of another package or kernel set), and the next
//! build carries the measurement into its manifest and its candidate lock.
//! The timings are written by the test: this checks the flow of recorded
//! results, not a measurement.

use crate::occ;
use occ_model::compiler::analyze::model_of;
use occ_model::model::arch;
use occ_model::model::suggest::{self, TuneRequest};
use occ_model::schema::lock::Lock;
use occ_model::schema::manifest::Manifest;
use occ_model::schema::measured::{self, Results};
use occ_tests::{build_env, Scratch};
use std::path::{Path, PathBuf};

const KERNELS: &str = include_str!("../../../tests/fixtures/cu/explain/k.cu");

/// Builds `kernels/k.cu` for sm_80 in-process (blessing when asked).
fn build(s: &Scratch, bless: bool) -> (Manifest, PathBuf) {
    let env = build_env(&[("OCC_BLESS", bless.then_some("1"))]);
    let report = s
        .build(["sm_80"])
        .try_compile_with(&env)
        .unwrap_or_else(|e| panic!("build failed: {e}"));
    (
        report.manifest().expect("manifest").clone(),
        report.out_dir.join("manifest.json"),
    )
}

/// A results file timing `kernel`'s candidates on sm_80: `fastest` is
/// fastest, every other block takes longer the further it is from it.
fn results(m: &Manifest, kernel: &str, sizes: &[u32], fastest: u32) -> Results {
    let times: Vec<(u32, f64)> = sizes
        .iter()
        .map(|&b| (b, 10.0 + f64::from(b.abs_diff(fastest)) / 32.0))
        .collect();
    occ_tests::recorded_results(m, kernel, "sm_80", "n=1M", &times, 0.02)
}

fn write(s: &Scratch, name: &str, r: &Results) -> String {
    s.write(name, &r.to_json()).to_string_lossy().into_owned()
}

#[test]
fn plan_import_and_rebuild_carry_the_measurement() {
    let s = Scratch::new();
    s.write("kernels/k.cu", KERNELS);
    let (m, mf) = build(&s, true);
    let mf = mf.to_string_lossy().into_owned();
    let lock_path: &Path = &s.path().join("occ.lock");
    let blessed = std::fs::read_to_string(lock_path).expect("the build blessed occ.lock");

    // --plan: the model's candidates, each with its occupancy.
    let (code, out, _) = occ(s.path(), &["tune", "--plan", "--manifest", &mf], &[], None).parts();
    assert_eq!(code, 0);
    let wide = &m
        .kernels
        .iter()
        .find(|k| k.name == "wide")
        .expect("wide")
        .archs["sm_80"];
    let sm80 = arch::lookup("sm_80").expect("sm_80");
    let cands =
        suggest::candidates(sm80, &model_of(&wide.facts), &TuneRequest::default()).expect("model");
    assert!(cands.len() >= 3, "{cands:?}");
    let section: String = out
        .split("wide on sm_80")
        .nth(1)
        .expect("a section for wide")
        .split(" on sm_80")
        .next()
        .unwrap_or_default()
        .to_string();
    let listed: Vec<u32> = section
        .lines()
        .skip(3)
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    let sizes: Vec<u32> = cands.iter().map(|c| c.block_size).collect();
    assert_eq!(listed, sizes, "{section}");
    for c in &cands {
        let row = section
            .lines()
            .find(|l| l.split_whitespace().next() == Some(&c.block_size.to_string()))
            .expect("a row per candidate");
        assert!(
            row.contains(&occ_model::render::text_table::percent(
                c.occupancy.occupancy
            )),
            "{row}"
        );
    }
    assert!(section.contains(&measured::candidates_hash(&sizes)));
    // heavy has __launch_bounds__(1024, 2): nothing above 1024, all launch.
    assert!(out.contains("heavy on sm_80"));

    // import: the smallest candidate is fastest.
    let fastest = sizes[0];
    let file = write(&s, "occ-tune.json", &results(&m, "wide", &sizes, fastest));
    let (code, out, err) = occ(
        s.path(),
        &["tune", "import", &file, "--manifest", &mf],
        &[],
        None,
    )
    .parts();
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("1 measurement added"), "{out}");
    let text = std::fs::read_to_string(lock_path).expect("lock");
    let lock = Lock::from_text(&text, lock_path).expect("reads");
    assert_eq!(lock.measured.len(), 1);
    assert_eq!(lock.measured[0].best, fastest);
    // The kernels' lines are as blessed; the measurement is one more line.
    let measured_lines: Vec<&str> = text.lines().filter(|l| l.contains("\"bucket\"")).collect();
    assert_eq!(measured_lines.len(), 1, "{text}");
    assert_eq!(text.lines().count(), blessed.lines().count() + 3, "{text}");
    // Importing again changes nothing, byte for byte.
    let (code, out, _) = occ(
        s.path(),
        &["tune", "import", &file, "--manifest", &mf],
        &[],
        None,
    )
    .parts();
    assert_eq!((code, out.contains("up to date")), (0, true), "{out}");
    assert_eq!(std::fs::read_to_string(lock_path).expect("lock"), text);

    // Refused: another package, a kernel the lock lacks, a broken file.
    let mut other = results(&m, "wide", &sizes, fastest);
    other.package = "someone-else".into();
    let file = write(&s, "other.json", &other);
    let (code, _, err) = occ(
        s.path(),
        &["tune", "import", &file, "--manifest", &mf],
        &[],
        None,
    )
    .parts();
    assert_eq!(code, 2);
    assert!(
        err.contains("someone-else") && err.contains("package"),
        "{err}"
    );
    let mut gone = results(&m, "wide", &sizes, fastest);
    gone.measurements[0].kernel = "narrow".into();
    let file = write(&s, "gone.json", &gone);
    let (code, _, err) = occ(
        s.path(),
        &["tune", "import", &file, "--manifest", &mf],
        &[],
        None,
    )
    .parts();
    assert_eq!(code, 2);
    assert!(
        err.contains("\"narrow\"") && err.contains("does not have"),
        "{err}"
    );
    let file = s
        .write("broken.json", "{\"schema\": 1}")
        .to_string_lossy()
        .into_owned();
    let (code, _, err) = occ(
        s.path(),
        &["tune", "import", &file, "--manifest", &mf],
        &[],
        None,
    )
    .parts();
    assert_eq!(code, 2);
    assert!(err.contains("broken.json"), "{err}");
    assert_eq!(std::fs::read_to_string(lock_path).expect("lock"), text);

    // The next build carries the measurement into the manifest (the macro
    // bakes it from there) and into the candidate lock (bless keeps it).
    let (m2, _) = build(&s, false);
    assert_eq!(m2.measured, lock.measured);
    let wide2 = &m2
        .kernels
        .iter()
        .find(|k| k.name == "wide")
        .expect("wide")
        .archs["sm_80"];
    assert!(
        wide2
            .cubin_hash
            .as_deref()
            .is_some_and(|h| h.starts_with("fnv1a64:")),
        "{:?}",
        wide2.cubin_hash
    );
    assert_eq!(
        m2.measured[0].staleness(wide2.cubin_hash.as_deref()),
        measured::Staleness::Current
    );
    let candidate = s.read("out/occ/occ.lock.new");
    assert_eq!(candidate, text, "the candidate lock keeps the measurement");

    // The report shows the measurement beside the model's choice.
    let (code, out, _) = occ(s.path(), &["report", "--manifest", &mf], &[], None).parts();
    assert_eq!(code, 0);
    let e = &lock.measured[0];
    let model = wide2.best.as_ref().expect("a best launch").block_size;
    let row = out
        .lines()
        .find(|l| l.starts_with("wide ") && l.contains("n=1M"))
        .unwrap_or_else(|| panic!("no measured row in\n{out}"));
    let speedup = e.speedup_over(model).expect("both timed");
    assert!(speedup > 1.0);
    for cell in [
        format!("{fastest}"),
        format!("{:.2} us", e.time_at(fastest).unwrap_or_default()),
        format!("{model}"),
        format!("{speedup:.2}x"),
    ] {
        assert!(row.contains(&cell), "{cell} in {row}");
    }
    assert!(out.contains(&format!(
        "{fastest} {:.2}",
        e.time_at(fastest).unwrap_or_default()
    )));
}

#[test]
fn plan_offers_shapes_of_a_2d_declared_launch() {
    let s = Scratch::new();
    s.write(
        "kernels/t.cu",
        &occ_tests::fixture("cu/declared/transpose_tiled.cu"),
    );
    let report = s
        .build(["sm_80"])
        .launch(
            "transpose_tiled",
            occ_build::Launch::block_2d(32, 8).dynamic_smem(1024),
        )
        .try_compile_with(&build_env(&[]))
        .unwrap_or_else(|e| panic!("build failed: {e}"));
    let m = report.manifest().expect("manifest");
    let mf = report
        .out_dir
        .join("manifest.json")
        .to_string_lossy()
        .into_owned();
    let (code, out, err) = occ(s.path(), &["tune", "--plan", "--manifest", &mf], &[], None).parts();
    assert_eq!(code, 0, "{err}");
    let ka = &m.kernels[0].archs["sm_80"];
    let sm80 = arch::lookup("sm_80").expect("sm_80");
    // The declared launch's dynamic shared memory, x kept at 32, y varied.
    let req = TuneRequest {
        dynamic_smem: suggest::DynamicSmem::Fixed(1024),
        ..TuneRequest::default()
    };
    let shaped =
        suggest::shaped_candidates(sm80, &model_of(&ka.facts), &req, [32, 8, 1]).expect("model");
    assert!(shaped.len() >= 3, "{shaped:?}");
    let rows: Vec<&str> = out.lines().skip(3).collect();
    assert_eq!(rows.len(), shaped.len(), "{out}");
    for (row, c) in rows.iter().zip(&shaped) {
        let [x, y, _] = c.block;
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cells[..3],
            [
                format!("{x}x{y}").as_str(),
                format!("({})", x * y).as_str(),
                "1024"
            ],
            "{row}"
        );
        assert!(
            row.contains(&occ_model::render::text_table::percent(
                c.candidate.occupancy.occupancy
            )),
            "{row}"
        );
    }
    let declared = rows
        .iter()
        .find(|r| r.trim_start().starts_with("32x8 "))
        .expect("the declared shape is a candidate");
    assert!(declared.contains("declared launch"), "{declared}");
    let sizes: Vec<u32> = shaped.iter().map(|c| c.candidate.block_size).collect();
    assert!(out.contains(&measured::candidates_hash(&sizes)), "{out}");
}
