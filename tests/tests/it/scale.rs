//! Output that scales with the kernel count. A build of 200 kernels with the
//! real nvcc: a new arch is one warning line with the count, 50 kernels
//! forced to spill give a bounded error (one header per cause, at most ten
//! rows, the rest counted and in report.txt), and the lock has one line per
//! kernel × arch and reads back to the same bytes. (The Markdown budget at
//! 2,000 rows is a unit test of cargo-occ's renderer.)

use occ_build::{ErrorKind, Report};
use occ_model::schema::lock::{Lock, CANDIDATE_FILE};
use occ_tests::{build_env, Scratch};

const KERNELS: usize = 200;
const SPILLING: usize = 50;

/// A light kernel named `name`.
fn light(name: &str) -> String {
    include_str!("../../fixtures/cu/scale/light.cu").replace("KNAME", name)
}

/// The sweep tests' n-body forces named `name`, bounded to 1024 threads x
/// 2 blocks: 32 registers, so it spills on sm_80.
fn spilling(name: &str) -> String {
    include_str!("../../fixtures/cu/sweep/forces.cu").replace(
        "void forces8",
        &format!("void __launch_bounds__(1024, 2) {name}"),
    )
}

fn name(i: usize) -> String {
    format!("k_{i:03}")
}

/// One file of 200 kernels, the first `spill` of them spilling.
fn write_kernels(s: &Scratch, spill: usize) {
    let text: String = (0..KERNELS)
        .map(|i| {
            if i < spill {
                spilling(&name(i))
            } else {
                light(&name(i))
            }
        })
        .collect();
    s.write("kernels/many.cu", &text);
}

fn build<const N: usize>(s: &Scratch, archs: [&str; N], bless: bool) -> occ_build::Result<Report> {
    let env = build_env(&[("OCC_BLESS", bless.then_some("1"))]);
    s.build(archs).try_compile_with(&env)
}

#[test]
fn two_hundred_kernels_give_grouped_warnings_bounded_errors_and_a_compact_lock() {
    let s = Scratch::new();
    write_kernels(&s, 0);
    let first = build(&s, ["sm_80"], true).expect("bless 200 kernels");
    assert_eq!(first.manifest().expect("manifest").kernels.len(), KERNELS);

    // The lock: one line per kernel x arch, read back to the same lock and
    // written back to the same bytes.
    let text = s.read("occ.lock");
    let arch_lines = text
        .lines()
        .filter(|l| l.trim_start().starts_with("\"sm_80\": {\"registers\": "))
        .count();
    assert_eq!(arch_lines, KERNELS, "{text}");
    assert!(
        text.lines().count() <= 3 * KERNELS + 15,
        "{} lines",
        text.lines().count()
    );
    let lock = Lock::from_text(&text, "occ.lock".as_ref()).expect("the lock reads");
    assert_eq!(
        lock,
        Lock {
            flags: Some(std::collections::BTreeMap::from([(
                String::new(),
                Vec::new()
            )])),
            ..Lock::from_manifest(first.manifest().expect("manifest"))
        }
    );
    assert_eq!(lock.to_text(), text);
    assert_eq!(s.read(&format!("out/occ/{CANDIDATE_FILE}")), text);

    // A new arch: one line for all 200 kernels, naming five.
    let wide = build(&s, ["sm_80", "sm_90"], false).expect("a new arch passes");
    let warnings = wide.directives().warnings();
    let new_arch: Vec<&String> = warnings.iter().filter(|w| w.contains("sm_90")).collect();
    assert_eq!(new_arch.len(), 1, "{warnings:#?}");
    let line = new_arch[0];
    eprintln!("{line}");
    assert!(
        line.contains("200 kernels are new on sm_90, which occ.lock does not record")
            && line.contains("k_000, k_001, k_002, k_003, k_004 and 195 more")
            && line.contains("cargo occ bless")
            && line.contains("report.txt")
            && !line.contains("k_005"),
        "{line}"
    );
    assert!(warnings.len() <= 2, "{warnings:#?}");
    let report = s.read("out/occ/report.txt");
    let listed = (0..KERNELS)
        .filter(|&i| {
            report
                .lines()
                .any(|l| l.starts_with(&format!("  {} ", name(i))) && l.contains("sm_90"))
        })
        .count();
    assert_eq!(
        listed, KERNELS,
        "the report lists every new kernel x arch:\n{report}"
    );

    // 50 kernels forced to spill: a bounded error, one header per cause.
    write_kernels(&s, SPILLING);
    let e = build(&s, ["sm_80"], false).expect_err("new spills fail the gate");
    assert_eq!(e.kind(), ErrorKind::Gate, "{e}");
    assert!(e.to_string().contains("cargo occ bless"), "{e}");
    let msg = e.to_string();
    eprintln!("{msg}");
    let lines = msg.lines().count();
    assert!(lines <= 25, "{lines} lines:\n{msg}");
    let headers: Vec<&str> = msg
        .lines()
        .filter(|l| l.starts_with("regression: "))
        .collect();
    assert_eq!(headers.len(), 1, "{msg}");
    assert!(
        headers[0].starts_with("regression: new spills")
            && headers[0].ends_with(&format!("({SPILLING} kernel x archs)")),
        "{msg}"
    );
    assert_eq!(
        msg.lines().filter(|l| l.starts_with("  k_")).count(),
        10,
        "{msg}"
    );
    assert!(
        msg.contains(&format!(
            "  ... and {} more kernel x archs: see ",
            SPILLING - 10
        )),
        "{msg}"
    );
    assert!(msg.contains("cargo occ bless"), "{msg}");
    // The report, written although the build failed, has all fifty.
    let report = s.read("out/occ/report.txt");
    for i in 0..SPILLING {
        assert!(
            report
                .lines()
                .any(|l| l.starts_with(&format!("  {} ", name(i))) && l.contains(" -> ")),
            "{} missing from the report's differences:\n{report}",
            name(i)
        );
    }
    assert!(report.contains("spilling kernels\n"), "{report}");

    // Denied spills: at most ten lines and a count.
    let e = s
        .build(["sm_80"])
        .deny_spills()
        .try_compile_with(&build_env(&[]))
        .expect_err("spills denied");
    assert_eq!(e.kind(), ErrorKind::Gate, "{e}");
    assert!(
        e.to_string().starts_with("register spills to local memory"),
        "{e}"
    );
    let msg = e.to_string();
    assert!(msg.lines().count() <= 13, "{msg}");
    assert!(
        msg.contains(&format!(
            "... and {} more kernel x archs: see ",
            SPILLING - 10
        )),
        "{msg}"
    );

    // Without a lock to compare with, the spills are one summary line.
    let r = s
        .build(["sm_80"])
        .lock_file("none.lock")
        .try_compile_with(&build_env(&[]))
        .expect("spills warn");
    let spill_lines: Vec<&String> = r
        .directives()
        .warnings()
        .iter()
        .filter(|w| w.contains("spill"))
        .collect();
    assert_eq!(spill_lines.len(), 1, "{:#?}", r.directives().warnings());
    assert!(
        spill_lines[0].contains(&format!("{SPILLING} kernels spill registers"))
            && spill_lines[0].contains(&format!("and {} more", SPILLING - 5)),
        "{spill_lines:?}"
    );
}
