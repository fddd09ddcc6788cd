//! The one place that prints cargo directives.
//!
//! Nothing else in occ-build writes to stdout. Directives are collected while
//! the build runs and printed together, sorted and deduplicated, so a build
//! script's output is deterministic.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;

/// Cargo directives collected during a build.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Directives {
    /// Files whose change reruns the build script.
    pub rerun_if_changed: BTreeSet<String>,
    /// Variables whose change reruns the build script.
    pub rerun_if_env_changed: BTreeSet<String>,
    /// Warnings, in the order they were raised.
    pub warnings: Vec<String>,
    /// Link directives (`rustc-link-lib=...`, `rustc-link-search=...`), in
    /// the order the linker needs them, each once.
    pub link: Vec<String>,
}

impl Directives {
    /// Watches a file. A directive is one line, so a path with a line
    /// break (a header `#include`d from a folder so named) is watched by
    /// its nearest folder without one: cargo watches a folder's files
    /// too, so the build reruns at least as often, and no part of the path
    /// reads as a directive of its own.
    pub fn watch(&mut self, path: &Path) {
        let breaks = |p: &Path| p.display().to_string().contains(['\n', '\r']);
        let watched = path.ancestors().find(|p| !breaks(p)).unwrap_or(path);
        self.rerun_if_changed.insert(watched.display().to_string());
    }

    /// Adds a warning (one line per warning; newlines are split).
    pub fn warn(&mut self, message: impl Into<String>) {
        self.warnings.push(message.into());
    }

    /// Adds a link directive (`rustc-link-lib=static=moe`); a repeat is dropped.
    pub fn link(&mut self, directive: impl Into<String>) {
        let directive = directive.into();
        if !self.link.contains(&directive) {
            self.link.push(directive);
        }
    }

    /// The directives as the lines cargo reads.
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

    /// Prints the directives to stdout.
    pub fn print(&self) {
        print_lines(&self.lines());
    }
}

/// Prints an error as `cargo::error=` lines (one per line of the message).
pub fn print_error(message: &str) {
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
