//! The one place that prints cargo directives.
//!
//! Nothing else in occ-build writes to stdout. Directives are collected while
//! the build runs and printed together, sorted and deduplicated, so a build
//! script's output is deterministic.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;

/// The cargo directives a build gathered: the files and variables that
/// rerun the build script, its warnings, and a host-code library's link
/// directives. [`Build::compile`](crate::Build::compile) prints them; a
/// build script that calls [`Build::try_compile`](crate::Build::try_compile)
/// prints them itself, from the [`Report`](crate::Report) or, when the
/// build failed, from the [`Error`](crate::Error) (the files and variables
/// read are watched either way, so fixing them reruns the script):
///
/// ```no_run
/// let result = occ_build::Build::new().glob("kernels/*.cu").try_compile();
/// let directives = match &result {
///     Ok(report) => report.directives(),
///     Err(error) => error.directives(),
/// };
/// directives.print();
/// ```
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Directives {
    /// Files whose change reruns the build script.
    pub(crate) rerun_if_changed: BTreeSet<String>,
    /// Variables whose change reruns the build script.
    pub(crate) rerun_if_env_changed: BTreeSet<String>,
    /// Warnings, in the order they were raised.
    pub(crate) warnings: Vec<String>,
    /// Link directives (`rustc-link-lib=...`, `rustc-link-search=...`), in
    /// the order the linker needs them, each once.
    pub(crate) link: Vec<String>,
}

impl Directives {
    /// The files (and folders) whose change reruns the build script: every
    /// source, every header nvcc read, the lock (or the file that stands in
    /// for a missing one), and where nvcc may appear in a build without it.
    pub fn rerun_if_changed(&self) -> &BTreeSet<String> {
        &self.rerun_if_changed
    }

    /// The environment variables whose change reruns the build script:
    /// every variable the build read.
    pub fn rerun_if_env_changed(&self) -> &BTreeSet<String> {
        &self.rerun_if_env_changed
    }

    /// The build's warnings, in the order they were raised (one may span
    /// several lines; each line is printed as a `cargo::warning=`).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Watches a file. A directive is one line, so a path with a line
    /// break (a header `#include`d from a folder so named) is watched by
    /// its nearest folder without one: cargo watches a folder's files
    /// too, so the build reruns at least as often, and no part of the path
    /// reads as a directive of its own.
    pub(crate) fn watch(&mut self, path: &Path) {
        let breaks = |p: &Path| p.display().to_string().contains(['\n', '\r']);
        let watched = path.ancestors().find(|p| !breaks(p)).unwrap_or(path);
        self.rerun_if_changed.insert(watched.display().to_string());
    }

    /// Adds a warning (one line per warning; newlines are split).
    pub(crate) fn warn(&mut self, message: impl Into<String>) {
        self.warnings.push(message.into());
    }

    /// Adds a link directive (`rustc-link-lib=static=moe`); a repeat is dropped.
    pub(crate) fn link(&mut self, directive: impl Into<String>) {
        let directive = directive.into();
        if !self.link.contains(&directive) {
            self.link.push(directive);
        }
    }

    /// The directives as the lines cargo reads (`cargo::rerun-if-changed=…`,
    /// `cargo::rerun-if-env-changed=…`, `cargo::warning=…`, link
    /// directives), in the order [`Directives::print`] prints them.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for directive in &self.link {
            out.push(format!("cargo::{directive}"));
        }
        for path in &self.rerun_if_changed {
            out.push(format!("cargo::rerun-if-changed={path}"));
        }
        for var in &self.rerun_if_env_changed {
            out.push(format!("cargo::rerun-if-env-changed={var}"));
        }
        for warning in &self.warnings {
            for line in warning.lines() {
                out.push(format!("cargo::warning={line}"));
            }
        }
        out
    }

    /// Prints the directives to stdout, as a build script's output: what
    /// [`Build::compile`](crate::Build::compile) prints before its error,
    /// if any.
    pub fn print(&self) {
        print_lines(&self.lines());
    }
}

/// Prints an error as `cargo::error=` lines (one per line of the message).
pub(crate) fn print_error(message: &str) {
    let lines: Vec<String> = message
        .lines()
        .map(|line| format!("cargo::error={line}"))
        .collect();
    print_lines(&lines);
}

fn print_lines(lines: &[String]) {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for line in lines {
        // A closed stdout leaves nothing to report to; never panic on it.
        let _ = writeln!(out, "{line}");
    }
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_with_a_line_break_is_watched_by_its_folder_and_injects_nothing() {
        let mut d = Directives::default();
        d.watch(Path::new("/c/kernels/a\ncargo::rustc-link-arg=-evil/k.cuh"));
        d.watch(Path::new("/c/kernels/b.cuh"));
        assert_eq!(
            d.lines(),
            [
                "cargo::rerun-if-changed=/c/kernels",
                "cargo::rerun-if-changed=/c/kernels/b.cuh"
            ]
        );
    }
}
