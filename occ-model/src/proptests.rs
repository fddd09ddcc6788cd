//! Property tests of everything that reads untrusted text (ptxas logs, PTX,
//! manifests) or takes arbitrary numbers (the occupancy model): no panic and
//! no hang on any input, and well-formed input read back exactly. The
//! cargo-fuzz targets in `fuzz/` push the same entry points much further.
//! Regression tests for what fuzzing found are at the end.

use crate::model::occupancy::{occupancy, BlockLaunch, CachePref, KernelResources, PartitionedGc};
use crate::{compiler::ptx, compiler::ptxas, model::arch, model::suggest};
use proptest::prelude::*;

/// Fragments of real ptxas and PTX text, so random input reaches deep states.
const LOG_BITS: &[&str] = &[
    "ptxas info    : ",
    "ptxas warning : ",
    "ptxas error   : ",
    "ptxas fatal   : ",
    "Compiling entry function '",
    "' for 'sm_80'",
    "Function properties for ",
    "    ",
    " bytes stack frame, ",
    " bytes spill stores, ",
    " bytes spill loads",
    "Used ",
    " registers, ",
    "used ",
    " barriers, ",
    " bytes smem, ",
    " bytes cmem[0]",
    " bytes gmem",
    " bytes cumulative stack size",
    "nvlink info    : ",
    "Function properties for '",
    "':",
    "uses ",
    " stack, ",
    " bytes lmem",
    "_Z5saxpyPf",
    "saxpy",
    "4294967296",
    "18446744073709551616",
    "0",
    "7",
    ", ",
    "'",
    "\n",
    "\r\n",
    "é",
];

const PTX_BITS: &[&str] = &[
    ".visible ",
    ".weak ",
    ".extern ",
    ".entry ",
    ".func ",
    ".target sm_80",
    ".maxntid ",
    ".reqntid ",
    ".minnctapersm ",
    ".maxnreg ",
    ".maxclusterrank ",
    ".reqnctapercluster ",
    ".explicitcluster",
    ".noreturn",
    "k(",
    ".param .u64 p",
    ")",
    "{",
    "}",
    ";",
    "//",
    "/*",
    "*/",
    "\"",
    "256",
    "4294967296",
    ", ",
    "\n",
    "é",
];

fn from_bits(bits: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(bits), 0..60).prop_map(|v| v.concat())
}

fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![any::<String>(), ".{0,400}"]
}

fn kernel_resources() -> impl Strategy<Value = KernelResources> {
    (
        prop_oneof![0u32..300, any::<u32>()],
        prop_oneof![0u32..300_000, any::<u32>()],
        prop_oneof![0u32..20, any::<u32>()],
        prop::option::of(prop_oneof![0u32..2048, any::<u32>()]),
        prop_oneof![0u32..200, any::<u32>()],
        prop::option::of(prop_oneof![0u32..300_000, any::<u32>()]),
    )
        .prop_map(
            |(registers, static_smem, barriers, max_threads, virtual_resources, max_dyn)| {
                KernelResources {
                    registers,
                    static_smem,
                    barriers,
                    max_threads_per_block: max_threads,
                    virtual_resources,
                    max_dynamic_smem: max_dyn,
                }
            },
        )
}

