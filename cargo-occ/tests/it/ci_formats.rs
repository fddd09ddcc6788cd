//! CI formats with the real nvcc: `cargo occ check --format sarif` (valid
//! SARIF 2.1.0, each result at the line the manifest gives, else at the
//! kernel's `__global__` definition), the GitHub Actions step summary of
//! the build and of `cargo occ check` and its workflow commands (the
//! variables set as the runner sets them), and `cargo occ diff`.
//!
//! The schema check reads the SARIF 2.1.0 schema from `OCC_SARIF_SCHEMA`,
//! else from `shared/reference/` beside the checkout (the official OASIS
//! file), else the copy the `serde-sarif` crate (a dev-dependency) ships as
//! `src/schema.json`, found with `cargo metadata`; it always runs. The log
//! must also read back as `serde_sarif`'s types, which are generated from
//! that schema.

use crate::occ;
use occ_tests::{build_env, kernels_build, Scratch};
use serde_json::Value;
use std::path::{Path, PathBuf};

const KERNELS: &str = include_str!("../../../tests/fixtures/cu/explain/k.cu");

/// The 1-based line of the first line of `text` that starts with `prefix`.
fn line_starting(text: &str, prefix: &str) -> u32 {
    let i = text
        .lines()
        .position(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starts with {prefix:?}"));
    i as u32 + 1
}

/// Where the results for `kernel` on sm_80 must stand, as (uri, line): the
/// lines the manifest records when the build recorded them (each spill
/// site's line, once, for a spill; the pressure peak, else the first site,
/// for a regression or a cliff), else the kernel's `definition` line.
fn expected(manifest: &Path, kernel: &str, spill: bool, definition: u32) -> Vec<(String, u64)> {
    let m = occ_shell::files::read_manifest(manifest).expect("manifest");
    let k = m
        .kernels
        .iter()
        .find(|k| k.short_name == kernel)
        .expect("the kernel");
    let uri = |file: &str| format!("crate/{file}");
    let lines = k.archs["sm_80"].lines.clone().unwrap_or_default();
    let recorded: Vec<(String, u64)> = if spill {
        // Sorted by file, line and loop: a line in and out of a loop is
        // two sites and one result.
        let mut at: Vec<(String, u64)> = lines
            .spills
            .iter()
            .map(|s| (uri(&s.file), u64::from(s.line)))
            .collect();
        at.dedup();
        at
    } else {
        lines
            .peak_pressure
            .map(|p| (uri(&p.file), u64::from(p.line)))
            .or_else(|| {
                lines
                    .spills
                    .first()
                    .map(|s| (uri(&s.file), u64::from(s.line)))
            })
            .into_iter()
            .collect()
    };
    if recorded.is_empty() {
        vec![(uri("kernels/k.cu"), u64::from(definition))]
    } else {
        recorded
    }
}

/// A scratch crate (a git checkout, so paths are repository-relative)
/// with the fixture in `crate/kernels/k.cu`, built for sm_80 with `env`;
/// the build's manifest.
fn build(s: &Scratch, text: &str, env: &[(&str, Option<&str>)]) -> PathBuf {
    let (manifest, result) = try_build(s, text, env);
    if let Err(e) = result {
        panic!("build: {e}");
    }
    manifest
}

/// [`build`] that may fail (the gate fails a regression; the manifest and
/// the candidate lock are written before it).
fn try_build(
    s: &Scratch,
    text: &str,
    env: &[(&str, Option<&str>)],
) -> (PathBuf, Result<(), String>) {
    std::fs::create_dir_all(s.path().join(".git")).expect(".git");
    s.write("crate/kernels/k.cu", text);
    let root = s.path().join("crate");
    let mut vars = vec![("CARGO_PKG_NAME", Some("cicrate")), ("NVCC_CCBIN", None)];
    vars.extend_from_slice(env);
    let result = kernels_build(&root, &root.join("out"), ["sm_80"])
        .try_compile_with(&build_env(&vars))
        .map(|_| ())
        .map_err(|e| e.to_string());
    (root.join("out/occ/manifest.json"), result)
}

fn check(
    dir: &Path,
    manifest: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (i32, String, String) {
    let m = manifest.to_str().expect("utf-8 path");
    let mut all = vec!["check", "--manifest", m];
    all.extend_from_slice(args);
    let mut vars: Vec<(&str, Option<&str>)> = vec![("GITHUB_STEP_SUMMARY", None)];
    vars.extend(env.iter().map(|&(k, v)| (k, Some(v))));
    occ(dir, &all, &vars, None).parts()
}

/// The SARIF 2.1.0 schema: `OCC_SARIF_SCHEMA`, the official file in
/// `shared/reference/`, or serde-sarif's copy.
fn schema() -> Value {
    let from_env = std::env::var_os("OCC_SARIF_SCHEMA").map(PathBuf::from);
    let beside = occ_tests::workspace_root()
        .ancestors()
        .map(|d| d.join("shared/reference/sarif-schema-2.1.0.json"))
        .find(|p| p.is_file());
    let path = from_env.or(beside).unwrap_or_else(serde_sarif_schema);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read the schema {}: {e}", path.display()));
    let schema: Value = serde_json::from_str(&text).expect("the schema is JSON");
    assert!(
        schema["title"]
            .as_str()
            .is_some_and(|t| t.contains("SARIF") && t.contains("2.1.0")),
        "{} is not the SARIF 2.1.0 schema",
        path.display()
    );
    schema
}

/// `src/schema.json` of the serde-sarif package this workspace locks.
/// Offline, for this platform only: the packages of other platforms
/// (`anstyle-wincon`) may never have been downloaded on this machine.
fn serde_sarif_schema() -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let version = std::process::Command::new(rustc)
        .arg("-vV")
        .output()
        .expect("run rustc -vV");
    let host = String::from_utf8_lossy(&version.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .expect("rustc -vV names the host");
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
            &host,
            "--manifest-path",
        ])
        .arg(occ_tests::workspace_root().join("Cargo.toml"))
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata JSON");
    let manifest = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == "serde-sarif")
        .and_then(|p| p["manifest_path"].as_str())
        .expect("serde-sarif among the packages (a dev-dependency of cargo-occ)");
    Path::new(manifest)
        .parent()
        .expect("its folder")
        .join("src/schema.json")
}

