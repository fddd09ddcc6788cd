//! The views, made from what the rest found: text tables and the
//! before/after diff (`text_table`), Markdown (`markdown`), the launches
//! measured on a GPU as every report shows them (`measured`), SARIF and
//! workflow commands (`ci`), the text of `kernels.rs` (`kernels_rs`), and
//! the units every text prints a number in (`units`).

pub mod ci;
pub mod kernels_rs;
#[cfg(test)]
mod linear;
pub mod markdown;
pub mod measured;
pub mod text_table;
pub mod units;
