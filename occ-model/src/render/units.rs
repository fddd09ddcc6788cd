//! How numbers read in every text occ writes: an occupancy as a percent,
//! a count with its noun. A leaf, so the analyses that word a finding and
//! the views (`table`, `markdown`, `ci`) share one format without the
//! analyses importing a view.

/// Occupancy as a percentage with one decimal, as every report prints it
/// (`?%` for a value that is not a number, which no valid file holds).
pub fn percent(occupancy: f64) -> String {
    if !occupancy.is_finite() {
        return "?%".into();
    }
    format!("{:.1}%", occupancy * 100.0)
}

/// A count and its noun, singular for one: `1 kernel`, `2 kernels` (the
/// noun's plural is its `s` form: `arch`, `kernel`, `line`).
pub fn count(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}
