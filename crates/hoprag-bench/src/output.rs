//! Terminal output helpers, of the benchmarks' reports and of the CLI's (`eval`, `tune`,
//! `train-router`).

use comfy_table::presets::UTF8_BORDERS_ONLY;
use comfy_table::{CellAlignment, Table};

/// A fraction as a percentage with one decimal, the papers' convention.
pub fn pct(v: f64) -> String {
    format!("{:.1}", v * 100.0)
}

#[must_use = "the table is returned, not printed"]
pub fn table(header: &[String], rows: &[Vec<String>]) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY).set_header(header);
    for row in rows {
        t.add_row(row);
    }
    for (i, col) in t.column_iter_mut().enumerate() {
        if i > 0 {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    t.to_string()
}