/// Validates `log` against the SARIF 2.1.0 schema, and checks what the
/// tests rely on.
fn validate(log: &Value) {
    let schema = schema();
    let validator = jsonschema::validator_for(&schema).expect("compile the SARIF schema");
    let errors: Vec<String> = validator
        .iter_errors(log)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "not valid SARIF 2.1.0:\n{}",
        errors.join("\n")
    );
    // The validator does refuse what the schema refuses.
    let mut bad = log.clone();
    bad["runs"][0]["results"] = serde_json::json!([{"level": "severe", "message": {}}]);
    assert!(
        !validator.is_valid(&bad),
        "the schema check accepts anything"
    );
    // And it reads back as SARIF's types.
    serde_json::from_value::<serde_sarif::sarif::Sarif>(log.clone())
        .unwrap_or_else(|e| panic!("not SARIF 2.1.0 to serde-sarif: {e}"));
    assert_eq!(log["version"], "2.1.0");
    let run = &log["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "occ");
    let rules: Vec<&str> = run["tool"]["driver"]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|r| r["id"].as_str().expect("rule id"))
        .collect();
    for r in run["results"].as_array().expect("results") {
        let id = r["ruleId"].as_str().expect("ruleId");
        let index = r["ruleIndex"].as_u64().expect("ruleIndex") as usize;
        assert_eq!(rules.get(index), Some(&id), "{r}");
        assert!(r["message"]["text"].as_str().is_some_and(|t| !t.is_empty()));
        let line = &r["locations"][0]["physicalLocation"]["region"]["startLine"];
        assert!(line.as_u64().is_some_and(|l| l >= 1), "{r}");
    }
}

/// (rule, uri, line) of each result.
fn located(log: &Value) -> Vec<(String, String, u64)> {
    log["runs"][0]["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let loc = &r["locations"][0]["physicalLocation"];
            (
                r["ruleId"].as_str().unwrap_or_default().to_string(),
                loc["artifactLocation"]["uri"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                loc["region"]["startLine"].as_u64().unwrap_or_default(),
            )
        })
        .collect()
}

