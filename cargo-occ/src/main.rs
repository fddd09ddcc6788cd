//! `cargo occ`: CUDA occupancy reports, regression checks, calculator and ptxas log parser.
//!
//! Minimal dispatcher for the `parse` subcommand; the full command set lives in the
//! main branch's main.rs.

use clap::{Parser, Subcommand};

mod parse;
mod sweep;

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
    /// Reassemble each kernel at every register cap that changes its occupancy.
    Sweep(sweep::SweepArgs),
}

fn main() {
    let Cargo::Occ(occ) = Cargo::parse();
    let code = match occ.command {
        Command::Parse(args) => parse::run(args),
        Command::Sweep(args) => sweep::run(args),
    };
    match code {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
    }
}
