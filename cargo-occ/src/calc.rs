//! `cargo occ calc`: the occupancy calculator on the command line.
//!
//! One case from flags (a table, or one JSON line with `--json`), or many
//! from JSON lines with `--batch FILE` (`-` for stdin), answered one JSON line
//! per input line, in order. Blank lines are skipped; an invalid line is
//! answered with `{"error": "..."}` and the rest go on (exit code 2 at the
//! end).

use anyhow::Context as _;
use clap::Args;
use occ_model::model::arch::{self, Arch};
use occ_model::model::occupancy::{occupancy, BlockLaunch, KernelResources, Limiter, Occupancy};
use occ_model::model::suggest::{best_block_size, BestBlock, DynamicSmem, TuneRequest};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};

/// The most registers per thread ptxas allocates (the ISA's limit; the
/// header's "no block launches" threshold is 255 or 256 per arch).
const MAX_REGISTERS: u32 = 255;
/// The most threads per block on every arch.
const MAX_THREADS: u32 = 1024;
/// The most named barriers a block can use (PTX `bar` 0 to 15).
const MAX_BARRIERS: u32 = 16;
/// The most a carveout can be, in percent.
const MAX_CARVEOUT: u8 = 100;

/// Arguments of `cargo occ calc`. Out-of-range numbers are usage errors
/// (exit 2) naming the valid range; the same ranges hold for `--batch` lines.
#[derive(Debug, Args)]
#[command(
    override_usage = "cargo occ calc --arch <ARCH> --regs <N> --threads <N> [OPTIONS]\n       \
                      cargo occ calc --batch <FILE>",
    after_help = "Example: cargo occ calc --arch sm_80 --regs 40 --threads 256 --static-smem 16384"
)]
pub struct CalcArgs {
    /// Target architecture: sm_80, sm_90a, 8.6, 120, ...
    #[arg(long, required_unless_present = "batch")]
    arch: Option<String>,
    /// Registers per thread (0-255).
    #[arg(long, value_name = "N", required_unless_present = "batch",
          value_parser = clap::value_parser!(u32).range(..=i64::from(MAX_REGISTERS)))]
    regs: Option<u32>,
    /// Threads per block (1-1024).
    #[arg(long, value_name = "N", required_unless_present = "batch",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_THREADS)))]
    threads: Option<u32>,
    /// Static shared memory per block, in bytes (up to the arch's opt-in maximum).
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    static_smem: u32,
    /// Dynamic shared memory per block, in bytes (up to the arch's opt-in
    /// maximum less the static).
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    dynamic_smem: u32,
    /// Preferred shared-memory carveout in percent (0-100); default: the
    /// driver's default preference.
    #[arg(long, value_name = "PERCENT",
          value_parser = clap::value_parser!(u8).range(..=i64::from(MAX_CARVEOUT)))]
    carveout: Option<u8>,
    /// Block barriers the kernel uses (0-16).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(..=i64::from(MAX_BARRIERS)))]
    barriers: u32,
    /// `__launch_bounds__` maximum threads per block (1-1024).
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_THREADS)))]
    max_threads: Option<u32>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Read JSON lines from FILE (`-` for stdin) and write one JSON line per
    /// input line.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["arch", "regs", "threads", "static_smem", "dynamic_smem", "carveout", "barriers", "max_threads"]
    )]
    batch: Option<String>,
}

/// One case, as a batch line or from the flags.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    arch: String,
    regs: u32,
    threads: u32,
    #[serde(default)]
    static_smem: u32,
    #[serde(default)]
    dynamic_smem: u32,
    #[serde(default)]
    carveout: Option<u8>,
    #[serde(default = "one")]
    barriers: u32,
    #[serde(default)]
    max_threads: Option<u32>,
}

fn one() -> u32 {
    1
}

/// The answer for one case.
#[derive(Debug, Serialize)]
struct Output {
    arch: &'static str,
    block_size: u32,
    active_blocks_per_sm: u32,
    active_warps_per_sm: u32,
    max_warps_per_sm: u32,
    occupancy: f64,
    limiters: Vec<&'static str>,
    limits: occ_model::model::occupancy::BlockLimits,
    allocated_registers_per_block: u32,
    allocated_smem_per_block: u32,
    best_block_size: u32,
    best_active_blocks_per_sm: u32,
    best_occupancy: f64,
}

