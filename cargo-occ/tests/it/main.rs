//! cargo-occ's integration tests: the `cargo-occ` binary run as a process
//! over real builds, one module per command or subject, in one test binary.
//! `cargo test -p cargo-occ --test it <module>::` runs one module.

mod calc;
mod checked_files;
mod ci_formats;
mod cli_robustness;
mod explain;
mod first_page;
mod gate_cli;
mod parse;
mod report_golden;
mod sweep;
mod toolkit;
mod tune;
