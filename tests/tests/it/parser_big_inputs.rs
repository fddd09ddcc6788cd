//! Throughput of the parsers on big inputs: a 10k-kernel ptxas log and tens of MB of
//! PTX. The tests check the parse; the throughput is printed, never asserted. Run with
//! `cargo test --release -p occ-tests --test it parser_speed:: -- --nocapture`.

use std::time::Instant;

use crate::parser_support::fixture;
use occ_model::{ptx, ptxas};

/// The 13.5 multi-arch fixture repeated with renamed kernels until it has `n` entries.
fn big_log(n: usize) -> String {
    let base = fixture("ptxas-13.5-threads.log");
    let per = base.matches("Compiling entry function").count();
    let mut out = String::with_capacity(base.len() * (n / per + 1) * 11 / 10);
    let mut i = 0;
    while i * per < n {
        out.push_str(&base.replace("_Z", &format!("_ZN4copy{i}E_Z")));
        i += 1;
    }
    out
}

#[test]
fn ten_thousand_kernel_log() {
    let text = big_log(10_000);
    let start = Instant::now();
    let log = ptxas::parse_log(&text).expect("parses");
    let secs = start.elapsed().as_secs_f64();
    assert!(log.kernels.len() >= 10_000);
    assert_eq!(
        log.kernels.len(),
        text.matches("Compiling entry function").count()
    );
    assert_eq!(log.kernels.iter().filter(|k| k.registers == 0).count(), 0);
    eprintln!(
        "ptxas::parse_log: {} kernels, {:.1} MB in {:.1} ms = {:.0} MB/s",
        log.kernels.len(),
        text.len() as f64 / 1e6,
        secs * 1e3,
        text.len() as f64 / 1e6 / secs
    );
}

#[test]
fn tens_of_megabytes_of_ptx() {
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
    let text = one.repeat((30_000_000 / one.len()).max(1));
    let start = Instant::now();
    let entries = ptx::parse_entries(&text);
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(entries.len(), text.matches(".visible .entry").count());
    assert!(entries
        .iter()
        .all(|e| e.maxntid.is_some() && e.minnctapersm == Some(2)));
    eprintln!(
        "ptx::parse_entries: {} entries, {:.1} MB in {:.1} ms = {:.0} MB/s",
        entries.len(),
        text.len() as f64 / 1e6,
        secs * 1e3,
        text.len() as f64 / 1e6 / secs
    );
}