/// Runs `cargo occ calc`.
pub fn run(args: CalcArgs) -> anyhow::Result<i32> {
    if let Some(path) = &args.batch {
        return batch(path);
    }
    let input = Input {
        arch: args.arch.unwrap_or_default(),
        regs: args.regs.unwrap_or_default(),
        threads: args.threads.unwrap_or_default(),
        static_smem: args.static_smem,
        dynamic_smem: args.dynamic_smem,
        carveout: args.carveout,
        barriers: args.barriers,
        max_threads: args.max_threads,
    };
    let (arch, occ, best) = match compute(&input) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(2);
        }
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let json = serde_json::to_string(&output(arch, &occ, best.as_ref()))?;
        writeln!(out, "{json}")?;
    } else {
        write_table(&mut out, arch, &occ, best.as_ref())?;
    }
    Ok(0)
}

type Answer = (&'static Arch, Occupancy, Option<BestBlock>);

/// Checks the ranges the flags' parsers check, for `--batch` lines.
fn check_ranges(input: &Input) -> anyhow::Result<()> {
    let check = |name: &str, value: u32, lo: u32, hi: u32| {
        if (lo..=hi).contains(&value) {
            Ok(())
        } else {
            Err(anyhow::anyhow!(
                "{name} {value} is out of range; use {lo} to {hi}"
            ))
        }
    };
    check("regs", input.regs, 0, MAX_REGISTERS)?;
    check("threads", input.threads, 1, MAX_THREADS)?;
    check("barriers", input.barriers, 0, MAX_BARRIERS)?;
    if let Some(c) = input.carveout {
        check("carveout", c.into(), 0, MAX_CARVEOUT.into())?;
    }
    if let Some(m) = input.max_threads {
        check("max_threads", m, 1, MAX_THREADS)?;
    }
    Ok(())
}

fn compute(input: &Input) -> anyhow::Result<Answer> {
    check_ranges(input)?;
    let arch = arch::lookup(&input.arch)?;
    let kernel = KernelResources {
        registers: input.regs,
        static_smem: input.static_smem,
        barriers: input.barriers,
        max_threads_per_block: input.max_threads,
        ..Default::default()
    };
    let launch = BlockLaunch {
        block_size: input.threads,
        dynamic_smem: input.dynamic_smem,
        carveout: input.carveout,
        ..BlockLaunch::new(input.threads)
    };
    let occ = occupancy(arch, &kernel, &launch)?;
    let req = TuneRequest {
        dynamic_smem: DynamicSmem::Fixed(input.dynamic_smem),
        carveout: input.carveout,
        ..Default::default()
    };
    let best = best_block_size(arch, &kernel, &req)?;
    Ok((arch, occ, best))
}

fn output(arch: &'static Arch, occ: &Occupancy, best: Option<&BestBlock>) -> Output {
    Output {
        arch: arch.name,
        block_size: occ.block_size,
        active_blocks_per_sm: occ.active_blocks_per_sm,
        active_warps_per_sm: occ.active_warps_per_sm,
        max_warps_per_sm: occ.max_warps_per_sm,
        occupancy: occ.occupancy,
        limiters: occ.limiters.iter().map(Limiter::as_str).collect(),
        limits: occ.limits,
        allocated_registers_per_block: occ.allocated_registers_per_block,
        allocated_smem_per_block: occ.allocated_smem_per_block,
        best_block_size: best.map_or(0, |b| b.block_size),
        best_active_blocks_per_sm: best.map_or(0, |b| b.active_blocks_per_sm()),
        best_occupancy: best.map_or(0.0, |b| b.occupancy.occupancy),
    }
}

/// `75%`, `16.7%`.
fn percent(x: f64) -> String {
    let p = x * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{}%", p.round())
    } else {
        format!("{p:.1}%")
    }
}

