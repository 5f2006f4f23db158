//! The report kit every suite builds its reports with: atomic report files, HTML
//! escaping, the page shell, the sample browser, SVG plot frames and provenance.

pub mod browser;
pub mod page;
pub mod plot;
pub mod provenance;

pub use browser::{Browser, BrowserSample, Filters};
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

/// LaTeX's special characters, escaped for text mode (`tables.tex` of either suite).
pub fn latex_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '_' | '&' | '%' | '$' | '#' | '{' | '}' => {
                out.push('\\');
                out.push(ch);
            }
            '~' => out.push_str("\\textasciitilde{}"),
            '^' => out.push_str("\\textasciicircum{}"),
            '\\' => out.push_str("\\textbackslash{}"),
            '\u{2212}' => out.push_str("$-$"),
            '\u{201c}' => out.push_str("``"),
            '\u{201d}' => out.push_str("''"),
            '\u{2026}' => out.push_str("\\ldots{}"),
            _ => out.push(ch),
        }
    }
    out
}

/// Text for Markdown (GitHub's included) from a user-supplied name: every character that
/// could open markup, a link, code, an HTML tag or entity, or a table cell is
/// backslash-escaped (an underscore inside a word, which opens nothing, is kept), and a
/// line break becomes a space, so the name shows as written and stays in its cell.
pub fn markdown_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let chars: Vec<char> = s.chars().collect();
    for (i, &ch) in chars.iter().enumerate() {
        let inside_word = |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric());
        match ch {
            '_' if i > 0 && inside_word(chars.get(i - 1)) && inside_word(chars.get(i + 1)) => {
                out.push(ch)
            }
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '&' | '~' | '#' | '$' => {
                out.push('\\');
                out.push(ch);
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::markdown_text;

    #[test]
    fn markdown_text_escapes_markup_and_keeps_plain_names() {
        assert_eq!(
            markdown_text("Qwen2.5-7B / full_graph †"),
            "Qwen2.5-7B / full_graph †"
        );
        assert_eq!(
            markdown_text("<b>x</b>|**y** [l](u) `c`\n# h _i_ &amp;"),
            "\\<b\\>x\\</b\\>\\|\\*\\*y\\*\\* \\[l\\](u) \\`c\\` \\# h \\_i\\_ \\&amp;"
        );
    }
}