fn launch() -> impl Strategy<Value = BlockLaunch> {
    (
        prop_oneof![0u32..2048, any::<u32>()],
        prop_oneof![0u32..300_000, any::<u32>()],
        prop::option::of(any::<u8>()),
        prop::sample::select(vec![
            CachePref::None,
            CachePref::Shared,
            CachePref::L1,
            CachePref::Equal,
        ]),
        prop::sample::select(vec![
            PartitionedGc::Off,
            PartitionedGc::On,
            PartitionedGc::OnStrict,
        ]),
    )
        .prop_map(
            |(block_size, dynamic_smem, carveout, cache_pref, partitioned_gc)| BlockLaunch {
                block_size,
                dynamic_smem,
                carveout,
                cache_pref,
                partitioned_gc,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn ptxas_log_parser_never_panics(text in prop_oneof![any_text(), from_bits(LOG_BITS)]) {
        if let Ok(log) = ptxas::parse_log(&text) {
            for k in &log.kernels {
                let _ = k.stack_size();
                let _ = crate::compiler::names::kernel_name(&k.name);
                let ident = crate::compiler::names::rust_ident(&k.name);
                prop_assert!(crate::compiler::names::is_rust_ident(&ident), "{ident:?}");
            }
        }
    }

    #[test]
    fn ptxas_log_parser_reads_back_what_ptxas_prints(
        name in "_Z[0-9][a-zA-Z_][a-zA-Z0-9_]{0,30}",
        arch in prop::sample::select(vec!["sm_75", "sm_80", "sm_90a", "sm_120"]),
        registers in 0u32..256,
        barriers in 0u32..17,
        smem in 0u64..300_000,
        stack in 0u64..100_000,
        stores in 0u64..100_000,
        loads in 0u64..100_000,
        crlf in any::<bool>(),
    ) {
        let smem_part = if smem > 0 { format!(", {smem} bytes smem") } else { String::new() };
        let text = format!(
            "ptxas info    : 0 bytes gmem\n\
             ptxas info    : Compiling entry function '{name}' for '{arch}'\n\
             ptxas info    : Function properties for {name}\n    \
             {stack} bytes stack frame, {stores} bytes spill stores, {loads} bytes spill loads\n\
             ptxas info    : Used {registers} registers, used {barriers} barriers{smem_part}\n"
        );
        let text = if crlf { text.replace('\n', "\r\n") } else { text };
        let log = ptxas::parse_log(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(log.kernels.len(), 1);
        let k = &log.kernels[0];
        prop_assert_eq!(&k.name, &name);
        prop_assert_eq!(k.arch.as_deref(), Some(arch));
        prop_assert_eq!(k.registers, Some(registers));
        prop_assert_eq!(k.barriers, Some(barriers));
        prop_assert_eq!(k.static_smem, smem);
        prop_assert_eq!(k.stack_frame, stack);
        prop_assert_eq!((k.spill_stores, k.spill_loads), (stores, loads));
    }

    #[test]
    fn ptx_parser_never_panics(text in prop_oneof![any_text(), from_bits(PTX_BITS)]) {
        let _ = ptx::target(&text);
        for entry in ptx::parse_entries(&text) {
            prop_assert!(text.contains(entry.name.as_str()));
        }
    }

    #[test]
    fn ptx_parser_reads_back_launch_bounds(
        name in "[a-zA-Z_][a-zA-Z0-9_$]{0,30}",
        maxntid in prop::option::of((1u32..1025, 1u32..65, 1u32..65)),
        minblocks in prop::option::of(1u32..33),
        maxnreg in prop::option::of(1u32..256),
    ) {
        let mut text = format!(".version 8.8\n.target sm_90\n.address_size 64\n\n.visible .entry {name}(\n\t.param .u64 p\n)\n");
        if let Some((x, y, z)) = maxntid {
            text.push_str(&format!(".maxntid {x}, {y}, {z}\n"));
        }
        if let Some(n) = minblocks {
            text.push_str(&format!(".minnctapersm {n}\n"));
        }
        if let Some(n) = maxnreg {
            text.push_str(&format!(".maxnreg {n}\n"));
        }
        text.push_str("{\n\tret;\n}\n");
        let entries = ptx::parse_entries(&text);
        prop_assert_eq!(entries.len(), 1);
        let e = &entries[0];
        prop_assert_eq!(&e.name, &name);
        prop_assert_eq!(e.maxntid, maxntid.map(|(x, y, z)| [x, y, z]));
        prop_assert_eq!(e.minnctapersm, minblocks);
        prop_assert_eq!(e.maxnreg, maxnreg);
        prop_assert_eq!(ptx::target(&text), Some("sm_90"));
    }

    #[test]
    fn occupancy_model_never_panics_and_stays_in_bounds(
        a in any::<prop::sample::Index>(),
        kernel in kernel_resources(),
        launch in launch(),
        blocks in prop_oneof![0u32..40, any::<u32>()],
        multiple in prop::option::of(prop_oneof![0u32..70, any::<u32>()]),
        cap in prop::option::of(prop_oneof![0u32..2048, any::<u32>()]),
    ) {
        let arch = &arch::all()[a.index(arch::all().len())];
        if let Ok(occ) = occupancy(arch, &kernel, &launch) {
            prop_assert!(occ.active_warps_per_sm <= arch.max_warps_per_sm());
            prop_assert!((0.0..=1.0).contains(&occ.occupancy));
        }
        let _ = suggest::available_dynamic_smem(arch, &kernel, &launch, blocks);
        let _ = suggest::what_if(arch, &kernel, &launch);
        let req = suggest::TuneRequest {
            max_block_size: cap,
            block_multiple: multiple,
            carveout: launch.carveout,
            cache_pref: launch.cache_pref,
            partitioned_gc: launch.partitioned_gc,
            ..suggest::TuneRequest::default()
        };
        if let Ok(Some(best)) = suggest::best_block_size(arch, &kernel, &req) {
            prop_assert!(best.block_size > 0 && best.block_size <= arch.max_threads_per_block);
        }
    }
}

// Regression tests: each input here once panicked or hung.

#[test]
fn what_if_with_a_bogus_register_count_returns_at_once() {
    // Found by reading the search bound while writing the fuzz target: the
    // register search walked every count below `registers`, four billion
    // compute() calls for u32::MAX.
    let sm80 = arch::lookup("sm_80").map_err(|e| e.to_string());
    let Ok(sm80) = sm80 else {
        panic!("sm_80 is known")
    };
    let kernel = KernelResources {
        registers: u32::MAX,
        ..KernelResources::default()
    };
    let hint =
        suggest::what_if(sm80, &kernel, &BlockLaunch::new(128)).map_err(|e| format!("{e:?}"));
    assert_eq!(
        hint.map(|h| h.registers.map(|r| r.max_registers)),
        Ok(Some(sm80.max_regs_per_thread))
    );
}

/// Every name through every writer of this crate (the terminal table, the
/// Markdown report, SARIF, workflow commands): a name holding controls,
/// separators, non-ASCII and every character a format gives a meaning
/// leaves each output as well-formed as a plain name does. occ-build's
/// `proptests` does the same for `kernels.rs`, cargo-occ's `report::html`
/// for the HTML page.
mod names_in_every_writer {
    use crate::compare::tests::{arch, lock};
    use crate::compiler::lines::{SourceLines, SpillSite};
    use crate::compiler::names;
    use crate::render::ci;
    use crate::render::markdown::{markdown, Baseline};
    use crate::render::text_table::table;
    use crate::schema::manifest::{Kernel, KernelArch, Manifest};
    use proptest::prelude::*;
    use std::path::Path;

    /// What a name may hold that some output gives a meaning to.
    const BITS: &[&str] = &[
        "\n",
        "\r",
        "\t",
        "\u{1b}[31m",
        "\u{7f}",
        "\u{85}",
        "\u{2028}",
        "\u{202e}",
        "ü",
        "€",
        "😀",
        "#",
        "%",
        "%0A",
        "|",
        "\\",
        "\\|",
        "<",
        "<b>",
        ">",
        "&",
        "&lt;",
        "`",
        "``",
        "'",
        "\"",
        "[x](y)",
        "*",
        "_",
        "/",
        " ",
        "..",
        "?",
        ":",
        "::",
        ",",
        "=",
        "a",
        "k",
        ".cu",
    ];

    pub(crate) fn hostile_name() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::collection::vec(prop::sample::select(BITS), 1..8).prop_map(|v| v.concat()),
            "\\PC{1,12}",
            any::<String>().prop_filter("not empty", |s| !s.is_empty()),
        ]
    }

    /// One spilling kernel on sm_80 named `name`, from `source`, its spill
    /// at `kernels/<file>`, in package `package`.
    fn manifest(name: &str, source: &str, file: &str, package: &str) -> Manifest {
        let mut m = crate::assemble::lock_manifest(&lock(&[]), &[], Path::new("occ.lock"))
            .expect("a manifest");
        m.package = package.to_string();
        let mut a = KernelArch::from_resources(arch(32, 64, 8));
        a.lines = Some(SourceLines {
            spills: vec![SpillSite {
                file: file.to_string(),
                line: 3,
                loop_line: None,
                stores: 8,
                loads: 8,
            }],
            peak_pressure: None,
        });
        m.kernels = vec![Kernel {
            name: "k".into(),
            demangled: format!("{name}()"),
            base_name: name.to_string(),
            short_name: name.to_string(),
            params: Vec::new(),
            ident: "k".into(),
            source: source.to_string(),
            archs: [("sm_80".to_string(), a)].into_iter().collect(),
        }];
        m
    }

    /// A GFM table row's cells, split as GitHub's reader does: a backslash
    /// takes the character after it, a `|` outside such a pair splits.
    fn cells(row: &str) -> usize {
        let mut n = 0;
        let mut chars = row.trim().trim_start_matches('|').chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                '|' => n += 1,
                _ => {}
            }
        }
        n
    }

    /// `markdown` less its code spans (a backquote run, not after a
    /// backslash, to the next run of the same length), where a `<` is
    /// text, as CommonMark reads them.
    fn outside_code(markdown: &str) -> String {
        let b = markdown.as_bytes();
        let run_at = |i: usize| b[i..].iter().take_while(|c| **c == b'`').count();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'\\' => {
                    out.extend_from_slice(&b[i..(i + 2).min(b.len())]);
                    i += 2;
                }
                b'`' => {
                    let run = run_at(i);
                    let mut j = i + run;
                    let close = loop {
                        if j >= b.len() {
                            break None;
                        }
                        if b[j] == b'`' {
                            let r = run_at(j);
                            if r == run {
                                break Some(j + r);
                            }
                            j += r;
                        } else {
                            j += 1;
                        }
                    };
                    match close {
                        Some(end) => i = end,
                        None => {
                            out.extend_from_slice(&b[i..i + run]);
                            i += run;
                        }
                    }
                }
                c => {
                    out.push(c);
                    i += 1;
                }
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Each line's cell count (0 for a line that is no table row).
    fn shape(markdown: &str) -> Vec<usize> {
        markdown
            .lines()
            .map(|l| if l.starts_with('|') { cells(l) } else { 0 })
            .collect()
    }

    proptest! {
        #[test]
        fn a_name_is_refused_exactly_when_it_holds_a_refused_character(name in hostile_name()) {
            let refused = name.chars().find(|c| names::is_refused(*c));
            match names::check(&name) {
                Ok(()) => prop_assert!(refused.is_none()),
                Err(e) => {
                    prop_assert_eq!(Some(e.refused), refused);
                    let said = e.to_string();
                    prop_assert!(!said.chars().any(names::is_refused), "{said:?}");
                }
            }
            prop_assert!(!names::shown(&name).chars().any(names::is_refused));
        }

        #[test]
        fn every_writer_stays_well_formed(
            name in hostile_name(),
            source in hostile_name(),
            file in hostile_name(),
            package in hostile_name(),
        ) {
            let plain = manifest("k", "k.cu", "k.cu", "p");
            let odd = manifest(&name, &source, &format!("kernels/{file}"), &package);

            // The terminal table: as many lines as with plain names, none
            // wider than its underline.
            let (t0, t1) = (table(&plain), table(&odd));
            prop_assert_eq!(t0.lines().count(), t1.lines().count(), "{}", t1);
            let width = t1.lines().nth(1).map_or(0, |l| l.chars().count());
            prop_assert!(t1.lines().all(|l| l.chars().count() <= width), "{}", t1);

            // Markdown: the same lines, each table row with the header's
            // cells, and no `<` but the report's own.
            let why = Baseline::NotCompared("no occ.lock yet".into());
            let (m0, m1) = (markdown(&plain, &why), markdown(&odd, &why));
            prop_assert_eq!(shape(&m0), shape(&m1), "{}", m1);
            let raw = |m: &str| outside_code(m).matches('<').count();
            prop_assert_eq!(raw(&m0), raw(&m1), "{}", m1);

            // SARIF: valid JSON whose URI is RFC 3986 path text that
            // decodes back to the file.
            let alerts = ci::alerts(&odd, None, false, &|_| None);
            prop_assert!(!alerts.is_empty());
            let log: serde_json::Value = serde_json::from_str(&ci::sarif(&alerts, "0", &|f| f.to_string()))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                .as_str()
                .unwrap_or_default();
            prop_assert!(
                uri.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~/%".contains(&b)),
                "{uri}"
            );
            let decoded = percent_encoding::percent_decode_str(uri).decode_utf8_lossy();
            prop_assert_eq!(decoded, alerts[0].file.as_str());

            // A workflow command: one line, three properties.
            for a in &alerts {
                let command = ci::workflow_command(a, &a.file);
                prop_assert!(!command.contains(['\n', '\r']), "{command:?}");
                let properties = command.split("::").nth(1).unwrap_or_default();
                let properties = properties.split_once(' ').map_or("", |(_, p)| p);
                prop_assert_eq!(properties.split(',').count(), 3, "{}", command);
                prop_assert!(!properties.contains(':'), "{}", command);
            }
        }
    }
}
