//! The parsers on big inputs: a ptxas log of over 10,000 kernel records and
//! tens of MB of PTX, each made of copies of one text, read as exactly the
//! records of each copy read alone, in order: nothing dropped, merged or
//! carried from one copy into the next at scale. How fast they read is a
//! benchmark's question, never a test's: `occ-model/benches/ptxas.rs`
//! (BENCHMARKS.md, row 3).

use crate::parser_support::fixture;
use occ_model::{compiler::ptx, compiler::ptxas};

/// Copy `i` of a log: its mangled names put in a namespace of their own.
fn log_copy(base: &str, i: usize) -> String {
    base.replace("_Z", &format!("_ZN4copy{i}E_Z"))
}

#[test]
fn a_ten_thousand_kernel_log_reads_as_its_copies_read_alone() {
    let base = fixture("ptxas-13.5-threads.log");
    let per = base.matches("Compiling entry function").count();
    let copies = 10_000usize.div_ceil(per);
    let text: String = (0..copies).map(|i| log_copy(&base, i)).collect();
    let log = ptxas::parse_log(&text).expect("parses");
    assert!(log.kernels.len() >= 10_000);
    assert_eq!(
        log.kernels.len(),
        text.matches("Compiling entry function").count()
    );
    assert_eq!(
        log.kernels
            .iter()
            .filter(|k| k.registers.is_none_or(|r| r == 0))
            .count(),
        0
    );
    // Copy `i` starts `i` copies' lines down: its records' line numbers
    // (and their diagnostics') are the copy's own, moved by that much.
    let lines = base.lines().count();
    assert!(base.ends_with('\n'));
    let mut at = 0;
    for i in 0..copies {
        let mut alone = ptxas::parse_log(&log_copy(&base, i)).expect("a copy parses");
        for k in &mut alone.kernels {
            k.line += i * lines;
            for d in &mut k.diagnostics {
                d.line += i * lines;
            }
        }
        assert_eq!(alone.kernels.len(), per, "copy {i}");
        assert_eq!(
            log.kernels[at..at + per],
            alone.kernels[..],
            "copy {i} reads otherwise in the big log"
        );
        at += per;
    }
    assert_eq!(at, log.kernels.len());
}

#[test]
fn tens_of_megabytes_of_ptx_read_as_their_copies_read_alone() {
    let mut one = String::new();
    for i in 0..200 {
        one.push_str(&format!(
            "// .globl k{i}\n.visible .entry k{i}(\n\t.param .u64 k{i}_param_0\n)\n.maxntid {}, 1, 1\n.minnctapersm 2\n{{\n",
            32 * (i % 32 + 1)
        ));
        for j in 0..200 {
            one.push_str(&format!("\tld.global.f32 \t%f{j}, [%rd{j}+{}];\n\tfma.rn.f32 \t%f{j}, %f{j}, %f{j}, %f{j};\n", j * 4));
        }
        one.push_str("\tret;\n}\n");
    }
    let alone = ptx::parse_entries(&one);
    assert_eq!(alone.len(), 200);
    for (i, e) in alone.iter().enumerate() {
        assert_eq!(e.name, format!("k{i}"));
        assert_eq!(e.maxntid, Some([32 * (i as u32 % 32 + 1), 1, 1]), "k{i}");
        assert_eq!(e.minnctapersm, Some(2), "k{i}");
    }
    let copies = (30_000_000 / one.len()).max(1);
    let text = one.repeat(copies);
    let entries = ptx::parse_entries(&text);
    assert_eq!(entries.len(), text.matches(".visible .entry").count());
    assert_eq!(entries.len(), copies * alone.len());
    for (j, e) in entries.iter().enumerate() {
        assert_eq!(e, &alone[j % alone.len()], "entry {j} of the big text");
    }
}
