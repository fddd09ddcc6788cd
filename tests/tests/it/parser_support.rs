//! Shared helpers of the parser tests: fixture paths, the CUDA tool lookup, and a
//! reader for `cuobjdump --dump-resource-usage`, the independent source of truth the
//! parsed ptxas logs are checked against.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[allow(unused_imports)]
pub use occ_tests::fixture;

/// The folder holding nvcc and cuobjdump: that of the nvcc occ-build finds
/// (`occ_tests::nvcc`: `NVCC`, `CUDA_HOME`, ..., `.cuda/` of the workspace,
/// the per-user toolkit of `cargo occ toolkit install`), so that these tests
/// run on whichever toolkit the others do.
pub fn cuda_bin() -> PathBuf {
    occ_tests::nvcc()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// A tool from [`cuda_bin`], with a message saying how to install it when missing.
pub fn cuda_tool(name: &str) -> PathBuf {
    let path = cuda_bin().join(name);
    assert!(
        path.exists(),
        "{} not found beside nvcc; set NVCC or CUDA_HOME, or run `cargo occ toolkit install`",
        path.display()
    );
    path
}

/// One `Function <name>:` block of `cuobjdump --dump-resource-usage`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Res {
    /// From the `arch = sm_XX` line of the fatbin member; `None` for a bare cubin.
    pub arch: Option<String>,
    pub name: String,
    pub reg: u32,
    /// `None` for `STACK:UNKNOWN` (recursion).
    pub stack: Option<u64>,
    pub shared: u64,
    pub local: u64,
    pub constant: BTreeMap<u32, u64>,
}

/// The `Common:` line of one ELF: module global and constant memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Common {
    pub arch: Option<String>,
    pub global: u64,
    pub constant: BTreeMap<u32, u64>,
}

fn fields(line: &str) -> BTreeMap<&str, &str> {
    line.split_whitespace()
        .filter_map(|f| f.split_once(':'))
        .collect()
}

fn banks(f: &BTreeMap<&str, &str>) -> BTreeMap<u32, u64> {
    f.iter()
        .filter_map(|(k, v)| {
            let bank = k.strip_prefix("CONSTANT[")?.strip_suffix(']')?;
            Some((bank.parse().ok()?, v.parse().ok()?))
        })
        .collect()
}

/// Reads the output of `cuobjdump --dump-resource-usage` on a cubin or fatbin.
pub fn parse_res_usage(text: &str) -> (Vec<Common>, Vec<Res>) {
    let mut arch: Option<String> = None;
    let mut commons = Vec::new();
    let mut funcs = Vec::new();
    let mut name: Option<String> = None;
    let mut in_common = false;
    for line in text.lines() {
        let t = line.trim();
        if let Some(a) = t.strip_prefix("arch = ") {
            arch = Some(a.trim().to_string());
        } else if t == "Common:" {
            in_common = true;
        } else if let Some(n) = t.strip_prefix("Function ") {
            name = Some(n.strip_suffix(':').unwrap_or(n).to_string());
        } else if in_common && t.starts_with("GLOBAL:") {
            let f = fields(t);
            commons.push(Common {
                arch: arch.clone(),
                global: f["GLOBAL"].parse().expect("GLOBAL"),
                constant: banks(&f),
            });
            in_common = false;
        } else if t.starts_with("REG:") {
            let f = fields(t);
            let n = name.take().expect("REG line without a Function line");
            funcs.push(Res {
                arch: arch.clone(),
                name: n,
                reg: f["REG"].parse().expect("REG"),
                stack: f["STACK"].parse().ok(),
                shared: f["SHARED"].parse().expect("SHARED"),
                local: f["LOCAL"].parse().expect("LOCAL"),
                constant: banks(&f),
            });
        }
    }
    (commons, funcs)
}

/// The number in `sm_90a` (90).
pub fn sm_number(arch: &str) -> u32 {
    arch.trim_start_matches("sm_")
        .trim_end_matches(|c: char| c.is_ascii_alphabetic())
        .parse()
        .expect("arch number")
}
