//! `cargo occ report`: every kernel's resources and occupancy, as a terminal
//! table, Markdown, JSON, or a self-contained HTML page with NVIDIA's
//! calculator charts.
//!
//! The HTML page reads top to bottom as a person triages: a summary (kernels
//! × archs, the lowest occupancy, spills, regressions against the lock),
//! then the table (one row per kernel × arch, each linking to its section;
//! spilling, regressed and low-occupancy rows marked, with a legend), then
//! one collapsed `<details>` section per kernel, open only for the notable
//! ones (spills, occupancy below 50%, a regression). Charts are inline SVG
//! drawn only where they are wanted ([`Charts`]), so the page stays a few
//! megabytes at hundreds of kernels. No JavaScript.

mod charts;
mod html;

pub use html::html;

use crate::locate::{Locate, Located};
use crate::render as report;
use anyhow::Context;
use occ_model::compare;
use occ_model::schema::lock::Lock;
use occ_model::schema::manifest::Origin;
use std::path::PathBuf;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns for a terminal.
    Table,
    /// Markdown for a pull-request comment or $GITHUB_STEP_SUMMARY: summary and changes first, details collapsed, at most 60,000 characters.
    Markdown,
    /// JSON rows.
    Json,
    /// One self-contained HTML file with occupancy charts per kernel.
    Html,
}

/// Which kernels the HTML report draws charts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Charts {
    /// Every kernel when the report has at most 64 kernel × arch rows, else only the notable ones.
    Auto,
    /// Only notable kernels: spills, occupancy below 50%, or a regression.
    Notable,
    /// Every kernel (about 20 KB of SVG per kernel × arch).
    All,
}

/// Up to this many kernel × arch rows, `--charts auto` draws every kernel.
const AUTO_ALL_ROWS: usize = 64;

/// Below this occupancy a kernel is notable.
const LOW_OCCUPANCY: f64 = 0.5;

/// Arguments of `cargo occ report`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    #[command(flatten)]
    pub locate: Locate,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Write to this file instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// HTML only: which kernels get charts.
    #[arg(long, value_enum, default_value = "auto", value_name = "WHICH")]
    pub charts: Charts,
    /// The GPU the build is for, as the driver names it (`NVIDIA H100 80GB HBM3`): measurements taken on another GPU are said so (default: OCC_GPU).
    #[arg(long, value_name = "NAME", env = "OCC_GPU")]
    pub gpu: Option<String>,
}

