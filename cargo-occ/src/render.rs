//! The report's Markdown and JSON renderers; the terminal table and its
//! rows are `occ_build::table`'s (the build writes the same table).

use occ_build::manifest::Manifest;
use occ_build::table::{cells, HEADER};
pub use occ_build::table::{rows, table, Row};
use serde::Serialize;

/// The Markdown table (fits `$GITHUB_STEP_SUMMARY`), with a title line.
pub fn markdown(m: &Manifest) -> String {
    let esc = |s: &str| {
        s.replace('|', "\\|")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mut out = format!(
        "### CUDA occupancy: {} (nvcc {})\n\n| {} |\n|{}\n",
        esc(&m.package),
        esc(&m.nvcc),
        HEADER.join(" | "),
        ["---|", "---|", "--:|", "--:|", "--:|", "--:|", "--:|", "---|", "--:|", "--:|"].concat()
    );
    for r in rows(m) {
        let c = cells(&r);
        let mut c: Vec<String> = c.iter().map(|s| esc(s)).collect();
        // Inside a code span only `|` needs escaping.
        c[0] = format!("`{}`", r.kernel.replace('|', "\\|"));
        if r.spill_bytes > 0 {
            c[4] = format!("**{}**", c[4]);
        }
        out.push_str(&format!("| {} |\n", c.join(" | ")));
    }
    let lifts: Vec<String> = rows(m)
        .iter()
        .filter_map(|r| {
            Some(format!(
                "- `{}` on {} at block {}: {}\n",
                r.kernel.replace('`', "'"),
                esc(&r.arch),
                esc(&r.launch),
                // `->` reads as is in Markdown; only `<` and `|` need escaping.
                r.lift.as_ref()?.replace('|', "\\|").replace('<', "&lt;")
            ))
        })
        .collect();
    if !lifts.is_empty() {
        out.push_str("\nAt the declared launch, one step up:\n\n");
        out.extend(lifts);
    }
    out
}

/// The JSON report: `{"schema": 1, "package", "nvcc", "rows": [...]}`.
pub fn json(m: &Manifest) -> String {
    #[derive(Serialize)]
    struct Doc<'a> {
        schema: u32,
        package: &'a str,
        nvcc: &'a str,
        rows: Vec<Row>,
    }
    occ_build::manifest::to_json_pretty(&Doc {
        schema: 1,
        package: &m.package,
        nvcc: &m.nvcc,
        rows: rows(m),
    })
}
