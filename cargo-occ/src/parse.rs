//! `cargo occ parse LOG [--json]`: the resources of each kernel in a saved
//! `nvcc -Xptxas -v` log.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;

use occ_model::compiler::names;
use occ_model::compiler::ptxas::{self, KernelRecord, Log, Severity};
use serde::Serialize;

/// Arguments of `cargo occ parse`.
#[derive(Debug, Clone, clap::Args)]
pub struct ParseArgs {
    /// The saved stderr of `nvcc -Xptxas -v` (or `ptxas -v`, `nvcc -dlink -Xnvlink -v`);
    /// `-` reads standard input.
    pub log: PathBuf,
    /// Print JSON (`{"kernels": [...]}`) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One kernel for one arch, as printed by `--json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelJson {
    /// Mangled name.
    pub name: String,
    /// Demangled name with its parameters.
    pub demangled: String,
    /// Target as printed (`sm_90a`); null for very old logs.
    pub arch: Option<String>,
    /// Registers per thread; null when the log has no `Used N registers`
    /// line for the kernel (a cut or filtered log), never 0.
    pub registers: Option<u32>,
    /// Named barriers; null before CUDA 12.8.
    pub barriers: Option<u32>,
    /// Static shared memory in bytes.
    pub static_smem: u64,
    /// Stack frame in bytes.
    pub stack_frame: u64,
    /// Spill stores in bytes.
    pub spill_stores: u64,
    /// Spill loads in bytes.
    pub spill_loads: u64,
    /// Constant memory per bank in bytes (empty for sm_90+).
    pub cmem: BTreeMap<String, u64>,
}

/// The `--json` document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParseJson {
    /// One entry per kernel per arch, in log order.
    pub kernels: Vec<KernelJson>,
}

impl From<&KernelRecord> for KernelJson {
    fn from(k: &KernelRecord) -> Self {
        KernelJson {
            name: k.name.clone(),
            demangled: names::demangle(&k.name),
            arch: k.arch.clone(),
            registers: k.registers,
            barriers: k.barriers,
            static_smem: k.static_smem,
            stack_frame: k.stack_frame,
            spill_stores: k.spill_stores,
            spill_loads: k.spill_loads,
            cmem: k.cmem.iter().map(|(b, v)| (b.to_string(), *v)).collect(),
        }
    }
}

/// The most bytes of log `cargo occ parse` reads: a real `-Xptxas -v` log
/// is a few hundred bytes per kernel, so 64 MiB holds about 100,000
/// kernels; anything longer is refused rather than held in memory.
pub const MAX_LOG_BYTES: u64 = 64 << 20;

/// Reads at most [`MAX_LOG_BYTES`] from `input`; the error says why not.
fn read_capped(input: impl Read, name: &str) -> Result<Vec<u8>, String> {
    let mut buf = Vec::new();
    input
        .take(MAX_LOG_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| format!("cannot read the log {name}: {e}; pass the file holding nvcc's stderr, or - for standard input"))?;
    if buf.len() as u64 > MAX_LOG_BYTES {
        return Err(format!(
            "the log {name} is longer than {} MiB, far more than any ptxas log; pass the saved stderr \
             of `nvcc -Xptxas -v` (or split the log and parse each part)",
            MAX_LOG_BYTES >> 20
        ));
    }
    Ok(buf)
}

/// Runs `cargo occ parse`. Returns the exit code: 0 when the log was read, 1 when it
/// could not be (the reason is printed on stderr).
pub fn run(args: ParseArgs) -> anyhow::Result<i32> {
    let shown = args.log.display().to_string();
    let name = if shown == "-" {
        "<stdin>"
    } else {
        shown.as_str()
    };
    let bytes = if shown == "-" {
        read_capped(std::io::stdin().lock(), "on standard input")
    } else {
        std::fs::File::open(&args.log)
            .map_err(|e| format!("cannot read the log {shown}: {e}; pass the file holding nvcc's stderr, or - for standard input"))
            .and_then(|f| read_capped(f, &shown))
    };
    let bytes = match bytes {
        Ok(b) => b,
        Err(reason) => {
            eprintln!("error: {reason}");
            return Ok(1);
        }
    };
    match render(&String::from_utf8_lossy(&bytes), name, args.json) {
        Ok((out, notes)) => {
            for n in notes {
                eprintln!("{n}");
            }
            print!("{out}");
            Ok(0)
        }
        Err(reason) => {
            eprintln!("error: {reason}");
            Ok(1)
        }
    }
}

/// Renders the log as JSON or a table. Returns the output and notes for stderr, or the
/// reason the log cannot be read.
pub fn render(text: &str, name: &str, json: bool) -> Result<(String, Vec<String>), String> {
    let log = ptxas::parse_log(text).map_err(|e| format!("{name}: {e}"))?;
    if log.kernels.is_empty()
        && log.modules.is_empty()
        && log.linked.is_empty()
        && log.diagnostics.is_empty()
    {
        return Err(format!(
            "{name} has no ptxas lines; capture nvcc's stderr with -Xptxas -v, e.g. \
             `nvcc -Xptxas -v -c k.cu 2> ptxas.log`"
        ));
    }
    let notes = notes(&log, name);
    let out = if json {
        let doc = ParseJson {
            kernels: log.kernels.iter().map(KernelJson::from).collect(),
        };
        let mut s =
            serde_json::to_string_pretty(&doc).map_err(|e| format!("cannot write JSON: {e}"))?;
        s.push('\n');
        s
    } else {
        table(&log)
    };
    Ok((out, notes))
}

