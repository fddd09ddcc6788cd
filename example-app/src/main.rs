//! example-app: prints the occupancy plan of its kernels; on a GPU, also runs
//! them, checks them against the CPU and compares occ with the driver.
//!
//! Usage: `example-app [--require-gpu] [--tune [FILE]]`. Exit status: 0 when
//! the plan was printed and, with a GPU, every check passed; 1 when a check
//! failed, (with `--require-gpu`) no GPU was found, or `--tune` found no GPU
//! or failed; 2 on a usage error.

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: example-app [--require-gpu] [--tune [FILE]]

Prints the occupancy plan; with a GPU, also runs every kernel and compares occ with the driver.
--require-gpu  fail (exit 1) when no GPU is found instead of printing only the plan
--tune [FILE]  on the GPU, time each kernel at the candidate block sizes of its launch site,
               write the results to FILE (default occ-tune.json) for `cargo occ tune import`,
               and print measured against max-occupancy time per kernel";

fn main() -> ExitCode {
    let mut require_gpu = false;
    let mut tune: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1).peekable();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--require-gpu" => require_gpu = true,
            "--tune" => {
                let file = match args.peek() {
                    Some(next) if !next.starts_with("--") => args.next(),
                    _ => None,
                };
                tune = Some(PathBuf::from(file.unwrap_or_else(|| {
                    occ_model::schema::measured::RESULTS_FILE.to_string()
                })));
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("error: unknown argument `{other}`; see --help");
                return ExitCode::from(2);
            }
        }
    }
    let result = match &tune {
        Some(path) => run_tune(path),
        None => run(require_gpu),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(require_gpu: bool) -> anyhow::Result<bool> {
    let manifest = example_app::manifest()?;
    print!("{}", example_app::plan::render(&manifest)?);
    println!();
    match example_app::gpu::open() {
        Err(example_app::gpu::NoGpu(why)) => {
            println!("no GPU: {why}; printed the plan only");
            Ok(!require_gpu)
        }
        Ok(ctx) => {
            let (report, ok) = example_app::gpu::check(&ctx, &manifest)?;
            print!("{report}");
            Ok(ok)
        }
    }
}

fn run_tune(path: &std::path::Path) -> anyhow::Result<bool> {
    let manifest = example_app::manifest()?;
    match example_app::gpu::open() {
        Err(example_app::gpu::NoGpu(why)) => {
            eprintln!("error: --tune times the kernels on a GPU, and there is none: {why}");
            Ok(false)
        }
        Ok(ctx) => {
            print!("{}", example_app::tune::run(&ctx, &manifest, path)?);
            Ok(true)
        }
    }
}
