//! cargo-occ's integration tests: the `cargo-occ` binary run as a process
//! over real builds, one module per command or subject, in one test binary.
//! `cargo test -p cargo-occ --test it <module>::` runs one module. Every
//! test runs the binary through [`occ`].

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

use std::path::Path;

/// What a `cargo occ` run gave.
#[derive(Debug)]
pub(crate) struct Ran {
    /// The exit code (-1 when a signal ended it).
    pub code: i32,
    /// Its stdout.
    pub out: String,
    /// Its stderr.
    pub err: String,
}

impl Ran {
    /// The exit code, stdout and stderr.
    pub fn parts(self) -> (i32, String, String) {
        (self.code, self.out, self.err)
    }

    /// The exit code, and stdout, a newline and stderr as one text.
    pub fn code_and_text(self) -> (i32, String) {
        (self.code, format!("{}\n{}", self.out, self.err))
    }
}

/// The one way these tests run the binary: `cargo occ ARGS` as cargo runs
/// the subcommand (`cargo-occ occ ARGS`, by `occ_tests::cargo_occ`: no `CI`,
/// no `GITHUB_ACTIONS`) in `dir`, with `env` set (`None`: removed) on top,
/// and `stdin` as its input (closed at once when `None`). It prints the
/// command and what it wrote, which the harness shows for a failing test.
pub(crate) fn occ(
    dir: &Path,
    args: &[&str],
    env: &[(&str, Option<&str>)],
    stdin: Option<&str>,
) -> Ran {
    let mut cmd = occ_tests::cargo_occ(env!("CARGO_BIN_EXE_cargo-occ"), dir, args, &[]);
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let (code, out, err) = occ_tests::code_and_text(&occ_tests::output_with_stdin(&mut cmd, stdin));
    println!("$ cargo occ {} (exit {code})\n{out}{err}", args.join(" "));
    Ran { code, out, err }
}
