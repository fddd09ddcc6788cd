//! `cargo occ`: CUDA occupancy reports, regression checks, calculator and
//! ptxas log parser.
//!
//! Each subcommand lives in its own module with `pub fn run(args) ->
//! anyhow::Result<i32>`; the value is the exit code: 0 ok, 1 failure or
//! regression, 2 usage or input error. An `Err` is printed and exits with 1.
//!
//! On Unix a closed stdout (`cargo occ explain k | head`) ends the process
//! by SIGPIPE, quietly, as it ends `cat` ([`quiet_on_closed_pipe`]).

use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::process::ExitCode;

mod bless;
mod calc;
mod check;
mod cudarc;
mod diff;
mod explain;
mod locate;
mod parse;
mod render;
mod report;
mod source;
mod sweep;
mod sweep_run;
mod toolkit;
mod tune;

/// CUDA kernel occupancy as a build-time fact.
#[derive(Debug, Parser)]
#[command(name = "cargo-occ", bin_name = "cargo occ", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Compute occupancy and the best block size for given kernel resources.
    Calc(calc::CalcArgs),
    /// Print the resources of each kernel in a saved `nvcc -Xptxas -v` log.
    Parse(parse::ParseArgs),
    /// Print every kernel's resources and occupancy (table, Markdown, JSON or HTML with charts).
    Report(report::ReportArgs),
    /// Compare the last build with occ.lock (text, or SARIF for code scanning); exit 0 ok, 1 regression, 2 usage or input error.
    Check(check::CheckArgs),
    /// Compare two builds or locks (OLD NEW) as the gate does: table, Markdown or JSON.
    Diff(diff::DiffArgs),
    /// Adopt the last build's numbers as the baseline: write occ.lock (never under CI).
    Bless(bless::BlessArgs),
    /// Show what limits a kernel's occupancy and what would raise it.
    Explain(explain::ExplainArgs),
    /// Reassemble each kernel at every register cap that changes its occupancy.
    Sweep(sweep::SweepArgs),
    /// Install NVIDIA's nvcc for any crate, print the nvcc occ uses, or check the setup.
    Toolkit(toolkit::ToolkitArgs),
    /// The launches worth timing (`--plan`), or merge GPU timings into occ.lock (`import FILE`).
    Tune(tune::TuneArgs),
}

/// The arguments without the `occ` that cargo inserts when it runs
/// `cargo-occ` as `cargo occ`.
fn args() -> Vec<OsString> {
    let mut args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "occ") {
        args.remove(1);
    }
    args
}

/// Restores SIGPIPE's default action, which the Rust runtime sets to
/// "ignore" before `main`: a write to a closed pipe then fails with
/// `EPIPE`, and `println!` panics on it. With the default action the
/// process ends at that write, without a message, as a command-line tool
/// does; every subcommand and every thread at once.
#[cfg(unix)]
fn quiet_on_closed_pipe() {
    // SAFETY: sets a signal's disposition to its default, before any
    // thread is started; no handler runs our code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Windows has no SIGPIPE.
#[cfg(not(unix))]
fn quiet_on_closed_pipe() {}

fn main() -> ExitCode {
    quiet_on_closed_pipe();
    let cli = match Cli::try_parse_from(args()) {
        Ok(cli) => cli,
        // Prints help/version (exit 0) or the usage error (exit 2).
        Err(e) => e.exit(),
    };
    let result = match cli.command {
        Command::Calc(args) => calc::run(args),
        Command::Parse(args) => parse::run(args),
        Command::Report(args) => report::run(args),
        Command::Check(args) => check::run(args),
        Command::Diff(args) => diff::run(args),
        Command::Bless(args) => bless::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Sweep(args) => sweep::run(args),
        Command::Toolkit(args) => toolkit::run(args),
        Command::Tune(args) => tune::run(args),
    };
    match result {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
