//! The files occ writes and reads back, as types: `manifest.json`
//! (`manifest`, with `SCHEMA_VERSION`: every type it serializes), the
//! committed `occ.lock` (`lock`) and the launches measured on a GPU
//! (`measured`).

pub mod lock;
pub mod manifest;
pub mod measured;