fn limit(v: Option<u32>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

fn write_table(
    out: &mut impl Write,
    arch: &Arch,
    occ: &Occupancy,
    best: Option<&BestBlock>,
) -> std::io::Result<()> {
    let l = &occ.limits;
    writeln!(
        out,
        "arch              {} ({}.{})",
        arch.name, arch.major, arch.minor
    )?;
    writeln!(
        out,
        "block size        {} threads ({} warps)",
        occ.block_size, occ.warps_per_block
    )?;
    writeln!(out, "active blocks     {} per SM", occ.active_blocks_per_sm)?;
    writeln!(
        out,
        "active warps      {} of {} per SM",
        occ.active_warps_per_sm, occ.max_warps_per_sm
    )?;
    writeln!(out, "occupancy         {}", percent(occ.occupancy))?;
    writeln!(out, "limited by        {}", occ.binding_limiters())?;
    writeln!(
        out,
        "block limits      warps {}, registers {}, shared memory {}, blocks {}, barriers {}, virtual resources {}",
        l.warps,
        limit(l.registers),
        limit(l.shared_memory),
        l.blocks,
        limit(l.barriers),
        limit(l.virtual_resources)
    )?;
    writeln!(
        out,
        "per block         {} registers, {} bytes shared memory (allocated)",
        occ.allocated_registers_per_block, occ.allocated_smem_per_block
    )?;
    match best {
        Some(b) => writeln!(
            out,
            "best block size   {} threads: {} blocks, {} warps per SM, {}",
            b.block_size,
            b.active_blocks_per_sm(),
            b.occupancy.active_warps_per_sm,
            percent(b.occupancy.occupancy)
        ),
        None => writeln!(out, "best block size   none: no block size can run"),
    }
}

/// One line of `--batch` input (1-based number `n`, raw bytes): its JSON
/// answer and whether it was valid, or `None` for a blank line. Never fails:
/// a bad line (not UTF-8, not JSON, invalid input) gets `{"error": ...}`.
fn batch_line(n: usize, line: &[u8]) -> Option<(String, bool)> {
    let answer = std::str::from_utf8(line)
        .map_err(|_| anyhow::anyhow!("line {n}: not UTF-8 text"))
        .and_then(|line| {
            if line.trim().is_empty() {
                return Ok(None);
            }
            let input = serde_json::from_str::<Input>(line)
                .map_err(|e| anyhow::anyhow!("line {n}: invalid input: {e}"))?;
            compute(&input)
                .map(Some)
                .map_err(|e| anyhow::anyhow!("line {n}: {e}"))
        });
    match answer {
        Ok(None) => None,
        Ok(Some((arch, occ, best))) => {
            match serde_json::to_string(&output(arch, &occ, best.as_ref())) {
                Ok(json) => Some((json, true)),
                Err(e) => Some((
                    serde_json::json!({ "error": format!("line {n}: {e}") }).to_string(),
                    false,
                )),
            }
        }
        Err(e) => Some((
            serde_json::json!({ "error": e.to_string() }).to_string(),
            false,
        )),
    }
}

fn batch(path: &str) -> anyhow::Result<i32> {
    let reader: Box<dyn BufRead> = if path == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let file = std::fs::File::open(path).with_context(|| {
            format!("cannot read batch file {path}; check the path or use - for stdin")
        })?;
        Box::new(std::io::BufReader::new(file))
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut code = 0;
    for (n, line) in reader.split(b'\n').enumerate() {
        let line = line.with_context(|| format!("cannot read line {} of {path}", n + 1))?;
        if let Some((json, ok)) = batch_line(n + 1, &line) {
            if !ok {
                code = 2;
            }
            writeln!(out, "{json}")?;
        }
    }
    out.flush()?;
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::batch_line;
    use proptest::prelude::*;

    fn answer(line: &str) -> serde_json::Value {
        let (json, _) = batch_line(1, line.as_bytes()).expect("not blank");
        serde_json::from_str(&json).expect("every answer is JSON")
    }

    #[test]
    fn bad_lines_get_an_error_object_and_good_ones_an_answer() {
        assert!(batch_line(1, b"   ").is_none());
        let bad = batch_line(3, b"\xff\xfe{").expect("not blank");
        assert!(!bad.1 && bad.0.contains("line 3: not UTF-8"), "{}", bad.0);
        assert!(answer("{\"arch\": \"sm_80\"}")["error"]
            .as_str()
            .is_some_and(|e| e.contains("invalid input")));
        let good = answer("{\"arch\": \"sm_80\", \"regs\": 32, \"threads\": 256}");
        assert!(good.get("error").is_none(), "{good}");
        assert!(good["active_blocks_per_sm"].as_u64().is_some_and(|b| b > 0));
    }

    proptest! {
        // `--batch` input: any bytes give one JSON object (an answer or an
        // error), never a panic.
        #[test]
        fn any_bytes_give_one_json_object(line in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Some((json, _)) = batch_line(1, &line) {
                let value: serde_json::Value = serde_json::from_str(&json).expect("JSON");
                prop_assert!(value.is_object());
            }
        }

        #[test]
        fn any_numbers_give_an_answer_or_an_error(
            arch in prop::sample::select(vec!["sm_50", "sm_75", "sm_80", "sm_90a", "sm_121", "sm_1"]),
            regs in any::<u32>(), threads in any::<u32>(), smem in any::<u32>(),
            dynamic in any::<u32>(), carveout in any::<i64>(), barriers in any::<u32>(),
            max_threads in any::<u32>(),
        ) {
            let line = format!(
                "{{\"arch\":\"{arch}\",\"regs\":{regs},\"threads\":{threads},\"static_smem\":{smem},\
                 \"dynamic_smem\":{dynamic},\"carveout\":{carveout},\"barriers\":{barriers},\"max_threads\":{max_threads}}}"
            );
            let value = answer(&line);
            prop_assert!(value.get("error").is_some() || value.get("active_blocks_per_sm").is_some(), "{}", value);
        }
    }
}
