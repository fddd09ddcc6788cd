//! occ's integration tests, one module per subject, in one test binary (one
//! link instead of one per file). `tests/ui.rs` is a binary of its own: it
//! sets process environment variables for trybuild's builds of the macro.
//! `scripts/test` runs every test as a process of its own (cargo-nextest),
//! so no test sees another's state; `cargo test -p occ-tests --test it
//! <module>::` runs one module while working on it.

mod bad_input;
mod baseline;
mod baseline_crate;
mod cache_proof;
mod cache_rules;
mod code_launches;
mod corpus;
mod declared;
mod determinism;
mod differential;
mod embed;
mod gate_scope;
mod golden;
mod hostlib;
mod lineinfo;
mod lines;
mod macro_new_user;
mod memo;
mod new_user;
mod no_nvcc;
mod parser_big_inputs;
mod parser_fixtures;
mod parser_lines;
mod parser_ptx;
mod parser_support;
mod parts;
mod pipeline;
mod printed_commands;
mod publish;
mod replay;
mod scale;
mod tool_words;
mod tune_results;
mod tuned_site;
