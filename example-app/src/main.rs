//! example-app: prints the occupancy plan of its kernels; on a GPU, also runs
//! them, checks them against the CPU and compares occ with the driver.
//!
//! Usage: `example-app [--require-gpu]`. Exit status: 0 when the plan was
//! printed and, with a GPU, every check passed; 1 when a check failed or
//! (with `--require-gpu`) no GPU was found; 2 on a usage error.

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut require_gpu = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--require-gpu" => require_gpu = true,
            "-h" | "--help" => {
                println!("usage: example-app [--require-gpu]\n\nPrints the occupancy plan; with a GPU, also runs every kernel and compares occ with the driver.\n--require-gpu  fail (exit 1) when no GPU is found instead of printing only the plan");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("error: unknown argument `{other}`; see --help");
                return ExitCode::from(2);
            }
        }
    }
    match run(require_gpu) {
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
