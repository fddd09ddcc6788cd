//! The report's text renderers: the per-kernel table (terminal and
//! Markdown) and its JSON rows.

use occ_build::manifest::Manifest;
use occ_build::table::{align, percent};
use serde::Serialize;

/// One row of the report: a kernel on an arch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The kernel's base name (`ns::kern<float, 3>`).
    pub kernel: String,
    /// The `.cu` file.
    pub source: String,
    /// The arch.
    pub arch: String,
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block, bytes.
    pub static_smem: u32,
    /// Spilled bytes (stores + loads).
    pub spill_bytes: u32,
    /// Occupancy at the best block size, 0..=1.
    pub occupancy: f64,
    /// What limits it.
    pub limiters: Vec<String>,
    /// The best block size.
    pub best_block: u32,
    /// Dynamic shared memory a block can still take there, bytes.
    pub headroom: u32,
}

/// The report rows, in manifest order (kernels by symbol, archs sorted).
pub fn rows(m: &Manifest) -> Vec<Row> {
    let mut out = Vec::new();
    for k in &m.kernels {
        for (arch, a) in &k.archs {
            out.push(Row {
                kernel: k.base_name.clone(),
                source: k.source.clone(),
                arch: arch.clone(),
                registers: a.registers,
                static_smem: a.static_smem,
                spill_bytes: a.spill_bytes(),
                occupancy: a.best.occupancy,
                limiters: a.best.limiters.clone(),
                best_block: a.best.block_size,
                headroom: a.best.dynamic_smem_headroom,
            });
        }
    }
    out
}

const HEADER: [&str; 9] = [
    "kernel",
    "arch",
    "registers",
    "smem",
    "spills",
    "occupancy",
    "limiter",
    "best block",
    "headroom",
];

fn cells(r: &Row) -> [String; 9] {
    [
        r.kernel.clone(),
        r.arch.clone(),
        r.registers.to_string(),
        r.static_smem.to_string(),
        r.spill_bytes.to_string(),
        percent(r.occupancy),
        r.limiters.join(" + "),
        r.best_block.to_string(),
        r.headroom.to_string(),
    ]
}

/// The terminal table: one line per kernel × arch.
pub fn table(m: &Manifest) -> String {
    let mut all: Vec<[String; 9]> = vec![HEADER.map(str::to_string)];
    all.extend(rows(m).iter().map(cells));
    align(&all)
}

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
        ["---|", "---|", "--:|", "--:|", "--:|", "--:|", "---|", "--:|", "--:|"].concat()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn align_pads_text_left_and_numbers_right() {
        let t = align(&[
            ["name".to_string(), "n".to_string()],
            ["a".to_string(), "100".to_string()],
            ["long".to_string(), "5".to_string()],
        ]);
        assert_eq!(t, "name  n\n---------\na     100\nlong    5\n");
    }
}
