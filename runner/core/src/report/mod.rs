//! The report kit every suite builds its reports with: atomic report files, HTML
//! escaping, the page shell, the sample browser, SVG plot frames and provenance.

pub mod browser;
pub mod page;
pub mod plot;
pub mod provenance;

pub use browser::{Browser, BrowserSample, Facets};
pub use page::{samples_href, Page};
pub use provenance::Provenance;

use std::path::{Path, PathBuf};

/// Writes `dir/name` atomically: a crash never leaves a half-written report.
pub fn write_atomic(dir: &Path, name: &str, body: &[u8]) -> std::io::Result<PathBuf> {
    let path = dir.join(name);
    crate::fsutil::write_atomic(&path, body)?;
    Ok(path)
}

/// Text for HTML or SVG content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(ch),
        }
    }
    out
}
