//! Where in the source a kernel spills and where its register pressure
//! peaks, from `nvdisasm -g` (each instruction's file and line): the
//! schema the manifest records per kernel × arch ([`SourceLines`]).

use serde::{Deserialize, Serialize};

/// A kernel's spill sites and its point of peak register pressure on one
/// arch, by source line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceLines {
    /// Each source line with spill stores or loads, in source order.
    pub spills: Vec<SpillSite>,
    /// The line where the most registers are live, when known.
    pub peak_pressure: Option<PressurePoint>,
}

/// A source line with spill stores or loads (local-memory instructions of
/// spill slots).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpillSite {
    /// The file, as nvcc names it (relative to the crate when inside it).
    pub file: String,
    /// The line, 1-based.
    pub line: u32,
    /// The first line of the innermost loop the spills sit in, if any.
    pub loop_line: Option<u32>,
    /// Spill store instructions at this line.
    pub stores: u32,
    /// Spill load (refill) instructions at this line.
    pub loads: u32,
}

/// The source line where register pressure peaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PressurePoint {
    /// The file, as nvcc names it (relative to the crate when inside it).
    pub file: String,
    /// The line, 1-based.
    pub line: u32,
    /// Registers live there.
    pub registers: u32,
}
