//! `cargo occ`: CUDA occupancy reports, regression checks, calculator and ptxas log parser.
//!
//! Minimal dispatcher for the `parse` subcommand; the full command set lives in the
//! main branch's main.rs.

use clap::{Parser, Subcommand};

mod bless;
mod check;
mod explain;
mod locate;
mod parse;
mod report;

/// Cargo runs `cargo-occ occ <args>` for `cargo occ <args>`.
#[derive(Debug, Parser)]
#[command(name = "cargo", bin_name = "cargo")]
enum Cargo {
    /// CUDA occupancy as a build-time fact.
    Occ(Occ),
}

#[derive(Debug, clap::Args)]
#[command(version, about)]
struct Occ {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the resources of each kernel in a saved `nvcc -Xptxas -v` log.
    Parse(parse::ParseArgs),
    /// Print every kernel's resources and occupancy (table, Markdown, JSON or HTML with charts).
    Report(report::ReportArgs),
    /// Compare the last build with occ.lock; exit 0 ok, 1 regression, 2 usage or input error.
    Check(check::CheckArgs),
    /// Adopt the last build's numbers as the baseline: write occ.lock (never under CI).
    Bless(bless::BlessArgs),
    /// Show what limits a kernel's occupancy and what would raise it.
    Explain(explain::ExplainArgs),
}

fn main() {
    let Cargo::Occ(occ) = Cargo::parse();
    let code = match occ.command {
        Command::Parse(args) => parse::run(args),
        Command::Report(args) => report::run(args),
        Command::Check(args) => check::run(args),
        Command::Bless(args) => bless::run(args),
        Command::Explain(args) => explain::run(args),
    };
    match code {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
    }
}
