//! Live corpus test: compile real-world CUB device algorithms from the toolkit's CCCL
//! headers (tests/corpus/cub_corpus.cu) for five archs with nvcc 13.5, parse the
//! `-Xptxas -v` output with `ptxas::parse_log`, and compare every kernel with
//! `cuobjdump --dump-resource-usage` of the fatbin the same run produced.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use crate::parser_support::{cuda_tool, parse_res_usage, sm_number};
use occ_model::compiler::names;
use occ_model::compiler::ptxas::parse_log;

const ARCHS: [&str; 5] = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_120"];

#[test]
fn cub_corpus_matches_cuobjdump() {
    let nvcc = cuda_tool("nvcc");
    let cuobjdump = cuda_tool("cuobjdump");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/cub_corpus.cu");
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("occ-corpus");
    std::fs::create_dir_all(&out_dir).expect("create the corpus output folder");
    let fatbin = out_dir.join("cub_corpus.fatbin");

    let archs: &[&str] = &ARCHS;
    let mut cmd = Command::new(&nvcc);
    cmd.args(["-fatbin", "--threads", "2", "-Xptxas", "-v", "-o"])
        .arg(&fatbin)
        .arg(&src);
    for arch in archs {
        let n = arch.trim_start_matches("sm_");
        cmd.arg("-gencode")
            .arg(format!("arch=compute_{n},code=sm_{n}"));
    }
    let out = cmd.output().expect("run nvcc");
    let log_text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "nvcc failed:\n{log_text}");
    std::fs::write(out_dir.join("cub_corpus.log"), &log_text).expect("keep the log");

    let log = parse_log(&log_text).unwrap_or_else(|e| panic!("{e}"));
    let res = Command::new(&cuobjdump)
        .arg("--dump-resource-usage")
        .arg(&fatbin)
        .output()
        .expect("run cuobjdump");
    assert!(res.status.success(), "cuobjdump failed");
    let (_, funcs) = parse_res_usage(&String::from_utf8_lossy(&res.stdout));

    let seen: BTreeSet<&str> = log
        .kernels
        .iter()
        .filter_map(|k| k.arch.as_deref())
        .collect();
    assert_eq!(seen, archs.iter().copied().collect::<BTreeSet<&str>>());
    let mut mismatches = Vec::new();
    for k in &log.kernels {
        let arch = k.arch.as_deref().unwrap_or("?");
        let Some(r) = funcs
            .iter()
            .find(|r| r.name == k.name && r.arch.as_deref() == Some(arch))
        else {
            mismatches.push(format!("{} {arch}: not in cuobjdump output", k.name));
            continue;
        };
        if k.registers != Some(r.reg) {
            mismatches.push(format!(
                "{} {arch}: registers {:?} vs REG {}",
                k.name, k.registers, r.reg
            ));
        }
        if Some(k.stack_size()) != r.stack {
            mismatches.push(format!(
                "{} {arch}: stack size {} vs STACK {:?}",
                k.name,
                k.stack_size(),
                r.stack
            ));
        }
        if Some(k.stack_frame) != r.stack {
            mismatches.push(format!(
                "{} {arch}: stack frame {} vs STACK {:?}",
                k.name, k.stack_frame, r.stack
            ));
        }
        let extra = r.shared.checked_sub(k.static_smem);
        let smem_ok = if sm_number(arch) >= 90 {
            extra == Some(0) || extra == Some(1024)
        } else {
            extra == Some(0)
        };
        if !smem_ok {
            mismatches.push(format!(
                "{} {arch}: smem {} vs SHARED {}",
                k.name, k.static_smem, r.shared
            ));
        }
        if sm_number(arch) < 90 && k.cmem.get(&0) != r.constant.get(&0) {
            mismatches.push(format!(
                "{} {arch}: cmem[0] {:?} vs {:?}",
                k.name,
                k.cmem.get(&0),
                r.constant.get(&0)
            ));
        }
    }
    // Every function cuobjdump lists is a kernel or a non-entry function of the parse.
    for r in &funcs {
        let arch = r.arch.as_deref().unwrap_or("?");
        let known = log
            .kernels
            .iter()
            .any(|k| k.name == r.name && k.arch.as_deref() == Some(arch))
            || log.functions.iter().any(|f| f.name == r.name);
        if !known {
            mismatches.push(format!(
                "{} {arch}: in cuobjdump output, not in the parse",
                r.name
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    let distinct: BTreeSet<&str> = log.kernels.iter().map(|k| k.name.as_str()).collect();
    eprintln!(
        "corpus: {} kernel records ({} distinct kernels) over {} archs, {} cuobjdump functions",
        log.kernels.len(),
        distinct.len(),
        archs.len(),
        funcs.len()
    );
    assert!(
        distinct.len() >= 100,
        "only {} distinct kernels ({} records)",
        distinct.len(),
        log.kernels.len()
    );

    // Every CUB kernel demangles, and the set gets unique, valid Rust identifiers.
    for name in &distinct {
        let n = names::kernel_name(name);
        assert_ne!(n.demangled, *name, "{name} does not demangle");
        assert!(n.demangled.starts_with("cub::"), "{}", n.demangled);
        assert!(
            n.base.len() < n.demangled.len() && !n.short.is_empty(),
            "{name}"
        );
        assert!(
            n.short
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{}",
            n.short
        );
    }
    let idents = names::unique_idents(distinct.iter().copied());
    let values: BTreeSet<&String> = idents.values().collect();
    assert_eq!(values.len(), distinct.len(), "identifiers are not unique");
    for id in values {
        let ok = id.len() <= 64
            && id.starts_with(|c: char| c.is_ascii_lowercase())
            && id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        assert!(ok, "not a snake_case identifier: {id}");
    }
    if std::env::var_os("OCC_CORPUS_SHOW").is_some() {
        for (m, id) in &idents {
            eprintln!("{id}  {}", names::kernel_name(m).base);
        }
    }
}