#[test]
fn sarif_is_valid_and_names_the_definition_or_the_manifests_line() {
    let s = Scratch::new();
    let manifest = build(&s, KERNELS, &[]);
    let heavy = line_starting(KERNELS, "heavy(");
    // No lock yet: the check cannot compare (exit 2), and says so.
    let (code, _, err) = check(s.path(), &manifest, &["--format", "sarif"], &[]);
    assert_eq!(code, 2, "{err}");
    // With a lock: the spill, at heavy's definition (its name is on the
    // line after `__global__`), or where the manifest says it spills.
    build(&s, KERNELS, &[("OCC_BLESS", Some("1"))]);
    let (code, out, err) = check(s.path(), &manifest, &["--format", "sarif"], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    if std::env::var_os("OCC_SHOW_SARIF").is_some() {
        eprintln!("{out}");
    }
    let log: Value = serde_json::from_str(&out).expect("SARIF is JSON");
    validate(&log);
    let want: Vec<(String, String, u64)> = expected(&manifest, "heavy", true, heavy)
        .into_iter()
        .map(|(uri, line)| ("occ/spill".to_string(), uri, line))
        .collect();
    assert_eq!(located(&log), want, "{out}");

    // A regression: more accumulators, more registers for `wide`.
    let worse = KERNELS.replace("#define N 48", "#define N 64");
    let (_, failed) = try_build(&s, &worse, &[]);
    assert!(failed.is_err_and(|e| e.contains("occupancy regression")));
    let (code, out, err) = check(s.path(), &manifest, &["--format", "sarif"], &[]);
    assert_eq!(code, 1, "{out}\n{err}");
    let log: Value = serde_json::from_str(&out).expect("SARIF is JSON");
    validate(&log);
    let results = located(&log);
    let wide = line_starting(&worse, "extern \"C\" __global__ void wide(");
    for (uri, line) in expected(&manifest, "wide", false, wide) {
        assert!(
            results.contains(&("occ/regression".to_string(), uri, line)),
            "{results:?}"
        );
    }

    // A manifest that records the source lines: the results stand there.
    let text = std::fs::read_to_string(&manifest).expect("manifest");
    let mut m: Value = serde_json::from_str(&text).expect("manifest JSON");
    for k in m["kernels"].as_array_mut().expect("kernels") {
        let a = &mut k["archs"]["sm_80"];
        a["lines"] = serde_json::json!({
            "spills": [{"file": "kernels/k.cu", "line": 19, "loop_line": 16, "stores": 3, "loads": 4}],
            "peak_pressure": {"file": "kernels/k.cu", "line": 20, "registers": 255}
        });
    }
    let edited = s.write(
        "crate/out/occ/lines.json",
        &serde_json::to_string_pretty(&m).expect("json"),
    );
    let (code, out, err) = check(s.path(), &edited, &["--format", "sarif"], &[]);
    assert_eq!(code, 1, "{out}\n{err}");
    let log: Value = serde_json::from_str(&out).expect("SARIF is JSON");
    validate(&log);
    let results = located(&log);
    let spills: Vec<u64> = results
        .iter()
        .filter(|r| r.0 == "occ/spill")
        .map(|r| r.2)
        .collect();
    assert!(
        !spills.is_empty() && spills.iter().all(|&l| l == 19),
        "{results:?}"
    );
    assert!(
        results
            .iter()
            .filter(|r| r.0 == "occ/regression")
            .all(|r| r.2 == 20 && r.1 == "crate/kernels/k.cu"),
        "{results:?}"
    );
}

#[test]
fn under_github_actions_the_build_and_check_write_the_summary_and_check_annotates() {
    let s = Scratch::new();
    let summary = s.path().join("summary.md");
    let summary_str = summary.to_str().expect("utf-8 path").to_string();
    let workspace = s.path().to_str().expect("utf-8 path").to_string();
    let gh = [
        ("GITHUB_ACTIONS", Some("true")),
        ("GITHUB_STEP_SUMMARY", Some(summary_str.as_str())),
        ("GITHUB_WORKSPACE", Some(workspace.as_str())),
    ];
    let manifest = build(&s, KERNELS, &gh);
    let text = std::fs::read_to_string(&summary).expect("the build wrote the step summary");
    assert!(text.starts_with("### CUDA occupancy: cicrate"), "{text}");
    assert!(text.contains("**1 kernel spills**"), "{text}");
    assert!(text.contains("no occ.lock yet"), "{text}");
    assert!(text.contains("run `cargo occ check`"), "{text}");
    // Outside GitHub Actions nothing is appended.
    build(
        &s,
        KERNELS,
        &[("OCC_BLESS", Some("1")), ("GITHUB_ACTIONS", Some("false"))],
    );
    assert_eq!(std::fs::read_to_string(&summary).expect("summary"), text);

    let env = [
        ("GITHUB_ACTIONS", "true"),
        ("GITHUB_STEP_SUMMARY", summary_str.as_str()),
        ("GITHUB_WORKSPACE", workspace.as_str()),
    ];
    let (code, out, err) = check(s.path(), &manifest, &[], &env);
    assert_eq!(code, 0, "{out}\n{err}");
    let (file, line) =
        expected(&manifest, "heavy", true, line_starting(KERNELS, "heavy(")).remove(0);
    let annotation =
        format!("::warning file={file},line={line},title=occ/spill (sm_80)::heavy spills");
    assert!(
        out.lines().any(|l| l.starts_with(&annotation)),
        "no {annotation:?} in\n{out}"
    );
    let after = std::fs::read_to_string(&summary).expect("summary");
    assert!(after.starts_with(&text), "appended, not replaced");
    let added = &after[text.len()..];
    assert!(added.contains("no change against `occ.lock`"), "{added}");
    // With SARIF on stdout, the annotations go to stderr.
    let (code, out, err) = check(s.path(), &manifest, &["--format", "sarif"], &env);
    assert_eq!(code, 0, "{err}");
    assert!(serde_json::from_str::<Value>(&out).is_ok(), "{out}");
    assert!(err.lines().any(|l| l.starts_with(&annotation)), "{err}");
}

#[test]
fn diff_compares_two_builds_as_the_gate_does() {
    let s = Scratch::new();
    let manifest = build(&s, KERNELS, &[("OCC_BLESS", Some("1"))]);
    let lock = s.path().join("crate/occ.lock");
    let old = s.path().join("old.lock");
    std::fs::copy(&lock, &old).expect("keep the old lock");
    let (_, failed) = try_build(&s, &KERNELS.replace("#define N 48", "#define N 64"), &[]);
    assert!(failed.is_err(), "the gate fails the regression");
    let occ_dir = manifest.parent().expect("occ dir").to_path_buf();
    let run = |args: &[&str]| occ(s.path(), args, &[], None).parts();
    let old_s = old.to_str().expect("utf-8");
    let new_s = occ_dir.to_str().expect("utf-8");
    let (code, out, err) = run(&["diff", old_s, new_s]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("regression: occupancy down"), "{out}");
    assert!(out.contains("wide"), "{out}");
    let (code, out, _) = run(&["diff", old_s, new_s, "--format", "json"]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).expect("json");
    assert!(v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .any(|f| f["kernel"] == "wide" && f["verdict"] == "regression"));
    let (code, out, _) = run(&["diff", old_s, new_s, "--format", "markdown"]);
    assert_eq!(code, 1);
    assert!(out.contains("- **regression**: occupancy down"), "{out}");
    // The same lock on both sides, as a lock and as its manifest: no difference.
    let candidate = occ_dir.join("occ.lock.new");
    let (code, out, _) = run(&["diff", candidate.to_str().expect("utf-8"), new_s]);
    assert_eq!((code, out.starts_with("no difference")), (0, true), "{out}");
    // Input errors: exit 2, one message.
    let (code, _, err) = run(&["diff", "nope.lock", new_s]);
    assert_eq!(code, 2);
    assert!(err.starts_with("error: cannot read nope.lock"), "{err}");
}

#[test]
fn diff_takes_the_folder_the_warnings_name_and_prints_no_absolute_path() {
    // A build where cargo puts one: OUT_DIR under <target>/debug/build,
    // whose errors and warnings name target/debug/occ/<package>/report.txt.
    let s = Scratch::new();
    std::fs::create_dir_all(s.path().join(".git")).expect(".git");
    let root = s.path().join("crate");
    let out = s
        .path()
        .join("target/debug/build/cicrate-0123456789abcdef/out");
    let build = |text: &str, bless: bool| {
        s.write("crate/kernels/k.cu", text);
        kernels_build(&root, &out, ["sm_80"])
            .try_compile_with(&build_env(&[
                ("CARGO_PKG_NAME", Some("cicrate")),
                ("NVCC_CCBIN", None),
                ("OCC_BLESS", bless.then_some("1")),
            ]))
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    build(KERNELS, true).expect("bless");
    std::fs::copy(root.join("occ.lock"), s.path().join("old.lock")).expect("keep the old lock");
    build(&KERNELS.replace("#define N 48", "#define N 64"), false)
        .expect_err("the gate fails the regression");
    let named = s.path().join("target/debug/occ/cicrate");
    assert!(
        named.join("report.txt").is_file(),
        "test premise: the build wrote its report to the folder its messages name"
    );
    let run = |args: &[&str]| occ(s.path(), args, &[], None).parts();
    let absolute = named.to_str().expect("utf-8");
    let old = s.path().join("old.lock");
    let old = old.to_str().expect("utf-8");
    let scratch = s.path().to_str().expect("utf-8");
    for new in [
        "target/debug/occ/cicrate",
        "target/debug/occ/cicrate/report.txt",
        absolute,
    ] {
        for format in ["table", "markdown"] {
            let (code, out, err) = run(&["diff", old, new, "--format", format]);
            assert_eq!(code, 1, "{new} {format}: {out}\n{err}");
            assert!(out.contains("occupancy down"), "{new} {format}: {out}");
            assert!(
                !out.contains(scratch) && !err.contains(scratch),
                "{new} {format}: an absolute path: {out}\n{err}"
            );
        }
    }
    let (_, out, _) = run(&["diff", old, absolute, "--format", "markdown"]);
    assert!(
        out.starts_with("### CUDA occupancy: `target/debug/occ/cicrate` against `old.lock`\n"),
        "{out}"
    );
    // A folder of no build says what to give.
    let (code, _, err) = run(&["diff", old, "target/debug/occ/nothing"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.starts_with("error: cannot read target/debug/occ/nothing"),
        "{err}"
    );
}

#[test]
fn a_change_that_moves_a_kernel_near_a_cliff_warns_and_is_a_sarif_result() {
    let s = Scratch::new();
    std::fs::create_dir_all(s.path().join(".git")).expect(".git");
    s.write("crate/kernels/k.cu", KERNELS);
    let root = s.path().join("crate");
    // `wide` capped by -maxrregcount (`heavy` has launch bounds, which
    // ptxas keeps instead): 1024 threads x 2 blocks fill sm_80 up to 32
    // registers, so 24 is 9 from the cliff and 32 is 1.
    let build = |cap: u32, bless: bool| {
        kernels_build(&root, &root.join("out"), ["sm_80"])
            .max_registers("wide", cap)
            .try_compile_with(&build_env(&[
                ("CARGO_PKG_NAME", Some("cicrate")),
                ("NVCC_CCBIN", None),
                ("OCC_BLESS", bless.then_some("1")),
            ]))
            .unwrap_or_else(|e| panic!("build at {cap}: {e}"))
    };
    build(24, true);
    let report = build(32, false);
    let wide = report
        .manifest()
        .expect("manifest")
        .kernels
        .iter()
        .find(|k| k.short_name == "wide")
        .expect("wide");
    let cliffs = wide.archs["sm_80"].cliffs.clone().expect("cliffs");
    let distance = cliffs.registers.down.expect("a cliff").at - cliffs.registers.now;
    assert!(distance <= 2, "the precondition: {cliffs:?}");
    let warned: Vec<&String> = report
        .directives()
        .warnings()
        .iter()
        .filter(|w| w.contains("of an occupancy cliff"))
        .collect();
    assert_eq!(warned.len(), 1, "{:#?}", report.directives().warnings());
    assert!(
        warned[0].contains("1 kernel moved within the cliff margin"),
        "{}",
        warned[0]
    );
    assert!(warned[0].contains(": wide;"), "{}", warned[0]);

    let manifest = report.out_dir.join("manifest.json");
    // explain and report.txt show the same cliff.
    let m = manifest.to_str().expect("utf-8 path");
    let (code, out, err) = occ(s.path(), &["explain", "wide", "--manifest", m], &[], None).parts();
    assert_eq!(code, 0, "{err}");
    let now = cliffs.registers.now;
    let down = cliffs.registers.down.expect("a cliff");
    let explained = format!(
        "    registers: {now} registers/thread now; {} (+{distance}) costs",
        down.at
    );
    assert!(out.contains(&explained), "no {explained:?} in\n{out}");
    let text = std::fs::read_to_string(report.out_dir.join("report.txt")).expect("report.txt");
    let listed = format!(
        "  wide on sm_80 at block {} (best): registers {now}: +{distance} costs",
        cliffs.block_size
    );
    assert!(text.contains(&listed), "no {listed:?} in\n{text}");
    let (code, out, err) = check(s.path(), &manifest, &["--format", "sarif"], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    let log: Value = serde_json::from_str(&out).expect("SARIF is JSON");
    validate(&log);
    let definition = line_starting(KERNELS, "extern \"C\" __global__ void wide(");
    for (uri, line) in expected(&manifest, "wide", false, definition) {
        assert!(
            located(&log).contains(&("occ/near-cliff".to_string(), uri, line)),
            "{out}"
        );
    }
    // A margin of 0 says nothing.
    let (_, out, _) = check(
        s.path(),
        &manifest,
        &["--format", "sarif", "--cliff-margin", "0"],
        &[],
    );
    let log: Value = serde_json::from_str(&out).expect("SARIF is JSON");
    assert!(
        !located(&log).iter().any(|r| r.0 == "occ/near-cliff"),
        "{out}"
    );
}
