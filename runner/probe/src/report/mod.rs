//! The Probe reports: `report.html` (headline, figures, tables, the sample browser with
//! each item's conversation), `tables.tex`, and the facets the browser filters by.

mod csv;
pub mod facets;
pub mod figures;
pub mod html;
pub mod summary;
pub mod tables;
pub mod tex;
pub mod words;

#[cfg(test)]
mod tests;
