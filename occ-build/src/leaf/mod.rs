//! The leaves: helpers every stage uses, each in a small module that
//! imports no stage (so that imports say who depends on whom, and the
//! modules form no cycle):
//!
//! - `cache`: the job cache (reuse, the commit protocol, `ToolkitId`);
//! - `directives`: `Directives`, the one place that prints cargo directives;
//! - `error`: the error inside the crate and its `ErrorKind`;
//! - `files`: occ-shell's file helpers, failing with occ-build's error;
//! - `job`: what one nvcc job compiles and what it produced;
//! - `nvcc_args`: each job's nvcc arguments, built in one place;
//! - `nvcc_text`: pure readers of what nvcc prints;
//! - `tokens`: a worker pool's jobserver tokens.

pub(crate) mod cache;
pub(crate) mod directives;
pub(crate) mod error;
pub(crate) mod files;
pub(crate) mod job;
pub(crate) mod nvcc_args;
pub(crate) mod nvcc_text;
pub(crate) mod tokens;