fn notes(log: &Log, name: &str) -> Vec<String> {
    log.diagnostics
        .iter()
        .filter(|d| d.severity >= Severity::Error)
        .map(|d| {
            format!(
                "note: {name}:{}: the build failed: {} {}",
                d.line, d.tool, d.message
            )
        })
        .collect()
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}

fn table(log: &Log) -> String {
    let head = [
        "kernel",
        "arch",
        "regs",
        "barriers",
        "smem",
        "stack",
        "spill st/ld",
        "cmem",
    ];
    let rows: Vec<[String; 8]> = log
        .kernels
        .iter()
        .map(|k| {
            let cmem = k
                .cmem
                .iter()
                .map(|(b, v)| format!("[{b}]={v}"))
                .collect::<Vec<_>>()
                .join(" ");
            [
                shorten(&names::kernel_name(&k.name).base, 60),
                k.arch.clone().unwrap_or_else(|| "?".into()),
                k.registers.map_or_else(|| "?".into(), |r| r.to_string()),
                k.barriers.map_or_else(|| "-".into(), |b| b.to_string()),
                k.static_smem.to_string(),
                k.stack_frame.to_string(),
                format!("{}/{}", k.spill_stores, k.spill_loads),
                if cmem.is_empty() { "-".into() } else { cmem },
            ]
        })
        .collect();
    let mut width = head.map(|h| h.chars().count());
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[String]| {
        let mut l = String::new();
        for (i, (c, w)) in cells.iter().zip(width).enumerate() {
            let pad = w.saturating_sub(c.chars().count());
            if i == 0 || i == 1 || i == 7 {
                l.push_str(c);
                l.push_str(&" ".repeat(pad));
            } else {
                l.push_str(&" ".repeat(pad));
                l.push_str(c);
            }
            l.push_str("  ");
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&head.map(String::from));
    for r in &rows {
        line(r);
    }
    if log.kernels.is_empty() {
        out.push_str("(no kernels)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_ZN2ns5inner5tkernIdLi128EEEvPT_PKS2_' for 'sm_80'
ptxas info    : Function properties for _ZN2ns5inner5tkernIdLi128EEEvPT_PKS2_
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 12 registers, used 1 barriers, 1024 bytes smem, 368 bytes cmem[0]
ptxas info    : Compiling entry function 'k' for 'sm_52'
ptxas info    : Used 7 registers, 348 bytes cmem[0], 4 bytes cmem[2]
";

    #[test]
    fn json_has_every_field() {
        let (out, notes) = render(LOG, "log", true).unwrap();
        assert!(notes.is_empty());
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let k = &v["kernels"][0];
        assert_eq!(k["name"], "_ZN2ns5inner5tkernIdLi128EEEvPT_PKS2_");
        assert_eq!(
            k["demangled"],
            "ns::inner::tkern<double, 128>(double*, double const*)"
        );
        assert_eq!(k["arch"], "sm_80");
        assert_eq!(k["registers"], 12);
        assert_eq!(k["barriers"], 1);
        assert_eq!(k["static_smem"], 1024);
        assert_eq!(k["stack_frame"], 8);
        assert_eq!(k["spill_stores"], 4);
        assert_eq!(k["spill_loads"], 12);
        assert_eq!(k["cmem"]["0"], 368);
        let k = &v["kernels"][1];
        assert!(k["barriers"].is_null());
        assert_eq!(k["cmem"]["2"], 4);
        assert_eq!(v["kernels"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn table_lists_each_kernel() {
        let (out, _) = render(LOG, "log", false).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[1].starts_with("ns::inner::tkern<double, 128>"));
        assert!(lines[1].contains("4/12"));
        assert!(lines[2].contains("[0]=348 [2]=4"));
    }

    #[test]
    fn a_log_past_the_cap_is_refused_and_one_at_it_is_read() {
        let at_cap = read_capped(std::io::repeat(b'\n').take(MAX_LOG_BYTES), "log");
        assert_eq!(at_cap.map(|b| b.len() as u64), Ok(MAX_LOG_BYTES));
        let endless = read_capped(std::io::repeat(0), "on standard input")
            .expect_err("an endless input was read");
        assert!(
            endless.contains("on standard input") && endless.contains("64 MiB"),
            "{endless}"
        );
    }

    #[test]
    fn unreadable_logs_say_why() {
        let e = render("hello\n", "x.log", true).unwrap_err();
        assert!(e.contains("x.log has no ptxas lines"), "{e}");
        let e = render("ptxas info    : Used x registers\n", "x.log", true).unwrap_err();
        assert!(e.contains("x.log: cannot read ptxas log line 1"), "{e}");
    }

    #[test]
    fn failed_builds_are_noted() {
        let (_, notes) = render(
            "ptxas fatal   : Ptx assembly aborted due to errors\n",
            "x.log",
            true,
        )
        .unwrap();
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("x.log:1"));
    }
}