/// Prints or writes the report.
pub fn run(args: ReportArgs) -> anyhow::Result<i32> {
    let found = args.locate.find()?;
    let m = &found.manifest;
    let text = match args.format {
        Format::Table => report::table(m) + &crate::tune::measured_section(m, args.gpu.as_deref()),
        Format::Markdown => report::markdown(m, &baseline(&found)),
        Format::Json => report::json(m),
        Format::Html => html(m, &baseline(&found), args.charts)?,
    };
    match &args.output {
        Some(path) => std::fs::write(path, text)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(0)
}

pub use occ_model::render::markdown::Baseline;

/// The build compared with its lock, exactly as `cargo occ check` compares
/// them (the lock and thresholds from the build's `gate.json`).
pub fn baseline(found: &Located) -> Baseline {
    if found.manifest.origin == Origin::Lock {
        return Baseline::NotCompared("this build had no nvcc and stands on the lock".into());
    }
    let Some(gate) = &found.gate else {
        return Baseline::NotCompared("the build wrote no gate.json".into());
    };
    let (path, lock) = match found.lock(None) {
        Ok(found) => found,
        Err(e) => return Baseline::NotCompared(format!("the lock could not be read: {e:#}")),
    };
    let lock_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "the lock".into());
    let Some(lock) = lock else {
        return Baseline::NotCompared(format!(
            "no {lock_name} yet (record one with `cargo occ bless`)"
        ));
    };
    let candidate = Lock::from_manifest(&found.manifest);
    Baseline::Compared {
        lock: lock_name,
        diff: compare::compare(&lock, &candidate, &gate.thresholds),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::charts::compact_svg;
    use super::html::*;
    use super::*;
    use occ_model::model::declared::best_launch;
    use occ_model::schema::manifest::{
        Facts, Kernel, KernelArch, LaunchBounds, Manifest, Resources,
    };

    fn arch_entry(arch: &str, registers: u32, static_smem: u32, spill: u32) -> KernelArch {
        bounded(arch, registers, static_smem, spill, LaunchBounds::default())
    }

    fn bounded(
        arch: &str,
        registers: u32,
        static_smem: u32,
        spill: u32,
        launch_bounds: LaunchBounds,
    ) -> KernelArch {
        let mut r = Resources {
            facts: Facts {
                registers,
                static_smem,
                spill_stores: spill,
                spill_loads: spill,
                stack_frame: spill,
                cumulative_stack: None,
                barriers: Some(1),
                launch_bounds,
                maxrregcount: None,
            },
            declared: None,
            cubin_hash: None,
            best: None,
        };
        r.best = best_launch(arch, &r.facts).expect("best launch");
        KernelArch {
            resources: r,
            cliffs: None,
            cmem: Default::default(),
            warnings: Vec::new(),
            cubin: None,
            ptx: None,
            lines: None,
        }
    }

    fn kernel(name: &str, archs: [(&str, KernelArch); 2]) -> Kernel {
        Kernel {
            name: name.into(),
            demangled: name.into(),
            base_name: name.into(),
            short_name: name.into(),
            params: Vec::new(),
            ident: name.into(),
            source: "kernels/k.cu".into(),
            archs: archs.into_iter().map(|(a, k)| (a.to_string(), k)).collect(),
        }
    }

    /// `light` (full occupancy), `spilly` (spills), `tiled` (150000 bytes
    /// of shared memory, at most 256 threads: low occupancy), `fat` (many
    /// registers, 50%: not notable).
    pub(crate) fn manifest() -> Manifest {
        let at_most_256 = LaunchBounds {
            max_threads: Some([256, 1, 1]),
            ..LaunchBounds::default()
        };
        Manifest {
            schema: occ_model::schema::manifest::SCHEMA_VERSION,
            package: "demo".into(),
            origin: Origin::Nvcc,
            nvcc: "V13.5.37".into(),
            archs: vec!["sm_80".into(), "sm_90".into()],
            kernels: vec![
                kernel(
                    "fat",
                    [
                        ("sm_80", arch_entry("sm_80", 64, 0, 0)),
                        ("sm_90", arch_entry("sm_90", 64, 0, 0)),
                    ],
                ),
                kernel(
                    "light",
                    [
                        ("sm_80", arch_entry("sm_80", 8, 0, 0)),
                        ("sm_90", arch_entry("sm_90", 8, 0, 0)),
                    ],
                ),
                kernel(
                    "spilly",
                    [
                        ("sm_80", arch_entry("sm_80", 32, 1024, 40)),
                        ("sm_90", arch_entry("sm_90", 32, 1024, 0)),
                    ],
                ),
                kernel(
                    "tiled",
                    [
                        (
                            "sm_80",
                            bounded("sm_80", 10, 150000, 0, at_most_256.clone()),
                        ),
                        (
                            "sm_90",
                            bounded("sm_90", 10, 150000, 0, at_most_256.clone()),
                        ),
                    ],
                ),
            ],
            device_code: Vec::new(),
            measured: Vec::new(),
            launches: Vec::new(),
        }
    }

    /// The attribute values of every `attr="…"` in `html`.
    fn attrs<'a>(html: &'a str, attr: &str) -> Vec<&'a str> {
        let key = format!("{attr}=\"");
        html.match_indices(&key)
            .filter_map(|(i, _)| {
                let rest = &html[i + key.len()..];
                rest.find('"').map(|end| &rest[..end])
            })
            .collect()
    }

    /// The `<tr …>` lines of the table body.
    fn rows(html: &str) -> Vec<&str> {
        html.lines().filter(|l| l.starts_with("<tr")).collect()
    }

    mod names {
        use super::*;
        use proptest::prelude::*;

        /// What a name may hold that HTML or a terminal gives a meaning to.
        const BITS: &[&str] = &[
            "\n",
            "\r",
            "\u{1b}[31m",
            "\u{7f}",
            "\u{202e}",
            "ü",
            "😀",
            "<",
            "<script>",
            "</code>",
            ">",
            "&",
            "&lt;",
            "\"",
            "'",
            "`",
            "#",
            "%",
            "|",
            "\\",
            " ",
            "a",
            ".cu",
        ];

        fn hostile_name() -> impl Strategy<Value = String> {
            prop_oneof![
                prop::collection::vec(prop::sample::select(BITS), 1..8).prop_map(|v| v.concat()),
                any::<String>().prop_filter("not empty", |s| !s.is_empty()),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            #[test]
            fn a_name_adds_no_markup_to_the_html_page(
                name in hostile_name(),
                source in hostile_name(),
                package in hostile_name(),
            ) {
                let plain = manifest();
                let mut odd = manifest();
                odd.package = package;
                odd.kernels[1].base_name = name.clone();
                odd.kernels[1].short_name = name;
                odd.kernels[1].demangled = "x".into();
                odd.kernels[1].source = source;
                let none = Baseline::NotCompared("no occ.lock yet".into());
                let page = |m: &Manifest| html(m, &none, Charts::Auto).expect("html");
                let (p0, p1) = (page(&plain), page(&odd));
                prop_assert_eq!(p0.matches('<').count(), p1.matches('<').count());
                prop_assert_eq!(p0.matches('"').count(), p1.matches('"').count());
                prop_assert_eq!(p0.lines().count(), p1.lines().count());
                prop_assert!(!p1.chars().any(|c| c != '\n' && occ_model::compiler::names::is_refused(c)));
            }
        }
    }

    #[test]
    fn charts_drop_only_redundant_attributes() {
        let svg = "<text x=\"1\" font-family=\"sans-serif\" font-size=\"8.870967741935484\" \
                   opacity=\"1\" fill=\"#000000\">a</text><circle opacity=\"0.5\" fill=\"#FF0000\"/>";
        assert_eq!(
            compact_svg(svg),
            "<text x=\"1\" font-size=\"8.9\">a</text><circle opacity=\"0.5\" fill=\"#FF0000\"/>"
        );
    }

    #[test]
    fn sizes_read_in_kib() {
        assert_eq!(kib(0), "0");
        assert_eq!(kib(40), "40 B");
        assert_eq!(kib(1023), "1023 B");
        assert_eq!(kib(1024), "1.0 KiB");
        assert_eq!(kib(1536), "1.5 KiB");
        assert_eq!(kib(10_188), "9.9 KiB");
        assert_eq!(kib(10_200), "10 KiB");
        assert_eq!(kib(32_768), "32 KiB");
        assert_eq!(kib(150_000), "146 KiB");
        assert_eq!(
            size_cell(150_000),
            "<td class=n title=\"150000 bytes\">146 KiB</td>"
        );
    }

    #[test]
    fn every_row_links_to_an_existing_section() {
        let page = html(
            &manifest(),
            &Baseline::NotCompared("test".into()),
            Charts::All,
        )
        .expect("html");
        let ids = attrs(&page, "id");
        let rows = rows(&page);
        assert_eq!(rows.len(), 8, "one row per kernel × arch");
        for row in rows {
            let hrefs = attrs(row, "href");
            assert_eq!(hrefs.len(), 1, "{row}");
            let target = hrefs[0].strip_prefix('#').expect("a fragment link");
            assert!(ids.contains(&target), "no element with id {target}");
        }
        // Every link on the page lands somewhere.
        for href in attrs(&page, "href") {
            let target = href.strip_prefix('#').expect("only in-page links");
            assert!(ids.contains(&target), "dangling link #{target}");
        }
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len(), "ids are unique");
    }

    #[test]
    fn spilling_rows_and_low_occupancy_are_marked() {
        let page = html(
            &manifest(),
            &Baseline::NotCompared("test".into()),
            Charts::All,
        )
        .expect("html");
        for row in rows(&page) {
            let spills = row.contains("k-spilly-sm_80");
            assert_eq!(row.contains("class=\"spill"), spills, "{row}");
            let low = row.contains("k-tiled-");
            assert_eq!(row.contains(" low\">"), low, "{row}");
        }
        assert!(page.contains("title=\"150000 bytes\">146 KiB<"));
        assert!(!page.contains(">150000<"), "raw bytes only in tooltips");
        assert!(page.contains("<a href=\"#k-spilly\"><code>spilly</code> (sm_80 80 B)</a>"));
        assert!(
            page.contains("<dt>lowest occupancy</dt><dd><a href=\"#k-tiled-sm_80\">"),
            "{page}"
        );
    }

    #[test]
    fn only_notable_kernels_are_open() {
        let page = html(
            &manifest(),
            &Baseline::NotCompared("test".into()),
            Charts::All,
        )
        .expect("html");
        let open: Vec<&str> = page
            .lines()
            .filter(|l| l.starts_with("<details"))
            .filter(|l| l.contains(" open>"))
            .map(|l| attrs(l, "id")[0])
            .collect();
        assert_eq!(open, ["k-spilly", "k-tiled"]);
        assert_eq!(page.matches("<details").count(), 4);
    }

    #[test]
    fn a_regression_is_highlighted_and_opens_its_kernel() {
        let m = manifest();
        let mut locked = Lock::from_manifest(&m);
        let fat = locked
            .kernels
            .iter_mut()
            .find(|k| k.name == "fat")
            .expect("fat");
        let sm90 = fat.archs.get_mut("sm_90").expect("sm_90");
        sm90.facts.registers = 16;
        let best = sm90.best.as_mut().expect("a best launch");
        best.active_warps_per_sm = 64;
        best.occupancy = 1.0;
        let diff = compare::compare(
            &locked,
            &Lock::from_manifest(&m),
            &compare::Thresholds::default(),
        );
        assert!(diff.has_regressions());
        let page = html(
            &m,
            &Baseline::Compared {
                lock: "occ.lock".into(),
                diff,
            },
            Charts::Notable,
        )
        .expect("html");
        let regressed: Vec<&str> = rows(&page)
            .into_iter()
            .filter(|r| r.contains("regressed"))
            .collect();
        assert_eq!(regressed.len(), 1, "{regressed:?}");
        assert!(regressed[0].contains("k-fat-sm_90"));
        assert!(page.contains("<details class=\"kernel\" id=\"k-fat\" open>"));
        assert!(page.contains("<span class=\"regression\">1 against occ.lock</span>"));
        // Charts only for the notable kernels: fat, spilly, tiled (2 archs × 3 each).
        assert_eq!(page.matches("<svg").count(), 3 * 2 * 3);
    }

    /// 700 kernels × 2 archs, every tenth notable: the default page stays
    /// small; `--charts all` stays within reach.
    #[test]
    fn seven_hundred_kernels_stay_reasonable() {
        let base = manifest();
        let mut m = base.clone();
        m.kernels = (0..700)
            .map(|i| {
                let mut k = base.kernels[if i % 10 == 0 { 3 } else { 1 }].clone();
                k.name = format!("kern_{i:03}");
                k.base_name = format!("ns::kern<{i}>");
                k.ident = format!("kern_{i:03}");
                k
            })
            .collect();
        let none = Baseline::NotCompared("test".into());
        let start = std::time::Instant::now();
        let page = html(&m, &none, Charts::Auto).expect("html");
        let auto_time = start.elapsed();
        // The 140 notable rows first, then all 1400 in a closed `<details>`.
        assert_eq!(rows(&page).len(), 140 + 1400);
        assert!(page.contains("<h3>Notable: 140 of 1400 rows</h3>"));
        assert!(page.contains("<details class=\"rows\" id=\"all-rows\"><summary>"));
        assert_eq!(page.matches(" open>").count(), 70);
        assert_eq!(page.matches("<svg").count(), 70 * 2 * 3);
        let start = std::time::Instant::now();
        let all = html(&m, &none, Charts::All).expect("html");
        let all_time = start.elapsed();
        assert_eq!(all.matches("<svg").count(), 700 * 2 * 3);
        eprintln!(
            "700 kernels × 2 archs: auto {} KB in {auto_time:?}, all {} KB in {all_time:?}",
            page.len() / 1000,
            all.len() / 1000
        );
        assert!(page.len() < 4_000_000, "auto page {} bytes", page.len());
        assert!(all.len() < 40_000_000, "all page {} bytes", all.len());
    }

    /// example-app's lock holds H200 measurements: every report shows
    /// each one (the device, the baked block and the max-occupancy block
    /// with both times), and the HTML draws time against block size beside
    /// the occupancy charts. block_sum baked 32, 1.21x faster than 896.
    #[test]
    fn every_report_shows_each_measured_launch() {
        let text = include_str!("../../../example-app/occ.lock");
        let path = std::path::Path::new("occ.lock");
        let lock = Lock::from_text(text, path).expect("example-app's lock");
        let m = occ_model::assemble::lock_manifest(&lock, &[], path).expect("a manifest");
        let sum = occ_model::render::measured::measured_rows(&m)
            .into_iter()
            .find(|r| r.kernel == "block_sum")
            .expect("block_sum measured");
        assert_eq!((sum.baked, sum.max_occupancy), (32, Some(896)));
        let (baked, model) = (
            occ_model::render::measured::us(sum.baked_us),
            occ_model::render::measured::us(sum.max_occupancy_us),
        );
        let speedup = occ_model::render::measured::times(sum.speedup);
        assert_eq!(speedup, "1.21x");

        let page = html(&m, &Baseline::NotCompared("test".into()), Charts::Auto).expect("html");
        let row = format!(
            "<td>NVIDIA H200 (9.0, 132 SMs)</td><td>32</td><td>{baked}</td><td>896</td><td>{model}</td><td>{speedup}</td>"
        );
        assert!(
            page.contains("<h2 id=\"measured\">Measured on a GPU</h2>"),
            "no section"
        );
        assert!(page.contains(&row), "no block_sum row {row:?}");
        assert!(
            page.contains(&format!("baked block <strong>32</strong> ({baked})"))
                && page.contains(&format!("max-occupancy block 896 ({model}): {speedup}")),
            "block_sum's section says what was measured"
        );
        let charts = page
            .matches("measured on NVIDIA H200 (default): baked")
            .count();
        assert_eq!(
            charts,
            m.measured.len(),
            "one timing chart per measured launch"
        );
        assert!(page.contains("<dt>measured</dt>"));

        let md = occ_model::render::markdown::markdown(&m, &Baseline::NotCompared("test".into()));
        assert!(
            md.contains(&format!("| 32 | {baked} | 896 | {model} | {speedup} |")),
            "{md}"
        );
        let json: serde_json::Value = serde_json::from_str(&crate::render::json(&m)).expect("JSON");
        let measured = json["measured"].as_array().expect("measured rows");
        let j = measured
            .iter()
            .find(|r| r["kernel"] == "block_sum")
            .expect("block_sum in the JSON");
        assert_eq!(
            (j["baked"].as_u64(), j["max_occupancy"].as_u64()),
            (Some(32), Some(896))
        );
        let table = crate::tune::measured_section(&m, None);
        assert!(
            table.contains("block_sum") && table.contains(&speedup),
            "{table}"
        );
    }
}
