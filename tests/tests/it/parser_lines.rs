//! `occ_model::compiler::lines` on real nvdisasm 13.5 output: tests/fixtures/nvdisasm
//! holds `nvdisasm -c -g` and `-c -plr -lrm count` of `spill.cu` for sm_80
//! (with `.sectioninfo` lines) and sm_120 (without), and nvcc's ptxas log of
//! the same build (`regen.sh` makes them). The lines are checked against the
//! `occ-test:` comments of the sources and the bytes against ptxas.

use occ_model::compiler::lines::{source_lines, LifeRanges, LineInfo, SourceLines};
use occ_model::compiler::ptxas::parse_log;
use occ_tests::fixture;
use std::collections::BTreeMap;

/// The folder regen.sh compiles in: the captures name the sources by it.
const ROOT: &str = "/tmp/occ-nvdisasm-fixture";

fn line_of(text: &str, marker: &str) -> u32 {
    let i = text
        .lines()
        .position(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("no `{marker}`"));
    u32::try_from(i + 1).expect("short")
}

fn read(arch: &str) -> BTreeMap<String, SourceLines> {
    let mut info = LineInfo::default();
    for line in fixture(&format!("nvdisasm/spill-13.5-{arch}.g.txt")).lines() {
        info.line(line);
    }
    let mut ranges = LifeRanges::default();
    for line in fixture(&format!("nvdisasm/spill-13.5-{arch}.plr.txt")).lines() {
        ranges.line(line);
    }
    source_lines(&info, &ranges, &[ROOT])
}

#[test]
fn spill_sites_loops_and_peaks_from_real_output() {
    let source = fixture("nvdisasm/spill.cu");
    let header = fixture("nvdisasm/spill.cuh");
    let (loads, loop_line, header_line) = (
        line_of(&source, "occ-test: loads"),
        line_of(&source, "occ-test: loop"),
        line_of(&header, "occ-test: header"),
    );
    for arch in ["sm_80", "sm_120"] {
        let lines = read(arch);
        let log = parse_log(&fixture(&format!("nvdisasm/spill-13.5-{arch}.log")))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            lines.keys().collect::<Vec<_>>(),
            ["calm", "small"],
            "{arch}: the functions"
        );
        for k in &log.kernels {
            let l = &lines[&k.name];
            let stores: u64 = l.spills.iter().map(|s| u64::from(s.stores)).sum();
            let loads: u64 = l.spills.iter().map(|s| u64::from(s.loads)).sum();
            assert_eq!(
                (stores, loads),
                (k.spill_stores, k.spill_loads),
                "{} on {arch}: the sites add up to ptxas's bytes: {l:?}",
                k.name
            );
            let peak = l.peak_pressure.as_ref().expect("a peak");
            assert!(
                peak.registers > 0 && Some(peak.registers) <= k.registers,
                "{} on {arch}: {peak:?} with {:?} registers",
                k.name,
                k.registers
            );
        }
        let small = &lines["small"];
        let worst = small.worst().expect("small spills");
        assert_eq!(
            (worst.file.as_str(), worst.line, worst.loop_line),
            ("spill.cu", loads, Some(loop_line)),
            "{arch}: {small:?}"
        );
        // The inlined header function's spills are the header's, in the
        // loop of spill.cu (a line of another file: no loop line).
        let in_header: Vec<_> = small
            .spills
            .iter()
            .filter(|s| s.file == "spill.cuh")
            .collect();
        assert!(!in_header.is_empty(), "{arch}: {small:?}");
        assert!(
            in_header
                .iter()
                .all(|s| s.line == header_line && s.loop_line.is_none()),
            "{arch}: {in_header:?}"
        );
        // Only the loop's own lines can be in it (ptxas may also place some
        // of their code before the loop: a site of its own, without one).
        let end = line_of(&source, "out[threadIdx.x]");
        for s in small.spills.iter().filter(|s| s.file == "spill.cu") {
            if (loop_line..end).contains(&s.line) {
                assert!(
                    s.loop_line.is_none() || s.loop_line == Some(loop_line),
                    "{arch}: {s:?}"
                );
            } else {
                assert_eq!(s.loop_line, None, "{arch}: {s:?}");
            }
        }
        let calm = &lines["calm"];
        assert!(calm.spills.is_empty(), "{arch}: {calm:?}");
        assert_eq!(
            calm.peak_pressure.as_ref().map(|p| p.file.as_str()),
            Some("spill.cu")
        );
        assert!(
            small
                .describe()
                .starts_with(&format!("at spill.cu:{loads} (loop at :{loop_line}) and ")),
            "{}",
            small.describe()
        );
    }
}
