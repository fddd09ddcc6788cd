//! The report's renderers: the JSON here; the terminal table and its rows
//! are `occ_model::render::text_table`'s and the Markdown `occ_model::render::markdown`'s (the
//! build writes the same table to `report.txt` and the same Markdown to a
//! GitHub step summary). The Markdown tests stay here, beside the report's
//! test manifest.

pub use occ_model::render::markdown::markdown;
use occ_model::render::measured::{measured_rows, MeasuredRow};
pub use occ_model::render::text_table::{rows, table, Row};
use occ_model::schema::manifest::Manifest;
use serde::Serialize;

/// The JSON report: `{"schema": 2, "package", "nvcc", "rows": [...],
/// "measured": [...]}` (`measured`, the launches measured on a GPU, only
/// where there are any).
pub fn json(m: &Manifest) -> String {
    #[derive(Serialize)]
    struct Doc<'a> {
        schema: u32,
        package: &'a str,
        nvcc: &'a str,
        rows: Vec<Row>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        measured: Vec<MeasuredRow>,
    }
    occ_model::schema::manifest::to_json_pretty(&Doc {
        schema: 2,
        package: &m.package,
        nvcc: &m.nvcc,
        rows: rows(m),
        measured: measured_rows(m),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::manifest;
    use crate::report::Baseline;
    use occ_model::compare::{self, Thresholds};
    use occ_model::render::markdown::{markdown_within, MARKDOWN_BUDGET};
    use occ_model::schema::lock::Lock;

    /// `n` kernels with long template names on the test manifest's two
    /// archs, every seventh one spilling (from the test manifest's kernels).
    fn many(n: usize) -> Manifest {
        let base = manifest();
        let mut m = base.clone();
        m.kernels = (0..n)
            .map(|i| {
                let mut k = base.kernels[if i % 7 == 0 { 2 } else { 1 }].clone();
                k.name = format!("_Z4kern{i:04}");
                k.base_name = format!("candle::reduce::fast_sum<float, {i}, BLOCK_SIZE=1024>");
                k.ident = format!("kern_{i:04}");
                k
            })
            .collect();
        m
    }

    /// The rows of the "all rows" table in a Markdown report.
    fn all_rows(md: &str) -> usize {
        let block = md
            .split("<details><summary>All ")
            .nth(1)
            .unwrap_or_default();
        block.lines().filter(|l| l.starts_with("| `")).count()
    }

    #[test]
    fn a_small_report_has_every_row_and_no_count() {
        let m = manifest();
        let md = markdown(&m, &Baseline::NotCompared("no occ.lock yet".into()));
        assert_eq!(all_rows(&md), 8, "{md}");
        assert!(!md.contains("more rows"), "{md}");
        assert!(
            md.contains("- **1 kernel spills** registers (1 kernel x arch): `spilly` (80 B)"),
            "{md}"
        );
        assert!(
            md.contains("not compared with the lock: no occ.lock yet"),
            "{md}"
        );
        assert!(md.contains("#### Notable: 3 of 8 rows"), "{md}");
    }

    #[test]
    fn two_thousand_rows_stay_within_the_budget_and_count_the_rest() {
        let m = many(1000);
        let mut before = Lock::from_manifest(&m);
        // The lock has half the kernels, with fewer registers on one of them.
        before.kernels.truncate(500);
        if let Some(a) = before.kernels[3].archs.get_mut("sm_80") {
            a.facts.registers -= 1;
        }
        let diff = compare::compare(&before, &Lock::from_manifest(&m), &Thresholds::default());
        let baseline = Baseline::Compared {
            lock: "occ.lock".into(),
            diff,
        };
        let md = markdown(&m, &baseline);
        assert!(md.len() <= MARKDOWN_BUDGET, "{} characters", md.len());
        assert!(
            md.len() > MARKDOWN_BUDGET * 3 / 4,
            "the budget is used: {}",
            md.len()
        );
        let shown = all_rows(&md);
        let counted = format!("... and {} more rows: see `report.txt`", 2000 - shown);
        assert!(shown > 100 && md.contains(&counted), "{shown} shown\n{md}");
        // The summary comes first and says what changed.
        let summary = md
            .split("<details><summary>All ")
            .next()
            .unwrap_or_default();
        assert!(summary.contains("1000 kernels x 2 archs"), "{summary}");
        assert!(
            summary.contains("against `occ.lock`: 1000 new, 1 changed (kernel x archs)"),
            "{summary}"
        );
        assert!(
            summary.contains(
                "- new: new kernel (1000 kernel x archs): `fast_sum<float, 500, BLOCK_SIZE=1024>`, "
            ),
            "{summary}"
        );
        assert!(summary.contains(", and 495 more\n"), "{summary}");
        let first = |s: &str| md.find(s).unwrap_or(usize::MAX);
        assert!(first("- against `occ.lock`") < first("#### Changes"));
        assert!(first("#### Changes") < first("#### Notable"));
        assert!(summary.contains("**143 kernels spill**"), "{summary}");
        assert!(
            summary.contains("#### Notable: 143 of 2000 rows"),
            "{summary}"
        );
        assert!(
            summary.contains("... and 93 more notable rows"),
            "{summary}"
        );
        // Every <details> is closed, and the text is the same every time.
        assert_eq!(
            md.matches("<details>").count(),
            md.matches("</details>").count()
        );
        assert_eq!(md, markdown(&m, &baseline));
        // A smaller budget holds too.
        let small = markdown_within(&m, &baseline, 20_000);
        assert!(small.len() <= 20_000, "{}", small.len());
        assert!(all_rows(&small) < shown);
    }
}
