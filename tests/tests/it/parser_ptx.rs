//! Live test of the PTX directive parser: the launch bounds and cluster dims read from
//! PTX must be the ones the assembled cubin records (`cuobjdump -elf`, the
//! `.nv.info.<kernel>` EIATTR attributes).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::parser_support::cuda_tool;
use occ_model::compiler::ptx::{parse_entries, target, Linkage, PtxEntry};
use occ_model::compiler::ptxas::parse_log;

fn src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/src")
        .join(name)
}

fn out_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("occ-parser-ptx");
    std::fs::create_dir_all(&d).expect("create the test output folder");
    d
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run a CUDA tool");
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// `.nv.info.<kernel>` sections of `cuobjdump -elf`: attribute name -> value text.
fn eiattrs(elf: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut cur: Option<String> = None;
    let mut attr: Option<String> = None;
    for line in elf.lines() {
        if let Some(k) = line.strip_prefix(".nv.info.") {
            cur = Some(k.trim().to_string());
            out.entry(k.trim().to_string()).or_default();
            continue;
        }
        if line.starts_with('.') {
            cur = None;
            continue;
        }
        let Some(k) = &cur else { continue };
        let t = line.trim();
        if let Some(a) = t.strip_prefix("Attribute:") {
            let a = a.trim().to_string();
            out.entry(k.clone())
                .or_default()
                .insert(a.clone(), String::new());
            attr = Some(a);
        } else if let Some(v) = t.strip_prefix("Value:") {
            if let Some(a) = attr.take() {
                out.entry(k.clone())
                    .or_default()
                    .insert(a, v.trim().to_string());
            }
        }
    }
    out
}

fn hex_dims(v: &str) -> [u32; 3] {
    let n: Vec<u32> = v
        .split_whitespace()
        .map(|x| u32::from_str_radix(x.trim_start_matches("0x"), 16).expect("hex"))
        .collect();
    [n[0], n[1], n[2]]
}

fn hex(v: &str) -> u32 {
    hex_dims(&format!("{v} 0x0 0x0"))[0]
}

/// Checks every entry against its EIATTRs; returns the entries.
fn check(ptx: &str, elf: &str) -> Vec<PtxEntry> {
    let entries = parse_entries(ptx);
    let attrs = eiattrs(elf);
    let names: BTreeSet<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    let infos: BTreeSet<&str> = attrs.keys().map(String::as_str).collect();
    assert_eq!(names, infos, "PTX entries vs .nv.info sections");
    for e in &entries {
        let a = &attrs[&e.name];
        let n = &e.name;
        assert_eq!(
            e.maxntid,
            a.get("EIATTR_MAX_THREADS").map(|v| hex_dims(v)),
            "{n}: maxntid"
        );
        assert_eq!(
            e.reqntid,
            a.get("EIATTR_REQNTID").map(|v| hex_dims(v)),
            "{n}: reqntid"
        );
        assert_eq!(
            e.reqnctapercluster,
            a.get("EIATTR_CTA_PER_CLUSTER").map(|v| hex_dims(v)),
            "{n}: reqnctapercluster"
        );
        assert_eq!(
            e.explicitcluster,
            a.contains_key("EIATTR_EXPLICIT_CLUSTER"),
            "{n}"
        );
        assert_eq!(
            e.maxclusterrank,
            a.get("EIATTR_MAX_CLUSTER_RANK").map(|v| hex(v)),
            "{n}"
        );
        // The register cap ptxas applied: .maxnreg, else 64K registers over
        // threads x .minnctapersm, at most 255.
        let cap = match e.maxnreg {
            Some(r) => r,
            None => match e.maxntid.or(e.reqntid) {
                Some(dims) => {
                    let threads = dims.iter().product::<u32>() * e.minnctapersm.unwrap_or(1);
                    (65536 / threads.max(1)).min(255)
                }
                None => 255,
            },
        };
        assert_eq!(
            a.get("EIATTR_MAXREG_COUNT").map(|v| hex(v)),
            Some(cap),
            "{n}: register cap"
        );
    }
    entries
}

#[test]
fn nvcc_directives_match_the_cubin() {
    let nvcc = cuda_tool("nvcc");
    let cuobjdump = cuda_tool("cuobjdump");
    let dir = out_dir();
    let (ptx_path, cubin) = (dir.join("bounds.ptx"), dir.join("bounds.cubin"));
    run(Command::new(&nvcc)
        .args(["-ptx", "-arch=sm_90", "-o"])
        .arg(&ptx_path)
        .arg(src("bounds.cu")));
    let log = run(Command::new(&nvcc)
        .args(["-cubin", "-arch=sm_90", "-Xptxas", "-v", "-o"])
        .arg(&cubin)
        .arg(src("bounds.cu")));
    let ptx = std::fs::read_to_string(&ptx_path).expect("read PTX");
    let elf = run(Command::new(&cuobjdump).arg("-elf").arg(&cubin));
    let entries = check(&ptx, &elf);
    assert_eq!(target(&ptx), Some("sm_90"));
    assert!(entries.iter().all(|e| e.linkage == Linkage::Visible));
    // The source has one kernel per attribute shape; each shows up.
    let by_name: BTreeMap<&str, &PtxEntry> = entries.iter().map(|e| (e.name.as_str(), e)).collect();
    assert_eq!(by_name["_Z9lb_kernelPf"].minnctapersm, Some(2));
    assert_eq!(by_name["_Z10lb3_kernelPf"].maxclusterrank, Some(4));
    assert_eq!(by_name["_Z14maxnreg_kernelPf"].maxnreg, Some(40));
    assert!(by_name["_Z17cluster_lb_kernelPi"].explicitcluster);
    assert_eq!(by_name["plain"].maxntid, None);
    // The ptxas log of the same source names the same kernels.
    let parsed = parse_log(&log).expect("ptxas log");
    let from_log: BTreeSet<&str> = parsed.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(from_log, by_name.keys().copied().collect());
}

#[test]
fn hand_written_ptx_matches_the_cubin() {
    let ptxas = cuda_tool("ptxas");
    let cuobjdump = cuda_tool("cuobjdump");
    let cubin = out_dir().join("reqntid.cubin");
    run(Command::new(&ptxas)
        .args(["-arch=sm_80", "-o"])
        .arg(&cubin)
        .arg(src("reqntid.ptx")));
    let ptx = std::fs::read_to_string(src("reqntid.ptx")).expect("read PTX");
    let elf = run(Command::new(&cuobjdump).arg("-elf").arg(&cubin));
    let entries = check(&ptx, &elf);
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].linkage, Linkage::Internal);
    assert_eq!(entries[0].reqntid, Some([128, 2, 1]));
    assert_eq!(entries[1].linkage, Linkage::Weak);
    assert_eq!(entries[1].maxntid, Some([64, 1, 1]));
}
