//! Plain-text tables: the column aligner and the number formats every
//! report shares (the build's gate messages and `cargo occ`).

/// Occupancy as a percentage with one decimal, as every report prints it
/// (`?%` for a value that is not a number, which no valid file holds).
pub fn percent(occupancy: f64) -> String {
    if !occupancy.is_finite() {
        return "?%".into();
    }
    format!("{:.1}%", occupancy * 100.0)
}

/// Aligns rows into columns separated by two spaces (the first row is the
/// header and is underlined); numbers are right-aligned.
pub fn align<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let numeric = |i: usize| {
        rows.iter().skip(1).all(|r| {
            r[i].is_empty() || r[i] == "-" || r[i].trim_end_matches('%').parse::<f64>().is_ok()
        }) && rows.len() > 1
    };
    let mut out = String::new();
    for (n, row) in rows.iter().enumerate() {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let pad = widths[i] - cell.chars().count();
            if n > 0 && numeric(i) {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
        if n == 0 {
            let total = widths.iter().sum::<usize>() + 2 * N.saturating_sub(1);
            out.push_str(&"-".repeat(total));
            out.push('\n');
        }
    }
    out
}
