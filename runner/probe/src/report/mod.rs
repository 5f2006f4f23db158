//! The Probe reports: `report.html` and the facets its sample browser filters by.

pub mod facets;
pub mod html;
