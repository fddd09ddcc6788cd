//! Every table and report a build writes is linear in its rows (n log n at
//! most): the steps each loop that grows with the build takes
//! (`crate::work`) are counted over the build's whole set of views — the
//! per-kernel table, every cliff, the comparison with the lock and its
//! before/after tables, each group's names, the Markdown report and the CI
//! alerts — at a few hundred and at a few thousand kernel × archs, and the
//! steps per row must not grow. A loop that scans every row for each row
//! again (as `text_table::align` once did for each cell, 29–43 s of an edit
//! at 2,000 kernels × 3 archs) doubles the count per row at twice the rows.
//! No clock: the speed targets live in BENCHMARKS.md section 15 and
//! `occ-model/benches/report.rs`.

use crate::compare::tests::arch;
use crate::compare::{compare, groups, Verdict};
use crate::render::{ci, markdown, text_table};
use crate::schema::lock::{Lock, Thresholds};
use crate::schema::manifest::{Kernel, Manifest};
use crate::work::counted;
use std::path::Path;

/// `n` kernels in files of 100, on sm_80 and sm_90, all at `registers`,
/// every third spilling (after) or none (before).
fn lock(n: usize, registers: u32, spills: bool) -> Lock {
    let mut l = crate::compare::tests::lock(&[]);
    l.archs = vec!["sm_80".into(), "sm_90".into()];
    l.kernels = (0..n)
        .map(|i| {
            let name = format!("kern_{i:05}");
            let spill = if spills && i % 3 == 0 { 8 } else { 0 };
            let a = arch(registers, 32, spill);
            Kernel {
                name: name.clone(),
                demangled: name.clone(),
                base_name: name.clone(),
                short_name: name.clone(),
                params: Vec::new(),
                ident: name,
                source: format!("f{:03}.cu", i / 100),
                archs: [("sm_80".to_string(), a.clone()), ("sm_90".to_string(), a)]
                    .into_iter()
                    .collect(),
            }
        })
        .collect();
    l
}

/// The manifest of `after`, assembled as a build from it would be.
fn manifest(after: &Lock) -> Manifest {
    crate::assemble::lock_manifest(after, &[], Path::new("occ.lock")).expect("manifest")
}

/// The text of one file of 100 kernels, for the alerts' definition lines.
fn source(file: &str) -> Option<String> {
    let first: usize = file
        .trim_start_matches('f')
        .trim_end_matches(".cu")
        .parse()
        .ok()?;
    Some(
        (first * 100..first * 100 + 100)
            .map(|i| format!("__global__ void kern_{i:05}(float* p) {{ p[0] = 1; }}\n"))
            .collect(),
    )
}

/// The steps the build's views take at `n` kernels (2 archs each), and the
/// characters they wrote.
fn steps(n: usize) -> (u64, usize) {
    let (before, after) = (lock(n, 32, false), lock(n, 72, true));
    let m = manifest(&after);
    let (written, steps) = counted(|| {
        let diff = compare(&before, &after, &Thresholds::default());
        let mut out = text_table::table(&m);
        out += &text_table::cliff_lines(&m, None);
        out += &text_table::render_diff(&diff, &Verdict::ALL);
        for g in groups(&diff, &Verdict::ALL) {
            out += &text_table::group_names(&g, 5);
        }
        let baseline = markdown::Baseline::Compared {
            lock: "occ.lock".into(),
            diff: diff.clone(),
        };
        out += &markdown::markdown_within(&m, &baseline, usize::MAX);
        let alerts = ci::alerts(&m, Some(&diff), false, &source);
        assert!(!alerts.is_empty());
        out.len()
    });
    (steps, written)
}

#[test]
fn the_views_take_the_same_steps_per_row_at_any_size() {
    let (small, big) = (300, 3000);
    let ((s, s_len), (b, b_len)) = (steps(small), steps(big));
    let per = |steps: u64, n: usize| steps as f64 / n as f64;
    // A linear view: the same per row (a little slack for what is per
    // group or per file). A quadratic one: ten times as many at ten times
    // the rows.
    assert!(
        per(b, big) <= 1.25 * per(s, small),
        "{b} steps at {big} kernels vs {s} at {small}: not linear"
    );
    assert!(s > small as u64, "the views' loops are counted ({s} steps)");
    // What they write grows with the rows, not faster.
    assert!(
        (b_len as f64 / big as f64) <= 1.25 * (s_len as f64 / small as f64),
        "{b_len} characters at {big} kernels vs {s_len} at {small}"
    );
}
