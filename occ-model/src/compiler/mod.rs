//! What the compiler wrote, read: ptxas's log (`ptxas`), PTX entries and
//! their parameters (`ptx`, `params`), nvdisasm's line tables and live
//! ranges (`lines`), symbols and the Rust identifiers made from them
//! (`names`), device code less its line information (`shipped`), and one
//! job's text made its contribution (`analyze`).

pub mod analyze;
pub mod launches;
pub mod lines;
pub mod names;
pub mod params;
pub mod ptx;
pub mod ptxas;
pub mod shipped;
